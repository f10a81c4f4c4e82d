/* exp/expand.c — the tasks of an experiment: a trial is a copy of the spec with its swept values
 * put in, checked again (a sweep may set resources.gpu_count), then substituted as a whole
 * (exp/subst.c); a pipeline is substituted once and gives one task per stage. Tasks are read
 * from the substituted copy; exp_def.spec stays as written (after --set). Each task must fit the
 * exec limits (util/limits.h). */
#include "exp/template-internal.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* --- tasks --- */

static char **expand_strings(const json_t *list)
{
    size_t i;
    const json_t *item;
    char **out = xcalloc(json_array_size(list) + 1, sizeof *out);
    json_array_foreach(list, i, item)
        out[i] = subst_scalar_text(item);
    return out;
}

void expand_strings_free(char **list)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        free(list[i]);
    free(list);
}

/* A stage's own key, or the spec's. */
static const json_t *expand_pick(const json_t *spec, const json_t *stage, const char *key)
{
    const json_t *v = stage ? json_object_get(stage, key) : NULL;
    return v ? v : json_object_get(spec, key);
}

/* A stage's own resource, or the spec's: key by key, so a stage can change just its gpu_count. */
static const json_t *expand_resource(const json_t *spec, const json_t *stage, const char *key)
{
    const json_t *v = stage ? json_object_get(json_object_get(stage, "resources"), key) : NULL;
    return v ? v : json_object_get(json_object_get(spec, "resources"), key);
}

/* The spec's env with the stage's on top, as "K=V" strings. */
static char **expand_env(const json_t *spec, const json_t *stage)
{
    const char *key;
    const json_t *v;
    json_t *env = json_object();
    size_t i = 0;
    if (json_is_object(json_object_get(spec, "env")))
        json_object_update(env, json_object_get(spec, "env"));
    if (stage != NULL && json_is_object(json_object_get(stage, "env")))
        json_object_update(env, json_object_get(stage, "env"));
    char **out = xcalloc(json_object_size(env) + 1, sizeof *out);
    json_object_foreach(env, key, v) {
        char *text = subst_scalar_text(v);
        out[i++] = xasprintf("%s=%s", key, text);
        free(text);
    }
    json_decref(env);
    return out;
}

static void expand_resources(const json_t *spec, const json_t *stage, struct exp_task *task)
{
    const char *why;
    const json_t *v;
    if ((v = expand_resource(spec, stage, "gpu_count")) != NULL)
        task->gpus = (int)json_integer_value(v);
    if ((v = expand_resource(spec, stage, "gpu_memory")) != NULL &&
        schema_size(v, &task->gpu_mem, &why) < 0)
        fatalx("template: gpu_memory unchecked");
    if ((v = expand_resource(spec, stage, "memory")) != NULL &&
        schema_size(v, &task->mem, &why) < 0)
        fatalx("template: memory unchecked");
    if ((v = expand_resource(spec, stage, "gpu_type")) != NULL)
        task->gpu_type = xstrdup(json_string_value(v));
    if ((v = expand_resource(spec, stage, "cpus")) != NULL)
        task->cpus = (int)json_integer_value(v);
    if ((v = expand_resource(spec, stage, "backend")) != NULL)
        task->backend = xstrdup(json_string_value(v));
}

/* retry: N retries, { attempts: N } (N in all), or { retries: N }; and its backoff. Not given:
 * retries stays -1, the daemon's default. */
static void expand_retry(const json_t *retry, struct exp_task *task)
{
    const json_t *attempts = json_object_get(retry, "attempts"), *delay;
    const json_t *retries = json_is_object(retry) ? json_object_get(retry, "retries") : retry;
    const char *why;
    size_t i;
    task->retries = attempts ? (int)json_integer_value(attempts) - 1
                    : retries ? (int)json_integer_value(retries)
                              : -1;
    json_array_foreach(json_object_get(retry, "backoff"), i, delay)
        if (schema_duration(delay, &task->backoff_ms[task->nbackoff++], &why) < 0)
            fatalx("template: backoff unchecked");
}

/* The limits and the place in the queue: timeout, stall, schedule, priority, retry. */
static void expand_limits(const json_t *spec, const json_t *stage, struct exp_task *task)
{
    const char *why;
    const json_t *v;
    if ((v = expand_pick(spec, stage, "timeout")) != NULL &&
        schema_duration(v, &task->timeout_ms, &why) < 0)
        fatalx("template: timeout unchecked");
    if ((v = expand_pick(spec, stage, "stall")) != NULL &&
        schema_duration(v, &task->stall_ms, &why) < 0)
        fatalx("template: stall unchecked");
    if ((v = expand_pick(spec, stage, "preemptible")) != NULL && !json_is_boolean(v) &&
        schema_duration(v, &task->preempt_grace_ms, &why) < 0)
        fatalx("template: preemptible unchecked");
    if (json_is_true(v))
        task->preempt_grace_ms = -1;
    if ((v = expand_pick(spec, stage, "preempt_signal")) != NULL) {
        char num[24];
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        if (parse_signal(json_is_string(v) ? json_string_value(v) : num, &task->preempt_signal,
                         &why) < 0)
            fatalx("template: preempt_signal unchecked");
    }
    if ((v = expand_pick(spec, stage, "schedule")) != NULL)
        task->off_peak = strcmp(json_string_value(v), "off-peak") == 0;
    if ((v = expand_pick(spec, stage, "priority")) != NULL) {
        task->priority = (int)json_integer_value(v);
        task->has_priority = true;
    }
    task->retries = -1;
    if ((v = expand_pick(spec, stage, "retry")) != NULL)
        expand_retry(v, task);
}

/* Fills task from a substituted spec (and stage, for a pipeline: its keys first, the spec's
 * after). The values were checked, so the conversions cannot fail. */
static void expand_fill(const json_t *spec, const json_t *stage, struct exp_task *task)
{
    task->argv = expand_strings(expand_pick(spec, stage, "command"));
    task->env = expand_env(spec, stage);
    expand_resources(spec, stage, task);
    expand_limits(spec, stage, task);
    task->needs = expand_strings(stage ? json_object_get(stage, "needs") : NULL);
}

/* Puts value (a reference it takes) at an existing path below root. */
static void expand_assign(json_t *root, const char *path, json_t *value)
{
    const char *dot = strrchr(path, '.');
    char *suggestion;
    json_t *parent = root;
    const char *last = path;
    if (dot != NULL) {
        char *up = xstrndup(path, (size_t)(dot - path));
        parent = template_lookup(root, up, &suggestion);
        free(suggestion);
        free(up);
        last = dot + 1;
    }
    if (json_is_object(parent))
        json_object_set_new(parent, last, value);
    else if (json_is_array(parent))
        json_array_set_new(parent, strtoul(last, NULL, 10), value);
    else
        fatalx("expand_assign: %s does not exist", path);
}

/* The task's command and environment against the exec limits (util/limits.h), which the daemon
 * checks again with the submitter's environment added; fails at at.command or at.env. */
static int expand_check_exec(struct template *t, const struct exp_task *task, const char *at)
{
    json_t *o = exp_task_to_json(task), *none = json_object();
    json_t *command = json_object_get(o, "command");
    char *why = NULL, *path = NULL;
    if (limits_check_exec(command, none, &why) < 0)
        path = template_join(at, "command");
    else if (json_object_get(o, "env") != NULL &&
             limits_check_exec(command, json_object_get(o, "env"), &why) < 0)
        path = template_join(at, "env");
    if (path != NULL) {
        if (task->trial >= 0)
            template_fail(t, path, 0, "trial %d (%s): %s", task->trial, task->name, why);
        else
            template_fail(t, path, 0, "task %s: %s", task->name, why);
    }
    free(path);
    free(why);
    json_decref(none);
    json_decref(o);
    return t->err ? -1 : 0;
}

/* One trial: params put into a copy of spec, checked again (a sweep may set resources), then
 * substituted. origins (or NULL) names where each value came from, for errors. */
int expand_trial(struct template *t, const json_t *spec, const char *name, int trial,
                 const json_t *params, const json_t *origins, struct exp_task *task)
{
    json_t *copy = json_deep_copy(spec), *done = NULL;
    const char *path;
    const json_t *value;
    memset(task, 0, sizeof *task);
    if (t->overlay != NULL)
        json_object_clear(t->overlay);
    json_object_foreach((json_t *)params, path, value) {
        expand_assign(copy, path, json_deep_copy(value));
        const json_t *origin = origins ? json_object_get(origins, path) : NULL;
        if (origin != NULL && t->overlay != NULL) {
            char *at = template_location(t, json_string_value(origin), 0);
            char *doc = template_join("spec", path);
            json_object_set_new(t->overlay, doc, json_string(at));
            free(doc);
            free(at);
        }
    }
    t->spec = copy;
    if (json_object_size(params) > 0 && schema_check_spec(t, copy) < 0)
        goto fail;
    done = subst_spec(t, copy);
    if (done == NULL)
        goto fail;
    task->name = xasprintf("%s-t%d", name, trial);
    task->trial = trial;
    task->params = json_deep_copy(params);
    expand_fill(done, NULL, task);
    t->spec = NULL;
    json_decref(done);
    json_decref(copy);
    if (expand_check_exec(t, task, "spec") < 0) {
        exp_task_clear(task);
        return -1;
    }
    return 0;
fail:
    t->spec = NULL;
    json_decref(copy);
    return -1;
}

/* Trials [first, first + n) of a checked Experiment spec into *out (n > 0). */
int expand_trials(struct template *t, const json_t *spec, const char *name, size_t first,
                  size_t n, unsigned seed, struct exp_task **out)
{
    const json_t *sweep = json_object_get(spec, "sweep");
    struct exp_task *tasks = xcalloc(n, sizeof *tasks);
    size_t i;
    for (i = 0; i < n; i++) {
        json_t *origins = json_object();
        json_t *params = sweep ? sweep_trial_params(sweep, first + i, sweep_seed(spec, seed),
                                                    origins)
                               : json_object();
        int rc = expand_trial(t, spec, name, (int)(first + i), params, origins, &tasks[i]);
        json_decref(params);
        json_decref(origins);
        if (rc < 0)
            goto fail;
    }
    *out = tasks;
    return 0;
fail:
    while (i-- > 0)
        exp_task_clear(&tasks[i]);
    free(tasks);
    return -1;
}

/* One task per stage of a checked Pipeline spec. */
int expand_pipeline(struct template *t, const json_t *spec, struct exp_task **out, size_t *nout)
{
    json_t *done = subst_spec(t, spec);
    if (done == NULL)
        return -1;
    const json_t *stages = json_object_get(done, "stages"), *stage;
    size_t i;
    struct exp_task *tasks = xcalloc(json_array_size(stages), sizeof *tasks);
    json_array_foreach(stages, i, stage) {
        tasks[i].name = xstrdup(json_string_value(json_object_get(stage, "name")));
        tasks[i].trial = -1;
        tasks[i].params = json_object();
        expand_fill(done, stage, &tasks[i]);
        char *at = template_index("spec.stages", i);
        int rc = expand_check_exec(t, &tasks[i], at);
        free(at);
        if (rc < 0) {
            for (size_t k = 0; k <= i; k++)
                exp_task_clear(&tasks[k]);
            free(tasks);
            json_decref(done);
            return -1;
        }
    }
    *out = tasks;
    *nout = json_array_size(stages);
    json_decref(done);
    return 0;
}
