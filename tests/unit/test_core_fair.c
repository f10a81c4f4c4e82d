/* core/: fair share between users and per-user limits — the decay arithmetic, the order between
 * users by decayed usage, each user's own order kept, limits (GPUs, running, queued) with their
 * reasons, no starvation of a heavy user alone, past usage added, and determinism. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"

#define HOUR (3600 * 1000LL)
#define MIN (60 * 1000LL)
#define LN2 0.69314718055994530942

static struct core_policy policy_fair(bool fair, int64_t half_life)
{
    struct core_policy policy = core_policy_default();
    policy.fair_share = fair;
    policy.fair_share_half_life_ms = half_life;
    return policy;
}

static void submit_as(struct fixture *f, int64_t id, uint32_t user, int priority, int gpus,
                      core_time now)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.user = user;
    spec.priority = priority;
    spec.req.gpus = gpus;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
}

static void exited(struct fixture *f, int64_t id, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, id, CORE_OUTCOME_SUCCESS, now, &f->out), 0);
}

static struct core_user_info user_info(const struct fixture *f, uint32_t user, core_time now)
{
    struct core_user_info v[16];
    size_t n = core_users(f->core, now, v, 16);
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++)
        if (v[i].user == user)
            return v[i];
    fail_msg("no user %u", user);
    return v[0];
}

static void assert_near(double got, double want, double rel)
{
    double diff = got > want ? got - want : want - got;
    double scale = want < 0 ? -want : want;
    if (diff > rel * (scale > 1e-300 ? scale : 1))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* ---- decay ---------------------------------------------------------------------------------- */

static void test_decay_math(void **state)
{
    (void)state;
    assert_near(core_decay(0), 1, 0);
    assert_near(core_decay(-3), 1, 0);
    assert_near(core_decay(1), 0.5, 1e-15);
    assert_near(core_decay(2), 0.25, 1e-15);
    assert_near(core_decay(10), 1.0 / 1024, 1e-15);
    assert_near(core_decay(0.5), 0.70710678118654752440, 1e-15);
    assert_near(core_decay(3.25), 0.125 * 0.84089641525371454303, 1e-15);
    assert_near(core_decay(1e-9), 1 - 1e-9 * LN2, 1e-15);
    assert_true(core_decay(1074) > 0);
    assert_true(core_decay(1200) == 0);
    /* Monotonic where it matters: more time never weighs more. */
    for (double x = 0; x < 40; x += 0.37)
        assert_true(core_decay(x + 0.37) < core_decay(x));
}

/* One GPU for one half-life, then idle for one: usage = h/ln2 * (1 - 1/2), halved again. */
static void test_usage_decays(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = policy_fair(true, HOUR);
    fixture_setup(&f, 2, 0, &policy);
    submit_as(&f, 1, 7, 0, 1, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    /* While it runs: after half an hour, h/ln2 * (1 - 2^-0.5) GPU-ms. */
    struct core_user_info u = user_info(&f, 7, HOUR / 2);
    assert_near(u.usage, 3600 / LN2 * (1 - 0.70710678118654752440), 1e-12);
    assert_int_equal(u.gpus, 1);
    assert_int_equal(u.running, 1);
    exited(&f, 1, HOUR);
    assert_near(user_info(&f, 7, HOUR).usage, 3600 / LN2 * 0.5, 1e-12);
    assert_near(user_info(&f, 7, 2 * HOUR).usage, 3600 / LN2 * 0.25, 1e-12);
    assert_near(user_info(&f, 7, 2 * HOUR).share, 1, 0);
    assert_int_equal(user_info(&f, 7, 2 * HOUR).gpus, 0);
    teardown(&f);

    /* Half-life 0: plain GPU-seconds, never decayed. */
    policy = policy_fair(true, 0);
    fixture_setup(&f, 2, 0, &policy);
    submit_as(&f, 1, 7, 0, 2, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    exited(&f, 1, HOUR);
    assert_near(user_info(&f, 7, 100 * HOUR).usage, 2 * 3600, 1e-12);
    teardown(&f);
}

/* ---- order ---------------------------------------------------------------------------------- */

/* User 1 fills the GPUs and queues more; user 2 submits one later: it takes the next free GPU. */
static void test_light_user_first(void **state)
{
    (void)state;
    for (int fair = 0; fair <= 1; fair++) {
        struct fixture f;
        struct core_policy policy = policy_fair(fair, 7 * 24 * HOUR);
        fixture_setup(&f, 2, 0, &policy);
        for (int64_t id = 1; id <= 20; id++)
            submit_as(&f, id, 1, 0, 1, 0);
        assert_started(pass(&f, 0), (int64_t[]){1, 2, 0});
        submit_as(&f, 100, 2, 0, 1, 10 * MIN);
        assert_started(pass(&f, 10 * MIN), (int64_t[]){0});
        exited(&f, 1, HOUR);
        /* Without fair share, first come first served: user 1's task 3. */
        assert_started(pass(&f, HOUR), fair ? (int64_t[]){100, 0} : (int64_t[]){3, 0});
        teardown(&f);
    }
}

/* Priorities order each user's own tasks; between users the least used goes first. */
static void test_within_user_order(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = policy_fair(true, 7 * 24 * HOUR);
    fixture_setup(&f, 1, 0, &policy);
    submit_as(&f, 1, 1, 0, 1, 0);
    submit_as(&f, 2, 1, 5, 1, 0);
    submit_as(&f, 3, 2, 0, 1, 0);
    submit_as(&f, 4, 2, 5, 1, 0);
    /* Equal usage (none): user 1 by number, its priority-5 task. */
    assert_started(pass(&f, 0), (int64_t[]){2, 0});
    exited(&f, 2, HOUR);
    assert_started(pass(&f, HOUR), (int64_t[]){4, 0});
    /* User 1's hour is an hour older, so decayed more: user 1 again. */
    exited(&f, 4, 2 * HOUR);
    assert_started(pass(&f, 2 * HOUR), (int64_t[]){1, 0});
    exited(&f, 1, 3 * HOUR);
    assert_started(pass(&f, 3 * HOUR), (int64_t[]){3, 0});
    teardown(&f);
}

/* New users of equal usage share one pass's GPUs by turns. */
static void test_new_users_alternate(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    for (int64_t id = 1; id <= 4; id++)
        submit_as(&f, id, 1, 0, 1, 0);
    for (int64_t id = 11; id <= 14; id++)
        submit_as(&f, id, 2, 0, 1, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 11, 2, 12, 0});
    assert_int_equal(user_info(&f, 1, 0).gpus, 2);
    assert_int_equal(user_info(&f, 2, 0).gpus, 2);
    assert_int_equal(user_info(&f, 2, 0).queued, 2);
    teardown(&f);
}

/* A heavy user alone gets every GPU: fair share orders, it never idles a GPU. */
static void test_heavy_user_alone(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    core_add_usage(f.core, 1, 1e9, 0);
    core_add_usage(f.core, 2, 1, 0);
    for (int64_t id = 1; id <= 6; id++)
        submit_as(&f, id, 1, 0, 1, HOUR);
    assert_started(pass(&f, HOUR), (int64_t[]){1, 2, 3, 4, 0});
    /* User 2 arrives: the next free GPU is its, then user 1 again. */
    submit_as(&f, 20, 2, 0, 1, HOUR);
    exited(&f, 1, 2 * HOUR);
    assert_started(pass(&f, 2 * HOUR), (int64_t[]){20, 0});
    exited(&f, 2, 3 * HOUR);
    assert_started(pass(&f, 3 * HOUR), (int64_t[]){5, 0});
    teardown(&f);
}

/* Usage added for the past (a restart) weighs like usage core saw, decayed from its time. */
static void test_add_usage(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = policy_fair(true, HOUR);
    fixture_setup(&f, 1, 0, &policy);
    core_add_usage(f.core, 1, 100, 0);
    core_add_usage(f.core, 2, 160, -2 * HOUR); /* 160 two half-lives ago = 40 now */
    assert_near(user_info(&f, 2, 0).usage, 40, 1e-12);
    submit_as(&f, 1, 1, 0, 1, 0);
    submit_as(&f, 2, 2, 0, 1, 0);
    assert_started(pass(&f, 0), (int64_t[]){2, 0});
    teardown(&f);
}

/* A restored running attempt counts for its user: its GPUs against the limit, and the GPU-time
 * it used before the restart in its usage. */
static void test_restore_counts(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = policy_fair(true, 0);
    policy.user_limits.gpus = 2;
    fixture_setup(&f, 4, 0, &policy);
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = 1;
    spec.user = 3;
    spec.req.gpus = 2;
    struct core_restore st;
    memset(&st, 0, sizeof st);
    st.state = TASK_RUNNING;
    st.started = 0;
    st.attempt_running = true;
    st.placement.node = 0;
    st.placement.ngpus = 2;
    st.placement.gpu[0] = 0;
    st.placement.gpu[1] = 1;
    assert_int_equal(core_restore(f.core, &spec, &st), 0);
    spec.id = 2;
    spec.req.gpus = 1;
    memset(&st, 0, sizeof st);
    st.state = TASK_QUEUED;
    st.ready_time = 0;
    assert_int_equal(core_restore(f.core, &spec, &st), 0);
    core_actions_clear(&f.out);
    core_restore_done(f.core, HOUR, &f.out);
    assert_started(pass(&f, HOUR), (int64_t[]){0});
    char why[CORE_WHY_MAX];
    assert_int_equal(core_task_why(f.core, 2, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 2 GPUs in use");
    struct core_user_info u = user_info(&f, 3, HOUR);
    assert_int_equal(u.gpus, 2);
    assert_int_equal(u.running, 1);
    assert_near(u.usage, 2 * 3600, 1e-12);
    teardown(&f);
}

/* ---- limits --------------------------------------------------------------------------------- */

static void test_limit_gpus(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = core_policy_default();
    policy.user_limits.gpus = 1;
    fixture_setup(&f, 4, 0, &policy);
    submit_as(&f, 1, 1, 0, 1, 0);
    submit_as(&f, 2, 1, 0, 1, 0);
    submit_as(&f, 3, 1, 0, 1, 0);
    /* One GPU for user 1 while three idle. */
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    char why[CORE_WHY_MAX];
    assert_int_equal(core_task_why(f.core, 2, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 1 GPU in use");
    assert_int_equal(core_task_why(f.core, 1, why, sizeof why), -1); /* running */
    assert_int_equal(core_task_state(f.core, 2), TASK_QUEUED);
    /* Others are not held back by it, and user 2's override is wider. */
    struct core_limits two = {.gpus = 2};
    core_set_user_limits(f.core, 2, &two);
    submit_as(&f, 11, 2, 0, 1, 0);
    submit_as(&f, 12, 2, 0, 1, 0);
    submit_as(&f, 13, 2, 0, 1, 0);
    assert_started(pass(&f, 0), (int64_t[]){11, 12, 0});
    assert_int_equal(core_task_why(f.core, 13, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 2 GPUs in use");
    exited(&f, 1, HOUR);
    assert_started(pass(&f, HOUR), (int64_t[]){2, 0});
    /* Back to the policy's limit for user 2: nothing running is stopped. */
    core_set_user_limits(f.core, 2, NULL);
    assert_int_equal(user_info(&f, 2, HOUR).limits.gpus, 1);
    assert_int_equal(user_info(&f, 2, HOUR).gpus, 2);
    teardown(&f);
}

/* A task wanting more GPUs than its user has left is skipped, not made the head: a smaller one
 * of the same user, and other users' tasks, still start. */
static void test_limit_gpus_partial(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = core_policy_default();
    policy.user_limits.gpus = 3;
    fixture_setup(&f, 8, 0, &policy);
    submit_as(&f, 1, 1, 0, 2, 0);
    submit_as(&f, 2, 1, 0, 2, 0);
    submit_as(&f, 3, 1, 0, 1, 0);
    submit_as(&f, 4, 2, 0, 3, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 4, 3, 0});
    char why[CORE_WHY_MAX];
    assert_int_equal(core_task_why(f.core, 2, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 3 GPUs in use");
    teardown(&f);
}

static void test_limit_running(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 8, 0, NULL);
    struct core_limits lim = {.running = 2};
    core_set_user_limits(f.core, 5, &lim);
    for (int64_t id = 1; id <= 4; id++)
        submit_as(&f, id, 5, 0, 0, 0); /* CPU-only tasks count too */
    assert_started(pass(&f, 0), (int64_t[]){1, 2, 0});
    char why[CORE_WHY_MAX];
    assert_int_equal(core_task_why(f.core, 3, why, sizeof why), 0);
    assert_string_equal(why, "user limit: 2 tasks running");
    exited(&f, 2, MIN);
    assert_started(pass(&f, MIN), (int64_t[]){3, 0});
    teardown(&f);
}

static void test_limit_queued(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = core_policy_default();
    policy.user_limits.queued = 3;
    fixture_setup(&f, 1, 0, &policy);
    char why[CORE_WHY_MAX];
    assert_int_equal(core_check_submit(f.core, 1, 3, why, sizeof why), 0);
    assert_int_equal(core_check_submit(f.core, 1, 4, why, sizeof why), -1);
    assert_string_equal(why, "user limit: 0 tasks waiting, 4 more asked (user-queued = 3)");
    submit_as(&f, 1, 1, 0, 1, 0);
    submit_as(&f, 2, 1, 0, 1, 0);
    submit_as(&f, 3, 1, 0, 1, 0);
    assert_int_equal(core_check_submit(f.core, 1, 1, why, sizeof why), -1);
    assert_string_equal(why, "user limit: 3 tasks waiting, 1 more asked (user-queued = 3)");
    /* Another user is not counted; a running task is not waiting. */
    assert_int_equal(core_check_submit(f.core, 2, 3, NULL, 0), 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    assert_int_equal(core_check_submit(f.core, 1, 1, NULL, 0), 0);
    /* Held tasks wait too. */
    core_actions_clear(&f.out);
    assert_int_equal(core_hold(f.core, 2, 0, &f.out, NULL), 0);
    assert_int_equal(user_info(&f, 1, 0).waiting, 2);
    assert_int_equal(user_info(&f, 1, 0).queued, 1);
    assert_int_equal(core_check_submit(f.core, 1, 2, NULL, 0), -1);
    teardown(&f);
}

/* ---- determinism ---------------------------------------------------------------------------- */

/* A random mix of users, priorities and sizes, replayed twice: the same starts, in order. */
static size_t replay(int64_t *log, size_t cap)
{
    struct fixture f;
    fixture_setup(&f, 8, 0, NULL);
    unsigned seed = 12345;
    size_t n = 0;
    int64_t running[256];
    size_t nrunning = 0;
    for (int step = 0; step < 400; step++) {
        core_time now = step * MIN;
        seed = seed * 1103515245u + 12345u;
        submit_as(&f, step + 1, (seed >> 8) % 5, (int)((seed >> 12) % 3), 1 + (seed >> 16) % 3,
                  now);
        if (nrunning > 0 && (seed >> 20) % 2 == 0) {
            size_t k = (seed >> 22) % nrunning;
            exited(&f, running[k], now);
            running[k] = running[--nrunning];
        }
        const int64_t *started = pass(&f, now);
        for (; *started != 0; started++) {
            if (n < cap)
                log[n++] = *started;
            running[nrunning++] = *started;
        }
    }
    teardown(&f);
    return n;
}

static void test_deterministic(void **state)
{
    (void)state;
    static int64_t a[1024], b[1024];
    size_t na = replay(a, 1024), nb = replay(b, 1024);
    assert_true(na > 50);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof a[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay_math),
        cmocka_unit_test(test_usage_decays),
        cmocka_unit_test(test_light_user_first),
        cmocka_unit_test(test_within_user_order),
        cmocka_unit_test(test_new_users_alternate),
        cmocka_unit_test(test_heavy_user_alone),
        cmocka_unit_test(test_add_usage),
        cmocka_unit_test(test_restore_counts),
        cmocka_unit_test(test_limit_gpus),
        cmocka_unit_test(test_limit_gpus_partial),
        cmocka_unit_test(test_limit_running),
        cmocka_unit_test(test_limit_queued),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
