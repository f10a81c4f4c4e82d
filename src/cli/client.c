/* Talking to the daemon, and starting it when none runs (as tmux does). */
#include "cli/cli.h"
#include "util/paths.h"
#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* Starts `drover daemon` detached: its own session, output to <home>/daemon.log. */
static int client_spawn_daemon(const char *home)
{
    char *exe = realpath("/proc/self/exe", NULL);
    char *log = paths_join(home, "daemon.log");
    if (exe == NULL || paths_mkdir_p(home) < 0) {
        free(exe);
        free(log);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0); /* the daemon is re-parented: no zombie for our caller to reap */
        int null = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (null >= 0)
            dup2(null, 0);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        if (chdir("/") < 0)
            _exit(1);
        execl(exe, "drover", "daemon", (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid > 0)
        waitpid(pid, &status, 0);
    free(exe);
    free(log);
    return pid > 0 ? 0 : -1;
}

int client_connect(bool autostart)
{
    char *home = paths_home();
    char *path = paths_join(home, "drover.sock");
    int fd = client_try_connect(path);
    if (fd < 0 && autostart && (errno == ENOENT || errno == ECONNREFUSED) &&
        client_spawn_daemon(home) == 0) {
        /* Wait for the socket with a short, growing interval, up to 10 s. */
        struct timespec delay = {0, 2000000};
        for (int waited_ms = 0; fd < 0 && waited_ms < 10000;) {
            nanosleep(&delay, NULL);
            waited_ms += (int)(delay.tv_nsec / 1000000);
            if (delay.tv_nsec < 100000000)
                delay.tv_nsec *= 2;
            fd = client_try_connect(path);
        }
    }
    free(path);
    free(home);
    return fd;
}

json_t *client_request(const char *op)
{
    return json_pack("{s:i,s:s}", "v", PROTO_VERSION, "op", op);
}

json_t *client_call(const char *cmdname, json_t *req, int *code)
{
    const char *no = getenv("DROVER_NO_AUTOSTART");
    bool autostart = !(no && strcmp(no, "1") == 0);
    int fd = client_connect(autostart);
    json_t *reply = NULL;
    if (fd < 0) {
        char *home = paths_home();
        fprintf(stderr, "drover %s: cannot reach the daemon for %s: %s%s\n", cmdname, home,
                strerror(errno), autostart ? "" : " (DROVER_NO_AUTOSTART=1)");
        free(home);
        json_decref(req);
        exit(EXIT_UNREACHABLE);
    }
    if (proto_send(fd, req) < 0 || proto_recv(fd, &reply, PROTO_MAX_REPLY) < 0) {
        fprintf(stderr, "drover %s: the daemon closed the connection: %s\n", cmdname,
                strerror(errno));
        close(fd);
        json_decref(req);
        exit(EXIT_UNREACHABLE);
    }
    close(fd);
    json_decref(req);
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
