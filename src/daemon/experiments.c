/* Experiments in the daemon: creating an experiment's tasks in one transaction, reading what
 * running trials report (JSON lines in $DROVER_METRICS_FILE, and log lines matched by the
 * template's patterns), early stopping (exp/asha.c decides; here it is carried out: the trial is
 * marked stopped early and cancelled, which sends SIGTERM so it can checkpoint, and frees its
 * GPU for the next trial at once), and the circuit breaker (after N consecutive failed trials the
 * experiment's waiting tasks are held until `drover exp resume`). */
#include "daemon/daemon.h"
#include "daemon/ops.h"
#include "exp/asha.h"
#include "exp/request.h"
#include "exp/template.h"
#include "exp/validate.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXP_DEFAULT_BREAKER 2
#define EXP_READ_MAX (1 << 20) /* bytes of new output read per trial per poll */

struct exp_live {
    char *name;
    struct stopper *stopper;  /* NULL: no early stopping */
    char *metric;             /* the early-stopping metric */
    char *rung_unit;          /* the field that counts resource (default "epoch") */
    int max_rung;             /* the resource a trial ends at (early_stopping.max_rung); 0 = ? */
    json_t *patterns;         /* log-line patterns, or NULL */
    bool file_metrics;
    struct exp_live *next;
};

/* ---- the experiments' settings, loaded when first needed ----------------------------------- */

static const char *exp_str(json_t *obj, const char *key, const char *fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : fallback;
}

static double exp_num(json_t *obj, const char *key, double fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

/* Feeds the stopper what the experiment's trials reported before (a restarted daemon), in the
 * order it arrived, so that it reaches the decisions it reached then. */
static void exp_replay(struct daemon *d, struct exp_live *e)
{
    json_t *stream = store_exp_metric_stream(d->store, e->name, e->metric), *m;
    size_t i;
    struct stop_decision dec;
    json_array_foreach(stream, i, m)
        stopper_report(e->stopper, (int)json_integer_value(json_array_get(m, 0)),
                       (int)json_integer_value(json_array_get(m, 1)),
                       json_real_value(json_array_get(m, 2)), &dec);
    json_decref(stream);
}

static struct exp_live *exp_live_get(struct daemon *d, const char *name)
{
    for (struct exp_live *e = d->exps; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    json_t *row = store_exp_get(d->store, name);
    if (row == NULL)
        return NULL;
    json_t *spec = json_object_get(row, "spec"), *es = json_object_get(spec, "early_stopping");
    json_t *metrics = json_object_get(spec, "metrics");
    struct exp_live *e = xcalloc(1, sizeof *e);
    e->name = xstrdup(name);
    e->file_metrics = !json_is_false(json_object_get(metrics, "file"));
    json_t *patterns = json_object_get(metrics, "patterns");
    if (json_is_array(patterns) && json_array_size(patterns) > 0)
        e->patterns = json_incref(patterns);
    if (json_is_object(es) && exp_str(es, "metric", NULL) != NULL) {
        struct stop_config cfg = {
            .rule = strcmp(exp_str(es, "type", "asha"), "median") == 0 ? STOP_MEDIAN : STOP_ASHA,
            .maximize = strcmp(exp_str(es, "mode", "max"), "min") != 0,
            .grace = (int)exp_num(es, "grace", 1),
            .eta = exp_num(es, "reduction_factor", 3),
            .max_resource = (int)exp_num(es, "max_rung", 0),
        };
        if (cfg.grace < 1)
            cfg.grace = 1;
        if (!(cfg.eta > 1))
            cfg.eta = 3;
        e->stopper = stopper_new(&cfg);
        e->metric = xstrdup(exp_str(es, "metric", ""));
        e->rung_unit = xstrdup(exp_str(es, "rung_unit", "epoch"));
        e->max_rung = cfg.max_resource;
        exp_replay(d, e);
    }
    json_decref(row);
    e->next = d->exps;
    d->exps = e;
    return e;
}

void exp_free_all(struct daemon *d)
{
    while (d->exps) {
        struct exp_live *e = d->exps;
        d->exps = e->next;
        stopper_free(e->stopper);
        json_decref(e->patterns);
        free(e->name);
        free(e->metric);
        free(e->rung_unit);
        free(e);
    }
}

void exp_run_free(struct run *r)
{
    free(r->exp);
    r->exp = NULL;
}

/* ---- reading what trials report ------------------------------------------------------------ */

/* New complete lines of path from *off on (at most EXP_READ_MAX bytes); advances *off past
 * them. Returns a malloc'd NUL-terminated buffer, or NULL when there is nothing new. */
static char *exp_read_new(const char *path, long long *off)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > *off) {
        size_t want = (size_t)(st.st_size - *off);
        if (want > EXP_READ_MAX)
            want = EXP_READ_MAX;
        buf = xmalloc(want + 1);
        ssize_t n = pread(fd, buf, want, *off);
        if (n <= 0) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
            char *last = strrchr(buf, '\n');
            if (last == NULL && (size_t)n < EXP_READ_MAX) {
                free(buf); /* no complete line yet */
                buf = NULL;
            } else {
                size_t used = last ? (size_t)(last - buf) + 1 : (size_t)n;
                buf[used] = '\0';
                *off += (long long)used;
            }
        }
    }
    close(fd);
    return buf;
}

/* Records one value; for the early-stopping metric, asks the stopper and stops the trial when it
 * says so. Returns whether the trial was stopped. */
static bool exp_value(struct daemon *d, struct exp_live *e, struct run *r, int64_t step,
                      const char *name, double value)
{
    if (!isfinite(value))
        return false;
    store_metric_insert(d->store, r->task, step, name, value, daemon_now());
    if (e->stopper == NULL || strcmp(name, e->metric) != 0)
        return false;
    /* A trial already stopped (cancelled, its process not yet gone) is not decided again. */
    if (core_task_state(d->core, r->task) != TASK_RUNNING)
        return false;
    struct stop_decision dec;
    stopper_report(e->stopper, r->trial, (int)step, value, &dec);
    /* At the last rung the trial is finishing anyway: nothing to stop. */
    if (!dec.stop || (e->max_rung > 0 && step >= e->max_rung))
        return false;
    char why[160];
    snprintf(why, sizeof why, "rung %d (%s %lld): %s %.6g, the rung needed %.6g", dec.rung,
             e->rung_unit, (long long)step, name, value, dec.cutoff);
    store_trial_stopped(d->store, r->task, dec.rung, why);
    const char *err;
    core_cancel(d->core, r->task, daemon_now(), &d->acts, &err);
    fprintf(stderr, "drover daemon: experiment %s trial %d (task %lld): %s\n", e->name, r->trial,
            (long long)r->task, why);
    return true;
}

/* One JSON line: every numeric field but the step is a metric at that step. */
static bool exp_json_line(struct daemon *d, struct exp_live *e, struct run *r, const char *line,
                          int64_t *counter)
{
    json_t *obj = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return false;
    }
    const char *unit = e->rung_unit ? e->rung_unit : "epoch";
    json_t *s = json_object_get(obj, unit);
    if (!json_is_number(s))
        s = json_object_get(obj, "step");
    int64_t step = json_is_number(s) ? (int64_t)json_number_value(s) : ++*counter;
    const char *key;
    json_t *v;
    bool stopped = false;
    json_object_foreach(obj, key, v) {
        if (!json_is_number(v) || strcmp(key, "step") == 0 || strcmp(key, unit) == 0)
            continue;
        stopped |= exp_value(d, e, r, step, key, json_number_value(v));
    }
    json_decref(obj);
    return stopped;
}

/* Matches pattern ("loss: {value}", "{name}={value}") somewhere in line. */
static bool exp_match(const char *pattern, const char *line, char *name, size_t name_len,
                      double *value)
{
    const char *vp = strstr(pattern, "{value}"), *np = strstr(pattern, "{name}");
    if (vp == NULL)
        return false;
    if (np == NULL) {
        /* The name is the pattern's leading identifier. */
        size_t n = 0;
        while (pattern[n] && (isalnum((unsigned char)pattern[n]) || pattern[n] == '_') &&
               n + 1 < name_len)
            n++;
        memcpy(name, pattern, n);
        name[n] = '\0';
        size_t lit = (size_t)(vp - pattern);
        for (const char *at = line; *at; at++) {
            if (strncmp(at, pattern, lit) != 0)
                continue;
            char *end;
            *value = strtod(at + lit, &end);
            if (end != at + lit && n > 0)
                return true;
        }
        return false;
    }
    /* {name}SEP{value}: an identifier, the separator, a number. */
    if (np > vp)
        return false;
    const char *sep = np + 6;
    size_t seplen = (size_t)(vp - sep);
    for (const char *at = line; *at; at++) {
        if (!(isalpha((unsigned char)*at) || *at == '_') ||
            (at > line && (isalnum((unsigned char)at[-1]) || at[-1] == '_')))
            continue;
        size_t n = 0;
        while (isalnum((unsigned char)at[n]) || at[n] == '_' || at[n] == '.')
            n++;
        if (n == 0 || n >= name_len || strncmp(at + n, sep, seplen) != 0)
            continue;
        char *end;
        *value = strtod(at + n + seplen, &end);
        if (end == at + n + seplen)
            continue;
        memcpy(name, at, n);
        name[n] = '\0';
        return true;
    }
    return false;
}

static bool exp_log_lines(struct daemon *d, struct exp_live *e, struct run *r, char *text)
{
    bool stopped = false;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && !stopped;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *p;
        size_t i;
        json_array_foreach(e->patterns, i, p) {
            char name[64];
            double value;
            if (json_is_string(p) &&
                exp_match(json_string_value(p), line, name, sizeof name, &value)) {
                r->pattern_step++;
                stopped |= exp_value(d, e, r, r->pattern_step, name, value);
            }
        }
    }
    return stopped;
}

void exp_poll(struct daemon *d)
{
    bool begun = false;
    for (struct run *r = d->runs; r; r = r->next) {
        if (!r->exp_known) {
            r->exp_known = true;
            r->exp = store_trial_of_task(d->store, r->task, &r->trial);
        }
        struct exp_live *e = r->exp ? exp_live_get(d, r->exp) : NULL;
        if (e == NULL)
            continue;
        char *path = xasprintf("%s/metrics/%lld.jsonl", d->home, (long long)r->task);
        char *text = e->file_metrics ? exp_read_new(path, &r->metrics_off) : NULL;
        free(path);
        char *out = NULL;
        if (e->patterns) {
            path = xasprintf("%s/stdout", r->run_dir);
            out = exp_read_new(path, &r->stdout_off);
            free(path);
        }
        if (text == NULL && out == NULL)
            continue;
        if (!begun) {
            store_begin(d->store);
            begun = true;
        }
        char *save = NULL;
        bool stopped = false;
        for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line && !stopped;
             line = strtok_r(NULL, "\n", &save))
            stopped |= exp_json_line(d, e, r, line, &r->metrics_lines);
        if (out && !stopped)
            exp_log_lines(d, e, r, out);
        free(text);
        free(out);
    }
    if (!begun)
        return;
    /* Metrics and any early stops in one commit; the cancels are carried out after it. */
    if (daemon_apply_txn(d) < 0)
        event_base_loopexit(d->base, NULL);
}

/* ---- trials that end: the circuit breaker, the experiment's end ---------------------------- */

/* The experiment's tasks that have not ended (malloc'd *ids). */
static void exp_live_tasks(struct daemon *d, const char *name, int64_t **ids, size_t *n)
{
    json_t *trials = store_exp_trials(d->store, name, NULL, true, daemon_now()), *t;
    size_t i;
    *n = 0;
    *ids = xcalloc(json_array_size(trials) + 1, sizeof **ids);
    json_array_foreach(trials, i, t) {
        int64_t id = json_integer_value(json_object_get(t, "task"));
        int state = core_task_state(d->core, id);
        if (state >= 0 && !task_state_terminal((enum task_state)state))
            (*ids)[(*n)++] = id;
    }
    json_decref(trials);
}

/* ---- when every trial has ended: validation, the archive, the next round ------------------ */

static json_t *exp_insert(struct daemon *d, const char *name, const char *kind, json_t *tasks,
                          json_t *env, const char *workdir, long long parallel,
                          const struct exp_graph *checked, int64_t **ids_out);

/* Copies the regular files and directories under from into to (created). Returns 0 or -1. */
static int exp_copy_tree(const char *from, const char *to)
{
    DIR *dir = opendir(from);
    if (dir == NULL)
        return -1;
    if (mkdir(to, 0700) < 0 && errno != EEXIST) {
        closedir(dir);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *src = xasprintf("%s/%s", from, de->d_name), *dst = xasprintf("%s/%s", to, de->d_name);
        struct stat st;
        if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = exp_copy_tree(src, dst);
        } else if (S_ISREG(st.st_mode)) {
            int in = open(src, O_RDONLY | O_CLOEXEC);
            int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            char buf[65536];
            ssize_t n;
            while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t)n) != n)
                    rc = -1;
            if (in < 0 || out < 0)
                rc = -1;
            if (in >= 0)
                close(in);
            if (out >= 0 && close(out) < 0)
                rc = -1;
        }
        free(src);
        free(dst);
    }
    closedir(dir);
    return rc;
}

/* The best trial of name by metric (a borrowed row of *trials, which the caller frees), or NULL. */
static json_t *exp_best_trial(struct daemon *d, const char *name, const char *metric,
                              bool maximize, json_t **trials)
{
    json_t *t, *best = NULL;
    size_t i;
    *trials = store_exp_trials(d->store, name, metric, maximize, daemon_now());
    json_array_foreach(*trials, i, t) {
        json_t *v = json_object_get(t, "best");
        if (!json_is_number(v))
            continue;
        double x = json_number_value(v);
        double b = best ? json_number_value(json_object_get(best, "best")) : 0;
        if (best == NULL || (maximize ? x > b : x < b))
            best = t;
    }
    return best;
}

/* Checks the best trial against the validation block; fills why. Returns whether it passed. */
static bool exp_validate(struct daemon *d, json_t *val, const char *metric, bool maximize,
                         json_t *best, char *why, size_t len)
{
    double value = json_number_value(json_object_get(best, "best"));
    json_t *base = json_object_get(val, "baseline"), *imp = json_object_get(val, "improvement");
    double baseline;
    char from[96] = "";
    if (json_is_number(base)) {
        baseline = json_number_value(base);
    } else if (json_is_object(base) && exp_str(base, "experiment", NULL)) {
        const char *other = exp_str(base, "experiment", NULL);
        json_t *trials, *ob = exp_best_trial(d, other, metric, maximize, &trials);
        if (ob == NULL) {
            snprintf(why, len, "the baseline experiment %s has no %s", other, metric);
            json_decref(trials);
            return false;
        }
        baseline = json_number_value(json_object_get(ob, "best"));
        snprintf(from, sizeof from, " (the best of %s)", other);
        json_decref(trials);
    } else {
        snprintf(why, len, "no baseline to validate against");
        return false;
    }
    char need_text[48] = "";
    if (json_is_string(imp))
        snprintf(need_text, sizeof need_text, " %c %s", maximize ? '+' : '-',
                 json_string_value(imp));
    else if (json_is_number(imp))
        snprintf(need_text, sizeof need_text, " %c %g", maximize ? '+' : '-',
                 json_number_value(imp));
    double need = exp_validation_need(baseline, imp, maximize);
    bool ok = exp_validation_passes(value, need, maximize);
    snprintf(why, len, "best %s %.6g (trial %lld) %s baseline %.6g%s%s", metric, value,
             (long long)json_integer_value(json_object_get(best, "trial")),
             ok ? "meets" : "falls short of", baseline, from, need_text);
    if (!ok)
        return false;
    const char *epoch_limit = exp_str(val, "max_epoch_time", NULL);
    int64_t limit_ms;
    const char *bad;
    if (epoch_limit != NULL && parse_duration(epoch_limit, &limit_ms, &bad) == 0) {
        int64_t task_id = json_integer_value(json_object_get(best, "task")), run_ms = 0, epochs = 0;
        json_t *task = store_task_json(d->store, task_id), *a, *m;
        json_t *metrics = store_task_metrics(d->store, task_id);
        size_t k;
        json_array_foreach(json_object_get(task, "attempt_list"), k, a)
            if (json_is_integer(json_object_get(a, "end_time")))
                run_ms += json_integer_value(json_object_get(a, "end_time")) -
                          json_integer_value(json_object_get(a, "start_time"));
        json_array_foreach(metrics, k, m)
            epochs += strcmp(json_string_value(json_object_get(m, "name")), metric) == 0;
        ok = exp_epoch_time_ok(run_ms, epochs, limit_ms);
        size_t used = strlen(why);
        if (epochs > 0)
            snprintf(why + used, len - used, "; %.3gs an epoch, %s %s", run_ms / 1000.0 / epochs,
                     ok ? "within" : "over", epoch_limit);
        else
            snprintf(why + used, len - used, "; no epoch reported to check max_epoch_time");
        json_decref(task);
        json_decref(metrics);
        if (!ok)
            return false;
    }
    json_t *util = json_object_get(val, "min_gpu_util");
    if (json_is_number(util)) {
        json_t *task = store_task_json(d->store, json_integer_value(json_object_get(best, "task")));
        json_t *list = json_object_get(task, "attempt_list");
        json_t *mean = json_object_get(json_array_get(list, json_array_size(list) - 1),
                                       "mean_gpu_util");
        bool known = json_is_number(mean);
        ok = known && json_number_value(mean) / 100 >= json_number_value(util);
        size_t used = strlen(why);
        if (known)
            snprintf(why + used, len - used, "; GPU utilisation %.0f%% %s %.0f%%",
                     json_number_value(mean), ok ? ">=" : "<", json_number_value(util) * 100);
        else
            snprintf(why + used, len - used, "; GPU utilisation was not measured (%.0f%% needed)",
                     json_number_value(util) * 100);
        json_decref(task);
    }
    return ok;
}

/* Copies the best trial's checkpoint directory and a metadata file into archive/NAME/. */
static int exp_archive(struct daemon *d, const char *name, json_t *row, json_t *best,
                       const char *why, char **where)
{
    char *root = xasprintf("%s/archive", d->home), *dir = xasprintf("%s/%s", root, name);
    char *ckpt = xasprintf("%s/checkpoints/%lld", d->home,
                           (long long)json_integer_value(json_object_get(best, "task")));
    char *to = xasprintf("%s/checkpoint", dir), *meta = xasprintf("%s/metadata.json", dir);
    int rc = (mkdir(root, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST)
                 ? -1 : 0;
    struct stat st;
    if (rc == 0 && stat(ckpt, &st) == 0)
        rc = exp_copy_tree(ckpt, to);
    json_t *m = json_pack("{s:s,s:O,s:O,s:o,s:s}", "experiment", name, "spec",
                          json_object_get(row, "spec"), "best", best, "metrics",
                          store_task_metrics(d->store,
                                             json_integer_value(json_object_get(best, "task"))),
                          "validation", why);
    if (rc == 0 && json_dump_file(m, meta, JSON_INDENT(2)) < 0)
        rc = -1;
    json_decref(m);
    *where = dir;
    free(root);
    free(ckpt);
    free(to);
    free(meta);
    return rc;
}

/* A next round: the next configurations of the search space, as many as the first round had. */
static int exp_next_round(struct daemon *d, const char *name, json_t *row, json_t *trials,
                          char *why, size_t len)
{
    json_int_t next = json_integer_value(json_object_get(row, "next_trial"));
    json_int_t space = json_integer_value(json_object_get(row, "space"));
    json_t *spec = json_object_get(row, "spec"), *first = json_array_get(trials, 0);
    json_t *info = store_task_exec_info(d->store, json_integer_value(json_object_get(first, "task")));
    size_t n = (size_t)(space - next < next ? space - next : next);
    struct exp_task *tasks = NULL;
    size_t ntasks = 0;
    char *err = NULL;
    int rc = -1;
    if (info == NULL || exp_trials(spec, name, (size_t)next, n, (unsigned)json_integer_value(
                                       json_object_get(row, "seed")), &tasks, &ntasks, &err) < 0)
        goto out;
    json_t *list = json_array();
    for (size_t i = 0; i < ntasks; i++)
        json_array_append_new(list, exp_task_to_json(&tasks[i]));
    int64_t *ids = NULL;
    json_t *sweep = json_object_get(spec, "sweep");
    json_t *reply = exp_insert(d, name, "Experiment", list, json_object_get(info, "env"),
                               json_string_value(json_object_get(info, "workdir")),
                               (long long)exp_num(sweep, "parallel", 0), NULL, &ids);
    json_decref(list);
    free(ids);
    if (reply != NULL) {
        const char *msg = json_string_value(json_object_get(reply, "error"));
        err = xstrdup(msg ? msg : "cannot submit");
        json_decref(reply);
        goto out;
    }
    rc = store_exp_set_next(d->store, name, next + (json_int_t)ntasks);
    size_t used = strlen(why);
    snprintf(why + used, len - used, "; next round: trials %lld-%lld",
             (long long)next, (long long)(next + (json_int_t)ntasks - 1));
out:
    if (err != NULL) {
        size_t used = strlen(why);
        snprintf(why + used, len - used, "; the next round failed: %s", err);
        free(err);
    }
    for (size_t i = 0; i < ntasks; i++)
        exp_task_clear(&tasks[i]);
    free(tasks);
    json_decref(info);
    return rc;
}

/* ---- the generator: an external program proposes the next trials --------------------------- */

/* Starts the generator as a task of the experiment (durable, logged, retried like any task): its
 * stdin is the experiment's history as JSON, written to archive-like state first. */
static int exp_start_generator(struct daemon *d, const char *name, json_t *row, json_t *trials,
                               const char *why, char *out, size_t len)
{
    json_t *spec = json_object_get(row, "spec"), *cmd = json_object_get(json_object_get(spec, "generator"), "command");
    json_t *first = json_array_get(trials, 0);
    json_t *info = store_task_exec_info(d->store, json_integer_value(json_object_get(first, "task")));
    char *dir = xasprintf("%s/experiments", d->home), *path = NULL;
    int rc = -1;
    if (!json_is_array(cmd) || json_array_size(cmd) == 0 || info == NULL)
        goto out;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        goto out;
    path = xasprintf("%s/%s.history.%lld.json", dir, name,
                     (long long)json_integer_value(json_object_get(row, "next_trial")));
    json_t *history = json_pack("{s:s,s:O,s:O,s:s}", "experiment", name, "spec", spec,
                                "trials", trials, "why", why);
    int dumped = json_dump_file(history, path, JSON_INDENT(2));
    json_decref(history);
    if (dumped < 0)
        goto out;
    /* sh feeds the history on stdin; the generator's own argv follows untouched. */
    json_t *argv = json_pack("[s,s,s,s]", "sh", "-c", "exec \"$@\" < \"$DROVER_EXP_HISTORY\"",
                             "sh");
    json_array_extend(argv, cmd);
    json_t *task = json_pack("{s:s,s:i,s:b,s:o,s:o,s:{s:s}}", "name", "generator", "trial", -1,
                             "generator", 1, "params", json_object(), "command", argv, "env",
                             "DROVER_EXP_HISTORY", path);
    json_t *list = json_pack("[o]", task);
    int64_t *ids = NULL;
    json_t *reply = exp_insert(d, name, "Pipeline", list, json_object_get(info, "env"),
                               json_string_value(json_object_get(info, "workdir")), 0, NULL,
                               &ids);
    json_decref(list);
    if (reply == NULL) {
        snprintf(out, len, "%s; the generator (task %lld) proposes the next trials", why,
                 (long long)ids[0]);
        rc = 0;
    }
    json_decref(reply);
    free(ids);
out:
    json_decref(info);
    free(dir);
    free(path);
    return rc;
}

/* The generator task ended: its stdout is a JSON list of trials' parameters ({"path": value}),
 * or {"trials": [...]}; each becomes a trial. Nothing proposed ends the line. */
static void exp_generated(struct daemon *d, const char *name, json_t *row, int64_t task,
                          enum task_state state)
{
    char why[512];
    if (state != TASK_SUCCEEDED) {
        snprintf(why, sizeof why, "the generator (task %lld) %s", (long long)task,
                 task_state_name(state));
        store_exp_set_state(d->store, name, "failed", why);
        return;
    }
    json_t *info = store_task_json(d->store, task);
    const char *run_dir = json_string_value(json_object_get(info, "run_dir"));
    char *path = run_dir ? xasprintf("%s/stdout", run_dir) : NULL;
    json_error_t jerr;
    json_t *out = path ? json_load_file(path, JSON_DECODE_ANY, &jerr) : NULL;
    json_t *proposals = json_is_object(out) ? json_object_get(out, "trials") : out;
    json_t *spec = json_object_get(row, "spec");
    json_int_t next = json_integer_value(json_object_get(row, "next_trial"));
    json_t *list = json_array(), *p;
    size_t i;
    char *err = NULL;
    if (!json_is_array(proposals)) {
        snprintf(why, sizeof why, "the generator's output is not a JSON list of trials%s%s",
                 out == NULL && path ? ": " : "", out == NULL && path ? jerr.text : "");
        goto fail;
    }
    json_array_foreach(proposals, i, p) {
        struct exp_task t;
        if (!json_is_object(p) ||
            exp_trial_from(spec, name, (int)(next + (json_int_t)i), p, &t, &err) < 0) {
            snprintf(why, sizeof why, "the generator's trial %zu: %s", i,
                     err ? err : "not an object of parameters");
            free(err);
            goto fail;
        }
        json_array_append_new(list, exp_task_to_json(&t));
        exp_task_clear(&t);
    }
    if (json_array_size(list) == 0) {
        store_exp_set_state(d->store, name, "done", "the generator proposed no more trials");
        goto out;
    }
    int64_t *ids = NULL;
    json_t *exec = store_task_exec_info(d->store, task);
    json_t *env = json_deep_copy(json_object_get(exec, "env"));
    json_object_del(env, "DROVER_EXP_HISTORY");
    json_t *reply = exp_insert(d, name, "Experiment", list, env,
                               json_string_value(json_object_get(exec, "workdir")),
                               (long long)exp_num(json_object_get(spec, "sweep"), "parallel", 0),
                               NULL, &ids);
    json_decref(env);
    json_decref(exec);
    free(ids);
    if (reply != NULL) {
        snprintf(why, sizeof why, "the generator's trials: %s",
                 json_string_value(json_object_get(reply, "error")));
        json_decref(reply);
        goto fail;
    }
    store_exp_set_next(d->store, name, next + (json_int_t)json_array_size(list));
    snprintf(why, sizeof why, "the generator proposed %zu trials", json_array_size(list));
    store_exp_set_state(d->store, name, "running", why);
    goto out;
fail:
    store_exp_set_state(d->store, name, "failed", why);
out:
    fprintf(stderr, "drover daemon: experiment %s: %s\n", name, why);
    json_decref(list);
    json_decref(out);
    json_decref(info);
    free(path);
}

/* Every trial has ended. Without validation the experiment is done; with it: passed -> archive;
 * failed with configurations left -> the next round; failed with none left -> failed. */
static void exp_finish(struct daemon *d, const char *name, json_t *row)
{
    json_t *spec = json_object_get(row, "spec"), *val = json_object_get(spec, "validation");
    bool generator = json_is_object(json_object_get(spec, "generator"));
    if (!json_is_object(val)) {
        json_t *trials = store_exp_trials(d->store, name, NULL, true, daemon_now());
        char why[512];
        if (!generator || exp_start_generator(d, name, row, trials, "every trial ended", why,
                                              sizeof why) < 0)
            store_exp_set_state(d->store, name, generator ? "failed" : "done",
                                generator ? "cannot start the generator" : NULL);
        else
            store_exp_set_state(d->store, name, "running", why);
        json_decref(trials);
        return;
    }
    const char *metric = exp_str(val, "metric", NULL);
    bool maximize = strcmp(exp_str(val, "mode", exp_str(json_object_get(spec, "early_stopping"),
                                                         "mode", "max")), "min") != 0;
    json_t *trials, *best = exp_best_trial(d, name, metric ? metric : "", maximize, &trials);
    char why[512];
    if (metric == NULL || best == NULL) {
        store_exp_set_state(d->store, name, "failed", "no trial reported the validation metric");
        json_decref(trials);
        return;
    }
    if (exp_validate(d, val, metric, maximize, best, why, sizeof why)) {
        char *where = NULL;
        if (exp_archive(d, name, row, best, why, &where) == 0) {
            size_t used = strlen(why);
            snprintf(why + used, sizeof why - used, "; archived in %s", where);
            store_exp_set_state(d->store, name, "passed", why);
        } else {
            store_exp_set_state(d->store, name, "failed", "validation passed but archiving failed");
        }
        free(where);
    } else if (generator) {
        char done[512];
        if (exp_start_generator(d, name, row, trials, why, done, sizeof done) == 0)
            store_exp_set_state(d->store, name, "running", done);
        else
            store_exp_set_state(d->store, name, "failed", "cannot start the generator");
    } else if (json_integer_value(json_object_get(row, "next_trial")) <
               json_integer_value(json_object_get(row, "space"))) {
        if (exp_next_round(d, name, row, trials, why, sizeof why) == 0)
            store_exp_set_state(d->store, name, "running", why);
        else
            store_exp_set_state(d->store, name, "failed", why);
    } else {
        size_t used = strlen(why);
        snprintf(why + used, sizeof why - used, "; no configurations left");
        store_exp_set_state(d->store, name, "failed", why);
    }
    fprintf(stderr, "drover daemon: experiment %s: %s\n", name, why);
    json_decref(trials);
}

void exp_task_ended(struct daemon *d, int64_t task, enum task_state state)
{
    int trial;
    char *name = store_trial_of_task(d->store, task, &trial);
    if (name == NULL)
        return;
    json_t *row = store_exp_get(d->store, name);
    const char *exp_state = json_string_value(json_object_get(row, "state"));
    if (trial < 0) { /* the generator */
        if (exp_state && strcmp(exp_state, "running") == 0)
            exp_generated(d, name, row, task, state);
        json_decref(row);
        free(name);
        return;
    }
    bool failed = state == TASK_FAILED || state == TASK_TIMED_OUT;
    if (failed || state == TASK_SUCCEEDED) {
        int n = store_exp_failures(d->store, name, failed);
        json_t *cb = json_object_get(json_object_get(row, "spec"), "circuit_breaker");
        int limit = (int)exp_num(cb, "failures", EXP_DEFAULT_BREAKER);
        if (failed && limit > 0 && n >= limit && exp_state && strcmp(exp_state, "running") == 0) {
            char why[200];
            snprintf(why, sizeof why, "paused after %d consecutive trial failures (the last: task"
                                      " %lld, %s); drover exp resume %s", n, (long long)task,
                     task_state_name(state), name);
            store_exp_set_state(d->store, name, "paused", why);
            int64_t *ids;
            size_t nids;
            exp_live_tasks(d, name, &ids, &nids);
            for (size_t i = 0; i < nids; i++) {
                const char *err;
                int st = core_task_state(d->core, ids[i]);
                if (st == TASK_QUEUED || st == TASK_PENDING || st == TASK_RETRYING)
                    core_hold(d->core, ids[i], daemon_now(), &d->acts, &err);
            }
            free(ids);
            fprintf(stderr, "drover daemon: experiment %s %s\n", name, why);
        }
    }
    int64_t *ids;
    size_t nids;
    exp_live_tasks(d, name, &ids, &nids);
    free(ids);
    if (nids == 0 && exp_state && strcmp(exp_state, "running") == 0)
        exp_finish(d, name, row);
    json_decref(row);
    free(name);
}

bool exp_trial_ending(struct daemon *d)
{
    for (size_t i = 0; i < d->acts.n; i++) {
        const struct core_action *a = &d->acts.v[i];
        int trial;
        if (a->type != CORE_ACT_STATE || !task_state_terminal(a->state))
            continue;
        char *name = store_trial_of_task(d->store, a->task, &trial);
        bool is_trial = name != NULL;
        free(name);
        if (is_trial)
            return true;
    }
    return false;
}

/* ---- operations ---------------------------------------------------------------------------- */

uint64_t daemon_gpu_types_matching(const struct daemon *d, const char *pattern)
{
    uint64_t mask = 0;
    for (int t = 0; t < d->ngpu_types; t++)
        if (strcasestr(d->gpu_type_names[t], pattern) != NULL)
            mask |= 1ULL << t;
    return mask;
}

/* Checks one task of an exp_run request and fills rec; returns NULL or an error reply. */
static json_t *exp_task_record(struct daemon *d, json_t *task, json_t *base_env,
                               const char *workdir, struct task_record *rec)
{
    json_t *err = NULL, *cmd = json_object_get(task, "command"), *env = json_object_get(task, "env");
    long long v[6];
    memset(rec, 0, sizeof *rec);
    if (!json_is_string(json_object_get(task, "name")) || !json_is_array(cmd) ||
        json_array_size(cmd) == 0 || (env && !json_is_object(env)))
        return reply_error(2, "each task needs a name, a command and an env object");
    size_t i;
    json_t *a;
    json_array_foreach(cmd, i, a) {
        if (!json_is_string(a) || (i == 0 && json_string_length(a) == 0))
            return reply_error(2, "a task's command must be an array of strings");
    }
    if (ops_get_int(task, "gpus", 0, CORE_MAX_NODE_GPUS, 0, &v[0], &err) < 0 ||
        ops_get_int(task, "gpu_mem", 0, INT64_MAX, 0, &v[1], &err) < 0 ||
        ops_get_int(task, "cpus", 0, 1000000, 0, &v[2], &err) < 0 ||
        ops_get_int(task, "mem", 0, INT64_MAX, 0, &v[3], &err) < 0 ||
        ops_get_int(task, "timeout_ms", 0, INT64_MAX / 4, 0, &v[4], &err) < 0 ||
        ops_get_int(task, "retries", 0, 1000, 0, &v[5], &err) < 0)
        return err;
    struct core_task_spec *sp = &rec->spec;
    sp->req = (struct core_request){.gpus = (int)v[0], .gpu_mem = (uint64_t)v[1],
                                    .cpus = (int)v[2], .mem = (uint64_t)v[3],
                                    .time_limit = v[4]};
    if (sp->req.gpu_mem > 0 && sp->req.gpus == 0)
        sp->req.gpus = 1;
    const char *type = exp_str(task, "gpu_type", NULL);
    if (type != NULL) {
        sp->req.gpu_types = daemon_gpu_types_matching(d, type);
        if (sp->req.gpu_types == 0)
            return reply_error(2, "task %s: no GPU here matches gpu_type '%s'",
                               json_string_value(json_object_get(task, "name")), type);
    }
    sp->max_retries = (int)v[5];
    json_t *backoff = json_object_get(task, "backoff");
    json_array_foreach(backoff, i, a) {
        if (json_is_integer(a) && json_integer_value(a) >= 0 && sp->nbackoff < CORE_MAX_BACKOFF)
            sp->backoff[sp->nbackoff++] = json_integer_value(a);
    }
    const char *why;
    if (core_check_request(d->core, &sp->req, &why) < 0)
        return reply_error(2, "task %s: %s", json_string_value(json_object_get(task, "name")),
                           why);
    json_t *merged = json_deep_copy(base_env);
    const char *k;
    json_object_foreach(env, k, a) {
        if (!json_is_string(a))
            goto badenv;
        json_object_set(merged, k, a);
    }
    rec->name = json_string_value(json_object_get(task, "name"));
    rec->command = cmd;
    rec->workdir = workdir;
    rec->env = merged;
    rec->array_index = -1;
    if (sp->req.gpus > 0 && sp->req.gpu_mem > 0)
        rec->claim_source = "declared";
    return NULL;
badenv:
    json_decref(merged);
    return reply_error(2, "a task's env must map names to strings");
}

/* Creates the tasks of an exp_run request (or of a next round, or a generator's) inside the
 * caller's transaction: store rows, trial rows and core's tasks, each after the tasks it needs.
 * checked: what exp_request_check() made of the request, or NULL to check the tasks here
 * (exp/request.c: the daemon trusts no task it did not check). Returns NULL, or an error reply
 * (the caller rolls back). *ids (malloc'd) gets the new ids in request order. */
static json_t *exp_insert(struct daemon *d, const char *name, const char *kind, json_t *tasks,
                          json_t *env, const char *workdir, long long parallel,
                          const struct exp_graph *checked, int64_t **ids_out)
{
    size_t n = json_array_size(tasks), most = 0;
    bool pipeline = strcmp(kind, "Pipeline") == 0;
    bool sweep = !pipeline && parallel > 0 && n > 1;
    struct exp_graph own = {0};
    const struct exp_graph *g = checked;
    char *why = NULL;
    *ids_out = NULL;
    if (g == NULL) {
        if (exp_tasks_check(tasks, pipeline, env, &own, &why) < 0) {
            json_t *reply = reply_error(2, "%s", why);
            free(why);
            return reply;
        }
        g = &own;
    }
    for (size_t i = 0; i < n; i++)
        if (g->first[i + 1] - g->first[i] > most)
            most = g->first[i + 1] - g->first[i];
    struct task_record *recs = xcalloc(n + 1, sizeof *recs);
    int64_t *ids = xcalloc(n + 1, sizeof *ids);
    struct core_dep *deps = xcalloc(most + 1, sizeof *deps); /* one task's, refilled for each */
    json_t *reply = NULL, *no_params = json_object();
    core_time now = daemon_now();
    for (size_t i = 0; i < n && reply == NULL; i++)
        reply = exp_task_record(d, json_array_get(tasks, i), env, workdir, &recs[i]);
    for (size_t pass = 0; pass < 2 && reply == NULL; pass++) {
        /* Pass 0: the store (the ids come from it); pass 1: core, once the array is known. */
        for (size_t o = 0; o < n && reply == NULL; o++) {
            size_t i = g->order[o], nd_count = 0;
            json_t *task = json_array_get(tasks, i);
            for (size_t k = g->first[i]; k < g->first[i + 1]; k++)
                deps[nd_count++] = (struct core_dep){ids[g->need[k]], DEP_AFTER_OK, -1};
            recs[i].spec.deps = deps;
            recs[i].spec.ndeps = nd_count;
            recs[i].spec.submit_time = now;
            if (pass == 1) {
                recs[i].spec.array_id = sweep ? ids[g->order[0]] : 0;
                if (core_submit(d->core, &recs[i].spec, now, &d->acts) < 0)
                    fatalx("core refused experiment task %lld", (long long)ids[i]);
                continue;
            }
            recs[i].array_index = sweep ? (int64_t)i : -1;
            recs[i].spec.array_limit = sweep ? (int)parallel : 0;
            json_t *trial = json_object_get(task, "trial"), *params = json_object_get(task, "params");
            if (store_insert_task(d->store, &recs[i]) < 0 ||
                store_trial_insert(d->store, name,
                                   json_is_true(json_object_get(task, "generator")) ? -1
                                   : json_is_integer(trial) && json_integer_value(trial) >= 0
                                       ? (int)json_integer_value(trial)
                                       : (int)i,
                                   ids[i] = recs[i].spec.id, pipeline ? recs[i].name : NULL,
                                   json_is_object(params) ? params : no_params) < 0)
                reply = reply_error(1, "cannot store the experiment: %s", store_error(d->store));
        }
        if (pass == 0 && reply == NULL && sweep &&
            store_set_array(d->store, ids[g->order[0]], ids[g->order[n - 1]]) < 0)
            reply = reply_error(1, "cannot store the experiment: %s", store_error(d->store));
    }
    for (size_t i = 0; i < n; i++)
        json_decref(recs[i].env);
    free(recs);
    free(deps);
    json_decref(no_params);
    exp_graph_free(&own);
    if (reply != NULL) {
        free(ids);
        ids = NULL;
    }
    *ids_out = ids;
    return reply;
}

json_t *op_exp_run(struct daemon *d, struct conn *c, json_t *req)
{
    const char *name = exp_str(req, "name", NULL), *kind = exp_str(req, "kind", NULL);
    const char *workdir = exp_str(req, "workdir", NULL);
    json_t *spec = json_object_get(req, "spec"), *tasks = json_object_get(req, "tasks");
    json_t *env = json_object_get(req, "env"), *reply = NULL;
    long long parallel, space, seed;
    struct exp_graph graph;
    char *why;
    /* The checks the CLI made, made again: a client may send anything (exp/request.c). */
    if (exp_request_check(req, &graph, &why) < 0) {
        reply = reply_error(2, "%s", why);
        free(why);
        return reply;
    }
    if (ops_get_int(req, "parallel", 0, 1000000, 0, &parallel, &reply) < 0 ||
        ops_get_int(req, "space", 0, INT64_MAX, 0, &space, &reply) < 0 ||
        ops_get_int(req, "seed", 0, UINT32_MAX, 0, &seed, &reply) < 0)
        goto out;
    if (store_exp_exists(d->store, name)) {
        reply = reply_error(2, "experiment %s exists already (give another metadata.name, or"
                               " --set metadata.name=…)", name);
        goto out;
    }
    size_t n = json_array_size(tasks);
    int64_t *ids = NULL;
    store_begin(d->store);
    if (store_exp_insert(d->store, name, kind, spec, seed, (int64_t)n, space, daemon_now()) < 0)
        reply = reply_error(1, "cannot store the experiment: %s", store_error(d->store));
    else
        reply = exp_insert(d, name, kind, tasks, env, workdir, parallel, &graph, &ids);
    if (reply != NULL) {
        store_rollback(d->store);
        goto out;
    }
    core_schedule(d->core, daemon_now(), &d->acts);
    if (daemon_apply_txn(d) < 0) {
        free(ids);
        d->stopping = true;
        reply = reply_error(1, "cannot confirm that the experiment was stored: %s (see drover"
                               " exp ls once the daemon has restarted)", store_error(d->store));
        goto out;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_integer(ids[i]));
    free(ids);
    reply = json_pack("{s:b,s:s,s:o}", "ok", 1, "name", name, "ids", list);
out:
    exp_graph_free(&graph);
    return reply;
}

json_t *op_exp_ls(struct daemon *d, struct conn *c, json_t *req)
{
    return json_pack("{s:b,s:o}", "ok", 1, "experiments", store_exp_list(d->store));
}

json_t *op_exp_show(struct daemon *d, struct conn *c, json_t *req)
{
    const char *name = exp_str(req, "name", NULL);
    if (name == NULL)
        return reply_error(2, "exp_show needs a name");
    json_t *e = store_exp_get(d->store, name);
    if (e == NULL)
        return reply_error(2, "no experiment %s", name);
    json_t *spec = json_object_get(e, "spec");
    json_t *es = json_object_get(spec, "early_stopping"), *val = json_object_get(spec, "validation");
    const char *metric = exp_str(es, "metric", exp_str(val, "metric", NULL));
    const char *mode = exp_str(es, "metric", NULL) ? exp_str(es, "mode", "max")
                                                   : exp_str(val, "mode", "max");
    bool maximize = strcmp(mode, "min") != 0;
    json_object_set_new(e, "metric", metric ? json_string(metric) : json_null());
    json_object_set_new(e, "mode", json_string(maximize ? "max" : "min"));
    json_object_set_new(e, "trials", store_exp_trials(d->store, name, metric, maximize,
                                                      daemon_now()));
    json_object_set_new(e, "ok", json_true());
    return e;
}

static json_t *exp_each_task(struct daemon *d, json_t *req, bool stop)
{
    const char *name = exp_str(req, "name", NULL);
    if (name == NULL)
        return reply_error(2, "needs an experiment name");
    json_t *e = store_exp_get(d->store, name);
    if (e == NULL)
        return reply_error(2, "no experiment %s", name);
    json_decref(e);
    int64_t *ids;
    size_t n, changed = 0;
    exp_live_tasks(d, name, &ids, &n);
    store_begin(d->store);
    for (size_t i = 0; i < n; i++) {
        const char *err;
        int st = core_task_state(d->core, ids[i]);
        int rc = stop ? core_cancel(d->core, ids[i], daemon_now(), &d->acts, &err)
             : st == TASK_HELD ? core_release(d->core, ids[i], daemon_now(), &d->acts, &err)
                               : -1;
        changed += rc == 0;
    }
    free(ids);
    if (store_exp_set_state(d->store, name, stop ? "stopped" : "running",
                            stop ? "stopped by user" : NULL) < 0 ||
        (!stop && store_exp_failures(d->store, name, false) < 0)) {
        store_rollback(d->store);
        return reply_error(1, "cannot record it: %s", store_error(d->store));
    }
    core_schedule(d->core, daemon_now(), &d->acts);
    if (daemon_apply_txn(d) < 0)
        return reply_error(1, "the daemon could not commit it");
    return json_pack("{s:b,s:I}", "ok", 1, "tasks", (json_int_t)changed);
}

json_t *op_exp_stop(struct daemon *d, struct conn *c, json_t *req)
{
    return exp_each_task(d, req, true);
}

json_t *op_exp_resume(struct daemon *d, struct conn *c, json_t *req)
{
    return exp_each_task(d, req, false);
}
