/* core/: begin times (--begin) and the off-peak window (--off-peak) — a task is not started
 * before its begin, and an off-peak one only while the window is open; the order once they
 * may start; core_next_wakeup; the wait reasons; the window closing (queued ones leave, running
 * preemptible ones get one CORE_ACT_PREEMPT per attempt, non-preemptible ones are left
 * alone); held, cancelled and restored parked tasks; and that tasks without either schedule
 * exactly as before. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core_fixture.h"

#define S 1000LL
#define H (3600 * S)

static void setup(struct fixture *f, int ngpus)
{
    fixture_setup(f, ngpus, 0, NULL);
}

static struct core_task_spec spec_of(int64_t id, int gpus, core_time begin, bool off_peak,
                                     bool preemptible)
{
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.req.gpus = gpus;
    spec.begin = begin;
    spec.off_peak = off_peak;
    spec.preemptible = preemptible;
    return spec;
}

static void submit(struct fixture *f, int64_t id, int gpus, core_time begin, bool off_peak,
                   bool preemptible, core_time now)
{
    struct core_task_spec spec = spec_of(id, gpus, begin, off_peak, preemptible);
    spec.submit_time = now;
    core_actions_clear(&f->out);
    assert_int_equal(core_submit(f->core, &spec, now, &f->out), 0);
    const struct core_action *a = find_state(f, id);
    assert_non_null(a);
    assert_int_equal(a->state, TASK_QUEUED);
}

static struct core_why why(struct fixture *f, int64_t id, core_time now)
{
    struct core_why w;
    core_why(f->core, &id, 1, now, &w);
    return w;
}

/* The ids a pass asked to preempt, 0-terminated, from the last pass's actions. */
static const int64_t *preempted(const struct fixture *f)
{
    static int64_t ids[64];
    size_t n = 0;
    for (size_t i = 0; i < f->out.n && n < 63; i++)
        if (f->out.v[i].type == CORE_ACT_PREEMPT)
            ids[n++] = f->out.v[i].task;
    ids[n] = 0;
    return ids;
}

/* The attempt the last pass's first PREEMPT names, or -1. */
static int preempt_attempt(const struct fixture *f)
{
    for (size_t i = 0; i < f->out.n; i++)
        if (f->out.v[i].type == CORE_ACT_PREEMPT)
            return f->out.v[i].attempt;
    return -1;
}

static void exited(struct fixture *f, int64_t id, enum core_outcome outcome, core_time now)
{
    core_actions_clear(&f->out);
    assert_int_equal(core_attempt_exited(f->core, id, outcome, now, &f->out), 0);
}

static void test_begin_waits(void **state)
{
    struct fixture f;
    setup(&f, 2);
    submit(&f, 1, 1, 10 * S, false, false, 0);
    submit(&f, 2, 1, 0, false, false, 0);
    assert_started(pass(&f, 0), (int64_t[]){2, 0});
    assert_int_equal(core_task_state(f.core, 1), TASK_QUEUED);
    assert_int_equal(core_next_wakeup(f.core), 10 * S);
    struct core_why w = why(&f, 1, 5 * S);
    assert_int_equal(w.wait, CORE_WAIT_BEGIN);
    assert_int_equal(w.until, 10 * S);
    assert_string_equal(w.text, "begins");
    assert_int_equal(core_task_why(f.core, 1, (char[64]){0}, 64), 0);
    assert_started(pass(&f, 10 * S - 1), (int64_t[]){0});
    assert_started(pass(&f, 10 * S), (int64_t[]){1, 0});
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    teardown(&f);
}

/* Once due, tasks go by the usual order (priority, then when they became ready): a task
 * becomes ready at the pass at its begin time (the wakeup), not at its submission. */
static void test_begin_order(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 9, 1, 0, false, false, 0);
    assert_started(pass(&f, 0), (int64_t[]){9, 0}); /* the GPU is taken */
    submit(&f, 1, 1, 20 * S, false, false, 0);
    submit(&f, 2, 1, 10 * S, false, false, 1);
    assert_started(pass(&f, 10 * S), (int64_t[]){0}); /* the wakeup at 2's begin */
    submit(&f, 3, 1, 0, false, false, 15 * S);
    assert_started(pass(&f, 15 * S), (int64_t[]){0});
    assert_int_equal(core_next_wakeup(f.core), 20 * S);
    assert_started(pass(&f, 20 * S), (int64_t[]){0});
    /* 2 (ready at 10 s), then 3 (15 s), then 1 (20 s; it was submitted first). */
    exited(&f, 9, CORE_OUTCOME_SUCCESS, 30 * S);
    assert_started(pass(&f, 30 * S), (int64_t[]){2, 0});
    exited(&f, 2, CORE_OUTCOME_SUCCESS, 31 * S);
    assert_started(pass(&f, 31 * S), (int64_t[]){3, 0});
    exited(&f, 3, CORE_OUTCOME_SUCCESS, 32 * S);
    assert_started(pass(&f, 32 * S), (int64_t[]){1, 0});
    teardown(&f);
}

/* A parked task can be held, released (still parked until its time), cancelled. */
static void test_begin_hold_cancel(void **state)
{
    struct fixture f;
    const char *whyp;
    setup(&f, 2);
    submit(&f, 1, 1, 10 * S, false, false, 0);
    submit(&f, 2, 1, 10 * S, false, false, 0);
    core_actions_clear(&f.out);
    assert_int_equal(core_hold(f.core, 1, 1 * S, &f.out, &whyp), 0);
    assert_int_equal(core_cancel(f.core, 2, 1 * S, &f.out, &whyp), 0);
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    assert_int_equal(core_release(f.core, 1, 2 * S, &f.out, &whyp), 0);
    assert_int_equal(core_next_wakeup(f.core), 10 * S);
    assert_started(pass(&f, 5 * S), (int64_t[]){0});
    assert_started(pass(&f, 10 * S), (int64_t[]){1, 0});
    teardown(&f);
}

/* After a restart: a queued task whose begin is ahead waits again; one whose begin passed
 * keeps its place by its stored ready time. */
static void test_begin_restore(void **state)
{
    struct fixture f;
    setup(&f, 1);
    struct core_restore st = {.state = TASK_QUEUED, .ready_time = 1 * S};
    struct core_task_spec a = spec_of(1, 1, 100 * S, false, false);
    struct core_task_spec b = spec_of(2, 1, 2 * S, false, false);
    assert_int_equal(core_restore(f.core, &a, &st), 0);
    st.ready_time = 3 * S;
    assert_int_equal(core_restore(f.core, &b, &st), 0);
    core_actions_clear(&f.out);
    core_restore_done(f.core, 50 * S, &f.out);
    assert_int_equal(core_next_wakeup(f.core), 100 * S);
    assert_int_equal(why(&f, 1, 50 * S).wait, CORE_WAIT_BEGIN);
    assert_started(pass(&f, 50 * S), (int64_t[]){2, 0});
    exited(&f, 2, CORE_OUTCOME_SUCCESS, 60 * S);
    assert_started(pass(&f, 60 * S), (int64_t[]){0});
    assert_started(pass(&f, 100 * S), (int64_t[]){1, 0});
    teardown(&f);
}

/* No window set: an off-peak task waits, and says so; nothing to wake up for. */
static void test_offpeak_no_window(void **state)
{
    struct fixture f;
    setup(&f, 1);
    submit(&f, 1, 1, 0, true, false, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    struct core_why w = why(&f, 1, 0);
    assert_int_equal(w.wait, CORE_WAIT_OFF_PEAK);
    assert_int_equal(w.until, CORE_TIME_NEVER);
    assert_string_equal(w.text, "off-peak: no window is set");
    teardown(&f);
}

/* The window opens: waiting ones start; it closes: queued ones wait again, running ones that
 * are preemptible get one PREEMPT, those that are not run on. The next window again. */
static void test_offpeak_window(void **state)
{
    struct fixture f;
    setup(&f, 2);
    core_set_off_peak(f.core, 100 * S, 200 * S);
    submit(&f, 1, 1, 0, true, true, 0);   /* preemptible */
    submit(&f, 2, 1, 0, true, false, 0);  /* not */
    submit(&f, 3, 1, 0, true, false, 0);  /* no room for it */
    submit(&f, 4, 0, 0, false, false, 0); /* an ordinary CPU task runs at once */
    assert_started(pass(&f, 0), (int64_t[]){4, 0});
    assert_int_equal(core_next_wakeup(f.core), 100 * S);
    struct core_why w = why(&f, 1, 50 * S);
    assert_int_equal(w.wait, CORE_WAIT_OFF_PEAK);
    assert_int_equal(w.until, 100 * S);
    assert_string_equal(w.text, "off-peak: the window opens");
    assert_started(pass(&f, 100 * S - 1), (int64_t[]){0});
    assert_started(pass(&f, 100 * S), (int64_t[]){1, 2, 0});
    assert_int_equal(core_next_wakeup(f.core), 200 * S);
    assert_int_equal(why(&f, 3, 150 * S).wait, CORE_WAIT_RESOURCES);
    /* The close: 3 leaves the ready queue, 1 is asked to stop, 2 is not. */
    assert_started(pass(&f, 200 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){1, 0});
    assert_int_equal(preempt_attempt(&f), 1);
    assert_int_equal(why(&f, 3, 200 * S).wait, CORE_WAIT_OFF_PEAK);
    /* Never twice for one attempt, though it is slow to stop. */
    assert_started(pass(&f, 201 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    /* The driver gives the next window; the preempted attempt ends: 1 waits for it too. */
    core_set_off_peak(f.core, 300 * S, 400 * S);
    exited(&f, 1, CORE_OUTCOME_PREEMPTED, 210 * S);
    assert_int_equal(core_task_state(f.core, 1), TASK_QUEUED);
    assert_started(pass(&f, 210 * S), (int64_t[]){0});
    assert_int_equal(why(&f, 1, 210 * S).until, 300 * S);
    assert_int_equal(core_next_wakeup(f.core), 300 * S);
    exited(&f, 2, CORE_OUTCOME_SUCCESS, 250 * S);
    /* The next window: 1 (ready again at 210 s) before 3 (ready at 100 s, parked since)?
     * Both became ready when the window opened: id order among equals is the queue's. */
    const int64_t *started = pass(&f, 300 * S);
    assert_true((started[0] == 1 && started[1] == 3) || (started[0] == 3 && started[1] == 1));
    assert_int_equal(core_task_attempts(f.core, 1), 2);
    /* The second attempt gets its own PREEMPT at the next close. */
    assert_started(pass(&f, 400 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){1, 0});
    assert_int_equal(preempt_attempt(&f), 2);
    teardown(&f);
}

/* A begin time and the off-peak flag together: both must allow it. */
static void test_offpeak_and_begin(void **state)
{
    struct fixture f;
    setup(&f, 1);
    core_set_off_peak(f.core, 0, 100 * S);
    submit(&f, 1, 1, 50 * S, true, false, 0);
    assert_started(pass(&f, 0), (int64_t[]){0});
    assert_int_equal(why(&f, 1, 10 * S).wait, CORE_WAIT_BEGIN);
    assert_int_equal(core_next_wakeup(f.core), 50 * S);
    assert_started(pass(&f, 50 * S), (int64_t[]){1, 0});
    /* Begin after the window: the window then. */
    submit(&f, 2, 1, 150 * S, true, false, 60 * S);
    core_set_off_peak(f.core, 200 * S, 300 * S);
    assert_started(pass(&f, 100 * S), (int64_t[]){0});
    exited(&f, 1, CORE_OUTCOME_SUCCESS, 110 * S);
    assert_started(pass(&f, 150 * S), (int64_t[]){0});
    assert_int_equal(why(&f, 2, 150 * S).wait, CORE_WAIT_OFF_PEAK);
    assert_started(pass(&f, 200 * S), (int64_t[]){2, 0});
    teardown(&f);
}

/* After a restart outside the window, a running preemptible off-peak attempt is preempted at
 * the first pass; inside the window, it is not. */
static void test_offpeak_restore_running(void **state)
{
    for (int inside = 0; inside <= 1; inside++) {
        struct fixture f;
        setup(&f, 1);
        core_set_off_peak(f.core, inside ? 0 : 500 * S, 1000 * S);
        struct core_restore st = {.state = TASK_RUNNING, .started = 10 * S,
                                  .attempt_running = true};
        st.placement.node = 0;
        st.placement.ngpus = 1;
        st.placement.gpu[0] = 0;
        struct core_task_spec a = spec_of(1, 1, 0, true, true);
        a.attempts = 1;
        assert_int_equal(core_restore(f.core, &a, &st), 0);
        core_actions_clear(&f.out);
        core_restore_done(f.core, 100 * S, &f.out);
        pass(&f, 100 * S);
        assert_started(preempted(&f), inside ? (int64_t[]){0} : (int64_t[]){1, 0});
        teardown(&f);
    }
}

/* Tasks without begin or off-peak: the same starts as without this feature, whatever the
 * window does; and the window alone asks for no wakeup. */
static void test_others_unchanged(void **state)
{
    struct fixture f;
    setup(&f, 2);
    core_set_off_peak(f.core, 100 * S, 200 * S);
    submit(&f, 1, 1, 0, false, true, 0);
    submit(&f, 2, 1, 0, false, true, 0);
    submit(&f, 3, 1, 0, false, true, 0);
    assert_started(pass(&f, 0), (int64_t[]){1, 2, 0});
    assert_int_equal(core_next_wakeup(f.core), CORE_TIME_NEVER);
    assert_started(pass(&f, 200 * S), (int64_t[]){0});
    assert_started(preempted(&f), (int64_t[]){0});
    teardown(&f);
}

/* Ten thousand tasks for tonight cost the day's passes nothing: parked, none is examined, and a
 * pass with nothing else changed is skipped; at their time they are all there. */
static void test_begin_deep_queue(void **state)
{
    struct fixture f;
    struct core_stats st;
    setup(&f, 1);
    core_set_off_peak(f.core, 1000 * S, 2000 * S);
    for (int64_t id = 1; id <= 10000; id++) {
        struct core_task_spec spec = spec_of(id, 1, id % 2 ? 500 * S : 0, id % 2 == 0, false);
        core_actions_clear(&f.out);
        assert_int_equal(core_submit(f.core, &spec, 0, &f.out), 0);
    }
    submit(&f, 20000, 1, 0, false, false, 0);
    assert_started(pass(&f, 0), (int64_t[]){20000, 0});
    for (core_time now = 1 * S; now < 500 * S; now += 1 * S)
        assert_started(pass(&f, now), (int64_t[]){0});
    core_stats(f.core, &st);
    assert_int_equal(st.examined, 1);
    assert_true(st.passes_skipped >= 498);
    assert_int_equal(core_next_wakeup(f.core), 500 * S);
    /* At 500 s the begin tasks join; the GPU is taken, so one is examined and blocks. */
    pass(&f, 500 * S);
    size_t counts[TASK_NSTATES];
    core_count_states(f.core, counts);
    assert_int_equal(counts[TASK_QUEUED], 10000);
    assert_int_equal(why(&f, 2, 600 * S).wait, CORE_WAIT_OFF_PEAK);
    assert_int_not_equal(why(&f, 1, 600 * S).wait, CORE_WAIT_BEGIN);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_waits),
        cmocka_unit_test(test_begin_order),
        cmocka_unit_test(test_begin_hold_cancel),
        cmocka_unit_test(test_begin_restore),
        cmocka_unit_test(test_offpeak_no_window),
        cmocka_unit_test(test_offpeak_window),
        cmocka_unit_test(test_offpeak_and_begin),
        cmocka_unit_test(test_offpeak_restore_running),
        cmocka_unit_test(test_others_unchanged),
        cmocka_unit_test(test_begin_deep_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
