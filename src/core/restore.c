/* Restoring the live tasks after a daemon restart.
 *
 * core_restore() takes each task as the store holds it; core_restore_done() then does what needs
 * all of them: queueing the queued ones in their order, linking dependencies among restored
 * tasks, and settling what the restart left undecided (a dependency that ended, or vanished,
 * while the daemon was down). The retry budget carries over through spec.retry_base. */
#include <stdlib.h>

#include "core/internal.h"
#include "core/mem.h"

static bool restore_valid(const struct core *core, const struct core_task_spec *spec,
                          const struct core_restore *st)
{
    if (spec->id <= 0 || core_task_get(core, spec->id) != NULL)
        return false;
    if ((int)st->state < 0 || st->state >= TASK_NSTATES)
        return false;
    if (spec->ndeps > 0 && spec->deps == NULL)
        return false;
    bool terminal = task_state_terminal(st->state);
    bool running = st->state == TASK_RUNNING || (terminal && st->attempt_running);
    if (terminal && !st->attempt_running)
        return false; /* not live: nothing to restore */
    if (!terminal && st->state != TASK_RUNNING && st->attempt_running)
        return false;
    return !running || spec->backend == CORE_BACKEND_SLURM ||
           core_place_valid(&core->place, &st->placement);
}

static void restore_remember(struct core *core, int64_t id)
{
    core_xgrow((void **)&core->restored, &core->restored_cap, core->nrestored + 1,
               sizeof *core->restored);
    core->restored[core->nrestored++] = id;
}

int core_restore(struct core *core, const struct core_task_spec *spec,
                 const struct core_restore *st)
{
    if (!restore_valid(core, spec, st))
        return -1;
    struct core_task *t = core_task_alloc(core, spec);
    core_task_add(core, t, st->state);
    switch (st->state) {
    case TASK_HELD:
    case TASK_PENDING:
        restore_remember(core, t->id);
        break;
    case TASK_QUEUED:
        /* Queued in restore_done, sorted: the store's order need not be the queue's. */
        t->ready_time = st->ready_time;
        if (st->ready_time > core->ready_clock)
            core->ready_clock = st->ready_time;
        restore_remember(core, t->id);
        break;
    case TASK_RETRYING:
        t->retry_at = st->retry_at;
        core_retry_push(&core->retry, t);
        break;
    default: /* RUNNING, or ended with its attempt still running */
        core_attempt_track(core, t, &st->placement, st->started);
        /* A Slurm task handed over behind its dependencies still waits on them in core. */
        if (st->state == TASK_RUNNING && t->backend == CORE_BACKEND_SLURM && t->ndeps > 0)
            restore_remember(core, t->id);
        break;
    }
    return 0;
}

static int restore_cmp_ready(const void *a, const void *b)
{
    const struct core_task *x = *(const struct core_task *const *)a;
    const struct core_task *y = *(const struct core_task *const *)b;
    if (x->ready_time != y->ready_time)
        return x->ready_time < y->ready_time ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Inserting in ready order keeps every insert an append. */
static void restore_queue(struct core *core)
{
    struct core_task **v = core_xmalloc(core->nrestored * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < core->nrestored; i++) {
        struct core_task *t = core_task_get(core, core->restored[i]);
        if (t != NULL && t->state == TASK_QUEUED && !t->in_queue && t->parked == CORE_PARK_NONE &&
            !t->on_offpeak)
            v[n++] = t;
    }
    qsort(v, n, sizeof *v, restore_cmp_ready);
    for (size_t i = 0; i < n; i++)
        core_when_enqueue(core, v[i], true);
    free(v);
}

static bool restore_waits(const struct core_task *t)
{
    return t != NULL && (t->state == TASK_HELD || t->state == TASK_PENDING ||
                         (t->state == TASK_RUNNING && t->backend == CORE_BACKEND_SLURM));
}

void core_restore_done(struct core *core, core_time now, struct core_actions *out)
{
    core_clock(core, now);
    restore_queue(core);
    /* Link every edge before failing anything, so a failure reaches restored dependents. */
    int64_t *failed = core_xcalloc(core->nrestored, sizeof *failed);
    for (size_t i = 0; i < core->nrestored; i++) {
        struct core_task *t = core_task_get(core, core->restored[i]);
        if (!restore_waits(t))
            continue;
        failed[i] = core_deps_failed(core, t->deps, t->ndeps, true);
        if (failed[i] == 0)
            core_deps_link(core, t);
    }
    for (size_t i = 0; i < core->nrestored; i++) {
        struct core_task *t = core_task_get(core, core->restored[i]);
        if (failed[i] == 0 || !restore_waits(t))
            continue;
        bool handed_over = t->run != NULL;
        core_task_move(core, t, TASK_UPSTREAM_FAILED);
        core_emit_state(out, t->id, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, failed[i], 0);
        if (handed_over)
            core_emit(out, CORE_ACT_KILL, t->id);
        core_deps_ended(core, t, out);
    }
    for (size_t i = 0; i < core->nrestored; i++) {
        struct core_task *t = core_task_get(core, core->restored[i]);
        if (t != NULL && t->state == TASK_PENDING && t->unresolved == 0) {
            core_task_move(core, t, TASK_QUEUED);
            core_emit_state(out, t->id, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0, 0);
        }
    }
    free(failed);
    core->nrestored = 0;
}
