/* drover submit [options] -- CMD [ARGS…]: prints only the new task's id (one per line for
 * an array). The options are the fields of a task request (util/request.def): each flag's name,
 * help and kind of value come from that table, and its value is parsed here by kind (sizes,
 * durations, ids, …) into the request, which is then checked with request_check_submit() — the
 * code the daemon runs on it too, so that ranges are the table's alone and a value out of one
 * gets the same words from both. What depends on the machine (GPU counts and names, memory,
 * known ids) only the daemon checks. Nothing is stored on any error. */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cmd_opt submit_opts[] = {
#define REQUEST_FIELD(key, option, type, min, max, doors, help)                                   \
    {option, 0,                                                                                   \
     REQUEST_##type == REQUEST_GRACE ? CMD_VALUE_OPTIONAL : REQUEST_##type != REQUEST_BOOL,        \
     REQUEST_##type == REQUEST_IDS || REQUEST_##type == REQUEST_ENV, help},
#include "util/request.def"
#undef REQUEST_FIELD
    {NULL, 0, false, false, NULL},
};
_Static_assert(sizeof submit_opts / sizeof submit_opts[0] <= CMD_MAX_OPTS + 1,
               "drover submit has at most CMD_MAX_OPTS options");

static int submit_bad(const struct cmd_entry *cmd, const char *opt, const char *value,
                      const char *why)
{
    return cmd_usage_error(cmd, "--%s '%s': %s", opt, value, why);
}

/* Every value given to a repeatable option (NULL-terminated), or NULL. */
static char *const *submit_values(const struct cmd_entry *cmd, const struct cmd_args *args,
                                  const char *opt)
{
    for (int i = 0; i < CMD_MAX_OPTS && cmd->opts[i].name; i++)
        if (strcmp(cmd->opts[i].name, opt) == 0)
            return args->values[i];
    return NULL;
}

/* Ids, repeatable: every value's ids in one list. */
static int submit_ids(const struct cmd_entry *cmd, struct cmd_args *args,
                      const struct request_field *f, const char *v, json_t *req)
{
    const char *why;
    char *const *values = submit_values(cmd, args, f->option);
    json_t *list = json_array();
    for (size_t i = 0; values && values[i]; i++) {
        json_t *ids = request_value_from_text(f, values[i], &why);
        if (ids == NULL) {
            json_decref(list);
            return submit_bad(cmd, f->option, values[i], why);
        }
        json_array_extend(list, ids);
        json_decref(ids);
    }
    json_object_set_new(req, f->key, list);
    return 0;
}

/* A whole number, a size, a duration, a backoff, an array or a time, as typed: the conversion the HTTP
 * API shares (util/request.h); its range is the request check's. */
static int submit_text(const struct cmd_entry *cmd, struct cmd_args *args,
                       const struct request_field *f, const char *v, json_t *req)
{
    const char *why;
    json_t *value = request_value_from_text(f, v, &why);
    if (value == NULL)
        return submit_bad(cmd, f->option, v, why);
    json_object_set_new(req, f->key, value);
    return 0;
}

/* The environment: this process's, with every --env on top. */
static int submit_env(const struct cmd_entry *cmd, struct cmd_args *args,
                      const struct request_field *f, const char *v, json_t *req)
{
    json_t *env = out_environment(cmd, submit_values(cmd, args, f->option));
    if (env == NULL)
        return EXIT_USAGE;
    json_object_set_new(req, f->key, env);
    return 0;
}

/* The working directory: --workdir (relative to the current one), else the current one. */
static int submit_workdir(const struct cmd_entry *cmd, struct cmd_args *args,
                          const struct request_field *f, const char *wd, json_t *req)
{
    char *cwd = NULL, *abs;
    size_t bad;
    struct stat sb;
    if (wd != NULL && (bad = utf8_check(wd)) > 0)
        return cmd_usage_error(cmd, "--%s: not valid UTF-8 (byte %zu)", f->option, bad);
    if (wd == NULL || wd[0] != '/') {
        if ((cwd = getcwd(NULL, 0)) == NULL)
            return cmd_usage_error(cmd, "cannot read the current directory: %s",
                                   strerror(errno));
        if ((bad = utf8_check(cwd)) > 0) {
            free(cwd);
            return cmd_usage_error(cmd, "the working directory: not valid UTF-8 (byte %zu);"
                                        " give one with --%s", bad, f->option);
        }
    }
    abs = wd == NULL ? xstrdup(cwd) : wd[0] == '/' ? xstrdup(wd) : xasprintf("%s/%s", cwd, wd);
    free(cwd);
    int rc = stat(abs, &sb) < 0 || !S_ISDIR(sb.st_mode)
                 ? submit_bad(cmd, f->option, wd ? wd : abs, "not a directory")
                 : client_set_string(cmd, req, f->key, "the working directory", abs);
    free(abs);
    return rc;
}

static int submit_bool(const struct cmd_entry *cmd, struct cmd_args *args,
                       const struct request_field *f, const char *v, json_t *req)
{
    json_object_set_new(req, f->key, json_true());
    return 0;
}

static int submit_string(const struct cmd_entry *cmd, struct cmd_args *args,
                         const struct request_field *f, const char *v, json_t *req)
{
    char what[48];
    snprintf(what, sizeof what, "--%s", f->option);
    return client_set_string(cmd, req, f->key, what, v);
}

/* How a field of each kind is read from its option's value v into the request; `always`: also
 * when the option is not given (v NULL: the environment, the working directory, a repeatable
 * option's values), else only when it is. The command is no option. */
static const struct submit_kind {
    int (*read)(const struct cmd_entry *cmd, struct cmd_args *args,
                const struct request_field *f, const char *v, json_t *req);
    bool always;
} submit_kinds[] = {
    [REQUEST_INT] = {submit_text, false},
    [REQUEST_SIZE] = {submit_text, false},
    [REQUEST_DURATION] = {submit_text, false},
    [REQUEST_STRING] = {submit_string, false},
    [REQUEST_BOOL] = {submit_bool, false},
    [REQUEST_BACKEND] = {submit_text, false},
    [REQUEST_IDS] = {submit_ids, true},
    [REQUEST_BACKOFF] = {submit_text, false},
    [REQUEST_ENV] = {submit_env, true},
    [REQUEST_ARRAY] = {submit_text, false},
    [REQUEST_WORKDIR] = {submit_workdir, true},
    [REQUEST_TIME] = {submit_text, false},
    [REQUEST_COMMAND] = {NULL, false},
    [REQUEST_GRACE] = {submit_text, false},
    [REQUEST_SIGNAL] = {submit_text, false},
};
_Static_assert(sizeof submit_kinds / sizeof submit_kinds[0] == REQUEST_SIGNAL + 1,
               "submit_kinds has a row for every request_type");

/* One field of the request from its option, by the kind of value it takes. */
static int submit_field(const struct cmd_entry *cmd, struct cmd_args *args,
                        const struct request_field *f, json_t *req)
{
    const struct submit_kind *kind = &submit_kinds[f->type];
    const char *v = cmd_opt(cmd, args, f->option);
    if (kind->read == NULL || (v == NULL && !kind->always))
        return 0;
    return kind->read(cmd, args, f, v, req);
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
    for (const struct request_field *f = request_fields; f->key; f++) {
        if (f->option != NULL && (rc = submit_field(cmd, args, f, req)) != 0) {
            json_decref(req);
            return rc;
        }
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
