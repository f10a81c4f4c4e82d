/* The daemon's operations: one handler per request "op", behind a table. Every argument is
 * type-checked before anything changes (a submit's by util/request.c, the code the CLI runs
 * too); a bad one gets an error reply (code 2) and changes nothing. */
#include "daemon/daemon.h"
#include "util/proto.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/ops.h"

struct waiter {
    struct conn *conn;
    int64_t *ids;
    size_t n, next; /* ids[0..next) have ended */
    struct waiter *link;
};

/* The state of any task, live or ended; -1 if there is no such task. */
int ops_task_state(struct daemon *d, int64_t id)
{
    int s = core_task_state(d->core, id);
    return s >= 0 ? s : store_task_state(d->store, id);
}

/* Reads an array of positive task ids from req[key] (absent = empty). */
int ops_get_ids(json_t *req, const char *key, int64_t **ids, size_t *n, json_t **err)
{
    json_t *v = json_object_get(req, key), *e;
    size_t i;
    *ids = NULL;
    *n = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v)) {
        *err = reply_error(2, "'%s' must be an array of task ids", key);
        return -1;
    }
    *ids = xcalloc(json_array_size(v) + 1, sizeof **ids);
    json_array_foreach(v, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) <= 0) {
            free(*ids);
            *ids = NULL;
            *err = reply_error(2, "'%s' must be an array of task ids", key);
            return -1;
        }
        (*ids)[(*n)++] = json_integer_value(e);
    }
    return 0;
}

/* Reads req[key] as an integer in [min, max]; absent = def. */
int ops_get_int(json_t *req, const char *key, long long min, long long max, long long def,
                long long *out, json_t **err)
{
    json_t *v = json_object_get(req, key);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        *err = reply_error(2, "'%s' must be a whole number from %lld to %lld", key, min, max);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* Reads req[key] as true or false; absent or null = def. */
static int ops_get_bool(json_t *req, const char *key, bool def, bool *out, json_t **err)
{
    json_t *v = json_object_get(req, key);
    if (v != NULL && !json_is_null(v) && !json_is_boolean(v)) {
        *err = reply_error(2, "'%s' must be true or false", key);
        return -1;
    }
    *out = v == NULL || json_is_null(v) ? def : json_is_true(v);
    return 0;
}

static json_t *op_ping(struct daemon *d, struct conn *c, json_t *req)
{
    return json_pack("{s:b,s:i,s:i,s:s,s:b}", "ok", 1, "pid", (int)getpid(), "gpus",
                     d->gpus.count, "home", d->home, "draining", core_draining(d->core));
}

/* ---- who may do what --------------------------------------------------------------------- */

/* The owner of a task: its recorded uid and name, or the daemon's own user when none is
 * recorded. Returns -1 if there is no such task. */
static int ops_task_owner(struct daemon *d, int64_t id, uid_t *uid, char *name, size_t len)
{
    json_t *info = store_task_exec_info(d->store, id);
    if (info == NULL)
        return -1;
    json_t *u = json_object_get(info, "uid");
    *uid = u ? (uid_t)json_integer_value(u) : getuid();
    snprintf(name, len, "%s", u ? json_string_value(json_object_get(info, "user"))
                                : store_own_user());
    json_decref(info);
    return 0;
}

bool ops_may(struct daemon *d, struct conn *c, uid_t owner, const char *owner_name,
             const char *what, json_t **reply)
{
    const struct peer *who = conn_peer(c);
    if (who->admin || who->uid == owner)
        return true;
    *reply = reply_error(OPS_NOT_PERMITTED, "not permitted: %s belongs to %s", what, owner_name);
    return false;
}

bool ops_may_task(struct daemon *d, struct conn *c, int64_t id, json_t **reply)
{
    uid_t uid;
    char name[64], what[48];
    if (ops_task_owner(d, id, &uid, name, sizeof name) < 0) {
        *reply = reply_error(2, "no task %lld", (long long)id);
        json_object_set_new(*reply, "not_found", json_true());
        return false;
    }
    snprintf(what, sizeof what, "task %lld", (long long)id);
    return ops_may(d, c, uid, name, what, reply);
}

bool ops_admin_only(struct daemon *d, struct conn *c, const char *what, json_t **reply)
{
    if (!d->cfg.system || conn_peer(c)->admin)
        return true;
    *reply = reply_error(OPS_NOT_PERMITTED, "not permitted: %s is for admins (root and the"
                         " members of the admins group)", what);
    return false;
}

int ops_audit(struct daemon *d, struct conn *c, const char *op, const char *target,
              const char *detail)
{
    const struct peer *who = conn_peer(c);
    return store_audit(d->store, daemon_now(), who->uid, who->name, op, target, detail);
}

/* Reads the owner filter of ls: "mine" (the peer, as the kernel named it) or "user" (a name,
 * or a uid in decimal). */
static int ops_owner_filter(struct conn *c, json_t *req, struct store_list_filter *f,
                            json_t **err)
{
    json_t *user = json_object_get(req, "user");
    bool mine;
    if (ops_get_bool(req, "mine", false, &mine, err) < 0)
        return -1;
    if (user && !json_is_null(user) && !json_is_string(user)) {
        *err = reply_error(2, "'user' must be a user name");
        return -1;
    }
    if (mine) {
        f->by_owner = true;
        f->uid = conn_peer(c)->uid;
    } else if (json_is_string(user)) {
        const char *name = json_string_value(user);
        struct passwd *pw = getpwnam(name);
        char *end;
        unsigned long n = strtoul(name, &end, 10);
        f->user = name;
        if (pw != NULL) {
            f->by_owner = true;
            f->uid = pw->pw_uid;
        } else if (*name != '\0' && *end == '\0') {
            f->by_owner = true;
            f->uid = (uid_t)n;
        }
    }
    return 0;
}

/* Each listed task's "why" (null for one that does not wait), from one look at the queue. */
static void ops_why_tasks(struct daemon *d, json_t *tasks)
{
    size_t n = json_array_size(tasks), i;
    int64_t *ids = xcalloc(n + 1, sizeof *ids);
    json_t *t;
    json_array_foreach(tasks, i, t)
        ids[i] = json_integer_value(json_object_get(t, "id"));
    json_t *why = daemon_why(d, ids, n, NULL);
    json_array_foreach(tasks, i, t)
        json_object_set(t, "why", json_array_get(why, i));
    json_decref(why);
    free(ids);
}

/* The same for a brief listing: a "why" column. */
static void ops_why_brief(struct daemon *d, json_t *reply)
{
    json_t *columns = json_object_get(reply, "columns"), *rows = json_object_get(reply, "tasks");
    size_t n = json_array_size(rows), i, at = SIZE_MAX;
    json_t *c, *row;
    json_array_foreach(columns, i, c)
        if (strcmp(json_string_value(c), "id") == 0)
            at = i;
    int64_t *ids = xcalloc(n + 1, sizeof *ids);
    json_array_foreach(rows, i, row)
        ids[i] = json_integer_value(json_array_get(row, at));
    json_t *why = daemon_why(d, ids, n, NULL);
    json_array_append_new(columns, json_string("why"));
    json_array_foreach(rows, i, row)
        json_array_append(row, json_array_get(why, i));
    json_decref(why);
    free(ids);
}

static json_t *op_ls(struct daemon *d, struct conn *c, json_t *req)
{
    json_t *state = json_object_get(req, "state");
    if (state && !json_is_null(state) &&
        (!json_is_string(state) || task_state_parse(json_string_value(state)) < 0))
        return reply_error(2, "unknown state '%s' (one of held, pending, queued, running,"
                              " retrying, succeeded, failed, timed_out, cancelled,"
                              " upstream_failed)",
                           json_is_string(state) ? json_string_value(state) : "?");
    struct store_list_filter f = {.state = state ? json_string_value(state) : NULL};
    bool brief;
    long long limit, offset;
    json_t *err;
    if (ops_get_bool(req, "all", false, &f.all, &err) < 0 ||
        ops_get_bool(req, "brief", false, &brief, &err) < 0 ||
        ops_get_int(req, "limit", 0, INT64_MAX, 0, &limit, &err) < 0 ||
        ops_get_int(req, "offset", 0, INT64_MAX, 0, &offset, &err) < 0 ||
        ops_owner_filter(c, req, &f, &err) < 0)
        return err;
    f.limit = limit;
    f.offset = offset;
    if (brief) { /* {"columns": [...], "tasks": [[...], ...]} */
        json_t *reply = store_list_brief(d->store, &f, daemon_now());
        ops_why_brief(d, reply);
        json_object_set_new(reply, "ok", json_true());
        return reply;
    }
    if (limit == 0 && offset == 0) {
        json_t *tasks = store_list_json(d->store, &f, daemon_now());
        ops_why_tasks(d, tasks);
        return json_pack("{s:b,s:o}", "ok", 1, "tasks", tasks);
    }
    int64_t total; /* a page: and how many there are in all */
    json_t *page = store_list_page(d->store, &f, daemon_now(), &total);
    ops_why_tasks(d, page);
    return json_pack("{s:b,s:o,s:I}", "ok", 1, "tasks", page, "total", (json_int_t)total);
}

static json_t *op_show(struct daemon *d, struct conn *c, json_t *req)
{
    long long id;
    json_t *err;
    bool logs;
    if (ops_get_int(req, "id", 1, INT64_MAX, 0, &id, &err) < 0 ||
        ops_get_bool(req, "logs", false, &logs, &err) < 0)
        return err;
    /* Anyone may show any task; `drover logs` asks for it to read the output, which only its
     * owner and admins may (the run directory's mode is what keeps the content: this refusal
     * is the one clear line and exit 4 in front of it). */
    if (logs && !ops_may_task(d, c, id, &err))
        return err;
    json_t *task = store_task_json(d->store, id);
    if (task == NULL) {
        err = reply_error(2, "no task %lld", id);
        json_object_set_new(err, "not_found", json_true());
        return err;
    }
    /* Why a task that has not started waits (core/why.c), in full. */
    int64_t one = id;
    json_t *why = daemon_why(d, &one, 1, task);
    json_object_set(task, "why", json_array_get(why, 0));
    /* The reason shown beside a queued or pending task's state is why it waits now; a held or
     * retrying one keeps how it got there ("attempt 1: exit code 3; retrying in 5s"). */
    const char *state = json_string_value(json_object_get(task, "state"));
    if (json_is_string(json_array_get(why, 0)) && state != NULL &&
        (strcmp(state, "queued") == 0 || strcmp(state, "pending") == 0) &&
        json_is_null(json_object_get(task, "slurm_state")))
        json_object_set(task, "reason", json_array_get(why, 0));
    json_decref(why);
    return json_pack("{s:b,s:o}", "ok", 1, "task", task);
}

typedef int (*core_user_fn)(struct core *, int64_t, core_time, struct core_actions *,
                            const char **);

static json_t *each_finish(struct daemon *d, json_t *failures, bool lost);

/* The request's "ids": at least one, each the peer's (or the peer an admin). NULL with *ids
 * (malloc'd) and *n, or an error reply. */
static json_t *each_ids(struct daemon *d, struct conn *c, json_t *req, int64_t **ids, size_t *n)
{
    json_t *err = NULL;
    if (ops_get_ids(req, "ids", ids, n, &err) < 0)
        return err;
    if (*n == 0)
        err = reply_error(2, "no task ids given");
    for (size_t i = 0; i < *n && err == NULL; i++)
        if (!ops_may_task(d, c, (*ids)[i], &err)) /* it set err */
            break;
    if (err != NULL) {
        free(*ids);
        *ids = NULL;
    }
    return err;
}

/* cancel, hold and release: all ids must exist and be the peer's (or the peer an admin);
 * each is applied in turn, and audited in the transaction of its change. */
static json_t *op_each(struct daemon *d, struct conn *c, json_t *req, core_user_fn fn,
                       const char *verb)
{
    int64_t *ids;
    size_t n;
    json_t *err = each_ids(d, c, req, &ids, &n);
    if (err != NULL)
        return err;
    json_t *failures = json_array();
    bool lost = false;
    store_begin(d->store);
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        int state = core_task_state(d->core, ids[i]);
        if (state < 0 || task_state_terminal(state)) {
            state = ops_task_state(d, ids[i]);
            json_array_append_new(failures, json_sprintf("cannot %s task %lld: it has already"
                                                         " ended (%s)", verb,
                                                         (long long)ids[i],
                                                         task_state_name(state)));
        } else if (fn(d->core, ids[i], daemon_now(), &d->acts, &why) < 0) {
            json_array_append_new(failures, json_sprintf("cannot %s task %lld: %s", verb,
                                                         (long long)ids[i], why));
        } else if (!lost) {
            char target[48];
            snprintf(target, sizeof target, "task %lld", (long long)ids[i]);
            lost = ops_audit(d, c, verb, target, NULL) < 0;
        }
    }
    free(ids);
    return each_finish(d, failures, lost);
}

/* Commits what op_each or op_priority changed and answers: ok, or the first of failures (each
 * a line naming a task it could not change; the others were changed). Takes failures. */
static json_t *each_finish(struct daemon *d, json_t *failures, bool lost)
{
    json_t *err;
    /* The audit records and the changes are one transaction (daemon_apply_txn): a failure
     * loses both while core holds the changes, so the daemon stops and recovers from the store,
     * as after a submission that could not be committed. */
    if (lost) {
        store_rollback(d->store);
        d->store_lost = true;
    }
    if (lost || daemon_apply_txn(d) < 0) {
        d->stopping = true;
        json_decref(failures);
        return reply_error(1, "the daemon could not commit the change: %s (it restarts from its"
                              " store)", store_error(d->store));
    }
    daemon_kick(d);
    if (json_array_size(failures) > 0) {
        char *msg = xstrdup(json_string_value(json_array_get(failures, 0)));
        json_decref(failures);
        err = reply_error(1, "%s", msg);
        free(msg);
        return err;
    }
    json_decref(failures);
    return reply_ok();
}

static json_t *op_cancel(struct daemon *d, struct conn *c, json_t *req)
{
    return op_each(d, c, req, core_cancel, "cancel");
}

static json_t *op_hold(struct daemon *d, struct conn *c, json_t *req)
{
    return op_each(d, c, req, core_hold, "hold");
}

static json_t *op_release(struct daemon *d, struct conn *c, json_t *req)
{
    return op_each(d, c, req, core_release, "release");
}

/* priority: like op_each, for tasks that have not started; in system mode a priority above 0
 * is for admins, as at submit (users may lower their own). */
static json_t *op_priority(struct daemon *d, struct conn *c, json_t *req)
{
    const struct request_field *field = request_field("priority");
    long long priority;
    int64_t *ids;
    size_t n;
    json_t *err = NULL;
    if (json_object_get(req, "priority") == NULL)
        return reply_error(2, "no priority given");
    if (ops_get_int(req, "priority", field->min, field->max, 0, &priority, &err) < 0 ||
        (err = each_ids(d, c, req, &ids, &n)) != NULL)
        return err;
    if (priority > 0 && !ops_admin_only(d, c, "a priority above 0", &err)) {
        free(ids);
        return err;
    }
    json_t *failures = json_array();
    bool lost = false;
    char detail[32];
    snprintf(detail, sizeof detail, "priority %lld", priority);
    store_begin(d->store);
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        int state = core_task_state(d->core, ids[i]);
        if (state < 0 || task_state_terminal(state)) {
            json_array_append_new(failures, json_sprintf("cannot change the priority of task"
                                                         " %lld: it has already ended (%s)",
                                                         (long long)ids[i],
                                                         task_state_name(ops_task_state(d,
                                                                                 ids[i]))));
        } else if (core_set_priority(d->core, ids[i], (int)priority, &why) < 0) {
            json_array_append_new(failures, json_sprintf("cannot change the priority of task"
                                                         " %lld: %s", (long long)ids[i], why));
        } else if (!lost) {
            char target[48];
            snprintf(target, sizeof target, "task %lld", (long long)ids[i]);
            lost = store_set_priority(d->store, ids[i], (int)priority) < 0 ||
                   ops_audit(d, c, "priority", target, detail) < 0;
        }
    }
    free(ids);
    return each_finish(d, failures, lost);
}

static json_t *op_drain(struct daemon *d, struct conn *c, json_t *req)
{
    bool on;
    json_t *err;
    if (ops_get_bool(req, "on", true, &on, &err) < 0)
        return err;
    if (!ops_admin_only(d, c, on ? "drain" : "undrain", &err))
        return err;
    store_begin(d->store);
    if (store_set_setting(d->store, "draining", on ? "1" : "0") < 0 ||
        ops_audit(d, c, on ? "drain" : "undrain", NULL, NULL) < 0 ||
        store_commit(d->store) < 0) {
        store_rollback(d->store);
        return reply_error(1, "cannot record the drain: %s", store_error(d->store));
    }
    core_set_drain(d->core, on);
    if (!on) {
        telemetry_undrain(d); /* GPUs taken out of service after a fault come back too */
        daemon_kick(d);
    }
    return reply_ok();
}

static json_t *op_shutdown(struct daemon *d, struct conn *c, json_t *req)
{
    json_t *err;
    if (!ops_admin_only(d, c, "shutdown", &err))
        return err;
    store_begin(d->store);
    if (ops_audit(d, c, "shutdown", NULL, NULL) < 0 || store_commit(d->store) < 0)
        store_rollback(d->store); /* the shutdown goes on; its record is lost */
    d->stopping = true;
    return reply_ok();
}

/* ---- wait -------------------------------------------------------------------------------- */

static bool waiter_done(struct daemon *d, struct waiter *w)
{
    while (w->next < w->n) {
        int s = ops_task_state(d, w->ids[w->next]);
        if (s >= 0 && !task_state_terminal(s))
            return false;
        if (s >= 0 && core_task_state(d->core, w->ids[w->next]) >= 0)
            return false; /* ended, but its attempt is still being stopped */
        w->next++;
    }
    return true;
}

static json_t *waiter_reply(struct daemon *d, struct waiter *w)
{
    json_t *tasks = json_array();
    bool all = true;
    for (size_t i = 0; i < w->n; i++) {
        int s = ops_task_state(d, w->ids[i]);
        all &= s == TASK_SUCCEEDED;
        json_array_append_new(tasks, json_pack("{s:I,s:s}", "id", (json_int_t)w->ids[i],
                                               "state", s >= 0 ? task_state_name(s) : "?"));
    }
    return json_pack("{s:b,s:o,s:b}", "ok", 1, "tasks", tasks, "all_succeeded", all);
}

static json_t *op_wait(struct daemon *d, struct conn *c, json_t *req)
{
    struct waiter *w = xcalloc(1, sizeof *w);
    json_t *err = NULL;
    if (ops_get_ids(req, "ids", &w->ids, &w->n, &err) < 0 || w->n == 0) {
        free(w->ids);
        free(w);
        return err ? err : reply_error(2, "no task ids given");
    }
    for (size_t i = 0; i < w->n; i++) {
        if (ops_task_state(d, w->ids[i]) < 0) {
            err = reply_error(2, "no task %lld", (long long)w->ids[i]);
            free(w->ids);
            free(w);
            return err;
        }
    }
    if (waiter_done(d, w)) {
        json_t *r = waiter_reply(d, w);
        free(w->ids);
        free(w);
        return r;
    }
    w->conn = c;
    w->link = d->waiters;
    d->waiters = w;
    return NULL;
}

void ops_notify_waiters(struct daemon *d)
{
    for (struct waiter **p = &d->waiters; *p;) {
        struct waiter *w = *p;
        if (!waiter_done(d, w)) {
            p = &w->link;
            continue;
        }
        *p = w->link;
        server_reply(w->conn, waiter_reply(d, w));
        free(w->ids);
        free(w);
    }
}

void ops_drop_conn(struct daemon *d, struct conn *c)
{
    group_drop_conn(d, c);
    for (struct waiter **p = &d->waiters; *p;) {
        struct waiter *w = *p;
        if (w->conn != c) {
            p = &w->link;
            continue;
        }
        *p = w->link;
        free(w->ids);
        free(w);
    }
}

/* ---- dispatch ---------------------------------------------------------------------------- */

json_t *op_whoami(struct daemon *d, struct conn *c, json_t *req); /* daemon/server.c */

/* new_work: an op that stores new work (attempts, an experiment). While the disk is full these
 * are refused before anything changes (daemon/disk.c); reading, cancelling and holding stay
 * possible. submit refuses by itself, after its checks and after answering a repeated --key.
 * reads: it changes nothing, so a read-only API token may ask it (daemon/api.c). */
static const struct op_entry {
    const char *name;
    json_t *(*fn)(struct daemon *, struct conn *, json_t *);
    bool new_work, reads;
} ops_table[] = {
    {"ping", op_ping, false, true},         {"submit", op_submit, false, false},
    {"ls", op_ls, false, true},             {"show", op_show, false, true},
    {"cancel", op_cancel, false, false},    {"retry", op_retry, true, false},
    {"hold", op_hold, false, false},        {"release", op_release, false, false},
    {"priority", op_priority, false, false},
    {"wait", op_wait, false, true},         {"gpus", op_gpus, false, true},
    {"drain", op_drain, false, false},      {"shutdown", op_shutdown, false, false},
    {"exp_run", op_exp_run, true, false},   {"exp_ls", op_exp_ls, false, true},
    {"exp_show", op_exp_show, false, true}, {"exp_stop", op_exp_stop, false, false},
    {"exp_resume", op_exp_resume, true, false},
    {"whoami", op_whoami, false, true},
    {"audit", op_audit, false, true},       {"users", op_users, false, true},
    /* daemon/ops-token.c: a read-only token may list tokens, nothing more */
    {"token_create", op_token_create, false, false},
    {"token_ls", op_token_ls, false, true},
    {"token_revoke", op_token_revoke, false, false},
    {"login_code", op_login_code, false, false},
};

json_t *ops_dispatch(struct daemon *d, struct conn *c, json_t *req)
{
    json_t *v = json_object_get(req, "v"), *op = json_object_get(req, "op"), *refused;
    if (!json_is_integer(v) || json_integer_value(v) != PROTO_VERSION)
        return reply_error(2, "unsupported protocol version (this daemon speaks %d)",
                           PROTO_VERSION);
    if (!json_is_string(op))
        return reply_error(2, "request has no 'op'");
    for (size_t i = 0; i < sizeof ops_table / sizeof ops_table[0]; i++) {
        if (strcmp(ops_table[i].name, json_string_value(op)) != 0)
            continue;
        if (!ops_table[i].reads && conn_read_only(c))
            return reply_error(OPS_NOT_PERMITTED, "not permitted: a read-only token may only"
                               " read");
        if (ops_table[i].new_work && (refused = disk_refusal(d)) != NULL)
            return refused;
        /* Any other request sees, and acts on, only what is committed: the turn's
         * submissions are committed (and answered) first (daemon/group.c). */
        if (ops_table[i].fn != op_submit)
            group_commit(d);
        return ops_table[i].fn(d, c, req);
    }
    return reply_error(2, "unknown request '%s'", json_string_value(op));
}
