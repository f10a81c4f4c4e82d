/* Who did what: the audit log (every state change a person caused, written in the transaction
 * of the change) and the per-user counts behind `drover users`. */
#include "store/rows.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int store_audit(struct store *st, int64_t now, uid_t uid, const char *user, const char *op,
                const char *target, const char *detail)
{
    sqlite3_stmt *s = store_prepare_cached(st, "INSERT INTO audit (ts, uid, user, op, target,"
                                               " detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, uid);
    sqlite3_bind_text(s, 3, user, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, op, -1, SQLITE_STATIC);
    if (target != NULL)
        sqlite3_bind_text(s, 5, target, -1, SQLITE_STATIC);
    if (detail != NULL)
        sqlite3_bind_text(s, 6, detail, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    rc = rc == SQLITE_DONE ? 0 : store_failed(st, rc);
    store_cached_done(s);
    return rc;
}

static json_t *audit_row(sqlite3_stmt *s, void *arg)
{
    (void)arg;
    return json_pack("{s:I,s:I,s:I,s:s,s:s,s:o,s:o}", "id", (json_int_t)sqlite3_column_int64(s, 0),
                     "ts", (json_int_t)sqlite3_column_int64(s, 1), "uid",
                     (json_int_t)sqlite3_column_int64(s, 2), "user",
                     (const char *)sqlite3_column_text(s, 3), "op",
                     (const char *)sqlite3_column_text(s, 4), "target",
                     store_text_or_null(s, 5), "detail", store_text_or_null(s, 6));
}

json_t *store_audit_list(struct store *st, int64_t since)
{
    return store_rows(STORE_QUERY(st, "SELECT id, ts, uid, user, op, target, detail FROM audit"
                                      " WHERE ts >= ?1 ORDER BY id",
                                  STORE_INT(since)),
                      audit_row, NULL);
}

const char *store_own_user(void)
{
    static char name[64];
    if (name[0] == '\0') {
        struct passwd *pw = getpwuid(getuid());
        if (pw != NULL && strlen(pw->pw_name) < sizeof name)
            snprintf(name, sizeof name, "%s", pw->pw_name);
        else
            snprintf(name, sizeof name, "%u", (unsigned)getuid());
    }
    return name;
}

static json_t *users_row(sqlite3_stmt *s, void *arg)
{
    (void)arg;
    bool recorded = sqlite3_column_type(s, 1) != SQLITE_NULL;
    return json_pack("{s:I,s:s,s:I,s:I,s:I,s:I}", "uid", (json_int_t)sqlite3_column_int64(s, 0),
                     "user", recorded ? (const char *)sqlite3_column_text(s, 1) : store_own_user(),
                     "running", (json_int_t)sqlite3_column_int64(s, 2), "waiting",
                     (json_int_t)sqlite3_column_int64(s, 3), "queued",
                     (json_int_t)sqlite3_column_int64(s, 4), "gpus",
                     (json_int_t)sqlite3_column_int64(s, 5));
}

json_t *store_users(struct store *st)
{
    return store_rows(
        STORE_QUERY(st, "SELECT ifnull(uid, ?1) AS owner, MAX(user), SUM(state = 'running'),"
                        " SUM(state IN ('held','pending','queued','retrying')),"
                        " SUM(state = 'queued'), SUM(CASE WHEN state = 'running' THEN gpus"
                        " ELSE 0 END) FROM tasks WHERE state NOT IN ('succeeded','failed',"
                        "'timed_out','cancelled','upstream_failed') GROUP BY owner ORDER BY owner",
                    STORE_INT(getuid())),
        users_row, NULL);
}
