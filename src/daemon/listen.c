/* What the socket (server.c) and /metrics (http.c) listeners share: every open connection counts
 * against LIMIT_CONNS, and running out of descriptors degrades service instead of spinning.
 *
 * When accept() fails for want of descriptors (EMFILE, ENFILE) the listening socket stays
 * readable, and libevent calls back at once, for ever: a core burnt and, by default, a log line
 * per call. Here, instead:
 *  1. the listener's owner closes a connection worth less than a new one (evict: an idle HTTP
 *     connection, then an idle socket connection) and the listener tries again a moment later;
 *  2. when there is none, the descriptor kept in reserve (/dev/null, opened with the first
 *     listener) is given up for an instant to accept the newest connection, tell it why it is
 *     refused and close it, so the kernel's backlog drains and clients hear an error instead of
 *     hanging; then the listener pauses for LISTEN_PAUSE_MS;
 *  3. the error is logged at most once per LIMIT_LOG_REPEAT_S, with a count of the others.
 * libevent's own log lines go through the same rate limit. */
#include "daemon/listen.h"
#include "util/limits.h"
#include "util/xalloc.h"

#include <errno.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a listener that has nothing to evict rests before accepting again. */
#define LISTEN_PAUSE_MS 100

struct listener {
    struct daemon *d;
    struct evconnlistener *lev;
    struct event *resume;
    const struct listener_ops *ops;
    void *owner;
    char *name;
    struct ratelog log;
};

static struct ratelog listen_libevent_log;

/* libevent's warnings (a failing accept() without an error callback, a failing epoll_ctl) could
 * repeat once per loop turn: rate-limited like ours. */
static void listen_on_libevent_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN)
        ratelog(&listen_libevent_log, "drover daemon: libevent: %s", msg);
}

static void listen_pause(struct listener *l, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evconnlistener_disable(l->lev);
    evtimer_add(l->resume, &tv);
}

static void listen_on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct listener *l = arg;
    evconnlistener_enable(l->lev);
}

void listen_shed(int fd)
{
    char sink[4096];
    /* Whatever the client sent is read first: closing a socket with unread data resets the
     * connection, and the client would lose the refusal. */
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

static void listen_on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                             int len, void *arg)
{
    struct listener *l = arg;
    if (l->d->conns_open >= LIMIT_CONNS) {
        ratelog(&l->log, "drover daemon: %s: refused a connection: %d open (LIMIT_CONNS %d)",
                l->name, l->d->conns_open, LIMIT_CONNS);
        char *why = xasprintf("too many connections to the daemon (LIMIT_CONNS %d): try again",
                              LIMIT_CONNS);
        l->ops->refuse(l->owner, fd, why);
        free(why);
        listen_shed(fd);
        return;
    }
    l->d->conns_open++;
    l->ops->accept(l->owner, fd);
}

static void listen_on_error(struct evconnlistener *lev, void *arg)
{
    struct listener *l = arg;
    int err = errno;
    if (err != EMFILE && err != ENFILE) {
        /* ENOBUFS, ENOMEM, or worse: nothing to shed, but no reason to spin either. */
        ratelog(&l->log, "drover daemon: %s: accept: %s", l->name, strerror(err));
        listen_pause(l, LISTEN_PAUSE_MS);
        return;
    }
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    ratelog(&l->log,
            "drover daemon: %s: accept: %s (%d connections open, descriptor limit %llu)",
            l->name, strerror(err), l->d->conns_open, (unsigned long long)rl.rlim_cur);
    if (l->ops->evict(l->owner)) {
        /* The freed descriptor is closed when libevent finalizes the connection, later in this
         * loop turn: accept again at the next. */
        listen_pause(l, 0);
        return;
    }
    int reserve = l->d->fd_reserve;
    if (reserve >= 0) {
        close(reserve);
        int fd = accept4(evconnlistener_get_fd(lev), NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            char *why = xasprintf("the daemon is out of file descriptors (limit %llu): try again",
                                  (unsigned long long)rl.rlim_cur);
            l->ops->refuse(l->owner, fd, why);
            free(why);
            listen_shed(fd);
        }
        l->d->fd_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    listen_pause(l, LISTEN_PAUSE_MS);
}

struct listener *listener_new(struct daemon *d, const struct sockaddr *sa, socklen_t len,
                              const char *name, const struct listener_ops *ops, void *owner)
{
    struct listener *l = xcalloc(1, sizeof *l);
    l->d = d;
    l->ops = ops;
    l->owner = owner;
    l->name = xstrdup(name);
    l->lev = evconnlistener_new_bind(d->base, listen_on_accept, l,
                                     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
                                         LEV_OPT_REUSEABLE,
                                     128, sa, (int)len);
    if (l->lev == NULL) {
        int e = errno;
        free(l->name);
        free(l);
        errno = e;
        return NULL;
    }
    evconnlistener_set_error_cb(l->lev, listen_on_error);
    l->resume = evtimer_new(d->base, listen_on_resume, l);
    event_set_log_callback(listen_on_libevent_log);
    if (d->fd_reserve < 0)
        d->fd_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return l;
}

void listener_free(struct listener *l)
{
    if (l == NULL)
        return;
    evconnlistener_free(l->lev);
    event_free(l->resume);
    free(l->name);
    free(l);
}

void listen_closed(struct daemon *d)
{
    if (d->conns_open <= 0)
        fatalx("listen_closed: no connection open");
    d->conns_open--;
}
