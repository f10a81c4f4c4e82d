/* Learning how attempts ended — from SIGCHLD for our own supervisors, by polling the run
 * directory for supervisors adopted after a restart — and restoring core from the store. */
#include "daemon/daemon.h"
#include "daemon/cmd.h"
#include "daemon/request.h"
#include "core/learn.h"
#include "exec/exec.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Appends to the reason where the logs stop, if they do: "output truncated at N bytes: disk full"
 * (output: stdout, the stream `drover logs` shows; stderr is named). */
static void finish_truncation(const struct exec_status *st, struct attempt_end *e)
{
    const int64_t *cut = st->truncated_at;
    if (cut[0] < 0 && cut[1] < 0)
        return;
    char where[96];
    if (cut[0] >= 0 && cut[1] >= 0)
        snprintf(where, sizeof where, "output truncated at %lld bytes, stderr at %lld bytes",
                 (long long)cut[0], (long long)cut[1]);
    else
        snprintf(where, sizeof where, "%s truncated at %lld bytes",
                 cut[0] >= 0 ? "output" : "stderr", (long long)(cut[0] >= 0 ? cut[0] : cut[1]));
    int error = st->output_error;
    size_t len = strlen(e->reason);
    snprintf(e->reason + len, sizeof e->reason - len, "; %s: %s", where,
             error == ENOSPC || error == EDQUOT || error == 0 ? "disk full" : strerror(error));
}

/* Turns what the run directory says into an attempt end and core's outcome. */
static enum core_outcome finish_outcome(enum exec_probe probe, const struct exec_status *st,
                                        struct attempt_end *e)
{
    char buf[32];
    e->exit_code = -1;
    switch (probe) {
    case EXEC_NOT_STARTED:
        e->discard = true;
        e->outcome = "not_started";
        snprintf(e->reason, sizeof e->reason, "never started (the daemon stopped first)");
        return CORE_OUTCOME_NOT_STARTED;
    case EXEC_LOST:
    case EXEC_RUNNING:
        e->outcome = "lost";
        snprintf(e->reason, sizeof e->reason, "its supervisor vanished without a status");
        return CORE_OUTCOME_LOST;
    case EXEC_DONE:
        break;
    }
    e->start = st->start_ms;
    e->end = st->end_ms;
    e->exit_code = st->exit_code;
    e->signal = st->signal;
    if (st->exec_error[0]) {
        e->outcome = "exec_error";
        snprintf(e->reason, sizeof e->reason, "cannot execute: %s", st->exec_error);
        return CORE_OUTCOME_EXEC_ERROR;
    }
    if (st->preempted) {
        /* However it exited: it was asked to yield, and its next attempt resumes from its
         * checkpoint (one that had just finished finds it complete). */
        e->outcome = "preempted";
        e->preempted = true;
        e->overrun = st->preempt_overrun;
        char took[32];
        int64_t asked = st->preempt_ms > 0 ? st->preempt_ms : st->end_ms;
        format_duration(asked - st->start_ms, buf, sizeof buf);
        if (st->preempt_overrun)
            snprintf(e->reason, sizeof e->reason,
                     "preempted after %s; it did not exit within its grace and was killed", buf);
        else
            snprintf(e->reason, sizeof e->reason, "preempted after %s; it exited in %s", buf,
                     format_duration(st->end_ms - asked, took, sizeof took));
        return CORE_OUTCOME_PREEMPTED;
    }
    if (st->timed_out) {
        e->outcome = "timed_out";
        snprintf(e->reason, sizeof e->reason, "time limit reached after %s",
                 format_duration(st->end_ms - st->start_ms, buf, sizeof buf));
        return CORE_OUTCOME_TIMEOUT;
    }
    if (st->cancelled) {
        e->outcome = "cancelled";
        snprintf(e->reason, sizeof e->reason, "cancelled");
        return CORE_OUTCOME_SIGNAL;
    }
    if (st->signal > 0) {
        e->outcome = "failed";
        snprintf(e->reason, sizeof e->reason, "killed by signal %d (SIG%s)", st->signal,
                 sigabbrev_np(st->signal) ? sigabbrev_np(st->signal) : "?");
        return CORE_OUTCOME_SIGNAL;
    }
    if (st->exit_code != 0) {
        e->outcome = "failed";
        snprintf(e->reason, sizeof e->reason, "exit code %d", st->exit_code);
        return CORE_OUTCOME_EXIT_CODE;
    }
    e->outcome = "succeeded";
    snprintf(e->reason, sizeof e->reason, "exit code 0");
    return CORE_OUTCOME_SUCCESS;
}

/* A preempted attempt that overran its grace: the preempt-overruns-th such makes the task no
 * longer preemptible, in core at once and in the store with the end. */
static void finish_preempted(struct daemon *d, int64_t task, struct attempt_end *e)
{
    if (!e->overrun)
        return;
    int before = store_task_preempt_overruns(d->store, task);
    if (before < 0 || before + 1 < d->cfg.preempt_overruns)
        return;
    e->preempt_off = true;
    core_set_preemptible(d->core, task, false);
    size_t len = strlen(e->reason);
    snprintf(e->reason + len, sizeof e->reason - len,
             "; %d times now: no longer preemptible", before + 1);
}

/* Records how the attempt ended and tells core. r carries what telemetry saw of it (NULL for an
 * attempt that ended while no daemon ran). */
static void finish(struct daemon *d, struct run *r, int64_t task, int attempt,
                   const char *run_dir)
{
    struct exec_status st;
    memset(&st, 0, sizeof st);
    enum exec_probe probe = exec_probe(run_dir, &st);
    if (probe == EXEC_LOST)
        exec_kill_orphans(run_dir);
    xgrow((void **)&d->ends, &d->ends_cap, d->nends + 1, sizeof *d->ends);
    struct attempt_end *e = &d->ends[d->nends++];
    memset(e, 0, sizeof *e);
    e->task = task;
    e->attempt = attempt;
    enum core_outcome outcome = finish_outcome(probe, &st, e);
    if (probe == EXEC_DONE)
        finish_truncation(&st, e);
    if (e->end == 0)
        e->end = daemon_now();
    if (r != NULL) {
        e->peak = r->peak;
        e->util = r->util_n > 0 ? r->util_sum / r->util_n : -1;
    }
    bool failed = outcome == CORE_OUTCOME_EXIT_CODE || outcome == CORE_OUTCOME_SIGNAL ||
                  outcome == CORE_OUTCOME_LOST;
    char buf[32];
    if (r != NULL && r->gpu_fault && outcome != CORE_OUTCOME_SUCCESS &&
        outcome != CORE_OUTCOME_PREEMPTED) { /* a preemption is queued again already */
        e->outcome = "gpu_fault";
        snprintf(e->reason, sizeof e->reason, "%s; queued again", r->fault);
        e->requeue = true;
        e->new_claim = r->placement.gpu_mem;
        outcome = CORE_OUTCOME_GPU_FAULT;
    } else if (r != NULL && r->stalled && failed) {
        e->outcome = "stalled";
        char limit[32];
        snprintf(e->reason, sizeof e->reason,
                 "stalled: no output and idle GPUs for %s (--stall %s)",
                 format_duration(r->stalled_ms, buf, sizeof buf),
                 format_duration(r->stall_ms, limit, sizeof limit));
        outcome = CORE_OUTCOME_STALLED;
    } else if (failed && outcome != CORE_OUTCOME_LOST && r != NULL && r->placement.ngpus > 0 &&
               telemetry_oom(run_dir)) {
        uint64_t claim = r->placement.gpu_mem;
        char peak[32], grown[32];
        e->outcome = "oom";
        if (claim > 0) {
            uint64_t whole = d->gpus.gpu[r->placement.gpu[0]].mem_total;
            uint64_t next = learn_oom_claim(r->peak, claim, d->cfg.oom_factor, whole);
            e->requeue = true;
            e->new_claim = next;
            snprintf(e->reason, sizeof e->reason, "out of GPU memory (peak %s); claim raised to %s",
                     r->peak ? format_size(r->peak, peak, sizeof peak) : "unknown",
                     e->new_claim ? format_size(e->new_claim, grown, sizeof grown)
                                  : "whole GPUs");
            core_attempt_exited_oom(d->core, task, next ? next : whole, daemon_now(), &d->acts);
            return;
        }
        snprintf(e->reason, sizeof e->reason, "out of GPU memory on whole GPUs");
    }
    if (outcome == CORE_OUTCOME_PREEMPTED)
        finish_preempted(d, task, e);
    core_attempt_exited(d->core, task, outcome, daemon_now(), &d->acts);
}

static void finish_run(struct daemon *d, struct run *r)
{
    finish(d, r, r->task, r->attempt, r->run_dir);
    run_remove(d, r);
}

/* After attempts ended: schedule into the freed capacity at once, so that the ends and the
 * starts they allow are committed in one transaction. */
static void reschedule(struct daemon *d, size_t ended)
{
    /* A trial that ended may trip its experiment's circuit breaker, which holds the trials
     * waiting behind it: that must be settled before the pass that would start them. A commit
     * that fails keeps what it held for the next try (daemon_apply). */
    if (ended > 0 && exp_trial_ending(d) && daemon_apply(d) < 0)
        return;
    if (ended > 0)
        core_schedule(d->core, daemon_now(), &d->acts);
    daemon_apply(d);
}

static size_t reap_pid(struct daemon *d, pid_t pid)
{
    for (struct run *r = d->runs; r; r = r->next) {
        if (r->child && r->pid == pid) {
            finish_run(d, r);
            return 1;
        }
    }
    return 0;
}

static void daemon_on_zygote(evutil_socket_t fd, short what, void *arg)
{
    daemon_reap(arg);
}

void daemon_start_zygote(struct daemon *d)
{
    char *err = NULL;
    int fd = exec_zygote_start(&err);
    if (fd < 0) {
        fprintf(stderr, "drover daemon: %s; spawning supervisors directly\n", err);
        free(err);
        return;
    }
    d->zygote = event_new(d->base, fd, EV_READ | EV_PERSIST, daemon_on_zygote, d);
    event_add(d->zygote, NULL);
}

/* The zygote died: its supervisors live on, and are watched through their run directories. */
static void zygote_lost(struct daemon *d)
{
    fprintf(stderr, "drover daemon: the zygote died; starting another\n");
    event_free(d->zygote);
    d->zygote = NULL;
    exec_zygote_stop();
    for (struct run *r = d->runs; r; r = r->next)
        r->child = false;
    daemon_start_zygote(d);
}

/* Reads what running trials reported — unless the store cannot commit it: exp_poll's
 * transaction is its own, and its failure would stop the daemon (the metrics stay in the trials'
 * files). Called once the attempts about to be finished are known to have ended, so that what an
 * ended trial wrote last is read before its run goes. */
static void reap_metrics(struct daemon *d)
{
    if (disk_can_commit(d))
        exp_poll(d);
}

void daemon_reap(struct daemon *d)
{
    pid_t pid, pids[64], *gone = NULL;
    int status, n;
    size_t ngone = 0, cap = 0, ended = 0;
    bool lost = false;
    /* Every supervisor that exited, first; only then their trials' metrics (complete now: each
     * task ended before its supervisor) and their ends. Reading the metrics before collecting
     * the exits would miss the last lines of a trial that ended in between. */
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (cmd_reaped(pid, status))
            continue; /* a Slurm command's (daemon/cmd.c) */
        xgrow((void **)&gone, &cap, ngone + 1, sizeof *gone);
        gone[ngone++] = pid;
    }
    while (exec_zygote_running() && (n = exec_zygote_exited(pids, 64)) != 0) {
        if (n < 0) {
            lost = true;
            break;
        }
        xgrow((void **)&gone, &cap, ngone + (size_t)n, sizeof *gone);
        memcpy(gone + ngone, pids, (size_t)n * sizeof *pids);
        ngone += (size_t)n;
    }
    reap_metrics(d);
    for (size_t i = 0; i < ngone; i++)
        ended += reap_pid(d, gone[i]);
    free(gone);
    if (lost)
        zygote_lost(d);
    reschedule(d, ended);
}

void daemon_poll_adopted(struct daemon *d)
{
    struct exec_status st;
    struct run *r, *next;
    size_t ended = 0;
    /* Which adopted attempts ended, first; then every trial's metrics (early stopping acts at
     * once, every poll: 200 ms), the ended ones' complete; then their ends. */
    for (r = d->runs; r; r = r->next)
        r->ended = !r->child && !r->slurm && exec_probe(r->run_dir, &st) != EXEC_RUNNING;
    reap_metrics(d);
    for (r = d->runs; r; r = next) {
        next = r->next;
        if (r->ended) {
            finish_run(d, r);
            ended++;
        }
    }
    reschedule(d, ended);
}

struct restore_ctx {
    struct daemon *d;
    int failed;
    struct pending { int64_t task; int attempt; char *run_dir; } *done;
    size_t ndone, cap;
    uint32_t *users; /* owners whose limits core has been given */
    size_t nusers, users_cap;
};

/* Core learns each owner's limits before the owner's first task is restored. */
static void restore_user(struct restore_ctx *ctx, uint32_t user)
{
    for (size_t i = 0; i < ctx->nusers; i++)
        if (ctx->users[i] == user)
            return;
    xgrow((void **)&ctx->users, &ctx->users_cap, ctx->nusers + 1, sizeof *ctx->users);
    ctx->users[ctx->nusers++] = user;
    daemon_request_user_limits(ctx->d, (uid_t)user);
}

static void restore_one(void *arg, int64_t id, enum task_state state, core_time ready_time,
                        core_time retry_at, int attempts, bool attempt_open,
                        core_time attempt_start, const struct core_placement *placement,
                        const char *run_dir)
{
    struct restore_ctx *ctx = arg;
    struct daemon *d = ctx->d;
    struct core_task_spec spec;
    struct core_dep *deps = NULL;
    char *gpu_type = NULL;
    if (store_task_spec(d->store, id, &spec, &deps, &gpu_type) < 0) {
        ctx->failed++;
        return;
    }
    spec.req.gpu_types = daemon_request_restored_types(d, id, gpu_type);
    free(gpu_type);
    restore_user(ctx, spec.user);
    struct core_restore rs = {
        .state = state == TASK_RUNNING && !attempt_open ? TASK_QUEUED : state,
        .ready_time = ready_time,
        .retry_at = retry_at,
        .started = attempt_start,
        .attempt_running = attempt_open,
    };
    if (attempt_open && spec.backend == CORE_BACKEND_SLURM) {
        rs.placement = (struct core_placement){.node = -1};
    } else if (attempt_open) {
        rs.placement = *placement;
        if (!daemon_gpus_from_machine(d, &rs.placement))
            fprintf(stderr, "drover daemon: task %lld runs on a GPU drover no longer has\n",
                    (long long)id);
    }
    if (core_restore(d->core, &spec, &rs) < 0) {
        fprintf(stderr, "drover daemon: task %lld could not be restored\n", (long long)id);
        ctx->failed++;
    } else if (attempt_open && spec.backend == CORE_BACKEND_SLURM) {
        slurm_adopt(d, id, attempts, attempt_start, run_dir, &rs.placement);
    } else if (attempt_open) {
        struct exec_status st;
        if (exec_probe(run_dir, &st) == EXEC_RUNNING) {
            struct run *r = run_add(d, id, attempts, exec_supervisor_pid(run_dir), false,
                                    xstrdup(run_dir), attempt_start, &rs.placement);
            json_t *info = store_task_exec_info(d->store, id);
            telemetry_watch(d, r, json_integer_value(json_object_get(info, "stall_ms")));
            json_decref(info);
        } else {
            xgrow((void **)&ctx->done, &ctx->cap, ctx->ndone + 1, sizeof *ctx->done);
            ctx->done[ctx->ndone++] = (struct pending){id, attempts, xstrdup(run_dir)};
        }
    }
    free(deps);
}

/* las's history of finished tasks (core_las_learn), from the store. */
static void restore_service(void *arg, double service_ms)
{
    core_las_learn(arg, service_ms);
}

int daemon_restore(struct daemon *d, char **err)
{
    struct restore_ctx ctx = {.d = d};
    char *draining = store_setting(d->store, "draining");
    /* The drain outlives restarts; a full disk (daemon/disk.c) drains too. */
    core_set_drain(d->core, (draining && strcmp(draining, "1") == 0) || disk_is_full(d));
    free(draining);
    int listed = store_each_live(d->store, restore_one, &ctx);
    free(ctx.users);
    if (listed < 0) {
        *err = xasprintf("cannot read the task list: %s", store_error(d->store));
        return -1;
    }
    daemon_request_restore_usage(d);
    if (d->cfg.las &&
        store_each_service(d->store, DAEMON_LAS_HISTORY, restore_service, d->core) < 0)
        fprintf(stderr, "drover daemon: cannot read what finished tasks attained: %s (las"
                        " learns from nothing)\n", store_error(d->store));
    core_restore_done(d->core, daemon_now(), &d->acts);
    size_t adopted = 0;
    for (struct run *r = d->runs; r; r = r->next)
        adopted++;
    for (size_t i = 0; i < ctx.ndone; i++) {
        finish(d, NULL, ctx.done[i].task, ctx.done[i].attempt, ctx.done[i].run_dir);
        free(ctx.done[i].run_dir);
    }
    daemon_kick(d);
    free(ctx.done);
    if (adopted || ctx.ndone)
        fprintf(stderr, "drover daemon: re-adopted %zu running attempts, %zu ended while"
                        " stopped\n", adopted, ctx.ndone);
    daemon_apply(d); /* on a full disk, what it cannot commit yet waits (daemon/disk.c) */
    exp_settle(d);   /* experiments a crash left running with nothing live */
    return 0;
}
