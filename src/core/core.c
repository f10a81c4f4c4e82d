/* The scheduler's object, its tasks, and the user events (submit, cancel, hold, release,
 * priority).
 *
 * Every live task is in core->tasks (id -> task). Where else it is follows from its state and
 * is kept so by core_task_move(): QUEUED tasks are in the ready queue (or parked out of it
 * until their begin time or the off-peak window: core/when.c), RETRYING ones in the retry heap, and a task with a running attempt (RUNNING, or terminal with a kill in flight) is
 * on core->running. A task that reaches a terminal state with no attempt running is freed. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"
#include "core/state.h"

struct core_policy core_policy_default(void)
{
    return (struct core_policy){
        .aging_ms = 60000,
        .strict_order = false,
        .backfill = true,
        .best_fit = true,
        .max_scan = 10000,
        .fair_share = true,
        .fair_share_half_life_ms = 7LL * 24 * 3600 * 1000,
    };
}

/* Tiresias-like: three queues, split at 1 and 10 GPU-hours... measured in docs/SCHEDULING.md. */
void core_policy_las(struct core_policy *policy)
{
    policy->las = true;
    policy->las_nthresholds = 2;
    policy->las_threshold[0] = 3600;
    policy->las_threshold[1] = 36000;
    policy->las_min_run_ms = 10 * 60 * 1000;
    /* The guard (docs/BENCHMARKS.md, "Preemptive least-attained-service"): no K; a task that
     * waited 12 h in all keeps its GPUs for as long as it had waited, one that waited 100 h
     * in all goes first; and nothing is preempted that the history expects to end sooner
     * than the task that would take its place. */
    policy->las_starve_k = 0;
    policy->las_starve_total_ms = 100 * 3600 * 1000LL;
    policy->las_protect_wait_ms = 12 * 3600 * 1000LL;
    policy->las_protect_ratio = 1;
    policy->las_mrl_factor = 1;
}

struct core *core_new(const struct core_policy *policy)
{
    struct core *core = core_xcalloc(1, sizeof *core);
    core->policy = policy != NULL ? *policy : core_policy_default();
    core->las_wakeup = CORE_TIME_NEVER;
    core->las_promote_next = CORE_TIME_NEVER;
    if (core->policy.las) {
        /* las orders by its queues, then priority, then ready time: no aging. */
        core->policy.aging_ms = 0;
        if (core->policy.las_nthresholds < 0)
            core->policy.las_nthresholds = 0;
        if (core->policy.las_nthresholds > CORE_LAS_MAX)
            core->policy.las_nthresholds = CORE_LAS_MAX;
    }
    core_queue_init(&core->queue, core->policy.aging_ms, &core->shapes);
    core_queue_init(&core->slurm_queue, core->policy.aging_ms, &core->shapes);
    core->now = INT64_MIN;
    core->ready_clock = INT64_MIN;
    core->off_open = core->off_close = CORE_TIME_NEVER;
    return core;
}

void core_free(struct core *core)
{
    if (core == NULL)
        return;
    /* Collected first: freeing deletes from the map, which moves entries under an iteration. */
    struct core_task **all = core_xmalloc(core->tasks.n * sizeof *all);
    size_t n = 0;
    for (size_t i = 0; i < core->tasks.cap; i++)
        if (core->tasks.keys[i] != 0)
            all[n++] = core->tasks.values[i];
    for (size_t i = 0; i < n; i++)
        core_task_free(core, all[i]);
    free(all);
    for (size_t i = 0; i < core->arrays.cap; i++)
        if (core->arrays.keys[i] != 0)
            free(core->arrays.values[i]);
    core_map_free(&core->tasks);
    core_map_free(&core->arrays);
    core_queue_free(&core->queue);
    core_queue_free(&core->slurm_queue);
    free(core->chain);
    free(core->spill);
    core_users_free(core);
    core_shapes_free(&core->shapes);
    core_retry_free(&core->retry);
    core_retry_free(&core->later);
    core_place_free(&core->place);
    core_place_free(&core->scratch);
    free(core->scratch_stamp);
    free(core->seen_stamp);
    free(core->rsv_whole);
    free(core->cand);
    free(core->restored);
    free(core->work);
    free(core->ends);
    free(core->las_history);
    free(core);
}

/* Meant to be called once, first; if it is called again, running attempts are claimed again on
 * the new inventory where they still fit its shape. */
void core_set_nodes(struct core *core, const struct core_node *nodes, int nnodes)
{
    core_place_init(&core->place, nodes, nnodes);
    core_place_copy(&core->scratch, &core->place);
    size_t n = (size_t)core->place.nnodes;
    free(core->scratch_stamp);
    free(core->seen_stamp);
    free(core->rsv_whole);
    free(core->cand);
    core->scratch_stamp = core_xcalloc(n + 1, sizeof *core->scratch_stamp);
    core->seen_stamp = core_xcalloc(n + 1, sizeof *core->seen_stamp);
    core->rsv_whole = core_xcalloc(n + 1, sizeof *core->rsv_whole);
    core->cand = core_xcalloc(n + 1, sizeof *core->cand);
    core->stamp = 1;
    core->version++;
    core->memo.valid = false;
    for (struct core_run *run = core->running; run != NULL; run = run->next) {
        run->claimed = core_place_valid(&core->place, &run->placement);
        if (run->claimed)
            core_place_claim(&core->place, &run->placement, &run->task->req);
    }
}

int core_check_request(const struct core *core, const struct core_request *req, char *why,
                       size_t len)
{
    return core_place_check(&core->place, req, why, len);
}

core_time core_clock(struct core *core, core_time now)
{
    if (now > core->now)
        core->now = now;
    return core->now;
}

core_time core_ready_time(struct core *core)
{
    if (core->now > core->ready_clock)
        core->ready_clock = core->now;
    return core->ready_clock;
}

core_time core_time_add(core_time t, int64_t ms)
{
    if (ms > 0 && t > CORE_TIME_NEVER - ms)
        return CORE_TIME_NEVER;
    return t + ms;
}

/* ---- tasks --------------------------------------------------------------------------------- */

struct core_task *core_task_get(const struct core *core, int64_t id)
{
    return core_map_get(&core->tasks, id);
}

struct core_task *core_task_alloc(struct core *core, const struct core_task_spec *spec)
{
    struct core_task *t = core_xcalloc(1, sizeof *t);
    t->id = spec->id;
    t->serial = ++core->serial;
    t->owner = core_user_get(core, spec->user);
    t->priority = spec->priority;
    t->qprio = spec->priority;
    t->preemptible = spec->preemptible;
    t->submit_time = spec->submit_time;
    t->begin = spec->begin;
    t->off_peak = spec->off_peak;
    if (t->off_peak)
        core->noffpeak++;
    t->service = spec->service > 0 ? spec->service : 0;
    t->run_total = spec->run_ms > 0 ? spec->run_ms : 0;
    t->req = spec->req;
    t->max_retries = spec->max_retries < 0 ? 0 : spec->max_retries;
    t->nbackoff = spec->nbackoff < 0 ? 0 : spec->nbackoff;
    if (t->nbackoff > CORE_MAX_BACKOFF)
        t->nbackoff = CORE_MAX_BACKOFF;
    memcpy(t->backoff, spec->backoff, (size_t)t->nbackoff * sizeof t->backoff[0]);
    t->array_id = spec->array_id;
    t->backend = spec->backend;
    t->array_limit = spec->array_limit;
    t->attempts = spec->attempts < 0 ? 0 : spec->attempts;
    t->attempts_base = spec->retry_base < 0 ? 0 : spec->retry_base;
    if (t->attempts_base > t->attempts)
        t->attempts_base = t->attempts;
    if (spec->ndeps > 0) {
        t->deps = core_xmalloc(spec->ndeps * sizeof *t->deps);
        memcpy(t->deps, spec->deps, spec->ndeps * sizeof *t->deps);
        t->ndeps = spec->ndeps;
    }
    return t;
}

void core_task_add(struct core *core, struct core_task *t, enum task_state state)
{
    t->state = state;
    core->version++;
    core->counts[state]++;
    t->owner->counts[state]++;
    core_map_put(&core->tasks, t->id, t);
}

void core_task_free(struct core *core, struct core_task *t)
{
    core_when_unqueue(core, t);
    if (t->off_peak)
        core->noffpeak--;
    if (t->state == TASK_RETRYING)
        core_retry_remove(&core->retry, t);
    if (t->run != NULL)
        core_attempt_untrack(core, t);
    core->version++;
    if (core_map_del(&core->tasks, t->id) == t) {
        core->counts[t->state]--;
        t->owner->counts[t->state]--;
    }
    free(t->deps);
    free(t->dependents);
    free(t);
}

void core_task_move(struct core *core, struct core_task *t, enum task_state to)
{
    if (!core_state_allowed(t->state, to))
        core_bug();
    core->version++;
    if (t->state == TASK_QUEUED)
        core_when_unqueue(core, t);
    else if (t->state == TASK_RETRYING)
        core_retry_remove(&core->retry, t);
    core->counts[t->state]--;
    core->counts[to]++;
    t->owner->counts[t->state]--;
    t->owner->counts[to]++;
    t->state = to;
    if (to == TASK_QUEUED) {
        core_when_enqueue(core, t, false);
    } else if (to == TASK_RETRYING) {
        core_retry_push(&core->retry, t);
    }
}

/* ---- actions ------------------------------------------------------------------------------- */

void core_actions_clear(struct core_actions *acts)
{
    acts->n = 0;
}

void core_actions_free(struct core_actions *acts)
{
    free(acts->v);
    memset(acts, 0, sizeof *acts);
}

struct core_action *core_emit(struct core_actions *out, enum core_action_type type, int64_t task)
{
    core_xgrow((void **)&out->v, &out->cap, out->n + 1, sizeof *out->v);
    struct core_action *act = &out->v[out->n++];
    memset(act, 0, sizeof *act);
    act->type = type;
    act->task = task;
    return act;
}

void core_emit_state(struct core_actions *out, int64_t task, enum task_state state,
                     enum core_reason reason, int64_t reason_task, core_time at)
{
    struct core_action *act = core_emit(out, CORE_ACT_STATE, task);
    act->state = state;
    act->reason = reason;
    act->reason_task = reason_task;
    act->at = at;
}

/* ---- user events --------------------------------------------------------------------------- */

int core_submit(struct core *core, const struct core_task_spec *spec, core_time now,
                struct core_actions *out)
{
    if (spec->id <= 0 || core_task_get(core, spec->id) != NULL)
        return -1;
    if (spec->ndeps > 0 && spec->deps == NULL)
        return -1;
    if (!core_deps_valid(core, spec->deps, spec->ndeps))
        return -1;
    core_clock(core, now);
    /* A task whose success-dependency already failed is born terminal: nothing to keep. */
    int64_t failed = core_deps_failed(core, spec->deps, spec->ndeps, false);
    if (failed != 0) {
        core_emit_state(out, spec->id, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, failed, 0);
        return 0;
    }
    struct core_task *t = core_task_alloc(core, spec);
    core_deps_link(core, t);
    enum task_state state = spec->hold ? TASK_HELD
                            : t->unresolved > 0 ? TASK_PENDING
                                                : TASK_QUEUED;
    if (!core_state_entry(state))
        core_bug();
    core_task_add(core, t, state);
    if (state == TASK_QUEUED)
        core_when_enqueue(core, t, false);
    core_emit_state(out, t->id, state, CORE_REASON_SUBMITTED, 0, 0);
    if (state == TASK_PENDING)
        core_slurm_chain_one(core, t, now, out);
    return 0;
}

static struct core_task *core_live(const struct core *core, int64_t id, const char **why)
{
    struct core_task *t = core_task_get(core, id);
    if (t == NULL || task_state_terminal(t->state)) {
        if (why != NULL)
            *why = "no such live task";
        return NULL;
    }
    return t;
}

int core_cancel(struct core *core, int64_t id, core_time now, struct core_actions *out,
                const char **why)
{
    struct core_task *t = core_live(core, id, why);
    if (t == NULL)
        return -1;
    core_clock(core, now);
    core_task_move(core, t, TASK_CANCELLED);
    core_emit_state(out, t->id, TASK_CANCELLED, CORE_REASON_CANCELLED, 0, 0);
    /* The attempt keeps its resources until core_attempt_exited(); the task stays in memory
     * until then, its dependents are settled now. */
    if (t->run != NULL)
        core_emit(out, CORE_ACT_KILL, t->id);
    core_deps_ended(core, t, out);
    return 0;
}

int core_hold(struct core *core, int64_t id, core_time now, struct core_actions *out,
              const char **why)
{
    struct core_task *t = core_live(core, id, why);
    if (t == NULL)
        return -1;
    const char *refusal = NULL;
    if (t->state == TASK_HELD)
        refusal = "the task is already held";
    else if (t->state == TASK_RUNNING)
        refusal = "the task is running (cancel it instead)";
    if (refusal != NULL) {
        if (why != NULL)
            *why = refusal;
        return -1;
    }
    core_clock(core, now);
    core_task_move(core, t, TASK_HELD);
    core_emit_state(out, t->id, TASK_HELD, CORE_REASON_HELD, 0, 0);
    return 0;
}

int core_release(struct core *core, int64_t id, core_time now, struct core_actions *out,
                 const char **why)
{
    struct core_task *t = core_live(core, id, why);
    if (t == NULL)
        return -1;
    if (t->state != TASK_HELD) {
        if (why != NULL)
            *why = "the task is not held";
        return -1;
    }
    core_clock(core, now);
    enum task_state to = t->unresolved > 0 ? TASK_PENDING : TASK_QUEUED;
    core_task_move(core, t, to);
    core_emit_state(out, t->id, to, CORE_REASON_RELEASED, 0, 0);
    if (to == TASK_PENDING)
        core_slurm_chain_one(core, t, now, out);
    return 0;
}

int core_set_preemptible(struct core *core, int64_t id, bool preemptible)
{
    struct core_task *t = core_live(core, id, NULL);
    if (t == NULL)
        return -1;
    /* A change that makes nothing start: a pass's preemption choice reads it next time. */
    t->preemptible = preemptible;
    return 0;
}

int core_set_priority(struct core *core, int64_t id, int priority, const char **why)
{
    struct core_task *t = core_live(core, id, why);
    if (t == NULL)
        return -1;
    if (t->state == TASK_RUNNING) {
        if (why != NULL)
            *why = "it is running (a priority only orders tasks waiting to start)";
        return -1;
    }
    /* A queued task moves to its new priority's list with its ready time: its place among the
     * others is where it would have been had it been submitted with this priority, and the
     * time it has waited still counts for aging. */
    struct core_queue *queue = t->in_queue ? core_task_queue(core, t) : NULL;
    if (queue != NULL)
        core_queue_remove(queue, t);
    t->priority = priority;
    core_task_rekey(core, t);
    if (queue != NULL)
        core_queue_insert(queue, t);
    return 0;
}

void core_set_drain(struct core *core, bool drain)
{
    core->version++;
    core->draining = drain;
}

bool core_draining(const struct core *core)
{
    return core->draining;
}

/* ---- queries ------------------------------------------------------------------------------- */

core_time core_next_wakeup(const struct core *core)
{
    const struct core_task *t = core_retry_top(&core->retry);
    core_time retry = t != NULL ? t->retry_at : CORE_TIME_NEVER, spill = core_spill_next(core);
    core_time next = spill < retry ? spill : retry, when = core_when_next(core);
    if (when < next)
        next = when;
    if (core->policy.las && core->las_wakeup < next)
        next = core->las_wakeup;
    return next;
}

void core_stats(const struct core *core, struct core_stats *out)
{
    *out = core->stats;
}

int core_task_state(const struct core *core, int64_t id)
{
    const struct core_task *t = core_task_get(core, id);
    return t != NULL ? (int)t->state : -1;
}

int core_task_attempts(const struct core *core, int64_t id)
{
    const struct core_task *t = core_task_get(core, id);
    return t != NULL ? t->attempts : -1;
}

double core_task_service(const struct core *core, int64_t id, core_time now)
{
    const struct core_task *t = core_task_get(core, id);
    if (t == NULL)
        return -1;
    double ms = t->service;
    if (t->run != NULL && now > t->run->started)
        ms += core_las_gpus(t) * (double)(now - t->run->started);
    return ms / 1000;
}

int core_task_las_queue(const struct core *core, int64_t id, core_time now)
{
    const struct core_task *t = core_task_get(core, id);
    return t != NULL && core->policy.las ? core_las_queue(core, t, now) : -1;
}

void core_count_states(const struct core *core, size_t counts[TASK_NSTATES])
{
    memcpy(counts, core->counts, sizeof core->counts);
}

void core_set_gpu_state(struct core *core, int node, int gpu, const struct core_gpu_state *st)
{
    if (node < 0 || node >= core->place.nnodes || gpu < 0 || gpu >= core->place.nodes[node].ngpus)
        return;
    core_place_set_state(&core->place, node, gpu, st);
}

void core_gpu_usage(const struct core *core, int node, int gpu, struct core_gpu_usage *out)
{
    memset(out, 0, sizeof *out);
    if (node < 0 || node >= core->place.nnodes || gpu < 0 || gpu >= core->place.nodes[node].ngpus)
        return;
    const struct core_place_gpu *g = &core->place.nodes[node].gpu[gpu];
    out->mem_total = g->mem_total;
    out->mem_claimed = g->mem_claimed;
    out->tasks = g->tasks;
    out->exclusive = g->exclusive;
    out->state = (struct core_gpu_state){.outside = g->outside, .busy = g->busy,
                                         .offline = g->offline, .util = g->util};
}
