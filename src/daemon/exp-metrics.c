/* What running trials report — JSON lines in $DROVER_METRICS_FILE, and log lines the template's
 * patterns match (exp/metricline.c reads them) — stored per trial and step, and early stopping
 * carried out: exp/asha.c decides, and the trial is marked stopped early and cancelled, which
 * sends SIGTERM so it can checkpoint and frees its GPU for the next trial at once. */
#include "daemon/exp-internal.h"
#include "exp/metricline.h"
#include "util/ratelog.h"
#include "util/xalloc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXP_READ_MAX (1 << 20) /* bytes of new output read per trial per poll */

/* ---- the experiments in memory -------------------------------------------------------------- */

/* Feeds a new stopper what the experiment's trials reported before (a restarted daemon, a poll
 * rolled back), in the order it arrived, so that it reaches the decisions it reached then. */
static void exp_replay(struct daemon *d, struct exp_live *e)
{
    json_t *stream = store_exp_metric_stream(d->store, e->name, e->settings.stop_metric), *m;
    size_t i;
    struct stop_decision dec;
    json_array_foreach(stream, i, m)
        stopper_report(e->stopper, (int)json_integer_value(json_array_get(m, 0)),
                       (int)json_integer_value(json_array_get(m, 1)),
                       json_real_value(json_array_get(m, 2)), &dec);
    json_decref(stream);
}

struct exp_live *exp_live_get(struct daemon *d, const char *name)
{
    for (struct exp_live *e = d->exps; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    json_t *row = store_exp_get(d->store, name);
    if (row == NULL)
        return NULL;
    struct exp_live *e = xcalloc(1, sizeof *e);
    e->name = xstrdup(name);
    e->pipeline = strcmp(json_string_value(json_object_get(row, "kind")), "Pipeline") == 0;
    exp_settings_decode(json_object_get(row, "spec"), &e->settings);
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
        exp_settings_free(&e->settings);
        free(e->name);
        free(e);
    }
}

void exp_run_free(struct run *r)
{
    free(r->exp);
    r->exp = NULL;
}

/* ---- reading what trials report --------------------------------------------------------- */

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
        char *last = NULL;
        if (n > 0) {
            buf[n] = '\0';
            last = strrchr(buf, '\n');
        }
        if (n <= 0 || (last == NULL && (size_t)n < EXP_READ_MAX)) {
            free(buf); /* nothing, or no complete line yet */
            buf = NULL;
        } else {
            size_t used = last ? (size_t)(last - buf) + 1 : (size_t)n;
            buf[used] = '\0';
            *off += (long long)used;
        }
    }
    close(fd);
    return buf;
}

struct exp_ingest {
    struct daemon *d;
    struct exp_live *e;
    struct run *r;
};

/* metric_fn: records one value; for the early-stopping metric, asks the stopper and stops the
 * trial when it says so. Returns 0, 1 once the trial is stopped, -1 if a store write failed. */
static int exp_value(void *arg, int64_t step, const char *name, double value)
{
    struct exp_ingest *in = arg;
    struct daemon *d = in->d;
    struct exp_live *e = in->e;
    struct run *r = in->r;
    if (store_metric_insert(d->store, r->task, step, name, value, daemon_now()) < 0)
        return -1;
    if (e->stopper == NULL || strcmp(name, e->settings.stop_metric) != 0)
        return 0;
    /* A trial already stopped (cancelled, its process not yet gone) is not decided again. */
    if (core_task_state(d->core, r->task) != TASK_RUNNING)
        return 0;
    struct stop_decision dec;
    stopper_report(e->stopper, r->trial, (int)step, value, &dec);
    /* At the last rung the trial is finishing anyway: nothing to stop. */
    int max_rung = e->settings.stop.max_resource;
    if (!dec.stop || (max_rung > 0 && step >= max_rung))
        return 0;
    char why[200];
    snprintf(why, sizeof why, "rung %d (%s %lld): %s %.6g, the rung needed %.6g", dec.rung,
             e->settings.rung_unit, (long long)step, name, value, dec.cutoff);
    if (store_trial_stopped(d->store, r->task, dec.rung, why) < 0)
        return -1;
    core_cancel(d->core, r->task, daemon_now(), &d->acts, NULL);
    fprintf(stderr, "drover daemon: experiment %s trial %d (task %lld): %s\n", e->name, r->trial,
            (long long)r->task, why);
    return 1;
}

/* Reads and records what one trial reported since the last poll. Returns 0, or -1 if a store
 * write failed. */
static int exp_poll_run(struct daemon *d, struct exp_live *e, struct run *r, bool *begun)
{
    const struct exp_settings *s = &e->settings;
    if (s->early_stopping && e->stopper == NULL) { /* first needed: what it decided before */
        e->stopper = stopper_new(&s->stop);
        exp_replay(d, e);
    }
    char *path = xasprintf("%s/metrics/%lld.jsonl", r->slurm ? d->cfg.shared_dir : d->home,
                           (long long)r->task);
    char *text = s->file_metrics ? exp_read_new(path, &r->metrics_off) : NULL;
    free(path);
    char *out = NULL;
    if (s->npatterns > 0) {
        path = xasprintf("%s/stdout", r->run_dir);
        out = exp_read_new(path, &r->stdout_off);
        free(path);
    }
    int rc = 0;
    if (text != NULL || out != NULL) {
        if (!*begun)
            store_begin(d->store);
        *begun = true;
        struct exp_ingest in = {d, e, r};
        if (text != NULL)
            rc = metricline_text(text, s->rung_unit, NULL, 0, &r->metrics_lines, exp_value, &in);
        if (out != NULL && rc == 0)
            rc = metricline_text(out, s->rung_unit, s->patterns, s->npatterns, &r->pattern_step,
                                 exp_value, &in);
    }
    free(text);
    free(out);
    return rc < 0 ? -1 : 0;
}

/* Where each run had read to, to be put back when the poll's transaction is rolled back. */
struct exp_mark {
    long long metrics_off, stdout_off;
    int64_t metrics_lines, pattern_step;
};

void exp_poll(struct daemon *d)
{
    static struct ratelog failing;
    size_t nruns = 0, i = 0, acts_before = d->acts.n;
    for (struct run *r = d->runs; r; r = r->next)
        nruns++;
    struct exp_mark *marks = xcalloc(nruns + 1, sizeof *marks);
    bool begun = false;
    int rc = 0;
    for (struct run *r = d->runs; r && rc == 0; r = r->next, i++) {
        marks[i] = (struct exp_mark){r->metrics_off, r->stdout_off, r->metrics_lines,
                                     r->pattern_step};
        if (!r->exp_known) {
            r->exp_known = true;
            r->exp = store_trial_of_task(d->store, r->task, &r->trial);
        }
        struct exp_live *e = r->exp ? exp_live_get(d, r->exp) : NULL;
        if (e != NULL)
            rc = exp_poll_run(d, e, r, &begun);
    }
    if (rc < 0) {
        /* Nothing of it is kept: each run reads again from where it was, and the stoppers are
         * rebuilt from what the store holds. An early stop already decided is in core, though:
         * then the daemon stops, and its next start recovers from the store. */
        ratelog(&failing, "drover daemon: cannot record trials' metrics: %s; %s",
                store_error(d->store), d->acts.n != acts_before ? "stopping (a restart recovers)"
                                                                : "read again at the next poll");
        store_rollback(d->store);
        size_t read = i, j = 0; /* the runs this poll read from */
        for (struct run *r = d->runs; r && j < read; r = r->next, j++) {
            r->metrics_off = marks[j].metrics_off;
            r->stdout_off = marks[j].stdout_off;
            r->metrics_lines = marks[j].metrics_lines;
            r->pattern_step = marks[j].pattern_step;
        }
        exp_free_all(d);
        if (d->acts.n != acts_before) {
            d->store_lost = true;
            event_base_loopexit(d->base, NULL);
        }
    } else if (begun && daemon_apply_txn(d) < 0) {
        /* Metrics and any early stops in one commit; the cancels are carried out after it. */
        event_base_loopexit(d->base, NULL);
    }
    free(marks);
}
