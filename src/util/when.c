/* Points in time as users type them, and the daily off-peak window (util/when.h). */
#include "util/when.h"
#include "util/parse.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#define WHEN_DAY_SECONDS 86400
#define WHEN_MAX_EPOCH 253402300799LL /* 9999-12-31T23:59:59Z */

static const char when_expected[] =
    "expected 22:00, tomorrow 02:00, 2026-12-24T18:00[Z|+01:00], +2h or @EPOCH";

static time_t when_system_mktime(struct tm *tm)
{
    return mktime(tm);
}

struct when_clock when_clock_system(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (struct when_clock){
        .now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
        .to_local = localtime_r,
        .from_local = when_system_mktime,
    };
}

/* Exactly n digits at *p (advanced past them) into *out. */
static bool when_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

/* "HH:MM" or "HH:MM:SS" (H or HH) at *p, advanced past it: seconds after midnight. */
static bool when_clock_time(const char **p, int *secs)
{
    int h, m, s = 0;
    if (!when_digits(p, 2, &h) && !when_digits(p, 1, &h))
        return false;
    if (**p != ':')
        return false;
    (*p)++;
    if (!when_digits(p, 2, &m))
        return false;
    if (**p == ':') {
        (*p)++;
        if (!when_digits(p, 2, &s))
            return false;
    }
    if (h > 23 || m > 59 || s > 59)
        return false;
    *secs = h * 3600 + m * 60 + s;
    return true;
}

static bool when_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int when_month_days(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && when_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant's
 * days_from_civil, written out from its description). */
static int64_t when_days(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The local time on the day `days` after the one holding `base` (epoch seconds), at secs after
 * midnight, into *out. exact: false if that wall time does not exist that day (a DST change
 * skipped it; *out is then where the conversion moved it). */
static int when_local_day(const struct when_clock *clock, time_t base, int days, int secs,
                          time_t *out, bool *exact)
{
    struct tm tm;
    if (clock->to_local(&base, &tm) == NULL)
        return -1;
    tm.tm_mday += days;
    tm.tm_hour = secs / 3600;
    tm.tm_min = secs / 60 % 60;
    tm.tm_sec = secs % 60;
    tm.tm_isdst = -1;
    struct tm want = tm;
    time_t t = clock->from_local(&tm);
    if (t == (time_t)-1)
        return -1;
    struct tm got;
    if (clock->to_local(&t, &got) == NULL)
        return -1;
    *exact = got.tm_hour == want.tm_hour && got.tm_min == want.tm_min && got.tm_sec == want.tm_sec;
    *out = t;
    return 0;
}

static int when_fail(const char **err, const char *why)
{
    *err = why;
    return -1;
}

/* "22:00", "today 22:00", "tomorrow 02:00" (rest is what follows the day word, or s). */
static int when_wall(const char *rest, int days, bool next, const struct when_clock *clock,
                     int64_t *out_ms, const char **err)
{
    int secs;
    time_t t, now = (time_t)(clock->now_ms / 1000);
    bool exact;
    if (!when_clock_time(&rest, &secs) || *rest != '\0')
        return when_fail(err, when_expected);
    if (when_local_day(clock, now, days, secs, &t, &exact) < 0)
        return when_fail(err, "cannot convert local time");
    if (next && (int64_t)t * 1000 < clock->now_ms &&
        when_local_day(clock, now, 1, secs, &t, &exact) < 0)
        return when_fail(err, "cannot convert local time");
    if (!exact)
        return when_fail(err, "that local time does not exist that day (a DST change)");
    *out_ms = (int64_t)t * 1000;
    return 0;
}

/* "Z", "+01:00", "-0530", or nothing (local: *local set). */
static bool when_offset(const char **p, int *offset, bool *local)
{
    int h, m;
    *offset = 0;
    *local = false;
    if (**p == '\0') {
        *local = true;
        return true;
    }
    if (**p == 'Z' || **p == 'z') {
        (*p)++;
        return true;
    }
    if (**p != '+' && **p != '-')
        return false;
    int sign = **p == '-' ? -1 : 1;
    (*p)++;
    if (!when_digits(p, 2, &h))
        return false;
    if (**p == ':')
        (*p)++;
    if (!when_digits(p, 2, &m) || h > 23 || m > 59)
        return false;
    *offset = sign * (h * 3600 + m * 60);
    return true;
}

/* "2026-12-24", with "T18:00[:00]" or " 18:00[:00]", and an offset. */
static int when_iso(const char *p, const struct when_clock *clock, int64_t *out_ms,
                    const char **err)
{
    int y, mo, d, secs = 0, offset;
    bool local;
    if (!when_digits(&p, 4, &y) || *p++ != '-' || !when_digits(&p, 2, &mo) || *p++ != '-' ||
        !when_digits(&p, 2, &d))
        return when_fail(err, when_expected);
    if (mo < 1 || mo > 12 || d < 1 || d > when_month_days(y, mo))
        return when_fail(err, "no such date");
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!when_clock_time(&p, &secs))
            return when_fail(err, when_expected);
    }
    if (!when_offset(&p, &offset, &local) || *p != '\0')
        return when_fail(err, when_expected);
    if (!local) {
        *out_ms = (when_days(y, mo, d) * WHEN_DAY_SECONDS + secs - offset) * 1000;
        return 0;
    }
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = secs / 3600,
                    .tm_min = secs / 60 % 60, .tm_sec = secs % 60, .tm_isdst = -1};
    time_t t = clock->from_local(&tm);
    if (t == (time_t)-1)
        return when_fail(err, "cannot convert local time");
    if (tm.tm_hour != secs / 3600 || tm.tm_min != secs / 60 % 60 || tm.tm_mday != d)
        return when_fail(err, "that local time does not exist that day (a DST change)");
    *out_ms = (int64_t)t * 1000;
    return 0;
}

int when_parse(const char *s, const struct when_clock *clock, int64_t *out_ms, const char **err)
{
    if (s == NULL || *s == '\0')
        return when_fail(err, when_expected);
    if (s[0] == '+') {
        int64_t ms;
        if (parse_duration(s + 1, &ms, err) < 0)
            return -1;
        *out_ms = clock->now_ms + ms;
        return 0;
    }
    if (s[0] == '@') {
        long long secs = 0;
        const char *p = s + 1;
        if (*p == '\0')
            return when_fail(err, when_expected);
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p))
                return when_fail(err, when_expected);
            secs = secs * 10 + (*p - '0');
            if (secs > WHEN_MAX_EPOCH)
                return when_fail(err, "epoch seconds too large");
        }
        *out_ms = (int64_t)secs * 1000;
        return 0;
    }
    if (strncmp(s, "tomorrow ", 9) == 0)
        return when_wall(s + 9, 1, false, clock, out_ms, err);
    if (strncmp(s, "today ", 6) == 0)
        return when_wall(s + 6, 0, false, clock, out_ms, err);
    if (strlen(s) >= 10 && s[4] == '-')
        return when_iso(s, clock, out_ms, err);
    return when_wall(s, 0, true, clock, out_ms, err);
}

int when_window_parse(const char *s, int *start, int *end, const char **err)
{
    const char *p = s;
    static const char expected[] = "expected HH:MM-HH:MM, e.g. 20:00-08:00";
    if (s == NULL || !when_clock_time(&p, start) || *p++ != '-' || !when_clock_time(&p, end) ||
        *p != '\0')
        return when_fail(err, expected);
    if (*start == *end)
        return when_fail(err, "the window opens and closes at the same time");
    return 0;
}

int when_window_next(int start, int end, const struct when_clock *clock, int64_t *open_ms,
                     int64_t *close_ms)
{
    time_t now = (time_t)(clock->now_ms / 1000);
    bool exact;
    /* The window that opened yesterday may still be open (it wraps midnight); else today's,
     * else tomorrow's (today's has closed). */
    for (int day = -1; day <= 1; day++) {
        time_t open, close;
        if (when_local_day(clock, now, day, start, &open, &exact) < 0 ||
            when_local_day(clock, now, day + (end <= start), end, &close, &exact) < 0)
            return -1;
        if ((int64_t)close * 1000 > clock->now_ms) {
            *open_ms = (int64_t)open * 1000;
            *close_ms = (int64_t)close * 1000;
            return 0;
        }
    }
    return -1; /* not reached: tomorrow's window closes after now */
}
