/* The API's credentials over the socket: token_create, token_ls, token_revoke, login_code (the
 * CLI's `drover token …` and `drover dashboard`; the HTTP API runs the same ops through
 * api_call, so the permissions are these). Also issuing a credential into the store, and what
 * the daemon remembers of them (d->api: login codes, when each token was last marked used).
 * daemon/api-internal.h has the format; daemon/auth.c its text and hash. */
#include "daemon/api-internal.h"
#include "daemon/api.h"
#include "daemon/ops.h"
#include "util/xalloc.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_NAME_MAX 200

/* ---- issuing ---------------------------------------------------------------------------- */

int auth_issue(struct daemon *d, struct store_token *t, const char *name,
               char out[AUTH_TEXT_MAX], char **err)
{
    char secret[AUTH_SECRET_CHARS + 2];
    if (auth_random(AUTH_SECRET_BYTES, secret) < 0) {
        *err = xstrdup("the random number generator failed");
        return -1;
    }
    if (store_token_insert(d->store, t, name) < 0) {
        *err = xstrdup(store_error(d->store));
        return -1;
    }
    snprintf(out, AUTH_TEXT_MAX, AUTH_PREFIX "%lld_%s", (long long)t->id, secret);
    OPENSSL_cleanse(secret, sizeof secret);
    auth_sha256_hex(out, t->hash);
    if (store_token_set_hash(d->store, t->id, t->hash) < 0) {
        OPENSSL_cleanse(out, AUTH_TEXT_MAX);
        *err = xstrdup(store_error(d->store));
        return -1;
    }
    return 0;
}

/* ---- what the daemon remembers ----------------------------------------------------------- */

/* One daemon per process, so its API state is this process's: static, so that nothing is left
 * to free however the daemon ends (api_state_free only wipes the codes). */
static struct api_state api_state_storage;

struct api_state *api_state_get(struct daemon *d)
{
    if (d->api == NULL)
        d->api = &api_state_storage;
    return d->api;
}

void api_state_free(struct daemon *d)
{
    if (d->api == NULL)
        return;
    OPENSSL_cleanse(d->api, sizeof *d->api);
    d->api = NULL;
}

bool auth_used_due(struct daemon *d, int64_t id, int64_t now)
{
    struct api_state *a = api_state_get(d);
    for (size_t i = 0; i < a->nused; i++) {
        if (a->used[i].id != id)
            continue;
        if (now - a->used[i].at < AUTH_USED_EVERY_MS && now >= a->used[i].at)
            return false;
        a->used[i].at = now;
        return true;
    }
    if (a->nused == AUTH_USED_MAX) /* many tokens: forget, at worst one more write each */
        a->nused = 0;
    a->used[a->nused++] = (struct auth_used){.id = id, .at = now};
    return true;
}

/* ---- the ops ----------------------------------------------------------------------------- */

/* err with "field": the request's field it is about (the HTTP API's {"error", "field"}). */
static json_t *token_field_error(const char *field, json_t *err)
{
    json_object_set_new(err, "field", json_string(field));
    return err;
}

/* token_create {name?, expires_ms?, read_only?} → {ok, id, token, name, expires, read_only}:
 * the only time the token's text is shown. Audited without it. */
json_t *op_token_create(struct daemon *d, struct conn *c, json_t *req)
{
    json_t *name = json_object_get(req, "name"), *ro = json_object_get(req, "read_only"), *err;
    long long expires_ms;
    if (name != NULL && !json_is_null(name) &&
        (!json_is_string(name) || json_string_length(name) == 0 ||
         json_string_length(name) > TOKEN_NAME_MAX ||
         strlen(json_string_value(name)) != json_string_length(name) ||
         strchr(json_string_value(name), '\n')))
        return token_field_error("name", reply_error(2, "'name' must be a line of text of 1 to"
                                                        " %d bytes", TOKEN_NAME_MAX));
    if (ro != NULL && !json_is_null(ro) && !json_is_boolean(ro))
        return token_field_error("read_only", reply_error(2, "'read_only' must be true or"
                                                             " false"));
    /* At most ten years: a token that should never expire leaves expires_ms out. */
    if (ops_get_int(req, "expires_ms", 1, 10LL * 366 * 24 * 3600 * 1000, 0, &expires_ms,
                    &err) < 0)
        return token_field_error("expires", err);
    const struct peer *who = conn_peer(c);
    int64_t now = daemon_now();
    struct store_token t = {.uid = who->uid, .read_only = json_is_true(ro), .created = now,
                            .expires = expires_ms > 0 ? now + expires_ms : 0};
    snprintf(t.user, sizeof t.user, "%s", who->name);
    const char *label = json_is_string(name) ? json_string_value(name) : NULL;
    char text[AUTH_TEXT_MAX], target[48], *why = NULL;
    store_begin(d->store);
    if (auth_issue(d, &t, label, text, &why) < 0) {
        store_rollback(d->store);
        err = reply_error(1, "cannot create the token: %s", why);
        free(why);
        return err;
    }
    snprintf(target, sizeof target, "token %lld", (long long)t.id);
    char *detail = xasprintf("%s%s%s", t.read_only ? "read-only" : "read-write",
                             label ? ", name " : "", label ? label : "");
    int rc = ops_audit(d, c, "token_create", target, detail);
    free(detail);
    if (rc < 0 || store_commit(d->store) < 0) {
        store_rollback(d->store);
        OPENSSL_cleanse(text, sizeof text);
        return reply_error(1, "cannot create the token: %s", store_error(d->store));
    }
    json_t *reply = json_pack("{s:b,s:I,s:s,s:o,s:o,s:b}", "ok", 1, "id", (json_int_t)t.id,
                              "token", text, "name", label ? json_string(label) : json_null(),
                              "expires", t.expires ? json_integer(t.expires) : json_null(),
                              "read_only", t.read_only);
    OPENSSL_cleanse(text, sizeof text);
    return reply;
}

/* token_ls {all?} → {ok, tokens}: the caller's tokens; every user's, sessions too, for an
 * admin who asks for all. */
json_t *op_token_ls(struct daemon *d, struct conn *c, json_t *req)
{
    json_t *all = json_object_get(req, "all");
    if (all != NULL && !json_is_null(all) && !json_is_boolean(all))
        return reply_error(2, "'all' must be true or false");
    bool every = json_is_true(all);
    if (every && !conn_peer(c)->admin)
        return reply_error(OPS_NOT_PERMITTED, "not permitted: every user's tokens are for"
                                              " admins (root and the members of the admins"
                                              " group)");
    return json_pack("{s:b,s:o}", "ok", 1, "tokens",
                     store_token_list(d->store, every, conn_peer(c)->uid, every));
}

/* token_revoke {id}: the caller's own token or session, or anyone's for an admin. Revoking
 * one already revoked changes nothing and succeeds. Audited. */
json_t *op_token_revoke(struct daemon *d, struct conn *c, json_t *req)
{
    long long id;
    json_t *err;
    struct store_token t;
    char what[48];
    if (json_object_get(req, "id") == NULL)
        return reply_error(2, "no token id given");
    if (ops_get_int(req, "id", 1, INT64_MAX, 0, &id, &err) < 0)
        return err;
    int found = store_token_get(d->store, id, &t);
    if (found < 0)
        return reply_error(1, "cannot read the tokens: %s", store_error(d->store));
    if (found == 0) {
        err = reply_error(2, "no token %lld", id);
        json_object_set_new(err, "not_found", json_true());
        return err;
    }
    snprintf(what, sizeof what, "%s %lld", t.session ? "session" : "token", id);
    if (!ops_may(d, c, t.uid, t.user, what, &err))
        return err;
    if (t.revoked != 0)
        return reply_ok();
    store_begin(d->store);
    if (store_token_revoke(d->store, id, daemon_now()) < 0 ||
        ops_audit(d, c, "token_revoke", what, NULL) < 0 || store_commit(d->store) < 0) {
        store_rollback(d->store);
        return reply_error(1, "cannot revoke %s: %s", what, store_error(d->store));
    }
    return reply_ok();
}

/* login_code {} → {ok, code, url, expires}: a one-time code for the caller's dashboard login
 * (GET /login?code=CODE), valid AUTH_CODE_MS. Only its hash is kept, in memory. */
json_t *op_login_code(struct daemon *d, struct conn *c, json_t *req)
{
    (void)req;
    if (d->cfg.http == NULL)
        return reply_error(2, "the daemon serves no HTTP: set http = 127.0.0.1:8420 in"
                              " drover.conf");
    struct api_state *a = api_state_get(d);
    int64_t now = daemon_now();
    struct auth_code *slot = NULL;
    for (size_t i = 0; i < AUTH_CODES_MAX; i++) {
        if (a->codes[i].hash[0] != '\0' && a->codes[i].expires <= now)
            memset(&a->codes[i], 0, sizeof a->codes[i]);
        if (slot == NULL && a->codes[i].hash[0] == '\0')
            slot = &a->codes[i];
    }
    if (slot == NULL)
        return reply_error(3, "too many login codes outstanding: try again in a minute");
    char code[AUTH_CODE_BYTES * 2];
    if (auth_random(AUTH_CODE_BYTES, code) < 0)
        return reply_error(1, "cannot make a login code: the random number generator failed");
    const struct peer *who = conn_peer(c);
    auth_sha256_hex(code, slot->hash);
    slot->uid = who->uid;
    slot->gid = who->gid;
    slot->expires = now + AUTH_CODE_MS;
    json_t *reply = json_pack("{s:b,s:s,s:o,s:I}", "ok", 1, "code", code, "url",
                              json_sprintf("%s://%s/login?code=%s",
                                           d->cfg.http_tls_cert ? "https" : "http", d->cfg.http,
                                           code),
                              "expires", (json_int_t)slot->expires);
    OPENSSL_cleanse(code, sizeof code);
    return reply;
}
