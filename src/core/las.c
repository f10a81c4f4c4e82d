/* las: discretized two-dimensional least attained service, with preemption (policy.las).
 *
 * A task's attained service is GPUs x time run, over all its attempts (attempt.c keeps it at
 * every attempt's end; a running attempt adds its time so far). Its queue is how many of the
 * policy's thresholds that service has reached (a waiting task promoted by a starvation guard:
 * queue 0). The ready queue's key (qprio) puts the lower queue first, then the priority; the
 * ready time orders within (FIFO), as for every policy.
 *
 * A pass starts what fits in that order and passes over what does not (no head-of-line
 * blocking, no reservation: short work must not wait behind a blocked large job). A task that
 * does not fit may preempt: the candidates are running attempts of preemptible tasks in a
 * strictly higher queue than its own that have run las_min_run_ms in this attempt (the
 * hysteresis: a demoted task keeps its GPUs for that long, and two tasks of one queue never
 * preempt each other), that are not protected (below), and — las_mrl_factor — that the history
 * expects to have more left than the waiter; their release is tried in the scratch copy (as
 * backfill's reservation does), most-served first, node by node, and the node that lets the
 * task fit with the fewest releases (then the most-served) gives the victims. A spanning task
 * releases most-served first until whole nodes enough are free. Attempts already asked to stop
 * are released first: when they make room, nothing more is preempted. One preemption decision
 * per request shape per pass (the shape is then marked as not fitting, like any other): the
 * driver reports the exits, and the next pass starts the task and lets the next of its shape
 * preempt.
 *
 * The history (las_mrl_factor): the services of the tasks that succeeded, in logarithmic bins;
 * E[S - a | S > a] of a task that attained a is its expected residual service. A victim must
 * have more than the waiter's (x the factor): one about to end is left alone, and where jobs
 * are alike (service tells nothing about what is left) nothing is preempted — plain LAS there
 * only time-shares and pays the lost work (ITP cluster09: 1.77x fifo's mean without it, 1.00x
 * with). A waiter served beyond every task that ended preempts nothing (its residual is
 * unbounded). No task's duration is known: only tasks that ended teach anything.
 *
 * Starvation, the defaults: a task that has waited las_starve_total_ms in all since its
 * submission (time not running, across attempts) is promoted to queue 0 until it starts
 * again; an attempt that starts after las_protect_wait_ms of waiting in all is protected — not
 * a victim — for las_protect_ratio x that wait (0: its whole run), then preemptible again.
 * Without the protection a long job is preempted again and again and its wait grows in many
 * short pieces (no guard on one wait sees it); protected for its whole run, long jobs hold GPUs
 * for days and the mean is lost (docs/BENCHMARKS.md). The first slice's guards stay as knobs:
 * las_starve_k x the last run (or las_starve_max_ms, if less) promotes and protects the whole
 * next attempt (las_protect_run_ms: only that long of it; las_starve_reset: the service counts
 * from the promotion instead, as in Tiresias); las_max_preempt: a task preempted that many
 * times is never preempted again. core->las_promote_next is the earliest promotion due; only
 * when it is due does a pass walk the live tasks to promote (O(live tasks) then).
 *
 * Cost of a las pass: the ordinary pass (shapes skipped as above), plus for each shape that does
 * not fit, O(R log R) over the R running attempts (candidates sorted; O(1) each for the
 * history, whose suffix sums are recomputed, O(bins), at most once per task ended) and a
 * scratch release of each candidate; plus O(R) to compute the next wakeup (a threshold, a
 * minimum run or a protection ending while a task waits). A pass is not skipped when only the
 * time changed (services grow). */
#include <math.h> /* INFINITY */
#include <stdlib.h>

#include "core/internal.h"
#include "core/mem.h"

/* ---- the history of services (las_mrl_factor) ----------------------------------------------
 *
 * The services of the tasks that succeeded, in logarithmic bins (LAS_BINS_PER_OCTAVE a
 * doubling, from 1 GPU-second), with each bin's count and sum: the mean residual service of a
 * task that has attained a, E[S - a | S > a], is read from the bins above a's (suffix sums,
 * recomputed at most once per change). O(LAS_BINS) memory and per recomputation, O(1) a query. */
#define LAS_BINS_PER_OCTAVE 8
#define LAS_BINS (40 * LAS_BINS_PER_OCTAVE)
/* Below this many finished tasks the history says nothing and every preemption is allowed. */
#define LAS_HISTORY_MIN 20

struct core_las_history {
    uint64_t n;
    bool dirty;
    double count[LAS_BINS], sum[LAS_BINS];
    double above_count[LAS_BINS + 1], above_sum[LAS_BINS + 1]; /* bins >= i */
};

static int las_bin(double ms)
{
    /* 2^(k / 8), k = 0..7: the bins within an octave (no libm in core/). */
    static const double step[LAS_BINS_PER_OCTAVE] = {
        1.0, 1.0905077326652577, 1.189207115002721, 1.2968395546510096,
        1.4142135623730951, 1.5422108254079407, 1.6817928305074290, 1.8340080864093424,
    };
    if (!(ms >= 1000))
        return 0;
    double x = ms / 1000;
    int octave = 0;
    while (x >= 2 && octave < LAS_BINS / LAS_BINS_PER_OCTAVE) {
        x /= 2;
        octave++;
    }
    int k = LAS_BINS_PER_OCTAVE - 1;
    while (k > 0 && x < step[k])
        k--;
    int b = 1 + octave * LAS_BINS_PER_OCTAVE + k;
    return b >= LAS_BINS ? LAS_BINS - 1 : b;
}

void core_las_learn(struct core *core, double service)
{
    if (!core->policy.las || core->policy.las_mrl_factor <= 0 || !(service >= 0))
        return;
    if (core->las_history == NULL)
        core->las_history = core_xcalloc(1, sizeof *core->las_history);
    struct core_las_history *h = core->las_history;
    int b = las_bin(service);
    h->count[b]++;
    h->sum[b] += service;
    h->n++;
    h->dirty = true;
}

void core_las_ended(struct core *core, const struct core_task *t)
{
    core_las_learn(core, t->service);
}

/* E[S - a | S > a] over the history (S beyond a's bin), or INFINITY where no task that ended
 * had more (a task served beyond all of them may have any amount left). */
static double las_residual(struct core_las_history *h, double a)
{
    if (h->dirty) {
        h->above_count[LAS_BINS] = h->above_sum[LAS_BINS] = 0;
        for (int i = LAS_BINS - 1; i >= 0; i--) {
            h->above_count[i] = h->above_count[i + 1] + h->count[i];
            h->above_sum[i] = h->above_sum[i + 1] + h->sum[i];
        }
        h->dirty = false;
    }
    int b = las_bin(a) + 1;
    if (b >= LAS_BINS || h->above_count[b] == 0)
        return INFINITY;
    return h->above_sum[b] / h->above_count[b] - a;
}

double core_las_gpus(const struct core_task *t)
{
    return t->req.gpus > 0 ? (double)t->req.gpus : 0;
}

static double las_service(const struct core_task *t, core_time now)
{
    double ms = t->service;
    if (t->run != NULL && now > t->run->started)
        ms += core_las_gpus(t) * (double)(now - t->run->started);
    return ms;
}

int core_las_queue(const struct core *core, const struct core_task *t, core_time now)
{
    if (t->promoted && t->run == NULL)
        return 0;
    double ms = las_service(t, now) - t->service_base;
    int q = 0;
    while (q < core->policy.las_nthresholds && ms >= core->policy.las_threshold[q] * 1000)
        q++;
    return q;
}

#define LAS_PRIO_BITS 24
int core_las_key(const struct core *core, const struct core_task *t, core_time now)
{
    int prio = t->priority;
    const int half = 1 << (LAS_PRIO_BITS - 1);
    if (prio >= half)
        prio = half - 1;
    if (prio < -half)
        prio = -half;
    return (CORE_LAS_MAX - core_las_queue(core, t, now)) * (1 << LAS_PRIO_BITS) + prio;
}

/* When queued t is due for promotion, or CORE_TIME_NEVER. */
static core_time las_promote_at(const struct core *core, const struct core_task *t)
{
    const struct core_policy *policy = &core->policy;
    if (t->promoted)
        return CORE_TIME_NEVER;
    core_time at = CORE_TIME_NEVER;
    /* Waited in all (not running since its submission) las_starve_total_ms. */
    if (policy->las_starve_total_ms > 0)
        at = core_time_add(core_time_add(t->submit_time, t->run_total),
                           policy->las_starve_total_ms);
    if (t->last_run <= 0)
        return at;
    int64_t wait = INT64_MAX;
    if (policy->las_starve_k > 0) {
        double w = policy->las_starve_k * (double)t->last_run;
        wait = w < 9e18 ? (int64_t)w : INT64_MAX;
    }
    if (policy->las_starve_max_ms > 0 && policy->las_starve_max_ms < wait)
        wait = policy->las_starve_max_ms;
    core_time mine = wait == INT64_MAX ? CORE_TIME_NEVER : core_time_add(t->ready_time, wait);
    return mine < at ? mine : at;
}

void core_task_rekey(struct core *core, struct core_task *t)
{
    t->qprio = core->policy.las ? core_las_key(core, t, core->now) : t->priority;
    if (core->policy.las && t->state == TASK_QUEUED) {
        core_time due = las_promote_at(core, t);
        if (due < core->las_promote_next)
            core->las_promote_next = due;
    }
}

/* Promotes the queued tasks whose wait reached a guard's (las_promote_at). */
void core_las_promote(struct core *core, core_time now)
{
    if (core->las_promote_next > now)
        return;
    core->las_promote_next = CORE_TIME_NEVER;
    struct core_task **due = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < core->tasks.cap; i++) {
        if (core->tasks.keys[i] == 0)
            continue;
        struct core_task *t = core->tasks.values[i];
        if (t->state != TASK_QUEUED || !t->in_queue)
            continue;
        core_time when = las_promote_at(core, t);
        if (when == CORE_TIME_NEVER)
            continue;
        if (when <= now) {
            core_xgrow((void **)&due, &cap, n + 1, sizeof *due);
            due[n++] = t;
        } else if (when < core->las_promote_next) {
            core->las_promote_next = when;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct core_task *t = due[i];
        struct core_queue *queue = core_task_queue(core, t);
        core_queue_remove(queue, t);
        t->promoted = true;
        if (core->policy.las_starve_reset)
            t->service_base = t->service;
        t->qprio = core_las_key(core, t, now);
        core_queue_insert(queue, t);
        core->stats.promotions++;
        core->version++;
    }
    free(due);
}

void core_las_protect(const struct core *core, struct core_task *t, bool promoted)
{
    const struct core_policy *policy = &core->policy;
    struct core_run *run = t->run;
    int64_t waited = run->started - t->submit_time - t->run_total;
    /* Promoted (and not reset: Tiresias's promotion protects nothing), or waited
     * las_protect_wait_ms in all: protected las_protect_run_ms (promoted), else
     * las_protect_ratio x its wait (in proportion to what it made up for), else for its whole
     * run. Preempted las_max_preempt times: its whole run. */
    promoted = promoted && !policy->las_starve_reset;
    bool guarded =
        promoted || (policy->las_protect_wait_ms > 0 && waited >= policy->las_protect_wait_ms);
    if (policy->las_max_preempt > 0 && t->preempted >= policy->las_max_preempt) {
        run->protect = true;
    } else if (promoted && policy->las_protect_run_ms > 0) {
        run->protect_until = core_time_add(run->started, policy->las_protect_run_ms);
    } else if (guarded && policy->las_protect_ratio > 0) {
        double ms = policy->las_protect_ratio * (double)waited;
        run->protect_until = core_time_add(run->started, ms < 9e18 ? (int64_t)ms : INT64_MAX);
    } else if (guarded) {
        run->protect = true;
    }
}

struct las_cand {
    struct core_run *run;
    double service;
};

static int las_cmp_cand(const void *a, const void *b)
{
    const struct las_cand *x = a, *y = b;
    if (x->service != y->service)
        return x->service > y->service ? -1 : 1;
    return (x->run->task->id > y->run->task->id) - (x->run->task->id < y->run->task->id);
}

static void las_release(struct core *core, const struct core_run *run)
{
    const int *nodes = run->placement.nnodes > 1 ? run->placement.nodes : &run->placement.node;
    int nnodes = run->placement.nnodes > 1 ? run->placement.nnodes : 1;
    for (int k = 0; k < nnodes; k++)
        core_sched_scratch_node(core, nodes[k]);
    core_place_release(&core->scratch, &run->placement, &run->task->req);
}

static bool las_runs_on(const struct core_run *run, int node)
{
    if (run->placement.nnodes <= 1)
        return run->placement.node == node;
    for (int k = 0; k < run->placement.nnodes; k++)
        if (run->placement.nodes[k] == node)
            return true;
    return false;
}

static void las_emit(struct core *core, struct core_run *run, struct core_actions *out)
{
    run->preempting = true;
    struct core_action *act = core_emit(out, CORE_ACT_PREEMPT, run->task->id);
    act->attempt = run->task->attempts;
    core->stats.preemptions++;
}

/* The attempts t may preempt now, most-served first, into cand[]; returns how many. */
static size_t las_candidates(struct core *core, const struct core_task *t, core_time now,
                             struct las_cand *cand)
{
    int qt = core_las_queue(core, t, now);
    /* las_mrl_factor: the least service a victim must be expected to have left (INFINITY
     * when t has attained more than any task that ended: then t preempts nothing, promoted
     * or not; it starts as GPUs free up). */
    double least = 0;
    struct core_las_history *h = core->las_history;
    if (core->policy.las_mrl_factor > 0 && h != NULL && h->n >= LAS_HISTORY_MIN)
        least = core->policy.las_mrl_factor * las_residual(h, las_service(t, now));
    size_t n = 0;
    for (struct core_run *run = core->running; run != NULL; run = run->next) {
        struct core_task *v = run->task;
        if (run->preempting || run->protect || !run->claimed || !v->preemptible ||
            v->state != TASK_RUNNING || now - run->started < core->policy.las_min_run_ms ||
            now < run->protect_until || core_las_queue(core, v, now) <= qt)
            continue;
        double service = las_service(v, now);
        if (least > 0 && !(las_residual(h, service) > least))
            continue;
        cand[n++] = (struct las_cand){.run = run, .service = service};
    }
    qsort(cand, n, sizeof *cand, las_cmp_cand);
    return n;
}

/* A single-node request: releases cand[] in order in the scratch copy, counting per node how
 * many it takes for req to fit there; appends the preemptions of the node that needs fewest
 * (the first to get there among equals, so the most-served). */
static void las_pick_node(struct core *core, const struct core_request *req,
                          const struct las_cand *cand, size_t n, struct core_actions *out)
{
    int *count = core_xcalloc((size_t)core->place.nnodes, sizeof *count);
    int *need = core_xcalloc((size_t)core->place.nnodes, sizeof *need);
    int best = -1;
    struct core_placement pl;
    for (size_t i = 0; i < n && !(best >= 0 && need[best] == 1); i++) {
        const struct core_run *run = cand[i].run;
        las_release(core, run);
        const int *nodes = run->placement.nnodes > 1 ? run->placement.nodes : &run->placement.node;
        int nn = run->placement.nnodes > 1 ? run->placement.nnodes : 1;
        for (int k = 0; k < nn; k++) {
            int node = nodes[k];
            if (need[node] > 0 || (++count[node], best >= 0 && count[node] >= need[best]))
                continue;
            if (core_place_fit_node(&core->scratch, node, req, core->policy.best_fit, &pl)) {
                need[node] = count[node];
                if (best < 0 || need[node] < need[best])
                    best = node;
            }
        }
    }
    for (size_t i = 0, left = best >= 0 ? (size_t)need[best] : 0; i < n && left > 0; i++)
        if (las_runs_on(cand[i].run, best)) {
            las_emit(core, cand[i].run, out);
            left--;
        }
    free(count);
    free(need);
}

void core_las_preempt(struct core *core, const struct core_task *t, core_time now,
                      struct core_actions *out)
{
    const struct core_request *req = &t->req;
    if (t->req.gpus == 0 || t->backend != CORE_BACKEND_LOCAL)
        return;
    bool span = core_place_spans(&core->place, req);
    int ncand = 0, total = 0;
    struct core_placement pl;
    core_sched_new_stamp(core);
    if (span) /* the whole nodes free now count, as in backfill's reservation */
        for (int i = 0; i < core->place.nnodes; i++)
            core_sched_span_consider(core, core->place.nodes, i, req, &ncand, &total);
    /* What is already being stopped: when that makes room, nothing more is. */
    for (struct core_run *run = core->running; run != NULL; run = run->next)
        if (run->preempting && run->claimed &&
            core_sched_release_fits(core, run, req, span, &ncand, &total, &pl))
            return;
    struct las_cand *cand = core_xmalloc((core->nrunning + 1) * sizeof *cand);
    size_t n = las_candidates(core, t, now, cand);
    if (!span) {
        las_pick_node(core, req, cand, n, out);
    } else {
        /* Whole nodes: the most-served first until enough are free. */
        for (size_t i = 0; i < n; i++) {
            if (!core_sched_release_fits(core, cand[i].run, req, true, &ncand, &total, &pl))
                continue;
            for (size_t k = 0; k <= i; k++)
                las_emit(core, cand[k].run, out);
            break;
        }
    }
    free(cand);
}

/* The next time a las pass would act by the clock alone: a promotion due, or, while a task
 * waits (wait_q: the lowest queue of a task that did not fit, -1 none), a preemptible attempt
 * reaching a queue above it (its threshold) or, already there, its minimum run. */
void core_las_wakeup(struct core *core, core_time now, int wait_q)
{
    core_time next = core->las_promote_next;
    if (wait_q >= 0) {
        for (struct core_run *run = core->running; run != NULL; run = run->next) {
            struct core_task *v = run->task;
            double gpus = core_las_gpus(v);
            if (!v->preemptible || run->preempting || run->protect || v->state != TASK_RUNNING ||
                gpus <= 0)
                continue;
            core_time at;
            if (core_las_queue(core, v, now) > wait_q) {
                at = core_time_add(run->started, core->policy.las_min_run_ms);
                if (run->protect_until > at)
                    at = run->protect_until;
            } else if (wait_q < core->policy.las_nthresholds) {
                /* The first ms at which its service reaches the threshold (a ceiling). */
                double ms = (core->policy.las_threshold[wait_q] * 1000 -
                             (las_service(v, now) - v->service_base)) / gpus;
                int64_t step = (int64_t)ms;
                if ((double)step < ms)
                    step++;
                at = core_time_add(now, step > 0 ? step : 1);
                core_time minrun = core_time_add(run->started, core->policy.las_min_run_ms);
                if (minrun > at)
                    at = minrun;
                if (run->protect_until > at)
                    at = run->protect_until;
            } else {
                continue;
            }
            if (at > now && at < next)
                next = at;
        }
    }
    core->las_wakeup = next;
}
