/* exp/schema.c — the template schema as a declarative table (key, type, required, choices, an
 * extra check), the walk that checks a document against it, and the checks that span keys: a
 * pipeline's stages and what depends on kind. An unknown key or choice names the nearest valid
 * one (Levenshtein). The sweep's own checks are exp/sweep.c's. */
#include "exp/request.h"
#include "exp/template-internal.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_MAX_STAGES 1000

enum schema_type {
    TYPE_STRING, TYPE_COUNT, TYPE_POSITIVE, TYPE_NUMBER, TYPE_BOOL, TYPE_SIZE, TYPE_DURATION,
    TYPE_MAPPING, TYPE_FREE, TYPE_ARGV, TYPE_STRINGS, TYPE_ENV, TYPE_RETRY, TYPE_BACKOFF,
    TYPE_BASELINE, TYPE_IMPROVEMENT, TYPE_PARAMETERS, TYPE_STAGES,
};

/* One key of the schema; a mapping's keys end with {NULL}. */
struct schema_key {
    const char *key;
    enum schema_type type;
    bool required;
    const struct schema_key *children; /* TYPE_MAPPING, and the mapping forms of the others */
    const char *const *choices;        /* TYPE_STRING: the allowed values, NULL-terminated */
    int (*check)(struct template *t, const json_t *value, const char *path); /* after the type */
};

static int schema_check_api(struct template *t, const json_t *value, const char *path);
static int schema_check_name(struct template *t, const json_t *value, const char *path);
static int schema_check_stages(struct template *t, const json_t *value, const char *path);
static int schema_check_factor(struct template *t, const json_t *value, const char *path);

static const char *const schema_kinds[] = {"Experiment", "Pipeline", NULL};
static const char *const schema_methods[] = {"grid", "random", NULL};
static const char *const schema_distributions[] = {"uniform", "log_uniform", "int_uniform",
                                                   NULL};
static const char *const schema_stoppers[] = {"asha", "median", NULL};
static const char *const schema_modes[] = {"max", "min", NULL};

static const struct schema_key schema_resources[] = {
    {.key = "gpu_type", .type = TYPE_STRING},
    {.key = "gpu_count", .type = TYPE_COUNT},
    {.key = "gpu_memory", .type = TYPE_SIZE},
    {.key = "memory", .type = TYPE_SIZE},
    {.key = "cpus", .type = TYPE_COUNT},
    {.key = NULL},
};
static const struct schema_key schema_retry[] = {
    {.key = "attempts", .type = TYPE_COUNT},
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
    {.key = "parameters", .type = TYPE_PARAMETERS, .required = true},
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
    {.key = "retry", .type = TYPE_RETRY, .children = schema_retry},
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
    {.key = "retry", .type = TYPE_RETRY, .children = schema_retry},
    {.key = "timeout", .type = TYPE_DURATION},
    {.key = "circuit_breaker", .type = TYPE_MAPPING, .children = schema_circuit_breaker},
    {.key = "generator", .type = TYPE_MAPPING, .children = schema_generator},
    {.key = "stages", .type = TYPE_STAGES, .children = schema_stage,
     .check = schema_check_stages},
    {.key = NULL},
};
static const struct schema_key schema_metadata[] = {
    {.key = "name", .type = TYPE_STRING, .required = true, .check = schema_check_name},
    {.key = NULL},
};
static const struct schema_key schema_top[] = {
    {.key = "apiVersion", .type = TYPE_STRING, .required = true, .check = schema_check_api},
    {.key = "kind", .type = TYPE_STRING, .required = true, .choices = schema_kinds},
    {.key = "metadata", .type = TYPE_MAPPING, .required = true, .children = schema_metadata},
    {.key = "spec", .type = TYPE_MAPPING, .required = true, .children = schema_spec},
    {.key = NULL},
};
static const struct schema_key schema_spec_key = {
    .key = "spec", .type = TYPE_MAPPING, .required = true, .children = schema_spec};

/* --- suggestions: the nearest name, by edit distance (Levenshtein) --- */

static size_t schema_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return SIZE_MAX;
    size_t row[65];
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[m];
}

/* Offers candidate as the nearest to word if it is closer than *best so far and close enough
 * to be a typo: at most max(2, len/3) edits. */
void schema_consider(const char *word, const char *candidate, const char **best,
                     size_t *best_distance)
{
    size_t limit = strlen(word) / 3 > 2 ? strlen(word) / 3 : 2;
    size_t d = schema_distance(word, candidate);
    if (d <= limit && d < *best_distance) {
        *best = candidate;
        *best_distance = d;
    }
}

/* --- values --- */

/* An integer, or a size string ("16G", and Kubernetes' "16Gi"). */
int schema_size(const json_t *v, uint64_t *out, const char **why)
{
    *why = "expected a size such as 16G";
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -1;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    char *text = xstrdup(json_string_value(v));
    size_t len = strlen(text);
    if (len >= 2 && text[len - 1] == 'i' && strchr("KMGTkmgt", text[len - 2]) != NULL)
        text[len - 1] = '\0';
    int rc = parse_size(text, out, why);
    free(text);
    return rc;
}

/* A duration string ("90s", "2h"), or a number of seconds. */
int schema_duration(const json_t *v, int64_t *ms, const char **why)
{
    *why = "expected a duration such as 90s or 2h";
    if (json_is_number(v)) {
        double seconds = json_number_value(v);
        if (!(seconds * 1000 >= 1) || seconds > 1e12)
            return -1;
        *ms = llround(seconds * 1000);
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    return parse_duration(json_string_value(v), ms, why);
}

static bool schema_is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

/* --- the schema walk --- */

static int schema_check_value(struct template *t, const struct schema_key *key,
                               const json_t *v, const char *path);

static int schema_check_mapping(struct template *t, const struct schema_key *keys,
                                const json_t *object, const char *path)
{
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)object, name, v) {
        const struct schema_key *key = keys;
        while (key->key != NULL && strcmp(key->key, name) != 0)
            key++;
        char *child = template_join(path, name);
        if (key->key == NULL) {
            const char *best = NULL;
            size_t best_distance = SIZE_MAX;
            for (key = keys; key->key != NULL; key++)
                schema_consider(name, key->key, &best, &best_distance);
            char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
            template_fail(t, child, AT_KEY | NAMES_PATH, "unknown key '%s' %s%s%s", name,
                          *path ? "in " : "at the top level", path, hint);
            free(hint);
            free(child);
            return -1;
        }
        int rc = schema_check_value(t, key, v, child);
        free(child);
        if (rc < 0)
            return -1;
    }
    for (const struct schema_key *key = keys; key->key != NULL; key++)
        if (key->required && json_object_get(object, key->key) == NULL)
            return template_fail(t, path, NAMES_PATH, "%s%smissing '%s'", path,
                                 *path ? ": " : "", key->key);
    return 0;
}

/* "expected grid or random, got "grd"; did you mean 'grid'?" */
static int schema_check_choice(struct template *t, const struct schema_key *key,
                               const json_t *v, const char *path)
{
    const char *s = json_string_value(v), *best = NULL;
    size_t best_distance = SIZE_MAX, len;
    for (const char *const *choice = key->choices; *choice; choice++)
        if (strcmp(*choice, s) == 0)
            return 0;
    char *list, *got = template_got(v);
    FILE *fp = template_memstream(&list, &len);
    for (const char *const *choice = key->choices; *choice; choice++) {
        fprintf(fp, "%s%s", choice == key->choices ? "" : choice[1] ? ", " : " or ", *choice);
        schema_consider(s, *choice, &best, &best_distance);
    }
    fclose(fp);
    char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
    template_fail(t, path, NAMES_PATH, "%s: expected %s, got %s%s", path, list, got, hint);
    free(hint);
    free(got);
    free(list);
    return -1;
}

/* Every element of list must pass ok(); the first that does not is "expected what". */
static int schema_check_items(struct template *t, const json_t *list, const char *path,
                              bool (*ok)(const json_t *), const char *what)
{
    size_t i;
    const json_t *item;
    json_array_foreach(list, i, item) {
        if (ok(item))
            continue;
        char *child = template_index(path, i);
        template_expected(t, child, what, item);
        free(child);
        return -1;
    }
    return 0;
}

static bool schema_is_string(const json_t *v)
{
    return json_is_string(v);
}

/* A command's words may be numbers or bools too (`- 50` is what YAML makes of an argument 50). */
static bool schema_is_word(const json_t *v)
{
    return json_is_string(v) || json_is_number(v) || json_is_boolean(v);
}

static bool schema_is_duration(const json_t *v)
{
    int64_t ms;
    const char *why;
    return schema_duration(v, &ms, &why) == 0;
}

static int schema_check_env(struct template *t, const json_t *v, const char *path)
{
    const char *name;
    json_t *value;
    if (!json_is_object(v))
        return template_expected(t, path, "a mapping of NAME: value", v);
    json_object_foreach((json_t *)v, name, value) {
        char *child = template_join(path, name);
        if (!exp_env_name_valid(name))
            template_fail(t, child, AT_KEY | NAMES_PATH,
                          "%s: '%s' is not a variable name (letters, digits and '_')", path,
                          name);
        else if (!schema_is_scalar(value))
            template_expected(t, child, "a string, number or bool", value);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return 0;
}

static int schema_check_parameters(struct template *t, const json_t *v, const char *path)
{
    const char *name;
    json_t *value;
    if (!json_is_object(v) || json_object_size(v) == 0)
        return template_expected(t, path, "a mapping of spec paths to values", v);
    json_object_foreach((json_t *)v, name, value) {
        char *child = template_join(path, name);
        if (json_is_array(value) && json_array_size(value) == 0)
            template_fail(t, child, NAMES_PATH, "%s: an empty list gives no values", child);
        else if (json_is_array(value))
            ;
        else if (json_is_object(value))
            schema_check_mapping(t, schema_range, value, child);
        else
            template_expected(t, child,
                              "a list of values, { min, max, step } or { distribution, min, max }",
                              value);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return 0;
}

static int schema_check_stage_list(struct template *t, const struct schema_key *key,
                                   const json_t *v, const char *path)
{
    size_t i;
    const json_t *stage;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return template_expected(t, path, "a list of stages", v);
    if (json_array_size(v) > SCHEMA_MAX_STAGES)
        return template_fail(t, path, NAMES_PATH, "%s: more than %d stages", path,
                             SCHEMA_MAX_STAGES);
    json_array_foreach(v, i, stage) {
        char *child = template_index(path, i);
        if (!json_is_object(stage))
            template_expected(t, child, "a mapping { name, command, … }", stage);
        else
            schema_check_mapping(t, key->children, stage, child);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return 0;
}

static int schema_check_type(struct template *t, const struct schema_key *key,
                             const json_t *v, const char *path)
{
    const char *why;
    uint64_t bytes;
    int64_t ms;
    switch (key->type) {
    case TYPE_STRING:
        if (!json_is_string(v))
            return template_expected(t, path, "a string", v);
        return key->choices ? schema_check_choice(t, key, v, path) : 0;
    case TYPE_COUNT:
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            return template_expected(t, path, "an integer >= 0", v);
        return 0;
    case TYPE_POSITIVE:
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT_MAX)
            return template_expected(t, path, "an integer >= 1", v);
        return 0;
    case TYPE_NUMBER:
        return json_is_number(v) ? 0 : template_expected(t, path, "a number", v);
    case TYPE_BOOL:
        return json_is_boolean(v) ? 0 : template_expected(t, path, "true or false", v);
    case TYPE_SIZE:
        if (schema_size(v, &bytes, &why) == 0)
            return 0;
        return template_expected_because(t, path, "a size such as 16G or 512Mi", v, why);
    case TYPE_DURATION:
        if (schema_duration(v, &ms, &why) == 0)
            return 0;
        return template_expected_because(t, path, "a duration such as 90s or 2h", v, why);
    case TYPE_MAPPING:
        if (!json_is_object(v))
            return template_expected(t, path, "a mapping", v);
        return schema_check_mapping(t, key->children, v, path);
    case TYPE_FREE:
        return json_is_object(v) ? 0 : template_expected(t, path, "a mapping", v);
    case TYPE_ARGV:
        if (!json_is_array(v) || json_array_size(v) == 0)
            return template_expected(t, path, "a list of strings (the command and arguments)", v);
        return schema_check_items(t, v, path, schema_is_word, "a string");
    case TYPE_STRINGS:
        if (!json_is_array(v))
            return template_expected(t, path, "a list of strings", v);
        return schema_check_items(t, v, path, schema_is_string, "a string");
    case TYPE_ENV:
        return schema_check_env(t, v, path);
    case TYPE_RETRY:
        if (json_is_object(v))
            return schema_check_mapping(t, key->children, v, path);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            return template_expected(t, path, "an integer >= 0 or { attempts, backoff }", v);
        return 0;
    case TYPE_BACKOFF:
        if (!json_is_array(v) || json_array_size(v) > 8)
            return template_expected(t, path, "a list of at most 8 durations", v);
        return schema_check_items(t, v, path, schema_is_duration,
                                  "a duration such as 30s");
    case TYPE_BASELINE:
        if (json_is_object(v))
            return schema_check_mapping(t, key->children, v, path);
        if (json_is_number(v))
            return 0;
        return template_expected(t, path, "a number or { experiment: NAME }", v);
    case TYPE_IMPROVEMENT:
        if (json_is_string(v)) {
            char *end;
            const char *s = json_string_value(v);
            double percent = strtod(s, &end);
            if (end != s && strcmp(end, "%") == 0 && isfinite(percent))
                return 0;
        }
        if (json_is_number(v))
            return 0;
        return template_expected(t, path, "a percentage such as \"2%\" or a number", v);
    case TYPE_PARAMETERS:
        return schema_check_parameters(t, v, path);
    case TYPE_STAGES:
        return schema_check_stage_list(t, key, v, path);
    }
    fatalx("template: type %d", (int)key->type);
}

static int schema_check_value(struct template *t, const struct schema_key *key,
                               const json_t *v, const char *path)
{
    if (schema_check_type(t, key, v, path) < 0)
        return -1;
    return key->check ? key->check(t, v, path) : 0;
}

int schema_check_document(struct template *t, const json_t *root)
{
    return schema_check_mapping(t, schema_top, root, "");
}

int schema_check_spec(struct template *t, const json_t *spec)
{
    return schema_check_value(t, &schema_spec_key, spec, "spec");
}

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

static int schema_check_factor(struct template *t, const json_t *v, const char *path)
{
    return json_number_value(v) > 1 ? 0 : template_expected(t, path, "a number > 1", v);
}

/* --- pipelines --- */

/* The stages' names -> their indices (the names were checked to be strings). New reference. */
static json_t *schema_stage_index(const json_t *stages)
{
    json_t *index = json_object();
    size_t i;
    const json_t *stage;
    json_array_foreach(stages, i, stage) {
        const char *name = json_string_value(json_object_get(stage, "name"));
        if (json_object_get(index, name) == NULL)
            json_object_set_new(index, name, json_integer((json_int_t)i));
    }
    return index;
}

static long schema_stage_find(const json_t *index, const char *name)
{
    const json_t *i = json_object_get(index, name);
    return i ? (long)json_integer_value(i) : -1;
}

/* Depth-first along needs; state: 0 unseen, 1 on the trail, 2 done. On a cycle, returns 1 with
 * the cycle as trail[*from .. *to]. */
static int schema_visit(const json_t *stages, const json_t *index, size_t i, unsigned char *state,
                        size_t *trail, size_t depth, size_t *from, size_t *to)
{
    size_t k;
    const json_t *need;
    state[i] = 1;
    trail[depth] = i;
    json_array_foreach(json_object_get(json_array_get(stages, i), "needs"), k, need) {
        size_t j = (size_t)schema_stage_find(index, json_string_value(need));
        if (state[j] == 1) {
            for (*from = 0; trail[*from] != j; (*from)++)
                ;
            *to = depth;
            return 1;
        }
        if (state[j] == 0 && schema_visit(stages, index, j, state, trail, depth + 1, from, to))
            return 1;
    }
    state[i] = 2;
    return 0;
}

static const char *schema_stage_name(const json_t *stages, size_t i)
{
    return json_string_value(json_object_get(json_array_get(stages, i), "name"));
}

/* "cycle in needs: a -> b -> a", at the stage where the cycle was entered. */
static int schema_check_cycles(struct template *t, const json_t *stages, const json_t *index,
                               const char *path)
{
    size_t n = json_array_size(stages), from = 0, to = 0;
    unsigned char *state = xcalloc(n, 1);
    size_t *trail = xcalloc(n, sizeof *trail);
    for (size_t i = 0; i < n; i++) {
        if (state[i] != 0 || !schema_visit(stages, index, i, state, trail, 0, &from, &to))
            continue;
        char *cycle, *stage_path = template_index(path, trail[from]);
        size_t len;
        FILE *fp = template_memstream(&cycle, &len);
        for (size_t k = from; k <= to; k++)
            fprintf(fp, "%s -> ", schema_stage_name(stages, trail[k]));
        fputs(schema_stage_name(stages, trail[from]), fp);
        fclose(fp);
        template_fail(t, stage_path, 0, "cycle in needs: %s", cycle);
        free(cycle);
        free(stage_path);
        break;
    }
    free(state);
    free(trail);
    return t->err ? -1 : 0;
}

/* One stage's needs: each an existing stage, each once (the daemon refuses a request whose
 * needs repeat a task too, exp/request.c). seen[j] == i + 1: stage i already needs stage j. */
static int schema_check_needs(struct template *t, const json_t *stages, const json_t *index,
                              size_t i, const char *stage_path, size_t *seen)
{
    size_t k;
    const json_t *need;
    json_array_foreach(json_object_get(json_array_get(stages, i), "needs"), k, need) {
        const char *name = json_string_value(need);
        long j = schema_stage_find(index, name);
        if (j >= 0 && seen[j] != i + 1) {
            seen[j] = i + 1;
            continue;
        }
        const char *best = NULL;
        size_t best_distance = SIZE_MAX, m;
        json_t *other;
        if (j < 0)
            json_array_foreach(stages, m, other)
                schema_consider(name, schema_stage_name(stages, m), &best, &best_distance);
        char *needs_path = template_join(stage_path, "needs");
        char *need_path = template_index(needs_path, k);
        char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
        if (j < 0)
            template_fail(t, need_path, 0, "needs unknown stage '%s'%s", name, hint);
        else
            template_fail(t, need_path, 0, "needs '%s' more than once", name);
        free(hint);
        free(need_path);
        free(needs_path);
        return -1;
    }
    return 0;
}

static int schema_check_stages(struct template *t, const json_t *stages, const char *path)
{
    size_t i, n = json_array_size(stages);
    const json_t *stage;
    json_t *index = schema_stage_index(stages);
    size_t *seen = xcalloc(n, sizeof *seen);
    json_array_foreach(stages, i, stage) {
        const char *name = schema_stage_name(stages, i);
        char *child = template_index(path, i), *name_path = template_join(child, "name");
        if ((size_t)schema_stage_find(index, name) != i)
            template_fail(t, name_path, 0, "duplicate stage name '%s'", name);
        else
            schema_check_needs(t, stages, index, i, child, seen);
        free(name_path);
        free(child);
        if (t->err != NULL)
            break;
    }
    if (t->err == NULL)
        schema_check_cycles(t, stages, index, path);
    free(seen);
    json_decref(index);
    return t->err ? -1 : 0;
}

/* What depends on kind: an Experiment has a command and no stages; a Pipeline has stages, and
 * neither a command of its own nor a sweep (a stage is one task; trials of a stage would need
 * names and needs the format does not give). */
int schema_check_kind(struct template *t, enum exp_kind kind, const json_t *spec)
{
    if (kind == EXP_EXPERIMENT) {
        if (json_object_get(spec, "stages") != NULL)
            return template_fail(t, "spec.stages", AT_KEY,
                                 "stages are only allowed in kind: Pipeline");
        if (json_object_get(spec, "command") == NULL)
            return template_fail(t, "spec", NAMES_PATH, "spec: missing 'command'");
        return 0;
    }
    if (json_object_get(spec, "command") != NULL)
        return template_fail(t, "spec.command", AT_KEY,
                             "a Pipeline runs its stages' commands; move 'command' into a stage");
    if (json_object_get(spec, "sweep") != NULL)
        return template_fail(t, "spec.sweep", AT_KEY, "sweeps are not supported in a Pipeline");
    if (json_object_get(spec, "stages") == NULL)
        return template_fail(t, "spec", NAMES_PATH, "spec: missing 'stages'");
    return 0;
}
