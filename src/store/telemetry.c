/* What tasks use and what the GPUs did: profiles and learned claims, attempt usage, the GPU
 * series (raw for an hour, one-minute means for 30 days), and the counts the snapshot shows. */
#include "store/rows.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define STORE_RAW_KEEP_MS (3600LL * 1000)
#define STORE_MINUTES_KEEP_MS (30LL * 24 * 3600 * 1000)

int store_task_requeue(struct store *st, int64_t id, uint64_t gpu_mem, const char *claim_source)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE tasks SET gpu_mem = ?2, claim_source ="
                                      " COALESCE(?3, claim_source),"
                                      " base_attempts = base_attempts + 1 WHERE id = ?1");
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)gpu_mem);
    if (claim_source != NULL)
        sqlite3_bind_text(s, 3, claim_source, -1, SQLITE_STATIC);
    return store_step_once(s);
}

uint64_t store_profile_peak(struct store *st, const char *profile)
{
    sqlite3_stmt *s = STORE_QUERY(
        st, "SELECT MAX(p) FROM (SELECT a.peak_gpu_mem AS p FROM attempts a"
            " JOIN tasks t ON t.id = a.task_id WHERE t.profile = ?1 AND a.outcome = 'succeeded'"
            " AND a.peak_gpu_mem > 0 ORDER BY a.end_ms DESC LIMIT 5)", STORE_TEXT(profile));
    uint64_t peak = 0;
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
        peak = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return peak;
}

int store_attempt_usage(struct store *st, int64_t task, int attempt, uint64_t peak, double util)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE attempts SET peak_gpu_mem = ?3, mean_gpu_util = ?4"
                                      " WHERE task_id = ?1 AND n = ?2");
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    if (peak > 0)
        sqlite3_bind_int64(s, 3, (sqlite3_int64)peak);
    if (util >= 0)
        sqlite3_bind_double(s, 4, util);
    return store_step_once(s);
}

static void tel_bind_known(sqlite3_stmt *s, int col, int64_t v)
{
    if (v >= 0)
        sqlite3_bind_int64(s, col, v);
    else
        sqlite3_bind_null(s, col);
}

int store_telemetry_flush(struct store *st, const struct gpu_row *rows, size_t n, int64_t now)
{
    store_begin(st);
    sqlite3_stmt *s = store_prepare(st, "INSERT INTO gpu_samples (ts, gpu, util, mem_used, temp,"
                                      " power_mw) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (s == NULL)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(s, 1, rows[i].ts);
        sqlite3_bind_int(s, 2, rows[i].gpu);
        tel_bind_known(s, 3, rows[i].util);
        tel_bind_known(s, 4, rows[i].mem_used);
        tel_bind_known(s, 5, rows[i].temp);
        tel_bind_known(s, 6, rows[i].power_mw);
        if (sqlite3_step(s) != SQLITE_DONE) {
            sqlite3_finalize(s);
            goto fail;
        }
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    /* Whole minutes before now's minute, folded (again, if a sample arrived late: REPLACE). */
    int64_t minute = now / 60000 * 60000;
    char *sql = xasprintf(
        "INSERT OR REPLACE INTO gpu_minutes (ts, gpu, util, mem_used, temp, power_mw, n)"
        " SELECT ts / 60000 * 60000, gpu, AVG(util), AVG(mem_used), AVG(temp), AVG(power_mw),"
        " COUNT(*) FROM gpu_samples WHERE ts >= %lld AND ts < %lld GROUP BY 1, 2;"
        "DELETE FROM gpu_samples WHERE ts < %lld;"
        "DELETE FROM gpu_minutes WHERE ts < %lld;",
        (long long)(minute - STORE_RAW_KEEP_MS), (long long)minute,
        (long long)(now - STORE_RAW_KEEP_MS), (long long)(now - STORE_MINUTES_KEEP_MS));
    int rc = store_exec(st, sql);
    free(sql);
    if (rc < 0)
        goto fail;
    return store_commit(st);
fail:
    store_rollback(st);
    return -1;
}

/* {key: count} from a "SELECT key, COUNT(*) … GROUP BY key" query. */
static json_t *tel_grouped(struct store *st, const char *sql)
{
    json_t *obj = json_object();
    sqlite3_stmt *s = store_prepare(st, sql);
    while (s != NULL && sqlite3_step(s) == SQLITE_ROW)
        if (sqlite3_column_type(s, 0) == SQLITE_TEXT)
            json_object_set_new(obj, (const char *)sqlite3_column_text(s, 0),
                                json_integer(sqlite3_column_int64(s, 1)));
    sqlite3_finalize(s);
    return obj;
}

json_t *store_counts(struct store *st)
{
    json_t *states = json_object();
    for (int i = 0; i < TASK_NSTATES; i++)
        json_object_set_new(states, task_state_name((enum task_state)i), json_integer(0));
    json_t *seen = tel_grouped(st, "SELECT state, COUNT(*) FROM tasks GROUP BY state");
    json_object_update(states, seen);
    json_decref(seen);
    json_t *attempts = tel_grouped(st, "SELECT outcome, COUNT(*) FROM attempts WHERE outcome IS"
                                       " NOT NULL GROUP BY outcome");
    return json_pack("{s:o,s:o}", "states", states, "attempts", attempts);
}

static json_t *tel_queued_row(sqlite3_stmt *s, void *arg)
{
    return json_pack("{s:I,s:o,s:i,s:i,s:I,s:I}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                     "name", store_text_or_null(s, 1), "priority", sqlite3_column_int(s, 2),
                     "gpus", sqlite3_column_int(s, 3), "claim",
                     (json_int_t)sqlite3_column_int64(s, 4), "since",
                     (json_int_t)sqlite3_column_int64(s, 5));
}

json_t *store_queued_brief(struct store *st, int limit)
{
    return store_rows(STORE_QUERY(st, "SELECT id, name, priority, gpus, gpu_mem, ready_time"
                                      " FROM tasks WHERE state = 'queued' ORDER BY id LIMIT ?1",
                                  STORE_INT(limit)),
                      tel_queued_row, NULL);
}

char *store_task_name(struct store *st, int64_t id)
{
    char *name = NULL;
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT name FROM tasks WHERE id = ?1", STORE_INT(id));
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_TEXT)
        name = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return name;
}
