/* drover ls [--all] [--state S] [--user NAME | --mine] [--json] */
#include "cli/cli.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct cmd_opt ls_opts[] = {
    {"all", 'a', false, false, "include tasks that ended more than a day ago"},
    {"state", 0, true, false, "only tasks in this state"},
    {"user", 'u', true, false, "only tasks of this user (a name or a uid)"},
    {"mine", 0, false, false, "only your own tasks"},
    {"json", 0, false, false, "print a JSON array of task objects (docs/CLI.md)"},
    {NULL, 0, false, false, NULL},
};

/* "0,1" from the latest attempt's GPUs, or "(2)" for GPUs asked but not yet given. */
static void ls_gpus(const json_t *gpus, long long asked, char *buf, size_t len)
{
    json_t *g;
    size_t i, off = 0;
    buf[0] = '\0';
    json_array_foreach(gpus, i, g)
        off += (size_t)snprintf(buf + off, len > off ? len - off : 0, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(g));
    if (off == 0)
        snprintf(buf, len, asked > 0 ? "(%lld)" : "-", asked);
}

/* The command, shell-like, cut at about 60 characters. */
static void ls_command(const json_t *cmd, char *buf, size_t len)
{
    json_t *a;
    size_t i, off = 0;
    buf[0] = '\0';
    json_array_foreach(cmd, i, a) {
        if (off >= len)
            break;
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", json_string_value(a));
    }
    char *w = buf; /* runs of white space (a script's newlines and indentation) become one */
    for (char *r = buf; *r; r++)
        if (!(isspace((unsigned char)*r) && w > buf && w[-1] == ' '))
            *w++ = isspace((unsigned char)*r) ? ' ' : *r;
    *w = '\0';
    if (strlen(buf) > 60)
        strcpy(buf + 57, "...");
}

/* The fields the table shows, found by name in the brief reply's "columns" (store_list_brief:
 * the keys of the ls --json objects), so that the daemon's column order is no contract. */
enum ls_field {
    LS_ID, LS_NAME, LS_STATE, LS_PRIORITY, LS_GPUS_ASKED, LS_ATTEMPTS, LS_EXIT_CODE, LS_START,
    LS_END, LS_COMMAND, LS_GPUS, LS_USER, LS_SLURM_JOB, LS_SLURM_STATE, LS_WHY, LS_NFIELDS
};
static const char *const ls_keys[LS_NFIELDS] = {
    "id", "name", "state", "priority", "request.gpus", "attempts", "exit_code", "start_time",
    "attempt_end_time", "command", "gpus", "user", "slurm_job", "slurm_state", "why",
};

/* Fills at[] with each field's index in columns. Returns 0, or -1 naming the missing one. */
static int ls_columns(const json_t *columns, size_t at[LS_NFIELDS])
{
    for (int f = 0; f < LS_NFIELDS; f++) {
        size_t i;
        json_t *c;
        at[f] = SIZE_MAX;
        json_array_foreach(columns, i, c)
            if (json_is_string(c) && strcmp(json_string_value(c), ls_keys[f]) == 0)
                at[f] = i;
        if (at[f] == SIZE_MAX) {
            fprintf(stderr, "drover ls: the daemon's listing has no column '%s'\n", ls_keys[f]);
            return -1;
        }
    }
    return 0;
}

static long long row_int(const json_t *row, size_t i)
{
    return (long long)json_integer_value(json_array_get(row, i));
}

/* One row of a brief listing; at[] from ls_columns. */
static void ls_row(struct table *t, const json_t *row, const size_t at[LS_NFIELDS],
                   long long now)
{
    char id[24], pri[16], att[16], exit_code[16] = "-", gpus[64], when[32] = "-", command[64];
    char why[48] = "-";
    const char *state = json_string_value(json_array_get(row, at[LS_STATE]));
    const char *name = json_string_value(json_array_get(row, at[LS_NAME]));
    if (state == NULL)
        state = "?";
    snprintf(id, sizeof id, "%lld", row_int(row, at[LS_ID]));
    snprintf(pri, sizeof pri, "%lld", row_int(row, at[LS_PRIORITY]));
    snprintf(att, sizeof att, "%lld", row_int(row, at[LS_ATTEMPTS]));
    if (json_is_integer(json_array_get(row, at[LS_EXIT_CODE])))
        snprintf(exit_code, sizeof exit_code, "%lld", row_int(row, at[LS_EXIT_CODE]));
    if (json_is_integer(json_array_get(row, at[LS_START]))) {
        bool ended = json_is_integer(json_array_get(row, at[LS_END])) &&
                     strcmp(state, "running") != 0;
        format_duration((ended ? row_int(row, at[LS_END]) : now) - row_int(row, at[LS_START]),
                        when, sizeof when);
    }
    ls_gpus(json_array_get(row, at[LS_GPUS]), row_int(row, at[LS_GPUS_ASKED]), gpus, sizeof gpus);
    /* A Slurm task: its job instead of GPUs here; a job Slurm holds pending is queued there. */
    const char *job = json_string_value(json_array_get(row, at[LS_SLURM_JOB]));
    const char *slurm_state = json_string_value(json_array_get(row, at[LS_SLURM_STATE]));
    if (job != NULL)
        snprintf(gpus, sizeof gpus, "slurm:%s", job);
    if (slurm_state != NULL && strcmp(slurm_state, "PENDING") == 0 &&
        strcmp(state, "running") == 0)
        state = "queued";
    ls_command(json_array_get(row, at[LS_COMMAND]), command, sizeof command);
    const char *user = json_string_value(json_array_get(row, at[LS_USER]));
    /* Why a task that has not started waits, cut to a column's width (`show` has it whole). */
    const char *reason = json_string_value(json_array_get(row, at[LS_WHY]));
    if (reason != NULL && slurm_state == NULL) {
        snprintf(why, sizeof why, "%s", reason);
        if (strlen(reason) >= sizeof why)
            strcpy(why + sizeof why - 4, "...");
    } else if (slurm_state != NULL && strcmp(state, "queued") == 0) {
        snprintf(why, sizeof why, "slurm: %s", slurm_state);
    }
    const char *cells[] = {id, name ? name : "-", state, user ? user : "?", pri, gpus, att,
                           exit_code, when, why, command};
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
    if (cmd_opt(cmd, args, "mine") && cmd_opt(cmd, args, "user")) {
        json_decref(req);
        return cmd_usage_error(cmd, "--mine and --user cannot be used together");
    }
    if (cmd_opt(cmd, args, "mine")) /* the daemon knows who asks: nothing to send but this */
        json_object_set_new(req, "mine", json_true());
    if (cmd_opt(cmd, args, "user") &&
        client_set_string(cmd, req, "user", "--user", cmd_opt(cmd, args, "user"))) {
        json_decref(req);
        return EXIT_USAGE;
    }
    if (!cmd_opt(cmd, args, "json"))
        json_object_set_new(req, "brief", json_true()); /* only the columns shown */
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_t *tasks = json_object_get(reply, "tasks"), *task;
    size_t i;
    if (cmd_opt(cmd, args, "json")) {
        out_json(tasks);
    } else {
        static const char *const head[] = {"ID", "NAME", "STATE", "USER", "PRI", "GPUS",
                                           "ATT", "EXIT", "TIME", "REASON", "COMMAND"};
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        size_t at[LS_NFIELDS];
        if (ls_columns(json_object_get(reply, "columns"), at) < 0) {
            json_decref(reply);
            return EXIT_FAILED;
        }
        struct table *t = table_new(11, head);
        json_array_foreach(tasks, i, task)
            ls_row(t, task, at, now);
        table_print(t, stdout);
        table_free(t);
    }
    json_decref(reply);
    return EXIT_OK;
}

const struct cmd_entry cmd_ls = {
    .name = "ls",
    .usage = "ls [--all] [--state S] [--user NAME | --mine] [--json]",
    .summary = "list tasks (live ones and those that ended in the last day)",
    .opts = ls_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = ls_exec,
};
