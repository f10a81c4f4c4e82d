/* The events bound for RabbitMQ (daemon/amqp.c): an outbox written in the transaction of the
 * change each announces, so that an event the store keeps is one the broker gets, at least once,
 * however long it is away; bounded, the oldest dropped (and counted) beyond the bound. */
#include "store/rows.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>

int store_amqp_event(struct store *st, const char *routing_key, const char *body,
                     core_time now, int64_t max, int64_t *dropped)
{
    *dropped = 0;
    if (store_write(st, STORE_QUERY(st, "INSERT INTO amqp_outbox (routing_key, body, created)"
                                        " VALUES (?1, ?2, ?3)",
                                    STORE_TEXT(routing_key), STORE_TEXT(body),
                                    STORE_INT(now))) < 0)
        return -1;
    int64_t id = sqlite3_last_insert_rowid(store_db(st));
    if (max <= 0 || id <= max)
        return 0;
    /* The rows are ids in order: keeping the last `max` ids keeps at most `max` rows (fewer
     * when confirmed ones left gaps), with one index seek. */
    if (store_write(st, STORE_QUERY(st, "DELETE FROM amqp_outbox WHERE id <= ?1",
                                    STORE_INT(id - max))) < 0)
        return -1;
    *dropped = sqlite3_changes(store_db(st));
    if (*dropped == 0)
        return 0;
    char *old = store_setting(st, "amqp_dropped"), text[32];
    snprintf(text, sizeof text, "%lld", (old ? atoll(old) : 0) + (long long)*dropped);
    free(old);
    return store_set_setting(st, "amqp_dropped", text);
}

int store_amqp_pending(struct store *st, int64_t after, int limit, store_amqp_fn fn, void *arg)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT id, routing_key, body FROM amqp_outbox"
                                      " WHERE id > ?1 ORDER BY id LIMIT ?2",
                                  STORE_INT(after), STORE_INT(limit));
    if (s == NULL)
        return -1;
    int rc, n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        fn(arg, sqlite3_column_int64(s, 0), (const char *)sqlite3_column_text(s, 1),
           (const char *)sqlite3_column_text(s, 2));
        n++;
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? n : -1;
}

int store_amqp_confirmed(struct store *st, const int64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (store_write(st, STORE_QUERY(st, "DELETE FROM amqp_outbox WHERE id = ?1",
                                        STORE_INT(ids[i]))) < 0)
            return -1;
    return 0;
}

int store_amqp_counts(struct store *st, int64_t *waiting, int64_t *dropped)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT count(*) FROM amqp_outbox WHERE id > ?1",
                                  STORE_INT(0));
    if (s == NULL || sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        return -1;
    }
    *waiting = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    char *text = store_setting(st, "amqp_dropped");
    *dropped = text ? atoll(text) : 0;
    free(text);
    return 0;
}
