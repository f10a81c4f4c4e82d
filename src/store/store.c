#include "store/internal.h"
#include "store/rows.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    Q_INSERT_ENV, Q_FIND_ENV, Q_INSERT_TASK, Q_FIND_KEY, Q_STATE, Q_SET_STATE, Q_ATT_START,
    Q_ATT_END, Q_EXEC_INFO, Q_SPEC, Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_ATT_RUNNING, Q_TRIAL,
    Q_SAVEPOINT, Q_RELEASE, Q_ROLLBACK_TO, Q_NQUERIES
};

static const char *const store_sql[Q_NQUERIES] = {
    [Q_INSERT_ENV] = "INSERT OR IGNORE INTO envs (json) VALUES (?1)",
    [Q_FIND_ENV] = "SELECT id FROM envs WHERE json = ?1",
    [Q_INSERT_TASK] =
        "INSERT INTO tasks (name, state, command, workdir, env_id, task_key, priority, gpus,"
        " gpu_mem, cpus, mem, timeout_ms, retries, backoff, deps, array_id, array_index,"
        " array_limit, submit_time, attempts, base_attempts, profile, claim_source, stall_ms,"
        " gpu_type, uid, user, notify, backend, preempt_grace_ms, preempt_signal, begin_ms,"
        " off_peak)"
        " VALUES (?1, ?19, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
        " ?17, ?18, 0, 0, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)",
    /* A task of a per-user daemon from before owners were recorded (uid NULL) is the daemon's. */
    [Q_FIND_KEY] = "SELECT id FROM tasks WHERE task_key = ?1 AND ifnull(uid, ?3) = ?2",
    [Q_STATE] = "SELECT state FROM tasks WHERE id = ?1",
    [Q_SET_STATE] =
        "UPDATE tasks SET state = ?2, reason = ?3,"
        " ready_time = CASE WHEN ?2 = 'queued' THEN ?4 ELSE ready_time END,"
        " retry_at = CASE WHEN ?2 = 'retrying' THEN ?5 ELSE retry_at END,"
        " end_time = CASE WHEN ?6 THEN ?4 ELSE NULL END WHERE id = ?1",
    [Q_ATT_START] =
        "INSERT OR REPLACE INTO attempts (task_id, n, start_ms, node, gpus, gpu_mem, run_dir)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [Q_ATT_END] =
        "UPDATE attempts SET start_ms = CASE WHEN ?3 > 0 THEN ?3 ELSE start_ms END, end_ms = ?4,"
        " exit_code = ?5, signal = ?6, outcome = ?7, reason = ?8 WHERE task_id = ?1 AND n = ?2",
    [Q_EXEC_INFO] =
        "SELECT t.command, e.json, t.workdir, t.timeout_ms, t.array_index, t.stall_ms, t.uid,"
        " t.user, t.name, t.gpus, t.gpu_type, t.cpus, t.mem, t.array_id, t.array_limit, t.env_id,"
        " t.preempt_grace_ms, t.preempt_signal"
        " FROM tasks t"
        " JOIN envs e ON e.id = t.env_id WHERE t.id = ?1",
    [Q_SPEC] =
        "SELECT priority, submit_time, gpus, gpu_mem, cpus, mem, timeout_ms, retries, backoff,"
        " deps, array_id, array_limit, base_attempts, attempts, gpu_type, uid, backend,"
        " preempt_grace_ms > 0 AND preempt_off IS NULL,"
        /* The time its attempts that ended ran (the one that runs, core counts itself): the
         * service las orders by is GPUs x this. */
        " (SELECT ifnull(sum(end_ms - start_ms), 0) FROM attempts"
        "  WHERE task_id = ?1 AND end_ms IS NOT NULL AND end_ms > start_ms),"
        " begin_ms, off_peak"
        " FROM tasks WHERE id = ?1",
    /* Statements run for every task are compiled once (issue 13: compiling them per call was
     * a tenth of the daemon's CPU per task). */
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_ATT_RUNNING] = "UPDATE tasks SET state = 'running', reason = NULL, attempts = ?2 WHERE id = ?1",
    [Q_TRIAL] = "SELECT exp, trial FROM trials WHERE task_id = ?1",
    [Q_SAVEPOINT] = "SAVEPOINT one",
    [Q_RELEASE] = "RELEASE one",
    [Q_ROLLBACK_TO] = "ROLLBACK TO one",
};

struct store {
    sqlite3 *db;
    sqlite3_stmt *q[Q_NQUERIES];
    char *error;
    int code; /* SQLite's primary result code of that error */
    store_txn_fn txn_end; /* store_on_txn_end (daemon/events.c) */
    void *txn_arg;
    void (*before_begin)(void *arg); /* store_on_begin (daemon/group.c) */
    void *before_arg;
    uint64_t commits;
    /* The environment last read by store_task_exec_info, parsed: an array's tasks, and most
     * tasks of one person, share one (envs are stored once), so a start parses none. */
    int64_t env_id;
    char *env_text;
    json_t *env;
    /* store_prepare_cached's statements, by their SQL's address. */
    struct store_cached {
        const char *sql;
        sqlite3_stmt *s;
    } cached[16];
    int ncached;
};

void store_on_txn_end(struct store *st, store_txn_fn fn, void *arg)
{
    st->txn_end = fn;
    st->txn_arg = arg;
}

void store_set_error(struct store *st, char *msg)
{
    free(st->error);
    st->error = msg;
}

int store_exec(struct store *st, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        free(st->error);
        st->error = xstrdup(msg ? msg : "unknown SQLite error");
        st->code = rc & 0xff;
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* The database holds every task's command and environment: drover.db and its -wal and -shm are
 * the owner's alone, whatever the directory's mode or the umask. SQLite gives the -wal and -shm
 * it creates the database's mode, so the database is made 0600 first; files an older drover left
 * wider are narrowed. Returns 0 or -1 with errno. */
static int store_private(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd == -1)
        return -1;
    close(fd);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char *name = xasprintf("%s%s", path, suffixes[i]);
        struct stat sb;
        int rc = stat(name, &sb) == 0 && (sb.st_mode & 077) != 0
                     ? chmod(name, sb.st_mode & 0700)
                     : 0;
        free(name);
        if (rc == -1)
            return -1;
    }
    return 0;
}

struct store *store_open(const char *path, char **err)
{
    struct store *st = xcalloc(1, sizeof *st);
    if (store_private(path) == -1) {
        *err = xasprintf("cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        *err = xasprintf("cannot open %s: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (store_exec(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                       " PRAGMA foreign_keys=ON;") < 0 ||
        store_migrate(st) < 0) {
        *err = xasprintf("%s: %s", path, st->error);
        goto fail;
    }
    for (int i = 0; i < Q_NQUERIES; i++) {
        if (sqlite3_prepare_v3(st->db, store_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->q[i],
                               NULL) != SQLITE_OK) {
            *err = xasprintf("%s: preparing query %d: %s", path, i, sqlite3_errmsg(st->db));
            goto fail;
        }
    }
    return st;
fail:
    store_close(st);
    return NULL;
}

void store_close(struct store *st)
{
    if (st == NULL)
        return;
    for (int i = 0; i < Q_NQUERIES; i++)
        sqlite3_finalize(st->q[i]);
    json_decref(st->env);
    free(st->env_text);
    for (int i = 0; i < st->ncached; i++)
        sqlite3_finalize(st->cached[i].s);
    sqlite3_close(st->db);
    free(st->error);
    free(st);
}

static int store_step_done(struct store *st, sqlite3_stmt *s);

void store_on_begin(struct store *st, void (*fn)(void *arg), void *arg)
{
    st->before_begin = fn;
    st->before_arg = arg;
}

uint64_t store_commits(const struct store *st)
{
    return st->commits;
}

void store_begin(struct store *st)
{
    if (st->before_begin)
        st->before_begin(st->before_arg);
    if (store_step_done(st, st->q[Q_BEGIN]) < 0)
        fatalx("store: cannot begin a transaction: %s", st->error);
}

/* Rolls back, keeping the error that made the caller roll back, not the rollback's own (after a
 * full disk SQLite has usually rolled back already, and ROLLBACK then fails). */
static void store_rollback_keep(struct store *st)
{
    char *why = st->error;
    int code = st->code;
    st->error = NULL;
    store_step_done(st, st->q[Q_ROLLBACK]);
    free(st->error);
    st->error = why;
    st->code = code;
}

int store_commit(struct store *st)
{
    if (store_step_done(st, st->q[Q_COMMIT]) < 0) {
        store_rollback_keep(st);
        if (st->txn_end)
            st->txn_end(st->txn_arg, false);
        return -1;
    }
    st->commits++;
    if (st->txn_end)
        st->txn_end(st->txn_arg, true);
    return 0;
}

void store_begin_group(struct store *st)
{
    if (store_step_done(st, st->q[Q_BEGIN]) < 0)
        fatalx("store: cannot begin a transaction: %s", st->error);
}

void store_savepoint(struct store *st)
{
    if (store_step_done(st, st->q[Q_SAVEPOINT]) < 0)
        fatalx("store: cannot make a savepoint: %s", st->error);
}

void store_savepoint_end(struct store *st, bool keep)
{
    /* The error that made the caller give up stays the one reported; a failure of these two
     * leaves the transaction's fate to its COMMIT, which the caller checks. */
    char *why = st->error;
    int code = st->code;
    st->error = NULL;
    if (!keep)
        store_step_done(st, st->q[Q_ROLLBACK_TO]);
    store_step_done(st, st->q[Q_RELEASE]);
    if (why != NULL) {
        free(st->error);
        st->error = why;
        st->code = code;
    }
}

void store_rollback(struct store *st)
{
    store_rollback_keep(st);
    if (st->txn_end)
        st->txn_end(st->txn_arg, false);
}

const char *store_error(struct store *st)
{
    return st->error ? st->error : sqlite3_errmsg(st->db);
}

int store_error_code(struct store *st)
{
    return st->code;
}

/* Runs a prepared statement to completion; returns -1 and records the error on failure. */
static int store_step_done(struct store *st, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        free(st->error);
        st->error = xstrdup(sqlite3_errmsg(st->db));
        st->code = rc & 0xff;
        return -1;
    }
    return 0;
}

static void bind_json(sqlite3_stmt *s, int i, const json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    sqlite3_bind_text(s, i, text, -1, free);
}

static int64_t store_env_id(struct store *st, const json_t *env)
{
    char *text = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
    int64_t id = -1;
    sqlite3_stmt *s = st->q[Q_INSERT_ENV];
    sqlite3_bind_text(s, 1, text, -1, SQLITE_TRANSIENT);
    if (store_step_done(st, s) == 0) {
        s = st->q[Q_FIND_ENV];
        sqlite3_bind_text(s, 1, text, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(s) == SQLITE_ROW)
            id = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    free(text);
    return id;
}

static json_t *store_deps_json(const struct core_task_spec *spec)
{
    json_t *deps = json_array();
    for (size_t i = 0; i < spec->ndeps; i++)
        json_array_append_new(deps, json_pack("[I,s]", (json_int_t)spec->deps[i].id,
                                              spec->deps[i].kind == DEP_AFTER_OK ? "ok" : "any"));
    return deps;
}

int store_insert_task(struct store *st, struct task_record *rec)
{
    const struct core_task_spec *sp = &rec->spec;
    int64_t env_id = rec->env_id > 0 ? rec->env_id : store_env_id(st, rec->env);
    if (env_id < 0)
        return -1;
    rec->env_id = env_id;
    sqlite3_stmt *s = st->q[Q_INSERT_TASK];
    json_t *backoff = json_array();
    for (int i = 0; i < sp->nbackoff; i++)
        json_array_append_new(backoff, json_integer(sp->backoff[i]));
    json_t *deps = store_deps_json(sp);
    if (rec->name)
        sqlite3_bind_text(s, 1, rec->name, -1, SQLITE_TRANSIENT);
    bind_json(s, 2, rec->command);
    sqlite3_bind_text(s, 3, rec->workdir, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, env_id);
    if (rec->key)
        sqlite3_bind_text(s, 5, rec->key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 6, sp->priority);
    sqlite3_bind_int(s, 7, sp->req.gpus);
    sqlite3_bind_int64(s, 8, (sqlite3_int64)sp->req.gpu_mem);
    sqlite3_bind_int(s, 9, sp->req.cpus);
    sqlite3_bind_int64(s, 10, (sqlite3_int64)sp->req.mem);
    sqlite3_bind_int64(s, 11, sp->req.time_limit);
    sqlite3_bind_int(s, 12, sp->max_retries);
    bind_json(s, 13, backoff);
    bind_json(s, 14, deps);
    sqlite3_bind_int64(s, 15, sp->array_id);
    sqlite3_bind_int64(s, 16, rec->array_index);
    sqlite3_bind_int(s, 17, sp->array_limit);
    sqlite3_bind_int64(s, 18, sp->submit_time);
    sqlite3_bind_text(s, 19, sp->hold ? "held" : "pending", -1, SQLITE_STATIC);
    if (rec->profile)
        sqlite3_bind_text(s, 20, rec->profile, -1, SQLITE_TRANSIENT);
    if (rec->claim_source)
        sqlite3_bind_text(s, 21, rec->claim_source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 22, rec->stall_ms);
    if (rec->gpu_type)
        sqlite3_bind_text(s, 23, rec->gpu_type, -1, SQLITE_TRANSIENT);
    if (rec->user) {
        sqlite3_bind_int64(s, 24, rec->uid);
        sqlite3_bind_text(s, 25, rec->user, -1, SQLITE_TRANSIENT);
    }
    if (rec->notify)
        sqlite3_bind_text(s, 26, rec->notify, -1, SQLITE_TRANSIENT);
    if (sp->backend == CORE_BACKEND_SLURM)
        sqlite3_bind_text(s, 27, "slurm", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 28, rec->preempt_grace_ms);
    sqlite3_bind_int(s, 29, rec->preempt_signal);
    sqlite3_bind_int64(s, 30, sp->begin);
    sqlite3_bind_int(s, 31, sp->off_peak);
    json_decref(backoff);
    json_decref(deps);
    if (store_step_done(st, s) < 0)
        return -1;
    rec->spec.id = sqlite3_last_insert_rowid(st->db);
    return 0;
}

int64_t store_find_key(struct store *st, const char *key, uid_t uid)
{
    sqlite3_stmt *s = st->q[Q_FIND_KEY];
    int64_t id = 0;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, uid);
    sqlite3_bind_int64(s, 3, getuid());
    if (sqlite3_step(s) == SQLITE_ROW)
        id = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return id;
}

int store_task_state(struct store *st, int64_t id)
{
    sqlite3_stmt *s = st->q[Q_STATE];
    int state = -1;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW)
        state = task_state_parse((const char *)sqlite3_column_text(s, 0));
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return state;
}

int store_set_state(struct store *st, const struct core_action *act, const char *reason,
                    core_time now)
{
    sqlite3_stmt *s = st->q[Q_SET_STATE];
    sqlite3_bind_int64(s, 1, act->task);
    sqlite3_bind_text(s, 2, task_state_name(act->state), -1, SQLITE_STATIC);
    if (reason)
        sqlite3_bind_text(s, 3, reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, now);
    sqlite3_bind_int64(s, 5, act->at);
    sqlite3_bind_int(s, 6, task_state_terminal(act->state));
    return store_step_done(st, s);
}

int store_attempt_start(struct store *st, int64_t task, int attempt, core_time now,
                        const struct core_placement *pl, const char *run_dir)
{
    json_t *gpus = json_array();
    for (int i = 0; i < pl->ngpus; i++)
        json_array_append_new(gpus, json_integer(pl->gpu[i]));
    sqlite3_stmt *s = st->q[Q_ATT_START];
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    sqlite3_bind_int64(s, 3, now);
    sqlite3_bind_int(s, 4, pl->node);
    bind_json(s, 5, gpus);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)pl->gpu_mem);
    sqlite3_bind_text(s, 7, run_dir, -1, SQLITE_TRANSIENT);
    json_decref(gpus);
    if (store_step_done(st, s) < 0)
        return -1;
    s = st->q[Q_ATT_RUNNING];
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    return store_step_done(st, s);
}

int store_attempt_end(struct store *st, int64_t task, int attempt, core_time start,
                      core_time end, int exit_code, int signal, const char *outcome,
                      const char *reason)
{
    sqlite3_stmt *s = st->q[Q_ATT_END];
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    sqlite3_bind_int64(s, 3, start);
    sqlite3_bind_int64(s, 4, end);
    if (exit_code >= 0)
        sqlite3_bind_int(s, 5, exit_code);
    if (signal > 0)
        sqlite3_bind_int(s, 6, signal);
    sqlite3_bind_text(s, 7, outcome, -1, SQLITE_STATIC);
    if (reason)
        sqlite3_bind_text(s, 8, reason, -1, SQLITE_TRANSIENT);
    return store_step_done(st, s);
}

int store_attempt_discard(struct store *st, int64_t task, int attempt)
{
    char *sql = xasprintf("DELETE FROM attempts WHERE task_id = %lld AND n = %d;"
                          " UPDATE tasks SET attempts = %d WHERE id = %lld",
                          (long long)task, attempt, attempt - 1, (long long)task);
    int rc = store_exec(st, sql);
    free(sql);
    return rc;
}

int store_set_array(struct store *st, int64_t first, int64_t last)
{
    char *sql = xasprintf("UPDATE tasks SET array_id = %lld WHERE id BETWEEN %lld AND %lld",
                          (long long)first, (long long)first, (long long)last);
    int rc = store_exec(st, sql);
    free(sql);
    return rc;
}

int store_set_priority(struct store *st, int64_t id, int priority)
{
    char *sql = xasprintf("UPDATE tasks SET priority = %d WHERE id = %lld", priority,
                          (long long)id);
    int rc = store_exec(st, sql);
    free(sql);
    return rc;
}

int store_reset_for_retry(struct store *st, int64_t id)
{
    char *sql = xasprintf("UPDATE tasks SET base_attempts = attempts, end_time = NULL,"
                          " reason = 'retried by user' WHERE id = %lld", (long long)id);
    int rc = store_exec(st, sql);
    free(sql);
    return rc;
}

int store_set_setting(struct store *st, const char *key, const char *value)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO settings (key, value) VALUES (?1, ?2)",
                           -1, &s, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, value, -1, SQLITE_STATIC);
    int rc = store_step_done(st, s);
    sqlite3_finalize(s);
    return rc;
}

char *store_setting(struct store *st, const char *key)
{
    sqlite3_stmt *s;
    char *value = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT value FROM settings WHERE key = ?1", -1, &s, NULL) !=
        SQLITE_OK)
        return NULL;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        value = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return value;
}

sqlite3 *store_db(struct store *st)
{
    return st->db;
}

sqlite3_stmt *store_prepare(struct store *st, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return NULL;
    return s;
}

sqlite3_stmt *store_prepare_cached(struct store *st, const char *sql)
{
    for (int i = 0; i < st->ncached; i++)
        if (st->cached[i].sql == sql)
            return st->cached[i].s;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        return NULL;
    if (st->ncached == (int)(sizeof st->cached / sizeof st->cached[0]))
        fatalx("store_prepare_cached: more than %d statements", st->ncached);
    st->cached[st->ncached++] = (struct store_cached){sql, s};
    return s;
}

void store_cached_done(sqlite3_stmt *s)
{
    if (s != NULL) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

int store_step_once(sqlite3_stmt *s)
{
    int rc = s != NULL && sqlite3_step(s) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(s);
    return rc;
}

int store_failed(struct store *st, int rc)
{
    free(st->error);
    st->error = xstrdup(sqlite3_errmsg(st->db));
    st->code = rc & 0xff;
    return -1;
}

json_t *store_task_exec_info(struct store *st, int64_t id)
{
    sqlite3_stmt *s = st->q[Q_EXEC_INFO];
    json_t *info = NULL;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        info = json_object();
        json_object_set_new(info, "command",
                            json_loads((const char *)sqlite3_column_text(s, 0), 0, NULL));
        /* The text is compared too: an id a rolled-back insert used may come back. */
        const char *env_text = (const char *)sqlite3_column_text(s, 1);
        if (st->env == NULL || st->env_id != sqlite3_column_int64(s, 15) ||
            strcmp(st->env_text, env_text) != 0) {
            json_decref(st->env);
            free(st->env_text);
            st->env = json_loads(env_text, 0, NULL);
            st->env_text = xstrdup(env_text);
            st->env_id = sqlite3_column_int64(s, 15);
        }
        json_object_set(info, "env", st->env); /* shared: callers only read it */
        json_object_set_new(info, "workdir",
                            json_string((const char *)sqlite3_column_text(s, 2)));
        json_object_set_new(info, "timeout_ms", json_integer(sqlite3_column_int64(s, 3)));
        json_object_set_new(info, "array_index", json_integer(sqlite3_column_int64(s, 4)));
        json_object_set_new(info, "stall_ms", json_integer(sqlite3_column_int64(s, 5)));
        /* The owner; absent when not recorded (a per-user daemon's own tasks). */
        if (sqlite3_column_type(s, 7) != SQLITE_NULL) {
            json_object_set_new(info, "uid", json_integer(sqlite3_column_int64(s, 6)));
            json_object_set_new(info, "user",
                                json_string((const char *)sqlite3_column_text(s, 7)));
        }
        /* What a Slurm attempt's sbatch needs beside (daemon/slurm.c). */
        if (sqlite3_column_type(s, 8) != SQLITE_NULL)
            json_object_set_new(info, "name",
                                json_string((const char *)sqlite3_column_text(s, 8)));
        json_object_set_new(info, "gpus", json_integer(sqlite3_column_int64(s, 9)));
        if (sqlite3_column_type(s, 10) != SQLITE_NULL)
            json_object_set_new(info, "gpu_type",
                                json_string((const char *)sqlite3_column_text(s, 10)));
        json_object_set_new(info, "cpus", json_integer(sqlite3_column_int64(s, 11)));
        json_object_set_new(info, "mem", json_integer(sqlite3_column_int64(s, 12)));
        json_object_set_new(info, "array_id", json_integer(sqlite3_column_int64(s, 13)));
        json_object_set_new(info, "array_limit", json_integer(sqlite3_column_int64(s, 14)));
        if (sqlite3_column_int64(s, 16) > 0) {
            json_object_set_new(info, "preempt_grace_ms",
                                json_integer(sqlite3_column_int64(s, 16)));
            json_object_set_new(info, "preempt_signal",
                                json_integer(sqlite3_column_int64(s, 17)));
        }
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return info;
}

static void store_parse_deps(struct store *st, const char *text, struct core_task_spec *spec,
                             struct core_dep **out)
{
    json_t *deps = json_loads(text, 0, NULL);
    size_t n = json_array_size(deps);
    struct core_dep *d = xcalloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(deps, i);
        d[i].id = json_integer_value(json_array_get(e, 0));
        d[i].kind = strcmp(json_string_value(json_array_get(e, 1)), "ok") == 0 ? DEP_AFTER_OK
                                                                             : DEP_AFTER_ANY;
        int state = store_task_state(st, d[i].id);
        d[i].state = state >= 0 && task_state_terminal(state) ? state : -1;
    }
    json_decref(deps);
    spec->ndeps = n;
    spec->deps = d;
    *out = d;
}

int store_task_spec(struct store *st, int64_t id, struct core_task_spec *spec,
                    struct core_dep **deps, char **gpu_type)
{
    sqlite3_stmt *s = st->q[Q_SPEC];
    int rc = -1;
    char *backoff = NULL, *deptext = NULL;
    memset(spec, 0, sizeof *spec);
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        spec->id = id;
        spec->priority = sqlite3_column_int(s, 0);
        spec->submit_time = sqlite3_column_int64(s, 1);
        spec->req.gpus = sqlite3_column_int(s, 2);
        spec->req.gpu_mem = (uint64_t)sqlite3_column_int64(s, 3);
        spec->req.cpus = sqlite3_column_int(s, 4);
        spec->req.mem = (uint64_t)sqlite3_column_int64(s, 5);
        spec->req.time_limit = sqlite3_column_int64(s, 6);
        spec->max_retries = sqlite3_column_int(s, 7);
        backoff = xstrdup((const char *)sqlite3_column_text(s, 8));
        deptext = xstrdup((const char *)sqlite3_column_text(s, 9));
        spec->array_id = sqlite3_column_int64(s, 10);
        spec->array_limit = sqlite3_column_int(s, 11);
        spec->retry_base = sqlite3_column_int(s, 12);
        spec->attempts = sqlite3_column_int(s, 13);
        spec->user = sqlite3_column_type(s, 15) == SQLITE_NULL
                         ? (uint32_t)getuid() /* not recorded: the daemon's own user's */
                         : (uint32_t)sqlite3_column_int64(s, 15);
        spec->backend = sqlite3_column_type(s, 16) == SQLITE_NULL ? CORE_BACKEND_LOCAL
                                                                  : CORE_BACKEND_SLURM;
        spec->preemptible = sqlite3_column_int(s, 17) != 0;
        spec->run_ms = sqlite3_column_int64(s, 18);
        spec->service = (double)spec->req.gpus * (double)spec->run_ms;
        spec->begin = sqlite3_column_int64(s, 19);
        spec->off_peak = sqlite3_column_int(s, 20) != 0;
        if (gpu_type != NULL)
            *gpu_type = sqlite3_column_type(s, 14) == SQLITE_NULL
                            ? NULL : xstrdup((const char *)sqlite3_column_text(s, 14));
        rc = 0;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc < 0)
        return -1;
    json_t *b = json_loads(backoff, 0, NULL);
    for (size_t i = 0; i < json_array_size(b) && i < CORE_MAX_BACKOFF; i++)
        spec->backoff[spec->nbackoff++] = json_integer_value(json_array_get(b, i));
    json_decref(b);
    store_parse_deps(st, deptext, spec, deps);
    free(backoff);
    free(deptext);
    return 0;
}

int store_task_preempt_overruns(struct store *st, int64_t id)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT preempt_overruns FROM tasks WHERE id = ?1",
                                  STORE_INT(id));
    int n = s != NULL && sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    return n;
}

int store_task_preempted(struct store *st, int64_t id, bool overrun, const char *off)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE tasks SET base_attempts = base_attempts + 1,"
                                        " preempt_overruns = preempt_overruns + ?2,"
                                        " preempt_off = COALESCE(?3, preempt_off) WHERE id = ?1");
    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, overrun ? 1 : 0);
    if (off != NULL)
        sqlite3_bind_text(s, 3, off, -1, SQLITE_TRANSIENT);
    return store_step_once(s);
}

char *store_trial_of_task(struct store *st, int64_t task, int *trial)
{
    sqlite3_stmt *s = st->q[Q_TRIAL];
    char *exp = NULL;
    sqlite3_bind_int64(s, 1, task);
    if (sqlite3_step(s) == SQLITE_ROW) {
        exp = xstrdup((const char *)sqlite3_column_text(s, 0));
        *trial = sqlite3_column_int(s, 1);
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return exp;
}
