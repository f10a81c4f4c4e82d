/* Why a task waits: the first thing that keeps it from starting, computed on demand.
 *
 * What does not need the queue is read off the task: held, a dependency not yet ended, a
 * backoff, a drain, Slurm not answering. A queued local task is asked about through a pass that
 * only looks (sched.c: core_schedule_look): the same order, limits, shapes and backfill
 * reservation a real pass uses, with nothing started, so that the answer is the pass's own
 * verdict — array or user limit, no room for its shape (then what is where, GPU by GPU on a
 * node), kept for the head's reservation, behind the head in strict order, past the scan bound,
 * or nothing (the next pass starts it). One look answers for every task asked about: O(queue)
 * in all. Nothing is stored per pass. With las, a task's place in the queues follows its reason
 * (why_las). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

/* A queued local task asked about: its id, its place in out, and what the look saw of it. */
struct why_key {
    int64_t id;
    size_t at;
    bool seen;
    enum core_look_verdict verdict;
};

struct why_look {
    const struct core *core;
    struct why_key *keys; /* sorted by id */
    size_t n;
    struct core_why *out;
};

static struct why_key *why_find(const struct why_look *w, int64_t id)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->keys[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n && w->keys[lo].id == id ? &w->keys[lo] : NULL;
}

/* Appends to buf[len] at *off, never past its end. */
static void why_add(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void why_add(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    if (*off >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *off, len - *off, fmt, ap);
    va_end(ap);
    if (n > 0)
        *off += (size_t)n < len - *off ? (size_t)n : len - *off - 1;
}

static void why_size(char *buf, size_t len, uint64_t bytes)
{
    static const char units[] = "KMGTP";
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%lluB", (unsigned long long)bytes);
    else
        snprintf(buf, len, v < 10 && v != (int)v ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* The tasks running on GPU g of node n: "claimed by 3, 4". */
static void why_claimants(const struct core *core, int n, int g, char *buf, size_t len,
                          size_t *off)
{
    int shown = 0;
    for (const struct core_run *run = core->running; run != NULL; run = run->next) {
        const struct core_placement *pl = &run->placement;
        bool on = false;
        if (!run->claimed)
            continue;
        if (pl->nnodes > 1) {
            for (int k = 0; k < pl->nnodes && !on; k++)
                on = pl->nodes[k] == n;
        } else if (pl->node == n) {
            for (int i = 0; i < pl->ngpus && !on; i++)
                on = pl->gpu[i] == g;
        }
        if (!on)
            continue;
        if (shown == 4) {
            why_add(buf, len, off, ", …");
            break;
        }
        why_add(buf, len, off, "%s%lld", shown++ ? ", " : " (claimed by ", (long long)run->task->id);
    }
    if (shown > 0)
        why_add(buf, len, off, ")");
}

/* No room for t's request: what it needs, and what the GPUs have (one node: GPU by GPU). */
static void why_resources(const struct core *core, const struct core_task *t,
                          struct core_why *w)
{
    const struct core_request *req = &t->req;
    char *buf = w->text, mem[16];
    size_t len = sizeof w->text, off = 0;
    w->wait = CORE_WAIT_RESOURCES;
    if (req->gpus == 0) {
        why_add(buf, len, &off, "needs %d CPU%s", core_place_cpus(req),
                core_place_cpus(req) == 1 ? "" : "s");
        if (req->mem > 0) {
            why_size(mem, sizeof mem, req->mem);
            why_add(buf, len, &off, " and %s of memory", mem);
        }
        why_add(buf, len, &off, ": not free now");
        return;
    }
    why_add(buf, len, &off, "needs %d GPU%s", req->gpus, req->gpus == 1 ? "" : "s");
    if (req->gpu_mem > 0) {
        why_size(mem, sizeof mem, req->gpu_mem);
        why_add(buf, len, &off, " with %s free", mem);
    } else {
        why_add(buf, len, &off, " to itself");
    }
    const struct core_place *place = &core->place;
    if (place->nnodes != 1) {
        int best = 0;
        for (int n = 0; n < place->nnodes; n++)
            if (place->nodes[n].ngpus - place->nodes[n].gpus_busy > best)
                best = place->nodes[n].ngpus - place->nodes[n].gpus_busy;
        why_add(buf, len, &off, ": at most %d idle GPU%s on a node", best, best == 1 ? "" : "s");
        return;
    }
    const struct core_place_node *node = &place->nodes[0];
    why_add(buf, len, &off, ":");
    for (int g = 0; g < node->ngpus; g++) {
        const struct core_place_gpu *gpu = &node->gpu[g];
        if (req->gpu_types != 0 && (req->gpu_types & (1ULL << gpu->type)) == 0)
            continue; /* not of its type: not a candidate, not worth a word */
        why_add(buf, len, &off, "%s GPU%d ", g ? "," : "", g);
        if (gpu->offline) {
            why_add(buf, len, &off, "out of service");
            continue;
        }
        if (gpu->exclusive) {
            why_add(buf, len, &off, "taken whole");
        } else {
            uint64_t used = gpu->mem_claimed + gpu->outside;
            uint64_t free_mem = gpu->mem_total > used ? gpu->mem_total - used : 0;
            why_size(mem, sizeof mem, free_mem);
            why_add(buf, len, &off, req->gpu_mem == 0 && gpu->tasks > 0 ? "shared" : "%s free",
                    mem);
        }
        why_claimants(core, 0, g, buf, len, &off);
        if (gpu->busy && gpu->util > 0)
            why_add(buf, len, &off, " busy %d%%", gpu->util);
        else if (gpu->busy)
            why_add(buf, len, &off, " busy");
    }
}

static bool why_no_type(const struct core *core, const struct core_task *t)
{
    if (t->req.gpus == 0 || t->req.gpu_types == 0)
        return false;
    for (int n = 0; n < core->place.nnodes; n++)
        for (int g = 0; g < core->place.nodes[n].ngpus; g++)
            if (t->req.gpu_types & (1ULL << core->place.nodes[n].gpu[g].type))
                return false;
    return true;
}

static void why_array(const struct core *core, const struct core_task *t, struct core_why *w)
{
    w->wait = CORE_WAIT_ARRAY_LIMIT;
    snprintf(w->text, sizeof w->text, "array limit: %d of %d running",
             core_array_running(core, t->array_id), t->array_limit);
}

static void why_note(void *arg, const struct core_task *t, enum core_look_verdict v,
                     const struct core_task *head)
{
    struct why_look *look = arg;
    struct why_key *key = why_find(look, t->id);
    if (key == NULL)
        return;
    struct core_why *w = &look->out[key->at];
    key->seen = true;
    key->verdict = v;
    switch (v) {
    case CORE_LOOK_FITS:
        w->wait = CORE_WAIT_NEXT_PASS;
        snprintf(w->text, sizeof w->text, "nothing: it starts at the next pass");
        break;
    case CORE_LOOK_ARRAY_FULL:
        why_array(look->core, t, w);
        break;
    case CORE_LOOK_USER_LIMIT:
        w->wait = CORE_WAIT_USER_LIMIT;
        core_user_why(t, w->text, sizeof w->text);
        break;
    case CORE_LOOK_NO_FIT:
        break; /* worded after the look, from the state it saw (why_resources) */
    case CORE_LOOK_RESERVED:
        w->wait = CORE_WAIT_RESERVED;
        w->task = head != NULL ? head->id : 0;
        snprintf(w->text, sizeof w->text, "reserved for task %lld (backfill: it would delay it)",
                 (long long)w->task);
        break;
    }
}

/* What keeps t waiting that does not need the queue; false for a queued local task. */
static bool why_alone(const struct core *core, const struct core_task *t, struct core_why *w)
{
    switch (t->state) {
    case TASK_HELD:
        w->wait = CORE_WAIT_HELD;
        snprintf(w->text, sizeof w->text, "held");
        return true;
    case TASK_PENDING:
        for (size_t i = 0; i < t->ndeps; i++) {
            const struct core_task *dep = core_task_get(core, t->deps[i].id);
            if (t->deps[i].state == -1 && dep != NULL && !task_state_terminal(dep->state)) {
                w->wait = CORE_WAIT_DEPENDENCY;
                w->task = dep->id;
                w->state = (int)dep->state;
                snprintf(w->text, sizeof w->text, "dependency %lld %s", (long long)dep->id,
                         task_state_name(dep->state));
                return true;
            }
        }
        w->wait = CORE_WAIT_NEXT_PASS;
        snprintf(w->text, sizeof w->text, "nothing: its dependencies have ended");
        return true;
    case TASK_RETRYING:
        w->wait = CORE_WAIT_BACKOFF;
        w->until = t->retry_at;
        snprintf(w->text, sizeof w->text, "retry backoff");
        return true;
    case TASK_QUEUED:
        break;
    default:
        return true; /* running or ended: CORE_WAIT_NONE */
    }
    if (t->parked == CORE_PARK_BEGIN) {
        w->wait = CORE_WAIT_BEGIN;
        w->until = t->begin;
        snprintf(w->text, sizeof w->text, "begins");
        return true;
    }
    if (t->parked == CORE_PARK_WINDOW) {
        w->wait = CORE_WAIT_OFF_PEAK;
        w->until = core->off_open;
        snprintf(w->text, sizeof w->text, w->until == CORE_TIME_NEVER
                                              ? "off-peak: no window is set"
                                              : "off-peak: the window opens");
        return true;
    }
    if (core->draining) {
        w->wait = CORE_WAIT_DRAINED;
        snprintf(w->text, sizeof w->text, "drained: nothing new starts");
        return true;
    }
    if (t->backend == CORE_BACKEND_SLURM) {
        if (core->slurm_down) {
            w->wait = CORE_WAIT_SLURM;
            snprintf(w->text, sizeof w->text, "slurm is not answering");
        } else if (t->array_id != 0 && t->array_limit > 0 && t->attempts > 0 &&
                   core_array_running(core, t->array_id) >= t->array_limit) {
            why_array(core, t, w);
        } else {
            w->wait = CORE_WAIT_NEXT_PASS;
            snprintf(w->text, sizeof w->text, "nothing: it goes to Slurm at the next pass");
        }
        return true;
    }
    if (why_no_type(core, t)) {
        w->wait = CORE_WAIT_NO_TYPE;
        snprintf(w->text, sizeof w->text, "no GPU of its type");
        return true;
    }
    /* Limits, as a pass checks them first (with fair share a user at a limit is skipped whole,
     * so the look would not even see the task). */
    if (t->array_id != 0 && t->array_limit > 0 &&
        core_array_running(core, t->array_id) >= t->array_limit) {
        why_array(core, t, w);
        return true;
    }
    if (core_user_blocked(t)) {
        w->wait = CORE_WAIT_USER_LIMIT;
        core_user_why(t, w->text, sizeof w->text);
        return true;
    }
    return false;
}

/* ---- las ------------------------------------------------------------------------------------
 * With las, where a task stands in the queues, after its reason: a queued one its queue and
 * attained service, whether the starvation guard promoted it and how often it was preempted;
 * a running one asked to yield says so (its wait stays CORE_WAIT_NONE). */
static void why_las(const struct core *core, const struct core_task *t, core_time now,
                    struct core_why *w)
{
    size_t off = strlen(w->text), len = sizeof w->text;
    const char *sep = off > 0 ? "; " : "";
    w->reason_len = off;
    if (t->run != NULL) {
        if (t->run->preempting)
            why_add(w->text, len, &off, "%sasked to yield its GPUs (las: preempted for a task "
                    "of a lower queue; it is queued again when it exits)", sep);
        return;
    }
    if (t->state != TASK_QUEUED || t->backend != CORE_BACKEND_LOCAL)
        return;
    why_add(w->text, len, &off, "%slas queue %d of %d: %.1f GPU-hours attained", sep,
            core_las_queue(core, t, now) + 1, core->policy.las_nthresholds + 1,
            core_task_service(core, t->id, now) / 3600);
    if (t->promoted) {
        int64_t waited = now - t->submit_time - t->run_total;
        why_add(w->text, len, &off, ", promoted: starved (%.1f hours waited in all)",
                waited > 0 ? (double)waited / 3600000 : 0.0);
    }
    if (t->preempted > 0)
        why_add(w->text, len, &off, ", preempted %d time%s", t->preempted,
                t->preempted == 1 ? "" : "s");
}

static int why_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct why_key *)a)->id, y = ((const struct why_key *)b)->id;
    return (x > y) - (x < y);
}

void core_why(struct core *core, const int64_t *ids, size_t n, core_time now,
              struct core_why *out)
{
    struct why_key *keys = core_xcalloc(n + 1, sizeof *keys);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        const struct core_task *t = core_task_get(core, ids[i]);
        if (t != NULL && !why_alone(core, t, &out[i]))
            keys[m++] = (struct why_key){.id = ids[i], .at = i}; /* the look answers */
    }
    if (m > 0) {
        qsort(keys, m, sizeof *keys, why_cmp);
        struct why_look look = {core, keys, m, out};
        struct core_look pass = {.note = why_note, .arg = &look};
        core_schedule_look(core, now, &pass);
        for (size_t i = 0; i < m; i++) {
            struct core_why *w = &out[keys[i].at];
            const struct core_task *t = core_task_get(core, keys[i].id);
            if (i > 0 && keys[i].id == keys[i - 1].id) { /* asked twice: the same answer */
                *w = out[keys[i - 1].at];
                continue;
            }
            if (keys[i].seen && keys[i].verdict != CORE_LOOK_NO_FIT)
                continue; /* worded by why_note */
            if (!keys[i].seen && pass.stop == CORE_LOOK_STOP_ORDER && pass.head != t->id) {
                w->wait = CORE_WAIT_ORDER;
                w->task = pass.head;
                snprintf(w->text, sizeof w->text,
                         "behind task %lld, which does not fit (strict order)",
                         (long long)pass.head);
            } else if (!keys[i].seen && pass.stop == CORE_LOOK_STOP_SCAN) {
                w->wait = CORE_WAIT_SCAN;
                snprintf(w->text, sizeof w->text,
                         "not looked at: the pass looks at %d tasks past the first that waits",
                         core->policy.max_scan);
            } else {
                why_resources(core, t, w); /* no room for it, or the pass found none left */
            }
        }
    }
    free(keys);
    for (size_t i = 0; i < n && core->policy.las; i++) {
        const struct core_task *t = core_task_get(core, ids[i]);
        if (t != NULL)
            why_las(core, t, now, &out[i]);
    }
}

int core_task_why(struct core *core, int64_t id, char *why, size_t len)
{
    struct core_why w;
    const struct core_task *t = core_task_get(core, id);
    if (t == NULL || t->state != TASK_QUEUED)
        return -1;
    core_why(core, &id, 1, core->now, &w);
    if (w.wait == CORE_WAIT_NONE || w.wait == CORE_WAIT_NEXT_PASS)
        return -1;
    snprintf(why, len, "%s", w.text);
    return 0;
}
