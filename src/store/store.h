/* store/ — drover's durable state in SQLite (WAL, synchronous=FULL).
 *
 * Every state change is committed here before a client is told about it and before the action
 * it causes is carried out, so a crash at any instant leaves a state the next start can finish
 * from. The store owns the schema and its migrations; the daemon reads rows back as JSON
 * objects in the documented `--json` schema (docs/CLI.md).
 */
#ifndef DROVER_STORE_H
#define DROVER_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/core.h"

struct store;

/* Opens (creating and migrating) the database at path. NULL on failure with *err malloc'd. */
struct store *store_open(const char *path, char **err);
void store_close(struct store *st);

/* Transactions. store_commit returns -1 on failure (the transaction is rolled back). */
void store_begin(struct store *st);
int store_commit(struct store *st);
void store_rollback(struct store *st);
const char *store_error(struct store *st);
/* SQLite's primary result code of the error store_error describes: SQLITE_FULL for a full disk,
 * SQLITE_IOERR for a failed read or write. */
int store_error_code(struct store *st);

/* RabbitMQ's outbox (store/amqp.c): an event for the exchange, inside the transaction of the
 * change it announces; beyond `max` rows (0: no bound) the oldest are dropped: *dropped of them
 * (added to the 'amqp_dropped' setting). 0, or -1. */
int store_amqp_event(struct store *st, const char *routing_key, const char *body,
                     core_time now, int64_t max, int64_t *dropped);
/* The events after id `after`, oldest first, at most limit: fn for each; returns how many, or
 * -1. */
typedef void (*store_amqp_fn)(void *arg, int64_t id, const char *routing_key, const char *body);
int store_amqp_pending(struct store *st, int64_t after, int limit, store_amqp_fn fn, void *arg);
/* The broker confirmed these: gone from the outbox. 0, or -1. */
int store_amqp_confirmed(struct store *st, const int64_t *ids, size_t n);
/* Events waiting, and dropped since the state directory was made. 0, or -1. */
int store_amqp_counts(struct store *st, int64_t *waiting, int64_t *dropped);

/* Daemon settings that outlive a restart (e.g. "draining" = "1"). store_setting returns a
 * malloc'd value or NULL. */
int store_set_setting(struct store *st, const char *key, const char *value);
char *store_setting(struct store *st, const char *key);

/* A task as submitted. Strings and arrays are borrowed by the store functions. */
struct task_record {
    const char *name;           /* may be NULL */
    json_t *command;            /* array of strings */
    const char *workdir;
    json_t *env;                /* object: the submitter's environment with --env applied */
    const char *key;            /* idempotency key, may be NULL */
    struct core_task_spec spec; /* id is filled by store_insert_task */
    int64_t array_index;        /* -1 = not an array task */
    const char *profile;        /* what its GPU use is learned under; may be NULL */
    const char *claim_source;   /* "declared", "learned", or NULL (whole GPUs or none) */
    int64_t stall_ms;           /* --stall; 0 = none */
    uid_t uid;                  /* the owner (the submitter, as the kernel named it) … */
    const char *user;           /* … and its name; NULL: not recorded (the daemon's user) */
    const char *gpu_type;       /* the --gpu-type pattern (spec.req.gpu_types is what it
                                 * matched here), or NULL */
    const char *notify;         /* --notify: the webhook URL for its end, or NULL */
    int64_t preempt_grace_ms;   /* --preemptible: its grace (> 0), or 0: not preemptible */
    int preempt_signal;         /* --preempt-signal; 0 = SIGTERM */
    int64_t env_id;             /* 0: store_insert_task stores env and sets this, so that the
                                 * further tasks of an array reuse it (env unchanged) */
};

/* Inserts a task (inside a transaction); sets rec->spec.id. Returns -1 on failure. */
int store_insert_task(struct store *st, struct task_record *rec);
/* Id of the task uid submitted with this key, or 0: keys are per owner (a task without a
 * recorded owner is the daemon's user's). */
int64_t store_find_key(struct store *st, const char *key, uid_t uid);
/* The task's stored state, or -1 if there is no such task. */
int store_task_state(struct store *st, int64_t id);

/* Records a state change from a core action. */
int store_set_state(struct store *st, const struct core_action *act, const char *reason,
                    core_time now);
/* Attempt bookkeeping. */
int store_attempt_start(struct store *st, int64_t task, int attempt, core_time now,
                        const struct core_placement *placement, const char *run_dir);
int store_attempt_end(struct store *st, int64_t task, int attempt, core_time start,
                      core_time end, int exit_code, int signal, const char *outcome,
                      const char *reason);
/* Slurm attempts (store/slurm.c): the job id sbatch answered ("123"), and what the last poll
 * said of it (Slurm's state and reason; a reason of "None" is not kept). 0, or -1. */
int store_attempt_slurm_job(struct store *st, int64_t task, int attempt, const char *job);
int store_attempt_slurm_state(struct store *st, int64_t task, int attempt, const char *state,
                              const char *reason);
/* A local task spilled to Slurm (spill = after): its backend becomes slurm. */
int store_task_slurm(struct store *st, int64_t task);
/* The attempt's job id (malloc'd), or NULL: none recorded (sbatch had not answered). */
char *store_attempt_slurm_job_of(struct store *st, int64_t task, int attempt);
/* Marks tasks first..last as one array (array_id = first). */
int store_set_array(struct store *st, int64_t first, int64_t last);
/* Forgets attempt n, which never ran (the daemon died before spawning it). */
int store_attempt_discard(struct store *st, int64_t task, int attempt);
/* A waiting task's new priority (drover priority). */
int store_set_priority(struct store *st, int64_t id, int priority);
/* Marks a task queued again with fresh retry budget (drover retry). */
int store_reset_for_retry(struct store *st, int64_t id);

/* What starting an attempt needs. json fields: command, env, workdir, timeout_ms,
 * array_index, stall_ms, and uid and user when the owner is recorded. The caller json_decref()s it. NULL if there is no such task. */
json_t *store_task_exec_info(struct store *st, int64_t id);

/* Preemption: how often the task overran its grace (-1: no such task); an attempt of it was
 * preempted (inside the transaction of its end): one more attempt outside its retry budget, one
 * more overrun if it was killed after its grace, and off (or NULL) the reason it may no longer
 * be preempted. 0, or -1. */
int store_task_preempt_overruns(struct store *st, int64_t id);
int store_task_preempted(struct store *st, int64_t id, bool overrun, const char *off);

/* Rebuilds a task's scheduling spec (for restore and retry). deps are allocated into
 * *deps (the caller frees); dep states are filled from the store (-1 if live). *gpu_type (when
 * gpu_type is not NULL) gets the task's GPU type pattern (malloc'd) or NULL: the caller matches
 * it against the machine into spec->req.gpu_types, which the store does not keep. */
int store_task_spec(struct store *st, int64_t id, struct core_task_spec *spec,
                    struct core_dep **deps, char **gpu_type);

/* Calls fn for each task that is not terminal, or is terminal but still has an attempt
 * without an end (a cancel in flight), in id order. */
typedef void (*store_live_fn)(void *arg, int64_t id, enum task_state state,
                              core_time ready_time, core_time retry_at, int attempts,
                              bool attempt_open, core_time attempt_start,
                              const struct core_placement *placement, const char *run_dir);
int store_each_live(struct store *st, store_live_fn fn, void *arg);

/* Calls fn for each attempt that ended at or after since and held GPUs, oldest end first: its
 * owner's uid, the GPU-seconds it used (GPUs × run time) and when it ended (store/usage.c). */
typedef void (*store_usage_fn)(void *arg, uint32_t uid, double gpu_seconds, core_time end);
int store_each_usage(struct store *st, core_time since, store_usage_fn fn, void *arg);

/* Calls fn with the attained service (GPU-ms: GPUs × the time of its attempts) of each of the
 * last `limit` tasks that succeeded, latest first: what las learns from (core_las_learn). */
typedef void (*store_service_fn)(void *arg, double service_ms);
int store_each_service(struct store *st, int limit, store_service_fn fn, void *arg);

/* Tasks that depend (after-OK) on id and are upstream_failed: for drover retry. *ids is
 * malloc'd. */
int store_upstream_failed_dependents(struct store *st, int64_t id, int64_t **ids, size_t *n);

/* The `show --json` object of one task (NULL if none). */
json_t *store_task_json(struct store *st, int64_t id);
/* Which tasks a listing holds. */
struct store_list_filter {
    const char *state; /* only this state; NULL: any */
    bool all;          /* include tasks that ended more than a day ago */
    bool by_owner;     /* only tasks of uid … */
    uid_t uid;
    const char *user;  /* … or of this recorded user name (NULL: none) */
    int64_t limit;     /* at most this many, in id order (0: all) … */
    int64_t offset;    /* … after skipping this many (the HTTP API's paging) */
};
/* `ls --json`: an array of task objects (without per-attempt details). */
json_t *store_list_json(struct store *st, const struct store_list_filter *f, core_time now);
/* A page of it (f's limit and offset) and, in *total, how many tasks f matches in all
 * (X-Total-Count; -1 on error). Cheap however deep the store: the count reads an index, and a
 * page of a large match walks the tasks in id order to the page's end. */
json_t *store_list_page(struct store *st, const struct store_list_filter *f, core_time now,
                        int64_t *total);

/* `ls` for people: {"columns": [KEY, …], "tasks": [[VALUE, …], …]}, each row the values of
 * some fields of store_list_json's objects in the order of "columns", which names them by the
 * same keys ("request.gpus" for the gpus of "request") and gives them the same types: one
 * schema, sent once rather than with every row. A fraction of the cost of the full objects
 * with 100,000 tasks. */
json_t *store_list_brief(struct store *st, const struct store_list_filter *f, core_time now);

/* ---- owners and the audit log (store/audit.c) ---------------------------------------------- */

/* The daemon's own user's login name (or its uid in decimal): the owner of a task or an
 * experiment whose owner is not recorded. Static storage. */
const char *store_own_user(void);
/* Records that user (uid) did op ("cancel", "submit", "exp_stop", …) to target ("task 12",
 * "experiment alice/sweep1", NULL) with detail (may be NULL), inside the caller's transaction
 * (the change it records). 0, or -1. */
int store_audit(struct store *st, int64_t now, uid_t uid, const char *user, const char *op,
                const char *target, const char *detail);
/* The audit records at or after `since` (ms), oldest first: [{id, ts, uid, user, op, target,
 * detail}]. */
json_t *store_audit_list(struct store *st, int64_t since);

/* Per owner of live tasks, by uid: [{uid, user, running, waiting (held, pending, queued,
 * retrying), queued, gpus (asked by its running tasks)}]. */
json_t *store_users(struct store *st);

/* ---- telemetry and what tasks use (store/telemetry.c) ------------------------------------ */

/* Runs one or more SQL statements (no results). Returns 0, or -1 (store_error says why). */
int store_exec(struct store *st, const char *sql);

/* After an out-of-memory or a GPU fault: the new per-GPU claim (0 = whole GPUs), and the
 * attempt not counted against the retries. */
int store_task_requeue(struct store *st, int64_t id, uint64_t gpu_mem, const char *claim_source);
/* The largest per-GPU peak of the profile's last five successful attempts, or 0. */
uint64_t store_profile_peak(struct store *st, const char *profile);
/* What an attempt used: per-GPU peak (0 = unknown) and mean utilisation (< 0 = unknown). */
int store_attempt_usage(struct store *st, int64_t task, int attempt, uint64_t peak, double util);

struct gpu_row {
    int64_t ts;
    int gpu;
    int util;             /* -1 = unknown (stored NULL), likewise below */
    int64_t mem_used;
    int temp;
    int power_mw;
};
/* Appends raw samples, folds every whole minute before `now` into one-minute means, and drops
 * raw samples older than an hour and minutes older than 30 days. One transaction. */
int store_telemetry_flush(struct store *st, const struct gpu_row *rows, size_t n, int64_t now);
/* ---- series for charts (store/series.c; the HTTP API) -------------------------------------- */
/* The GPUs' telemetry from since to until (ms), averaged into buckets of step ms: {"GPU": [[ts,
 * util, mem_used, temp, power_w], …]} by machine index as text, buckets in order, null where
 * nothing was known; raw samples where there are, one-minute means before. */
json_t *store_gpu_series(struct store *st, int64_t since, int64_t until, int64_t step);
/* The attempts that held GPUs from since to until, oldest first, at most limit: [{"id", "name",
 * "user", "gpus": [machine indices], "start", "end" (null: running)}]. */
json_t *store_gpu_holders(struct store *st, int64_t since, int64_t until, int limit);

/* {"states": {state: count}, "attempts": {outcome: count}} over the whole store. */
json_t *store_counts(struct store *st);
/* The first `limit` queued tasks by id: [{id, name, priority, gpus, claim, since}]. */
json_t *store_queued_brief(struct store *st, int limit);
/* A task's name, or NULL (malloc'd). */
char *store_task_name(struct store *st, int64_t id);

/* ---- experiments (store/exp.c) ----------------------------------------------------------- */

/* Every write below returns 0, or -1 with the error for store_error() (the caller rolls back). */
bool store_exp_exists(struct store *st, const char *name);
/* state: its first (exp/lifecycle.h names them). */
int store_exp_insert(struct store *st, const char *name, const char *kind, const json_t *spec,
                     const char *state, int64_t seed, int64_t next_trial, int64_t space,
                     int64_t now);
int store_trial_insert(struct store *st, const char *exp, int trial, int64_t task,
                       const char *stage, const json_t *params);
/* The experiment task belongs to (malloc'd) and its trial, or NULL. */
char *store_trial_of_task(struct store *st, int64_t task, int *trial);
int store_metric_insert(struct store *st, int64_t task, int64_t step, const char *name,
                        double value, int64_t now);
int store_trial_stopped(struct store *st, int64_t task, int rung, const char *reason);
/* Marks a task that `drover exp stop` cancels (unless early stopping ended it), so that `drover
 * exp resume` queues it again; marked false once it is. */
int store_trial_mark_stop(struct store *st, int64_t task, bool marked);
/* The trial number the experiment's next round or generator proposal starts at. */
int store_exp_set_next(struct store *st, const char *name, int64_t next_trial);
/* state: one of exp/lifecycle.h's (a static string); reason may be NULL. */
int store_exp_set_state(struct store *st, const char *name, const char *state, const char *reason);
/* Counts one more consecutive failure (or resets the count); returns the count, or -1. */
int store_exp_failures(struct store *st, const char *name, bool failed);
/* {name, kind, spec, state, reason, created, seed, next_trial, space, failures, user, uid}, or
 * NULL. */
json_t *store_exp_get(struct store *st, const char *name);
/* The experiment's owner: *user (malloc'd) and *uid, or *user NULL when none is recorded (the
 * daemon's user). -1 if there is no such experiment. */
int store_exp_owner(struct store *st, const char *name, uid_t *uid, char **user);
int store_exp_set_owner(struct store *st, const char *name, uid_t uid, const char *user);
/* Every experiment with counts of its tasks by state (and its owner: user, uid). */
json_t *store_exp_list(struct store *st);
/* The experiment's task ids in id order — all of them, or only those a stop marked — into *ids
 * (malloc'd). Returns 0, or -1 (nothing allocated). */
int store_exp_task_ids(struct store *st, const char *name, bool marked_by_stop, int64_t **ids,
                       size_t *n);
/* The experiment's trials (or stages; not its generator runs) by how they ended: succeeded and
 * failed (or timed out) count trials that early stopping did not end. */
struct store_exp_tally {
    int trials, succeeded, failed, stopped_early;
};
int store_exp_tally(struct store *st, const char *name, struct store_exp_tally *out);
/* The first (or the last) of its trials to fail (failed or timed out, not stopped early), as
 * {task, stage, exit_code, signal, outcome} of its last attempt (null where unknown); NULL when
 * none did. */
json_t *store_exp_failed_trial(struct store *st, const char *name, bool last);
/* The leaderboard rows: per trial (or stage) its params, state, latest metrics, best value of
 * `metric` (NULL: none), GPU-hours. */
json_t *store_exp_trials(struct store *st, const char *name, const char *metric, bool maximize,
                         int64_t now);
/* [[trial, step, value]] of one metric over the experiment's trials, in arrival order. */
json_t *store_exp_metric_stream(struct store *st, const char *name, const char *metric);
/* [{step, name, value}] of a task. */
json_t *store_task_metrics(struct store *st, int64_t task);

/* ---- tokens (store/tokens.c) ------------------------------------------------------------- */
/* A row of the tokens table: an API token, or a dashboard session (docs/API.md,
 * "Authentication"). Times are ms since the epoch; 0 = none (never expires, never used, not
 * revoked). The store keeps no secret: hash is the hex SHA-256 of the token's whole text. */
struct store_token {
    int64_t id;
    uid_t uid;
    char user[64];
    bool session;       /* kind 'session' (else 'token') */
    bool read_only;
    int64_t created, expires, last_used, revoked;
    char hash[65];
    char csrf[65];      /* a session's CSRF secret; "" for a token */
};
/* Inserts t (id and hash ignored) and its name (may be NULL) with a placeholder hash, inside
 * the caller's transaction, and sets t->id: the hash covers the token's text, which holds the
 * id, so the caller sets it next with store_token_set_hash, in the same transaction. */
int store_token_insert(struct store *st, struct store_token *t, const char *name);
int store_token_set_hash(struct store *st, int64_t id, const char *hash);
/* 1 with *t filled, 0 when there is no such row, -1 (a read failed). */
int store_token_get(struct store *st, int64_t id, struct store_token *t);
/* [{id, name, user, uid, kind, read_only, created, expires, last_used, revoked}] by id: uid's
 * rows unless all; sessions too only when sessions. */
json_t *store_token_list(struct store *st, bool all, uid_t uid, bool sessions);
/* Marks a row revoked at now (a revoked row keeps its first time). */
int store_token_revoke(struct store *st, int64_t id, int64_t now);
int store_token_used(struct store *st, int64_t id, int64_t now);
/* Forgets sessions that expired or were revoked before `before`. */
int store_token_prune_sessions(struct store *st, int64_t before);


/* ---- the webhook outbox and transaction ends (store/notify.c; daemon/events.c, notify.c) ---- */
/* Called after each transaction ends: committed (store_commit succeeded) or not (a failed
 * commit, store_rollback). The daemon publishes what a transaction staged only once it is
 * durable. One hook per store; fn NULL removes it. */
typedef void (*store_txn_fn)(void *arg, bool committed);
void store_on_txn_end(struct store *st, store_txn_fn fn, void *arg);
/* fn(arg) is called at the start of every store_begin(), before its BEGIN (daemon/group.c:
 * the group commit's open transaction is committed before any other begins). store_begin_group()
 * begins without calling it. */
void store_on_begin(struct store *st, void (*fn)(void *arg), void *arg);
void store_begin_group(struct store *st);
/* A savepoint inside the open transaction, ended by store_savepoint_end: keep (RELEASE) or not
 * (ROLLBACK TO, then RELEASE): what one submission wrote, alone, within a group commit. */
void store_savepoint(struct store *st);
void store_savepoint_end(struct store *st, bool keep);
/* Transactions committed since the store was opened. */
uint64_t store_commits(const struct store *st);
/* What an event or a webhook names a task by: {name (or null), user, notify (or null)}; NULL
 * when there is no such task. */
json_t *store_task_brief(struct store *st, int64_t id);
/* A webhook to deliver: url and body kept until delivered (or given up), inside the caller's
 * transaction — the change it reports and the row are one commit. Sets *id. */
int store_outbox_insert(struct store *st, const char *url, const char *body, int64_t now,
                        int64_t *id);
struct store_outbox_row {
    int64_t id;
    char *url, *body;   /* malloc'd: store_outbox_rows_free */
    int tries;
    int64_t next_at;
};
/* Rows due by `due` (INT64_MAX: all) that are not in `skip` (ids being delivered), oldest
 * next_at first, at most max; *rows malloc'd. 0, or -1. */
int store_outbox_due(struct store *st, int64_t due, const int64_t *skip, size_t nskip,
                     size_t max, struct store_outbox_row **rows, size_t *n);
void store_outbox_rows_free(struct store_outbox_row *rows, size_t n);
/* The earliest next_at of a row not in skip, or INT64_MAX when none. */
int64_t store_outbox_next(struct store *st, const int64_t *skip, size_t nskip);
/* Delivered (or given up): the row is deleted. */
int store_outbox_delete(struct store *st, int64_t id);
/* A failed try: tries + 1, the next time and the error. */
int store_outbox_retry(struct store *st, int64_t id, int tries, int64_t next_at,
                       const char *error);

#endif
