/* The HTTP/1.1 server of the API, the dashboard and /metrics, on the daemon's loop (http.h).
 * It parses and bounds; daemon/api.c decides what to answer.
 *
 * Not libevent's evhttp: evhttp 2.1 gives no hold on its connections — it can neither count
 * them, nor refuse one, nor close one to free a descriptor — and a stuck client could hold an
 * unbounded answer. Everything below is bounded instead (util/limits.h), each bound answered
 * with a status before the connection closes:
 *  - the request line and headers: at most LIMIT_HTTP_HEADERS bytes (a read watermark: the
 *    daemon never holds more), else 431;
 *  - a body: Content-Length only (a chunked request body gets 411), at most LIMIT_HTTP_BODY
 *    (else 413, before any of it is read), and at most LIMIT_HTTP_BODIES being received by all
 *    connections at once (else 503); the read watermark grows to the one request's size;
 *  - a request must be complete LIMIT_HTTP_IDLE_S after the connection became ready for it
 *    (accepted, or its previous answer queued), else the connection is closed: a slowloris
 *    client holds one connection for that long and nothing more; an answer the client does not
 *    read in that time is dropped the same way;
 *  - a streamed answer (http_stream_*) with more than LIMIT_HTTP_STREAM_BUFFER bytes unread
 *    drops its client;
 *  - LIMIT_HTTP_CONNS connections, and never the last quarter of the descriptors (the socket's:
 *    a flood of HTTP clients must not lock the owner out of `drover ls`); beyond, 503.
 * Keep-alive as HTTP/1.1 says, one request at a time; TLS (http-tls-cert, http-tls-key) through
 * libevent's OpenSSL bufferevents. */
#include "daemon/http.h"
#include "daemon/daemon.h"
#include "daemon/listen.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a closing connection's unread request body is drained. */
#define HTTP_LINGER_S 2
/* The most written to a socket at once (libevent's default is 16 KiB: a page of tasks would
 * take several loop turns). */
#define HTTP_MAX_WRITE (256 << 10)

struct http {
    struct daemon *d;
    struct listener *listener;
    SSL_CTX *tls;                      /* NULL: plain HTTP */
    struct http_conn *oldest, *newest; /* in the order they came */
    int nconns;
    size_t bodies;                     /* bytes of bodies being received, LIMIT_HTTP_BODIES */
    struct ratelog log;
};

/* A parsed request head: offsets into the connection's input, which moves when pulled up. */
struct http_head {
    size_t len;                        /* the head's bytes, up to and with the empty line */
    size_t method_len, target_off, target_len;
    bool http11, keep_alive, expect_continue;
    unsigned long long content_length;
};

struct http_stream {
    struct http_conn *c;
    http_stream_closed on_close;
    void *arg;
    bool chunked;
};

struct http_conn {
    struct http *h;
    struct bufferevent *bev;
    struct event *deadline;
    struct http_conn *older, *newer;
    char addr[64];
    bool tls;
    size_t scanned;        /* bytes of the input already searched for the end of the head */
    struct http_head head; /* head.len > 0: the head is in, waiting for its body */
    size_t reserved;       /* of h->bodies, for the body being received */
    /* The request being answered (inside api_handle). */
    bool answered, keep_alive, head_only, http11;
    struct http_stream *stream;
    bool closing;          /* close once the answer is out */
    bool lingering;        /* answer out, our side shut: dropping what still comes */
    bool dead;             /* closed while being used: freed at the next loop turn */
    size_t discarded;      /* bytes dropped while lingering */
};

static void http_conn_free(struct http_conn *c)
{
    struct http *h = c->h;
    if (c->stream != NULL) {
        struct http_stream *s = c->stream;
        c->stream = NULL;
        s->on_close(s->arg);
        free(s);
    }
    *(c->older ? &c->older->newer : &h->oldest) = c->newer;
    *(c->newer ? &c->newer->older : &h->newest) = c->older;
    h->nconns--;
    h->bodies -= c->reserved;
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

/* Closes c from inside a callback that may still use it: the stream's owner hears of it now,
 * the memory goes at the next loop turn. */
static void http_kill(struct http_conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->stream != NULL) {
        struct http_stream *s = c->stream;
        c->stream = NULL;
        s->on_close(s->arg);
        free(s);
    }
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    http_arm(c, 0);
}

static const char *http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return status < 400 ? "OK" : "Error";
    }
}

/* Queues a status line and headers. length < 0: none (a stream). */
static void http_put_head(struct http_conn *c, int status, const char *type, long long length,
                          const char *extra, bool close)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, http_reason(status));
    if (type != NULL)
        evbuffer_add_printf(out, "Content-Type: %s\r\n", type);
    if (length >= 0)
        evbuffer_add_printf(out, "Content-Length: %lld\r\n", length);
    evbuffer_add_printf(out, "X-Content-Type-Options: nosniff\r\n%s%s\r\n", extra ? extra : "",
                        close ? "Connection: close\r\n" : "");
}

/* An answer http.c gives itself (a bound, a malformed request): JSON as the API's errors are,
 * and the connection closes once it is out, as what follows in the input cannot be trusted. */
static void http_fail(struct http_conn *c, int status, const char *text)
{
    json_t *body = json_pack("{s:s,s:n}", "error", text, "field");
    char *json = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t len = strlen(json);
    http_put_head(c, status, "application/json", (long long)len,
                  status == 405 ? "Allow: GET, HEAD, POST, DELETE\r\n" : NULL, true);
    if (!c->head_only)
        evbuffer_add(bufferevent_get_output(c->bev), json, len);
    free(json);
    c->closing = true;
    http_arm(c, LIMIT_HTTP_IDLE_S);
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

/* Calls fn(name, name_len, value, value_len, arg) for each header line of block (the lines after
 * the request line, ending at the empty line); stops when fn returns false. Returns false when a
 * line is malformed. */
typedef bool (*http_header_fn)(const char *name, size_t nlen, const char *v, size_t vlen,
                               void *arg);
static bool http_each_header(const char *block, size_t len, http_header_fn fn, void *arg)
{
    const char *end = block + len;
    for (const char *line = block; line < end;) {
        const char *next = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (next == NULL)
            next = end;
        if (next == line)
            break; /* the empty line that ends the headers */
        const char *colon = memchr(line, ':', (size_t)(next - line));
        if (colon == NULL || colon == line)
            return false;
        const char *v = colon + 1, *vend = next;
        while (v < vend && (*v == ' ' || *v == '\t'))
            v++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        if (!fn(line, (size_t)(colon - line), v, (size_t)(vend - v), arg))
            break;
        line = next + 2;
    }
    return true;
}

struct http_parse_state {
    struct http_head *head;
    int error;
    const char *error_text;
    int lengths;
    bool chunked;
};

static bool http_parse_header(const char *name, size_t nlen, const char *v, size_t vlen,
                              void *arg)
{
    struct http_parse_state *st = arg;
    struct http_head *h = st->head;
    if (http_token_is(name, nlen, "Connection")) {
        if (http_lists(v, vlen, "close"))
            h->keep_alive = false;
        else if (http_lists(v, vlen, "keep-alive"))
            h->keep_alive = true;
    } else if (http_token_is(name, nlen, "Content-Length")) {
        char digits[24];
        bool ok = vlen > 0 && vlen < sizeof digits;
        for (size_t i = 0; ok && i < vlen; i++)
            ok = v[i] >= '0' && v[i] <= '9';
        if (!ok) {
            st->error = vlen >= sizeof digits ? 413 : 400;
            st->error_text = "bad Content-Length";
            return false;
        }
        memcpy(digits, v, vlen);
        digits[vlen] = '\0';
        unsigned long long n = strtoull(digits, NULL, 10);
        if (st->lengths++ > 0 && n != h->content_length) {
            st->error = 400;
            st->error_text = "two different Content-Length headers";
            return false;
        }
        h->content_length = n;
    } else if (http_token_is(name, nlen, "Transfer-Encoding")) {
        st->chunked = true;
    } else if (http_token_is(name, nlen, "Expect")) {
        h->expect_continue = http_lists(v, vlen, "100-continue");
    }
    return true;
}

/* Parses the request line and headers, p[0..len) ending in an empty line. Returns 0, or the
 * status to answer with *text. */
static int http_parse(const char *p, size_t len, struct http_head *h, const char **text)
{
    memset(h, 0, sizeof *h);
    h->len = len;
    const char *eol = memmem(p, len, "\r\n", 2);
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == p || sp2 == sp1 + 1) {
        *text = "malformed request line";
        return 400;
    }
    h->method_len = (size_t)(sp1 - p);
    h->target_off = (size_t)(sp1 + 1 - p);
    h->target_len = (size_t)(sp2 - sp1 - 1);
    const char *version = sp2 + 1;
    size_t vlen = (size_t)(eol - version);
    if (http_token_is(version, vlen, "HTTP/1.1")) {
        h->http11 = true;
    } else if (!http_token_is(version, vlen, "HTTP/1.0")) {
        *text = "only HTTP/1.0 and HTTP/1.1";
        return 400;
    }
    h->keep_alive = h->http11;
    struct http_parse_state st = {.head = h};
    const char *block = eol + 2;
    if (!http_each_header(block, (size_t)(p + len - block), http_parse_header, &st)) {
        *text = "malformed header";
        return 400;
    }
    if (st.error) {
        *text = st.error_text;
        return st.error;
    }
    if (st.chunked) {
        *text = "a chunked request body: send Content-Length";
        return 411;
    }
    if (h->content_length > LIMIT_HTTP_BODY) {
        *text = "the body is over LIMIT_HTTP_BODY (1048576 bytes)";
        return 413;
    }
    return 0;
}

struct http_find {
    const char *name;
    char *value;
};

static bool http_find_header(const char *name, size_t nlen, const char *v, size_t vlen,
                             void *arg)
{
    struct http_find *f = arg;
    if (!http_token_is(name, nlen, f->name))
        return true;
    f->value = xstrndup(v, vlen);
    return false;
}

char *http_header(const struct http_req *r, const char *name)
{
    struct http_find f = {.name = name};
    http_each_header(r->raw_headers, r->raw_headers_len, http_find_header, &f);
    return f.value;
}

char *http_query(const struct http_req *r, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = r->query; *p;) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *kend = eq ? eq : end;
        char *k = parse_percent(p, (size_t)(kend - p), true);
        bool match = k != NULL && strlen(k) == klen && memcmp(k, key, klen) == 0;
        free(k);
        if (match)
            return eq ? parse_percent(eq + 1, (size_t)(end - eq - 1), true) : xstrdup("");
        p = amp ? amp + 1 : end;
    }
    return NULL;
}

void http_respond(struct http_req *r, int status, const char *type, const char *body, size_t len,
                  const char *extra)
{
    struct http_conn *c = r->conn;
    if (c->answered || c->dead)
        return;
    c->answered = true;
    bool close = !c->keep_alive || status >= 500;
    http_put_head(c, status, type, (long long)len, extra, close);
    if (!c->head_only && len > 0)
        evbuffer_add(bufferevent_get_output(c->bev), body, len);
    c->closing = close;
    http_arm(c, LIMIT_HTTP_IDLE_S);
}

void http_respond_json(struct http_req *r, int status, json_t *body, const char *extra)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(body);
    if (text == NULL)
        text = xstrdup("{\"error\":\"the answer could not be encoded\",\"field\":null}");
    char *headers = xasprintf("Cache-Control: no-store\r\n%s", extra ? extra : "");
    http_respond(r, status, "application/json", text, strlen(text), headers);
    free(headers);
    free(text);
}

struct http_stream *http_stream_begin(struct http_req *r, int status, const char *type,
                                      const char *extra, http_stream_closed on_close, void *arg)
{
    struct http_conn *c = r->conn;
    if (c->answered || c->dead)
        return NULL;
    c->answered = true;
    char *headers = xasprintf("Cache-Control: no-store\r\nX-Accel-Buffering: no\r\n%s%s",
                              c->http11 ? "Transfer-Encoding: chunked\r\n" : "",
                              extra ? extra : "");
    if (c->head_only) {
        /* HEAD: the head alone is the answer (a chunk after it would be read as the next
         * answer), and the connection goes on as http_respond would keep it. */
        http_put_head(c, status, type, -1, headers, !c->keep_alive);
        free(headers);
        c->closing = !c->keep_alive;
        http_arm(c, LIMIT_HTTP_IDLE_S);
        return NULL;
    }
    struct http_stream *s = xcalloc(1, sizeof *s);
    s->c = c;
    s->on_close = on_close;
    s->arg = arg;
    s->chunked = c->http11;
    http_put_head(c, status, type, -1, headers, !s->chunked);
    free(headers);
    c->stream = s;
    evtimer_del(c->deadline); /* a stream lasts as long as its owner wants */
    return s;
}

int http_stream_write(struct http_stream *s, const char *data, size_t len)
{
    struct http_conn *c = s->c;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (evbuffer_get_length(out) + len > LIMIT_HTTP_STREAM_BUFFER) {
        ratelog(&c->h->log, "drover daemon: http: dropped a stream to %s: its client is over"
                " LIMIT_HTTP_STREAM_BUFFER behind", c->addr);
        http_kill(c);
        return -1;
    }
    if (len == 0)
        return 0;
    if (s->chunked)
        evbuffer_add_printf(out, "%zx\r\n", len);
    evbuffer_add(out, data, len);
    if (s->chunked)
        evbuffer_add(out, "\r\n", 2);
    return 0;
}

void http_stream_end(struct http_stream *s)
{
    struct http_conn *c = s->c;
    if (s->chunked)
        evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
    c->stream = NULL;
    free(s);
    c->closing = true;
    http_arm(c, LIMIT_HTTP_IDLE_S);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* The head is in and the body (h->content_length bytes) too: hands the request to the API. */
static void http_dispatch(struct http_conn *c)
{
    struct http_head *h = &c->head;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t total = h->len + (size_t)h->content_length;
    char *p = (char *)evbuffer_pullup(in, (ev_ssize_t)total);
    const char *target = p + h->target_off;
    size_t tlen = h->target_len;
    /* absolute-form (a proxy's): "http://host/path" */
    if (tlen > 7 && (strncasecmp(target, "http://", 7) == 0 ||
                     strncasecmp(target, "https://", 8) == 0)) {
        const char *slash = memchr(target + 8, '/', tlen - 8);
        size_t skip = slash ? (size_t)(slash - target) : tlen;
        target += skip;
        tlen -= skip;
    }
    const char *q = memchr(target, '?', tlen);
    size_t plen = q ? (size_t)(q - target) : tlen;
    char *path = plen > 0 && target[0] == '/' ? parse_percent(target, plen, false) : NULL;
    char *query = q ? xstrndup(q + 1, tlen - plen - 1) : xstrdup("");
    char *method = xstrndup(p, h->method_len);
    char *body = xmalloc((size_t)h->content_length + 1);
    memcpy(body, p + h->len, (size_t)h->content_length);
    body[h->content_length] = '\0';
    const char *eol = memmem(p, h->len, "\r\n", 2);
    char *headers = xstrndup(eol + 2, (size_t)(p + h->len - (eol + 2)));
    evbuffer_drain(in, total);
    c->h->bodies -= c->reserved;
    c->reserved = 0;
    bufferevent_setwatermark(c->bev, EV_READ, 0, LIMIT_HTTP_HEADERS);
    c->scanned = 0;
    c->answered = false;
    c->keep_alive = h->keep_alive;
    c->http11 = h->http11;
    c->head_only = strcmp(method, "HEAD") == 0;
    h->len = 0;
    if (path == NULL) {
        http_fail(c, 400, "malformed request target (an absolute path, percent-encoded)");
    } else {
        struct http_req r = {
            .d = c->h->d, .conn = c, .method = c->head_only ? "GET" : method,
            .head = c->head_only, .path = path, .query = query, .body = body,
            .body_len = (size_t)c->head.content_length, .tls = c->tls,
            .raw_headers = headers, .raw_headers_len = strlen(headers),
        };
        snprintf(r.addr, sizeof r.addr, "%s", c->addr);
        api_handle(&r);
        if (!c->answered && !c->dead)
            http_fail(c, 500, "the request was not answered");
    }
    free(path);
    free(query);
    free(method);
    free(body);
    free(headers);
}

/* Answers the complete requests in c's input, one at a time: the next only once the previous
 * answer is out. Never frees c (http_kill defers it). */
static void http_process(struct http_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (!c->closing && !c->dead && c->stream == NULL && evbuffer_get_length(out) == 0 &&
           evbuffer_get_length(in) > 0) {
        if (c->head.len > 0) { /* waiting for a body */
            if (evbuffer_get_length(in) < c->head.len + c->head.content_length)
                return;
            http_dispatch(c);
            continue;
        }
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
                http_fail(c, 431, text);
                free(text);
            }
            return;
        }
        const char *text = NULL;
        c->head_only = false; /* until this request says it is a HEAD */
        int status = http_parse(p, (size_t)(end + 4 - p), &c->head, &text);
        if (status != 0) {
            c->head.len = 0;
            http_fail(c, status, text);
            return;
        }
        size_t body = (size_t)c->head.content_length;
        if (body > 0) {
            if (c->h->bodies + body > LIMIT_HTTP_BODIES) {
                c->head.len = 0;
                ratelog(&c->h->log, "drover daemon: http: refused a request body of %zu bytes:"
                        " LIMIT_HTTP_BODIES", body);
                http_fail(c, 503, "too many request bodies being received at once"
                                  " (LIMIT_HTTP_BODIES): try again");
                return;
            }
            c->reserved = body;
            c->h->bodies += body;
            bufferevent_setwatermark(c->bev, EV_READ, 0, c->head.len + body);
            if (c->head.expect_continue && evbuffer_get_length(in) < c->head.len + body)
                evbuffer_add_printf(out, "HTTP/1.1 100 Continue\r\n\r\n");
        }
    }
}

static void http_on_read(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->dead)
        return;
    if (c->lingering || c->stream != NULL) {
        /* A stream's client has nothing more to say; a closing one's rest is dropped. */
        c->discarded += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->lingering && c->discarded > LIMIT_HTTP_BODY)
            http_kill(c);
        return;
    }
    http_process(c);
}

static void http_on_write(struct bufferevent *bev, void *arg)
{
    struct http_conn *c = arg;
    if (c->dead || c->stream != NULL)
        return;
    if (!c->closing) {
        http_process(c); /* requests that came while the answer was going out */
        return;
    }
    if (c->tls) {
        http_kill(c);
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
        http_kill(arg);
}

static void http_on_deadline(evutil_socket_t fd, short what, void *arg)
{
    http_conn_free(arg); /* idle, too slow to ask, too slow to read the answer, or killed */
}

static void http_refuse(void *owner, int fd, const char *why)
{
    struct http *h = owner;
    if (h->tls != NULL)
        return; /* no answer without a handshake: the client sees the connection close */
    char *body = xasprintf("{\"error\":\"%s\",\"field\":null}", why);
    char *all = xasprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                          "\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                          strlen(body), body);
    if (send(fd, all, strlen(all), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* best effort: the client sees the connection close */
    }
    free(all);
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

static void http_peer_addr(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, len, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

static void http_on_accept(void *owner, int fd)
{
    struct http *h = owner;
    if (h->nconns >= LIMIT_HTTP_CONNS || http_fd_scarce(fd)) {
        bool many = h->nconns >= LIMIT_HTTP_CONNS;
        ratelog(&h->log, "drover daemon: http: refused a connection: %d open (%s)",
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
    /* Answers go out as soon as they are queued: without this, the last segment of a large one
     * waits for the client's delayed ACK of the previous (Nagle), ≈40 ms a request. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct bufferevent *bev;
    if (h->tls != NULL) {
        SSL *ssl = SSL_new(h->tls);
        if (ssl == NULL) {
            close(fd);
            listen_closed(h->d);
            return;
        }
        bev = bufferevent_openssl_socket_new(h->d->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE);
        if (bev != NULL)
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    } else {
        bev = bufferevent_socket_new(h->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    if (bev == NULL) {
        close(fd);
        listen_closed(h->d);
        return;
    }
    struct http_conn *c = xcalloc(1, sizeof *c);
    c->h = h;
    c->bev = bev;
    c->tls = h->tls != NULL;
    http_peer_addr(fd, c->addr, sizeof c->addr);
    c->older = h->newest;
    *(h->newest ? &h->newest->newer : &h->oldest) = c;
    h->newest = c;
    h->nconns++;
    c->deadline = evtimer_new(h->d->base, http_on_deadline, c);
    bufferevent_setcb(c->bev, http_on_read, http_on_write, http_on_event, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, LIMIT_HTTP_HEADERS);
    bufferevent_set_max_single_write(c->bev, HTTP_MAX_WRITE);
    bufferevent_priority_set(c->bev, DAEMON_PRIO_HTTP);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    http_arm(c, LIMIT_HTTP_IDLE_S);
}

bool http_evict(struct daemon *d)
{
    struct http *h = d->http;
    if (h == NULL)
        return false;
    for (struct http_conn *c = h->oldest; c; c = c->newer) {
        if (!c->dead && c->stream == NULL &&
            evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
            http_conn_free(c);
            return true;
        }
    }
    return false;
}

/* For tests/fuzz only (http.h): fd as if the listener had accepted it. */
int http_adopt_fd(struct daemon *d, int fd)
{
    if (d->http == NULL) {
        d->http = xcalloc(1, sizeof *d->http);
        d->http->d = d;
    }
    d->conns_open++; /* as the listener counts what it accepts: http_conn_free gives it back */
    http_on_accept(d->http, fd);
    return 0;
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

/* OpenSSL's last error, one line (malloc'd). */
static char *http_tls_error(void)
{
    char buf[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return xstrdup(buf);
}

/* The TLS context of http-tls-cert and http-tls-key: TLS 1.2 at least. NULL with *err. */
static SSL_CTX *http_tls_new(const struct daemon_config *cfg, char **err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    char *what = NULL;
    if (ctx == NULL) {
        what = xstrdup("cannot make a TLS context");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->http_tls_cert) != 1) {
        what = xasprintf("http-tls-cert %s", cfg->http_tls_cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->http_tls_key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
        what = mismatch ? xasprintf("http-tls-key %s does not match http-tls-cert %s",
                                    cfg->http_tls_key, cfg->http_tls_cert)
                        : xasprintf("http-tls-key %s", cfg->http_tls_key);
        goto fail;
    }
    return ctx;
fail:;
    char *why = http_tls_error();
    *err = xasprintf("%s: %s", what, why);
    free(why);
    free(what);
    SSL_CTX_free(ctx);
    return NULL;
}

int http_start(struct daemon *d, char **err)
{
    const char *setting = d->cfg.http;
    char *spec = xstrdup(setting), *colon = strrchr(spec, ':');
    char *host = spec, *end;
    int rc = -1;
    SSL_CTX *tls = NULL;
    if (colon == NULL) {
        *err = xasprintf("http '%s': expected ADDR:PORT, e.g. 127.0.0.1:8420", setting);
        goto done;
    }
    *colon = '\0';
    long port = strtol(colon + 1, &end, 10);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = '\0';
        host++;
    }
    if (*end != '\0' || end == colon + 1 || port <= 0 || port > 65535) {
        *err = xasprintf("http '%s': the port must be 1 to 65535", setting);
        goto done;
    }
    if (!d->cfg.http_any && !http_loopback(host)) {
        *err = xasprintf("http '%s': not a loopback address (set http-any = yes to serve it"
                         " to the network)", setting);
        goto done;
    }
    if (d->cfg.http_tls_cert != NULL && (tls = http_tls_new(&d->cfg, err)) == NULL)
        goto done;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0) {
        *err = xasprintf("http '%s': %s", setting, gai_strerror(gai));
        goto done;
    }
    struct http *h = xcalloc(1, sizeof *h);
    h->d = d;
    h->tls = tls;
    h->listener = listener_new(d, ai->ai_addr, ai->ai_addrlen, "http", &http_ops, h);
    freeaddrinfo(ai);
    if (h->listener == NULL) {
        *err = xasprintf("http '%s': cannot listen: %s", setting, strerror(errno));
        free(h);
        goto done;
    }
    tls = NULL;
    d->http = h;
    rc = 0;
done:
    SSL_CTX_free(tls);
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
    SSL_CTX_free(h->tls);
    free(h);
    d->http = NULL;
}
