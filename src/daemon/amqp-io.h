/* daemon/amqp-io.h — the AMQP 0-9-1 connection to a RabbitMQ broker (docs/AMQP.md), run by one
 * I/O thread so that the daemon's libevent loop never blocks on the broker.
 *
 * The thread alone touches librabbitmq (rabbitmq-c: one connection, not thread-safe). It
 * connects (with backoff: 1 s doubling to 60 s while the broker is away), declares the topic
 * exchange and the durable intake queue, sets basic.qos prefetch, consumes the queue with
 * manual acks on one channel, and publishes events on another in confirm mode. What happens
 * there comes to the loop as `struct amqp_in` items, queued under a mutex; the loop learns of
 * them by the notify descriptor becoming readable (an eventfd or a pipe: read it, then
 * amqp_io_take). What the loop wants done (ack, reject, publish) it hands over with the calls
 * below, which only queue a command under the mutex and wake the thread (they never block on
 * the network); the thread carries them out in order.
 *
 * Connections and tags: each (re)connection has a generation; a delivery's tag carries it
 * (amqp_in.tag), and an ack or reject of an older generation is dropped (the broker has
 * requeued that message already: it comes again, redelivered). A publish that was not
 * confirmed when the connection went is never confirmed: on AMQP_IN_STATE down the loop must
 * take every unconfirmed publish as lost and publish it again once up (at least once; each
 * carries its event_id as the AMQP message-id, so a consumer can drop a duplicate). */
#ifndef DROVER_DAEMON_AMQP_IO_H
#define DROVER_DAEMON_AMQP_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct amqp_io_config {
    char *host;          /* 127.0.0.1 */
    int port;            /* 5672 */
    char *vhost;         /* "/" */
    char *user, *password;
    char *queue;         /* the intake queue (durable, declared by the thread): drover.submit */
    char *exchange;      /* the events' topic exchange (durable, declared): drover.events */
    int prefetch;        /* basic.qos prefetch_count: deliveries unacknowledged at once (64) */
    int heartbeat_s;     /* AMQP heartbeat (30): a dead broker is noticed within about twice it */
};

enum amqp_in_type {
    AMQP_IN_DELIVERY, /* a message from the intake queue: ack or reject it by tag */
    AMQP_IN_CONFIRM,  /* the broker confirmed (or nacked) the publish of event_id */
    AMQP_IN_STATE,    /* the connection came up, or went down (error says why) */
};

struct amqp_in {
    enum amqp_in_type type;
    /* AMQP_IN_DELIVERY */
    uint64_t tag;        /* opaque: the connection's generation and the delivery tag */
    char *message_id;    /* the message-id property, or NULL when absent */
    char *body;          /* the body, NUL-terminated (a body holding a NUL is still delivered:
                          * len says its size) */
    size_t len;
    bool redelivered;
    /* AMQP_IN_CONFIRM */
    int64_t event_id;
    bool nacked;         /* the broker could not take it: publish it again later */
    /* AMQP_IN_STATE */
    bool up;
    char *error;         /* down: why (connection refused, access refused, broker closed the
                          * connection: …), one line; NULL when up */
    int64_t retry_ms;    /* down: the next attempt to connect in this long */
};

/* Starts the thread, which connects at once (and keeps trying). *notify_fd (close-on-exec,
 * non-blocking) becomes readable when items wait. Returns NULL with *err (malloc'd) only when
 * the thread or its descriptors cannot be made; a broker that is away is not an error. */
struct amqp_io *amqp_io_start(const struct amqp_io_config *cfg, int *notify_fd, char **err);
/* Reads the notify descriptor and moves every waiting item into *items (malloc'd, in the order
 * the thread saw them): returns how many. */
size_t amqp_io_take(struct amqp_io *io, struct amqp_in **items);
void amqp_in_free(struct amqp_in *items, size_t n);
/* The loop's commands (queued; carried out in order; never blocking). */
void amqp_io_ack(struct amqp_io *io, uint64_t tag);
void amqp_io_reject(struct amqp_io *io, uint64_t tag); /* basic.reject, requeue false */
/* Publishes body (JSON, copied) to the exchange with routing_key, persistent (delivery mode 2),
 * content type application/json, message-id the decimal event_id; AMQP_IN_CONFIRM follows. */
void amqp_io_publish(struct amqp_io *io, int64_t event_id, const char *routing_key,
                     const char *body);
/* Closes the connection (channel and connection close, politely, within about a second) and
 * joins the thread. What was not acked is redelivered by the broker to the next consumer. */
void amqp_io_stop(struct amqp_io *io);

#endif
