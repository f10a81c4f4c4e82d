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

/* "12.0G" for a number, "-" for null. */
static const char *gpus_size(json_t *v, char *buf, size_t len)
{
    if (!json_is_integer(v))
        return "-";
    return format_size((uint64_t)json_integer_value(v), buf, len);
}

static const char *gpus_int(json_t *v, const char *unit, char *buf, size_t len)
{
    if (!json_is_number(v))
        return "-";
    snprintf(buf, len, "%.0f%s", json_number_value(v), unit);
    return buf;
}

static void gpus_human(json_t *reply)
{
    static const char *const head[] = {"GPU", "NAME", "UUID", "USED", "TOTAL", "CLAIMED",
                                       "UTIL", "TEMP", "POWER", "STATE", "TASKS", "OTHER PROCESSES"};
    struct table *t = table_new(12, head);
    json_t *g;
    size_t i;
    json_array_foreach(json_object_get(reply, "gpus"), i, g) {
        char idx[16], used[32], total[32], claimed[32], util[16], temp[16], power[16];
        char tasks[256] = "", others[256] = "", state[96];
        json_t *id, *p;
        size_t k;
        snprintf(idx, sizeof idx, "%lld", (long long)json_integer_value(json_object_get(g, "index")));
        json_array_foreach(json_object_get(g, "tasks"), k, id) {
            size_t len = strlen(tasks);
            snprintf(tasks + len, sizeof tasks - len, "%s%lld", k ? "," : "",
                     (long long)json_integer_value(id));
        }
        size_t n = 0;
        json_array_foreach(json_object_get(g, "processes"), k, p) {
            if (!json_is_null(json_object_get(p, "task")))
                continue;
            char mem[32];
            size_t len = strlen(others);
            snprintf(others + len, sizeof others - len, "%s%lld (%s)", n++ ? ", " : "",
                     (long long)json_integer_value(json_object_get(p, "pid")),
                     gpus_size(json_object_get(p, "mem"), mem, sizeof mem));
        }
        bool excl = json_is_true(json_object_get(g, "exclusive"));
        const char *reason = json_string_value(json_object_get(g, "offline_reason"));
        if (json_is_true(json_object_get(g, "offline")))
            snprintf(state, sizeof state, "offline: %s", reason ? reason : "?");
        else
            snprintf(state, sizeof state, "%s%s", excl ? "exclusive" : tasks[0] ? "shared" : "free",
                     json_is_true(json_object_get(g, "busy")) ? ", busy" : "");
        json_t *pw = json_object_get(g, "power_w");
        if (json_is_number(pw))
            snprintf(power, sizeof power, "%.0fW", json_number_value(pw));
        const char *cells[] = {idx,
                               json_string_value(json_object_get(g, "name")),
                               json_string_value(json_object_get(g, "uuid")),
                               gpus_size(json_object_get(g, "mem_used"), used, sizeof used),
                               gpus_size(json_object_get(g, "mem_total"), total, sizeof total),
                               gpus_size(json_object_get(g, "mem_claimed"), claimed, sizeof claimed),
                               gpus_int(json_object_get(g, "util"), "%", util, sizeof util),
                               gpus_int(json_object_get(g, "temp_c"), "C", temp, sizeof temp),
                               json_is_number(pw) ? power : "-",
                               state,
                               tasks[0] ? tasks : "-",
                               others[0] ? others : "-"};
        table_add(t, cells, NULL);
    }
    char mem[32];
    format_size((uint64_t)json_integer_value(json_object_get(reply, "mem")), mem, sizeof mem);
    printf("source: %s; %lld CPUs, %s memory\n",
           json_string_value(json_object_get(reply, "source")),
           (long long)json_integer_value(json_object_get(reply, "cpus")), mem);
    const char *policy = json_string_value(json_object_get(reply, "policy"));
    if (policy != NULL && strcmp(policy, "las") == 0)
        printf("policy: las, %lld preemptions since the daemon started\n",
               (long long)json_integer_value(json_object_get(reply, "preemptions")));
    json_t *amqp = json_object_get(reply, "amqp");
    if (json_is_object(amqp) && json_is_true(json_object_get(amqp, "up")))
        printf("amqp: connected to %s:%lld, queue %s, exchange %s; %lld events waiting\n",
               json_string_value(json_object_get(amqp, "host")),
               (long long)json_integer_value(json_object_get(amqp, "port")),
               json_string_value(json_object_get(amqp, "queue")),
               json_string_value(json_object_get(amqp, "exchange")),
               (long long)json_integer_value(json_object_get(amqp, "events_waiting")));
    else if (json_is_object(amqp))
        printf("amqp: not connected: %s; %lld events waiting (kept in the store)\n",
               json_string_value(json_object_get(amqp, "error"))
                   ? json_string_value(json_object_get(amqp, "error")) : "?",
               (long long)json_integer_value(json_object_get(amqp, "events_waiting")));
    json_t *slurm = json_object_get(reply, "slurm");
    if (json_is_object(slurm) && json_is_true(json_object_get(slurm, "up")))
        printf("slurm: up, %lld jobs tracked\n",
               (long long)json_integer_value(json_object_get(slurm, "tracked")));
    else if (json_is_object(slurm))
        printf("slurm: not answering: %s\n",
               json_string_value(json_object_get(slurm, "error"))
                   ? json_string_value(json_object_get(slurm, "error")) : "?");
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
