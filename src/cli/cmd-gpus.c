/* drover gpus [--json]: the inventory and what drover has placed on each GPU. */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static const struct cmd_opt gpus_opts[] = {
    {"json", 0, false, false, "print the inventory as JSON"},
    {NULL, 0, false, false, NULL},
};

static void gpus_human(json_t *reply)
{
    static const char *const head[] = {"GPU", "NAME", "MEMORY", "CLAIMED", "MODE", "TASKS"};
    struct table *t = table_new(6, head);
    json_t *g;
    size_t i;
    json_array_foreach(json_object_get(reply, "gpus"), i, g) {
        char idx[16], total[32], claimed[32], tasks[256] = "";
        json_t *id;
        size_t k;
        snprintf(idx, sizeof idx, "%lld", (long long)json_integer_value(json_object_get(g, "index")));
        format_size((uint64_t)json_integer_value(json_object_get(g, "mem_total")), total,
                    sizeof total);
        format_size((uint64_t)json_integer_value(json_object_get(g, "mem_claimed")), claimed,
                    sizeof claimed);
        json_array_foreach(json_object_get(g, "tasks"), k, id) {
            size_t len = strlen(tasks);
            snprintf(tasks + len, sizeof tasks - len, "%s%lld", k ? "," : "",
                     (long long)json_integer_value(id));
        }
        bool excl = json_is_true(json_object_get(g, "exclusive"));
        const char *mode = excl ? "exclusive" : k ? "shared" : "free";
        const char *cells[] = {idx, json_string_value(json_object_get(g, "name")), total,
                               claimed, mode, tasks[0] ? tasks : "-"};
        table_add(t, cells, NULL);
    }
    char mem[32];
    format_size((uint64_t)json_integer_value(json_object_get(reply, "mem")), mem, sizeof mem);
    printf("source: %s; %lld CPUs, %s memory\n",
           json_string_value(json_object_get(reply, "source")),
           (long long)json_integer_value(json_object_get(reply, "cpus")), mem);
    if (json_array_size(json_object_get(reply, "gpus")) > 0)
        table_print(t, stdout);
    else
        printf("no GPUs: only CPU-only tasks (--gpus 0) run here\n");
    table_free(t);
}

static int gpus_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int rc;
    json_t *reply = client_call(cmd->name, client_request("gpus"), &rc);
    if (reply == NULL)
        return rc;
    if (cmd_opt(cmd, args, "json")) {
        json_object_del(reply, "ok");
        out_json(reply);
    } else {
        gpus_human(reply);
    }
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_gpus = {
    .name = "gpus",
    .usage = "gpus [--json]",
    .summary = "show the GPUs and the tasks on them",
    .opts = gpus_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = gpus_exec,
};
