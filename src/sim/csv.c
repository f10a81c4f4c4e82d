/* Reading comma-separated files whole and checking their fields (sim/csv.h). */
#include "sim/csv.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CSV_MAX_SECONDS 1e13 /* keeps llround(x * 1000) far from int64 overflow */

/* Reads path whole, NUL-terminated (one spare byte), into *out. *err is malloc'd on failure. */
int csv_load(const char *path, char **out, size_t *out_len, char **err)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, cap;
    int fd = open(path, O_RDONLY | O_CLOEXEC), saved;
    if (fd < 0 || fstat(fd, &st) < 0)
        goto fail;
    /* size + 2: the file, the terminating NUL, and room for the read that returns 0. Pipes and
     * other unsized files start small and grow. */
    cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 2 : 65536;
    buf = xmalloc(cap);
    for (;;) {
        if (cap - len < 2) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t got = read(fd, buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            goto fail;
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return 0;
fail:
    saved = errno;
    if (fd >= 0)
        close(fd);
    free(buf);
    *err = xasprintf("%s: %s", path, strerror(saved));
    return -1;
}

void csv_lines_init(struct csv_lines *lines, char *buf, size_t len)
{
    lines->p = buf;
    lines->end = buf + len;
    lines->line = 0;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 byte-order mark */
        lines->p += 3;
}

/* The next line without its "\n" or "\r\n", or NULL at the end. *len excludes the terminator;
 * a line holding a NUL byte has strlen() < *len. */
char *csv_lines_next(struct csv_lines *lines, size_t *len)
{
    if (lines->p >= lines->end)
        return NULL;
    char *line = lines->p, *nl = memchr(line, '\n', (size_t)(lines->end - line));
    char *stop = nl != NULL ? nl : lines->end;
    lines->p = nl != NULL ? nl + 1 : lines->end;
    lines->line++;
    if (stop > line && stop[-1] == '\r')
        stop--;
    *stop = '\0';
    *len = (size_t)(stop - line);
    return line;
}

/* Splits line at commas in place. Returns how many fields the line has, which may exceed max
 * (only the first max are stored). */
int csv_split(char *line, char **field, int max)
{
    int n = 0;
    for (char *p = line;;) {
        char *comma = strchr(p, ',');
        if (n < max)
            field[n] = p;
        n++;
        if (comma == NULL)
            return n;
        *comma = '\0';
        p = comma + 1;
    }
}

/* The checks every data line gets before it is split. */
int csv_line_sane(const char *line, size_t len, char *why)
{
    if (strlen(line) != len) {
        snprintf(why, CSV_WHY, "the line holds a NUL byte");
        return -1;
    }
    if (strchr(line, '"') != NULL) {
        snprintf(why, CSV_WHY, "quoted fields are not supported");
        return -1;
    }
    return 0;
}

int csv_field_count(const char *columns, int min, int max, int n, char *why)
{
    if (n >= min && n <= max)
        return 0;
    if (min == max)
        snprintf(why, CSV_WHY, "expected %d fields (%s), found %d", min, columns, n);
    else
        snprintf(why, CSV_WHY, "expected %d to %d fields (%s), found %d", min, max, columns, n);
    return -1;
}

/* A whole field as a finite number >= 0. Only digits, '.' and an exponent are accepted, which
 * keeps out signs, spaces, hex, "nan" and "inf" that strtod would take. */
int csv_number(const char *s, double *out)
{
    char *end;
    if (!(isdigit((unsigned char)*s) || *s == '.') || s[strspn(s, "0123456789.eE+-")] != '\0')
        return -1;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Seconds, decimals allowed, >= 0 -> ms. */
int csv_seconds(const char *column, const char *s, int64_t *out_ms, char *why)
{
    double v;
    if (csv_number(s, &v) < 0)
        goto bad;
    if (v > CSV_MAX_SECONDS) {
        snprintf(why, CSV_WHY, "%s \"%.40s\" is too large", column, s);
        return -1;
    }
    *out_ms = (int64_t)llround(v * 1000);
    return 0;
bad:
    snprintf(why, CSV_WHY, "%s \"%.40s\" is not a number of seconds >= 0", column, s);
    return -1;
}

/* A whole number in [min, max]: decimal digits, a leading '-' only where min < 0. */
int csv_whole(const char *column, const char *s, long long min, long long max,
                       long long *out, char *why)
{
    const char *digits = (*s == '-' && min < 0) ? s + 1 : s;
    char *end;
    if (!isdigit((unsigned char)*digits))
        goto bad;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        goto bad;
    *out = v;
    return 0;
bad:
    snprintf(why, CSV_WHY, "%s \"%.40s\" is not a whole number from %lld to %lld", column, s,
             min, max);
    return -1;
}
