/* store/rows.h — what the store's one-off statements share (not for the rest of drover): their
 * parameters bound from a list, the write stepped to its end, and rows made JSON. */
#ifndef DROVER_STORE_ROWS_H
#define DROVER_STORE_ROWS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "store/internal.h"

/* A value for a statement's parameter: an integer, a real, or text (NULL text binds NULL). */
struct store_arg {
    enum { STORE_ARG_INT, STORE_ARG_REAL, STORE_ARG_TEXT } type;
    int64_t i;
    double d;
    const char *text;
};
#define STORE_INT(v) {.type = STORE_ARG_INT, .i = (v)}
#define STORE_REAL(v) {.type = STORE_ARG_REAL, .d = (v)}
#define STORE_TEXT(v) {.type = STORE_ARG_TEXT, .text = (v)}

/* sql prepared with its arguments (one or more) bound to ?1, ?2, … in order, or NULL (SQLite's
 * error is the handle's): STORE_QUERY(st, "… WHERE id = ?1 AND name = ?2", STORE_INT(id),
 * STORE_TEXT(name)). Text is copied. */
#define STORE_QUERY(st, sql, ...)                                                                 \
    store_query_args(st, sql, (const struct store_arg[]){__VA_ARGS__},                            \
                     (int)(sizeof(const struct store_arg[]){__VA_ARGS__} /                       \
                           sizeof(struct store_arg)))
sqlite3_stmt *store_query_args(struct store *st, const char *sql, const struct store_arg *args,
                               int n);
/* Steps a write to its end and finalizes it: 0, or -1 with SQLite's error recorded for
 * store_error() (also when the statement could not be prepared, s == NULL). */
int store_write(struct store *st, sqlite3_stmt *s);
/* Every row of s, each made a JSON value by row(s, arg), in a new array (empty when s is NULL);
 * finalizes s. */
json_t *store_rows(sqlite3_stmt *s, json_t *(*row)(sqlite3_stmt *s, void *arg), void *arg);
/* Column col of the current row as a JSON string or integer, or null where it is NULL. */
json_t *store_text_or_null(sqlite3_stmt *s, int col);
json_t *store_int_or_null(sqlite3_stmt *s, int col);

#endif
