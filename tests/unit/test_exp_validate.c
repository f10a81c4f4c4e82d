/* exp/validate.c: the bar a trial must clear, in both modes, and the epoch-time limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <cmocka.h>

#include "exp/validate.h"

static void test_need(void **state)
{
    json_t *pct = json_string("2%"), *abs = json_real(0.05), *bad = json_string("two");
    assert_true(fabs(exp_validation_need(0.90, pct, true) - 0.918) < 1e-12);
    assert_true(fabs(exp_validation_need(0.50, pct, false) - 0.49) < 1e-12); /* a loss: lower */
    assert_true(fabs(exp_validation_need(-2.0, pct, true) - -1.96) < 1e-12); /* |baseline| */
    assert_true(fabs(exp_validation_need(0.90, abs, true) - 0.95) < 1e-12);
    assert_true(exp_validation_need(0.90, NULL, true) == 0.90);
    assert_true(exp_validation_need(0.90, bad, true) == 0.90);
    json_decref(pct);
    json_decref(abs);
    json_decref(bad);
}

static void test_passes(void **state)
{
    assert_true(exp_validation_passes(0.92, 0.918, true));
    assert_true(exp_validation_passes(0.918, 0.918, true)); /* reaching the bar is enough */
    assert_false(exp_validation_passes(0.917, 0.918, true));
    assert_true(exp_validation_passes(0.40, 0.49, false));
    assert_false(exp_validation_passes(0.50, 0.49, false));
}

static void test_epoch_time(void **state)
{
    assert_true(exp_epoch_time_ok(60000, 10, 6000));
    assert_false(exp_epoch_time_ok(60001 * 10, 10, 60000));
    assert_false(exp_epoch_time_ok(1000, 0, 60000)); /* nothing reported: cannot say it was fast */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_need),
        cmocka_unit_test(test_passes),
        cmocka_unit_test(test_epoch_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
