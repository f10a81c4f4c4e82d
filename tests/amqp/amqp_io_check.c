/* tests/amqp/amqp_io_check.c — daemon/amqp-io.c alone, against a real RabbitMQ node.
 *
 * Run by tests/e2e/t-amqp-io.sh, which starts the node (tests/e2e/amqp-lib.sh) and passes:
 *   amqp_io_check PORT
 * with AMQP_URL (amqp://guest:guest@127.0.0.1:PORT/), AMQP_TOOL_PY (tests/e2e/amqp_tool.py, run
 * by /usr/bin/python3) and AMQP_NODE (the node's name, for rabbitmqctl) in the environment.
 * Plays the daemon's loop: waits on the notify descriptor, takes the items, acks, rejects and
 * publishes; what the broker holds it asks amqp_tool.py and rabbitmqctl. The broker goes away
 * and comes back by `rabbitmqctl stop_app` / `start_app` (the node's VM stays, its listener and
 * connections go), and freezes by SIGSTOP to its VM (RABBITMQ_PID_FILE names it). Prints one
 * line per check; the first failed check ends it (exit 1). With AMQP_IO_BENCH=N, then also
 * the thread's rates (check_bench). */
#include "daemon/amqp-io.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_QUEUE "check.submit"
#define CHECK_EXCHANGE "check.events"
#define CHECK_OUT "check.out"
#define CHECK_PREFETCH 5
#define CHECK_WAIT_MS 30000 /* an item the broker owes: it comes well within this */

static const char *check_url, *check_tool, *check_node;
static int check_port;

/* What the thread handed over and the checks have not used yet, oldest first. */
static struct amqp_in *check_inbox;
static size_t check_n, check_cap;
static int check_count;

static void check_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void check_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check_ok(const char *what)
{
    check_count++;
    printf("ok: %s\n", what);
    fflush(stdout);
}

static int64_t check_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to MS for the notify descriptor and moves what came into the inbox. */
static void check_collect(struct amqp_io *io, int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return;
    struct amqp_in *items;
    size_t n = amqp_io_take(io, &items);
    if (n == 0)
        return; /* a wake-up for items taken already */
    if (check_n + n > check_cap) {
        check_cap = 2 * (check_n + n);
        check_inbox = realloc(check_inbox, check_cap * sizeof *check_inbox);
        if (!check_inbox)
            check_fail("out of memory");
    }
    memcpy(check_inbox + check_n, items, n * sizeof *items);
    check_n += n;
    free(items); /* the strings now belong to the inbox */
}

static bool check_is(const struct amqp_in *in, enum amqp_in_type type)
{
    return in->type == type;
}

/* Removes and returns the inbox's first item of TYPE, waiting up to CHECK_WAIT_MS for it. */
static struct amqp_in check_next(struct amqp_io *io, int fd, enum amqp_in_type type,
                                 const char *what)
{
    int64_t deadline = check_now_ms() + CHECK_WAIT_MS;
    for (;;) {
        for (size_t i = 0; i < check_n; i++) {
            if (!check_is(&check_inbox[i], type))
                continue;
            struct amqp_in in = check_inbox[i];
            memmove(check_inbox + i, check_inbox + i + 1, (check_n - i - 1) * sizeof in);
            check_n--;
            return in;
        }
        int64_t left = deadline - check_now_ms();
        if (left <= 0)
            check_fail("%s: nothing came in %d ms", what, CHECK_WAIT_MS);
        check_collect(io, fd, (int)left);
    }
}

static size_t check_how_many(enum amqp_in_type type)
{
    size_t n = 0;
    for (size_t i = 0; i < check_n; i++)
        n += check_is(&check_inbox[i], type);
    return n;
}

static void check_free(struct amqp_in *in)
{
    free(in->message_id);
    free(in->body);
    free(in->error);
}

/* Runs a shell command; returns its first line of output (static), failing on a non-zero exit. */
static const char *check_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *check_run(const char *fmt, ...)
{
    static char line[4096];
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p)
        check_fail("popen %s", cmd);
    line[0] = '\0';
    if (fgets(line, sizeof line, p))
        line[strcspn(line, "\n")] = '\0';
    char rest[4096];
    while (fgets(rest, sizeof rest, p))
        ;
    int rc = pclose(p);
    if (rc != 0)
        check_fail("`%s` exited %d (%s)", cmd, rc, line);
    return line;
}

static void check_tool_publish(const char *body, const char *id, int count)
{
    check_run("/usr/bin/python3 %s publish '%s' " CHECK_QUEUE " '%s' --message-id '%s' --count %d",
              check_tool, check_url, body, id, count);
}

/* The messages the queue holds: ready and delivered-but-unacknowledged (rabbitmqctl). */
static long check_queue_total(const char *queue)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "rabbitmqctl -q -n %s list_queues --no-table-headers name messages | "
             "awk '$1 == \"%s\" { print $2 }'",
             check_node, queue);
    return atol(check_run("%s", cmd));
}

/* The messages ready in the queue (amqp_tool.py count). */
static long check_queue_ready(const char *queue)
{
    return atol(check_run("/usr/bin/python3 %s count '%s' %s", check_tool, check_url, queue));
}

static void check_wait_total(const char *queue, long want, const char *what)
{
    int64_t deadline = check_now_ms() + CHECK_WAIT_MS;
    long got;
    while ((got = check_queue_total(queue)) != want)
        if (check_now_ms() > deadline)
            check_fail("%s: %s holds %ld messages, not %ld", what, queue, got, want);
    check_ok(what);
}

static struct amqp_in check_delivery(struct amqp_io *io, int fd, const char *id, const char *body,
                                     bool redelivered, const char *what)
{
    struct amqp_in in = check_next(io, fd, AMQP_IN_DELIVERY, what);
    if (!in.message_id || strcmp(in.message_id, id) != 0)
        check_fail("%s: message id %s, not %s", what, in.message_id ? in.message_id : "(none)", id);
    if (body && (strcmp(in.body, body) != 0 || in.len != strlen(body)))
        check_fail("%s: body '%s' (%zu bytes), not '%s'", what, in.body, in.len, body);
    if (in.redelivered != redelivered)
        check_fail("%s: redelivered %d, not %d", what, in.redelivered, redelivered);
    return in;
}

static void check_confirm(struct amqp_io *io, int fd, int64_t event_id, const char *what)
{
    struct amqp_in in = check_next(io, fd, AMQP_IN_CONFIRM, what);
    if (in.event_id != event_id || in.nacked)
        check_fail("%s: confirm of %" PRId64 " (nacked %d), not of %" PRId64, what, in.event_id,
                   in.nacked, event_id);
    check_free(&in);
    check_ok(what);
}

/* A broker nobody listens for: down, with why and the backoff, doubling; stop in the wait. */
static void check_refused(void)
{
    struct amqp_io_config cfg = {.host = "127.0.0.1", .port = 1, .heartbeat_s = 4};
    int fd;
    char *err = NULL;
    struct amqp_io *io = amqp_io_start(&cfg, &fd, &err);
    if (!io)
        check_fail("amqp_io_start: %s", err);
    struct amqp_in down = check_next(io, fd, AMQP_IN_STATE, "refused: state");
    if (down.up || !down.error || !strstr(down.error, "refused") || down.retry_ms != 1000)
        check_fail("refused: up %d, error '%s', retry in %" PRId64 " ms", down.up,
                   down.error ? down.error : "(none)", down.retry_ms);
    printf("   (error: %s)\n", down.error);
    check_free(&down);
    check_ok("no broker: STATE down, the error says refused, retry in 1000 ms");
    down = check_next(io, fd, AMQP_IN_STATE, "refused: second state");
    if (down.up || down.retry_ms != 2000)
        check_fail("refused again: up %d, retry in %" PRId64 " ms, not 2000", down.up,
                   down.retry_ms);
    check_free(&down);
    check_ok("no broker, the next try: retry in 2000 ms");
    int64_t t0 = check_now_ms();
    amqp_io_stop(io);
    if (check_now_ms() - t0 > 1000)
        check_fail("amqp_io_stop took %" PRId64 " ms in the backoff", check_now_ms() - t0);
    check_ok("amqp_io_stop returns at once while waiting to retry");
}

/* A wrong password: down, and the error is the broker's refusal of the login. */
static void check_access_refused(void)
{
    struct amqp_io_config cfg = {.host = "127.0.0.1", .port = check_port, .user = "guest",
                                 .password = "not-the-password", .heartbeat_s = 4};
    int fd;
    char *err = NULL;
    struct amqp_io *io = amqp_io_start(&cfg, &fd, &err);
    if (!io)
        check_fail("amqp_io_start: %s", err);
    struct amqp_in down = check_next(io, fd, AMQP_IN_STATE, "wrong password: state");
    if (down.up || !down.error || !strstr(down.error, "login") ||
        !strstr(down.error, "ACCESS_REFUSED"))
        check_fail("wrong password: up %d, error '%s'", down.up, down.error ? down.error : "(none)");
    printf("   (error: %s)\n", down.error);
    check_free(&down);
    amqp_io_stop(io);
    check_ok("wrong password: STATE down, the error says the login was refused");
}

/* The broker freezes (SIGSTOP: a hung machine, a partition — no FIN, no RST): two heartbeats of
 * silence make the connection down, and a publish made meanwhile is never confirmed; once the
 * broker thaws, up again and the publish made again is confirmed. */
static void check_frozen(struct amqp_io *io, int fd, int heartbeat_s)
{
    const char *pidfile = getenv("RABBITMQ_PID_FILE");
    FILE *f = pidfile ? fopen(pidfile, "r") : NULL;
    long pid = 0;
    if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        check_fail("frozen: no broker pid in RABBITMQ_PID_FILE (%s)", pidfile ? pidfile : "unset");
    fclose(f);
    if (kill((pid_t)pid, SIGSTOP) != 0)
        check_fail("frozen: kill -STOP %ld: %s", pid, strerror(errno));
    int64_t t0 = check_now_ms();
    amqp_io_publish(io, 200, "task.20.x", "{}");
    struct amqp_in st = check_next(io, fd, AMQP_IN_STATE, "frozen broker");
    int64_t took = check_now_ms() - t0;
    kill((pid_t)pid, SIGCONT);
    if (st.up || !st.error || !strstr(st.error, "heartbeat"))
        check_fail("frozen: up %d, error '%s'", st.up, st.error ? st.error : "(none)");
    if (took > (3 * heartbeat_s + 2) * 1000)
        check_fail("frozen: down after %" PRId64 " ms, heartbeat %d s", took, heartbeat_s);
    printf("   (error: %s; after %" PRId64 " ms)\n", st.error, took);
    check_free(&st);
    if (check_how_many(AMQP_IN_CONFIRM))
        check_fail("frozen: a CONFIRM from a frozen broker");
    check_ok("frozen broker: STATE down within about two heartbeats, the publish not confirmed");
    for (;;) {
        st = check_next(io, fd, AMQP_IN_STATE, "thawed broker");
        bool up = st.up;
        check_free(&st);
        if (up)
            break;
    }
    amqp_io_publish(io, 200, "task.20.x", "{}");
    check_confirm(io, fd, 200, "thawed broker: up again, the publish made again is confirmed");
}

/* AMQP_IO_BENCH=N: the thread's own rates, for docs/BENCHMARKS.md: N events published and all
 * confirmed; N messages (queued beforehand by amqp_tool.py) delivered and acked, prefetch 64. */
static void check_bench(int n)
{
    struct amqp_io_config cfg = {.host = "127.0.0.1", .port = check_port, .queue = "bench.submit",
                                 .exchange = "bench.events", .prefetch = 64};
    int fd;
    char *err = NULL;
    check_run("/usr/bin/python3 %s publish '%s' bench.submit '{\"cmd\": [\"true\"]}' "
              "--message-id 'b{n}' --count %d", check_tool, check_url, n);
    struct amqp_io *io = amqp_io_start(&cfg, &fd, &err);
    if (!io)
        check_fail("amqp_io_start: %s", err);
    int64_t t0 = check_now_ms();
    for (int i = 0; i < n; i++) {
        struct amqp_in in = check_next(io, fd, AMQP_IN_DELIVERY, "bench: delivery");
        amqp_io_ack(io, in.tag);
        check_free(&in);
    }
    int64_t t1 = check_now_ms();
    for (int i = 0; i < n; i++)
        amqp_io_publish(io, i + 1, "task.1.running", "{\"id\":1,\"state\":\"running\"}");
    for (int i = 0; i < n; i++) {
        struct amqp_in in = check_next(io, fd, AMQP_IN_CONFIRM, "bench: confirm");
        check_free(&in);
    }
    int64_t t2 = check_now_ms();
    for (size_t i = 0; i < check_n; i++)
        check_free(&check_inbox[i]);
    check_n = 0;
    amqp_io_stop(io);
    printf("bench: %d deliveries acked in %" PRId64 " ms (%.0f/s); %d publishes confirmed in %"
           PRId64 " ms (%.0f/s)\n", n, t1 - t0, n * 1000.0 / (double)(t1 - t0 + !(t1 - t0)), n,
           t2 - t1, n * 1000.0 / (double)(t2 - t1 + !(t2 - t1)));
}

int main(int argc, char **argv)
{
    check_url = getenv("AMQP_URL");
    check_tool = getenv("AMQP_TOOL_PY");
    check_node = getenv("AMQP_NODE");
    if (argc != 2 || !check_url || !check_tool || !check_node || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: AMQP_URL=… AMQP_TOOL_PY=… AMQP_NODE=… amqp_io_check PORT\n");
        return 2;
    }
    check_port = atoi(argv[1]);
    setvbuf(stdout, NULL, _IOLBF, 0);

    check_refused();
    check_access_refused();

    struct amqp_io_config cfg = {
        .host = "127.0.0.1", .port = check_port, .vhost = "/", .user = "guest",
        .password = "guest", .queue = CHECK_QUEUE, .exchange = CHECK_EXCHANGE,
        .prefetch = CHECK_PREFETCH, .heartbeat_s = 4,
    };
    int fd;
    char *err = NULL;
    struct amqp_io *io = amqp_io_start(&cfg, &fd, &err);
    if (!io)
        check_fail("amqp_io_start: %s", err);
    struct amqp_in st = check_next(io, fd, AMQP_IN_STATE, "connect");
    if (!st.up || st.error)
        check_fail("connect: STATE down: %s", st.error ? st.error : "(no error)");
    check_free(&st);
    check_ok("connect: STATE up");
    /* The thread declared the exchange: bind the queue that watches what it publishes. */
    check_run("/usr/bin/python3 %s bind '%s' " CHECK_EXCHANGE " " CHECK_OUT " '#'", check_tool,
              check_url);

    /* Intake: a delivery with its id and body; ack removes it. */
    check_tool_publish("{\"cmd\": [\"true\"]}", "m1", 1);
    struct amqp_in in = check_delivery(io, fd, "m1", "{\"cmd\": [\"true\"]}", false, "delivery");
    check_ok("a published message comes as a DELIVERY with its message-id and body");
    check_wait_total(CHECK_QUEUE, 1, "delivered, not acked: the queue still holds it");
    amqp_io_ack(io, in.tag);
    check_free(&in);
    check_wait_total(CHECK_QUEUE, 0, "ack removes it");

    /* Reject: removed, not requeued. */
    check_tool_publish("not json", "m2", 1);
    in = check_delivery(io, fd, "m2", "not json", false, "delivery to reject");
    amqp_io_reject(io, in.tag);
    check_free(&in);
    check_wait_total(CHECK_QUEUE, 0, "reject removes it (no requeue)");

    /* Prefetch: 5 at a time; the rest as the acks come, in order. */
    check_tool_publish("body {n}", "p{n}", 20);
    struct amqp_in batch[20];
    for (int i = 0; i < CHECK_PREFETCH; i++) {
        char id[16], body[32];
        snprintf(id, sizeof id, "p%d", i + 1);
        snprintf(body, sizeof body, "body %d", i + 1);
        batch[i] = check_delivery(io, fd, id, body, false, "prefetch: the first five");
    }
    int64_t deadline = check_now_ms() + CHECK_WAIT_MS;
    while (check_queue_ready(CHECK_QUEUE) != 20 - CHECK_PREFETCH)
        if (check_now_ms() > deadline)
            check_fail("prefetch: the queue does not hold 15 ready");
    check_collect(io, fd, 200);
    if (check_how_many(AMQP_IN_DELIVERY) != 0)
        check_fail("prefetch: %zu deliveries beyond the first %d before any ack",
                   check_how_many(AMQP_IN_DELIVERY), CHECK_PREFETCH);
    check_ok("prefetch 5: five deliveries before any ack, 15 left ready");
    for (int i = CHECK_PREFETCH; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i + 1);
        amqp_io_ack(io, batch[i - CHECK_PREFETCH].tag);
        batch[i] = check_delivery(io, fd, id, NULL, false, "prefetch: one more per ack");
    }
    for (int i = 20 - CHECK_PREFETCH; i < 20; i++)
        amqp_io_ack(io, batch[i].tag);
    for (int i = 0; i < 20; i++)
        check_free(&batch[i]);
    check_ok("prefetch: the other 15 came one per ack, in order");
    check_wait_total(CHECK_QUEUE, 0, "prefetch: all 20 acked");

    /* Events: confirmed; the bound queue gets them persistent, with message-id and key. */
    amqp_io_publish(io, 42, "task.7.running", "{\"id\":7,\"state\":\"running\"}");
    check_confirm(io, fd, 42, "publish: CONFIRM of event 42");
    const char *got = check_run("/usr/bin/python3 %s drain '%s' " CHECK_OUT " --count 1 | "
                                "/usr/bin/python3 -c 'import json,sys; m=json.loads(sys.stdin.readline()); "
                                "print(m[\"routing_key\"], m[\"message_id\"], m[\"delivery_mode\"], "
                                "m[\"content_type\"], m[\"body\"])'",
                                check_tool, check_url);
    if (strcmp(got, "task.7.running 42 2 application/json {\"id\":7,\"state\":\"running\"}") != 0)
        check_fail("the bound queue got: %s", got);
    check_ok("the bound queue got it: key task.7.running, message-id 42, persistent, the body");
    for (int64_t id = 43; id <= 45; id++)
        amqp_io_publish(io, id, "experiment.e.running", "{}");
    for (int64_t id = 43; id <= 45; id++)
        check_confirm(io, fd, id, "publish: three more, each confirmed once, in order");
    check_run("/usr/bin/python3 %s drain '%s' " CHECK_OUT " --count 3", check_tool, check_url);

    /* The broker goes away with a message delivered and not acked. */
    check_tool_publish("{}", "m3", 1);
    struct amqp_in m3 = check_delivery(io, fd, "m3", "{}", false, "delivery before the broker goes");
    check_run("rabbitmqctl -q -n %s stop_app >/dev/null 2>&1", check_node);
    st = check_next(io, fd, AMQP_IN_STATE, "broker stopped");
    if (st.up || !st.error || st.retry_ms != 1000)
        check_fail("broker stopped: up %d, error %s, retry in %" PRId64 " ms", st.up,
                   st.error ? st.error : "(none)", st.retry_ms);
    printf("   (error: %s)\n", st.error);
    check_free(&st);
    check_ok("broker stopped: STATE down with an error, retry in 1000 ms");
    amqp_io_ack(io, m3.tag);             /* down: dropped */
    amqp_io_publish(io, 99, "task.9.x", "{}"); /* the loop knows it is down: dropped */
    check_run("rabbitmqctl -q -n %s start_app >/dev/null 2>&1", check_node);
    for (;;) { /* a try or two may fail while the broker starts */
        st = check_next(io, fd, AMQP_IN_STATE, "broker back");
        bool up = st.up;
        check_free(&st);
        if (up)
            break;
    }
    check_ok("broker back: STATE up");
    struct amqp_in again = check_delivery(io, fd, "m3", "{}", true, "redelivery");
    check_ok("the message not acked comes again, redelivered");
    amqp_io_ack(io, m3.tag); /* the old connection's tag: dropped, the new delivery stays */
    check_free(&m3);
    amqp_io_publish(io, 100, "task.10.x", "{}");
    check_confirm(io, fd, 100, "publish after the broker came back: confirmed");
    check_wait_total(CHECK_QUEUE, 1, "an ack of the old connection's tag: no effect");
    amqp_io_ack(io, again.tag);
    check_free(&again);
    check_wait_total(CHECK_QUEUE, 0, "the new tag's ack removes it");
    check_collect(io, fd, 200);
    for (size_t i = 0; i < check_n; i++) {
        if (check_inbox[i].type == AMQP_IN_STATE)
            check_fail("a STATE %s since the broker came back: %s",
                       check_inbox[i].up ? "up" : "down",
                       check_inbox[i].error ? check_inbox[i].error : "");
        if (check_inbox[i].type == AMQP_IN_CONFIRM)
            check_fail("a CONFIRM of %" PRId64 " nobody waits for", check_inbox[i].event_id);
        if (check_inbox[i].type == AMQP_IN_DELIVERY)
            check_fail("a DELIVERY of %s nobody published", check_inbox[i].message_id);
    }
    check_ok("no other item: the publish made while down never confirmed, the old ack harmless");

    check_frozen(io, fd, cfg.heartbeat_s);

    /* Stop with a delivery not acked: prompt, and the broker keeps the message. */
    check_tool_publish("{}", "m4", 1);
    in = check_delivery(io, fd, "m4", "{}", false, "delivery before stop");
    check_free(&in);
    int64_t t0 = check_now_ms();
    amqp_io_stop(io);
    int64_t took = check_now_ms() - t0;
    if (took > 2000)
        check_fail("amqp_io_stop took %" PRId64 " ms", took);
    printf("   (amqp_io_stop: %" PRId64 " ms)\n", took);
    check_ok("amqp_io_stop returns promptly");
    deadline = check_now_ms() + CHECK_WAIT_MS;
    while (check_queue_ready(CHECK_QUEUE) != 1)
        if (check_now_ms() > deadline)
            check_fail("after stop: the unacked message is not ready again");
    check_ok("after stop: the unacked message is ready for the next consumer");
    for (size_t i = 0; i < check_n; i++)
        check_free(&check_inbox[i]);
    check_n = 0;
    if (getenv("AMQP_IO_BENCH"))
        check_bench(atoi(getenv("AMQP_IO_BENCH")));
    free(check_inbox);
    printf("ok: %d checks in amqp_io_check\n", check_count);
    return 0;
}
