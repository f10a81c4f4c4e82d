/* exp/template.c — experiment templates: the schema and its checks, --set, the sweep, ${…} and
 * the tasks (exp/template.h documents the format; exp/yaml.c reads the YAML).
 *
 * Every node is located by its dotted path ("spec.command[2]"); exp/yaml.c maps each path to
 * "FILE:LINE:COLUMN", --set maps what it wrote to "--set a.b=v", and a trial maps what its sweep
 * put in place to where the sweep's value was written. A stored spec has no file: its errors
 * begin with the experiment's name instead.
 *
 * A trial is a copy of the spec with its swept values put in, checked again (a sweep may set
 * resources.gpu_count), then substituted as a whole: every string of it, so a ${…} that names
 * nothing is an error wherever it is, and a value may itself hold ${…}. Tasks are read from the
 * substituted copy; exp_def.spec stays as written (after --set). */
#include "exp/template.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* exp/yaml.c (no header: this file is its only user). */
int exp_yaml_read(const char *file, json_t **out, json_t *where, json_t *where_keys, char **err);
int exp_yaml_scalar(const char *text, json_t **out, char **err);

#define TEMPLATE_MAX_TASKS 100000  /* trials one load or exp_trials call may create */
#define TEMPLATE_MAX_RANGE 1000000 /* points in one {min, max, step} */
#define TEMPLATE_MAX_STAGES 1000   /* the stage checks are quadratic */
#define TEMPLATE_MAX_DEPTH 8       /* ${a} whose value holds ${b} whose value … */
#define TEMPLATE_MAX_NAME 64

struct template {
    const char *file;   /* NULL: a stored spec; errors begin with name and carry no position */
    const char *name;
    json_t *where;      /* path -> "FILE:L:C" of the node (exp/yaml.c, then --set) */
    json_t *where_keys; /* path -> "FILE:L:C" of the key naming the node */
    json_t *overlay;    /* path -> location of the sweep value a trial put there */
    const json_t *spec; /* the spec being checked, for sweep paths */
    char *err;
};

/* template_fail's flags */
#define AT_KEY 1     /* locate the key that names the node, not its value */
#define NAMES_PATH 2 /* the message names the path itself, so a stored spec need not */

enum template_type {
    TYPE_STRING, TYPE_COUNT, TYPE_POSITIVE, TYPE_NUMBER, TYPE_BOOL, TYPE_SIZE, TYPE_DURATION,
    TYPE_MAPPING, TYPE_FREE, TYPE_ARGV, TYPE_STRINGS, TYPE_ENV, TYPE_RETRY, TYPE_BACKOFF,
    TYPE_BASELINE, TYPE_IMPROVEMENT, TYPE_PARAMETERS, TYPE_STAGES,
};

/* One key of the schema; a mapping's keys end with {NULL}. */
struct template_key {
    const char *key;
    enum template_type type;
    bool required;
    const struct template_key *children; /* TYPE_MAPPING, and the mapping forms of the others */
    const char *const *choices;          /* TYPE_STRING: the allowed values, NULL-terminated */
    int (*check)(struct template *t, const json_t *value, const char *path); /* after the type */
};

static int template_check_api(struct template *t, const json_t *value, const char *path);
static int template_check_name(struct template *t, const json_t *value, const char *path);
static int template_check_sweep(struct template *t, const json_t *value, const char *path);
static int template_check_stages(struct template *t, const json_t *value, const char *path);
static int template_check_factor(struct template *t, const json_t *value, const char *path);

static const char *const template_kinds[] = {"Experiment", "Pipeline", NULL};
static const char *const template_methods[] = {"grid", "random", NULL};
static const char *const template_distributions[] = {"uniform", "log_uniform", "int_uniform",
                                                     NULL};
static const char *const template_stoppers[] = {"asha", "median", NULL};
static const char *const template_modes[] = {"max", "min", NULL};

static const struct template_key template_resources[] = {
    {.key = "gpu_type", .type = TYPE_STRING},
    {.key = "gpu_count", .type = TYPE_COUNT},
    {.key = "gpu_memory", .type = TYPE_SIZE},
    {.key = "memory", .type = TYPE_SIZE},
    {.key = "cpus", .type = TYPE_COUNT},
    {.key = NULL},
};
static const struct template_key template_retry[] = {
    {.key = "attempts", .type = TYPE_COUNT},
    {.key = "backoff", .type = TYPE_BACKOFF},
    {.key = NULL},
};
/* A sweep parameter written as a mapping: a range, or a distribution (template_check_sweep). */
static const struct template_key template_range[] = {
    {.key = "min", .type = TYPE_NUMBER, .required = true},
    {.key = "max", .type = TYPE_NUMBER, .required = true},
    {.key = "step", .type = TYPE_NUMBER},
    {.key = "distribution", .type = TYPE_STRING, .choices = template_distributions},
    {.key = NULL},
};
static const struct template_key template_sweep[] = {
    {.key = "method", .type = TYPE_STRING, .choices = template_methods},
    {.key = "parameters", .type = TYPE_PARAMETERS, .required = true},
    {.key = "max_trials", .type = TYPE_POSITIVE},
    {.key = "parallel", .type = TYPE_COUNT},
    {.key = "seed", .type = TYPE_COUNT},
    {.key = NULL},
};
static const struct template_key template_early_stopping[] = {
    {.key = "type", .type = TYPE_STRING, .required = true, .choices = template_stoppers},
    {.key = "metric", .type = TYPE_STRING, .required = true},
    {.key = "mode", .type = TYPE_STRING, .choices = template_modes},
    {.key = "rung_unit", .type = TYPE_STRING},
    {.key = "grace", .type = TYPE_POSITIVE},
    {.key = "reduction_factor", .type = TYPE_NUMBER, .check = template_check_factor},
    {.key = "max_rung", .type = TYPE_POSITIVE},
    {.key = NULL},
};
static const struct template_key template_metrics[] = {
    {.key = "file", .type = TYPE_BOOL},
    {.key = "patterns", .type = TYPE_STRINGS},
    {.key = NULL},
};
static const struct template_key template_baseline[] = {
    {.key = "experiment", .type = TYPE_STRING, .required = true, .check = template_check_name},
    {.key = NULL},
};
static const struct template_key template_validation[] = {
    {.key = "metric", .type = TYPE_STRING},
    {.key = "mode", .type = TYPE_STRING, .choices = template_modes},
    {.key = "baseline", .type = TYPE_BASELINE, .children = template_baseline},
    {.key = "improvement", .type = TYPE_IMPROVEMENT},
    {.key = "max_epoch_time", .type = TYPE_DURATION},
    {.key = "min_gpu_util", .type = TYPE_NUMBER},
    {.key = NULL},
};
static const struct template_key template_circuit_breaker[] = {
    {.key = "failures", .type = TYPE_POSITIVE},
    {.key = NULL},
};
static const struct template_key template_generator[] = {
    {.key = "command", .type = TYPE_ARGV, .required = true},
    {.key = NULL},
};
static const struct template_key template_stage[] = {
    {.key = "name", .type = TYPE_STRING, .required = true, .check = template_check_name},
    {.key = "command", .type = TYPE_ARGV, .required = true},
    {.key = "resources", .type = TYPE_MAPPING, .children = template_resources},
    {.key = "needs", .type = TYPE_STRINGS},
    {.key = "env", .type = TYPE_ENV},
    {.key = "timeout", .type = TYPE_DURATION},
    {.key = "retry", .type = TYPE_RETRY, .children = template_retry},
    {.key = NULL},
};
/* command and stages depend on kind: template_check_kind. */
static const struct template_key template_spec[] = {
    {.key = "model", .type = TYPE_FREE},
    {.key = "data", .type = TYPE_FREE},
    {.key = "hyperparameters", .type = TYPE_FREE},
    {.key = "resources", .type = TYPE_MAPPING, .children = template_resources},
    {.key = "command", .type = TYPE_ARGV},
    {.key = "env", .type = TYPE_ENV},
    {.key = "sweep", .type = TYPE_MAPPING, .children = template_sweep,
     .check = template_check_sweep},
    {.key = "early_stopping", .type = TYPE_MAPPING, .children = template_early_stopping},
    {.key = "metrics", .type = TYPE_MAPPING, .children = template_metrics},
    {.key = "validation", .type = TYPE_MAPPING, .children = template_validation},
    {.key = "retry", .type = TYPE_RETRY, .children = template_retry},
    {.key = "timeout", .type = TYPE_DURATION},
    {.key = "circuit_breaker", .type = TYPE_MAPPING, .children = template_circuit_breaker},
    {.key = "generator", .type = TYPE_MAPPING, .children = template_generator},
    {.key = "stages", .type = TYPE_STAGES, .children = template_stage,
     .check = template_check_stages},
    {.key = NULL},
};
static const struct template_key template_metadata[] = {
    {.key = "name", .type = TYPE_STRING, .required = true, .check = template_check_name},
    {.key = NULL},
};
static const struct template_key template_top[] = {
    {.key = "apiVersion", .type = TYPE_STRING, .required = true, .check = template_check_api},
    {.key = "kind", .type = TYPE_STRING, .required = true, .choices = template_kinds},
    {.key = "metadata", .type = TYPE_MAPPING, .required = true, .children = template_metadata},
    {.key = "spec", .type = TYPE_MAPPING, .required = true, .children = template_spec},
    {.key = NULL},
};
static const struct template_key template_spec_key = {
    .key = "spec", .type = TYPE_MAPPING, .required = true, .children = template_spec};

/* --- errors and paths --- */

static char *template_join(const char *path, const char *key)
{
    return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

static char *template_index(const char *path, size_t i)
{
    return xasprintf("%s[%zu]", path, i);
}

/* "a.b[2]" -> "a.b" -> "a" -> "". */
static void template_path_up(char *path)
{
    size_t cut = strlen(path);
    while (cut > 0 && path[cut] != '.' && path[cut] != '[')
        cut--;
    path[cut] = '\0';
}

/* Where path is, as the message's prefix (malloc'd): its own position or its nearest located
 * ancestor's. */
static char *template_location(struct template *t, const char *path, int flags)
{
    if (t->file == NULL)
        return (flags & NAMES_PATH) || *path == '\0' ? xstrdup(t->name)
                                                     : xasprintf("%s: %s", t->name, path);
    char *p = xstrdup(path);
    const json_t *found = (flags & AT_KEY) && t->where_keys ? json_object_get(t->where_keys, p)
                                                            : NULL;
    for (;;) {
        if (found == NULL && t->overlay != NULL)
            found = json_object_get(t->overlay, p);
        if (found == NULL && t->where != NULL)
            found = json_object_get(t->where, p);
        if (found != NULL || *p == '\0')
            break;
        template_path_up(p);
    }
    free(p);
    return xstrdup(found ? json_string_value(found) : t->file);
}

/* Keeps the first error only; always returns -1. */
__attribute__((format(printf, 4, 5))) static int
template_fail(struct template *t, const char *path, int flags, const char *fmt, ...)
{
    if (t->err != NULL)
        return -1;
    va_list ap;
    char *msg;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        fatalx("out of memory");
    va_end(ap);
    char *loc = template_location(t, path, flags);
    t->err = xasprintf("%s: %s", loc, msg);
    free(loc);
    free(msg);
    return -1;
}

static size_t template_distance(const char *a, const char *b)
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
static void template_consider(const char *word, const char *candidate, const char **best,
                              size_t *best_distance)
{
    size_t limit = strlen(word) / 3 > 2 ? strlen(word) / 3 : 2;
    size_t d = template_distance(word, candidate);
    if (d <= limit && d < *best_distance) {
        *best = candidate;
        *best_distance = d;
    }
}

/* 0.001 stays "0.001", 1e-05 is "1e-05": the shortest form that reads back as the same double. */
static void template_number(double v, char *buf, size_t len)
{
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A scalar as it goes into argv, env and ${…} (malloc'd); null is empty. */
static char *template_scalar_text(const json_t *v)
{
    char buf[40];
    switch (json_typeof(v)) {
    case JSON_STRING: return xstrdup(json_string_value(v));
    case JSON_INTEGER: return xasprintf("%lld", (long long)json_integer_value(v));
    case JSON_REAL: template_number(json_real_value(v), buf, sizeof buf); return xstrdup(buf);
    case JSON_TRUE: return xstrdup("true");
    case JSON_FALSE: return xstrdup("false");
    default: return xstrdup("");
    }
}

static void template_json_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", fp);
        else if (c == '\t')
            fputs("\\t", fp);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

/* Compact JSON with our number format (jansson's writes 0.1 as 0.10000000000000001). */
static void template_json(FILE *fp, const json_t *v)
{
    const char *key;
    const json_t *child;
    size_t i;
    if (json_is_object(v)) {
        fputc('{', fp);
        i = 0;
        json_object_foreach((json_t *)v, key, child) {
            fputs(i++ ? "," : "", fp);
            template_json_string(fp, key);
            fputc(':', fp);
            template_json(fp, child);
        }
        fputc('}', fp);
    } else if (json_is_array(v)) {
        fputc('[', fp);
        json_array_foreach(v, i, child) {
            fputs(i ? "," : "", fp);
            template_json(fp, child);
        }
        fputc(']', fp);
    } else if (json_is_string(v)) {
        template_json_string(fp, json_string_value(v));
    } else if (json_is_null(v)) {
        fputs("null", fp);
    } else {
        char *text = template_scalar_text(v);
        fputs(text, fp);
        free(text);
    }
}

static FILE *template_memstream(char **buf, size_t *len)
{
    FILE *fp = open_memstream(buf, len);
    if (fp == NULL)
        fatalx("out of memory");
    return fp;
}

/* Any value as text (malloc'd): a scalar as template_scalar_text, a mapping or list as JSON. */
static char *template_text(const json_t *v)
{
    if (!json_is_object(v) && !json_is_array(v))
        return template_scalar_text(v);
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    template_json(fp, v);
    fclose(fp);
    return buf;
}

/* How a value is shown after "got" (malloc'd): strings quoted, 2.0 keeps its point. */
static char *template_got(const json_t *v)
{
    if (json_is_object(v))
        return xstrdup("a mapping");
    if (json_is_array(v))
        return xstrdup("a list");
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    template_json(fp, v);
    fflush(fp); /* buf is only current after a flush */
    if (json_is_real(v) && strpbrk(buf, ".e") == NULL)
        fputs(".0", fp);
    fclose(fp);
    return buf;
}

/* "PATH: expected WHAT, got GOT (WHY)"; why (or NULL) is a parser's reason. */
static int template_expected_because(struct template *t, const char *path, const char *what,
                                     const json_t *got, const char *why)
{
    char *shown = template_got(got);
    bool detail = why != NULL && strncmp(why, "expected", 8) != 0;
    template_fail(t, path, NAMES_PATH, "%s: expected %s, got %s%s%s%s", path, what, shown,
                  detail ? " (" : "", detail ? why : "", detail ? ")" : "");
    free(shown);
    return -1;
}

static int template_expected(struct template *t, const char *path, const char *what,
                             const json_t *got)
{
    return template_expected_because(t, path, what, got, NULL);
}

/* --- spec paths: "hyperparameters.lr", "data.files.0" --- */

/* The node at a dotted path below root, or NULL; then *suggestion (malloc'd, or NULL) is the
 * path with its first missing key replaced by the nearest existing one, if that is a likely typo.
 * Components index lists when they are decimal. */
static json_t *template_lookup(const json_t *root, const char *path, char **suggestion)
{
    json_t *node = (json_t *)root;
    const char *p = path;
    *suggestion = NULL;
    if (*path == '\0')
        return NULL;
    while (node != NULL) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char *component = xstrndup(p, len);
        json_t *child = NULL;
        if (json_is_object(node)) {
            child = json_object_get(node, component);
            if (child == NULL && len > 0) {
                const char *best = NULL, *key;
                size_t best_distance = SIZE_MAX;
                json_t *ignored;
                json_object_foreach(node, key, ignored)
                    template_consider(component, key, &best, &best_distance);
                if (best != NULL)
                    *suggestion =
                        xasprintf("%.*s%s%s", (int)(p - path), path, best, dot ? dot : "");
            }
        } else if (json_is_array(node) && len > 0 && strspn(component, "0123456789") == len) {
            child = json_array_get(node, strtoul(component, NULL, 10));
        }
        free(component);
        node = child;
        if (dot == NULL || node == NULL)
            break;
        p = dot + 1;
    }
    return node;
}

/* Puts value (a reference it takes) at an existing path below root. */
static void template_assign(json_t *root, const char *path, json_t *value)
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
        fatalx("template_assign: %s does not exist", path);
}

static bool template_good_path(const char *path)
{
    return *path != '\0' && *path != '.' && path[strlen(path) - 1] != '.' &&
           strstr(path, "..") == NULL;
}

/* --- values --- */

/* An integer, or a size string ("16G", and Kubernetes' "16Gi"). */
static int template_size(const json_t *v, uint64_t *out, const char **why)
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
static int template_duration(const json_t *v, int64_t *ms, const char **why)
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

static bool template_is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

static bool template_is_env_name(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

/* --- the schema walk --- */

static int template_check_value(struct template *t, const struct template_key *key,
                                 const json_t *v, const char *path);

static int template_check_mapping(struct template *t, const struct template_key *keys,
                                  const json_t *object, const char *path)
{
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)object, name, v) {
        const struct template_key *key = keys;
        while (key->key != NULL && strcmp(key->key, name) != 0)
            key++;
        char *child = template_join(path, name);
        if (key->key == NULL) {
            const char *best = NULL;
            size_t best_distance = SIZE_MAX;
            for (key = keys; key->key != NULL; key++)
                template_consider(name, key->key, &best, &best_distance);
            char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
            template_fail(t, child, AT_KEY | NAMES_PATH, "unknown key '%s' %s%s%s", name,
                          *path ? "in " : "at the top level", path, hint);
            free(hint);
            free(child);
            return -1;
        }
        int rc = template_check_value(t, key, v, child);
        free(child);
        if (rc < 0)
            return -1;
    }
    for (const struct template_key *key = keys; key->key != NULL; key++)
        if (key->required && json_object_get(object, key->key) == NULL)
            return template_fail(t, path, NAMES_PATH, "%s%smissing '%s'", path,
                                 *path ? ": " : "", key->key);
    return 0;
}

/* "expected grid or random, got "grd"; did you mean 'grid'?" */
static int template_check_choice(struct template *t, const struct template_key *key,
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
        template_consider(s, *choice, &best, &best_distance);
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
static int template_check_items(struct template *t, const json_t *list, const char *path,
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

static bool template_is_string(const json_t *v)
{
    return json_is_string(v);
}

/* A command's words may be numbers or bools too (`- 50` is what YAML makes of an argument 50). */
static bool template_is_word(const json_t *v)
{
    return json_is_string(v) || json_is_number(v) || json_is_boolean(v);
}

static bool template_is_duration(const json_t *v)
{
    int64_t ms;
    const char *why;
    return template_duration(v, &ms, &why) == 0;
}

static int template_check_env(struct template *t, const json_t *v, const char *path)
{
    const char *name;
    json_t *value;
    if (!json_is_object(v))
        return template_expected(t, path, "a mapping of NAME: value", v);
    json_object_foreach((json_t *)v, name, value) {
        char *child = template_join(path, name);
        if (!template_is_env_name(name))
            template_fail(t, child, AT_KEY | NAMES_PATH,
                          "%s: '%s' is not a variable name (letters, digits and '_')", path,
                          name);
        else if (!template_is_scalar(value))
            template_expected(t, child, "a string, number or bool", value);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return 0;
}

static int template_check_parameters(struct template *t, const json_t *v, const char *path)
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
            template_check_mapping(t, template_range, value, child);
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

static int template_check_stage_list(struct template *t, const struct template_key *key,
                                     const json_t *v, const char *path)
{
    size_t i;
    const json_t *stage;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return template_expected(t, path, "a list of stages", v);
    if (json_array_size(v) > TEMPLATE_MAX_STAGES)
        return template_fail(t, path, NAMES_PATH, "%s: more than %d stages", path,
                             TEMPLATE_MAX_STAGES);
    json_array_foreach(v, i, stage) {
        char *child = template_index(path, i);
        if (!json_is_object(stage))
            template_expected(t, child, "a mapping { name, command, … }", stage);
        else
            template_check_mapping(t, key->children, stage, child);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return 0;
}

static int template_check_type(struct template *t, const struct template_key *key,
                               const json_t *v, const char *path)
{
    const char *why;
    uint64_t bytes;
    int64_t ms;
    switch (key->type) {
    case TYPE_STRING:
        if (!json_is_string(v))
            return template_expected(t, path, "a string", v);
        return key->choices ? template_check_choice(t, key, v, path) : 0;
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
        if (template_size(v, &bytes, &why) == 0)
            return 0;
        return template_expected_because(t, path, "a size such as 16G or 512Mi", v, why);
    case TYPE_DURATION:
        if (template_duration(v, &ms, &why) == 0)
            return 0;
        return template_expected_because(t, path, "a duration such as 90s or 2h", v, why);
    case TYPE_MAPPING:
        if (!json_is_object(v))
            return template_expected(t, path, "a mapping", v);
        return template_check_mapping(t, key->children, v, path);
    case TYPE_FREE:
        return json_is_object(v) ? 0 : template_expected(t, path, "a mapping", v);
    case TYPE_ARGV:
        if (!json_is_array(v) || json_array_size(v) == 0)
            return template_expected(t, path, "a list of strings (the command and arguments)", v);
        return template_check_items(t, v, path, template_is_word, "a string");
    case TYPE_STRINGS:
        if (!json_is_array(v))
            return template_expected(t, path, "a list of strings", v);
        return template_check_items(t, v, path, template_is_string, "a string");
    case TYPE_ENV:
        return template_check_env(t, v, path);
    case TYPE_RETRY:
        if (json_is_object(v))
            return template_check_mapping(t, key->children, v, path);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            return template_expected(t, path, "an integer >= 0 or { attempts, backoff }", v);
        return 0;
    case TYPE_BACKOFF:
        if (!json_is_array(v) || json_array_size(v) > 8)
            return template_expected(t, path, "a list of at most 8 durations", v);
        return template_check_items(t, v, path, template_is_duration,
                                    "a duration such as 30s");
    case TYPE_BASELINE:
        if (json_is_object(v))
            return template_check_mapping(t, key->children, v, path);
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
        return template_check_parameters(t, v, path);
    case TYPE_STAGES:
        return template_check_stage_list(t, key, v, path);
    }
    fatalx("template: type %d", (int)key->type);
}

static int template_check_value(struct template *t, const struct template_key *key,
                                 const json_t *v, const char *path)
{
    if (template_check_type(t, key, v, path) < 0)
        return -1;
    return key->check ? key->check(t, v, path) : 0;
}

static int template_check_api(struct template *t, const json_t *v, const char *path)
{
    const char *s = json_string_value(v);
    size_t len = strlen(s);
    if (len > 3 && strcmp(s + len - 3, "/v1") == 0)
        return 0;
    return template_expected(t, path, "\"…/v1\" such as \"drover/v1\"", v);
}

static bool template_is_name(const char *s)
{
    size_t len = strlen(s);
    return len > 0 && len <= TEMPLATE_MAX_NAME &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

static int template_check_name(struct template *t, const json_t *v, const char *path)
{
    if (template_is_name(json_string_value(v)))
        return 0;
    return template_expected(t, path, "a name of letters, digits, '.', '_' and '-' (at most 64)",
                             v);
}

static int template_check_factor(struct template *t, const json_t *v, const char *path)
{
    return json_number_value(v) > 1 ? 0 : template_expected(t, path, "a number > 1", v);
}

/* --- the sweep --- */

static bool template_is_random(const json_t *sweep)
{
    const json_t *method = json_object_get(sweep, "method");
    return method != NULL && strcmp(json_string_value(method), "random") == 0;
}

static double template_number_at(const json_t *object, const char *key)
{
    return json_number_value(json_object_get(object, key));
}

/* The points of {min, max, step}: min, min + step, … up to max, allowing for rounding (0.1 + 0.1
 * + 0.1 is a hair above 0.3, and 0.3 must still be in). */
static size_t template_range_count(const json_t *range)
{
    double min = template_number_at(range, "min"), max = template_number_at(range, "max");
    double step = template_number_at(range, "step");
    return (size_t)floor((max - min) / step + 1e-9) + 1;
}

static bool template_range_is_integer(const json_t *range)
{
    return json_is_integer(json_object_get(range, "min")) &&
           json_is_integer(json_object_get(range, "max")) &&
           json_is_integer(json_object_get(range, "step"));
}

/* Point j of a range. Integers stay integers; other values are cut to 12 significant digits so
 * that 0.1 + 2 * 0.1 is 0.3, not 0.30000000000000004. */
static json_t *template_range_point(const json_t *range, size_t j)
{
    if (template_range_is_integer(range))
        return json_integer(json_integer_value(json_object_get(range, "min")) +
                            (json_int_t)j * json_integer_value(json_object_get(range, "step")));
    char buf[40];
    snprintf(buf, sizeof buf, "%.12g",
             template_number_at(range, "min") + (double)j * template_number_at(range, "step"));
    return json_real(strtod(buf, NULL));
}

static size_t template_parameter_count(const json_t *values)
{
    if (json_is_array(values))
        return json_array_size(values);
    return json_object_get(values, "distribution") ? 1 : template_range_count(values);
}

static int template_check_parameter(struct template *t, const char *name, const json_t *values,
                                    const char *path, bool random)
{
    char *suggestion = NULL;
    if (!template_good_path(name) || template_lookup(t->spec, name, &suggestion) == NULL) {
        char *hint = suggestion ? xasprintf("; did you mean '%s'?", suggestion) : xstrdup("");
        template_fail(t, path, AT_KEY, "sweep parameter '%s' is not in the spec%s", name, hint);
        free(hint);
        free(suggestion);
        return -1;
    }
    if (json_is_array(values))
        return 0;
    const json_t *distribution = json_object_get(values, "distribution");
    const json_t *step = json_object_get(values, "step");
    double min = template_number_at(values, "min"), max = template_number_at(values, "max");
    if (min > max)
        return template_fail(t, path, NAMES_PATH, "%s: max is below min", path);
    if (distribution != NULL) {
        const char *how = json_string_value(distribution);
        if (!random)
            return template_fail(t, path, NAMES_PATH, "%s: a distribution needs method: random",
                                 path);
        if (step != NULL) {
            char *child = template_join(path, "step");
            template_fail(t, child, AT_KEY | NAMES_PATH,
                          "%s: 'step' does not go with a distribution", path);
            free(child);
            return -1;
        }
        if (strcmp(how, "log_uniform") == 0 && min <= 0)
            return template_fail(t, path, NAMES_PATH, "%s: log_uniform needs min > 0", path);
        if (strcmp(how, "int_uniform") == 0 &&
            (!json_is_integer(json_object_get(values, "min")) ||
             !json_is_integer(json_object_get(values, "max")) || max - min > 1e15))
            return template_fail(t, path, NAMES_PATH, "%s: int_uniform needs integer min and max",
                                 path);
        return 0;
    }
    if (step == NULL)
        return template_fail(t, path, NAMES_PATH,
                             "%s: missing 'step' (a range is { min, max, step })", path);
    if (json_number_value(step) <= 0)
        return template_fail(t, path, NAMES_PATH, "%s: step must be greater than 0", path);
    if ((max - min) / json_number_value(step) >= TEMPLATE_MAX_RANGE)
        return template_fail(t, path, NAMES_PATH, "%s: more than %d values in the range", path,
                             TEMPLATE_MAX_RANGE);
    return 0;
}

/* The grid's size (random: max_trials; no sweep (NULL): 1), and in *ntrials how many trials a
 * load creates (SIZE_MAX: more than TEMPLATE_MAX_TASKS). */
static double template_space(const json_t *sweep, size_t *ntrials)
{
    const json_t *max_trials = sweep ? json_object_get(sweep, "max_trials") : NULL;
    const char *name;
    json_t *values;
    double space = 1;
    if (sweep != NULL && template_is_random(sweep)) {
        space = (double)json_integer_value(max_trials);
    } else if (sweep != NULL) {
        json_object_foreach(json_object_get(sweep, "parameters"), name, values)
            space *= (double)template_parameter_count(values);
    }
    double trials = space;
    if (max_trials != NULL && (double)json_integer_value(max_trials) < trials)
        trials = (double)json_integer_value(max_trials);
    *ntrials = trials > TEMPLATE_MAX_TASKS ? SIZE_MAX : (size_t)trials;
    return space;
}

static int template_check_sweep(struct template *t, const json_t *sweep, const char *path)
{
    bool random = template_is_random(sweep);
    const char *name;
    json_t *values;
    if (random && json_object_get(sweep, "max_trials") == NULL)
        return template_fail(t, path, NAMES_PATH,
                             "%s: missing 'max_trials' (method random needs it)", path);
    char *parameters = template_join(path, "parameters");
    json_object_foreach(json_object_get(sweep, "parameters"), name, values) {
        char *child = template_join(parameters, name);
        int rc = template_check_parameter(t, name, values, child, random);
        free(child);
        if (rc < 0)
            break;
    }
    free(parameters);
    if (t->err != NULL)
        return -1;
    size_t ntrials;
    double space = template_space(sweep, &ntrials);
    if (ntrials == SIZE_MAX)
        return template_fail(t, path, NAMES_PATH, "%s: %.0f trials, more than %d%s", path, space,
                             TEMPLATE_MAX_TASKS, random ? "" : " (set max_trials)");
    return 0;
}

static uint64_t template_next(uint64_t *state)
{
    /* splitmix64: tiny, and good enough for picking hyperparameters reproducibly. */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double template_unit(uint64_t *state)
{
    return (double)(template_next(state) >> 11) * 0x1.0p-53;
}

/* A random draw from one parameter's values. */
static json_t *template_draw(const json_t *values, uint64_t *state)
{
    if (json_is_array(values)) {
        size_t pick = template_next(state) % json_array_size(values);
        return json_deep_copy(json_array_get(values, pick));
    }
    const json_t *distribution = json_object_get(values, "distribution");
    if (distribution == NULL)
        return template_range_point(values, template_next(state) % template_range_count(values));
    const char *how = json_string_value(distribution);
    double min = template_number_at(values, "min"), max = template_number_at(values, "max");
    if (strcmp(how, "int_uniform") == 0) {
        json_int_t low = json_integer_value(json_object_get(values, "min"));
        uint64_t span = (uint64_t)(json_integer_value(json_object_get(values, "max")) - low) + 1;
        return json_integer(low + (json_int_t)(template_next(state) % span));
    }
    double v = strcmp(how, "log_uniform") == 0
                   ? exp(log(min) + template_unit(state) * (log(max) - log(min)))
                   : min + template_unit(state) * (max - min);
    /* Six significant digits are finer than any search needs, and keep argv readable. */
    char buf[40];
    snprintf(buf, sizeof buf, "%.6g", v);
    v = strtod(buf, NULL);
    return json_real(v < min ? min : v > max ? max : v);
}

/* Trial `trial`'s values, {path: value} in the order the file lists the parameters; origins gets
 * path -> the document path of the value's source (for errors). Grid: the last parameter varies
 * fastest. Random: each trial draws from its own stream, so trial 7 is the same whether it is
 * drawn alone (exp_trials) or after trials 0 to 6. */
static json_t *template_trial_params(const json_t *sweep, size_t trial, uint64_t seed,
                                     json_t *origins)
{
    const json_t *parameters = json_object_get(sweep, "parameters");
    json_t *params = json_object();
    const char *name;
    json_t *values;
    if (template_is_random(sweep)) {
        uint64_t state = seed;
        state = template_next(&state) ^ ((uint64_t)trial * 0xd1b54a32d192ed03ULL);
        json_object_foreach((json_t *)parameters, name, values) {
            json_object_set_new(params, name, template_draw(values, &state));
            json_object_set_new(origins, name,
                                json_sprintf("spec.sweep.parameters.%s", name));
        }
        return params;
    }
    size_t n = json_object_size(parameters), i = 0;
    size_t *index = xcalloc(n, sizeof *index);
    const char **names = xcalloc(n, sizeof *names);
    json_object_foreach((json_t *)parameters, name, values)
        names[i++] = name;
    for (i = n; i-- > 0;) {
        size_t count = template_parameter_count(json_object_get(parameters, names[i]));
        index[i] = trial % count;
        trial /= count;
    }
    for (i = 0; i < n; i++) {
        values = json_object_get(parameters, names[i]);
        if (json_is_array(values)) {
            json_object_set_new(params, names[i], json_deep_copy(json_array_get(values, index[i])));
            json_object_set_new(origins, names[i], json_sprintf("spec.sweep.parameters.%s[%zu]",
                                                                names[i], index[i]));
        } else {
            json_object_set_new(params, names[i], template_range_point(values, index[i]));
            json_object_set_new(origins, names[i],
                                json_sprintf("spec.sweep.parameters.%s", names[i]));
        }
    }
    free(index);
    free(names);
    return params;
}

/* --- pipelines --- */

static long template_stage_index(const json_t *stages, const char *name)
{
    size_t i;
    const json_t *stage;
    json_array_foreach(stages, i, stage)
        if (strcmp(json_string_value(json_object_get(stage, "name")), name) == 0)
            return (long)i;
    return -1;
}

/* Depth-first along needs; state: 0 unseen, 1 on the trail, 2 done. On a cycle, returns 1 with
 * the cycle as trail[*from .. *to]. */
static int template_visit(const json_t *stages, size_t i, unsigned char *state, size_t *trail,
                          size_t depth, size_t *from, size_t *to)
{
    size_t k;
    const json_t *need;
    state[i] = 1;
    trail[depth] = i;
    json_array_foreach(json_object_get(json_array_get(stages, i), "needs"), k, need) {
        size_t j = (size_t)template_stage_index(stages, json_string_value(need));
        if (state[j] == 1) {
            for (*from = 0; trail[*from] != j; (*from)++)
                ;
            *to = depth;
            return 1;
        }
        if (state[j] == 0 && template_visit(stages, j, state, trail, depth + 1, from, to))
            return 1;
    }
    state[i] = 2;
    return 0;
}

static const char *template_stage_name(const json_t *stages, size_t i)
{
    return json_string_value(json_object_get(json_array_get(stages, i), "name"));
}

/* "cycle in needs: a -> b -> a", at the stage where the cycle was entered. */
static int template_check_cycles(struct template *t, const json_t *stages, const char *path)
{
    size_t n = json_array_size(stages), from = 0, to = 0;
    unsigned char *state = xcalloc(n, 1);
    size_t *trail = xcalloc(n, sizeof *trail);
    for (size_t i = 0; i < n; i++) {
        if (state[i] != 0 || !template_visit(stages, i, state, trail, 0, &from, &to))
            continue;
        char *cycle, *stage_path = template_index(path, trail[from]);
        size_t len;
        FILE *fp = template_memstream(&cycle, &len);
        for (size_t k = from; k <= to; k++)
            fprintf(fp, "%s -> ", template_stage_name(stages, trail[k]));
        fputs(template_stage_name(stages, trail[from]), fp);
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

static int template_check_stages(struct template *t, const json_t *stages, const char *path)
{
    size_t i, k;
    const json_t *stage, *need;
    json_array_foreach(stages, i, stage) {
        const char *name = template_stage_name(stages, i);
        char *child = template_index(path, i), *name_path = template_join(child, "name");
        if ((size_t)template_stage_index(stages, name) != i)
            template_fail(t, name_path, 0, "duplicate stage name '%s'", name);
        json_array_foreach(json_object_get(stage, "needs"), k, need) {
            if (t->err != NULL || template_stage_index(stages, json_string_value(need)) >= 0)
                continue;
            const char *best = NULL;
            size_t best_distance = SIZE_MAX, j;
            json_t *other;
            json_array_foreach(stages, j, other)
                template_consider(json_string_value(need), template_stage_name(stages, j), &best,
                                  &best_distance);
            char *needs_path = template_join(child, "needs");
            char *need_path = template_index(needs_path, k);
            char *hint = best ? xasprintf("; did you mean '%s'?", best) : xstrdup("");
            template_fail(t, need_path, 0, "needs unknown stage '%s'%s", json_string_value(need),
                          hint);
            free(hint);
            free(need_path);
            free(needs_path);
        }
        free(name_path);
        free(child);
        if (t->err != NULL)
            return -1;
    }
    return template_check_cycles(t, stages, path);
}

/* What depends on kind: an Experiment has a command and no stages; a Pipeline has stages, and
 * neither a command of its own nor a sweep (a stage is one task; trials of a stage would need
 * names and needs the format does not give). */
static int template_check_kind(struct template *t, enum exp_kind kind, const json_t *spec)
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

/* --- ${…} --- */

static json_t *template_subst_tree(struct template *t, const json_t *root, const json_t *node,
                                   const char *path, int depth);

/* What ${ref} becomes: a scalar's text, a string with its own ${…} replaced, a mapping or list
 * as compact JSON (malloc'd, or NULL on error). */
static char *template_render(struct template *t, const json_t *root, const char *ref,
                             const json_t *value, int depth)
{
    char *path = template_join("spec", ref), *text = NULL;
    if (depth >= TEMPLATE_MAX_DEPTH) {
        template_fail(t, path, 0, "${…} nested more than %d deep (does ${%s} refer to itself?)",
                      TEMPLATE_MAX_DEPTH, ref);
    } else if (json_is_object(value) || json_is_array(value)) {
        json_t *done = template_subst_tree(t, root, value, path, depth + 1);
        if (done != NULL)
            text = template_text(done);
        json_decref(done);
    } else if (json_is_string(value)) {
        json_t *done = template_subst_tree(t, root, value, path, depth + 1);
        if (done != NULL)
            text = xstrdup(json_string_value(done));
        json_decref(done);
    } else {
        text = template_scalar_text(value);
    }
    free(path);
    return text;
}

/* s with every ${path} replaced by the value at spec path `path` of root and every $${ by ${
 * (malloc'd), or NULL with t->err located at path (the string's own). */
static char *template_subst_string(struct template *t, const json_t *root, const char *s,
                                   const char *path, int depth)
{
    char *out;
    size_t len;
    FILE *fp = template_memstream(&out, &len);
    const char *p = s;
    while (*p != '\0') {
        if (strncmp(p, "$${", 3) == 0) {
            fputs("${", fp);
            p += 3;
            continue;
        }
        if (strncmp(p, "${", 2) != 0) {
            fputc(*p++, fp);
            continue;
        }
        const char *close = strchr(p + 2, '}');
        if (close == NULL) {
            template_fail(t, path, 0, "unterminated ${ (write $${ for a literal ${)");
            break;
        }
        const char *start = p + 2, *end = close;
        while (start < end && isspace((unsigned char)*start))
            start++;
        while (end > start && isspace((unsigned char)end[-1]))
            end--;
        char *ref = xstrndup(start, (size_t)(end - start));
        char *suggestion = NULL;
        const json_t *value =
            template_good_path(ref) ? template_lookup(root, ref, &suggestion) : NULL;
        char *text = NULL;
        if (value == NULL) {
            char *hint = suggestion ? xasprintf(" (did you mean %s?)", suggestion) : xstrdup("");
            template_fail(t, path, 0, "undefined ${%s}%s", ref, hint);
            free(hint);
            free(suggestion);
        } else {
            text = template_render(t, root, ref, value, depth);
        }
        free(ref);
        if (text == NULL)
            break;
        fputs(text, fp);
        free(text);
        p = close + 1;
    }
    fclose(fp);
    if (t->err != NULL) {
        free(out);
        return NULL;
    }
    return out;
}

/* A copy of node with every string substituted (a new reference), or NULL. */
static json_t *template_subst_tree(struct template *t, const json_t *root, const json_t *node,
                                   const char *path, int depth)
{
    json_t *out = NULL;
    const char *key;
    const json_t *child;
    size_t i;
    if (json_is_string(node)) {
        char *s = template_subst_string(t, root, json_string_value(node), path, depth);
        if (s == NULL)
            return NULL;
        out = json_string(s);
        free(s);
        return out;
    }
    if (json_is_object(node)) {
        out = json_object();
        json_object_foreach((json_t *)node, key, child) {
            char *child_path = template_join(path, key);
            json_t *done = template_subst_tree(t, root, child, child_path, depth);
            free(child_path);
            if (done == NULL)
                goto fail;
            json_object_set_new(out, key, done);
        }
        return out;
    }
    if (json_is_array(node)) {
        out = json_array();
        json_array_foreach(node, i, child) {
            char *child_path = template_index(path, i);
            json_t *done = template_subst_tree(t, root, child, child_path, depth);
            free(child_path);
            if (done == NULL)
                goto fail;
            json_array_append_new(out, done);
        }
        return out;
    }
    return json_incref((json_t *)node);
fail:
    json_decref(out);
    return NULL;
}

/* --- tasks --- */

static char **template_strings(const json_t *list)
{
    size_t i;
    const json_t *item;
    char **out = xcalloc(json_array_size(list) + 1, sizeof *out);
    json_array_foreach(list, i, item)
        out[i] = template_scalar_text(item);
    return out;
}

static void template_strings_free(char **list)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        free(list[i]);
    free(list);
}

/* A stage's own key, or the spec's. */
static const json_t *template_pick(const json_t *spec, const json_t *stage, const char *key)
{
    const json_t *v = stage ? json_object_get(stage, key) : NULL;
    return v ? v : json_object_get(spec, key);
}

/* A stage's own resource, or the spec's: key by key, so a stage can change just its gpu_count. */
static const json_t *template_resource(const json_t *spec, const json_t *stage, const char *key)
{
    const json_t *v = stage ? json_object_get(json_object_get(stage, "resources"), key) : NULL;
    return v ? v : json_object_get(json_object_get(spec, "resources"), key);
}

/* Fills task's command, env, resources, timeout and retries from a substituted spec (and stage,
 * for a pipeline: its keys first, the spec's after). The values were checked, so the conversions
 * cannot fail. */
static void template_fill(const json_t *spec, const json_t *stage, struct exp_task *task)
{
    const char *key, *why;
    const json_t *v;
    json_t *env = json_object();
    size_t i = 0;
    task->argv = template_strings(template_pick(spec, stage, "command"));
    if (json_is_object(json_object_get(spec, "env")))
        json_object_update(env, json_object_get(spec, "env"));
    if (stage != NULL && json_is_object(json_object_get(stage, "env")))
        json_object_update(env, json_object_get(stage, "env"));
    task->env = xcalloc(json_object_size(env) + 1, sizeof *task->env);
    json_object_foreach(env, key, v) {
        char *text = template_scalar_text(v);
        task->env[i++] = xasprintf("%s=%s", key, text);
        free(text);
    }
    json_decref(env);
    if ((v = template_resource(spec, stage, "gpu_count")) != NULL)
        task->gpus = (int)json_integer_value(v);
    if ((v = template_resource(spec, stage, "gpu_memory")) != NULL &&
        template_size(v, &task->gpu_mem, &why) < 0)
        fatalx("template: gpu_memory unchecked");
    if ((v = template_resource(spec, stage, "memory")) != NULL &&
        template_size(v, &task->mem, &why) < 0)
        fatalx("template: memory unchecked");
    if ((v = template_resource(spec, stage, "gpu_type")) != NULL)
        task->gpu_type = xstrdup(json_string_value(v));
    if ((v = template_resource(spec, stage, "cpus")) != NULL)
        task->cpus = (int)json_integer_value(v);
    if ((v = template_pick(spec, stage, "timeout")) != NULL &&
        template_duration(v, &task->timeout_ms, &why) < 0)
        fatalx("template: timeout unchecked");
    if ((v = template_pick(spec, stage, "retry")) != NULL && json_is_integer(v)) {
        task->retries = (int)json_integer_value(v);
    } else if (v != NULL) {
        const json_t *backoff = json_object_get(v, "backoff"), *delay;
        task->retries = (int)json_integer_value(json_object_get(v, "attempts"));
        json_array_foreach(backoff, i, delay)
            if (template_duration(delay, &task->backoff_ms[task->nbackoff++], &why) < 0)
                fatalx("template: backoff unchecked");
    }
    task->needs = template_strings(stage ? json_object_get(stage, "needs") : NULL);
}

/* One trial: params put into a copy of spec, checked again (a sweep may set resources), then
 * substituted. origins (or NULL) names where each value came from, for errors. */
static int template_trial(struct template *t, const json_t *spec, const char *name, int trial,
                          const json_t *params, const json_t *origins, struct exp_task *task)
{
    json_t *copy = json_deep_copy(spec), *done = NULL;
    const char *path;
    const json_t *value;
    memset(task, 0, sizeof *task);
    if (t->overlay != NULL)
        json_object_clear(t->overlay);
    json_object_foreach((json_t *)params, path, value) {
        template_assign(copy, path, json_deep_copy(value));
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
    if (json_object_size(params) > 0 &&
        template_check_value(t, &template_spec_key, copy, "spec") < 0)
        goto fail;
    done = template_subst_tree(t, copy, copy, "spec", 0);
    if (done == NULL)
        goto fail;
    task->name = xasprintf("%s-t%d", name, trial);
    task->trial = trial;
    task->params = json_deep_copy(params);
    template_fill(done, NULL, task);
    t->spec = NULL;
    json_decref(done);
    json_decref(copy);
    return 0;
fail:
    t->spec = NULL;
    json_decref(copy);
    return -1;
}

static uint64_t template_seed(const json_t *spec, unsigned seed)
{
    const json_t *fixed = json_object_get(json_object_get(spec, "sweep"), "seed");
    return fixed ? (uint64_t)json_integer_value(fixed) : seed;
}

/* Trials [first, first + n) of a checked Experiment spec into *out (n > 0). */
static int template_expand(struct template *t, const json_t *spec, const char *name, size_t first,
                           size_t n, unsigned seed, struct exp_task **out)
{
    const json_t *sweep = json_object_get(spec, "sweep");
    struct exp_task *tasks = xcalloc(n, sizeof *tasks);
    size_t i;
    for (i = 0; i < n; i++) {
        json_t *origins = json_object();
        json_t *params = sweep ? template_trial_params(sweep, first + i, template_seed(spec, seed),
                                                       origins)
                               : json_object();
        int rc = template_trial(t, spec, name, (int)(first + i), params, origins, &tasks[i]);
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
static int template_pipeline(struct template *t, const json_t *spec, struct exp_task **out,
                             size_t *nout)
{
    json_t *done = template_subst_tree(t, spec, spec, "spec", 0);
    if (done == NULL)
        return -1;
    const json_t *stages = json_object_get(done, "stages"), *stage;
    size_t i;
    struct exp_task *tasks = xcalloc(json_array_size(stages), sizeof *tasks);
    json_array_foreach(stages, i, stage) {
        tasks[i].name = xstrdup(json_string_value(json_object_get(stage, "name")));
        tasks[i].trial = -1;
        tasks[i].params = json_object();
        template_fill(done, stage, &tasks[i]);
    }
    *out = tasks;
    *nout = json_array_size(stages);
    json_decref(done);
    return 0;
}

/* --- --set --- */

static void template_remember(struct template *t, const char *path, const char *location)
{
    if (t->where != NULL)
        json_object_set_new(t->where, path, json_string(location));
    if (t->where_keys != NULL)
        json_object_set_new(t->where_keys, path, json_string(location));
}

/* "a.b=VALUE": VALUE (a YAML scalar) at spec path a.b, making the mappings on the way. */
static int template_apply_set(struct template *t, json_t *spec, const char *set)
{
    const char *eq = strchr(set, '=');
    char *path = NULL, *location = NULL, *why = NULL, *doc = xstrdup("spec");
    json_t *value = NULL, *node = spec;
    if (eq == NULL) {
        t->err = xasprintf("--set %s: expected PATH=VALUE", set);
        goto fail;
    }
    path = xstrndup(set, (size_t)(eq - set));
    if (!template_good_path(path)) {
        t->err = xasprintf("--set %s: %s", set,
                           *path ? "empty component in the path" : "empty path");
        goto fail;
    }
    if (exp_yaml_scalar(eq + 1, &value, &why) < 0) {
        t->err = xasprintf("--set %s: %s", set, why);
        goto fail;
    }
    location = xasprintf("--set %s", set);
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        char *component = dot ? xstrndup(p, (size_t)(dot - p)) : xstrdup(p);
        bool indexed = json_is_array(node) && strspn(component, "0123456789") == strlen(component);
        size_t index = indexed ? strtoul(component, NULL, 10) : 0;
        char *child_doc = indexed ? template_index(doc, index) : template_join(doc, component);
        json_t *child = json_is_object(node) ? json_object_get(node, component)
                        : indexed            ? json_array_get(node, index)
                                             : NULL;
        if (json_is_array(node) && child == NULL) {
            t->err = xasprintf("--set %s: %s has no element %s", set, doc, component);
        } else if (!json_is_object(node) && child == NULL) {
            t->err = xasprintf("--set %s: %s is not a mapping", set, doc);
        } else if (dot == NULL) {
            if (indexed)
                json_array_set(node, index, value);
            else
                json_object_set(node, component, value);
            template_remember(t, child_doc, location);
        } else if (child == NULL) {
            child = json_object();
            json_object_set_new(node, component, child);
            template_remember(t, child_doc, location);
        }
        free(component);
        free(doc);
        doc = child_doc;
        if (t->err != NULL)
            goto fail;
        if (dot == NULL)
            break;
        node = child;
        p = dot + 1;
    }
    free(doc);
    free(path);
    free(location);
    json_decref(value);
    return 0;
fail:
    free(doc);
    free(path);
    free(location);
    free(why);
    json_decref(value);
    return -1;
}

static int template_apply_sets(struct template *t, json_t *root, char *const *sets,
                               size_t nsets)
{
    json_t *spec = json_object_get(root, "spec");
    if (nsets == 0)
        return 0;
    if (spec == NULL) {
        spec = json_object();
        json_object_set_new(root, "spec", spec);
    } else if (!json_is_object(spec)) {
        return template_expected(t, "spec", "a mapping", spec);
    }
    for (size_t i = 0; i < nsets; i++)
        if (template_apply_set(t, spec, sets[i]) < 0)
            return -1;
    return 0;
}

/* --- the interface --- */

void exp_task_clear(struct exp_task *task)
{
    if (task == NULL)
        return;
    free(task->name);
    json_decref(task->params);
    template_strings_free(task->argv);
    template_strings_free(task->env);
    free(task->gpu_type);
    template_strings_free(task->needs);
    memset(task, 0, sizeof *task);
}

void exp_def_free(struct exp_def *def)
{
    if (def == NULL)
        return;
    for (size_t i = 0; i < def->ntasks; i++)
        exp_task_clear(&def->tasks[i]);
    free(def->tasks);
    free(def->name);
    json_decref(def->spec);
    free(def);
}

static void template_free(struct template *t)
{
    json_decref(t->where);
    json_decref(t->where_keys);
    json_decref(t->overlay);
}

/* Trials the def creates: a grid's first max_trials configurations, or max_trials draws. */
static int template_experiment(struct template *t, struct exp_def *def, unsigned seed)
{
    size_t ntrials;
    const json_t *sweep = json_object_get(def->spec, "sweep");
    double space = template_space(sweep, &ntrials);
    def->space = space < (double)SIZE_MAX ? (size_t)space : SIZE_MAX;
    def->parallel = (int)json_integer_value(json_object_get(sweep, "parallel"));
    if (template_expand(t, def->spec, def->name, 0, ntrials, seed, &def->tasks) < 0)
        return -1;
    def->ntasks = ntrials;
    return 0;
}

int exp_load(const char *path, char *const *sets, size_t nsets, unsigned seed,
             struct exp_def **out, char **err)
{
    struct template t = {.file = path, .where = json_object(), .where_keys = json_object(),
                         .overlay = json_object()};
    struct exp_def *def = NULL;
    json_t *root = NULL;
    *out = NULL;
    if (exp_yaml_read(path, &root, t.where, t.where_keys, &t.err) < 0)
        goto fail;
    if (!json_is_object(root)) {
        template_fail(&t, "", 0, "expected a mapping with apiVersion, kind, metadata and spec");
        goto fail;
    }
    if (template_apply_sets(&t, root, sets, nsets) < 0)
        goto fail;
    t.spec = json_object_get(root, "spec");
    if (template_check_mapping(&t, template_top, root, "") < 0)
        goto fail;
    def = xcalloc(1, sizeof *def);
    def->kind = strcmp(json_string_value(json_object_get(root, "kind")), "Pipeline") == 0
                    ? EXP_PIPELINE
                    : EXP_EXPERIMENT;
    def->name = xstrdup(json_string_value(json_object_get(json_object_get(root, "metadata"),
                                                          "name")));
    def->spec = json_incref(json_object_get(root, "spec"));
    if (template_check_kind(&t, def->kind, def->spec) < 0)
        goto fail;
    def->early_stopping = json_object_get(def->spec, "early_stopping");
    def->validation = json_object_get(def->spec, "validation");
    def->metrics = json_object_get(def->spec, "metrics");
    def->generator = json_object_get(def->spec, "generator");
    def->circuit_breaker = json_object_get(def->spec, "circuit_breaker");
    if (def->kind == EXP_PIPELINE) {
        def->space = 1;
        if (template_pipeline(&t, def->spec, &def->tasks, &def->ntasks) < 0)
            goto fail;
    } else if (template_experiment(&t, def, seed) < 0) {
        goto fail;
    }
    json_decref(root);
    template_free(&t);
    *out = def;
    return 0;
fail:
    exp_def_free(def);
    json_decref(root);
    template_free(&t);
    *err = t.err ? t.err : xasprintf("%s: cannot be loaded", path);
    return -1;
}

/* A stored spec is checked again: it may come from an older drover, or a hand-edited store. */
static int template_check_stored(struct template *t, const json_t *spec)
{
    t->spec = spec;
    if (template_check_value(t, &template_spec_key, spec, "spec") < 0)
        return -1;
    return template_check_kind(t, EXP_EXPERIMENT, spec);
}

int exp_trials(const json_t *spec, const char *name, size_t first, size_t n, unsigned seed,
               struct exp_task **out, size_t *nout, char **err)
{
    struct template t = {.name = name ? name : "experiment"};
    size_t ntrials;
    *out = NULL;
    *nout = 0;
    if (template_check_stored(&t, spec) < 0)
        goto fail;
    const json_t *sweep = json_object_get(spec, "sweep");
    double space = template_space(sweep, &ntrials);
    if ((sweep == NULL || !template_is_random(sweep)) && (double)first + (double)n > space) {
        template_fail(&t, "", 0, "trials %zu to %zu: the sweep has %.0f configurations", first,
                      first + n - 1, space);
        goto fail;
    }
    if (n > TEMPLATE_MAX_TASKS || first > INT_MAX - n) {
        template_fail(&t, "", 0, "trials %zu to %zu: too many", first, first + n - 1);
        goto fail;
    }
    if (n == 0)
        return 0;
    if (template_expand(&t, spec, t.name, first, n, seed, out) < 0)
        goto fail;
    *nout = n;
    return 0;
fail:
    *err = t.err;
    return -1;
}

int exp_trial_from(const json_t *spec, const char *name, int trial, const json_t *params,
                   struct exp_task *out, char **err)
{
    struct template t = {.name = name ? name : "experiment"};
    const char *path;
    const json_t *value;
    memset(out, 0, sizeof *out);
    if (template_check_stored(&t, spec) < 0)
        goto fail;
    if (!json_is_object(params)) {
        template_fail(&t, "", 0, "parameters: expected a mapping of spec paths to values");
        goto fail;
    }
    json_object_foreach((json_t *)params, path, value) {
        char *suggestion = NULL;
        if (template_good_path(path) && template_lookup(spec, path, &suggestion) != NULL)
            continue;
        char *hint = suggestion ? xasprintf("; did you mean '%s'?", suggestion) : xstrdup("");
        template_fail(&t, "", 0, "parameter '%s' is not in the spec%s", path, hint);
        free(hint);
        free(suggestion);
        goto fail;
    }
    if (template_trial(&t, spec, t.name, trial, params, NULL, out) < 0)
        goto fail;
    return 0;
fail:
    *err = t.err;
    return -1;
}

/* --- --dry-run --- */

/* An argument as a shell would need it: bare when safe, else in single quotes. */
static void template_print_word(FILE *fp, const char *s)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "_-+=/.,:@%^";
    if (*s != '\0' && strspn(s, safe) == strlen(s)) {
        fputs(s, fp);
        return;
    }
    fputc('\'', fp);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", fp);
        else
            fputc(*s, fp);
    fputc('\'', fp);
}

static void template_print_words(FILE *fp, const char *label, char *const *words)
{
    if (words == NULL || words[0] == NULL)
        return;
    fprintf(fp, "  %-8s", label);
    for (size_t i = 0; words[i] != NULL; i++) {
        fputc(' ', fp);
        template_print_word(fp, words[i]);
    }
    fputc('\n', fp);
}

static void template_print_task(const struct exp_task *task, FILE *fp)
{
    char gpu_mem[32] = "-", mem[32] = "-", timeout[32] = "-";
    if (task->gpu_mem > 0)
        format_size(task->gpu_mem, gpu_mem, sizeof gpu_mem);
    if (task->mem > 0)
        format_size(task->mem, mem, sizeof mem);
    if (task->timeout_ms > 0)
        format_duration(task->timeout_ms, timeout, sizeof timeout);
    fprintf(fp, "task %s  gpus=%d gpu_mem=%s mem=%s gpu_type=%s timeout=%s retries=%d",
            task->name, task->gpus, gpu_mem, mem, task->gpu_type ? task->gpu_type : "-", timeout,
            task->retries);
    if (task->cpus > 0)
        fprintf(fp, " cpus=%d", task->cpus);
    for (int i = 0; i < task->nbackoff; i++) {
        format_duration(task->backoff_ms[i], timeout, sizeof timeout);
        fprintf(fp, "%s%s", i ? "," : " backoff=", timeout);
    }
    fputc('\n', fp);
    template_print_words(fp, "needs:", task->needs);
    if (json_object_size(task->params) > 0) {
        const char *path;
        const json_t *value;
        fprintf(fp, "  %-8s", "params:");
        json_object_foreach(task->params, path, value) {
            char *text = template_text(value), *pair = xasprintf("%s=%s", path, text);
            fputc(' ', fp);
            template_print_word(fp, pair);
            free(pair);
            free(text);
        }
        fputc('\n', fp);
    }
    template_print_words(fp, "env:", task->env);
    template_print_words(fp, "command:", task->argv);
}

void exp_print_tasks(const struct exp_def *def, FILE *fp)
{
    const json_t *sweep = json_object_get(def->spec, "sweep");
    char parallel[32] = "unlimited";
    for (size_t i = 0; i < def->ntasks; i++)
        template_print_task(&def->tasks[i], fp);
    fprintf(fp, "%zu task%s ", def->ntasks, def->ntasks == 1 ? "" : "s");
    if (def->parallel > 0)
        snprintf(parallel, sizeof parallel, "%d", def->parallel);
    if (def->kind == EXP_PIPELINE)
        fprintf(fp, "(pipeline)\n");
    else if (sweep == NULL)
        fprintf(fp, "(no sweep)\n");
    else if (template_is_random(sweep))
        fprintf(fp, "(sweep: random, %zu trials; parallel %s)\n", def->space, parallel);
    else
        fprintf(fp, "(sweep: grid, %zu configurations; parallel %s)\n", def->space, parallel);
}
