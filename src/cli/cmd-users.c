/* drover users [--json]: per user the daemon knows of (one with live tasks, past usage or
 * limits): tasks running and waiting, GPUs held, decayed GPU usage and its share of everyone's
 * (fair share, core/users.c), and the limits in force. */
#include "cli/cli.h"

#include <stdio.h>

static const struct cmd_opt users_opts[] = {
    {"json", 0, false, false, "print a JSON array of users (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

/* A limit: "-" for none. */
static void users_limit(json_t *limits, const char *key, char *buf, size_t len)
{
    json_t *v = json_object_get(limits, key);
    if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, len, "-");
}

static int users_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int rc;
    json_t *reply = client_call(cmd->name, client_request("users"), &rc), *u;
    if (reply == NULL)
        return rc;
    json_t *list = json_object_get(reply, "users");
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(list);
        json_decref(reply);
        return EXIT_OK;
    }
    static const char *const head[] = {"USER", "RUNNING", "WAITING", "QUEUED", "GPUS",
                                       "GPU-HOURS", "SHARE", "LIMIT GPUS", "LIMIT RUNNING",
                                       "LIMIT QUEUED"};
    struct table *t = table_new(10, head);
    json_array_foreach(list, i, u) {
        char n[4][24], usage[32], share[16], lim[3][16];
        static const char *const keys[] = {"running", "waiting", "queued", "gpus"};
        for (int k = 0; k < 4; k++)
            snprintf(n[k], sizeof n[k], "%lld",
                     (long long)json_integer_value(json_object_get(u, keys[k])));
        snprintf(usage, sizeof usage, "%.2f",
                 json_number_value(json_object_get(u, "usage_gpu_seconds")) / 3600);
        snprintf(share, sizeof share, "%.0f%%", 100 * json_number_value(json_object_get(u, "share")));
        json_t *limits = json_object_get(u, "limits");
        users_limit(limits, "gpus", lim[0], sizeof lim[0]);
        users_limit(limits, "running", lim[1], sizeof lim[1]);
        users_limit(limits, "queued", lim[2], sizeof lim[2]);
        const char *cells[] = {json_string_value(json_object_get(u, "user")), n[0], n[1], n[2],
                               n[3], usage, share, lim[0], lim[1], lim[2]};
        table_add(t, cells, NULL);
    }
    if (json_array_size(list) == 0)
        printf("no users with tasks, usage or limits\n");
    else
        table_print(t, stdout);
    table_free(t);
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_users = {
    .name = "users",
    .usage = "users [--json]",
    .summary = "per user: tasks, GPUs held, fair-share usage and share, limits",
    .opts = users_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = users_exec,
};
