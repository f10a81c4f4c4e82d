/* core_why() under policy las (core/why.c: why_las): a queued task's queue and attained
 * service after its reason, a preempted and a promoted one saying so, and a running one asked
 * to yield. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "core_fixture.h"

#define H (3600 * 1000LL)

static void submit(struct fixture *f, int64_t id, int gpus, bool preemptible, core_time now)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = gpus;
    spec.preemptible = preemptible;
    spec.submit_time = now;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
}

/* Asks about one task at now; checks its kind and its words. */
static void why_is(struct fixture *f, int64_t id, core_time now, enum core_wait want,
                   const char *text)
{
    struct core_why w;
    core_why(f->core, &id, 1, now, &w);
    if (w.wait != want || strcmp(w.text, text) != 0)
        fail_msg("task %lld: wait %d '%s', want %d '%s'", (long long)id, (int)w.wait, w.text,
                 (int)want, text);
}

static void test_las_words(void **state)
{
    (void)state;
    struct fixture f;
    struct core_policy policy = core_policy_default();
    core_policy_las(&policy);
    fixture_setup(&f, 1, 0, &policy);
    /* 1 runs 2 hours (2 GPU-hours: queue 2 of 3), then 2 (queue 1, not preemptible) asks it
     * to yield. */
    submit(&f, 1, 1, true, 0);
    pass(&f, 0);
    submit(&f, 2, 1, false, 2 * H);
    pass(&f, 2 * H);
    why_is(&f, 1, 2 * H, CORE_WAIT_NONE,
           "asked to yield its GPUs (las: preempted for a task of a lower queue; it is queued "
           "again when it exits)");
    why_is(&f, 2, 2 * H, CORE_WAIT_RESOURCES,
           "needs 1 GPU to itself: GPU0 taken whole (claimed by 1); "
           "las queue 1 of 3: 0.0 GPU-hours attained");
    core_actions_clear(&f.out);
    core_attempt_exited(f.core, 1, CORE_OUTCOME_PREEMPTED, 2 * H, &f.out);
    pass(&f, 2 * H);
    why_is(&f, 1, 2 * H + H / 2, CORE_WAIT_RESOURCES,
           "needs 1 GPU to itself: GPU0 taken whole (claimed by 2); "
           "las queue 2 of 3: 2.0 GPU-hours attained, preempted 1 time");
    /* 2 runs on; once 1 has waited 100 hours in all (at 102 h) it is promoted: queue 1 again,
     * though it cannot preempt 2. */
    pass(&f, 102 * H);
    why_is(&f, 1, 103 * H, CORE_WAIT_RESOURCES,
           "needs 1 GPU to itself: GPU0 taken whole (claimed by 2); "
           "las queue 1 of 3: 2.0 GPU-hours attained, "
           "promoted: starved (101.0 hours waited in all), preempted 1 time");
    teardown(&f);
}

/* Not las: no such words. */
static void test_not_las(void **state)
{
    (void)state;
    struct fixture f;
    fixture_setup(&f, 1, 0, NULL);
    submit(&f, 1, 1, true, 0);
    pass(&f, 0);
    submit(&f, 2, 1, true, H);
    pass(&f, H);
    why_is(&f, 2, H, CORE_WAIT_RESOURCES, "needs 1 GPU to itself: GPU0 taken whole (claimed by 1)");
    why_is(&f, 1, H, CORE_WAIT_NONE, "");
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_las_words),
        cmocka_unit_test(test_not_las),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
