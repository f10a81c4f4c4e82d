/* drover wait ID…: blocks until every task has ended; exit 0 only if all succeeded. A daemon
 * that dies or stops meanwhile does not end the wait: it connects again (starting a daemon as
 * any command does) and waits on. */
#include "cli/cli.h"

#include <string.h>

static const struct cmd_opt wait_opts[] = {
    {"json", 0, false, false, "print each task's final state as JSON"},
    {NULL, 0, false, false, NULL},
};

static int wait_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("wait"), *ids = json_array();
    int rc;
    for (int i = 0; i < args->argc; i++) {
        long long id = out_task_id(cmd, args->argv[i]);
        if (id < 0) {
            json_decref(ids);
            json_decref(req);
            return EXIT_USAGE;
        }
        json_array_append_new(ids, json_integer(id));
    }
    json_object_set_new(req, "ids", ids);
    json_t *reply = client_call_again(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *tasks = json_object_get(reply, "tasks"), *t;
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(tasks);
    } else {
        json_array_foreach(tasks, i, t) {
            const char *state = json_string_value(json_object_get(t, "state"));
            if (state && strcmp(state, "succeeded") != 0)
                fprintf(stderr, "drover wait: task %lld %s\n",
                        (long long)json_integer_value(json_object_get(t, "id")), state);
        }
    }
    rc = json_is_true(json_object_get(reply, "all_succeeded")) ? EXIT_OK : EXIT_FAILED;
    json_decref(reply);
    return rc;
}

const struct cmd_entry cmd_wait = {
    .name = "wait",
    .usage = "wait ID… [--json]",
    .summary = "wait for tasks to end; exit 0 only if all succeeded",
    .opts = wait_opts,
    .min_args = 1,
    .max_args = -1,
    .exec = wait_exec,
};
