/* fuzz_ops — the daemon's request handler, in-process, against a real store in a temp dir.
 *
 * An input is up to FUZZ_OPS_MAX_REQUESTS request bodies, one per line: the JSON the CLI frames
 * and sends (tests/fuzz/corpus/fuzz_ops/ holds frames captured from the CLI, and sequences of
 * them). Each goes the way server.c's conn_process takes a frame body: json_loadb, "not an
 * object" refused, else ops_dispatch(d, conn, req); then what the event loop would do next:
 * carry out what was deferred past the reply (daemon_on_carry) and the scheduling pass the
 * handlers asked for (daemon_on_kick's body).
 *
 * The daemon is set up as daemon_main (src/daemon/main.c) does it: config defaults, a store,
 * core, the machine (fake GPUs 2x16G,1x80G, 16 CPUs, 64G, as DROVER_FAKE_* would give), the disk
 * ballast, restore, telemetry. The differences:
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
#include "json-mutator.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
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

static char fuzz_root[80];     /* the temp dir: the pristine store and the daemon's home */
static char fuzz_pristine[96]; /* the empty store (fuzz_make_pristine) */
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

static int fuzz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void fuzz_rm_tree(const char *dir)
{
    nftw(dir, fuzz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes everything the daemon made in home but its disk ballast, `reserve`: what it holds is
 * allocated once, and posix_fallocate then finds it in place. */
static void fuzz_clear_home(const char *home)
{
    DIR *dir = opendir(home);
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, "reserve") == 0)
            continue;
        char *path = xasprintf("%s/%s", home, e->d_name);
        fuzz_rm_tree(path);
        free(path);
    }
    if (dir)
        closedir(dir);
}

static void fuzz_at_exit(void)
{
    if (fuzz_root[0])
        fuzz_rm_tree(fuzz_root);
}

/* A copy of the empty store: store_open then finds it migrated, which saves most of a new
 * daemon's cost (the migrations were 80% of it). */
static void fuzz_copy(const char *from, const char *to)
{
    char buf[65536];
    ssize_t n;
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (in < 0 || out < 0)
        fatalx("fuzz_ops: cannot copy %s to %s", from, to);
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            fatalx("fuzz_ops: cannot write %s", to);
    close(in);
    close(out);
}

/* The empty store every daemon starts from: migrated, and drained as `drover drain` leaves it
 * (daemon_restore reads that back). */
static void fuzz_make_pristine(void)
{
    char *err = NULL;
    snprintf(fuzz_pristine, sizeof fuzz_pristine, "%s/pristine.db", fuzz_root);
    struct store *st = store_open(fuzz_pristine, &err);
    if (st == NULL || store_set_setting(st, "draining", "1") < 0)
        fatalx("fuzz_ops: %s", st ? store_error(st) : err);
    store_close(st); /* the last connection: SQLite checkpoints and removes the WAL */
}

static void fuzz_no_event(evutil_socket_t fd, short what, void *arg)
{
}

/* The machine: what daemon_machine (daemon/main.c) builds from DROVER_FAKE_GPUS=2x16G,1x80G,
 * DROVER_FAKE_CPUS=16 and DROVER_FAKE_MEM=64G. Two GPU names, so gpu_type has a choice. */
static void fuzz_machine(struct daemon *d)
{
    const char *why;
    if (gpu_parse_fake("2x16G,1x80G", &d->gpus, &why) < 0)
        fatalx("fuzz_ops: %s", why);
    d->cpus = 16;
    d->mem = 64ULL << 30;
    struct core_node node = {.ngpus = d->gpus.count, .cpus = d->cpus, .mem = d->mem};
    for (int i = 0; i < d->gpus.count; i++) {
        int t = 0;
        node.gpu_mem[i] = d->gpus.gpu[i].mem_total;
        while (t < d->ngpu_types && strcmp(d->gpu_type_names[t], d->gpus.gpu[i].name) != 0)
            t++;
        if (t == d->ngpu_types)
            d->gpu_type_names[d->ngpu_types++] = xstrdup(d->gpus.gpu[i].name);
        node.gpu_type[i] = (uint8_t)t;
    }
    core_set_nodes(d->core, &node, 1);
}

static void fuzz_daemon_new(struct daemon *d)
{
    struct core_policy policy = core_policy_default();
    char *err = NULL;
    memset(d, 0, sizeof *d);
    d->fd_reserve = -1; /* no listener: daemon/listen.c never opens it */
    d->task_umask = 022;
    d->home = xasprintf("%s/home", fuzz_root); /* emptied after each input but for the ballast */
    char *runs = xasprintf("%s/runs", d->home), *metrics = xasprintf("%s/metrics", d->home);
    char *db = xasprintf("%s/drover.db", d->home);
    if ((mkdir(d->home, 0700) < 0 && errno != EEXIST) || mkdir(runs, 0700) < 0 ||
        mkdir(metrics, 0700) < 0)
        fatalx("fuzz_ops: cannot create %s", d->home);
    if (config_load(&d->cfg, NULL, 0, NULL, &err) < 0)
        fatalx("fuzz_ops: %s", err);
    policy.aging_ms = d->cfg.aging_ms;
    d->grace_ms = d->cfg.grace_ms;
    d->core = core_new(&policy);
    fuzz_copy(fuzz_pristine, db);
    d->store = store_open(db, &err);
    if (d->store == NULL)
        fatalx("fuzz_ops: %s", err);
    d->base = event_base_new();
    fuzz_machine(d);
    /* The loop is never run: the harness does what these events would (fuzz_loop_turn). */
    d->kick = event_new(d->base, -1, 0, fuzz_no_event, d);
    d->carry = event_new(d->base, -1, 0, fuzz_no_event, d);
    d->wakeup = event_new(d->base, -1, 0, fuzz_no_event, d);
    disk_start(d); /* kept from one input to the next: allocating it was half the time */
    if (daemon_restore(d, &err) < 0 || telemetry_start(d, &err) < 0)
        fatalx("fuzz_ops: %s", err);
    if (!core_draining(d->core))
        fatalx("fuzz_ops: the daemon is not drained");
    free(runs);
    free(metrics);
    free(db);
}

static void fuzz_daemon_free(struct daemon *d)
{
    if (d->runs != NULL)
        fatalx("fuzz_ops: an attempt was started");
    telemetry_stop(d);
    disk_stop(d);
    exp_free_all(d);
    for (int t = 0; t < d->ngpu_types; t++)
        free(d->gpu_type_names[t]);
    config_free(&d->cfg);
    event_free(d->kick);
    event_free(d->carry);
    event_free(d->wakeup);
    core_actions_free(&d->deferred);
    core_actions_free(&d->acts);
    free(d->ends);
    core_free(d->core);
    store_close(d->store);
    event_base_free(d->base);
    fuzz_clear_home(d->home);
    free(d->home);
}

static void fuzz_no_start(const struct core_actions *acts)
{
    for (size_t i = 0; i < acts->n; i++)
        if (acts->v[i].type == CORE_ACT_START)
            fatalx("fuzz_ops: a drained daemon started task %lld", (long long)acts->v[i].task);
}

/* What the event loop does after a request: carry out what was deferred past the reply
 * (daemon_on_carry), then the scheduling pass a handler asked for (daemon_on_kick). */
static void fuzz_loop_turn(struct daemon *d)
{
    core_set_drain(d->core, true); /* an input may have undrained it */
    fuzz_no_start(&d->deferred);
    fuzz_no_start(&d->acts);
    if (d->deferred.n > 0)
        daemon_on_carry(-1, 0, d);
    core_schedule(d->core, daemon_now(), &d->acts);
    fuzz_no_start(&d->acts);
    daemon_apply(d);
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

/* A crash ends the process without atexit: the temp dirs of harnesses that are gone (the pid
 * in the name no longer runs) are removed here. */
static void fuzz_remove_stale(const char *base)
{
    DIR *dir = opendir(base);
    struct dirent *e;
    int pid;
    while (dir && (e = readdir(dir)) != NULL) {
        if (sscanf(e->d_name, "drover-fuzz-ops.%d.", &pid) != 1 || pid <= 0 ||
            kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        char *path = xasprintf("%s/%s", base, e->d_name);
        fuzz_rm_tree(path);
        free(path);
    }
    if (dir)
        closedir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    umask(077); /* as daemon_main does */
    fuzz_remove_stale(base);
    snprintf(fuzz_root, sizeof fuzz_root, "%s/drover-fuzz-ops.%d.XXXXXX", base, (int)getpid());
    if (mkdtemp(fuzz_root) == NULL)
        fatalx("fuzz_ops: cannot create a temp dir in %s", base);
    atexit(fuzz_at_exit);
    fuzz_make_pristine();
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
    fuzz_daemon_new(&d);
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
            fuzz_loop_turn(&d);
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
