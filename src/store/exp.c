/* Experiments in the store: the experiment rows, which task is which trial, the metrics tasks
 * report, and the leaderboard view. */
#include "store/rows.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool store_exp_exists(struct store *st, const char *name)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT 1 FROM experiments WHERE name = ?1",
                                  STORE_TEXT(name));
    bool found = s != NULL && sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return found;
}

int store_exp_insert(struct store *st, const char *name, const char *kind, const json_t *spec,
                     const char *state, int64_t seed, int64_t next_trial, int64_t space,
                     int64_t now)
{
    char *text = json_dumps(spec, JSON_COMPACT);
    int rc = store_write(st, STORE_QUERY(st, "INSERT INTO experiments (name, kind, spec, state,"
                                             " created, seed, next_trial, space) VALUES (?1, ?2,"
                                             " ?3, ?4, ?5, ?6, ?7, ?8)",
                                         STORE_TEXT(name), STORE_TEXT(kind), STORE_TEXT(text),
                                         STORE_TEXT(state), STORE_INT(now), STORE_INT(seed),
                                         STORE_INT(next_trial), STORE_INT(space)));
    free(text);
    return rc;
}

int store_trial_insert(struct store *st, const char *exp, int trial, int64_t task,
                       const char *stage, const json_t *params)
{
    char *text = json_dumps(params, JSON_COMPACT);
    int rc = store_write(st, STORE_QUERY(st, "INSERT INTO trials (exp, trial, task_id, stage,"
                                             " params) VALUES (?1, ?2, ?3, ?4, ?5)",
                                         STORE_TEXT(exp), STORE_INT(trial), STORE_INT(task),
                                         STORE_TEXT(stage), STORE_TEXT(text)));
    free(text);
    return rc;
}

int store_metric_insert(struct store *st, int64_t task, int64_t step, const char *name,
                        double value, int64_t now)
{
    return store_write(st, STORE_QUERY(st, "INSERT OR REPLACE INTO metrics (task_id, step, name,"
                                           " value, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
                                       STORE_INT(task), STORE_INT(step), STORE_TEXT(name),
                                       STORE_REAL(value), STORE_INT(now)));
}

int store_exp_set_next(struct store *st, const char *name, int64_t next_trial)
{
    return store_write(st, STORE_QUERY(st, "UPDATE experiments SET next_trial = ?2 WHERE name = ?1",
                                       STORE_TEXT(name), STORE_INT(next_trial)));
}

int store_trial_stopped(struct store *st, int64_t task, int rung, const char *reason)
{
    return store_write(st, STORE_QUERY(st, "UPDATE trials SET stopped_early = 1, rung = ?2,"
                                           " stop_reason = ?3 WHERE task_id = ?1",
                                       STORE_INT(task), STORE_INT(rung), STORE_TEXT(reason)));
}

int store_exp_set_state(struct store *st, const char *name, const char *state, const char *reason)
{
    return store_write(st, STORE_QUERY(st, "UPDATE experiments SET state = ?2, reason = ?3"
                                           " WHERE name = ?1",
                                       STORE_TEXT(name), STORE_TEXT(state), STORE_TEXT(reason)));
}

int store_exp_failures(struct store *st, const char *name, bool failed)
{
    sqlite3_stmt *s = STORE_QUERY(st, failed ? "UPDATE experiments SET failures = failures + 1"
                                               " WHERE name = ?1 RETURNING failures"
                                             : "UPDATE experiments SET failures = 0"
                                               " WHERE name = ?1 RETURNING failures",
                                  STORE_TEXT(name));
    int n = 0, rc;
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        n = sqlite3_column_int(s, 0);
    if (rc != SQLITE_DONE)
        n = store_failed(st, rc);
    sqlite3_finalize(s);
    return n;
}

int store_trial_mark_stop(struct store *st, int64_t task, bool marked)
{
    return store_write(st, STORE_QUERY(st, "UPDATE trials SET stop_reason = CASE WHEN ?2 THEN"
                                           " 'cancelled by drover exp stop' END"
                                           " WHERE task_id = ?1 AND stopped_early = 0",
                                       STORE_INT(task), STORE_INT(marked)));
}

/* The first column of every row of s (bound by the caller), into *ids (malloc'd). */
static int exp_ids(struct store *st, sqlite3_stmt *s, int64_t **ids, size_t *n)
{
    size_t cap = 16;
    int rc = s != NULL ? SQLITE_ROW : sqlite3_errcode(store_db(st));
    *n = 0;
    *ids = xmalloc(cap * sizeof **ids);
    while (s != NULL && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        xgrow((void **)ids, &cap, *n + 1, sizeof **ids);
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_DONE)
        return 0;
    free(*ids);
    *ids = NULL;
    *n = 0;
    return store_failed(st, rc);
}

int store_exp_task_ids(struct store *st, const char *name, bool marked_by_stop, int64_t **ids,
                       size_t *n)
{
    return exp_ids(st, STORE_QUERY(st, "SELECT task_id FROM trials WHERE exp = ?1 AND (NOT ?2 OR"
                                       " (stopped_early = 0 AND stop_reason IS NOT NULL))"
                                       " ORDER BY task_id",
                                   STORE_TEXT(name), STORE_INT(marked_by_stop)),
                   ids, n);
}

int store_exp_tally(struct store *st, const char *name, struct store_exp_tally *out)
{
    sqlite3_stmt *s = STORE_QUERY(
        st, "SELECT COUNT(*), TOTAL(t.stopped_early = 0 AND k.state = 'succeeded'),"
            " TOTAL(t.stopped_early = 0 AND k.state IN ('failed', 'timed_out')),"
            " TOTAL(t.stopped_early) FROM trials t JOIN tasks k ON k.id = t.task_id"
            " WHERE t.exp = ?1 AND t.trial >= 0", STORE_TEXT(name));
    int rc = s != NULL ? sqlite3_step(s) : sqlite3_errcode(store_db(st));
    memset(out, 0, sizeof *out);
    if (rc == SQLITE_ROW) {
        out->trials = sqlite3_column_int(s, 0);
        out->succeeded = sqlite3_column_int(s, 1);
        out->failed = sqlite3_column_int(s, 2);
        out->stopped_early = sqlite3_column_int(s, 3);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : store_failed(st, rc);
}

/* The first or the last trial of an experiment to have failed, by the end of its task. */
#define EXP_FAILED_TRIAL(order)                                                                   \
    "SELECT t.task_id, t.stage, a.exit_code, a.signal, a.outcome FROM trials t"                   \
    " JOIN tasks k ON k.id = t.task_id LEFT JOIN attempts a ON a.task_id ="                       \
    " t.task_id AND a.n = k.attempts WHERE t.exp = ?1 AND t.trial >= 0 AND"                       \
    " t.stopped_early = 0 AND k.state IN ('failed', 'timed_out') ORDER BY " order " LIMIT 1"

json_t *store_exp_failed_trial(struct store *st, const char *name, bool last)
{
    sqlite3_stmt *s = STORE_QUERY(st, last ? EXP_FAILED_TRIAL("k.end_time DESC, t.task_id DESC")
                                           : EXP_FAILED_TRIAL("k.end_time, t.task_id"),
                                  STORE_TEXT(name));
    json_t *o = NULL;
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW)
        o = json_pack("{s:I,s:o,s:o,s:o,s:o}", "task", (json_int_t)sqlite3_column_int64(s, 0),
                      "stage", store_text_or_null(s, 1), "exit_code", store_int_or_null(s, 2),
                      "signal", store_int_or_null(s, 3), "outcome", store_text_or_null(s, 4));
    sqlite3_finalize(s);
    return o;
}

static void store_exp_owner_json(struct store *st, const char *name, json_t *e);

json_t *store_exp_get(struct store *st, const char *name)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT name, kind, spec, state, reason, created, seed,"
                                      " next_trial, space, failures FROM experiments"
                                      " WHERE name = ?1", STORE_TEXT(name));
    json_t *e = NULL;
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW) {
        json_t *spec = json_loads((const char *)sqlite3_column_text(s, 2), 0, NULL);
        e = json_pack("{s:s,s:s,s:o,s:s,s:o,s:I,s:I,s:I,s:I,s:i}", "name",
                      (const char *)sqlite3_column_text(s, 0), "kind",
                      (const char *)sqlite3_column_text(s, 1), "spec", spec ? spec : json_null(),
                      "state", (const char *)sqlite3_column_text(s, 3), "reason",
                      store_text_or_null(s, 4), "created", (json_int_t)sqlite3_column_int64(s, 5),
                      "seed", (json_int_t)sqlite3_column_int64(s, 6), "next_trial",
                      (json_int_t)sqlite3_column_int64(s, 7), "space",
                      (json_int_t)sqlite3_column_int64(s, 8), "failures",
                      sqlite3_column_int(s, 9));
    }
    sqlite3_finalize(s);
    if (e != NULL)
        store_exp_owner_json(st, name, e);
    return e;
}

int store_exp_set_owner(struct store *st, const char *name, uid_t uid, const char *user)
{
    return store_write(st, STORE_QUERY(st, "UPDATE experiments SET uid = ?2, user = ?3"
                                           " WHERE name = ?1",
                                       STORE_TEXT(name), STORE_INT(uid), STORE_TEXT(user)));
}

int store_exp_owner(struct store *st, const char *name, uid_t *uid, char **user)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT uid, user FROM experiments WHERE name = ?1",
                                  STORE_TEXT(name));
    int rc = -1;
    *user = NULL;
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW) {
        rc = 0;
        if (sqlite3_column_type(s, 1) != SQLITE_NULL) {
            *uid = (uid_t)sqlite3_column_int64(s, 0);
            *user = xstrdup((const char *)sqlite3_column_text(s, 1));
        }
    }
    sqlite3_finalize(s);
    return rc;
}

/* Sets e's "user" and "uid": the recorded owner, else the daemon's user. */
static void store_exp_owner_json(struct store *st, const char *name, json_t *e)
{
    uid_t uid = getuid();
    char *user = NULL;
    store_exp_owner(st, name, &uid, &user);
    json_object_set_new(e, "user", json_string(user ? user : store_own_user()));
    json_object_set_new(e, "uid", json_integer(user ? uid : getuid()));
    free(user);
}

static json_t *exp_list_row(sqlite3_stmt *s, void *arg)
{
    json_t *row = json_pack("{s:s,s:s,s:s,s:o,s:I,s:i,s:i,s:i,s:i,s:i,s:i}", "name",
                     (const char *)sqlite3_column_text(s, 0), "kind",
                     (const char *)sqlite3_column_text(s, 1), "state",
                     (const char *)sqlite3_column_text(s, 2), "reason", store_text_or_null(s, 3),
                     "created", (json_int_t)sqlite3_column_int64(s, 4), "tasks",
                     sqlite3_column_int(s, 5), "running", sqlite3_column_int(s, 6), "waiting",
                     sqlite3_column_int(s, 7), "succeeded", sqlite3_column_int(s, 8), "failed",
                     sqlite3_column_int(s, 9), "stopped_early", sqlite3_column_int(s, 10));
    bool recorded = sqlite3_column_type(s, 12) != SQLITE_NULL;
    json_object_set_new(row, "user", json_string(recorded ? (const char *)sqlite3_column_text(s, 12)
                                                          : store_own_user()));
    json_object_set_new(row, "uid", json_integer(recorded ? sqlite3_column_int64(s, 11)
                                                          : (json_int_t)getuid()));
    return row;
}

json_t *store_exp_list(struct store *st)
{
    return store_rows(
        store_prepare(
            st, "SELECT e.name, e.kind, e.state, e.reason, e.created, COUNT(t.task_id),"
                " SUM(k.state = 'running'), SUM(k.state IN ('queued','pending','held','retrying')),"
                " SUM(k.state = 'succeeded'),"
                " SUM(k.state IN ('failed','timed_out','upstream_failed')),"
                " SUM(t.stopped_early), e.uid, e.user FROM experiments e"
                " LEFT JOIN trials t ON t.exp = e.name"
                " LEFT JOIN tasks k ON k.id = t.task_id GROUP BY e.name ORDER BY e.created"),
        exp_list_row, NULL);
}

/* {name: value} of a task's latest value of every metric. */
static json_t *exp_latest(struct store *st, int64_t task)
{
    json_t *obj = json_object();
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT name, value, MAX(step) FROM metrics"
                                      " WHERE task_id = ?1 GROUP BY name", STORE_INT(task));
    while (s != NULL && sqlite3_step(s) == SQLITE_ROW)
        json_object_set_new(obj, (const char *)sqlite3_column_text(s, 0),
                            json_real(sqlite3_column_double(s, 1)));
    sqlite3_finalize(s);
    return obj;
}

static json_t *exp_best(struct store *st, int64_t task, const char *metric, bool maximize)
{
    if (metric == NULL)
        return json_null();
    sqlite3_stmt *s = STORE_QUERY(st, maximize ? "SELECT MAX(value) FROM metrics WHERE"
                                                 " task_id = ?1 AND name = ?2"
                                               : "SELECT MIN(value) FROM metrics WHERE"
                                                 " task_id = ?1 AND name = ?2",
                                  STORE_INT(task), STORE_TEXT(metric));
    json_t *v = json_null();
    if (s != NULL && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
        v = json_real(sqlite3_column_double(s, 0));
    sqlite3_finalize(s);
    return v;
}

/* What a trial's row needs besides the row: the store, the metric and which way is better. */
struct exp_trial_ctx {
    struct store *st;
    const char *metric;
    bool maximize;
};

static json_t *exp_trial_row(sqlite3_stmt *s, void *arg)
{
    const struct exp_trial_ctx *ctx = arg;
    int64_t task = sqlite3_column_int64(s, 1);
    bool stopped = sqlite3_column_int(s, 6) != 0;
    json_t *params = json_loads((const char *)sqlite3_column_text(s, 3), 0, NULL);
    double hours = (double)sqlite3_column_int64(s, 11) / 3.6e6 * sqlite3_column_int(s, 10);
    return json_pack("{s:i,s:I,s:o,s:o,s:s,s:o,s:b,s:o,s:o,s:i,s:f,s:o,s:o,s:o}", "trial",
                     sqlite3_column_int(s, 0), "task", (json_int_t)task, "stage",
                     store_text_or_null(s, 2), "params", params ? params : json_object(),
                     "state", stopped ? "stopped_early" : (const char *)sqlite3_column_text(s, 4),
                     "reason", stopped ? store_text_or_null(s, 7) : store_text_or_null(s, 5),
                     "stopped_early", stopped, "rung", store_int_or_null(s, 8),
                     "name", store_text_or_null(s, 12), "attempts", sqlite3_column_int(s, 9),
                     "gpu_hours", hours, "latest", exp_latest(ctx->st, task), "best",
                     exp_best(ctx->st, task, ctx->metric, ctx->maximize), "task_state",
                     json_string((const char *)sqlite3_column_text(s, 4)));
}

json_t *store_exp_trials(struct store *st, const char *name, const char *metric, bool maximize,
                         int64_t now)
{
    struct exp_trial_ctx ctx = {st, metric, maximize};
    return store_rows(
        STORE_QUERY(st, "SELECT t.trial, t.task_id, t.stage, t.params, k.state, k.reason,"
                        " t.stopped_early, t.stop_reason, t.rung, k.attempts, k.gpus,"
                        " (SELECT SUM(COALESCE(a.end_ms, ?2) - a.start_ms) FROM attempts a"
                        "  WHERE a.task_id = t.task_id), k.name"
                        " FROM trials t JOIN tasks k ON k.id = t.task_id WHERE t.exp = ?1"
                        " ORDER BY t.trial, t.task_id", STORE_TEXT(name), STORE_INT(now)),
        exp_trial_row, &ctx);
}

static json_t *exp_stream_row(sqlite3_stmt *s, void *arg)
{
    return json_pack("[i,I,f]", sqlite3_column_int(s, 0), (json_int_t)sqlite3_column_int64(s, 1),
                     sqlite3_column_double(s, 2));
}

json_t *store_exp_metric_stream(struct store *st, const char *name, const char *metric)
{
    return store_rows(STORE_QUERY(st, "SELECT t.trial, m.step, m.value FROM metrics m"
                                      " JOIN trials t ON t.task_id = m.task_id"
                                      " WHERE t.exp = ?1 AND m.name = ?2 ORDER BY m.ts, m.rowid",
                                  STORE_TEXT(name), STORE_TEXT(metric)),
                      exp_stream_row, NULL);
}

static json_t *exp_metric_row(sqlite3_stmt *s, void *arg)
{
    return json_pack("{s:I,s:s,s:f}", "step", (json_int_t)sqlite3_column_int64(s, 0), "name",
                     (const char *)sqlite3_column_text(s, 1), "value", sqlite3_column_double(s, 2));
}

json_t *store_task_metrics(struct store *st, int64_t task)
{
    return store_rows(STORE_QUERY(st, "SELECT step, name, value FROM metrics WHERE task_id = ?1"
                                      " ORDER BY step, name", STORE_INT(task)),
                      exp_metric_row, NULL);
}
