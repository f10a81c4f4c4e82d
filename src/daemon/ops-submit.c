/* submit, retry and gpus: the operations that build tasks or read the machine. */
#include "daemon/ops.h"
#include "daemon/owner.h"
#include "daemon/request.h"
#include "util/parse.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A submission: its task, as daemon/request.c made it of the request (which
 * request_check_submit(), the code the CLI runs too, has checked), and what belongs to the
 * submission rather than to the task: dependencies and the array. */
struct submit {
    struct task_record rec;
    struct core_dep *deps;
    json_t *array;     /* array of indices, or NULL */
    json_t *reply_err;
};

static int submit_deps(struct daemon *d, json_t *req, struct submit *s)
{
    int64_t *ok, *any;
    size_t nok, nany;
    if (ops_get_ids(req, "after", &ok, &nok, &s->reply_err) < 0)
        return -1;
    if (ops_get_ids(req, "after_any", &any, &nany, &s->reply_err) < 0) {
        free(ok);
        return -1;
    }
    s->deps = xcalloc(nok + nany + 1, sizeof *s->deps);
    for (size_t i = 0; i < nok + nany; i++) {
        int64_t id = i < nok ? ok[i] : any[i - nok];
        int live = core_task_state(d->core, id), state = ops_task_state(d, id);
        if (state < 0) {
            s->reply_err = reply_error(2, "unknown task id %lld in --%s", (long long)id,
                                       i < nok ? "after" : "after-any");
            break;
        }
        s->deps[i] = (struct core_dep){id, i < nok ? DEP_AFTER_OK : DEP_AFTER_ANY,
                                       live >= 0 ? -1 : state};
    }
    s->rec.spec.deps = s->deps;
    s->rec.spec.ndeps = nok + nany;
    free(ok);
    free(any);
    return s->reply_err ? -1 : 0;
}

static void submit_array(json_t *req, struct submit *s)
{
    json_t *a = json_object_get(req, "array");
    s->array = json_object_get(a, "index"); /* NULL when a is absent or null */
    s->rec.spec.array_limit = (int)json_integer_value(json_object_get(a, "limit"));
}

static json_t *submit_ids_reply(struct daemon *d, int64_t first, size_t n, bool existing)
{
    json_t *ids = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(ids, json_integer(first + (json_int_t)i));
    return json_pack("{s:b,s:I,s:o,s:b}", "ok", 1, "id", (json_int_t)first, "ids", ids,
                     "existing", existing);
}

/* Inserts every task of the submission, in the caller's transaction. */
static int submit_store(struct daemon *d, struct submit *s, size_t count, int64_t *first)
{
    for (size_t i = 0; i < count; i++) {
        s->rec.array_index = s->array ? json_integer_value(json_array_get(s->array, i)) : -1;
        if (i > 0)
            s->rec.key = NULL; /* the key names the whole submission, held by its first task */
        if (store_insert_task(d->store, &s->rec) < 0)
            return -1;
        if (i == 0)
            *first = s->rec.spec.id;
    }
    if (s->array && store_set_array(d->store, *first, *first + (int64_t)count - 1) < 0)
        return -1;
    return 0;
}

static int submit_audit(struct daemon *d, struct conn *c, int64_t first, size_t count)
{
    char target[64];
    if (count == 1)
        snprintf(target, sizeof target, "task %lld", (long long)first);
    else
        snprintf(target, sizeof target, "tasks %lld-%lld", (long long)first,
                 (long long)first + (long long)count - 1);
    return ops_audit(d, c, "submit", target, NULL);
}

json_t *op_submit(struct daemon *d, struct conn *c, json_t *req)
{
    struct submit s;
    memset(&s, 0, sizeof s);
    json_t *reply = NULL;
    char *why;
    const char *field;
    if (request_check_submit_field(req, &why, &field) < 0) {
        reply = reply_error(2, "%s", why);
        if (field != NULL) /* for the HTTP API's {"error", "field"}; the CLI ignores it */
            json_object_set_new(reply, "field", json_string(field));
        free(why);
        return reply;
    }
    if ((reply = daemon_request_decode(d, req, NULL, NULL, d->cfg.default_retries, &s.rec)))
        return reply;
    const struct peer *who = conn_peer(c);
    s.rec.uid = who->uid; /* the owner is who the kernel says connected, nothing the client sent */
    s.rec.user = who->name;
    int enter = s.rec.workdir ? daemon_owner_can_enter(who->name, who->uid, who->gid,
                                                       s.rec.workdir, &why) : 1;
    if (enter != 1) { /* the task would run as its owner, in its owner's working directory */
        reply = reply_error(enter == 0 ? 2 : 1, "%s", why);
        free(why);
        goto out;
    }
    if (s.rec.spec.priority > 0 && !ops_admin_only(d, c, "a priority above 0", &reply))
        goto out; /* in system mode users may lower their own priority, not raise it */
    submit_array(req, &s);
    size_t count = s.array ? json_array_size(s.array) : 1;
    bool group = group_can_join(d, c);
    int64_t first = s.rec.key ? store_find_key(d->store, s.rec.key, who->uid) : 0;
    if (first > 0) {
        reply = submit_ids_reply(d, first, count, true);
        if (group) { /* it may be a submission of the open group: answered with it */
            group_join(d);
            group_leave(d, true, c, reply);
            reply = NULL;
        }
        goto out;
    }
    if (submit_deps(d, req, &s) < 0)
        goto out;
    if ((reply = disk_refusal(d)) != NULL) /* a full disk: nothing is stored (daemon/disk.c) */
        goto out;
    /* Fair share and the user's limits (core/users.c): the owner's limits as the settings
     * have them now, and its queued limit checked before anything is stored. */
    s.rec.spec.user = (uint32_t)who->uid;
    daemon_request_user_limits(d, who->uid);
    char limit[CORE_WHY_MAX];
    if (core_check_submit(d->core, s.rec.spec.user, count, limit, sizeof limit) < 0) {
        reply = reply_error(1, "%s", limit);
        goto out;
    }
    s.rec.spec.submit_time = daemon_now();
    if (group) {
        /* The tasks and their first states in the turn's shared transaction (daemon/group.c);
         * the reply waits for its commit, and what they allow starts in a pass after it. */
        group_join(d);
        if (submit_store(d, &s, count, &first) < 0 || submit_audit(d, c, first, count) < 0) {
            s.reply_err = reply_error(1, "cannot store the task: %s", store_error(d->store));
            group_leave(d, false, c, NULL);
            goto out;
        }
        for (size_t i = 0; i < count; i++) {
            s.rec.spec.id = first + (int64_t)i;
            s.rec.spec.array_id = s.array ? first : 0;
            if (core_submit(d->core, &s.rec.spec, s.rec.spec.submit_time, &d->acts) < 0)
                fatalx("core refused task %lld that the store accepted",
                       (long long)s.rec.spec.id);
        }
        if (group_write(d) < 0) {
            /* Core holds the tasks already: as a failed commit, the daemon stops and recovers
             * from its store; the whole group is answered so when it commits or fails. */
            s.reply_err = reply_error(1, "cannot store the task: %s", store_error(d->store));
            d->store_lost = true;
            d->stopping = true;
            group_leave(d, false, c, NULL);
            event_base_loopexit(d->base, NULL);
            goto out;
        }
        group_leave(d, true, c, submit_ids_reply(d, first, count, false));
        goto out;
    }
    /* One transaction: the tasks, their first states and whatever starts at once. The reply
     * comes only after the commit. */
    store_begin(d->store);
    if (submit_store(d, &s, count, &first) < 0 || submit_audit(d, c, first, count) < 0) {
        s.reply_err = reply_error(1, "cannot store the task: %s", store_error(d->store));
        store_rollback(d->store);
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        s.rec.spec.id = first + (int64_t)i;
        s.rec.spec.array_id = s.array ? first : 0;
        if (core_submit(d->core, &s.rec.spec, s.rec.spec.submit_time, &d->acts) < 0)
            fatalx("core refused task %lld that the store accepted", (long long)s.rec.spec.id);
    }
    core_schedule(d->core, daemon_now(), &d->acts);
    if (daemon_apply_txn(d) < 0) {
        /* Core already holds the task: the daemon stops once this reply is out, and the next
         * start recovers from the store. Whether the store holds the task is unknown: a failed
         * fsync of the WAL may follow a commit frame that recovery later replays (the fault
         * test, t-fault-store.sh, sees both), so the reply says so; a resubmit with the same
         * --key is safe either way. */
        reply = reply_error(1, "cannot confirm that the task was stored: %s (the daemon restarts"
                               " from its store; resubmitting with the same --key is safe)",
                            store_error(d->store));
        d->stopping = true;
    } else {
        reply = submit_ids_reply(d, first, count, false);
    }
out:
    daemon_request_release(&s.rec);
    free(s.deps);
    return reply ? reply : s.reply_err;
}

/* Brings one ended task back with a fresh retry budget. */
int ops_retry_task(struct daemon *d, int64_t id)
{
    struct core_task_spec spec;
    struct core_dep *deps = NULL;
    char *gpu_type = NULL;
    if (store_reset_for_retry(d->store, id) < 0 ||
        store_task_spec(d->store, id, &spec, &deps, &gpu_type) < 0)
        return -1;
    spec.req.gpu_types = daemon_request_restored_types(d, id, gpu_type);
    free(gpu_type);
    for (size_t i = 0; i < spec.ndeps; i++)
        if (core_task_state(d->core, deps[i].id) >= 0)
            deps[i].state = -1; /* revived in this same retry */
    spec.retry_base = spec.attempts;
    int rc = core_submit(d->core, &spec, daemon_now(), &d->acts);
    free(deps);
    return rc;
}

/* drover retry ID: the task runs again, and so does every task that became upstream_failed
 * because of it (transitively), so fixing a failed preprocessing step revives the pipeline. */
json_t *op_retry(struct daemon *d, struct conn *c, json_t *req)
{
    long long id;
    json_t *err;
    if (ops_get_int(req, "id", 1, INT64_MAX, 0, &id, &err) < 0)
        return err;
    int state = ops_task_state(d, id);
    if (!ops_may_task(d, c, id, &err))
        return err;
    if (core_task_state(d->core, id) >= 0)
        return reply_error(1, "task %lld has not ended (%s): nothing to retry", id,
                           task_state_name(state));
    int64_t *queue = xmalloc(sizeof *queue);
    size_t n = 1, cap = 1, revived = 0;
    queue[0] = id;
    store_begin(d->store);
    for (size_t i = 0; i < n; i++) {
        int64_t *more;
        size_t nmore;
        if (core_task_state(d->core, queue[i]) >= 0)
            continue;
        if (ops_retry_task(d, queue[i]) < 0 ||
            store_upstream_failed_dependents(d->store, queue[i], &more, &nmore) < 0) {
            store_rollback(d->store);
            free(queue);
            return reply_error(1, "cannot retry task %lld: %s", id, store_error(d->store));
        }
        revived++;
        xgrow((void **)&queue, &cap, n + nmore, sizeof *queue);
        if (nmore > 0)
            memcpy(queue + n, more, nmore * sizeof *more);
        n += nmore;
        free(more);
    }
    free(queue);
    char target[48], detail[48];
    snprintf(target, sizeof target, "task %lld", id);
    snprintf(detail, sizeof detail, "%zu tasks revived", revived);
    if (ops_audit(d, c, "retry", target, detail) < 0) {
        store_rollback(d->store);
        d->store_lost = d->stopping = true; /* core holds the revived tasks: recover */
        return reply_error(1, "cannot retry task %lld: %s", id, store_error(d->store));
    }
    if (store_commit(d->store) < 0 || daemon_apply(d) < 0)
        return reply_error(1, "the daemon could not commit the retry");
    daemon_kick(d);
    return json_pack("{s:b,s:I}", "ok", 1, "revived", (json_int_t)revived);
}

json_t *op_gpus(struct daemon *d, struct conn *c, json_t *req)
{
    return telemetry_snapshot(d);
}
