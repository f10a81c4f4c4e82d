/* Human output: aligned tables, colour only on a TTY (and never with NO_COLOR). */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool out_color(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = isatty(1) && getenv("NO_COLOR") == NULL;
    return cached;
}

const char *out_state_color(const char *state)
{
    if (!out_color() || state == NULL)
        return NULL;
    if (strcmp(state, "succeeded") == 0)
        return "\033[32m";
    if (strcmp(state, "running") == 0)
        return "\033[36m";
    if (strcmp(state, "failed") == 0 || strcmp(state, "timed_out") == 0 ||
        strcmp(state, "upstream_failed") == 0)
        return "\033[31m";
    if (strcmp(state, "retrying") == 0 || strcmp(state, "held") == 0)
        return "\033[33m";
    if (strcmp(state, "cancelled") == 0)
        return "\033[2m";
    return NULL;
}

void out_json(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
}

long long out_task_id(const struct cmd_entry *cmd, const char *s)
{
    long long id;
    const char *why;
    if (parse_int(s, 1, INT64_MAX, &id, &why) < 0) {
        cmd_usage_error(cmd, "'%s' is not a task id", s);
        return -1;
    }
    return id;
}

struct table {
    int ncols;
    size_t nrows, cap, colors_cap;
    char **cells; /* nrows x ncols */
    const char **colors;
    size_t *width;
};

struct table *table_new(int ncols, const char *const *headers)
{
    struct table *t = xcalloc(1, sizeof *t);
    t->ncols = ncols;
    t->width = xcalloc((size_t)ncols, sizeof *t->width);
    table_add(t, headers, NULL);
    return t;
}

void table_add(struct table *t, const char *const *cells, const char *color)
{
    xgrow((void **)&t->cells, &t->cap, (t->nrows + 1) * (size_t)t->ncols, sizeof *t->cells);
    xgrow((void **)&t->colors, &t->colors_cap, t->nrows + 1, sizeof *t->colors);
    for (int c = 0; c < t->ncols; c++) {
        char *cell = xstrdup(cells[c] ? cells[c] : "-");
        for (char *p = cell; *p; p++)
            if (*p == '\n' || *p == '\t')
                *p = ' ';
        t->cells[t->nrows * (size_t)t->ncols + (size_t)c] = cell;
        if (strlen(cell) > t->width[c])
            t->width[c] = strlen(cell);
    }
    t->colors[t->nrows] = color;
    t->nrows++;
}

void table_print(struct table *t, FILE *fp)
{
    for (size_t r = 0; r < t->nrows; r++) {
        const char *color = t->colors[r];
        if (r == 0 && out_color())
            fputs("\033[1m", fp);
        else if (color)
            fputs(color, fp);
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c == t->ncols - 1)
                fputs(cell, fp);
            else
                fprintf(fp, "%-*s  ", (int)t->width[c], cell);
        }
        if ((r == 0 && out_color()) || color)
            fputs("\033[0m", fp);
        fputc('\n', fp);
    }
}

void table_free(struct table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->colors);
    free(t->width);
    free(t);
}

/* s for a message: bytes that are not printable ASCII as \xNN. The caller frees. */
static char *out_escape(const char *s)
{
    char *e = xmalloc(strlen(s) * 4 + 1), *w = e;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p < 0x7f)
            *w++ = (char)*p;
        else
            w += sprintf(w, "\\x%02x", *p);
    }
    *w = '\0';
    return e;
}

/* Refuses an inherited variable that cannot be carried in a request. */
static json_t *out_env_refuse(const struct cmd_entry *cmd, json_t *env, const char *name,
                              const char *part, size_t byte)
{
    bool can_override = false; /* the command has --env */
    for (int i = 0; cmd->opts && cmd->opts[i].name; i++)
        can_override |= strcmp(cmd->opts[i].name, "env") == 0;
    char *shown = out_escape(name);
    cmd_usage_error(cmd, "environment variable %s: %s is not valid UTF-8 (byte %zu); unset it%s",
                    shown, part, byte, can_override ? " or set it with --env" : "");
    free(shown);
    json_decref(env);
    return NULL;
}

json_t *out_environment(const struct cmd_entry *cmd, char *const *overrides)
{
    extern char **environ;
    json_t *env = json_object();
    size_t bad;
    for (size_t i = 0; overrides && overrides[i]; i++) {
        const char *eq = strchr(overrides[i], '=');
        if (eq == NULL || eq == overrides[i]) {
            cmd_usage_error(cmd, "--env '%s': expected NAME=VALUE", overrides[i]);
            json_decref(env);
            return NULL;
        }
        if ((bad = utf8_check(overrides[i])) > 0) {
            cmd_usage_error(cmd, "--env: not valid UTF-8 (byte %zu)", bad);
            json_decref(env);
            return NULL;
        }
        char *k = xstrndup(overrides[i], (size_t)(eq - overrides[i]));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    for (char **e = environ; *e; e++) {
        char *eq = strchr(*e, '=');
        if (eq == NULL || eq == *e)
            continue;
        char *k = xstrndup(*e, (size_t)(eq - *e));
        if ((bad = utf8_check(k)) > 0) {
            env = out_env_refuse(cmd, env, k, "its name", bad);
            free(k);
            return NULL;
        }
        if (json_object_get(env, k) != NULL) {
            free(k); /* set with --env */
            continue;
        }
        if ((bad = utf8_check(eq + 1)) > 0) {
            env = out_env_refuse(cmd, env, k, "value", bad);
            free(k);
            return NULL;
        }
        json_t *v = json_string(eq + 1);
        if (v == NULL || json_object_set_new(env, k, v) < 0)
            fatalx("jansson refused an environment variable that is valid UTF-8");
        free(k);
    }
    return env;
}
