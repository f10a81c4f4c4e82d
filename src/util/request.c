/* A task request's fields (util/request.def) and their check, for both doors (util/request.h):
 * the CLI and the daemon run the same code on a submit, and the client and the daemon on each
 * task of an experiment. */
#include "util/request.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/when.h"
#include "util/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

const struct request_field request_fields[] = {
#define REQUEST_FIELD(key, option, type, min, max, doors, help)                                   \
    {key, option, REQUEST_##type, min, max, doors, help},
#include "util/request.def"
#undef REQUEST_FIELD
    {"command", NULL, REQUEST_COMMAND, 0, 0, REQUEST_SUBMIT | REQUEST_TASK | REQUEST_REQUIRED,
     "the command and its arguments, after --"},
    {NULL, NULL, REQUEST_INT, 0, 0, 0, NULL},
};

const struct request_field *request_field(const char *key)
{
    for (const struct request_field *f = request_fields; f->key; f++)
        if (strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

/* "'gpus' (--gpus)": how a message names a field. (static buffer: one at a time) */
static const char *request_name(const struct request_field *f)
{
    static char name[64];
    if (f->option)
        snprintf(name, sizeof name, "'%s' (--%s)", f->key, f->option);
    else
        snprintf(name, sizeof name, "'%s'", f->key);
    return name;
}

static bool request_int_in(const json_t *v, long long min, long long max)
{
    return json_is_integer(v) && json_integer_value(v) >= min && json_integer_value(v) <= max;
}

static char *request_number(const struct request_field *f, const json_t *v)
{
    static const char *const what[] = {
        [REQUEST_INT] = "a whole number",
        [REQUEST_SIZE] = "a whole number of bytes",
        [REQUEST_DURATION] = "a whole number of milliseconds",
        [REQUEST_TIME] = "a time in milliseconds since the epoch",
    };
    if (request_int_in(v, f->min, f->max))
        return NULL;
    return xasprintf("%s must be %s from %lld to %lld", request_name(f), what[f->type], f->min,
                     f->max);
}

static char *request_list(const struct request_field *f, const json_t *v)
{
    const json_t *e;
    size_t i;
    if (f->type == REQUEST_IDS) {
        if (!json_is_array(v))
            goto badids;
        json_array_foreach(v, i, e)
            if (!request_int_in(e, f->min, f->max))
                goto badids;
        return NULL;
badids:
        return xasprintf("%s must be an array of task ids", request_name(f));
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > REQUEST_MAX_BACKOFF)
        goto badbackoff;
    json_array_foreach(v, i, e)
        if (!request_int_in(e, f->min, f->max))
            goto badbackoff;
    return NULL;
badbackoff:
    return xasprintf("%s must be 1 to %d whole milliseconds, each from %lld to %lld",
                     request_name(f), REQUEST_MAX_BACKOFF, f->min, f->max);
}

static char *request_env(const struct request_field *f, const json_t *v)
{
    const char *k;
    json_t *value;
    if (!json_is_object(v))
        goto bad;
    json_object_foreach((json_t *)v, k, value)
        if (!json_is_string(value) || *k == '\0' || strchr(k, '='))
            goto bad;
    return NULL;
bad:
    return xasprintf("'%s' must map variable names (not empty, without '=') to strings", f->key);
}

static char *request_array(const struct request_field *f, const json_t *a)
{
    const json_t *index = json_object_get(a, "index"), *limit = json_object_get(a, "limit");
    const json_t *e;
    size_t i;
    if (!json_is_object(a) || !json_is_array(index) || json_array_size(index) == 0 ||
        json_array_size(index) > REQUEST_MAX_ARRAY)
        goto bad;
    json_array_foreach(index, i, e) {
        if (!request_int_in(e, f->min, f->max) ||
            (i > 0 && json_integer_value(e) <= json_integer_value(json_array_get(index, i - 1))))
            goto bad;
    }
    if (limit && !json_is_null(limit) && !request_int_in(limit, 0, REQUEST_MAX_ARRAY_LIMIT))
        goto bad;
    return NULL;
bad:
    return xasprintf("'%s' must be {\"index\": [...], \"limit\": N}: 1 to %d indices, ascending"
                     " and unique, each from %lld to %lld; limit from 0 (none) to %d", f->key,
                     REQUEST_MAX_ARRAY, f->min, f->max, REQUEST_MAX_ARRAY_LIMIT);
}

static char *request_workdir(const struct request_field *f, const json_t *wd)
{
    struct stat sb;
    if (!json_is_string(wd) || json_string_value(wd)[0] != '/')
        return xasprintf("'%s' must be an absolute path", f->key);
    if (stat(json_string_value(wd), &sb) < 0)
        return xasprintf("%s %s: %s", f->key, json_string_value(wd), strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return xasprintf("%s %s: not a directory", f->key, json_string_value(wd));
    return NULL;
}

static char *request_command(const struct request_field *f, const json_t *cmd)
{
    const json_t *e;
    size_t i;
    if (!json_is_array(cmd) || json_array_size(cmd) == 0 ||
        json_string_length(json_array_get(cmd, 0)) == 0)
        goto bad;
    json_array_foreach(cmd, i, e)
        if (!json_is_string(e))
            goto bad;
    return NULL;
bad:
    return xasprintf("'%s' must be an array of strings, the first (the program) not empty",
                     f->key);
}

/* The reason v is not a valid value of f (malloc'd), or NULL. v is NULL when absent. */
static char *request_value(const struct request_field *f, const json_t *v)
{
    switch (f->type) {
    case REQUEST_INT:
    case REQUEST_SIZE:
    case REQUEST_DURATION:
    case REQUEST_TIME:
        return request_number(f, v);
    case REQUEST_STRING:
        if (json_is_string(v) && (long long)json_string_length(v) >= f->min &&
            (long long)json_string_length(v) <= f->max)
            return NULL;
        return xasprintf("%s must be a string of %lld to %lld bytes", request_name(f), f->min,
                         f->max);
    case REQUEST_BOOL:
        return json_is_boolean(v) ? NULL
                                  : xasprintf("%s must be true or false", request_name(f));
    case REQUEST_BACKEND:
        if (json_is_string(v) && (strcmp(json_string_value(v), "local") == 0 ||
                                  strcmp(json_string_value(v), "slurm") == 0))
            return NULL;
        return xasprintf("%s must be local or slurm", request_name(f));
    case REQUEST_IDS:
    case REQUEST_BACKOFF:
        return request_list(f, v);
    case REQUEST_ENV:
        return request_env(f, v);
    case REQUEST_ARRAY:
        return request_array(f, v);
    case REQUEST_WORKDIR:
        return request_workdir(f, v);
    case REQUEST_COMMAND:
        return request_command(f, v);
    case REQUEST_GRACE:
        if (json_is_boolean(v) || request_int_in(v, f->min, f->max))
            return NULL;
        return xasprintf("%s must be true, false or a grace in milliseconds from %lld to %lld",
                         request_name(f), f->min, f->max);
    case REQUEST_SIGNAL: {
        int sig;
        const char *why;
        if (request_int_in(v, 1, 64) && json_integer_value(v) != SIGKILL &&
            json_integer_value(v) != SIGSTOP)
            return NULL;
        if (json_is_string(v) && parse_signal(json_string_value(v), &sig, &why) == 0)
            return NULL;
        return xasprintf("%s must be a signal a task can catch: a name (TERM, USR1, …) or a"
                         " number from 1 to 64 but 9 and 19", request_name(f));
    }
    }
    return xstrdup("unknown field type"); /* not reached */
}

const char *request_url_problem(const char *url)
{
    size_t len = strlen(url), scheme;
    if (strncmp(url, "http://", 7) == 0)
        scheme = 7;
    else if (strncmp(url, "https://", 8) == 0)
        scheme = 8;
    else
        return "expected an http:// or https:// URL";
    if (len > REQUEST_MAX_URL)
        return "longer than 2048 bytes";
    for (const unsigned char *c = (const unsigned char *)url; *c; c++)
        if (*c <= ' ' || *c == 0x7f)
            return "spaces and control characters are not allowed in a URL";
    if (strchr("/:?#", url[scheme]) != NULL) /* also the end of the string */
        return "the URL names no host";
    return NULL;
}

/* The check behind both doors: every field of the table, then what involves several. *field:
 * the key of the field at fault, or NULL. */
static int request_check(const json_t *req, unsigned door, const json_t *base_env, char **why,
                         const char **field)
{
    *why = NULL;
    *field = NULL;
    if (!json_is_object(req)) {
        *why = xstrdup("a task request must be an object");
        return -1;
    }
    for (const struct request_field *f = request_fields; f->key && *why == NULL; f++) {
        const json_t *v = json_object_get(req, f->key);
        bool absent = v == NULL || json_is_null(v);
        if (!(f->doors & door)) {
            if (!absent)
                *why = xasprintf(door == REQUEST_TASK ? "'%s' belongs to a submission, not to"
                                                        " one task of an experiment"
                                                      : "'%s' belongs to an experiment's tasks",
                                 f->key);
        } else if (!absent || (f->doors & REQUEST_REQUIRED)) {
            *why = request_value(f, absent ? NULL : v);
        }
        if (*why != NULL)
            *field = f->key;
    }
    const json_t *gpu_mem = json_object_get(req, "gpu_mem");
    if (*why == NULL && json_is_true(json_object_get(req, "exclusive")) && gpu_mem != NULL &&
        !json_is_null(gpu_mem)) {
        *why = xstrdup("--exclusive and --gpu-mem contradict each other");
        *field = "exclusive";
    }
    const json_t *notify = json_object_get(req, "notify");
    const char *bad_url = json_is_string(notify) ? request_url_problem(json_string_value(notify))
                                                 : NULL;
    if (*why == NULL && bad_url != NULL) {
        *why = xasprintf("'notify' (--notify) '%s': %s", json_string_value(notify), bad_url);
        *field = "notify";
    }
    const json_t *preemptible = json_object_get(req, "preemptible");
    const json_t *preempt_signal = json_object_get(req, "preempt_signal");
    if (*why == NULL && preempt_signal != NULL && !json_is_null(preempt_signal) &&
        (preemptible == NULL || json_is_null(preemptible) || json_is_false(preemptible))) {
        *why = xstrdup("'preempt_signal' (--preempt-signal) is for a preemptible task: give"
                       " --preemptible too");
        *field = "preempt_signal";
    }
    if (*why != NULL)
        return -1;
    /* What the task is started with: base_env, then its own env. */
    json_t *env = json_object_get(req, "env"), *merged = NULL;
    if (!json_is_object(env))
        env = NULL;
    if (base_env != NULL && env != NULL) {
        merged = json_copy((json_t *)base_env);
        json_object_update(merged, env);
    }
    int rc = limits_check_exec(json_object_get(req, "command"),
                               merged ? merged : env ? env : (json_t *)base_env, why);
    json_decref(merged);
    return rc;
}

int request_check_submit(json_t *req, char **why)
{
    const char *field;
    return request_check(req, REQUEST_SUBMIT, NULL, why, &field);
}

int request_check_submit_field(json_t *req, char **why, const char **field)
{
    const char *unused;
    return request_check(req, REQUEST_SUBMIT, NULL, why, field ? field : &unused);
}

int request_check_task(const json_t *task, const json_t *base_env, char **why)
{
    const char *field;
    return request_check(task, REQUEST_TASK, base_env, why, &field);
}

/* ---- values as text (drover submit's options, the HTTP API's strings) --------------------- */

static json_t *request_number_from_text(const struct request_field *f, const char *text,
                                        const char **why)
{
    long long n;
    uint64_t size;
    int64_t ms;
    if (f->type == REQUEST_INT) {
        if (parse_int(text, LLONG_MIN, LLONG_MAX, &n, why) < 0)
            return NULL;
    } else if (f->type == REQUEST_SIZE) {
        if (parse_size(text, &size, why) < 0)
            return NULL;
        if (size > (uint64_t)LLONG_MAX) {
            *why = "size too large";
            return NULL;
        }
        n = (long long)size;
    } else {
        if (parse_duration(text, &ms, why) < 0)
            return NULL;
        n = ms;
    }
    return json_integer(n);
}

static json_t *request_ids_from_text(const char *text, const char **why)
{
    int64_t *ids;
    size_t count;
    if (parse_id_list(text, &ids, &count, why) < 0)
        return NULL;
    json_t *list = json_array();
    for (size_t k = 0; k < count; k++)
        json_array_append_new(list, json_integer(ids[k]));
    free(ids);
    return list;
}

static json_t *request_backoff_from_text(const char *text, const char **why)
{
    int64_t ms[REQUEST_MAX_BACKOFF];
    int n;
    if (parse_backoff(text, ms, REQUEST_MAX_BACKOFF, &n, why) < 0)
        return NULL;
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_integer(ms[i]));
    return list;
}

static json_t *request_array_from_text(const char *text, const char **why)
{
    struct array_spec spec;
    if (parse_array_spec(text, REQUEST_MAX_ARRAY, &spec, why) < 0)
        return NULL;
    json_t *idx = json_array();
    for (size_t i = 0; i < spec.count; i++)
        json_array_append_new(idx, json_integer(spec.index[i]));
    json_t *v = json_pack("{s:o,s:i}", "index", idx, "limit", spec.limit);
    array_spec_free(&spec);
    return v;
}

static json_t *request_time_from_text(const char *text, const char **why)
{
    struct when_clock clock = when_clock_system();
    int64_t ms;
    if (when_parse(text, &clock, &ms, why) < 0)
        return NULL;
    return json_integer(ms);
}

json_t *request_value_from_text(const struct request_field *f, const char *text,
                                const char **why)
{
    switch (f->type) {
    case REQUEST_INT:
    case REQUEST_SIZE:
    case REQUEST_DURATION:
        return request_number_from_text(f, text, why);
    case REQUEST_STRING:
        return json_string(text);
    case REQUEST_BACKEND:
        if (strcmp(text, "local") == 0 || strcmp(text, "slurm") == 0)
            return json_string(text);
        *why = "expected local or slurm";
        return NULL;
    case REQUEST_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)
            return json_boolean(strcmp(text, "true") == 0);
        *why = "expected true or false";
        return NULL;
    case REQUEST_IDS:
        return request_ids_from_text(text, why);
    case REQUEST_BACKOFF:
        return request_backoff_from_text(text, why);
    case REQUEST_ARRAY:
        return request_array_from_text(text, why);
    case REQUEST_GRACE: {
        int64_t ms;
        if (text[0] == '\0' || strcmp(text, "true") == 0)
            return json_true();
        if (strcmp(text, "false") == 0)
            return json_false();
        if (parse_duration(text, &ms, why) < 0)
            return NULL;
        return json_integer(ms);
    }
    case REQUEST_SIGNAL: {
        int sig;
        if (parse_signal(text, &sig, why) < 0)
            return NULL;
        return json_integer(sig);
    }
    case REQUEST_TIME:
        return request_time_from_text(text, why);
    case REQUEST_ENV:
    case REQUEST_WORKDIR:
    case REQUEST_COMMAND:
        break;
    }
    *why = "has no text form";
    return NULL;
}
