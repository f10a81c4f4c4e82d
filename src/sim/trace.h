/* sim/trace.h — reading job traces, node lists and cluster specs for `drover simulate`.
 *
 * Three trace formats (docs/SIMULATE.md):
 *   itp          Microsoft ITP 2021: job_id,submission_time,duration,num_gpu (seconds; unsorted)
 *   alibaba2023  Alibaba 2023 openb_pod_list: name,cpu_milli,memory_mib,num_gpu,gpu_milli,
 *                gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
 *                submit = creation_time, duration = deletion_time - scheduled_time;
 *                pod_phase Pending (never ran) is skipped and counted
 *   csv          drover's own: job_id,submit_time,duration,gpus[,gpu_mem_fraction,priority,user]
 *                (seconds, decimals allowed; header line, blank lines and # comments allowed;
 *                a user column needs the two before it: whole GPUs are 1, no priority 0)
 *
 * Every error names the file and line: "FILE:LINE: what is wrong". The caller owns everything
 * returned and frees it with the matching _free function.
 */
#ifndef DROVER_SIM_TRACE_H
#define DROVER_SIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sim_format {
    SIM_FORMAT_AUTO = -1, /* guess from the header line */
    SIM_FORMAT_ITP,
    SIM_FORMAT_ALIBABA2023,
    SIM_FORMAT_CSV,
};

/* "itp", "alibaba2023", "csv". Returns 0, or -1 with a static reason. */
int sim_format_parse(const char *s, enum sim_format *out, const char **err);

/* GPU type names (node models, gpu_spec entries), interned to small indices so that a job's
 * allowed types are a bitmask. */
#define SIM_MAX_TYPES 64
struct sim_types {
    char *name[SIM_MAX_TYPES];
    int n;
};
/* The index of name, added if new; -1 if the table is full. */
int sim_types_intern(struct sim_types *types, const char *name);
void sim_types_free(struct sim_types *types);

struct sim_job {
    char *id;             /* as written in the trace */
    int64_t submit_ms;    /* trace time, ms (the trace's own epoch) */
    int64_t duration_ms;  /* >= 0 */
    int gpus;             /* >= 0; 0 = CPU-only */
    int gpu_milli;        /* share of each GPU, 1..1000; 1000 = whole GPUs */
    int priority;         /* csv only; 0 otherwise */
    uint64_t gpu_types;   /* allowed GPU types (bits of sim_types); 0 = any */
    int cpu_milli;        /* alibaba2023 only; 0 = not given */
    uint64_t mem_bytes;   /* alibaba2023 only (memory_mib); 0 = not given */
    uint32_t user;        /* index in sim_trace.users; 0 when the trace names no users */
    unsigned line;        /* 1-based line in the file */
};

struct sim_trace {
    enum sim_format format; /* the format read (given, or guessed) */
    struct sim_job *jobs; /* sorted by submit_ms, then line */
    size_t n;
    size_t skipped_pending; /* alibaba2023 rows that never ran */
    size_t skipped_bad;     /* unreadable rows skipped under skip_bad_rows */
    char *first_bad;        /* the first skipped row's message, or NULL */
    char **users;           /* user names, in order of first appearance; NULL when none given */
    size_t nusers;
};

/* Reads path. An unreadable row stops the read (returns -1, *err = "FILE:LINE: reason") unless
 * skip_bad_rows, when it is counted and skipped. Returns 0 or -1; *err is malloc'd. */
int sim_trace_read(const char *path, enum sim_format format, bool skip_bad_rows,
                   struct sim_types *types, struct sim_trace *out, char **err);
void sim_trace_free(struct sim_trace *trace);

/* Gives the jobs synthetic users "user1" .. "userN", replacing any the trace named: user1
 * submits heavy_share of the work (GPU-time: it takes each job, in submit order, while its
 * share so far is below heavy_share), the others are drawn uniformly for the rest.
 * Deterministic for a seed. nusers 1..1000, heavy_share in [0,1] (ignored with one user).
 * Returns 0, or -1 with a static reason. */
int sim_trace_assign_users(struct sim_trace *trace, int nusers, double heavy_share,
                           uint64_t seed, const char **err);

/* A node list such as openb_node_list_gpu_node.csv: sn,cpu_milli,memory_mib,gpu,model. */
struct sim_node {
    char *name;
    int ngpus;            /* 0..64 */
    int cpu_milli;
    uint64_t mem_bytes;
    int type;             /* index in sim_types of model */
};
struct sim_nodes {
    struct sim_node *v;
    int n;
};
/* Returns 0 or -1 with *err = "FILE:LINE: reason" (malloc'd). An empty list is an error. */
int sim_nodes_read(const char *path, struct sim_types *types, struct sim_nodes *out, char **err);
void sim_nodes_free(struct sim_nodes *nodes);

/* "12x8" (12 nodes of 8 GPUs) or "12x8:80G" (and that much memory per GPU; 0 when absent).
 * Returns 0, or -1 with a static reason. */
int sim_cluster_parse(const char *s, int *nodes, int *gpus, uint64_t *gpu_mem, const char **err);

#endif
