/* util/when.c: --begin's TIME and the off-peak window, with a fixed now and a fixed zone (UTC+1,
 * no DST: every form, bad forms, the next window), then a real zone with DST (Europe/Berlin:
 * a wall time a DST change skipped is refused; "tomorrow" is a calendar day, not 24 hours). */
#define _DEFAULT_SOURCE /* timegm */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/when.h"

#define NOW 1796126400LL /* 2026-12-01T12:00:00Z: 13:00 in the test's zone */
#define ZONE 3600        /* UTC+1 */

static struct tm *fake_to_local(const time_t *t, struct tm *out)
{
    time_t local = *t + ZONE;
    return gmtime_r(&local, out);
}

static time_t fake_from_local(struct tm *tm)
{
    time_t t = timegm(tm); /* normalizes tm as mktime does */
    return t == (time_t)-1 ? t : t - ZONE;
}

static struct when_clock fake_clock(int64_t now_s)
{
    return (struct when_clock){.now_ms = now_s * 1000, .to_local = fake_to_local,
                               .from_local = fake_from_local};
}

static void test_forms(void **state)
{
    struct when_clock clock = fake_clock(NOW);
    clock.now_ms += 250; /* now is not on a whole second */
    static const struct {
        const char *in;
        int64_t want_s;
    } ok[] = {
        {"22:00", NOW + 9 * 3600},           /* today, later */
        {"22:00:30", NOW + 9 * 3600 + 30},
        {"12:30", NOW - 1800 + 86400},       /* passed today: tomorrow */
        {"7:05", 1796191500},
        {"tomorrow 02:00", 1796173200},
        {"today 08:00", 1796108400},         /* in the past: begins at once */
        {"2026-12-24T18:00", 1798131600},
        {"2026-12-24 18:00:00", 1798131600},
        {"2026-12-24T18:00Z", 1798135200},
        {"2026-12-24T18:00+01:00", 1798131600},
        {"2026-12-24T18:00-0530", 1798155000},
        {"2026-12-24", 1798066800},
        {"@1767225600", 1767225600},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ms = 0;
        const char *err = NULL;
        if (when_parse(ok[i].in, &clock, &ms, &err) != 0)
            fail_msg("%s: %s", ok[i].in, err);
        if (ms != ok[i].want_s * 1000)
            fail_msg("%s: got %lld, want %lld", ok[i].in, (long long)ms,
                     (long long)ok[i].want_s * 1000);
    }
    static const struct {
        const char *in;
        int64_t want_ms;
    } rel[] = {
        {"+2h", 2 * 3600000}, {"+90s", 90000}, {"+1d", 86400000}, {"+1h30m", 5400000},
    };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int64_t ms = 0;
        const char *err = NULL;
        assert_int_equal(when_parse(rel[i].in, &clock, &ms, &err), 0);
        assert_true(ms == clock.now_ms + rel[i].want_ms);
    }
}

static void test_bad(void **state)
{
    struct when_clock clock = fake_clock(NOW);
    static const char *const bad[] = {
        "", "22", "24:00", "22:60", "22:00:60", "22:0", "tomorrow", "tomorrow 25:00",
        "yesterday 10:00", "2026-02-30T10:00", "2026-13-01", "2026-12-24T18:00+1",
        "2026-12-24X18:00", "2026-12-24T18", "+", "+abc", "+-1h", "@", "@12x", "@-5",
        "@99999999999999", " 22:00", "22:00 ", "now", "22:00Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        const char *err = NULL;
        if (when_parse(bad[i], &clock, &ms, &err) != -1)
            fail_msg("'%s' was taken as %lld", bad[i], (long long)ms);
        assert_non_null(err);
        assert_null(strchr(err, '\n'));
    }
    int64_t ms;
    const char *err;
    assert_int_equal(when_parse(NULL, &clock, &ms, &err), -1);
}

static void test_window_parse(void **state)
{
    int start, end;
    const char *err;
    assert_int_equal(when_window_parse("20:00-08:00", &start, &end, &err), 0);
    assert_int_equal(start, 72000);
    assert_int_equal(end, 28800);
    assert_int_equal(when_window_parse("09:00:30-17:00", &start, &end, &err), 0);
    assert_int_equal(start, 32430);
    static const char *const bad[] = {"", "20:00", "20:00-", "20:00-20:00", "8-9", "20:00-08:00x",
                                      "25:00-08:00", "20:00 - 08:00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(when_window_parse(bad[i], &start, &end, &err), -1);
        assert_non_null(err);
    }
}

/* The window containing now, or the next. */
static void test_window_next(void **state)
{
    static const struct {
        int64_t now_s;
        int start, end;
        int64_t open_s, close_s;
    } cases[] = {
        {NOW, 72000, 28800, 1796151600, 1796194800},              /* 13:00: tonight's */
        {1796151600 + 3 * 3600, 72000, 28800, 1796151600, 1796194800}, /* 23:00: open */
        {1796151600 + 7 * 3600, 72000, 28800, 1796151600, 1796194800}, /* 03:00: opened yesterday */
        {1796194800, 72000, 28800, 1796238000, 1796281200},       /* 08:00: closed, next tonight */
        {NOW, 32400, 61200, 1796112000, 1796140800},              /* 09-17 at 13:00: open */
        {1796140800 + 3600, 32400, 61200, 1796198400, 1796227200}, /* 18:00: tomorrow's */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct when_clock clock = fake_clock(cases[i].now_s);
        int64_t open, close;
        assert_int_equal(when_window_next(cases[i].start, cases[i].end, &clock, &open, &close),
                         0);
        if (open != cases[i].open_s * 1000 || close != cases[i].close_s * 1000)
            fail_msg("case %zu: got [%lld, %lld)", i, (long long)open / 1000,
                     (long long)close / 1000);
    }
}

/* Europe/Berlin: on 2026-03-29 02:00 CET becomes 03:00 CEST. */
static void test_dst(void **state)
{
    if (access("/usr/share/zoneinfo/Europe/Berlin", R_OK) != 0)
        skip();
    setenv("TZ", "Europe/Berlin", 1);
    tzset();
    struct when_clock clock = when_clock_system();
    clock.now_ms = 1774699200LL * 1000; /* 2026-03-28 13:00 CET */
    int64_t ms;
    const char *err = NULL;
    assert_int_equal(when_parse("tomorrow 02:30", &clock, &ms, &err), -1);
    assert_non_null(strstr(err, "DST"));
    assert_int_equal(when_parse("2026-03-29T02:30", &clock, &ms, &err), -1);
    /* 04:00 CEST tomorrow is 14 hours away, not 15. */
    assert_int_equal(when_parse("tomorrow 04:00", &clock, &ms, &err), 0);
    assert_true(ms == 1774749600LL * 1000);
    /* A window over the change is two hours long. */
    int64_t open, close;
    clock.now_ms = 1774735200LL * 1000; /* 23:00 CET */
    assert_int_equal(when_window_next(3600, 4 * 3600, &clock, &open, &close), 0);
    assert_true(open == 1774742400LL * 1000);
    assert_true(close - open == 2 * 3600 * 1000);
    unsetenv("TZ");
    tzset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_window_parse),
        cmocka_unit_test(test_window_next),
        cmocka_unit_test(test_dst),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
