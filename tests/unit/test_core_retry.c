/* core/: how an attempt's end decides the task's fate — retries and their backoff, exec errors,
 * NOT_STARTED, time-outs, and the attempt numbering. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core_fixture.h"


static struct core_task_spec spec_of(int64_t id, int max_retries)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = 1;
    spec.max_retries = max_retries;
    return spec;
}

/* Runs a pass at now; returns the attempt number task 1 started with, or 0. */
static int start(struct fixture *f, core_time now)
{
    core_actions_clear(&f->out);
    core_schedule(f->core, now, &f->out);
    for (size_t i = 0; i < f->out.n; i++)
        if (f->out.v[i].type == CORE_ACT_START && f->out.v[i].task == 1)
            return f->out.v[i].attempt;
    return 0;
}

/* Ends task 1's attempt at now; returns its STATE action. */
static struct core_action end(struct fixture *f, enum core_outcome outcome, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, 1, outcome, now, &f->out), 0);
    assert_true(f->out.n >= 1);
    assert_int_equal(f->out.v[0].type, CORE_ACT_STATE);
    assert_int_equal(f->out.v[0].task, 1);
    return f->out.v[0];
}

static void test_default_backoff(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 5);
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    static const int64_t want[] = { 5000, 30000, 60000, 60000, 60000 };
    core_time now = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(start(&f, now), i + 1);
        now += 100;
        struct core_action act = end(&f, CORE_OUTCOME_EXIT_CODE, now);
        assert_int_equal(act.state, TASK_RETRYING);
        assert_int_equal(act.reason, CORE_REASON_EXIT_CODE);
        assert_int_equal(act.at, now + want[i]);
        assert_int_equal(core_next_wakeup(f.core), now + want[i]);
        assert_int_equal(start(&f, now + want[i] - 1), 0);
        now += want[i];
    }
    assert_int_equal(start(&f, now), 6);
    struct core_action act = end(&f, CORE_OUTCOME_EXIT_CODE, now + 1);
    assert_int_equal(act.state, TASK_FAILED);
    assert_int_equal(act.reason, CORE_REASON_EXIT_CODE);
    assert_int_equal(core_task_state(f.core, 1), -1);
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    teardown(&f);
}

static void test_custom_backoff(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 3);
    spec.nbackoff = 2;
    spec.backoff[0] = 10;
    spec.backoff[1] = 20;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    static const int64_t want[] = { 10, 20, 20 };
    core_time now = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(start(&f, now), i + 1);
        struct core_action act = end(&f, CORE_OUTCOME_SIGNAL, now);
        assert_int_equal(act.reason, CORE_REASON_SIGNAL);
        assert_int_equal(act.at, now + want[i]);
        now += want[i];
    }
    teardown(&f);
}

static void test_exec_error_never_retried(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 10);
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    assert_int_equal(start(&f, 0), 1);
    struct core_action act = end(&f, CORE_OUTCOME_EXEC_ERROR, 1);
    assert_int_equal(act.state, TASK_FAILED);
    assert_int_equal(act.reason, CORE_REASON_EXEC_ERROR);
    assert_int_equal(core_task_state(f.core, 1), -1);
    teardown(&f);
}

static void test_not_started_keeps_attempt(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 0);
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(start(&f, i), 1);
        struct core_action act = end(&f, CORE_OUTCOME_NOT_STARTED, i);
        assert_int_equal(act.state, TASK_QUEUED);
        assert_int_equal(core_task_attempts(f.core, 1), 0);
    }
    /* No retries allowed, yet a real failure still ends it only once it ran. */
    assert_int_equal(start(&f, 5), 1);
    struct core_action act = end(&f, CORE_OUTCOME_LOST, 6);
    assert_int_equal(act.state, TASK_FAILED);
    assert_int_equal(act.reason, CORE_REASON_LOST);
    teardown(&f);
}

static void test_timeout_final_state(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 1);
    spec.req.time_limit = 1000;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    assert_int_equal(start(&f, 0), 1);
    struct core_action act = end(&f, CORE_OUTCOME_TIMEOUT, 1000);
    assert_int_equal(act.state, TASK_RETRYING);
    assert_int_equal(act.reason, CORE_REASON_TIMEOUT);
    assert_int_equal(start(&f, 6000), 2);
    act = end(&f, CORE_OUTCOME_TIMEOUT, 7000);
    assert_int_equal(act.state, TASK_TIMED_OUT);
    assert_int_equal(act.reason, CORE_REASON_TIMEOUT);
    teardown(&f);
}

static void test_attempts_continue_numbering(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 1);
    spec.attempts = 3; /* `drover retry` of a task that made 3 attempts: a fresh budget */
    spec.retry_base = 3;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    assert_int_equal(core_task_attempts(f.core, 1), 3);
    assert_int_equal(start(&f, 0), 4);
    struct core_action act = end(&f, CORE_OUTCOME_EXIT_CODE, 1);
    assert_int_equal(act.state, TASK_RETRYING);
    assert_int_equal(act.at, 5001);
    assert_int_equal(start(&f, 5001), 5);
    act = end(&f, CORE_OUTCOME_EXIT_CODE, 5002);
    assert_int_equal(act.state, TASK_FAILED);
    teardown(&f);
}

static void test_retry_base_counts_earlier_attempts(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 3);
    spec.attempts = 3; /* 3 attempts made, 1 of them before this budget: 2 retries used */
    spec.retry_base = 1;
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    assert_int_equal(start(&f, 0), 4);
    struct core_action act = end(&f, CORE_OUTCOME_EXIT_CODE, 1);
    assert_int_equal(act.state, TASK_RETRYING);
    assert_int_equal(act.at, 60001); /* the third backoff */
    assert_int_equal(start(&f, 60001), 5);
    act = end(&f, CORE_OUTCOME_EXIT_CODE, 60002);
    assert_int_equal(act.state, TASK_FAILED);
    teardown(&f);
}

static void test_success_after_retry(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 2);
    assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    assert_int_equal(start(&f, 0), 1);
    end(&f, CORE_OUTCOME_EXIT_CODE, 1);
    assert_int_equal(start(&f, 5001), 2);
    struct core_action act = end(&f, CORE_OUTCOME_SUCCESS, 5002);
    assert_int_equal(act.state, TASK_SUCCEEDED);
    assert_int_equal(act.reason, CORE_REASON_SUCCEEDED);
    struct core_gpu_usage usage;
    core_gpu_usage(f.core, 0, 0, &usage);
    assert_int_equal(usage.tasks, 0);
    assert_int_equal(usage.mem_claimed, 0);
    teardown(&f);
}

static void test_clock_steps_back(void **state)
{
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec spec = spec_of(1, 1);
    assert_int_equal(core_submit(f.core, &spec, 100000, &f.out), 0);
    assert_int_equal(start(&f, 100000), 1);
    struct core_action act = end(&f, CORE_OUTCOME_EXIT_CODE, 50000); /* clock went back */
    assert_int_equal(act.at, 105000);
    assert_int_equal(start(&f, 104000), 0);
    assert_int_equal(start(&f, 105000), 2);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_backoff),
        cmocka_unit_test(test_custom_backoff),
        cmocka_unit_test(test_exec_error_never_retried),
        cmocka_unit_test(test_not_started_keeps_attempt),
        cmocka_unit_test(test_timeout_final_state),
        cmocka_unit_test(test_attempts_continue_numbering),
        cmocka_unit_test(test_retry_base_counts_earlier_attempts),
        cmocka_unit_test(test_success_after_retry),
        cmocka_unit_test(test_clock_steps_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
