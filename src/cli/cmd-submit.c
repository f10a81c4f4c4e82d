/* drover submit [options] -- CMD [ARGS…]: prints only the new task's id (one per line for
 * an array). Sizes, durations and ids are checked here; what depends on the machine (GPU
 * counts, memory, known ids) is checked by the daemon. Nothing is stored on any error. */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/proto.h"
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

/* Integer, size and duration options. */
static int submit_numbers(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    static const struct { const char *opt, *key; long long min, max; char kind; } nums[] = {
        {"gpus", "gpus", 0, 64, 'i'},        {"cpus", "cpus", 1, 1000000, 'i'},
        {"priority", "priority", -1000000, 1000000, 'i'},
        {"retries", "retries", 0, 1000, 'i'}, {"gpu-mem", "gpu_mem", 1, 0, 's'},
        {"mem", "mem", 1, 0, 's'},           {"timeout", "timeout_ms", 0, 0, 'd'},
        {"stall", "stall_ms", 0, 0, 'd'},
    };
    const char *why;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = cmd_opt(cmd, args, nums[i].opt);
        long long n;
        uint64_t size;
        int64_t ms;
        if (v == NULL)
            continue;
        if (nums[i].kind == 'i') {
            if (parse_int(v, nums[i].min, nums[i].max, &n, &why) < 0)
                return submit_bad(cmd, nums[i].opt, v, why);
        } else if (nums[i].kind == 's') {
            if (parse_size(v, &size, &why) < 0)
                return submit_bad(cmd, nums[i].opt, v, why);
            if (size == 0 || size > (uint64_t)INT64_MAX)
                return submit_bad(cmd, nums[i].opt, v, "size must be above zero");
            n = (long long)size;
        } else {
            if (parse_duration(v, &ms, &why) < 0)
                return submit_bad(cmd, nums[i].opt, v, why);
            n = ms;
        }
        json_object_set_new(req, nums[i].key, json_integer(n));
    }
    return 0;
}

static int submit_env(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    json_t *env = out_environment();
    const char *const *vals = NULL;
    for (int i = 0; cmd->opts[i].name; i++)
        if (strcmp(cmd->opts[i].name, "env") == 0)
            vals = (const char *const *)args->values[i];
    for (size_t i = 0; vals && vals[i]; i++) {
        const char *eq = strchr(vals[i], '=');
        if (eq == NULL || eq == vals[i]) {
            json_decref(env);
            return submit_bad(cmd, "env", vals[i], "expected NAME=VALUE");
        }
        char *k = xstrndup(vals[i], (size_t)(eq - vals[i]));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    /* Only valid UTF-8 survives JSON: drop what jansson refused (json_string -> NULL). */
    json_object_set_new(req, "env", env);
    return 0;
}

static int submit_place(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    const char *wd = cmd_opt(cmd, args, "workdir");
    char *cwd = getcwd(NULL, 0), *abs;
    struct stat sb;
    if (cwd == NULL)
        return cmd_usage_error(cmd, "cannot read the current directory: %s", strerror(errno));
    abs = wd == NULL ? xstrdup(cwd) : wd[0] == '/' ? xstrdup(wd) : xasprintf("%s/%s", cwd, wd);
    free(cwd);
    if (stat(abs, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        int rc = submit_bad(cmd, "workdir", wd ? wd : abs, "not a directory");
        free(abs);
        return rc;
    }
    json_object_set_new(req, "workdir", json_string(abs));
    free(abs);
    return 0;
}

static int submit_misc(const struct cmd_entry *cmd, struct cmd_args *args, json_t *req)
{
    const char *why, *v;
    if ((v = cmd_opt(cmd, args, "backoff"))) {
        int64_t ms[8];
        int n;
        if (parse_backoff(v, ms, 8, &n, &why) < 0)
            return submit_bad(cmd, "backoff", v, why);
        json_t *list = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(list, json_integer(ms[i]));
        json_object_set_new(req, "backoff", list);
    }
    if ((v = cmd_opt(cmd, args, "array"))) {
        struct array_spec spec;
        if (parse_array_spec(v, 100000, &spec, &why) < 0)
            return submit_bad(cmd, "array", v, why);
        json_t *idx = json_array();
        for (size_t i = 0; i < spec.count; i++)
            json_array_append_new(idx, json_integer(spec.index[i]));
        json_object_set_new(req, "array", json_pack("{s:o,s:i}", "index", idx, "limit",
                                                    spec.limit));
        array_spec_free(&spec);
    }
    if ((v = cmd_opt(cmd, args, "name")))
        json_object_set_new(req, "name", json_string(v));
    if ((v = cmd_opt(cmd, args, "key")))
        json_object_set_new(req, "key", json_string(v));
    if (cmd_opt(cmd, args, "hold"))
        json_object_set_new(req, "hold", json_true());
    if ((v = cmd_opt(cmd, args, "profile")))
        json_object_set_new(req, "profile", json_string(v));
    if (cmd_opt(cmd, args, "exclusive"))
        json_object_set_new(req, "exclusive", json_true());
    return 0;
}

static int submit_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("submit"), *command = json_array();
    int rc;
    for (int i = 0; i < args->argc; i++) {
        json_t *s = json_string(args->argv[i]);
        if (s == NULL) {
            json_decref(req);
            json_decref(command);
            return cmd_usage_error(cmd, "argument %d of the command is not valid UTF-8", i + 1);
        }
        json_array_append_new(command, s);
    }
    json_object_set_new(req, "command", command);
    if ((rc = submit_numbers(cmd, args, req)) || (rc = submit_misc(cmd, args, req)) ||
        (rc = submit_ids(cmd, args, "after", req, "after")) ||
        (rc = submit_ids(cmd, args, "after-any", req, "after_any")) ||
        (rc = submit_place(cmd, args, req)) || (rc = submit_env(cmd, args, req))) {
        json_decref(req);
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
