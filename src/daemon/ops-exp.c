/* The experiment requests: exp_run (and its dry run), exp_ls, exp_show, exp_stop, exp_resume.
 * Every argument is checked before anything changes; what changes an experiment's state goes
 * through the lifecycle (exp_event), in one transaction with what it does to the tasks. */
#include "daemon/exp-internal.h"
#include "daemon/ops.h"
#include "daemon/owner.h"
#include "daemon/request.h"
#include "exp/settings.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What to do when the name is taken: advice that works as written. */
#define EXP_EXISTS_ADVICE                                                                      \
    "experiment %s exists already: run the template again under another name with --set"     \
    " metadata.name=%s-2 (or change metadata.name in it)"
#define EXP_DRY_RUN_PROBLEMS 20 /* problems a dry run lists before it only counts them */

static const char *ops_exp_str(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key));
}

/* An experiment's full name (malloc'd; NULL when req has none). Names are unique per owner: the
 * experiments of the daemon's own user (every one, in per-user mode) keep the template's name;
 * another user's are "USER/NAME". A name given with a '/' is taken as it is (alice may show
 * bob/sweep1); one without is the asker's own. */
static char *ops_exp_name(struct conn *c, json_t *req)
{
    const char *name = ops_exp_str(req, "name");
    const struct peer *who = conn_peer(c);
    if (name == NULL)
        return NULL;
    if (strchr(name, '/') != NULL || who->uid == getuid())
        return xstrdup(name);
    return xasprintf("%s/%s", who->name, name);
}

/* The template's name of a full name: what --set metadata.name= takes. */
static const char *exp_base_name(const char *name)
{
    const char *slash = strrchr(name, '/');
    return slash ? slash + 1 : name;
}

/* The owner's directory under archive/ (experiments named USER/NAME are archived in
 * archive/USER/NAME: exp-validate.c makes the last level). Best effort: a failure shows when
 * the archive is written. */
static void ops_exp_archive_dir(struct daemon *d, const char *name)
{
    const char *slash = strchr(name, '/');
    if (slash == NULL)
        return;
    char *root = xasprintf("%s/archive", d->home);
    char *dir = xasprintf("%s/%.*s", root, (int)(slash - name), name);
    if (mkdir(root, 0700) == 0 || errno == EEXIST)
        (void)mkdir(dir, 0700);
    free(root);
    free(dir);
}

/* Whether the peer of c may stop or resume experiment name (owner or admin). */
static bool ops_exp_may(struct daemon *d, struct conn *c, const char *name, json_t **reply)
{
    uid_t uid = getuid();
    char *user = NULL, *what = xasprintf("experiment %s", name);
    store_exp_owner(d->store, name, &uid, &user);
    bool ok = ops_may(d, c, user ? uid : getuid(), user ? user : store_own_user(), what, reply);
    free(user);
    free(what);
    return ok;
}

/* The dry run: every check a real run makes of each task against this machine (the same
 * daemon_request_decode as submit), nothing stored. Problems are listed, not refused: the client shows them
 * all at once. */
static json_t *exp_dry_run(struct daemon *d, const char *name, json_t *tasks, json_t *env,
                           const char *workdir)
{
    json_t *problems = json_array(), *task;
    size_t i, more = 0;
    if (store_exp_exists(d->store, name))
        json_array_append_new(problems,
                              json_sprintf(EXP_EXISTS_ADVICE, name, exp_base_name(name)));
    json_array_foreach(tasks, i, task) {
        struct task_record rec;
        json_t *err = daemon_request_decode(d, task, env, workdir, EXP_DEFAULT_TRIAL_RETRIES,
                                            &rec);
        if (err == NULL)
            daemon_request_release(&rec);
        if (err == NULL)
            continue;
        if (json_array_size(problems) < EXP_DRY_RUN_PROBLEMS)
            json_array_append(problems, json_object_get(err, "error"));
        else
            more++;
        json_decref(err);
    }
    if (more > 0)
        json_array_append_new(problems, json_sprintf("and %zu more tasks that cannot run here",
                                                     more));
    return json_pack("{s:b,s:b,s:I,s:o}", "ok", 1, "dry_run", 1, "tasks",
                     (json_int_t)json_array_size(tasks), "problems", problems);
}

static int exp_run_audit(struct daemon *d, struct conn *c, const char *name)
{
    char *target = xasprintf("experiment %s", name);
    int rc = ops_audit(d, c, "exp_run", target, NULL);
    free(target);
    return rc;
}

json_t *op_exp_run(struct daemon *d, struct conn *c, json_t *req)
{
    char *full = ops_exp_name(c, req);
    const char *name = full, *kind = ops_exp_str(req, "kind");
    const char *workdir = ops_exp_str(req, "workdir");
    json_t *spec = json_object_get(req, "spec"), *tasks = json_object_get(req, "tasks");
    json_t *env = json_object_get(req, "env"), *dry = json_object_get(req, "dry_run");
    json_t *reply = NULL;
    long long parallel, space, seed;
    struct exp_graph graph;
    char *why;
    /* The checks the CLI made, made again: a client may send anything (exp/request.c). */
    if (exp_request_check(req, &graph, &why) < 0) {
        reply = reply_error(2, "%s", why);
        free(why);
        free(full);
        return reply;
    }
    json_t *task;
    size_t i;
    json_array_foreach(tasks, i, task) /* as for submit: raising a priority is for admins */
        if (json_integer_value(json_object_get(task, "priority")) > 0 &&
            !ops_admin_only(d, c, "a priority above 0", &reply))
            goto out;
    if (ops_get_int(req, "parallel", 0, 1000000, 0, &parallel, &reply) < 0 ||
        ops_get_int(req, "space", 0, INT64_MAX, 0, &space, &reply) < 0 ||
        ops_get_int(req, "seed", 0, UINT32_MAX, 0, &seed, &reply) < 0)
        goto out;
    if (dry != NULL && !json_is_null(dry) && !json_is_boolean(dry)) {
        reply = reply_error(2, "'dry_run' must be true or false");
        goto out;
    }
    if (json_is_true(dry)) {
        reply = exp_dry_run(d, name, tasks, env, workdir);
        goto out;
    }
    if (store_exp_exists(d->store, name)) {
        reply = reply_error(2, EXP_EXISTS_ADVICE, name, exp_base_name(name));
        goto out;
    }
    /* Its tasks run as its owner in workdir: refused now, as a submit is, if the owner cannot
     * enter it (daemon/owner.c). */
    const struct peer *owner = conn_peer(c);
    int enter = daemon_owner_can_enter(owner->name, owner->uid, owner->gid, workdir, &why);
    if (enter != 1) {
        reply = reply_error(enter == 0 ? 2 : 1, "%s", why);
        free(why);
        goto out;
    }
    struct exp_facts facts = {.name = name};
    struct exp_decision created;
    if (exp_lifecycle_decide(EXP_CREATED, EXP_EV_CREATE, &facts, &created) < 0)
        fatalx("%s", created.reason);
    size_t n = json_array_size(tasks);
    int64_t *ids = NULL;
    int rc = EXP_INSERT_STORE;
    store_begin(d->store);
    const struct peer *who = conn_peer(c);
    if (store_exp_insert(d->store, name, kind, spec, exp_state_name(created.to), seed,
                         (int64_t)n, space, daemon_now()) < 0 ||
        store_exp_set_owner(d->store, name, who->uid, who->name) < 0 ||
        exp_run_audit(d, c, name) < 0)
        why = xasprintf("cannot store the experiment: %s", store_error(d->store));
    else
        rc = exp_insert(d, name, kind, tasks, env, workdir, parallel, &graph, &ids, &why);
    if (rc == 0) /* /api/v1/events: published if this commits */
        events_stage_experiment(d, name, exp_state_name(created.to), NULL);
    if (rc != 0) {
        store_rollback(d->store);
        reply = reply_error(rc == EXP_INSERT_REFUSED ? 2 : 1, "%s", why);
        free(why);
        goto out;
    }
    core_schedule(d->core, daemon_now(), &d->acts);
    if (daemon_apply_txn(d) < 0) {
        free(ids);
        d->stopping = true;
        reply = reply_error(1, "cannot confirm that the experiment was stored: %s (see drover"
                               " exp ls once the daemon has restarted)", store_error(d->store));
        goto out;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_integer(ids[i]));
    free(ids);
    ops_exp_archive_dir(d, name);
    reply = json_pack("{s:b,s:s,s:o}", "ok", 1, "name", name, "ids", list);
out:
    exp_graph_free(&graph);
    free(full);
    return reply;
}

json_t *op_exp_ls(struct daemon *d, struct conn *c, json_t *req)
{
    return json_pack("{s:b,s:o}", "ok", 1, "experiments", store_exp_list(d->store));
}

json_t *op_exp_show(struct daemon *d, struct conn *c, json_t *req)
{
    char *full = ops_exp_name(c, req);
    if (full == NULL)
        return reply_error(2, "exp_show needs a name");
    /* "sweep1" of a user is USER/sweep1, or else the daemon's own user's sweep1. */
    if (!store_exp_exists(d->store, full) && strchr(ops_exp_str(req, "name"), '/') == NULL) {
        free(full);
        full = xstrdup(ops_exp_str(req, "name"));
    }
    const char *name = full;
    struct exp_live *live = exp_live_get(d, name);
    json_t *e = live ? store_exp_get(d->store, name) : NULL;
    if (e == NULL) {
        json_t *err = reply_error(2, "no experiment %s", name);
        json_object_set_new(err, "not_found", json_true());
        free(full);
        return err;
    }
    const struct exp_settings *s = &live->settings;
    json_object_set_new(e, "metric", s->board_metric ? json_string(s->board_metric) : json_null());
    json_object_set_new(e, "mode", json_string(s->board_maximize ? "max" : "min"));
    json_object_set_new(e, "trials", store_exp_trials(d->store, name, s->board_metric,
                                                      s->board_maximize, daemon_now()));
    json_object_set_new(e, "ok", json_true());
    free(full);
    return e;
}

/* How many tasks a stop or resume in state would act on: the live ones a stop cancels, the held
 * ones a resume releases, the ones a stop cancelled that a resume queues again. *busy gets a
 * task that a stop cancelled and that has not exited yet (0 if none). -1 on a store error. */
static long long exp_control_count(struct daemon *d, const char *name, enum exp_event ev,
                                   enum exp_state state, int64_t *busy)
{
    int64_t *ids;
    size_t n;
    long long count = 0;
    bool marked = ev == EXP_EV_RESUME && state == EXP_STOPPED;
    *busy = 0;
    if ((marked ? store_exp_task_ids(d->store, name, true, &ids, &n)
                : exp_live_tasks(d, name, &ids, &n)) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int st = core_task_state(d->core, ids[i]);
        if (marked && st == TASK_CANCELLED && *busy == 0)
            *busy = ids[i];
        count += ev == EXP_EV_STOP || (marked ? st < 0 : st == TASK_HELD);
    }
    free(ids);
    return count;
}

static json_t *exp_control(struct daemon *d, struct conn *c, const char *name,
                           enum exp_event ev)
{
    struct exp_live *e = exp_live_get(d, name);
    json_t *row = e ? store_exp_get(d->store, name) : NULL, *err;
    if (row == NULL) {
        err = reply_error(2, "no experiment %s", name);
        json_object_set_new(err, "not_found", json_true());
        return err;
    }
    if (!ops_exp_may(d, c, name, &err)) {
        json_decref(row);
        return err;
    }
    int parsed = exp_state_parse(json_string_value(json_object_get(row, "state")));
    json_decref(row);
    if (parsed < 0)
        return reply_error(1, "experiment %s is in a state this daemon does not know", name);
    enum exp_state state = (enum exp_state)parsed;
    int64_t busy;
    long long count = exp_control_count(d, name, ev, state, &busy);
    if (count < 0)
        return reply_error(1, "cannot read experiment %s: %s", name, store_error(d->store));
    if (busy > 0)
        return reply_error(1, "cannot resume experiment %s yet: task %lld, which the stop"
                              " cancelled, has not exited; try again once it has", name,
                           (long long)busy);
    char *refusal = NULL;
    size_t before = d->acts.n;
    store_begin(d->store);
    char *target = xasprintf("experiment %s", name);
    int audited = ops_audit(d, c, ev == EXP_EV_STOP ? "exp_stop" : "exp_resume", target, NULL);
    free(target);
    if (audited < 0 || exp_event(d, e, &state, ev, NULL, &refusal) < 0) {
        json_t *reply = reply_error(1, "cannot record it: %s", store_error(d->store));
        store_rollback(d->store);
        if (d->acts.n != before) { /* core holds what the store lost: recover from the store */
            d->store_lost = true;
            d->stopping = true;
        }
        return reply;
    }
    if (refusal != NULL) {
        store_rollback(d->store);
        json_t *reply = reply_error(1, "%s", refusal);
        free(refusal);
        return reply;
    }
    core_schedule(d->core, daemon_now(), &d->acts);
    if (daemon_apply_txn(d) < 0) {
        d->stopping = true;
        return reply_error(1, "cannot confirm that it was recorded: %s (the daemon restarts from"
                              " its store)", store_error(d->store));
    }
    return json_pack("{s:b,s:I,s:s}", "ok", 1, "tasks", (json_int_t)count, "state",
                     exp_state_name(state));
}

/* stop and resume: the asker's own experiment of that name, else the daemon's user's. */
static json_t *exp_control_named(struct daemon *d, struct conn *c, json_t *req,
                                 enum exp_event ev)
{
    char *full = ops_exp_name(c, req);
    if (full == NULL)
        return reply_error(2, "needs an experiment name");
    if (!store_exp_exists(d->store, full) && strchr(ops_exp_str(req, "name"), '/') == NULL) {
        free(full);
        full = xstrdup(ops_exp_str(req, "name"));
    }
    json_t *reply = exp_control(d, c, full, ev);
    free(full);
    return reply;
}

json_t *op_exp_stop(struct daemon *d, struct conn *c, json_t *req)
{
    return exp_control_named(d, c, req, EXP_EV_STOP);
}

json_t *op_exp_resume(struct daemon *d, struct conn *c, json_t *req)
{
    return exp_control_named(d, c, req, EXP_EV_RESUME);
}
