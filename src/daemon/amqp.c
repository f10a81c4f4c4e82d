/* The RabbitMQ door (docs/AMQP.md): submissions taken from a queue, events published to a topic
 * exchange. The broker's connection is daemon/amqp-io.c's thread; this is the loop's side.
 *
 * Intake. Each message is a task submission (POST /api/v1/tasks's body) or an experiment
 * ({"experiment": its template, as YAML text or as JSON}). It goes through the same request
 * building as the HTTP API's (api_submit_request, api_exp_request_text) and the same dispatcher,
 * permission checks and limits as the socket, acting as the door's user (amqp-user). It is
 * acknowledged only once the op has answered, that is once the task is committed to the store:
 * a crash before the ack makes the broker deliver it again, and its idempotency key — its `key`
 * field, else its AMQP message-id, one of which it must have — finds the task already there
 * (an experiment: the one of that name with the same template). A message that cannot be a
 * submission is rejected (not requeued) and the reason published as an `intake.rejected` event
 * with its message-id.
 *
 * Events. Task and experiment state changes (what the HTTP event stream carries, as the same
 * JSON) are written to the store's outbox in the transaction of the change (events.c calls
 * amqp_stage_event), published once it commits with routing keys task.<id>.<state> and
 * experiment.<name>.<state>, persistent, and deleted from the outbox only when the broker
 * confirms them. While the broker is away they wait there (at most amqp-outbox, the oldest
 * dropped and counted); at each (re)connection everything not confirmed is published again, in
 * order. At least once: each carries its outbox id as message-id. */
#include "daemon/amqp-io.h"
#include "daemon/api.h"
#include "exp/template.h"
#include "util/xalloc.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AMQP_WINDOW 256 /* events published and not yet confirmed, at most */

struct amqp {
    struct daemon *d;
    struct amqp_io *io;
    struct event *ev;
    struct peer peer;        /* whom messages act as */
    bool up;
    char *error;             /* down: why */
    core_time retry_at;      /* down: the next attempt */
    core_time since;         /* when it went up or down */
    int64_t sent;            /* the last outbox id handed to the thread (this connection) */
    int inflight;            /* published and not confirmed */
    bool staged;             /* the open transaction wrote events */
    bool hold_acks;          /* DROVER_TEST_AMQP_HOLD_ACKS: commit, never ack (as a daemon
                              * killed between the two would): tests/e2e/t-amqp.sh */
    uint64_t accepted, duplicates, rejected, published;
    int64_t *confirmed;      /* confirmed ids to delete (at the end of the batch) */
    size_t nconfirmed, confirmed_cap;
};

static void amqp_reject(struct amqp *a, const struct amqp_in *m, const char *field,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- events ----------------------------------------------------------------------------- */

void amqp_stage_event(struct daemon *d, const char *kind, const char *what, const char *state,
                      json_t *data)
{
    struct amqp *a = d->amqp;
    if (a == NULL)
        return;
    char *key = xasprintf("%s.%s.%s", kind, what, state);
    json_t *body = json_deep_copy(data);
    json_object_set_new(body, "event", json_string(kind));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    int64_t dropped = 0;
    if (text == NULL || store_amqp_event(d->store, key, text, daemon_now(),
                                         d->cfg.amqp_outbox, &dropped) < 0)
        fprintf(stderr, "drover daemon: amqp: cannot keep the event %s: %s\n", key,
                store_error(d->store));
    else
        a->staged = true;
    if (dropped > 0)
        fprintf(stderr, "drover daemon: amqp: %lld events dropped (amqp-outbox = %d while the"
                        " broker is away)\n", (long long)dropped, d->cfg.amqp_outbox);
    free(text);
    free(key);
}

static void amqp_publish_one(void *arg, int64_t id, const char *routing_key, const char *body)
{
    struct amqp *a = arg;
    amqp_io_publish(a->io, id, routing_key, body);
    a->sent = id;
    a->inflight++;
    a->published++;
}

/* Hands the thread what waits in the outbox beyond what it has, up to the window. */
static void amqp_pump(struct amqp *a)
{
    if (!a->up || a->inflight >= AMQP_WINDOW)
        return;
    if (store_amqp_pending(a->d->store, a->sent, AMQP_WINDOW - a->inflight, amqp_publish_one,
                           a) < 0)
        fprintf(stderr, "drover daemon: amqp: cannot read the outbox: %s\n",
                store_error(a->d->store));
}

void amqp_txn_end(struct daemon *d, bool committed)
{
    struct amqp *a = d->amqp;
    if (a == NULL || !a->staged)
        return;
    a->staged = false;
    if (committed)
        amqp_pump(a);
}

/* An event the door itself raises (a rejected message), in its own transaction. */
static void amqp_event_now(struct amqp *a, const char *kind, const char *what, const char *state,
                           json_t *data)
{
    struct store *st = a->d->store;
    store_begin(st);
    amqp_stage_event(a->d, kind, what, state, data);
    if (store_commit(st) < 0)
        store_rollback(st);
}

/* ---- intake ----------------------------------------------------------------------------- */

/* A message-id made one word of a routing key (dots and the wildcards would split it). */
static char *amqp_word(const char *s)
{
    char *w = xstrdup(s && *s ? s : "none");
    for (char *p = w; *p; p++)
        if (*p == '.' || *p == '*' || *p == '#')
            *p = '_';
    return w;
}

static void amqp_reject(struct amqp *a, const struct amqp_in *m, const char *field,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *why;
    if (vasprintf(&why, fmt, ap) < 0)
        why = NULL;
    va_end(ap);
    amqp_io_reject(a->io, m->tag);
    a->rejected++;
    json_t *data = json_pack("{s:o,s:s,s:o,s:I}", "message_id",
                             m->message_id ? json_string(m->message_id) : json_null(), "error",
                             why ? why : "?", "field", field ? json_string(field) : json_null(),
                             "time", (json_int_t)daemon_now());
    char *word = amqp_word(m->message_id);
    if (data != NULL)
        amqp_event_now(a, "intake", word, "rejected", data);
    json_decref(data);
    free(word);
    free(why);
}

/* Runs req (taken) as the door's user; the reply (new reference). */
static json_t *amqp_call(struct amqp *a, json_t *req)
{
    return api_run(a->d, &a->peer, false, req);
}

/* Acks m after a successful reply; otherwise: a refusal of what it asks (bad request,
 * permissions, limits) is rejected with the daemon's words; the store failing to keep it (disk
 * full) leaves it unacknowledged, for the broker to deliver again. */
static void amqp_answer(struct amqp *a, const struct amqp_in *m, json_t *reply)
{
    if (json_is_true(json_object_get(reply, "ok"))) {
        if (!a->hold_acks)
            amqp_io_ack(a->io, m->tag);
        if (json_is_true(json_object_get(reply, "existing")))
            a->duplicates++;
        else
            a->accepted++;
    } else if (json_integer_value(json_object_get(reply, "code")) == 3 &&
               json_integer_value(json_object_get(reply, "status")) == 507) {
        fprintf(stderr, "drover daemon: amqp: message %s not taken: %s\n",
                m->message_id ? m->message_id : "(no id)",
                json_string_value(json_object_get(reply, "error")));
    } else {
        amqp_reject(a, m, json_string_value(json_object_get(reply, "field")), "%s",
                    json_string_value(json_object_get(reply, "error")));
    }
    json_decref(reply);
}

static void amqp_task(struct amqp *a, const struct amqp_in *m, json_t *body)
{
    char *why;
    const char *field;
    if (json_object_get(body, "key") == NULL)
        json_object_set_new(body, "key", json_string(m->message_id));
    json_t *req = api_submit_request(body, &a->peer, &why, &field);
    if (req == NULL) {
        amqp_reject(a, m, field, "%s", why);
        free(why);
        return;
    }
    amqp_answer(a, m, amqp_call(a, req));
}

/* An experiment of this name with this template exists already: a redelivery. */
static bool amqp_exp_exists(struct amqp *a, const struct exp_def *def)
{
    json_t *reply = amqp_call(a, json_pack("{s:s,s:s}", "op", "exp_show", "name", def->name));
    json_t *exp = json_object_get(reply, "experiment");
    bool same = json_is_true(json_object_get(reply, "ok")) &&
                json_equal(json_object_get(exp ? exp : reply, "spec"), def->spec);
    json_decref(reply);
    return same;
}

static void amqp_experiment(struct amqp *a, const struct amqp_in *m, json_t *body)
{
    json_t *t = json_object_get(body, "experiment");
    char *text = json_is_string(t) ? xstrdup(json_string_value(t))
                 : json_is_object(t) ? json_dumps(t, JSON_COMPACT)
                                     : NULL;
    if (text == NULL || json_object_size(body) != 1) {
        amqp_reject(a, m, "experiment",
                    text == NULL ? "'experiment' must be the template: YAML text or a JSON object"
                                 : "an experiment message holds 'experiment' alone");
        free(text);
        return;
    }
    struct passwd *pw = getpwuid(a->peer.uid);
    struct exp_def *def;
    char *err;
    json_t *req = api_exp_request_text(text, strlen(text), (unsigned)time(NULL),
                                       pw ? pw->pw_dir : "/", &a->peer, &def, &err);
    free(text);
    if (req == NULL) {
        amqp_reject(a, m, "experiment", "%s", err);
        free(err);
        return;
    }
    if (amqp_exp_exists(a, def)) {
        json_decref(req);
        if (!a->hold_acks)
            amqp_io_ack(a->io, m->tag);
        a->duplicates++;
    } else {
        amqp_answer(a, m, amqp_call(a, req));
    }
    exp_def_free(def);
}

static void amqp_delivery(struct amqp *a, const struct amqp_in *m)
{
    json_error_t jerr;
    json_t *body = m->len > 0 && strlen(m->body) == m->len
                       ? json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr)
                       : NULL;
    if (!json_is_object(body)) {
        if (body == NULL && m->len > 0 && strlen(m->body) == m->len)
            amqp_reject(a, m, NULL, "the body is not JSON: %s (line %d, column %d)", jerr.text,
                        jerr.line, jerr.column);
        else
            amqp_reject(a, m, NULL, "the body must be a JSON object (a task, or"
                                    " {\"experiment\": …})");
        json_decref(body);
        return;
    }
    if (json_object_get(body, "experiment") != NULL) {
        if (m->message_id == NULL)
            amqp_reject(a, m, NULL, "an experiment needs a message-id: a redelivery could not"
                                    " be told from a new one");
        else
            amqp_experiment(a, m, body);
    } else if (m->message_id == NULL && !json_is_string(json_object_get(body, "key"))) {
        amqp_reject(a, m, "key", "no message-id and no 'key': a redelivery could not be told"
                                 " from a new submission");
    } else {
        amqp_task(a, m, body);
    }
    json_decref(body);
}

/* ---- the thread's news ------------------------------------------------------------------- */

static void amqp_state(struct amqp *a, const struct amqp_in *m)
{
    free(a->error);
    a->error = m->up ? NULL : xstrdup(m->error ? m->error : "?");
    a->since = daemon_now();
    a->retry_at = m->up ? 0 : a->since + m->retry_ms;
    if (m->up != a->up)
        fprintf(stderr, "drover daemon: amqp: %s%s%s\n",
                m->up ? "connected to " : "not connected: ", m->up ? a->d->cfg.amqp_host : "",
                m->up ? "" : a->error);
    a->up = m->up;
    /* What was not confirmed on the old connection never will be: all of it again, in order. */
    a->sent = 0;
    a->inflight = 0;
    amqp_pump(a);
}

static void amqp_on_notify(evutil_socket_t fd, short what, void *arg)
{
    struct amqp *a = arg;
    struct amqp_in *items;
    size_t n = amqp_io_take(a->io, &items);
    for (size_t i = 0; i < n; i++) {
        struct amqp_in *m = &items[i];
        switch (m->type) {
        case AMQP_IN_DELIVERY:
            if (a->d->stopping)
                break; /* not acked: the broker gives it to the next consumer */
            amqp_delivery(a, m);
            break;
        case AMQP_IN_CONFIRM:
            if (a->inflight > 0)
                a->inflight--;
            if (m->nacked) {
                /* Refused by the broker: from that one on, again. */
                if (a->sent >= m->event_id)
                    a->sent = m->event_id - 1;
            } else {
                xgrow((void **)&a->confirmed, &a->confirmed_cap, a->nconfirmed + 1,
                      sizeof *a->confirmed);
                a->confirmed[a->nconfirmed++] = m->event_id;
            }
            break;
        case AMQP_IN_STATE:
            amqp_state(a, m);
            break;
        }
    }
    amqp_in_free(items, n);
    if (a->nconfirmed > 0) {
        store_begin(a->d->store);
        if (store_amqp_confirmed(a->d->store, a->confirmed, a->nconfirmed) == 0 &&
            store_commit(a->d->store) == 0)
            a->nconfirmed = 0;
        else
            store_rollback(a->d->store); /* kept for the next batch */
    }
    amqp_pump(a);
}

/* ---- start, stop, status ----------------------------------------------------------------- */

int amqp_start(struct daemon *d, char **err)
{
    const struct daemon_config *cfg = &d->cfg;
    if (cfg->amqp == NULL)
        return 0;
    struct amqp *a = xcalloc(1, sizeof *a);
    a->d = d;
    uid_t uid = geteuid();
    if (cfg->amqp_user != NULL) {
        struct passwd pw, *found = NULL;
        char buf[4096];
        if (getpwnam_r(cfg->amqp_user, &pw, buf, sizeof buf, &found) != 0 || found == NULL) {
            *err = xasprintf("amqp-user '%s': no such user", cfg->amqp_user);
            free(a);
            return -1;
        }
        uid = pw.pw_uid;
    }
    if (cfg->system && uid == 0) {
        *err = xstrdup("amqp-user must not be root: messages would act with every right");
        free(a);
        return -1;
    }
    if (!cfg->system && uid != geteuid()) {
        *err = xasprintf("amqp-user '%s' is not this daemon's user: a per-user daemon acts for"
                         " its own user only (use a system daemon)", cfg->amqp_user);
        free(a);
        return -1;
    }
    peer_for_uid(d, uid, (gid_t)-1, &a->peer);
    a->hold_acks = getenv("DROVER_TEST_AMQP_HOLD_ACKS") != NULL;
    struct amqp_io_config io = {
        .host = cfg->amqp_host, .port = cfg->amqp_port, .vhost = cfg->amqp_vhost,
        .user = cfg->amqp_login, .password = cfg->amqp_password, .queue = cfg->amqp_queue,
        .exchange = cfg->amqp_exchange, .prefetch = cfg->amqp_prefetch, .heartbeat_s = 30,
    };
    int fd;
    a->io = amqp_io_start(&io, &fd, err);
    if (a->io == NULL) {
        free(a);
        return -1;
    }
    a->error = xstrdup("connecting");
    a->since = daemon_now();
    a->ev = event_new(d->base, fd, EV_READ | EV_PERSIST, amqp_on_notify, a);
    event_add(a->ev, NULL);
    d->amqp = a;
    return 0;
}

void amqp_stop(struct daemon *d)
{
    struct amqp *a = d->amqp;
    if (a == NULL)
        return;
    d->amqp = NULL;
    amqp_io_stop(a->io);
    event_free(a->ev);
    free(a->error);
    free(a->confirmed);
    free(a);
}

json_t *amqp_status(struct daemon *d)
{
    struct amqp *a = d->amqp;
    if (a == NULL)
        return json_null();
    int64_t waiting = 0, dropped = 0;
    store_amqp_counts(d->store, &waiting, &dropped);
    return json_pack("{s:b,s:o,s:I,s:o,s:s,s:i,s:s,s:s,s:s,s:I,s:I,s:{s:I,s:I,s:I},s:I}", "up",
                     a->up, "error", a->error ? json_string(a->error) : json_null(), "since",
                     (json_int_t)a->since, "retry_at",
                     a->up ? json_null() : json_integer(a->retry_at), "host",
                     d->cfg.amqp_host, "port", d->cfg.amqp_port, "queue", d->cfg.amqp_queue,
                     "exchange", d->cfg.amqp_exchange, "user", a->peer.name, "events_waiting",
                     (json_int_t)waiting, "events_dropped", (json_int_t)dropped, "messages",
                     "accepted", (json_int_t)a->accepted, "duplicate",
                     (json_int_t)a->duplicates, "rejected", (json_int_t)a->rejected,
                     "events_published", (json_int_t)a->published);
}
