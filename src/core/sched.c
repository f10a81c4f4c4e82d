/* One scheduling pass: backoffs that ended, then starting what fits, in policy order.
 *
 * Head-of-line (strict_order, or no backfill): stop at the first ready task that does not fit.
 *
 * EASY backfill: the first task that does not fit is the head. It gets a reservation: running
 * attempts are released, in a scratch copy of the nodes, in the order they are expected to end
 * (start + time limit; no limit = never, and among those the most recently started first: job
 * durations are heavy-tailed, so the longer a job has run the longer it is likely to go on, and
 * reserving what the youngest jobs hold is what lets the head start soonest; docs/SIMULATE.md
 * has the measurements) until the head fits. A head that spans nodes needs them whole: it is
 * reserved whole nodes. That end is the shadow time, and
 * the place the head then fits is its reservation (a node, GPUs, and the CPUs/memory the node
 * has to spare beside it then). A later task may start now if it fits now and either
 *   (a) its time limit ends it by the shadow time, or
 *   (b) it fits without the head's reserved GPUs and within the node's spare CPUs/memory
 *       (which it then uses up, for the tasks after it).
 * When the head only fits once an attempt without a time limit ends, the shadow time is
 * CORE_TIME_NEVER and (a) admits every task with a limit: as in EASY, the head is then delayed
 * by at most one time limit after that attempt ends. When the head fits nowhere even with
 * everything released, it gets no reservation and does not hold anything back. Only the first
 * blocked task gets a reservation; later blocked ones are skipped.
 *
 * Placement: where a task that may start goes is core_place_fit()'s (place.c): with best_fit, the
 * tightest node for a shared task or an exclusive one of several GPUs, and the first node with a
 * GPU free for an exclusive one-GPU task (measured: packing those too made overloaded clusters
 * slower than EASY backfill; place.c says by how much).
 *
 * Order: core_ready_next() (users.c): with fair share, the least-used user's next task first,
 * each user's own tasks in queue order; a user at its running or GPU limit is skipped whole, a
 * task asking for more GPUs than its user has left is skipped like one whose array is full.
 * Neither becomes the head: a limit is not a lack of resources a reservation could wait out.
 *
 * Cost: a pass costs what changed, not the queue's length.
 *   - Nothing changed since the last pass that could start a task (core->version, the queues'
 *     and the claims' versions are all as they were, and with fair share at most one user has
 *     ready tasks, or the time is the same): the pass is skipped (sched_clean).
 *   - A request shape (queue.h) that does not fit now is marked for the pass; the queues drop
 *     its chains from the iteration (queue.c), so its other tasks are never visited: resources
 *     only shrink during a pass, so none of them could fit. A shape that fits now but not
 *     beside the head's reservation is dropped the same way, unless a time limit could still
 *     admit it: a shape's tasks are chained by their limit's power of two, and a chain is
 *     dropped when the least limit queued in it (a bound kept by queue.c) cannot end by the
 *     shadow time. Such a task is not "examined": it does not count against max_scan.
 *   - A shape that did not fit is remembered across passes with the place's epoch: until
 *     capacity may have grown (a release, a GPU's state), its fit is not searched again.
 *   - The head's reservation is reused while the head and every claim are what they were.
 *   - The pass ends once no node has open capacity (core_place_open()); at most max_scan tasks
 *     are examined past the head, and tasks skipped for their array's limit count against
 *     max_scan too, so that an array of 100,000 tasks with a limit of 2 cannot make every pass
 *     walk the whole queue.
 * A pass that only looks (core_why) visits every task it reaches, to give each a verdict, and
 * counts exactly what a real pass would. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

struct sched_pass {
    struct core *core;
    core_time now;
    struct core_actions *out;
    /* A pass that only looks (core_why: core/why.c): nothing starts, and each task examined is
     * told to look->note with the verdict a real pass would give it now. */
    struct core_look *look;
    const struct core_task *head;
    uint32_t stamp;               /* this pass's mark on shapes (no_fit_pass, no_room_pass) */
    bool blocked;                 /* the head has been met */
    bool reserved;                /* and has a reservation */
    core_time shadow;
    struct core_place_reserve rsv;
    int examined;
};

static struct core_shape *sched_shape(const struct sched_pass *p, const struct core_task *t)
{
    return &p->core->shapes.v[t->shape];
}

/* The record of t's placement, where the marks are: they hold whatever t's time limit. */
static struct core_shape *sched_place(const struct sched_pass *p, const struct core_task *t)
{
    return &p->core->shapes.v[sched_shape(p, t)->fit];
}

/* Whether the pass can pass over t without looking at its resources: its placement did not fit
 * now earlier in this pass, or not beside the head's reservation and no limit of its record's
 * queued tasks (min_limit bounds them) can admit it by the shadow time either. */
static bool sched_known_out(const struct sched_pass *p, const struct core_task *t)
{
    const struct core_shape *place = sched_place(p, t);
    if (place->no_fit_pass == p->stamp)
        return true;
    if (place->no_room_pass != p->stamp)
        return false;
    const struct core_shape *shape = sched_shape(p, t);
    return shape->bucket <= 0 || core_time_add(p->now, shape->min_limit) > p->shadow;
}

static bool sched_skip(void *arg, const struct core_task *t)
{
    return sched_known_out(arg, t);
}

/* Whether t fits now (*pl: where), or under rsv; a shape that did not fit now is not searched
 * again until the place's epoch moves. */
static bool sched_fit(struct sched_pass *p, const struct core_task *t,
                      const struct core_place_reserve *rsv, struct core_placement *pl)
{
    struct core *core = p->core;
    struct core_shape *s = sched_place(p, t);
    if (s->no_fit_epoch == core->place.epoch + 1)
        return false;
    core->stats.fit_checks++;
    if (core_place_fit(&core->place, &t->req, core->policy.best_fit, rsv, pl))
        return true;
    if (rsv == NULL)
        s->no_fit_epoch = core->place.epoch + 1;
    return false;
}

/* ---- the head's reservation ---------------------------------------------------------------- */

static core_time sched_run_end(const struct core_run *run)
{
    int64_t limit = run->task->req.time_limit;
    return limit > 0 ? core_time_add(run->started, limit) : CORE_TIME_NEVER;
}

static int sched_cmp_end(const void *a, const void *b)
{
    const struct core_run *x = *(const struct core_run *const *)a;
    const struct core_run *y = *(const struct core_run *const *)b;
    core_time ex = sched_run_end(x), ey = sched_run_end(y);
    if (ex != ey)
        return ex < ey ? -1 : 1;
    return (x->task->id > y->task->id) - (x->task->id < y->task->id);
}

/* Fills runs[] with the attempts that have a time limit, by (end, task id); returns how many.
 * Those already ordered at the last call keep their order (their ranks, placed by index: no
 * comparison), and only the ones started since are sorted and merged in: O(n + k log k) for k
 * new ones, not O(n log n) each time. */
static size_t sched_by_end(struct core *core, struct core_run **runs)
{
    size_t known = core->nends, nfresh = 0, n = 0;
    struct core_run **fresh = core_xmalloc((core->nrunning + 1) * sizeof *fresh);
    for (size_t i = 0; i < known; i++)
        core->ends[i] = NULL; /* the last order's pointers may be stale: only slots now */
    for (struct core_run *run = core->running; run != NULL; run = run->next) {
        if (sched_run_end(run) == CORE_TIME_NEVER)
            continue;
        if (run->end_stamp == core->ends_stamp && core->ends_stamp != 0 && run->end_rank < known)
            core->ends[run->end_rank] = run;
        else
            fresh[nfresh++] = run;
    }
    qsort(fresh, nfresh, sizeof *fresh, sched_cmp_end);
    size_t i = 0, j = 0;
    while (i < known || j < nfresh) {
        while (i < known && core->ends[i] == NULL)
            i++;
        if (i == known && j == nfresh)
            break;
        if (j == nfresh || (i < known && sched_cmp_end(&core->ends[i], &fresh[j]) < 0))
            runs[n++] = core->ends[i++];
        else
            runs[n++] = fresh[j++];
    }
    free(fresh);
    core_xgrow((void **)&core->ends, &core->ends_cap, n + 1, sizeof *core->ends);
    core->nends = n;
    core->ends_stamp++;
    for (size_t k = 0; k < n; k++) {
        runs[k]->end_stamp = core->ends_stamp;
        runs[k]->end_rank = k;
    }
    return n;
}

/* The head fits at pl in the scratch state of the shadow time: reserve it. */
static void sched_set_reserve(struct sched_pass *p, const struct core_placement *pl,
                              const struct core_request *req)
{
    struct core *core = p->core;
    struct core_place_reserve *rsv = &p->rsv;
    memset(rsv, 0, sizeof *rsv);
    p->reserved = true;
    if (pl->nnodes > 1) {
        rsv->node = -1;
        rsv->whole = core->rsv_whole;
        rsv->whole_mark = core->stamp;
        for (int k = 0; k < pl->nnodes; k++)
            core->rsv_whole[pl->nodes[k]] = core->stamp;
        return;
    }
    const struct core_place_node *node = &core->scratch.nodes[pl->node];
    rsv->node = pl->node;
    for (int i = 0; i < pl->ngpus; i++)
        rsv->gpu_mask |= 1ULL << pl->gpu[i];
    rsv->cpus_limited = node->cpus > 0;
    rsv->cpus_spare = node->cpus - node->cpus_used - core_place_cpus(req);
    if (rsv->cpus_spare < 0)
        rsv->cpus_spare = 0;
    rsv->mem_limited = node->mem > 0;
    uint64_t used = node->mem_used + req->mem;
    rsv->mem_spare = node->mem > used ? node->mem - used : 0;
}

/* A fresh stamp: every scratch node is stale, no node is seen or reserved. */
void core_sched_new_stamp(struct core *core)
{
    if (++core->stamp == 0) {
        size_t n = (size_t)core->place.nnodes + 1;
        memset(core->scratch_stamp, 0, n * sizeof *core->scratch_stamp);
        memset(core->seen_stamp, 0, n * sizeof *core->seen_stamp);
        memset(core->rsv_whole, 0, n * sizeof *core->rsv_whole);
        core->stamp = 1;
    }
}

/* Node i of the scratch copy, brought up to date on its first touch under this stamp. */
struct core_place_node *core_sched_scratch_node(struct core *core, int i)
{
    if (core->scratch_stamp[i] != core->stamp) {
        /* Only the GPUs it has: the array is sized for the largest node there can be. */
        const struct core_place_node *node = &core->place.nodes[i];
        memcpy(&core->scratch.nodes[i], node,
               offsetof(struct core_place_node, gpu) + (size_t)node->ngpus * sizeof node->gpu[0]);
        core->scratch_stamp[i] = core->stamp;
    }
    return &core->scratch.nodes[i];
}

/* A spanning head's search: node i (current in `nodes`) joins the candidates if it suits. */
void core_sched_span_consider(struct core *core, const struct core_place_node *nodes, int i,
                                const struct core_request *req, int *ncand, int *total)
{
    if (core->seen_stamp[i] == core->stamp || !core_place_span_ok(&nodes[i], req))
        return;
    core->seen_stamp[i] = core->stamp;
    core->cand[(*ncand)++] = i;
    *total += nodes[i].ngpus;
}

/* Releases, in the scratch copy, what runs[i] holds; returns whether the head fits then, with
 * its place in *pl. Only the nodes the run held can have become able to take the head. */
bool core_sched_release_fits(struct core *core, const struct core_run *run,
                             const struct core_request *req, bool span, int *ncand, int *total,
                             struct core_placement *pl)
{
    const int *nodes = run->placement.nnodes > 1 ? run->placement.nodes : &run->placement.node;
    int nnodes = run->placement.nnodes > 1 ? run->placement.nnodes : 1;
    if (!run->claimed)
        return false;
    for (int k = 0; k < nnodes; k++)
        core_sched_scratch_node(core, nodes[k]);
    core_place_release(&core->scratch, &run->placement, &run->task->req);
    for (int k = 0; k < nnodes; k++) {
        if (span)
            core_sched_span_consider(core, core->scratch.nodes, nodes[k], req, ncand, total);
        else if (core_place_fit_node(&core->scratch, nodes[k], req, core->policy.best_fit, pl))
            return true;
    }
    return span && *total >= req->gpus &&
           core_place_span_pick(&core->scratch, req, core->cand, *ncand, pl);
}

/* The reservation is a function of the head and the claims alone (the time only clamps the
 * shadow): while neither changed, the last one is reused. */
static bool sched_reserve_again(struct sched_pass *p, const struct core_task *head)
{
    const struct core_reserve_memo *m = &p->core->memo;
    if (!m->valid || m->head != head->id || m->head_serial != head->serial ||
        m->place_version != p->core->place.version)
        return false;
    p->reserved = m->reserved;
    p->shadow = !m->reserved ? CORE_TIME_NEVER : m->end > p->now ? m->end : p->now;
    p->rsv = m->rsv;
    return true;
}

static void sched_reserve(struct sched_pass *p, const struct core_task *head)
{
    struct core *core = p->core;
    const struct core_request *req = &head->req;
    if (sched_reserve_again(p, head))
        return;
    core->stats.reservations++;
    core->memo = (struct core_reserve_memo){
        .valid = true, .head = head->id, .head_serial = head->serial,
        .place_version = core->place.version, .end = CORE_TIME_NEVER,
    };
    /* Those with a time limit by their end; then those without, youngest first, which is the
     * order core->running keeps (no sort: most attempts have no limit in practice). */
    struct core_run **runs = core_xmalloc((core->nrunning + 1) * sizeof *runs);
    size_t n = sched_by_end(core, runs);
    for (struct core_run *run = core->running; run != NULL; run = run->next)
        if (sched_run_end(run) == CORE_TIME_NEVER)
            runs[n++] = run;
    core_sched_new_stamp(core);
    p->reserved = false;
    p->shadow = CORE_TIME_NEVER;
    bool span = core_place_spans(&core->place, req);
    int ncand = 0, total = 0;
    if (span)
        for (int i = 0; i < core->place.nnodes; i++)
            core_sched_span_consider(core, core->place.nodes, i, req, &ncand, &total);
    for (size_t i = 0; i < n; i++) {
        struct core_placement pl;
        if (core_sched_release_fits(core, runs[i], req, span, &ncand, &total, &pl)) {
            core_time end = sched_run_end(runs[i]);
            p->shadow = end > p->now ? end : p->now;
            sched_set_reserve(p, &pl, req);
            core->memo.reserved = true;
            core->memo.end = end;
            core->memo.rsv = p->rsv;
            break;
        }
    }
    free(runs);
}

/* Backfill's (a): t's time limit ends it by the shadow time. */
static bool sched_ends_in_time(const struct sched_pass *p, const struct core_task *t)
{
    return t->req.time_limit > 0 && core_time_add(p->now, t->req.time_limit) <= p->shadow;
}

/* Whether t, which fits now at *pl, may start ahead of the head; may move *pl off the head's
 * reserved GPUs. */
static bool sched_backfill(struct sched_pass *p, const struct core_task *t,
                           struct core_placement *pl)
{
    const struct core_request *req = &t->req;
    if (sched_ends_in_time(p, t))
        return true;
    struct core_shape *s = sched_place(p, t);
    if (s->no_room_pass == p->stamp)
        return false;
    if (!sched_fit(p, t, &p->rsv, pl)) {
        s->no_room_pass = p->stamp;
        return false;
    }
    /* It fit within the spare, so neither goes below 0. */
    const int *nodes = pl->nnodes > 1 ? pl->nodes : &pl->node;
    for (int k = 0; k < (pl->nnodes > 1 ? pl->nnodes : 1); k++) {
        if (nodes[k] == p->rsv.node && p->rsv.cpus_limited)
            p->rsv.cpus_spare -= core_place_cpus(req);
        if (nodes[k] == p->rsv.node && p->rsv.mem_limited)
            p->rsv.mem_spare -= req->mem;
    }
    return true;
}

/* ---- the pass ------------------------------------------------------------------------------ */

static bool sched_array_full(const struct core *core, const struct core_task *t)
{
    return t->array_id != 0 && t->array_limit > 0 &&
           core_array_running(core, t->array_id) >= t->array_limit;
}

/* Looks at one ready task, in order. Returns false to end the pass. */
static void sched_note(struct sched_pass *p, const struct core_task *t, enum core_look_verdict v)
{
    if (p->look != NULL)
        p->look->note(p->look->arg, t, v, p->head);
}

/* Looks at one ready task, in order. Returns false to end the pass. */
static bool sched_consider(struct sched_pass *p, struct core_task *t)
{
    struct core *core = p->core;
    const struct core_policy *policy = &core->policy;
    struct core_placement pl;
    if (sched_known_out(p, t)) {
        /* A real pass meets such a task only as a user's next, picked before its shape was
         * marked: it is passed over as its chain is (not examined). A look words it. */
        bool fits = p->look != NULL && sched_place(p, t)->no_fit_pass != p->stamp &&
                    sched_fit(p, t, NULL, &pl);
        sched_note(p, t, fits ? CORE_LOOK_RESERVED : CORE_LOOK_NO_FIT);
        return true;
    }
    if (sched_array_full(core, t) || core_user_blocked(t)) {
        p->examined++;
        sched_note(p, t, sched_array_full(core, t) ? CORE_LOOK_ARRAY_FULL
                                                   : CORE_LOOK_USER_LIMIT);
        return true;
    }
    if (p->blocked)
        p->examined++;
    /* A limited task of a shape with no room beside the reservation can only start by its
     * limit: when that does not admit it either, whether it fits now changes nothing. */
    if (p->look == NULL && p->blocked && p->reserved && !sched_ends_in_time(p, t) &&
        sched_place(p, t)->no_room_pass == p->stamp)
        return true;
    if (!sched_fit(p, t, NULL, &pl)) {
        sched_note(p, t, CORE_LOOK_NO_FIT);
        if (policy->las) {
            /* No head: what does not fit is passed over, and may preempt. */
            if (p->look == NULL)
                core_las_preempt(core, t, p->now, p->out);
            sched_place(p, t)->no_fit_pass = p->stamp;
            if (!p->blocked) {
                p->blocked = true;
                p->head = t;
            }
            return true;
        }
        if (policy->strict_order || !policy->backfill) {
            p->head = t;
            return false;
        }
        sched_place(p, t)->no_fit_pass = p->stamp;
        if (!p->blocked) {
            p->blocked = true;
            p->head = t;
            sched_reserve(p, t);
        }
        return true;
    }
    if (p->blocked && p->reserved && !sched_backfill(p, t, &pl)) {
        sched_note(p, t, CORE_LOOK_RESERVED);
        return true;
    }
    if (p->look != NULL)
        sched_note(p, t, CORE_LOOK_FITS);
    else
        core_attempt_start(core, t, &pl, p->now, p->out);
    return true;
}

static void sched_backoffs(struct core *core, struct core_actions *out)
{
    struct core_task *t;
    while ((t = core_retry_top(&core->retry)) != NULL && t->retry_at <= core->now) {
        core_task_move(core, t, TASK_QUEUED);
        core_emit_state(out, t->id, TASK_QUEUED, CORE_REASON_BACKOFF_DONE, 0, 0);
    }
}

/* The pass's loop, for a real pass and a look alike. Returns why it ended early. */
static enum core_look_stop sched_loop(struct sched_pass *p)
{
    struct core *core = p->core;
    int max_scan = core->policy.max_scan;
    /* A fresh mark: every shape's no_fit_pass/no_room_pass is stale (0 is never a mark). */
    if (++core->pass_stamp == 0) {
        for (uint32_t i = 0; i < core->shapes.n; i++)
            core->shapes.v[i].no_fit_pass = core->shapes.v[i].no_room_pass = 0;
        core->pass_stamp = 1;
    }
    p->stamp = core->pass_stamp;
    core_ready_start(core, p->now);
    struct core_task *t;
    /* A look visits what a real pass drops, to give it a verdict. */
    core_queue_skip_fn *skip = p->look == NULL ? sched_skip : NULL;
    while ((t = core_ready_next(core, skip, p)) != NULL) {
        if (!core_place_open(&core->place) && !core->policy.las)
            return CORE_LOOK_STOP_FULL;
        if (max_scan > 0 && p->examined >= max_scan)
            return CORE_LOOK_STOP_SCAN;
        core->stats.examined++;
        if (!sched_consider(p, t))
            return CORE_LOOK_STOP_ORDER;
    }
    return CORE_LOOK_STOP_NONE;
}

static uint64_t sched_version(const struct core *core)
{
    return core->version + core->shapes.version + core->place.version;
}

/* Whether a pass now would start nothing because nothing it reads changed since the last one
 * ran to its end: the tasks and their states, the queues, the claims and GPU states, users'
 * limits and usage, the drain. Time alone changes a pass only through fair share (users'
 * usage decays and grows, so two users with ready tasks may swap); a backfill admission by time
 * limit only gets harder as time passes. */
static bool sched_clean(const struct core *core, core_time now)
{
    if (core->clean_version == 0 || core->clean_version != sched_version(core))
        return false;
    if (core->policy.las)
        return now == core->clean_now; /* services grow with time */
    return now == core->clean_now || !core->policy.fair_share || core_users_ready(core) < 2;
}

void core_schedule_look(struct core *core, core_time now, struct core_look *look)
{
    now = core_clock(core, now);
    struct sched_pass p = {.core = core, .now = now, .look = look, .shadow = CORE_TIME_NEVER};
    look->stop = sched_loop(&p);
    look->head = p.head != NULL ? p.head->id : 0;
}

void core_schedule(struct core *core, core_time now, struct core_actions *out)
{
    now = core_clock(core, now);
    core->stats.passes++;
    sched_backoffs(core, out);
    core_when_pass(core, now, out);
    if (core->draining)
        return;
    core_spill_due(core, now);
    core_schedule_slurm(core, now, out);
    if (core->policy.las)
        core_las_promote(core, now);
    if (sched_clean(core, now)) {
        core->stats.passes_skipped++;
        return;
    }
    struct sched_pass p = { .core = core, .now = now, .out = out, .shadow = CORE_TIME_NEVER };
    sched_loop(&p);
    if (core->policy.las)
        core_las_wakeup(core, now, p.head != NULL ? core_las_queue(core, p.head, now) : -1);
    core->clean_version = sched_version(core);
    core->clean_now = now;
}
