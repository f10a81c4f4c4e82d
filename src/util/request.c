/* The submit request's shape and ranges (util/request.h), checked by the CLI and the daemon. */
#include "util/request.h"
#include "util/limits.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

const struct request_number request_numbers[] = {
    {"gpus", "gpus", REQUEST_COUNT, 0, 64},
    {"gpu_mem", "gpu-mem", REQUEST_BYTES, 1, INT64_MAX},
    {"cpus", "cpus", REQUEST_COUNT, 1, 1000000},
    {"mem", "mem", REQUEST_BYTES, 1, INT64_MAX},
    {"timeout_ms", "timeout", REQUEST_MS, 1, 1000000000000000LL},
    {"stall_ms", "stall", REQUEST_MS, 1, 1000000000000000LL},
    {"priority", "priority", REQUEST_COUNT, -1000000, 1000000},
    {"retries", "retries", REQUEST_COUNT, 0, 1000},
    {NULL, NULL, REQUEST_COUNT, 0, 0},
};

/* Whether req[key] is absent or null (the default). */
static bool request_absent(json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);
    return v == NULL || json_is_null(v);
}

static int request_command(json_t *req, char **why)
{
    json_t *cmd = json_object_get(req, "command"), *e;
    size_t i;
    if (!json_is_array(cmd) || json_array_size(cmd) == 0) {
        *why = xstrdup("empty command: give one after --");
        return -1;
    }
    json_array_foreach(cmd, i, e) {
        if (!json_is_string(e)) {
            *why = xstrdup("the command must be an array of strings");
            return -1;
        }
    }
    if (json_string_length(json_array_get(cmd, 0)) == 0) {
        *why = xstrdup("the command's program (its first argument) is empty");
        return -1;
    }
    return 0;
}

static int request_env(json_t *req, char **why)
{
    json_t *env = json_object_get(req, "env"), *v;
    const char *k;
    if (request_absent(req, "env"))
        return 0;
    if (!json_is_object(env)) {
        *why = xstrdup("'env' must map variable names to strings");
        return -1;
    }
    json_object_foreach(env, k, v) {
        if (!json_is_string(v) || *k == '\0' || strchr(k, '=')) {
            *why = xstrdup("'env' must map variable names (not empty, without '=') to strings");
            return -1;
        }
    }
    return 0;
}

static int request_workdir(json_t *req, char **why)
{
    json_t *wd = json_object_get(req, "workdir");
    struct stat sb;
    if (!json_is_string(wd) || json_string_value(wd)[0] != '/') {
        *why = xstrdup("'workdir' must be an absolute path");
        return -1;
    }
    if (stat(json_string_value(wd), &sb) < 0) {
        *why = xasprintf("workdir %s: %s", json_string_value(wd), strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        *why = xasprintf("workdir %s: not a directory", json_string_value(wd));
        return -1;
    }
    return 0;
}

static int request_strings(json_t *req, char **why)
{
    static const char *const keys[] = {"name", "key", "profile"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(req, keys[i]);
        if (request_absent(req, keys[i]))
            continue;
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) > REQUEST_MAX_STRING) {
            *why = xasprintf("'%s' must be a string of 1 to %d bytes", keys[i],
                             REQUEST_MAX_STRING);
            return -1;
        }
    }
    return 0;
}

static int request_ints(json_t *req, char **why)
{
    for (const struct request_number *n = request_numbers; n->key; n++) {
        json_t *v = json_object_get(req, n->key);
        if (request_absent(req, n->key))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < n->min ||
            json_integer_value(v) > n->max) {
            *why = xasprintf("'%s' (--%s) must be a whole number from %lld to %lld", n->key,
                             n->option, n->min, n->max);
            return -1;
        }
    }
    static const char *const bools[] = {"hold", "exclusive"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        if (!request_absent(req, bools[i]) && !json_is_boolean(json_object_get(req, bools[i]))) {
            *why = xasprintf("'%s' must be true or false", bools[i]);
            return -1;
        }
    }
    if (json_is_true(json_object_get(req, "exclusive")) && !request_absent(req, "gpu_mem")) {
        *why = xstrdup("--exclusive and --gpu-mem contradict each other");
        return -1;
    }
    return 0;
}

static int request_lists(json_t *req, char **why)
{
    static const char *const deps[] = {"after", "after_any"};
    json_t *e;
    size_t i;
    for (size_t k = 0; k < sizeof deps / sizeof deps[0]; k++) {
        json_t *list = json_object_get(req, deps[k]);
        if (request_absent(req, deps[k]))
            continue;
        if (!json_is_array(list))
            goto baddeps;
        json_array_foreach(list, i, e) {
            if (!json_is_integer(e) || json_integer_value(e) <= 0)
                goto baddeps;
        }
        continue;
baddeps:
        *why = xasprintf("'%s' must be an array of task ids", deps[k]);
        return -1;
    }
    json_t *backoff = json_object_get(req, "backoff");
    if (request_absent(req, "backoff"))
        return 0;
    if (!json_is_array(backoff) || json_array_size(backoff) == 0 ||
        json_array_size(backoff) > REQUEST_MAX_BACKOFF)
        goto badbackoff;
    json_array_foreach(backoff, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) > REQUEST_MAX_BACKOFF_MS)
            goto badbackoff;
    }
    return 0;
badbackoff:
    *why = xasprintf("'backoff' must be 1 to %d whole milliseconds, each from 0 to %lld",
                     REQUEST_MAX_BACKOFF, REQUEST_MAX_BACKOFF_MS);
    return -1;
}

static int request_array(json_t *req, char **why)
{
    json_t *a = json_object_get(req, "array"), *index, *limit, *e;
    size_t i;
    if (request_absent(req, "array"))
        return 0;
    index = json_object_get(a, "index");
    limit = json_object_get(a, "limit");
    if (!json_is_object(a) || !json_is_array(index) || json_array_size(index) == 0 ||
        json_array_size(index) > REQUEST_MAX_ARRAY)
        goto bad;
    json_array_foreach(index, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) > REQUEST_MAX_ARRAY_INDEX ||
            (i > 0 && json_integer_value(e) <= json_integer_value(json_array_get(index, i - 1))))
            goto bad;
    }
    if (limit && !json_is_null(limit) &&
        (!json_is_integer(limit) || json_integer_value(limit) < 0 ||
         json_integer_value(limit) > REQUEST_MAX_ARRAY_LIMIT))
        goto bad;
    return 0;
bad:
    *why = xasprintf("'array' must be {\"index\": [...], \"limit\": N}: 1 to %d indices, ascending"
                     " and unique, each from 0 to %d; limit from 0 (none) to %d",
                     REQUEST_MAX_ARRAY, REQUEST_MAX_ARRAY_INDEX, REQUEST_MAX_ARRAY_LIMIT);
    return -1;
}

int request_check_submit(json_t *req, char **why)
{
    if (request_command(req, why) < 0 || request_env(req, why) < 0 ||
        request_strings(req, why) < 0 || request_ints(req, why) < 0 ||
        request_lists(req, why) < 0 || request_array(req, why) < 0 ||
        request_workdir(req, why) < 0)
        return -1;
    json_t *env = json_object_get(req, "env");
    return limits_check_exec(json_object_get(req, "command"), json_is_object(env) ? env : NULL,
                             why);
}
