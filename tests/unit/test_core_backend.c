/* core/: the Slurm backend's decisions — where a task runs (core_choose_backend), starting ready
 * Slurm tasks beside a full machine, what holds them back (array limit, a cluster that does not
 * answer, a drain) and what does not (user limits), handing a task to Slurm behind its Slurm
 * dependencies (chaining), and restoring such tasks. Each test asserts the exact actions. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core_fixture.h"

#define LOCAL CORE_BACKEND_LOCAL
#define SLURM CORE_BACKEND_SLURM
#define OK DEP_AFTER_OK
#define ANY DEP_AFTER_ANY

/* A node of ngpus GPUs under the daemon's default policy with a Slurm cluster. */
static void setup(struct fixture *f, int ngpus)
{
    struct core_policy policy = core_policy_default();
    policy.slurm = true;
    fixture_setup(f, ngpus, 0, &policy);
}

static struct core_task_spec task(int64_t id, enum core_backend backend, int gpus)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.backend = backend;
    spec.req.gpus = gpus;
    return spec;
}

static struct core_dep live(int64_t id, enum dep_kind kind)
{
    return (struct core_dep){ .id = id, .kind = kind, .state = -1 };
}

static const char *action_name(enum core_action_type type)
{
    return type == CORE_ACT_STATE ? "STATE" : type == CORE_ACT_START ? "START" : "KILL";
}

/* Fails, listing what core appended, unless it appended exactly n actions. */
static void want_n(const struct fixture *f, size_t n)
{
    if (f->out.n == n)
        return;
    for (size_t i = 0; i < f->out.n && i < 16; i++) {
        const struct core_action *a = &f->out.v[i];
        print_message("  action %zu: %s task %lld state %s reason %d backend %d\n", i,
                      action_name(a->type), (long long)a->task, task_state_name(a->state),
                      (int)a->reason, (int)a->backend);
    }
    fail_msg("got %zu actions, want %zu", f->out.n, n);
}

static void want_state(const struct fixture *f, size_t i, int64_t task_id, enum task_state state,
                       enum core_reason reason, int64_t reason_task)
{
    assert_true(i < f->out.n);
    const struct core_action *a = &f->out.v[i];
    assert_int_equal(a->type, CORE_ACT_STATE);
    assert_int_equal(a->task, task_id);
    assert_int_equal(a->state, state);
    assert_int_equal(a->reason, reason);
    assert_int_equal(a->reason_task, reason_task);
}

/* A START of attempt on backend; a Slurm one takes nothing here (node -1, no GPUs). */
static void want_start(const struct fixture *f, size_t i, int64_t task_id, int attempt,
                       enum core_backend backend)
{
    assert_true(i < f->out.n);
    const struct core_action *a = &f->out.v[i];
    assert_int_equal(a->type, CORE_ACT_START);
    assert_int_equal(a->task, task_id);
    assert_int_equal(a->attempt, attempt);
    assert_int_equal(a->backend, backend);
    if (backend == SLURM) {
        assert_int_equal(a->placement.node, -1);
        assert_int_equal(a->placement.ngpus, 0);
        assert_int_equal(a->placement.nnodes, 0);
    } else {
        assert_int_equal(a->placement.node, 0);
    }
}

static void want_kill(const struct fixture *f, size_t i, int64_t task_id)
{
    assert_true(i < f->out.n);
    assert_int_equal(f->out.v[i].type, CORE_ACT_KILL);
    assert_int_equal(f->out.v[i].task, task_id);
}

static void submit(struct fixture *f, const struct core_task_spec *spec)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, spec, 0, &f->out), 0);
}

/* Submits a Slurm task with one live dependency; its actions are left in f->out. */
static void submit_after(struct fixture *f, int64_t id, int64_t dep, enum dep_kind kind,
                         int retries, bool hold)
{
    struct core_dep d = live(dep, kind);
    struct core_task_spec spec = task(id, SLURM, 1);
    spec.deps = &d;
    spec.ndeps = 1;
    spec.max_retries = retries;
    spec.hold = hold;
    submit(f, &spec);
}

static void schedule(struct fixture *f, core_time now)
{
    core_actions_clear(&f->out);
    core_schedule(f->core, now, &f->out);
}

static void exited(struct fixture *f, int64_t id, enum core_outcome outcome, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, id, outcome, now, &f->out), 0);
}

static void want_no_live_tasks(const struct fixture *f)
{
    size_t counts[TASK_NSTATES];
    core_count_states(f->core, counts);
    for (int s = 0; s < TASK_NSTATES; s++)
        assert_int_equal(counts[s], 0);
}

/* ---- 1. where a task runs ------------------------------------------------------------------ */

static void test_choose_backend(void **state)
{
    struct core_policy policy = core_policy_default();
    struct fixture f;
    fixture_setup(&f, 4, 0, &policy); /* no Slurm cluster */
    struct core_request fits = { .gpus = 2 }, unfit = { .gpus = 5 };
    enum core_backend backend = LOCAL;
    char why[CORE_WHY_MAX];

    why[0] = '\0';
    assert_int_equal(core_choose_backend(f.core, &fits, SLURM, &backend, why, sizeof why), -1);
    assert_string_equal(why, "no Slurm cluster is set up (shared-dir)");
    backend = SLURM;
    assert_int_equal(core_choose_backend(f.core, &fits, LOCAL, &backend, why, sizeof why), 0);
    assert_int_equal(backend, LOCAL);
    why[0] = '\0';
    assert_int_equal(core_choose_backend(f.core, &unfit, LOCAL, &backend, why, sizeof why), -1);
    assert_string_equal(why, "asks for 5 GPUs; the largest node has 4");
    teardown(&f);

    policy.slurm = true;
    policy.spill = CORE_SPILL_NEVER;
    fixture_setup(&f, 4, 0, &policy);
    backend = LOCAL;
    assert_int_equal(core_choose_backend(f.core, &fits, SLURM, &backend, why, sizeof why), 0);
    assert_int_equal(backend, SLURM);
    /* Asked for Slurm: Slurm, even for what this machine could never run. */
    backend = LOCAL;
    assert_int_equal(core_choose_backend(f.core, &unfit, SLURM, &backend, why, sizeof why), 0);
    assert_int_equal(backend, SLURM);
    backend = SLURM;
    assert_int_equal(core_choose_backend(f.core, &fits, LOCAL, &backend, why, sizeof why), 0);
    assert_int_equal(backend, LOCAL);
    why[0] = '\0';
    assert_int_equal(core_choose_backend(f.core, &unfit, LOCAL, &backend, why, sizeof why), -1);
    assert_string_equal(why, "asks for 5 GPUs; the largest node has 4");
    teardown(&f);

    policy.spill = CORE_SPILL_UNFIT;
    fixture_setup(&f, 4, 0, &policy);
    backend = LOCAL;
    strcpy(why, "stale");
    assert_int_equal(core_choose_backend(f.core, &unfit, LOCAL, &backend, why, sizeof why), 0);
    assert_int_equal(backend, SLURM);
    assert_string_equal(why, ""); /* the check's reason is no reason any more */
    /* Spill never takes what fits here; a NULL why is allowed. */
    backend = SLURM;
    assert_int_equal(core_choose_backend(f.core, &fits, LOCAL, &backend, NULL, 0), 0);
    assert_int_equal(backend, LOCAL);
    struct core_request all = { .gpus = 4 };
    backend = SLURM;
    assert_int_equal(core_choose_backend(f.core, &all, LOCAL, &backend, NULL, 0), 0);
    assert_int_equal(backend, LOCAL);
    teardown(&f);

    /* spill = unfit means nothing without a cluster. */
    policy.slurm = false;
    fixture_setup(&f, 4, 0, &policy);
    why[0] = '\0';
    assert_int_equal(core_choose_backend(f.core, &unfit, LOCAL, &backend, why, sizeof why), -1);
    assert_string_equal(why, "asks for 5 GPUs; the largest node has 4");
    teardown(&f);
}

/* ---- 2. a full machine --------------------------------------------------------------------- */

static void test_slurm_starts_on_full_machine(void **state)
{
    struct fixture f;
    setup(&f, 4);
    for (int64_t id = 1; id <= 4; id++) {
        struct core_task_spec spec = task(id, LOCAL, 1);
        submit(&f, &spec);
    }
    schedule(&f, 10);
    want_n(&f, 4);
    struct core_task_spec slurm = task(5, SLURM, 8), local = task(6, LOCAL, 1);
    submit(&f, &slurm);
    want_n(&f, 1);
    want_state(&f, 0, 5, TASK_QUEUED, CORE_REASON_SUBMITTED, 0);
    submit(&f, &local);
    schedule(&f, 20);
    want_n(&f, 1);
    want_start(&f, 0, 5, 1, SLURM);
    assert_int_equal(f.out.v[0].at, 10); /* ready when submitted: the clock stood at 10 */
    assert_int_equal(core_task_state(f.core, 5), TASK_RUNNING);
    assert_int_equal(core_task_state(f.core, 6), TASK_QUEUED);
    for (int g = 0; g < 4; g++) {
        struct core_gpu_usage u;
        core_gpu_usage(f.core, 0, g, &u);
        assert_int_equal(u.tasks, 1);
        assert_true(u.exclusive);
        assert_int_equal(u.mem_claimed, 40 * GB);
    }
    /* The local task still waits for a GPU, and gets the one that frees. */
    exited(&f, 3, CORE_OUTCOME_SUCCESS, 30);
    want_n(&f, 1);
    want_state(&f, 0, 3, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    schedule(&f, 30);
    want_n(&f, 1);
    want_start(&f, 0, 6, 1, LOCAL);
    assert_int_equal(f.out.v[0].placement.ngpus, 1);
    assert_int_equal(f.out.v[0].placement.gpu[0], 2);
    /* The Slurm attempt's end frees nothing here. */
    exited(&f, 5, CORE_OUTCOME_SUCCESS, 40);
    want_n(&f, 1);
    want_state(&f, 0, 5, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    for (int g = 0; g < 4; g++) {
        struct core_gpu_usage u;
        core_gpu_usage(f.core, 0, g, &u);
        assert_int_equal(u.tasks, 1);
    }
    teardown(&f);
}

/* ---- 3. array limit ------------------------------------------------------------------------ */

/* An array's first attempts all go to Slurm at once (one Slurm array keeps --array=%K itself); a
 * retry, submitted alone, waits until fewer than K of the array's attempts are in Slurm. */
static void test_array_limit(void **state)
{
    struct fixture f;
    setup(&f, 1);
    for (int64_t id = 1; id <= 5; id++) {
        struct core_task_spec spec = task(id, SLURM, 1);
        spec.array_id = 77;
        spec.array_limit = 2;
        spec.max_retries = 1;
        spec.nbackoff = 1;
        spec.backoff[0] = 100;
        submit(&f, &spec);
    }
    schedule(&f, 0);
    want_n(&f, 5);
    for (size_t i = 0; i < 5; i++) {
        want_start(&f, i, (int64_t)i + 1, 1, SLURM);
        assert_int_equal(f.out.v[i].array_id, 77);
    }
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 10);
    want_n(&f, 1);
    want_state(&f, 0, 1, TASK_RETRYING, CORE_REASON_EXIT_CODE, 0);
    schedule(&f, 110);
    want_n(&f, 1);
    want_state(&f, 0, 1, TASK_QUEUED, CORE_REASON_BACKOFF_DONE, 0);
    char why[CORE_WHY_MAX];
    assert_int_equal(core_task_why(f.core, 1, why, sizeof why), 0); /* a retry: within %2 */
    assert_string_equal(why, "array limit: 4 of 2 running");
    exited(&f, 2, CORE_OUTCOME_SUCCESS, 120);
    exited(&f, 3, CORE_OUTCOME_SUCCESS, 120);
    schedule(&f, 121);
    want_n(&f, 0); /* 4 and 5 still run: 2 of 2 */
    exited(&f, 4, CORE_OUTCOME_SUCCESS, 130);
    schedule(&f, 131);
    want_n(&f, 1);
    want_start(&f, 0, 1, 2, SLURM);
    assert_int_equal(f.out.v[0].array_id, 77);
    teardown(&f);
}

/* ---- 4. a cluster that does not answer, a drain --------------------------------------------- */

static void test_slurm_down(void **state)
{
    struct fixture f;
    setup(&f, 2);
    struct core_task_spec s = task(1, SLURM, 1), l = task(2, LOCAL, 1);
    submit(&f, &s);
    submit(&f, &l);
    core_set_slurm_up(f.core, false);
    schedule(&f, 0);
    want_n(&f, 1);
    want_start(&f, 0, 2, 1, LOCAL);
    char why[CORE_WHY_MAX] = "";
    assert_int_equal(core_task_why(f.core, 1, why, sizeof why), 0);
    assert_string_equal(why, "slurm is not answering");
    assert_int_equal(core_task_state(f.core, 1), TASK_QUEUED);
    schedule(&f, 1);
    want_n(&f, 0);
    /* A later local task still starts while the Slurm one waits. */
    struct core_task_spec l2 = task(3, LOCAL, 1);
    submit(&f, &l2);
    schedule(&f, 2);
    want_n(&f, 1);
    want_start(&f, 0, 3, 1, LOCAL);
    core_set_slurm_up(f.core, true);
    assert_int_equal(core_task_why(f.core, 1, why, sizeof why), -1);
    schedule(&f, 3);
    want_n(&f, 1);
    want_start(&f, 0, 1, 1, SLURM);
    teardown(&f);
}

static void test_drain(void **state)
{
    struct fixture f;
    setup(&f, 2);
    struct core_task_spec s = task(1, SLURM, 1);
    submit(&f, &s);
    core_set_drain(f.core, true);
    schedule(&f, 0);
    want_n(&f, 0);
    core_set_drain(f.core, false);
    schedule(&f, 1);
    want_n(&f, 1);
    want_start(&f, 0, 1, 1, SLURM);
    /* Nor is a dependent handed over behind it during a drain. */
    core_set_drain(f.core, true);
    submit_after(&f, 2, 1, OK, 0, false);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    teardown(&f);
}

/* ---- 5. user limits ------------------------------------------------------------------------- */

static void test_user_limits_ignore_slurm(void **state)
{
    struct fixture f;
    setup(&f, 4);
    const struct core_limits limits = { .running = 1, .gpus = 1 };
    core_set_user_limits(f.core, 5, &limits);
    for (int64_t id = 1; id <= 3; id++) {
        struct core_task_spec spec = task(id, SLURM, 2);
        spec.user = 5;
        submit(&f, &spec);
    }
    for (int64_t id = 4; id <= 5; id++) {
        struct core_task_spec spec = task(id, LOCAL, 1);
        spec.user = 5;
        submit(&f, &spec);
    }
    schedule(&f, 0);
    want_n(&f, 4);
    want_start(&f, 0, 1, 1, SLURM);
    want_start(&f, 1, 2, 1, SLURM);
    want_start(&f, 2, 3, 1, SLURM);
    want_start(&f, 3, 4, 1, LOCAL); /* the Slurm tasks took none of the user's limit */
    char why[CORE_WHY_MAX] = "";
    assert_int_equal(core_task_why(f.core, 5, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 1 task running");
    struct core_user_info users[4];
    assert_int_equal(core_users(f.core, 0, users, 4), 1);
    assert_int_equal(users[0].user, 5);
    assert_int_equal(users[0].running, 1);
    assert_int_equal(users[0].gpus, 1);
    /* At the limit, a further Slurm task still starts. */
    struct core_task_spec more = task(6, SLURM, 4);
    more.user = 5;
    submit(&f, &more);
    schedule(&f, 1);
    want_n(&f, 1);
    want_start(&f, 0, 6, 1, SLURM);
    /* And a Slurm attempt charges no usage of this machine. */
    for (int64_t id = 1; id <= 3; id++)
        exited(&f, id, CORE_OUTCOME_SUCCESS, 3600 * 1000);
    exited(&f, 6, CORE_OUTCOME_SUCCESS, 3600 * 1000);
    exited(&f, 4, CORE_OUTCOME_SUCCESS, 3600 * 1000);
    assert_int_equal(core_users(f.core, 3600 * 1000, users, 4), 1);
    assert_int_equal(users[0].running, 0);
    /* Task 4's GPU-hour, a little decayed (7-day half-life); the Slurm ones would add hours. */
    assert_true(users[0].usage > 3500.0 && users[0].usage <= 3600.0);
    teardown(&f);
}

/* ---- 6. chaining ---------------------------------------------------------------------------- */

static void test_chain_starts_together(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    schedule(&f, 0);
    want_n(&f, 2);
    want_start(&f, 0, 1, 1, SLURM);
    want_start(&f, 1, 2, 1, SLURM);
    assert_int_equal(core_task_state(f.core, 2), TASK_RUNNING);
    /* Submitted behind an upstream already on its last try: handed over at once. */
    submit_after(&f, 3, 1, OK, 0, false);
    want_n(&f, 2);
    want_state(&f, 0, 3, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    want_start(&f, 1, 3, 1, SLURM);
    teardown(&f);
}

static void test_chain_waits_for_last_try(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    a.max_retries = 2;
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, 1);
    want_start(&f, 0, 1, 1, SLURM);
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 10);
    want_n(&f, 2);
    want_state(&f, 0, 1, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    want_state(&f, 1, 2, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0);
    schedule(&f, 11);
    want_n(&f, 1);
    want_start(&f, 0, 2, 1, SLURM);
    teardown(&f);
}

/* With retries, the dependent is handed over once the upstream runs its last try. */
static void test_chain_on_last_retry(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    a.max_retries = 1;
    a.nbackoff = 1;
    a.backoff[0] = 100;
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, 1);
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 10);
    want_n(&f, 1);
    want_state(&f, 0, 1, TASK_RETRYING, CORE_REASON_EXIT_CODE, 0);
    assert_int_equal(core_task_state(f.core, 2), TASK_PENDING);
    schedule(&f, 110);
    want_n(&f, 3);
    want_state(&f, 0, 1, TASK_QUEUED, CORE_REASON_BACKOFF_DONE, 0);
    want_start(&f, 1, 1, 2, SLURM);
    want_start(&f, 2, 2, 1, SLURM);
    teardown(&f);
}

static void test_chain_local_upstream(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, LOCAL, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, 1);
    want_start(&f, 0, 1, 1, LOCAL);
    submit_after(&f, 3, 1, OK, 0, false);
    want_n(&f, 1);
    want_state(&f, 0, 3, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    schedule(&f, 1);
    want_n(&f, 0);
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 2);
    want_n(&f, 3);
    want_state(&f, 1, 2, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0);
    want_state(&f, 2, 3, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0);
    teardown(&f);
}

static void test_chain_upstream_fails(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    submit_after(&f, 3, 2, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, 3);
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 10);
    want_n(&f, 5);
    want_state(&f, 0, 1, TASK_FAILED, CORE_REASON_EXIT_CODE, 0);
    want_state(&f, 1, 2, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 1);
    want_kill(&f, 2, 2);
    want_state(&f, 3, 3, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 2);
    want_kill(&f, 4, 3);
    /* Live until Slurm reports their ends; then gone, with nothing more to say. */
    assert_int_equal(core_task_state(f.core, 2), TASK_UPSTREAM_FAILED);
    assert_int_equal(core_task_state(f.core, 3), TASK_UPSTREAM_FAILED);
    exited(&f, 2, CORE_OUTCOME_SIGNAL, 11);
    want_n(&f, 0);
    exited(&f, 3, CORE_OUTCOME_EXIT_CODE, 11);
    want_n(&f, 0);
    assert_int_equal(core_task_state(f.core, 2), -1);
    assert_int_equal(core_task_state(f.core, 3), -1);
    want_no_live_tasks(&f);
    teardown(&f);
}

static void test_chain_upstream_cancelled(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    schedule(&f, 0);
    core_actions_clear(&f.out);
    const char *why = NULL;
    assert_int_equal(core_cancel(f.core, 1, 5, &f.out, &why), 0);
    want_n(&f, 4);
    want_state(&f, 0, 1, TASK_CANCELLED, CORE_REASON_CANCELLED, 0);
    want_kill(&f, 1, 1);
    want_state(&f, 2, 2, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 1);
    want_kill(&f, 3, 2);
    exited(&f, 1, CORE_OUTCOME_SIGNAL, 6);
    want_n(&f, 0);
    exited(&f, 2, CORE_OUTCOME_SIGNAL, 6);
    want_n(&f, 0);
    want_no_live_tasks(&f);
    teardown(&f);
}

static void test_chain_upstream_succeeds(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    schedule(&f, 0);
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 10);
    want_n(&f, 1);
    want_state(&f, 0, 1, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    assert_int_equal(core_task_state(f.core, 2), TASK_RUNNING);
    exited(&f, 2, CORE_OUTCOME_SUCCESS, 20);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    want_no_live_tasks(&f);
    teardown(&f);
}

static void test_chain_not_started(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, OK, 0, false);
    submit_after(&f, 3, 1, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, 3);
    /* Never reached Slurm while its upstream still runs: it waits on it again. */
    exited(&f, 2, CORE_OUTCOME_NOT_STARTED, 5);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_NONE, 0);
    assert_int_equal(core_task_attempts(f.core, 2), 0);
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 10);
    want_n(&f, 2);
    want_state(&f, 0, 1, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    want_state(&f, 1, 2, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0);
    /* After the upstream ended, a NOT_STARTED one is simply queued. */
    exited(&f, 3, CORE_OUTCOME_NOT_STARTED, 11);
    want_n(&f, 1);
    want_state(&f, 0, 3, TASK_QUEUED, CORE_REASON_NONE, 0);
    schedule(&f, 12);
    want_n(&f, 2);
    want_start(&f, 0, 2, 1, SLURM);
    want_start(&f, 1, 3, 1, SLURM);
    teardown(&f);
}

static void test_chain_of_three_and_diamond(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1), b = task(2, SLURM, 1);
    submit(&f, &a);
    submit(&f, &b);
    submit_after(&f, 3, 1, OK, 0, false);
    submit_after(&f, 4, 3, OK, 0, false);
    /* 5 waits on both 2 and 4: handed over only once both are. */
    struct core_dep deps[2] = { live(4, OK), live(2, ANY) };
    struct core_task_spec join = task(5, SLURM, 1);
    join.deps = deps;
    join.ndeps = 2;
    submit(&f, &join);
    schedule(&f, 0);
    want_n(&f, 5);
    want_start(&f, 0, 1, 1, SLURM);
    want_start(&f, 1, 3, 1, SLURM);
    want_start(&f, 2, 4, 1, SLURM);
    want_start(&f, 3, 2, 1, SLURM);
    want_start(&f, 4, 5, 1, SLURM);
    teardown(&f);
}

static void test_chain_after_any(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    submit_after(&f, 2, 1, ANY, 0, false);
    schedule(&f, 0);
    want_n(&f, 2);
    want_start(&f, 0, 1, 1, SLURM);
    want_start(&f, 1, 2, 1, SLURM);
    /* --after-any: the upstream's failure leaves it running. */
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 10);
    want_n(&f, 1);
    want_state(&f, 0, 1, TASK_FAILED, CORE_REASON_EXIT_CODE, 0);
    assert_int_equal(core_task_state(f.core, 2), TASK_RUNNING);
    teardown(&f);
}

static void test_chain_held_back(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    a.array_id = 9;
    a.array_limit = 1;
    submit(&f, &a);
    schedule(&f, 0);
    /* The upstream is an array element (the daemon names Slurm dependencies by whole jobs). */
    struct core_dep d = live(1, OK);
    struct core_task_spec b = task(2, SLURM, 1);
    b.deps = &d;
    b.ndeps = 1;
    submit(&f, &b);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    /* Behind a plain Slurm upstream on its last try: not while Slurm is not answering. */
    struct core_task_spec x = task(10, SLURM, 1);
    submit(&f, &x);
    schedule(&f, 1);
    want_n(&f, 1);
    want_start(&f, 0, 10, 1, SLURM);
    core_set_slurm_up(f.core, false);
    submit_after(&f, 3, 10, OK, 0, false);
    want_n(&f, 1);
    want_state(&f, 0, 3, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    core_set_slurm_up(f.core, true);
    /* A local dependent is never handed to Slurm. */
    struct core_dep dx = live(10, OK);
    struct core_task_spec c = task(4, LOCAL, 1);
    c.deps = &dx;
    c.ndeps = 1;
    submit(&f, &c);
    want_n(&f, 1);
    want_state(&f, 0, 4, TASK_PENDING, CORE_REASON_SUBMITTED, 0);
    /* The control: a Slurm one now is. */
    submit_after(&f, 5, 10, OK, 0, false);
    want_n(&f, 2);
    want_start(&f, 1, 5, 1, SLURM);
    teardown(&f);
}

#define LONG_CHAIN 100000

static void test_chain_long(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    for (int64_t id = 2; id <= LONG_CHAIN; id++)
        submit_after(&f, id, id - 1, OK, 0, false);
    schedule(&f, 0);
    want_n(&f, LONG_CHAIN);
    for (size_t i = 0; i < LONG_CHAIN; i++) {
        assert_int_equal(f.out.v[i].type, CORE_ACT_START);
        assert_int_equal(f.out.v[i].task, (int64_t)i + 1);
        assert_int_equal(f.out.v[i].backend, SLURM);
    }
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 1);
    want_n(&f, 1 + 2 * (LONG_CHAIN - 1));
    for (int64_t id = 2; id <= LONG_CHAIN; id++)
        exited(&f, id, CORE_OUTCOME_SIGNAL, 2);
    want_no_live_tasks(&f);
    teardown(&f);
}

/* 100,000 ready Slurm tasks (an array without a limit) all start in one pass. backend.c
 * promises O(1) per task; that is not asserted by a clock here (no timed tests: a slow machine
 * must not fail it), but a pass that walked the running list for each start (O(n^2), as once)
 * takes minutes and runs into ctest's timeout. */
static void test_slurm_pass_cost(void **state)
{
    struct fixture f;
    setup(&f, 1);
    for (int64_t id = 1; id <= LONG_CHAIN; id++) {
        struct core_task_spec spec = task(id, SLURM, 1);
        spec.array_id = 3;
        submit(&f, &spec);
    }
    schedule(&f, 0);
    want_n(&f, LONG_CHAIN);
    want_start(&f, 0, 1, 1, SLURM);
    want_start(&f, LONG_CHAIN - 1, LONG_CHAIN, 1, SLURM);
    teardown(&f);
}

/* ---- 7. restore ----------------------------------------------------------------------------- */

static struct core_restore running_on_slurm(void)
{
    struct core_restore st;
    memset(&st, 0, sizeof st);
    st.state = TASK_RUNNING;
    st.attempt_running = true;
    st.started = 100;
    st.placement.node = -1;
    return st;
}

static void test_restore_relinks(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_restore st = running_on_slurm();
    /* The dependent first: restore_done links them whatever the order. */
    struct core_dep d = live(1, OK);
    struct core_task_spec b = task(2, SLURM, 1), a = task(1, SLURM, 1);
    b.deps = &d;
    b.ndeps = 1;
    b.attempts = 1;
    a.attempts = 1;
    assert_int_equal(core_restore(f.core, &b, &st), 0);
    assert_int_equal(core_restore(f.core, &a, &st), 0);
    core_restore_done(f.core, 200, &f.out);
    want_n(&f, 0);
    struct core_gpu_usage u;
    core_gpu_usage(f.core, 0, 0, &u);
    assert_int_equal(u.tasks, 0);
    exited(&f, 1, CORE_OUTCOME_EXIT_CODE, 300);
    want_n(&f, 3);
    want_state(&f, 0, 1, TASK_FAILED, CORE_REASON_EXIT_CODE, 0);
    want_state(&f, 1, 2, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 1);
    want_kill(&f, 2, 2);
    exited(&f, 2, CORE_OUTCOME_SIGNAL, 301);
    want_n(&f, 0);
    want_no_live_tasks(&f);
    teardown(&f);
}

static void test_restore_relinked_success(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_restore st = running_on_slurm();
    struct core_dep d = live(1, OK);
    struct core_task_spec a = task(1, SLURM, 1), b = task(2, SLURM, 1);
    b.deps = &d;
    b.ndeps = 1;
    assert_int_equal(core_restore(f.core, &a, &st), 0);
    assert_int_equal(core_restore(f.core, &b, &st), 0);
    core_restore_done(f.core, 200, &f.out);
    want_n(&f, 0);
    /* Relinked: it waits on its upstream again once it turns out never to have reached Slurm. */
    exited(&f, 2, CORE_OUTCOME_NOT_STARTED, 250);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_NONE, 0);
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 300);
    want_n(&f, 2);
    want_state(&f, 0, 1, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    want_state(&f, 1, 2, TASK_QUEUED, CORE_REASON_DEPS_DONE, 0);
    teardown(&f);
}

static void test_restore_dep_ended_failed(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_restore st = running_on_slurm();
    struct core_dep failed = { .id = 1, .kind = OK, .state = TASK_FAILED };
    struct core_dep missing = live(7, OK);
    struct core_dep any = { .id = 1, .kind = ANY, .state = TASK_FAILED };
    struct core_task_spec b = task(2, SLURM, 1), c = task(3, SLURM, 1), e = task(4, SLURM, 1);
    b.deps = &failed;
    b.ndeps = 1;
    c.deps = &missing; /* live-marked, but not restored: it vanished */
    c.ndeps = 1;
    e.deps = &any;
    e.ndeps = 1;
    assert_int_equal(core_restore(f.core, &b, &st), 0);
    assert_int_equal(core_restore(f.core, &c, &st), 0);
    assert_int_equal(core_restore(f.core, &e, &st), 0);
    core_restore_done(f.core, 200, &f.out);
    want_n(&f, 4);
    want_state(&f, 0, 2, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 1);
    want_kill(&f, 1, 2);
    want_state(&f, 2, 3, TASK_UPSTREAM_FAILED, CORE_REASON_UPSTREAM, 7);
    want_kill(&f, 3, 3);
    assert_int_equal(core_task_state(f.core, 4), TASK_RUNNING);
    exited(&f, 2, CORE_OUTCOME_SIGNAL, 300);
    want_n(&f, 0);
    exited(&f, 3, CORE_OUTCOME_SIGNAL, 300);
    want_n(&f, 0);
    exited(&f, 4, CORE_OUTCOME_SUCCESS, 300);
    want_n(&f, 1);
    want_state(&f, 0, 4, TASK_SUCCEEDED, CORE_REASON_SUCCEEDED, 0);
    want_no_live_tasks(&f);
    teardown(&f);
}

/* ---- 8. hold and release -------------------------------------------------------------------- */

static void test_release_chains(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    submit(&f, &a);
    schedule(&f, 0);
    want_n(&f, 1);
    submit_after(&f, 2, 1, OK, 0, true);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_HELD, CORE_REASON_SUBMITTED, 0);
    schedule(&f, 1);
    want_n(&f, 0);
    const char *why = NULL;
    core_actions_clear(&f.out);
    assert_int_equal(core_release(f.core, 2, 2, &f.out, &why), 0);
    want_n(&f, 2);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_RELEASED, 0);
    want_start(&f, 1, 2, 1, SLURM);
    teardown(&f);
}

/* A held task behind an upstream with retries left is only made pending. */
static void test_release_waits_for_last_try(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_task_spec a = task(1, SLURM, 1);
    a.max_retries = 1;
    submit(&f, &a);
    schedule(&f, 0);
    submit_after(&f, 2, 1, OK, 0, true);
    const char *why = NULL;
    core_actions_clear(&f.out);
    assert_int_equal(core_release(f.core, 2, 2, &f.out, &why), 0);
    want_n(&f, 1);
    want_state(&f, 0, 2, TASK_PENDING, CORE_REASON_RELEASED, 0);
    teardown(&f);
}

/* ---- spill = after DURATION ------------------------------------------------------------------ */

/* A local task queued spill_after_ms without starting goes to Slurm at the next pass, in the
 * order tasks became ready; one that started here first, or while Slurm is down, does not. */
static void test_spill_after(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = core_policy_default();
    policy.slurm = true;
    policy.spill = CORE_SPILL_AFTER;
    policy.spill_after_ms = 1000;
    fixture_setup(&f, 1, 0, &policy);
    struct core_task_spec one = task(1, LOCAL, 1), two = task(2, LOCAL, 1),
                          three = task(3, LOCAL, 1), four = task(4, LOCAL, 1);
    core_actions_clear(&f.out);
    assert_int_equal(core_submit(f.core, &one, 0, &f.out), 0);
    assert_int_equal(core_submit(f.core, &two, 0, &f.out), 0);
    schedule(&f, 0);
    want_n(&f, 1);
    want_start(&f, 0, 1, 1, LOCAL); /* 2 waits for the one GPU */
    assert_int_equal(core_next_wakeup(f.core), 1000);
    core_actions_clear(&f.out);
    assert_int_equal(core_submit(f.core, &three, 600, &f.out), 0);
    schedule(&f, 999);
    want_n(&f, 0);
    schedule(&f, 1000);
    want_n(&f, 1);
    want_start(&f, 0, 2, 1, SLURM); /* 2 went to Slurm; 3 is not due yet */
    assert_int_equal(core_next_wakeup(f.core), 1600);
    /* 3 gets the GPU before its time: it is not spilled, and nothing else is due. */
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 1200);
    schedule(&f, 1200);
    want_n(&f, 1);
    want_start(&f, 0, 3, 1, LOCAL);
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    schedule(&f, 5000);
    want_n(&f, 0);
    /* While Slurm does not answer nothing spills, and no wakeup is asked for it. */
    core_set_slurm_up(f.core, false);
    core_actions_clear(&f.out);
    assert_int_equal(core_submit(f.core, &four, 5000, &f.out), 0);
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    schedule(&f, 9000);
    want_n(&f, 0);
    core_set_slurm_up(f.core, true);
    assert_int_equal(core_next_wakeup(f.core), 6000);
    schedule(&f, 9000);
    want_n(&f, 1);
    want_start(&f, 0, 4, 1, SLURM);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spill_after),
        cmocka_unit_test(test_choose_backend),
        cmocka_unit_test(test_slurm_starts_on_full_machine),
        cmocka_unit_test(test_array_limit),
        cmocka_unit_test(test_slurm_down),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_user_limits_ignore_slurm),
        cmocka_unit_test(test_chain_starts_together),
        cmocka_unit_test(test_chain_waits_for_last_try),
        cmocka_unit_test(test_chain_on_last_retry),
        cmocka_unit_test(test_chain_local_upstream),
        cmocka_unit_test(test_chain_upstream_fails),
        cmocka_unit_test(test_chain_upstream_cancelled),
        cmocka_unit_test(test_chain_upstream_succeeds),
        cmocka_unit_test(test_chain_not_started),
        cmocka_unit_test(test_chain_of_three_and_diamond),
        cmocka_unit_test(test_chain_after_any),
        cmocka_unit_test(test_chain_held_back),
        cmocka_unit_test(test_chain_long),
        cmocka_unit_test(test_slurm_pass_cost),
        cmocka_unit_test(test_restore_relinks),
        cmocka_unit_test(test_restore_relinked_success),
        cmocka_unit_test(test_restore_dep_ended_failed),
        cmocka_unit_test(test_release_chains),
        cmocka_unit_test(test_release_waits_for_last_try),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
