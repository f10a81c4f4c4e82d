/* One-off statements of the store: parameters bound from a list, writes stepped to their end,
 * rows made JSON (store/rows.h). */
#include "store/rows.h"

sqlite3_stmt *store_query_args(struct store *st, const char *sql, const struct store_arg *args,
                               int n)
{
    sqlite3_stmt *s = store_prepare(st, sql);
    for (int i = 0; s != NULL && i < n; i++) {
        if (args[i].type == STORE_ARG_INT)
            sqlite3_bind_int64(s, i + 1, args[i].i);
        else if (args[i].type == STORE_ARG_REAL)
            sqlite3_bind_double(s, i + 1, args[i].d);
        else if (args[i].text != NULL)
            sqlite3_bind_text(s, i + 1, args[i].text, -1, SQLITE_TRANSIENT);
    }
    return s;
}

int store_write(struct store *st, sqlite3_stmt *s)
{
    int rc = s != NULL ? sqlite3_step(s) : sqlite3_errcode(store_db(st));
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        store_failed(st, rc);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

json_t *store_rows(sqlite3_stmt *s, json_t *(*row)(sqlite3_stmt *s, void *arg), void *arg)
{
    json_t *list = json_array();
    while (s != NULL && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(list, row(s, arg));
    sqlite3_finalize(s);
    return list;
}

json_t *store_text_or_null(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL
               ? json_null()
               : json_string((const char *)sqlite3_column_text(s, col));
}

json_t *store_int_or_null(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? json_null()
                                                      : json_integer(sqlite3_column_int64(s, col));
}
