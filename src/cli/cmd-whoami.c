/* drover whoami [--json]: how the daemon sees the caller — the user and uid the kernel gave it
 * for this connection (SO_PEERCRED), whether that user is an admin, and whether the daemon is
 * the system one. Useful on a shared machine to see which daemon a command reaches. */
#include "cli/cli.h"

#include <stdio.h>

static const struct cmd_opt whoami_opts[] = {
    {"json", 0, false, false, "print the daemon's answer as JSON"},
    {NULL, 0, false, false, NULL},
};

static int whoami_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int rc;
    json_t *reply = client_call(cmd->name, client_request("whoami"), &rc);
    if (reply == NULL)
        return rc;
    json_object_del(reply, "ok");
    if (cmd_opt(cmd, args, "json") != NULL) {
        out_json(reply);
    } else {
        printf("%s (uid %lld)%s, %s daemon\n",
               json_string_value(json_object_get(reply, "user")),
               (long long)json_integer_value(json_object_get(reply, "uid")),
               json_is_true(json_object_get(reply, "admin")) ? ", admin" : "",
               json_is_true(json_object_get(reply, "system")) ? "system" : "per-user");
    }
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_whoami = {
    .name = "whoami",
    .usage = "whoami [--json]",
    .summary = "show who the daemon takes you for: user, uid, admin",
    .opts = whoami_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = whoami_exec,
};
