/* Webhooks: a JSON POST to a task's notify URL and to the `notify` setting when a task or an
 * experiment ends (docs/API.md, "Events and webhooks").
 *
 * The outbox (store/notify.c) is the queue: a row is inserted in the transaction that ends the
 * task, so a crash never loses one, and deleted once a receiver answered 2xx — delivery is
 * at least once, and the body's "delivery" id lets a receiver drop a repeat. At most
 * NOTIFY_PARALLEL deliveries run at once, each a non-blocking HTTP/1.1 POST on a bufferevent
 * (TLS through bufferevent_openssl, checked against the system's CA store and the URL's host;
 * names resolved by evdns, never by a blocking getaddrinfo), each bounded by NOTIFY_TIMEOUT_S.
 * A failed try is tried again after 1 s, 2 s, 4 s, … up to NOTIFY_BACKOFF_MAX_MS; after
 * NOTIFY_TRIES tries the row is deleted and the daemon's log says so. */
#include "daemon/daemon.h"
#include "util/ratelog.h"
#include "util/xalloc.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

#define NOTIFY_PARALLEL 8
#define NOTIFY_TIMEOUT_S 10
#define NOTIFY_TRIES 10
#define NOTIFY_BACKOFF_MAX_MS (5 * 60 * 1000)
#define NOTIFY_RESPONSE_MAX 8192 /* bytes of a response read before its status line */

struct notify_job {
    struct notify *n;
    int64_t id;
    int tries;
    char *body;
    char *url;
    bool tls;
    char host[256], port[8];
    char *path;
    struct evdns_getaddrinfo_request *dns;
    struct bufferevent *bev;
    struct event *timeout;
    struct notify_job *next;
};

struct notify {
    struct daemon *d;
    struct evdns_base *dns;
    SSL_CTX *tls;
    struct event *timer;       /* the next row due */
    struct notify_job *jobs;
    int njobs;
    bool inserted;             /* the open transaction inserted rows */
};

/* Failed tries, given-up deliveries and outbox errors each repeat on their own. */
static struct ratelog notify_log_retry, notify_log_gave_up, notify_log_store;

/* ---- the bodies ------------------------------------------------------------------------------ */

/* A random id a receiver can drop repeats by (32 hex digits). */
static void notify_delivery_id(char out[33])
{
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof raw) != 1)
        fatalx("notify: no random bytes");
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* Inserts one row per URL (the object's own, then the setting's; the same URL once). */
static int notify_insert(struct daemon *d, const char *own, const char *event, const char *key,
                         json_t *what, core_time now)
{
    const char *urls[2] = {own, d->cfg.notify};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (urls[i] == NULL || (i == 1 && own != NULL && strcmp(own, urls[1]) == 0))
            continue;
        char delivery[33];
        notify_delivery_id(delivery);
        json_t *body = json_pack("{s:s,s:s,s:I,s:O}", "delivery", delivery, "event", event,
                                 "time", (json_int_t)now, key, what);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        int64_t id;
        rc = store_outbox_insert(d->store, urls[i], text, now, &id);
        free(text);
        if (rc == 0 && d->notify != NULL)
            d->notify->inserted = true;
    }
    json_decref(what);
    return rc;
}

int notify_task_ended(struct daemon *d, int64_t task, core_time now)
{
    json_t *brief = store_task_brief(d->store, task);
    const char *own = json_string_value(json_object_get(brief, "notify"));
    int rc = 0;
    if (brief != NULL && (own != NULL || d->cfg.notify != NULL)) {
        json_t *full = store_task_json(d->store, task), *what = json_object();
        static const char *const keys[] = {"id", "name", "user", "state", "reason", "exit_code",
                                           "attempts", "submit_time", "end_time"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            json_t *v = json_object_get(full, keys[i]);
            json_object_set(what, keys[i], v ? v : json_null());
        }
        json_decref(full);
        rc = notify_insert(d, own, "task.ended", "task", what, now);
    }
    json_decref(brief);
    return rc;
}

int notify_experiment_ended(struct daemon *d, const char *name, const char *state,
                            const char *reason, core_time now)
{
    json_t *exp = store_exp_get(d->store, name);
    const char *own = json_string_value(json_object_get(json_object_get(exp, "spec"), "notify"));
    int rc = 0;
    if (own != NULL || d->cfg.notify != NULL)
        rc = notify_insert(d, own, "experiment.ended", "experiment",
                           json_pack("{s:s,s:s,s:o}", "name", name, "state", state, "reason",
                                     reason ? json_string(reason) : json_null()),
                           now);
    json_decref(exp);
    return rc;
}

/* ---- delivery -------------------------------------------------------------------------------- */

static void notify_pump(struct notify *n);

static void notify_arm(struct notify *n, int64_t ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(n->timer, &tv);
}

/* Records how the try went (its own transaction) and frees the job. error NULL: delivered. */
static void notify_finish(struct notify_job *job, const char *error)
{
    struct notify *n = job->n;
    struct daemon *d = n->d;
    int rc;
    store_begin(d->store);
    if (error == NULL) {
        rc = store_outbox_delete(d->store, job->id);
    } else if (job->tries + 1 >= NOTIFY_TRIES) {
        ratelog(&notify_log_gave_up, "drover daemon: webhook %s: giving up after %d tries: %s",
                job->url, job->tries + 1, error);
        rc = store_outbox_delete(d->store, job->id);
    } else {
        int64_t wait = 1000LL << (job->tries < 20 ? job->tries : 20);
        if (wait > NOTIFY_BACKOFF_MAX_MS)
            wait = NOTIFY_BACKOFF_MAX_MS;
        ratelog(&notify_log_retry, "drover daemon: webhook %s: %s (try %d of %d; again in %llds)",
                job->url, error, job->tries + 1, NOTIFY_TRIES, (long long)wait / 1000);
        rc = store_outbox_retry(d->store, job->id, job->tries + 1, daemon_now() + wait, error);
    }
    if (rc < 0) {
        ratelog(&notify_log_store, "drover daemon: webhook outbox: %s", store_error(d->store));
        store_rollback(d->store);
    } else if (store_commit(d->store) < 0) {
        ratelog(&notify_log_store, "drover daemon: webhook outbox: %s", store_error(d->store));
    }
    /* Unlink and free. */
    for (struct notify_job **p = &n->jobs; *p; p = &(*p)->next)
        if (*p == job) {
            *p = job->next;
            break;
        }
    n->njobs--;
    if (job->dns)
        evdns_getaddrinfo_cancel(job->dns); /* its callback runs with EVUTIL_EAI_CANCEL */
    if (job->bev)
        bufferevent_free(job->bev);
    if (job->timeout)
        event_free(job->timeout);
    free(job->url);
    free(job->body);
    free(job->path);
    free(job);
    notify_arm(n, 0); /* the next due rows, from the loop rather than from this callback */
}

static void notify_on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    notify_finish(arg, "no answer within 10 s");
}

/* The status line decides: 2xx delivered, anything else a failed try. */
static void notify_on_read(struct bufferevent *bev, void *arg)
{
    struct notify_job *job = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;
    char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
    if (line == NULL) {
        if (evbuffer_get_length(in) > NOTIFY_RESPONSE_MAX)
            notify_finish(job, "no HTTP status line in the answer");
        return;
    }
    int status = 0;
    char error[64];
    if (sscanf(line, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    free(line);
    if (status >= 200 && status < 300) {
        notify_finish(job, NULL);
        return;
    }
    if (status == 0)
        snprintf(error, sizeof error, "not an HTTP answer");
    else
        snprintf(error, sizeof error, "HTTP %d", status);
    notify_finish(job, error);
}

static void notify_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct notify_job *job = arg;
    char error[256];
    if (what & BEV_EVENT_CONNECTED)
        return;
    unsigned long tls_error = job->tls ? bufferevent_get_openssl_error(bev) : 0;
    if (tls_error != 0) {
        char buf[200];
        ERR_error_string_n(tls_error, buf, sizeof buf);
        snprintf(error, sizeof error, "TLS: %s", buf);
    } else if (what & BEV_EVENT_ERROR) {
        int e = EVUTIL_SOCKET_ERROR();
        snprintf(error, sizeof error, "%s", e ? evutil_socket_error_to_string(e)
                                              : "connection failed");
    } else {
        snprintf(error, sizeof error, "connection closed before an answer");
    }
    notify_finish(job, error);
}

static bool notify_numeric_host(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* A TLS session for job: SNI and the host name (or address) the certificate must name. */
static SSL *notify_tls_session(struct notify_job *job)
{
    SSL *ssl = SSL_new(job->n->tls);
    if (ssl == NULL)
        return NULL;
    if (notify_numeric_host(job->host)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), job->host);
    } else {
        SSL_set_tlsext_host_name(ssl, job->host);
        SSL_set1_host(ssl, job->host);
    }
    return ssl;
}

static void notify_connect(struct notify_job *job, const struct evutil_addrinfo *ai)
{
    struct event_base *base = job->n->d->base;
    int opts = BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS;
    if (job->tls) {
        SSL *ssl = notify_tls_session(job);
        if (ssl == NULL) {
            notify_finish(job, "TLS: cannot make a session");
            return;
        }
        job->bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                  opts);
    } else {
        job->bev = bufferevent_socket_new(base, -1, opts);
    }
    if (job->bev == NULL) {
        notify_finish(job, "cannot make a connection");
        return;
    }
    bufferevent_setcb(job->bev, notify_on_read, NULL, notify_on_event, job);
    bufferevent_enable(job->bev, EV_READ | EV_WRITE);
    const char *v6 = strchr(job->host, ':') ? "[" : "", *v6end = *v6 ? "]" : "";
    bool default_port = strcmp(job->port, job->tls ? "443" : "80") == 0;
    evbuffer_add_printf(bufferevent_get_output(job->bev),
                        "POST %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\n"
                        "Content-Type: application/json\r\nUser-Agent: drover/%s\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                        job->path, v6, job->host, v6end, default_port ? "" : ":",
                        default_port ? "" : job->port, DROVER_VERSION, strlen(job->body));
    evbuffer_add(bufferevent_get_output(job->bev), job->body, strlen(job->body));
    if (bufferevent_socket_connect(job->bev, ai->ai_addr, (int)ai->ai_addrlen) < 0)
        notify_finish(job, "cannot connect");
}

static void notify_on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct notify_job *job = arg;
    if (result == EVUTIL_EAI_CANCEL)
        return; /* the job is being freed */
    job->dns = NULL;
    if (result != 0 || res == NULL) {
        char error[320];
        snprintf(error, sizeof error, "cannot resolve %s: %s", job->host,
                 evutil_gai_strerror(result));
        notify_finish(job, error);
    } else {
        notify_connect(job, res);
    }
    if (res)
        evutil_freeaddrinfo(res);
}

/* Splits http(s)://HOST[:PORT][/PATH] into job; -1 when it is not such a URL. */
static int notify_parse_url(struct notify_job *job)
{
    const char *u = job->url, *rest;
    if (strncmp(u, "https://", 8) == 0) {
        job->tls = true;
        rest = u + 8;
    } else if (strncmp(u, "http://", 7) == 0) {
        rest = u + 7;
    } else {
        return -1;
    }
    size_t auth_len = strcspn(rest, "/?#");
    const char *path = rest + auth_len, *port = NULL, *host = rest, *host_end;
    if (memchr(rest, '@', auth_len) != NULL)
        return -1; /* user:password@ is not supported */
    if (*host == '[') {
        host_end = memchr(rest, ']', auth_len);
        if (host_end == NULL)
            return -1;
        host++;
        if (host_end + 1 < path && host_end[1] == ':')
            port = host_end + 2;
    } else {
        host_end = memchr(rest, ':', auth_len);
        if (host_end != NULL)
            port = host_end + 1;
        else
            host_end = path;
    }
    size_t host_len = (size_t)(host_end - host), port_len = port ? (size_t)(path - port) : 0;
    if (host_len == 0 || host_len >= sizeof job->host || port_len >= sizeof job->port ||
        (port != NULL && port_len == 0))
        return -1;
    memcpy(job->host, host, host_len);
    job->host[host_len] = '\0';
    if (port)
        memcpy(job->port, port, port_len), job->port[port_len] = '\0';
    else
        snprintf(job->port, sizeof job->port, "%s", job->tls ? "443" : "80");
    job->path = *path == '/' ? xstrndup(path, strcspn(path, "#"))
                             : xasprintf("/%.*s", (int)strcspn(path, "#"), path);
    return 0;
}

static void notify_begin(struct notify *n, const struct store_outbox_row *row)
{
    struct notify_job *job = xcalloc(1, sizeof *job);
    job->n = n;
    job->id = row->id;
    job->tries = row->tries;
    job->url = xstrdup(row->url);
    job->body = xstrdup(row->body);
    job->next = n->jobs;
    n->jobs = job;
    n->njobs++;
    job->timeout = evtimer_new(n->d->base, notify_on_timeout, job);
    struct timeval limit = {NOTIFY_TIMEOUT_S, 0};
    event_add(job->timeout, &limit);
    if (notify_parse_url(job) < 0) {
        notify_finish(job, "not an http:// or https:// URL");
        return;
    }
    if (job->tls && n->tls == NULL) {
        notify_finish(job, "TLS is not available");
        return;
    }
    struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                    .ai_protocol = IPPROTO_TCP,
                                    .ai_flags = EVUTIL_AI_ADDRCONFIG};
    /* The callback may run before this returns (a numeric host): then it returns NULL and the
     * job may be gone already. */
    struct evdns_getaddrinfo_request *req =
        evdns_getaddrinfo(n->dns, job->host, job->port, &hints, notify_on_resolved, job);
    if (req != NULL)
        job->dns = req;
}

static bool notify_in_flight(const struct notify *n, int64_t id)
{
    for (const struct notify_job *j = n->jobs; j; j = j->next)
        if (j->id == id)
            return true;
    return false;
}

/* Starts the rows that are due, up to NOTIFY_PARALLEL at once, and arms the timer for the next. */
static void notify_pump(struct notify *n)
{
    int64_t skip[NOTIFY_PARALLEL];
    size_t nskip = 0, nrows = 0;
    struct store_outbox_row *rows = NULL;
    for (const struct notify_job *j = n->jobs; j && nskip < NOTIFY_PARALLEL; j = j->next)
        skip[nskip++] = j->id;
    if (n->njobs < NOTIFY_PARALLEL &&
        store_outbox_due(n->d->store, daemon_now(), skip, nskip,
                         (size_t)(NOTIFY_PARALLEL - n->njobs), &rows, &nrows) == 0) {
        for (size_t i = 0; i < nrows; i++)
            if (!notify_in_flight(n, rows[i].id))
                notify_begin(n, &rows[i]);
        store_outbox_rows_free(rows, nrows);
    }
    if (n->njobs >= NOTIFY_PARALLEL)
        return; /* a job's end pumps again */
    nskip = 0;
    for (const struct notify_job *j = n->jobs; j && nskip < NOTIFY_PARALLEL; j = j->next)
        skip[nskip++] = j->id;
    int64_t next = store_outbox_next(n->d->store, skip, nskip);
    if (next != INT64_MAX) {
        int64_t wait = next - daemon_now();
        notify_arm(n, wait > 0 ? wait : 0);
    }
}

static void notify_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    notify_pump(arg);
}

void notify_txn_end(struct daemon *d, bool committed)
{
    struct notify *n = d->notify;
    if (n == NULL)
        return;
    if (committed && n->inserted)
        notify_arm(n, 0);
    n->inserted = false;
}

void notify_start(struct daemon *d)
{
    struct notify *n = xcalloc(1, sizeof *n);
    n->d = d;
    n->dns = evdns_base_new(d->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                         EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (n->dns == NULL) /* no resolv.conf: numeric hosts (and /etc/hosts) still work */
        n->dns = evdns_base_new(d->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (n->dns != NULL)
        evdns_base_load_hosts(n->dns, NULL);
    n->tls = SSL_CTX_new(TLS_client_method());
    if (n->tls != NULL) {
        SSL_CTX_set_verify(n->tls, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_min_proto_version(n->tls, TLS1_2_VERSION);
        if (SSL_CTX_set_default_verify_paths(n->tls) != 1)
            fprintf(stderr, "drover daemon: webhooks: no system CA store; https may fail\n");
    }
    n->timer = evtimer_new(d->base, notify_on_timer, n);
    d->notify = n;
    notify_arm(n, 0); /* what an earlier daemon left in the outbox */
}

void notify_stop(struct daemon *d)
{
    struct notify *n = d->notify;
    if (n == NULL)
        return;
    /* What is in flight stays in the outbox for the next start. */
    while (n->jobs) {
        struct notify_job *job = n->jobs;
        n->jobs = job->next;
        if (job->dns)
            evdns_getaddrinfo_cancel(job->dns);
        if (job->bev)
            bufferevent_free(job->bev);
        event_free(job->timeout);
        free(job->url);
        free(job->body);
        free(job->path);
        free(job);
    }
    if (n->dns)
        evdns_base_free(n->dns, 0);
    if (n->tls)
        SSL_CTX_free(n->tls);
    event_free(n->timer);
    free(n);
    d->notify = NULL;
}
