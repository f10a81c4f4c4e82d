/* The unix-socket server: framed JSON requests in, replies out. Nothing a client sends can
 * take the daemon down: a bad frame gets an error reply and the connection is closed. */
#include "daemon/daemon.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct conn {
    struct daemon *d;
    struct bufferevent *bev;
    bool closing;  /* close once the output is flushed */
    bool deferred; /* a reply is pending (wait) */
};

json_t *reply_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    json_t *r = json_pack("{s:b,s:s,s:i}", "ok", 0, "error", msg, "code", code);
    free(msg);
    return r;
}

json_t *reply_ok(void)
{
    return json_pack("{s:b}", "ok", 1);
}

static void conn_free(struct conn *c)
{
    if (c->d->stopping)
        event_base_loopexit(c->d->base, NULL);
    ops_drop_conn(c->d, c);
    bufferevent_free(c->bev);
    free(c);
}

static void conn_send(struct conn *c, json_t *reply)
{
    char *text = json_dumps(reply, JSON_COMPACT);
    size_t len = strlen(text), off = 0;
    char *frame = xmalloc(len + 4);
    frame[0] = (char)(len >> 24);
    frame[1] = (char)(len >> 16);
    frame[2] = (char)(len >> 8);
    frame[3] = (char)len;
    memcpy(frame + 4, text, len);
    free(text);
    json_decref(reply);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    /* Send now when nothing is queued before it: work deferred past the reply (spawning a
     * submitted task's supervisor) must not delay it, and a daemon about to stop must still
     * answer. What does not fit goes out through the bufferevent. */
    if (evbuffer_get_length(out) == 0) {
        ssize_t w = send(bufferevent_getfd(c->bev), frame, len + 4, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            off = (size_t)w;
    }
    if (off < len + 4)
        evbuffer_add(out, frame + off, len + 4 - off);
    free(frame);
}

void server_reply(struct conn *c, json_t *reply)
{
    c->deferred = false;
    conn_send(c, reply);
}

static void conn_on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        conn_free(c);
}

static void conn_on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!c->closing && !c->deferred && evbuffer_get_length(in) >= 4) {
        unsigned char hdr[4];
        evbuffer_copyout(in, hdr, 4);
        size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
        if (len > PROTO_MAX_REQUEST) {
            conn_send(c, reply_error(2, "request too large (%zu bytes, at most %u)", len,
                                     PROTO_MAX_REQUEST));
            c->closing = true;
            break;
        }
        if (evbuffer_get_length(in) < 4 + len)
            break;
        evbuffer_drain(in, 4);
        char *body = xmalloc(len + 1);
        evbuffer_remove(in, body, len);
        json_error_t jerr;
        json_t *req = json_loadb(body, len, 0, &jerr);
        free(body);
        json_t *reply;
        if (req == NULL || !json_is_object(req)) {
            reply = reply_error(2, "malformed request: %s", req ? "not an object" : jerr.text);
        } else {
            reply = ops_dispatch(c->d, c, req);
            if (reply == NULL)
                c->deferred = true;
        }
        json_decref(req);
        if (reply)
            conn_send(c, reply);
        if (c->d->stopping)
            c->closing = true;
    }
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_free(c);
}

static void conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(arg);
}

static void server_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                             int len, void *arg)
{
    struct daemon *d = arg;
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != getuid()) {
        close(fd); /* only the daemon's own user may talk to it */
        return;
    }
    struct conn *c = xcalloc(1, sizeof *c);
    c->d = d;
    c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->bev, conn_on_read, conn_on_write, conn_on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

int server_listen(struct daemon *d, const char *path, char **err)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        *err = xasprintf("socket path too long: %s", path);
        return -1;
    }
    strcpy(sun.sun_path, path);
    unlink(path); /* we hold the state directory's lock: any socket there is stale */
    mode_t old = umask(0177);
    d->listener = evconnlistener_new_bind(d->base, server_on_accept, d,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128,
                                          (struct sockaddr *)&sun, sizeof sun);
    umask(old);
    if (d->listener == NULL) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        return -1;
    }
    chmod(path, 0600);
    return 0;
}

void server_close(struct daemon *d)
{
    if (d->listener)
        evconnlistener_free(d->listener);
    d->listener = NULL;
}
