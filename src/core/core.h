/* core/ — the scheduler as a deterministic state machine.
 *
 * The daemon and the simulator are two drivers of this one module. It takes events (submit,
 * cancel, attempt exited, …) with the current time passed in, and appends actions (a task's new
 * state, start task T on GPUs [0,3], kill T) to a caller-owned list. It performs no system calls,
 * reads no clock, does no I/O: everything about *what* runs *where* and *when* is decided here.
 *
 * Only live tasks (not in a terminal state) are held in memory. A task whose attempt is still
 * running after it reached a terminal state (a cancel waiting for the process to die) keeps its
 * resources until core_attempt_exited() releases them.
 *
 * Times are milliseconds (any epoch; the daemon uses the Unix epoch, the simulator 0). Core
 * tolerates a clock that steps backwards by treating "now" as max(now, latest now seen).
 */
#ifndef DROVER_CORE_H
#define DROVER_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t core_time;

#define CORE_TIME_NEVER INT64_MAX
#define CORE_MAX_NODE_GPUS 64 /* GPUs on one node */
#define CORE_MAX_SPAN 32      /* nodes one task may span */
#define CORE_MAX_GPU_TYPES 64 /* GPU types a request can name (bits of core_request.gpu_types) */
#define CORE_MAX_BACKOFF 8
/* The backoff of a task whose spec names none (nbackoff 0): 5 s, 30 s, then 60 s for every
 * further retry. The daemon's default-backoff setting starts from this list and gives its
 * tasks the setting's (daemon/config.c), so this is the one place it is written. */
#define CORE_DEFAULT_BACKOFF_MS { 5000, 30000, 60000 }

enum task_state {
    TASK_HELD,
    TASK_PENDING,  /* waiting on dependencies */
    TASK_QUEUED,   /* ready, waiting for resources */
    TASK_RUNNING,
    TASK_RETRYING, /* waiting out a backoff before it is queued again */
    TASK_SUCCEEDED,
    TASK_FAILED,
    TASK_TIMED_OUT,
    TASK_CANCELLED,
    TASK_UPSTREAM_FAILED,
    TASK_NSTATES
};

const char *task_state_name(enum task_state state);
/* Returns the state named s, or -1. */
int task_state_parse(const char *s);
bool task_state_terminal(enum task_state state);

/* ---- the machine(s) ---------------------------------------------------------------------- */

/* The daemon has one node; the simulator may have many. */
struct core_node {
    int ngpus;
    uint64_t gpu_mem[CORE_MAX_NODE_GPUS]; /* bytes per GPU */
    uint8_t gpu_type[CORE_MAX_NODE_GPUS]; /* each GPU's type, numbered by the driver (< 64) */
    /* How close each pair of GPUs is, ngpus x ngpus row-major, smaller = closer (the daemon
     * gives NVML's levels: 0 NVLink, 1 PCIe switch, 2 host bridge, 3 socket, 4 system); NULL =
     * all alike. Copied by core_set_nodes(). A multi-GPU exclusive task gets the closest set. */
    const uint8_t *gpu_link;
    int cpus;                             /* 0 = do not account CPUs */
    uint64_t mem;                         /* host memory bytes; 0 = do not account memory */
};

/* ---- what a task asks for ---------------------------------------------------------------- */

/* A request for at most the largest node's GPUs must fit on one node. A larger one spans whole
 * nodes: every GPU of each (exclusively), and its cpus/mem on each, as Slurm counts --mem. */
struct core_request {
    int gpus;            /* GPUs needed; 0 = CPU-only */
    uint64_t gpu_mem;    /* per-GPU claim in bytes; 0 = the GPUs exclusively */
    int cpus;            /* 0 = unspecified: counts 1 for a CPU-only task, 0 for a GPU task */
    uint64_t mem;        /* host memory bytes; 0 = unspecified (not accounted) */
    int64_t time_limit;  /* ms; 0 = none. Used for backfill; the supervisor enforces it. */
    uint64_t gpu_types;  /* GPU types it may run on (bit t = type t); 0 = any */
};

/* Where a task's attempts run: this machine's GPUs, or a Slurm cluster the daemon hands them to
 * (docs/SLURM.md). A Slurm attempt takes nothing of this machine: its START has no placement
 * (node -1), and only its array's limit and whether Slurm answers hold it back. */
enum core_backend {
    CORE_BACKEND_LOCAL,
    CORE_BACKEND_SLURM,
};

enum dep_kind {
    DEP_AFTER_OK,  /* runs only if the dependency succeeded (--after) */
    DEP_AFTER_ANY, /* runs once the dependency ended, however (--after-any) */
};

struct core_dep {
    int64_t id;
    enum dep_kind kind;
    /* The dependency's state when it is not a live task in core (the driver looked it up:
     * a terminal state), or -1 when it is live in core. */
    int state;
};

struct core_task_spec {
    int64_t id;          /* > 0, unique; chosen by the driver (the store's rowid) */
    int priority;        /* higher runs first */
    core_time submit_time;
    struct core_request req;
    int max_retries;     /* further attempts after a failed one */
    int nbackoff;        /* 0 = CORE_DEFAULT_BACKOFF_MS */
    int64_t backoff[CORE_MAX_BACKOFF]; /* ms; the last value repeats */
    size_t ndeps;
    const struct core_dep *deps; /* copied by core */
    int64_t array_id;    /* tasks of one --array share it; 0 = not an array task */
    int array_limit;     /* at most this many of the array running at once; 0 = no limit */
    bool hold;           /* enter as held */
    int attempts;        /* attempts already made (a retried task continues the numbering) */
    int retry_base;      /* attempts made before the current retry budget began (`drover retry`
                          * starts a fresh budget): retries used = attempts - retry_base - 1 */
    uint32_t user;       /* its owner, an opaque number (the daemon gives the uid); every task
                          * 0 = one user, which is today's behaviour */
    enum core_backend backend; /* core_choose_backend() decided it at submission */
    /* The task saves a checkpoint and exits when asked (CORE_ACT_PREEMPT): a policy that
     * preempts (las) may stop it to make room and run it again later. Never preempted
     * otherwise. */
    bool preemptible;
    /* Service it attained before (GPU-ms of earlier attempts the driver knows of, e.g. after
     * a restart); las orders by it. 0 for a new task. */
    double service;
    /* How long its earlier attempts ran, in all (ms; with service, after a restart): las's
     * guards count the time it has waited as its age less this. 0 for a new task. */
    int64_t run_ms;
    /* Not started before this time (--begin); 0 = no such bound. Until then a queued task
     * waits out of the ready queue (core/when.c), so it costs a pass nothing. */
    core_time begin;
    /* Started only while the off-peak window is open (core_set_off_peak); when preemptible, a
     * running attempt is preempted when the window closes. */
    bool off_peak;
};

/* Where an attempt runs: GPUs on one node, or (nnodes > 1) whole nodes. */
struct core_placement {
    int node;                      /* the node (the first of nodes[] when spanning) */
    int ngpus;                     /* GPUs taken (on every node, when spanning) */
    int gpu[CORE_MAX_NODE_GPUS];   /* GPU indices on that node, ascending (single node only) */
    uint64_t gpu_mem;              /* per-GPU claim in bytes; 0 = exclusive */
    int nnodes;                    /* 0 or 1: one node; > 1: spans nodes[], each taken whole */
    int nodes[CORE_MAX_SPAN];      /* ascending, when nnodes > 1 */
};

/* ---- actions: what the driver must carry out --------------------------------------------- */

enum core_action_type {
    CORE_ACT_STATE, /* the task is now in `state` (commit it); for RETRYING, `at` = retry time */
    CORE_ACT_START, /* start attempt `attempt` on `placement` (the task is now RUNNING) */
    CORE_ACT_KILL,  /* stop the running attempt (cancel); core_attempt_exited() follows */
    CORE_ACT_PREEMPT, /* stop attempt `attempt` of a preemptible task to make room (las): the
                       * driver asks it to checkpoint and exit, then reports
                       * core_attempt_exited(CORE_OUTCOME_PREEMPTED); it holds its resources
                       * until then */
};

/* Why a task reached its state, for `drover show`. reason_task names a related task. */
enum core_reason {
    CORE_REASON_NONE,
    CORE_REASON_SUBMITTED,
    CORE_REASON_DEPS_DONE,        /* pending -> queued */
    CORE_REASON_RELEASED,
    CORE_REASON_HELD,
    CORE_REASON_CANCELLED,
    CORE_REASON_UPSTREAM,         /* reason_task failed (or was cancelled) */
    CORE_REASON_EXIT_CODE,        /* attempt exited non-zero */
    CORE_REASON_SIGNAL,           /* attempt killed by a signal */
    CORE_REASON_TIMEOUT,
    CORE_REASON_EXEC_ERROR,       /* the command could not be executed: never retried */
    CORE_REASON_LOST,             /* the attempt's supervisor vanished */
    CORE_REASON_BACKOFF_DONE,     /* retrying -> queued */
    CORE_REASON_SUCCEEDED,
    CORE_REASON_RETRY,            /* `drover retry` */
    CORE_REASON_OOM,              /* out of GPU memory: queued again with a larger claim */
    CORE_REASON_STALLED,          /* no output and an idle GPU for --stall: killed */
    CORE_REASON_GPU_FAULT,        /* its GPU failed: queued again */
    CORE_REASON_PREEMPTED,        /* preempted to make room (las): queued again */
};

struct core_action {
    enum core_action_type type;
    int64_t task;
    enum task_state state;        /* CORE_ACT_STATE */
    enum core_reason reason;      /* CORE_ACT_STATE */
    int64_t reason_task;          /* CORE_REASON_UPSTREAM */
    core_time at;                 /* CORE_ACT_STATE to RETRYING: when it is queued again;
                                   * CORE_ACT_START: when the task became ready (latency) */
    int attempt;                  /* CORE_ACT_START: 1, 2, … */
    struct core_placement placement; /* CORE_ACT_START (node -1 and no GPUs on Slurm) */
    enum core_backend backend;    /* CORE_ACT_START: where it runs (spill may change it) */
    int64_t array_id;             /* CORE_ACT_START: the task's array, or 0 */
};

struct core_actions {
    struct core_action *v;
    size_t n, cap;
};

void core_actions_clear(struct core_actions *acts); /* n = 0, keeps the buffer */
void core_actions_free(struct core_actions *acts);

/* ---- policy ------------------------------------------------------------------------------ */

/* What one user's tasks may hold; 0 = no limit. */
struct core_limits {
    int gpus;     /* GPUs held by the user's running attempts (a shared GPU counts as one) */
    int running;  /* attempts running */
    int queued;   /* tasks waiting (held, pending, queued, retrying); enforced at submit by
                   * core_check_submit() */
};

struct core_policy {
    /* Waiting this long is worth one priority point (aging; nothing starves). 0 = no aging:
     * strict priority, then first-come first-served. */
    int64_t aging_ms;
    /* Stop at the first ready task that does not fit (head-of-line blocking, task-spooler). */
    bool strict_order;
    /* EASY backfill: a later task may start ahead of the first blocked one only if it cannot
     * delay it (it ends, by its time limit, before the blocked task could start, or it uses
     * only resources the blocked task will not need). Ignored when strict_order is set. */
    bool backfill;
    /* Shared (--gpu-mem) tasks go to the fullest GPU they fit on, and exclusive tasks of several
     * GPUs to the node with the fewest idle GPUs; whole GPUs and nodes stay free. Off: first fit
     * (one-GPU exclusive tasks use first fit either way: core_place_fit() says why). */
    bool best_fit;
    /* At most this many queued tasks are examined per scheduling pass past the first blocked
     * one (bounds the cost of a pass with a huge queue). 0 = no bound. */
    int max_scan;
    /* Fair share between users (core/users.c): among users with ready work, the one whose
     * decayed GPU usage is least goes first; within one user, the order above. With a single
     * user (every task's user 0) it changes nothing. */
    bool fair_share;
    /* The half-life of past usage, ms (Slurm's PriorityDecayHalfLife); 0 = never decays. */
    int64_t fair_share_half_life_ms;
    /* Every user's limits unless core_set_user_limits() gives one others. */
    struct core_limits user_limits;
    /* A Slurm cluster takes tasks (the daemon has shared-dir set), and when a task goes there
     * without asking (docs/SLURM.md, "spill"): never; unfit (a task no node here could ever
     * run: decided at submission); after (a local task queued spill_after_ms without starting
     * goes to Slurm at the next pass — and unfit ones too). */
    bool slurm;
    enum core_spill { CORE_SPILL_NEVER, CORE_SPILL_UNFIT, CORE_SPILL_AFTER } spill;
    int64_t spill_after_ms;
    /* Discretized 2D least-attained-service (core/las.c, docs/SCHEDULING.md): a task's
     * queue is the number of las_threshold[] (GPU-seconds, ascending) its attained service
     * (GPUs x seconds run, across attempts) has reached; the lowest queue first, then
     * priority, then ready time (aging is ignored). A pass skips what does not fit (no
     * head-of-line blocking, no reservation), and a task that does not fit may preempt
     * preemptible tasks of a higher queue that have run las_min_run_ms in their attempt, are
     * not protected and (las_mrl_factor) are expected to have more left than it, the fewest
     * whose release makes it fit. Starvation guards: las_starve_total_ms, las_protect_wait_ms
     * with las_protect_ratio (the defaults), and las_starve_k (the first slice's: a waiting
     * task that ran before is promoted to the first queue once it has waited las_starve_k x
     * its last run, or las_starve_max_ms if that is less; the promoted attempt is protected).
     * core_policy_las() gives the defaults. Off: nothing of this (every other field's
     * behaviour is unchanged). */
    bool las;
    int las_nthresholds;            /* queues = las_nthresholds + 1; at most CORE_LAS_MAX */
#define CORE_LAS_MAX 7
    double las_threshold[CORE_LAS_MAX]; /* GPU-seconds */
    int64_t las_min_run_ms;
    double las_starve_k;
    int64_t las_starve_max_ms;
    /* What a promotion gives: off, the promoted attempt is never preempted; on, the task's
     * attained service counts from the promotion (Tiresias: it is a new task again, preempted
     * like one). */
    bool las_starve_reset;
    /* A task preempted this many times is not preempted again (its later attempts run to
     * their end); 0 = no such bound. */
    int las_max_preempt;
    /* Promote a waiting task once it has waited this long in all since its submission (its
     * time not running, across attempts); 0 = not so. */
    int64_t las_starve_total_ms;
    /* An attempt that starts after its task has waited this long in all since its submission
     * (time not running, across attempts) is protected (see las_protect_ratio); it is not
     * promoted for it, only stops losing its GPUs. 0 = not so. */
    int64_t las_protect_wait_ms;
    /* A promoted attempt is protected only for this long of its run, then preemptible again
     * like any other (before las_protect_ratio); 0 = as las_protect_ratio says. */
    int64_t las_protect_run_ms;
    /* Preempt a running attempt only when its expected remaining service, from the services
     * of the tasks that have succeeded so far (GPU-time; no task's duration is known), is
     * more than las_mrl_factor x the waiter's: a victim about to end is left alone, and where
     * service tells little about what remains (similar jobs), nothing is preempted. 0 = off. */
    double las_mrl_factor;
    /* A protected attempt (promoted, or las_protect_wait_ms) is protected only for this many
     * times its task's total wait at its start, then preemptible again; 0 = its whole run. */
    double las_protect_ratio;
};

/* The daemon's default: aging 60 s per point, backfill, best fit, scan bound 10000, fair share
 * with a 7-day half-life, no user limits. */
struct core_policy core_policy_default(void);

/* ---- the scheduler ----------------------------------------------------------------------- */

struct core;

struct core *core_new(const struct core_policy *policy);
void core_free(struct core *core);

/* Sets the inventory. Must be called before any task is submitted or restored. */
void core_set_nodes(struct core *core, const struct core_node *nodes, int nnodes);

/* Checks a request against the machine, without submitting: 0 if some node could ever run it,
 * else -1 with the reason in why[0..len) (may be NULL), naming what the machine has: "asks for
 * 5 GPUs; the largest node has 4", "asks for 32G of memory; the largest node has 23.5G". A
 * buffer of CORE_WHY_MAX holds any reason. */
#define CORE_WHY_MAX 192
int core_check_request(const struct core *core, const struct core_request *req, char *why,
                       size_t len);

/* Where a new task runs: Slurm when it asks (asked = CORE_BACKEND_SLURM) and the policy has a
 * Slurm cluster; else Slurm when spill = unfit and core_check_request() says no node here could
 * ever run it; else here. Returns -1 (why filled, as core_check_request's) when it cannot run
 * anywhere: Slurm asked for without a cluster, or unfit here and not spilled. */
int core_choose_backend(const struct core *core, const struct core_request *req,
                        enum core_backend asked, enum core_backend *backend, char *why,
                        size_t len);

/* Whether the Slurm cluster answers (the daemon's last command to it): while it does not, no
 * Slurm task is started, and they wait queued. Starts out up. */
void core_set_slurm_up(struct core *core, bool up);

/* A new task. Appends its first state (HELD, PENDING, QUEUED or UPSTREAM_FAILED if a
 * success-dependency already failed). Returns -1 if the id is already live or a live-marked
 * dependency is unknown (a driver bug: nothing is changed). */
int core_submit(struct core *core, const struct core_task_spec *spec, core_time now,
                struct core_actions *out);

/* Restoring after a daemon restart: feed every live task with the state the store holds, then
 * call core_restore_done(), which links dependencies among restored tasks. A RUNNING task's
 * placement is claimed again (its attempt is being re-adopted by the driver). `ready_time` is
 * when it last became queued, `retry_at` when a RETRYING task is due. */
struct core_restore {
    enum task_state state;
    core_time ready_time;
    core_time retry_at;
    core_time started;             /* RUNNING: when the attempt started */
    bool attempt_running;          /* an attempt is still running (RUNNING, or a cancel in flight) */
    struct core_placement placement;
};
int core_restore(struct core *core, const struct core_task_spec *spec,
                 const struct core_restore *state);
void core_restore_done(struct core *core, core_time now, struct core_actions *out);

/* User events. Each returns 0, or -1 with a static reason in *why (nothing changed). */
int core_cancel(struct core *core, int64_t id, core_time now, struct core_actions *out,
                const char **why);
int core_hold(struct core *core, int64_t id, core_time now, struct core_actions *out,
              const char **why);
int core_release(struct core *core, int64_t id, core_time now, struct core_actions *out,
                 const char **why);

/* Gives a task that has not started (held, pending, queued or retrying) a new priority; a
 * queued one keeps its ready time, so the time it has waited still counts for aging. Appends
 * nothing: the state does not change, and the driver records the priority itself. Returns -1
 * with a static reason in *why for a running task or one that is not live (nothing changed).
 * Cost: O(log levels) plus, for a queued task, a walk back from the tail of its new priority's
 * list past the tasks that became ready after it. */
int core_set_priority(struct core *core, int64_t id, int priority, const char **why);

/* Whether a live task may be preempted from now on (the driver turns it off when the task
 * overran its preemption grace too often). A preemption already asked for is not taken back.
 * Appends nothing. Returns -1 if the task is not live. */
int core_set_preemptible(struct core *core, int64_t id, bool preemptible);

/* How an attempt ended. */
enum core_outcome {
    CORE_OUTCOME_SUCCESS,
    CORE_OUTCOME_EXIT_CODE,   /* non-zero exit */
    CORE_OUTCOME_SIGNAL,      /* killed by a signal (not by drover's time limit) */
    CORE_OUTCOME_TIMEOUT,     /* killed by its time limit */
    CORE_OUTCOME_EXEC_ERROR,  /* never executed: not retried */
    CORE_OUTCOME_LOST,        /* the supervisor vanished without a status: counts as a failure */
    CORE_OUTCOME_NOT_STARTED, /* the driver crashed before it spawned it: does not count */
    CORE_OUTCOME_STALLED,     /* no output and an idle GPU for its --stall time: killed; counts
                               * as a failure */
    CORE_OUTCOME_GPU_FAULT,   /* its GPU failed (vanished, XID, ECC): queued again, and the
                               * attempt does not count against its retries */
    CORE_OUTCOME_PREEMPTED,   /* stopped by a CORE_ACT_PREEMPT (or, for a preemptible task,
                               * whenever the driver stopped it to make room): queued again,
                               * no retry used */
};

/* The running attempt of task id ended. Releases its resources; appends the task's next state
 * (SUCCEEDED, RETRYING with `at`, FAILED, TIMED_OUT, or QUEUED for NOT_STARTED) and what that
 * changes for its dependents. A task already cancelled stays cancelled. Returns -1 if the task
 * has no running attempt. */
int core_attempt_exited(struct core *core, int64_t id, enum core_outcome outcome, core_time now,
                        struct core_actions *out);

/* The attempt of task id died of running out of GPU memory. A task that claimed part of a GPU
 * (gpu_mem > 0) is queued again at once claiming new_gpu_mem per GPU (0, or the GPU's size or
 * more: whole GPUs), and the attempt does not count against its retries; a task that already
 * had whole GPUs has failed like any other attempt (retried while its budget lasts). Returns -1
 * if the task has no running attempt. */
int core_attempt_exited_oom(struct core *core, int64_t id, uint64_t new_gpu_mem, core_time now,
                            struct core_actions *out);

/* What the driver sees of a GPU beyond core's own claims: memory in use that no claim covers
 * (other processes, tasks over their claim), whether it is too busy to take another task (the
 * utilisation rule, with the driver's hysteresis), and whether it is out of service (vanished,
 * faulted, drained). Nothing is placed on a busy or offline GPU, nor where claims plus outside
 * use leave less than the claim. Running attempts are not touched. */
struct core_gpu_state {
    uint64_t outside;
    bool busy;
    bool offline;
    int util; /* utilisation, percent, when known (else 0): only for core_why()'s words — a
               * change of it alone is no change (no pass runs for it) */
};
void core_set_gpu_state(struct core *core, int node, int gpu, const struct core_gpu_state *st);

/* The off-peak window (core/when.c): off-peak tasks start only while open_at <= now <
 * close_at. The driver computes it in its own clock (local time, DST: core knows neither) and
 * gives the current window, or the next one when none is open, again at each boundary;
 * CORE_TIME_NEVER for both = no window: off-peak tasks wait (CORE_WAIT_OFF_PEAK, until NEVER).
 * The next pass acts on it: when the window has opened, waiting off-peak tasks join the ready
 * queue; when it has closed, queued ones leave it, and each running attempt of a preemptible
 * off-peak task gets one CORE_ACT_PREEMPT (Slurm attempts excepted: Slurm runs them). Starts
 * with no window. */
void core_set_off_peak(struct core *core, core_time open_at, core_time close_at);

/* Stop (true) or resume (false) starting new attempts. Running ones are not touched. */
void core_set_drain(struct core *core, bool drain);
bool core_draining(const struct core *core);

/* One scheduling pass: queues RETRYING tasks whose backoff is over, lets queued tasks whose
 * begin time came (and off-peak ones when the window opened) into the ready queue — and at the
 * window's close takes off-peak ones out and preempts (core_set_off_peak) — then starts what fits, in
 * policy order, appending CORE_ACT_START actions (with a STATE action for each backoff end).
 * Cost: what changed, not the queue's length (core/sched.c): nothing when nothing that could
 * start a task changed since the last pass; else O(log chains) per task examined, where the
 * tasks of a request shape that does not fit are not examined, at most max_scan examined past
 * the first blocked one, and the pass ends early once no capacity is left. */
void core_schedule(struct core *core, core_time now, struct core_actions *out);

/* What core's passes have cost so far: for tests and benchmarks, never for decisions. */
struct core_stats {
    uint64_t passes;         /* core_schedule() calls */
    uint64_t passes_skipped; /* of which found nothing changed that could start a task */
    uint64_t examined;       /* ready tasks the passes looked at */
    uint64_t fit_checks;     /* placement searches (is there room for this request now?) */
    uint64_t reservations;   /* backfill reservations computed (not reused) */
    uint64_t preemptions;    /* CORE_ACT_PREEMPT appended (las) */
    uint64_t promotions;     /* las starvation promotions */
};
void core_stats(const struct core *core, struct core_stats *out);

/* The earliest time at which core_schedule() would do something that no event triggers
 * (a backoff ending; a begin time; while an off-peak task is live, the window's opening or
 * closing; with las, a promotion, a running task reaching a threshold or its minimum
 * run while a task waits: as of the last pass), or CORE_TIME_NEVER. */
core_time core_next_wakeup(const struct core *core);

/* ---- users: fair share and limits (core/users.c) ------------------------------------------ */

/* Sets user's limits (a copy; NULL = back to policy.user_limits). The driver resolves its own
 * overrides (per user, per group) into one struct per user; it may call this at any time, e.g.
 * before each submission of a user it has not seen. Running attempts are never stopped: a
 * lower limit only holds back further starts. */
void core_set_user_limits(struct core *core, uint32_t user, const struct core_limits *limits);

/* Whether user may add ntasks waiting tasks (its queued limit): 0, or -1 with the reason in
 * why[0..len): "user limit: 100 tasks waiting (user-queued = 100)". Changes nothing: the driver
 * calls it before it stores a submission, for all of the submission's tasks at once. */
int core_check_submit(const struct core *core, uint32_t user, size_t ntasks, char *why,
                      size_t len);

/* Past usage the driver knows of and core does not (after a restart: attempts that ended
 * before it), gpu_seconds charged at time `at` and decayed from there like any other. */
void core_add_usage(struct core *core, uint32_t user, double gpu_seconds, core_time at);

struct core_user_info {
    uint32_t user;
    int running;                   /* attempts running */
    size_t waiting;                /* held, pending, queued or retrying */
    size_t queued;                 /* of which queued (ready) */
    int gpus;                      /* GPUs held */
    double usage;                  /* decayed GPU-seconds, as of `now` */
    double share;                  /* usage / every user's usage (0 when nobody has any) */
    struct core_limits limits;     /* in force */
};
/* Every user core knows (one with a live task, or usage, or limits set), by user number, into
 * v[0..max); returns how many there are (may be more than max). Changes nothing. */
size_t core_users(const struct core *core, core_time now, struct core_user_info *v, size_t max);

/* ---- why a task waits (core/why.c) -------------------------------------------------------- */

/* The first thing that keeps a live task from starting, as a pass would see it now. Computed
 * on demand (a pass that only looks, O(queue) for any number of tasks asked about at once),
 * never stored. */
enum core_wait {
    CORE_WAIT_NONE,        /* not waiting: running, ended, or not live */
    CORE_WAIT_HELD,
    CORE_WAIT_DEPENDENCY,  /* task: the first dependency not yet ended; state: its state */
    CORE_WAIT_BACKOFF,     /* until: when its retry is queued */
    CORE_WAIT_BEGIN,       /* until: its begin time (--begin) */
    CORE_WAIT_OFF_PEAK,    /* until: when the off-peak window opens (NEVER: no window) */
    CORE_WAIT_DRAINED,     /* the daemon is draining: nothing new starts */
    CORE_WAIT_SLURM,       /* a Slurm task, and Slurm is not answering */
    CORE_WAIT_USER_LIMIT,  /* its owner is at a limit (text says which) */
    CORE_WAIT_ARRAY_LIMIT, /* its array's %K are running */
    CORE_WAIT_NO_TYPE,     /* no GPU here is of a type it may run on */
    CORE_WAIT_RESOURCES,   /* what it needs is not free now (text: what is where) */
    CORE_WAIT_RESERVED,    /* it fits, but backfill keeps the room for task (the head) */
    CORE_WAIT_ORDER,       /* strict order: behind task, which does not fit */
    CORE_WAIT_SCAN,        /* past the pass's scan bound (max_scan) */
    CORE_WAIT_NEXT_PASS,   /* nothing: the next pass starts it */
};

#define CORE_WAIT_TEXT 320
struct core_why {
    enum core_wait wait;
    int64_t task;          /* DEPENDENCY, RESERVED, ORDER */
    int state;             /* DEPENDENCY: the dependency's state */
    core_time until;       /* BACKOFF, BEGIN, OFF_PEAK */
    /* One line for people, whole but for the time `until`, which the driver writes in its own
     * clock ("retry backoff"; the daemon adds "until 14:03:05"; "begins", "off-peak: the window
     * opens": the daemon adds "at 22:00:00"; "off-peak: no window is set"): "held", "dependency 12
     * running", "user limit: 4 GPUs in use", "array limit: 2 of 2 running", "needs 2 GPUs with
     * 10G free: GPU0 6G free (claimed by 3, 4), GPU1 busy", "no GPU of its type", "reserved for
     * task 7 (backfill)", "drained", "slurm is not answering". */
    char text[CORE_WAIT_TEXT];
    /* text[0..reason_len) is the reason itself, what follows it a note (las's queue, "; …");
     * the driver's time goes in between. 0: the whole text is the reason. */
    size_t reason_len;
};

/* Fills out[i] for ids[i], i < n, as of now. Changes nothing the scheduler decides by. */
void core_why(struct core *core, const int64_t *ids, size_t n, core_time now,
              struct core_why *out);

/* The reason alone for one queued task, as core_why words it: 0 with it in why[0..len), or -1
 * (not queued, or nothing keeps it waiting). */
int core_task_why(struct core *core, int64_t id, char *why, size_t len);

/* 2^-x for x >= 0, in libc arithmetic only (core links no libm); exposed for the tests. */
double core_decay(double x);

/* ---- queries ----------------------------------------------------------------------------- */

/* The live task's state, or -1 if it is not live in core. */
int core_task_state(const struct core *core, int64_t id);
/* The live task's attempt count so far (0 before the first start), or -1. */
int core_task_attempts(const struct core *core, int64_t id);
/* The live task's attained service in GPU-seconds as of now (attempts ended, plus the running
 * one's time so far), or -1. */
double core_task_service(const struct core *core, int64_t id, core_time now);
/* Its las queue as a pass would see it now (0 = first), or -1 (not live, or las is off). */
int core_task_las_queue(const struct core *core, int64_t id, core_time now);
/* las (las_mrl_factor) learns what finished tasks attained: the driver gives it those that
 * succeeded before it started (GPU-ms each), e.g. from its store after a restart. Nothing when
 * las or the rule is off. */
void core_las_learn(struct core *core, double service);
/* The las defaults, for a driver that turns las on: thresholds, minimum run, starvation. */
void core_policy_las(struct core_policy *policy);
/* Counts of live tasks by state (array of TASK_NSTATES). */
void core_count_states(const struct core *core, size_t counts[TASK_NSTATES]);

struct core_gpu_usage {
    uint64_t mem_total;
    uint64_t mem_claimed;  /* sum of claims; an exclusive task claims mem_total */
    int tasks;             /* running attempts on it */
    bool exclusive;
    struct core_gpu_state state;
};
void core_gpu_usage(const struct core *core, int node, int gpu, struct core_gpu_usage *out);

#endif
