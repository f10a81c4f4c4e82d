/* sim/sim.h — `drover simulate`: a trace replayed through core/ with a virtual clock.
 *
 * The simulator is a second driver of the very scheduler the daemon runs: it submits each job
 * at its submit time, runs core_schedule() after every batch of events, starts what core/ says
 * where it says, and ends each job exactly `duration` after its start. Nothing here decides what
 * runs where; a policy is a struct core_policy.
 */
#ifndef DROVER_SIM_SIM_H
#define DROVER_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "sim/trace.h"

struct sim_config;
/* The named policies, as configurations of core/:
 *   fifo      strict arrival order (priorities ignored), whole GPUs, head-of-line blocking: a
 *             shell loop, or task-spooler
 *   backfill  EASY backfilling: first fit, no aging, a reservation for the first blocked job
 *   drover    the daemon's default (core_policy_default()): priorities with aging, backfill,
 *             best fit, fair share between the trace's users
 *   las       discretized 2D least-attained-service with preemption (core_policy_las()):
 *             every job preemptible, each preemption costing config->preempt_cost_ms of work
 * fifo and backfill have no fair share (arrival or priority order across users); the caller
 * may set config->policy.fair_share afterwards (`--fair-share on|off`).
 * Sets config->policy, whole_gpus, arrival_order and preemptible. Returns 0, or -1 with a
 * static reason. */
int sim_policy_apply(const char *name, struct sim_config *config, const char **err);

enum sim_limits {
    SIM_LIMITS_NONE,   /* jobs have no time limit: the policy never knows a duration */
    SIM_LIMITS_EXACT,  /* limit = the real duration */
    SIM_LIMITS_FACTOR, /* limit = factor x the real duration (users over-ask) */
};
/* "none", "exact", "x2", "x1.5". Returns 0, or -1 with a static reason. */
int sim_limits_parse(const char *s, enum sim_limits *limits, double *factor, const char **err);

struct sim_config {
    const struct sim_trace *trace;
    const struct core_node *nodes;
    int nnodes;
    const char *const *node_names; /* names for --schedule-out, or NULL: indices */
    struct core_policy policy;
    enum sim_limits limits;
    double limit_factor;
    uint64_t gpu_mem;              /* every GPU's memory: a fraction f of a GPU claims f x this */
    bool whole_gpus;               /* a fractional job takes whole GPUs (no sharing) */
    bool arrival_order;            /* ignore jobs' priorities */
    bool use_types;                /* honour jobs' GPU types (nodes from a list) */
    bool use_host;                 /* account jobs' CPUs and memory (nodes from a list) */
    bool preemptible;              /* jobs are preemptible (las) */
    int64_t preempt_cost_ms;       /* work a preempted job loses (redone when it resumes) */
    FILE *schedule_out;            /* one CSV row per run segment (one per job unless
                                    * preempted), or NULL */
    /* --why JOB: each time the job's wait reason changes (core_why), a line "SECONDS JOB
     * REASON" to why_out; NULL = none. */
    const char *why_job;
    FILE *why_out;
};

/* One user's figures (jobs that could run). */
struct sim_user_result {
    const char *name;              /* the trace's (not copied) */
    size_t jobs;
    double gpu_hours;              /* GPU-time of its jobs (a fraction of a GPU counts so) */
    double jct_avg, wait_avg, wait_max; /* seconds */
};

struct sim_result {
    size_t jobs;                   /* simulated */
    size_t skipped_unfit;          /* could never run on these nodes */
    char *first_unfit;             /* "job ID (line N): reason", malloc'd, or NULL */
    int ngpus;                     /* GPUs in the cluster */
    double makespan;               /* seconds, first submit to last end */
    double jct_avg, jct_p50, jct_p95, jct_p99;
    double wait_avg, wait_p99, wait_max; /* time not running: JCT - duration (start - submit
                                          * without preemption) */
    double utilisation;            /* busy GPU-time / (GPUs x makespan) */
    double avg_running;            /* jobs running at once, averaged over the makespan */
    double contended;              /* seconds during which some job was waiting */
    double avg_running_contended;  /* jobs running at once, averaged over those seconds */
    double bound_makespan;         /* total GPU-time / GPUs */
    double bound_jct;              /* the mean duration */
    uint64_t passes;               /* core_schedule() calls */
    bool preempt_enabled;          /* the policy preempts (las) */
    size_t preemptions;            /* in all */
    double preempt_mean, preempt_p50; /* per job */
    size_t preempt_max;
    double sched_seconds;          /* CPU time spent inside core/ */
    struct sim_user_result *users; /* per user, in the trace's order of users; NULL when the
                                    * trace names none */
    size_t nusers;
};

/* Runs the simulation. Returns 0, or -1 with *err (malloc'd): nothing could run, or a write to
 * schedule_out failed. Frees nothing of config; sim_result_free() frees what the result holds. */
int sim_run(const struct sim_config *config, struct sim_result *result, char **err);
void sim_result_free(struct sim_result *result);

#endif
