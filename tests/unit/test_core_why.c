/* core_why() (core/why.c): every reason a task can wait for, as core words it, and that asking
 * changes nothing a pass then decides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "core_fixture.h"

static struct core_task_spec spec_of(int64_t id, int gpus, uint64_t gpu_mem)
{
    struct core_task_spec s;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.req.gpus = gpus;
    s.req.gpu_mem = gpu_mem;
    return s;
}

static void submit(struct fixture *f, const struct core_task_spec *s, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, s, now, &f->out), 0);
}

/* Asks about one task; checks its kind and its words. */
static struct core_why why_of(struct fixture *f, int64_t id, enum core_wait want,
                              const char *text)
{
    struct core_why w;
    core_why(f->core, &id, 1, 0, &w);
    if (w.wait != want)
        fail_msg("task %lld: wait %d ('%s'), want %d", (long long)id, (int)w.wait, w.text,
                 (int)want);
    if (text != NULL && strcmp(w.text, text) != 0)
        fail_msg("task %lld: '%s', want '%s'", (long long)id, w.text, text);
    return w;
}

static void test_held_pending_backoff(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    struct core_task_spec a = spec_of(1, 2, 0), held = spec_of(2, 0, 0), dep = spec_of(3, 0, 0);
    struct core_dep on_a = {.id = 1, .kind = DEP_AFTER_OK, .state = -1};
    held.hold = true;
    dep.deps = &on_a;
    dep.ndeps = 1;
    submit(&f, &a, 0);
    submit(&f, &held, 0);
    submit(&f, &dep, 0);
    pass(&f, 0);
    why_of(&f, 2, CORE_WAIT_HELD, "held");
    struct core_why w = why_of(&f, 3, CORE_WAIT_DEPENDENCY, "dependency 1 running");
    assert_int_equal(w.task, 1);
    assert_int_equal(w.state, TASK_RUNNING);
    why_of(&f, 1, CORE_WAIT_NONE, ""); /* running: not waiting */
    why_of(&f, 99, CORE_WAIT_NONE, ""); /* not live */
    /* a failed attempt with retries left: the backoff, and when it ends */
    struct core_task_spec r = spec_of(4, 0, 0);
    r.max_retries = 1;
    r.nbackoff = 1;
    r.backoff[0] = 30000;
    submit(&f, &r, 0);
    assert_started(pass(&f, 0), (int64_t[]){4, 0});
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 4, CORE_OUTCOME_EXIT_CODE, 1000, &f.out);
    w = why_of(&f, 4, CORE_WAIT_BACKOFF, "retry backoff");
    assert_int_equal(w.until, 31000);
    teardown(&f);
}

static void test_resources_and_claims(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    /* GPU0 shared by 1 and 2 (30G claimed of 40G), GPU1 whole to 3 */
    struct core_task_spec one = spec_of(1, 1, 15 * GB), two = spec_of(2, 1, 15 * GB),
                          three = spec_of(3, 1, 0), big = spec_of(4, 1, 20 * GB),
                          whole = spec_of(5, 2, 0);
    submit(&f, &one, 0);
    submit(&f, &two, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 2, 0});
    submit(&f, &three, 0);
    assert_started(pass(&f, 0), (int64_t[]){3, 0});
    submit(&f, &big, 0);
    submit(&f, &whole, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    why_of(&f, 4, CORE_WAIT_RESOURCES,
           "needs 1 GPU with 20G free: GPU0 10G free (claimed by 1, 2), GPU1 taken whole"
           " (claimed by 3)");
    /* The GPU the driver sees busy, and one out of service, are said so. */
    struct core_gpu_state busy = {.busy = true}, off = {.offline = true};
    core_set_gpu_state(f.core, 0, 0, &busy);
    core_set_gpu_state(f.core, 0, 1, &off);
    why_of(&f, 4, CORE_WAIT_RESOURCES,
           "needs 1 GPU with 20G free: GPU0 10G free (claimed by 1, 2) busy, GPU1 out of"
           " service");
    /* With the utilisation the driver measured, as the example has it. */
    busy.util = 85;
    core_set_gpu_state(f.core, 0, 0, &busy);
    why_of(&f, 4, CORE_WAIT_RESOURCES,
           "needs 1 GPU with 20G free: GPU0 10G free (claimed by 1, 2) busy 85%, GPU1 out of"
           " service");
    teardown(&f);
}

static void test_no_type_and_drain(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    struct core_task_spec t = spec_of(1, 1, 0);
    t.req.gpu_types = 1ULL << 5; /* a type no GPU here has (the fixture's are all type 0) */
    submit(&f, &t, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    why_of(&f, 1, CORE_WAIT_NO_TYPE, "no GPU of its type");
    struct core_task_spec u = spec_of(2, 1, 0);
    core_set_drain(f.core, true);
    submit(&f, &u, 0);
    why_of(&f, 2, CORE_WAIT_DRAINED, "drained: nothing new starts");
    core_set_drain(f.core, false);
    why_of(&f, 2, CORE_WAIT_NEXT_PASS, "nothing: it starts at the next pass");
    teardown(&f);
}

static void test_limits(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 4, 0, NULL);
    struct core_limits lim = {.gpus = 1};
    core_set_user_limits(f.core, 0, &lim);
    struct core_task_spec a = spec_of(1, 1, 0), b = spec_of(2, 1, 0);
    submit(&f, &a, 0);
    submit(&f, &b, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    why_of(&f, 2, CORE_WAIT_USER_LIMIT, "user limit: 1 GPU in use");
    core_set_user_limits(f.core, 0, NULL);
    /* an array of three with %1 */
    for (int64_t id = 3; id <= 5; id++) {
        struct core_task_spec e = spec_of(id, 0, 0);
        e.array_id = 3;
        e.array_limit = 1;
        submit(&f, &e, 0);
    }
    assert_started(pass(&f, 0), (int64_t[]){2, 3, 0});
    why_of(&f, 4, CORE_WAIT_ARRAY_LIMIT, "array limit: 1 of 1 running");
    teardown(&f);
}

/* Backfill: the head (2 GPUs) gets the GPU task 1 frees at 100 s; task 3, with no time limit,
 * would fit on the free GPU but would keep the head from its reservation. */
static void test_reserved_and_order(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 2, 0, NULL);
    struct core_task_spec one = spec_of(1, 1, 0), head = spec_of(2, 2, 0), late = spec_of(3, 1, 0);
    one.req.time_limit = 100000;
    submit(&f, &one, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    submit(&f, &head, 0);
    submit(&f, &late, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    why_of(&f, 2, CORE_WAIT_RESOURCES, NULL);
    struct core_why w = why_of(&f, 3, CORE_WAIT_RESERVED,
                               "reserved for task 2 (backfill: it would delay it)");
    assert_int_equal(w.task, 2);
    teardown(&f);
    /* strict order: everything behind the first that does not fit */
    struct core_policy strict = core_policy_default();
    strict.strict_order = true;
    fixture_setup(&f, 2, 0, &strict);
    submit(&f, &one, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    submit(&f, &head, 0);
    submit(&f, &late, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    w = why_of(&f, 3, CORE_WAIT_ORDER, "behind task 2, which does not fit (strict order)");
    assert_int_equal(w.task, 2);
    teardown(&f);
}

/* Asking about many tasks at once is one look; it answers each, and changes nothing a pass then
 * does. */
static void test_many_and_no_side_effects(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    struct core_task_spec hog = spec_of(1, 1, 0);
    submit(&f, &hog, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    int64_t ids[200];
    for (int i = 0; i < 200; i++) {
        struct core_task_spec t = spec_of(2 + i, 1, 0);
        submit(&f, &t, 0);
        ids[i] = 201 - i; /* in no particular order */
    }
    struct core_why w[200];
    core_why(f.core, ids, 200, 0, w);
    for (int i = 0; i < 200; i++)
        assert_int_equal(w[i].wait, CORE_WAIT_RESOURCES);
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 1, CORE_OUTCOME_SUCCESS, 10, &f.out);
    assert_started(pass(&f, 10), (int64_t[]){2, 0});
    teardown(&f);
}

/* Past the pass's scan bound: a task the pass never looked at says so, not "no room". Each
 * waiting task asks for another amount of memory, so that each is a shape of its own (a shape
 * known not to fit is skipped without being looked at, and would not count). */
static void test_scan_bound(void **state)
{
    (void)state;
    struct core_policy policy = core_policy_default();
    policy.max_scan = 2;
    struct fixture f;
    fixture_setup(&f, 1, 0, &policy);
    submit(&f, &(struct core_task_spec){.id = 1, .req.gpus = 1}, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 0});
    for (int64_t id = 2; id <= 6; id++)
        submit(&f, &(struct core_task_spec){.id = id, .req.gpus = 1, .req.mem = (uint64_t)id << 20},
               0);
    why_of(&f, 2, CORE_WAIT_RESOURCES, NULL);
    why_of(&f, 4, CORE_WAIT_RESOURCES, NULL); /* the head and two past it were looked at */
    why_of(&f, 5, CORE_WAIT_SCAN,
           "not looked at: the pass looks at 2 tasks past the first that waits");
    why_of(&f, 6, CORE_WAIT_SCAN, NULL);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_pending_backoff),
        cmocka_unit_test(test_resources_and_claims),
        cmocka_unit_test(test_no_type_and_drain),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_reserved_and_order),
        cmocka_unit_test(test_many_and_no_side_effects),
        cmocka_unit_test(test_scan_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
