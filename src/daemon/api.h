/* daemon/api.h — shared by the HTTP API's files (daemon/api*.c, events.c): who is asking and the
 * helpers that answer. docs/API.md is the contract. */
#ifndef DROVER_API_H
#define DROVER_API_H

#include "daemon/daemon.h"
#include "daemon/http.h"

/* Who a request acts as: the user who created the token (or the dashboard session's). Requests
 * that need no authentication (/healthz, /metrics, the dashboard's static files) have none. */
struct api_caller {
    struct peer peer;     /* the token's user, with admin worked out as for the socket */
    bool read_only;       /* a --read-only token: GET only, 403 for anything else */
    int64_t token_id;     /* the token's id (a session's too) */
    bool session;         /* by the dashboard's session cookie (CSRF header checked) */
};

/* daemon/api-auth.c: who r acts as, from "Authorization: Bearer TOKEN" or the session cookie
 * (then, for anything but GET/HEAD, the X-CSRF-Token header must match the session's). Returns
 * 0 with *who; or -1 after answering r itself: 401 (none, unknown, revoked, expired) or 403
 * (a read-only token asked to write: `writes`). */
int api_authenticate(struct http_req *r, bool writes, struct api_caller *who);

/* daemon/api.c: answers {"error": MESSAGE, "field": FIELD} (field null when NULL). */
void api_error(struct http_req *r, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Runs the socket protocol's op `req` (steals it; "v" is added) as who on a virtual connection
 * (read_only: ops that write are refused) through ops_dispatch; the reply, "ok" and all (new
 * reference). The HTTP API's and the AMQP door's way to the socket's ops; no op that defers its
 * reply may be routed here. */
json_t *api_run(struct daemon *d, const struct peer *who, bool read_only, json_t *req);
/* Runs the socket protocol's op `req` (steals it; "v" is added) as `who`, through the same
 * ops_dispatch as the socket (so the same checks and permissions apply). Returns the reply (new
 * reference) with "ok" removed, or NULL after answering r with the error, its status from the
 * reply (code 2 → 400, or 404 when the reply says "not_found"; 3 → 429/507 by "status"; 4 →
 * 403) and its "field". */
json_t *api_call(struct http_req *r, const struct api_caller *who, json_t *req);

/* daemon/api-tasks.c: a submission body (POST /api/v1/tasks's JSON: request keys, or option
 * names, values as JSON or as drover submit's text) made the socket's submit request for who
 * (workdir: who's home; env: who's basics under `env`). NULL with *why (malloc'd) and *field
 * (one of body's keys: valid while body is) when a field is unknown, given twice, or its text
 * does not convert. The AMQP door
 * (daemon/amqp.c) takes the same bodies. */
json_t *api_submit_request(json_t *body, const struct peer *who, char **why, const char **field);
/* daemon/api-exp.c: the exp_run request for a template's text (YAML or JSON) as who, with the
 * checks `drover exp run` makes; NULL with *err (malloc'd). *def gets the parsed template
 * (exp_def_free it). */
struct exp_def;
json_t *api_exp_request_text(const char *text, size_t len, unsigned seed, const char *workdir,
                             const struct peer *who, struct exp_def **def, char **err);

/* daemon/events.c: the event stream (/api/v1/events) and the webhooks that follow it. */
void events_serve(struct http_req *r, const struct api_caller *who);

/* ---- api-auth.c: the credentials' routes (docs/API.md, "Authentication") ---- */
/* GET /login?code=CODE (no authentication): a code from `drover dashboard` becomes a session:
 * 303 to / with the session cookie; 401 (text) when the code is unknown, expired or used. */
void api_login(struct http_req *r);
/* GET /api/v1/session: {user, uid, admin, read_only, system, csrf (a session's), token_id}. */
void api_session(struct http_req *r, const struct api_caller *who);
/* POST /api/v1/logout: ends who's session and clears its cookie. */
void api_logout(struct http_req *r, const struct api_caller *who);
/* GET /api/v1/tokens[?all=1], POST /api/v1/tokens (id 0); DELETE /api/v1/tokens/ID (id > 0). */
void api_tokens(struct http_req *r, const struct api_caller *who, int64_t id);
/* The daemon's end: wipes d->api, the login codes (daemon/ops-token.c; optional: it holds no
 * allocation). */
void api_state_free(struct daemon *d);

#endif
