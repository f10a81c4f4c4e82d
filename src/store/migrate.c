/* The store's schema and its migrations: drover.db's PRAGMA user_version is the number of
 * entries applied; a newer drover applies the rest at open, each in its own transaction. */
#include "store/internal.h"
#include "util/xalloc.h"

#include <stdlib.h>

/* The schema, one entry per version: store_migrate() applies those above user_version. */
static const char *const store_migrations[] = {
    "CREATE TABLE envs (id INTEGER PRIMARY KEY, json TEXT NOT NULL UNIQUE);"
    "CREATE TABLE tasks ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT, state TEXT NOT NULL, reason TEXT,"
    " command TEXT NOT NULL, workdir TEXT NOT NULL, env_id INTEGER NOT NULL REFERENCES envs(id),"
    " idem_key TEXT UNIQUE,"
    " priority INTEGER NOT NULL, gpus INTEGER NOT NULL, gpu_mem INTEGER NOT NULL,"
    " cpus INTEGER NOT NULL, mem INTEGER NOT NULL, timeout_ms INTEGER NOT NULL,"
    " retries INTEGER NOT NULL, backoff TEXT NOT NULL, deps TEXT NOT NULL,"
    " array_id INTEGER NOT NULL, array_index INTEGER NOT NULL, array_limit INTEGER NOT NULL,"
    " submit_time INTEGER NOT NULL, ready_time INTEGER NOT NULL DEFAULT 0,"
    " retry_at INTEGER NOT NULL DEFAULT 0, end_time INTEGER,"
    " attempts INTEGER NOT NULL DEFAULT 0, base_attempts INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX tasks_live ON tasks(state) WHERE state NOT IN"
    " ('succeeded','failed','timed_out','cancelled','upstream_failed');"
    "CREATE INDEX tasks_end ON tasks(end_time);"
    "CREATE TABLE attempts ("
    " task_id INTEGER NOT NULL REFERENCES tasks(id), n INTEGER NOT NULL,"
    " start_ms INTEGER NOT NULL, end_ms INTEGER, exit_code INTEGER, signal INTEGER,"
    " outcome TEXT, reason TEXT, node INTEGER NOT NULL, gpus TEXT NOT NULL,"
    " gpu_mem INTEGER NOT NULL, run_dir TEXT NOT NULL, PRIMARY KEY (task_id, n));"
    "CREATE INDEX attempts_open ON attempts(task_id) WHERE end_ms IS NULL;",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    /* GPU telemetry (issue 4): what tasks use, and the GPUs' series. */
    "ALTER TABLE tasks ADD COLUMN profile TEXT;"
    "ALTER TABLE tasks ADD COLUMN stall_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN claim_source TEXT;"
    "ALTER TABLE attempts ADD COLUMN peak_gpu_mem INTEGER;"
    "ALTER TABLE attempts ADD COLUMN mean_gpu_util REAL;"
    "CREATE INDEX tasks_profile ON tasks(profile);"
    "CREATE TABLE gpu_samples (ts INTEGER NOT NULL, gpu INTEGER NOT NULL, util INTEGER,"
    " mem_used INTEGER, temp INTEGER, power_mw INTEGER);"
    "CREATE INDEX gpu_samples_ts ON gpu_samples(ts);"
    "CREATE TABLE gpu_minutes (ts INTEGER NOT NULL, gpu INTEGER NOT NULL, util REAL,"
    " mem_used REAL, temp REAL, power_mw REAL, n INTEGER NOT NULL, PRIMARY KEY (ts, gpu));",
    /* Experiments (issue 5): a template's tasks, their metrics, early stopping. */
    "CREATE TABLE experiments (name TEXT PRIMARY KEY, kind TEXT NOT NULL, spec TEXT NOT NULL,"
    " state TEXT NOT NULL, reason TEXT, created INTEGER NOT NULL, seed INTEGER NOT NULL,"
    " next_trial INTEGER NOT NULL, space INTEGER NOT NULL, failures INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE trials (exp TEXT NOT NULL REFERENCES experiments(name), trial INTEGER NOT NULL,"
    " task_id INTEGER NOT NULL UNIQUE REFERENCES tasks(id), stage TEXT, params TEXT NOT NULL,"
    " stopped_early INTEGER NOT NULL DEFAULT 0, stop_reason TEXT, rung INTEGER,"
    " PRIMARY KEY (exp, task_id));"
    "CREATE TABLE metrics (task_id INTEGER NOT NULL, step INTEGER NOT NULL, name TEXT NOT NULL,"
    " value REAL NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (task_id, name, step));",
    /* One request model (issue 10): the GPU type pattern a task asked for, matched again
     * against the machine's GPUs whenever the task is restored or retried. */
    "ALTER TABLE tasks ADD COLUMN gpu_type TEXT;",
    /* A shared machine (issue 15): each task's owner, as the kernel named the submitter. NULL
     * for tasks of a per-user daemon from before: their owner is the daemon's user. */
    "ALTER TABLE tasks ADD COLUMN uid INTEGER; ALTER TABLE tasks ADD COLUMN user TEXT;",
    /* Issue 15, ownership: an idempotency key is its owner's (task_key, unique per uid; the
     * old idem_key column, unique across everyone, is left empty), experiments record their
     * owner, and the audit log records what people did. */
    "ALTER TABLE tasks ADD COLUMN task_key TEXT;"
    "UPDATE tasks SET task_key = idem_key, idem_key = NULL WHERE idem_key IS NOT NULL;"
    "CREATE UNIQUE INDEX tasks_key ON tasks(uid, task_key) WHERE task_key IS NOT NULL;"
    "ALTER TABLE experiments ADD COLUMN uid INTEGER; ALTER TABLE experiments ADD COLUMN user TEXT;"
    "CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL,"
    " uid INTEGER NOT NULL, user TEXT NOT NULL, op TEXT NOT NULL, target TEXT, detail TEXT);"
    "CREATE INDEX audit_ts ON audit(ts);",
    /* The HTTP API (issue 11): tokens (kind 'token') and dashboard sessions (kind 'session'),
     * each known by the SHA-256 of its secret only; a task's webhook, and the webhooks still to
     * be delivered (written in the transaction of the end they announce). */
    "CREATE TABLE tokens (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL,"
    " user TEXT NOT NULL, name TEXT, hash TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,"
    " read_only INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL, expires INTEGER,"
    " last_used INTEGER, revoked INTEGER, csrf TEXT);"
    "ALTER TABLE tasks ADD COLUMN notify TEXT;"
    "CREATE TABLE notify_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL,"
    " body TEXT NOT NULL, created INTEGER NOT NULL, tries INTEGER NOT NULL DEFAULT 0,"
    " next_at INTEGER NOT NULL, last_error TEXT);",
    /* The webhook outbox is read by next due (daemon/notify.c), however many rows wait. */
    "CREATE INDEX notify_outbox_next ON notify_outbox(next_at, id);",
    /* Listing a deep store (the HTTP API's pages and their X-Total-Count): a count reads this
     * covering index instead of every task's row. */
    "CREATE INDEX tasks_list ON tasks(state, end_time, uid, user);",
    /* Slurm (issue 12): a task's backend ('slurm'; NULL = this machine), and each Slurm
     * attempt's job id ('123' or '123_4') and what the last poll said of it. */
    "ALTER TABLE tasks ADD COLUMN backend TEXT;"
    "ALTER TABLE attempts ADD COLUMN slurm_job TEXT;"
    "ALTER TABLE attempts ADD COLUMN slurm_state TEXT;"
    "ALTER TABLE attempts ADD COLUMN slurm_reason TEXT;",
    /* Preemption (issue 14): a preemptible task's grace (0: not preemptible) and signal (0:
     * SIGTERM), how often it overran that grace, and why it is no longer preemptible (NULL:
     * it still is). */
    "ALTER TABLE tasks ADD COLUMN preempt_grace_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN preempt_signal INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN preempt_overruns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN preempt_off TEXT;",
    /* Off-peak windows (issue 14): a task's --begin (epoch ms; 0 = none) and --off-peak. (The
     * parentheses tell clang that the two literals are one element on purpose.) */
    ("ALTER TABLE tasks ADD COLUMN begin_ms INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE tasks ADD COLUMN off_peak INTEGER NOT NULL DEFAULT 0;"),
    /* RabbitMQ (issue 16): the events not yet confirmed by the broker, in the order they
     * happened (written in the transaction of the change they announce), and how many were
     * dropped while it was away (settings 'amqp_dropped'). */
    "CREATE TABLE amqp_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, routing_key TEXT NOT NULL,"
    " body TEXT NOT NULL, created INTEGER NOT NULL);",
};

int store_migrate(struct store *st)
{
    sqlite3_stmt *s;
    int version = 0, n = (int)(sizeof store_migrations / sizeof store_migrations[0]);
    if (sqlite3_prepare_v2(store_db(st), "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (version > n) {
        store_set_error(st, xasprintf("database schema %d is newer than this drover (%d)",
                                      version, n));
        return -1;
    }
    for (int v = version; v < n; v++) {
        char *bump = xasprintf("PRAGMA user_version = %d", v + 1);
        int rc = store_exec(st, "BEGIN IMMEDIATE");
        if (rc == 0)
            rc = store_exec(st, store_migrations[v]);
        if (rc == 0)
            rc = store_exec(st, bump);
        free(bump);
        if (rc == 0)
            rc = store_exec(st, "COMMIT");
        if (rc < 0) {
            store_exec(st, "ROLLBACK");
            return -1;
        }
    }
    return 0;
}
