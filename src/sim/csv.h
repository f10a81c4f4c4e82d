/* sim/csv.h — reading the comma-separated files of `drover simulate` (traces and node lists;
 * internal to sim/). A file is read whole into one buffer and split in place (no quoting exists
 * in these files), so 100,000 rows cost one read and one pass. The field parsers write a reason
 * of at most CSV_WHY bytes, to which the caller puts "FILE:LINE: " in front. */
#ifndef DROVER_SIM_CSV_H
#define DROVER_SIM_CSV_H

#include <stddef.h>
#include <stdint.h>

#define CSV_WHY 512 /* a row's reason, before "FILE:LINE: " is put in front */

/* Reads path whole, NUL-terminated (one spare byte), into *out (malloc'd). Returns 0, or -1
 * with *err = "PATH: reason" (malloc'd). */
int csv_load(const char *path, char **out, size_t *out_len, char **err);

/* Walks the lines of a loaded buffer, terminating each in place. */
struct csv_lines {
    char *p, *end;
    unsigned line; /* of the line last returned, 1-based */
};
/* Starts at buf, past a UTF-8 byte-order mark. */
void csv_lines_init(struct csv_lines *lines, char *buf, size_t len);
/* The next line without its "\n" or "\r\n", or NULL at the end. *len excludes the terminator;
 * a line holding a NUL byte has strlen() < *len. */
char *csv_lines_next(struct csv_lines *lines, size_t *len);

/* Splits line at commas in place. Returns how many fields the line has, which may exceed max
 * (only the first max are stored). */
int csv_split(char *line, char **field, int max);

/* Each returns 0, or -1 with the reason in why (CSV_WHY bytes) naming the column and value. */
/* The checks every data line gets before it is split: no NUL byte, no quotes. */
int csv_line_sane(const char *line, size_t len, char *why);
/* n fields where min..max are expected (columns: the list shown in the reason). */
int csv_field_count(const char *columns, int min, int max, int n, char *why);
/* Seconds, decimals allowed, >= 0 -> ms. */
int csv_seconds(const char *column, const char *s, int64_t *out_ms, char *why);
/* A whole number in [min, max]: decimal digits, a leading '-' only where min < 0. */
int csv_whole(const char *column, const char *s, long long min, long long max, long long *out,
              char *why);

/* A whole field as a finite number >= 0 (digits, '.' and an exponent only: no sign, space, hex,
 * "nan" or "inf", which strtod would take). Returns 0 or -1, no reason. */
int csv_number(const char *s, double *out);

#endif
