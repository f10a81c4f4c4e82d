/* Attempts: starting one, tracking what it holds, and what its end makes of the task. */
#include <stdlib.h>

#include "core/internal.h"
#include "core/mem.h"

/* The backoff of a task that names none (core/core.h). */
static const int64_t attempt_default_backoff[] = CORE_DEFAULT_BACKOFF_MS;

int core_array_running(const struct core *core, int64_t array_id)
{
    const struct core_array *array = core_map_get(&core->arrays, array_id);
    return array != NULL ? array->running : 0;
}

static void attempt_array_count(struct core *core, int64_t array_id, int delta)
{
    if (array_id == 0)
        return;
    struct core_array *array = core_map_get(&core->arrays, array_id);
    if (array == NULL) {
        array = core_xcalloc(1, sizeof *array);
        array->id = array_id;
        core_map_put(&core->arrays, array_id, array);
    }
    array->running += delta;
    if (array->running <= 0)
        free(core_map_del(&core->arrays, array_id));
}

void core_attempt_track(struct core *core, struct core_task *t, const struct core_placement *pl,
                        core_time started)
{
    struct core_run *run = core_xcalloc(1, sizeof *run);
    run->placement = *pl;
    run->started = started;
    run->task = t;
    run->claimed = core_place_valid(&core->place, pl);
    if (run->claimed)
        core_place_claim(&core->place, pl, &t->req);
    /* core->running is kept youngest first, and by task id among attempts started at the same
     * time (sched.c reserves what the youngest hold): a start goes at or near the head; a
     * restored attempt may have to walk to its place. A Slurm attempt holds nothing here, so
     * nothing reserves around it: it goes on a list of its own, unordered, so that a pass that
     * hands 100,000 of them over costs O(1) each rather than a walk past all the others. */
    if (t->backend == CORE_BACKEND_SLURM) {
        run->prev = NULL;
        run->next = core->slurm_running;
        if (run->next != NULL)
            run->next->prev = run;
        core->slurm_running = run;
        t->run = run;
        attempt_array_count(core, t->array_id, 1);
        core_user_track(core, t, started, 1);
        return;
    }
    struct core_run *after = NULL;
    for (struct core_run *r = core->running;
         r != NULL && (r->started > started || (r->started == started && r->task->id < t->id));
         r = r->next)
        after = r;
    run->prev = after;
    run->next = after != NULL ? after->next : core->running;
    if (run->next != NULL)
        run->next->prev = run;
    if (after != NULL)
        after->next = run;
    else
        core->running = run;
    core->nrunning++;
    t->run = run;
    attempt_array_count(core, t->array_id, 1);
    core_user_track(core, t, started, 1);
    core_when_track(core, t);
}

void core_attempt_untrack(struct core *core, struct core_task *t)
{
    struct core_run *run = t->run;
    /* Attained service (las), kept whatever the policy: GPU-ms of every attempt, whatever
     * its outcome. */
    if (core->now > run->started) {
        t->last_run = core->now - run->started;
        t->run_total += t->last_run;
        t->service += core_las_gpus(t) * (double)t->last_run;
    } else {
        t->last_run = 0;
    }
    if (run->claimed)
        core_place_release(&core->place, &run->placement, &t->req);
    bool slurm = t->backend == CORE_BACKEND_SLURM;
    if (run->prev != NULL)
        run->prev->next = run->next;
    else if (slurm)
        core->slurm_running = run->next;
    else
        core->running = run->next;
    if (run->next != NULL)
        run->next->prev = run->prev;
    if (!slurm)
        core->nrunning--;
    attempt_array_count(core, t->array_id, -1);
    core_user_track(core, t, core->now, -1);
    free(run);
    t->run = NULL;
}

void core_attempt_start(struct core *core, struct core_task *t, const struct core_placement *pl,
                        core_time now, struct core_actions *out)
{
    core_time ready = t->ready_time;
    core_task_move(core, t, TASK_RUNNING);
    bool promoted = t->promoted;
    t->promoted = false;
    t->attempts++;
    core_attempt_track(core, t, pl, now);
    if (core->policy.las)
        core_las_protect(core, t, promoted);
    struct core_action *act = core_emit(out, CORE_ACT_START, t->id);
    act->attempt = t->attempts;
    act->at = ready;
    act->placement = *pl;
    act->backend = t->backend;
    act->array_id = t->array_id;
    if (t->backend == CORE_BACKEND_SLURM && t->ndependents > 0)
        core_slurm_chain(core, t, now, out);
}

static int64_t attempt_backoff(const struct core_task *t, int retry)
{
    const int64_t *backoff = t->backoff;
    int n = t->nbackoff;
    if (n == 0) {
        backoff = attempt_default_backoff;
        n = (int)(sizeof attempt_default_backoff / sizeof attempt_default_backoff[0]);
    }
    int64_t ms = backoff[retry < n ? retry : n - 1];
    return ms > 0 ? ms : 0;
}

static enum core_reason attempt_reason(enum core_outcome outcome)
{
    switch (outcome) {
    case CORE_OUTCOME_SUCCESS:
        return CORE_REASON_SUCCEEDED;
    case CORE_OUTCOME_EXIT_CODE:
        return CORE_REASON_EXIT_CODE;
    case CORE_OUTCOME_SIGNAL:
        return CORE_REASON_SIGNAL;
    case CORE_OUTCOME_TIMEOUT:
        return CORE_REASON_TIMEOUT;
    case CORE_OUTCOME_EXEC_ERROR:
        return CORE_REASON_EXEC_ERROR;
    case CORE_OUTCOME_STALLED:
        return CORE_REASON_STALLED;
    default:
        return CORE_REASON_LOST;
    }
}

/* A failed attempt: retry while the budget lasts, else the task ends. Retries used before this
 * attempt = attempts - retry_base - 1 (the attempt that just ended is counted in attempts). */
static void attempt_failed(struct core *core, struct core_task *t, enum core_outcome outcome,
                           core_time now, struct core_actions *out)
{
    enum core_reason reason = attempt_reason(outcome);
    int retries_used = t->attempts - t->attempts_base - 1;
    if (retries_used < 0)
        retries_used = 0;
    if (outcome != CORE_OUTCOME_EXEC_ERROR && retries_used < t->max_retries) {
        t->retry_at = core_time_add(now, attempt_backoff(t, retries_used));
        core_task_move(core, t, TASK_RETRYING);
        core_emit_state(out, t->id, TASK_RETRYING, reason, 0, t->retry_at);
        return;
    }
    enum task_state to = outcome == CORE_OUTCOME_TIMEOUT ? TASK_TIMED_OUT : TASK_FAILED;
    core_task_move(core, t, to);
    core_emit_state(out, t->id, to, reason, 0, 0);
    core_deps_ended(core, t, out);
}

int core_attempt_exited(struct core *core, int64_t id, enum core_outcome outcome, core_time now,
                        struct core_actions *out)
{
    struct core_task *t = core_task_get(core, id);
    if (t == NULL || t->run == NULL)
        return -1;
    now = core_clock(core, now);
    core_attempt_untrack(core, t);
    if (task_state_terminal(t->state)) {
        /* Cancelled while running: its dependents were settled at the cancel. */
        core_task_free(core, t);
        return 0;
    }
    switch (outcome) {
    case CORE_OUTCOME_SUCCESS:
        if (core->policy.las)
            core_las_ended(core, t);
        core_task_move(core, t, TASK_SUCCEEDED);
        core_emit_state(out, t->id, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0, 0);
        core_deps_ended(core, t, out);
        break;
    case CORE_OUTCOME_NOT_STARTED:
        /* The driver never spawned it: the attempt number is handed out again and nothing
         * counts against the retries. A Slurm task handed over behind its dependencies waits
         * for them again. */
        t->attempts--;
        core_task_move(core, t, t->unresolved > 0 ? TASK_PENDING : TASK_QUEUED);
        core_emit_state(out, t->id, t->unresolved > 0 ? TASK_PENDING : TASK_QUEUED,
                        CORE_REASON_NONE, 0, 0);
        break;
    case CORE_OUTCOME_PREEMPTED:
        /* Stopped to make room: it runs again later (from its checkpoint), and this attempt
         * does not use up a retry. */
        t->attempts_base++;
        t->preempted++;
        core_task_move(core, t, TASK_QUEUED);
        core_emit_state(out, t->id, TASK_QUEUED, CORE_REASON_PREEMPTED, 0, 0);
        break;
    case CORE_OUTCOME_GPU_FAULT:
        /* Not the task's fault: it runs again, and this attempt does not use up a retry. */
        t->attempts_base++;
        core_task_move(core, t, TASK_QUEUED);
        core_emit_state(out, t->id, TASK_QUEUED, CORE_REASON_GPU_FAULT, 0, 0);
        break;
    default:
        attempt_failed(core, t, outcome, now, out);
        break;
    }
    return 0;
}

int core_attempt_exited_oom(struct core *core, int64_t id, uint64_t new_gpu_mem, core_time now,
                            struct core_actions *out)
{
    struct core_task *t = core_task_get(core, id);
    if (t == NULL || t->run == NULL)
        return -1;
    if (t->req.gpus == 0 || t->req.gpu_mem == 0 || task_state_terminal(t->state))
        return core_attempt_exited(core, id, CORE_OUTCOME_EXIT_CODE, now, out);
    now = core_clock(core, now);
    /* Released under the claim it held, then claimed larger from now on. */
    core_attempt_untrack(core, t);
    uint64_t smallest = UINT64_MAX;
    for (int i = 0; i < core->place.nnodes; i++)
        for (int g = 0; g < core->place.nodes[i].ngpus; g++)
            if (core->place.nodes[i].gpu[g].mem_total < smallest)
                smallest = core->place.nodes[i].gpu[g].mem_total;
    t->req.gpu_mem = new_gpu_mem >= smallest ? 0 : new_gpu_mem;
    t->attempts_base++;
    core_task_move(core, t, TASK_QUEUED);
    core_emit_state(out, t->id, TASK_QUEUED, CORE_REASON_OOM, 0, 0);
    return 0;
}
