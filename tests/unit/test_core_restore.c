/* core/: restoring live tasks after a daemon restart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core_fixture.h"


static void setup(struct fixture *f, struct core_policy policy)
{
    fixture_setup(f, 4, 8, &policy);
}

static struct core_task_spec spec_of(int64_t id)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = 1;
    return spec;
}

static struct core_restore as(enum task_state state)
{
    struct core_restore st;
    memset(&st, 0, sizeof st);
    st.state = state;
    return st;
}

static int restore(struct fixture *f, struct core_task_spec spec, struct core_restore st)
{
    return core_restore(f->core, &spec, &st);
}

static void test_running_reclaims(void **state)
{
    struct fixture f;
    setup(&f, core_policy_default());
    struct core_task_spec spec = spec_of(1);
    spec.req.gpus = 2;
    spec.req.gpu_mem = 10 * GB;
    spec.req.cpus = 3;
    spec.attempts = 2; /* the second attempt runs: one retry used of two */
    spec.max_retries = 2;
    struct core_restore st = as(TASK_RUNNING);
    st.attempt_running = true;
    st.started = 100;
    st.placement = (struct core_placement){ .node = 0, .ngpus = 2, .gpu = { 1, 3 },
                                            .gpu_mem = 10 * GB };
    assert_int_equal(restore(&f, spec, st), 0);
    core_restore_done(f.core, 200, &f.out);
    assert_int_equal(f.out.n, 0);
    struct core_gpu_usage u;
    core_gpu_usage(f.core, 0, 1, &u);
    assert_int_equal(u.mem_claimed, 10 * GB);
    assert_int_equal(u.tasks, 1);
    core_gpu_usage(f.core, 0, 0, &u);
    assert_int_equal(u.tasks, 0);
    assert_int_equal(core_task_state(f.core, 1), TASK_RUNNING);
    assert_int_equal(core_task_attempts(f.core, 1), 2);
    /* One retry left: this failure retries (second backoff), the next is final. */
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_EXIT_CODE, 300, &f.out), 0);
    assert_int_equal(find_state(&f, 1)->state, TASK_RETRYING);
    assert_int_equal(find_state(&f, 1)->at, 30300);
    core_gpu_usage(f.core, 0, 1, &u);
    assert_int_equal(u.tasks, 0);
    assert_int_equal(u.mem_claimed, 0);
    core_actions_clear(&f.out);
    core_schedule(f.core, 30300, &f.out);
    assert_int_equal(core_task_attempts(f.core, 1), 3);
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_EXIT_CODE, 30400, &f.out), 0);
    assert_int_equal(find_state(&f, 1)->state, TASK_FAILED);
    teardown(&f);
}

static void test_queued_order_and_retrying(void **state)
{
    struct core_policy policy = core_policy_default();
    policy.aging_ms = 0;
    struct fixture f;
    setup(&f, policy);
    /* Fed out of order; the queue is by ready time, then id. */
    static const struct {
        int64_t id;
        core_time ready;
    } queued[] = { { 5, 300 }, { 2, 100 }, { 9, 100 }, { 3, 200 } };
    for (size_t i = 0; i < 4; i++) {
        struct core_restore st = as(TASK_QUEUED);
        st.ready_time = queued[i].ready;
        assert_int_equal(restore(&f, spec_of(queued[i].id), st), 0);
    }
    struct core_restore st = as(TASK_RETRYING);
    st.retry_at = 5000;
    assert_int_equal(restore(&f, spec_of(7), st), 0);
    core_restore_done(f.core, 400, &f.out);
    assert_int_equal(core_next_wakeup(f.core), 5000);
    core_actions_clear(&f.out);
    core_schedule(f.core, 400, &f.out);
    static const int64_t want[] = { 2, 9, 3, 5 };
    assert_int_equal(f.out.n, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(f.out.v[i].task, want[i]);
    core_actions_clear(&f.out);
    core_schedule(f.core, 5000, &f.out);
    assert_int_equal(find_state(&f, 7)->reason, CORE_REASON_BACKOFF_DONE);
    teardown(&f);
}

static void test_deps_linked_at_done(void **state)
{
    struct fixture f;
    setup(&f, core_policy_default());
    struct core_dep on1 = { .id = 1, .kind = DEP_AFTER_OK, .state = -1 };
    struct core_dep on2 = { .id = 2, .kind = DEP_AFTER_OK, .state = -1 };
    struct core_dep gone = { .id = 99, .kind = DEP_AFTER_OK, .state = -1 };
    struct core_dep gone_any = { .id = 98, .kind = DEP_AFTER_ANY, .state = -1 };
    struct core_dep done = { .id = 97, .kind = DEP_AFTER_OK, .state = TASK_SUCCEEDED };
    struct core_dep failed = { .id = 96, .kind = DEP_AFTER_OK, .state = TASK_FAILED };
    /* 3 is restored before the task it depends on. */
    struct core_task_spec spec = spec_of(3);
    spec.deps = &on2;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    assert_int_equal(restore(&f, spec_of(1), as(TASK_QUEUED)), 0);
    spec = spec_of(2);
    spec.deps = &on1;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    spec = spec_of(4); /* its dependency vanished: failed, and so is 5 that waits on 4 */
    spec.deps = &gone;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    struct core_dep on4 = { .id = 4, .kind = DEP_AFTER_OK, .state = -1 };
    spec = spec_of(5);
    spec.deps = &on4;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_HELD)), 0);
    spec = spec_of(6); /* its dependencies ended while the daemon was down */
    struct core_dep ended[2] = { done, gone_any };
    spec.deps = ended;
    spec.ndeps = 2;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    spec = spec_of(8);
    spec.deps = &failed;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    core_restore_done(f.core, 10, &f.out);
    assert_null(find_state(&f, 2));
    assert_null(find_state(&f, 3));
    assert_int_equal(find_state(&f, 4)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(find_state(&f, 4)->reason_task, 99);
    assert_int_equal(find_state(&f, 5)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(find_state(&f, 5)->reason_task, 4);
    assert_int_equal(find_state(&f, 6)->state, TASK_QUEUED);
    assert_int_equal(find_state(&f, 6)->reason, CORE_REASON_DEPS_DONE);
    assert_int_equal(find_state(&f, 8)->state, TASK_UPSTREAM_FAILED);
    /* The links work: 1 runs and succeeds, 2 queues, then 3. */
    core_actions_clear(&f.out);
    core_schedule(f.core, 11, &f.out);
    assert_int_equal(core_task_state(f.core, 1), TASK_RUNNING);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 12, &f.out), 0);
    assert_int_equal(core_task_state(f.core, 2), TASK_QUEUED);
    assert_int_equal(core_task_state(f.core, 3), TASK_PENDING);
    teardown(&f);
}

static void test_cancel_in_flight(void **state)
{
    struct fixture f;
    setup(&f, core_policy_default());
    struct core_restore st = as(TASK_CANCELLED);
    st.attempt_running = true;
    st.placement = (struct core_placement){ .node = 0, .ngpus = 1, .gpu = { 2 } };
    assert_int_equal(restore(&f, spec_of(1), st), 0);
    struct core_dep any1 = { .id = 1, .kind = DEP_AFTER_ANY, .state = -1 };
    struct core_task_spec spec = spec_of(2);
    spec.deps = &any1;
    spec.ndeps = 1;
    assert_int_equal(restore(&f, spec, as(TASK_PENDING)), 0);
    core_restore_done(f.core, 10, &f.out);
    assert_int_equal(find_state(&f, 2)->state, TASK_QUEUED);
    struct core_gpu_usage u;
    core_gpu_usage(f.core, 0, 2, &u);
    assert_true(u.exclusive);
    core_actions_clear(&f.out);
    assert_int_equal(core_attempt_exited(f.core, 1, CORE_OUTCOME_SIGNAL, 20, &f.out), 0);
    assert_int_equal(f.out.n, 0);
    assert_int_equal(core_task_state(f.core, 1), -1);
    core_gpu_usage(f.core, 0, 2, &u);
    assert_false(u.exclusive);
    teardown(&f);
}

static void test_invalid_restores(void **state)
{
    struct fixture f;
    setup(&f, core_policy_default());
    assert_int_equal(restore(&f, spec_of(1), as(TASK_QUEUED)), 0);
    assert_int_equal(restore(&f, spec_of(1), as(TASK_QUEUED)), -1); /* duplicate */
    assert_int_equal(restore(&f, spec_of(2), as(TASK_SUCCEEDED)), -1); /* not live */
    struct core_restore st = as(TASK_RUNNING);
    st.attempt_running = true;
    st.placement = (struct core_placement){ .node = 1, .ngpus = 1 };
    assert_int_equal(restore(&f, spec_of(3), st), -1); /* no node 1 */
    st.placement = (struct core_placement){ .node = 0, .ngpus = 2, .gpu = { 2, 2 } };
    assert_int_equal(restore(&f, spec_of(3), st), -1);
    st.placement = (struct core_placement){ .node = 0, .ngpus = 1, .gpu = { 4 } };
    assert_int_equal(restore(&f, spec_of(3), st), -1);
    st = as(TASK_QUEUED);
    st.attempt_running = true;
    assert_int_equal(restore(&f, spec_of(3), st), -1);
    st = as((enum task_state)42);
    assert_int_equal(restore(&f, spec_of(3), st), -1);
    core_restore_done(f.core, 0, &f.out);
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_QUEUED], 1);
    assert_int_equal(counts[TASK_RUNNING], 0);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_running_reclaims),
        cmocka_unit_test(test_queued_order_and_retrying),
        cmocka_unit_test(test_deps_linked_at_done),
        cmocka_unit_test(test_cancel_in_flight),
        cmocka_unit_test(test_invalid_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
