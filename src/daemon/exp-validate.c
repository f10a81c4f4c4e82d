/* When every trial has ended: the best trial against the validation block (exp/validate.c does
 * the arithmetic), and the winner's archive. */
#include "daemon/exp-internal.h"
#include "exp/validate.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Appends to the malloc'd string *s. */
static void exp_append(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void exp_append(char **s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *more = xvasprintf(fmt, ap);
    va_end(ap);
    char *joined = xasprintf("%s%s", *s, more);
    free(more);
    free(*s);
    *s = joined;
}

/* The baseline the best must beat: a value, or the best of another experiment. Returns 0, or -1
 * with *verdict saying why there is none. */
static int exp_baseline(struct daemon *d, const struct exp_settings *s, double *baseline,
                        char *from, size_t len, char **verdict)
{
    if (s->baseline_is_value) {
        *baseline = s->baseline;
        return 0;
    }
    if (s->baseline_experiment == NULL) {
        *verdict = xstrdup("no baseline to validate against");
        return -1;
    }
    json_t *trials, *other = exp_best_trial(d, s->baseline_experiment, s->val_metric,
                                            s->val_maximize, &trials);
    int rc = 0;
    if (other == NULL) {
        *verdict = xasprintf("the baseline experiment %s has no %s", s->baseline_experiment,
                             s->val_metric);
        rc = -1;
    } else {
        *baseline = json_number_value(json_object_get(other, "best"));
        snprintf(from, len, " (the best of %s)", s->baseline_experiment);
    }
    json_decref(trials);
    return rc;
}

/* validation.max_epoch_time: the best trial's run time over the epochs it reported. */
static bool exp_epoch_time(struct daemon *d, const struct exp_settings *s, json_t *best,
                           char **verdict)
{
    int64_t task_id = json_integer_value(json_object_get(best, "task")), run_ms = 0, epochs = 0;
    json_t *task = store_task_json(d->store, task_id), *a, *m;
    json_t *metrics = store_task_metrics(d->store, task_id);
    size_t k;
    json_array_foreach(json_object_get(task, "attempt_list"), k, a)
        if (json_is_integer(json_object_get(a, "end_time")))
            run_ms += json_integer_value(json_object_get(a, "end_time")) -
                      json_integer_value(json_object_get(a, "start_time"));
    json_array_foreach(metrics, k, m)
        epochs += strcmp(json_string_value(json_object_get(m, "name")), s->val_metric) == 0;
    bool ok = exp_epoch_time_ok(run_ms, epochs, s->max_epoch_ms);
    if (epochs > 0)
        exp_append(verdict, "; %.3gs an epoch, %s %s", run_ms / 1000.0 / epochs,
                   ok ? "within" : "over", s->max_epoch_time);
    else
        exp_append(verdict, "; no epoch reported to check max_epoch_time");
    json_decref(task);
    json_decref(metrics);
    return ok;
}

/* validation.min_gpu_util: the best trial's last attempt's measured mean. */
static bool exp_gpu_util(struct daemon *d, const struct exp_settings *s, json_t *best,
                         char **verdict)
{
    json_t *task = store_task_json(d->store, json_integer_value(json_object_get(best, "task")));
    json_t *list = json_object_get(task, "attempt_list");
    json_t *mean = json_object_get(json_array_get(list, json_array_size(list) - 1),
                                   "mean_gpu_util");
    bool known = json_is_number(mean);
    bool ok = known && json_number_value(mean) / 100 >= s->min_gpu_util;
    if (known)
        exp_append(verdict, "; GPU utilisation %.0f%% %s %.0f%%", json_number_value(mean),
                   ok ? ">=" : "<", s->min_gpu_util * 100);
    else
        exp_append(verdict, "; GPU utilisation was not measured (%.0f%% needed)",
                   s->min_gpu_util * 100);
    json_decref(task);
    return ok;
}

int exp_validate(struct daemon *d, struct exp_live *e, char **verdict)
{
    const struct exp_settings *s = &e->settings;
    json_t *trials, *best = s->val_metric ? exp_best_trial(d, e->name, s->val_metric,
                                                           s->val_maximize, &trials) : NULL;
    double baseline;
    char from[96] = "", need_text[48] = "";
    if (best == NULL) {
        if (s->val_metric != NULL)
            json_decref(trials);
        *verdict = xstrdup("no trial reported the validation metric");
        return -1;
    }
    double value = json_number_value(json_object_get(best, "best"));
    if (exp_baseline(d, s, &baseline, from, sizeof from, verdict) < 0) {
        json_decref(trials);
        return 0;
    }
    if (json_is_string(s->improvement))
        snprintf(need_text, sizeof need_text, " %c %s", s->val_maximize ? '+' : '-',
                 json_string_value(s->improvement));
    else if (json_is_number(s->improvement))
        snprintf(need_text, sizeof need_text, " %c %g", s->val_maximize ? '+' : '-',
                 json_number_value(s->improvement));
    double need = exp_validation_need(baseline, s->improvement, s->val_maximize);
    bool ok = exp_validation_passes(value, need, s->val_maximize);
    *verdict = xasprintf("best %s %.6g (trial %lld) %s baseline %.6g%s%s", s->val_metric, value,
                         (long long)json_integer_value(json_object_get(best, "trial")),
                         ok ? "meets" : "falls short of", baseline, from, need_text);
    if (ok && s->max_epoch_ms > 0)
        ok = exp_epoch_time(d, s, best, verdict);
    if (ok && s->min_gpu_util >= 0)
        ok = exp_gpu_util(d, s, best, verdict);
    json_decref(trials);
    return ok ? 1 : 0;
}

/* Copies the regular files and directories under from into to (created). Returns 0 or -1. */
static int exp_copy_tree(const char *from, const char *to)
{
    /* A checkpoint tree is its owner's: never follow a link in it (docs/ARCHITECTURE.md). */
    int from_fd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dir = from_fd >= 0 ? fdopendir(from_fd) : NULL;
    if (dir == NULL) {
        if (from_fd >= 0)
            close(from_fd);
        return -1;
    }
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
            int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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

int exp_archive(struct daemon *d, struct exp_live *e, json_t *row, char *reason, size_t len,
                char **why)
{
    const struct exp_settings *s = &e->settings;
    json_t *trials, *best = exp_best_trial(d, e->name, s->val_metric, s->val_maximize, &trials);
    int64_t task = json_integer_value(json_object_get(best, "task"));
    char *root = xasprintf("%s/archive", d->home), *dir = xasprintf("%s/%s", root, e->name);
    char *ckpt = xasprintf("%s/checkpoints/%lld", d->home, (long long)task);
    char *to = xasprintf("%s/checkpoint", dir), *meta = xasprintf("%s/metadata.json", dir);
    int rc = (mkdir(root, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST)
                 ? -1 : 0;
    struct stat st;
    if (rc == 0 && stat(ckpt, &st) == 0)
        rc = exp_copy_tree(ckpt, to);
    json_t *m = json_pack("{s:s,s:O,s:O,s:o,s:s}", "experiment", e->name, "spec",
                          json_object_get(row, "spec"), "best", best ? best : json_null(),
                          "metrics", store_task_metrics(d->store, task), "validation", reason);
    if (rc == 0 && json_dump_file(m, meta, JSON_INDENT(2)) < 0)
        rc = -1;
    json_decref(m);
    if (rc == 0) {
        size_t used = strlen(reason);
        snprintf(reason + used, len - used, "; archived in %s", dir);
    } else {
        *why = xasprintf("validation passed but archiving into %s failed: %s", dir,
                         strerror(errno));
    }
    json_decref(trials);
    free(root);
    free(dir);
    free(ckpt);
    free(to);
    free(meta);
    return rc;
}
