/* GPU telemetry as series for charts (the HTTP API's /api/v1/gpus/series), and which tasks held
 * each GPU when. Raw samples cover the last hour (store_telemetry_flush drops older ones), the
 * one-minute means the 30 days before: a window is read from the raw samples where there are
 * any and from the minutes before the oldest of them, and averaged into buckets of step ms. */
#include "store/rows.h"
#include "store/store.h"

#include <stdio.h>
#include <unistd.h>

static json_t *series_real_or_null(sqlite3_stmt *s, int col, double scale)
{
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return json_null();
    return json_real(sqlite3_column_double(s, col) * scale);
}

json_t *store_gpu_series(struct store *st, int64_t since, int64_t until, int64_t step)
{
    /* ?1 since, ?2 until, ?3 step; raw: from the oldest raw sample on (until when none). */
    sqlite3_stmt *s = STORE_QUERY(
        st,
        "WITH raw(start) AS (SELECT ifnull(min(ts), ?2) FROM gpu_samples),"
        " rows(ts, gpu, util, mem_used, temp, power_mw) AS ("
        "  SELECT ts, gpu, util, mem_used, temp, power_mw FROM gpu_samples"
        "  WHERE ts >= ?1 AND ts < ?2"
        "  UNION ALL SELECT ts, gpu, util, mem_used, temp, power_mw FROM gpu_minutes"
        "  WHERE ts >= ?1 AND ts < ?2 AND ts < (SELECT start FROM raw))"
        " SELECT gpu, (ts - ?1) / ?3 AS bucket, avg(util), avg(mem_used), avg(temp),"
        " avg(power_mw) FROM rows GROUP BY gpu, bucket ORDER BY gpu, bucket",
        STORE_INT(since), STORE_INT(until), STORE_INT(step));
    json_t *by_gpu = json_object();
    if (s == NULL)
        return by_gpu;
    while (sqlite3_step(s) == SQLITE_ROW) {
        char key[16];
        snprintf(key, sizeof key, "%d", sqlite3_column_int(s, 0));
        json_t *points = json_object_get(by_gpu, key);
        if (points == NULL)
            json_object_set_new(by_gpu, key, points = json_array());
        int64_t ts = since + sqlite3_column_int64(s, 1) * step;
        json_array_append_new(points, json_pack("[I,o,o,o,o]", (json_int_t)ts,
                                                series_real_or_null(s, 2, 1),
                                                series_real_or_null(s, 3, 1),
                                                series_real_or_null(s, 4, 1),
                                                series_real_or_null(s, 5, 0.001)));
    }
    sqlite3_finalize(s);
    return by_gpu;
}

static json_t *series_holder_row(sqlite3_stmt *s, void *arg)
{
    json_t *gpus = json_loads((const char *)sqlite3_column_text(s, 3), 0, NULL);
    return json_pack("{s:I,s:o,s:s,s:o,s:I,s:o}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                     "name", store_text_or_null(s, 1), "user",
                     sqlite3_column_type(s, 2) == SQLITE_NULL
                         ? store_own_user()
                         : (const char *)sqlite3_column_text(s, 2),
                     "gpus", gpus ? gpus : json_array(), "start",
                     (json_int_t)sqlite3_column_int64(s, 4), "end", store_int_or_null(s, 5));
}

json_t *store_gpu_holders(struct store *st, int64_t since, int64_t until, int limit)
{
    sqlite3_stmt *s = STORE_QUERY(
        st,
        "SELECT a.task_id, t.name, t.user, a.gpus, a.start_ms, a.end_ms FROM attempts a"
        " JOIN tasks t ON t.id = a.task_id WHERE json_array_length(a.gpus) > 0"
        " AND a.start_ms < ?2 AND (a.end_ms IS NULL OR a.end_ms >= ?1)"
        " ORDER BY a.start_ms LIMIT ?3",
        STORE_INT(since), STORE_INT(until), STORE_INT(limit));
    return store_rows(s, series_holder_row, NULL);
}
