/* Parsers for what users type: sizes, durations, id lists, array specs.
 * Each returns 0 on success, or -1 with a one-line reason in *err (a static string). */
#ifndef DROVER_PARSE_H
#define DROVER_PARSE_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* "16G", "512M", "1.5T", "80GiB", "1024" (bytes). Binary units (K = 1024). */
int parse_size(const char *s, uint64_t *out, const char **err);
/* "90s", "15m", "2h", "1d", "1h30m", "500ms", "45" (seconds) -> milliseconds, > 0. */
int parse_duration(const char *s, int64_t *out_ms, const char **err);
/* A non-negative decimal integer within [min, max]. */
int parse_int(const char *s, long long min, long long max, long long *out, const char **err);
/* "3,7,12" -> ids (positive). *out is allocated; the caller frees it. */
int parse_id_list(const char *s, int64_t **out, size_t *n, const char **err);
/* "5,30,60" seconds -> milliseconds, at most max values. */
int parse_backoff(const char *s, int64_t *out_ms, int max, int *n, const char **err);

/* "1,10", "0.5,5,50" hours, each above 0 and ascending, into seconds, at most max values. */
int parse_hours(const char *s, double *out_s, int max, int *n, const char **err);
/* p[0..n) percent-decoded (plus: '+' is a space) into a new string; NULL when an escape is
 * malformed or decodes to a NUL or a control character. A URL's parts, a query's values. */
char *parse_percent(const char *p, size_t n, bool plus);

/* A signal a task may be sent to stop: "TERM", "SIGUSR1", "usr2", "10" (a number from 1 to 64).
 * SIGKILL and SIGSTOP are refused: neither lets a task act on it. */
int parse_signal(const char *s, int *out, const char **err);

/* "0-99", "1,5,9", "0-99%4", "0-9,20-29%2". Indices are sorted, unique, at most max_count. */
struct array_spec {
    int64_t *index;
    size_t count;
    int limit; /* at most this many at once; 0 = no limit */
};
int parse_array_spec(const char *s, size_t max_count, struct array_spec *out, const char **err);
void array_spec_free(struct array_spec *spec);

/* Whether s is valid UTF-8 (what JSON, and so every request, can carry): 0 if it is, else the
 * 1-based offset of the first byte that does not belong to a well-formed character. Overlong
 * forms, surrogates and code points above U+10FFFF are refused, as jansson refuses them. Every
 * string drover puts into a request is checked with this first, so none is dropped silently. */
size_t utf8_check(const char *s);

/* Formats bytes as "16G", "1.5G", "512M" into buf. */
const char *format_size(uint64_t bytes, char *buf, size_t len);
/* Formats a duration in ms as "1h02m", "3m05s", "12s", "0.4s". */
const char *format_duration(int64_t ms, char *buf, size_t len);

#endif
