/* The HTTP API's credentials (docs/API.md, "Authentication"): API tokens (kind 'token') and the
 * dashboard's sessions (kind 'session'), each known by the hex SHA-256 of its whole text only.
 * The daemon makes and hashes them (daemon/api-auth.c); the store never sees a secret. */
#include "store/rows.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <string.h>

/* The hash a row holds between its insert and store_token_set_hash, in one transaction: the
 * hash covers the token's text, which names the id the insert chose. */
#define TOKEN_PENDING_HASH "pending"

int store_token_insert(struct store *st, struct store_token *t, const char *name)
{
    if (store_write(st, STORE_QUERY(st, "INSERT INTO tokens (uid, user, name, hash, kind,"
                                        " read_only, created, expires, csrf) VALUES (?1, ?2, ?3,"
                                        " ?4, ?5, ?6, ?7, nullif(?8, 0), nullif(?9, ''))",
                                    STORE_INT(t->uid), STORE_TEXT(t->user), STORE_TEXT(name),
                                    STORE_TEXT(TOKEN_PENDING_HASH),
                                    STORE_TEXT(t->session ? "session" : "token"),
                                    STORE_INT(t->read_only), STORE_INT(t->created),
                                    STORE_INT(t->expires), STORE_TEXT(t->csrf))) < 0)
        return -1;
    t->id = sqlite3_last_insert_rowid(store_db(st));
    return 0;
}

int store_token_set_hash(struct store *st, int64_t id, const char *hash)
{
    return store_write(st, STORE_QUERY(st, "UPDATE tokens SET hash = ?2 WHERE id = ?1",
                                       STORE_INT(id), STORE_TEXT(hash)));
}

/* A text column copied into buf (len bytes, truncated), "" when NULL. */
static void token_text(sqlite3_stmt *s, int col, char *buf, size_t len)
{
    const unsigned char *v = sqlite3_column_text(s, col);
    snprintf(buf, len, "%s", v ? (const char *)v : "");
}

int store_token_get(struct store *st, int64_t id, struct store_token *t)
{
    sqlite3_stmt *s = STORE_QUERY(st, "SELECT id, uid, user, kind, read_only, created,"
                                      " ifnull(expires, 0), ifnull(last_used, 0),"
                                      " ifnull(revoked, 0), hash, csrf FROM tokens WHERE id = ?1",
                                  STORE_INT(id));
    if (s == NULL)
        return store_failed(st, sqlite3_errcode(store_db(st)));
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(s);
        return rc == SQLITE_DONE ? 0 : store_failed(st, rc);
    }
    memset(t, 0, sizeof *t);
    t->id = sqlite3_column_int64(s, 0);
    t->uid = (uid_t)sqlite3_column_int64(s, 1);
    token_text(s, 2, t->user, sizeof t->user);
    t->session = strcmp((const char *)sqlite3_column_text(s, 3), "session") == 0;
    t->read_only = sqlite3_column_int(s, 4) != 0;
    t->created = sqlite3_column_int64(s, 5);
    t->expires = sqlite3_column_int64(s, 6);
    t->last_used = sqlite3_column_int64(s, 7);
    t->revoked = sqlite3_column_int64(s, 8);
    token_text(s, 9, t->hash, sizeof t->hash);
    token_text(s, 10, t->csrf, sizeof t->csrf);
    sqlite3_finalize(s);
    return 1;
}

static json_t *token_row(sqlite3_stmt *s, void *arg)
{
    (void)arg;
    return json_pack("{s:I,s:o,s:s,s:I,s:s,s:b,s:I,s:o,s:o,s:o}", "id",
                     (json_int_t)sqlite3_column_int64(s, 0), "name", store_text_or_null(s, 1),
                     "user", (const char *)sqlite3_column_text(s, 2), "uid",
                     (json_int_t)sqlite3_column_int64(s, 3), "kind",
                     (const char *)sqlite3_column_text(s, 4), "read_only",
                     sqlite3_column_int(s, 5) != 0, "created",
                     (json_int_t)sqlite3_column_int64(s, 6), "expires", store_int_or_null(s, 7),
                     "last_used", store_int_or_null(s, 8), "revoked", store_int_or_null(s, 9));
}

json_t *store_token_list(struct store *st, bool all, uid_t uid, bool sessions)
{
    return store_rows(STORE_QUERY(st, "SELECT id, name, user, uid, kind, read_only, created,"
                                      " expires, last_used, revoked FROM tokens WHERE (?1 OR"
                                      " uid = ?2) AND (?3 OR kind = 'token') ORDER BY id",
                                  STORE_INT(all), STORE_INT(uid), STORE_INT(sessions)),
                      token_row, NULL);
}

int store_token_revoke(struct store *st, int64_t id, int64_t now)
{
    return store_write(st, STORE_QUERY(st, "UPDATE tokens SET revoked = ?2 WHERE id = ?1 AND"
                                           " revoked IS NULL",
                                       STORE_INT(id), STORE_INT(now)));
}

int store_token_used(struct store *st, int64_t id, int64_t now)
{
    return store_write(st, STORE_QUERY(st, "UPDATE tokens SET last_used = ?2 WHERE id = ?1",
                                       STORE_INT(id), STORE_INT(now)));
}

int store_token_prune_sessions(struct store *st, int64_t before)
{
    return store_write(st, STORE_QUERY(st, "DELETE FROM tokens WHERE kind = 'session' AND"
                                           " (expires < ?1 OR revoked < ?1)",
                                       STORE_INT(before)));
}
