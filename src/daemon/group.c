/* Group commit: the submissions a turn of the event loop reads share one transaction.
 *
 * A submission from a socket client (group_can_join) writes its tasks and their first states
 * inside a savepoint of the group's transaction, hands them to core, and defers its reply. The
 * transaction is committed — one fsync — when the turn ends (the flush event, queued at the
 * priority of the socket's own callbacks, so it runs after those the turn already has), or
 * earlier if anything else is about to begin a transaction (store_on_begin) or another request
 * is to be served (ops_dispatch). Only then are the replies sent, and a scheduling pass asked
 * for: every task is durable before it is acknowledged or started, as without the group. A
 * submission that fails is rolled back to its savepoint and answered at once; the others stand.
 * A kill -9 before the commit loses only submissions nobody was told were accepted.
 *
 * Why: each commit costs an fsync of the WAL; N clients submitting at once (a sweep launched
 * with xargs -P8) paid N of them in a row. With the group they pay one per turn. A lone client
 * sees no difference (its group has one member; the commit happens in the same turn).
 */
#include "daemon/daemon.h"
#include "util/xalloc.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

struct group_member {
    struct conn *conn; /* NULL once it closed */
    json_t *reply;
};

struct group {
    bool open;
    struct group_member *v;
    size_t n, cap;
    struct core_actions written; /* the members' actions, carried out once committed */
    struct event *flush;
};

static void group_on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    group_commit(arg);
}

static void group_before_begin(void *arg)
{
    group_commit(arg);
}

void group_start(struct daemon *d)
{
    d->group = xcalloc(1, sizeof *d->group);
    d->group->flush = event_new(d->base, -1, 0, group_on_flush, d);
    store_on_begin(d->store, group_before_begin, d);
}

void group_stop(struct daemon *d)
{
    if (d->group == NULL)
        return;
    group_commit(d);
    store_on_begin(d->store, NULL, NULL);
    event_free(d->group->flush);
    core_actions_free(&d->group->written);
    free(d->group->v);
    free(d->group);
    d->group = NULL;
}

bool group_can_join(const struct daemon *d, const struct conn *c)
{
    /* Left-over actions (a batch kept after a failed commit) are carried out only after their
     * own commit: a submission then takes the ordinary path, which commits them first. */
    return d->group != NULL && conn_can_defer(c) && !d->stopping && !d->store_lost &&
           d->acts.n == 0 && d->nends == 0;
}

void group_join(struct daemon *d)
{
    struct group *g = d->group;
    if (!g->open) {
        store_begin_group(d->store);
        g->open = true;
        event_active(g->flush, 0, 0);
    }
    store_savepoint(d->store);
}

int group_write(struct daemon *d)
{
    return daemon_write_acts(d, &d->group->written);
}

void group_leave(struct daemon *d, bool ok, struct conn *c, json_t *reply)
{
    struct group *g = d->group;
    store_savepoint_end(d->store, ok);
    if (!ok)
        return;
    xgrow((void **)&g->v, &g->cap, g->n + 1, sizeof *g->v);
    g->v[g->n++] = (struct group_member){c, reply};
}

void group_commit(struct daemon *d)
{
    struct group *g = d->group;
    if (g == NULL || !g->open)
        return;
    g->open = false;
    bool ok = false;
    if (d->store_lost) { /* a member could not be written: nothing of the group is kept */
        store_rollback(d->store);
    } else {
        disk_before_commit(d);
        ok = store_commit(d->store) == 0;
    }
    if (!ok) {
        /* Core already holds the tasks: the daemon stops once the replies are out, and the
         * next start recovers from the store. Whether the store holds them is unknown (a failed
         * fsync of the WAL may follow a commit frame that recovery replays), so the replies
         * say so; a resubmit with the same --key is safe either way. */
        d->stopping = true;
        d->store_lost = true;
    }
    for (size_t i = 0; i < g->n; i++) {
        json_t *reply = g->v[i].reply;
        if (!ok) {
            json_decref(reply);
            reply = reply_error(1, "cannot confirm that the task was stored: %s (the daemon"
                                   " restarts from its store; resubmitting with the same --key"
                                   " is safe)", store_error(d->store));
        }
        if (g->v[i].conn != NULL)
            server_reply(g->v[i].conn, reply);
        else
            json_decref(reply);
    }
    g->n = 0;
    if (ok) {
        daemon_carry_committed(d, &g->written); /* a Slurm task handed over at its submission */
        daemon_kick(d); /* what they allow starts in a pass of its own */
        ops_notify_waiters(d);
    } else {
        core_actions_clear(&g->written);
        event_base_loopexit(d->base, NULL);
    }
}

void group_drop_conn(struct daemon *d, struct conn *c)
{
    struct group *g = d->group;
    for (size_t i = 0; g != NULL && i < g->n; i++)
        if (g->v[i].conn == c)
            g->v[i].conn = NULL;
}
