/* daemon/ — the libevent loop that feeds core/ real events and carries out its actions.
 *
 * Order of work for every event: core decides (appending actions), the actions' state changes
 * are committed to the store in one transaction, and only then are they carried out (spawn,
 * signal) and clients told. See docs/ARCHITECTURE.md.
 */
#ifndef DROVER_DAEMON_H
#define DROVER_DAEMON_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/core.h"
#include "daemon/config.h"
#include "gpu/gpu.h"
#include "store/store.h"

/* An attempt that is running: a child of this daemon, or adopted after a restart. */
struct run {
    int64_t task;
    int attempt;
    pid_t pid;          /* supervisor pid; 0 when unknown */
    bool child;         /* our child: SIGCHLD tells; else polled */
    bool ended;         /* daemon_poll_adopted: seen ended, to be finished after its metrics */
    char *run_dir;
    core_time start;
    struct core_placement placement;
    struct run *next;
    /* What it uses (daemon/telemetry.c). */
    pid_t pgid;                 /* the task's process group and session; 0 until known */
    uint64_t use[CORE_MAX_NODE_GPUS]; /* bytes on each of its GPUs at the last sample */
    bool use_known;
    uint64_t peak;              /* the largest per-GPU use seen */
    double util_sum;            /* mean utilisation of its GPUs, summed over samples */
    int util_n;
    int util_now;               /* the last sample's, or -1 */
    int64_t stall_ms;           /* --stall: 0 = none */
    core_time last_activity;    /* output written, or its GPUs busy (telemetry.c) */
    int64_t stalled_ms;         /* stopped for a stall: the idle time seen then */
    bool stalled;               /* killed for a stall */
    bool gpu_fault;             /* killed because its GPU failed */
    char fault[64];
    /* Experiments (daemon/exp-metrics.c): the trial this attempt runs, and how far its
     * metrics file and stdout have been read. */
    bool exp_known;
    char *exp;                  /* NULL: not a trial */
    int trial;
    long long metrics_off, stdout_off;
    int64_t metrics_lines;      /* the step of a JSON line that gives none */
    int64_t pattern_step;
    /* A Slurm attempt (daemon/slurm.c): no process of ours; run_dir is in shared-dir. */
    bool slurm;
    bool submitting;            /* sbatch has not answered yet */
    bool waiting;               /* … nor been run: a job it follows has no id yet */
    bool cancel_wanted;         /* cancelled before its job id was known */
    int64_t job_id;             /* 0 until known (an array element's: the array's job id) */
    int64_t array_task;         /* an array element's index in Slurm, or -1 */
    int64_t group;              /* the array submitted as one Slurm array (its first attempts),
                                 * or 0 */
    uint64_t submission;        /* which sbatch call it was part of */
    int orphan_polls;           /* polls that looked for it by its comment (no job id) */
    char slurm_state[24];       /* what the last poll said */
    char slurm_reason[64];
};

struct waiter; /* a `drover wait` client: daemon/ops.c */

/* An attempt's end, written in the same transaction as the state change it causes. */
struct attempt_end {
    int64_t task;
    int attempt;
    core_time start, end;
    int exit_code, signal;
    const char *outcome;  /* static: succeeded, failed, timed_out, cancelled, exec_error, lost,
                           * preempted, … */
    char reason[320];
    bool discard;         /* never started: forget the attempt row */
    uint64_t peak;        /* per-GPU peak GPU memory seen, 0 = unknown */
    double util;          /* mean GPU utilisation, < 0 = unknown */
    bool requeue;         /* out of memory or a GPU fault: queued again, claiming new_claim */
    uint64_t new_claim;
    bool preempted;       /* preempted (las): queued again, outside its retry budget */
    bool overrun;         /* … killed after its preemption grace */
    bool preempt_off;     /* … too often: no longer preemptible (the reason is in `reason`) */
};

struct telemetry; /* daemon/telemetry.c */
struct disk;      /* daemon/disk.c */
struct exp_live;  /* daemon/exp-internal.h */
struct server;    /* daemon/server.c */
struct http;      /* daemon/http.c */
struct events;    /* daemon/events.c */
struct notify;    /* daemon/notify.c */
struct api_state; /* daemon/api*.c: login codes, log followers */
struct slurm_backend; /* daemon/slurm.c */

struct daemon {
    char *home;
    struct daemon_config cfg;
    struct telemetry *tel;
    struct exp_live *exps;    /* experiments in memory: settings, early stopping */
    char *gpu_type_names[GPU_MAX]; /* distinct GPU names; core's gpu_type is an index here */
    int ngpu_types;
    struct store *store;
    struct core *core;
    struct core_actions acts;
    struct core_actions deferred; /* committed, to be carried out after the reply */
    struct gpu_inventory gpus;
    int cpus;
    unsigned long long mem;
    struct event_base *base;
    struct event *kick;       /* run a scheduling pass soon */
    struct event *carry;      /* carry out d->deferred */
    struct event *wakeup;     /* core_next_wakeup */
    struct event *off_peak;   /* the off-peak window's next boundary (main.c); NULL: none set */
    struct event *poll;       /* adopted supervisors */
    struct event *sigchld, *sigterm, *sigint;
    struct event *zygote;     /* readable when supervisors forked by the zygote exit */
    struct server *server;    /* the socket and its clients (daemon/server.c) */
    struct http *http;        /* the HTTP API, dashboard and /metrics (daemon/http.c) */
    struct events *events;    /* the event backlog and its streams (daemon/events.c) */
    struct notify *notify;    /* webhooks being delivered (daemon/notify.c) */
    struct amqp *amqp;        /* the RabbitMQ door, when `amqp` is set (daemon/amqp.c) */
    struct api_state *api;    /* the API's own state (daemon/api*.c) */
    struct slurm_backend *slurm; /* the Slurm backend, when shared-dir is set (daemon/slurm.c) */
    core_time started;        /* when this daemon started (/healthz) */
    int conns_open;           /* connections open on both, against LIMIT_CONNS */
    int fd_reserve;           /* daemon/listen.c: given up to shed a connection when out of
                               * descriptors; -1 until the first listener opens it */
    struct run *runs;
    struct attempt_end *ends;
    size_t nends, ends_cap;
    struct waiter *waiters;
    struct group *group;      /* submissions awaiting their shared commit (daemon/group.c) */
    bool stopping;
    bool store_lost;          /* a commit failed with what core already held: stop, recover */
    int64_t grace_ms;
    uint64_t preemptions;     /* attempts asked to yield (CORE_ACT_PREEMPT carried out) */
    struct disk *disk;        /* the ballast and the full-disk mode (daemon/disk.c) */
    mode_t task_umask;        /* the umask the daemon was started with: its tasks get it back */
    uint64_t task_nofile;     /* likewise its soft RLIMIT_NOFILE (0: unlimited, left alone) */
};

int daemon_main(int argc, char **argv);

/* The loop's priorities (libevent: lower runs first). Everything is at the default, 1, but the
 * HTTP connections, at DAEMON_PRIO_HTTP: when the socket and HTTP both have work, the socket's
 * is done first, and the loop looks again after each HTTP callback (main.c). */
/* How many of the last tasks that succeeded las learns from at a restart (core_las_learn). */
#define DAEMON_LAS_HISTORY 10000

#define DAEMON_PRIOS 3
#define DAEMON_PRIO_HTTP 2

/* ---- daemon/events.c: live events (/api/v1/events) ---------------------------------------- */
/* The backlog of the last LIMIT_EVENTS_BACKLOG events and the streams that follow it. Task,
 * attempt and experiment events are staged while their transaction is open and published only
 * once it commits (store_on_txn_end); a rolled-back one publishes nothing. */
void events_start(struct daemon *d);
void events_stop(struct daemon *d);
/* runner.c, inside the batch's transaction, as each is written: a task's state change (reason
 * may be NULL), an attempt's start (machine: its GPUs by the machine's index), an attempt's
 * end. */
void events_stage_task(struct daemon *d, int64_t task, enum task_state state,
                       const char *reason, core_time now);
void events_stage_attempt_start(struct daemon *d, int64_t task, int attempt,
                                const struct core_placement *machine, core_time now);
void events_stage_attempt_end(struct daemon *d, const struct attempt_end *e);
/* exp-end.c, inside the transaction that stores the experiment's new state. */
void events_stage_experiment(struct daemon *d, const char *name, const char *state,
                             const char *reason);
/* telemetry.c: the sample just taken (rows of the GPUs that answered), published at once. */
void events_gpu(struct daemon *d, const struct gpu_row *rows, size_t n, core_time now);

/* ---- daemon/amqp.c: RabbitMQ (docs/AMQP.md) ------------------------------------------------ */
/* Starts the door when `amqp` is set (the broker may be away: it keeps trying); -1 with *err on
 * a setting that cannot work (amqp-user). */
int amqp_start(struct daemon *d, char **err);
void amqp_stop(struct daemon *d);
/* Inside the transaction of the change: the event (the HTTP stream's data JSON) goes to the
 * outbox with routing key KIND.WHAT.STATE. Nothing without the door. */
void amqp_stage_event(struct daemon *d, const char *kind, const char *what, const char *state,
                      json_t *data);
/* The transaction ended (events.c's hook): what it wrote is published once committed. */
void amqp_txn_end(struct daemon *d, bool committed);
/* gpus --json's "amqp" (null without the door). */
json_t *amqp_status(struct daemon *d);

/* ---- daemon/notify.c: webhooks -------------------------------------------------------------- */
/* Starts delivering the outbox (what an earlier daemon left too); stop drops what is in flight
 * (it stays in the outbox for the next start). */
void notify_start(struct daemon *d);
void notify_stop(struct daemon *d);
/* Inside the transaction that ends the task (after its state is written): an outbox row for the
 * task's own notify URL and one for the `notify` setting, each if set. 0, or -1 (roll back). */
int notify_task_ended(struct daemon *d, int64_t task, core_time now);
/* The same for an experiment that reached a final state (its template's notify: and the
 * setting). */
int notify_experiment_ended(struct daemon *d, const char *name, const char *state,
                            const char *reason, core_time now);
/* A transaction ended (events.c's store_on_txn_end hook): rows it inserted are delivered
 * soon once committed. */
void notify_txn_end(struct daemon *d, bool committed);

/* daemon/runner.c */
core_time daemon_now(void);
/* Commits the accumulated actions, then carries them out. Returns -1 if the first commit failed
 * (a full disk, an I/O error): then nothing of it is carried out, and core's decisions wait in
 * d->acts and d->ends for the next commit (daemon/disk.c retries every second), so nothing the
 * store lacks is ever acted on. The daemon goes on — unless the failed transaction also held an
 * experiment's new tasks, which core already has: then it stops, and its next start recovers
 * from the store and the run directories. */
int daemon_apply(struct daemon *d);
/* The same, committing the first batch in the transaction the caller began (so that, e.g., a
 * new task, its first state and its start are one commit), and carrying that batch out only
 * after the caller has answered its client (daemon_on_carry): a submission is acknowledged once
 * it is durable, without waiting for its supervisor to be spawned. Returns -1 if that first
 * commit failed: the caller's own writes are lost with it while core holds its changes, so the
 * caller must stop the daemon (the next start recovers from the store). disk.c makes that rare:
 * new work is refused while the disk is full, and the ballast makes room before a commit. */
int daemon_apply_txn(struct daemon *d);
/* Writes d->acts — what core_submit made: the new tasks' states, and a start when a Slurm task
 * is handed over behind its Slurm upstream at once — and the events they stage into the
 * transaction the caller holds open, without committing or carrying anything out; moves them to
 * *written, to be carried out by daemon_carry_committed once that transaction has committed
 * (daemon/group.c). -1 on a store error. */
int daemon_write_acts(struct daemon *d, struct core_actions *written);
void daemon_carry_committed(struct daemon *d, struct core_actions *batch);
void daemon_on_carry(evutil_socket_t fd, short what, void *arg);
/* Asks for a scheduling pass at the next loop turn. */
void daemon_kick(struct daemon *d);
void daemon_reap(struct daemon *d);
/* Starts the zygote that forks supervisors (exec/zygote.c); without it, exec_start spawns them
 * directly, which is slower but equivalent. */
void daemon_start_zygote(struct daemon *d);
/* Tracks a running attempt; takes ownership of run_dir. */
struct run *run_add(struct daemon *d, int64_t task, int attempt, pid_t pid, bool child,
                    char *run_dir, core_time start, const struct core_placement *placement);
/* Stops tracking r and frees it. */
void run_remove(struct daemon *d, struct run *r);
void daemon_poll_adopted(struct daemon *d);
/* The store, the tasks and users see GPUs by the machine's index (NVML's, CUDA's); core by their
 * position in the inventory, which differs when drover has only some of the GPUs. */
void daemon_gpus_to_machine(const struct daemon *d, struct core_placement *pl);
/* Returns false when a GPU of pl is no longer in the inventory. */
bool daemon_gpus_from_machine(const struct daemon *d, struct core_placement *pl);
/* Restores core from the store and re-adopts running attempts. */
int daemon_restore(struct daemon *d, char **err);

/* daemon/slurm.c: handing tasks to Slurm (docs/SLURM.md). start: when shared-dir is set;
 * 0, or -1 with *err (a bad slurm-args, a shared-dir that cannot be made). */
int slurm_backend_start(struct daemon *d, char **err);
void slurm_backend_stop(struct daemon *d);
/* Carries out core's START of a Slurm task: the batch script, then sbatch in the background. */
void slurm_start_attempt(struct daemon *d, const struct core_action *a, core_time now);
/* Submits the attempts waiting to be (slurm-submit.c): each alone, the first attempts of an
 * array's elements as one Slurm array — once every Slurm job they follow has its id. The runner
 * calls it after carrying out a batch of actions. */
void slurm_submit_waiting(struct daemon *d);
/* drover cancel of a Slurm attempt: scancel (once its job id is known). */
void slurm_cancel_attempt(struct daemon *d, struct run *r);
/* Restore: a Slurm attempt the store says is running is tracked again. */
void slurm_adopt(struct daemon *d, int64_t task, int attempt, core_time start,
                 const char *run_dir, const struct core_placement *pl);
/* NULL when a --on slurm submission may go on; else why not (malloc'd): no shared-dir, or
 * Slurm not answering. */
char *slurm_refusal(struct daemon *d);
/* Whether sbatch could take the task (the mapping's refusals: a name too long for Slurm, a GPU
 * type with ':', …): 0, or -1 with the reason in why. */
int slurm_check_request(struct daemon *d, json_t *task, char *why, size_t len);
/* The backend's state for the gpus reply and /healthz: {"up", "error", "tracked"}. */
void slurm_gpus_json(struct daemon *d, json_t *o);

/* daemon/why.c: why each of ids[0..n) waits, as a JSON array of one line each (null for a
 * task that does not wait): core_why() in words, with a backoff's end in local time and a GPU
 * type by the task's pattern (task: the task's JSON when at hand, else the store is asked). */
json_t *daemon_why(struct daemon *d, const int64_t *ids, size_t n, json_t *task);

/* daemon/telemetry.c: GPU sampling, what attempts use, stalls, faults, health, /metrics. */
int telemetry_start(struct daemon *d, char **err);
void telemetry_stop(struct daemon *d);
/* A new or adopted attempt: start watching it (stall_ms from its task). */
void telemetry_watch(struct daemon *d, struct run *r, int64_t stall_ms);
/* A task started after waiting since ready (the scheduling-latency histogram). */
void telemetry_started(struct daemon *d, core_time ready, core_time now);
/* `drover undrain`: GPUs drained after a fault are back in service. */
void telemetry_undrain(struct daemon *d);
/* The `gpus` reply: the machine, its GPUs as last sampled, the tasks on them, the queue. */
json_t *telemetry_snapshot(struct daemon *d);
/* Whether the attempt's output (the end of stderr, then stdout) reports running out of GPU
 * memory ("CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED", …). */
bool telemetry_oom(const char *run_dir);

struct conn;

/* Experiments (daemon/ops-exp.c, exp-*.c; exp/lifecycle.h decides their states): `drover exp
 * …`, metrics from trials, early stopping, the circuit breaker, what follows a round. */
json_t *op_exp_run(struct daemon *d, struct conn *c, json_t *req);
json_t *op_exp_ls(struct daemon *d, struct conn *c, json_t *req);
json_t *op_exp_show(struct daemon *d, struct conn *c, json_t *req);
json_t *op_exp_stop(struct daemon *d, struct conn *c, json_t *req);
json_t *op_exp_resume(struct daemon *d, struct conn *c, json_t *req);
/* Reads what running trials reported since the last call; stops those early stopping rules out.
 * Its own transaction: a write that fails rolls it back (read again at the next call). */
void exp_poll(struct daemon *d);
/* A task reached a terminal state, inside the transaction that records it (after every state
 * of its batch is written): the circuit breaker, and the experiment's end when it was the last
 * of its tasks. Returns 0, or -1 when a store write failed: the caller rolls back. */
int exp_task_ended(struct daemon *d, int64_t task, enum task_state state);
/* At start, once restored: an experiment recorded running with no live task (a crash, an older
 * daemon) is settled through the lifecycle, so that none stays running forever. */
void exp_settle(struct daemon *d);
void exp_run_free(struct run *r);
/* Whether d->acts ends a task that is an experiment's trial. */
bool exp_trial_ending(struct daemon *d);
void exp_free_all(struct daemon *d);

/* daemon/disk.c: a full disk under DROVER_HOME — the ballast ($DROVER_HOME/reserve), refusing
 * new work while full, and the way back (docs/ARCHITECTURE.md). */
void disk_start(struct daemon *d);
void disk_stop(struct daemon *d);
bool disk_is_full(const struct daemon *d);
/* False while the disk is full and the ballast spent: a commit is then likely to fail. */
bool disk_can_commit(const struct daemon *d);
/* NULL, or the reply refusing new work (new reference): "disk full under DIR: …". */
json_t *disk_refusal(struct daemon *d);
/* Before a commit: releases ballast if the disk has no room left for one. */
void disk_before_commit(struct daemon *d);
/* A commit failed with SQLite's primary code: true if ballast was released, so that a retry
 * may succeed. */
bool disk_commit_failed(struct daemon *d, int code);
/* An attempt could not start for want of room. */
void disk_no_room(struct daemon *d);

/* daemon/server.c */
int server_listen(struct daemon *d, const char *path, char **err);
void server_close(struct daemon *d);

/* daemon/http.c: /metrics on the `metrics` address (a small HTTP/1.1 server: GET and HEAD, no
 * request bodies, bounded by LIMIT_HTTP_*). */
int http_start(struct daemon *d, char **err);
void http_stop(struct daemon *d);
/* Closes the oldest HTTP connection that is not being answered, to free a descriptor for the
 * socket; false when there is none. */
bool http_evict(struct daemon *d);

/* daemon/ops.c: handles one request; returns the reply (new reference), or NULL when the
 * reply is deferred (wait). conn is opaque to ops except for deferred replies. */
struct conn;
json_t *ops_dispatch(struct daemon *d, struct conn *c, json_t *req);
void ops_notify_waiters(struct daemon *d);
void ops_drop_conn(struct daemon *d, struct conn *c);
/* server.c: sends a deferred reply on c (steals the reference). */
void server_reply(struct conn *c, json_t *reply);

/* Who is on the other end of a connection: only what the kernel says (SO_PEERCRED when it was
 * accepted), never anything the client sends. name is the user's login name (or the uid in
 * decimal when it has none); admin: root, the daemon's own user in per-user mode, and (system
 * mode) the members of the `admins` setting's group. */
struct peer {
    uid_t uid;
    gid_t gid;
    char name[64];
    bool admin;
};
const struct peer *conn_peer(const struct conn *c);
/* server.c: the peer named by uid (gid (gid_t)-1: the user's primary group), admin worked out as
 * for a connection; false when the user database has no such user (p is then named by the uid). */
bool peer_for_uid(const struct daemon *d, uid_t uid, gid_t gid, struct peer *p);
/* A connection that is not a socket: the HTTP API runs the socket's ops as a token's user
 * through one (daemon/api.c). read_only: ops that write are refused with code 4. Such a
 * connection never gets a deferred reply (ops that defer are not offered over HTTP). */
struct conn *conn_virtual(struct daemon *d, const struct peer *p, bool read_only);
void conn_virtual_free(struct conn *c);
bool conn_read_only(const struct conn *c);
/* Whether a reply to c may wait past this callback (a socket client; not the HTTP API's
 * virtual connections). */
bool conn_can_defer(const struct conn *c);

/* ---- daemon/group.c: group commit ------------------------------------------------------- */
/* The submissions read in one turn of the loop share one transaction, committed once at the end
 * of the turn (or before any other transaction begins, or any other request is served); each is
 * acknowledged only after that commit. What is durable when: docs/ARCHITECTURE.md. */
void group_start(struct daemon *d);
void group_stop(struct daemon *d);
/* Whether a submission from c can join the group now (a socket client, nothing left over in
 * d->acts, the daemon not stopping). */
bool group_can_join(const struct daemon *d, const struct conn *c);
/* Opens the group's transaction if none is open, and a savepoint for one submission in it. */
void group_join(struct daemon *d);
/* Writes what core made of the submission (daemon_write_acts) in its savepoint; carried out once
 * the group commits. -1 on a store error. */
int group_write(struct daemon *d);
/* Ends the submission's savepoint: ok, its writes stay and reply goes to c once the group has
 * committed (the op then returns NULL: deferred); not ok, they are undone (the caller answers
 * at once). */
void group_leave(struct daemon *d, bool ok, struct conn *c, json_t *reply);
/* Commits the open group now, if any: the replies go out (or, if the commit failed, an error
 * each, and the daemon stops to recover from its store), and a pass is asked for. */
void group_commit(struct daemon *d);
/* c is closing: what it was owed is dropped (its submissions still commit). */
void group_drop_conn(struct daemon *d, struct conn *c);

json_t *reply_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *reply_ok(void);

#endif
