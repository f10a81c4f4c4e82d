/* exp/template.c — experiment templates: exp_load, the stored-spec entry points (exp_trials,
 * exp_trial_from), --set, and the errors and spec paths the other parts share. exp/template.h
 * documents the format; exp/yaml.c reads the YAML, exp/schema.c checks it, exp/sweep.c expands the
 * sweep and exp/expand.c makes the tasks; exp/template-internal.h is what they share.
 *
 * Every node is located by its dotted path ("spec.command[2]"); exp/yaml.c maps each path to
 * "FILE:LINE:COLUMN", --set maps what it wrote to "--set a.b=v", and a trial maps what its sweep
 * put in place to where the sweep's value was written. A stored spec has no file: its errors
 * begin with the experiment's name instead. */
#include "exp/settings.h"
#include "exp/template-internal.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* --- errors and paths --- */

char *template_join(const char *path, const char *key)
{
    return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

char *template_index(const char *path, size_t i)
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
char *template_location(struct template *t, const char *path, int flags)
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
int template_fail(struct template *t, const char *path, int flags, const char *fmt, ...)
{
    if (t->err != NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    /* One line, whatever a template quoted into it (a key or reference with a newline). */
    for (char *c = msg; *c; c++)
        if (iscntrl((unsigned char)*c))
            *c = ' ';
    char *loc = template_location(t, path, flags);
    t->err = xasprintf("%s: %s", loc, msg);
    free(loc);
    free(msg);
    return -1;
}

FILE *template_memstream(char **buf, size_t *len)
{
    FILE *fp = open_memstream(buf, len);
    if (fp == NULL)
        fatalx("out of memory");
    return fp;
}

/* How a value is shown after "got" (malloc'd): strings quoted, 2.0 keeps its point. */
char *template_got(const json_t *v)
{
    if (json_is_object(v))
        return xstrdup("a mapping");
    if (json_is_array(v))
        return xstrdup("a list");
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    subst_json(fp, v);
    fflush(fp); /* buf is only current after a flush */
    if (json_is_real(v) && strpbrk(buf, ".e") == NULL)
        fputs(".0", fp);
    fclose(fp);
    return buf;
}

/* "PATH: expected WHAT, got GOT (WHY)"; why (or NULL) is a parser's reason. */
int template_expected_because(struct template *t, const char *path, const char *what,
                              const json_t *got, const char *why)
{
    char *shown = template_got(got);
    bool detail = why != NULL && strncmp(why, "expected", 8) != 0;
    template_fail(t, path, NAMES_PATH, "%s: expected %s, got %s%s%s%s", path, what, shown,
                  detail ? " (" : "", detail ? why : "", detail ? ")" : "");
    free(shown);
    return -1;
}

int template_expected(struct template *t, const char *path, const char *what, const json_t *got)
{
    return template_expected_because(t, path, what, got, NULL);
}

/* --- spec paths: "hyperparameters.lr", "data.files.0" --- */

/* The node at a dotted path below root, or NULL; then *suggestion (malloc'd, or NULL) is the
 * path with its first missing key replaced by the nearest existing one, if that is a likely typo.
 * Components index lists when they are decimal. */
json_t *template_lookup(const json_t *root, const char *path, char **suggestion)
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
                    schema_consider(component, key, &best, &best_distance);
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

bool template_good_path(const char *path)
{
    return *path != '\0' && *path != '.' && path[strlen(path) - 1] != '.' &&
           strstr(path, "..") == NULL;
}

/* --- --set --- */

static void template_remember(struct template *t, const char *path, const char *location)
{
    if (t->where != NULL)
        json_object_set_new(t->where, path, json_string(location));
    if (t->where_keys != NULL)
        json_object_set_new(t->where_keys, path, json_string(location));
}

/* Where "--set PATH=…" writes: below metadata for metadata.name (the only key metadata has; the
 * schema names any other), else below spec, made if the template has none. NULL after an error. */
static json_t *template_set_base(struct template *t, json_t *root, const char *path,
                                 char **doc)
{
    if (strcmp(path, "metadata") == 0 || strncmp(path, "metadata.", 9) == 0) {
        *doc = xstrdup("");
        return root;
    }
    json_t *spec = json_object_get(root, "spec");
    if (spec == NULL) {
        spec = json_object();
        json_object_set_new(root, "spec", spec);
    } else if (!json_is_object(spec)) {
        template_expected(t, "spec", "a mapping", spec);
        return NULL;
    }
    *doc = xstrdup("spec");
    return spec;
}

/* "a.b=VALUE": VALUE (a YAML scalar) at spec path a.b, making the mappings on the way; or
 * "metadata.name=NAME", NAME as it is (a name is text even when it looks like a number). */
static int template_apply_set(struct template *t, json_t *root, const char *set)
{
    const char *eq = strchr(set, '=');
    char *path = NULL, *location = NULL, *why = NULL, *doc = NULL;
    json_t *value = NULL, *node;
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
    if (strcmp(path, "metadata.name") == 0) {
        value = json_string(eq + 1);
    } else if (exp_yaml_scalar(eq + 1, &value, &why) < 0) {
        t->err = xasprintf("--set %s: %s", set, why);
        goto fail;
    }
    if ((node = template_set_base(t, root, path, &doc)) == NULL)
        goto fail;
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
    for (size_t i = 0; i < nsets; i++) {
        size_t bad = utf8_check(sets[i]); /* not shown: the line would not be UTF-8 either */
        if (bad > 0) {
            t->err = xasprintf("--set #%zu: not valid UTF-8 (byte %zu)", i + 1, bad);
            return -1;
        }
        if (template_apply_set(t, root, sets[i]) < 0)
            return -1;
    }
    return 0;
}

/* --- the interface --- */

void exp_task_clear(struct exp_task *task)
{
    if (task == NULL)
        return;
    free(task->name);
    json_decref(task->params);
    expand_strings_free(task->argv);
    expand_strings_free(task->env);
    free(task->gpu_type);
    free(task->backend);
    expand_strings_free(task->needs);
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
    json_decref(def->warnings);
    free(def);
}

static void template_free(struct template *t)
{
    json_decref(t->where);
    json_decref(t->where_keys);
    json_decref(t->overlay);
    json_decref(t->memo);
    json_decref(t->scripts);
    json_decref(t->warnings);
}

/* Trials the def creates: a grid's first max_trials configurations, or max_trials draws. */
static int template_experiment(struct template *t, struct exp_def *def, unsigned seed)
{
    size_t ntrials;
    const json_t *sweep = json_object_get(def->spec, "sweep");
    double space = sweep_space(sweep, &ntrials);
    def->space = space < (double)SIZE_MAX ? (size_t)space : SIZE_MAX;
    const json_t *parallel = json_object_get(sweep, "parallel");
    def->parallel = parallel ? (int)json_integer_value(parallel) : EXP_DEFAULT_PARALLEL;
    if (expand_trials(t, def->spec, def->name, 0, ntrials, seed, &def->tasks) < 0)
        return -1;
    def->ntasks = ntrials;
    return 0;
}

/* exp_load and exp_load_text: the file's text when text is not NULL, else the file's. */
static int template_load(const char *path, const char *text, size_t len, char *const *sets,
                         size_t nsets, unsigned seed, struct exp_def **out, char **err)
{
    struct template t = {.file = path, .where = json_object(), .where_keys = json_object(),
                         .overlay = json_object(), .warnings = json_array()};
    struct exp_def *def = NULL;
    json_t *root = NULL;
    *out = NULL;
    if ((text ? exp_yaml_read_text(path, text, len, &root, t.where, t.where_keys, &t.err)
              : exp_yaml_read(path, &root, t.where, t.where_keys, &t.err)) < 0)
        goto fail;
    if (!json_is_object(root)) {
        template_fail(&t, "", 0, "expected a mapping with apiVersion, kind, metadata and spec");
        goto fail;
    }
    if (template_apply_sets(&t, root, sets, nsets) < 0)
        goto fail;
    t.spec = json_object_get(root, "spec");
    if (schema_check_document(&t, root) < 0)
        goto fail;
    def = xcalloc(1, sizeof *def);
    def->kind = strcmp(json_string_value(json_object_get(root, "kind")), "Pipeline") == 0
                    ? EXP_PIPELINE
                    : EXP_EXPERIMENT;
    def->name = xstrdup(json_string_value(json_object_get(json_object_get(root, "metadata"),
                                                          "name")));
    def->spec = json_incref(json_object_get(root, "spec"));
    if (schema_check_kind(&t, def->kind, def->spec) < 0)
        goto fail;
    def->early_stopping = json_object_get(def->spec, "early_stopping");
    def->validation = json_object_get(def->spec, "validation");
    def->metrics = json_object_get(def->spec, "metrics");
    def->generator = json_object_get(def->spec, "generator");
    def->circuit_breaker = json_object_get(def->spec, "circuit_breaker");
    if (def->kind == EXP_PIPELINE) {
        def->space = 1;
        if (expand_pipeline(&t, def->spec, &def->tasks, &def->ntasks) < 0)
            goto fail;
    } else if (template_experiment(&t, def, seed) < 0) {
        goto fail;
    }
    json_decref(root);
    def->warnings = t.warnings;
    t.warnings = NULL;
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

int exp_load(const char *path, char *const *sets, size_t nsets, unsigned seed,
             struct exp_def **out, char **err)
{
    return template_load(path, NULL, 0, sets, nsets, seed, out, err);
}

int exp_load_text(const char *label, const char *text, size_t len, char *const *sets,
                  size_t nsets, unsigned seed, struct exp_def **out, char **err)
{
    return template_load(label, text, len, sets, nsets, seed, out, err);
}

/* A stored spec is checked again: it may come from an older drover, or a hand-edited store. */
static int template_check_stored(struct template *t, const json_t *spec)
{
    t->spec = spec;
    if (schema_check_spec(t, spec) < 0)
        return -1;
    return schema_check_kind(t, EXP_EXPERIMENT, spec);
}

/* Ends an entry point on a stored spec: frees t, and on failure (rc < 0) hands its message to
 * *err. Returns rc. */
static int template_done(struct template *t, int rc, char **err)
{
    template_free(t);
    if (rc < 0)
        *err = t->err;
    return rc;
}

/* Trials first to first + n - 1 of a stored spec, into *out. */
static int template_trials(struct template *t, const json_t *spec, size_t first, size_t n,
                           unsigned seed, struct exp_task **out)
{
    size_t ntrials;
    if (template_check_stored(t, spec) < 0)
        return -1;
    const json_t *sweep = json_object_get(spec, "sweep");
    double space = sweep_space(sweep, &ntrials);
    if ((sweep == NULL || !sweep_is_random(sweep)) && (double)first + (double)n > space)
        return template_fail(t, "", 0, "trials %zu to %zu: the sweep has %.0f configurations",
                             first, first + n - 1, space);
    if (n > LIMIT_TEMPLATE_TASKS || first > INT_MAX - n)
        return template_fail(t, "", 0, "trials %zu to %zu: more than LIMIT_TEMPLATE_TASKS (%d)",
                             first, first + n - 1, LIMIT_TEMPLATE_TASKS);
    if (n == 0)
        return 0;
    return expand_trials(t, spec, t->name, first, n, seed, out);
}

int exp_trials(const json_t *spec, const char *name, size_t first, size_t n, unsigned seed,
               struct exp_task **out, size_t *nout, char **err)
{
    struct template t = {.name = name ? name : "experiment"};
    *out = NULL;
    *nout = 0;
    int rc = template_trials(&t, spec, first, n, seed, out);
    if (rc == 0)
        *nout = n;
    return template_done(&t, rc, err);
}

/* Whether every path of params names a value of a stored spec. */
static int template_trial_params(struct template *t, const json_t *spec, const json_t *params)
{
    const char *path;
    const json_t *value;
    if (template_check_stored(t, spec) < 0)
        return -1;
    if (!json_is_object(params))
        return template_fail(t, "", 0, "parameters: expected a mapping of spec paths to values");
    json_object_foreach((json_t *)params, path, value) {
        char *suggestion = NULL;
        if (template_good_path(path) && template_lookup(spec, path, &suggestion) != NULL)
            continue;
        char *hint = suggestion ? xasprintf("; did you mean '%s'?", suggestion) : xstrdup("");
        template_fail(t, "", 0, "parameter '%s' is not in the spec%s", path, hint);
        free(hint);
        free(suggestion);
        return -1;
    }
    return 0;
}

int exp_trial_from(const json_t *spec, const char *name, int trial, const json_t *params,
                   struct exp_task *out, char **err)
{
    struct template t = {.name = name ? name : "experiment"};
    memset(out, 0, sizeof *out);
    int rc = template_trial_params(&t, spec, params);
    if (rc == 0)
        rc = expand_trial(&t, spec, t.name, trial, params, NULL, out);
    return template_done(&t, rc, err);
}

int exp_spec_check(const json_t *spec, const char *name, enum exp_kind kind, char **err)
{
    struct template t = {.name = name ? name : "experiment", .spec = spec};
    if (schema_check_spec(&t, spec) < 0 || schema_check_kind(&t, kind, spec) < 0) {
        *err = t.err;
        return -1;
    }
    return 0;
}
