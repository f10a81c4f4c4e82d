/* core/internal.h — the structures core/'s files share. Not part of the public API: drivers
 * use core.h only. */
#ifndef DROVER_CORE_INTERNAL_H
#define DROVER_CORE_INTERNAL_H

#include "core/core.h"
#include "core/map.h"
#include "core/place.h"
#include "core/queue.h"

/* A reverse dependency edge: task `id` depends on the task holding this edge. The serial tells
 * a stale edge (its dependent was freed, and the driver may later reuse the id) from a live one,
 * so a dependent that ends never has to be unlinked from its dependencies' lists. */
struct core_edge {
    int64_t id;
    uint64_t serial;
    enum dep_kind kind;
};

/* A running attempt; only running tasks carry one, which keeps the 100,000 queued tasks small. */
struct core_run {
    struct core_placement placement;
    core_time started;
    bool claimed;                 /* its placement is counted in core->place */
    struct core_task *task;
    struct core_run *prev, *next; /* core->running */
    /* Its place in sched.c's order by end (attempts with a time limit), when end_stamp is
     * core->ends_stamp: kept from one reservation to the next, so only new ones are sorted. */
    uint64_t end_stamp;
    size_t end_rank;
    bool preempting;              /* las asked it to stop (CORE_ACT_PREEMPT); still holds */
    bool protect;                 /* las: started promoted (starvation): never preempted */
    core_time protect_until;      /* las: not preempted before (a bounded protection) */
};

/* A user: what fair share and the limits need (core/users.c). Kept until core_free(), so a
 * user's past usage outlives its tasks; users are few. */
struct core_user {
    uint32_t user;
    double usage;                 /* GPU-ms, decayed to usage_time */
    core_time usage_time;
    int gpus;                     /* held by its running attempts */
    int running;                  /* its running attempts */
    size_t counts[TASK_NSTATES];  /* its live tasks by state */
    struct core_limits limits;
    bool own_limits;              /* set by core_set_user_limits(), not the policy's */
    struct core_queue queue;      /* fair share: its ready tasks (else core->queue holds them) */
    /* A pass's iteration: the user's next task, and its place in core->uheap. */
    struct core_task *peek;
    size_t heap_index;
};

struct core_task {
    int64_t id;
    struct core_user *owner;
    uint64_t serial;
    enum task_state state;
    int priority;
    struct core_request req;
    int max_retries;
    int nbackoff;
    int64_t backoff[CORE_MAX_BACKOFF];
    int64_t array_id;
    int array_limit;
    int attempts;
    int attempts_base;            /* spec.retry_base: attempts made before this retry budget */
    enum core_backend backend;
    /* The key the ready queue orders by (queue.c): the priority, or with las the queue and
     * the priority together (sched.c: core_las_key). */
    int qprio;
    /* las: preemptible, the GPU-ms of attempts ended, how long the last attempt ran, and
     * whether it waits promoted to the first queue (starvation guard). */
    bool preemptible;
    bool promoted;
    bool off_peak;
    bool on_offpeak;
    uint8_t parked;               /* enum core_park (core/when.c) */
    double service;
    double service_base;          /* las_starve_reset: the service at the last promotion */
    int64_t last_run;
    int preempted;                /* times it was preempted (las_max_preempt) */
    core_time submit_time;
    int64_t run_total;            /* ms its attempts ran, in all */

    struct core_dep *deps;        /* as given; restore links them in core_restore_done() */
    size_t ndeps;
    size_t unresolved;            /* dependencies not yet resolved */
    struct core_edge *dependents;
    size_t ndependents, dependents_cap;

    /* TASK_QUEUED: the ready queue: its priority level's list, and its shape's chain there
     * (shape: its id in core->shapes, set when it was queued). */
    bool in_queue;
    core_time ready_time;
    struct core_task *qprev, *qnext;
    struct core_task *sprev, *snext;
    uint32_t shape;
    /* TASK_RETRYING: the retry heap; or QUEUED and parked for its begin time: core->later,
     * retry_at = begin (a task is in one heap at most). */
    core_time retry_at;
    size_t heap_index;
    /* core/when.c: --begin, --off-peak. A QUEUED task is in the ready queue (in_queue) or
     * parked out of it (parked: CORE_PARK_*); a QUEUED off-peak task past its begin time is
     * also on core->offpeak (oprev/onext; on_offpeak). The flags are with las's above. */
    core_time begin;
    struct core_task *oprev, *onext;

    struct core_run *run;         /* non-NULL while an attempt runs */
};

/* Where a QUEUED task that is not in the ready queue waits (core/when.c). */
enum core_park { CORE_PARK_NONE, CORE_PARK_BEGIN, CORE_PARK_WINDOW };

/* One running-count per array (array_id != 0) with at least one attempt running. */
struct core_array {
    int64_t id;
    int running;
};

/* The last backfill reservation (sched.c), reused while its head and every claim are the same. */
struct core_reserve_memo {
    bool valid;
    int64_t head;
    uint64_t head_serial;
    uint64_t place_version;      /* core->place.version when it was computed */
    bool reserved;
    core_time end;               /* the shadow time before it is clamped to now */
    struct core_place_reserve rsv;
};

struct core {
    struct core_policy policy;
    struct core_place place;
    /* Request shapes, shared by every ready queue (queue.h), with what passes learnt of them. */
    struct core_shapes shapes;
    uint32_t pass_stamp;          /* a pass's mark on shapes (sched.c) */
    /* What could start a task: bumped by every change to tasks, users and limits; with
     * shapes.version and place.version it tells a pass that nothing changed since the last
     * one (sched.c: sched_clean). */
    uint64_t version;
    uint64_t clean_version;       /* the sum after the last full pass; 0: none yet */
    core_time clean_now;
    struct core_reserve_memo memo;
    struct core_run **ends;       /* scratch for sched.c's order by end (never dereferenced
                                   * between passes: an attempt may have ended since) */
    size_t nends, ends_cap;
    uint64_t ends_stamp;
    struct core_stats stats;
    core_time las_wakeup;         /* las: the next time a pass would act by the clock alone */
    core_time las_promote_next;   /* las: the earliest starvation promotion due (or later) */
    struct core_las_history *las_history; /* las_mrl_factor: finished tasks' services */
    /* Backfill's "what is free at time T": a copy of place whose node i is current only when
     * scratch_stamp[i] == stamp (copied when first touched, so that a reservation costs what
     * it releases, not the size of the cluster). seen_stamp marks nodes a spanning head's
     * search has counted; rsv_whole marks the nodes a spanning head has reserved. */
    struct core_place scratch;
    uint32_t *scratch_stamp, *seen_stamp, *rsv_whole;
    uint32_t stamp;
    int *cand;                    /* nnodes scratch indices */
    struct core_map tasks;        /* id -> struct core_task * (live tasks) */
    struct core_map arrays;       /* array id -> struct core_array * */
    struct core_queue queue;      /* the ready queue; with fair share, each user's instead */
    struct core_queue slurm_queue; /* ready Slurm tasks (started in a pass of their own) */
    bool slurm_down;              /* core_set_slurm_up(false) */
    int64_t *chain;               /* Slurm tasks being handed over behind each other (backend.c) */
    size_t nchain, chain_cap;
    int chain_depth;
    struct core_spill_entry { int64_t id; uint64_t serial; core_time ready; } *spill;
    size_t spill_head, nspill, spill_cap; /* spill = after: queued local tasks, oldest first */
    struct core_map users;        /* user + 1 -> struct core_user * */
    /* A pass's iteration over users with ready tasks, least usage first; ulast is the user
     * whose task was handed out last (its key may have grown since). */
    struct core_user **uheap;
    size_t uheap_n, uheap_cap;
    struct core_user *ulast;
    struct core_retry retry;
    /* core/when.c: queued tasks waiting for their begin time (by it); the off-peak window
     * [off_open, off_close) and whether the last pass saw it open; the QUEUED off-peak tasks
     * past their begin time; live off-peak tasks (the wakeup needs the window only then);
     * whether a pass must look for running off-peak attempts to preempt. */
    struct core_retry later;
    core_time off_open, off_close;
    bool off_is_open;
    struct core_task *offpeak;
    size_t noffpeak;
    bool off_sweep;
    struct core_run *running;     /* every attempt running, cancelled ones included; the most
                                   * recently started first */
    size_t nrunning;
    struct core_run *slurm_running; /* Slurm attempts (claiming nothing here), unordered */
    size_t counts[TASK_NSTATES];
    core_time now;                /* the latest time seen: a clock stepping back is ignored */
    core_time ready_clock;        /* the latest ready_time handed out */
    uint64_t serial;
    bool draining;
    /* Restored tasks core_restore_done() still has to look at (ids: tasks may end meanwhile). */
    int64_t *restored;
    size_t nrestored, restored_cap;
    /* Work list for dependency propagation, kept to avoid an allocation per event. */
    struct core_task **work;
    size_t work_cap;
};

/* core.c */
core_time core_clock(struct core *core, core_time now);
/* Sets t->qprio, the ready queue's key, before t is inserted there. */
void core_task_rekey(struct core *core, struct core_task *t);
/* The next ready_time: now, but never earlier than one handed out before. */
core_time core_ready_time(struct core *core);
core_time core_time_add(core_time t, int64_t ms);
struct core_task *core_task_get(const struct core *core, int64_t id);
/* A new task from spec (deps copied, not linked, not yet in the map). */
struct core_task *core_task_alloc(struct core *core, const struct core_task_spec *spec);
/* Puts t in the map in `state`. The caller puts it in the queue or the retry heap. */
void core_task_add(struct core *core, struct core_task *t, enum task_state state);
/* Removes a task from every structure (its attempt included) and frees it. */
void core_task_free(struct core *core, struct core_task *t);
/* Moves t to `to` (which the state table must allow) and keeps the queue, the retry heap and
 * the counts in step. A task entering QUEUED gets ready_time = core_ready_time(); one entering
 * RETRYING must have retry_at set. Appends nothing. */
void core_task_move(struct core *core, struct core_task *t, enum task_state to);
struct core_action *core_emit(struct core_actions *out, enum core_action_type type, int64_t task);
void core_emit_state(struct core_actions *out, int64_t task, enum task_state state,
                     enum core_reason reason, int64_t reason_task, core_time at);

/* when.c */
/* t, QUEUED, enters the ready queue (ready_time = now unless keep_ready, as on restore) — or
 * waits out of it for its begin time or the off-peak window. */
void core_when_enqueue(struct core *core, struct core_task *t, bool keep_ready);
/* t leaves QUEUED (or is freed): out of the ready queue, or out of where it was parked. */
void core_when_unqueue(struct core *core, struct core_task *t);
/* At the start of a pass: begin times reached, the window opened or closed (preempting at its
 * close). */
void core_when_pass(struct core *core, core_time now, struct core_actions *out);
/* The next begin time or window boundary that matters, or CORE_TIME_NEVER. */
core_time core_when_next(const struct core *core);
/* An attempt of t was just tracked: an off-peak preemptible one outside the window (restored)
 * is preempted at the next pass. */
void core_when_track(struct core *core, const struct core_task *t);

/* deps.c */
/* Whether every live-marked dependency is live and every other one names a terminal state. */
bool core_deps_valid(const struct core *core, const struct core_dep *deps, size_t ndeps);
/* The first success-dependency that failed, or 0. With missing_fails (restore), a live-marked
 * dependency that is not live counts as failed. */
int64_t core_deps_failed(const struct core *core, const struct core_dep *deps, size_t ndeps,
                         bool missing_fails);
/* Adds t's edges to the live dependencies it still waits on and counts them in t->unresolved. */
void core_deps_link(struct core *core, struct core_task *t);
/* t just reached a terminal state (its STATE action appended): resolves or fails its
 * dependents, transitively, and frees every task that ended without a running attempt, t
 * included. */
void core_deps_ended(struct core *core, struct core_task *t, struct core_actions *out);

/* Whether t waits only on Slurm tasks that are running their last try (so that Slurm's own
 * afterok/afterany means what drover's dependency means), and on at least one; none of them an
 * array element (the daemon names Slurm dependencies by whole jobs). */
bool core_deps_chainable(const struct core *core, const struct core_task *t);

/* users.c */
/* user's record, created on first use. */
struct core_user *core_user_get(struct core *core, uint32_t user);
void core_users_free(struct core *core);
/* The queue t belongs in when QUEUED: its user's with fair share, else core->queue. */
struct core_queue *core_task_queue(struct core *core, const struct core_task *t);
/* An attempt of t starts holding (delta 1) or stops holding (delta -1) its GPUs, from `at`. */
void core_user_track(struct core *core, const struct core_task *t, core_time at, int delta);
/* The words for that limit: "user limit: 4 GPUs in use", "user limit: 2 tasks running". */
void core_user_why(const struct core_task *t, char *why, size_t len);
/* Whether t's user is at a limit that keeps t from starting now. */
bool core_user_blocked(const struct core_task *t);
/* The ready tasks in pass order (fair share across users, each user's own order within). The
 * caller may remove the task last returned (and only that one). */
void core_ready_start(struct core *core, core_time now);
/* skip (may be NULL): as core_queue_iter_next_skip, for every user's queue. */
struct core_task *core_ready_next(struct core *core, core_queue_skip_fn *skip, void *arg);
/* How many users have ready local tasks and are not at a limit, counting to 2 at most (with
 * fair share and two of them, their order moves with time). */
size_t core_users_ready(const struct core *core);

/* las.c */
/* t's queue (0 first) as of now; its queue key for the ready queue. */
int core_las_queue(const struct core *core, const struct core_task *t, core_time now);
int core_las_key(const struct core *core, const struct core_task *t, core_time now);
/* GPUs a request counts for attained service (a shared claim counts as one GPU). */
double core_las_gpus(const struct core_task *t);
/* t fits nowhere now: appends CORE_ACT_PREEMPT for the attempts whose release makes room. */
void core_las_preempt(struct core *core, const struct core_task *t, core_time now,
                      struct core_actions *out);
/* Promotes the queued tasks whose starvation guard is due (at the start of a pass). */
void core_las_promote(struct core *core, core_time now);
/* t succeeded: its attained service joins the history (las_mrl_factor). */
void core_las_ended(struct core *core, const struct core_task *t);
/* Sets t->run's protection as its attempt starts (promoted: a guard promoted it). */
void core_las_protect(const struct core *core, struct core_task *t, bool promoted);
/* Sets core->las_wakeup after a pass; wait_q: the lowest queue of a task that did not fit. */
void core_las_wakeup(struct core *core, core_time now, int wait_q);

/* sched.c: the scratch copy of the nodes (backfill's reservation, las's trial releases). */
void core_sched_new_stamp(struct core *core);
/* Releases run in the scratch copy (nothing if it claims nothing here) and says whether req then
 * fits on a node it held — or, when req spans nodes, on the whole nodes counted so far in
 * cand/ncand/total — with the place in *pl. Backfill's reservation and las's preemption. */
bool core_sched_release_fits(struct core *core, const struct core_run *run,
                             const struct core_request *req, bool span, int *ncand, int *total,
                             struct core_placement *pl);
struct core_place_node *core_sched_scratch_node(struct core *core, int i);
void core_sched_span_consider(struct core *core, const struct core_place_node *nodes, int i,
                              const struct core_request *req, int *ncand, int *total);

/* sched.c: a pass that only looks (core/why.c). */
enum core_look_verdict {
    CORE_LOOK_FITS,        /* it would start now (a real pass has not run since it could) */
    CORE_LOOK_ARRAY_FULL,
    CORE_LOOK_USER_LIMIT,
    CORE_LOOK_NO_FIT,      /* no room for its shape now */
    CORE_LOOK_RESERVED,    /* it fits, but would delay the head's reservation (backfill) */
};
enum core_look_stop {
    CORE_LOOK_STOP_NONE,
    CORE_LOOK_STOP_FULL,   /* no capacity left: the tasks after were not examined */
    CORE_LOOK_STOP_SCAN,   /* the scan bound (max_scan) */
    CORE_LOOK_STOP_ORDER,  /* strict order: everything behind the first that does not fit */
};
struct core_look {
    void (*note)(void *arg, const struct core_task *t, enum core_look_verdict v,
                 const struct core_task *head);
    void *arg;
    enum core_look_stop stop;  /* filled: why the pass ended before the last task */
    int64_t head;              /* filled: the first task that did not fit (0: none) */
};
/* Runs the pass's logic over the ready tasks without starting any (backoffs and drains are the
 * caller's to see). */
void core_schedule_look(struct core *core, core_time now, struct core_look *look);

/* backend.c */
/* spill = after: t just became queued here (its ready_time set). */
void core_spill_note(struct core *core, const struct core_task *t);
/* Moves the local tasks queued longer than spill_after_ms to Slurm's queue. */
void core_spill_due(struct core *core, core_time now);
/* When the next one is due, or CORE_TIME_NEVER. */
core_time core_spill_next(const struct core *core);
/* t, a Slurm task, was just handed to Slurm: its pending Slurm dependents that now wait only on
 * Slurm tasks running their last try are handed over too, behind them (transitively). */
void core_slurm_chain(struct core *core, struct core_task *t, core_time now,
                      struct core_actions *out);
/* A pending Slurm task t (just submitted or released) that may be handed over at once. */
void core_slurm_chain_one(struct core *core, struct core_task *t, core_time now,
                          struct core_actions *out);
/* Starts every ready Slurm task its array's limit allows (none while Slurm is not answering). */
void core_schedule_slurm(struct core *core, core_time now, struct core_actions *out);

/* attempt.c */
/* Moves a queued task to RUNNING on pl and appends its START. */
void core_attempt_start(struct core *core, struct core_task *t, const struct core_placement *pl,
                        core_time now, struct core_actions *out);
/* Claims pl and lists the attempt as running (start and restore). */
void core_attempt_track(struct core *core, struct core_task *t, const struct core_placement *pl,
                        core_time started);
/* Releases and unlists t's running attempt. */
void core_attempt_untrack(struct core *core, struct core_task *t);
/* The number of attempts of array_id running now. */
int core_array_running(const struct core *core, int64_t array_id);

#endif
