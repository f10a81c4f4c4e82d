/* submit, retry and gpus: the operations that build tasks or read the machine. */
#include "daemon/learn.h"
#include "daemon/ops.h"
#include "util/parse.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(REQUEST_MAX_BACKOFF <= CORE_MAX_BACKOFF, "backoff values fit core's");

/* Everything a submit request carries. request_check_submit() (util/request.c, the code the
 * CLI runs too) has checked its shape and ranges before any of it is read. */
struct submit {
    struct task_record rec;
    struct core_dep *deps;
    json_t *array;     /* array of indices, or NULL */
    json_t *reply_err;
    char *profile;     /* owned */
};

/* req[key], checked: a string or NULL. */
static const char *submit_string(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key));
}

/* req[key], checked: a whole number or absent (0). */
static long long submit_int(json_t *req, const char *key)
{
    return json_integer_value(json_object_get(req, key));
}

static void submit_command(json_t *req, struct submit *s)
{
    json_t *env = json_object_get(req, "env");
    s->rec.command = json_object_get(req, "command");
    s->rec.env = json_is_object(env) ? json_incref(env) : json_object();
}

/* The profile a task's GPU use is learned under (--profile, else its command line), and its
 * claim: declared (--gpu-mem), whole GPUs (--exclusive, or nothing learned yet), or learned —
 * the peak of the profile's recent successful attempts plus the claim margin. */
static void submit_claim(struct daemon *d, json_t *req, struct submit *s)
{
    struct core_request *r = &s->rec.spec.req;
    const char *profile = submit_string(req, "profile");
    bool exclusive = json_is_true(json_object_get(req, "exclusive"));
    s->profile = profile ? xasprintf("%s", profile)
                         : json_dumps(json_object_get(req, "command"), JSON_COMPACT);
    s->rec.profile = s->profile;
    if (r->gpus == 0)
        return;
    if (r->gpu_mem > 0) {
        s->rec.claim_source = "declared";
        return;
    }
    uint64_t peak = exclusive ? 0 : store_profile_peak(d->store, s->profile);
    uint64_t smallest = UINT64_MAX;
    for (int g = 0; g < d->gpus.count; g++)
        if (d->gpus.gpu[g].mem_total < smallest)
            smallest = d->gpus.gpu[g].mem_total;
    r->gpu_mem = learn_claim(peak, d->cfg.claim_margin, smallest);
    if (r->gpu_mem > 0)
        s->rec.claim_source = "learned";
}

static int submit_request(struct daemon *d, json_t *req, struct submit *s)
{
    struct core_task_spec *sp = &s->rec.spec;
    sp->req = (struct core_request){.gpus = (int)submit_int(req, "gpus"),
                                    .gpu_mem = (uint64_t)submit_int(req, "gpu_mem"),
                                    .cpus = (int)submit_int(req, "cpus"),
                                    .mem = (uint64_t)submit_int(req, "mem"),
                                    .time_limit = submit_int(req, "timeout_ms")};
    sp->priority = (int)submit_int(req, "priority");
    sp->max_retries = (int)submit_int(req, "retries");
    if (sp->req.gpu_mem > 0 && sp->req.gpus == 0)
        sp->req.gpus = 1; /* --gpu-mem alone asks for one shared GPU */
    s->rec.stall_ms = submit_int(req, "stall_ms");
    submit_claim(d, req, s);
    const char *why;
    if (core_check_request(d->core, &sp->req, &why) < 0) {
        s->reply_err = reply_error(2, "%s", why);
        return -1;
    }
    json_t *backoff = json_object_get(req, "backoff"), *e;
    size_t i;
    json_array_foreach(backoff, i, e)
        sp->backoff[sp->nbackoff++] = json_integer_value(e);
    sp->hold = json_is_true(json_object_get(req, "hold"));
    return 0;
}

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
    s->rec.spec.array_limit = (int)submit_int(a, "limit");
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

json_t *op_submit(struct daemon *d, struct conn *c, json_t *req)
{
    struct submit s;
    memset(&s, 0, sizeof s);
    json_t *reply = NULL;
    char *why;
    if (request_check_submit(req, &why) < 0) {
        reply = reply_error(2, "%s", why);
        free(why);
        return reply;
    }
    s.rec.name = submit_string(req, "name");
    s.rec.key = submit_string(req, "key");
    s.rec.workdir = submit_string(req, "workdir");
    submit_command(req, &s);
    submit_array(req, &s);
    if (submit_request(d, req, &s) < 0)
        goto out;
    size_t count = s.array ? json_array_size(s.array) : 1;
    int64_t first = s.rec.key ? store_find_key(d->store, s.rec.key) : 0;
    if (first > 0) {
        reply = submit_ids_reply(d, first, count, true);
        goto out;
    }
    if (submit_deps(d, req, &s) < 0)
        goto out;
    if ((reply = disk_refusal(d)) != NULL) /* a full disk: nothing is stored (daemon/disk.c) */
        goto out;
    s.rec.spec.submit_time = daemon_now();
    /* One transaction: the tasks, their first states and whatever starts at once. The reply
     * comes only after the commit. */
    store_begin(d->store);
    if (submit_store(d, &s, count, &first) < 0) {
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
    json_decref(s.rec.env);
    free(s.deps);
    free(s.profile);
    return reply ? reply : s.reply_err;
}

/* Brings one ended task back with a fresh retry budget. */
static int retry_one(struct daemon *d, int64_t id)
{
    struct core_task_spec spec;
    struct core_dep *deps = NULL;
    if (store_reset_for_retry(d->store, id) < 0 ||
        store_task_spec(d->store, id, &spec, &deps) < 0)
        return -1;
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
    if (state < 0)
        return reply_error(2, "no task %lld", id);
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
        if (retry_one(d, queue[i]) < 0 ||
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
    if (store_commit(d->store) < 0 || daemon_apply(d) < 0)
        return reply_error(1, "the daemon could not commit the retry");
    daemon_kick(d);
    return json_pack("{s:b,s:I}", "ok", 1, "revived", (json_int_t)revived);
}

json_t *op_gpus(struct daemon *d, struct conn *c, json_t *req)
{
    return telemetry_snapshot(d);
}
