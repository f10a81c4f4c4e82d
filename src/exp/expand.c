/* exp/expand.c — ${…} and the tasks, and --dry-run's listing of them.
 *
 * A trial is a copy of the spec with its swept values put in, checked again (a sweep may set
 * resources.gpu_count), then substituted as a whole: every string of it, so a ${…} that names
 * nothing is an error wherever it is, and a value may itself hold ${…}. ${a.b:q} is the value in
 * POSIX shell quotes, for a `sh -c` script; an unquoted ${…} there whose value the shell would
 * interpret draws a warning. Tasks are read from the substituted copy; exp_def.spec stays as
 * written (after --set). Each task must fit the exec limits (util/limits.h). */
#include "exp/template-internal.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define EXPAND_MAX_DEPTH 8 /* ${a} whose value holds ${b} whose value … */

/* --- values as text --- */

/* 0.001 stays "0.001", 1e-05 is "1e-05": the shortest form that reads back as the same double. */
static void expand_number(double v, char *buf, size_t len)
{
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A scalar as it goes into argv, env and ${…} (malloc'd); null is empty. */
static char *expand_scalar_text(const json_t *v)
{
    char buf[40];
    switch (json_typeof(v)) {
    case JSON_STRING: return xstrdup(json_string_value(v));
    case JSON_INTEGER: return xasprintf("%lld", (long long)json_integer_value(v));
    case JSON_REAL: expand_number(json_real_value(v), buf, sizeof buf); return xstrdup(buf);
    case JSON_TRUE: return xstrdup("true");
    case JSON_FALSE: return xstrdup("false");
    default: return xstrdup("");
    }
}

static void expand_json_string(FILE *fp, const char *s)
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
void expand_json(FILE *fp, const json_t *v)
{
    const char *key;
    const json_t *child;
    size_t i;
    if (json_is_object(v)) {
        fputc('{', fp);
        i = 0;
        json_object_foreach((json_t *)v, key, child) {
            fputs(i++ ? "," : "", fp);
            expand_json_string(fp, key);
            fputc(':', fp);
            expand_json(fp, child);
        }
        fputc('}', fp);
    } else if (json_is_array(v)) {
        fputc('[', fp);
        json_array_foreach(v, i, child) {
            fputs(i ? "," : "", fp);
            expand_json(fp, child);
        }
        fputc(']', fp);
    } else if (json_is_string(v)) {
        expand_json_string(fp, json_string_value(v));
    } else if (json_is_null(v)) {
        fputs("null", fp);
    } else {
        char *text = expand_scalar_text(v);
        fputs(text, fp);
        free(text);
    }
}

/* Any value as text (malloc'd): a scalar as expand_scalar_text, a mapping or list as JSON. */
static char *expand_text(const json_t *v)
{
    if (!json_is_object(v) && !json_is_array(v))
        return expand_scalar_text(v);
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    expand_json(fp, v);
    fclose(fp);
    return buf;
}

/* --- ${…} ---
 *
 * A trial's spec is substituted node by node, and each node once: t->memo keeps node -> [its
 * text, its height] (how deep its own ${…} nest), so ten references to a value that holds ten
 * references to … cost what the text costs, not ten to the power of the levels. A memo entry is
 * not used deeper than EXPAND_MAX_DEPTH allows its height; the node is then substituted again, to
 * fail where it always failed. Every byte written is counted as it is written against
 * LIMIT_TEMPLATE_EXPANDED: t->expanded (the finished strings of the spec, all trials together)
 * plus t->held (finished strings of mappings being rendered into a ${…}) plus the string being
 * written, so a template that would expand past the limit is refused as soon as it reaches it. */

/* A string being written. */
struct expand_buf {
    char *s;
    size_t len, cap;
};

static json_t *expand_subst_tree(struct template *t, const json_t *root, const json_t *node,
                                 const char *path, int depth, int *height);

/* Whether the string being written at path may grow to len bytes; else fails there. */
static bool expand_fits(struct template *t, size_t len, const char *path)
{
    size_t used = t->expanded + t->held;
    if (used <= LIMIT_TEMPLATE_EXPANDED && len <= LIMIT_TEMPLATE_EXPANDED - used)
        return true;
    template_fail(t, path, 0, "${…} makes the template larger than LIMIT_TEMPLATE_EXPANDED (%u"
                  " bytes after substitution)", LIMIT_TEMPLATE_EXPANDED);
    return false;
}

static bool expand_append(struct template *t, struct expand_buf *b, const char *s, size_t n,
                          const char *path)
{
    if (!expand_fits(t, b->len + n, path))
        return false;
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

/* s in POSIX shell single quotes (malloc'd): inside them every character but ' is itself,
 * newlines included, and a ' is written '\'' (end the quotes, an escaped ', quote again). */
static char *expand_shell_quote(const char *s, size_t len)
{
    size_t quotes = 0;
    for (size_t i = 0; i < len; i++)
        quotes += s[i] == '\'';
    char *out = xmalloc(len + 3 * quotes + 3), *o = out;
    *o++ = '\'';
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = s[i];
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* Characters no shell gives a meaning to (the rest are quoted by --dry-run and by ${x:q}). */
static const char expand_shell_safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%^";

/* A ${ref} whose text the shell would interpret went unquoted into a `sh -c` script: one
 * warning per place and reference (the first such value is shown). */
static void expand_warn_unquoted(struct template *t, const char *path, const char *ref,
                                 const char *text, size_t len)
{
    if (t->warnings == NULL || strspn(text, expand_shell_safe) == len)
        return;
    char *where = template_location(t, path, 0);
    char *prefix = xasprintf("%s: warning: ${%s} ", where, ref);
    size_t i;
    json_t *w;
    bool known = false;
    json_array_foreach(t->warnings, i, w)
        known |= strncmp(json_string_value(w), prefix, strlen(prefix)) == 0;
    if (!known) {
        size_t cut = len > 40 ? 40 : len;
        while (cut < len && cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80)
            cut--; /* not inside a UTF-8 character */
        char *shown = expand_shell_quote(text, cut);
        json_array_append_new(
            t->warnings,
            json_sprintf("%sgoes unquoted into a shell script, and its value %s%s holds characters"
                         " the shell interprets; write ${%s:q}", prefix, shown,
                         cut < len ? "…" : "", ref));
        free(shown);
    }
    free(prefix);
    free(where);
}

/* The substituted text of a string node (a new reference to a JSON string), from the memo when
 * it may be used at this depth; *height: how deep its ${…} nest. NULL on error. */
static json_t *expand_string_node(struct template *t, const json_t *root, const json_t *node,
                                  const char *path, int depth, int *height);

/* What ${ref} becomes (malloc'd, *len bytes; NULL on error): a scalar's text, a string's
 * substituted text, a mapping or list as compact JSON. */
static char *expand_render(struct template *t, const json_t *root, const char *ref,
                           const json_t *value, int depth, size_t *len, int *height)
{
    char *path = template_join("spec", ref), *text = NULL;
    *height = 0;
    if (depth >= EXPAND_MAX_DEPTH) {
        template_fail(t, path, 0, "${…} nested more than %d deep (does ${%s} refer to itself?)",
                      EXPAND_MAX_DEPTH, ref);
    } else if (json_is_object(value) || json_is_array(value)) {
        size_t held = t->held; /* its strings count until its text is written into the caller's */
        json_t *done = expand_subst_tree(t, root, value, path, depth + 1, height);
        t->held = held;
        if (done != NULL)
            text = expand_text(done);
        json_decref(done);
    } else if (json_is_string(value)) {
        json_t *done = expand_string_node(t, root, value, path, depth + 1, height);
        if (done != NULL)
            text = xstrndup(json_string_value(done), json_string_length(done));
        json_decref(done);
    } else {
        text = expand_scalar_text(value);
    }
    free(path);
    if (text != NULL)
        *len = strlen(text);
    return text;
}

/* One ${…} of a string: its reference p[2 .. close), written into b. */
static bool expand_reference(struct template *t, const json_t *root, const char *p,
                             const char *close, const char *path, int depth,
                             struct expand_buf *b, int *height)
{
    const char *start = p + 2, *end = close;
    while (start < end && isspace((unsigned char)*start))
        start++;
    while (end > start && isspace((unsigned char)end[-1]))
        end--;
    bool quote = end - start >= 2 && strncmp(end - 2, ":q", 2) == 0;
    if (quote)
        for (end -= 2; end > start && isspace((unsigned char)end[-1]);)
            end--;
    char *ref = xstrndup(start, (size_t)(end - start)), *suggestion = NULL, *text = NULL;
    const json_t *value = template_good_path(ref) ? template_lookup(root, ref, &suggestion) : NULL;
    size_t len = 0;
    int h = 0;
    if (value == NULL) {
        char *hint = strchr(ref, ':') ? xstrdup(" (${PATH:q} is the only form with a ':')")
                     : suggestion     ? xasprintf(" (did you mean %s?)", suggestion)
                                      : xstrdup("");
        template_fail(t, path, 0, "undefined ${%s}%s", ref, hint);
        free(hint);
        free(suggestion);
    } else {
        text = expand_render(t, root, ref, value, depth, &len, &h);
    }
    if (text != NULL && quote) {
        char *quoted = expand_shell_quote(text, len);
        free(text);
        text = quoted;
        len = strlen(text);
    } else if (text != NULL && depth == 0 && t->scripts && json_object_get(t->scripts, path)) {
        expand_warn_unquoted(t, path, ref, text, len);
    }
    bool ok = text != NULL && expand_append(t, b, text, len, path);
    if (ok && h + 1 > *height)
        *height = h + 1;
    free(text);
    free(ref);
    return ok;
}

/* s with every ${path} replaced by the value at spec path `path` of root, ${path:q} by it in shell
 * quotes, and every $${ by ${; NULL with t->err located at path (the string's own). */
static json_t *expand_subst_string(struct template *t, const json_t *root, const char *s,
                                   const char *path, int depth, int *height)
{
    struct expand_buf b = {NULL, 0, 0};
    const char *p = s;
    bool ok = expand_append(t, &b, "", 0, path);
    *height = 0;
    while (ok && *p != '\0') {
        size_t plain = strcspn(p, "$");
        if (plain > 0) {
            ok = expand_append(t, &b, p, plain, path);
            p += plain;
        } else if (strncmp(p, "$${", 3) == 0) {
            ok = expand_append(t, &b, "${", 2, path);
            p += 3;
        } else if (strncmp(p, "${", 2) != 0) {
            ok = expand_append(t, &b, p++, 1, path);
        } else {
            const char *close = strchr(p + 2, '}');
            if (close == NULL) {
                template_fail(t, path, 0, "unterminated ${ (write $${ for a literal ${)");
                ok = false;
            } else {
                ok = expand_reference(t, root, p, close, path, depth, &b, height);
                p = close + 1;
            }
        }
    }
    json_t *out = ok ? json_stringn_nocheck(b.s, b.len) : NULL;
    free(b.s);
    return out;
}

static json_t *expand_string_node(struct template *t, const json_t *root, const json_t *node,
                                  const char *path, int depth, int *height)
{
    char key[32];
    snprintf(key, sizeof key, "%p", (const void *)node);
    json_t *memo = t->memo ? json_object_get(t->memo, key) : NULL;
    if (memo != NULL) {
        *height = (int)json_integer_value(json_array_get(memo, 1));
        if (depth + *height <= EXPAND_MAX_DEPTH)
            return json_incref(json_array_get(memo, 0));
    }
    json_t *done = expand_subst_string(t, root, json_string_value(node), path, depth, height);
    if (done != NULL && t->memo != NULL)
        json_object_set_new(t->memo, key, json_pack("[O,i]", done, *height));
    return done;
}

/* A copy of node with every string substituted (a new reference), or NULL; *height: how deep
 * its ${…} nest. Its strings count as substituted (depth 0) or held. */
static json_t *expand_subst_tree(struct template *t, const json_t *root, const json_t *node,
                                 const char *path, int depth, int *height)
{
    json_t *out = NULL;
    const char *key;
    const json_t *child;
    size_t i;
    int h;
    *height = 0;
    if (json_is_string(node)) {
        out = expand_string_node(t, root, node, path, depth, height);
        if (out != NULL && depth == 0)
            t->expanded += json_string_length(out);
        else if (out != NULL)
            t->held += json_string_length(out);
        return out;
    }
    if (json_is_object(node)) {
        out = json_object();
        json_object_foreach((json_t *)node, key, child) {
            char *child_path = template_join(path, key);
            json_t *done = expand_subst_tree(t, root, child, child_path, depth, &h);
            free(child_path);
            if (done == NULL)
                goto fail;
            json_object_set_new(out, key, done);
            *height = h > *height ? h : *height;
        }
        return out;
    }
    if (json_is_array(node)) {
        out = json_array();
        json_array_foreach(node, i, child) {
            char *child_path = template_index(path, i);
            json_t *done = expand_subst_tree(t, root, child, child_path, depth, &h);
            free(child_path);
            if (done == NULL)
                goto fail;
            json_array_append_new(out, done);
            *height = h > *height ? h : *height;
        }
        return out;
    }
    return json_incref((json_t *)node);
fail:
    json_decref(out);
    return NULL;
}

/* `sh -c SCRIPT` (bash, dash, … and options such as -ec too): SCRIPT's index, or 0. */
static size_t expand_script_index(const json_t *command)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash",
                                         "yash", "posh", NULL};
    const char *argv0 = json_string_value(json_array_get(command, 0));
    if (argv0 == NULL)
        return 0;
    const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
    bool shell = false, dash_c = false;
    for (int k = 0; shells[k]; k++)
        shell |= strcmp(base, shells[k]) == 0;
    for (size_t i = 1; shell && i < json_array_size(command); i++) {
        const char *arg = json_string_value(json_array_get(command, i));
        if (arg == NULL || strcmp(arg, "--") == 0)
            return 0;
        if ((arg[0] == '-' || arg[0] == '+') && arg[1] == 'o' && arg[2] == '\0')
            i++; /* -o OPTION */
        else if (arg[0] == '-' && arg[1] != '\0')
            dash_c |= strchr(arg, 'c') != NULL;
        else
            return dash_c ? i : 0;
    }
    return 0;
}

/* t->scripts: the paths of the `sh -c` scripts in the commands of spec (a trial's, or a
 * pipeline's stages), whose unquoted ${…} may be warned about. */
static void expand_find_scripts(struct template *t, const json_t *spec)
{
    const json_t *stage;
    size_t i, at;
    if (t->warnings == NULL)
        return;
    if (t->scripts == NULL)
        t->scripts = json_object();
    json_object_clear(t->scripts);
    if ((at = expand_script_index(json_object_get(spec, "command"))) > 0) {
        char *path = template_index("spec.command", at);
        json_object_set_new(t->scripts, path, json_true());
        free(path);
    }
    json_array_foreach(json_object_get(spec, "stages"), i, stage) {
        if ((at = expand_script_index(json_object_get(stage, "command"))) == 0)
            continue;
        char *path = xasprintf("spec.stages[%zu].command[%zu]", i, at);
        json_object_set_new(t->scripts, path, json_true());
        free(path);
    }
}

/* --- tasks --- */

static char **expand_strings(const json_t *list)
{
    size_t i;
    const json_t *item;
    char **out = xcalloc(json_array_size(list) + 1, sizeof *out);
    json_array_foreach(list, i, item)
        out[i] = expand_scalar_text(item);
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

/* Fills task's command, env, resources, timeout and retries from a substituted spec (and stage,
 * for a pipeline: its keys first, the spec's after). The values were checked, so the conversions
 * cannot fail. */
static void expand_fill(const json_t *spec, const json_t *stage, struct exp_task *task)
{
    const char *key, *why;
    const json_t *v;
    json_t *env = json_object();
    size_t i = 0;
    task->argv = expand_strings(expand_pick(spec, stage, "command"));
    if (json_is_object(json_object_get(spec, "env")))
        json_object_update(env, json_object_get(spec, "env"));
    if (stage != NULL && json_is_object(json_object_get(stage, "env")))
        json_object_update(env, json_object_get(stage, "env"));
    task->env = xcalloc(json_object_size(env) + 1, sizeof *task->env);
    json_object_foreach(env, key, v) {
        char *text = expand_scalar_text(v);
        task->env[i++] = xasprintf("%s=%s", key, text);
        free(text);
    }
    json_decref(env);
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
    if ((v = expand_pick(spec, stage, "timeout")) != NULL &&
        schema_duration(v, &task->timeout_ms, &why) < 0)
        fatalx("template: timeout unchecked");
    if ((v = expand_pick(spec, stage, "retry")) != NULL && json_is_integer(v)) {
        task->retries = (int)json_integer_value(v);
    } else if (v != NULL) {
        const json_t *backoff = json_object_get(v, "backoff"), *delay;
        task->retries = (int)json_integer_value(json_object_get(v, "attempts"));
        json_array_foreach(backoff, i, delay)
            if (schema_duration(delay, &task->backoff_ms[task->nbackoff++], &why) < 0)
                fatalx("template: backoff unchecked");
    }
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

/* The whole of root substituted, each node once (t->memo, emptied after: it holds the trial's
 * texts). New reference, or NULL. */
static json_t *expand_spec(struct template *t, const json_t *root)
{
    int height;
    if (t->memo == NULL)
        t->memo = json_object();
    expand_find_scripts(t, root);
    t->held = 0;
    json_t *done = expand_subst_tree(t, root, root, "spec", 0, &height);
    json_object_clear(t->memo);
    return done;
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
    else if (limits_check_exec(command, json_object_get(o, "env"), &why) < 0)
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
    done = expand_spec(t, copy);
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
    json_t *done = expand_spec(t, spec);
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

/* --- --dry-run --- */

/* An argument as a shell would need it: bare when safe, else in single quotes. */
static void expand_print_word(FILE *fp, const char *s)
{
    if (*s != '\0' && strspn(s, expand_shell_safe) == strlen(s)) {
        fputs(s, fp);
        return;
    }
    char *quoted = expand_shell_quote(s, strlen(s));
    fputs(quoted, fp);
    free(quoted);
}

static void expand_print_words(FILE *fp, const char *label, char *const *words)
{
    if (words == NULL || words[0] == NULL)
        return;
    fprintf(fp, "  %-8s", label);
    for (size_t i = 0; words[i] != NULL; i++) {
        fputc(' ', fp);
        expand_print_word(fp, words[i]);
    }
    fputc('\n', fp);
}

static void expand_print_task(const struct exp_task *task, FILE *fp)
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
    expand_print_words(fp, "needs:", task->needs);
    if (json_object_size(task->params) > 0) {
        const char *path;
        const json_t *value;
        fprintf(fp, "  %-8s", "params:");
        json_object_foreach(task->params, path, value) {
            char *text = expand_text(value), *pair = xasprintf("%s=%s", path, text);
            fputc(' ', fp);
            expand_print_word(fp, pair);
            free(pair);
            free(text);
        }
        fputc('\n', fp);
    }
    expand_print_words(fp, "env:", task->env);
    expand_print_words(fp, "command:", task->argv);
}

void exp_print_tasks(const struct exp_def *def, FILE *fp)
{
    const json_t *sweep = json_object_get(def->spec, "sweep");
    char parallel[32] = "unlimited";
    for (size_t i = 0; i < def->ntasks; i++)
        expand_print_task(&def->tasks[i], fp);
    fprintf(fp, "%zu task%s ", def->ntasks, def->ntasks == 1 ? "" : "s");
    if (def->parallel > 0)
        snprintf(parallel, sizeof parallel, "%d", def->parallel);
    if (def->kind == EXP_PIPELINE)
        fprintf(fp, "(pipeline)\n");
    else if (sweep == NULL)
        fprintf(fp, "(no sweep)\n");
    else if (sweep_is_random(sweep))
        fprintf(fp, "(sweep: random, %zu trials; parallel %s)\n", def->space, parallel);
    else
        fprintf(fp, "(sweep: grid, %zu configurations; parallel %s)\n", def->space, parallel);
}
