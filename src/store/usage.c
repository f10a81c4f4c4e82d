/* What users' attempts used, for fair share across a restart (core/users.c decays it). */
#include "store/rows.h"
#include "store/store.h"

#include <unistd.h>

int store_each_usage(struct store *st, core_time since, store_usage_fn fn, void *arg)
{
    /* Each attempt that ended since then: its owner (the daemon's own user when not recorded),
     * GPUs held (a shared GPU counts as one, as core counts it) × how long it ran. */
    sqlite3_stmt *s = STORE_QUERY(st,
                                  "SELECT COALESCE(t.uid, ?2), json_array_length(a.gpus),"
                                  " a.start_ms, a.end_ms FROM attempts a JOIN tasks t"
                                  " ON t.id = a.task_id WHERE a.end_ms >= ?1"
                                  " AND json_array_length(a.gpus) > 0 ORDER BY a.end_ms",
                                  STORE_INT(since), STORE_INT((int64_t)getuid()));
    if (s == NULL)
        return -1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t ran = sqlite3_column_int64(s, 3) - sqlite3_column_int64(s, 2);
        if (ran > 0)
            fn(arg, (uint32_t)sqlite3_column_int64(s, 0),
               (double)sqlite3_column_int64(s, 1) * (double)ran / 1000.0,
               sqlite3_column_int64(s, 3));
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_each_service(struct store *st, int limit, store_service_fn fn, void *arg)
{
    /* The last `limit` tasks that succeeded: GPUs asked for × the time of their attempts, as
     * core counts a task's attained service (las). */
    sqlite3_stmt *s = STORE_QUERY(st,
                                  "SELECT t.gpus * (SELECT ifnull(sum(a.end_ms - a.start_ms), 0)"
                                  " FROM attempts a"
                                  " WHERE a.task_id = t.id AND a.end_ms > a.start_ms)"
                                  " FROM tasks t WHERE t.state = 'succeeded'"
                                  " ORDER BY t.end_time DESC LIMIT ?1",
                                  STORE_INT(limit));
    if (s == NULL)
        return -1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        fn(arg, (double)sqlite3_column_int64(s, 0));
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -1;
}
