/* Live events: one in-memory backlog of the last LIMIT_EVENTS_BACKLOG events, and the
 * server-sent-event streams of GET /api/v1/events that follow it (docs/API.md, "Events and
 * webhooks").
 *
 * An event's id is "EPOCH-N": EPOCH the daemon's start time (ms), N counting from 1 in this
 * daemon. A client that reconnects with Last-Event-ID gets every later event still in the
 * backlog; an id of another daemon (another EPOCH) or one older than the backlog gets `reset`
 * first, since events were lost: it reloads what it shows, then follows live events.
 *
 * Task, attempt and experiment events are staged while the transaction that records them is
 * open and published only when it commits (store_on_txn_end): a rolled-back batch publishes
 * nothing, and no client hears of a change the store may still lose. GPU samples are published
 * as they are taken. Each event is formatted once, as the bytes every stream gets. */
#include "daemon/api.h"
#include "util/limits.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_KEEPALIVE_S 15

enum {
    EV_TASK = 1u << 0,
    EV_ATTEMPT_START = 1u << 1,
    EV_ATTEMPT_END = 1u << 2,
    EV_GPU = 1u << 3,
    EV_EXPERIMENT = 1u << 4,
    EV_ALL = (1u << 5) - 1,
};

static const struct {
    unsigned bit;
    const char *name;
} events_types[] = {
    {EV_TASK, "task"}, {EV_ATTEMPT_START, "attempt_start"}, {EV_ATTEMPT_END, "attempt_end"},
    {EV_GPU, "gpu"},   {EV_EXPERIMENT, "experiment"},
};
#define EVENTS_NTYPES (sizeof events_types / sizeof events_types[0])

struct events_item {
    uint64_t seq;
    unsigned type;
    char *text; /* "id: …\nevent: …\ndata: …\n\n" */
    size_t len;
};

struct events_staged {
    unsigned type;
    json_t *data;
};

struct events_stream {
    struct events *ev;
    struct http_stream *s;
    unsigned types;
    struct events_stream *prev, *next;
};

struct events {
    struct daemon *d;
    long long epoch;                /* the daemon's start, ms: the ids' prefix */
    uint64_t next_seq;              /* the next event's N */
    struct events_item *ring;       /* LIMIT_EVENTS_BACKLOG slots; the oldest at head */
    size_t head, count;
    struct events_staged *staged;   /* of the open transaction */
    size_t nstaged, staged_cap;
    struct events_stream *streams;
    int nstreams;
    struct event *keepalive;
};

static const char *events_type_name(unsigned bit)
{
    for (size_t i = 0; i < EVENTS_NTYPES; i++)
        if (events_types[i].bit == bit)
            return events_types[i].name;
    return "?";
}

/* ---- publishing ------------------------------------------------------------------------------ */

/* Writes to every stream that wants the type; a stream that fell too far behind is closed by
 * http.c (its on_close unlinks it) as the write fails. */
static void events_fan_out(struct events *ev, unsigned type, const char *text, size_t len)
{
    struct events_stream *next;
    for (struct events_stream *es = ev->streams; es; es = next) {
        next = es->next;
        if (es->types & type)
            http_stream_write(es->s, text, len);
    }
}

static void events_publish(struct events *ev, unsigned type, json_t *data)
{
    char *json = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (json == NULL)
        return;
    struct events_item item = {.seq = ev->next_seq++, .type = type};
    item.text = xasprintf("id: %lld-%" PRIu64 "\nevent: %s\ndata: %s\n\n", ev->epoch, item.seq,
                          events_type_name(type), json);
    item.len = strlen(item.text);
    free(json);
    if (ev->count == LIMIT_EVENTS_BACKLOG) {
        free(ev->ring[ev->head].text);
        ev->ring[ev->head] = item;
        ev->head = (ev->head + 1) % LIMIT_EVENTS_BACKLOG;
    } else {
        ev->ring[(ev->head + ev->count++) % LIMIT_EVENTS_BACKLOG] = item;
    }
    events_fan_out(ev, type, item.text, item.len);
}

static void events_stage(struct daemon *d, unsigned type, json_t *data)
{
    struct events *ev = d->events;
    if (ev == NULL) {
        json_decref(data);
        return;
    }
    xgrow((void **)&ev->staged, &ev->staged_cap, ev->nstaged + 1, sizeof *ev->staged);
    ev->staged[ev->nstaged++] = (struct events_staged){type, data};
}

/* store_on_txn_end: what the transaction staged is published, or forgotten. */
static void events_txn_end(void *arg, bool committed)
{
    struct daemon *d = arg;
    struct events *ev = d->events;
    for (size_t i = 0; i < ev->nstaged; i++) {
        if (committed)
            events_publish(ev, ev->staged[i].type, ev->staged[i].data);
        else
            json_decref(ev->staged[i].data);
    }
    ev->nstaged = 0;
    notify_txn_end(d, committed);
    amqp_txn_end(d, committed);
}

/* Whether anyone could ever read an event: without the HTTP listener (the setting is read at
 * start) none is made, so that a daemon without it pays nothing on the task path. */
static bool events_wanted(const struct daemon *d)
{
    return d->events != NULL && (d->http != NULL || d->amqp != NULL);
}

static json_t *events_int_or_null(long long v, bool known)
{
    return known ? json_integer(v) : json_null();
}

void events_stage_task(struct daemon *d, int64_t task, enum task_state state,
                       const char *reason, core_time now)
{
    if (!events_wanted(d))
        return;
    json_t *brief = store_task_brief(d->store, task);
    json_t *data = json_pack("{s:I,s:O,s:O,s:s,s:o,s:I}", "task", (json_int_t)task, "name",
                             brief ? json_object_get(brief, "name") : json_null(), "user",
                             brief ? json_object_get(brief, "user") : json_null(), "state",
                             task_state_name(state), "reason",
                             reason ? json_string(reason) : json_null(), "time",
                             (json_int_t)now);
    json_decref(brief);
    if (data == NULL)
        return;
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)task);
    amqp_stage_event(d, "task", id, task_state_name(state), data);
    events_stage(d, EV_TASK, data);
}

void events_stage_attempt_start(struct daemon *d, int64_t task, int attempt,
                                const struct core_placement *machine, core_time now)
{
    if (!events_wanted(d))
        return;
    /* Core's start is the task's change to running (no state action of its own). */
    events_stage_task(d, task, TASK_RUNNING, NULL, now);
    json_t *gpus = json_array();
    for (int i = 0; i < machine->ngpus; i++)
        json_array_append_new(gpus, json_integer(machine->gpu[i]));
    events_stage(d, EV_ATTEMPT_START,
                 json_pack("{s:I,s:i,s:o,s:I}", "task", (json_int_t)task, "attempt", attempt,
                           "gpus", gpus, "time", (json_int_t)now));
}

void events_stage_attempt_end(struct daemon *d, const struct attempt_end *e)
{
    if (!events_wanted(d) || e->discard)
        return;
    events_stage(d, EV_ATTEMPT_END,
                 json_pack("{s:I,s:i,s:s,s:o,s:o,s:I}", "task", (json_int_t)e->task, "attempt",
                           e->attempt, "outcome", e->outcome, "exit_code",
                           events_int_or_null(e->exit_code, e->exit_code >= 0), "signal",
                           events_int_or_null(e->signal, e->signal > 0), "time",
                           (json_int_t)e->end));
}

void events_stage_experiment(struct daemon *d, const char *name, const char *state,
                             const char *reason)
{
    if (!events_wanted(d))
        return;
    json_t *data = json_pack("{s:s,s:s,s:o,s:I}", "name", name, "state", state, "reason",
                             reason ? json_string(reason) : json_null(), "time",
                             (json_int_t)daemon_now());
    if (data == NULL)
        return;
    amqp_stage_event(d, "experiment", name, state, data);
    events_stage(d, EV_EXPERIMENT, data);
}

void events_gpu(struct daemon *d, const struct gpu_row *rows, size_t n, core_time now)
{
    if (!events_wanted(d))
        return;
    json_t *gpus = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct gpu_row *r = &rows[i];
        uint64_t total = 0;
        for (int g = 0; g < d->gpus.count; g++)
            if (d->gpus.gpu[g].index == r->gpu)
                total = d->gpus.gpu[g].mem_total;
        json_array_append_new(
            gpus, json_pack("{s:i,s:o,s:o,s:I,s:o,s:o}", "index", r->gpu, "util",
                            events_int_or_null(r->util, r->util >= 0), "mem_used",
                            events_int_or_null(r->mem_used, r->mem_used >= 0), "mem_total",
                            (json_int_t)total, "temp", events_int_or_null(r->temp, r->temp >= 0),
                            "power_w",
                            r->power_mw >= 0 ? json_real(r->power_mw / 1000.0) : json_null()));
    }
    events_publish(d->events, EV_GPU,
                   json_pack("{s:I,s:o}", "time", (json_int_t)now, "gpus", gpus));
}

/* ---- streams --------------------------------------------------------------------------------- */

static void events_stream_unlink(struct events_stream *es)
{
    struct events *ev = es->ev;
    if (es->prev)
        es->prev->next = es->next;
    else
        ev->streams = es->next;
    if (es->next)
        es->next->prev = es->prev;
    ev->nstreams--;
    free(es);
}

static void events_on_close(void *arg)
{
    events_stream_unlink(arg);
}

static void events_on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    static const char line[] = ": keepalive\n\n";
    (void)fd;
    (void)what;
    events_fan_out(arg, EV_ALL, line, sizeof line - 1);
}

/* The types named by ?types=a,b (all when absent or empty); -1 with *bad (malloc'd) naming an
 * unknown one. */
static int events_parse_types(const char *list, unsigned *types, char **bad)
{
    *types = 0;
    if (list == NULL || *list == '\0') {
        *types = EV_ALL;
        return 0;
    }
    char *copy = xstrdup(list), *save = NULL;
    for (char *word = strtok_r(copy, ",", &save); word; word = strtok_r(NULL, ",", &save)) {
        unsigned bit = 0;
        for (size_t i = 0; i < EVENTS_NTYPES; i++)
            if (strcmp(word, events_types[i].name) == 0)
                bit = events_types[i].bit;
        if (bit == 0) {
            *bad = xstrdup(word);
            free(copy);
            return -1;
        }
        *types |= bit;
    }
    free(copy);
    if (*types == 0)
        *types = EV_ALL;
    return 0;
}

/* Where a client that last saw `id` resumes: 0 with *after (the N it saw) when every later event
 * is still in the backlog; else -1 with *why for the reset. */
static int events_resume_point(const struct events *ev, const char *id, uint64_t *after,
                               const char **why)
{
    long long epoch;
    unsigned long long n;
    int used = 0;
    if (sscanf(id, "%lld-%llu%n", &epoch, &n, &used) != 2 || id[used] != '\0') {
        *why = "unknown event id";
        return -1;
    }
    if (epoch != ev->epoch) {
        *why = "the daemon restarted: events since that id are not kept";
        return -1;
    }
    uint64_t oldest = ev->count > 0 ? ev->ring[ev->head].seq : ev->next_seq;
    if (n >= ev->next_seq) {
        *why = "unknown event id";
        return -1;
    }
    if (n + 1 < oldest) {
        *why = "that event is older than the backlog (LIMIT_EVENTS_BACKLOG)";
        return -1;
    }
    *after = n;
    return 0;
}

/* The bytes of es's types after `after`: a replay larger than EVENTS_REPLAY_MAX would be
 * queued at once, before the client reads any of it, and drop the stream (http.c), which would
 * reconnect and be dropped again; it gets reset instead. */
#define EVENTS_REPLAY_MAX (LIMIT_HTTP_STREAM_BUFFER / 2)
static size_t events_replay_size(const struct events *ev, unsigned types, uint64_t after)
{
    size_t bytes = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const struct events_item *it = &ev->ring[(ev->head + i) % LIMIT_EVENTS_BACKLOG];
        if (it->seq > after && (types & it->type))
            bytes += it->len;
    }
    return bytes;
}

/* The backlog after `after` (of es's types), or a reset. Returns -1 if the stream closed. */
static int events_catch_up(struct events *ev, struct events_stream *es, const char *last)
{
    uint64_t after;
    const char *why;
    int rc = events_resume_point(ev, last, &after, &why);
    if (rc == 0 && events_replay_size(ev, es->types, after) > EVENTS_REPLAY_MAX) {
        why = "too many events since that id to replay (over half of LIMIT_HTTP_STREAM_BUFFER)";
        rc = -1;
    }
    if (rc < 0) {
        json_t *data = json_pack("{s:s}", "reason", why);
        char *json = json_dumps(data, JSON_COMPACT), *text;
        json_decref(data);
        text = xasprintf("event: reset\ndata: %s\n\n", json);
        free(json);
        int rc = http_stream_write(es->s, text, strlen(text));
        free(text);
        return rc;
    }
    for (size_t i = 0; i < ev->count; i++) {
        const struct events_item *it = &ev->ring[(ev->head + i) % LIMIT_EVENTS_BACKLOG];
        if (it->seq > after && (es->types & it->type) &&
            http_stream_write(es->s, it->text, it->len) < 0)
            return -1;
    }
    return 0;
}

void events_serve(struct http_req *r, const struct api_caller *who)
{
    struct events *ev = r->d->events;
    unsigned types;
    char *bad = NULL, *list = http_query(r, "types");
    (void)who; /* every authenticated user sees every event, as anyone may `drover ls` */
    if (strcmp(r->method, "GET") != 0) {
        api_error(r, 405, NULL, "%s /api/v1/events: only GET", r->method);
        free(list);
        return;
    }
    int parsed = events_parse_types(list, &types, &bad);
    free(list);
    if (parsed < 0) {
        api_error(r, 400, "types",
                  "unknown event type '%s' (expected task, attempt_start, attempt_end, gpu,"
                  " experiment)",
                  bad);
        free(bad);
        return;
    }
    if (ev == NULL || ev->nstreams >= LIMIT_HTTP_STREAMS) {
        api_error(r, 503, NULL, "too many event streams (LIMIT_HTTP_STREAMS = %d); try again"
                  " later", LIMIT_HTTP_STREAMS);
        return;
    }
    char *last = http_header(r, "Last-Event-ID");
    if (last == NULL)
        last = http_query(r, "last_event_id");
    struct events_stream *es = xcalloc(1, sizeof *es);
    es->ev = ev;
    es->types = types;
    /* http.c adds Cache-Control: no-store and X-Accel-Buffering: no to every stream. */
    es->s = http_stream_begin(r, 200, "text/event-stream", NULL, events_on_close, es);
    if (es->s == NULL) {
        free(es);
        free(last);
        return;
    }
    es->next = ev->streams;
    if (ev->streams)
        ev->streams->prev = es;
    ev->streams = es;
    ev->nstreams++;
    static const char hello[] = "retry: 2000\n\n"; /* EventSource: reconnect after 2 s */
    if (http_stream_write(es->s, hello, sizeof hello - 1) == 0 && last != NULL && *last != '\0')
        events_catch_up(ev, es, last);
    free(last);
}

/* ---- the lifecycle --------------------------------------------------------------------------- */

void events_start(struct daemon *d)
{
    struct events *ev = xcalloc(1, sizeof *ev);
    ev->d = d;
    ev->epoch = (long long)daemon_now();
    ev->next_seq = 1;
    ev->ring = xcalloc(LIMIT_EVENTS_BACKLOG, sizeof *ev->ring);
    ev->keepalive = event_new(d->base, -1, EV_PERSIST, events_on_keepalive, ev);
    struct timeval every = {EVENTS_KEEPALIVE_S, 0};
    event_add(ev->keepalive, &every);
    d->events = ev;
    store_on_txn_end(d->store, events_txn_end, d);
}

void events_stop(struct daemon *d)
{
    struct events *ev = d->events;
    if (ev == NULL)
        return;
    store_on_txn_end(d->store, NULL, NULL);
    while (ev->streams) {
        struct events_stream *es = ev->streams;
        ev->streams = es->next;
        http_stream_end(es->s); /* no on_close after this */
        free(es);
    }
    for (size_t i = 0; i < ev->count; i++)
        free(ev->ring[(ev->head + i) % LIMIT_EVENTS_BACKLOG].text);
    for (size_t i = 0; i < ev->nstaged; i++)
        json_decref(ev->staged[i].data);
    free(ev->staged);
    free(ev->ring);
    event_free(ev->keepalive);
    free(ev);
    d->events = NULL;
}
