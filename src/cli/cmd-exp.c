/* drover exp run|ls|show|export|stop|resume: experiments from YAML templates (exp/template.c
 * reads and expands them here, in the client; the daemon stores and runs the tasks, reads what
 * they report, and stops trials early). Each subcommand is an entry of its own, with its own
 * options and arguments (cli/commands.c dispatches on the word after `exp`). */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exp/request.h"
#include "exp/template.h"
#include "util/parse.h"
#include "util/xalloc.h"

/* The exp_run request for def, checked as the daemon will check it (exp/request.h); NULL after
 * saying why, with *rc. */
static json_t *exp_request(const struct cmd_entry *cmd, const struct exp_def *def, unsigned seed,
                           int *rc)
{
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        *rc = cmd_usage_error(cmd, "cannot read the working directory");
        return NULL;
    }
    json_t *tasks = json_array();
    for (size_t i = 0; i < def->ntasks; i++)
        json_array_append_new(tasks, exp_task_to_json(&def->tasks[i]));
    json_t *req = client_request("exp_run");
    json_object_set_new(req, "kind", json_string(def->kind == EXP_PIPELINE ? "Pipeline"
                                                                          : "Experiment"));
    json_object_set(req, "spec", def->spec);
    json_object_set_new(req, "tasks", tasks);
    json_object_set_new(req, "parallel", json_integer(def->parallel));
    json_object_set_new(req, "space", json_integer((json_int_t)def->space));
    json_object_set_new(req, "seed", json_integer(seed));
    json_t *env = out_environment(cmd, NULL);
    *rc = env == NULL ? EXIT_USAGE : 0;
    json_object_set_new(req, "env", env);
    if (*rc || (*rc = client_set_string(cmd, req, "name", "the experiment's name", def->name)) ||
        (*rc = client_set_string(cmd, req, "workdir", "the working directory", cwd))) {
        json_decref(req);
        return NULL;
    }
    char *why; /* the checks the daemon makes too */
    if (exp_request_check(req, NULL, &why) < 0) {
        *rc = cmd_usage_error(cmd, "%s", why);
        free(why);
        json_decref(req);
        return NULL;
    }
    return req;
}

/* --dry-run, after the listing: the daemon checks the request against this machine (GPU types,
 * memory, counts) without creating anything, and names each task that could never run here.
 * Takes req. EXIT_FAILED if one cannot; EXIT_OK when none, or when no daemon can be reached to
 * ask (which it says). */
static int exp_fit_check(const struct cmd_entry *cmd, const char *name, json_t *req)
{
    const char *no = getenv("DROVER_NO_AUTOSTART");
    int fd = client_connect(cmd->name, !(no && strcmp(no, "1") == 0)), rc;
    if (fd < 0) {
        fprintf(stderr, "drover %s: fit against this machine was not checked: no daemon answers"
                        " (%s%s)\n", cmd->name, strerror(errno),
                no && strcmp(no, "1") == 0 ? "; DROVER_NO_AUTOSTART=1" : "");
        json_decref(req);
        return EXIT_OK;
    }
    close(fd); /* one answers: ask it */
    json_object_set_new(req, "dry_run", json_true());
    json_t *reply = client_call(cmd->name, req, &rc), *problem;
    if (reply == NULL)
        return rc;
    if (!json_is_true(json_object_get(reply, "dry_run"))) {
        fprintf(stderr, "drover %s: this daemon does not know dry runs and created experiment"
                        " %s; drover exp stop %s\n", cmd->name, name, name);
        json_decref(reply);
        return EXIT_FAILED;
    }
    json_t *problems = json_object_get(reply, "problems");
    size_t i;
    json_array_foreach(problems, i, problem)
        fprintf(stderr, "drover %s: %s\n", cmd->name, json_string_value(problem));
    if (json_array_size(problems) == 0)
        printf("checked against this machine: every task can run here\n");
    rc = json_array_size(problems) > 0 ? EXIT_FAILED : EXIT_OK;
    json_decref(reply);
    return rc;
}

static int exp_run(const struct cmd_entry *cmd, struct cmd_args *args)
{
    size_t nsets;
    char *const *sets = cmd_opt_values(cmd, args, "set", &nsets);
    struct exp_def *def;
    char *err;
    unsigned seed = (unsigned)time(NULL);
    for (size_t i = 0; i < nsets; i++) {
        size_t bad = utf8_check(sets[i]);
        if (bad > 0)
            return cmd_usage_error(cmd, "--set #%zu: not valid UTF-8 (byte %zu)", i + 1, bad);
    }
    if (exp_load(args->argv[0], sets, nsets, seed, &def, &err) < 0) {
        int rc = cmd_usage_error(cmd, "%s", err);
        free(err);
        return rc;
    }
    json_t *warning;
    size_t w;
    json_array_foreach(def->warnings, w, warning) /* an unquoted ${…} in sh -c */
        fprintf(stderr, "drover %s: %s\n", cmd->name, json_string_value(warning));
    bool dry_run = cmd_opt(cmd, args, "dry-run") != NULL;
    if (dry_run) {
        exp_print_tasks(def, stdout);
        fflush(stdout); /* before what the check says on stderr */
    }
    int rc;
    json_t *req = exp_request(cmd, def, seed, &rc);
    if (req != NULL && dry_run) {
        rc = exp_fit_check(cmd, def->name, req);
    } else if (req != NULL) {
        json_t *reply = client_call(cmd->name, req, &rc);
        if (reply != NULL) {
            json_t *ids = json_object_get(reply, "ids");
            size_t n = json_array_size(ids);
            printf("experiment %s: %zu task%s (%lld", def->name, n, n == 1 ? "" : "s",
                   (long long)json_integer_value(json_array_get(ids, 0)));
            if (n > 1)
                printf("-%lld", (long long)json_integer_value(json_array_get(ids, n - 1)));
            printf("); drover exp show %s\n", def->name);
            json_decref(reply);
        }
    }
    exp_def_free(def);
    return rc;
}

static int exp_ls(const struct cmd_entry *cmd, struct cmd_args *args)
{
    int rc;
    json_t *reply = client_call(cmd->name, client_request("exp_ls"), &rc);
    if (reply == NULL)
        return rc;
    json_t *list = json_object_get(reply, "experiments"), *e;
    if (cmd_opt(cmd, args, "json")) {
        out_json(list);
        json_decref(reply);
        return EXIT_OK;
    }
    static const char *const head[] = {"NAME", "USER", "KIND", "STATE", "TASKS", "RUNNING",
                                       "WAITING", "SUCCEEDED", "FAILED", "STOPPED EARLY",
                                       "REASON"};
    struct table *t = table_new(11, head);
    size_t i;
    json_array_foreach(list, i, e) {
        char n[6][16];
        static const char *const keys[] = {"tasks", "running", "waiting", "succeeded", "failed",
                                           "stopped_early"};
        for (int k = 0; k < 6; k++)
            snprintf(n[k], sizeof n[k], "%lld", (long long)json_integer_value(json_object_get(e, keys[k])));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        const char *user = json_string_value(json_object_get(e, "user"));
        const char *cells[] = {json_string_value(json_object_get(e, "name")),
                               user ? user : "?",
                               json_string_value(json_object_get(e, "kind")),
                               json_string_value(json_object_get(e, "state")),
                               n[0], n[1], n[2], n[3], n[4], n[5], reason ? reason : "-"};
        table_add(t, cells, NULL);
    }
    if (json_array_size(list) == 0)
        printf("no experiments (drover exp run FILE.yaml)\n");
    else
        table_print(t, stdout);
    table_free(t);
    json_decref(reply);
    return EXIT_OK;
}

/* "k=v k=v" of a trial's parameters, shortened to their last path component. */
static void exp_params_text(json_t *params, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach(params, k, v) {
        const char *dot = strrchr(k, '.');
        char num[32];
        char *val = json_is_real(v) ? (snprintf(num, sizeof num, "%.6g", json_real_value(v)),
                                       xstrdup(num))
                                    : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", dot ? dot + 1 : k,
                 val ? val : "?");
        free(val);
    }
}

static const char *exp_number(json_t *v, char *buf, size_t len)
{
    if (!json_is_number(v))
        return "-";
    snprintf(buf, len, "%.4g", json_number_value(v));
    return buf;
}

/* An experiment as a leaderboard (show), as JSON (show --json), or its trials (export). */
enum exp_view { EXP_TABLE, EXP_JSON, EXP_CSV, EXP_TRIALS_JSON };

/* The daemon's reply to op about experiment name, or NULL with the exit status in *rc. */
static json_t *exp_call(const struct cmd_entry *cmd, const char *op, const char *name, int *rc)
{
    json_t *req = client_request(op);
    if ((*rc = client_set_string(cmd, req, "name", "the experiment name", name)) != 0) {
        json_decref(req);
        return NULL;
    }
    return client_call(cmd->name, req, rc);
}

static int exp_view(const struct cmd_entry *cmd, const char *name, enum exp_view view)
{
    int rc;
    json_t *reply = exp_call(cmd, "exp_show", name, &rc);
    if (reply == NULL)
        return rc;
    json_object_del(reply, "ok");
    const char *metric = json_string_value(json_object_get(reply, "metric"));
    json_t *trials = json_object_get(reply, "trials"), *t;
    size_t i;
    if (view == EXP_JSON || view == EXP_TRIALS_JSON) {
        out_json(view == EXP_TRIALS_JSON ? trials : reply);
    } else if (view == EXP_CSV) {
        printf("trial,task,state,params,%s,gpu_hours,stop_reason\n", metric ? metric : "metric");
        json_array_foreach(trials, i, t) {
            char params[512], best[32];
            exp_params_text(json_object_get(t, "params"), params, sizeof params);
            const char *reason = json_string_value(json_object_get(t, "stopped_early") == json_true()
                                                       ? json_object_get(t, "reason") : NULL);
            printf("%lld,%lld,%s,\"%s\",%s,%.4f,\"%s\"\n",
                   (long long)json_integer_value(json_object_get(t, "trial")),
                   (long long)json_integer_value(json_object_get(t, "task")),
                   json_string_value(json_object_get(t, "state")), params,
                   strcmp(exp_number(json_object_get(t, "best"), best, sizeof best), "-")
                       ? best : "",
                   json_real_value(json_object_get(t, "gpu_hours")), reason ? reason : "");
        }
    } else {
        const char *reason = json_string_value(json_object_get(reply, "reason"));
        printf("experiment %s (%s): %s%s%s\n", json_string_value(json_object_get(reply, "name")),
               json_string_value(json_object_get(reply, "kind")),
               json_string_value(json_object_get(reply, "state")), reason ? " — " : "",
               reason ? reason : "");
        char best_head[64];
        snprintf(best_head, sizeof best_head, "BEST %s", metric ? metric : "");
        static const char *head[] = {"TRIAL", "TASK", "STATE", "PARAMS", "LATEST", NULL,
                                     "GPU-H", "STOPPED EARLY"};
        head[5] = best_head;
        struct table *tb = table_new(8, head);
        json_array_foreach(trials, i, t) {
            char trial[16], task[16], params[256], latest[32], best[32], hours[32];
            json_t *lv = metric ? json_object_get(json_object_get(t, "latest"), metric) : NULL;
            snprintf(trial, sizeof trial, "%lld", (long long)json_integer_value(json_object_get(t, "trial")));
            snprintf(task, sizeof task, "%lld", (long long)json_integer_value(json_object_get(t, "task")));
            exp_params_text(json_object_get(t, "params"), params, sizeof params);
            snprintf(hours, sizeof hours, "%.3f", json_real_value(json_object_get(t, "gpu_hours")));
            const char *stop = json_is_true(json_object_get(t, "stopped_early"))
                                   ? json_string_value(json_object_get(t, "reason")) : NULL;
            const char *stage = json_string_value(json_object_get(t, "stage"));
            const char *cells[] = {stage ? stage : trial, task,
                                   json_string_value(json_object_get(t, "state")),
                                   params[0] ? params : "-", exp_number(lv, latest, sizeof latest),
                                   exp_number(json_object_get(t, "best"), best, sizeof best),
                                   hours, stop ? stop : "-"};
            table_add(tb, cells, out_state_color(json_string_value(json_object_get(t, "task_state"))));
        }
        table_print(tb, stdout);
        table_free(tb);
    }
    json_decref(reply);
    return EXIT_OK;
}

static int exp_control(const struct cmd_entry *cmd, struct cmd_args *args, const char *op,
                       const char *verb)
{
    int rc;
    json_t *reply = exp_call(cmd, op, args->argv[0], &rc);
    if (reply == NULL)
        return rc;
    printf("experiment %s %s (%lld tasks)\n", args->argv[0], verb,
           (long long)json_integer_value(json_object_get(reply, "tasks")));
    json_decref(reply);
    return EXIT_OK;
}

static int exp_show(const struct cmd_entry *cmd, struct cmd_args *args)
{
    return exp_view(cmd, args->argv[0], cmd_opt(cmd, args, "json") ? EXP_JSON : EXP_TABLE);
}

static int exp_export(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *format = cmd_opt(cmd, args, "format");
    if (format != NULL && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0)
        return cmd_usage_error(cmd, "--format %s: expected csv or json", format);
    bool json = format != NULL && strcmp(format, "json") == 0;
    return exp_view(cmd, args->argv[0], json ? EXP_TRIALS_JSON : EXP_CSV);
}

static int exp_stop(const struct cmd_entry *cmd, struct cmd_args *args)
{
    return exp_control(cmd, args, "exp_stop", "stopped");
}

static int exp_resume(const struct cmd_entry *cmd, struct cmd_args *args)
{
    return exp_control(cmd, args, "exp_resume", "resumed");
}

static const struct cmd_opt exp_run_opts[] = {
    {"set", 0, true, true, "KEY=VALUE first: hyperparameters.lr=0.1, metadata.name=NAME, …"},
    {"dry-run", 0, false, false, "print the tasks and check them here; create nothing"},
    {NULL, 0, false, false, NULL},
};
static const struct cmd_opt exp_json_opts[] = {
    {"json", 0, false, false, "print JSON"},
    {NULL, 0, false, false, NULL},
};
static const struct cmd_opt exp_export_opts[] = {
    {"format", 0, true, false, "csv or json (default csv)"},
    {NULL, 0, false, false, NULL},
};
static const struct cmd_opt exp_no_opts[] = {{NULL, 0, false, false, NULL}};

/* One subcommand of exp: its word, usage, summary, options, positional arguments (exactly
 * nargs) and handler. */
#define EXP_SUBCOMMAND(word, use, text, options, nargs, handler)                                  \
    {.name = "exp", .sub = word, .usage = use, .summary = text, .opts = options,               \
     .min_args = nargs, .max_args = nargs, .exec = handler}

static const struct cmd_entry exp_entries[] = {
    EXP_SUBCOMMAND("run", "exp run FILE.yaml [--set KEY=VALUE …] [--dry-run]",
                   "create an experiment's tasks from a template", exp_run_opts, 1, exp_run),
    EXP_SUBCOMMAND("ls", "exp ls [--json]", "list experiments, with their tasks by state",
                   exp_json_opts, 0, exp_ls),
    EXP_SUBCOMMAND("show", "exp show NAME [--json]", "an experiment's leaderboard",
                   exp_json_opts, 1, exp_show),
    EXP_SUBCOMMAND("export", "exp export NAME [--format csv|json]",
                   "write an experiment's trials", exp_export_opts, 1, exp_export),
    EXP_SUBCOMMAND("stop", "exp stop NAME", "cancel every live task of an experiment",
                   exp_no_opts, 1, exp_stop),
    EXP_SUBCOMMAND("resume", "exp resume NAME",
                   "release the held trials of a paused experiment", exp_no_opts, 1, exp_resume),
};

extern const struct cmd_entry cmd_exp_render; /* cli/cmd-exp-render.c */

static const struct cmd_entry *const exp_subcommands[] = {
    &exp_entries[0], &exp_entries[1], &exp_entries[2], &exp_entries[3], &exp_entries[4],
    &exp_entries[5], &cmd_exp_render, NULL,
};
_Static_assert(sizeof exp_entries / sizeof exp_entries[0] == 6,
               "exp_subcommands lists every entry of exp_entries");

const struct cmd_entry cmd_exp = {
    .name = "exp",
    .usage = "exp run|ls|show|export|stop|resume|render …",
    .summary = "experiments: YAML templates, sweeps, early stopping, the leaderboard",
    .subcommands = exp_subcommands,
};
