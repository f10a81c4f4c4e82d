/* Dependencies: resolving them, and what a task's end does to the tasks that wait on it.
 *
 * Each task keeps reverse edges (its dependents), so a task's end costs O(edges touched), and
 * the propagation down a chain runs on an explicit work list: a chain of 100,000 tasks that
 * fails at its head must not recurse 100,000 deep. */
#include <stdlib.h>

#include "core/internal.h"
#include "core/mem.h"

enum deps_status {
    DEPS_RESOLVED,
    DEPS_WAITING,  /* on a live, non-terminal task */
    DEPS_FAILED,   /* a success-dependency ended without success */
    DEPS_MISSING,  /* live-marked but not live, or marked with a non-terminal state */
};

static enum deps_status deps_status(const struct core *core, const struct core_dep *dep,
                                    struct core_task **target)
{
    int state = dep->state;
    *target = NULL;
    if (state == -1) {
        struct core_task *t = core_task_get(core, dep->id);
        if (t == NULL)
            return DEPS_MISSING;
        if (!task_state_terminal(t->state)) {
            *target = t;
            return DEPS_WAITING;
        }
        state = (int)t->state; /* ended, its attempt still being killed */
    }
    if (state < 0 || state >= TASK_NSTATES || !task_state_terminal((enum task_state)state))
        return DEPS_MISSING;
    if (state == TASK_SUCCEEDED || dep->kind == DEP_AFTER_ANY)
        return DEPS_RESOLVED;
    return DEPS_FAILED;
}

bool core_deps_valid(const struct core *core, const struct core_dep *deps, size_t ndeps)
{
    struct core_task *target;
    for (size_t i = 0; i < ndeps; i++)
        if (deps_status(core, &deps[i], &target) == DEPS_MISSING)
            return false;
    return true;
}

int64_t core_deps_failed(const struct core *core, const struct core_dep *deps, size_t ndeps,
                         bool missing_fails)
{
    struct core_task *target;
    for (size_t i = 0; i < ndeps; i++) {
        enum deps_status status = deps_status(core, &deps[i], &target);
        if (status == DEPS_MISSING && missing_fails && deps[i].kind != DEP_AFTER_ANY)
            status = DEPS_FAILED;
        if (status == DEPS_FAILED)
            return deps[i].id;
    }
    return 0;
}

void core_deps_link(struct core *core, struct core_task *t)
{
    struct core_task *target;
    for (size_t i = 0; i < t->ndeps; i++) {
        if (deps_status(core, &t->deps[i], &target) != DEPS_WAITING)
            continue;
        /* Most tasks have one or two dependents: start small (a 100,000-task chain). */
        if (target->dependents_cap == 0) {
            target->dependents = core_xmalloc(2 * sizeof *target->dependents);
            target->dependents_cap = 2;
        }
        core_xgrow((void **)&target->dependents, &target->dependents_cap,
                   target->ndependents + 1, sizeof *target->dependents);
        target->dependents[target->ndependents++] = (struct core_edge){
            .id = t->id,
            .serial = t->serial,
            .kind = t->deps[i].kind,
        };
        t->unresolved++;
    }
}

static void deps_push(struct core *core, size_t *n, struct core_task *t)
{
    core_xgrow((void **)&core->work, &core->work_cap, *n + 1, sizeof *core->work);
    core->work[(*n)++] = t;
}

/* One edge from the ended task `from` to its dependent d. Returns d if d ended with it. */
static struct core_task *deps_settle(struct core *core, const struct core_task *from,
                                     struct core_task *d, enum dep_kind kind,
                                     struct core_actions *out)
{
    if (from->state == TASK_SUCCEEDED || kind == DEP_AFTER_ANY) {
        if (d->unresolved == 0)
            core_bug();
        /* A held task stays held; core_release() sees that nothing is left to wait for. */
        if (--d->unresolved == 0 && d->state == TASK_PENDING) {
            core_task_move(core, d, TASK_QUEUED);
            core_emit_state(out, d->id, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0, 0);
        }
        return NULL;
    }
    core_task_move(core, d, TASK_UPSTREAM_FAILED);
    core_emit_state(out, d->id, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, from->id, 0);
    if (d->run != NULL) /* a Slurm task handed over behind it: scancel */
        core_emit(out, CORE_ACT_KILL, d->id);
    return d;
}

bool core_deps_chainable(const struct core *core, const struct core_task *t)
{
    struct core_task *target;
    size_t waiting = 0;
    for (size_t i = 0; i < t->ndeps; i++) {
        enum deps_status status = deps_status(core, &t->deps[i], &target);
        if (status == DEPS_RESOLVED)
            continue;
        if (status != DEPS_WAITING || target->backend != CORE_BACKEND_SLURM ||
            target->state != TASK_RUNNING || target->run == NULL || target->array_id != 0 ||
            target->attempts - target->attempts_base - 1 < target->max_retries)
            return false;
        waiting++;
    }
    return waiting > 0;
}

void core_deps_ended(struct core *core, struct core_task *t, struct core_actions *out)
{
    size_t n = 0;
    deps_push(core, &n, t);
    while (n > 0) {
        struct core_task *x = core->work[--n];
        for (size_t i = 0; i < x->ndependents; i++) {
            const struct core_edge *e = &x->dependents[i];
            struct core_task *d = core_task_get(core, e->id);
            /* A dependent freed since (cancelled, failed upstream elsewhere) left a stale edge. */
            if (d == NULL || d->serial != e->serial || task_state_terminal(d->state))
                continue;
            if (deps_settle(core, x, d, e->kind, out) != NULL)
                deps_push(core, &n, d);
        }
        free(x->dependents);
        x->dependents = NULL;
        x->ndependents = x->dependents_cap = 0;
        if (x->run == NULL)
            core_task_free(core, x);
    }
}
