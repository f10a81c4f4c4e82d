/* The webhook outbox (table notify_outbox) and the brief view of a task that events and webhooks
 * name it by. A row is inserted in the transaction of the change it reports, so a crash never
 * loses one; daemon/notify.c delivers the rows and deletes them (docs/API.md, "Events and
 * webhooks"). */
#include "store/internal.h"
#include "util/xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

json_t *store_task_brief(struct store *st, int64_t id)
{
    sqlite3_stmt *s = store_prepare_cached(st, "SELECT name, user, notify FROM tasks WHERE id = ?1");
    json_t *o = NULL;
    if (s == NULL)
        return NULL;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        const char *user = (const char *)sqlite3_column_text(s, 1);
        const char *notify = (const char *)sqlite3_column_text(s, 2);
        o = json_pack("{s:o,s:s,s:o}", "name", name ? json_string(name) : json_null(), "user",
                      user ? user : store_own_user(), "notify",
                      notify ? json_string(notify) : json_null());
    }
    store_cached_done(s);
    return o;
}

int store_outbox_insert(struct store *st, const char *url, const char *body, int64_t now,
                        int64_t *id)
{
    sqlite3_stmt *s = store_prepare(st, "INSERT INTO notify_outbox (url, body, created, tries,"
                                        " next_at) VALUES (?1, ?2, ?3, 0, ?3)");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_text(s, 1, url, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, body, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 3, now);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return store_failed(st, rc);
    *id = sqlite3_last_insert_rowid(store_db(st));
    return 0;
}

static bool outbox_skipped(int64_t id, const int64_t *skip, size_t nskip)
{
    for (size_t i = 0; i < nskip; i++)
        if (skip[i] == id)
            return true;
    return false;
}

int store_outbox_due(struct store *st, int64_t due, const int64_t *skip, size_t nskip,
                     size_t max, struct store_outbox_row **rows, size_t *n)
{
    sqlite3_stmt *s = store_prepare(st, "SELECT id, url, body, tries, next_at FROM notify_outbox"
                                        " WHERE next_at <= ?1 ORDER BY next_at, id LIMIT ?2");
    size_t cap = 0;
    *rows = NULL;
    *n = 0;
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, due);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)(max + nskip));
    while (*n < max && sqlite3_step(s) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        if (outbox_skipped(id, skip, nskip))
            continue;
        xgrow((void **)rows, &cap, *n + 1, sizeof **rows);
        struct store_outbox_row *r = &(*rows)[(*n)++];
        r->id = id;
        r->url = xstrdup((const char *)sqlite3_column_text(s, 1));
        r->body = xstrdup((const char *)sqlite3_column_text(s, 2));
        r->tries = sqlite3_column_int(s, 3);
        r->next_at = sqlite3_column_int64(s, 4);
    }
    sqlite3_finalize(s);
    return 0;
}

void store_outbox_rows_free(struct store_outbox_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].url);
        free(rows[i].body);
    }
    free(rows);
}

int64_t store_outbox_next(struct store *st, const int64_t *skip, size_t nskip)
{
    sqlite3_stmt *s = store_prepare(st, "SELECT id, next_at FROM notify_outbox"
                                        " ORDER BY next_at, id LIMIT ?1");
    int64_t next = INT64_MAX;
    if (s == NULL)
        return next;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)nskip + 1);
    while (sqlite3_step(s) == SQLITE_ROW)
        if (!outbox_skipped(sqlite3_column_int64(s, 0), skip, nskip)) {
            next = sqlite3_column_int64(s, 1);
            break;
        }
    sqlite3_finalize(s);
    return next;
}

int store_outbox_delete(struct store *st, int64_t id)
{
    sqlite3_stmt *s = store_prepare(st, "DELETE FROM notify_outbox WHERE id = ?1");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : store_failed(st, rc);
}

int store_outbox_retry(struct store *st, int64_t id, int tries, int64_t next_at,
                       const char *error)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE notify_outbox SET tries = ?2, next_at = ?3,"
                                        " last_error = ?4 WHERE id = ?1");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, tries);
    sqlite3_bind_int64(s, 3, next_at);
    sqlite3_bind_text(s, 4, error, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : store_failed(st, rc);
}
