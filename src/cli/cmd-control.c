/* The commands that act on tasks or the daemon and print nothing on success: cancel, retry,
 * hold, release, drain, undrain, shutdown. They share one shape (ids in, ok out), so they share
 * one file and one handler; each keeps its own descriptor. */
#include "cli/cli.h"
#include "util/paths.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cmd_opt no_opts[] = {{NULL, 0, false, false, NULL}};

static int control_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *op = cmd->name;
    json_t *req, *ids = json_array();
    int rc;
    for (int i = 0; i < args->argc; i++) {
        long long id = out_task_id(cmd, args->argv[i]);
        if (id < 0) {
            json_decref(ids);
            return EXIT_USAGE;
        }
        json_array_append_new(ids, json_integer(id));
    }
    if (strcmp(op, "undrain") == 0)
        op = "drain";
    req = client_request(op);
    if (strcmp(cmd->name, "retry") == 0)
        json_object_set(req, "id", json_array_get(ids, 0));
    else if (args->argc > 0)
        json_object_set(req, "ids", ids);
    if (strcmp(cmd->name, "undrain") == 0)
        json_object_set_new(req, "on", json_false());
    json_decref(ids);
    json_t *reply = client_call(cmd->name, req, &rc);
    json_decref(reply);
    return rc;
}

/* shutdown must not start a daemon just to stop it. */
static int shutdown_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int fd = client_connect(cmd->name, false);
    if (fd < 0)
        return EXIT_OK; /* none running */
    close(fd);
    return control_exec(cmd, args);
}

#define CONTROL(cname, cusage, csummary, cmin, cmax, cexec)                                   \
    const struct cmd_entry cmd_##cname = {.name = #cname, .usage = cusage,                    \
                                          .summary = csummary, .opts = no_opts,               \
                                          .min_args = cmin, .max_args = cmax, .exec = cexec}

CONTROL(cancel, "cancel ID…", "cancel tasks (running ones are stopped)", 1, -1, control_exec);
CONTROL(retry, "retry ID", "run an ended task again (and what failed because of it)", 1, 1,
        control_exec);
CONTROL(hold, "hold ID…", "keep tasks from starting", 1, -1, control_exec);
CONTROL(release, "release ID…", "let held tasks start", 1, -1, control_exec);
CONTROL(drain, "drain", "finish running work, start nothing new", 0, 0, control_exec);
CONTROL(undrain, "undrain", "start tasks again after drain", 0, 0, control_exec);
CONTROL(shutdown, "shutdown", "stop the daemon; running tasks keep running", 0, 0,
        shutdown_exec);
