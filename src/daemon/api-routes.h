/* daemon/api-routes.h — the HTTP API's routes (daemon/api.c) and what answers them
 * (daemon/api-tasks.c, api-views.c, api-exp.c), and the helpers they share. docs/API.md,
 * "Routes", and docs/openapi.json describe every one; tests/unit/test_api_routes.c checks that
 * the two agree. */
#ifndef DROVER_API_ROUTES_H
#define DROVER_API_ROUTES_H

#include "daemon/api.h"

struct asset;

/* What a path's pattern took from it. */
struct api_params {
    int64_t id;           /* {id}: > 0 */
    const char *name;     /* {name}: an experiment, "name" or "owner/name"; NULL if none */
    char bad[32];         /* an {id} that is not one (the router answers 400) */
};

typedef void (*api_handler)(struct http_req *r, const struct api_caller *who,
                            const struct api_params *p);

struct api_route {
    const char *method;   /* "GET" (HEAD too), "POST", "DELETE" */
    const char *pattern;  /* "/api/v1/tasks/{id}/retry" */
    bool auth;            /* needs a caller (api_authenticate); who is NULL when not */
    bool writes;          /* changes something: a read-only token is refused */
    api_handler handler;
};
/* Every route, ending with an entry whose method is NULL. */
extern const struct api_route api_routes[];

enum api_match { API_NO, API_BAD_ID, API_YES };
/* Whether path is route's pattern (the method aside); p->name points into name. */
enum api_match api_route_match(const struct api_route *route, const char *path,
                               struct api_params *p, char *name, size_t name_len);

/* Query parameters: 0 with *out (def when absent), or -1 after answering 400 naming key. */
int api_query_int(struct http_req *r, const char *key, long long min, long long max,
                  long long def, long long *out);
int api_query_bool(struct http_req *r, const char *key, bool *out);
/* The body as a JSON object (new reference), or NULL after answering 400. */
json_t *api_body_object(struct http_req *r);
/* Answers with an embedded file: ETag / If-None-Match (304), no-cache, and for HTML the
 * Content-Security-Policy and framing headers. */
void api_asset(struct http_req *r, const struct asset *a);

/* The handlers, by file (api.c's wrap api-auth.c's and events.c's, declared in api.h). */
void api_route_login(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_route_session(struct http_req *r, const struct api_caller *who,
                       const struct api_params *p);
void api_route_logout(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p);
void api_route_tokens(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p);
void api_route_events(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p);
void api_openapi(struct http_req *r, const struct api_caller *who, const struct api_params *p);
/* daemon/api-tasks.c */
void api_tasks_list(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_tasks_submit(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p);
void api_tasks_show(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_tasks_cancel(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p);
void api_tasks_retry(struct http_req *r, const struct api_caller *who,
                     const struct api_params *p);
void api_tasks_hold(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_tasks_release(struct http_req *r, const struct api_caller *who,
                       const struct api_params *p);
/* daemon/api-logs.c */
void api_tasks_logs(struct http_req *r, const struct api_caller *who, const struct api_params *p);
/* daemon/api-views.c */
void api_healthz(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_metrics(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_gpus(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_gpus_series(struct http_req *r, const struct api_caller *who,
                     const struct api_params *p);
void api_users(struct http_req *r, const struct api_caller *who, const struct api_params *p);
/* Answers r with op's reply (an op that takes no arguments, run as who), "ok" aside; only its
 * `member` when not NULL (the list a CLI command prints with --json). */
void api_view(struct http_req *r, const struct api_caller *who, const char *op,
              const char *member);
/* daemon/api-exp.c */
void api_exp_list(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_exp_show(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_exp_run(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_exp_stop(struct http_req *r, const struct api_caller *who, const struct api_params *p);
void api_exp_resume(struct http_req *r, const struct api_caller *who, const struct api_params *p);

#endif
