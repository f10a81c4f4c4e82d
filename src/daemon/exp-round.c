/* What follows a round that did not settle the experiment: the next configurations of the search
 * space, or the generator — an external program, run as a task of the experiment (durable,
 * logged, retried like any task), that reads the history and proposes the next trials. */
#include "daemon/exp-internal.h"
#include "exp/template.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Appends to reason. */
static void exp_round_note(char *reason, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void exp_round_note(char *reason, size_t len, const char *fmt, ...)
{
    size_t used = strlen(reason);
    va_list ap;
    va_start(ap, fmt);
    if (used < len)
        vsnprintf(reason + used, len - used, fmt, ap);
    va_end(ap);
}

/* exp_insert for the daemon's own tasks: 0, 1 (refused: *why), or -1 (the store). */
static int exp_round_insert(struct daemon *d, struct exp_live *e, const char *kind, json_t *list,
                            json_t *env, const char *workdir, int64_t **ids, char **why)
{
    int rc = exp_insert(d, e->name, kind, list, env, workdir, e->settings.parallel, NULL, ids, why);
    if (rc == EXP_INSERT_STORE) {
        free(*why);
        *why = NULL;
        return -1;
    }
    return rc == 0 ? 0 : 1;
}

/* The environment and working directory of the experiment's first task, which the daemon's own
 * tasks inherit (a new reference, or NULL). */
static json_t *exp_round_exec_info(struct daemon *d, const char *name)
{
    int64_t *ids;
    size_t n;
    json_t *info = NULL;
    if (store_exp_task_ids(d->store, name, false, &ids, &n) == 0 && n > 0)
        info = store_task_exec_info(d->store, ids[0]);
    free(ids);
    return info;
}

int exp_next_round(struct daemon *d, struct exp_live *e, json_t *row, char *reason, size_t len,
                   char **why)
{
    json_int_t next = json_integer_value(json_object_get(row, "next_trial"));
    json_int_t space = json_integer_value(json_object_get(row, "space"));
    json_t *info = exp_round_exec_info(d, e->name), *list = json_array();
    size_t n = (size_t)(space - next < next ? space - next : next), ntasks = 0;
    struct exp_task *tasks = NULL;
    int64_t *ids = NULL;
    int rc = 1;
    *why = NULL;
    if (info == NULL)
        *why = xstrdup("the experiment's first task is gone");
    else if (exp_trials(json_object_get(row, "spec"), e->name, (size_t)next, n,
                        (unsigned)json_integer_value(json_object_get(row, "seed")), &tasks,
                        &ntasks, why) < 0)
        ; /* *why says */
    else {
        for (size_t i = 0; i < ntasks; i++)
            json_array_append_new(list, exp_task_to_json(&tasks[i]));
        rc = exp_round_insert(d, e, "Experiment", list, json_object_get(info, "env"),
                              json_string_value(json_object_get(info, "workdir")), &ids, why);
    }
    if (rc == 0 && store_exp_set_next(d->store, e->name, next + (json_int_t)ntasks) < 0)
        rc = -1;
    if (rc == 0)
        exp_round_note(reason, len, "; next round: trials %lld-%lld", (long long)next,
                       (long long)(next + (json_int_t)ntasks - 1));
    if (rc == 1) {
        char *full = xasprintf("%s; the next round failed: %s", reason, *why ? *why : "?");
        free(*why);
        *why = full;
    }
    for (size_t i = 0; i < ntasks; i++)
        exp_task_clear(&tasks[i]);
    free(tasks);
    free(ids);
    json_decref(list);
    json_decref(info);
    return rc;
}

int exp_start_generator(struct daemon *d, struct exp_live *e, json_t *row, const char *verdict,
                        char *reason, size_t len, char **why)
{
    json_t *info = exp_round_exec_info(d, e->name);
    char *dir = xasprintf("%s/experiments", d->home), *path = NULL;
    int64_t *ids = NULL;
    int rc = 1;
    *why = NULL;
    if (info == NULL || e->settings.generator == NULL) {
        *why = xstrdup("cannot start the generator: it has no command");
        goto out;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        *why = xasprintf("cannot start the generator: cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    path = xasprintf("%s/%s.history.%lld.json", dir, e->name,
                     (long long)json_integer_value(json_object_get(row, "next_trial")));
    json_t *history = json_pack("{s:s,s:O,s:o,s:s}", "experiment", e->name, "spec",
                                json_object_get(row, "spec"), "trials",
                                store_exp_trials(d->store, e->name, NULL, true, daemon_now()),
                                "why", verdict);
    int dumped = json_dump_file(history, path, JSON_INDENT(2));
    json_decref(history);
    if (dumped < 0) {
        *why = xasprintf("cannot start the generator: cannot write %s", path);
        goto out;
    }
    /* sh feeds the history on stdin; the generator's own argv follows untouched. */
    json_t *argv = json_pack("[s,s,s,s]", "sh", "-c", "exec \"$@\" < \"$DROVER_EXP_HISTORY\"",
                             "sh");
    json_array_extend(argv, e->settings.generator);
    json_t *task = json_pack("{s:s,s:i,s:b,s:o,s:o,s:{s:s}}", "name", "generator", "trial", -1,
                             "generator", 1, "params", json_object(), "command", argv, "env",
                             "DROVER_EXP_HISTORY", path);
    json_t *list = json_pack("[o]", task);
    rc = exp_round_insert(d, e, "Pipeline", list, json_object_get(info, "env"),
                          json_string_value(json_object_get(info, "workdir")), &ids, why);
    json_decref(list);
    if (rc == 0)
        exp_round_note(reason, len, "; the generator (task %lld) proposes the next trials",
                       (long long)ids[0]);
    else if (rc == 1) {
        char *full = xasprintf("cannot start the generator: %s", *why ? *why : "?");
        free(*why);
        *why = full;
    }
out:
    free(ids);
    json_decref(info);
    free(dir);
    free(path);
    return rc;
}

/* Each proposal ({"path": value}) made a trial of the spec, from trial number next on, into
 * list. Returns 0, or -1 with *why (malloc'd). */
static int exp_proposals_to_tasks(struct exp_live *e, json_t *row, json_t *proposals,
                                  json_t *list, char **why)
{
    json_int_t next = json_integer_value(json_object_get(row, "next_trial"));
    json_t *p;
    size_t i;
    json_array_foreach(proposals, i, p) {
        struct exp_task t;
        char *err = NULL;
        if (!json_is_object(p) || exp_trial_from(json_object_get(row, "spec"), e->name,
                                                 (int)(next + (json_int_t)i), p, &t, &err) < 0) {
            *why = xasprintf("the generator's trial %zu: %s", i,
                             err ? err : "not an object of parameters");
            free(err);
            return -1;
        }
        json_array_append_new(list, exp_task_to_json(&t));
        exp_task_clear(&t);
    }
    return 0;
}

int exp_read_proposals(struct daemon *d, struct exp_live *e, json_t *row, int64_t task,
                       enum task_state state, json_t **tasks, char **why)
{
    *tasks = NULL;
    if (state != TASK_SUCCEEDED) {
        *why = xasprintf("the generator (task %lld) %s", (long long)task, task_state_name(state));
        return -1;
    }
    json_t *info = store_task_json(d->store, task);
    const char *run_dir = json_string_value(json_object_get(info, "run_dir"));
    char *path = run_dir ? xasprintf("%s/stdout", run_dir) : NULL;
    json_error_t jerr;
    json_t *out = path ? json_load_file(path, JSON_DECODE_ANY, &jerr) : NULL;
    json_t *proposals = json_is_object(out) ? json_object_get(out, "trials") : out;
    json_t *list = json_array();
    int rc = -1;
    if (!json_is_array(proposals))
        *why = xasprintf("the generator's output is not a JSON list of trials%s%s",
                         out == NULL && path ? ": " : "", out == NULL && path ? jerr.text : "");
    else if (exp_proposals_to_tasks(e, row, proposals, list, why) == 0)
        rc = (int)json_array_size(list);
    if (rc >= 0)
        *tasks = json_incref(list);
    json_decref(list);
    json_decref(out);
    json_decref(info);
    free(path);
    return rc;
}

int exp_run_proposed(struct daemon *d, struct exp_live *e, json_t *row, int64_t generator,
                     json_t *tasks, char *reason, size_t len, char **why)
{
    json_int_t next = json_integer_value(json_object_get(row, "next_trial"));
    json_t *exec = store_task_exec_info(d->store, generator);
    json_t *env = json_deep_copy(json_object_get(exec, "env"));
    int64_t *ids = NULL;
    json_object_del(env, "DROVER_EXP_HISTORY");
    int rc = exp_round_insert(d, e, "Experiment", tasks, env,
                              json_string_value(json_object_get(exec, "workdir")), &ids, why);
    if (rc == 0 && store_exp_set_next(d->store, e->name,
                                      next + (json_int_t)json_array_size(tasks)) < 0)
        rc = -1;
    if (rc == 0)
        exp_round_note(reason, len, " (trials %lld-%lld)", (long long)next,
                       (long long)(next + (json_int_t)json_array_size(tasks) - 1));
    else if (rc == 1) {
        char *full = xasprintf("the generator's trials: %s", *why ? *why : "?");
        free(*why);
        *why = full;
    }
    free(ids);
    json_decref(env);
    json_decref(exec);
    return rc;
}
