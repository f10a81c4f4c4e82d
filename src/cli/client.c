/* Talking to the daemon, and starting it when none runs (as tmux does). */
#include "cli/cli.h"
#include "daemon/config.h"
#include "util/io.h"
#include "util/parse.h"
#include "util/paths.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a command waits for a daemon it started to say it serves (or why it cannot). */
#define CLIENT_START_MS 30000

json_t *client_string(const struct cmd_entry *cmd, const char *what, const char *s)
{
    size_t bad = utf8_check(s);
    if (bad > 0) {
        cmd_usage_error(cmd, "%s: not valid UTF-8 (byte %zu)", what, bad);
        return NULL;
    }
    json_t *j = json_string(s);
    if (j == NULL)
        fatalx("jansson refused a string that is valid UTF-8");
    return j;
}

int client_set_string(const struct cmd_entry *cmd, json_t *obj, const char *key,
                      const char *what, const char *s)
{
    json_t *j = client_string(cmd, what, s);
    if (j == NULL)
        return EXIT_USAGE;
    json_object_set_new(obj, key, j);
    return 0;
}

static int64_t client_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int client_try_connect(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* In the daemon-to-be, before exec: stdin from /dev/null, output to the log, the ready pipe's
 * write end at CONFIG_READY_FD and no other descriptor of the caller's (a caller's pipe held
 * open by the daemon would never see its end: `drover ls 3>&1 | cat` would hang). */
static void client_daemon_fds(const char *log, int ready)
{
    int high = fcntl(ready, F_DUPFD, CONFIG_READY_FD + 1);
    int null = open("/dev/null", O_RDWR);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out < 0)
        out = null; /* no log rather than the caller's terminal or pipe */
    if (high < 0 || null < 0)
        _exit(127);
    dup2(null, 0);
    dup2(out, 1);
    dup2(out, 2);
    dup2(high, CONFIG_READY_FD);
    io_close_from(CONFIG_READY_FD + 1);
}

/* Starts `drover daemon` detached: its own session, output to <home>/daemon.log. Returns the
 * read end of the pipe on which it reports its start (daemon/config.h), or -1. */
char *cli_daemon_path(void)
{
    char *self = realpath("/proc/self/exe", NULL);
    if (self == NULL)
        return NULL;
    char *slash = strrchr(self, '/');
    *slash = '\0';
    char *path = paths_join(self, "drover-daemon");
    free(self);
    return path;
}

static int client_spawn_daemon(const char *home)
{
    char *exe = cli_daemon_path();
    char *log = paths_join(home, "daemon.log");
    int ready[2] = {-1, -1};
    if (exe == NULL || paths_mkdir_p(home) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
        free(exe);
        free(log);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0); /* the daemon is re-parented: no zombie for our caller to reap */
        client_daemon_fds(log, ready[1]);
        if (chdir("/") < 0)
            _exit(1);
        char fdnum[16];
        snprintf(fdnum, sizeof fdnum, "%d", CONFIG_READY_FD);
        setenv(CONFIG_READY_ENV, fdnum, 1);
        execl(exe, "drover-daemon", "daemon", (char *)NULL);
        _exit(127);
    }
    int e = errno, status;
    close(ready[1]);
    if (pid > 0)
        waitpid(pid, &status, 0);
    else
        close(ready[0]);
    free(exe);
    free(log);
    errno = e;
    return pid > 0 ? ready[0] : -1;
}

/* Waits for the daemon just started: 0 when it closed the pipe (it serves, or left that to
 * another daemon that does), 1 with its startup error in *error (the caller frees), -1 when it
 * said nothing in time. */
static int client_await_daemon(int ready, char **error)
{
    char buf[4096];
    size_t len = 0;
    int64_t deadline = client_clock_ms() + CLIENT_START_MS;
    struct pollfd p = {.fd = ready, .events = POLLIN};
    for (;;) {
        int64_t left = deadline - client_clock_ms();
        int rc = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        ssize_t r = read(ready, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && (len += (size_t)r) < sizeof buf - 1)
            continue;
        buf[len] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '\0')
            return 0;
        *error = xstrdup(buf);
        return 1;
    }
}

/* Starts a daemon and connects to it. Prints why and exits (EXIT_UNREACHABLE) when it could not
 * start; returns -1 with errno when it could not even be spawned. */
static int client_autostart(const char *cmdname, const char *home, const char *path)
{
    int ready = client_spawn_daemon(home), fd = -1;
    if (ready < 0)
        return -1;
    char *error = NULL;
    int said = client_await_daemon(ready, &error);
    close(ready);
    if (said == 1) {
        fprintf(stderr, "drover %s: the daemon could not start: %s\n", cmdname, error);
        free(error);
        exit(EXIT_UNREACHABLE);
    }
    /* It serves (or another daemon does): the socket answers now, but allow a moment. */
    for (int tries = 0; fd < 0 && tries < 20; tries++) {
        if ((fd = client_try_connect(path)) < 0) {
            struct timespec pause = {0, 50000000};
            nanosleep(&pause, NULL);
        }
    }
    if (fd < 0) {
        fprintf(stderr, "drover %s: cannot reach the daemon for %s: %s (see %s/daemon.log)\n",
                cmdname, home,
                said == 0 ? "it stopped without serving" : "it did not start in time", home);
        exit(EXIT_UNREACHABLE);
    }
    return fd;
}

/* Which daemon a command talks to, in this order (docs/CLI.md, "Which daemon"):
 *  1. DROVER_SOCKET=PATH: the daemon listening there, never started by a command;
 *  2. DROVER_HOME set: that directory's per-user daemon, started when none answers;
 *  3. PATHS_SYSTEM_SOCKET when it exists: the system daemon, never started by a command;
 *  4. the per-user daemon of ~/.local/share/drover, started when none answers.
 * home is the state directory of a daemon a command may start, NULL for one it may not. */
struct client_target {
    char *path;
    char *home;
    const char *via; /* how it was chosen, for messages; NULL for a per-user daemon */
};

static void client_target(struct client_target *t)
{
    const char *socket = getenv("DROVER_SOCKET"), *home = getenv("DROVER_HOME");
    struct stat sb;
    *t = (struct client_target){0};
    if (socket != NULL && *socket != '\0') {
        t->path = xstrdup(socket);
        t->via = "DROVER_SOCKET";
    } else if ((home == NULL || *home == '\0') && lstat(PATHS_SYSTEM_SOCKET, &sb) == 0) {
        t->path = xstrdup(PATHS_SYSTEM_SOCKET);
        t->via = "the system daemon";
    } else {
        t->home = paths_home();
        t->path = paths_join(t->home, "drover.sock");
    }
}

static void client_target_free(struct client_target *t)
{
    free(t->path);
    free(t->home);
}

int client_connect(const char *cmdname, bool autostart)
{
    struct client_target t;
    client_target(&t);
    int fd = client_try_connect(t.path);
    if (fd < 0 && autostart && t.home != NULL && (errno == ENOENT || errno == ECONNREFUSED))
        fd = client_autostart(cmdname, t.home, t.path);
    int e = errno;
    client_target_free(&t);
    errno = e;
    return fd;
}

/* Prints why no daemon could be reached (errno from client_connect) and exits. */
static void client_unreachable(const char *cmdname, bool autostart)
{
    int e = errno;
    struct client_target t;
    client_target(&t);
    if (t.home != NULL)
        fprintf(stderr, "drover %s: cannot reach the daemon for %s: %s%s\n", cmdname, t.home,
                strerror(e), autostart ? "" : " (DROVER_NO_AUTOSTART=1)");
    else if (strcmp(t.via, "DROVER_SOCKET") == 0)
        fprintf(stderr, "drover %s: cannot reach the daemon at %s (DROVER_SOCKET): %s; is it"
                        " running? (unset DROVER_SOCKET for your own daemon)\n", cmdname, t.path,
                strerror(e));
    else
        fprintf(stderr, "drover %s: the system daemon at %s does not answer: %s; ask an admin to"
                        " start it (systemctl start drover), or set DROVER_HOME for a daemon of"
                        " your own\n", cmdname, t.path, strerror(e));
    client_target_free(&t);
    exit(EXIT_UNREACHABLE);
}

json_t *client_request(const char *op)
{
    return json_pack("{s:i,s:s}", "v", PROTO_VERSION, "op", op);
}

/* One request on a fresh connection. Returns the reply, or NULL with errno when the connection
 * broke before one came. Exits when the request is over the frame limit (EXIT_USAGE: nothing is
 * sent, no daemon started) and when no daemon can be reached (EXIT_UNREACHABLE). */
static json_t *client_exchange(const char *cmdname, json_t *req)
{
    const char *no = getenv("DROVER_NO_AUTOSTART");
    bool autostart = !(no && strcmp(no, "1") == 0);
    size_t size = json_dumpb(req, NULL, 0, JSON_COMPACT);
    if (size > PROTO_MAX_REQUEST) {
        fprintf(stderr, "drover %s: the request is %zu bytes, over LIMIT_FRAME (%u bytes);"
                        " nothing was sent\n", cmdname, size, LIMIT_FRAME);
        exit(EXIT_USAGE);
    }
    int fd = client_connect(cmdname, autostart);
    json_t *reply = NULL;
    if (fd < 0)
        client_unreachable(cmdname, autostart);
    /* Even when the send fails, the daemon may have answered before it closed the connection
     * (a refusal): read what came. */
    if (proto_send(fd, req, NULL) < 0)
        shutdown(fd, SHUT_WR); /* whatever the reason, the daemon sees the end and answers or goes */
    int rc = proto_recv(fd, &reply, PROTO_MAX_REPLY), e = errno;
    close(fd);
    errno = e;
    return rc == 0 ? reply : NULL;
}

/* An error reply is printed and its code returned; an ok reply is handed back. */
static json_t *client_result(const char *cmdname, json_t *reply, int *code)
{
    if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *msg = json_string_value(json_object_get(reply, "error"));
        json_t *c = json_object_get(reply, "code");
        fprintf(stderr, "drover %s: %s\n", cmdname, msg ? msg : "error");
        *code = json_is_integer(c) ? (int)json_integer_value(c) : EXIT_FAILED;
        json_decref(reply);
        return NULL;
    }
    *code = EXIT_OK;
    return reply;
}

json_t *client_call(const char *cmdname, json_t *req, int *code)
{
    json_t *reply = client_exchange(cmdname, req);
    json_decref(req);
    if (reply == NULL) {
        fprintf(stderr, "drover %s: the daemon closed the connection before answering: %s\n",
                cmdname, errno == EPROTO ? "malformed reply" : strerror(errno));
        exit(EXIT_UNREACHABLE);
    }
    return client_result(cmdname, reply, code);
}

json_t *client_call_again(const char *cmdname, json_t *req, int *code)
{
    int quick = 0;
    struct timespec pause = {0, 100000000};
    for (;;) {
        int64_t sent = client_clock_ms();
        json_t *reply = client_exchange(cmdname, req);
        if (reply != NULL) {
            json_decref(req);
            return client_result(cmdname, reply, code);
        }
        /* A daemon that drops this request at once, time after time, is not going to answer
         * it: give up after five such in a row (about three seconds). */
        quick = client_clock_ms() - sent < 1000 ? quick + 1 : 0;
        if (quick >= 5) {
            fprintf(stderr, "drover %s: the daemon closed the connection before answering,"
                            " five times: %s\n", cmdname, strerror(errno));
            exit(EXIT_UNREACHABLE);
        }
        nanosleep(&pause, NULL);
        if (pause.tv_nsec < 800000000)
            pause.tv_nsec *= 2;
    }
}
