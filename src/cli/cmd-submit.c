/* drover submit [options] -- CMD [ARGS…]: prints only the new task's id (one per line for
 * an array). The flags are parsed here into a request, which is then checked with
 * request_check_submit() — the code the daemon runs on it too (util/request.h); what depends on
 * the machine (GPU counts, memory, known ids) only the daemon checks. Nothing is stored on any
 * error. */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cmd_opt submit_opts[] = {
    {"name", 0, true, false, "a name for the task"},
    {"gpus", 0, true, false, "GPUs needed (default 0: CPU-only)"},
    {"gpu-mem", 0, true, false, "per-GPU memory claim, e.g. 10G: the GPU may be shared"},
    {"cpus", 0, true, false, "CPUs needed (CPU-only tasks count 1 by default)"},
    {"mem", 0, true, false, "host memory needed, e.g. 32G"},
    {"priority", 0, true, false, "higher runs first (default 0)"},
    {"after", 0, true, true, "ID[,ID…]: run when these succeeded"},
    {"after-any", 0, true, true, "ID[,ID…]: run when these ended, however"},
    {"retries", 0, true, false, "retry a failed attempt up to N times"},
    {"backoff", 0, true, false, "seconds between retries, e.g. 5,30,60 (last repeats)"},
    {"timeout", 0, true, false, "time limit per attempt: 90s, 15m, 2h"},
    {"key", 0, true, false, "idempotency key: the same key returns the existing task"},
    {"hold", 0, false, false, "submit held: it waits for drover release"},
    {"profile", 0, true, false, "learn its GPU memory under this name (default: its command line)"},
    {"exclusive", 0, false, false, "whole GPUs, even when a learned claim would share them"},
    {"stall", 0, true, false, "no output and idle GPUs this long = hung: kill and retry"},
    {"array", 0, true, false, "one task per index: 0-99, 1,5,9, 0-99%4 (4 at once)"},
    {"workdir", 0, true, false, "working directory (default: the current one)"},
    {"env", 0, true, true, "K=V: set an environment variable (repeatable)"},
    {NULL, 0, false, false, NULL},
};

static int submit_bad(const struct cmd_entry *cmd, const char *opt, const char *value,
                      const char *why)
{
    return cmd_usage_error(cmd, "--%s '%s': %s", opt, value, why);
}

static int submit_ids(const struct cmd_entry *cmd, struct cmd_args *args, const char *opt,
                      json_t *req, const char *key)
{
    const char *why;
    json_t *list = json_array();
    int n = 0;
    for (int i = 0; i < CMD_MAX_OPTS && cmd->opts[i].name; i++) {
        if (strcmp(cmd->opts[i].name, opt) != 0)
            continue;
        n = args->nvalues[i];
        for (int v = 0; v < n; v++) {
            int64_t *ids;
            size_t count;
            if (parse_id_list(args->values[i][v], &ids, &count, &why) < 0) {
                json_decref(list);
                return submit_bad(cmd, opt, args->values[i][v], why);
            }
            for (size_t k = 0; k < count; k++)
                json_array_append_new(list, json_integer(ids[k]));
            free(ids);
        }
    }
    json_object_set_new(req, key, list);
    return 0;
}

/* Integer, size and duration options, with the ranges of the request table. */
static int submit_numbers(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    const char *why;
    for (const struct request_number *num = request_numbers; num->key; num++) {
        const char *v = cmd_opt(cmd, args, num->option);
        long long n;
        uint64_t size;
        int64_t ms;
        if (v == NULL)
            continue;
        if (num->unit == REQUEST_COUNT) {
            if (parse_int(v, num->min, num->max, &n, &why) < 0)
                return submit_bad(cmd, num->option, v, why);
        } else if (num->unit == REQUEST_BYTES) {
            if (parse_size(v, &size, &why) < 0)
                return submit_bad(cmd, num->option, v, why);
            if (size < (uint64_t)num->min || size > (uint64_t)num->max)
                return submit_bad(cmd, num->option, v,
                                  size == 0 ? "size must be above zero" : "size too large");
            n = (long long)size;
        } else {
            if (parse_duration(v, &ms, &why) < 0)
                return submit_bad(cmd, num->option, v, why);
            if (ms < num->min || ms > num->max)
                return submit_bad(cmd, num->option, v, "duration out of range");
            n = ms;
        }
        json_object_set_new(req, num->key, json_integer(n));
    }
    return 0;
}

static int submit_env(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    char *const *overrides = NULL;
    for (int i = 0; cmd->opts[i].name; i++)
        if (strcmp(cmd->opts[i].name, "env") == 0)
            overrides = args->values[i];
    json_t *env = out_environment(cmd, overrides);
    if (env == NULL)
        return EXIT_USAGE;
    json_object_set_new(req, "env", env);
    return 0;
}

/* The working directory: --workdir (relative to the current one), else the current one. */
static int submit_place(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    const char *wd = cmd_opt(cmd, args, "workdir");
    char *cwd = NULL, *abs;
    size_t bad;
    struct stat sb;
    if (wd != NULL && (bad = utf8_check(wd)) > 0)
        return cmd_usage_error(cmd, "--workdir: not valid UTF-8 (byte %zu)", bad);
    if (wd == NULL || wd[0] != '/') {
        if ((cwd = getcwd(NULL, 0)) == NULL)
            return cmd_usage_error(cmd, "cannot read the current directory: %s",
                                   strerror(errno));
        if ((bad = utf8_check(cwd)) > 0) {
            free(cwd);
            return cmd_usage_error(cmd, "the working directory: not valid UTF-8 (byte %zu);"
                                        " give one with --workdir", bad);
        }
    }
    abs = wd == NULL ? xstrdup(cwd) : wd[0] == '/' ? xstrdup(wd) : xasprintf("%s/%s", cwd, wd);
    free(cwd);
    int rc = stat(abs, &sb) < 0 || !S_ISDIR(sb.st_mode)
                 ? submit_bad(cmd, "workdir", wd ? wd : abs, "not a directory")
                 : client_set_string(cmd, req, "workdir", "the working directory", abs);
    free(abs);
    return rc;
}

static int submit_misc(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    const char *why, *v;
    if ((v = cmd_opt(cmd, args, "backoff"))) {
        int64_t ms[REQUEST_MAX_BACKOFF];
        int n;
        if (parse_backoff(v, ms, REQUEST_MAX_BACKOFF, &n, &why) < 0)
            return submit_bad(cmd, "backoff", v, why);
        json_t *list = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(list, json_integer(ms[i]));
        json_object_set_new(req, "backoff", list);
    }
    if ((v = cmd_opt(cmd, args, "array"))) {
        struct array_spec spec;
        if (parse_array_spec(v, REQUEST_MAX_ARRAY, &spec, &why) < 0)
            return submit_bad(cmd, "array", v, why);
        json_t *idx = json_array();
        for (size_t i = 0; i < spec.count; i++)
            json_array_append_new(idx, json_integer(spec.index[i]));
        json_object_set_new(req, "array", json_pack("{s:o,s:i}", "index", idx, "limit",
                                                    spec.limit));
        array_spec_free(&spec);
    }
    static const char *const strings[] = {"name", "key", "profile"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        char what[16];
        snprintf(what, sizeof what, "--%s", strings[i]);
        v = cmd_opt(cmd, args, strings[i]);
        if (v && client_set_string(cmd, req, strings[i], what, v))
            return EXIT_USAGE;
    }
    if (cmd_opt(cmd, args, "hold"))
        json_object_set_new(req, "hold", json_true());
    if (cmd_opt(cmd, args, "exclusive"))
        json_object_set_new(req, "exclusive", json_true());
    return 0;
}

static int submit_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("submit"), *command = json_array();
    char *why;
    int rc;
    json_object_set_new(req, "command", command);
    for (int i = 0; i < args->argc; i++) {
        char what[48];
        snprintf(what, sizeof what, "argument %d of the command", i + 1);
        json_t *s = client_string(cmd, what, args->argv[i]);
        if (s == NULL) {
            json_decref(req);
            return EXIT_USAGE;
        }
        json_array_append_new(command, s);
    }
    if ((rc = submit_numbers(cmd, args, req)) || (rc = submit_misc(cmd, args, req)) ||
        (rc = submit_ids(cmd, args, "after", req, "after")) ||
        (rc = submit_ids(cmd, args, "after-any", req, "after_any")) ||
        (rc = submit_place(cmd, args, req)) || (rc = submit_env(cmd, args, req))) {
        json_decref(req);
        return rc;
    }
    /* The daemon runs the same check; running it here spares the trip (and a daemon start). */
    if (request_check_submit(req, &why) < 0) {
        json_decref(req);
        rc = cmd_usage_error(cmd, "%s", why);
        free(why);
        return rc;
    }
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *ids = json_object_get(reply, "ids"), *id;
    size_t i;
    json_array_foreach(ids, i, id)
        printf("%lld\n", (long long)json_integer_value(id));
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_submit = {
    .name = "submit",
    .usage = "submit [options] -- CMD [ARGS…]",
    .summary = "queue a command; prints the new task's id",
    .opts = submit_opts,
    .min_args = 1,
    .max_args = -1,
    .command_tail = true,
    .exec = submit_exec,
};
