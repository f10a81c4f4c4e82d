/* Creating an experiment's tasks: each task of a request checked against this machine, then the
 * store's rows and core's tasks, in the order their needs give. */
#include "daemon/exp-internal.h"
#include "daemon/ops.h"
#include "daemon/request.h"
#include "exp/settings.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The trial number a task of the request stands for: -1 for the generator, its own "trial",
 * else its position. */
static int exp_insert_trial(json_t *task, size_t i)
{
    json_t *trial = json_object_get(task, "trial");
    if (json_is_true(json_object_get(task, "generator")))
        return -1;
    return json_is_integer(trial) && json_integer_value(trial) >= 0
               ? (int)json_integer_value(trial) : (int)i;
}

/* Pass 0 of exp_insert: the store's rows (the ids come from it). Returns 0 or -1. */
static int exp_insert_rows(struct daemon *d, const char *name, bool pipeline, bool sweep,
                           long long parallel, json_t *tasks, const struct exp_graph *g,
                           struct task_record *recs, int64_t *ids, struct core_dep *deps)
{
    size_t n = json_array_size(tasks);
    json_t *no_params = json_object();
    int rc = 0;
    for (size_t o = 0; o < n && rc == 0; o++) {
        size_t i = g->order[o], ndeps = 0;
        json_t *task = json_array_get(tasks, i), *params = json_object_get(task, "params");
        for (size_t k = g->first[i]; k < g->first[i + 1]; k++)
            deps[ndeps++] = (struct core_dep){ids[g->need[k]], DEP_AFTER_OK, -1};
        recs[i].spec.deps = deps;
        recs[i].spec.ndeps = ndeps;
        recs[i].array_index = sweep ? (int64_t)i : -1;
        recs[i].spec.array_limit = sweep ? (int)parallel : 0;
        rc = store_insert_task(d->store, &recs[i]);
        if (rc == 0)
            rc = store_trial_insert(d->store, name, exp_insert_trial(task, i),
                                    ids[i] = recs[i].spec.id, pipeline ? recs[i].name : NULL,
                                    json_is_object(params) ? params : no_params);
    }
    json_decref(no_params);
    if (rc == 0 && sweep)
        rc = store_set_array(d->store, ids[g->order[0]], ids[g->order[n - 1]]);
    return rc;
}

int exp_insert(struct daemon *d, const char *name, const char *kind, json_t *tasks, json_t *env,
               const char *workdir, long long parallel, const struct exp_graph *checked,
               int64_t **ids_out, char **why)
{
    size_t n = json_array_size(tasks), most = 0;
    bool pipeline = strcmp(kind, "Pipeline") == 0;
    bool sweep = !pipeline && parallel > 0 && n > 1;
    struct exp_graph own = {0};
    const struct exp_graph *g = checked;
    *ids_out = NULL;
    *why = NULL;
    if (g == NULL) {
        if (exp_tasks_check(tasks, pipeline, env, &own, why) < 0)
            return EXP_INSERT_REFUSED;
        g = &own;
    }
    for (size_t i = 0; i < n; i++)
        if (g->first[i + 1] - g->first[i] > most)
            most = g->first[i + 1] - g->first[i];
    struct task_record *recs = xcalloc(n + 1, sizeof *recs);
    int64_t *ids = xcalloc(n + 1, sizeof *ids);
    struct core_dep *deps = xcalloc(most + 1, sizeof *deps); /* one task's, refilled for each */
    core_time now = daemon_now();
    int rc = 0;
    /* Its tasks are the experiment's owner's (the row is written before its first tasks). */
    uid_t owner = 0;
    char *owner_name = NULL;
    store_exp_owner(d->store, name, &owner, &owner_name);
    /* Core knows users by uid: an experiment from before owners were recorded is the daemon's
     * own user's. Its queued limit counts the whole batch. */
    uint32_t user = owner_name ? (uint32_t)owner : (uint32_t)getuid();
    char limit[CORE_WHY_MAX];
    daemon_request_user_limits(d, (uid_t)user);
    if (core_check_submit(d->core, user, n, limit, sizeof limit) < 0) {
        *why = xstrdup(limit);
        rc = EXP_INSERT_REFUSED;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *reply = daemon_request_decode(d, json_array_get(tasks, i), env, workdir,
                                              EXP_DEFAULT_TRIAL_RETRIES, &recs[i]);
        if (reply != NULL) {
            *why = xstrdup(json_string_value(json_object_get(reply, "error")));
            json_decref(reply);
            rc = EXP_INSERT_REFUSED;
        }
        recs[i].spec.submit_time = now;
        recs[i].uid = owner;
        recs[i].user = owner_name;
        recs[i].spec.user = user;
    }
    if (rc == 0 && exp_insert_rows(d, name, pipeline, sweep, parallel, tasks, g, recs, ids,
                                   deps) < 0) {
        *why = xasprintf("cannot store the experiment: %s", store_error(d->store));
        rc = EXP_INSERT_STORE;
    }
    /* Core, once every row is written and the array known: nothing to undo after this. */
    for (size_t o = 0; o < n && rc == 0; o++) {
        size_t i = g->order[o], ndeps = 0;
        for (size_t k = g->first[i]; k < g->first[i + 1]; k++)
            deps[ndeps++] = (struct core_dep){ids[g->need[k]], DEP_AFTER_OK, -1};
        recs[i].spec.deps = deps;
        recs[i].spec.ndeps = ndeps;
        recs[i].spec.array_id = sweep ? ids[g->order[0]] : 0;
        if (core_submit(d->core, &recs[i].spec, now, &d->acts) < 0)
            fatalx("core refused experiment task %lld", (long long)ids[i]);
    }
    for (size_t i = 0; i < n; i++)
        daemon_request_release(&recs[i]);
    free(recs);
    free(deps);
    free(owner_name);
    exp_graph_free(&own);
    if (rc != 0) {
        free(ids);
        ids = NULL;
    }
    *ids_out = ids;
    return rc;
}
