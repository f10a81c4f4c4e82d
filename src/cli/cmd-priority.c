/* drover priority N ID…: a new priority for tasks that have not started yet. N comes first,
 * as in renice, so that the ids read like cancel's; a negative N is an argument, not an
 * option (cli/commands.c). */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/request.h"

#include <stdlib.h>

static const struct cmd_opt no_opts[] = {{NULL, 0, false, false, NULL}};

static int priority_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const struct request_field *field = request_field("priority");
    long long priority;
    const char *why;
    int rc;
    if (parse_int(args->argv[0], field->min, field->max, &priority, &why) < 0)
        return cmd_usage_error(cmd, "'%s' is not a priority (a whole number from %lld to %lld)",
                               args->argv[0], field->min, field->max);
    json_t *ids = json_array();
    for (int i = 1; i < args->argc; i++) {
        long long id = out_task_id(cmd, args->argv[i]);
        if (id < 0) {
            json_decref(ids);
            return EXIT_USAGE;
        }
        json_array_append_new(ids, json_integer(id));
    }
    json_t *req = client_request("priority");
    json_object_set_new(req, "priority", json_integer(priority));
    json_object_set_new(req, "ids", ids);
    json_decref(client_call(cmd->name, req, &rc));
    return rc;
}

const struct cmd_entry cmd_priority = {
    .name = "priority",
    .usage = "priority N ID…",
    .summary = "give waiting tasks priority N (higher runs first)",
    .opts = no_opts,
    .min_args = 2,
    .max_args = -1,
    .exec = priority_exec,
};
