/* daemon/http.h — the HTTP server (daemon/http.c) and what answers its requests (daemon/api*.c).
 *
 * http.c owns connections, parsing, bounds (util/limits.h LIMIT_HTTP_*), keep-alive and TLS; it
 * hands each complete request (head and body) to api_handle(), which must answer it — with
 * http_respond*() or by beginning a stream — before it returns. Everything runs on the daemon's
 * loop: nothing here may block. */
#ifndef DROVER_HTTP_H
#define DROVER_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct daemon;
struct http_conn;

/* One request. Valid until it is answered; api_handle must not keep it. */
struct http_req {
    struct daemon *d;
    struct http_conn *conn;
    const char *method;   /* "GET", "POST", "DELETE", …; a HEAD request comes as "GET" with head */
    bool head;            /* answer as GET: http.c sends the head only */
    const char *path;     /* percent-decoded, without the query: "/api/v1/tasks/12" */
    const char *query;    /* as sent, after '?': "state=queued&limit=10", or "" */
    const char *body;     /* NUL-terminated; body_len bytes (may hold NULs); "" when none */
    size_t body_len;
    bool tls;             /* came over TLS (a session cookie is then Secure) */
    char addr[64];        /* the client's address, for logs: "127.0.0.1:53122" */
    const char *raw_headers; /* private to http.c: the header lines */
    size_t raw_headers_len;
};

/* A header's value, trimmed (the first when repeated), malloc'd; NULL when absent. Names match
 * in any case. */
char *http_header(const struct http_req *r, const char *name);
/* A query parameter's value, percent-decoded ('+' is a space), malloc'd; NULL when absent;
 * "" for "?flag" and "?flag=". */
char *http_query(const struct http_req *r, const char *key);

/* Answers r: status, Content-Type, the body (len bytes), and extra header lines (each ending in
 * "\r\n"; NULL for none). The connection is kept alive when the client asked for it and the
 * status is below 500 and the request could be read whole. */
void http_respond(struct http_req *r, int status, const char *type, const char *body, size_t len,
                  const char *extra);
/* The same with a JSON body (steals body; compact, UTF-8, Cache-Control: no-store). */
void http_respond_json(struct http_req *r, int status, json_t *body, const char *extra);

/* A streamed answer (server-sent events, a followed log): the head is sent now with chunked
 * transfer encoding (until-close for HTTP/1.0); the connection serves nothing else after it.
 * on_close(arg) is called once when the client goes away, the stream falls too far behind, or
 * the daemon stops — never after http_stream_end(). The stream is freed after on_close returns:
 * drop every pointer to it there. NULL when http.c has answered r itself: a HEAD request (the
 * head alone is the answer), or r was answered already. */
struct http_stream;
typedef void (*http_stream_closed)(void *arg);
struct http_stream *http_stream_begin(struct http_req *r, int status, const char *type,
                                      const char *extra, http_stream_closed on_close, void *arg);
/* Queues len bytes as one chunk. Returns 0; or -1 when the client has more than
 * LIMIT_HTTP_STREAM_BUFFER bytes unread: the stream is closed (on_close has been called when
 * this returns) and s must not be used again. */
int http_stream_write(struct http_stream *s, const char *data, size_t len);
/* Ends the stream: the last chunk, then the connection closes once it is out. s is gone. */
void http_stream_end(struct http_stream *s);

/* daemon/api.c: routing, authentication, the answers. */
void api_handle(struct http_req *r);

/* ---- for tests/fuzz only (fuzz_http) ---- */
/* Serves fd, a connected stream socket, as a connection the listener accepted (counted in
 * d->conns_open, closed with BEV_OPT_CLOSE_ON_FREE); d->http is made without a listener when
 * there is none. Returns 0. http_stop frees it all. */
int http_adopt_fd(struct daemon *d, int fd);
/* ---- end for tests/fuzz only ---- */

#endif
