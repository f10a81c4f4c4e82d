/* daemon/listen.c: a listening socket whose connections count against LIMIT_CONNS and whose
 * running out of descriptors sheds load instead of spinning (see listen.c). Used by the socket
 * server (server.c) and /metrics (http.c). */
#ifndef DROVER_LISTEN_H
#define DROVER_LISTEN_H

#include "daemon/daemon.h"
#include "util/ratelog.h"

#include <stdbool.h>
#include <sys/socket.h>

struct listener;

struct listener_ops {
    /* A new connection, already counted in d->conns_open: the owner calls listen_closed(d)
     * when it closes it. */
    void (*accept)(void *owner, int fd);
    /* Closes the open connection least worth keeping, to free a descriptor for a new one;
     * false when there is none. */
    bool (*evict)(void *owner);
    /* Writes a refusal on fd, a connection accepted only to be closed: best effort, never
     * blocks. The listener closes fd. */
    void (*refuse)(void *owner, int fd, const char *why);
};

/* Listens on sa. NULL with errno set on failure. The caller frees it with listener_free. */
struct listener *listener_new(struct daemon *d, const struct sockaddr *sa, socklen_t len,
                              const char *name, const struct listener_ops *ops, void *owner);
void listener_free(struct listener *l);
/* A connection counted by a listener was closed. */
void listen_closed(struct daemon *d);
/* Closes a connection that is being refused, after reading what it sent so far (closing over
 * unread data resets the connection, and the peer would lose the refusal). */
void listen_shed(int fd);

#endif
