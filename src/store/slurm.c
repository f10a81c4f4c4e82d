/* What the store keeps of Slurm attempts (issue 12): the job id sbatch gave each, and what the
 * last poll said of it (daemon/slurm.c). */
#include "store/internal.h"
#include "util/xalloc.h"

#include <string.h>

int store_attempt_slurm_job(struct store *st, int64_t task, int attempt, const char *job)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE attempts SET slurm_job = ?3"
                                        " WHERE task_id = ?1 AND n = ?2");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    sqlite3_bind_text(s, 3, job, -1, SQLITE_TRANSIENT);
    return store_step_once(s) < 0 ? store_failed(st, sqlite3_errcode(store_db(st))) : 0;
}

int store_attempt_slurm_state(struct store *st, int64_t task, int attempt, const char *state,
                              const char *reason)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE attempts SET slurm_state = ?3, slurm_reason = ?4"
                                        " WHERE task_id = ?1 AND n = ?2");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    sqlite3_bind_text(s, 3, state, -1, SQLITE_TRANSIENT);
    if (reason != NULL && reason[0] != '\0' && strcmp(reason, "None") != 0)
        sqlite3_bind_text(s, 4, reason, -1, SQLITE_TRANSIENT);
    return store_step_once(s) < 0 ? store_failed(st, sqlite3_errcode(store_db(st))) : 0;
}

char *store_attempt_slurm_job_of(struct store *st, int64_t task, int attempt)
{
    sqlite3_stmt *s = store_prepare(st, "SELECT slurm_job FROM attempts"
                                        " WHERE task_id = ?1 AND n = ?2");
    char *job = NULL;
    if (s == NULL)
        return NULL;
    sqlite3_bind_int64(s, 1, task);
    sqlite3_bind_int(s, 2, attempt);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
        job = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return job;
}

int store_task_slurm(struct store *st, int64_t task)
{
    sqlite3_stmt *s = store_prepare(st, "UPDATE tasks SET backend = 'slurm'"
                                        " WHERE id = ?1 AND backend IS NULL");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, task);
    return store_step_once(s) < 0 ? store_failed(st, sqlite3_errcode(store_db(st))) : 0;
}
