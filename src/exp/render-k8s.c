/* exp/render-k8s.c — an experiment as Kubernetes objects: a ConfigMap of the trials and batch/v1
 * Jobs (exp/render.h says what maps to what). Nothing here knows a cluster: the objects are JSON,
 * exp/render-yaml.c writes them. */
#include "exp/render.h"
#include "exp/settings.h"
#include "exp/template-internal.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What one render shares: where errors point, and the label for GPU types. */
struct render {
    const struct exp_def *def;
    const char *file;
    const char *gpu_label;
    json_t *common; /* render_env_common: the env every trial shares */
    char *err;
};

/* --- names and labels --- */

static uint32_t render_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

char *render_k8s_name(const char *name, size_t max)
{
    size_t len = strlen(name), n = 0;
    char *out = xmalloc(len + 16);
    for (const char *p = name; *p; p++) {
        char c = (char)tolower((unsigned char)*p);
        if (!isalnum((unsigned char)c) || (unsigned char)*p >= 0x80)
            c = '-';
        if (c == '-' && (n == 0 || out[n - 1] == '-'))
            continue; /* no leading '-', no runs */
        out[n++] = c;
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = '\0';
    if (n > 0 && n <= max && strcmp(out, name) == 0)
        return out;
    /* Changed: keep what fits, then the hash, so "Train_A" and "train-a" stay apart. */
    size_t keep = max > 9 ? max - 9 : 0;
    if (n > keep)
        n = keep;
    while (n > 0 && out[n - 1] == '-')
        n--;
    snprintf(out + n, len + 16 - n, "%s%08x", n > 0 ? "-" : "d", render_hash(name));
    return out;
}

/* A label value, or the name part of a key: [A-Za-z0-9._-], at most 63, alphanumeric at both
 * ends (empty allowed for a value). */
static bool render_label_part_ok(const char *s, size_t len)
{
    if (len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = c < 0x80 && isalnum(c);
        if (!alnum && (i == 0 || i == len - 1 || strchr("._-", c) == NULL))
            return false;
    }
    return true;
}

bool render_label_value_ok(const char *value)
{
    return render_label_part_ok(value, strlen(value));
}

/* [PREFIX/]NAME: PREFIX a DNS-1123 subdomain (at most 253), NAME non-empty. */
bool render_label_key_ok(const char *key)
{
    const char *slash = strchr(key, '/');
    const char *name = slash ? slash + 1 : key;
    if (*name == '\0' || !render_label_part_ok(name, strlen(name)))
        return false;
    if (slash == NULL)
        return true;
    size_t plen = (size_t)(slash - key);
    if (plen == 0 || plen > 253 || key[0] == '.' || key[0] == '-' || key[plen - 1] == '.' ||
        key[plen - 1] == '-')
        return false;
    for (size_t i = 0; i < plen; i++)
        if (!(islower((unsigned char)key[i]) || isdigit((unsigned char)key[i]) ||
              key[i] == '-' || key[i] == '.'))
            return false;
    return true;
}

__attribute__((format(printf, 2, 3))) static int render_fail(struct render *r, const char *fmt,
                                                             ...)
{
    if (r->err != NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    r->err = xasprintf("%s: %s", r->file, msg);
    free(msg);
    return -1;
}

/* --- values --- */

/* Kubernetes expands $(VAR) in a container's command, args and env values, and "$$" is a "$":
 * a template's string stays as written when every '$' is doubled. */
static json_t *render_literal(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++)
        n += *p == '$';
    char *out = xmalloc(strlen(s) + n + 1), *o = out;
    for (const char *p = s; *p; p++) {
        *o++ = *p;
        if (*p == '$')
            *o++ = '$';
    }
    *o = '\0';
    json_t *j = json_string(out);
    free(out);
    return j;
}

/* Bytes as a quantity: "512Mi", "16Gi", or a plain number of bytes. */
static json_t *render_bytes(uint64_t bytes)
{
    static const char *const unit[] = {"Ti", "Gi", "Mi", "Ki"};
    for (int i = 0; i < 4; i++) {
        uint64_t size = 1ULL << (10 * (4 - i));
        if (bytes % size == 0)
            return json_sprintf("%llu%s", (unsigned long long)(bytes / size), unit[i]);
    }
    return json_sprintf("%llu", (unsigned long long)bytes);
}

static json_t *render_env_var(const char *name, json_t *value)
{
    return json_pack("{s:s,s:o}", "name", name, "value", value);
}

/* One of drover's own variables (exec/ sets them locally): a template may not set these. */
static bool render_ours(const char *name)
{
    static const char *const ours[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                       "DROVER_TASK_ID", "DROVER_ATTEMPT",
                                       "DROVER_CHECKPOINT_DIR", "DROVER_ARRAY_INDEX",
                                       "DROVER_METRICS_FILE"};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (strcmp(name, ours[i]) == 0)
            return true;
    return false;
}

/* The "K=V" strings that are the same in every trial (they go into the pod; the others into
 * each trial's script), as a set: {"K=V": true}. Linear in the trials' env. New reference. */
static json_t *render_env_common(const struct exp_def *def)
{
    json_t *common = json_object();
    for (char **e = def->ntasks > 0 ? def->tasks[0].env : NULL; e && *e; e++)
        json_object_set_new(common, *e, json_true());
    for (size_t i = 1; i < def->ntasks && json_object_size(common) > 0; i++) {
        json_t *here = json_object();
        const char *kv;
        json_t *value, *tmp;
        for (char **e = def->tasks[i].env; e && *e; e++)
            json_object_set_new(here, *e, json_true());
        json_object_foreach_safe(common, tmp, kv, value)
            if (json_object_get(here, kv) == NULL)
                json_object_del(common, kv);
        json_decref(here);
    }
    return common;
}

/* drover's variables, then the task's env (all of it, or with indexed the part every trial
 * shares). index < 0: no array; INDEXED: from the completion index. */
#define INDEXED (-2)
#define RENDER_FAILURES "DROVER_K8S_INDEX_FAILURES"
static json_t *render_env(const struct render *r, const struct exp_task *task, int index,
                          const char *task_id)
{
    json_t *env = json_array();
    if (index == INDEXED)
        json_array_append_new(env, json_pack("{s:s,s:{s:{s:s}}}", "name", "DROVER_ARRAY_INDEX",
            "valueFrom", "fieldRef", "fieldPath",
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"));
    else if (index >= 0)
        json_array_append_new(env, render_env_var("DROVER_ARRAY_INDEX",
                                                  json_sprintf("%d", index)));
    if (index == INDEXED) /* trial-N.sh makes DROVER_ATTEMPT of it */
        json_array_append_new(env, json_pack("{s:s,s:{s:{s:s}}}", "name", RENDER_FAILURES,
            "valueFrom", "fieldRef", "fieldPath",
            "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"));
    json_array_append_new(env, render_env_var("DROVER_TASK_ID",
        index == INDEXED ? json_sprintf("%s-t$(DROVER_ARRAY_INDEX)", task_id)
                         : render_literal(task_id)));
    json_array_append_new(env, render_env_var("DROVER_CHECKPOINT_DIR",
                                              json_string(RENDER_CHECKPOINT_DIR)));
    json_array_append_new(env, render_env_var("DROVER_METRICS_FILE",
                                              json_string(RENDER_METRICS_DIR "/metrics.jsonl")));
    for (char **e = task->env; e && *e; e++) {
        char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        char *name = xstrndup(*e, (size_t)(eq - *e));
        if (!render_ours(name) && (index != INDEXED || json_object_get(r->common, *e)))
            json_array_append_new(env, render_env_var(name, render_literal(eq + 1)));
        free(name);
    }
    return env;
}

/* --- the pod --- */

/* The image of a task: a stage's own, else spec.image. NULL after the error. */
static const char *render_image(struct render *r, const struct exp_task *task)
{
    const json_t *spec = r->def->spec, *image = json_object_get(spec, "image");
    const char *at = "spec.image";
    if (r->def->kind == EXP_PIPELINE) {
        const json_t *stage;
        size_t i;
        json_array_foreach(json_object_get(spec, "stages"), i, stage)
            if (strcmp(json_string_value(json_object_get(stage, "name")), task->name) == 0 &&
                json_object_get(stage, "image") != NULL) {
                image = json_object_get(stage, "image");
                at = "spec.stages[].image";
            }
    }
    if (image == NULL) {
        render_fail(r, "spec.image: required by --format k8s: the container image to run"
                       " (add it, or --set image=IMAGE)");
        return NULL;
    }
    const char *s = json_string_value(image);
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) {
            render_fail(r, "%s: expected an image reference without spaces, got \"%s\"", at, s);
            return NULL;
        }
    if (*s == '\0') {
        render_fail(r, "%s: expected an image reference, got \"\"", at);
        return NULL;
    }
    return s;
}

static json_t *render_resources(const struct exp_task *task)
{
    json_t *res = json_object(), *limits = json_object(), *requests = json_object();
    if (task->gpus > 0)
        json_object_set_new(limits, RENDER_GPU_RESOURCE, json_sprintf("%d", task->gpus));
    if (task->cpus > 0)
        json_object_set_new(requests, "cpu", json_sprintf("%d", task->cpus));
    if (task->mem > 0)
        json_object_set_new(requests, "memory", render_bytes(task->mem));
    if (json_object_size(limits) > 0)
        json_object_set(res, "limits", limits);
    if (json_object_size(requests) > 0)
        json_object_set(res, "requests", requests);
    json_decref(limits);
    json_decref(requests);
    return res;
}

/* The pod template's spec for task, running command (a list), with env. */
static json_t *render_pod(struct render *r, const struct exp_task *task, json_t *command,
                          json_t *env, const char *config_map)
{
    const char *image = render_image(r, task);
    if (image == NULL) {
        json_decref(command);
        json_decref(env);
        return NULL;
    }
    json_t *mounts = json_pack("[{s:s,s:s},{s:s,s:s}]", "name", "checkpoints", "mountPath",
                               RENDER_CHECKPOINT_DIR, "name", "metrics", "mountPath",
                               RENDER_METRICS_DIR);
    json_t *volumes = json_pack("[{s:s,s:{}},{s:s,s:{}}]", "name", "checkpoints", "emptyDir",
                                "name", "metrics", "emptyDir");
    if (config_map != NULL) {
        json_array_append_new(mounts, json_pack("{s:s,s:s,s:b}", "name", "trials", "mountPath",
                                                RENDER_CONFIG_DIR, "readOnly", 1));
        json_array_append_new(volumes, json_pack("{s:s,s:{s:s}}", "name", "trials",
                                                 "configMap", "name", config_map));
    }
    json_t *container = json_pack("{s:s,s:s,s:o,s:o}", "name", "task", "image", image,
                                  "command", command, "env", env);
    json_t *resources = render_resources(task);
    if (json_object_size(resources) > 0)
        json_object_set(container, "resources", resources);
    json_decref(resources);
    json_object_set_new(container, "volumeMounts", mounts);
    json_t *pod = json_pack("{s:s}", "restartPolicy", "Never");
    if (task->timeout_ms > 0)
        json_object_set_new(pod, "activeDeadlineSeconds",
                            json_integer((task->timeout_ms + 999) / 1000));
    if (task->gpu_type != NULL)
        json_object_set_new(pod, "nodeSelector", json_pack("{s:s}", r->gpu_label,
                                                           task->gpu_type));
    json_object_set_new(pod, "containers", json_pack("[o]", container));
    json_object_set_new(pod, "volumes", volumes);
    return pod;
}

/* --- objects --- */

static json_t *render_labels(const char *base)
{
    return json_pack("{s:s,s:s}", "app.kubernetes.io/managed-by", "drover",
                     "drover.io/experiment", base);
}

/* retries after the first attempt: the template's, else the daemon's default for the kind. */
static int render_retries(const struct exp_def *def, const struct exp_task *task)
{
    if (task->retries >= 0)
        return task->retries;
    return def->kind == EXP_PIPELINE ? 0 : EXP_DEFAULT_TRIAL_RETRIES;
}

/* A Job named name for task (pod as from render_pod, taken); annotations taken, and extra
 * (taken, or NULL): more keys of the Job's spec. */
static json_t *render_job(struct render *r, const char *name, const char *base,
                          const struct exp_task *task, json_t *pod, json_t *annotations,
                          json_t *extra)
{
    json_object_set_new(annotations, "drover.io/experiment", json_string(r->def->name));
    json_t *spec = json_pack("{s:i}", "backoffLimit", render_retries(r->def, task));
    if (extra != NULL)
        json_object_update(spec, extra);
    json_decref(extra);
    json_object_set_new(spec, "template", json_pack("{s:{s:o},s:o}", "metadata", "labels",
                                                    render_labels(base), "spec", pod));
    return json_pack("{s:s,s:s,s:{s:s,s:o,s:o},s:o}", "apiVersion", "batch/v1", "kind", "Job",
                     "metadata", "name", name, "labels", render_labels(base), "annotations",
                     annotations, "spec", spec);
}

static json_t *render_argv(char **argv)
{
    json_t *a = json_array();
    for (size_t i = 0; argv && argv[i]; i++)
        json_array_append_new(a, render_literal(argv[i]));
    return a;
}

/* trial-N.sh: the trial's own environment (what differs between trials), then its command. */
static char *render_script(const struct exp_def *def, const struct exp_task *task,
                           const json_t *common)
{
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    fprintf(fp, "#!/bin/sh\n# %s, trial %d of %s (drover exp render)\n", task->name,
            task->trial, def->name);
    /* Kubernetes counts an index's failed pods (with backoffLimitPerIndex); none yet: "" */
    fprintf(fp, "export DROVER_ATTEMPT=$((${%s:-0} + 1))\n", RENDER_FAILURES);
    for (char **e = task->env; e && *e; e++) {
        char *eq = strchr(*e, '=');
        if (eq == NULL || json_object_get(common, *e))
            continue;
        char *name = xstrndup(*e, (size_t)(eq - *e));
        if (!render_ours(name)) {
            fprintf(fp, "export %s=", name);
            subst_shell_word(fp, eq + 1);
            fputc('\n', fp);
        }
        free(name);
    }
    fputs("exec", fp);
    for (char **a = task->argv; a && *a; a++) {
        fputc(' ', fp);
        subst_shell_word(fp, *a);
    }
    fputc('\n', fp);
    fclose(fp);
    return buf;
}

/* Whether every trial asks for the same pod, so that one Indexed Job can run them all. */
static bool render_same_shape(const struct exp_def *def)
{
    const struct exp_task *a = &def->tasks[0];
    for (size_t i = 1; i < def->ntasks; i++) {
        const struct exp_task *b = &def->tasks[i];
        bool same_type = (a->gpu_type == NULL) == (b->gpu_type == NULL) &&
                         (a->gpu_type == NULL || strcmp(a->gpu_type, b->gpu_type) == 0);
        if (!same_type || a->gpus != b->gpus || a->cpus != b->cpus || a->mem != b->mem ||
            a->timeout_ms != b->timeout_ms || a->retries != b->retries)
            return false;
    }
    return true;
}

/* The ConfigMap of an Experiment's trials: trial-N.json (parameters), and with scripts
 * trial-N.sh (environment and command). */
static json_t *render_config_map(const struct render *r, const char *name, const char *base,
                                 bool scripts)
{
    const struct exp_def *def = r->def;
    json_t *data = json_object();
    for (size_t i = 0; i < def->ntasks; i++) {
        const struct exp_task *task = &def->tasks[i];
        char *key = xasprintf("trial-%d.json", task->trial);
        char *params; /* in drover's number format: 0.03, not 0.029999999999999999 */
        size_t len;
        FILE *fp = template_memstream(&params, &len);
        subst_json(fp, task->params);
        fclose(fp);
        json_object_set_new(data, key, json_string(params));
        free(params);
        free(key);
        if (scripts) {
            key = xasprintf("trial-%d.sh", task->trial);
            char *script = render_script(def, task, r->common);
            json_object_set_new(data, key, json_string(script));
            free(script);
            free(key);
        }
    }
    return json_pack("{s:s,s:s,s:{s:s,s:o,s:{s:s}},s:o}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", name, "labels", render_labels(base),
                     "annotations", "drover.io/experiment", def->name, "data", data);
}

/* Appends config_map (taken) to out, unless it holds more than a ConfigMap may. */
static int render_config_add(struct render *r, json_t *config_map, json_t *out)
{
    size_t bytes = 0;
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(config_map, "data"), key, value)
        bytes += strlen(key) + json_string_length(value);
    json_array_append_new(out, config_map);
    if (bytes <= RENDER_CONFIG_MAX)
        return 0;
    return render_fail(r, "the %zu trials' parameters and commands are %zu bytes, more than a"
                          " ConfigMap holds (%d); render fewer (sweep.max_trials)",
                       r->def->ntasks, bytes, RENDER_CONFIG_MAX);
}

/* A sweep whose trials share a shape: one Indexed Job. */
static int render_indexed(struct render *r, const char *base, json_t *out)
{
    const struct exp_def *def = r->def;
    char *config = xasprintf("%s-trials", base);
    if (render_config_add(r, render_config_map(r, config, base, true), out) < 0) {
        free(config);
        return -1;
    }
    const struct exp_task *first = &def->tasks[0];
    json_t *command = json_pack("[s,s]", "/bin/sh",
                                RENDER_CONFIG_DIR "/trial-$(DROVER_ARRAY_INDEX).sh");
    json_t *pod = render_pod(r, first, command, render_env(r, first, INDEXED, def->name), config);
    free(config);
    if (pod == NULL)
        return -1;
    int retries = render_retries(def, first);
    long long total = (long long)retries * (long long)def->ntasks;
    size_t parallel = def->parallel > 0 && (size_t)def->parallel < def->ntasks
                          ? (size_t)def->parallel : def->ntasks;
    /* backoffLimitPerIndex: each trial has its retries, and a failed one fails no other */
    json_t *indexed = json_pack("{s:I,s:s,s:I,s:I,s:i}", "backoffLimit",
                                (json_int_t)(total > INT32_MAX ? INT32_MAX : total),
                                "completionMode", "Indexed", "completions",
                                (json_int_t)def->ntasks, "parallelism", (json_int_t)parallel,
                                "backoffLimitPerIndex", retries);
    json_t *job = render_job(r, base, base, first, pod, json_object(), indexed);
    json_array_append_new(out, job);
    return 0;
}

/* One Job per task: a trial (index >= 0), the one task of an Experiment without a sweep, or a
 * stage of a Pipeline (its needs as an annotation). */
static int render_single(struct render *r, const char *base, const struct exp_task *task,
                         int index, const char *config, json_t *out)
{
    bool stage = r->def->kind == EXP_PIPELINE;
    char *full = stage ? xasprintf("%s-%s", r->def->name, task->name) : xstrdup(task->name);
    char *name = render_k8s_name(full, RENDER_NAME_MAX);
    const char *id = full; /* DROVER_TASK_ID: the trial's name, or EXPERIMENT-STAGE */
    json_t *pod = render_pod(r, task, render_argv(task->argv),
                             render_env(r, task, index, id), config);
    free(full);
    if (pod == NULL) {
        free(name);
        return -1;
    }
    json_t *annotations = json_pack("{s:s}", "drover.io/task", task->name);
    if (stage && task->needs != NULL && task->needs[0] != NULL) {
        char *needs = xstrdup("");
        for (char **n = task->needs; *n; n++) {
            char *dep = xasprintf("%s-%s", r->def->name, *n);
            char *dep_name = render_k8s_name(dep, RENDER_NAME_MAX);
            char *joined = xasprintf("%s%s%s", needs, *needs ? "," : "", dep_name);
            free(needs);
            free(dep_name);
            free(dep);
            needs = joined;
        }
        json_object_set_new(annotations, "drover.io/needs", json_string(needs));
        free(needs);
    }
    json_array_append_new(out, render_job(r, name, base, task, pod, annotations, NULL));
    free(name);
    return 0;
}

static int render_check(struct render *r)
{
    if (!render_label_key_ok(r->gpu_label))
        return render_fail(r, "--gpu-label %s: expected a label key such as %s", r->gpu_label,
                           RENDER_GPU_LABEL);
    for (size_t i = 0; i < r->def->ntasks; i++) {
        const char *type = r->def->tasks[i].gpu_type;
        if (type != NULL && !render_label_value_ok(type))
            return render_fail(r, "resources.gpu_type: \"%s\" cannot be the value of node label"
                                  " %s (at most 63 of A-Z a-z 0-9 . _ -, a letter or digit at"
                                  " each end)", type, r->gpu_label);
    }
    return 0;
}

json_t *render_k8s(const struct exp_def *def, const struct render_k8s_options *opt, char **err)
{
    struct render r = {.def = def, .file = opt->file ? opt->file : def->name,
                       .gpu_label = opt->gpu_label ? opt->gpu_label : RENDER_GPU_LABEL,
                       .common = render_env_common(def)};
    json_t *out = json_array();
    const json_t *sweep = json_object_get(def->spec, "sweep");
    int rc = render_check(&r);
    if (rc == 0 && def->kind == EXP_EXPERIMENT && sweep != NULL && def->ntasks > 0) {
        /* room for "-N" after the Job's name: an Indexed Job's pods are named so */
        char digits[24];
        size_t width = (size_t)snprintf(digits, sizeof digits, "%zu", def->ntasks);
        char *base = render_k8s_name(def->name, RENDER_NAME_MAX - 1 - width);
        if (render_same_shape(def)) {
            rc = render_indexed(&r, base, out);
        } else {
            char *config = xasprintf("%s-trials", base);
            rc = render_config_add(&r, render_config_map(&r, config, base, false), out);
            for (size_t i = 0; i < def->ntasks && rc == 0; i++)
                rc = render_single(&r, base, &def->tasks[i], def->tasks[i].trial, config, out);
            free(config);
        }
        free(base);
    } else if (rc == 0) {
        char *base = render_k8s_name(def->name, RENDER_NAME_MAX);
        for (size_t i = 0; i < def->ntasks && rc == 0; i++)
            rc = render_single(&r, base, &def->tasks[i], -1, NULL, out);
        free(base);
    }
    json_decref(r.common);
    if (rc < 0) {
        json_decref(out);
        *err = r.err;
        return NULL;
    }
    return out;
}
