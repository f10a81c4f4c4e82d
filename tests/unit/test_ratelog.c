/* util/ratelog.c: a repeating line is written at most once per LIMIT_LOG_REPEAT_S, and the next
 * one written counts those left out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/limits.h"
#include "util/ratelog.h"

static void test_repeats_are_counted(void **state)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    struct ratelog rl = {0};
    double t0 = 1000;
    assert_int_equal(ratelog_at(&rl, t0, out, "accept: %s", "Too many open files"), 1);
    /* A million failures within the window cost nothing but a counter. */
    for (int i = 0; i < 1000000; i++)
        assert_int_equal(ratelog_at(&rl, t0 + i * 1e-6, out, "accept: %s", "again"), 0);
    assert_int_equal(ratelog_at(&rl, t0 + LIMIT_LOG_REPEAT_S - 0.001, out, "x"), 0);
    assert_int_equal(ratelog_at(&rl, t0 + LIMIT_LOG_REPEAT_S, out, "accept: %s", "later"), 1);
    /* Nothing was left out before this one. */
    assert_int_equal(ratelog_at(&rl, t0 + 3 * LIMIT_LOG_REPEAT_S, out, "quiet"), 1);
    fclose(out);
    assert_string_equal(text, "accept: Too many open files\n"
                              "accept: later (1000001 more like it not logged)\n"
                              "quiet\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeats_are_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
