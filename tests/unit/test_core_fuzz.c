/* core/: random event sequences against a driver's model of the tasks, checking after every
 * event that core's internal structures agree with each other (counts, queue, retry heap,
 * parked tasks, running list, claimed resources) and that its actions obey the rules a driver
 * relies on (starts only when dependencies allow, never before a begin time or outside the
 * off-peak window, never over-committing a GPU, upstream failures never left waiting, a
 * preemption only at the window's close and once per attempt). Deterministic: fixed seeds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/state.h"

#define GB (1024ULL * 1024 * 1024)
#define MAXT 600
#define NNODES 2

struct model_task {
    bool exists;
    int state;               /* as the actions said */
    bool running;            /* an attempt runs (START seen, exit not yet) */
    int attempts;
    struct core_request req;
    struct core_placement pl;
    struct core_dep deps[3];
    size_t ndeps;
    int64_t array_id;
    int array_limit;
    core_time begin;         /* test_fuzz_when: --begin, --off-peak, preemptible */
    bool off_peak, preemptible;
    int preempt_asked;       /* the attempt a PREEMPT named, 0 = none */
};

struct fuzz {
    struct core *core;
    struct core_actions out;
    struct core_node nodes[NNODES];
    struct model_task t[MAXT + 1];
    int64_t next_id;
    core_time now;
    unsigned seed;
    bool when;               /* begin times and an off-peak window that moves */
    core_time open, close;   /* the window core was given last */
};

static unsigned fuzz_rand(struct fuzz *z, unsigned n)
{
    z->seed = z->seed * 1103515245u + 12345u;
    return (z->seed >> 8) % n;
}

/* ---- internal invariants ------------------------------------------------------------------- */

/* Checks one ready queue (core's, or a user's under fair share); returns its length. */
static size_t check_one_queue(const struct core_queue *q)
{
    size_t n = 0;
    for (size_t l = 0; l < q->nlevels; l++) {
        if (l > 0)
            assert_true(q->levels[l - 1].priority > q->levels[l].priority);
        assert_non_null(q->levels[l].head);
        const struct core_task *prev = NULL;
        for (const struct core_task *t = q->levels[l].head; t != NULL; t = t->qnext, n++) {
            assert_int_equal(t->state, TASK_QUEUED);
            assert_true(t->in_queue);
            assert_int_equal(t->priority, q->levels[l].priority);
            assert_true(t->qprev == prev);
            if (prev != NULL)
                assert_true(core_queue_before(q, prev, t));
            prev = t;
        }
        assert_true(q->levels[l].tail == prev);
    }
    assert_int_equal(n, q->n);
    return n;
}

/* Every ready task in its queue (core's, or its user's under fair share), and each user's
 * counts adding up to core's. */
/* parked: queued tasks out of the ready queue (core/when.c). */
static void check_queue(const struct core *core, size_t parked)
{
    size_t n = check_one_queue(&core->queue);
    size_t counts[TASK_NSTATES] = {0};
    int gpus = 0, running = 0;
    for (size_t i = 0; i < core->users.cap; i++) {
        if (core->users.keys[i] == 0)
            continue;
        const struct core_user *u = core->users.values[i];
        n += check_one_queue(&u->queue);
        if (!core->policy.fair_share)
            assert_int_equal(u->queue.n, 0);
        for (int st = 0; st < TASK_NSTATES; st++)
            counts[st] += u->counts[st];
        assert_true(u->gpus >= 0 && u->running >= 0);
        gpus += u->gpus;
        running += u->running;
    }
    assert_int_equal(n + parked, core->counts[TASK_QUEUED]);
    assert_memory_equal(counts, core->counts, sizeof counts);
    assert_int_equal(running, core->nrunning);
    int want_gpus = 0;
    for (const struct core_run *run = core->running; run != NULL; run = run->next)
        want_gpus += run->task->req.gpus > 0 ? run->task->req.gpus : 0;
    assert_int_equal(gpus, want_gpus);
}

static void check_retry(const struct core *core)
{
    const struct core_retry *h = &core->retry;
    assert_int_equal(h->n, core->counts[TASK_RETRYING]);
    for (size_t i = 0; i < h->n; i++) {
        assert_int_equal(h->v[i]->heap_index, i);
        assert_int_equal(h->v[i]->state, TASK_RETRYING);
        if (i > 0)
            assert_true(h->v[(i - 1) / 2]->retry_at <= h->v[i]->retry_at);
    }
}

/* Recomputes every claim from the running list and compares. */
static void check_place(const struct core *core)
{
    struct core_place want = { 0 };
    core_place_copy(&want, &core->place);
    memset(want.idle, 0, sizeof want.idle);
    for (int i = 0; i < want.nnodes; i++) {
        struct core_place_node *node = &want.nodes[i];
        node->cpus_used = 0;
        node->mem_used = 0;
        node->gpus_busy = 0;
        want.idle[node->ngpus]++;
        for (int g = 0; g < node->ngpus; g++) {
            node->gpu[g].mem_claimed = 0;
            node->gpu[g].tasks = 0;
            node->gpu[g].exclusive = false;
        }
    }
    want.open_gpus = 0;
    want.open_cpu_nodes = 0;
    for (int i = 0; i < want.nnodes; i++) {
        want.open_gpus += want.nodes[i].ngpus;
        want.open_cpu_nodes++;
    }
    size_t n = 0;
    for (const struct core_run *run = core->running; run != NULL; run = run->next, n++) {
        assert_true(run->task->run == run);
        assert_true(run->claimed);
        core_place_claim(&want, &run->placement, &run->task->req);
    }
    assert_int_equal(n, core->nrunning);
    for (int i = 0; i < want.nnodes; i++) {
        const struct core_place_node *a = &want.nodes[i], *b = &core->place.nodes[i];
        assert_int_equal(a->cpus_used, b->cpus_used);
        assert_int_equal(a->mem_used, b->mem_used);
        assert_int_equal(a->gpus_busy, b->gpus_busy);
        if (a->cpus > 0)
            assert_true(a->cpus_used <= a->cpus);
        if (a->mem > 0)
            assert_true(a->mem_used <= a->mem);
        for (int g = 0; g < a->ngpus; g++) {
            assert_int_equal(a->gpu[g].mem_claimed, b->gpu[g].mem_claimed);
            assert_int_equal(a->gpu[g].tasks, b->gpu[g].tasks);
            assert_int_equal(a->gpu[g].exclusive, b->gpu[g].exclusive);
            assert_true(a->gpu[g].mem_claimed <= a->gpu[g].mem_total);
            if (a->gpu[g].exclusive)
                assert_int_equal(a->gpu[g].tasks, 1);
        }
    }
    assert_int_equal(want.open_gpus, core->place.open_gpus);
    assert_int_equal(want.open_cpu_nodes, core->place.open_cpu_nodes);
    assert_memory_equal(want.idle, core->place.idle, sizeof want.idle);
    /* The running list stays youngest first (sched.c relies on it). */
    for (const struct core_run *run = core->running; run != NULL && run->next != NULL;
         run = run->next)
        assert_true(run->started > run->next->started ||
                    (run->started == run->next->started && run->task->id < run->next->task->id));
    core_place_free(&want);
}

/* The parked tasks (core/when.c): those waiting for their begin in the heap by it, the
 * off-peak ones on the list, none parked for the window while it is open, none of the list in
 * the ready queue while it is closed. Returns how many are parked. */
static size_t check_parked(const struct core *core)
{
    size_t parked = 0, begin = 0, listed = 0, on_list = 0;
    for (size_t i = 0; i < core->tasks.cap; i++) {
        if (core->tasks.keys[i] == 0)
            continue;
        const struct core_task *t = core->tasks.values[i];
        if (t->state == TASK_QUEUED)
            assert_true(t->in_queue != (t->parked != CORE_PARK_NONE));
        else
            assert_true(!t->in_queue && t->parked == CORE_PARK_NONE && !t->on_offpeak);
        parked += t->parked != CORE_PARK_NONE;
        begin += t->parked == CORE_PARK_BEGIN;
        on_list += t->on_offpeak;
        if (t->parked == CORE_PARK_BEGIN)
            assert_true(!t->on_offpeak && t->retry_at == t->begin);
        if (t->parked == CORE_PARK_WINDOW)
            assert_true(t->on_offpeak && !core->off_is_open);
        if (t->on_offpeak && !core->off_is_open)
            assert_false(t->in_queue);
    }
    const struct core_retry *h = &core->later;
    assert_int_equal(h->n, begin);
    for (size_t i = 0; i < h->n; i++) {
        assert_int_equal(h->v[i]->heap_index, i);
        if (i > 0)
            assert_true(h->v[(i - 1) / 2]->retry_at <= h->v[i]->retry_at);
    }
    for (const struct core_task *t = core->offpeak; t != NULL; t = t->onext) {
        assert_true(t->on_offpeak && t->off_peak && t->state == TASK_QUEUED);
        assert_true(t->onext == NULL || t->onext->oprev == t);
        listed++;
    }
    assert_int_equal(listed, on_list);
    return parked;
}

static void check_core(const struct core *core)
{
    size_t counts[TASK_NSTATES] = { 0 };
    for (size_t i = 0; i < core->tasks.cap; i++) {
        if (core->tasks.keys[i] == 0)
            continue;
        const struct core_task *t = core->tasks.values[i];
        assert_int_equal(t->id, core->tasks.keys[i]);
        counts[t->state]++;
        if (task_state_terminal(t->state))
            assert_non_null(t->run); /* else it would have been freed */
        assert_int_equal(t->state == TASK_RUNNING || task_state_terminal(t->state),
                         t->run != NULL);
        if (t->state == TASK_PENDING)
            assert_true(t->unresolved > 0);
        if (t->state == TASK_QUEUED || t->state == TASK_RUNNING || t->state == TASK_RETRYING)
            assert_int_equal(t->unresolved, 0);
    }
    for (int s = 0; s < TASK_NSTATES; s++)
        assert_int_equal(counts[s], core->counts[s]);
    check_queue(core, check_parked(core));
    check_retry(core);
    check_place(core);
}

/* ---- the driver's model -------------------------------------------------------------------- */

static bool dep_satisfied(const struct fuzz *z, const struct core_dep *dep)
{
    const struct model_task *d = &z->t[dep->id];
    if (!task_state_terminal((enum task_state)d->state))
        return false;
    return dep->kind == DEP_AFTER_ANY || d->state == TASK_SUCCEEDED;
}

/* Whether placing m on pl over-commits anything, given the model's other running tasks. */
static void check_start(const struct fuzz *z, int64_t id, const struct core_action *act)
{
    const struct model_task *m = &z->t[id];
    const struct core_placement *pl = &act->placement;
    assert_int_equal(act->attempt, m->attempts + 1);
    assert_int_equal(pl->ngpus, m->req.gpus);
    assert_true(pl->node >= 0 && pl->node < NNODES);
    for (size_t i = 0; i < m->ndeps; i++)
        assert_true(dep_satisfied(z, &m->deps[i]));
    assert_true(m->begin <= z->now);
    if (m->off_peak)
        assert_true(z->open <= z->now && z->now < z->close);
    if (m->array_id != 0 && m->array_limit > 0) {
        int running = 0;
        for (int64_t j = 1; j < z->next_id; j++)
            running += z->t[j].running && z->t[j].array_id == m->array_id;
        assert_true(running < m->array_limit);
    }
}

static void apply(struct fuzz *z)
{
    for (size_t i = 0; i < z->out.n; i++) {
        const struct core_action *act = &z->out.v[i];
        assert_true(act->task > 0 && act->task < z->next_id);
        struct model_task *m = &z->t[act->task];
        switch (act->type) {
        case CORE_ACT_STATE:
            if (m->state >= 0)
                assert_true(core_state_allowed((enum task_state)m->state, act->state));
            else
                assert_true(core_state_entry(act->state));
            if (act->state == TASK_UPSTREAM_FAILED && act->reason_task != 0 && m->state >= 0) {
                const struct model_task *up = &z->t[act->reason_task];
                assert_true(task_state_terminal((enum task_state)up->state));
                assert_true(up->state != TASK_SUCCEEDED);
            }
            m->state = act->state;
            break;
        case CORE_ACT_START:
            assert_int_equal(m->state, TASK_QUEUED);
            check_start(z, act->task, act);
            m->state = TASK_RUNNING;
            m->running = true;
            m->attempts = act->attempt;
            m->pl = act->placement;
            break;
        case CORE_ACT_KILL:
            assert_true(m->running);
            assert_int_equal(m->state, TASK_CANCELLED);
            break;
        case CORE_ACT_PREEMPT:
            /* Only the off-peak window's close preempts among the fuzzed policies. */
            if (!z->when)
                fail_msg("task %lld preempted: no fuzzed policy preempts", (long long)act->task);
            assert_true(m->running && m->off_peak && m->preemptible);
            assert_int_equal(m->state, TASK_RUNNING);
            assert_int_equal(act->attempt, m->attempts);
            assert_int_not_equal(m->preempt_asked, m->attempts);
            assert_false(z->open <= z->now && z->now < z->close);
            m->preempt_asked = m->attempts;
            break;
        }
    }
    core_actions_clear(&z->out);
}

/* Everything a driver can see agrees with the model; no task waits on a failed dependency. */
static void check_model(const struct fuzz *z)
{
    for (int64_t id = 1; id < z->next_id; id++) {
        const struct model_task *m = &z->t[id];
        int got = core_task_state(z->core, id);
        if (!task_state_terminal((enum task_state)m->state))
            assert_int_equal(got, m->state);
        else
            assert_int_equal(got, m->running ? m->state : -1);
        if (m->state != TASK_PENDING && m->state != TASK_HELD)
            continue;
        for (size_t i = 0; i < m->ndeps; i++) {
            const struct model_task *d = &z->t[m->deps[i].id];
            if (m->deps[i].kind == DEP_AFTER_OK && task_state_terminal((enum task_state)d->state))
                assert_int_equal(d->state, TASK_SUCCEEDED);
        }
        if (m->state == TASK_PENDING) {
            bool all = true;
            for (size_t i = 0; i < m->ndeps; i++)
                all &= dep_satisfied(z, &m->deps[i]);
            assert_false(all);
        }
    }
}

/* ---- events -------------------------------------------------------------------------------- */

static void ev_submit(struct fuzz *z)
{
    if (z->next_id > MAXT)
        return;
    int64_t id = z->next_id;
    struct model_task *m = &z->t[id];
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.priority = (int)fuzz_rand(z, 4);
    spec.req.gpus = (int)fuzz_rand(z, 4);
    spec.req.gpu_mem = fuzz_rand(z, 2) ? (1 + fuzz_rand(z, 40)) * GB : 0;
    spec.req.cpus = (int)fuzz_rand(z, 3);
    spec.req.mem = fuzz_rand(z, 3) == 0 ? (1 + fuzz_rand(z, 8)) * GB : 0;
    spec.req.time_limit = fuzz_rand(z, 2) ? 1000 * (1 + fuzz_rand(z, 20)) : 0;
    spec.max_retries = (int)fuzz_rand(z, 3);
    spec.hold = fuzz_rand(z, 8) == 0;
    spec.user = fuzz_rand(z, 3); /* three users: fair share's queues, one per user */
    if (fuzz_rand(z, 5) == 0) {
        spec.array_id = 1000 + fuzz_rand(z, 2);
        spec.array_limit = 2;
    }
    size_t ndeps = id > 1 ? fuzz_rand(z, 4) : 0;
    for (size_t i = 0; i < ndeps; i++) {
        struct core_dep *d = &m->deps[m->ndeps];
        d->id = 1 + fuzz_rand(z, (unsigned)(id - 1));
        d->kind = fuzz_rand(z, 3) == 0 ? DEP_AFTER_ANY : DEP_AFTER_OK;
        int live = core_task_state(z->core, d->id);
        d->state = live >= 0 ? -1 : z->t[d->id].state;
        m->ndeps++;
    }
    spec.deps = m->deps;
    spec.ndeps = m->ndeps;
    if (z->when) { /* drawn only then: the other tests' sequences stay what they were */
        spec.begin = fuzz_rand(z, 3) == 0 ? z->now + fuzz_rand(z, 60000) : 0;
        spec.off_peak = fuzz_rand(z, 3) == 0;
        spec.preemptible = fuzz_rand(z, 2) == 0;
    }
    if (core_check_request(z->core, &spec.req, NULL, 0) != 0) {
        m->ndeps = 0;
        return;
    }
    m->exists = true;
    m->state = -1;
    m->req = spec.req;
    m->array_id = spec.array_id;
    m->array_limit = spec.array_limit;
    m->begin = spec.begin;
    m->off_peak = spec.off_peak;
    m->preemptible = spec.preemptible;
    z->next_id++;
    assert_int_equal(core_submit(z->core, &spec, z->now, &z->out), 0);
}

static int64_t pick(struct fuzz *z)
{
    return z->next_id > 1 ? 1 + fuzz_rand(z, (unsigned)(z->next_id - 1)) : 0;
}

static void ev_user(struct fuzz *z, int which)
{
    int64_t id = pick(z);
    if (id == 0)
        return;
    const char *why = NULL;
    int rc = which == 0   ? core_cancel(z->core, id, z->now, &z->out, &why)
             : which == 1 ? core_hold(z->core, id, z->now, &z->out, &why)
                          : core_release(z->core, id, z->now, &z->out, &why);
    if (rc != 0)
        assert_non_null(why);
}

static void ev_exit(struct fuzz *z)
{
    int64_t id = pick(z);
    if (id == 0 || !z->t[id].running)
        return;
    static const enum core_outcome outcomes[] = {
        CORE_OUTCOME_SUCCESS, CORE_OUTCOME_SUCCESS,   CORE_OUTCOME_EXIT_CODE,
        CORE_OUTCOME_SIGNAL,  CORE_OUTCOME_TIMEOUT,   CORE_OUTCOME_EXEC_ERROR,
        CORE_OUTCOME_LOST,    CORE_OUTCOME_NOT_STARTED,
    };
    enum core_outcome outcome = outcomes[fuzz_rand(z, 8)];
    if (z->when && z->t[id].preempt_asked == z->t[id].attempts && fuzz_rand(z, 2) == 0)
        outcome = CORE_OUTCOME_PREEMPTED;
    assert_int_equal(core_attempt_exited(z->core, id, outcome, z->now, &z->out), 0);
    z->t[id].running = false;
    z->t[id].preempt_asked = 0; /* the next attempt may be asked again (NOT_STARTED: same n) */
    if (outcome == CORE_OUTCOME_NOT_STARTED)
        z->t[id].attempts--;
}

/* test_fuzz_when's window: 20 s of every 40 s, and none at all one stretch in five. */
static void fuzz_window(struct fuzz *z)
{
    core_time open = z->now / 40000 * 40000, close = open + 20000;
    if (z->now >= close) {
        open += 40000;
        close += 40000;
    }
    if (z->now / 200000 % 5 == 4)
        open = close = CORE_TIME_NEVER;
    z->open = open;
    z->close = close;
    core_set_off_peak(z->core, open, close);
}

static void fuzz_run_when(unsigned seed, struct core_policy policy, bool when)
{
    struct fuzz *z = calloc(1, sizeof *z);
    z->seed = seed;
    z->when = when;
    z->open = z->close = CORE_TIME_NEVER;
    z->next_id = 1;
    for (int i = 0; i < NNODES; i++) {
        z->nodes[i].ngpus = 2 + 2 * i;
        for (int g = 0; g < z->nodes[i].ngpus; g++)
            z->nodes[i].gpu_mem[g] = (40 + 40 * (g % 2)) * GB;
        z->nodes[i].cpus = i == 0 ? 4 : 0;
        z->nodes[i].mem = i == 0 ? 16 * GB : 0;
    }
    z->core = core_new(&policy);
    core_set_nodes(z->core, z->nodes, NNODES);
    for (int step = 0; step < 4000; step++) {
        unsigned r = fuzz_rand(z, 100);
        if (r < 25)
            ev_submit(z);
        else if (r < 30)
            ev_user(z, 0);
        else if (r < 35)
            ev_user(z, 1);
        else if (r < 42)
            ev_user(z, 2);
        else if (r < 70)
            ev_exit(z);
        else {
            z->now += fuzz_rand(z, 3) == 0 ? 20000 : 500;
            if (z->when)
                fuzz_window(z);
            core_schedule(z->core, z->now, &z->out);
        }
        apply(z);
        check_core(z->core);
        check_model(z);
    }
    core_actions_free(&z->out);
    core_free(z->core);
    free(z);
}

static void fuzz_run(unsigned seed, struct core_policy policy)
{
    fuzz_run_when(seed, policy, false);
}

static void test_fuzz_default(void **state)
{
    for (unsigned seed = 1; seed <= 6; seed++)
        fuzz_run(seed, core_policy_default());
}

static void test_fuzz_policies(void **state)
{
    for (unsigned seed = 1; seed <= 8; seed++) {
        struct core_policy policy = core_policy_default();
        policy.strict_order = seed % 4 == 0;
        policy.backfill = seed % 3 != 0;
        policy.best_fit = seed % 2 == 0;
        policy.aging_ms = seed % 2 ? 0 : 1000;
        policy.max_scan = seed % 5 == 0 ? 2 : 0;
        policy.fair_share = seed % 7 != 0;
        fuzz_run(100 + seed, policy);
    }
}

/* Begin times, off-peak tasks (some preemptible) and a window that opens and closes. */
static void test_fuzz_when(void **state)
{
    for (unsigned seed = 1; seed <= 8; seed++) {
        struct core_policy policy = core_policy_default();
        policy.backfill = seed % 3 != 0;
        policy.strict_order = seed % 4 == 0;
        policy.fair_share = seed % 2 == 0;
        fuzz_run_when(200 + seed, policy, true);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_default),
        cmocka_unit_test(test_fuzz_policies),
        cmocka_unit_test(test_fuzz_when),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
