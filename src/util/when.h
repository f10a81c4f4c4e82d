/* util/when.h — points in time as users type them (drover submit --begin, the HTTP API's
 * `begin`), and the daily off-peak window (the daemon's off-peak setting).
 *
 * Both are pure: the current time and the conversion between epoch seconds and local time come
 * from the caller (struct when_clock), so that tests pin them; the daemon and the CLI pass
 * when_clock_system(). Local times go through the conversion with tm_isdst = -1 (mktime's
 * "find out"), so a day with a DST change is as long as it is: "tomorrow 02:00" is 02:00 on the
 * wall clock, and a wall time that does not exist that day (skipped by a DST change) is
 * refused rather than moved. */
#ifndef DROVER_WHEN_H
#define DROVER_WHEN_H

#include <stdint.h>
#include <time.h>

struct when_clock {
    int64_t now_ms; /* the Unix epoch, ms */
    /* localtime_r's and mktime's contracts: epoch seconds to local broken-down time (NULL on
     * failure), and local broken-down time (normalized in place) to epoch seconds (-1 on
     * failure). */
    struct tm *(*to_local)(const time_t *t, struct tm *out);
    time_t (*from_local)(struct tm *tm);
};

/* The real clock and the process's time zone (TZ). */
struct when_clock when_clock_system(void);

/* TIME as epoch ms into *out_ms: 0, or -1 with one line in *err (static) that says what was
 * expected. The forms:
 *   22:00, 22:00:30            the next such local time: today, or tomorrow if it has passed
 *   today 22:00, tomorrow 02:00
 *   2026-12-24T18:00, 2026-12-24 18:00:00, 2026-12-24
 *                              local time; with Z or an offset (+01:00, -0530) as given
 *   +2h, +90s, +1d, +1h30m     from now (parse_duration's syntax)
 *   @1767225600                epoch seconds
 * Leading and trailing blanks are not allowed; a time in the past is accepted (it begins at
 * once). */
int when_parse(const char *s, const struct when_clock *clock, int64_t *out_ms, const char **err);

/* A daily window "20:00-08:00" (HH:MM or HH:MM:SS each, local time; end before start wraps
 * past midnight; start == end is refused). Seconds after local midnight into *start, *end. */
int when_window_parse(const char *s, int *start, int *end, const char **err);

/* The window [*open_ms, *close_ms) that contains now, or else the next one, for a daily window
 * of start..end seconds after local midnight (when_window_parse). A wall time a DST change
 * skipped opens or closes at the first instant after it. Returns 0, or -1 if the conversion
 * fails. */
int when_window_next(int start, int end, const struct when_clock *clock, int64_t *open_ms,
                     int64_t *close_ms);

#endif
