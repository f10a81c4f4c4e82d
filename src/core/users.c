/* Users: fair share between them and limits on each.
 *
 * Usage. Each user's usage is its GPU-time (GPU-ms held by running attempts), decayed with a
 * half-life h: what was used t ago counts 2^(-t/h) of its worth (Slurm's PriorityDecayHalfLife).
 * A user keeps (usage, usage_time, gpus held): moving it to a later time T multiplies the usage
 * by d = 2^(-(T - usage_time)/h) and adds what the held GPUs used meanwhile, decayed exactly:
 *     gpus * integral_0^dt 2^(-s/h) ds = gpus * h / ln 2 * (1 - d).
 * So nothing is charged per tick: a user is brought up to date when its GPUs change and when a
 * pass orders users, O(1) each. Without decay (h = 0) usage is plain GPU-time.
 *
 * Fair share. With policy.fair_share each user has its own ready queue (queue.c, its own order:
 * priority, aging, ready time) and a pass merges the users' queues with a heap keyed by
 * (usage, GPUs held, user): the least-used user's next task comes first. Starting a task grows
 * its user's GPUs held, so among users of equal usage (all new ones) starts alternate. Usage
 * itself is fixed within a pass (one "now"). Cost: O(log users) per task handed out, plus
 * O(users with ready tasks) to start a pass.
 *
 * Limits. A user at its running limit, or with no GPU left under its GPU limit, is dropped from
 * the pass's heap at once (its queued tasks cost nothing); a task asking for more GPUs than the
 * user has left is skipped by sched.c. The queued limit is checked at submission
 * (core_check_submit()), never on restore: a limit lowered later holds back nothing already in.
 *
 * Core links no libm, so 2^-x is computed here (core_decay()). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/mem.h"

#define USERS_LN2 0.69314718055994530942

/* 1 - e^-y for 0 <= y < 1, by its series (accurate where 1 - exp would cancel). */
static double users_one_minus_exp(double y)
{
    double term = y, sum = 0;
    for (int k = 1; k < 30 && term != 0; k++) {
        sum += term;
        term *= -y / (k + 1);
    }
    return sum;
}

double core_decay(double x)
{
    if (!(x > 0))
        return 1;
    if (x > 1100)
        return 0;
    long n = (long)x;
    double r = 1 - users_one_minus_exp((x - (double)n) * USERS_LN2);
    double half = 0.5; /* r *= 2^-n by squaring */
    for (; n > 0 && r != 0; n >>= 1) {
        if (n & 1)
            r *= half;
        half *= half;
    }
    return r;
}

/* 1 - 2^-x, accurate for small x. */
static double users_decayed_part(double x)
{
    if (x < 1)
        return users_one_minus_exp(x * USERS_LN2);
    return 1 - core_decay(x);
}

/* The usage u would have at `at` (>= its usage_time), without changing it. */
static double users_usage_at(const struct core *core, const struct core_user *u, core_time at)
{
    if (at <= u->usage_time || (u->gpus == 0 && u->usage == 0))
        return u->usage;
    double dt = (double)at - (double)u->usage_time;
    int64_t h = core->policy.fair_share_half_life_ms;
    if (h <= 0)
        return u->usage + (double)u->gpus * dt;
    double x = dt / (double)h;
    return u->usage * core_decay(x) + (double)u->gpus * ((double)h / USERS_LN2) *
                                          users_decayed_part(x);
}

static void users_advance(const struct core *core, struct core_user *u, core_time at)
{
    if (at <= u->usage_time)
        return;
    u->usage = users_usage_at(core, u, at);
    u->usage_time = at;
}

struct core_user *core_user_get(struct core *core, uint32_t user)
{
    struct core_user *u = core_map_get(&core->users, (int64_t)user + 1);
    if (u != NULL)
        return u;
    u = core_xcalloc(1, sizeof *u);
    u->user = user;
    u->usage_time = core->now;
    u->limits = core->policy.user_limits;
    core_queue_init(&u->queue, core->policy.aging_ms, &core->shapes);
    core_map_put(&core->users, (int64_t)user + 1, u);
    return u;
}

static const struct core_user *users_find(const struct core *core, uint32_t user)
{
    return core_map_get(&core->users, (int64_t)user + 1);
}

void core_users_free(struct core *core)
{
    for (size_t i = 0; i < core->users.cap; i++) {
        if (core->users.keys[i] == 0)
            continue;
        struct core_user *u = core->users.values[i];
        core_queue_free(&u->queue);
        free(u);
    }
    core_map_free(&core->users);
    free(core->uheap);
}

struct core_queue *core_task_queue(struct core *core, const struct core_task *t)
{
    if (t->backend == CORE_BACKEND_SLURM)
        return &core->slurm_queue;
    return core->policy.fair_share ? &t->owner->queue : &core->queue;
}

/* What counts against a user's GPU limit and fair share: this machine's GPUs (a Slurm cluster
 * keeps its own accounts). */
static int users_task_gpus(const struct core_task *t)
{
    return t->req.gpus > 0 && t->backend == CORE_BACKEND_LOCAL ? t->req.gpus : 0;
}

void core_user_track(struct core *core, const struct core_task *t, core_time at, int delta)
{
    struct core_user *u = t->owner;
    int gpus = users_task_gpus(t);
    core->version++; /* its array's count changed, and this user's limits may have */
    if (t->backend == CORE_BACKEND_SLURM)
        return; /* users' limits and shares are this machine's */
    if (delta > 0 && at < u->usage_time) {
        /* A restored attempt that started before the user's clock: charge what it used. */
        double dt = (double)(u->usage_time - at);
        int64_t h = core->policy.fair_share_half_life_ms;
        u->usage += h <= 0 ? gpus * dt
                           : gpus * ((double)h / USERS_LN2) * users_decayed_part(dt / (double)h);
    } else {
        users_advance(core, u, delta > 0 ? at : core->now);
    }
    u->gpus += delta * gpus;
    u->running += delta;
}

/* At a limit that no task of the user can start under. */
static bool users_full(const struct core_user *u)
{
    return (u->limits.running > 0 && u->running >= u->limits.running) ||
           (u->limits.gpus > 0 && u->gpus >= u->limits.gpus);
}

bool core_user_blocked(const struct core_task *t)
{
    const struct core_user *u = t->owner;
    return users_full(u) ||
           (u->limits.gpus > 0 && u->gpus + users_task_gpus(t) > u->limits.gpus);
}

/* ---- a pass's order ------------------------------------------------------------------------ */

static bool users_before(const struct core_user *a, const struct core_user *b)
{
    if (a->usage != b->usage)
        return a->usage < b->usage;
    if (a->gpus != b->gpus)
        return a->gpus < b->gpus;
    return a->user < b->user;
}

static void users_heap_set(struct core *core, size_t i, struct core_user *u)
{
    core->uheap[i] = u;
    u->heap_index = i;
}

static void users_sift_down(struct core *core, size_t i)
{
    struct core_user **h = core->uheap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < core->uheap_n && users_before(h[l], h[top]))
            top = l;
        if (r < core->uheap_n && users_before(h[r], h[top]))
            top = r;
        if (top == i)
            return;
        struct core_user *tmp = h[i];
        users_heap_set(core, i, h[top]);
        users_heap_set(core, top, tmp);
        i = top;
    }
}

/* Removes heap entry i; keys only grow during a pass, so the moved entry only sinks. */
static void users_heap_remove(struct core *core, size_t i)
{
    struct core_user *last = core->uheap[--core->uheap_n];
    if (i == core->uheap_n)
        return;
    users_heap_set(core, i, last);
    users_sift_down(core, i);
}

void core_ready_start(struct core *core, core_time now)
{
    core->ulast = NULL;
    core->uheap_n = 0;
    if (!core->policy.fair_share) {
        core_queue_iter_start(&core->queue);
        return;
    }
    core_xgrow((void **)&core->uheap, &core->uheap_cap, core->users.n + 1, sizeof *core->uheap);
    for (size_t i = 0; i < core->users.cap; i++) {
        if (core->users.keys[i] == 0)
            continue;
        struct core_user *u = core->users.values[i];
        if (u->queue.n == 0 || users_full(u))
            continue;
        users_advance(core, u, now);
        core_queue_iter_start(&u->queue);
        u->peek = core_queue_iter_next(&u->queue);
        users_heap_set(core, core->uheap_n++, u);
    }
    for (size_t i = core->uheap_n / 2; i-- > 0;)
        users_sift_down(core, i);
}

struct core_task *core_ready_next(struct core *core, core_queue_skip_fn *skip, void *arg)
{
    if (!core->policy.fair_share)
        return core_queue_iter_next_skip(&core->queue, skip, arg);
    struct core_user *last = core->ulast;
    if (last != NULL) {
        /* Its task may have started since: its key grew, or it reached a limit. */
        last->peek = users_full(last) ? NULL : core_queue_iter_next_skip(&last->queue, skip, arg);
        if (last->peek == NULL)
            users_heap_remove(core, last->heap_index);
        else
            users_sift_down(core, last->heap_index);
    }
    if (core->uheap_n == 0) {
        core->ulast = NULL;
        return NULL;
    }
    core->ulast = core->uheap[0];
    return core->ulast->peek;
}

size_t core_users_ready(const struct core *core)
{
    size_t n = 0;
    for (size_t i = 0; i < core->users.cap && n < 2; i++) {
        const struct core_user *u = core->users.values[i];
        if (core->users.keys[i] != 0 && u->queue.n > 0 && !users_full(u))
            n++;
    }
    return n;
}

/* ---- the driver's interface ---------------------------------------------------------------- */

void core_set_user_limits(struct core *core, uint32_t user, const struct core_limits *limits)
{
    struct core_user *u = core_user_get(core, user);
    core->version++;
    u->own_limits = limits != NULL;
    u->limits = limits != NULL ? *limits : core->policy.user_limits;
}

static size_t users_waiting(const struct core_user *u)
{
    return u->counts[TASK_HELD] + u->counts[TASK_PENDING] + u->counts[TASK_QUEUED] +
           u->counts[TASK_RETRYING];
}

static struct core_limits users_limits(const struct core *core, const struct core_user *u)
{
    return u != NULL ? u->limits : core->policy.user_limits;
}

int core_check_submit(const struct core *core, uint32_t user, size_t ntasks, char *why,
                      size_t len)
{
    const struct core_user *u = users_find(core, user);
    struct core_limits limits = users_limits(core, u);
    size_t waiting = u != NULL ? users_waiting(u) : 0;
    if (limits.queued <= 0 || waiting + ntasks <= (size_t)limits.queued)
        return 0;
    if (why != NULL && len > 0)
        snprintf(why, len, "user limit: %zu tasks waiting, %zu more asked (user-queued = %d)",
                 waiting, ntasks, limits.queued);
    return -1;
}

void core_add_usage(struct core *core, uint32_t user, double gpu_seconds, core_time at)
{
    struct core_user *u = core_user_get(core, user);
    double gpu_ms = gpu_seconds * 1000;
    core->version++; /* the order between users */
    if (at >= u->usage_time) {
        users_advance(core, u, at);
        u->usage += gpu_ms;
        return;
    }
    int64_t h = core->policy.fair_share_half_life_ms;
    u->usage += h <= 0 ? gpu_ms : gpu_ms * core_decay((double)(u->usage_time - at) / (double)h);
}

size_t core_users(const struct core *core, core_time now, struct core_user_info *v, size_t max)
{
    if (now < core->now)
        now = core->now;
    double total = 0;
    for (size_t i = 0; i < core->users.cap; i++)
        if (core->users.keys[i] != 0)
            total += users_usage_at(core, core->users.values[i], now);
    size_t n = 0;
    for (size_t i = 0; i < core->users.cap; i++) {
        if (core->users.keys[i] == 0)
            continue;
        const struct core_user *u = core->users.values[i];
        if (n < max) {
            /* Insertion by user number: the table is small and unordered. */
            size_t j = n;
            while (j > 0 && v[j - 1].user > u->user) {
                v[j] = v[j - 1];
                j--;
            }
            double usage = users_usage_at(core, u, now);
            v[j] = (struct core_user_info){
                .user = u->user, .running = u->running, .waiting = users_waiting(u),
                .queued = u->counts[TASK_QUEUED], .gpus = u->gpus, .usage = usage / 1000,
                .share = total > 0 ? usage / total : 0, .limits = u->limits,
            };
        }
        n++;
    }
    return n;
}

void core_user_why(const struct core_task *t, char *why, size_t len)
{
    const struct core_user *u = t->owner;
    if (u->limits.running > 0 && u->running >= u->limits.running)
        snprintf(why, len, "user limit: %d task%s running", u->running,
                 u->running == 1 ? "" : "s");
    else
        snprintf(why, len, "user limit: %d GPU%s in use", u->gpus, u->gpus == 1 ? "" : "s");
}
