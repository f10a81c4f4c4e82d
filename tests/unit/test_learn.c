/* core/learn.c: learned claims, the claim after an out-of-memory, the utilisation rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/learn.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static void test_learned_claim(void **state)
{
    assert_true(learn_claim(0, 20, 16 * GIB) == 0);            /* nothing learned: whole GPUs */
    assert_true(learn_claim(6 * GIB, 20, 16 * GIB) == 7424 * MIB); /* 7.2G, up to 256M steps */
    assert_true(learn_claim(5 * GIB, 0, 16 * GIB) == 5 * GIB);  /* already on a step */
    assert_true(learn_claim(5 * GIB + 1, 0, 16 * GIB) == 5 * GIB + 256 * MIB);
    assert_true(learn_claim(14 * GIB, 20, 16 * GIB) == 0);      /* 16.8G: no room, whole GPUs */
    assert_true(learn_claim(13 * GIB, 20, 16 * GIB) == 16128 * MIB); /* 15.6G: 63 steps */
    assert_true(learn_claim(1, 20, 16 * GIB) == 256 * MIB);     /* the smallest claim */
}

static void test_oom_claim(void **state)
{
    /* No peak measured: the claim grows by the factor. */
    assert_true(learn_oom_claim(0, 4 * GIB, 1.5, 16 * GIB) == 6 * GIB);
    /* A measured peak above the claim: it grows from the peak. */
    assert_true(learn_oom_claim(5 * GIB, 4 * GIB, 1.5, 16 * GIB) == 7680 * MIB);
    /* A peak below the claim does not shrink it. */
    assert_true(learn_oom_claim(1 * GIB, 4 * GIB, 2, 16 * GIB) == 8 * GIB);
    /* Reaching the GPU's size: whole GPUs. */
    assert_true(learn_oom_claim(0, 12 * GIB, 1.5, 16 * GIB) == 0);
    assert_true(learn_oom_claim(0, 8 * GIB, 2, 16 * GIB) == 0);
}

static void test_busy_hysteresis(void **state)
{
    bool busy = false;
    static const struct { int util; bool want; } steps[] = {
        {10, false}, {79, false}, {80, true}, {95, true}, {60, true}, {51, true},
        {50, false}, {70, false}, {-1, false}, {85, true}, {-1, true}, {0, false},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        busy = learn_busy(busy, steps[i].util, 80, 50);
        assert_int_equal(busy, steps[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learned_claim),
        cmocka_unit_test(test_oom_claim),
        cmocka_unit_test(test_busy_hysteresis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
