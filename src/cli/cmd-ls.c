/* drover ls [--all] [--state S] [--json] */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cmd_opt ls_opts[] = {
    {"all", 'a', false, false, "include tasks that ended more than a day ago"},
    {"state", 0, true, false, "only tasks in this state"},
    {"json", 0, false, false, "print a JSON array of task objects (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

/* "0,1" from the latest attempt's GPUs (JSON text), or "(2)" for GPUs asked but not yet given. */
static void ls_gpus(const char *gpus_text, long long asked, char *buf, size_t len)
{
    json_t *gpus = json_loads(gpus_text, 0, NULL), *g;
    size_t i, off = 0;
    buf[0] = '\0';
    json_array_foreach(gpus, i, g)
        off += (size_t)snprintf(buf + off, len > off ? len - off : 0, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(g));
    json_decref(gpus);
    if (off == 0)
        snprintf(buf, len, asked > 0 ? "(%lld)" : "-", asked);
}

/* The command from its JSON text, shell-like, cut at about 60 characters. */
static void ls_command(const char *text, char *buf, size_t len)
{
    json_t *cmd = json_loads(text, 0, NULL), *a;
    size_t i, off = 0;
    buf[0] = '\0';
    json_array_foreach(cmd, i, a) {
        if (off >= len)
            break;
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", json_string_value(a));
    }
    json_decref(cmd);
    char *w = buf; /* runs of white space (a script's newlines and indentation) become one */
    for (char *r = buf; *r; r++)
        if (!(isspace((unsigned char)*r) && w > buf && w[-1] == ' '))
            *w++ = isspace((unsigned char)*r) ? ' ' : *r;
    *w = '\0';
    if (strlen(buf) > 60)
        strcpy(buf + 57, "...");
}

static long long row_int(json_t *row, size_t i)
{
    return (long long)json_integer_value(json_array_get(row, i));
}

/* One row of store_list_brief: [id, name, state, priority, gpus asked, attempts, exit code,
 * start, end, command, gpus given]. */
static void ls_row(struct table *t, json_t *row, long long now)
{
    char id[24], pri[16], att[16], exit_code[16] = "-", gpus[64], when[32] = "-", command[64];
    const char *state = json_string_value(json_array_get(row, 2));
    const char *name = json_string_value(json_array_get(row, 1));
    snprintf(id, sizeof id, "%lld", row_int(row, 0));
    snprintf(pri, sizeof pri, "%lld", row_int(row, 3));
    snprintf(att, sizeof att, "%lld", row_int(row, 5));
    if (json_is_integer(json_array_get(row, 6)))
        snprintf(exit_code, sizeof exit_code, "%lld", row_int(row, 6));
    if (json_is_integer(json_array_get(row, 7))) {
        bool ended = json_is_integer(json_array_get(row, 8)) && strcmp(state, "running") != 0;
        format_duration((ended ? row_int(row, 8) : now) - row_int(row, 7), when, sizeof when);
    }
    ls_gpus(json_string_value(json_array_get(row, 10)), row_int(row, 4), gpus, sizeof gpus);
    ls_command(json_string_value(json_array_get(row, 9)), command, sizeof command);
    const char *cells[] = {id, name ? name : "-", state, pri, gpus, att, exit_code, when,
                           command};
    table_add(t, cells, out_state_color(state));
}

static int ls_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    json_t *req = client_request("ls");
    int rc;
    if (cmd_opt(cmd, args, "all"))
        json_object_set_new(req, "all", json_true());
    if (cmd_opt(cmd, args, "state") &&
        client_set_string(cmd, req, "state", "--state", cmd_opt(cmd, args, "state"))) {
        json_decref(req);
        return EXIT_USAGE;
    }
    if (!cmd_opt(cmd, args, "json"))
        json_object_set_new(req, "brief", json_true()); /* rows as arrays: far cheaper */
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
