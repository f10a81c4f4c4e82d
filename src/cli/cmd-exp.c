/* drover exp run|ls|show|export|stop|resume: experiments from YAML templates (exp/template.c
 * reads and expands them here, in the client; the daemon stores and runs the tasks, reads what
 * they report, and stops trials early). */
#include "cli/cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exp/request.h"
#include "exp/template.h"
#include "util/parse.h"
#include "util/xalloc.h"

static const struct cmd_opt exp_opts[] = {
    {"set", 0, true, true, "run: KEY=VALUE overrides a spec value, e.g. hyperparameters.lr=0.1"},
    {"dry-run", 0, false, false, "run: print the tasks it would create, create nothing"},
    {"json", 0, false, false, "ls, show: print JSON"},
    {"format", 0, true, false, "export: csv or json (default csv)"},
    {NULL, 0, false, false, NULL},
};

static const char *const *exp_values(const struct cmd_entry *cmd, struct cmd_args *args,
                                     const char *name, size_t *n)
{
    *n = 0;
    for (int i = 0; cmd->opts[i].name; i++)
        if (strcmp(cmd->opts[i].name, name) == 0) {
            *n = (size_t)args->nvalues[i];
            return (const char *const *)args->values[i];
        }
    return NULL;
}

static int exp_run(const struct cmd_entry *cmd, struct cmd_args *args)
{
    if (args->argc != 2)
        return cmd_usage_error(cmd, "usage: drover exp run FILE.yaml [--set KEY=VALUE …] [--dry-run]");
    size_t nsets;
    const char *const *sets = exp_values(cmd, args, "set", &nsets);
    struct exp_def *def;
    char *err;
    unsigned seed = (unsigned)time(NULL);
    for (size_t i = 0; i < nsets; i++) {
        size_t bad = utf8_check(sets[i]);
        if (bad > 0)
            return cmd_usage_error(cmd, "--set #%zu: not valid UTF-8 (byte %zu)", i + 1, bad);
    }
    if (exp_load(args->argv[1], (char *const *)sets, nsets, seed, &def, &err) < 0) {
        int rc = cmd_usage_error(cmd, "%s", err);
        free(err);
        return rc;
    }
    json_t *warning;
    size_t w;
    json_array_foreach(def->warnings, w, warning) /* an unquoted ${…} in sh -c */
        fprintf(stderr, "drover %s: %s\n", cmd->name, json_string_value(warning));
    if (cmd_opt(cmd, args, "dry-run")) {
        exp_print_tasks(def, stdout);
        exp_def_free(def);
        return EXIT_OK;
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        exp_def_free(def);
        return cmd_usage_error(cmd, "cannot read the working directory");
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
    int rc = env == NULL ? EXIT_USAGE : 0;
    json_object_set_new(req, "env", env);
    if (rc || (rc = client_set_string(cmd, req, "name", "the experiment's name", def->name)) ||
        (rc = client_set_string(cmd, req, "workdir", "the working directory", cwd))) {
        json_decref(req);
        exp_def_free(def);
        return rc;
    }
    char *why; /* the checks the daemon makes too (exp/request.h) */
    if (exp_request_check(req, NULL, &why) < 0) {
        rc = cmd_usage_error(cmd, "%s", why);
        free(why);
        json_decref(req);
        exp_def_free(def);
        return rc;
    }
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply != NULL) {
        json_t *ids = json_object_get(reply, "ids");
        printf("experiment %s: %zu task%s (%lld", def->name, json_array_size(ids),
               json_array_size(ids) == 1 ? "" : "s",
               (long long)json_integer_value(json_array_get(ids, 0)));
        if (json_array_size(ids) > 1)
            printf("-%lld", (long long)json_integer_value(json_array_get(ids, json_array_size(ids) - 1)));
        printf("); drover exp show %s\n", def->name);
        json_decref(reply);
        rc = EXIT_OK;
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
    static const char *const head[] = {"NAME", "KIND", "STATE", "TASKS", "RUNNING", "WAITING",
                                       "SUCCEEDED", "FAILED", "STOPPED EARLY", "REASON"};
    struct table *t = table_new(10, head);
    size_t i;
    json_array_foreach(list, i, e) {
        char n[6][16];
        static const char *const keys[] = {"tasks", "running", "waiting", "succeeded", "failed",
                                           "stopped_early"};
        for (int k = 0; k < 6; k++)
            snprintf(n[k], sizeof n[k], "%lld", (long long)json_integer_value(json_object_get(e, keys[k])));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        const char *cells[] = {json_string_value(json_object_get(e, "name")),
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

static int exp_show(const struct cmd_entry *cmd, struct cmd_args *args, bool export_csv,
                    bool export_json)
{
    if (args->argc != 2)
        return cmd_usage_error(cmd, "give one experiment name");
    json_t *req = client_request("exp_show");
    int rc = client_set_string(cmd, req, "name", "the experiment name", args->argv[1]);
    if (rc) {
        json_decref(req);
        return rc;
    }
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    json_object_del(reply, "ok");
    const char *metric = json_string_value(json_object_get(reply, "metric"));
    json_t *trials = json_object_get(reply, "trials"), *t;
    size_t i;
    if (export_json || (cmd_opt(cmd, args, "json") && !export_csv)) {
        out_json(export_json ? trials : reply);
    } else if (export_csv) {
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
    if (args->argc != 2)
        return cmd_usage_error(cmd, "give one experiment name");
    json_t *req = client_request(op);
    int rc = client_set_string(cmd, req, "name", "the experiment name", args->argv[1]);
    if (rc) {
        json_decref(req);
        return rc;
    }
    json_t *reply = client_call(cmd->name, req, &rc);
    if (reply == NULL)
        return rc;
    printf("experiment %s %s (%lld tasks)\n", args->argv[1], verb,
           (long long)json_integer_value(json_object_get(reply, "tasks")));
    json_decref(reply);
    return EXIT_OK;
}

static int exp_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *sub = args->argv[0];
    if (strcmp(sub, "run") == 0)
        return exp_run(cmd, args);
    if (strcmp(sub, "ls") == 0)
        return exp_ls(cmd, args);
    if (strcmp(sub, "show") == 0)
        return exp_show(cmd, args, false, false);
    if (strcmp(sub, "export") == 0) {
        const char *format = cmd_opt(cmd, args, "format");
        if (format != NULL && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0)
            return cmd_usage_error(cmd, "--format %s: expected csv or json", format);
        bool json = format != NULL && strcmp(format, "json") == 0;
        return exp_show(cmd, args, !json, json);
    }
    if (strcmp(sub, "stop") == 0)
        return exp_control(cmd, args, "exp_stop", "stopped");
    if (strcmp(sub, "resume") == 0)
        return exp_control(cmd, args, "exp_resume", "resumed");
    return cmd_usage_error(cmd, "unknown subcommand '%s' (run, ls, show, export, stop, resume)",
                           sub);
}

const struct cmd_entry cmd_exp = {
    .name = "exp",
    .usage = "exp run FILE.yaml [--set KEY=VALUE …] [--dry-run] | exp ls [--json] | "
             "exp show NAME [--json] | exp export NAME [--format csv|json] | exp stop NAME | "
             "exp resume NAME",
    .summary = "experiments: YAML templates, sweeps, early stopping, the leaderboard",
    .opts = exp_opts,
    .min_args = 1,
    .max_args = 2,
    .exec = exp_exec,
};
