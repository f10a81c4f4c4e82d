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
#include "gpu/gpu.h"
#include "store/store.h"

/* An attempt that is running: a child of this daemon, or adopted after a restart. */
struct run {
    int64_t task;
    int attempt;
    pid_t pid;          /* supervisor pid; 0 when unknown */
    bool child;         /* our child: SIGCHLD tells; else polled */
    char *run_dir;
    core_time start;
    struct core_placement placement;
    struct run *next;
};

struct waiter; /* a `drover wait` client: daemon/ops.c */

/* An attempt's end, written in the same transaction as the state change it causes. */
struct attempt_end {
    int64_t task;
    int attempt;
    core_time start, end;
    int exit_code, signal;
    const char *outcome;  /* static: succeeded, failed, timed_out, cancelled, exec_error, lost */
    char reason[320];
    bool discard;         /* never started: forget the attempt row */
};

struct daemon {
    char *home;
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
    struct event *poll;       /* adopted supervisors */
    struct event *sigchld, *sigterm, *sigint;
    struct event *zygote;     /* readable when supervisors forked by the zygote exit */
    struct evconnlistener *listener;
    struct run *runs;
    struct attempt_end *ends;
    size_t nends, ends_cap;
    struct waiter *waiters;
    bool stopping;
    int64_t grace_ms;
};

int daemon_main(int argc, char **argv);

/* daemon/runner.c */
core_time daemon_now(void);
/* Commits the accumulated actions, then carries them out. Returns -1 if the commit failed
 * (the daemon then stops: the store is the truth and a restart recovers from it). */
int daemon_apply(struct daemon *d);
/* The same, committing the first batch in the transaction the caller began (so that, e.g., a
 * new task, its first state and its start are one commit), and carrying that batch out only
 * after the caller has answered its client (daemon_on_carry): a submission is acknowledged once
 * it is durable, without waiting for its supervisor to be spawned. */
int daemon_apply_txn(struct daemon *d);
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
void daemon_poll_adopted(struct daemon *d);
/* Restores core from the store and re-adopts running attempts. */
int daemon_restore(struct daemon *d, char **err);

/* daemon/server.c */
int server_listen(struct daemon *d, const char *path, char **err);
void server_close(struct daemon *d);

/* daemon/ops.c: handles one request; returns the reply (new reference), or NULL when the
 * reply is deferred (wait). conn is opaque to ops except for deferred replies. */
struct conn;
json_t *ops_dispatch(struct daemon *d, struct conn *c, json_t *req);
void ops_notify_waiters(struct daemon *d);
void ops_drop_conn(struct daemon *d, struct conn *c);
/* server.c: sends a deferred reply on c (steals the reference). */
void server_reply(struct conn *c, json_t *reply);

json_t *reply_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *reply_ok(void);

#endif
