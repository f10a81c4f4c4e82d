/* The read side of the store: restore iteration and the JSON views of tasks. */
#include "store/internal.h"
#include "util/xalloc.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>


static const char *col_text(sqlite3_stmt *s, int i)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    return t ? t : "";
}

static json_t *col_json(sqlite3_stmt *s, int i)
{
    json_t *j = json_loads(col_text(s, i), 0, NULL);
    return j ? j : json_null();
}

static json_t *col_int_or_null(sqlite3_stmt *s, int i)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL)
        return json_null();
    return json_integer(sqlite3_column_int64(s, i));
}

static void placement_from_json(const char *text, int node, uint64_t gpu_mem,
                                struct core_placement *pl)
{
    json_t *g = json_loads(text, 0, NULL);
    memset(pl, 0, sizeof *pl);
    pl->node = node;
    pl->gpu_mem = gpu_mem;
    for (size_t i = 0; i < json_array_size(g) && i < CORE_MAX_NODE_GPUS; i++)
        pl->gpu[pl->ngpus++] = (int)json_integer_value(json_array_get(g, i));
    json_decref(g);
}

int store_each_live(struct store *st, store_live_fn fn, void *arg)
{
    static const char sql[] =
        "SELECT t.id, t.state, t.ready_time, t.retry_at, t.attempts,"
        " a.n, a.start_ms, a.node, a.gpus, a.gpu_mem, a.run_dir FROM tasks t"
        " LEFT JOIN attempts a ON a.task_id = t.id AND a.end_ms IS NULL"
        " WHERE t.state NOT IN ('succeeded','failed','timed_out','cancelled','upstream_failed')"
        " OR a.n IS NOT NULL ORDER BY t.id";
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    while (sqlite3_step(s) == SQLITE_ROW) {
        struct core_placement pl;
        bool open = sqlite3_column_type(s, 5) != SQLITE_NULL;
        memset(&pl, 0, sizeof pl);
        if (open)
            placement_from_json(col_text(s, 8), sqlite3_column_int(s, 7),
                                (uint64_t)sqlite3_column_int64(s, 9), &pl);
        fn(arg, sqlite3_column_int64(s, 0), task_state_parse(col_text(s, 1)),
           sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), sqlite3_column_int(s, 4),
           open, sqlite3_column_int64(s, 6), &pl, open ? col_text(s, 10) : NULL);
    }
    sqlite3_finalize(s);
    return 0;
}

int store_upstream_failed_dependents(struct store *st, int64_t id, int64_t **ids, size_t *n)
{
    static const char sql[] =
        "SELECT t.id FROM tasks t, json_each(t.deps) d WHERE t.state = 'upstream_failed'"
        " AND json_extract(d.value, '$[0]') = ?1";
    sqlite3_stmt *s;
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    while (sqlite3_step(s) == SQLITE_ROW) {
        xgrow((void **)ids, &cap, *n + 1, sizeof **ids);
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    return 0;
}

/* One schema for listings. A brief listing (`ls` for people) holds some of the fields of the
 * ls --json objects, named by the same keys ("request.gpus": the gpus of the request object),
 * with the same types; task_brief says which, and both kinds of listing write them from it. The
 * brief columns come first, in task_brief's order, in every query of a task row. */
#define TASK_BRIEF_COLUMNS                                                                    \
    "t.id, t.name, t.state, t.priority, t.gpus, t.attempts, a.exit_code, a.start_ms,"         \
    " a.end_ms, t.command, a.gpus, t.user, a.slurm_job,"                                       \
    " CASE WHEN a.end_ms IS NULL THEN a.slurm_state END"

#define TASK_COLUMNS                                                                          \
    TASK_BRIEF_COLUMNS ", t.reason, t.gpu_mem, t.cpus, t.mem, t.timeout_ms, t.retries,"       \
    " t.deps, t.array_id, t.array_index, t.submit_time, t.end_time, t.task_key, t.workdir,"  \
    " t.retry_at, a.signal, a.run_dir, t.profile, t.claim_source, t.stall_ms, t.gpu_type,"  \
    " t.uid, t.notify, t.backend, a.slurm_job, a.slurm_state, a.slurm_reason, a.end_ms,"    \
    " t.preempt_grace_ms, t.preempt_signal, t.preempt_overruns, t.preempt_off, t.begin_ms,"  \
    " t.off_peak"

#define TASK_FROM                                                                             \
    " FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id AND a.n = t.attempts"

/* A listing's WHERE holds only the filters given, so that SQLite can use an index for them
 * (tasks_live, tasks_list) rather than test "?1 IS NULL OR …" on every row: ?1 the state; ?3
 * the oldest end still listed (tasks that ended within a day, unless `all`); ?4/?5 an owner (uid,
 * name), ?6 the daemon's uid (the owner of a task without a recorded one); ?7/?8 the page
 * (LIMIT -1: all). Parameters a filter leaves out are bound anyway: SQLITE_RANGE, harmless.
 * walk: the terms are written so that no index serves them (a unary +), and SQLite walks the
 * tasks in id order, stopping at the page's end — far cheaper than collecting and sorting every
 * match when many tasks match. (malloc'd) */
static char *task_list_sql(const char *select, const struct store_list_filter *f, bool page,
                           bool walk)
{
    const char *plus = walk ? "+" : "";
    char *state = f->state ? xasprintf(" AND %st.state = ?1", plus) : xstrdup("");
    char *recent = f->all ? xstrdup("")
                          : xasprintf(" AND (%st.end_time IS NULL OR %st.end_time >= ?3)", plus,
                                      plus);
    char *sql = xasprintf("%s WHERE 1%s%s%s%s", select, state, recent,
                          f->by_owner || f->user ? " AND (ifnull(t.uid, ?6) = ?4 OR t.user = ?5)"
                                                 : "",
                          page ? " ORDER BY t.id LIMIT ?7 OFFSET ?8" : "");
    free(state);
    free(recent);
    return sql;
}

/* A page matching more tasks than this is walked in id order (task_list_sql). */
#define STORE_LIST_WALK_MIN 2000

enum brief_kind {
    BRIEF_INT,
    BRIEF_INT_OR_NULL,
    BRIEF_STRING,
    BRIEF_STRING_OR_NULL,
    BRIEF_ARRAY, /* JSON text; an empty array when NULL */
    BRIEF_OWNER, /* a user name; the daemon's own user when NULL (not recorded) */
};

static const struct {
    const char *key;
    enum brief_kind kind;
} task_brief[] = {
    {"id", BRIEF_INT},
    {"name", BRIEF_STRING_OR_NULL},
    {"state", BRIEF_STRING},
    {"priority", BRIEF_INT},
    {"request.gpus", BRIEF_INT},
    {"attempts", BRIEF_INT},
    {"exit_code", BRIEF_INT_OR_NULL},
    {"start_time", BRIEF_INT_OR_NULL},
    {"attempt_end_time", BRIEF_INT_OR_NULL},
    {"command", BRIEF_ARRAY},
    {"gpus", BRIEF_ARRAY},
    {"user", BRIEF_OWNER},
    {"slurm_job", BRIEF_STRING_OR_NULL},
    {"slurm_state", BRIEF_STRING_OR_NULL},
};
#define TASK_BRIEF_N (int)(sizeof task_brief / sizeof task_brief[0])

static json_t *col_string_or_null(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? json_null() : json_string(col_text(s, i));
}

/* Brief field i of row s. */
static json_t *task_brief_value(sqlite3_stmt *s, int i)
{
    switch (task_brief[i].kind) {
    case BRIEF_INT:
        return json_integer(sqlite3_column_int64(s, i));
    case BRIEF_INT_OR_NULL:
        return col_int_or_null(s, i);
    case BRIEF_STRING:
        return json_string(col_text(s, i));
    case BRIEF_STRING_OR_NULL:
        return col_string_or_null(s, i);
    case BRIEF_ARRAY:
        return sqlite3_column_type(s, i) == SQLITE_NULL ? json_array() : col_json(s, i);
    case BRIEF_OWNER:
        return json_string(sqlite3_column_type(s, i) == SQLITE_NULL ? store_own_user()
                                                                    : col_text(s, i));
    }
    abort();
}

/* A brief row: the values of task_brief's fields, in its order. */
static json_t *task_brief_row(sqlite3_stmt *s)
{
    json_t *row = json_array();
    for (int i = 0; i < TASK_BRIEF_N; i++)
        json_array_append_new(row, task_brief_value(s, i));
    return row;
}

/* The brief fields as an object's keys, "request.gpus" in a "request" object. */
static json_t *task_brief_json(sqlite3_stmt *s)
{
    json_t *o = json_object();
    for (int i = 0; i < TASK_BRIEF_N; i++) {
        const char *key = task_brief[i].key, *dot = strchr(key, '.');
        json_t *into = o;
        if (dot != NULL) {
            char outer[32];
            snprintf(outer, sizeof outer, "%.*s", (int)(dot - key), key);
            if ((into = json_object_get(o, outer)) == NULL)
                json_object_set_new(o, outer, into = json_object());
            key = dot + 1;
        }
        json_object_set_new(into, key, task_brief_value(s, i));
    }
    return o;
}

/* A Slurm task: its backend, its latest attempt's job, and what the last poll said of it. A job
 * Slurm holds pending is shown queued with Slurm's reason ("slurm: Resources"), though drover
 * counts it running (it was handed over). */
static void task_slurm_json(json_t *o, sqlite3_stmt *s)
{
    bool slurm = sqlite3_column_type(s, 36) != SQLITE_NULL;
    bool open = sqlite3_column_type(s, 40) == SQLITE_NULL;
    json_object_set_new(o, "backend", json_string(slurm ? "slurm" : "local"));
    json_object_set_new(o, "slurm_job", col_string_or_null(s, 37));
    json_object_set_new(o, "slurm_state", open ? col_string_or_null(s, 38) : json_null());
    if (slurm && open && strcmp(col_text(s, 2), "running") == 0 &&
        sqlite3_column_type(s, 38) == SQLITE_NULL) { /* not yet seen by a poll */
        json_object_set_new(o, "state", json_string("queued"));
        json_object_set_new(o, "reason", json_string(sqlite3_column_type(s, 37) == SQLITE_NULL
                                                         ? "slurm: submitting"
                                                         : "slurm: submitted"));
    } else if (slurm && open && strcmp(col_text(s, 2), "running") == 0 &&
               strcmp(col_text(s, 38), "PENDING") == 0) {
        json_object_set_new(o, "state", json_string("queued"));
        json_object_set_new(o, "reason",
                            json_sprintf("slurm: %s", sqlite3_column_type(s, 39) == SQLITE_NULL
                                                          ? "PENDING" : col_text(s, 39)));
    }
}

/* "preemptible" (whether las may stop it now) and "preempt": its grace, signal, overruns and
 * why it is no longer preemptible; null for a task never submitted --preemptible. */
static void task_preempt_json(json_t *o, sqlite3_stmt *s)
{
    int64_t grace = sqlite3_column_int64(s, 41);
    bool off = sqlite3_column_type(s, 44) != SQLITE_NULL;
    json_object_set_new(o, "preemptible", json_boolean(grace > 0 && !off));
    if (grace <= 0) {
        json_object_set_new(o, "preempt", json_null());
        return;
    }
    int sig = sqlite3_column_int(s, 42) > 0 ? sqlite3_column_int(s, 42) : SIGTERM;
    const char *name = sigabbrev_np(sig);
    json_object_set_new(o, "preempt",
                        json_pack("{s:I, s:o, s:i, s:o}", "grace_ms", (json_int_t)grace,
                                  "signal", name ? json_string(name) : json_integer(sig),
                                  "overruns", sqlite3_column_int(s, 43), "off",
                                  col_string_or_null(s, 44)));
}

/* One task row (TASK_COLUMNS) as the documented JSON object. */
static json_t *task_row_json(sqlite3_stmt *s)
{
    json_t *o = task_brief_json(s), *after = json_array(), *after_any = json_array();
    json_t *deps = col_json(s, 20);
    for (size_t i = 0; i < json_array_size(deps); i++) {
        json_t *d = json_array_get(deps, i);
        bool ok = strcmp(json_string_value(json_array_get(d, 1)), "ok") == 0;
        json_array_append(ok ? after : after_any, json_array_get(d, 0));
    }
    json_decref(deps);
    json_object_set_new(o, "reason", col_string_or_null(s, 14));
    json_t *request = json_object_get(o, "request");
    json_object_set_new(request, "gpu_mem", json_integer(sqlite3_column_int64(s, 15)));
    json_object_set_new(request, "cpus", json_integer(sqlite3_column_int(s, 16)));
    json_object_set_new(request, "mem", json_integer(sqlite3_column_int64(s, 17)));
    json_object_set_new(request, "timeout_ms", json_integer(sqlite3_column_int64(s, 18)));
    json_object_set_new(request, "gpu_type", col_string_or_null(s, 33));
    json_object_set_new(o, "retries", json_integer(sqlite3_column_int(s, 19)));
    json_object_set_new(o, "after", after);
    json_object_set_new(o, "after_any", after_any);
    json_object_set_new(o, "array_id", sqlite3_column_int64(s, 21) ? json_integer(
                                           sqlite3_column_int64(s, 21)) : json_null());
    json_object_set_new(o, "array_index", sqlite3_column_int64(s, 22) >= 0 ? json_integer(
                                              sqlite3_column_int64(s, 22)) : json_null());
    json_object_set_new(o, "submit_time", json_integer(sqlite3_column_int64(s, 23)));
    json_object_set_new(o, "end_time", col_int_or_null(s, 24));
    json_object_set_new(o, "key", col_string_or_null(s, 25));
    json_object_set_new(o, "workdir", json_string(col_text(s, 26)));
    if (strcmp(col_text(s, 2), "retrying") == 0)
        json_object_set_new(o, "retry_at", json_integer(sqlite3_column_int64(s, 27)));
    json_object_set_new(o, "signal", col_int_or_null(s, 28));
    json_object_set_new(o, "run_dir", col_string_or_null(s, 29));
    json_object_set_new(o, "profile", col_string_or_null(s, 30));
    json_object_set_new(o, "claim_source", col_string_or_null(s, 31));
    json_object_set_new(o, "stall_ms", json_integer(sqlite3_column_int64(s, 32)));
    json_object_set_new(o, "uid", json_integer(sqlite3_column_type(s, 34) == SQLITE_NULL
                                                   ? (json_int_t)getuid()
                                                   : sqlite3_column_int64(s, 34)));
    json_object_set_new(o, "notify", col_string_or_null(s, 35));
    json_object_set_new(o, "begin_ms", sqlite3_column_int64(s, 45) > 0
                                           ? json_integer(sqlite3_column_int64(s, 45))
                                           : json_null());
    json_object_set_new(o, "off_peak", json_boolean(sqlite3_column_int(s, 46) != 0));
    task_slurm_json(o, s);
    task_preempt_json(o, s);
    return o;
}

static json_t *task_attempts_json(struct store *st, int64_t id)
{
    static const char sql[] =
        "SELECT n, start_ms, end_ms, exit_code, signal, outcome, reason, gpus, gpu_mem, run_dir,"
        " peak_gpu_mem, mean_gpu_util, slurm_job FROM attempts WHERE task_id = ?1 ORDER BY n";
    json_t *list = json_array();
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL) != SQLITE_OK)
        return list;
    sqlite3_bind_int64(s, 1, id);
    while (sqlite3_step(s) == SQLITE_ROW) {
        json_t *a = json_object();
        json_object_set_new(a, "attempt", json_integer(sqlite3_column_int(s, 0)));
        json_object_set_new(a, "start_time", json_integer(sqlite3_column_int64(s, 1)));
        json_object_set_new(a, "end_time", col_int_or_null(s, 2));
        json_object_set_new(a, "exit_code", col_int_or_null(s, 3));
        json_object_set_new(a, "signal", col_int_or_null(s, 4));
        json_object_set_new(a, "outcome", col_string_or_null(s, 5));
        json_object_set_new(a, "reason", col_string_or_null(s, 6));
        json_object_set_new(a, "gpus", col_json(s, 7));
        json_object_set_new(a, "gpu_mem", json_integer(sqlite3_column_int64(s, 8)));
        json_object_set_new(a, "run_dir", json_string(col_text(s, 9)));
        json_object_set_new(a, "peak_gpu_mem", col_int_or_null(s, 10));
        json_object_set_new(a, "mean_gpu_util", sqlite3_column_type(s, 11) == SQLITE_NULL
                                                    ? json_null()
                                                    : json_real(sqlite3_column_double(s, 11)));
        json_object_set_new(a, "slurm_job", col_string_or_null(s, 12));
        json_array_append_new(list, a);
    }
    sqlite3_finalize(s);
    return list;
}

json_t *store_task_json(struct store *st, int64_t id)
{
    static const char sql[] = "SELECT " TASK_COLUMNS TASK_FROM " WHERE t.id = ?1";
    sqlite3_stmt *s;
    json_t *o = NULL;
    if (sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW)
        o = task_row_json(s);
    sqlite3_finalize(s);
    if (o)
        json_object_set_new(o, "attempt_list", task_attempts_json(st, id));
    return o;
}

/* Binds f to a listing's statement (task_list_sql's parameters). */
static void task_list_bind(sqlite3_stmt *s, const struct store_list_filter *f, core_time now)
{
    if (f->state)
        sqlite3_bind_text(s, 1, f->state, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 3, now - 24 * 3600 * 1000LL);
    if (f->by_owner)
        sqlite3_bind_int64(s, 4, f->uid);
    if (f->user)
        sqlite3_bind_text(s, 5, f->user, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 6, getuid());
    sqlite3_bind_int64(s, 7, f->limit > 0 ? f->limit : -1);
    sqlite3_bind_int64(s, 8, f->offset > 0 ? f->offset : 0);
}

/* The tasks of a listing, each made by row_fn from a row of `columns`. */
static json_t *task_list(struct store *st, const char *select,
                         json_t *(*row_fn)(sqlite3_stmt *), const struct store_list_filter *f,
                         core_time now, bool walk)
{
    sqlite3_stmt *s;
    json_t *list = json_array();
    char *sql = task_list_sql(select, f, true, walk);
    int rc = sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL);
    free(sql);
    if (rc != SQLITE_OK)
        return list;
    task_list_bind(s, f, now);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(list, row_fn(s));
    sqlite3_finalize(s);
    return list;
}

json_t *store_list_json(struct store *st, const struct store_list_filter *f, core_time now)
{
    return task_list(st, "SELECT " TASK_COLUMNS TASK_FROM, task_row_json, f, now, false);
}

/* How many tasks f matches, its page aside (a count of the tasks_list index); -1 on error. */
static int64_t task_list_count(struct store *st, const struct store_list_filter *f,
                               core_time now)
{
    sqlite3_stmt *s;
    int64_t n = -1;
    char *sql = task_list_sql("SELECT count(*) FROM tasks t", f, false, false);
    int rc = sqlite3_prepare_v2(store_db(st), sql, -1, &s, NULL);
    free(sql);
    if (rc != SQLITE_OK)
        return -1;
    task_list_bind(s, f, now);
    if (sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

json_t *store_list_page(struct store *st, const struct store_list_filter *f, core_time now,
                        int64_t *total)
{
    *total = task_list_count(st, f, now);
    return task_list(st, "SELECT " TASK_COLUMNS TASK_FROM, task_row_json, f, now,
                     *total > STORE_LIST_WALK_MIN);
}

json_t *store_list_brief(struct store *st, const struct store_list_filter *f, core_time now)
{
    json_t *columns = json_array();
    for (int i = 0; i < TASK_BRIEF_N; i++)
        json_array_append_new(columns, json_string(task_brief[i].key));
    json_t *rows = task_list(st, "SELECT " TASK_BRIEF_COLUMNS TASK_FROM, task_brief_row, f, now,
                             false);
    return json_pack("{s:o,s:o}", "columns", columns, "tasks", rows);
}
