/* core/: dependencies — chains, after-any, cancel propagation, held tasks, and deps on tasks
 * that ended before the submit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core_fixture.h"

#define OK DEP_AFTER_OK
#define ANY DEP_AFTER_ANY

/* Submits task id (1 GPU) depending on deps; returns its first state. */
static enum task_state submit(struct fixture *f, int64_t id, const struct core_dep *deps,
                              size_t ndeps, bool hold)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = 1;
    spec.deps = deps;
    spec.ndeps = ndeps;
    spec.hold = hold;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, 0, &f->out), 0);
    assert_int_equal(f->out.n, 1);
    return f->out.v[0].state;
}

static struct core_dep live(int64_t id, enum dep_kind kind)
{
    return (struct core_dep){ .id = id, .kind = kind, .state = -1 };
}

static void run_all(struct fixture *f)
{
    core_actions_clear(&f->out);
    core_schedule(f->core, 0, &f->out);
}

static void finish(struct fixture *f, int64_t id, enum core_outcome outcome)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, id, outcome, 1, &f->out), 0);
}

/* The STATE action for task in f->out, which must exist. */
static const struct core_action *state_of(const struct fixture *f, int64_t task)
{
    const struct core_action *a = find_state(f, task);
    if (a == NULL)
        fail_msg("no state action for task %lld", (long long)task);
    return a;
}

static bool has_state(const struct fixture *f, int64_t task)
{
    return find_state(f, task) != NULL;
}

static void test_chain_success(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    struct core_dep d1 = live(1, OK), d2 = live(2, OK);
    assert_int_equal(submit(&f, 2, &d1, 1, false), TASK_PENDING);
    assert_int_equal(submit(&f, 3, &d2, 1, false), TASK_PENDING);
    run_all(&f);
    assert_int_equal(core_task_state(f.core, 2), TASK_PENDING);
    finish(&f, 1, CORE_OUTCOME_SUCCESS);
    assert_int_equal(state_of(&f, 2)->state, TASK_QUEUED);
    assert_int_equal(state_of(&f, 2)->reason, CORE_REASON_DEPS_DONE);
    assert_false(has_state(&f, 3));
    run_all(&f);
    finish(&f, 2, CORE_OUTCOME_SUCCESS);
    assert_int_equal(state_of(&f, 3)->state, TASK_QUEUED);
    teardown(&f);
}

static void test_chain_failure(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    struct core_dep d1 = live(1, OK), d2 = live(2, OK), d3 = live(3, OK);
    submit(&f, 2, &d1, 1, false);
    submit(&f, 3, &d2, 1, false);
    submit(&f, 4, &d3, 1, true); /* held: fails too */
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_EXIT_CODE);
    assert_int_equal(state_of(&f, 1)->state, TASK_FAILED);
    for (int64_t id = 2; id <= 4; id++) {
        const struct core_action *act = state_of(&f, id);
        assert_int_equal(act->state, TASK_UPSTREAM_FAILED);
        assert_int_equal(act->reason, CORE_REASON_UPSTREAM);
        assert_int_equal(act->reason_task, id - 1);
        assert_int_equal(core_task_state(f.core, id), -1);
    }
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    for (int s = 0; s < TASK_NSTATES; s++)
        assert_int_equal(counts[s], 0);
    teardown(&f);
}

static void test_after_any(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    struct core_dep d1 = live(1, OK), any1 = live(1, ANY), any2 = live(2, ANY);
    submit(&f, 2, &d1, 1, false);   /* upstream_failed when 1 fails */
    submit(&f, 3, &any1, 1, false); /* runs anyway */
    submit(&f, 4, &any2, 1, false); /* after-any of an upstream_failed task: runs */
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_SIGNAL);
    assert_int_equal(state_of(&f, 2)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(state_of(&f, 3)->state, TASK_QUEUED);
    assert_int_equal(state_of(&f, 4)->state, TASK_QUEUED);
    run_all(&f);
    assert_int_equal(core_task_state(f.core, 3), TASK_RUNNING);
    assert_int_equal(core_task_state(f.core, 4), TASK_RUNNING);
    teardown(&f);
}

static void test_waits_for_all(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    submit(&f, 2, NULL, 0, false);
    struct core_dep deps[3] = { live(1, OK), live(2, ANY), live(1, OK) }; /* 1 twice */
    assert_int_equal(submit(&f, 3, deps, 3, false), TASK_PENDING);
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_SUCCESS);
    assert_false(has_state(&f, 3));
    finish(&f, 2, CORE_OUTCOME_EXIT_CODE);
    assert_int_equal(state_of(&f, 3)->state, TASK_QUEUED);
    teardown(&f);
}

static void test_cancel_propagates(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    const char *why = NULL;
    submit(&f, 1, NULL, 0, true);
    struct core_dep d1 = live(1, OK), any1 = live(1, ANY);
    submit(&f, 2, &d1, 1, false);
    submit(&f, 3, &any1, 1, false);
    core_actions_clear(&f.out);
    assert_int_equal(core_cancel(f.core, 1, 0, &f.out, &why), 0);
    assert_int_equal(state_of(&f, 1)->state, TASK_CANCELLED);
    assert_int_equal(state_of(&f, 2)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(state_of(&f, 2)->reason_task, 1);
    assert_int_equal(state_of(&f, 3)->state, TASK_QUEUED);
    teardown(&f);
}

static void test_cancel_running_propagates_now(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    const char *why = NULL;
    submit(&f, 1, NULL, 0, false);
    run_all(&f);
    struct core_dep d1 = live(1, OK), any1 = live(1, ANY);
    submit(&f, 2, &d1, 1, false);
    core_actions_clear(&f.out);
    assert_int_equal(core_cancel(f.core, 1, 0, &f.out, &why), 0);
    assert_int_equal(state_of(&f, 2)->state, TASK_UPSTREAM_FAILED);
    /* A dependency on the cancelled task, still in memory while it is killed. */
    assert_int_equal(core_task_state(f.core, 1), TASK_CANCELLED);
    assert_int_equal(submit(&f, 3, &d1, 1, false), TASK_UPSTREAM_FAILED);
    assert_int_equal(submit(&f, 4, &any1, 1, false), TASK_QUEUED);
    finish(&f, 1, CORE_OUTCOME_SIGNAL);
    assert_int_equal(f.out.n, 0);
    teardown(&f);
}

static void test_ended_dependencies(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    struct core_dep done = { .id = 50, .kind = OK, .state = TASK_SUCCEEDED };
    struct core_dep failed = { .id = 51, .kind = OK, .state = TASK_TIMED_OUT };
    struct core_dep failed_any = { .id = 51, .kind = ANY, .state = TASK_CANCELLED };
    assert_int_equal(submit(&f, 1, &done, 1, false), TASK_QUEUED);
    assert_int_equal(submit(&f, 2, &failed, 1, false), TASK_UPSTREAM_FAILED);
    assert_int_equal(f.out.v[0].reason_task, 51);
    assert_int_equal(submit(&f, 3, &failed_any, 1, false), TASK_QUEUED);
    assert_int_equal(submit(&f, 4, &failed, 1, true), TASK_UPSTREAM_FAILED);
    struct core_dep mixed[2] = { done, live(1, OK) };
    assert_int_equal(submit(&f, 5, mixed, 2, false), TASK_PENDING);
    assert_int_equal(core_task_state(f.core, 2), -1);
    teardown(&f);
}

static void test_held_with_deps(void **state)
{
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    const char *why = NULL;
    submit(&f, 1, NULL, 0, false);
    struct core_dep d1 = live(1, OK);
    assert_int_equal(submit(&f, 2, &d1, 1, true), TASK_HELD);
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_SUCCESS);
    assert_false(has_state(&f, 2)); /* stays held */
    core_actions_clear(&f.out);
    assert_int_equal(core_release(f.core, 2, 2, &f.out, &why), 0);
    assert_int_equal(state_of(&f, 2)->state, TASK_QUEUED);
    /* Hold a pending task, then its dependency fails. */
    submit(&f, 3, NULL, 0, true);
    struct core_dep d3 = live(3, OK);
    submit(&f, 4, &d3, 1, false);
    core_actions_clear(&f.out);
    assert_int_equal(core_hold(f.core, 4, 3, &f.out, &why), 0);
    assert_int_equal(core_cancel(f.core, 3, 3, &f.out, &why), 0);
    assert_int_equal(state_of(&f, 4)->state, TASK_HELD);
    assert_int_equal(f.out.v[f.out.n - 1].state, TASK_UPSTREAM_FAILED);
    assert_int_equal(core_task_state(f.core, 4), -1);
    teardown(&f);
}

static void test_long_chain(void **state)
{
    enum { N = 100000 };
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    for (int64_t id = 2; id <= N; id++) {
        struct core_dep d = live(id - 1, OK);
        submit(&f, id, &d, 1, false);
    }
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_EXIT_CODE);
    assert_int_equal(f.out.n, N);
    assert_int_equal(f.out.v[N - 1].task, N);
    assert_int_equal(f.out.v[N - 1].reason_task, N - 1);
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_PENDING], 0);
    teardown(&f);
}

static void test_fan_out(void **state)
{
    enum { N = 20000 };
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    submit(&f, 1, NULL, 0, false);
    struct core_dep d1 = live(1, OK);
    for (int64_t id = 2; id <= N; id++)
        submit(&f, id, &d1, 1, id % 2 == 0);
    run_all(&f);
    finish(&f, 1, CORE_OUTCOME_SUCCESS);
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_QUEUED], (N - 1) / 2);
    assert_int_equal(counts[TASK_HELD], N / 2);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_success),
        cmocka_unit_test(test_chain_failure),
        cmocka_unit_test(test_after_any),
        cmocka_unit_test(test_waits_for_all),
        cmocka_unit_test(test_cancel_propagates),
        cmocka_unit_test(test_cancel_running_propagates_now),
        cmocka_unit_test(test_ended_dependencies),
        cmocka_unit_test(test_held_with_deps),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_fan_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
