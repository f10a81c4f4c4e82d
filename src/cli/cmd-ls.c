/* drover ls [--all] [--state S] [--json] */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cmd_opt ls_opts[] = {
    {"all", 'a', false, false, "include tasks that ended more than a day ago"},
    {"state", 0, true, false, "only tasks in this state"},
    {"json", 0, false, false, "print a JSON array of task objects (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

/* "0,1" from a JSON array of GPU indices. */
static void ls_gpus(json_t *gpus, const json_t *req, char *buf, size_t len)
{
    size_t i, off = 0;
    json_t *g;
    buf[0] = '\0';
    json_array_foreach(gpus, i, g)
        off += (size_t)snprintf(buf + off, len > off ? len - off : 0, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(g));
    if (off == 0) {
        long long n = json_integer_value(json_object_get(req, "gpus"));
        snprintf(buf, len, n > 0 ? "(%lld)" : "-", n);
    }
}

static char *ls_command(json_t *cmd)
{
    size_t i, len = 0;
    json_t *a;
    char *out = xstrdup("");
    json_array_foreach(cmd, i, a) {
        char *next = xasprintf("%s%s%s", out, i ? " " : "", json_string_value(a));
        free(out);
        out = next;
        len = strlen(out);
        if (len > 60)
            break;
    }
    if (len > 60)
        strcpy(out + 57, "...");
    return out;
}

static void ls_row(struct table *t, json_t *task, long long now)
{
    char id[24], pri[16], att[16], exit_code[16], gpus[64], when[32];
    const char *state = json_string_value(json_object_get(task, "state"));
    json_t *ec = json_object_get(task, "exit_code"), *start = json_object_get(task, "start_time");
    json_t *end = json_object_get(task, "end_time");
    snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(task, "id")));
    snprintf(pri, sizeof pri, "%lld",
             (long long)json_integer_value(json_object_get(task, "priority")));
    snprintf(att, sizeof att, "%lld",
             (long long)json_integer_value(json_object_get(task, "attempts")));
    snprintf(exit_code, sizeof exit_code, "%s", "-");
    if (json_is_integer(ec))
        snprintf(exit_code, sizeof exit_code, "%lld", (long long)json_integer_value(ec));
    ls_gpus(json_object_get(task, "gpus"), json_object_get(task, "request"), gpus, sizeof gpus);
    strcpy(when, "-");
    if (json_is_integer(start)) {
        long long stop = json_is_integer(end) ? json_integer_value(end) : now;
        if (strcmp(state, "running") == 0)
            stop = now;
        format_duration(stop - json_integer_value(start), when, sizeof when);
    }
    char *command = ls_command(json_object_get(task, "command"));
    const char *name = json_string_value(json_object_get(task, "name"));
    const char *cells[] = {id, name ? name : "-", state, pri, gpus, att, exit_code, when,
                           command};
    table_add(t, cells, out_state_color(state));
    free(command);
}

static int ls_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("ls");
    int rc;
    if (cmd_opt(cmd, args, "all"))
        json_object_set_new(req, "all", json_true());
    if (cmd_opt(cmd, args, "state"))
        json_object_set_new(req, "state", json_string(cmd_opt(cmd, args, "state")));
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *tasks = json_object_get(reply, "tasks"), *task;
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(tasks);
    } else {
        static const char *const head[] = {"ID", "NAME", "STATE", "PRI", "GPUS", "ATT",
                                           "EXIT", "TIME", "COMMAND"};
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        struct table *t = table_new(9, head);
        json_array_foreach(tasks, i, task)
            ls_row(t, task, now);
        table_print(t, stdout);
        table_free(t);
    }
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_ls = {
    .name = "ls",
    .usage = "ls [--all] [--state S] [--json]",
    .summary = "list tasks (live ones and those that ended in the last day)",
    .opts = ls_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = ls_exec,
};
