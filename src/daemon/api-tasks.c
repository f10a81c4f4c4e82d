/* /api/v1/tasks: the socket's ls, submit, show, cancel, retry, hold and release, run as the
 * caller through api_call (so the same checks, permissions and one-line messages apply), their
 * JSON the CLI's --json (docs/API.md, "Tasks" and "Submitting a task").
 *
 * A submission body has the field names of `drover show --json` (util/request.def's keys); a
 * value may also be text as drover submit's option takes it ("10G", "2h", "1,2", "0-9%2",
 * "5,30", "22:00": util/request.c's request_value_from_text, the conversion the CLI runs, in
 * the daemon's time zone), `timeout`, `stall` and `begin` name timeout_ms, stall_ms and
 * begin_ms by their options' names, and a command given as one
 * string runs under sh -c. The working directory defaults to the caller's home, and the task's
 * environment is exactly `env` plus HOME, USER, LOGNAME, SHELL and PATH (unless given): an HTTP
 * client has no environment of its own to pass on, as drover submit passes its shell's. */
#include "daemon/api-routes.h"
#include "util/request.h"
#include "util/xalloc.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_LIST_DEFAULT 100
#define API_LIST_MAX 1000

/* Appends "&key=value" to *q, the value percent-encoded. */
static void api_query_append(char **q, const char *key, const char *value)
{
    size_t len = strlen(value);
    char *enc = xmalloc(len * 3 + 1), *o = enc;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-_.~", *p))
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = '\0';
    char *next = xasprintf("%s%s%s=%s", *q, **q ? "&" : "", key, enc);
    free(enc);
    free(*q);
    *q = next;
}

/* The Link header of the next page, with the same filters. */
static char *api_tasks_next(struct http_req *r, long long limit, long long offset)
{
    static const char *const keep[] = {"state", "user", "mine", "all", NULL};
    char *q = xstrdup(""), *v;
    for (int i = 0; keep[i]; i++) {
        if ((v = http_query(r, keep[i])) != NULL) {
            api_query_append(&q, keep[i], v);
            free(v);
        }
    }
    char n[32];
    snprintf(n, sizeof n, "%lld", limit);
    api_query_append(&q, "limit", n);
    snprintf(n, sizeof n, "%lld", offset);
    api_query_append(&q, "offset", n);
    char *link = xasprintf("Link: </api/v1/tasks?%s>; rel=\"next\"\r\n", q);
    free(q);
    return link;
}

void api_tasks_list(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    long long limit, offset;
    bool mine, all;
    if (api_query_int(r, "limit", 1, API_LIST_MAX, API_LIST_DEFAULT, &limit) < 0 ||
        api_query_int(r, "offset", 0, INT64_MAX, 0, &offset) < 0 ||
        api_query_bool(r, "mine", &mine) < 0 || api_query_bool(r, "all", &all) < 0)
        return;
    json_t *req = json_pack("{s:s,s:b,s:b,s:I,s:I}", "op", "ls", "mine", mine, "all", all,
                            "limit", (json_int_t)limit, "offset", (json_int_t)offset);
    char *state = http_query(r, "state"), *user = http_query(r, "user");
    if (state != NULL)
        json_object_set_new(req, "state", json_string(state));
    if (user != NULL)
        json_object_set_new(req, "user", json_string(user));
    free(state);
    free(user);
    json_t *reply = api_call(r, who, req);
    if (reply == NULL)
        return;
    json_t *tasks = json_incref(json_object_get(reply, "tasks"));
    long long total = json_integer_value(json_object_get(reply, "total"));
    json_decref(reply);
    char *next = offset + (long long)json_array_size(tasks) < total
                     ? api_tasks_next(r, limit, offset + (long long)json_array_size(tasks))
                     : xstrdup("");
    char *extra = xasprintf("X-Total-Count: %lld\r\n%s", total, next);
    http_respond_json(r, 200, tasks, extra);
    free(next);
    free(extra);
}

/* ---- submit ------------------------------------------------------------------------------- */

/* The request key a body's key names: a request.def key, or an option's name for it. */
static const char *api_submit_key(const char *key)
{
    if (strcmp(key, "timeout") == 0)
        return "timeout_ms";
    if (strcmp(key, "stall") == 0)
        return "stall_ms";
    if (strcmp(key, "begin") == 0)
        return "begin_ms";
    return key;
}

/* The environment of an HTTP submission: env (an object, or NULL) as given, over the user's
 * basics. */
static json_t *api_submit_env(json_t *env, const struct passwd *pw, const char *user)
{
    json_t *out = env ? json_copy(env) : json_object();
    const struct {
        const char *name, *value;
    } basics[] = {
        {"HOME", pw ? pw->pw_dir : "/"},
        {"USER", user},
        {"LOGNAME", user},
        {"SHELL", pw && pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh"},
        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
    };
    for (size_t i = 0; i < sizeof basics / sizeof basics[0]; i++)
        if (json_object_get(out, basics[i].name) == NULL)
            json_object_set_new(out, basics[i].name, json_string(basics[i].value));
    return out;
}

/* One body field into the request. 0, or -1 with *why (malloc'd) and *field. */
static int api_submit_field(json_t *req, const char *key, json_t *v, char **why,
                            const char **field)
{
    const char *rkey = api_submit_key(key), *bad;
    const struct request_field *f = request_field(rkey);
    *field = key;
    if (f == NULL || !(f->doors & REQUEST_SUBMIT)) {
        *why = xasprintf("unknown field '%s'", key);
        return -1;
    }
    if (json_object_get(req, rkey) != NULL) {
        *why = xasprintf("'%s' is given twice (as %s and %s)", rkey,
                         strcmp(key, rkey) == 0 ? f->option : rkey, key);
        return -1;
    }
    if (f->type == REQUEST_COMMAND && json_is_string(v)) {
        json_object_set_new(req, rkey, json_pack("[s,s,O]", "sh", "-c", v));
        return 0;
    }
    bool text = json_is_string(v) && (f->type == REQUEST_SIZE || f->type == REQUEST_DURATION ||
                                       f->type == REQUEST_IDS || f->type == REQUEST_BACKOFF ||
                                       f->type == REQUEST_ARRAY || f->type == REQUEST_GRACE ||
                                       f->type == REQUEST_TIME);
    if (!text) {
        json_object_set(req, rkey, v); /* request_check_submit judges it */
        return 0;
    }
    json_t *value = request_value_from_text(f, json_string_value(v), &bad);
    if (value == NULL) {
        *why = xasprintf("%s '%s': %s", key, json_string_value(v), bad);
        return -1;
    }
    json_object_set_new(req, rkey, value);
    return 0;
}

json_t *api_submit_request(json_t *body, const struct peer *who, char **why, const char **field)
{
    json_t *req = json_pack("{s:s}", "op", "submit"), *v;
    const char *key;
    json_object_foreach(body, key, v) {
        if (api_submit_field(req, key, v, why, field) < 0) {
            json_decref(req);
            return NULL;
        }
    }
    struct passwd *pw = getpwuid(who->uid);
    if (json_object_get(req, "workdir") == NULL)
        json_object_set_new(req, "workdir", json_string(pw ? pw->pw_dir : "/"));
    json_t *env = json_object_get(req, "env");
    if (env == NULL || json_is_object(env)) /* else request_check_submit refuses it */
        json_object_set_new(req, "env", api_submit_env(env, pw, who->name));
    return req;
}

void api_tasks_submit(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p)
{
    json_t *body = api_body_object(r);
    char *why;
    const char *field;
    if (body == NULL)
        return;
    json_t *req = api_submit_request(body, &who->peer, &why, &field);
    if (req == NULL) /* field is one of body's keys: answered before body goes */
        api_error(r, 400, field, "%s", why);
    json_decref(body);
    if (req == NULL) {
        free(why);
        return;
    }
    bool array = json_object_get(req, "array") != NULL;
    json_t *reply = api_call(r, who, req);
    if (reply == NULL)
        return;
    json_t *ids = json_object_get(reply, "ids");
    json_t *out = array ? json_pack("{s:O}", "ids", ids)
                        : json_pack("{s:O}", "id", json_array_get(ids, 0));
    json_decref(reply);
    http_respond_json(r, 201, out, NULL);
}

/* ---- one task ----------------------------------------------------------------------------- */

/* Answers with `drover show --json`'s object of task id (status 200). */
static void api_task_answer(struct http_req *r, const struct api_caller *who, int64_t id)
{
    json_t *reply = api_call(r, who, json_pack("{s:s,s:I}", "op", "show", "id", (json_int_t)id));
    if (reply == NULL)
        return;
    json_t *task = json_incref(json_object_get(reply, "task"));
    json_decref(reply);
    http_respond_json(r, 200, task, NULL);
}

void api_tasks_show(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_task_answer(r, who, p->id);
}

/* cancel, hold, release: the op on [id], then the task as it is now. */
static void api_task_each(struct http_req *r, const struct api_caller *who, int64_t id,
                          const char *op)
{
    json_t *reply = api_call(r, who, json_pack("{s:s,s:[I]}", "op", op, "ids", (json_int_t)id));
    if (reply == NULL)
        return;
    json_decref(reply);
    api_task_answer(r, who, id);
}

void api_tasks_cancel(struct http_req *r, const struct api_caller *who,
                      const struct api_params *p)
{
    api_task_each(r, who, p->id, "cancel");
}

void api_tasks_hold(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_task_each(r, who, p->id, "hold");
}

void api_tasks_release(struct http_req *r, const struct api_caller *who,
                       const struct api_params *p)
{
    api_task_each(r, who, p->id, "release");
}

void api_tasks_retry(struct http_req *r, const struct api_caller *who,
                     const struct api_params *p)
{
    json_t *reply = api_call(r, who, json_pack("{s:s,s:I}", "op", "retry", "id",
                                               (json_int_t)p->id));
    if (reply == NULL)
        return;
    json_decref(reply);
    api_task_answer(r, who, p->id);
}
