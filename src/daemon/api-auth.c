/* The HTTP API's authentication (docs/API.md, "Authentication"): who a request acts as, from a
 * bearer token or the dashboard's session cookie (with its CSRF header for writes), and the
 * routes of the credentials themselves: /login (a one-time code becomes a session), the session,
 * logout, tokens. Tokens are made and revoked by the socket ops of daemon/ops-token.c, run
 * through api_call, so their permissions are the ops'. */
#include "daemon/api-internal.h"
#include "daemon/api.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AUTH_CHALLENGE "WWW-Authenticate: Bearer realm=\"drover\"\r\n"

/* 401 with the challenge, {"error": message, "field": null}. */
static int auth_refuse(struct http_req *r, const char *message)
{
    http_respond_json(r, 401, json_pack("{s:s,s:n}", "error", message, "field"), AUTH_CHALLENGE);
    return -1;
}

/* The value of cookie `name` in a Cookie header (malloc'd), or NULL. */
static char *auth_cookie(const char *header, const char *name)
{
    size_t nlen = strlen(name);
    for (const char *p = header; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        if (end == NULL)
            end = p + strlen(p);
        if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            const char *v = p + nlen + 1, *vend = end;
            while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
                vend--;
            return xstrndup(v, (size_t)(vend - v));
        }
        p = end;
    }
    return NULL;
}

/* The credential r presents (malloc'd) and whether it is the session cookie; NULL after
 * answering 401 when there is none or the Authorization header is not a bearer token. */
static char *auth_presented(struct http_req *r, bool *session)
{
    char *auth = http_header(r, "Authorization");
    *session = false;
    if (auth != NULL) {
        char *text = NULL;
        if (strncasecmp(auth, "Bearer ", 7) == 0) {
            const char *v = auth + 7;
            while (*v == ' ')
                v++;
            text = xstrdup(v);
        }
        OPENSSL_cleanse(auth, strlen(auth));
        free(auth);
        if (text == NULL)
            auth_refuse(r, "the Authorization header must be 'Bearer TOKEN'");
        return text;
    }
    char *cookies = http_header(r, "Cookie");
    char *text = cookies ? auth_cookie(cookies, AUTH_COOKIE) : NULL;
    free(cookies);
    if (text == NULL) {
        auth_refuse(r, "authentication required: send 'Authorization: Bearer TOKEN' (drover"
                       " token create)");
        return NULL;
    }
    *session = true;
    return text;
}

/* Marks the token used, at most once a minute (remembered in memory) so that reading costs no
 * commit each time. A failed write only loses the mark: the request goes on. */
static void auth_mark_used(struct daemon *d, int64_t id)
{
    int64_t now = daemon_now();
    if (!auth_used_due(d, id, now) || !disk_can_commit(d))
        return;
    store_begin(d->store);
    if (store_token_used(d->store, id, now) < 0 || store_commit(d->store) < 0)
        store_rollback(d->store);
}

/* The row that text names, checked: 0 with *t; or -1 after answering r (401, or 500 when the
 * store cannot be read). */
static int auth_check(struct http_req *r, const char *text, bool session, struct store_token *t)
{
    struct daemon *d = r->d;
    const char *what = session ? "session" : "token";
    char hash[AUTH_HASH_HEX], message[128];
    int64_t id;
    if (!auth_token_parse(text, &id)) {
        snprintf(message, sizeof message, "malformed %s (expected drv_ID_SECRET)", what);
        return auth_refuse(r, message);
    }
    int found = store_token_get(d->store, id, t);
    if (found < 0) {
        api_error(r, 500, NULL, "cannot read the tokens: %s", store_error(d->store));
        return -1;
    }
    auth_sha256_hex(text, hash);
    /* The same answer for no row, the wrong secret and the wrong kind: nothing to tell apart. */
    if (found == 0 || !auth_hash_equal(hash, t->hash) || t->session != session) {
        snprintf(message, sizeof message, "unknown %s", what);
        return auth_refuse(r, message);
    }
    if (t->revoked != 0) {
        snprintf(message, sizeof message, "%s revoked", what);
        return auth_refuse(r, message);
    }
    if (t->expires != 0 && daemon_now() >= t->expires) {
        snprintf(message, sizeof message, "%s expired", what);
        return auth_refuse(r, message);
    }
    return 0;
}

int api_authenticate(struct http_req *r, bool writes, struct api_caller *who)
{
    struct daemon *d = r->d;
    struct store_token t;
    bool session;
    char *text = auth_presented(r, &session);
    if (text == NULL)
        return -1;
    int rc = auth_check(r, text, session, &t);
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    if (rc < 0)
        return -1;
    memset(who, 0, sizeof *who);
    /* In system mode a token acts as a user of the machine; one that is gone acts as nobody. */
    if (!peer_for_uid(d, t.uid, (gid_t)-1, &who->peer) && d->cfg.system)
        return auth_refuse(r, "the token's user no longer exists");
    who->read_only = t.read_only;
    who->token_id = t.id;
    who->session = session;
    if (session && writes) {
        char *csrf = http_header(r, "X-CSRF-Token");
        bool ok = csrf != NULL && t.csrf[0] != '\0' && strlen(csrf) == strlen(t.csrf) &&
                  CRYPTO_memcmp(csrf, t.csrf, strlen(t.csrf)) == 0;
        free(csrf);
        if (!ok) {
            api_error(r, 403, NULL, "missing or wrong X-CSRF-Token");
            return -1;
        }
    }
    if (t.read_only && writes) {
        api_error(r, 403, NULL, "not permitted: a read-only token may only read");
        return -1;
    }
    auth_mark_used(d, t.id);
    return 0;
}

/* ---- /login, /api/v1/session, /api/v1/logout --------------------------------------------- */

static void auth_login_refused(struct http_req *r, const char *why)
{
    char *body = xasprintf("drover: %s. Run 'drover dashboard' for a new login link (valid for"
                           " 60 s, once).\n", why);
    http_respond(r, 401, "text/plain; charset=utf-8", body, strlen(body),
                 "Cache-Control: no-store\r\n");
    free(body);
}

/* Takes the login code whose hash is `hash` (it is gone after): true with its user. Every slot
 * is compared, in constant time each, whatever matches. */
static bool auth_code_take(struct daemon *d, const char *hash, uid_t *uid, gid_t *gid)
{
    struct api_state *a = api_state_get(d);
    int64_t now = daemon_now();
    struct auth_code *match = NULL;
    for (size_t i = 0; i < AUTH_CODES_MAX; i++)
        if (a->codes[i].hash[0] != '\0' && auth_hash_equal(hash, a->codes[i].hash))
            match = &a->codes[i];
    if (match == NULL)
        return false;
    bool valid = match->expires > now;
    *uid = match->uid;
    *gid = match->gid;
    memset(match, 0, sizeof *match);
    return valid;
}

void api_login(struct http_req *r)
{
    struct daemon *d = r->d;
    char *code = http_query(r, "code"), hash[AUTH_HASH_HEX];
    uid_t uid;
    gid_t gid;
    struct peer peer;
    if (code == NULL || *code == '\0') {
        free(code);
        auth_login_refused(r, "this login link has no code");
        return;
    }
    auth_sha256_hex(code, hash);
    OPENSSL_cleanse(code, strlen(code));
    free(code);
    if (!auth_code_take(d, hash, &uid, &gid)) {
        auth_login_refused(r, "this login link is unknown, expired or already used");
        return;
    }
    if (!peer_for_uid(d, uid, gid, &peer) && d->cfg.system) {
        auth_login_refused(r, "this login link's user no longer exists");
        return;
    }
    int64_t now = daemon_now();
    struct store_token t = {.uid = uid, .session = true, .created = now,
                            .expires = now + AUTH_SESSION_MS};
    snprintf(t.user, sizeof t.user, "%s", peer.name);
    char text[AUTH_TEXT_MAX], target[48], *why = NULL;
    if (auth_random(AUTH_SECRET_BYTES, t.csrf) < 0) {
        api_error(r, 500, NULL, "cannot start a session: the random number generator failed");
        return;
    }
    store_begin(d->store);
    if (auth_issue(d, &t, NULL, text, &why) < 0) {
        store_rollback(d->store);
        api_error(r, 500, NULL, "cannot start a session: %s", why);
        free(why);
        return;
    }
    snprintf(target, sizeof target, "session %lld", (long long)t.id);
    /* Sessions that ended a day ago are of no use to anyone: they go with each new one. */
    if (store_token_prune_sessions(d->store, now - 24 * 3600 * 1000LL) < 0 ||
        store_audit(d->store, now, peer.uid, peer.name, "login", target, r->addr) < 0 ||
        store_commit(d->store) < 0) {
        store_rollback(d->store);
        OPENSSL_cleanse(text, sizeof text);
        api_error(r, 500, NULL, "cannot start a session: %s", store_error(d->store));
        return;
    }
    char *extra = xasprintf("Location: /\r\nSet-Cookie: " AUTH_COOKIE "=%s; HttpOnly;"
                            " SameSite=Strict; Path=/; Max-Age=%lld%s\r\n"
                            "Cache-Control: no-store\r\n",
                            text, AUTH_SESSION_MS / 1000, r->tls ? "; Secure" : "");
    OPENSSL_cleanse(text, sizeof text);
    static const char body[] = "logged in: continue to /\n";
    http_respond(r, 303, "text/plain; charset=utf-8", body, sizeof body - 1, extra);
    OPENSSL_cleanse(extra, strlen(extra));
    free(extra);
}

void api_session(struct http_req *r, const struct api_caller *who)
{
    struct store_token t;
    json_t *csrf = json_null();
    if (who->session && store_token_get(r->d->store, who->token_id, &t) == 1)
        csrf = json_string(t.csrf);
    http_respond_json(r, 200,
                      json_pack("{s:s,s:I,s:b,s:b,s:b,s:o,s:I}", "user", who->peer.name, "uid",
                                (json_int_t)who->peer.uid, "admin", who->peer.admin,
                                "read_only", who->read_only, "system", r->d->cfg.system, "csrf",
                                csrf, "token_id", (json_int_t)who->token_id),
                      NULL);
}

void api_logout(struct http_req *r, const struct api_caller *who)
{
    if (!who->session) {
        api_error(r, 400, NULL, "logout ends a dashboard session; this request came with a token"
                                " (revoke it: DELETE /api/v1/tokens/%lld)",
                  (long long)who->token_id);
        return;
    }
    json_t *reply = api_call(r, who, json_pack("{s:s,s:I}", "op", "token_revoke", "id",
                                               (json_int_t)who->token_id));
    if (reply == NULL)
        return;
    json_decref(reply);
    http_respond_json(r, 200, json_object(),
                      "Set-Cookie: " AUTH_COOKIE "=; HttpOnly; SameSite=Strict; Path=/;"
                      " Max-Age=0\r\n");
}

/* ---- /api/v1/tokens ---------------------------------------------------------------------- */

/* The token_create request from a POST body {name, expires ("30d" or ms), read_only}; NULL
 * after answering 400. */
static json_t *auth_create_request(struct http_req *r)
{
    json_error_t jerr;
    json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, &jerr) : json_object();
    json_t *req = NULL, *v;
    const char *key;
    if (body == NULL) {
        api_error(r, 400, NULL, "the body is not JSON: %s", jerr.text);
        return NULL;
    }
    if (!json_is_object(body)) {
        api_error(r, 400, NULL, "the body must be a JSON object");
        goto done;
    }
    req = json_pack("{s:s}", "op", "token_create");
    json_object_foreach(body, key, v) {
        if (strcmp(key, "name") == 0 || strcmp(key, "read_only") == 0) {
            json_object_set(req, key, v); /* the op checks their types */
        } else if (strcmp(key, "expires") == 0) {
            int64_t ms;
            const char *why = NULL;
            if (json_is_integer(v) && json_integer_value(v) > 0) {
                json_object_set_new(req, "expires_ms", json_integer(json_integer_value(v)));
            } else if (json_is_string(v) && parse_duration(json_string_value(v), &ms, &why) == 0) {
                json_object_set_new(req, "expires_ms", json_integer(ms));
            } else if (!json_is_null(v)) {
                api_error(r, 400, "expires", "'expires' must be a duration (30d, 12h) or a"
                                             " number of milliseconds%s%s",
                          why ? ": " : "", why ? why : "");
                goto fail;
            }
        } else {
            api_error(r, 400, key, "unknown field '%s' (name, expires, read_only)", key);
            goto fail;
        }
    }
    goto done;
fail:
    json_decref(req);
    req = NULL;
done:
    json_decref(body);
    return req;
}

void api_tokens(struct http_req *r, const struct api_caller *who, int64_t id)
{
    json_t *reply;
    if (strcmp(r->method, "GET") == 0 && id == 0) {
        char *all = http_query(r, "all");
        bool every = all != NULL && (*all == '\0' || strcmp(all, "1") == 0 ||
                                     strcmp(all, "true") == 0);
        free(all);
        reply = api_call(r, who, json_pack("{s:s,s:b}", "op", "token_ls", "all", every));
        if (reply != NULL) {
            http_respond_json(r, 200, json_incref(json_object_get(reply, "tokens")), NULL);
            json_decref(reply);
        }
    } else if (strcmp(r->method, "POST") == 0 && id == 0) {
        json_t *req = auth_create_request(r);
        if (req != NULL && (reply = api_call(r, who, req)) != NULL)
            http_respond_json(r, 201, reply, NULL);
    } else if (strcmp(r->method, "DELETE") == 0 && id > 0) {
        reply = api_call(r, who, json_pack("{s:s,s:I}", "op", "token_revoke", "id",
                                           (json_int_t)id));
        if (reply != NULL) {
            json_decref(reply);
            http_respond_json(r, 200, json_object(), NULL);
        }
    } else {
        api_error(r, 405, NULL, "%s is not allowed here", r->method);
    }
}
