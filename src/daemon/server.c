/* The unix-socket server: framed JSON requests in, replies out. Nothing a client sends can take
 * the daemon down, or make it hold more than the bounds of util/limits.h:
 *  - a frame is at most LIMIT_FRAME bytes; a larger, malformed or unknown request gets an error
 *    reply and the connection closes;
 *  - a connection has at most LIMIT_CONN_BUFFER bytes buffered (a read watermark: past it the
 *    daemon stops reading the socket);
 *  - one reply at a time: the next request is looked at once the previous reply has been sent,
 *    so a client that does not read cannot make replies pile up;
 *  - while a reply is deferred (wait) the connection is still read, so that a client that leaves
 *    is noticed at once; one that fills LIMIT_CONN_BUFFER meanwhile is refused and closed;
 *  - beyond the first LIMIT_UID_BUFFER_EXEMPT bytes of each connection (so that small requests
 *    always get through), one uid's connections hold at most LIMIT_UID_BUFFER bytes: the
 *    connection that goes over is refused and closed;
 *  - a uid has at most LIMIT_CONNS_PER_UID connections open (and the daemon LIMIT_CONNS, socket
 *    and HTTP together: listen.c, which also handles running out of descriptors);
 *  - a request must have arrived whole LIMIT_PARTIAL_FRAME_S after the connection became ready
 *    for it (accepted, or its previous reply sent): idle and trickling connections are closed.
 * A refusal is {"ok": false, "error": "... LIMIT_NAME value ...", "code": 3} (2 when the client
 * broke the protocol), then the connection closes. */
#include "daemon/daemon.h"
#include "daemon/listen.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The descriptor limit the daemon asks for (up to the hard limit): LIMIT_CONNS connections plus
 * the daemon's own descriptors (database, zygote, run directories being opened; under a
 * hundred), with room to spare. Tasks are normally forked by the zygote, started before this
 * is raised, so they keep the user's limit. */
#define SERVER_NOFILE 4096

struct uid_use {
    uid_t uid;
    int conns;
    size_t bytes; /* buffered from its connections, beyond each one's exempt bytes */
};

struct server {
    struct daemon *d;
    struct listener *listener;
    struct conn *oldest, *newest; /* every open connection, in the order they came */
    struct uid_use *uids;         /* only grows: a conn keeps an index into it */
    size_t nuids, uids_cap;
    struct ratelog log;
};

struct conn {
    struct server *s;
    struct daemon *d;
    struct bufferevent *bev;
    struct event *deadline; /* the next request must have arrived by then */
    struct conn *older, *newer;
    size_t uid_at;          /* in s->uids */
    size_t counted;         /* bytes of its input counted in its uid's use */
    struct peer peer;       /* who connected (SO_PEERCRED) */
    bool closing;           /* close once the output is flushed */
    bool deferred;          /* a reply is pending (wait) */
    bool read_only;         /* a virtual connection of a read-only token: ops that write are
                             * refused (ops_dispatch) */
};

json_t *reply_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    /* A message may quote bytes that are not UTF-8 (a path, an error from below); jansson would
     * refuse it and a NULL reply reads as "deferred", leaving the client hanging. */
    for (size_t bad; (bad = utf8_check(msg)) > 0;)
        msg[bad - 1] = '?';
    json_t *r = json_pack("{s:b,s:s,s:i}", "ok", 0, "error", msg, "code", code);
    free(msg);
    if (r == NULL)
        fatalx("reply_error: json_pack failed");
    return r;
}

json_t *reply_ok(void)
{
    return json_pack("{s:b}", "ok", 1);
}

/* The reply as a frame: 4-byte big-endian length, then the JSON. Steals reply; the caller frees
 * the frame. */
static char *server_frame(json_t *reply, size_t *size)
{
    char *text = json_dumps(reply, JSON_COMPACT);
    size_t len = strlen(text);
    char *frame = xmalloc(len + 4);
    frame[0] = (char)(len >> 24);
    frame[1] = (char)(len >> 16);
    frame[2] = (char)(len >> 8);
    frame[3] = (char)len;
    memcpy(frame + 4, text, len);
    free(text);
    json_decref(reply);
    *size = len + 4;
    return frame;
}

static struct uid_use *server_uid(struct server *s, uid_t uid, size_t *at)
{
    size_t i = 0;
    while (i < s->nuids && s->uids[i].uid != uid)
        i++;
    if (i == s->nuids) {
        xgrow((void **)&s->uids, &s->uids_cap, s->nuids + 1, sizeof *s->uids);
        s->uids[s->nuids++] = (struct uid_use){.uid = uid};
    }
    *at = i;
    return &s->uids[i];
}

static void conn_arm(struct conn *c)
{
    struct timeval tv = {LIMIT_PARTIAL_FRAME_S, 0};
    evtimer_add(c->deadline, &tv);
}

static void conn_free(struct conn *c)
{
    struct server *s = c->s;
    if (c->d->stopping)
        event_base_loopexit(c->d->base, NULL);
    ops_drop_conn(c->d, c);
    s->uids[c->uid_at].conns--;
    s->uids[c->uid_at].bytes -= c->counted;
    *(c->older ? &c->older->newer : &s->oldest) = c->newer;
    *(c->newer ? &c->newer->older : &s->newest) = c->older;
    event_free(c->deadline);
    bufferevent_free(c->bev);
    listen_closed(c->d);
    free(c);
}

/* Recounts what c's input holds against its uid. False when the uid is then over
 * LIMIT_UID_BUFFER. */
static bool conn_account(struct conn *c)
{
    size_t len = evbuffer_get_length(bufferevent_get_input(c->bev));
    size_t now = len > LIMIT_UID_BUFFER_EXEMPT ? len - LIMIT_UID_BUFFER_EXEMPT : 0;
    struct uid_use *u = &c->s->uids[c->uid_at];
    u->bytes = u->bytes - c->counted + now;
    c->counted = now;
    return u->bytes <= LIMIT_UID_BUFFER;
}

static void conn_send(struct conn *c, json_t *reply)
{
    size_t size, off = 0;
    char *frame = server_frame(reply, &size);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    /* Send now when nothing is queued before it: work deferred past the reply (spawning a
     * submitted task's supervisor) must not delay it, and a daemon about to stop must still
     * answer. What does not fit goes out through the bufferevent. */
    if (evbuffer_get_length(out) == 0) {
        ssize_t w = send(bufferevent_getfd(c->bev), frame, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            off = (size_t)w;
    }
    if (off < size)
        evbuffer_add(out, frame + off, size - off);
    free(frame);
}

/* Sends the error, forgets what the client sent and closes the connection once the error is
 * out (or LIMIT_PARTIAL_FRAME_S later, if the client does not read it). Frees c when nothing
 * is left to send: the caller must not touch c after. */
static void conn_refuse(struct conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_refuse(struct conn *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    conn_account(c);
    bufferevent_disable(c->bev, EV_READ);
    if (c->deferred) {
        ops_drop_conn(c->d, c);
        c->deferred = false;
    }
    conn_send(c, reply_error(code, "%s", msg));
    free(msg);
    c->closing = true;
    conn_arm(c);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        conn_free(c);
}

/* Handles the complete requests c has sent, one at a time: the next only once the previous
 * reply is out. Frees c when it is done with it: the caller must not touch c after. */
static void conn_process(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    while (!c->closing && !c->deferred && evbuffer_get_length(out) == 0 &&
           evbuffer_get_length(in) >= 4) {
        unsigned char hdr[4];
        evbuffer_copyout(in, hdr, 4);
        size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
        if (len > LIMIT_FRAME) {
            conn_refuse(c, 2, "request too large (%zu bytes; LIMIT_FRAME is %u)", len,
                        LIMIT_FRAME);
            return;
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
        if (reply) {
            conn_send(c, reply);
            conn_arm(c);
        } else {
            evtimer_del(c->deadline); /* a wait may take as long as its tasks */
        }
        if (c->d->stopping)
            c->closing = true;
    }
    conn_account(c);
    if (c->deferred && evbuffer_get_length(in) >= LIMIT_CONN_BUFFER) {
        conn_refuse(c, 2, "%zu bytes sent while waiting for a reply (LIMIT_CONN_BUFFER is %u)",
                    evbuffer_get_length(in), LIMIT_CONN_BUFFER);
        return;
    }
    if (c->closing && evbuffer_get_length(out) == 0)
        conn_free(c);
}

bool conn_can_defer(const struct conn *c)
{
    return c->bev != NULL;
}

void server_reply(struct conn *c, json_t *reply)
{
    c->deferred = false;
    conn_send(c, reply);
    conn_arm(c);
    /* A request sent while this one waited is handled at the next loop turn, not here: we may
     * be inside ops_notify_waiters. */
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
}

static void conn_on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (!conn_account(c)) {
        ratelog(&c->s->log, "drover daemon: refused a connection of uid %d: LIMIT_UID_BUFFER",
                (int)c->s->uids[c->uid_at].uid);
        conn_refuse(c, 3, "too much data buffered from uid %d's connections (LIMIT_UID_BUFFER is"
                    " %u bytes)", (int)c->s->uids[c->uid_at].uid, LIMIT_UID_BUFFER);
        return;
    }
    conn_process(c);
}

static void conn_on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        conn_free(c);
    else
        conn_process(c); /* requests that came while the reply was going out */
}

static void conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(arg);
}

static void conn_on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        conn_free(c); /* it does not read its last reply */
    else
        conn_refuse(c, 2, "no complete request within %d s (LIMIT_PARTIAL_FRAME_S)",
                    LIMIT_PARTIAL_FRAME_S);
}

static void server_refuse(void *owner, int fd, const char *why)
{
    size_t size;
    char *frame = server_frame(reply_error(3, "%s", why), &size);
    if (send(fd, frame, size, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* best effort: the client sees the connection close */
    }
    free(frame);
}

/* Whether uid (login name, primary group gid) belongs to the group named admins: its primary
 * group or a supplementary one, from the group database (getgrouplist), never from the client. */
static bool server_in_group(const char *name, gid_t gid, const char *admins)
{
    struct group gr, *found = NULL;
    char buf[16384];
    if (admins == NULL || getgrnam_r(admins, &gr, buf, sizeof buf, &found) != 0 || found == NULL)
        return false;
    gid_t want = gr.gr_gid, small[64], *groups = small;
    int n = 64;
    bool member = false;
    if (getgrouplist(name, gid, groups, &n) < 0) {
        groups = xcalloc((size_t)n, sizeof *groups);
        if (getgrouplist(name, gid, groups, &n) < 0)
            n = 0;
    }
    for (int i = 0; i < n && !member; i++)
        member = groups[i] == want;
    if (groups != small)
        free(groups);
    return member;
}

/* The peer named by uid (gid: its primary group as the kernel or the user database says): its
 * name from the user database; admin: root, the daemon's own user in per-user mode, a member of
 * the admins group in system mode. Returns false (p still filled, named by the uid) when the
 * user database has no such user. */
bool peer_for_uid(const struct daemon *d, uid_t uid, gid_t gid, struct peer *p)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    p->uid = uid;
    p->gid = gid;
    bool known = getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != NULL;
    if (known && strlen(pw.pw_name) < sizeof p->name)
        snprintf(p->name, sizeof p->name, "%s", pw.pw_name);
    else
        snprintf(p->name, sizeof p->name, "%u", (unsigned)uid);
    if (known && gid == (gid_t)-1)
        p->gid = pw.pw_gid;
    if (d->cfg.system)
        p->admin = uid == 0 || (known && server_in_group(pw.pw_name, pw.pw_gid, d->cfg.admins));
    else
        p->admin = uid == 0 || uid == getuid();
    return known;
}

/* whoami: how the daemon sees the caller (the kernel's word), and whether it is the system
 * daemon. */
json_t *op_whoami(struct daemon *d, struct conn *c, json_t *req)
{
    const struct peer *p = conn_peer(c);
    return json_pack("{s:b,s:s,s:I,s:I,s:b,s:b}", "ok", 1, "user", p->name, "uid",
                     (json_int_t)p->uid, "gid", (json_int_t)p->gid, "admin", p->admin, "system",
                     d->cfg.system);
}

const struct peer *conn_peer(const struct conn *c)
{
    return &c->peer;
}

bool conn_read_only(const struct conn *c)
{
    return c->read_only;
}

struct conn *conn_virtual(struct daemon *d, const struct peer *p, bool read_only)
{
    struct conn *c = xcalloc(1, sizeof *c);
    c->d = d;
    c->peer = *p;
    c->read_only = read_only;
    return c;
}

void conn_virtual_free(struct conn *c)
{
    if (c == NULL)
        return;
    if (c->deferred)
        ops_drop_conn(c->d, c);
    free(c);
}

static void server_on_accept(void *owner, int fd)
{
    struct server *s = owner;
    struct daemon *d = s->d;
    struct ucred cred;
    socklen_t clen = sizeof cred;
    /* A per-user daemon talks to its own user only; the system daemon to every local user. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
        (!d->cfg.system && cred.uid != getuid())) {
        close(fd);
        listen_closed(d);
        return;
    }
    size_t at;
    struct uid_use *u = server_uid(s, cred.uid, &at);
    if (u->conns >= LIMIT_CONNS_PER_UID) {
        ratelog(&s->log, "drover daemon: refused a connection of uid %d: %d open"
                " (LIMIT_CONNS_PER_UID)", (int)cred.uid, u->conns);
        char *why = xasprintf("too many connections from uid %d (LIMIT_CONNS_PER_UID is %d):"
                              " try again", (int)cred.uid, LIMIT_CONNS_PER_UID);
        server_refuse(s, fd, why);
        free(why);
        listen_shed(fd);
        listen_closed(d);
        return;
    }
    u->conns++;
    struct conn *c = xcalloc(1, sizeof *c);
    c->s = s;
    c->d = d;
    peer_for_uid(d, cred.uid, cred.gid, &c->peer);
    c->uid_at = at;
    c->older = s->newest;
    *(s->newest ? &s->newest->newer : &s->oldest) = c;
    s->newest = c;
    c->deadline = evtimer_new(d->base, conn_on_deadline, c);
    c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->bev, conn_on_read, conn_on_write, conn_on_event, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, LIMIT_CONN_BUFFER);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    conn_arm(c);
}

/* Out of descriptors: an idle HTTP connection goes first, then the oldest socket connection
 * that is neither waiting for nor receiving a reply (a client that connected and said nothing,
 * or trickles a request). */
static bool server_evict(void *owner)
{
    struct server *s = owner;
    if (http_evict(s->d))
        return true;
    for (struct conn *c = s->oldest; c; c = c->newer) {
        if (c->deferred || c->closing ||
            evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
            continue;
        conn_send(c, reply_error(3, "the daemon is out of file descriptors: closed this idle"
                                    " connection"));
        conn_free(c);
        return true;
    }
    return false;
}

static const struct listener_ops server_ops = {
    .accept = server_on_accept,
    .evict = server_evict,
    .refuse = server_refuse,
};

/* Asks for SERVER_NOFILE descriptors, as far as the hard limit allows. */
static void server_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= SERVER_NOFILE)
        return;
    rl.rlim_cur = rl.rlim_max < SERVER_NOFILE ? rl.rlim_max : SERVER_NOFILE;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        /* keep the limit we have: listen.c copes with running out */
    }
}

int server_listen(struct daemon *d, const char *path, char **err)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        *err = xasprintf("socket path too long: %s", path);
        return -1;
    }
    strcpy(sun.sun_path, path);
    server_raise_nofile();
    /* We hold the state directory's lock: a socket there is stale. Anything else at that path
     * (a --socket mistyped onto a file) is not ours to remove. */
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISSOCK(sb.st_mode)) {
        *err = xasprintf("cannot listen on %s: something other than a socket is there", path);
        return -1;
    }
    unlink(path);
    struct server *s = xcalloc(1, sizeof *s);
    s->d = d;
    mode_t old = umask(0177);
    s->listener = listener_new(d, (struct sockaddr *)&sun, sizeof sun, "socket", &server_ops, s);
    umask(old);
    if (s->listener == NULL) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        free(s);
        return -1;
    }
    /* The system daemon's socket is every local user's door (identity: SO_PEERCRED); a per-user
     * daemon's is its owner's alone. */
    chmod(path, d->cfg.system ? 0666 : 0600);
    d->server = s;
    return 0;
}

void server_close(struct daemon *d)
{
    struct server *s = d->server;
    if (s == NULL)
        return;
    listener_free(s->listener);
    while (s->oldest)
        conn_free(s->oldest);
    free(s->uids);
    free(s);
    d->server = NULL;
    if (d->fd_reserve >= 0)
        close(d->fd_reserve);
    d->fd_reserve = -1;
}
