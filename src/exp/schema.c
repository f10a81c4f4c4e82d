/* exp/schema.c — the walk that checks a document against the schema (exp/schema-table.c): each
 * value by its key's type, then the key's own check; the values templates share (sizes,
 * durations); and what depends on kind. An unknown key or choice names the nearest valid one
 * (Levenshtein). The sweep's own checks are exp/sweep.c's, a pipeline's stages exp/stages.c's. */
#include "exp/request.h"
#include "exp/template-internal.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int schema_check_parameters(struct template *t, const struct schema_key *key,
                                   const json_t *v, const char *path)
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
            schema_check_mapping(t, key->children, value, child);
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
    if (json_array_size(v) > STAGES_MAX)
        return template_fail(t, path, NAMES_PATH, "%s: more than %d stages", path,
                             STAGES_MAX);
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
    case TYPE_INTEGER:
        return json_is_integer(v) ? 0 : template_expected(t, path, "an integer", v);
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
    case TYPE_GRACE:
        if (json_is_boolean(v) || schema_duration(v, &ms, &why) == 0)
            return 0;
        return template_expected(t, path, "true, false or a grace such as 90s", v);
    case TYPE_SIGNAL: {
        int sig;
        char num[24];
        if (json_is_integer(v))
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        if ((json_is_string(v) || json_is_integer(v)) &&
            parse_signal(json_is_string(v) ? json_string_value(v) : num, &sig, &why) == 0)
            return 0;
        return template_expected(t, path, "a signal a task can catch, such as TERM or USR1", v);
    }
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
            return template_expected(t, path, "an integer >= 0 (retries) or { attempts | retries,"
                                     " backoff }", v);
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
        return schema_check_parameters(t, key, v, path);
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
