/* core/: the scheduling pass — priority, FCFS, aging, head-of-line blocking, EASY backfill,
 * array limits, drain, the scan bound, and a pass over 100,000 queued tasks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"

#define HOUR (3600 * 1000LL)
#define MIN (60 * 1000LL)

/* ---- helpers ------------------------------------------------------------------------------- */

static void setup(struct fixture *f, int ngpus, int cpus, struct core_policy policy)
{
    fixture_setup(f, ngpus, cpus, &policy);
}

static struct core_policy policy_with(int64_t aging_ms, bool strict, bool backfill)
{
    struct core_policy policy = core_policy_default();
    policy.aging_ms = aging_ms;
    policy.strict_order = strict;
    policy.backfill = backfill;
    return policy;
}

static void submit_spec(struct fixture *f, struct core_task_spec spec, core_time now)
{
    core_actions_clear(&f->out); /* 100,000 submits: keep the list short */
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
}

static struct core_task_spec spec_of(int64_t id, int priority, int gpus, int64_t limit)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.priority = priority;
    spec.req.gpus = gpus;
    spec.req.time_limit = limit;
    return spec;
}

static void submit(struct fixture *f, int64_t id, int priority, int gpus, int64_t limit,
                   core_time now)
{
    submit_spec(f, spec_of(id, priority, gpus, limit), now);
}

static const struct core_placement *placement_of(const struct fixture *f, int64_t id)
{
    for (size_t i = 0; i < f->out.n; i++)
        if (f->out.v[i].type == CORE_ACT_START && f->out.v[i].task == id)
            return &f->out.v[i].placement;
    fail_msg("task %lld did not start", (long long)id);
    return NULL;
}

static void exited(struct fixture *f, int64_t id, core_time now)
{
    assert_int_equal(core_attempt_exited(f->core, id, CORE_OUTCOME_SUCCESS, now, &f->out), 0);
}

/* ---- order --------------------------------------------------------------------------------- */

static void test_priority_then_fcfs(void **state)
{
    struct fixture f;
    setup(&f, 8, 0, policy_with(0, false, true));
    submit(&f, 5, 0, 1, 0, 0);
    submit(&f, 1, 5, 1, 0, 10);
    submit(&f, 3, 0, 1, 0, 10);
    submit(&f, 2, 0, 1, 0, 10);
    submit(&f, 4, 2, 1, 0, 20);
    submit(&f, 6, -3, 1, 0, 0);
    /* 1 (prio 5), 4 (prio 2), then prio 0 by ready time (5 at 0), then id (2, 3 at 10), then 6. */
    assert_started(pass(&f, 30), (const int64_t[]){ 1, 4, 5, 2, 3, 6, 0 });
    teardown(&f);
}

static void test_aging_orders_by_key(void **state)
{
    struct fixture f;
    setup(&f, 8, 0, policy_with(1000, false, true));
    submit(&f, 1, 0, 1, 0, 0);     /* key 0 */
    submit(&f, 3, 1, 1, 0, 1000);  /* key 0: ties 1, higher priority first */
    submit(&f, 2, 3, 1, 0, 2500);  /* key 3000 - 2500 = 500 */
    submit(&f, 4, 2, 1, 0, 3000);  /* key -1000 */
    assert_started(pass(&f, 5000), (const int64_t[]){ 2, 3, 1, 4, 0 });
    teardown(&f);
}

/* One GPU, tasks of one second; a new high-priority task arrives every second. With aging the
 * old low-priority task gets its turn; without, it starves. */
static core_time aging_start_time(int64_t aging_ms)
{
    struct fixture f;
    setup(&f, 1, 0, policy_with(aging_ms, false, true));
    submit(&f, 1, 0, 1, 0, 0);
    int64_t running = 0;
    core_time started = -1;
    for (core_time t = 0; t <= 20000 && started < 0; t += 1000) {
        if (running != 0)
            exited(&f, running, t);
        submit(&f, 100 + t / 1000, 5, 1, 0, t);
        const int64_t *s = pass(&f, t);
        assert_true(s[0] != 0 && s[1] == 0);
        running = s[0];
        if (running == 1)
            started = t;
    }
    teardown(&f);
    return started;
}

static void test_aging_beats_stream(void **state)
{
    core_time t = aging_start_time(1000);
    assert_true(t > 0);
    assert_true(t <= 6000);
    assert_int_equal(aging_start_time(0), -1);
}

static void test_ready_time_is_last_queued(void **state)
{
    struct fixture f;
    setup(&f, 1, 0, policy_with(0, false, true));
    struct core_task_spec spec = spec_of(1, 0, 1, 0);
    spec.max_retries = 1;
    spec.nbackoff = 1;
    spec.backoff[0] = 10;
    submit_spec(&f, spec, 0);
    submit(&f, 2, 0, 1, 0, 5);
    assert_started(pass(&f, 5), (const int64_t[]){ 1, 0 });
    assert_int_equal(
        core_attempt_exited(f.core, 1, CORE_OUTCOME_EXIT_CODE, 6, &f.out), 0);
    /* 1 is queued again at 16, after 2 (queued at 5). */
    assert_started(pass(&f, 16), (const int64_t[]){ 2, 0 });
    exited(&f, 2, 17);
    submit(&f, 3, 0, 1, 0, 18);
    assert_started(pass(&f, 18), (const int64_t[]){ 1, 0 });
    teardown(&f);
}

/* ---- head-of-line and backfill ------------------------------------------------------------- */

/* 2 GPUs: task 1 runs on GPU 0 (limit 1 h); task 2 wants both; task 3 wants one for 30 min. */
static void blocked_setup(struct fixture *f, struct core_policy policy)
{
    setup(f, 2, 0, policy);
    submit(f, 1, 0, 1, HOUR, 0);
    assert_started(pass(f, 0), (const int64_t[]){ 1, 0 });
    submit(f, 2, 0, 2, 0, 1);
}

static void test_strict_order_blocks(void **state)
{
    struct fixture f;
    blocked_setup(&f, policy_with(0, true, true));
    submit(&f, 3, 0, 1, 30 * MIN, 2);
    assert_started(pass(&f, 2), (const int64_t[]){ 0 });
    teardown(&f);
    blocked_setup(&f, policy_with(0, false, false));
    submit(&f, 3, 0, 1, 30 * MIN, 2);
    assert_started(pass(&f, 2), (const int64_t[]){ 0 });
    exited(&f, 1, 3);
    assert_started(pass(&f, 3), (const int64_t[]){ 2, 0 });
    teardown(&f);
}

static void test_backfill_short_task(void **state)
{
    struct fixture f;
    blocked_setup(&f, policy_with(0, false, true));
    submit(&f, 3, 0, 1, 2 * HOUR, 2); /* would end after the head could start */
    submit(&f, 4, 0, 1, 0, 2);        /* no limit, and only GPU 1 is free: the head's */
    submit(&f, 5, 0, 1, 30 * MIN, 2); /* ends before task 1's limit: backfills */
    assert_started(pass(&f, 2), (const int64_t[]){ 5, 0 });
    assert_int_equal(placement_of(&f, 5)->gpu[0], 1);
    assert_int_equal(core_task_state(f.core, 2), TASK_QUEUED);
    /* Both end; the head goes first, then the rest in order. */
    exited(&f, 1, 10);
    exited(&f, 5, 10);
    assert_started(pass(&f, 10), (const int64_t[]){ 2, 0 });
    teardown(&f);
}

static void test_backfill_avoids_reserved_gpus(void **state)
{
    struct fixture f;
    setup(&f, 4, 0, policy_with(0, false, true));
    submit(&f, 1, 0, 2, HOUR, 0); /* GPUs 0, 1 */
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
    submit(&f, 2, 0, 3, 0, 1);    /* blocked: reserved 0, 1, 2 once task 1 ends */
    submit(&f, 3, 0, 1, 0, 1);    /* no limit: may take GPU 3 only */
    submit(&f, 4, 0, 1, 0, 1);    /* no limit, nothing unreserved left */
    assert_started(pass(&f, 1), (const int64_t[]){ 3, 0 });
    const struct core_placement *pl = placement_of(&f, 3);
    assert_int_equal(pl->ngpus, 1);
    assert_int_equal(pl->gpu[0], 3);
    teardown(&f);
}

static void test_backfill_spare_cpus(void **state)
{
    struct fixture f;
    setup(&f, 4, 8, policy_with(0, false, true));
    struct core_task_spec spec = spec_of(1, 0, 2, HOUR);
    spec.req.cpus = 4;
    submit_spec(&f, spec, 0);
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
    spec = spec_of(2, 0, 3, 0); /* head: at 1 h it has 8 CPUs, takes 6, leaves 2 */
    spec.req.cpus = 6;
    submit_spec(&f, spec, 1);
    spec = spec_of(3, 0, 0, 0); /* 3 CPUs free now, but only 2 to spare */
    spec.req.cpus = 3;
    submit_spec(&f, spec, 1);
    spec = spec_of(4, 0, 0, 0);
    spec.req.cpus = 2;
    submit_spec(&f, spec, 1);
    spec = spec_of(5, 0, 0, 0); /* the spare is used up by 4 */
    spec.req.cpus = 1;
    submit_spec(&f, spec, 1);
    spec = spec_of(6, 0, 0, 10 * MIN); /* ends before the head starts */
    spec.req.cpus = 1;
    submit_spec(&f, spec, 1);
    assert_started(pass(&f, 1), (const int64_t[]){ 4, 6, 0 });
    teardown(&f);
}

static void test_backfill_behind_unlimited(void **state)
{
    struct fixture f;
    setup(&f, 2, 0, policy_with(0, false, true));
    submit(&f, 1, 0, 1, 0, 0); /* no limit: the head's shadow time is never */
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
    submit(&f, 2, 0, 2, 0, 1);
    submit(&f, 3, 0, 1, 0, 1);
    submit(&f, 4, 0, 1, 5 * MIN, 1);
    assert_started(pass(&f, 1), (const int64_t[]){ 4, 0 });
    teardown(&f);
}

static void test_head_that_never_fits(void **state)
{
    struct fixture f;
    setup(&f, 2, 0, policy_with(0, false, true));
    submit(&f, 1, 0, 1, 0, 0);
    submit(&f, 2, 0, 3, 0, 0); /* more GPUs than the node has: no reservation */
    submit(&f, 3, 0, 1, 0, 0);
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 3, 0 });
    teardown(&f);
}

static void test_second_blocked_uses_first_reservation(void **state)
{
    struct fixture f;
    setup(&f, 4, 0, policy_with(0, false, true));
    submit(&f, 1, 0, 2, HOUR, 0);
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
    submit(&f, 2, 0, 3, 0, 1); /* head: reserves 0, 1, 2 */
    submit(&f, 3, 0, 4, 0, 1); /* also blocked: no reservation of its own */
    submit(&f, 4, 0, 1, 0, 1); /* GPU 3 */
    assert_started(pass(&f, 1), (const int64_t[]){ 4, 0 });
    teardown(&f);
}

/* ---- arrays, drain, scan bound ------------------------------------------------------------- */

static void test_array_limit(void **state)
{
    struct fixture f;
    setup(&f, 8, 0, policy_with(0, false, true));
    for (int64_t id = 1; id <= 5; id++) {
        struct core_task_spec spec = spec_of(id, 0, 1, 0);
        spec.array_id = 77;
        spec.array_limit = 2;
        submit_spec(&f, spec, 0);
    }
    submit(&f, 6, 0, 1, 0, 0);
    /* 3..5 are skipped, not blocking: 6 starts. */
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 2, 6, 0 });
    assert_started(pass(&f, 1), (const int64_t[]){ 0 });
    exited(&f, 2, 2);
    assert_started(pass(&f, 2), (const int64_t[]){ 3, 0 });
    assert_int_equal(
        core_attempt_exited(f.core, 1, CORE_OUTCOME_EXIT_CODE, 3, &f.out), 0);
    exited(&f, 3, 3);
    assert_started(pass(&f, 3), (const int64_t[]){ 4, 5, 0 });
    teardown(&f);
}

static void test_drain(void **state)
{
    struct fixture f;
    setup(&f, 1, 0, policy_with(0, false, true));
    struct core_task_spec spec = spec_of(1, 0, 1, 0);
    spec.max_retries = 1;
    submit_spec(&f, spec, 0);
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SIGNAL, 0, &f.out), 0);
    submit(&f, 2, 0, 1, 0, 0);
    core_set_drain(f.core, true);
    assert_started(pass(&f, 10000), (const int64_t[]){ 0 });
    /* The backoff still ends while draining. */
    assert_int_equal(core_task_state(f.core, 1), TASK_QUEUED);
    assert_int_equal(f.out.n, 1);
    core_set_drain(f.core, false);
    assert_started(pass(&f, 10001), (const int64_t[]){ 2, 0 });
    teardown(&f);
}

static void test_max_scan(void **state)
{
    for (int variant = 0; variant < 3; variant++) {
        struct core_policy policy = policy_with(0, false, true);
        policy.max_scan = variant == 0 ? 3 : variant == 1 ? 4 : 0;
        struct fixture f;
        setup(&f, 2, 4, policy);
        submit(&f, 1, 0, 1, 0, 0);
        assert_started(pass(&f, 0), (const int64_t[]){ 1, 0 });
        submit(&f, 2, 0, 2, 0, 1); /* head */
        for (int64_t id = 3; id <= 5; id++) {
            struct core_task_spec spec = spec_of(id, 0, 0, 0);
            spec.req.cpus = 2 + (int)id; /* distinct shapes that never fit */
            submit_spec(&f, spec, 1);
        }
        struct core_task_spec spec = spec_of(6, 0, 0, MIN);
        submit_spec(&f, spec, 1);
        const int64_t *s = pass(&f, 1);
        if (variant == 0)
            assert_started(s, (const int64_t[]){ 0 });
        else
            assert_started(s, (const int64_t[]){ 6, 0 });
        teardown(&f);
    }
}

/* ---- scale --------------------------------------------------------------------------------- */

#define SCALE_TASKS 100000

static void scale_run(int cpus, int max_scan)
{
    struct core_policy policy = core_policy_default();
    policy.max_scan = max_scan;
    struct fixture f;
    setup(&f, 8, cpus, policy);
    srand(7);
    for (int64_t id = 1; id <= SCALE_TASKS; id++) {
        struct core_task_spec spec = spec_of(id, rand() % 5, 1 + (int)(id % 2), 0);
        if (id % 3 == 0)
            spec.req.gpu_mem = 8 * GB;
        submit_spec(&f, spec, id / 10);
    }
    core_actions_clear(&f.out);
    const int64_t *s = pass(&f, SCALE_TASKS);
    size_t n = 0;
    while (s[n] != 0)
        n++;
    assert_true(n > 0);
    int64_t first = s[0];
    /* No capacity left for a whole GPU; the pass must end without starting anything more. */
    s = pass(&f, SCALE_TASKS + 1);
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_RUNNING] + counts[TASK_QUEUED], SCALE_TASKS);
    for (size_t i = 0; s[i] != 0; i++)
        assert_int_equal(core_task_state(f.core, s[i]), TASK_RUNNING);
    /* Some capacity: one GPU task's worth may be held back for the blocked head (backfill), so
     * end every running task; the pass starts tasks again, the first in queue order. */
    size_t nrunning = counts[TASK_RUNNING];
    for (int64_t id = 1; id <= SCALE_TASKS; id++)
        if (core_task_state(f.core, id) == TASK_RUNNING)
            exited(&f, id, SCALE_TASKS + 2);
    s = pass(&f, SCALE_TASKS + 2);
    assert_true(s[0] != 0);
    assert_true(s[0] != first);
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_RUNNING] + counts[TASK_QUEUED], SCALE_TASKS - nrunning);
    teardown(&f);
}

static void test_scale_100k(void **state)
{
    scale_run(64, 10000);
    scale_run(0, 0); /* CPUs unaccounted and no scan bound: the shape cache carries it */
}

static void test_scale_no_capacity(void **state)
{
    struct fixture f;
    setup(&f, 1, 1, core_policy_default());
    submit(&f, 1, 0, 0, 0, 0); /* takes the only CPU */
    submit(&f, 2, 0, 1, 0, 0); /* and the only GPU */
    assert_started(pass(&f, 0), (const int64_t[]){ 1, 2, 0 });
    for (int64_t id = 3; id < 3 + SCALE_TASKS; id++)
        submit(&f, id, (int)(id % 7), (int)(id % 2), 0, id);
    assert_started(pass(&f, SCALE_TASKS * 2), (const int64_t[]){ 0 });
    exited(&f, 1, SCALE_TASKS * 2);
    const int64_t *s = pass(&f, SCALE_TASKS * 2);
    assert_true(s[0] != 0 && s[1] == 0);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_then_fcfs),
        cmocka_unit_test(test_aging_orders_by_key),
        cmocka_unit_test(test_aging_beats_stream),
        cmocka_unit_test(test_ready_time_is_last_queued),
        cmocka_unit_test(test_strict_order_blocks),
        cmocka_unit_test(test_backfill_short_task),
        cmocka_unit_test(test_backfill_avoids_reserved_gpus),
        cmocka_unit_test(test_backfill_spare_cpus),
        cmocka_unit_test(test_backfill_behind_unlimited),
        cmocka_unit_test(test_head_that_never_fits),
        cmocka_unit_test(test_second_blocked_uses_first_reservation),
        cmocka_unit_test(test_array_limit),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_max_scan),
        cmocka_unit_test(test_scale_100k),
        cmocka_unit_test(test_scale_no_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
