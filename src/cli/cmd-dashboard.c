/* drover dashboard: prints a one-time login link for the web dashboard (docs/API.md,
 * "Authentication"). It opens nothing: the link is for whatever browser the user has, maybe
 * on another machine through a tunnel. The code in it works once, within 60 s, and becomes a
 * session cookie for the user who ran this. */
#include "cli/cli.h"

#include <stdio.h>

static const struct cmd_opt dashboard_opts[] = {
    {"json", 0, false, false, "print the reply as JSON: {code, url, expires}"},
    {NULL, 0, false, false, NULL},
};

static int dashboard_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int rc;
    json_t *reply = client_call(cmd->name, client_request("login_code"), &rc);
    if (reply == NULL)
        return rc;
    if (cmd_opt(cmd, args, "json")) {
        json_object_del(reply, "ok");
        out_json(reply);
    } else {
        printf("%s\n", json_string_value(json_object_get(reply, "url")));
        fprintf(stderr, "drover dashboard: open this link in a browser: valid for 60 s, once\n");
    }
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_dashboard = {
    .name = "dashboard",
    .usage = "dashboard [--json]",
    .summary = "print a one-time login link for the web dashboard",
    .opts = dashboard_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = dashboard_exec,
};
