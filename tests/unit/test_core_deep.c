/* core/: deep queues — a pass costs what changed, not the queue's length (issue 13).
 *
 * Counted, not timed (core_stats()): a queue of 10,000 blocked tasks of one shape costs O(1)
 * fit checks and O(1) tasks looked at per pass; a pass with nothing changed since the last one
 * is skipped, and each kind of change makes the next one run; and the schedules are the ones
 * the scheduler made before these shortcuts, on a hand-made trace (checksums of every start).
 *
 * The checksums were made by this file's trace driver linked against core/ as it was before
 * (git 090b7da, built in OLD): cc -DDEEP_GOLDEN -IOLD/src tests/unit/test_core_deep.c
 * OLD/build/libdrover_core.a prints them. Policies 0 and 2 (best fit on) were made again with
 * core/ as it is when issue 13 part 3 changed where best fit puts a one-GPU exclusive task
 * (first fit) and how it breaks ties (the lowest index): a change of decisions, on purpose;
 * policy 1 (first fit) kept its checksums. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DEEP_GOLDEN
#include <cmocka.h>
#endif

#include "core/core.h"

#define GB (1024ULL * 1024 * 1024)
#define MIN (60 * 1000LL)

/* ---- a hand-made trace, driven like the simulator ------------------------------------------ */

#define DEEP_NODES 3
#define DEEP_JOBS 3000

struct deep_job {
    core_time submit, duration, start;
    bool ended;
    int priority;
    uint32_t user;
    struct core_request req;
};

static unsigned deep_rand(unsigned *seed, unsigned n)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 8) % n;
}

/* Jobs of mixed shapes (CPU-only, shared, exclusive, spanning two nodes), half with a time
 * limit, three users and two priorities, arriving faster than they end: the queue grows to
 * hundreds, under the scan bound. */
static void deep_jobs(struct deep_job *jobs, unsigned seed)
{
    static const int gpus[] = {0, 1, 1, 1, 2, 4, 8};
    core_time t = 0;
    for (int i = 0; i < DEEP_JOBS; i++) {
        struct deep_job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        t += deep_rand(&seed, 40) * 1000;
        j->submit = t;
        j->duration = (1 + deep_rand(&seed, 600)) * 1000 * (deep_rand(&seed, 10) == 0 ? 20 : 1);
        j->start = -1;
        j->priority = deep_rand(&seed, 3) == 0;
        j->user = deep_rand(&seed, 3);
        j->req.gpus = gpus[deep_rand(&seed, 7)];
        if (j->req.gpus > 0 && j->req.gpus <= 2 && deep_rand(&seed, 2))
            j->req.gpu_mem = (10 + 10 * deep_rand(&seed, 2)) * GB;
        j->req.cpus = (int)deep_rand(&seed, 3) * 2;
        j->req.mem = deep_rand(&seed, 2) * 8 * GB;
        if (deep_rand(&seed, 2))
            j->req.time_limit = j->duration * (1 + deep_rand(&seed, 3));
    }
}

static uint64_t deep_mix(uint64_t h, int64_t v)
{
    h ^= (uint64_t)v;
    return h * 1099511628211ULL;
}

/* Runs the trace under policy, a pass at each instant something happens (as the simulator
 * does); returns a checksum of every start (task, time, placement). */
static uint64_t deep_run(struct core_policy policy, unsigned seed)
{
    static struct deep_job jobs[DEEP_JOBS];
    static int running[DEEP_JOBS];
    int nrunning = 0;
    deep_jobs(jobs, seed);
    struct core_node nodes[DEEP_NODES];
    memset(nodes, 0, sizeof nodes);
    for (int n = 0; n < DEEP_NODES; n++) {
        nodes[n].ngpus = 4;
        for (int g = 0; g < 4; g++)
            nodes[n].gpu_mem[g] = 40 * GB;
        nodes[n].cpus = 16;
        nodes[n].mem = 64 * GB;
    }
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, DEEP_NODES);
    struct core_actions out = {0};
    uint64_t h = 1469598103934665603ULL;
    int next = 0;
    for (;;) {
        /* The next instant: an arrival or an end, whichever is first. */
        core_time now = next < DEEP_JOBS ? jobs[next].submit : CORE_TIME_NEVER;
        for (int k = 0; k < nrunning; k++) {
            const struct deep_job *j = &jobs[running[k]];
            if (j->start + j->duration < now)
                now = j->start + j->duration;
        }
        if (now == CORE_TIME_NEVER)
            break;
        core_actions_clear(&out);
        for (int k = 0; k < nrunning; k++) {
            const struct deep_job *j = &jobs[running[k]];
            if (j->start + j->duration != now)
                continue;
            if (core_attempt_exited(core, running[k] + 1, CORE_OUTCOME_SUCCESS, now, &out) != 0)
                abort();
            running[k--] = running[--nrunning];
        }
        for (; next < DEEP_JOBS && jobs[next].submit <= now; next++) {
            struct core_task_spec spec;
            memset(&spec, 0, sizeof spec);
            spec.id = next + 1;
            spec.priority = jobs[next].priority;
            spec.user = jobs[next].user;
            spec.req = jobs[next].req;
            spec.submit_time = now;
            if (core_submit(core, &spec, now, &out) != 0)
                abort();
        }
        core_actions_clear(&out);
        core_schedule(core, now, &out);
        for (size_t k = 0; k < out.n; k++) {
            const struct core_action *a = &out.v[k];
            if (a->type != CORE_ACT_START)
                continue;
            jobs[a->task - 1].start = now;
            running[nrunning++] = (int)a->task - 1;
            h = deep_mix(h, a->task);
            h = deep_mix(h, now);
            h = deep_mix(h, a->placement.node);
            h = deep_mix(h, a->placement.nnodes);
            for (int g = 0; g < a->placement.ngpus && a->placement.nnodes <= 1; g++)
                h = deep_mix(h, a->placement.gpu[g]);
        }
    }
    size_t counts[TASK_NSTATES];
    core_count_states(core, counts);
    h = deep_mix(h, (int64_t)counts[TASK_QUEUED]); /* 0: every job ran */
    core_actions_free(&out);
    core_free(core);
    return h;
}

/* The policies the trace runs under: the daemon's, the simulator's backfill, strict FIFO. */
static struct core_policy deep_policy(int which)
{
    struct core_policy policy = core_policy_default();
    if (which == 1) {
        policy.aging_ms = 0;
        policy.best_fit = false;
        policy.fair_share = false;
    } else if (which == 2) {
        policy.aging_ms = 0;
        policy.strict_order = true;
        policy.backfill = false;
        policy.max_scan = 0;
        policy.fair_share = false;
    }
    return policy;
}

#ifdef DEEP_GOLDEN
int main(void)
{
    for (int which = 0; which < 3; which++)
        for (unsigned seed = 1; seed <= 3; seed++)
            printf("policy %d seed %u: 0x%016llxULL\n", which, seed,
                   (unsigned long long)deep_run(deep_policy(which), seed));
    return 0;
}
#else

/* ---- the same schedules as before ---------------------------------------------------------- */

static const uint64_t deep_golden[3][3] = {
    {0xa5174d76826c48e2ULL, 0x48e297d7f5c124bdULL, 0x15bdfc41cdbbb84aULL},
    {0x2564186c4b0b0c1eULL, 0x912bcddbe5a0d8d3ULL, 0x984b94d210ce00e7ULL},
    {0xb638dc074aff1c33ULL, 0xa9c871a37dfc2898ULL, 0x140d9639495833a0ULL},
};

static void test_same_schedules(void **state)
{
    (void)state;
    for (int which = 0; which < 3; which++)
        for (unsigned seed = 1; seed <= 3; seed++) {
            uint64_t h = deep_run(deep_policy(which), seed);
            if (h != deep_golden[which][seed - 1])
                fail_msg("policy %d seed %u: schedule 0x%016llx, before 0x%016llx", which, seed,
                         (unsigned long long)h,
                         (unsigned long long)deep_golden[which][seed - 1]);
        }
}

/* ---- a deep queue of one shape ------------------------------------------------------------- */

struct fixture {
    struct core *core;
    struct core_actions out;
};

/* One node of 4 GPUs, its GPUs all taken by task 1, and n tasks of one shape (1 GPU, to itself)
 * behind it, from users 0..users-1 in turn. */
static void deep_setup(struct fixture *f, struct core_policy policy, int n, int users)
{
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = 4;
    for (int g = 0; g < 4; g++)
        node.gpu_mem[g] = 40 * GB;
    f->core = core_new(&policy);
    core_set_nodes(f->core, &node, 1);
    memset(&f->out, 0, sizeof f->out);
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 1;
    spec.req.gpus = 4;
    assert_int_equal(core_submit(f->core, &spec, 0, &f->out), 0);
    core_schedule(f->core, 0, &f->out);
    assert_int_equal(core_task_state(f->core, 1), TASK_RUNNING);
    for (int i = 0; i < n; i++) {
        spec.id = 2 + i;
        spec.req.gpus = 1;
        spec.user = (uint32_t)(i % users);
        assert_int_equal(core_submit(f->core, &spec, 1, &f->out), 0);
    }
    core_actions_clear(&f->out);
}

static void deep_teardown(struct fixture *f)
{
    core_actions_free(&f->out);
    core_free(f->core);
}

static struct core_stats deep_stats(const struct fixture *f)
{
    struct core_stats st;
    core_stats(f->core, &st);
    return st;
}

/* What one pass at now cost: fit checks and tasks looked at. */
static void deep_pass(struct fixture *f, core_time now, uint64_t *fits, uint64_t *examined)
{
    struct core_stats a = deep_stats(f);
    core_actions_clear(&f->out);
    core_schedule(f->core, now, &f->out);
    struct core_stats b = deep_stats(f);
    *fits = b.fit_checks - a.fit_checks;
    *examined = b.examined - a.examined;
}

static void test_one_shape_blocked(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        /* The daemon's policy with one user and with three; backfill without fair share. */
        struct core_policy policy = core_policy_default();
        if (variant == 2)
            policy.fair_share = false;
        int users = variant == 1 ? 3 : 1;
        struct fixture f;
        deep_setup(&f, policy, 10000, users);
        uint64_t fits, examined;
        deep_pass(&f, 10, &fits, &examined);
        assert_int_equal(f.out.n, 0);
        /* The head's fit, and each user's next task at most (picked before the shape was
         * known not to fit): never the 10,000. */
        assert_true(fits <= 1);
        assert_true(examined <= (uint64_t)users);
        /* A new task of the same shape: the pass runs, and the shape's fit is remembered. */
        struct core_task_spec spec;
        memset(&spec, 0, sizeof spec);
        spec.id = 20000;
        spec.req.gpus = 1;
        assert_int_equal(core_submit(f.core, &spec, 20, &f.out), 0);
        deep_pass(&f, 20, &fits, &examined);
        assert_int_equal(f.out.n, 0);
        assert_int_equal(fits, 0);
        assert_true(examined <= (uint64_t)users);
        /* Once the GPUs are back, four of them start (with one user, the first four). */
        assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 30, &f.out), 0);
        deep_pass(&f, 30, &fits, &examined);
        size_t starts = 0;
        for (size_t i = 0; i < f.out.n; i++)
            if (f.out.v[i].type == CORE_ACT_START)
                starts++;
        assert_int_equal(starts, 4);
        if (users == 1)
            assert_int_equal(core_task_state(f.core, 5), TASK_RUNNING);
        assert_true(fits <= 5);
        deep_teardown(&f);
    }
}

/* Backfill: a shape that fits now but not beside the head's reservation is dropped too. */
static void test_no_room_dropped(void **state)
{
    (void)state;
    struct core_policy policy = core_policy_default();
    policy.fair_share = false;
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = 4;
    for (int g = 0; g < 4; g++)
        node.gpu_mem[g] = 40 * GB;
    struct fixture f = {core_new(&policy), {0}};
    core_set_nodes(f.core, &node, 1);
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 1;
    spec.req.gpus = 2;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    core_schedule(f.core, 0, &f.out);
    spec.id = 2;
    spec.req.gpus = 4; /* the head: needs task 1's GPUs too */
    assert_int_equal(core_submit(f.core, &spec, 1, &f.out), 0);
    for (int i = 0; i < 10000; i++) {
        spec.id = 3 + i;
        spec.req.gpus = 1; /* fits now, but only on the head's GPUs */
        assert_int_equal(core_submit(f.core, &spec, 1, &f.out), 0);
    }
    uint64_t fits, examined;
    deep_pass(&f, 10, &fits, &examined);
    assert_int_equal(f.out.n, 0);
    assert_true(fits <= 3);
    assert_true(examined <= 2);
    deep_teardown(&f);
}

/* ---- the skip-pass rule -------------------------------------------------------------------- */

static bool deep_skipped(struct fixture *f, core_time now)
{
    struct core_stats a = deep_stats(f);
    core_actions_clear(&f->out);
    core_schedule(f->core, now, &f->out);
    return deep_stats(f).passes_skipped == a.passes_skipped + 1;
}

static void test_skip_pass(void **state)
{
    (void)state;
    struct fixture f;
    deep_setup(&f, core_policy_default(), 100, 1);
    assert_false(deep_skipped(&f, 10)); /* tasks were queued */
    assert_true(deep_skipped(&f, 11));  /* nothing changed: time alone, one user */
    assert_true(deep_skipped(&f, 5000));

    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 500;
    spec.req.gpus = 1;
    assert_int_equal(core_submit(f.core, &spec, 5001, &f.out), 0);
    assert_false(deep_skipped(&f, 5001)); /* a submit that queued something */
    assert_true(deep_skipped(&f, 5002));

    spec.id = 501;
    spec.hold = true;
    assert_int_equal(core_submit(f.core, &spec, 5003, &f.out), 0);
    assert_false(deep_skipped(&f, 5003)); /* conservative: any new task */
    assert_true(deep_skipped(&f, 5004));
    assert_int_equal(core_release(f.core, 501, 5005, &f.out, NULL), 0);
    assert_false(deep_skipped(&f, 5005)); /* a release */
    assert_true(deep_skipped(&f, 5006));

    const char *why;
    assert_int_equal(core_set_priority(f.core, 50, 3, &why), 0);
    assert_false(deep_skipped(&f, 5007)); /* the order changed */

    struct core_gpu_state gs = {.outside = 0, .busy = false, .offline = true};
    core_set_gpu_state(f.core, 0, 0, &gs);
    assert_false(deep_skipped(&f, 5008)); /* a GPU's state */
    assert_true(deep_skipped(&f, 5009));
    /* The driver reports every GPU at every sample: the same state again, or only another
     * utilisation figure (words for core_why), is no change. */
    core_set_gpu_state(f.core, 0, 0, &gs);
    gs.util = 40;
    core_set_gpu_state(f.core, 0, 0, &gs);
    core_set_gpu_state(f.core, 0, 1, &(struct core_gpu_state){.util = 40});
    assert_true(deep_skipped(&f, 5009));

    struct core_limits limits = {.running = 1};
    core_set_user_limits(f.core, 0, &limits);
    assert_false(deep_skipped(&f, 5010)); /* limits */
    assert_true(deep_skipped(&f, 5011));
    core_set_user_limits(f.core, 0, NULL);
    assert_false(deep_skipped(&f, 5012));

    core_set_drain(f.core, true);
    core_actions_clear(&f.out);
    core_schedule(f.core, 5013, &f.out);
    core_set_drain(f.core, false);
    assert_false(deep_skipped(&f, 5014)); /* the drain ended */

    gs.offline = false;
    core_set_gpu_state(f.core, 0, 0, &gs);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 6000, &f.out), 0);
    assert_false(deep_skipped(&f, 6000)); /* an attempt's end */
    assert_int_equal(core_task_state(f.core, 2), TASK_RUNNING);

    /* A failed attempt's backoff ending is a change the pass itself finds. */
    core_actions_clear(&f.out);
    deep_teardown(&f);

    struct core_policy policy = core_policy_default();
    deep_setup(&f, policy, 1, 1);
    spec = (struct core_task_spec){.id = 600, .max_retries = 1, .nbackoff = 1,
                                   .backoff = {1000}};
    spec.req.gpus = 0;
    spec.req.cpus = 1;
    assert_int_equal(core_submit(f.core, &spec, 10, &f.out), 0);
    assert_false(deep_skipped(&f, 10));
    assert_int_equal(core_task_state(f.core, 600), TASK_RUNNING);
    assert_int_equal(core_attempt_exited(f.core, 600, CORE_OUTCOME_EXIT_CODE, 20, &f.out), 0);
    assert_false(deep_skipped(&f, 20));
    assert_true(deep_skipped(&f, 500));
    assert_false(deep_skipped(&f, 1020)); /* the backoff ended: queued, and started */
    assert_int_equal(core_task_state(f.core, 600), TASK_RUNNING);
    deep_teardown(&f);
}

/* Fair share between two users with ready tasks: their order moves with time alone, so a
 * later pass is not skipped; at the same time it is. */
static void test_skip_pass_fair_share(void **state)
{
    (void)state;
    struct fixture f;
    deep_setup(&f, core_policy_default(), 10, 2);
    assert_false(deep_skipped(&f, 10));
    assert_true(deep_skipped(&f, 10));
    assert_false(deep_skipped(&f, 11));
    deep_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_schedules),
        cmocka_unit_test(test_one_shape_blocked),
        cmocka_unit_test(test_no_room_dropped),
        cmocka_unit_test(test_skip_pass),
        cmocka_unit_test(test_skip_pass_fair_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
