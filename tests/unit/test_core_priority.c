/* core/: core_set_priority — a waiting task's new priority changes the order of the next pass,
 * a queued task keeps the time it has waited (aging), and running or ended tasks are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"

static struct core_policy policy_with(int64_t aging_ms, bool fair_share)
{
    struct core_policy policy = core_policy_default();
    policy.aging_ms = aging_ms;
    policy.fair_share = fair_share;
    return policy;
}

static struct core_task_spec spec_of(int64_t id, int priority)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.priority = priority;
    spec.req.gpus = 1;
    return spec;
}

static void submit_spec(struct fixture *f, struct core_task_spec spec, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
}

static void submit(struct fixture *f, int64_t id, int priority, core_time now)
{
    submit_spec(f, spec_of(id, priority), now);
}

static void set_priority(struct fixture *f, int64_t id, int priority)
{
    const char *why = NULL;
    if (core_set_priority(f->core, id, priority, &why) < 0)
        fail_msg("task %lld: %s", (long long)id, why);
}

/* Raising one queued task and lowering another reorders the pass, with and without fair share
 * (one queue, or one per user). */
static void reorder(bool fair_share)
{
    struct fixture f;
    struct core_policy policy = policy_with(0, fair_share);
    fixture_setup(&f, 8, 0, &policy);
    submit(&f, 1, 0, 0);
    submit(&f, 2, 0, 10);
    submit(&f, 3, 0, 20);
    submit(&f, 4, 2, 30);
    size_t before[TASK_NSTATES], after[TASK_NSTATES];
    core_count_states(f.core, before);
    core_actions_clear(&f.out);
    set_priority(&f, 3, 5);
    set_priority(&f, 1, -1);
    set_priority(&f, 2, 2); /* joins 4's level, ahead of it: it has been ready longer */
    assert_int_equal(f.out.n, 0);
    core_count_states(f.core, after);
    assert_memory_equal(before, after, sizeof before);
    assert_int_equal(core_task_state(f.core, 3), TASK_QUEUED);
    assert_started(pass(&f, 40), (const int64_t[]){ 3, 2, 4, 1, 0 });
    teardown(&f);
}

static void test_reorder_one_queue(void **state)
{
    reorder(false);
}

static void test_reorder_fair_share(void **state)
{
    reorder(true);
}

/* With aging (1 s per point) a lowered task keeps its ready time: having waited 5 s longer
 * than task 2, it still goes first at 3 points less; at 6 points less it goes after. Were its
 * ready time reset when it moved, it would go after 2 either way. */
static void test_lowered_keeps_aging(void **state)
{
    for (int drop = 3; drop <= 6; drop += 3) {
        struct fixture f;
        struct core_policy policy = policy_with(1000, true);
        fixture_setup(&f, 8, 0, &policy);
        submit(&f, 1, 0, 0);
        submit(&f, 2, 0, 5000);
        set_priority(&f, 1, -drop);
        if (drop == 3)
            assert_started(pass(&f, 6000), (const int64_t[]){ 1, 2, 0 });
        else
            assert_started(pass(&f, 6000), (const int64_t[]){ 2, 1, 0 });
        teardown(&f);
    }
}

/* A held task's new priority counts once it is released; a retrying one's once its backoff
 * ends; a pending one's once its dependency succeeded. */
static void test_waiting_states(void **state)
{
    struct fixture f;
    struct core_policy policy = policy_with(0, true);
    fixture_setup(&f, 1, 0, &policy);
    struct core_task_spec held = spec_of(1, 0);
    held.hold = true;
    submit_spec(&f, held, 0);
    struct core_task_spec flaky = spec_of(2, 0);
    flaky.max_retries = 1;
    flaky.nbackoff = 1;
    flaky.backoff[0] = 100;
    submit_spec(&f, flaky, 1);
    struct core_dep dep = {.id = 2, .kind = DEP_AFTER_ANY, .state = -1};
    struct core_task_spec pending = spec_of(3, 0);
    pending.ndeps = 1;
    pending.deps = &dep;
    submit_spec(&f, pending, 2);
    submit(&f, 4, 0, 3);

    assert_started(pass(&f, 10), (const int64_t[]){ 2, 0 });
    assert_int_equal(core_attempt_exited(f.core, 2, CORE_OUTCOME_EXIT_CODE, 20, &f.out), 0);
    assert_int_equal(core_task_state(f.core, 2), TASK_RETRYING);
    set_priority(&f, 1, 3);
    set_priority(&f, 2, 2);
    set_priority(&f, 3, 1);
    assert_int_equal(core_task_state(f.core, 1), TASK_HELD);
    assert_int_equal(core_task_state(f.core, 3), TASK_PENDING);
    assert_int_equal(core_release(f.core, 1, 30, &f.out, NULL), 0);
    /* Released 1 (priority 3) goes ahead of 4, queued long before at 0. */
    assert_started(pass(&f, 40), (const int64_t[]){ 1, 0 });
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 200, &f.out), 0);
    /* 2's backoff is over at 120: queued with priority 2, it goes ahead of 4. */
    assert_started(pass(&f, 200), (const int64_t[]){ 2, 0 });
    assert_int_equal(core_attempt_exited(f.core, 2, CORE_OUTCOME_SUCCESS, 300, &f.out), 0);
    /* 3 (priority 1) became ready after 4 but goes first. */
    assert_started(pass(&f, 300), (const int64_t[]){ 3, 0 });
    teardown(&f);
}

static void test_refusals(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    submit(&f, 1, 0, 0);
    submit(&f, 2, 0, 1);
    assert_started(pass(&f, 2), (const int64_t[]){ 1, 0 });
    const char *why = NULL;
    assert_int_equal(core_set_priority(f.core, 1, 5, &why), -1);
    assert_non_null(why);
    assert_non_null(strstr(why, "running"));
    why = NULL;
    assert_int_equal(core_set_priority(f.core, 99, 5, &why), -1);
    assert_string_equal(why, "no such live task");
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 3, &f.out), 0);
    assert_int_equal(core_set_priority(f.core, 1, 5, NULL), -1); /* ended */
    /* A cancelled task whose attempt is still being stopped is not live either. */
    assert_started(pass(&f, 4), (const int64_t[]){ 2, 0 });
    assert_int_equal(core_cancel(f.core, 2, 5, &f.out, NULL), 0);
    assert_int_equal(core_set_priority(f.core, 2, 5, &why), -1);
    assert_string_equal(why, "no such live task");
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reorder_one_queue),
        cmocka_unit_test(test_reorder_fair_share),
        cmocka_unit_test(test_lowered_keeps_aging),
        cmocka_unit_test(test_waiting_states),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
