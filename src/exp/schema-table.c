/* exp/schema-table.c — what a template may hold, as a declarative table: each key with its type,
 * whether it is required, its choices and an extra check of its own. exp/schema.c walks a
 * document against it; exp/template.h documents the format for people. */
#include "exp/request.h"
#include "exp/template-internal.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static int schema_check_api(struct template *t, const json_t *value, const char *path);
static int schema_check_name(struct template *t, const json_t *value, const char *path);
static int schema_check_factor(struct template *t, const json_t *value, const char *path);
static int schema_check_retry(struct template *t, const json_t *value, const char *path);
static int schema_check_priority(struct template *t, const json_t *value, const char *path);
static int schema_check_notify(struct template *t, const json_t *value, const char *path);

static const char *const schema_kinds[] = {"Experiment", "Pipeline", NULL};
static const char *const schema_methods[] = {"grid", "random", NULL};
static const char *const schema_distributions[] = {"uniform", "log_uniform", "int_uniform",
                                                   NULL};
static const char *const schema_stoppers[] = {"asha", "median", NULL};
static const char *const schema_modes[] = {"max", "min", NULL};
static const char *const schema_backends[] = {"local", "slurm", NULL};
static const char *const schema_schedules[] = {"any", "off-peak", NULL};

static const struct schema_key schema_resources[] = {
    {.key = "gpu_type", .type = TYPE_STRING},
    {.key = "gpu_count", .type = TYPE_COUNT},
    {.key = "gpu_memory", .type = TYPE_SIZE},
    {.key = "memory", .type = TYPE_SIZE},
    {.key = "cpus", .type = TYPE_COUNT},
    {.key = "backend", .type = TYPE_STRING, .choices = schema_backends},
    {.key = NULL},
};
/* retry: N (retries), or a mapping; schema_check_retry. */
static const struct schema_key schema_retry[] = {
    {.key = "attempts", .type = TYPE_POSITIVE},
    {.key = "retries", .type = TYPE_COUNT},
    {.key = "backoff", .type = TYPE_BACKOFF},
    {.key = NULL},
};
/* A sweep parameter written as a mapping: a range, or a distribution (sweep_check). */
static const struct schema_key schema_range[] = {
    {.key = "min", .type = TYPE_NUMBER, .required = true},
    {.key = "max", .type = TYPE_NUMBER, .required = true},
    {.key = "step", .type = TYPE_NUMBER},
    {.key = "distribution", .type = TYPE_STRING, .choices = schema_distributions},
    {.key = NULL},
};
static const struct schema_key schema_sweep[] = {
    {.key = "method", .type = TYPE_STRING, .choices = schema_methods},
    {.key = "parameters", .type = TYPE_PARAMETERS, .required = true,
     .children = schema_range},
    {.key = "max_trials", .type = TYPE_POSITIVE},
    {.key = "parallel", .type = TYPE_COUNT},
    {.key = "seed", .type = TYPE_COUNT},
    {.key = NULL},
};
static const struct schema_key schema_early_stopping[] = {
    {.key = "type", .type = TYPE_STRING, .required = true, .choices = schema_stoppers},
    {.key = "metric", .type = TYPE_STRING, .required = true},
    {.key = "mode", .type = TYPE_STRING, .choices = schema_modes},
    {.key = "rung_unit", .type = TYPE_STRING},
    {.key = "grace", .type = TYPE_POSITIVE},
    {.key = "reduction_factor", .type = TYPE_NUMBER, .check = schema_check_factor},
    {.key = "max_rung", .type = TYPE_POSITIVE},
    {.key = NULL},
};
static const struct schema_key schema_metrics[] = {
    {.key = "file", .type = TYPE_BOOL},
    {.key = "patterns", .type = TYPE_STRINGS},
    {.key = NULL},
};
static const struct schema_key schema_baseline[] = {
    {.key = "experiment", .type = TYPE_STRING, .required = true, .check = schema_check_name},
    {.key = NULL},
};
static const struct schema_key schema_validation[] = {
    {.key = "metric", .type = TYPE_STRING},
    {.key = "mode", .type = TYPE_STRING, .choices = schema_modes},
    {.key = "baseline", .type = TYPE_BASELINE, .children = schema_baseline},
    {.key = "improvement", .type = TYPE_IMPROVEMENT},
    {.key = "max_epoch_time", .type = TYPE_DURATION},
    {.key = "min_gpu_util", .type = TYPE_NUMBER},
    {.key = NULL},
};
static const struct schema_key schema_circuit_breaker[] = {
    {.key = "failures", .type = TYPE_POSITIVE},
    {.key = NULL},
};
static const struct schema_key schema_generator[] = {
    {.key = "command", .type = TYPE_ARGV, .required = true},
    {.key = NULL},
};
static const struct schema_key schema_stage[] = {
    {.key = "name", .type = TYPE_STRING, .required = true, .check = schema_check_name},
    {.key = "command", .type = TYPE_ARGV, .required = true},
    {.key = "resources", .type = TYPE_MAPPING, .children = schema_resources},
    {.key = "needs", .type = TYPE_STRINGS},
    {.key = "env", .type = TYPE_ENV},
    {.key = "timeout", .type = TYPE_DURATION},
    {.key = "stall", .type = TYPE_DURATION},
    {.key = "preemptible", .type = TYPE_GRACE},
    {.key = "preempt_signal", .type = TYPE_SIGNAL},
    /* off-peak: its tasks start only inside the daemon's off-peak window (--off-peak). */
    {.key = "schedule", .type = TYPE_STRING, .choices = schema_schedules},
    {.key = "priority", .type = TYPE_INTEGER, .check = schema_check_priority},
    {.key = "retry", .type = TYPE_RETRY, .children = schema_retry, .check = schema_check_retry},
    /* The container image for `drover exp render --format k8s` (exp/render.h); runs here
     * ignore it. */
    {.key = "image", .type = TYPE_STRING},
    {.key = NULL},
};
/* command and stages depend on kind: schema_check_kind. */
static const struct schema_key schema_spec[] = {
    {.key = "model", .type = TYPE_FREE},
    {.key = "data", .type = TYPE_FREE},
    {.key = "hyperparameters", .type = TYPE_FREE},
    {.key = "resources", .type = TYPE_MAPPING, .children = schema_resources},
    {.key = "command", .type = TYPE_ARGV},
    {.key = "env", .type = TYPE_ENV},
    {.key = "sweep", .type = TYPE_MAPPING, .children = schema_sweep,
     .check = sweep_check},
    {.key = "early_stopping", .type = TYPE_MAPPING, .children = schema_early_stopping},
    {.key = "metrics", .type = TYPE_MAPPING, .children = schema_metrics},
    {.key = "validation", .type = TYPE_MAPPING, .children = schema_validation},
    {.key = "retry", .type = TYPE_RETRY, .children = schema_retry, .check = schema_check_retry},
    {.key = "timeout", .type = TYPE_DURATION},
    {.key = "stall", .type = TYPE_DURATION},
    {.key = "preemptible", .type = TYPE_GRACE},
    {.key = "preempt_signal", .type = TYPE_SIGNAL},
    /* off-peak: its tasks start only inside the daemon's off-peak window (--off-peak). */
    {.key = "schedule", .type = TYPE_STRING, .choices = schema_schedules},
    {.key = "priority", .type = TYPE_INTEGER, .check = schema_check_priority},
    {.key = "circuit_breaker", .type = TYPE_MAPPING, .children = schema_circuit_breaker},
    {.key = "generator", .type = TYPE_MAPPING, .children = schema_generator},
    {.key = "stages", .type = TYPE_STAGES, .children = schema_stage,
     .check = stages_check},
    /* A webhook for the experiment's end (daemon/notify.c), kept in the stored spec. */
    {.key = "notify", .type = TYPE_STRING, .check = schema_check_notify},
    /* The container image for `drover exp render --format k8s` (exp/render.h); runs here
     * ignore it. */
    {.key = "image", .type = TYPE_STRING},
    {.key = NULL},
};
static const struct schema_key schema_metadata[] = {
    {.key = "name", .type = TYPE_STRING, .required = true, .check = schema_check_name},
    {.key = NULL},
};
const struct schema_key schema_top[] = {
    {.key = "apiVersion", .type = TYPE_STRING, .required = true, .check = schema_check_api},
    {.key = "kind", .type = TYPE_STRING, .required = true, .choices = schema_kinds},
    {.key = "metadata", .type = TYPE_MAPPING, .required = true, .children = schema_metadata},
    {.key = "spec", .type = TYPE_MAPPING, .required = true, .children = schema_spec},
    {.key = NULL},
};
const struct schema_key schema_spec_key = {
    .key = "spec", .type = TYPE_MAPPING, .required = true, .children = schema_spec};

/* --- checks of single keys --- */

static int schema_check_api(struct template *t, const json_t *v, const char *path)
{
    const char *s = json_string_value(v);
    size_t len = strlen(s);
    if (len > 3 && strcmp(s + len - 3, "/v1") == 0)
        return 0;
    return template_expected(t, path, "\"…/v1\" such as \"drover/v1\"", v);
}

/* The rule the daemon applies to an exp_run request too (exp/request.c). */
static int schema_check_name(struct template *t, const json_t *v, const char *path)
{
    if (exp_name_valid(json_string_value(v)))
        return 0;
    return template_expected(t, path, "a name of letters, digits, '.', '_' and '-' (at most 64;"
                             " not . or ..)", v);
}

static int schema_check_notify(struct template *t, const json_t *v, const char *path)
{
    const char *problem = request_url_problem(json_string_value(v));
    if (problem == NULL)
        return 0;
    char *what = xasprintf("an http:// or https:// URL (%s)", problem);
    template_expected(t, path, what, v);
    free(what);
    return -1;
}

static int schema_check_factor(struct template *t, const json_t *v, const char *path)
{
    return json_number_value(v) > 1 ? 0 : template_expected(t, path, "a number > 1", v);
}

/* An integer within the bounds the task request puts on key (util/request.h), shifted by offset
 * (attempts are retries + 1): a template asks for nothing `drover submit` could not. */
static int schema_check_bounds(struct template *t, const json_t *v, const char *path,
                               const char *key, long long offset)
{
    const struct request_field *field = request_field(key);
    if (field == NULL)
        fatalx("schema: a task request has no '%s'", key);
    long long x = (long long)json_integer_value(v);
    if (x >= field->min + offset && x <= field->max + offset)
        return 0;
    char *what = xasprintf("an integer from %lld to %lld", field->min + offset,
                           field->max + offset);
    template_expected(t, path, what, v);
    free(what);
    return -1;
}

/* retry: N is N retries; { attempts: N } is N attempts in all (N - 1 retries); { retries: N } is
 * N retries. Attempts and retries at once would say the same thing twice, or contradict. */
static int schema_check_retry(struct template *t, const json_t *v, const char *path)
{
    if (!json_is_object(v))
        return schema_check_bounds(t, v, path, "retries", 0);
    const json_t *attempts = json_object_get(v, "attempts");
    const json_t *retries = json_object_get(v, "retries");
    if (attempts != NULL && retries != NULL)
        return template_fail(t, path, NAMES_PATH, "%s: give attempts (in all) or retries (after"
                             " the first attempt), not both", path);
    char *child = template_join(path, attempts ? "attempts" : "retries");
    int rc = attempts ? schema_check_bounds(t, attempts, child, "retries", 1)
             : retries ? schema_check_bounds(t, retries, child, "retries", 0)
                       : 0;
    free(child);
    return rc;
}

static int schema_check_priority(struct template *t, const json_t *v, const char *path)
{
    return schema_check_bounds(t, v, path, "priority", 0);
}
