/* /api/v1/experiments: the socket's exp_ls, exp_show (with each trial's metric series),
 * exp_run (from a template's YAML in the body, with the checks `drover exp run` makes:
 * exp_load_text, then exp_request_check), exp_stop and exp_resume, run as the caller. */
#include "daemon/api-routes.h"
#include "exp/request.h"
#include "exp/template.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Points of one metric of one trial in a series: beyond it, every k-th is kept (and the last). */
#define API_SERIES_POINTS 500

/* `drover exp ls --json`: the list alone. */
void api_exp_list(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_view(r, who, "exp_ls", "experiments");
}

/* {"loss": [[step, value], …], …} of a task, each at most API_SERIES_POINTS points. */
static json_t *api_exp_task_series(struct store *st, int64_t task)
{
    json_t *rows = store_task_metrics(st, task), *row, *by_name = json_object(), *list;
    const char *name;
    size_t i;
    json_array_foreach(rows, i, row) {
        name = json_string_value(json_object_get(row, "name"));
        if (name == NULL)
            continue;
        if ((list = json_object_get(by_name, name)) == NULL)
            json_object_set_new(by_name, name, list = json_array());
        json_array_append_new(list, json_pack("[O,O]", json_object_get(row, "step"),
                                              json_object_get(row, "value")));
    }
    json_decref(rows);
    json_object_foreach(by_name, name, list) {
        size_t n = json_array_size(list);
        if (n <= API_SERIES_POINTS)
            continue;
        size_t k = (n + API_SERIES_POINTS - 1) / API_SERIES_POINTS;
        json_t *thin = json_array();
        for (size_t j = 0; j < n; j += k)
            json_array_append(thin, json_array_get(list, j));
        if ((n - 1) % k != 0)
            json_array_append(thin, json_array_get(list, n - 1));
        json_object_set_new(by_name, name, thin);
    }
    return by_name;
}

void api_exp_show(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    json_t *reply = api_call(r, who, json_pack("{s:s,s:s}", "op", "exp_show", "name", p->name));
    if (reply == NULL)
        return;
    json_t *trials = json_object_get(reply, "trials"), *t, *series = json_array();
    double hours = 0;
    size_t i;
    json_array_foreach(trials, i, t) {
        json_t *task = json_object_get(t, "task");
        hours += json_number_value(json_object_get(t, "gpu_hours"));
        if (!json_is_integer(task))
            continue;
        json_array_append_new(series, json_pack("{s:O,s:O,s:o}", "trial",
                                                json_object_get(t, "trial"), "task", task,
                                                "metrics", api_exp_task_series(
                                                    r->d->store, json_integer_value(task))));
    }
    json_object_set_new(reply, "series", series);
    if (json_object_get(reply, "gpu_hours") == NULL)
        json_object_set_new(reply, "gpu_hours", json_real(hours));
    http_respond_json(r, 200, reply, NULL);
}

/* The exp_run request for def, as `drover exp run` makes it (cli/cmd-exp.c), in workdir with
 * the basic environment of who. */
static json_t *api_exp_request(const struct exp_def *def, unsigned seed, const char *workdir,
                               const struct peer *who, const struct passwd *pw)
{
    json_t *tasks = json_array();
    for (size_t i = 0; i < def->ntasks; i++)
        json_array_append_new(tasks, exp_task_to_json(&def->tasks[i]));
    json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s}", "HOME", pw ? pw->pw_dir : "/", "USER",
                            who->name, "LOGNAME", who->name, "SHELL",
                            pw && pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh",
                            "PATH", "/usr/local/bin:/usr/bin:/bin");
    return json_pack("{s:s,s:s,s:s,s:O,s:o,s:i,s:I,s:I,s:o,s:s}", "op", "exp_run", "name",
                     def->name, "kind", def->kind == EXP_PIPELINE ? "Pipeline" : "Experiment",
                     "spec", def->spec, "tasks", tasks, "parallel", def->parallel, "space",
                     (json_int_t)def->space, "seed", (json_int_t)seed, "env", env, "workdir",
                     workdir);
}

json_t *api_exp_request_text(const char *text, size_t len, unsigned seed, const char *workdir,
                             const struct peer *who, struct exp_def **def, char **err)
{
    *def = NULL;
    if (exp_load_text("body", text, len, NULL, 0, seed, def, err) < 0)
        return NULL;
    json_t *req = api_exp_request(*def, seed, workdir, who, getpwuid(who->uid));
    if (exp_request_check(req, NULL, err) < 0) {
        json_decref(req);
        exp_def_free(*def);
        *def = NULL;
        return NULL;
    }
    return req;
}

void api_exp_run(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    long long seed;
    char *workdir = http_query(r, "workdir"), *err;
    struct exp_def *def;
    struct passwd *pw = getpwuid(who->peer.uid);
    if (api_query_int(r, "seed", 0, 0xffffffffLL, (long long)(unsigned)time(NULL), &seed) < 0)
        goto out;
    if (workdir == NULL)
        workdir = xstrdup(pw ? pw->pw_dir : "/");
    if (workdir[0] != '/') {
        api_error(r, 400, "workdir", "'workdir' must be an absolute path");
        goto out;
    }
    if (r->body_len == 0 || strlen(r->body) != r->body_len) {
        api_error(r, 400, NULL, "expected a template (YAML) in the body");
        goto out;
    }
    json_t *req = api_exp_request_text(r->body, r->body_len, (unsigned)seed, workdir,
                                       &who->peer, &def, &err);
    if (req == NULL) {
        api_error(r, 400, NULL, "%s", err);
        free(err);
        goto out;
    }
    json_t *reply = api_call(r, who, req);
    if (reply != NULL)
        http_respond_json(r, 201, json_pack("{s:s,s:O}", "name", def->name, "ids",
                                            json_object_get(reply, "ids")), NULL);
    json_decref(reply);
    exp_def_free(def);
out:
    free(workdir);
}

/* exp_stop, exp_resume: the op, then the experiment as it is now. */
static void api_exp_control(struct http_req *r, const struct api_caller *who, const char *name,
                            const char *op)
{
    json_t *reply = api_call(r, who, json_pack("{s:s,s:s}", "op", op, "name", name));
    if (reply == NULL)
        return;
    json_object_set_new(reply, "name", json_string(name));
    http_respond_json(r, 200, reply, NULL);
}

void api_exp_stop(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_exp_control(r, who, p->name, "exp_stop");
}

void api_exp_resume(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_exp_control(r, who, p->name, "exp_resume");
}
