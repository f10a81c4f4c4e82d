/* What the API shows of the machine: /healthz, /metrics (Prometheus, from the `gpus`
 * snapshot), /api/v1/gpus and its telemetry series, /api/v1/users. */
#include "daemon/api-routes.h"
#include "daemon/metrics.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

#define API_SERIES_MAX_POINTS 2000
#define API_SERIES_MAX_TASKS 10000

void api_healthz(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    struct daemon *d = r->d;
    bool db = store_exec(d->store, "SELECT 1") == 0; /* through the store, as any query */
    /* started: set when the daemon starts (0: not known) */
    json_t *uptime = d->started > 0 ? json_integer((daemon_now() - d->started) / 1000)
                                    : json_null();
    json_t *body = json_pack("{s:b,s:s,s:o,s:o,s:i,s:b}", "ok", db, "version", DROVER_VERSION,
                             "uptime_s", uptime, "db",
                             db ? json_string("ok") : json_string(store_error(d->store)),
                             "gpus", d->gpus.count, "system", d->cfg.system);
    slurm_gpus_json(d, body); /* "slurm": {"up", …} when a cluster is set up; not a failure */
    if (d->amqp != NULL) /* "amqp": {"up", …}: the broker away is not the daemon's failure */
        json_object_set_new(body, "amqp", amqp_status(d));
    http_respond_json(r, db ? 200 : 503, body, NULL);
}

void api_metrics(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    json_t *snap = telemetry_snapshot(r->d);
    char *text = metrics_render(snap);
    json_decref(snap);
    http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text), NULL);
    free(text);
}

void api_view(struct http_req *r, const struct api_caller *who, const char *op,
              const char *member)
{
    json_t *reply = api_call(r, who, json_pack("{s:s}", "op", op));
    if (reply == NULL)
        return;
    if (member != NULL) {
        json_t *part = json_incref(json_object_get(reply, member));
        json_decref(reply);
        reply = part;
    }
    http_respond_json(r, 200, reply, NULL);
}

void api_gpus(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_view(r, who, "gpus", NULL);
}

/* `drover users --json`: the list alone, as the CLI prints it. */
void api_users(struct http_req *r, const struct api_caller *who, const struct api_params *p)
{
    api_view(r, who, "users", "users");
}

/* A time: ms since the epoch, "now", or relative to now ("-1h", "-30m"). 0, or -1 after
 * answering 400. */
static int api_series_time(struct http_req *r, const char *key, int64_t now, int64_t def,
                           int64_t *out)
{
    char *v = http_query(r, key), *end;
    const char *why = "expected milliseconds since the epoch, now, or -DURATION (-1h)";
    int64_t ms = 0;
    *out = def;
    if (v == NULL)
        return 0;
    bool ok = true;
    if (strcmp(v, "now") == 0) {
        *out = now;
    } else if (v[0] == '-') {
        ok = parse_duration(v + 1, &ms, &why) == 0;
        *out = now - ms;
    } else {
        errno = 0;
        *out = strtoll(v, &end, 10);
        ok = *v >= '0' && *v <= '9' && *end == '\0' && errno == 0;
    }
    if (!ok) {
        api_error(r, 400, key, "%s '%s': %s", key, v, why);
        free(v);
        return -1;
    }
    free(v);
    return 0;
}

void api_gpus_series(struct http_req *r, const struct api_caller *who,
                     const struct api_params *p)
{
    struct daemon *d = r->d;
    int64_t now = daemon_now(), since, until, step = 60000;
    char *v = http_query(r, "step");
    const char *why;
    if (v != NULL && parse_duration(v, &step, &why) < 0) {
        api_error(r, 400, "step", "step '%s': %s", v, why);
        free(v);
        return;
    }
    free(v);
    if (api_series_time(r, "until", now, now, &until) < 0 ||
        api_series_time(r, "since", now, until - 3600 * 1000LL, &since) < 0)
        return;
    if (since >= until) {
        api_error(r, 400, "since", "since must be before until");
        return;
    }
    if ((until - since) / step >= API_SERIES_MAX_POINTS) {
        api_error(r, 400, "step", "%lld points per GPU: at most %d (a longer step, or a shorter"
                  " window)", (long long)((until - since + step - 1) / step),
                  API_SERIES_MAX_POINTS);
        return;
    }
    json_t *by_gpu = store_gpu_series(d->store, since, until, step), *gpus = json_array();
    for (int g = 0; g < d->gpus.count; g++) {
        char key[16];
        snprintf(key, sizeof key, "%d", d->gpus.gpu[g].index);
        json_t *points = json_object_get(by_gpu, key);
        json_array_append_new(gpus, json_pack("{s:i,s:s,s:o}", "index", d->gpus.gpu[g].index,
                                              "name", d->gpus.gpu[g].name, "points",
                                              points ? json_incref(points) : json_array()));
    }
    json_decref(by_gpu);
    json_t *body = json_pack("{s:I,s:I,s:I,s:o,s:o}", "step_ms", (json_int_t)step, "since",
                             (json_int_t)since, "until", (json_int_t)until, "gpus", gpus,
                             "tasks", store_gpu_holders(d->store, since, until,
                                                        API_SERIES_MAX_TASKS));
    http_respond_json(r, 200, body, NULL);
}
