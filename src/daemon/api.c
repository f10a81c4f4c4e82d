/* The HTTP API's router (docs/API.md, "Routes"): a table of routes as data — method, path
 * pattern, whether it needs a caller, whether it writes, handler — matched segment by segment;
 * the answers' common parts (api_error, api_call); and the dashboard's static files.
 *
 * A pattern's segments are literal, or {id} (a positive whole number: anything else is 400
 * naming it), or {name} (an experiment's name: one segment, or two for a system daemon's
 * "owner/name"). A path no route has is 404, a path one has with another method 405 with the
 * methods it takes in Allow:, every answer JSON {"error", "field"}. Everything under /api/v1/
 * but its OpenAPI document needs a caller (api_authenticate: a token, or the dashboard's
 * session); /healthz, /metrics, /login and the static files need none. Nothing here blocks:
 * every route answers from memory, the store, or one op through ops_dispatch, like a socket
 * client's. */
#include "daemon/api.h"
#include "daemon/api-routes.h"
#include "daemon/assets.h"
#include "daemon/ops.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_MAX_SEGMENTS 8

const struct api_route api_routes[] = {
    /* method  pattern                                 auth   writes  handler */
    {"GET", "/healthz", false, false, api_healthz},
    {"GET", "/metrics", false, false, api_metrics},
    {"GET", "/login", false, false, api_route_login},
    {"GET", "/api/v1/openapi.json", false, false, api_openapi},
    {"GET", "/api/v1/session", true, false, api_route_session},
    {"POST", "/api/v1/logout", true, true, api_route_logout},
    {"GET", "/api/v1/tokens", true, false, api_route_tokens},
    {"POST", "/api/v1/tokens", true, true, api_route_tokens},
    {"DELETE", "/api/v1/tokens/{id}", true, true, api_route_tokens},
    {"GET", "/api/v1/events", true, false, api_route_events},
    {"GET", "/api/v1/tasks", true, false, api_tasks_list},
    {"POST", "/api/v1/tasks", true, true, api_tasks_submit},
    {"GET", "/api/v1/tasks/{id}", true, false, api_tasks_show},
    {"DELETE", "/api/v1/tasks/{id}", true, true, api_tasks_cancel},
    {"POST", "/api/v1/tasks/{id}/retry", true, true, api_tasks_retry},
    {"POST", "/api/v1/tasks/{id}/hold", true, true, api_tasks_hold},
    {"POST", "/api/v1/tasks/{id}/release", true, true, api_tasks_release},
    {"GET", "/api/v1/tasks/{id}/logs", true, false, api_tasks_logs},
    {"GET", "/api/v1/gpus", true, false, api_gpus},
    {"GET", "/api/v1/gpus/series", true, false, api_gpus_series},
    {"GET", "/api/v1/experiments", true, false, api_exp_list},
    {"POST", "/api/v1/experiments", true, true, api_exp_run},
    {"GET", "/api/v1/experiments/{name}", true, false, api_exp_show},
    {"POST", "/api/v1/experiments/{name}/stop", true, true, api_exp_stop},
    {"POST", "/api/v1/experiments/{name}/resume", true, true, api_exp_resume},
    {"GET", "/api/v1/users", true, false, api_users},
    {NULL, NULL, false, false, NULL},
};

/* ---- answers ------------------------------------------------------------------------------ */

void api_error(struct http_req *r, int status, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    for (size_t bad; (bad = utf8_check(msg)) > 0;) /* a quoted path may be anything */
        msg[bad - 1] = '?';
    json_t *body = json_object();
    json_object_set_new(body, "error", json_string(msg));
    json_object_set_new(body, "field", field ? json_string(field) : json_null());
    free(msg);
    http_respond_json(r, status, body, NULL);
}

/* The status an op's error reply maps to (api.h). */
static int api_status(const json_t *reply)
{
    const char *msg = json_string_value(json_object_get(reply, "error"));
    json_t *status = json_object_get(reply, "status");
    if (json_is_integer(status) && json_integer_value(status) >= 400 &&
        json_integer_value(status) < 600)
        return (int)json_integer_value(status);
    if (msg != NULL && strncmp(msg, "disk full", 9) == 0)
        return 507;
    switch (json_integer_value(json_object_get(reply, "code"))) {
    case 2:
        return json_is_true(json_object_get(reply, "not_found")) ? 404 : 400;
    case 3:
        return 503;
    case OPS_NOT_PERMITTED:
        return 403;
    default: /* 1: the request was good, the task or the daemon's state refuses it */
        return 409;
    }
}

json_t *api_run(struct daemon *d, const struct peer *who, bool read_only, json_t *req)
{
    struct conn *c = conn_virtual(d, who, read_only);
    json_object_set_new(req, "v", json_integer(PROTO_VERSION));
    json_t *reply = ops_dispatch(d, c, req);
    conn_virtual_free(c);
    json_decref(req);
    if (reply == NULL) /* no deferring op (wait) is routed */
        fatalx("api_run: an op deferred its reply");
    return reply;
}

json_t *api_call(struct http_req *r, const struct api_caller *who, json_t *req)
{
    json_t *reply = api_run(r->d, &who->peer, who->read_only, req);
    if (json_is_true(json_object_get(reply, "ok"))) {
        json_object_del(reply, "ok");
        return reply;
    }
    json_t *field = json_object_get(reply, "field");
    api_error(r, api_status(reply), json_string_value(field), "%s",
              json_string_value(json_object_get(reply, "error")));
    json_decref(reply);
    return NULL;
}

/* ---- query parameters --------------------------------------------------------------------- */

int api_query_int(struct http_req *r, const char *key, long long min, long long max,
                  long long def, long long *out)
{
    char *v = http_query(r, key), *end;
    *out = def;
    if (v == NULL)
        return 0;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0 || n < min || n > max) {
        api_error(r, 400, key, "'%s' must be a whole number from %lld to %lld, not '%s'", key,
                  min, max, v);
        free(v);
        return -1;
    }
    free(v);
    *out = n;
    return 0;
}

int api_query_bool(struct http_req *r, const char *key, bool *out)
{
    char *v = http_query(r, key);
    *out = false;
    if (v == NULL)
        return 0;
    if (*v == '\0' || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0) {
        *out = true;
    } else if (strcmp(v, "0") != 0 && strcmp(v, "false") != 0 && strcmp(v, "no") != 0) {
        api_error(r, 400, key, "'%s' must be 1 or 0 (true or false), not '%s'", key, v);
        free(v);
        return -1;
    }
    free(v);
    return 0;
}

json_t *api_body_object(struct http_req *r)
{
    json_error_t err;
    if (r->body_len == 0) {
        api_error(r, 400, NULL, "expected a JSON object in the body");
        return NULL;
    }
    json_t *body = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
    if (body == NULL) {
        api_error(r, 400, NULL, "malformed JSON: %s (line %d, column %d)", err.text, err.line,
                  err.column);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        api_error(r, 400, NULL, "expected a JSON object in the body");
        return NULL;
    }
    return body;
}

/* ---- static files ------------------------------------------------------------------------- */

/* Whether the If-None-Match header lists etag (quoted, so a W/ prefix matches too), or is "*". */
static bool api_etag_matches(struct http_req *r, const char *etag)
{
    char *inm = http_header(r, "If-None-Match");
    bool match = inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL);
    free(inm);
    return match;
}

void api_asset(struct http_req *r, const struct asset *a)
{
    bool html = strncmp(a->type, "text/html", 9) == 0;
    char *extra = xasprintf("ETag: %s\r\nCache-Control: no-cache\r\n%s",
                            a->etag,
                            html ? "Content-Security-Policy: default-src 'self'; img-src 'self'"
                                   " data:; style-src 'self' 'unsafe-inline'\r\n"
                                   "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
                                 : "");
    if (api_etag_matches(r, a->etag))
        http_respond(r, 304, a->type, "", 0, extra);
    else
        http_respond(r, 200, a->type, (const char *)a->data, a->len, extra);
    free(extra);
}

void api_openapi(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    const struct asset *a = asset_find("/api/v1/openapi.json");
    if (a == NULL) {
        api_error(r, 404, NULL, "this drover was built without its OpenAPI document");
        return;
    }
    api_asset(r, a);
}

/* ---- the routes of daemon/api-auth.c and daemon/events.c --------------------------------- */

void api_route_login(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_login(r);
}

void api_route_session(struct http_req *r, const struct api_caller *who,
                       const struct api_params *p)
{
    api_session(r, who);
}

void api_route_logout(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p)
{
    api_logout(r, who);
}

void api_route_tokens(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p)
{
    api_tokens(r, who, p->id);
}

void api_route_events(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p)
{
    events_serve(r, who);
}

/* ---- routing ------------------------------------------------------------------------------ */

/* Splits path into its segments (pointers into buf). -1 when there are too many. */
static int api_split(const char *path, char *buf, size_t len, char **seg)
{
    int n = 0;
    snprintf(buf, len, "%s", path);
    for (char *p = buf; *p;) {
        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        if (n == API_MAX_SEGMENTS)
            return -1;
        seg[n++] = p;
        p += strcspn(p, "/");
        if (*p)
            *p++ = '\0';
    }
    return n;
}


/* Matches the path's segments seg[si..n) against pattern's from pi; {name} takes one segment,
 * or two ("owner/name"). Fills p. */
static enum api_match api_match_from(char **seg, int si, int n, char **pat, int pi, int pn,
                                     struct api_params *p, char *name, size_t name_len)
{
    if (pi == pn)
        return si == n ? API_YES : API_NO;
    if (si == n)
        return API_NO;
    if (strcmp(pat[pi], "{name}") == 0) {
        for (int take = 1; take <= 2 && si + take <= n; take++) {
            if (take == 1)
                snprintf(name, name_len, "%s", seg[si]);
            else
                snprintf(name, name_len, "%s/%s", seg[si], seg[si + 1]);
            enum api_match m = api_match_from(seg, si + take, n, pat, pi + 1, pn, p, name,
                                              name_len);
            if (m != API_NO) {
                p->name = name;
                return m;
            }
        }
        return API_NO;
    }
    if (strcmp(pat[pi], "{id}") == 0) {
        char *end;
        errno = 0;
        long long id = strtoll(seg[si], &end, 10);
        enum api_match m = api_match_from(seg, si + 1, n, pat, pi + 1, pn, p, name, name_len);
        if (m == API_NO)
            return API_NO;
        if (*seg[si] < '0' || *seg[si] > '9' || *end != '\0' || errno != 0 || id <= 0) {
            snprintf(p->bad, sizeof p->bad, "%s", seg[si]);
            return API_BAD_ID;
        }
        p->id = id;
        return m;
    }
    if (strcmp(pat[pi], seg[si]) != 0)
        return API_NO;
    return api_match_from(seg, si + 1, n, pat, pi + 1, pn, p, name, name_len);
}

enum api_match api_route_match(const struct api_route *route, const char *path,
                               struct api_params *p, char *name, size_t name_len)
{
    char pbuf[1024], rbuf[256], *seg[API_MAX_SEGMENTS], *pat[API_MAX_SEGMENTS];
    int n = api_split(path, pbuf, sizeof pbuf, seg);
    int pn = api_split(route->pattern, rbuf, sizeof rbuf, pat);
    memset(p, 0, sizeof *p);
    if (n < 0 || pn < 0 || strlen(path) >= sizeof pbuf)
        return API_NO;
    return api_match_from(seg, 0, n, pat, 0, pn, p, name, name_len);
}

/* 405: the methods path takes. */
static void api_not_allowed(struct http_req *r, const char *allow)
{
    char *extra = xasprintf("Allow: %s\r\n", allow);
    json_t *body = json_pack("{s:s+++,s:n}", "error", "method ", r->method, " not allowed on ",
                             r->path, "field");
    http_respond_json(r, 405, body, extra);
    free(extra);
}

void api_handle(struct http_req *r)
{
    const struct api_route *found = NULL, *bad_id = NULL;
    struct api_params params, bad_params;
    char allow[64] = "", name[256];
    for (const struct api_route *route = api_routes; route->method; route++) {
        struct api_params p;
        enum api_match m = api_route_match(route, r->path, &p, name, sizeof name);
        if (m == API_NO)
            continue;
        if (strstr(allow, route->method) == NULL) { /* "GET, HEAD, POST" */
            size_t len = strlen(allow);
            snprintf(allow + len, sizeof allow - len, "%s%s%s", len ? ", " : "", route->method,
                     strcmp(route->method, "GET") == 0 ? ", HEAD" : "");
        }
        if (strcmp(route->method, r->method) != 0)
            continue;
        if (m == API_BAD_ID) {
            bad_id = route;
            bad_params = p;
            continue;
        }
        found = route;
        params = p;
        break;
    }
    if (found == NULL && bad_id != NULL) {
        api_error(r, 400, "id", "'id' must be a positive whole number, not '%s'", bad_params.bad);
        return;
    }
    if (found == NULL && *allow) {
        api_not_allowed(r, allow);
        return;
    }
    if (found == NULL) {
        const struct asset *a = strncmp(r->path, "/api/", 5) != 0 ? asset_find(r->path) : NULL;
        if (a != NULL && strcmp(r->method, "GET") == 0)
            api_asset(r, a);
        else if (a != NULL)
            api_not_allowed(r, "GET, HEAD");
        else
            api_error(r, 404, NULL, "no route %s %s", r->method, r->path);
        return;
    }
    struct api_caller who;
    memset(&who, 0, sizeof who);
    if (found->auth && api_authenticate(r, found->writes, &who) < 0)
        return; /* answered: 401 or 403 */
    found->handler(r, found->auth ? &who : NULL, &params);
}
