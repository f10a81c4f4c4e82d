/* An expanded task as the JSON the daemon's exp_run takes (the client sends it; the daemon
 * makes the same for a next round or a generator's proposals). */
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

json_t *exp_task_to_json(const struct exp_task *t)
{
    json_t *env = json_object();
    for (size_t i = 0; t->env && t->env[i]; i++) {
        const char *eq = strchr(t->env[i], '=');
        if (eq == NULL)
            continue;
        char *k = xstrndup(t->env[i], (size_t)(eq - t->env[i]));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    json_t *backoff = json_array();
    for (int i = 0; i < t->nbackoff; i++)
        json_array_append_new(backoff, json_integer(t->backoff_ms[i]));
    json_t *o = json_pack("{s:s,s:i,s:O,s:o,s:o,s:i,s:I,s:I,s:i,s:I,s:i,s:o,s:o}", "name",
                          t->name, "trial", t->trial, "params",
                          t->params ? t->params : json_object(), "command",
                          task_json_strv(t->argv), "env", env, "gpus", t->gpus, "gpu_mem",
                          (json_int_t)t->gpu_mem, "mem", (json_int_t)t->mem, "cpus", t->cpus,
                          "timeout_ms", (json_int_t)t->timeout_ms, "retries", t->retries,
                          "backoff", backoff, "needs", task_json_strv(t->needs));
    if (o == NULL)
        fatalx("exp_task_to_json: json_pack failed");
    if (t->gpu_type)
        json_object_set_new(o, "gpu_type", json_string(t->gpu_type));
    return o;
}
