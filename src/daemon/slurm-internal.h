/* daemon/slurm-internal.h — what the Slurm backend's two files share: slurm.c (the backend's
 * life, polling, ends, cancels, re-adoption) and slurm-submit.c (batch scripts and sbatch). */
#ifndef DROVER_DAEMON_SLURM_INTERNAL_H
#define DROVER_DAEMON_SLURM_INTERNAL_H

#include "daemon/cmd.h"
#include "daemon/daemon.h"
#include "util/slurm.h"

#define SLURM_CMD_TIMEOUT_MS 30000   /* sbatch, squeue, scontrol, scancel */

struct slurm_backend {
    struct slurm_settings set;
    char **extra;                /* slurm-args, split */
    struct event *timer;
    int64_t interval_ms;         /* the poll's, backing off while Slurm is down */
    bool polling;                /* a squeue is in flight */
    bool with_comments;          /* … asking for each job's comment too */
    bool down;
    char *down_error;            /* what the last failed command said */
    core_time down_since;
    int scontrols;               /* scontrol calls in flight */
    char *home_tag;              /* identifies this daemon's jobs in their comment */
    uint64_t calls[4];           /* commands run: sbatch, squeue, scontrol, scancel */
    uint64_t submissions;        /* numbers each sbatch call (run.submission) */
};

enum { SLURM_CALL_SBATCH, SLURM_CALL_SQUEUE, SLURM_CALL_SCONTROL, SLURM_CALL_SCANCEL };

/* A command in flight and what it is for. */
struct slurm_call {
    struct daemon *d;
    int64_t task;
    int attempt;
    int64_t job;
    int64_t array_task;
    uint64_t submission;
};

/* slurm.c */
struct run *slurm_run(struct daemon *d, int64_t task, int attempt);
/* The run's job as Slurm names it: "123", or "123_4" for an array element. */
void slurm_job_text(const struct run *r, char *buf, size_t len);
/* Whether a failed command could not reach slurmctld (rather than refused what it was asked). */
bool slurm_unreachable(const struct cmd_result *res);
/* The first line a command wrote on stderr, else its status (malloc'd). */
char *slurm_said(const char *cmd, const struct cmd_result *res);
void slurm_set_up(struct daemon *d, bool up, const char *why);
void slurm_schedule_poll(struct daemon *d);
void slurm_scancel(struct daemon *d, struct run *r);
/* Ends of attempts that never ran in Slurm (each frees r): queued again without using a
 * retry; or failed with the outcome given. */
void slurm_not_started(struct daemon *d, struct run *r, const char *why);
void slurm_failed(struct daemon *d, struct run *r, const char *outcome_name,
                  enum core_outcome outcome, const char *why);


#endif
