/* /metrics: a small HTTP/1.1 server on the daemon's loop. GET (or HEAD) /metrics answers the
 * Prometheus text of the `gpus` snapshot (metrics.c); any other path is 404, any other method
 * 405. It is here, and not libevent's evhttp, because evhttp 2.1 gives no hold on its
 * connections: it can neither count them, nor refuse one, nor close one to free a descriptor,
 * so none of the bounds below could be had with it.
 *
 * Bounds (util/limits.h), each answered with a status before the connection closes:
 *  - the request line and headers: at most LIMIT_HTTP_HEADERS bytes (a read watermark: the
 *    daemon never holds more), else 431;
 *  - a body is never read: one declared over LIMIT_HTTP_BODY gets 413; any other request with a
 *    body is answered and the connection closed, the body read and dropped (at most
 *    LIMIT_HTTP_BODY bytes, HTTP_LINGER_S seconds) so that the client gets the answer;
 *  - a request must be complete LIMIT_HTTP_IDLE_S after the connection became ready for it
 *    (accepted, or its previous answer queued), else the connection is closed; an answer the
 *    client does not read in that time is dropped the same way;
 *  - LIMIT_HTTP_CONNS connections, and never the last quarter of the descriptors (the socket's:
 *    a flood of HTTP clients must not lock the owner out of `drover ls`); beyond, 503.
 * Keep-alive as HTTP/1.1 says, one request at a time. */
#include "daemon/daemon.h"
#include "daemon/listen.h"
#include "daemon/metrics.h"
#include "util/limits.h"
#include "util/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a closing connection's unread request body is drained. */
#define HTTP_LINGER_S 2

struct http {
    struct daemon *d;
    struct listener *listener;
    struct http_conn *oldest, *newest; /* in the order they came */
    int nconns;
    struct ratelog log;
};

struct http_conn {
    struct http *h;
    struct bufferevent *bev;
    struct event *deadline;
    struct http_conn *older, *newer;
    size_t scanned;   /* bytes of the input already searched for the end of the headers */
    bool closing;     /* close once the answer is out */
    bool lingering;   /* answer out, our side shut: dropping what still comes */
    size_t discarded; /* bytes dropped while lingering */
};

/* What a request asked for; the parser's verdict. */
struct http_request {
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    bool http11;
    bool keep_alive;
    bool has_body;
    unsigned long long content_length;
    int error;            /* a status to answer instead, or 0 */
    const char *error_text;
};

static void http_conn_free(struct http_conn *c)
{
    struct http *h = c->h;
    *(c->older ? &c->older->newer : &h->oldest) = c->newer;
    *(c->newer ? &c->newer->older : &h->newest) = c->older;
    h->nconns--;
    event_free(c->deadline);
    bufferevent_free(c->bev);
    listen_closed(h->d);
    free(c);
}

static void http_arm(struct http_conn *c, int seconds)
{
    struct timeval tv = {seconds, 0};
    evtimer_add(c->deadline, &tv);
}

static const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/* The status line and headers of an answer; the caller frees them. */
static char *http_head(int status, const char *type, size_t length, bool close)
{
    return xasprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                     status, http_reason(status), type, length,
                     status == 405 ? "Allow: GET, HEAD\r\n" : "",
                     close ? "Connection: close\r\n" : "");
}

/* Queues an answer. An error status, or close, closes the connection once it is out. */
static void http_answer(struct http_conn *c, int status, const char *type, const char *body,
                        bool head_only, bool close)
{
    size_t len = strlen(body);
    close |= status >= 400;
    char *head = http_head(status, type, len, close);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add(out, head, strlen(head));
    if (!head_only)
        evbuffer_add(out, body, len);
    free(head);
    c->closing = close;
    http_arm(c, LIMIT_HTTP_IDLE_S);
}

static void http_error(struct http_conn *c, int status, const char *text)
{
    char *body = xasprintf("%d %s: %s\n", status, http_reason(status), text);
    http_answer(c, status, "text/plain; charset=utf-8", body, false, true);
    free(body);
}

static bool http_token_is(const char *p, size_t n, const char *word)
{
    return n == strlen(word) && strncasecmp(p, word, n) == 0;
}

/* Whether the comma-separated header value v (n bytes) lists the token word. */
static bool http_lists(const char *v, size_t n, const char *word)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t start = i;
        while (i < n && v[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
            end--;
        if (http_token_is(v + start, end - start, word))
            return true;
    }
    return false;
}

/* Parses the request line and headers, p[0..len) ending in an empty line. */
static void http_parse(const char *p, size_t len, struct http_request *r)
{
    memset(r, 0, sizeof *r);
    const char *end = p + len, *eol = memmem(p, len, "\r\n", 2);
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == p || sp2 == sp1 + 1) {
        r->error = 400;
        r->error_text = "malformed request line";
        return;
    }
    r->method = p;
    r->method_len = (size_t)(sp1 - p);
    r->target = sp1 + 1;
    r->target_len = (size_t)(sp2 - sp1 - 1);
    const char *version = sp2 + 1;
    size_t vlen = (size_t)(eol - version);
    if (http_token_is(version, vlen, "HTTP/1.1"))
        r->http11 = true;
    else if (!http_token_is(version, vlen, "HTTP/1.0")) {
        r->error = 400;
        r->error_text = "only HTTP/1.0 and HTTP/1.1";
        return;
    }
    r->keep_alive = r->http11;
    for (const char *line = eol + 2; line < end;) {
        const char *next = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (next == NULL || next == line)
            break; /* the empty line that ends the headers */
        const char *colon = memchr(line, ':', (size_t)(next - line));
        if (colon == NULL) {
            r->error = 400;
            r->error_text = "malformed header";
            return;
        }
        const char *v = colon + 1, *vend = next;
        while (v < vend && (*v == ' ' || *v == '\t'))
            v++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        size_t name_len = (size_t)(colon - line), vlen2 = (size_t)(vend - v);
        if (http_token_is(line, name_len, "Connection")) {
            if (http_lists(v, vlen2, "close"))
                r->keep_alive = false;
            else if (http_lists(v, vlen2, "keep-alive"))
                r->keep_alive = true;
        } else if (http_token_is(line, name_len, "Content-Length")) {
            char digits[24];
            size_t n = vlen2 < sizeof digits - 1 ? vlen2 : sizeof digits - 1;
            memcpy(digits, v, n);
            digits[n] = '\0';
            char *stop;
            errno = 0;
            r->content_length = strtoull(digits, &stop, 10);
            if (n == 0 || *stop != '\0' || errno != 0 || vlen2 >= sizeof digits - 1) {
                r->error = vlen2 >= sizeof digits - 1 ? 413 : 400;
                r->error_text = "bad Content-Length";
                return;
            }
            r->has_body |= r->content_length > 0;
        } else if (http_token_is(line, name_len, "Transfer-Encoding")) {
            r->has_body = true;
        }
        line = next + 2;
    }
    if (r->content_length > LIMIT_HTTP_BODY) {
        r->error = 413;
        r->error_text = "the body is over LIMIT_HTTP_BODY";
    }
}

static void http_request(struct http_conn *c, const char *p, size_t len)
{
    struct http_request r;
    http_parse(p, len, &r);
    if (r.error) {
        char *text = r.error == 413 ? xasprintf("%s (%u bytes)", r.error_text, LIMIT_HTTP_BODY)
                                    : xstrdup(r.error_text);
        http_error(c, r.error, text);
        free(text);
        return;
    }
    bool head = http_token_is(r.method, r.method_len, "HEAD");
    if (!head && !http_token_is(r.method, r.method_len, "GET")) {
        http_error(c, 405, "drover serves GET /metrics");
        return;
    }
    bool metrics = (r.target_len == 8 && memcmp(r.target, "/metrics", 8) == 0) ||
                   (r.target_len > 8 && memcmp(r.target, "/metrics?", 9) == 0);
    if (!metrics) {
        http_error(c, 404, "drover serves /metrics");
        return;
    }
    json_t *snap = telemetry_snapshot(c->h->d);
    char *text = metrics_render(snap);
    json_decref(snap);
    /* A body we do not read would be taken for the next request: close after answering. */
    http_answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, head,
                !r.keep_alive || r.has_body);
    free(text);
}

/* Answers the complete requests in c's input, one at a time: the next only once the previous
 * answer is out. Never frees c. */
static void http_process(struct http_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (!c->closing && evbuffer_get_length(out) == 0 && evbuffer_get_length(in) > 0) {
        size_t len = evbuffer_get_length(in);
        size_t n = len < LIMIT_HTTP_HEADERS ? len : LIMIT_HTTP_HEADERS;
        const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
        /* Blank lines before a request are allowed (RFC 9112, 2.2). */
        size_t skip = 0;
        while (skip + 1 < n && p[skip] == '\r' && p[skip + 1] == '\n')
            skip += 2;
        if (skip > 0) {
            evbuffer_drain(in, skip);
            c->scanned = 0;
            continue;
        }
        /* Search only what came since the last look: a client trickling its headers a byte at
         * a time costs a byte's work per byte. */
        size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
        const char *end = memmem(p + from, n - from, "\r\n\r\n", 4);
        if (end == NULL) {
            c->scanned = n;
            if (n >= LIMIT_HTTP_HEADERS) {
                char *text = xasprintf("the request line and headers are over"
                                       " LIMIT_HTTP_HEADERS (%u bytes)", LIMIT_HTTP_HEADERS);
                http_error(c, 431, text);
                free(text);
            }
            return;
        }
        size_t hlen = (size_t)(end + 4 - p);
        http_request(c, p, hlen);
        evbuffer_drain(in, hlen);
        c->scanned = 0;
    }
}

static void http_on_read(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->lingering) {
        c->discarded += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->discarded > LIMIT_HTTP_BODY)
            http_conn_free(c);
        return;
    }
    http_process(c);
}

static void http_on_write(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    if (!c->closing) {
        http_process(c); /* requests that came while the answer was going out */
        return;
    }
    /* Answered: shut our side, and drop what the client still sends for a moment, so that
     * closing over unread data does not reset the connection before it reads the answer. */
    shutdown(bufferevent_getfd(bev), SHUT_WR);
    c->lingering = true;
    http_arm(c, HTTP_LINGER_S);
    http_on_read(bev, c);
}

static void http_on_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        http_conn_free(arg);
}

static void http_on_deadline(evutil_socket_t fd, short what, void *arg)
{
    http_conn_free(arg); /* idle, too slow to ask, or too slow to read the answer */
}

static void http_refuse(void *owner, int fd, const char *why)
{
    char *body = xasprintf("503 Service Unavailable: %s\n", why);
    char *head = http_head(503, "text/plain; charset=utf-8", strlen(body), true);
    char *all = xasprintf("%s%s", head, body);
    if (send(fd, all, strlen(all), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* best effort: the client sees the connection close */
    }
    free(all);
    free(head);
    free(body);
}

/* Whether descriptor fd, just given by accept(), is in the last quarter of the limit. The
 * kernel hands out the lowest free descriptor, so every one below fd is taken. */
static bool http_fd_scarce(int fd)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return false;
    return (rlim_t)fd >= rl.rlim_cur - rl.rlim_cur / 4;
}

static void http_on_accept(void *owner, int fd)
{
    struct http *h = owner;
    if (h->nconns >= LIMIT_HTTP_CONNS || http_fd_scarce(fd)) {
        bool many = h->nconns >= LIMIT_HTTP_CONNS;
        ratelog(&h->log, "drover daemon: metrics: refused a connection: %d open (%s)",
                h->nconns, many ? "LIMIT_HTTP_CONNS" : "the last descriptors are the socket's");
        char *why = many ? xasprintf("too many connections (LIMIT_HTTP_CONNS is %d)",
                                     LIMIT_HTTP_CONNS)
                         : xstrdup("the daemon is short of file descriptors");
        http_refuse(h, fd, why);
        free(why);
        listen_shed(fd);
        listen_closed(h->d);
        return;
    }
    struct http_conn *c = xcalloc(1, sizeof *c);
    c->h = h;
    c->older = h->newest;
    *(h->newest ? &h->newest->newer : &h->oldest) = c;
    h->newest = c;
    h->nconns++;
    c->deadline = evtimer_new(h->d->base, http_on_deadline, c);
    c->bev = bufferevent_socket_new(h->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->bev, http_on_read, http_on_write, http_on_event, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, LIMIT_HTTP_HEADERS);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    http_arm(c, LIMIT_HTTP_IDLE_S);
}

bool http_evict(struct daemon *d)
{
    struct http *h = d->http;
    if (h == NULL)
        return false;
    for (struct http_conn *c = h->oldest; c; c = c->newer) {
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
            http_conn_free(c);
            return true;
        }
    }
    return false;
}

static bool http_on_evict(void *owner)
{
    return http_evict(((struct http *)owner)->d);
}

static const struct listener_ops http_ops = {
    .accept = http_on_accept,
    .evict = http_on_evict,
    .refuse = http_refuse,
};

static bool http_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

int http_start(struct daemon *d, char **err)
{
    char *spec = xstrdup(d->cfg.http), *colon = strrchr(spec, ':');
    char *host = spec, *end;
    int rc = -1;
    if (colon == NULL) {
        *err = xasprintf("metrics '%s': expected ADDR:PORT, e.g. 127.0.0.1:9420", d->cfg.http);
        goto done;
    }
    *colon = '\0';
    long port = strtol(colon + 1, &end, 10);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = '\0';
        host++;
    }
    if (*end != '\0' || end == colon + 1 || port <= 0 || port > 65535) {
        *err = xasprintf("metrics '%s': the port must be 1 to 65535", d->cfg.http);
        goto done;
    }
    if (!d->cfg.http_any && !http_loopback(host)) {
        *err = xasprintf("metrics '%s': not a loopback address (set metrics-any to serve it"
                         " to the network)", d->cfg.http);
        goto done;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0) {
        *err = xasprintf("metrics '%s': %s", d->cfg.http, gai_strerror(gai));
        goto done;
    }
    struct http *h = xcalloc(1, sizeof *h);
    h->d = d;
    h->listener = listener_new(d, ai->ai_addr, ai->ai_addrlen, "metrics", &http_ops, h);
    freeaddrinfo(ai);
    if (h->listener == NULL) {
        *err = xasprintf("metrics '%s': cannot listen: %s", d->cfg.http, strerror(errno));
        free(h);
        goto done;
    }
    d->http = h;
    rc = 0;
done:
    free(spec);
    return rc;
}

void http_stop(struct daemon *d)
{
    struct http *h = d->http;
    if (h == NULL)
        return;
    listener_free(h->listener);
    while (h->oldest)
        http_conn_free(h->oldest);
    free(h);
    d->http = NULL;
}
