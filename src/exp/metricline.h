/* exp/metricline.h — what a trial reports, line by line, turned into (step, name, value): pure,
 * no I/O. The daemon (daemon/exp-metrics.c) reads the lines and stores what comes out.
 *
 * A JSON line (from $DROVER_METRICS_FILE) is an object whose every numeric field is a metric at
 * the step given by the field named rung_unit (NULL: EXP_DEFAULT_RUNG_UNIT, "epoch"), else by
 * "step", else by the line's position among the lines that give none (*counter counts them).
 * Lines that are not JSON objects say nothing.
 *
 * A log line (the task's stdout) is matched against the template's patterns: "loss: {value}"
 * finds the literal text before {value} anywhere in the line and reads the number after it, the
 * metric named by the pattern's leading identifier ("loss"); "{name}{SEP}{value}" ("{name}=
 * {value}") finds an identifier (letters, digits, '_', '.'; not in the middle of a word), the
 * separator, and a number. Every match counts one step (*step), so the n-th value a log reports
 * is at step n. Only the first match of each pattern in a line counts.
 *
 * Values that are not finite (nan, inf) are not metrics.
 */
#ifndef DROVER_EXP_METRICLINE_H
#define DROVER_EXP_METRICLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRIC_NAME_MAX 64 /* bytes of a metric's name from a log line, NUL included */

/* Called for each value found. Returns 0 to go on, anything else to stop reading: the parsers
 * return it at once (a trial stopped early says nothing more; a store write failed). */
typedef int (*metric_fn)(void *arg, int64_t step, const char *name, double value);

/* One JSON line. Returns 0, or what fn returned to stop. */
int metricline_json(const char *line, const char *rung_unit, int64_t *counter, metric_fn fn,
                    void *arg);

/* One log line against every pattern. Returns 0, or what fn returned to stop. */
int metricline_log(const char *line, char *const *patterns, size_t npatterns, int64_t *step,
                   metric_fn fn, void *arg);

/* One pattern against one line: true with the name (at most name_len - 1 bytes) and the value. */
bool metricline_match(const char *pattern, const char *line, char *name, size_t name_len,
                      double *value);

/* Each line of text (split on '\n'; text is changed) through metricline_json, or through
 * metricline_log when patterns is not NULL. Returns 0, or what fn returned to stop. */
int metricline_text(char *text, const char *rung_unit, char *const *patterns, size_t npatterns,
                    int64_t *counter, metric_fn fn, void *arg);

#endif
