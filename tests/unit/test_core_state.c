/* core/: the task state machine — names, the transition table, and every allowed transition
 * driven through the public events. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/core.h"
#include "core/state.h"

#define GB (1024ULL * 1024 * 1024)

/* ---- helpers ------------------------------------------------------------------------------- */

static struct core *new_core(void)
{
    struct core_policy policy = core_policy_default();
    struct core *core = core_new(&policy);
    struct core_node node = { .ngpus = 1, .gpu_mem = { 40 * GB }, .cpus = 8 };
    core_set_nodes(core, &node, 1);
    return core;
}

static struct core_task_spec spec_of(int64_t id)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = 1;
    return spec;
}

static void submit(struct core *core, int64_t id, const struct core_dep *deps, size_t ndeps,
                   bool hold, struct core_actions *out)
{
    struct core_task_spec spec = spec_of(id);
    spec.deps = deps;
    spec.ndeps = ndeps;
    spec.hold = hold;
    assert_int_equal(core_submit(core, &spec, 0, out), 0);
}

/* The last STATE action for task, which must exist. */
static const struct core_action *last_state(const struct core_actions *out, int64_t task)
{
    for (size_t i = out->n; i-- > 0;)
        if (out->v[i].type == CORE_ACT_STATE && out->v[i].task == task)
            return &out->v[i];
    fail_msg("no state action for task %lld", (long long)task);
    return NULL;
}

static bool has_action(const struct core_actions *out, enum core_action_type type, int64_t task)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].type == type && out->v[i].task == task)
            return true;
    return false;
}

/* Task 1 running (its attempt started). */
static struct core *running_task(struct core_actions *out, int max_retries)
{
    struct core *core = new_core();
    struct core_task_spec spec = spec_of(1);
    spec.max_retries = max_retries;
    assert_int_equal(core_submit(core, &spec, 0, out), 0);
    core_schedule(core, 0, out);
    assert_int_equal(core_task_state(core, 1), TASK_RUNNING);
    core_actions_clear(out);
    return core;
}

/* ---- names and the table ------------------------------------------------------------------- */

static void test_names(void **state)
{
    static const char *names[TASK_NSTATES] = {
        "held", "pending", "queued", "running", "retrying", "succeeded", "failed", "timed_out",
        "cancelled", "upstream_failed",
    };
    for (int s = 0; s < TASK_NSTATES; s++) {
        assert_string_equal(task_state_name((enum task_state)s), names[s]);
        assert_int_equal(task_state_parse(names[s]), s);
    }
    assert_int_equal(task_state_parse("done"), -1);
    assert_int_equal(task_state_parse(""), -1);
    assert_int_equal(task_state_parse(NULL), -1);
    assert_int_equal(task_state_parse("Queued"), -1);
}

static void test_terminal(void **state)
{
    for (int s = 0; s < TASK_NSTATES; s++) {
        bool want = s >= TASK_SUCCEEDED;
        assert_int_equal(task_state_terminal((enum task_state)s), want);
    }
}

static void test_table(void **state)
{
    enum { H = TASK_HELD, P, Q, R, RT, S, F, T, C, U };
    /* want[from][to], written out independently of core/state.c. */
    static const bool want[TASK_NSTATES][TASK_NSTATES] = {
        /*        H  P  Q  R  RT S  F  T  C  U */
        [H] = { 0, 1, 1, 0, 0, 0, 0, 0, 1, 1 },
        [P] = { 1, 0, 1, 1, 0, 0, 0, 0, 1, 1 }, /* P -> R: a Slurm task behind its deps */
        [Q] = { 1, 0, 0, 1, 0, 0, 0, 0, 1, 0 },
        [R] = { 0, 1, 1, 0, 1, 1, 1, 1, 1, 1 }, /* R -> P, U: that task, not sent or failed */
        [RT] = { 1, 0, 1, 0, 0, 0, 0, 0, 1, 0 },
    };
    for (int from = 0; from < TASK_NSTATES; from++)
        for (int to = 0; to < TASK_NSTATES; to++)
            if (core_state_allowed((enum task_state)from, (enum task_state)to) != want[from][to])
                fail_msg("%s -> %s: table says %d", task_state_name((enum task_state)from),
                         task_state_name((enum task_state)to), !want[from][to]);
    for (int s = 0; s < TASK_NSTATES; s++) {
        bool entry = s == H || s == P || s == Q || s == U;
        assert_int_equal(core_state_entry((enum task_state)s), entry);
    }
    assert_false(core_state_allowed(TASK_NSTATES, TASK_HELD));
    assert_false(core_state_allowed((enum task_state)-1, TASK_HELD));
}

/* ---- entries ------------------------------------------------------------------------------- */

static void test_entry_states(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    submit(core, 1, NULL, 0, true, &out);
    assert_int_equal(last_state(&out, 1)->state, TASK_HELD);
    assert_int_equal(last_state(&out, 1)->reason, CORE_REASON_SUBMITTED);
    submit(core, 2, NULL, 0, false, &out);
    assert_int_equal(last_state(&out, 2)->state, TASK_QUEUED);
    struct core_dep dep = { .id = 2, .kind = DEP_AFTER_OK, .state = -1 };
    submit(core, 3, &dep, 1, false, &out);
    assert_int_equal(last_state(&out, 3)->state, TASK_PENDING);
    struct core_dep failed = { .id = 99, .kind = DEP_AFTER_OK, .state = TASK_FAILED };
    submit(core, 4, &failed, 1, false, &out);
    assert_int_equal(last_state(&out, 4)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(last_state(&out, 4)->reason, CORE_REASON_UPSTREAM);
    assert_int_equal(last_state(&out, 4)->reason_task, 99);
    assert_int_equal(core_task_state(core, 4), -1); /* terminal: not kept */
    core_actions_free(&out);
    core_free(core);
}

/* ---- from HELD ----------------------------------------------------------------------------- */

static void test_held_to_pending_and_queued(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    submit(core, 1, NULL, 0, true, &out);
    struct core_dep dep = { .id = 1, .kind = DEP_AFTER_OK, .state = -1 };
    submit(core, 2, &dep, 1, true, &out);
    const char *why = NULL;
    assert_int_equal(core_release(core, 2, 0, &out, &why), 0);
    assert_int_equal(core_task_state(core, 2), TASK_PENDING);
    assert_int_equal(last_state(&out, 2)->reason, CORE_REASON_RELEASED);
    assert_int_equal(core_release(core, 1, 0, &out, &why), 0);
    assert_int_equal(core_task_state(core, 1), TASK_QUEUED);
    assert_int_equal(last_state(&out, 1)->state, TASK_QUEUED);
    core_actions_free(&out);
    core_free(core);
}

static void test_held_to_cancelled_and_upstream(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    submit(core, 1, NULL, 0, false, &out);
    struct core_dep dep = { .id = 1, .kind = DEP_AFTER_OK, .state = -1 };
    submit(core, 2, &dep, 1, true, &out);
    submit(core, 3, NULL, 0, true, &out);
    const char *why = NULL;
    assert_int_equal(core_cancel(core, 3, 0, &out, &why), 0);
    assert_int_equal(last_state(&out, 3)->state, TASK_CANCELLED);
    assert_int_equal(core_task_state(core, 3), -1);
    assert_int_equal(core_cancel(core, 1, 0, &out, &why), 0);
    assert_int_equal(last_state(&out, 2)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(last_state(&out, 2)->reason_task, 1);
    assert_int_equal(core_task_state(core, 2), -1);
    core_actions_free(&out);
    core_free(core);
}

/* ---- from PENDING -------------------------------------------------------------------------- */

static void test_pending_transitions(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    const char *why = NULL;
    submit(core, 1, NULL, 0, true, &out);
    struct core_dep dep = { .id = 1, .kind = DEP_AFTER_OK, .state = -1 };
    for (int64_t id = 2; id <= 5; id++)
        submit(core, id, &dep, 1, false, &out);
    assert_int_equal(core_hold(core, 2, 0, &out, &why), 0);
    assert_int_equal(core_task_state(core, 2), TASK_HELD);
    assert_int_equal(last_state(&out, 2)->reason, CORE_REASON_HELD);
    assert_int_equal(core_cancel(core, 3, 0, &out, &why), 0);
    assert_int_equal(last_state(&out, 3)->state, TASK_CANCELLED);
    /* 1 runs and succeeds: 4 and 5 are queued (deps done), 2 stays held. */
    assert_int_equal(core_release(core, 1, 0, &out, &why), 0);
    core_schedule(core, 0, &out);
    assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_SUCCESS, 1, &out), 0);
    assert_int_equal(last_state(&out, 4)->state, TASK_QUEUED);
    assert_int_equal(last_state(&out, 4)->reason, CORE_REASON_DEPS_DONE);
    assert_int_equal(core_task_state(core, 2), TASK_HELD);
    assert_int_equal(core_release(core, 2, 1, &out, &why), 0);
    assert_int_equal(core_task_state(core, 2), TASK_QUEUED);
    core_actions_free(&out);
    core_free(core);
}

static void test_pending_to_upstream(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    const char *why = NULL;
    submit(core, 1, NULL, 0, false, &out);
    struct core_dep dep = { .id = 1, .kind = DEP_AFTER_OK, .state = -1 };
    submit(core, 2, &dep, 1, false, &out);
    core_schedule(core, 0, &out);
    assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_EXIT_CODE, 1, &out), 0);
    assert_int_equal(last_state(&out, 2)->state, TASK_UPSTREAM_FAILED);
    assert_int_equal(last_state(&out, 2)->reason, CORE_REASON_UPSTREAM);
    assert_int_equal(core_task_state(core, 2), -1);
    (void)why;
    core_actions_free(&out);
    core_free(core);
}

/* ---- from QUEUED --------------------------------------------------------------------------- */

static void test_queued_transitions(void **state)
{
    struct core *core = new_core();
    struct core_actions out = { 0 };
    const char *why = NULL;
    submit(core, 1, NULL, 0, false, &out);
    submit(core, 2, NULL, 0, false, &out);
    submit(core, 3, NULL, 0, false, &out);
    assert_int_equal(core_hold(core, 1, 0, &out, &why), 0);
    assert_int_equal(core_task_state(core, 1), TASK_HELD);
    assert_int_equal(core_cancel(core, 2, 0, &out, &why), 0);
    assert_int_equal(core_task_state(core, 2), -1);
    core_actions_clear(&out);
    core_schedule(core, 0, &out);
    assert_true(has_action(&out, CORE_ACT_START, 3));
    assert_int_equal(core_task_state(core, 3), TASK_RUNNING);
    assert_int_equal(core_task_attempts(core, 3), 1);
    core_actions_free(&out);
    core_free(core);
}

/* ---- from RUNNING -------------------------------------------------------------------------- */

static void test_running_outcomes(void **state)
{
    static const struct {
        enum core_outcome outcome;
        int max_retries;
        enum task_state state;
        enum core_reason reason;
    } cases[] = {
        { CORE_OUTCOME_SUCCESS, 0, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED },
        { CORE_OUTCOME_EXIT_CODE, 0, TASK_FAILED, CORE_REASON_EXIT_CODE },
        { CORE_OUTCOME_SIGNAL, 0, TASK_FAILED, CORE_REASON_SIGNAL },
        { CORE_OUTCOME_LOST, 0, TASK_FAILED, CORE_REASON_LOST },
        { CORE_OUTCOME_TIMEOUT, 0, TASK_TIMED_OUT, CORE_REASON_TIMEOUT },
        { CORE_OUTCOME_EXEC_ERROR, 3, TASK_FAILED, CORE_REASON_EXEC_ERROR },
        { CORE_OUTCOME_EXIT_CODE, 1, TASK_RETRYING, CORE_REASON_EXIT_CODE },
        { CORE_OUTCOME_NOT_STARTED, 0, TASK_QUEUED, CORE_REASON_NONE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct core_actions out = { 0 };
        struct core *core = running_task(&out, cases[i].max_retries);
        assert_int_equal(core_attempt_exited(core, 1, cases[i].outcome, 10, &out), 0);
        const struct core_action *act = last_state(&out, 1);
        assert_int_equal(act->state, cases[i].state);
        assert_int_equal(act->reason, cases[i].reason);
        int live = task_state_terminal(cases[i].state) ? -1 : (int)cases[i].state;
        assert_int_equal(core_task_state(core, 1), live);
        struct core_gpu_usage usage;
        core_gpu_usage(core, 0, 0, &usage);
        assert_int_equal(usage.tasks, 0);
        /* No running attempt any more. */
        assert_int_equal(core_attempt_exited(core, 1, cases[i].outcome, 11, &out), -1);
        core_actions_free(&out);
        core_free(core);
    }
}

static void test_running_to_cancelled(void **state)
{
    struct core_actions out = { 0 };
    struct core *core = running_task(&out, 0);
    const char *why = NULL;
    assert_int_equal(core_cancel(core, 1, 5, &out, &why), 0);
    assert_int_equal(last_state(&out, 1)->state, TASK_CANCELLED);
    assert_true(has_action(&out, CORE_ACT_KILL, 1));
    /* Still in memory, resources held, until the attempt exits. */
    assert_int_equal(core_task_state(core, 1), TASK_CANCELLED);
    struct core_gpu_usage usage;
    core_gpu_usage(core, 0, 0, &usage);
    assert_int_equal(usage.tasks, 1);
    assert_int_equal(core_cancel(core, 1, 5, &out, &why), -1);
    assert_string_equal(why, "no such live task");
    core_actions_clear(&out);
    assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_SIGNAL, 6, &out), 0);
    assert_int_equal(out.n, 0); /* stays cancelled */
    assert_int_equal(core_task_state(core, 1), -1);
    core_gpu_usage(core, 0, 0, &usage);
    assert_int_equal(usage.tasks, 0);
    core_actions_free(&out);
    core_free(core);
}

/* ---- from RETRYING ------------------------------------------------------------------------- */

static void test_retrying_transitions(void **state)
{
    for (int variant = 0; variant < 3; variant++) {
        struct core_actions out = { 0 };
        struct core *core = running_task(&out, 2);
        const char *why = NULL;
        assert_int_equal(core_attempt_exited(core, 1, CORE_OUTCOME_EXIT_CODE, 0, &out), 0);
        assert_int_equal(core_task_state(core, 1), TASK_RETRYING);
        assert_int_equal(core_next_wakeup(core), 5000);
        core_actions_clear(&out);
        if (variant == 0) {
            core_schedule(core, 4999, &out);
            assert_int_equal(core_task_state(core, 1), TASK_RETRYING);
            core_schedule(core, 5000, &out);
            assert_int_equal(out.v[0].type, CORE_ACT_STATE);
            assert_int_equal(out.v[0].state, TASK_QUEUED);
            assert_int_equal(out.v[0].reason, CORE_REASON_BACKOFF_DONE);
            assert_int_equal(core_task_state(core, 1), TASK_RUNNING);
        } else if (variant == 1) {
            assert_int_equal(core_hold(core, 1, 1, &out, &why), 0);
            assert_int_equal(core_task_state(core, 1), TASK_HELD);
            assert_int_equal(core_next_wakeup(core), CORE_TIME_NEVER);
        } else {
            assert_int_equal(core_cancel(core, 1, 1, &out, &why), 0);
            assert_int_equal(core_task_state(core, 1), -1);
            assert_int_equal(core_next_wakeup(core), CORE_TIME_NEVER);
        }
        core_actions_free(&out);
        core_free(core);
    }
}

/* ---- refusals ------------------------------------------------------------------------------ */

static void test_refusals(void **state)
{
    struct core_actions out = { 0 };
    struct core *core = running_task(&out, 0);
    const char *why = NULL;
    assert_int_equal(core_hold(core, 1, 0, &out, &why), -1);
    assert_string_equal(why, "the task is running (cancel it instead)");
    assert_int_equal(core_release(core, 1, 0, &out, &why), -1);
    assert_string_equal(why, "the task is not held");
    assert_int_equal(core_hold(core, 42, 0, &out, &why), -1);
    assert_string_equal(why, "no such live task");
    assert_int_equal(core_release(core, 42, 0, &out, &why), -1);
    assert_int_equal(core_cancel(core, 42, 0, &out, &why), -1);
    assert_string_equal(why, "no such live task");
    submit(core, 2, NULL, 0, true, &out);
    assert_int_equal(core_hold(core, 2, 0, &out, &why), -1);
    assert_string_equal(why, "the task is already held");
    assert_int_equal(core_attempt_exited(core, 2, CORE_OUTCOME_SUCCESS, 0, &out), -1);
    /* Duplicate id, unknown live dependency, non-terminal external state: nothing changes. */
    core_actions_clear(&out);
    struct core_task_spec spec = spec_of(2);
    assert_int_equal(core_submit(core, &spec, 0, &out), -1);
    struct core_dep dep = { .id = 77, .kind = DEP_AFTER_OK, .state = -1 };
    spec = spec_of(3);
    spec.deps = &dep;
    spec.ndeps = 1;
    assert_int_equal(core_submit(core, &spec, 0, &out), -1);
    dep.state = TASK_RUNNING;
    assert_int_equal(core_submit(core, &spec, 0, &out), -1);
    spec = spec_of(0);
    assert_int_equal(core_submit(core, &spec, 0, &out), -1);
    assert_int_equal(out.n, 0);
    assert_int_equal(core_task_state(core, 3), -1);
    core_actions_free(&out);
    core_free(core);
}

static void test_counts_and_policy(void **state)
{
    struct core_policy policy = core_policy_default();
    assert_int_equal(policy.aging_ms, 60000);
    assert_true(policy.backfill);
    assert_true(policy.best_fit);
    assert_false(policy.strict_order);
    assert_int_equal(policy.max_scan, 10000);
    struct core *core = new_core();
    struct core_actions out = { 0 };
    submit(core, 1, NULL, 0, false, &out);
    submit(core, 2, NULL, 0, false, &out);
    submit(core, 3, NULL, 0, true, &out);
    core_schedule(core, 0, &out);
    size_t counts[TASK_NSTATES];
    core_count_states(core, counts);
    assert_int_equal(counts[TASK_RUNNING], 1);
    assert_int_equal(counts[TASK_QUEUED], 1);
    assert_int_equal(counts[TASK_HELD], 1);
    assert_int_equal(counts[TASK_PENDING], 0);
    assert_int_equal(core_task_attempts(core, 1), 1);
    assert_int_equal(core_task_attempts(core, 2), 0);
    assert_int_equal(core_task_attempts(core, 9), -1);
    core_set_drain(core, true);
    assert_true(core_draining(core));
    core_set_drain(core, false);
    assert_false(core_draining(core));
    assert_true(out.n > 0);
    core_actions_clear(&out);
    assert_int_equal(out.n, 0);
    assert_non_null(out.v);
    core_actions_free(&out);
    assert_null(out.v);
    core_free(core);
    core_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_terminal),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_entry_states),
        cmocka_unit_test(test_held_to_pending_and_queued),
        cmocka_unit_test(test_held_to_cancelled_and_upstream),
        cmocka_unit_test(test_pending_transitions),
        cmocka_unit_test(test_pending_to_upstream),
        cmocka_unit_test(test_queued_transitions),
        cmocka_unit_test(test_running_outcomes),
        cmocka_unit_test(test_running_to_cancelled),
        cmocka_unit_test(test_retrying_transitions),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_counts_and_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
