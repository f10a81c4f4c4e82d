/* daemon/amqp-io.c — the AMQP I/O thread (the contract: daemon/amqp-io.h).
 *
 * The thread's life is connect → serve → down → wait → connect … until amqp_io_stop:
 * - connect: TCP (bounded by AMQP_IO_CONNECT_TIMEOUT_MS; our own connect(), handed to
 *   librabbitmq, so that the error says why), login with the heartbeat, channel 2
 *   (the topic exchange declared, confirm mode) and channel 1 (the durable queue declared,
 *   basic.qos, basic.consume with manual acks). Channel 2 comes first so that no delivery is in
 *   flight while its RPCs wait for their replies. Every RPC is bounded by AMQP_IO_RPC_TIMEOUT_MS.
 * - serve: one poll() on the socket and the wake eventfd; then every frame librabbitmq has or can
 *   read without waiting, then the loop's commands in order. poll's timeout is a quarter of the
 *   heartbeat, so that librabbitmq (which sends a heartbeat, and notices the broker's silence
 *   for two, from inside its read calls) does both in time; the thread also times the silence
 *   itself, a backstop that does not depend on how librabbitmq's timers treat a read that
 *   does not wait.
 * - down: the connection is dropped (politely where it still can be), every unconfirmed publish
 *   forgotten (the loop publishes it again), AMQP_IN_STATE down reported with the wait before the
 *   next try: 1 s after a connection that was up, doubling on each failed try up to 60 s.
 *
 * Generations: each connection that comes up gets the next generation (AMQP_IO_GEN_BITS wide;
 * wraps, skipping 0). A delivery's tag is generation << AMQP_IO_TAG_BITS | the broker's delivery
 * tag, so an ack or reject for a connection that is gone is recognised and dropped. A publish is
 * stamped with the generation the loop last took an "up" for (0 after it took a "down"), and is
 * sent only on that connection: so every publish either gets its AMQP_IN_CONFIRM or is followed,
 * in what the loop takes, by an AMQP_IN_STATE down (the loop then publishes it again once up).
 * Publishes issued while the loop knows the broker is down are dropped (no CONFIRM ever comes).
 *
 * Locking: one mutex guards the two queues (commands in, items out), the loop's generation and
 * the stop flag; the loop's calls hold it for a list operation only. librabbitmq, the
 * connection and the unconfirmed publishes belong to the thread alone. */
#include "daemon/amqp-io.h"
#include "util/xalloc.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define AMQP_IO_CONSUME_CHANNEL 1
#define AMQP_IO_PUBLISH_CHANNEL 2
#define AMQP_IO_CONNECT_TIMEOUT_MS 5000
#define AMQP_IO_RPC_TIMEOUT_MS 10000
#define AMQP_IO_CLOSE_TIMEOUT_MS 1000
#define AMQP_IO_BACKOFF_MIN_MS 1000
#define AMQP_IO_BACKOFF_MAX_MS 60000
#define AMQP_IO_FRAME_MAX 131072
#define AMQP_IO_TAG_BITS 40 /* a delivery tag of one connection: 10^12 deliveries */
#define AMQP_IO_GEN_BITS (64 - AMQP_IO_TAG_BITS)
#define AMQP_IO_TAG_MASK ((UINT64_C(1) << AMQP_IO_TAG_BITS) - 1)
#define AMQP_IO_GEN_MASK ((UINT64_C(1) << AMQP_IO_GEN_BITS) - 1)

enum amqp_io_cmd_type { AMQP_IO_ACK, AMQP_IO_REJECT, AMQP_IO_PUBLISH };

struct amqp_io_cmd {
    enum amqp_io_cmd_type type;
    uint64_t tag;     /* ack, reject */
    uint64_t gen;     /* publish: the generation the loop had last seen up, 0 if down */
    int64_t event_id; /* publish */
    char *routing_key, *body;
    struct amqp_io_cmd *next;
};

struct amqp_io_item {
    struct amqp_in in;
    uint64_t gen; /* AMQP_IN_STATE up: the connection's generation */
    struct amqp_io_item *next;
};

struct amqp_io_unconfirmed {
    uint64_t seq; /* the publish's sequence number on its channel (confirm mode counts from 1) */
    int64_t event_id;
};

struct amqp_io {
    struct amqp_io_config cfg; /* copies, defaults filled in */
    pthread_t thread;
    int wake_fd;   /* the loop → the thread: commands wait, or stop */
    int notify_fd; /* the thread → the loop: items wait */

    pthread_mutex_t lock; /* guards what follows, up to the thread's own */
    struct amqp_io_cmd *cmds, **cmds_tail;
    struct amqp_io_item *items, **items_tail;
    uint64_t loop_gen;
    bool stopping;

    /* The thread's own. */
    amqp_connection_state_t conn; /* NULL while down */
    uint64_t gen, last_gen;
    bool polite;                  /* the connection can still be closed with connection.close */
    struct amqp_io_unconfirmed *unconfirmed;
    size_t n_unconfirmed, cap_unconfirmed;
    uint64_t next_seq;
    int64_t backoff_ms;
    int64_t heard_ms; /* when the broker was last heard from (monotonic) */
};

static int64_t amqp_io_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void amqp_io_poke(int fd)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so the reader will wake anyway. */
    if (write(fd, &one, sizeof one) < 0 && errno != EAGAIN)
        abort();
}

static void amqp_io_drain_fd(int fd)
{
    uint64_t count;
    while (read(fd, &count, sizeof count) > 0)
        ;
}

/* --- the queues ------------------------------------------------------------------------------ */

static bool amqp_io_stopping(struct amqp_io *io)
{
    pthread_mutex_lock(&io->lock);
    bool stopping = io->stopping;
    pthread_mutex_unlock(&io->lock);
    return stopping;
}

/* Hands an item (its strings owned by it) to the loop. */
static void amqp_io_emit(struct amqp_io *io, const struct amqp_in *in, uint64_t gen)
{
    struct amqp_io_item *item = xcalloc(1, sizeof *item);
    item->in = *in;
    item->gen = gen;
    pthread_mutex_lock(&io->lock);
    *io->items_tail = item;
    io->items_tail = &item->next;
    pthread_mutex_unlock(&io->lock);
    amqp_io_poke(io->notify_fd);
}

static void amqp_io_queue_cmd(struct amqp_io *io, struct amqp_io_cmd *cmd)
{
    pthread_mutex_lock(&io->lock);
    if (cmd->type == AMQP_IO_PUBLISH)
        cmd->gen = io->loop_gen;
    *io->cmds_tail = cmd;
    io->cmds_tail = &cmd->next;
    pthread_mutex_unlock(&io->lock);
    amqp_io_poke(io->wake_fd);
}

static void amqp_io_cmd_free(struct amqp_io_cmd *cmd)
{
    free(cmd->routing_key);
    free(cmd->body);
    free(cmd);
}

/* --- errors, one line each -------------------------------------------------------------------- */

/* "CODE TEXT" of a close method's reply, control characters made spaces. */
static char *amqp_io_close_text(uint16_t code, amqp_bytes_t text)
{
    char *s = xasprintf("%u %.*s", code, (int)text.len, (const char *)text.bytes);
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < ' ')
            *p = ' ';
    return s;
}

/* Why an RPC (WHAT: "login", "queue.declare", …) failed; malloc'd. Answers the broker's close
 * (close-ok) so that it can let the connection go; after which only a forced close is left. */
static char *amqp_io_reply_error(struct amqp_io *io, const char *what, amqp_rpc_reply_t r)
{
    char *text, *err;
    switch (r.reply_type) {
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        io->polite = false;
        return xasprintf("%s: %s", what, amqp_error_string2(r.library_error));
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            amqp_connection_close_ok_t ok = {0};
            text = amqp_io_close_text(m->reply_code, m->reply_text);
            amqp_send_method(io->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
            io->polite = false;
            err = xasprintf("%s: the broker closed the connection: %s", what, text);
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            text = amqp_io_close_text(m->reply_code, m->reply_text);
            err = xasprintf("%s: the broker closed the channel: %s", what, text);
        } else {
            return xasprintf("%s: unexpected method 0x%08x from the broker", what, r.reply.id);
        }
        free(text);
        return err;
    default:
        io->polite = false;
        return xasprintf("%s: no reply from the broker", what);
    }
}

/* The last RPC's outcome: true when it went through, else *err says why. */
static bool amqp_io_rpc_ok(struct amqp_io *io, const char *what, char **err)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(io->conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    *err = amqp_io_reply_error(io, what, r);
    return false;
}

/* --- connect, disconnect -------------------------------------------------------------------- */

static struct timeval amqp_io_tv(int ms)
{
    return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

/* Declares what drover needs and starts consuming, on the connection io->conn logged in. */
static bool amqp_io_declare(struct amqp_io *io, char **err)
{
    const struct amqp_io_config *c = &io->cfg;
    amqp_connection_state_t conn = io->conn;
    amqp_channel_open(conn, AMQP_IO_PUBLISH_CHANNEL);
    if (!amqp_io_rpc_ok(io, "channel.open", err))
        return false;
    amqp_exchange_declare(conn, AMQP_IO_PUBLISH_CHANNEL, amqp_cstring_bytes(c->exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0, amqp_empty_table);
    if (!amqp_io_rpc_ok(io, "exchange.declare", err))
        return false;
    amqp_confirm_select(conn, AMQP_IO_PUBLISH_CHANNEL);
    if (!amqp_io_rpc_ok(io, "confirm.select", err))
        return false;
    amqp_channel_open(conn, AMQP_IO_CONSUME_CHANNEL);
    if (!amqp_io_rpc_ok(io, "channel.open", err))
        return false;
    amqp_queue_declare(conn, AMQP_IO_CONSUME_CHANNEL, amqp_cstring_bytes(c->queue), 0, 1, 0, 0,
                       amqp_empty_table);
    if (!amqp_io_rpc_ok(io, "queue.declare", err))
        return false;
    amqp_basic_qos(conn, AMQP_IO_CONSUME_CHANNEL, 0, (uint16_t)c->prefetch, 0);
    if (!amqp_io_rpc_ok(io, "basic.qos", err))
        return false;
    amqp_basic_consume(conn, AMQP_IO_CONSUME_CHANNEL, amqp_cstring_bytes(c->queue),
                       amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    return amqp_io_rpc_ok(io, "basic.consume", err);
}

/* Lets the connection go: connection.close first when the broker still listens (bounded by
 * AMQP_IO_CLOSE_TIMEOUT_MS), then the socket. Forgets the unconfirmed publishes. */
static void amqp_io_hang_up(struct amqp_io *io)
{
    if (!io->conn)
        return;
    if (io->polite) {
        struct timeval tv = amqp_io_tv(AMQP_IO_CLOSE_TIMEOUT_MS);
        amqp_set_rpc_timeout(io->conn, &tv);
        amqp_connection_close(io->conn, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(io->conn);
    io->conn = NULL;
    io->n_unconfirmed = 0;
}

/* One address: a connected socket, or -1 with errno. */
static int amqp_io_dial_one(const struct addrinfo *ai, int64_t deadline_ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int left, n;
        do {
            left = (int)(deadline_ms - amqp_io_now_ms());
            n = left > 0 ? poll(&p, 1, left) : 0;
        } while (n < 0 && errno == EINTR);
        if (n <= 0) {
            errno = n == 0 ? ETIMEDOUT : errno;
            goto fail;
        }
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            goto fail;
        if (soerr) {
            errno = soerr;
            goto fail;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* Connects to HOST:PORT, each address in turn, all within AMQP_IO_CONNECT_TIMEOUT_MS; returns
 * the non-blocking socket (librabbitmq's reads expect one), or -1 with *err. Done here rather
 * than by amqp_socket_open_noblock, which keeps only "a socket error occurred" of why it failed
 * ("connection refused" is what an operator needs to read). */
static int amqp_io_dial(const char *host, int port, char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *list;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &list);
    if (rc != 0) {
        *err = xasprintf("cannot connect to %s:%d: %s", host, port, gai_strerror(rc));
        return -1;
    }
    int64_t deadline_ms = amqp_io_now_ms() + AMQP_IO_CONNECT_TIMEOUT_MS;
    int fd = -1, why = 0;
    for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next)
        if ((fd = amqp_io_dial_one(ai, deadline_ms)) < 0)
            why = errno;
    freeaddrinfo(list);
    if (fd < 0)
        *err = xasprintf("cannot connect to %s:%d: %s", host, port, strerror(why));
    return fd;
}

/* One try: returns true with io->conn up and consuming, else false with *err. */
static bool amqp_io_connect(struct amqp_io *io, char **err)
{
    const struct amqp_io_config *c = &io->cfg;
    io->conn = amqp_new_connection();
    io->polite = false;
    amqp_socket_t *sock = amqp_tcp_socket_new(io->conn);
    if (!sock) {
        *err = xstrdup("cannot make a socket");
        goto fail;
    }
    int fd = amqp_io_dial(c->host, c->port, err);
    if (fd < 0)
        goto fail;
    amqp_tcp_socket_set_sockfd(sock, fd); /* the connection owns it now */
    struct timeval tv = amqp_io_tv(AMQP_IO_RPC_TIMEOUT_MS);
    amqp_set_handshake_timeout(io->conn, &tv);
    amqp_set_rpc_timeout(io->conn, &tv);
    amqp_rpc_reply_t r = amqp_login(io->conn, c->vhost, 0, AMQP_IO_FRAME_MAX, c->heartbeat_s,
                                    AMQP_SASL_METHOD_PLAIN, c->user, c->password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        *err = amqp_io_reply_error(io, "login", r);
        io->polite = false; /* the broker hangs up on a refused login */
        goto fail;
    }
    io->polite = true;
    if (!amqp_io_declare(io, err))
        goto fail;
    io->gen = (io->last_gen + 1) & AMQP_IO_GEN_MASK;
    if (io->gen == 0)
        io->gen = 1;
    io->last_gen = io->gen;
    io->next_seq = 1;
    io->n_unconfirmed = 0;
    io->heard_ms = amqp_io_now_ms();
    return true;
fail:
    amqp_io_hang_up(io);
    return false;
}

/* --- serving ---------------------------------------------------------------------------------- */

/* basic.ack or basic.nack on the publish channel: confirms SEQ, or every seq up to it. */
static void amqp_io_confirm(struct amqp_io *io, uint64_t seq, bool multiple, bool nacked)
{
    size_t kept = 0;
    for (size_t i = 0; i < io->n_unconfirmed; i++) {
        struct amqp_io_unconfirmed *u = &io->unconfirmed[i];
        if (multiple ? u->seq <= seq : u->seq == seq) {
            struct amqp_in in = {.type = AMQP_IN_CONFIRM, .event_id = u->event_id,
                                 .nacked = nacked};
            amqp_io_emit(io, &in, 0);
        } else {
            io->unconfirmed[kept++] = *u;
        }
    }
    io->n_unconfirmed = kept;
}

/* basic.deliver: reads the header and body frames that follow and hands the message over. */
static char *amqp_io_deliver(struct amqp_io *io, const amqp_frame_t *frame)
{
    const amqp_basic_deliver_t *d = frame->payload.method.decoded;
    uint64_t tag = io->gen << AMQP_IO_TAG_BITS | (d->delivery_tag & AMQP_IO_TAG_MASK);
    bool redelivered = d->redelivered;
    amqp_message_t msg;
    amqp_rpc_reply_t r = amqp_read_message(io->conn, frame->channel, &msg, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return amqp_io_reply_error(io, "reading a message", r);
    struct amqp_in in = {.type = AMQP_IN_DELIVERY, .tag = tag, .redelivered = redelivered};
    if (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        in.message_id = xasprintf("%.*s", (int)msg.properties.message_id.len,
                                  (const char *)msg.properties.message_id.bytes);
    in.len = msg.body.len;
    in.body = xmalloc(in.len + 1);
    if (in.len)
        memcpy(in.body, msg.body.bytes, in.len);
    in.body[in.len] = '\0';
    amqp_destroy_message(&msg);
    amqp_io_emit(io, &in, 0);
    return NULL;
}

/* One method frame from the broker; returns why the connection is lost, or NULL. */
static char *amqp_io_method(struct amqp_io *io, const amqp_frame_t *frame)
{
    const amqp_method_t *m = &frame->payload.method;
    char *text, *err;
    switch (m->id) {
    case AMQP_BASIC_DELIVER_METHOD:
        return amqp_io_deliver(io, frame);
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *ack = m->decoded;
        amqp_io_confirm(io, ack->delivery_tag, ack->multiple, false);
        return NULL;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *nack = m->decoded;
        amqp_io_confirm(io, nack->delivery_tag, nack->multiple, true);
        return NULL;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
        const amqp_connection_close_t *close = m->decoded;
        amqp_connection_close_ok_t ok = {0};
        text = amqp_io_close_text(close->reply_code, close->reply_text);
        amqp_send_method(io->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        io->polite = false;
        err = xasprintf("the broker closed the connection: %s", text);
        free(text);
        return err;
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
        /* One channel is not worth keeping: the connection goes and comes back whole. */
        const amqp_channel_close_t *close = m->decoded;
        amqp_channel_close_ok_t ok = {0};
        text = amqp_io_close_text(close->reply_code, close->reply_text);
        amqp_send_method(io->conn, frame->channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        err = xasprintf("the broker closed channel %u: %s", frame->channel, text);
        free(text);
        return err;
    }
    case AMQP_BASIC_CANCEL_METHOD:
        return xasprintf("the broker cancelled the consumer of %s (queue deleted?)",
                         io->cfg.queue);
    default:
        return NULL; /* connection.blocked and the like: nothing to do */
    }
}

/* Every frame buffered or readable now, without waiting. */
static char *amqp_io_read(struct amqp_io *io)
{
    for (;;) {
        amqp_frame_t frame;
        struct timeval now = {0, 0};
        int rc = amqp_simple_wait_frame_noblock(io->conn, &frame, &now);
        if (rc == AMQP_STATUS_TIMEOUT) {
            amqp_maybe_release_buffers(io->conn);
            return NULL;
        }
        if (rc != AMQP_STATUS_OK) {
            io->polite = false;
            return xasprintf("connection lost: %s", amqp_error_string2(rc));
        }
        io->heard_ms = amqp_io_now_ms();
        if (frame.frame_type != AMQP_FRAME_METHOD)
            continue; /* a header or body without its basic.deliver: nothing to hand over */
        char *err = amqp_io_method(io, &frame);
        if (err)
            return err;
    }
}

static char *amqp_io_publish_now(struct amqp_io *io, const struct amqp_io_cmd *cmd)
{
    char id[24];
    snprintf(id, sizeof id, "%" PRId64, cmd->event_id);
    amqp_basic_properties_t props = {
        ._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                  AMQP_BASIC_MESSAGE_ID_FLAG,
        .content_type = amqp_cstring_bytes("application/json"),
        .delivery_mode = AMQP_DELIVERY_PERSISTENT,
        .message_id = amqp_cstring_bytes(id),
    };
    int rc = amqp_basic_publish(io->conn, AMQP_IO_PUBLISH_CHANNEL,
                                amqp_cstring_bytes(io->cfg.exchange),
                                amqp_cstring_bytes(cmd->routing_key), 0, 0, &props,
                                amqp_cstring_bytes(cmd->body));
    if (rc != AMQP_STATUS_OK) {
        io->polite = false;
        return xasprintf("publishing: %s", amqp_error_string2(rc));
    }
    if (io->n_unconfirmed == io->cap_unconfirmed) {
        io->cap_unconfirmed = io->cap_unconfirmed ? 2 * io->cap_unconfirmed : 64;
        io->unconfirmed = xrealloc(io->unconfirmed,
                                   io->cap_unconfirmed * sizeof *io->unconfirmed);
    }
    io->unconfirmed[io->n_unconfirmed++] =
        (struct amqp_io_unconfirmed){.seq = io->next_seq++, .event_id = cmd->event_id};
    return NULL;
}

/* One command of the loop, on the connection it was meant for; any other drops it. */
static char *amqp_io_command(struct amqp_io *io, const struct amqp_io_cmd *cmd)
{
    int rc;
    if (!io->conn)
        return NULL;
    switch (cmd->type) {
    case AMQP_IO_ACK:
    case AMQP_IO_REJECT:
        if (cmd->tag >> AMQP_IO_TAG_BITS != io->gen)
            return NULL;
        if (cmd->type == AMQP_IO_ACK)
            rc = amqp_basic_ack(io->conn, AMQP_IO_CONSUME_CHANNEL, cmd->tag & AMQP_IO_TAG_MASK, 0);
        else
            rc = amqp_basic_reject(io->conn, AMQP_IO_CONSUME_CHANNEL,
                                   cmd->tag & AMQP_IO_TAG_MASK, 0);
        if (rc != AMQP_STATUS_OK) {
            io->polite = false;
            return xasprintf("%s: %s", cmd->type == AMQP_IO_ACK ? "basic.ack" : "basic.reject",
                             amqp_error_string2(rc));
        }
        return NULL;
    case AMQP_IO_PUBLISH:
        return cmd->gen == io->gen ? amqp_io_publish_now(io, cmd) : NULL;
    }
    return NULL;
}

/* Carries out the queued commands in order; after a failure the rest are dropped. */
static char *amqp_io_run_commands(struct amqp_io *io)
{
    pthread_mutex_lock(&io->lock);
    struct amqp_io_cmd *cmd = io->cmds;
    io->cmds = NULL;
    io->cmds_tail = &io->cmds;
    pthread_mutex_unlock(&io->lock);
    char *err = NULL;
    while (cmd) {
        struct amqp_io_cmd *next = cmd->next;
        if (!err)
            err = amqp_io_command(io, cmd);
        amqp_io_cmd_free(cmd);
        cmd = next;
    }
    return err;
}

/* Serves the connection until it goes (returns why) or the loop stops the thread (NULL). */
static char *amqp_io_serve(struct amqp_io *io)
{
    int sock = amqp_get_sockfd(io->conn);
    int heartbeat_ms = amqp_get_heartbeat(io->conn) * 1000; /* as negotiated; 0: none */
    char *err;
    for (;;) {
        if ((err = amqp_io_read(io)) || (err = amqp_io_run_commands(io)))
            return err;
        if (amqp_io_stopping(io))
            return NULL;
        int64_t silent_ms = amqp_io_now_ms() - io->heard_ms;
        if (heartbeat_ms > 0 && silent_ms > 2 * (int64_t)heartbeat_ms) {
            io->polite = false;
            return xasprintf("connection lost: no heartbeat from the broker in %" PRId64 " ms",
                             silent_ms);
        }
        struct pollfd fds[2] = {{.fd = sock, .events = POLLIN},
                                {.fd = io->wake_fd, .events = POLLIN}};
        bool buffered = amqp_frames_enqueued(io->conn) || amqp_data_in_buffer(io->conn);
        int timeout_ms = buffered ? 0 : heartbeat_ms > 0 ? heartbeat_ms / 4 : -1;
        if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
            abort();
        if (fds[0].revents)
            io->heard_ms = amqp_io_now_ms();
        if (fds[1].revents)
            amqp_io_drain_fd(io->wake_fd);
    }
}

/* Waits MS, or until stopped, dropping the commands that come meanwhile (nothing to carry them
 * out on). */
static void amqp_io_wait(struct amqp_io *io, int64_t ms)
{
    int64_t deadline = amqp_io_now_ms() + ms;
    for (;;) {
        free(amqp_io_run_commands(io));
        int64_t left = deadline - amqp_io_now_ms();
        if (left <= 0 || amqp_io_stopping(io))
            return;
        struct pollfd fd = {.fd = io->wake_fd, .events = POLLIN};
        if (poll(&fd, 1, (int)left) < 0 && errno != EINTR)
            abort();
        if (fd.revents)
            amqp_io_drain_fd(io->wake_fd);
    }
}

static void *amqp_io_main(void *arg)
{
    struct amqp_io *io = arg;
    while (!amqp_io_stopping(io)) {
        char *err = NULL;
        if (amqp_io_connect(io, &err)) {
            struct amqp_in up = {.type = AMQP_IN_STATE, .up = true};
            amqp_io_emit(io, &up, io->gen);
            io->backoff_ms = AMQP_IO_BACKOFF_MIN_MS;
            err = amqp_io_serve(io);
            amqp_io_hang_up(io);
            if (!err)
                break; /* stopped */
        }
        struct amqp_in down = {.type = AMQP_IN_STATE, .error = err, .retry_ms = io->backoff_ms};
        amqp_io_emit(io, &down, 0);
        amqp_io_wait(io, io->backoff_ms);
        io->backoff_ms = io->backoff_ms * 2 > AMQP_IO_BACKOFF_MAX_MS ? AMQP_IO_BACKOFF_MAX_MS
                                                                     : io->backoff_ms * 2;
    }
    amqp_io_hang_up(io);
    return NULL;
}

/* --- the loop's side -------------------------------------------------------------------------- */

static char *amqp_io_dup(const char *s, const char *fallback)
{
    return xstrdup(s && *s ? s : fallback);
}

static void amqp_io_free(struct amqp_io *io)
{
    if (io->wake_fd >= 0)
        close(io->wake_fd);
    if (io->notify_fd >= 0)
        close(io->notify_fd);
    pthread_mutex_destroy(&io->lock);
    free(io->cfg.host);
    free(io->cfg.vhost);
    free(io->cfg.user);
    free(io->cfg.password);
    free(io->cfg.queue);
    free(io->cfg.exchange);
    free(io->unconfirmed);
    free(io);
}

struct amqp_io *amqp_io_start(const struct amqp_io_config *cfg, int *notify_fd, char **err)
{
    struct amqp_io *io = xcalloc(1, sizeof *io);
    io->cfg.host = amqp_io_dup(cfg->host, "127.0.0.1");
    io->cfg.port = cfg->port > 0 ? cfg->port : 5672;
    io->cfg.vhost = amqp_io_dup(cfg->vhost, "/");
    io->cfg.user = amqp_io_dup(cfg->user, "guest");
    io->cfg.password = amqp_io_dup(cfg->password, "guest");
    io->cfg.queue = amqp_io_dup(cfg->queue, "drover.submit");
    io->cfg.exchange = amqp_io_dup(cfg->exchange, "drover.events");
    io->cfg.prefetch = cfg->prefetch > 0 ? (cfg->prefetch > 65535 ? 65535 : cfg->prefetch) : 64;
    io->cfg.heartbeat_s = cfg->heartbeat_s > 0 ? cfg->heartbeat_s : 30;
    io->backoff_ms = AMQP_IO_BACKOFF_MIN_MS;
    io->cmds_tail = &io->cmds;
    io->items_tail = &io->items;
    pthread_mutex_init(&io->lock, NULL);
    io->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    io->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->wake_fd < 0 || io->notify_fd < 0) {
        *err = xasprintf("amqp: eventfd: %s", strerror(errno));
        amqp_io_free(io);
        return NULL;
    }
    /* The thread takes no signal: they are the loop's (libevent's handlers). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&io->thread, NULL, amqp_io_main, io);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        *err = xasprintf("amqp: cannot start the I/O thread: %s", strerror(rc));
        amqp_io_free(io);
        return NULL;
    }
    *notify_fd = io->notify_fd;
    return io;
}

size_t amqp_io_take(struct amqp_io *io, struct amqp_in **items)
{
    amqp_io_drain_fd(io->notify_fd);
    pthread_mutex_lock(&io->lock);
    struct amqp_io_item *list = io->items;
    io->items = NULL;
    io->items_tail = &io->items;
    size_t n = 0;
    for (struct amqp_io_item *i = list; i; i = i->next) {
        n++;
        if (i->in.type == AMQP_IN_STATE)
            io->loop_gen = i->in.up ? i->gen : 0;
    }
    pthread_mutex_unlock(&io->lock);
    *items = n ? xmalloc(n * sizeof **items) : NULL;
    n = 0;
    while (list) {
        struct amqp_io_item *next = list->next;
        (*items)[n++] = list->in;
        free(list);
        list = next;
    }
    return n;
}

void amqp_in_free(struct amqp_in *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(items[i].message_id);
        free(items[i].body);
        free(items[i].error);
    }
    free(items);
}

void amqp_io_ack(struct amqp_io *io, uint64_t tag)
{
    struct amqp_io_cmd *cmd = xcalloc(1, sizeof *cmd);
    cmd->type = AMQP_IO_ACK;
    cmd->tag = tag;
    amqp_io_queue_cmd(io, cmd);
}

void amqp_io_reject(struct amqp_io *io, uint64_t tag)
{
    struct amqp_io_cmd *cmd = xcalloc(1, sizeof *cmd);
    cmd->type = AMQP_IO_REJECT;
    cmd->tag = tag;
    amqp_io_queue_cmd(io, cmd);
}

void amqp_io_publish(struct amqp_io *io, int64_t event_id, const char *routing_key,
                     const char *body)
{
    struct amqp_io_cmd *cmd = xcalloc(1, sizeof *cmd);
    cmd->type = AMQP_IO_PUBLISH;
    cmd->event_id = event_id;
    cmd->routing_key = xstrdup(routing_key);
    cmd->body = xstrdup(body);
    amqp_io_queue_cmd(io, cmd);
}

void amqp_io_stop(struct amqp_io *io)
{
    if (!io)
        return;
    pthread_mutex_lock(&io->lock);
    io->stopping = true;
    pthread_mutex_unlock(&io->lock);
    amqp_io_poke(io->wake_fd);
    pthread_join(io->thread, NULL);
    struct amqp_in *items;
    size_t n = amqp_io_take(io, &items);
    amqp_in_free(items, n);
    struct amqp_io_cmd *cmd = io->cmds;
    while (cmd) {
        struct amqp_io_cmd *next = cmd->next;
        amqp_io_cmd_free(cmd);
        cmd = next;
    }
    amqp_io_free(io);
}
