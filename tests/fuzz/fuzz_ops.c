/* fuzz_ops — the daemon's request handler, in-process, against a real store in a temp dir.
 *
 * An input is up to FUZZ_OPS_MAX_REQUESTS request bodies, one per line: the JSON the CLI frames
 * and sends (tests/fuzz/corpus/fuzz_ops/ holds frames captured from the CLI, and sequences of
 * them). Each goes the way server.c's conn_process takes a frame body: json_loadb, "not an
 * object" refused, else ops_dispatch(d, conn, req); then what the event loop would do next:
 * carry out what was deferred past the reply (daemon_on_carry) and the scheduling pass the
 * handlers asked for (daemon_on_kick's body).
 *
 * The daemon (tests/fuzz/fuzz-daemon.c, shared with fuzz_http) is set up as daemon_main
 * (src/daemon/main.c) does it: config defaults, a store, core, the machine (fake GPUs
 * 2x16G,1x80G, 16 CPUs, 64G, as DROVER_FAKE_* would give), the disk ballast, restore,
 * telemetry. The differences:
 *   - it is drained, through the store's "draining" setting as `drover drain` leaves it, and
 *     drained again after every request (an input may undrain it): core then never decides to
 *     start an attempt (core_schedule returns before placement), so nothing is ever spawned.
 *     Carrying out the other actions is harmless: a kill finds no run, a queued task asks for a
 *     pass. A START action reaching the carry-out step aborts: it would be a drain that does not
 *     hold. Tasks end only by cancel, so the paths of running attempts are not exercised here.
 *   - no socket, no zygote, no event loop run. A request arrives on one of FUZZ_OPS_CONNS
 *     stand-in connections; a `wait` that is deferred keeps its connection busy (the server
 *     takes no further request from it) and the next request comes on another. server_reply is
 *     replaced by __wrap_server_reply (linked with -Wl,--wrap=server_reply, so src/daemon needs
 *     no seam): it checks that the connection had a reply pending and that the reply is well
 *     formed. At the end of an input the connections close: ops_drop_conn, as conn_free does.
 *
 * Every input gets a fresh daemon in a new directory, its store a copy of an empty, migrated
 * one (the migrations were 80% of a daemon's start): deterministic, ids start at 1, and a crash
 * reproduces from its input alone. The directories are in /dev/shm when there is one, so
 * SQLite's fsyncs cost nothing, and are removed after each input and at exit.
 *
 * Checks beyond the sanitizers: every reply is an object with a boolean "ok", an error reply has
 * a string "error" and an integer "code"; only `wait` defers its reply; a deferred reply goes to
 * a connection that waits for one; no wait outlives its connection; no experiment name with '/'
 * is accepted. Inputs are mutated as JSON too (json-mutator.h); FUZZ_OPS_VERBOSE=1 prints every
 * reply, to see what an input does.
 */
#include "daemon/daemon.h"
#include "fuzz-daemon.h"
#include "json-mutator.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_OPS_MAX_REQUESTS 16
#define FUZZ_OPS_CONNS 4

/* The stand-in for server.c's connection: ops.c only stores and compares the pointer. */
struct conn {
    bool deferred; /* a `wait` reply is pending */
};

static bool fuzz_verbose;      /* FUZZ_OPS_VERBOSE=1: print every reply (to see what an input does) */

static void fuzz_check_reply(json_t *reply, const char *op)
{
    json_t *ok = json_object_get(reply, "ok");
    if (!json_is_object(reply) || !json_is_boolean(ok)) {
        fprintf(stderr, "fuzz_ops: op %s: a reply without a boolean \"ok\"\n", op);
        abort();
    }
    if (json_is_false(ok) && (!json_is_string(json_object_get(reply, "error")) ||
                              !json_is_integer(json_object_get(reply, "code")))) {
        fprintf(stderr, "fuzz_ops: op %s: an error reply without \"error\" and \"code\"\n", op);
        abort();
    }
    char *text = json_dumps(reply, JSON_COMPACT); /* what conn_send does with it */
    if (text == NULL) {
        fprintf(stderr, "fuzz_ops: op %s: the reply cannot be serialised\n", op);
        abort();
    }
    if (fuzz_verbose)
        fprintf(stderr, "fuzz_ops: %s -> %.300s\n", op, text);
    free(text);
}

/* ops_notify_waiters answers a deferred `wait` through here. Steals the reference. */
void __wrap_server_reply(struct conn *c, json_t *reply);
void __wrap_server_reply(struct conn *c, json_t *reply)
{
    if (!c->deferred) {
        fprintf(stderr, "fuzz_ops: a deferred reply on a connection that has none pending\n");
        abort();
    }
    c->deferred = false;
    fuzz_check_reply(reply, "wait (deferred)");
    json_decref(reply);
}

/* Who is connected: the fake connection has no credentials; the fuzzer is the daemon's user. */
bool __wrap_conn_read_only(const struct conn *c);
bool __wrap_conn_read_only(const struct conn *c)
{
    return false; /* the socket's connections write */
}

const struct peer *__wrap_conn_peer(const struct conn *c);
const struct peer *__wrap_conn_peer(const struct conn *c)
{
    static struct peer self;
    self.uid = getuid();
    self.gid = getgid();
    snprintf(self.name, sizeof self.name, "fuzzer");
    self.admin = true;
    return &self;
}

/* An experiment's name becomes part of paths under the state directory (the generator's
 * history, the archive): one with '/' would make the daemon write outside it, and the harness
 * outside its temp dir. The daemon must refuse it (exp_name_valid); if it ever accepts one, stop
 * at once, before a later request can make it write there. */
static void fuzz_check_name(json_t *req, json_t *reply)
{
    const char *op = json_string_value(json_object_get(req, "op"));
    const char *name = json_string_value(json_object_get(req, "name"));
    if (op && strcmp(op, "exp_run") == 0 && name && strchr(name, '/') &&
        json_is_true(json_object_get(reply, "ok"))) {
        fprintf(stderr, "fuzz_ops: exp_run accepted the name \"%s\"\n", name);
        abort();
    }
}

/* One frame body, as server.c's conn_process handles it; c->deferred says whether its reply
 * is now pending. */
static void fuzz_request(struct daemon *d, struct conn *c, const char *body, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(body, len, 0, &jerr), *reply;
    const char *op = "?";
    if (req == NULL || !json_is_object(req)) {
        reply = reply_error(2, "malformed request: %s", req ? "not an object" : jerr.text);
    } else {
        op = json_is_string(json_object_get(req, "op"))
                 ? json_string_value(json_object_get(req, "op")) : "?";
        reply = ops_dispatch(d, c, req);
        if (reply == NULL) {
            if (strcmp(op, "wait") != 0) {
                fprintf(stderr, "fuzz_ops: op %s gave no reply (only wait defers)\n", op);
                abort();
            }
            c->deferred = true;
        }
    }
    if (reply != NULL) {
        fuzz_check_reply(reply, op);
        fuzz_check_name(req, reply);
        json_decref(reply);
    }
    json_decref(req);
}

/* Structure-aware: see json-mutator.h. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return json_mutate(data, size, max_size, seed);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_daemon_init("ops");
    fuzz_verbose = getenv("FUZZ_OPS_VERBOSE") && strcmp(getenv("FUZZ_OPS_VERBOSE"), "1") == 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct daemon d;
    struct conn conns[FUZZ_OPS_CONNS] = {{0}};
    size_t conn, off = 0;
    int requests = 0;
    fuzz_daemon_new(&d, NULL);
    while (off < size && requests < FUZZ_OPS_MAX_REQUESTS && !d.stopping) {
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t len = nl ? (size_t)(nl - (data + off)) : size - off;
        if (len > 0) {
            /* A connection with a reply pending is sent nothing more: the request comes on
             * the first free one, as from another client. */
            for (conn = 0; conn < FUZZ_OPS_CONNS && conns[conn].deferred; conn++)
                ;
            if (conn == FUZZ_OPS_CONNS)
                break;
            requests++;
            fuzz_request(&d, &conns[conn], (const char *)data + off, len);
            fuzz_daemon_turn(&d);
        }
        off += len + 1;
    }
    /* The clients hang up: conn_free drops their waits. */
    for (size_t i = 0; i < FUZZ_OPS_CONNS; i++)
        ops_drop_conn(&d, &conns[i]);
    if (d.waiters != NULL)
        fatalx("fuzz_ops: a wait outlived its connection");
    fuzz_daemon_free(&d);
    return 0;
}
