/* Backends: which tasks go to a Slurm cluster, and starting them there.
 *
 * A Slurm task is decided at submission (core_choose_backend: asked for, or spilled because no
 * node here could ever run it) and keeps its backend for life. When ready it waits in a queue of
 * its own, in the same order as local tasks (priority, then ready time), and a pass starts it at
 * once: Slurm's own scheduler decides when it really runs, so core holds it back only for what
 * drover promises itself — its array's parallel limit, a drain, and a cluster that does not
 * answer (the daemon's commands to it failed: core_set_slurm_up). Its attempt claims nothing
 * here (placement node -1), counts against no user limit or share of this machine, and is never
 * reserved around by backfill (an unclaimed run is skipped there).
 *
 * Cost: a pass walks the Slurm queue once, O(1) per task; tasks skipped for their array's limit
 * count against max_scan, as in the local pass. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

int core_choose_backend(const struct core *core, const struct core_request *req,
                        enum core_backend asked, enum core_backend *backend, char *why,
                        size_t len)
{
    if (asked == CORE_BACKEND_SLURM) {
        if (!core->policy.slurm) {
            if (why != NULL && len > 0)
                snprintf(why, len, "no Slurm cluster is set up (shared-dir)");
            return -1;
        }
        *backend = CORE_BACKEND_SLURM;
        return 0;
    }
    if (core_check_request(core, req, why, len) == 0) {
        *backend = CORE_BACKEND_LOCAL;
        return 0;
    }
    if (core->policy.slurm && core->policy.spill != CORE_SPILL_NEVER) {
        *backend = CORE_BACKEND_SLURM;
        if (why != NULL && len > 0)
            why[0] = '\0';
        return 0;
    }
    return -1;
}

/* An array's first attempts all go to Slurm at once, as one Slurm array that keeps the parallel
 * limit itself (--array=…%K); a later attempt (a retry, submitted alone) waits until fewer than
 * K of the array's attempts are in Slurm, so that together they never exceed K. */
static bool backend_array_full(const struct core *core, const struct core_task *t)
{
    return t->array_id != 0 && t->array_limit > 0 && t->attempts > 0 &&
           core_array_running(core, t->array_id) >= t->array_limit;
}

void core_set_slurm_up(struct core *core, bool up)
{
    core->slurm_down = !up;
}

void core_schedule_slurm(struct core *core, core_time now, struct core_actions *out)
{
    if (core->slurm_down || core->slurm_queue.n == 0)
        return;
    const struct core_placement none = {.node = -1};
    int skipped = 0, max_scan = core->policy.max_scan;
    struct core_task *t;
    core_queue_iter_start(&core->slurm_queue);
    while ((t = core_queue_iter_next(&core->slurm_queue)) != NULL) {
        if (backend_array_full(core, t)) {
            if (max_scan > 0 && ++skipped >= max_scan)
                break;
            continue;
        }
        core_attempt_start(core, t, &none, now, out);
    }
}

/* Whether t may be handed to Slurm now, behind its dependencies (Slurm's afterok/afterany). */
static bool backend_chain_ready(const struct core *core, const struct core_task *t)
{
    if (t->backend != CORE_BACKEND_SLURM || t->state != TASK_PENDING || t->unresolved == 0 ||
        core->slurm_down || core->draining)
        return false;
    if (backend_array_full(core, t))
        return false;
    return core_deps_chainable(core, t);
}

void core_slurm_chain_one(struct core *core, struct core_task *t, core_time now,
                          struct core_actions *out)
{
    const struct core_placement none = {.node = -1};
    if (backend_chain_ready(core, t))
        core_attempt_start(core, t, &none, now, out); /* chains its own dependents */
}

/* Iterative, not recursive, over a chain: core_attempt_start calls back here for each task it
 * hands over; inside a walk that call only appends the task to core->chain, whose dependents
 * the walk then looks at in turn, so a chain of any length costs no stack. */
void core_slurm_chain(struct core *core, struct core_task *t, core_time now,
                      struct core_actions *out)
{
    if (core->chain_depth > 0) { /* inside a chain being walked: the walker below picks it up */
        core_xgrow((void **)&core->chain, &core->chain_cap, core->nchain + 1,
                   sizeof *core->chain);
        core->chain[core->nchain++] = t->id;
        return;
    }
    const struct core_placement none = {.node = -1};
    core->chain_depth++;
    core->nchain = 0;
    core_xgrow((void **)&core->chain, &core->chain_cap, 1, sizeof *core->chain);
    core->chain[core->nchain++] = t->id;
    for (size_t k = 0; k < core->nchain; k++) {
        struct core_task *x = core_task_get(core, core->chain[k]);
        if (x == NULL)
            continue;
        for (size_t i = 0; i < x->ndependents; i++) {
            const struct core_edge *e = &x->dependents[i];
            struct core_task *d = core_task_get(core, e->id);
            if (d != NULL && d->serial == e->serial && backend_chain_ready(core, d))
                core_attempt_start(core, d, &none, now, out); /* appends d to the chain */
        }
    }
    core->nchain = 0;
    core->chain_depth--;
}

/* ---- spill = after DURATION ------------------------------------------------------------------
 * Every local task that becomes queued is noted in a FIFO with its ready time; ready times are
 * handed out in order (core_ready_time), so the FIFO is sorted and a pass looks only at its
 * head: O(1) per task over its whole wait, however long the queue. An entry whose task started,
 * left the queue (an off-peak task when the window closed, core/when.c) or became queued again
 * since (a new ready time) is dropped when reached. */

void core_spill_note(struct core *core, const struct core_task *t)
{
    if (!core->policy.slurm || core->policy.spill != CORE_SPILL_AFTER ||
        t->backend != CORE_BACKEND_LOCAL)
        return;
    if (core->spill_head > 0 && core->spill_head * 2 >= core->nspill) {
        memmove(core->spill, core->spill + core->spill_head,
                (core->nspill - core->spill_head) * sizeof *core->spill);
        core->nspill -= core->spill_head;
        core->spill_head = 0;
    }
    core_xgrow((void **)&core->spill, &core->spill_cap, core->nspill + 1, sizeof *core->spill);
    core->spill[core->nspill++] = (struct core_spill_entry){t->id, t->serial, t->ready_time};
}

static bool backend_spill_live(const struct core *core, const struct core_spill_entry *e,
                               struct core_task **out)
{
    struct core_task *t = core_task_get(core, e->id);
    *out = t;
    return t != NULL && t->serial == e->serial && t->state == TASK_QUEUED && t->in_queue &&
           t->backend == CORE_BACKEND_LOCAL && t->ready_time == e->ready;
}

void core_spill_due(struct core *core, core_time now)
{
    if (core->slurm_down)
        return;
    while (core->spill_head < core->nspill) {
        const struct core_spill_entry *e = &core->spill[core->spill_head];
        struct core_task *t;
        if (!backend_spill_live(core, e, &t)) {
            core->spill_head++;
            continue;
        }
        if (core_time_add(e->ready, core->policy.spill_after_ms) > now)
            break;
        core->spill_head++;
        /* Off this machine's queue onto Slurm's, keeping its place in time. */
        core_queue_remove(core_task_queue(core, t), t);
        t->backend = CORE_BACKEND_SLURM;
        core_queue_insert(core_task_queue(core, t), t);
    }
}

core_time core_spill_next(const struct core *core)
{
    for (size_t i = core->spill_head; i < core->nspill && !core->slurm_down; i++) {
        struct core_task *t;
        if (backend_spill_live(core, &core->spill[i], &t))
            return core_time_add(core->spill[i].ready, core->policy.spill_after_ms);
    }
    return CORE_TIME_NEVER;
}
