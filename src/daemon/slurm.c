/* The Slurm backend (issue 12; docs/SLURM.md): carrying out core's START of a Slurm task with
 * sbatch, following every tracked job with one squeue call per poll, turning what Slurm says
 * into attempt ends, scancel for a cancel, and re-adopting jobs after a restart.
 *
 * Nothing here blocks the loop: every Slurm command runs through daemon/cmd.c and answers in a
 * callback. What core decided is committed before sbatch runs (runner.c), and the job id sbatch
 * answers is committed in a transaction of its own; a daemon killed in between finds an attempt
 * without a job id at its next start and looks for it by the job's comment ("drover:T.A:HOME"),
 * which sbatch recorded with the job, before it concludes that the job was never submitted.
 *
 * When Slurm does not answer (sbatch or squeue fail to reach slurmctld, or time out), core is
 * told (core_set_slurm_up): no Slurm task starts, new --on slurm submissions are refused with
 * the error, a submission that failed goes back to queued without using a retry, and the poll
 * goes on, backing off to a minute, until Slurm answers again. Local work is not touched. */
#include "daemon/slurm-internal.h"
#include "util/parse.h"
#include "util/paths.h"
#include "util/ratelog.h"
#include "util/slurm-script.h"
#include "util/slurm.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLURM_DOWN_POLL_MAX_MS 60000 /* the poll's back-off while Slurm does not answer */
#define SLURM_ORPHAN_POLLS 3         /* polls an attempt without a job id is looked for */
#define SLURM_SCONTROL_AT_ONCE 8     /* scontrol calls in flight for jobs squeue forgot */

static struct ratelog slurm_log;


struct run *slurm_run(struct daemon *d, int64_t task, int attempt)
{
    for (struct run *r = d->runs; r; r = r->next)
        if (r->slurm && r->task == task && r->attempt == attempt)
            return r;
    return NULL;
}

void slurm_job_text(const struct run *r, char *buf, size_t len)
{
    if (r->array_task >= 0)
        snprintf(buf, len, "%lld_%lld", (long long)r->job_id, (long long)r->array_task);
    else
        snprintf(buf, len, "%lld", (long long)r->job_id);
}

static bool slurm_tracking(const struct daemon *d)
{
    for (const struct run *r = d->runs; r; r = r->next)
        if (r->slurm && !r->submitting)
            return true;
    return false;
}

static void slurm_arm(struct daemon *d, int64_t ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(d->slurm->timer, &tv);
}

/* Polls again after the interval, if there is anything to poll (or Slurm is down: the poll is
 * how it is seen to be back). */
void slurm_schedule_poll(struct daemon *d)
{
    struct slurm_backend *sb = d->slurm;
    if (sb->polling || evtimer_pending(sb->timer, NULL))
        return;
    if (sb->down || slurm_tracking(d))
        slurm_arm(d, sb->interval_ms);
}

/* Whether a failed command's words say that slurmctld could not be reached (as opposed to a
 * refusal of this job: a bad partition, a GRES the cluster lacks). */
bool slurm_unreachable(const struct cmd_result *res)
{
    static const char *const signs[] = {"Unable to contact slurm controller",
                                        "Socket timed out", "Connection refused",
                                        "Zero Bytes were transmitted",
                                        "Communication connection failure", NULL};
    if (res->timed_out)
        return true;
    for (int i = 0; signs[i]; i++)
        if (res->err != NULL && strstr(res->err, signs[i]) != NULL)
            return true;
    return false;
}

/* The first line a command wrote on stderr (else its status), for reasons. (malloc'd) */
char *slurm_said(const char *cmd, const struct cmd_result *res)
{
    if (res->error != NULL)
        return xasprintf("%s: %s", cmd, res->error);
    if (res->timed_out)
        return xasprintf("%s did not answer within %d s", cmd, SLURM_CMD_TIMEOUT_MS / 1000);
    const char *e = res->err_len > 0 ? res->err : res->out;
    size_t n = strcspn(e, "\n");
    while (n > 0 && (e[n - 1] == ' ' || e[n - 1] == '\r'))
        n--;
    if (n == 0)
        return WIFEXITED(res->status) ? xasprintf("%s exited %d", cmd, WEXITSTATUS(res->status))
                                      : xasprintf("%s was killed", cmd);
    return xasprintf("%.*s", (int)(n > 300 ? 300 : n), e);
}

void slurm_set_up(struct daemon *d, bool up, const char *why)
{
    struct slurm_backend *sb = d->slurm;
    if (up) {
        if (sb->down) {
            fprintf(stderr, "drover daemon: slurm answers again\n");
            sb->down = false;
            free(sb->down_error);
            sb->down_error = NULL;
            sb->interval_ms = d->cfg.slurm_poll_ms;
            core_set_slurm_up(d->core, true);
            daemon_kick(d);
        }
        return;
    }
    if (!sb->down) {
        sb->down = true;
        sb->down_since = daemon_now();
        core_set_slurm_up(d->core, false);
    } else if (sb->interval_ms < SLURM_DOWN_POLL_MAX_MS) {
        sb->interval_ms = sb->interval_ms * 2 < SLURM_DOWN_POLL_MAX_MS ? sb->interval_ms * 2
                                                                       : SLURM_DOWN_POLL_MAX_MS;
    }
    free(sb->down_error);
    sb->down_error = xstrdup(why);
    ratelog(&slurm_log, "drover daemon: slurm is not answering: %s", why);
}

/* ---- ends ------------------------------------------------------------------------------------ */

static bool slurm_marker(const char *run_dir, const char *name, char *text, size_t len)
{
    char *path = xasprintf("%s/%s", run_dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return false;
    if (text != NULL && len > 0) {
        ssize_t n = read(fd, text, len - 1);
        text[n > 0 ? n : 0] = '\0';
        text[strcspn(text, "\n")] = '\0';
    }
    close(fd);
    return true;
}

static struct attempt_end *slurm_end_new(struct daemon *d, struct run *r)
{
    xgrow((void **)&d->ends, &d->ends_cap, d->nends + 1, sizeof *d->ends);
    struct attempt_end *e = &d->ends[d->nends++];
    memset(e, 0, sizeof *e);
    e->task = r->task;
    e->attempt = r->attempt;
    e->start = r->start;
    e->end = daemon_now();
    e->exit_code = -1;
    e->util = -1;
    return e;
}

/* The job ended as Slurm says: the attempt's end, and core's outcome. */
static void slurm_finish(struct daemon *d, struct run *r, const struct slurm_job_info *j)
{
    char *why = NULL, text[256];
    enum slurm_outcome o = slurm_outcome_of(j->state, j->reason, j->exit_code, j->signal, &why);
    struct attempt_end *e = slurm_end_new(d, r);
    enum core_outcome outcome;
    e->exit_code = j->exit_code;
    e->signal = j->signal;
    char job[48];
    slurm_job_text(r, job, sizeof job);
    snprintf(e->reason, sizeof e->reason, "%s (slurm job %s)", why, job);
    bool warned = slurm_marker(r->run_dir, "warned", NULL, 0);
    switch (o) {
    case SLURM_OUTCOME_SUCCEEDED:
        e->outcome = "succeeded";
        outcome = CORE_OUTCOME_SUCCESS;
        break;
    case SLURM_OUTCOME_TIMED_OUT:
        e->outcome = "timed_out";
        outcome = CORE_OUTCOME_TIMEOUT;
        break;
    case SLURM_OUTCOME_CANCELLED:
        e->outcome = "cancelled";
        outcome = CORE_OUTCOME_SIGNAL;
        if (core_task_state(d->core, r->task) == TASK_RUNNING && j->reason != NULL &&
            strcmp(j->reason, "DependencyNeverSatisfied") == 0) {
            /* Slurm gave up on a job drover still runs (submitted again after a node
             * failure): the task waits in drover for it, as if never sent. */
            free(why);
            d->nends--;
            slurm_not_started(d, r, "its Slurm dependency was submitted again");
            return;
        }
        if (core_task_state(d->core, r->task) == TASK_RUNNING) {
            /* Cancelled in Slurm by someone else: the task is cancelled, not retried. */
            const char *no;
            core_cancel(d->core, r->task, e->end, &d->acts, &no);
        }
        break;
    case SLURM_OUTCOME_REQUEUE:
        e->outcome = "requeued";
        outcome = CORE_OUTCOME_GPU_FAULT; /* queued again; the attempt uses no retry */
        break;
    default: /* FAILED, OUT_OF_MEMORY */
        e->outcome = "failed";
        outcome = e->signal > 0 ? CORE_OUTCOME_SIGNAL : CORE_OUTCOME_EXIT_CODE;
        if (slurm_marker(r->run_dir, "exec_error", text, sizeof text) &&
            strncmp(text, "chdir ", 6) != 0) {
            /* (A workdir a node cannot enter may be that node's mount: retried, not this.) */
            e->outcome = "exec_error";
            snprintf(e->reason, sizeof e->reason, "cannot execute: %s", text);
            outcome = CORE_OUTCOME_EXEC_ERROR;
        } else if (warned && (e->signal == SIGUSR1 || e->exit_code == 128 + SIGUSR1)) {
            /* It died of the warning before its time limit (docs/SLURM.md). */
            e->outcome = "timed_out";
            snprintf(e->reason, sizeof e->reason,
                     "ended by the warning before its time limit (SIGUSR1; slurm job %s)", job);
            outcome = CORE_OUTCOME_TIMEOUT;
        }
        break;
    }
    free(why);
    core_attempt_exited(d->core, r->task, outcome, e->end, &d->acts);
    run_remove(d, r);
}

/* An attempt that never reached Slurm: forgotten, queued again, no retry used. */
void slurm_not_started(struct daemon *d, struct run *r, const char *why)
{
    struct attempt_end *e = slurm_end_new(d, r);
    e->outcome = "not_started";
    e->discard = true;
    snprintf(e->reason, sizeof e->reason, "could not start: %s", why);
    core_attempt_exited(d->core, r->task, CORE_OUTCOME_NOT_STARTED, e->end, &d->acts);
    run_remove(d, r);
}

/* An attempt Slurm refused, or that vanished: it failed (exec_error is never retried). */
void slurm_failed(struct daemon *d, struct run *r, const char *outcome_name,
                         enum core_outcome outcome, const char *why)
{
    struct attempt_end *e = slurm_end_new(d, r);
    e->outcome = outcome_name;
    snprintf(e->reason, sizeof e->reason, "%s", why);
    core_attempt_exited(d->core, r->task, outcome, e->end, &d->acts);
    run_remove(d, r);
}

/* ---- submitting ------------------------------------------------------------------------------ */


/* ---- cancelling ------------------------------------------------------------------------------ */

static void slurm_cancelled(void *arg, const struct cmd_result *res)
{
    struct slurm_call *call = arg;
    struct daemon *d = call->d;
    if (res->status != 0) {
        char *why = slurm_said("scancel", res);
        fprintf(stderr, "drover daemon: task %lld: scancel %lld: %s\n", (long long)call->task,
                (long long)call->job, why);
        if (slurm_unreachable(res))
            slurm_set_up(d, false, why);
        free(why);
    }
    free(call);
    /* Its end comes from the next poll: look soon. */
    if (!d->slurm->polling) {
        event_del(d->slurm->timer);
        slurm_arm(d, 100);
    }
}

void slurm_scancel(struct daemon *d, struct run *r)
{
    char job[48], *err = NULL;
    slurm_job_text(r, job, sizeof job);
    char *argv[] = {"scancel", job, NULL};
    struct slurm_call *call = xcalloc(1, sizeof *call);
    *call = (struct slurm_call){d, r->task, r->attempt, r->job_id, r->array_task, 0};
    struct cmd_opts opts = {.timeout_ms = SLURM_CMD_TIMEOUT_MS};
    if (cmd_start(d->base, argv, &opts, slurm_cancelled, call, &err) < 0) {
        fprintf(stderr, "drover daemon: task %lld: scancel: %s\n", (long long)r->task, err);
        free(err);
        free(call);
        return;
    }
    d->slurm->calls[SLURM_CALL_SCANCEL]++;
}

void slurm_cancel_attempt(struct daemon *d, struct run *r)
{
    if (r->waiting) { /* never reached Slurm: it ends here */
        slurm_failed(d, r, "cancelled", CORE_OUTCOME_SIGNAL, "cancelled before it reached Slurm");
        return;
    }
    if (r->job_id > 0)
        slurm_scancel(d, r);
    else
        r->cancel_wanted = true; /* scancel once sbatch (or the comment search) names it */
}

/* ---- polling --------------------------------------------------------------------------------- */

static void slurm_poll_start(struct daemon *d);

/* Records a still-live job's state when it changed (one transaction for the poll). */
static void slurm_note_state(struct daemon *d, struct run *r, const struct slurm_job_info *j,
                             bool *begun)
{
    if (strcmp(r->slurm_state, j->state) == 0 &&
        strcmp(r->slurm_reason, j->reason ? j->reason : "") == 0)
        return;
    snprintf(r->slurm_state, sizeof r->slurm_state, "%s", j->state);
    snprintf(r->slurm_reason, sizeof r->slurm_reason, "%s", j->reason ? j->reason : "");
    if (!*begun)
        store_begin(d->store);
    *begun = true;
    store_attempt_slurm_state(d->store, r->task, r->attempt, j->state, j->reason);
}

/* What scontrol says of a job squeue no longer lists. */
static void slurm_scontrol_done(void *arg, const struct cmd_result *res)
{
    struct slurm_call *call = arg;
    struct daemon *d = call->d;
    struct run *r = slurm_run(d, call->task, call->attempt);
    d->slurm->scontrols--;
    if (r != NULL && r->job_id == call->job) {
        struct slurm_jobs *jobs = slurm_scontrol_parse(res->out ? res->out : "");
        const struct slurm_job_info *j = slurm_jobs_find(jobs, call->job, call->array_task);
        char *why = NULL;
        if (j != NULL) {
            enum slurm_outcome o = slurm_outcome_of(j->state, j->reason, j->exit_code,
                                                    j->signal, &why);
            if (o != SLURM_OUTCOME_POLL && o != SLURM_OUTCOME_QUEUED &&
                o != SLURM_OUTCOME_RUNNING)
                slurm_finish(d, r, j);
        } else if (res->status != -1 && !slurm_unreachable(res) &&
                   res->err != NULL && strstr(res->err, "Invalid job id") != NULL) {
            char text[160], job[48];
            slurm_job_text(r, job, sizeof job);
            snprintf(text, sizeof text, "slurm job %s vanished: neither squeue nor scontrol"
                                        " knows it", job);
            slurm_failed(d, r, "lost", CORE_OUTCOME_LOST, text);
        }
        free(why);
        slurm_jobs_free(jobs);
        daemon_apply(d);
    }
    free(call);
    slurm_schedule_poll(d);
}

static void slurm_scontrol(struct daemon *d, struct run *r)
{
    char job[48], *err = NULL;
    slurm_job_text(r, job, sizeof job);
    char *argv[] = {"scontrol", "show", "job", "-o", job, NULL};
    struct slurm_call *call = xcalloc(1, sizeof *call);
    *call = (struct slurm_call){d, r->task, r->attempt, r->job_id, r->array_task, 0};
    struct cmd_opts opts = {.timeout_ms = SLURM_CMD_TIMEOUT_MS};
    if (cmd_start(d->base, argv, &opts, slurm_scontrol_done, call, &err) < 0) {
        free(err);
        free(call);
        return;
    }
    d->slurm->scontrols++;
    d->slurm->calls[SLURM_CALL_SCONTROL]++;
}

/* With the comment field, each line is "ID|STATE|REASON|EXIT|COMMENT|": the attempts a crash
 * left without a job id are found by their comment. */
static void slurm_find_orphans(struct daemon *d, const char *out)
{
    char tag[64];
    const char *line = out;
    while (line != NULL && *line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *field = line;
        for (int bars = 0; bars < 4 && field != NULL; bars++) {
            field = memchr(field, '|', len - (size_t)(field - line));
            field = field ? field + 1 : NULL;
        }
        long long job = strtoll(line, NULL, 10);
        for (struct run *r = d->runs; field != NULL && job > 0 && r; r = r->next) {
            if (!r->slurm || r->job_id > 0 || r->submitting)
                continue;
            int n = r->group != 0 ? snprintf(tag, sizeof tag, "drover:A%lld.1:%s|",
                                             (long long)r->group, d->slurm->home_tag)
                                  : snprintf(tag, sizeof tag, "drover:%lld.%d:%s|",
                                             (long long)r->task, r->attempt, d->slurm->home_tag);
            if ((size_t)(field - line) + (size_t)n > len || strncmp(field, tag, (size_t)n) != 0)
                continue;
            char id[48];
            r->job_id = job;
            slurm_job_text(r, id, sizeof id);
            store_begin(d->store);
            if (store_attempt_slurm_job(d->store, r->task, r->attempt, id) < 0 ||
                store_commit(d->store) < 0)
                store_rollback(d->store);
            if (r->cancel_wanted)
                slurm_scancel(d, r);
        }
        line = eol ? eol + 1 : NULL;
    }
}

static void slurm_polled(void *arg, const struct cmd_result *res)
{
    struct daemon *d = arg;
    struct slurm_backend *sb = d->slurm;
    sb->polling = false;
    if (res->status != 0) {
        char *why = slurm_said("squeue", res);
        slurm_set_up(d, false, why);
        free(why);
        slurm_schedule_poll(d);
        return;
    }
    slurm_set_up(d, true, NULL);
    if (sb->with_comments)
        slurm_find_orphans(d, res->out);
    struct slurm_jobs *jobs = slurm_squeue_parse(res->out);
    bool begun = false;
    struct run *r, *next;
    size_t ended = 0;
    for (r = d->runs; r; r = next) {
        next = r->next;
        if (!r->slurm || r->submitting)
            continue;
        if (r->job_id <= 0) {
            /* Left without a job id by a crash, and not found by its comment: never sent. */
            if (++r->orphan_polls >= SLURM_ORPHAN_POLLS) {
                slurm_not_started(d, r, "sbatch never answered (the daemon stopped)");
                ended++;
            }
            continue;
        }
        const struct slurm_job_info *j = slurm_jobs_find(jobs, r->job_id, r->array_task);
        if (j == NULL) {
            if (sb->scontrols < SLURM_SCONTROL_AT_ONCE)
                slurm_scontrol(d, r);
            continue;
        }
        char *why = NULL;
        enum slurm_outcome o = slurm_outcome_of(j->state, j->reason, j->exit_code, j->signal,
                                                &why);
        free(why);
        if (o == SLURM_OUTCOME_POLL || o == SLURM_OUTCOME_QUEUED || o == SLURM_OUTCOME_RUNNING) {
            slurm_note_state(d, r, j, &begun);
            continue;
        }
        slurm_finish(d, r, j);
        ended++;
    }
    if (begun && store_commit(d->store) < 0)
        store_rollback(d->store);
    slurm_jobs_free(jobs);
    slurm_submit_waiting(d);
    if (ended > 0) {
        exp_poll(d); /* the ended trials' last metrics, before their ends are written */
        core_schedule(d->core, daemon_now(), &d->acts);
    }
    daemon_apply(d);
    slurm_schedule_poll(d);
}

static void slurm_poll_start(struct daemon *d)
{
    struct slurm_backend *sb = d->slurm;
    char *err = NULL;
    bool orphans = false;
    for (struct run *r = d->runs; r; r = r->next)
        orphans |= r->slurm && !r->submitting && r->job_id <= 0;
    /* The comment field only while some attempt is looked for by it. */
    const char *format = orphans ? "--Format=JobArrayID:|,State:|,Reason:|,exit_code:|,Comment:|"
                                 : "--Format=" SLURM_SQUEUE_FORMAT;
    char *argv[8];
    int n = 0;
    argv[n++] = "squeue";
    argv[n++] = "--noheader";
    argv[n++] = "--states=all";
    if (geteuid() != 0)
        argv[n++] = "--me"; /* root's daemon submits as each task's owner */
    argv[n++] = (char *)format;
    argv[n] = NULL;
    struct cmd_opts opts = {.timeout_ms = SLURM_CMD_TIMEOUT_MS, .max_output = 64u << 20};
    if (cmd_start(d->base, argv, &opts, slurm_polled, d, &err) < 0) {
        slurm_set_up(d, false, err);
        free(err);
        slurm_arm(d, sb->interval_ms);
        return;
    }
    sb->polling = true;
    sb->with_comments = orphans;
    sb->calls[SLURM_CALL_SQUEUE]++;
}

static void slurm_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    slurm_poll_start(arg);
}

/* ---- the backend's life ---------------------------------------------------------------------- */

void slurm_adopt(struct daemon *d, int64_t task, int attempt, core_time start,
                 const char *run_dir, const struct core_placement *pl)
{
    struct run *r = run_add(d, task, attempt, 0, false, xstrdup(run_dir), start, pl);
    char *job = store_attempt_slurm_job_of(d->store, task, attempt), *end = NULL;
    r->slurm = true;
    r->array_task = SLURM_NO_TASK;
    r->job_id = job ? strtoll(job, &end, 10) : 0;
    if (end != NULL && *end == '_')
        r->array_task = strtoll(end + 1, NULL, 10);
    if (job == NULL) {
        /* Lost between sbatch and its record: found by its comment — an array's first
         * attempts by the array's (slurm-submit.c). */
        json_t *info = store_task_exec_info(d->store, task);
        json_int_t array = json_integer_value(json_object_get(info, "array_id"));
        if (attempt == 1 && array != 0) {
            r->group = array;
            r->array_task = json_integer_value(json_object_get(info, "array_index"));
        }
        json_decref(info);
    }
    free(job);
    if (d->slurm != NULL)
        slurm_schedule_poll(d);
}

char *slurm_refusal(struct daemon *d)
{
    struct slurm_backend *sb = d->slurm;
    if (sb == NULL)
        return xstrdup("slurm: set shared-dir in drover.conf to hand tasks to Slurm"
                       " (docs/SLURM.md)");
    if (!sb->down)
        return NULL;
    char when[32];
    time_t t = (time_t)(sb->down_since / 1000);
    struct tm tm;
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&t, &tm));
    return xasprintf("slurm is unreachable since %s (%s); not submitted", when,
                     sb->down_error ? sb->down_error : "no answer");
}

static bool slurm_in_path(const char *name);

int slurm_backend_start(struct daemon *d, char **err)
{
    if (d->cfg.shared_dir == NULL)
        return 0;
    if (paths_mkdir_p(d->cfg.shared_dir) < 0) {
        *err = xasprintf("shared-dir %s: %s", d->cfg.shared_dir, strerror(errno));
        return -1;
    }
    struct slurm_backend *sb = xcalloc(1, sizeof *sb);
    if (d->cfg.slurm_args != NULL &&
        slurm_split_words(d->cfg.slurm_args, &sb->extra, err) < 0) {
        free(sb);
        char *why = *err;
        *err = xasprintf("slurm-args: %s", why);
        free(why);
        return -1;
    }
    size_t nextra = 0;
    while (sb->extra && sb->extra[nextra])
        nextra++;
    sb->set = (struct slurm_settings){
        .partition = d->cfg.slurm_partition,
        .account = d->cfg.slurm_account,
        .qos = d->cfg.slurm_qos,
        .extra_args = sb->extra,
        .nextra = nextra,
    };
    /* slurm-args checked once, now, rather than at each submission. */
    char **argv = NULL, *why = NULL;
    struct slurm_job probe = {.task = 1, .script = "/x"};
    if (slurm_sbatch_argv(&probe, &sb->set, &argv, &why) < 0) {
        *err = why;
        slurm_argv_free(sb->extra);
        free(sb);
        return -1;
    }
    slurm_argv_free(argv);
    /* A tag of this state directory in each job's comment, so that two daemons of one user
     * never adopt each other's jobs. */
    unsigned long h = 5381;
    for (const char *p = d->home; *p; p++)
        h = h * 33 + (unsigned char)*p;
    sb->home_tag = xasprintf("%08lx", h & 0xffffffffUL);
    sb->interval_ms = d->cfg.slurm_poll_ms;
    sb->timer = evtimer_new(d->base, slurm_on_timer, d);
    d->slurm = sb;
    /* Slurm's commands not installed: the backend starts down and says why (submissions to it
     * are refused), and the poll finds them once they are. */
    static const char *const commands[] = {"sbatch", "squeue", "scontrol", "scancel"};
    for (size_t i = 0; i < 4; i++) {
        if (!slurm_in_path(commands[i])) {
            char *why = xasprintf("%s: not found in PATH (%s)", commands[i],
                                  getenv("PATH") ? getenv("PATH") : "");
            slurm_set_up(d, false, why);
            free(why);
            slurm_arm(d, sb->interval_ms);
            break;
        }
    }
    return 0;
}

static bool slurm_in_path(const char *name)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *file = xasprintf("%.*s/%s", (int)(n ? n : 1), n ? path : ".", name);
        bool found = access(file, X_OK) == 0;
        free(file);
        if (found)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

void slurm_backend_stop(struct daemon *d)
{
    struct slurm_backend *sb = d->slurm;
    if (sb == NULL)
        return;
    cmd_abort_all();
    event_free(sb->timer);
    slurm_argv_free(sb->extra);
    free(sb->down_error);
    free(sb->home_tag);
    free(sb);
    d->slurm = NULL;
}

void slurm_gpus_json(struct daemon *d, json_t *o)
{
    struct slurm_backend *sb = d->slurm;
    if (sb == NULL)
        return;
    size_t tracked = 0;
    for (struct run *r = d->runs; r; r = r->next)
        tracked += r->slurm;
    json_t *since = sb->down ? json_integer(sb->down_since) : json_null();
    json_object_set_new(
        o, "slurm",
        json_pack("{s:b,s:s?,s:o,s:I,s:{s:I,s:I,s:I,s:I}}", "up", !sb->down, "error",
                  sb->down_error, "down_since", since, "tracked", (json_int_t)tracked, "calls",
                  "sbatch", (json_int_t)sb->calls[SLURM_CALL_SBATCH], "squeue",
                  (json_int_t)sb->calls[SLURM_CALL_SQUEUE], "scontrol",
                  (json_int_t)sb->calls[SLURM_CALL_SCONTROL], "scancel",
                  (json_int_t)sb->calls[SLURM_CALL_SCANCEL]));
}
