/* exp/lifecycle.c: every row of the experiment lifecycle's table, one at a time, and the events
 * it refuses (with a message, changing nothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "exp/lifecycle.h"

#define ALL_STATES(v) for (int v = 0; v < EXP_NSTATES; v++)

static const enum exp_state finals[] = {EXP_PASSED, EXP_FAILED, EXP_DONE};

/* Decides and checks the outcome: ok, the new state, the action. */
static struct exp_decision decide(enum exp_state from, enum exp_event ev,
                                  const struct exp_facts *f, int rc, enum exp_state to,
                                  enum exp_action action)
{
    struct exp_decision d;
    assert_int_equal(exp_lifecycle_decide(from, ev, f, &d), rc);
    assert_int_equal(d.to, to);
    assert_int_equal(d.action, action);
    return d;
}

static void refused(enum exp_state from, enum exp_event ev, const struct exp_facts *f,
                    const char *message)
{
    struct exp_decision d = decide(from, ev, f, -1, from, EXP_ACT_NONE);
    if (message != NULL && strstr(d.reason, message) == NULL)
        fail_msg("refusal of %s in %s: '%s' lacks '%s'", exp_event_name(ev), exp_state_name(from),
                 d.reason, message);
}

static void reason_is(const struct exp_decision *d, const char *want)
{
    if (strcmp(d->reason, want) != 0)
        fail_msg("reason '%s', expected '%s'", d->reason, want);
}

static void test_names(void **state)
{
    ALL_STATES(s) assert_int_equal(exp_state_parse(exp_state_name((enum exp_state)s)), s);
    assert_string_equal(exp_state_name(EXP_RUNNING), "running");
    assert_string_equal(exp_state_name(EXP_PASSED), "passed");
    assert_int_equal(exp_state_parse("finished"), -1);
    assert_int_equal(exp_state_parse(NULL), -1);
    assert_true(exp_state_final(EXP_PASSED) && exp_state_final(EXP_FAILED) &&
                exp_state_final(EXP_DONE));
    assert_false(exp_state_final(EXP_STOPPED) || exp_state_final(EXP_PAUSED) ||
                 exp_state_final(EXP_RUNNING));
}

static void test_create(void **state)
{
    struct exp_facts f = {.name = "e"};
    struct exp_decision d = decide(EXP_CREATED, EXP_EV_CREATE, &f, 0, EXP_RUNNING, EXP_ACT_NONE);
    reason_is(&d, "");
    ALL_STATES(s) if (s != EXP_CREATED) refused((enum exp_state)s, EXP_EV_CREATE, &f, NULL);
}

static void test_breaker(void **state)
{
    struct exp_facts f = {.name = "e", .failures = 2, .breaker = 2, .last = "task 5, exit 3"};
    struct exp_decision d = decide(EXP_RUNNING, EXP_EV_TRIAL_FAILED, &f, 0, EXP_PAUSED,
                                   EXP_ACT_HOLD);
    reason_is(&d, "paused after 2 consecutive trial failures (the last: task 5, exit 3);"
                  " drover exp resume e");
    f.failures = 1; /* not yet */
    d = decide(EXP_RUNNING, EXP_EV_TRIAL_FAILED, &f, 0, EXP_RUNNING, EXP_ACT_NONE);
    reason_is(&d, "");
    f.failures = 50, f.breaker = 0; /* off */
    decide(EXP_RUNNING, EXP_EV_TRIAL_FAILED, &f, 0, EXP_RUNNING, EXP_ACT_NONE);
    /* Counted but acted on nowhere else. */
    f.breaker = 2;
    decide(EXP_PAUSED, EXP_EV_TRIAL_FAILED, &f, 0, EXP_PAUSED, EXP_ACT_NONE);
    decide(EXP_STOPPED, EXP_EV_TRIAL_FAILED, &f, 0, EXP_STOPPED, EXP_ACT_NONE);
    for (size_t i = 0; i < 3; i++)
        decide(finals[i], EXP_EV_TRIAL_FAILED, &f, 0, finals[i], EXP_ACT_NONE);
    refused(EXP_CREATED, EXP_EV_TRIAL_FAILED, &f, NULL);
    refused(EXP_VALIDATING, EXP_EV_TRIAL_FAILED, &f, NULL);
}

static void test_all_ended(void **state)
{
    struct exp_facts f = {.name = "e", .trials = 9, .failed = 9, .failure = "task 12, exit 1"};
    struct exp_decision d;
    /* From running, and from paused (the breaker tripped on the last trials: nothing held). */
    enum exp_state from[] = {EXP_RUNNING, EXP_PAUSED};
    for (size_t i = 0; i < 2; i++) {
        f = (struct exp_facts){.name = "e", .trials = 9, .failed = 9,
                               .failure = "task 12, exit 1"};
        d = decide(from[i], EXP_EV_ALL_ENDED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
        reason_is(&d, "all 9 trials failed; last: task 12, exit 1");
        f.validation = f.generator = true; /* every trial failed: nothing to validate or show */
        decide(from[i], EXP_EV_ALL_ENDED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
        f = (struct exp_facts){.name = "e", .trials = 9, .succeeded = 2, .failed = 1,
                               .stopped_early = 5};
        d = decide(from[i], EXP_EV_ALL_ENDED, &f, 0, EXP_DONE, EXP_ACT_NONE);
        reason_is(&d, "every trial ended: 2 succeeded, 1 failed, 5 stopped early, 1 cancelled or"
                      " skipped");
        f.generator = true;
        d = decide(from[i], EXP_EV_ALL_ENDED, &f, 0, EXP_RUNNING, EXP_ACT_START_GENERATOR);
        reason_is(&d, "every trial ended: 2 succeeded, 1 failed, 5 stopped early, 1 cancelled or"
                      " skipped");
        f.validation = true; /* validation first: the generator comes after a verdict */
        d = decide(from[i], EXP_EV_ALL_ENDED, &f, 0, EXP_VALIDATING, EXP_ACT_VALIDATE);
        reason_is(&d, "");
    }
    f = (struct exp_facts){.name = "e", .trials = 1, .failed = 1, .failure = "task 3, signal 9"};
    d = decide(EXP_RUNNING, EXP_EV_ALL_ENDED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
    reason_is(&d, "all 1 trial failed; last: task 3, signal 9");
    f = (struct exp_facts){.name = "e", .trials = 0};
    d = decide(EXP_RUNNING, EXP_EV_ALL_ENDED, &f, 0, EXP_DONE, EXP_ACT_NONE);
    /* Stopped or finished: stays as it is. */
    f = (struct exp_facts){.name = "e", .trials = 2, .failed = 2, .failure = "task 1, exit 1"};
    decide(EXP_STOPPED, EXP_EV_ALL_ENDED, &f, 0, EXP_STOPPED, EXP_ACT_NONE);
    for (size_t i = 0; i < 3; i++) {
        d = decide(finals[i], EXP_EV_ALL_ENDED, &f, 0, finals[i], EXP_ACT_NONE);
        reason_is(&d, "");
    }
    refused(EXP_CREATED, EXP_EV_ALL_ENDED, &f, NULL);
    refused(EXP_VALIDATING, EXP_EV_ALL_ENDED, &f, NULL);
}

static void test_pipeline(void **state)
{
    /* prepare ok, train failed, evaluate skipped for it: the failed stage is the reason. */
    struct exp_facts f = {.name = "p", .pipeline = true, .trials = 3, .succeeded = 1,
                          .failed = 1, .failure = "task 4, exit 1", .stage = "train"};
    struct exp_decision d = decide(EXP_RUNNING, EXP_EV_ALL_ENDED, &f, 0, EXP_FAILED,
                                   EXP_ACT_NONE);
    reason_is(&d, "stage train failed (task 4, exit 1)");
    f.failed = 3, f.succeeded = 0;
    d = decide(EXP_RUNNING, EXP_EV_ALL_ENDED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
    reason_is(&d, "stage train failed (task 4, exit 1); 2 more stages failed");
    f = (struct exp_facts){.name = "p", .pipeline = true, .trials = 4, .succeeded = 4};
    d = decide(EXP_RUNNING, EXP_EV_ALL_ENDED, &f, 0, EXP_DONE, EXP_ACT_NONE);
    reason_is(&d, "every stage ended: 4 succeeded");
}

static void test_validated(void **state)
{
    struct exp_facts f = {.name = "e", .passed = true, .detail = "best acc 0.97 meets"};
    struct exp_decision d = decide(EXP_VALIDATING, EXP_EV_VALIDATED, &f, 0, EXP_PASSED,
                                   EXP_ACT_ARCHIVE);
    reason_is(&d, "best acc 0.97 meets");
    f.generator = f.space_left = true; /* a pass ends it, whatever else there is */
    decide(EXP_VALIDATING, EXP_EV_VALIDATED, &f, 0, EXP_PASSED, EXP_ACT_ARCHIVE);
    f = (struct exp_facts){.name = "e", .detail = "best acc 0.4 falls short", .generator = true,
                           .space_left = true};
    d = decide(EXP_VALIDATING, EXP_EV_VALIDATED, &f, 0, EXP_RUNNING, EXP_ACT_START_GENERATOR);
    reason_is(&d, "best acc 0.4 falls short");
    f.generator = false;
    decide(EXP_VALIDATING, EXP_EV_VALIDATED, &f, 0, EXP_RUNNING, EXP_ACT_NEXT_ROUND);
    f.space_left = false;
    d = decide(EXP_VALIDATING, EXP_EV_VALIDATED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
    reason_is(&d, "best acc 0.4 falls short; no configurations left");
    ALL_STATES(s) if (s != EXP_VALIDATING) refused((enum exp_state)s, EXP_EV_VALIDATED, &f, NULL);
}

static void test_generated(void **state)
{
    struct exp_facts f = {.name = "e", .proposed = 3};
    struct exp_decision d = decide(EXP_RUNNING, EXP_EV_GENERATED, &f, 0, EXP_RUNNING,
                                   EXP_ACT_RUN_PROPOSED);
    reason_is(&d, "the generator proposed 3 trials");
    f.proposed = 0;
    d = decide(EXP_RUNNING, EXP_EV_GENERATED, &f, 0, EXP_DONE, EXP_ACT_NONE);
    reason_is(&d, "the generator proposed no more trials");
    f = (struct exp_facts){.name = "e", .proposed = -1, .detail = "the generator (task 9) failed"};
    d = decide(EXP_RUNNING, EXP_EV_GENERATED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
    reason_is(&d, "the generator (task 9) failed");
    /* Paused, stopped, finished: what it says is not acted on. */
    f.proposed = 2;
    decide(EXP_PAUSED, EXP_EV_GENERATED, &f, 0, EXP_PAUSED, EXP_ACT_NONE);
    decide(EXP_STOPPED, EXP_EV_GENERATED, &f, 0, EXP_STOPPED, EXP_ACT_NONE);
    for (size_t i = 0; i < 3; i++)
        decide(finals[i], EXP_EV_GENERATED, &f, 0, finals[i], EXP_ACT_NONE);
    refused(EXP_CREATED, EXP_EV_GENERATED, &f, NULL);
    refused(EXP_VALIDATING, EXP_EV_GENERATED, &f, NULL);
}

static void test_action_failed(void **state)
{
    struct exp_facts f = {.name = "e", .detail = "cannot start the generator: no command"};
    struct exp_decision d = decide(EXP_RUNNING, EXP_EV_ACTION_FAILED, &f, 0, EXP_FAILED,
                                   EXP_ACT_NONE);
    reason_is(&d, "cannot start the generator: no command");
    decide(EXP_VALIDATING, EXP_EV_ACTION_FAILED, &f, 0, EXP_FAILED, EXP_ACT_NONE);
    ALL_STATES(s)
        if (s != EXP_RUNNING && s != EXP_VALIDATING)
            refused((enum exp_state)s, EXP_EV_ACTION_FAILED, &f, NULL);
}

static void test_stop(void **state)
{
    struct exp_facts f = {.name = "e"};
    struct exp_decision d = decide(EXP_RUNNING, EXP_EV_STOP, &f, 0, EXP_STOPPED, EXP_ACT_CANCEL);
    reason_is(&d, "stopped by user");
    decide(EXP_PAUSED, EXP_EV_STOP, &f, 0, EXP_STOPPED, EXP_ACT_CANCEL);
    refused(EXP_STOPPED, EXP_EV_STOP, &f, "cannot stop experiment e: it is stopped already");
    refused(EXP_PASSED, EXP_EV_STOP, &f,
            "cannot stop experiment e: it has already ended (passed); stopping it would change"
            " nothing");
    refused(EXP_FAILED, EXP_EV_STOP, &f, "it has already ended (failed)");
    refused(EXP_DONE, EXP_EV_STOP, &f, "it has already ended (done)");
    refused(EXP_CREATED, EXP_EV_STOP, &f, NULL);
    refused(EXP_VALIDATING, EXP_EV_STOP, &f, NULL);
}

static void test_resume(void **state)
{
    struct exp_facts f = {.name = "e"};
    struct exp_decision d = decide(EXP_PAUSED, EXP_EV_RESUME, &f, 0, EXP_RUNNING,
                                   EXP_ACT_RELEASE);
    reason_is(&d, "resumed by user");
    d = decide(EXP_STOPPED, EXP_EV_RESUME, &f, 0, EXP_RUNNING, EXP_ACT_REQUEUE);
    reason_is(&d, "resumed by user");
    refused(EXP_RUNNING, EXP_EV_RESUME, &f,
            "cannot resume experiment e: it is running (only a paused or stopped experiment"
            " resumes)");
    for (size_t i = 0; i < 3; i++)
        refused(finals[i], EXP_EV_RESUME, &f, "cannot resume experiment e: it has already ended");
    refused(EXP_PASSED, EXP_EV_RESUME, &f, "(passed)");
    refused(EXP_CREATED, EXP_EV_RESUME, &f, NULL);
    refused(EXP_VALIDATING, EXP_EV_RESUME, &f, NULL);
}

/* Over the whole table: a refusal says why and changes nothing; nothing leads back to created;
 * the final states only ever stay themselves. */
static void test_every_pair(void **state)
{
    struct exp_facts variants[] = {
        {.name = "e"},
        {.name = "e", .failures = 3, .breaker = 2, .trials = 2, .failed = 2, .passed = true,
         .proposed = 2, .validation = true, .generator = true, .space_left = true},
        {.name = "e", .pipeline = true, .trials = 2, .failed = 1, .proposed = -1},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        ALL_STATES(s) for (int ev = 0; ev < EXP_NEVENTS; ev++) {
            struct exp_decision d;
            int rc = exp_lifecycle_decide((enum exp_state)s, (enum exp_event)ev, &variants[v],
                                          &d);
            if (rc < 0) {
                assert_int_equal(d.to, s);
                assert_int_equal(d.action, EXP_ACT_NONE);
                assert_true(strlen(d.reason) > 0);
                continue;
            }
            assert_int_equal(rc, 0);
            assert_true(d.to != EXP_CREATED);
            if (exp_state_final((enum exp_state)s)) {
                assert_int_equal(d.to, s);
                assert_int_equal(d.action, EXP_ACT_NONE);
            }
        }
    struct exp_decision d; /* out of range: refused, not read past the tables */
    assert_int_equal(exp_lifecycle_decide(EXP_NSTATES, EXP_EV_STOP, NULL, &d), -1);
    assert_int_equal(exp_lifecycle_decide(EXP_RUNNING, EXP_NEVENTS, NULL, &d), -1);
    assert_int_equal(exp_lifecycle_decide(EXP_RUNNING, EXP_EV_STOP, NULL, &d), 0);
    assert_int_equal(d.to, EXP_STOPPED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),       cmocka_unit_test(test_create),
        cmocka_unit_test(test_breaker),     cmocka_unit_test(test_all_ended),
        cmocka_unit_test(test_pipeline),    cmocka_unit_test(test_validated),
        cmocka_unit_test(test_generated),   cmocka_unit_test(test_action_failed),
        cmocka_unit_test(test_stop),        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_every_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
