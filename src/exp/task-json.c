/* An expanded task as the JSON the daemon's exp_run takes (the client sends it; the daemon
 * makes the same for a next round or a generator's proposals). Its keys are the submit request's,
 * in its units (util/request.h: gpus, gpu_mem and mem in bytes, gpu_type, cpus, timeout_ms,
 * stall_ms, off_peak, priority, retries, backoff in ms, env, command, name), plus what only an
 * experiment's tasks have (trial, params, needs). What the template did not give is left out,
 * so the daemon applies its defaults (a trial's retries: EXP_DEFAULT_TRIAL_RETRIES,
 * exp/settings.h). */
#include "exp/template.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static json_t *task_json_strv(char **v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* "K=V" strings as {"K": "V"}. */
static json_t *task_json_env(char **env)
{
    json_t *o = json_object();
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (eq == NULL)
            continue;
        char *k = xstrndup(env[i], (size_t)(eq - env[i]));
        json_object_set_new(o, k, json_string(eq + 1));
        free(k);
    }
    return o;
}

static void task_json_int(json_t *o, const char *key, bool given, long long value)
{
    if (given)
        json_object_set_new(o, key, json_integer((json_int_t)value));
}

json_t *exp_task_to_json(const struct exp_task *t)
{
    json_t *o = json_pack("{s:s,s:i,s:O,s:o}", "name", t->name, "trial", t->trial, "params",
                          t->params ? t->params : json_object(), "command",
                          task_json_strv(t->argv));
    if (o == NULL)
        fatalx("exp_task_to_json: json_pack failed");
    if (t->env != NULL && t->env[0] != NULL)
        json_object_set_new(o, "env", task_json_env(t->env));
    task_json_int(o, "gpus", t->gpus > 0, t->gpus);
    task_json_int(o, "gpu_mem", t->gpu_mem > 0, (long long)t->gpu_mem);
    if (t->gpu_type != NULL)
        json_object_set_new(o, "gpu_type", json_string(t->gpu_type));
    task_json_int(o, "cpus", t->cpus > 0, t->cpus);
    if (t->backend != NULL)
        json_object_set_new(o, "on", json_string(t->backend));
    task_json_int(o, "mem", t->mem > 0, (long long)t->mem);
    task_json_int(o, "timeout_ms", t->timeout_ms > 0, t->timeout_ms);
    task_json_int(o, "stall_ms", t->stall_ms > 0, t->stall_ms);
    if (t->preempt_grace_ms != 0)
        json_object_set_new(o, "preemptible", t->preempt_grace_ms > 0
                                                  ? json_integer(t->preempt_grace_ms)
                                                  : json_true());
    task_json_int(o, "preempt_signal", t->preempt_signal > 0, t->preempt_signal);
    if (t->off_peak)
        json_object_set_new(o, "off_peak", json_true());
    task_json_int(o, "priority", t->has_priority, t->priority);
    task_json_int(o, "retries", t->retries >= 0, t->retries);
    if (t->nbackoff > 0) {
        json_t *backoff = json_array();
        for (int i = 0; i < t->nbackoff; i++)
            json_array_append_new(backoff, json_integer(t->backoff_ms[i]));
        json_object_set_new(o, "backoff", backoff);
    }
    if (t->needs != NULL && t->needs[0] != NULL)
        json_object_set_new(o, "needs", task_json_strv(t->needs));
    return o;
}
