/* Carrying out core's decisions: commit, then spawn or signal; and feeding attempt ends back. */
#include "daemon/daemon.h"
#include "daemon/owner.h"
#include "exec/exec.h"
#include "util/paths.h"
#include "util/parse.h"
#include "util/ratelog.h"
#include "util/xalloc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

core_time daemon_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (core_time)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void daemon_kick(struct daemon *d)
{
    event_active(d->kick, 0, 0);
}

static struct run *run_find_task(struct daemon *d, int64_t task)
{
    for (struct run *r = d->runs; r; r = r->next)
        if (r->task == task)
            return r;
    return NULL;
}

static const struct attempt_end *end_for_task(const struct daemon *d, int64_t task)
{
    for (size_t i = d->nends; i-- > 0;)
        if (d->ends[i].task == task)
            return &d->ends[i];
    return NULL;
}

/* The human reason for a state change; attempt details come from the attempt that ended. */
static const char *apply_reason(struct daemon *d, const struct core_action *act, char *buf,
                                size_t len)
{
    const struct attempt_end *end = end_for_task(d, act->task);
    char when[32];
    switch (act->reason) {
    case CORE_REASON_UPSTREAM:
        snprintf(buf, len, "dependency %lld did not succeed", (long long)act->reason_task);
        return buf;
    case CORE_REASON_CANCELLED:
        return "cancelled by user";
    case CORE_REASON_HELD:
        return "held by user";
    case CORE_REASON_RETRY:
        return "retried by user";
    case CORE_REASON_EXIT_CODE:
    case CORE_REASON_SIGNAL:
    case CORE_REASON_TIMEOUT:
    case CORE_REASON_EXEC_ERROR:
    case CORE_REASON_LOST:
    case CORE_REASON_STALLED:
    case CORE_REASON_OOM:
    case CORE_REASON_GPU_FAULT:
    case CORE_REASON_PREEMPTED:
        if (end == NULL)
            return NULL;
        if (act->state == TASK_RETRYING) {
            snprintf(buf, len, "attempt %d: %s; retrying in %s", end->attempt, end->reason,
                     format_duration(act->at - daemon_now(), when, sizeof when));
            return buf;
        }
        snprintf(buf, len, "attempt %d: %s", end->attempt, end->reason);
        return buf;
    default:
        return NULL;
    }
}

static char *run_dir_for(struct daemon *d, int64_t task, int attempt)
{
    return xasprintf("%s/runs/%lld/%d", d->home, (long long)task, attempt);
}

/* Writes the pending attempt ends and the batch's state changes, inside the caller's
 * transaction. Returns -1 on a store error. */
static int apply_write(struct daemon *d, const struct core_actions *acts, core_time now)
{
    char buf[512];
    for (size_t i = 0; i < d->nends; i++) {
        const struct attempt_end *e = &d->ends[i];
        int rc = e->discard ? store_attempt_discard(d->store, e->task, e->attempt)
                            : store_attempt_end(d->store, e->task, e->attempt, e->start,
                                                e->end, e->exit_code, e->signal, e->outcome,
                                                e->reason);
        if (rc == 0 && !e->discard && (e->peak > 0 || e->util >= 0))
            rc = store_attempt_usage(d->store, e->task, e->attempt, e->peak, e->util);
        if (rc == 0 && e->preempted)
            rc = store_task_preempted(d->store, e->task, e->overrun,
                                      e->preempt_off ? "it did not exit within its preemption"
                                                       " grace too often"
                                                     : NULL);
        if (rc == 0 && e->requeue)
            rc = store_task_requeue(d->store, e->task, e->new_claim,
                                    strcmp(e->outcome, "oom") == 0 ? "oom" : NULL);
        if (rc < 0)
            return -1;
        events_stage_attempt_end(d, e); /* published if this commits (daemon/events.c) */
    }
    for (size_t i = 0; i < acts->n; i++) {
        const struct core_action *a = &acts->v[i];
        int rc = 0;
        if (a->type == CORE_ACT_STATE) {
            const char *reason = apply_reason(d, a, buf, sizeof buf);
            rc = store_set_state(d->store, a, reason, now);
            if (rc == 0)
                events_stage_task(d, a->task, a->state, reason, now);
        } else if (a->type == CORE_ACT_START) {
            char *dir = a->backend == CORE_BACKEND_SLURM
                            ? xasprintf("%s/runs/%lld/%d", d->cfg.shared_dir,
                                        (long long)a->task, a->attempt)
                            : run_dir_for(d, a->task, a->attempt);
            struct core_placement machine = a->placement;
            daemon_gpus_to_machine(d, &machine);
            rc = store_attempt_start(d->store, a->task, a->attempt, now, &machine, dir);
            if (rc == 0 && a->backend == CORE_BACKEND_SLURM && a->attempt == 1)
                rc = store_task_slurm(d->store, a->task); /* spilled there, maybe */
            if (rc == 0)
                events_stage_attempt_start(d, a->task, a->attempt, &machine, now);
            free(dir);
        }
        if (rc < 0)
            return -1;
    }
    /* Experiments hear of their tasks' ends once the whole batch is written, so that the last
     * trial to end sees how every other one ended; a failed write of theirs fails the batch. */
    for (size_t i = 0; i < acts->n; i++) {
        const struct core_action *a = &acts->v[i];
        if (a->type == CORE_ACT_STATE && task_state_terminal(a->state) &&
            (exp_task_ended(d, a->task, a->state) < 0 ||
             notify_task_ended(d, a->task, now) < 0)) /* webhooks: the outbox, same commit */
            return -1;
    }
    return 0;
}

enum { APPLY_KEPT = -1, APPLY_LOST = -2 };

/* Writes and commits the batch in the transaction begun for it (by the caller, if caller_txn).
 * A commit that fails for want of room is tried again with some of the ballast given back
 * (daemon/disk.c). Returns 0; APPLY_KEPT if it failed but may be written again later; or
 * APPLY_LOST if the failed transaction took with it what core already holds — the caller's own
 * writes, or an experiment's new tasks (exp_task_ended, inside apply_write, submits them to core
 * as it inserts them) — so that writing it again would be wrong: the daemon must stop and
 * recover from the store. */
static int apply_commit(struct daemon *d, const struct core_actions *acts, core_time now,
                        bool caller_txn)
{
    bool lost = caller_txn;
    disk_before_commit(d);
    for (;;) {
        size_t before = d->acts.n;
        if (apply_write(d, acts, now) == 0) {
            if (store_commit(d->store) == 0) {
                d->nends = 0;
                return 0;
            }
        } else {
            store_rollback(d->store);
        }
        lost |= d->acts.n != before;
        if (lost || !disk_commit_failed(d, store_error_code(d->store)))
            break;
        store_begin(d->store);
    }
    static struct ratelog failing; /* retried every second while the disk stays full */
    ratelog(&failing, "drover daemon: cannot commit state: %s; %s", store_error(d->store),
            lost ? "stopping (a restart recovers)"
                 : "nothing of it is carried out until it is committed");
    return lost ? APPLY_LOST : APPLY_KEPT;
}

/* A batch that could not be committed goes back to the head of d->acts (before what writing it
 * added), to be committed — and only then carried out — by a later apply. */
static void apply_keep(struct daemon *d, struct core_actions *batch)
{
    struct core_actions later = d->acts;
    d->acts = *batch;
    memset(batch, 0, sizeof *batch);
    for (size_t i = 0; i < later.n; i++) {
        xgrow((void **)&d->acts.v, &d->acts.cap, d->acts.n + 1, sizeof *d->acts.v);
        d->acts.v[d->acts.n++] = later.v[i];
    }
    core_actions_free(&later);
}

/* Builds the attempt's environment: the submitter's, then drover's own variables. */
static char **spawn_env(struct daemon *d, json_t *env, const struct core_action *a,
                        json_int_t array_index, const char *ckpt)
{
    size_t n = json_object_size(env), i = 0;
    char **v = xcalloc(n + 10, sizeof *v);
    const char *k;
    json_t *val;
    static const char *const ours[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                       "DROVER_TASK_ID", "DROVER_ATTEMPT",
                                       "DROVER_CHECKPOINT_DIR", "DROVER_ARRAY_INDEX",
                                       "DROVER_METRICS_FILE"};
    json_object_foreach(env, k, val) {
        bool skip = false;
        for (size_t j = 0; j < sizeof ours / sizeof ours[0]; j++)
            skip |= strcmp(k, ours[j]) == 0;
        if (!skip && json_is_string(val))
            v[i++] = xasprintf("%s=%s", k, json_string_value(val));
    }
    char gpus[CORE_MAX_NODE_GPUS * 4] = "";
    for (int g = 0; g < a->placement.ngpus; g++) {
        size_t len = strlen(gpus);
        snprintf(gpus + len, sizeof gpus - len, "%s%d", g ? "," : "",
                 d->gpus.gpu[a->placement.gpu[g]].index);
    }
    v[i++] = xasprintf("CUDA_VISIBLE_DEVICES=%s", gpus);
    v[i++] = xstrdup("CUDA_DEVICE_ORDER=PCI_BUS_ID");
    v[i++] = xasprintf("DROVER_TASK_ID=%lld", (long long)a->task);
    v[i++] = xasprintf("DROVER_ATTEMPT=%d", a->attempt);
    v[i++] = xasprintf("DROVER_CHECKPOINT_DIR=%s", ckpt);
    v[i++] = xasprintf("DROVER_METRICS_FILE=%s/metrics/%lld.jsonl", d->home, (long long)a->task);
    if (array_index >= 0)
        v[i++] = xasprintf("DROVER_ARRAY_INDEX=%lld", (long long)array_index);
    return v;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

struct run *run_add(struct daemon *d, int64_t task, int attempt, pid_t pid, bool child,
                    char *run_dir, core_time start, const struct core_placement *placement)
{
    struct run *r = xcalloc(1, sizeof *r);
    r->task = task;
    r->attempt = attempt;
    r->pid = pid;
    r->child = child;
    r->run_dir = run_dir;
    r->start = start;
    r->placement = *placement;
    r->next = d->runs;
    d->runs = r;
    return r;
}

void run_remove(struct daemon *d, struct run *r)
{
    for (struct run **p = &d->runs; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    exp_run_free(r);
    free(r->run_dir);
    free(r);
}

/* The attempt could not start. For want of room (error ENOSPC, EDQUOT) that is the machine's
 * doing, not the task's: the attempt is forgotten, uses no retry, and the task waits, queued,
 * for the disk (daemon/disk.c drains core meanwhile). */
static void spawn_failed(struct daemon *d, const struct core_action *a, const char *why,
                         int error)
{
    struct attempt_end *e;
    bool no_room = error == ENOSPC || error == EDQUOT;
    xgrow((void **)&d->ends, &d->ends_cap, d->nends + 1, sizeof *d->ends);
    e = &d->ends[d->nends++];
    memset(e, 0, sizeof *e);
    e->task = a->task;
    e->attempt = a->attempt;
    e->end = daemon_now();
    e->exit_code = -1;
    e->outcome = no_room ? "not_started" : "lost";
    e->discard = no_room;
    snprintf(e->reason, sizeof e->reason, "could not start: %s", why);
    if (no_room)
        disk_no_room(d);
    core_attempt_exited(d->core, a->task, no_room ? CORE_OUTCOME_NOT_STARTED : CORE_OUTCOME_LOST,
                        e->end, &d->acts);
}

/* A first attempt's task directory, runs/TASK, made before exec_start makes runs/TASK/1: else
 * exec_start's mkdir of the attempt's directory fails (ENOENT) and it walks up (paths_mkdir_p),
 * two failing calls per task. A failure here is exec_start's to report: it tries again. */
static void spawn_task_dir(struct daemon *d, int64_t task)
{
    char *dir = xasprintf("%s/runs/%lld", d->home, (long long)task);
    if (mkdir(dir, 0700) == -1) {
        /* EEXIST (an attempt 1 not started before) or worse: see above */
    }
    free(dir);
}

static void spawn_attempt(struct daemon *d, const struct core_action *a, core_time now)
{
    json_t *info = store_task_exec_info(d->store, a->task);
    char *dir = run_dir_for(d, a->task, a->attempt), *err = NULL;
    char *ckpt = xasprintf("%s/checkpoints/%lld", d->home, (long long)a->task);
    json_t *cmd = json_object_get(info, "command");
    char **argv = xcalloc(json_array_size(cmd) + 1, sizeof *argv);
    for (size_t i = 0; i < json_array_size(cmd); i++)
        argv[i] = xstrdup(json_string_value(json_array_get(cmd, i)));
    char **env = spawn_env(d, json_object_get(info, "env"), a,
                           json_integer_value(json_object_get(info, "array_index")), ckpt);
    /* A task of another user's runs as that user (exec/identity.c); the daemon's own tasks (all
     * of a per-user daemon's) as today. */
    json_t *uid = json_object_get(info, "uid");
    bool owned = json_is_integer(uid) && (uid_t)json_integer_value(uid) != geteuid();
    struct exec_spec spec = {
        .task_id = a->task,
        .attempt = a->attempt,
        .argv = argv,
        .env = env,
        .workdir = json_string_value(json_object_get(info, "workdir")),
        .run_dir = dir,
        .timeout_ms = json_integer_value(json_object_get(info, "timeout_ms")),
        .grace_ms = d->grace_ms,
        .preempt_grace_ms = json_integer_value(json_object_get(info, "preempt_grace_ms")),
        .preempt_signal = (int)json_integer_value(json_object_get(info, "preempt_signal")),
        .set_umask = true,
        .task_umask = d->task_umask,
        .task_nofile = d->task_nofile,
        .as_owner = owned,
        .owner_uid = owned ? (uid_t)json_integer_value(uid) : 0,
        .owner = json_string_value(json_object_get(info, "user")),
    };
    pid_t pid;
    int error = 0;
    if (disk_is_full(d)) { /* decided before the disk filled, or across a user's undrain */
        err = xasprintf("disk full under %s", d->home);
        error = ENOSPC;
    } else if (owned && daemon_owner_prepare(d->home, a->task, spec.owner_uid, &err) < 0) {
        error = errno;
    } else if (!owned) {
        /* The checkpoint directory is the supervisor's to make (a failure, ENOSPC say, fails
         * exec_start as the run directory's would): each inode made here is daemon time. */
        spec.make_dir = ckpt;
        if (a->attempt == 1)
            spawn_task_dir(d, a->task);
    }
    if (err == NULL && exec_start(&spec, &pid, &err) == 0) {
        struct run *r = run_add(d, a->task, a->attempt, pid, true, dir, now, &a->placement);
        telemetry_watch(d, r, json_integer_value(json_object_get(info, "stall_ms")));
        telemetry_started(d, a->at, now);
        dir = NULL;
    } else {
        spawn_failed(d, a, err, error != 0 ? error : errno);
    }
    free(err);
    free(dir);
    free(ckpt);
    strv_free(argv);
    strv_free(env);
    json_decref(info);
}

/* Asks a running attempt to yield (its supervisor signals the task, and kills it after its
 * grace); its end comes as any other's, with the status saying preempted. A Slurm attempt holds
 * nothing here, so las never picks one; an attempt already ended is finished by its reaping. */
static void preempt_attempt(struct daemon *d, const struct core_action *a)
{
    struct run *r = run_find_task(d, a->task);
    if (r == NULL || r->slurm || r->attempt != a->attempt)
        return;
    if (exec_preempt(r->run_dir) == 0)
        d->preemptions++;
}

static void apply_wakeup(struct daemon *d, core_time now)
{
    core_time at = core_next_wakeup(d->core);
    event_del(d->wakeup);
    if (at == CORE_TIME_NEVER)
        return;
    int64_t ms = at > now ? at - now : 0;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(d->wakeup, &tv);
}

/* Commits the accumulated actions (in the transaction the caller began, if in_txn), carries
 * them out, and repeats for what carrying them out caused. */
static void carry_out(struct daemon *d, const struct core_actions *batch, core_time now)
{
    for (size_t i = 0; i < batch->n; i++) {
        const struct core_action *a = &batch->v[i];
        if (a->type == CORE_ACT_START && a->backend == CORE_BACKEND_SLURM) {
            slurm_start_attempt(d, a, now);
        } else if (a->type == CORE_ACT_START) {
            spawn_attempt(d, a, now);
        } else if (a->type == CORE_ACT_KILL) {
            struct run *r = run_find_task(d, a->task);
            if (r && r->slurm)
                slurm_cancel_attempt(d, r);
            else if (r)
                exec_cancel(r->run_dir);
        } else if (a->type == CORE_ACT_PREEMPT) {
            preempt_attempt(d, a);
        } else if (a->type == CORE_ACT_STATE && a->state == TASK_QUEUED) {
            daemon_kick(d);
        }
    }
    slurm_submit_waiting(d); /* the Slurm starts of the batch, an array's as one job */
}

/* Commits the accumulated actions (in the transaction the caller began, if in_txn) and carries
 * them out — or, if defer, leaves the first batch's carrying out to daemon_on_carry, after the
 * caller has answered its client — and repeats for what carrying them out caused. */
static int apply_loop(struct daemon *d, bool in_txn, bool defer)
{
    bool changed = false, first = true;
    int rc = 0;
    /* Once a batch is lost the daemon is on its way out: committing anything more (an attempt's
     * end without the state change that went with the lost batch, say) would split what belongs
     * together, and a finished task could run again after the restart. The store and the run
     * directories hold everything the next daemon needs. */
    if (d->store_lost) {
        if (in_txn)
            store_rollback(d->store);
        return -1;
    }
    while (in_txn || d->acts.n > 0 || d->nends > 0) {
        struct core_actions batch = d->acts;
        core_time now = daemon_now();
        bool caller_txn = in_txn;
        memset(&d->acts, 0, sizeof d->acts);
        if (!in_txn)
            store_begin(d->store);
        in_txn = false;
        int committed = apply_commit(d, &batch, now, caller_txn);
        if (committed == APPLY_KEPT) {
            apply_keep(d, &batch);
        } else if (committed == APPLY_LOST) {
            d->store_lost = true;
            core_actions_free(&batch);
            if (!caller_txn) /* the caller stops the daemon itself: see daemon_apply_txn */
                event_base_loopexit(d->base, NULL);
        }
        if (committed < 0) {
            rc = first ? -1 : 0; /* what the caller asked for was committed, or was not */
            break;
        }
        changed = true;
        first = false;
        if (defer) {
            for (size_t i = 0; i < batch.n; i++) {
                xgrow((void **)&d->deferred.v, &d->deferred.cap, d->deferred.n + 1,
                      sizeof *d->deferred.v);
                d->deferred.v[d->deferred.n++] = batch.v[i];
            }
            event_active(d->carry, 0, 0);
            defer = false;
        } else {
            carry_out(d, &batch, now);
        }
        core_actions_free(&batch);
    }
    if (changed)
        ops_notify_waiters(d);
    apply_wakeup(d, daemon_now());
    return rc;
}

int daemon_write_acts(struct daemon *d, struct core_actions *written)
{
    int rc = apply_write(d, &d->acts, daemon_now());
    for (size_t i = 0; rc == 0 && i < d->acts.n; i++) {
        xgrow((void **)&written->v, &written->cap, written->n + 1, sizeof *written->v);
        written->v[written->n++] = d->acts.v[i];
    }
    core_actions_clear(&d->acts);
    return rc;
}

void daemon_carry_committed(struct daemon *d, struct core_actions *batch)
{
    carry_out(d, batch, daemon_now());
    core_actions_clear(batch);
}

void daemon_on_carry(evutil_socket_t fd, short what, void *arg)
{
    struct daemon *d = arg;
    struct core_actions batch = d->deferred;
    memset(&d->deferred, 0, sizeof d->deferred);
    carry_out(d, &batch, daemon_now());
    core_actions_free(&batch);
    daemon_apply(d); /* what fails to commit waits for the next try (daemon/disk.c) */
}

int daemon_apply(struct daemon *d)
{
    return apply_loop(d, false, false);
}

int daemon_apply_txn(struct daemon *d)
{
    return apply_loop(d, true, true);
}

void daemon_gpus_to_machine(const struct daemon *d, struct core_placement *pl)
{
    for (int i = 0; i < pl->ngpus; i++)
        if (pl->gpu[i] >= 0 && pl->gpu[i] < d->gpus.count)
            pl->gpu[i] = d->gpus.gpu[pl->gpu[i]].index;
}

bool daemon_gpus_from_machine(const struct daemon *d, struct core_placement *pl)
{
    for (int i = 0; i < pl->ngpus; i++) {
        int found = -1;
        for (int g = 0; g < d->gpus.count && found < 0; g++)
            if (d->gpus.gpu[g].index == pl->gpu[i])
                found = g;
        if (found < 0)
            return false;
        pl->gpu[i] = found;
    }
    return true;
}
