/* exp/subst.c — ${…}: a spec substituted as a whole, every string of it, so a ${…} that names
 * nothing is an error wherever it is, and a value may itself hold ${…}. ${a.b:q} is the value in
 * POSIX shell quotes, for a `sh -c` script; an unquoted ${…} there whose value the shell would
 * interpret draws a warning. Also how values read as text (argv, env, ${…}, --dry-run). */
#include "exp/template-internal.h"
#include "util/limits.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SUBST_MAX_DEPTH 8 /* ${a} whose value holds ${b} whose value … */

/* --- values as text --- */

/* 0.001 stays "0.001", 1e-05 is "1e-05": the shortest form that reads back as the same double. */
static void subst_number(double v, char *buf, size_t len)
{
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A scalar as it goes into argv, env and ${…} (malloc'd); null is empty. */
char *subst_scalar_text(const json_t *v)
{
    char buf[40];
    switch (json_typeof(v)) {
    case JSON_STRING: return xstrdup(json_string_value(v));
    case JSON_INTEGER: return xasprintf("%lld", (long long)json_integer_value(v));
    case JSON_REAL: subst_number(json_real_value(v), buf, sizeof buf); return xstrdup(buf);
    case JSON_TRUE: return xstrdup("true");
    case JSON_FALSE: return xstrdup("false");
    default: return xstrdup("");
    }
}

static void subst_json_string(FILE *fp, const char *s)
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
void subst_json(FILE *fp, const json_t *v)
{
    const char *key;
    const json_t *child;
    size_t i;
    if (json_is_object(v)) {
        fputc('{', fp);
        i = 0;
        json_object_foreach((json_t *)v, key, child) {
            fputs(i++ ? "," : "", fp);
            subst_json_string(fp, key);
            fputc(':', fp);
            subst_json(fp, child);
        }
        fputc('}', fp);
    } else if (json_is_array(v)) {
        fputc('[', fp);
        json_array_foreach(v, i, child) {
            fputs(i ? "," : "", fp);
            subst_json(fp, child);
        }
        fputc(']', fp);
    } else if (json_is_string(v)) {
        subst_json_string(fp, json_string_value(v));
    } else if (json_is_null(v)) {
        fputs("null", fp);
    } else {
        char *text = subst_scalar_text(v);
        fputs(text, fp);
        free(text);
    }
}

/* Any value as text (malloc'd): a scalar as subst_scalar_text, a mapping or list as JSON. */
char *subst_text(const json_t *v)
{
    if (!json_is_object(v) && !json_is_array(v))
        return subst_scalar_text(v);
    char *buf;
    size_t len;
    FILE *fp = template_memstream(&buf, &len);
    subst_json(fp, v);
    fclose(fp);
    return buf;
}

/* --- ${…} ---
 *
 * A trial's spec is substituted node by node, and each node once: t->memo keeps node -> [its
 * text, its height] (how deep its own ${…} nest), so ten references to a value that holds ten
 * references to … cost what the text costs, not ten to the power of the levels. A memo entry is
 * not used deeper than SUBST_MAX_DEPTH allows its height; the node is then substituted again, to
 * fail where it always failed. Every byte written is counted as it is written against
 * LIMIT_TEMPLATE_EXPANDED: t->expanded (the finished strings of the spec, all trials together)
 * plus t->held (finished strings of mappings being rendered into a ${…}) plus the string being
 * written, so a template that would expand past the limit is refused as soon as it reaches it. */

/* A string being written. */
struct subst_buf {
    char *s;
    size_t len, cap;
};

static json_t *subst_tree(struct template *t, const json_t *root, const json_t *node,
                          const char *path, int depth, int *height);

/* Whether the string being written at path may grow to len bytes; else fails there. */
static bool subst_fits(struct template *t, size_t len, const char *path)
{
    size_t used = t->expanded + t->held;
    if (used <= LIMIT_TEMPLATE_EXPANDED && len <= LIMIT_TEMPLATE_EXPANDED - used)
        return true;
    template_fail(t, path, 0, "${…} makes the template larger than LIMIT_TEMPLATE_EXPANDED (%u"
                  " bytes after substitution)", LIMIT_TEMPLATE_EXPANDED);
    return false;
}

static bool subst_append(struct template *t, struct subst_buf *b, const char *s, size_t n,
                         const char *path)
{
    if (!subst_fits(t, b->len + n, path))
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
void subst_shell_word(FILE *fp, const char *s)
{
    if (*s != '\0' && subst_shell_plain(s, strlen(s))) {
        fputs(s, fp);
        return;
    }
    char *quoted = subst_shell_quote(s, strlen(s));
    fputs(quoted, fp);
    free(quoted);
}

char *subst_shell_quote(const char *s, size_t len)
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
static const char subst_shell_safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789_-+=/.,:@%^";

bool subst_shell_plain(const char *s, size_t len)
{
    return strspn(s, subst_shell_safe) >= len;
}

/* A ${ref} whose text the shell would interpret went unquoted into a `sh -c` script: one
 * warning per place and reference (the first such value is shown). */
static void subst_warn_unquoted(struct template *t, const char *path, const char *ref,
                                const char *text, size_t len)
{
    if (t->warnings == NULL || subst_shell_plain(text, len))
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
        char *shown = subst_shell_quote(text, cut);
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
static json_t *subst_string_node(struct template *t, const json_t *root, const json_t *node,
                                 const char *path, int depth, int *height);

/* What ${ref} becomes (malloc'd, *len bytes; NULL on error): a scalar's text, a string's
 * substituted text, a mapping or list as compact JSON. */
static char *subst_render(struct template *t, const json_t *root, const char *ref,
                          const json_t *value, int depth, size_t *len, int *height)
{
    char *path = template_join("spec", ref), *text = NULL;
    *height = 0;
    if (depth >= SUBST_MAX_DEPTH) {
        template_fail(t, path, 0, "${…} nested more than %d deep (does ${%s} refer to itself?)",
                      SUBST_MAX_DEPTH, ref);
    } else if (json_is_object(value) || json_is_array(value)) {
        size_t held = t->held; /* its strings count until its text is written into the caller's */
        json_t *done = subst_tree(t, root, value, path, depth + 1, height);
        t->held = held;
        if (done != NULL)
            text = subst_text(done);
        json_decref(done);
    } else if (json_is_string(value)) {
        json_t *done = subst_string_node(t, root, value, path, depth + 1, height);
        if (done != NULL)
            text = xstrndup(json_string_value(done), json_string_length(done));
        json_decref(done);
    } else {
        text = subst_scalar_text(value);
    }
    free(path);
    if (text != NULL)
        *len = strlen(text);
    return text;
}

/* One ${…} of a string: its reference p[2 .. close), written into b. */
static bool subst_reference(struct template *t, const json_t *root, const char *p,
                            const char *close, const char *path, int depth,
                            struct subst_buf *b, int *height)
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
        /* What the user wrote, as far as it can be a path: an unclosed ${ swallows lines. */
        size_t shown = 0;
        while (ref[shown] && shown < 64 && !iscntrl((unsigned char)ref[shown]))
            shown++;
        template_fail(t, path, 0, "undefined ${%.*s%s}%s", (int)shown, ref,
                      ref[shown] ? "…" : "", hint);
        free(hint);
        free(suggestion);
    } else {
        text = subst_render(t, root, ref, value, depth, &len, &h);
    }
    if (text != NULL && quote) {
        char *quoted = subst_shell_quote(text, len);
        free(text);
        text = quoted;
        len = strlen(text);
    } else if (text != NULL && depth == 0 && t->scripts && json_object_get(t->scripts, path)) {
        subst_warn_unquoted(t, path, ref, text, len);
    }
    bool ok = text != NULL && subst_append(t, b, text, len, path);
    if (ok && h + 1 > *height)
        *height = h + 1;
    free(text);
    free(ref);
    return ok;
}

/* s with every ${path} replaced by the value at spec path `path` of root, ${path:q} by it in shell
 * quotes, and every $${ by ${; NULL with t->err located at path (the string's own). */
static json_t *subst_string(struct template *t, const json_t *root, const char *s,
                            const char *path, int depth, int *height)
{
    struct subst_buf b = {NULL, 0, 0};
    const char *p = s;
    bool ok = subst_append(t, &b, "", 0, path);
    *height = 0;
    while (ok && *p != '\0') {
        size_t plain = strcspn(p, "$");
        if (plain > 0) {
            ok = subst_append(t, &b, p, plain, path);
            p += plain;
        } else if (strncmp(p, "$${", 3) == 0) {
            ok = subst_append(t, &b, "${", 2, path);
            p += 3;
        } else if (strncmp(p, "${", 2) != 0) {
            ok = subst_append(t, &b, p++, 1, path);
        } else {
            const char *close = strchr(p + 2, '}');
            if (close == NULL) {
                template_fail(t, path, 0, "unterminated ${ (write $${ for a literal ${)");
                ok = false;
            } else {
                ok = subst_reference(t, root, p, close, path, depth, &b, height);
                p = close + 1;
            }
        }
    }
    json_t *out = ok ? json_stringn_nocheck(b.s, b.len) : NULL;
    free(b.s);
    return out;
}

static json_t *subst_string_node(struct template *t, const json_t *root, const json_t *node,
                                 const char *path, int depth, int *height)
{
    char key[32];
    snprintf(key, sizeof key, "%p", (const void *)node);
    json_t *memo = t->memo ? json_object_get(t->memo, key) : NULL;
    if (memo != NULL) {
        *height = (int)json_integer_value(json_array_get(memo, 1));
        if (depth + *height <= SUBST_MAX_DEPTH)
            return json_incref(json_array_get(memo, 0));
    }
    json_t *done = subst_string(t, root, json_string_value(node), path, depth, height);
    if (done != NULL && t->memo != NULL)
        json_object_set_new(t->memo, key, json_pack("[O,i]", done, *height));
    return done;
}

/* A copy of node with every string substituted (a new reference), or NULL; *height: how deep
 * its ${…} nest. Its strings count as substituted (depth 0) or held. */
static json_t *subst_tree(struct template *t, const json_t *root, const json_t *node,
                          const char *path, int depth, int *height)
{
    json_t *out = NULL;
    const char *key;
    const json_t *child;
    size_t i;
    int h;
    *height = 0;
    if (json_is_string(node)) {
        out = subst_string_node(t, root, node, path, depth, height);
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
            json_t *done = subst_tree(t, root, child, child_path, depth, &h);
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
            json_t *done = subst_tree(t, root, child, child_path, depth, &h);
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
static size_t subst_script_index(const json_t *command)
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
static void subst_find_scripts(struct template *t, const json_t *spec)
{
    const json_t *stage;
    size_t i, at;
    if (t->warnings == NULL)
        return;
    if (t->scripts == NULL)
        t->scripts = json_object();
    json_object_clear(t->scripts);
    if ((at = subst_script_index(json_object_get(spec, "command"))) > 0) {
        char *path = template_index("spec.command", at);
        json_object_set_new(t->scripts, path, json_true());
        free(path);
    }
    json_array_foreach(json_object_get(spec, "stages"), i, stage) {
        if ((at = subst_script_index(json_object_get(stage, "command"))) == 0)
            continue;
        char *path = xasprintf("spec.stages[%zu].command[%zu]", i, at);
        json_object_set_new(t->scripts, path, json_true());
        free(path);
    }
}

/* The whole of root substituted, each node once (t->memo, emptied after: it holds the trial's
 * texts). New reference, or NULL. */
json_t *subst_spec(struct template *t, const json_t *root)
{
    int height;
    if (t->memo == NULL)
        t->memo = json_object();
    subst_find_scripts(t, root);
    t->held = 0;
    json_t *done = subst_tree(t, root, root, "spec", 0, &height);
    json_object_clear(t->memo);
    return done;
}
