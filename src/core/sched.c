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
 * Order: core_ready_next() (users.c): with fair share, the least-used user's next task first,
 * each user's own tasks in queue order; a user at its running or GPU limit is skipped whole, a
 * task asking for more GPUs than its user has left is skipped like one whose array is full.
 * Neither becomes the head: a limit is not a lack of resources a reservation could wait out.
 *
 * Cost bounds: the pass ends once no node has open capacity (core_place_open()); a request
 * shape that already failed to fit in this pass is skipped in O(1) (resources only shrink during
 * a pass, so it cannot fit now either); at most max_scan tasks are examined past the head, and
 * tasks skipped for their array's limit count against max_scan too, so that an array of 100,000
 * tasks with a limit of 2 cannot make every pass walk the whole queue. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

#define SCHED_SHAPES 32

/* What placement depends on. */
struct sched_shape {
    int gpus;
    uint64_t gpu_mem;
    int cpus;
    uint64_t mem;
    uint64_t gpu_types;
};

/* A small ring of shapes that did not fit; an older one may be forgotten (it is only a cache). */
struct sched_shapes {
    struct sched_shape v[SCHED_SHAPES];
    size_t n;
};

struct sched_pass {
    struct core *core;
    core_time now;
    struct core_actions *out;
    /* A pass that only looks (core_why: core/why.c): nothing starts, and each task examined is
     * told to look->note with the verdict a real pass would give it now. */
    struct core_look *look;
    const struct core_task *head;
    struct sched_shapes no_fit;   /* does not fit now */
    struct sched_shapes no_room;  /* fits now, but not beside the head's reservation */
    bool blocked;                 /* the head has been met */
    bool reserved;                /* and has a reservation */
    core_time shadow;
    struct core_place_reserve rsv;
    int examined;
};

static struct sched_shape sched_shape_of(const struct core_request *req)
{
    return (struct sched_shape){
        .gpus = req->gpus,
        .gpu_mem = req->gpus > 0 ? req->gpu_mem : 0,
        .cpus = core_place_cpus(req),
        .mem = req->mem,
        .gpu_types = req->gpu_types,
    };
}

static bool sched_shape_seen(const struct sched_shapes *shapes, const struct core_request *req)
{
    struct sched_shape s = sched_shape_of(req);
    size_t n = shapes->n < SCHED_SHAPES ? shapes->n : SCHED_SHAPES;
    for (size_t i = 0; i < n; i++) {
        const struct sched_shape *o = &shapes->v[i];
        if (o->gpus == s.gpus && o->gpu_mem == s.gpu_mem && o->cpus == s.cpus && o->mem == s.mem &&
            o->gpu_types == s.gpu_types)
            return true;
    }
    return false;
}

static void sched_shape_add(struct sched_shapes *shapes, const struct core_request *req)
{
    shapes->v[shapes->n++ % SCHED_SHAPES] = sched_shape_of(req);
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
static void sched_new_stamp(struct core *core)
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
static struct core_place_node *sched_scratch_node(struct core *core, int i)
{
    if (core->scratch_stamp[i] != core->stamp) {
        core->scratch.nodes[i] = core->place.nodes[i];
        core->scratch_stamp[i] = core->stamp;
    }
    return &core->scratch.nodes[i];
}

/* A spanning head's search: node i (current in `nodes`) joins the candidates if it suits. */
static void sched_span_consider(struct core *core, const struct core_place_node *nodes, int i,
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
static bool sched_release_fits(struct sched_pass *p, const struct core_run *run,
                               const struct core_request *req, bool span, int *ncand, int *total,
                               struct core_placement *pl)
{
    struct core *core = p->core;
    const int *nodes = run->placement.nnodes > 1 ? run->placement.nodes : &run->placement.node;
    int nnodes = run->placement.nnodes > 1 ? run->placement.nnodes : 1;
    if (!run->claimed)
        return false;
    for (int k = 0; k < nnodes; k++)
        sched_scratch_node(core, nodes[k]);
    core_place_release(&core->scratch, &run->placement, &run->task->req, run->started);
    for (int k = 0; k < nnodes; k++) {
        if (span)
            sched_span_consider(core, core->scratch.nodes, nodes[k], req, ncand, total);
        else if (core_place_fit_node(&core->scratch, nodes[k], req, core->policy.best_fit, pl))
            return true;
    }
    return span && *total >= req->gpus &&
           core_place_span_pick(&core->scratch, req, core->cand, *ncand, pl);
}

static void sched_reserve(struct sched_pass *p, const struct core_task *head)
{
    struct core *core = p->core;
    const struct core_request *req = &head->req;
    /* Those with a time limit by their end; then those without, youngest first, which is the
     * order core->running keeps (no sort: most attempts have no limit in practice). */
    struct core_run **runs = core_xmalloc((core->nrunning + 1) * sizeof *runs);
    size_t n = 0;
    for (struct core_run *run = core->running; run != NULL; run = run->next)
        if (sched_run_end(run) != CORE_TIME_NEVER)
            runs[n++] = run;
    qsort(runs, n, sizeof *runs, sched_cmp_end);
    for (struct core_run *run = core->running; run != NULL; run = run->next)
        if (sched_run_end(run) == CORE_TIME_NEVER)
            runs[n++] = run;
    sched_new_stamp(core);
    p->reserved = false;
    p->shadow = CORE_TIME_NEVER;
    bool span = core_place_spans(&core->place, req);
    int ncand = 0, total = 0;
    if (span)
        for (int i = 0; i < core->place.nnodes; i++)
            sched_span_consider(core, core->place.nodes, i, req, &ncand, &total);
    for (size_t i = 0; i < n; i++) {
        struct core_placement pl;
        if (sched_release_fits(p, runs[i], req, span, &ncand, &total, &pl)) {
            core_time end = sched_run_end(runs[i]);
            p->shadow = end > p->now ? end : p->now;
            sched_set_reserve(p, &pl, req);
            break;
        }
    }
    free(runs);
}

/* Whether t, which fits now at *pl, may start ahead of the head; may move *pl off the head's
 * reserved GPUs. */
static bool sched_backfill(struct sched_pass *p, const struct core_task *t,
                           struct core_placement *pl)
{
    const struct core_request *req = &t->req;
    if (req->time_limit > 0 && core_time_add(p->now, req->time_limit) <= p->shadow)
        return true;
    if (sched_shape_seen(&p->no_room, req))
        return false;
    if (!core_place_fit(&p->core->place, req, p->core->policy.best_fit, &p->rsv, pl)) {
        sched_shape_add(&p->no_room, req);
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
    if (sched_array_full(core, t) || core_user_blocked(t) ||
        sched_shape_seen(&p->no_fit, &t->req)) {
        p->examined++;
        sched_note(p, t, sched_array_full(core, t) ? CORE_LOOK_ARRAY_FULL
                         : core_user_blocked(t)    ? CORE_LOOK_USER_LIMIT
                                                   : CORE_LOOK_NO_FIT);
        return true;
    }
    if (p->blocked)
        p->examined++;
    if (!core_place_fit(&core->place, &t->req, policy->best_fit, NULL, &pl)) {
        sched_note(p, t, CORE_LOOK_NO_FIT);
        if (policy->strict_order || !policy->backfill) {
            p->head = t;
            return false;
        }
        sched_shape_add(&p->no_fit, &t->req);
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
    core_ready_start(core, p->now);
    struct core_task *t;
    while ((t = core_ready_next(core)) != NULL) {
        if (!core_place_open(&core->place))
            return CORE_LOOK_STOP_FULL;
        if (max_scan > 0 && p->examined >= max_scan)
            return CORE_LOOK_STOP_SCAN;
        if (!sched_consider(p, t))
            return CORE_LOOK_STOP_ORDER;
    }
    return CORE_LOOK_STOP_NONE;
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
    sched_backoffs(core, out);
    if (core->draining)
        return;
    core_spill_due(core, now);
    core_schedule_slurm(core, now, out);
    struct sched_pass p = { .core = core, .now = now, .out = out, .shadow = CORE_TIME_NEVER };
    sched_loop(&p);
}
