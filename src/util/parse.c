#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int parse_size(const char *s, uint64_t *out, const char **err)
{
    char *end;
    if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.')) {
        *err = "expected a size such as 16G, 512M or 1024";
        return -1;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || v < 0) {
        *err = "expected a size such as 16G, 512M or 1024";
        return -1;
    }
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'B': mult = 1; end++; break;
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default:
        *err = "unknown size unit (use K, M, G or T)";
        return -1;
    }
    if (mult > 1) {
        if (*end == 'i' && toupper((unsigned char)end[1]) == 'B')
            end += 2;
        else if (toupper((unsigned char)*end) == 'B')
            end++;
    }
    if (*end != '\0') {
        *err = "unexpected characters after the size";
        return -1;
    }
    double bytes = v * mult;
    if (bytes >= 18446744073709551615.0) {
        *err = "size too large";
        return -1;
    }
    if (mult == 1 && v != floor(v)) {
        *err = "a size in bytes must be a whole number";
        return -1;
    }
    *out = (uint64_t)bytes;
    return 0;
}

int parse_duration(const char *s, int64_t *out_ms, const char **err)
{
    const char *p = s;
    double total = 0;
    int parts = 0;
    if (s == NULL || *s == '\0') {
        *err = "expected a duration such as 90s, 15m or 2h";
        return -1;
    }
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p) && *p != '.') {
            *err = "expected a duration such as 90s, 15m or 2h";
            return -1;
        }
        errno = 0;
        double v = strtod(p, &end);
        if (errno != 0 || end == p || !isfinite(v)) {
            *err = "expected a duration such as 90s, 15m or 2h";
            return -1;
        }
        double mult;
        if (strncmp(end, "ms", 2) == 0) {
            mult = 1;
            end += 2;
        } else {
            switch (*end) {
            case 's': mult = 1000; end++; break;
            case 'm': mult = 60000; end++; break;
            case 'h': mult = 3600000; end++; break;
            case 'd': mult = 86400000; end++; break;
            case '\0':
                if (parts > 0) {
                    *err = "missing unit after a number in the duration";
                    return -1;
                }
                mult = 1000;
                break;
            default:
                *err = "unknown duration unit (use ms, s, m, h or d)";
                return -1;
            }
        }
        total += v * mult;
        parts++;
        p = end;
    }
    if (total < 1) {
        *err = "a duration must be greater than zero";
        return -1;
    }
    if (total > 1e15) {
        *err = "duration too large";
        return -1;
    }
    *out_ms = (int64_t)llround(total);
    return 0;
}

int parse_int(const char *s, long long min, long long max, long long *out, const char **err)
{
    char *end;
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s)) {
        *err = "expected a whole number";
        return -1;
    }
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        *err = "expected a whole number";
        return -1;
    }
    if (v < min || v > max) {
        *err = "number out of range";
        return -1;
    }
    *out = v;
    return 0;
}

/* Walks the comma-separated items of s ("3,7,12"): item(p, &end, ctx, &why) parses the one at
 * p and sets end just past it. 0, or -1 with *err: the item's own reason if it gave one (why),
 * else `expected` (an empty s, a bad item, anything but a comma after one). */
static int parse_list(const char *s, const char *expected, const char **err,
                      int (*item)(const char *p, char **end, void *ctx, const char **why),
                      void *ctx)
{
    const char *why = NULL;
    if (s != NULL && *s != '\0') {
        for (const char *p = s;;) {
            char *end;
            if (item(p, &end, ctx, &why) < 0)
                break;
            if (*end == '\0')
                return 0;
            if (*end != ',')
                break;
            p = end + 1;
        }
    }
    *err = why != NULL ? why : expected;
    return -1;
}

struct parse_ids {
    int64_t *ids;
    size_t count, cap;
};

static int parse_id_item(const char *p, char **end, void *ctx, const char **why)
{
    struct parse_ids *l = ctx;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    long long v = strtoll(p, end, 10);
    if (errno != 0 || v <= 0)
        return -1;
    xgrow((void **)&l->ids, &l->cap, l->count + 1, sizeof *l->ids);
    l->ids[l->count++] = v;
    return 0;
}

int parse_id_list(const char *s, int64_t **out, size_t *n, const char **err)
{
    struct parse_ids l = {NULL, 0, 0};
    if (parse_list(s, "expected task ids such as 3 or 3,7", err, parse_id_item, &l) < 0) {
        free(l.ids);
        return -1;
    }
    *out = l.ids;
    *n = l.count;
    return 0;
}

struct parse_backoff {
    int64_t *ms;
    int count, max;
};

static int parse_backoff_item(const char *p, char **end, void *ctx, const char **why)
{
    struct parse_backoff *l = ctx;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return -1;
    errno = 0;
    double v = strtod(p, end);
    if (errno != 0 || *end == p || !isfinite(v) || v < 0 || v > 1e9)
        return -1;
    if (l->count == l->max) {
        *why = "too many backoff values";
        return -1;
    }
    l->ms[l->count++] = (int64_t)llround(v * 1000);
    return 0;
}

int parse_backoff(const char *s, int64_t *out_ms, int max, int *n, const char **err)
{
    struct parse_backoff l = {out_ms, 0, max};
    if (parse_list(s, "expected seconds such as 5,30,60", err, parse_backoff_item, &l) < 0)
        return -1;
    *n = l.count;
    return 0;
}

struct parse_hours {
    double *seconds;
    int count, max;
};

static int parse_hours_item(const char *p, char **end, void *ctx, const char **why)
{
    struct parse_hours *l = ctx;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return -1;
    errno = 0;
    double h = strtod(p, end);
    if (errno != 0 || *end == p || !isfinite(h) || !(h > 0) || h > 1e9)
        return -1;
    if (l->count > 0 && !(h * 3600 > l->seconds[l->count - 1])) {
        *why = "the hours must be ascending";
        return -1;
    }
    if (l->count == l->max) {
        *why = "too many values";
        return -1;
    }
    l->seconds[l->count++] = h * 3600;
    return 0;
}

int parse_hours(const char *s, double *out_s, int max, int *n, const char **err)
{
    struct parse_hours l = {out_s, 0, max};
    if (parse_list(s, "expected hours above 0, ascending, such as 1,10", err, parse_hours_item,
                   &l) < 0)
        return -1;
    *n = l.count;
    return 0;
}

/* The value of hex digit c, or -1. */
static int parse_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *parse_percent(const char *p, size_t n, bool plus)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)p[i];
        if (c == '%') {
            int hi = i + 1 < n ? parse_hex(p[i + 1]) : -1;
            int lo = i + 2 < n ? parse_hex(p[i + 2]) : -1;
            c = hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (c < 0x20 || c == 0x7f) {
            free(out);
            return NULL;
        }
        *o++ = (char)c;
    }
    *o = '\0';
    return out;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

struct parse_array {
    int64_t *idx;
    size_t count, cap, max_count;
    int limit;
};

/* "LO", "LO-HI", either of them last with "%LIMIT" (which then ends the list). */
static int parse_array_item(const char *p, char **end, void *ctx, const char **why)
{
    struct parse_array *a = ctx;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    long long lo = strtoll(p, end, 10), hi = lo;
    if (errno != 0 || lo > 100000000)
        return -1;
    if (**end == '-') {
        p = *end + 1;
        if (!isdigit((unsigned char)*p))
            return -1;
        hi = strtoll(p, end, 10);
        if (errno != 0 || hi < lo || hi > 100000000)
            return -1;
    }
    if ((size_t)(hi - lo + 1) > a->max_count || a->count + (size_t)(hi - lo + 1) > a->max_count) {
        *why = "array too large";
        return -1;
    }
    for (long long i = lo; i <= hi; i++) {
        xgrow((void **)&a->idx, &a->cap, a->count + 1, sizeof *a->idx);
        a->idx[a->count++] = i;
    }
    if (**end == '%') {
        long long lim;
        const char *ignored;
        if (parse_int(*end + 1, 1, 1000000, &lim, &ignored) < 0)
            return -1;
        a->limit = (int)lim;
        *end += strlen(*end); /* the limit ends the list */
    }
    return 0;
}

int parse_array_spec(const char *s, size_t max_count, struct array_spec *out, const char **err)
{
    struct parse_array a = {NULL, 0, 0, max_count, 0};
    memset(out, 0, sizeof *out);
    if (parse_list(s, "expected an array such as 0-99, 1,5,9 or 0-99%4", err, parse_array_item,
                   &a) < 0) {
        free(a.idx);
        return -1;
    }
    qsort(a.idx, a.count, sizeof *a.idx, cmp_i64);
    size_t w = 0;
    for (size_t i = 0; i < a.count; i++)
        if (w == 0 || a.idx[w - 1] != a.idx[i])
            a.idx[w++] = a.idx[i];
    out->index = a.idx;
    out->count = w;
    out->limit = a.limit;
    return 0;
}

void array_spec_free(struct array_spec *spec)
{
    free(spec->index);
    spec->index = NULL;
    spec->count = 0;
}

size_t utf8_check(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i];) {
        unsigned c = p[i], need, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            need = 1, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 2, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 3, min = 0x10000;
        else
            return i + 1;
        unsigned cp = c & (0x3F >> need);
        for (unsigned k = 1; k <= need; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return i + 1; /* the NUL too: a truncated character */
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i + 1;
        i += need + 1;
    }
    return 0;
}

const char *format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "BKMGT";
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%lluB", (unsigned long long)bytes);
    else if (v == floor(v))
        snprintf(buf, len, "%.0f%c", v, units[u]);
    else
        snprintf(buf, len, "%.1f%c", v, units[u]);
    return buf;
}

int parse_signal(const char *s, int *out, const char **err)
{
    long long n;
    int sig = 0;
    if (s[0] >= '0' && s[0] <= '9') {
        if (parse_int(s, 1, 64, &n, err) < 0) {
            *err = "expected a signal name (TERM, INT, USR1, USR2, HUP, …) or a number from 1 to 64";
            return -1;
        }
        sig = (int)n;
    } else {
        const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
        for (int i = 1; i < 65 && sig == 0; i++) {
            const char *abbrev = sigabbrev_np(i);
            if (abbrev != NULL && strcasecmp(abbrev, name) == 0)
                sig = i;
        }
        if (sig == 0) {
            *err = "expected a signal name (TERM, INT, USR1, USR2, HUP, …) or a number from 1 to 64";
            return -1;
        }
    }
    if (sig == SIGKILL || sig == SIGSTOP) {
        *err = "SIGKILL and SIGSTOP cannot be caught: a task could not save its checkpoint";
        return -1;
    }
    *out = sig;
    return 0;
}

const char *format_duration(int64_t ms, char *buf, size_t len)
{
    if (ms < 0)
        ms = 0;
    int64_t s = ms / 1000;
    if (ms < 10000)
        snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
    else if (s < 60)
        snprintf(buf, len, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400)
        snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
    else
        snprintf(buf, len, "%lldd%02lldh", (long long)(s / 86400), (long long)(s / 3600 % 24));
    return buf;
}
