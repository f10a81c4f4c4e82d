/* The zygote: a small process, spawned once by the daemon (`drover __zygote`), that forks the
 * supervisors.
 *
 * Why: a supervisor forked from the daemon shares the daemon's pages copy-on-write, and every page
 * the daemon then writes costs a fault and a cross-CPU TLB shootdown; a supervisor exec'd afresh
 * costs an exec of this binary per attempt. A fork of the zygote costs neither: the zygote's few
 * pages are all it shares, and it never writes them while supervisors live. Measured in
 * docs/BENCHMARKS.md.
 *
 * Protocol on a socketpair (stream): daemon -> zygote, a 4-byte length, the spec as JSON, and the
 * lock, run_dir and ready-pipe descriptors as SCM_RIGHTS on the same sendmsg; zygote -> daemon,
 * 8-byte records {type, pid}: ZYGOTE_FORKED answers a request, ZYGOTE_EXITED reports a reaped
 * supervisor. The zygote exits when the daemon's end closes; supervisors it forked run on (they
 * are the run directory's, not the zygote's), and a restarted daemon re-adopts them.
 */
#include "exec/exec-internal.h"
#include "util/io.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ZYGOTE_FORKED = 1, ZYGOTE_EXITED = 2 };
enum { ZYGOTE_SOCK_FD = 3 };

struct zygote_record {
    int32_t type;
    int32_t pid;
};

static int zygote_fd = -1;          /* the daemon's end */
static pid_t zygote_pid = -1;
static pid_t *zygote_exited;        /* exit notices read while waiting for a FORKED answer */
static size_t zygote_nexited, zygote_cap;

/* ---- the daemon's side ------------------------------------------------------------------- */

int exec_zygote_start(char **err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
        *err = xasprintf("socketpair: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all;
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], ZYGOTE_SOCK_FD);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&attr, &all);
    posix_spawnattr_setsigdefault(&attr, &all);
    char *const argv[] = {"drover", "__zygote", NULL};
    int rc = posix_spawn(&zygote_pid, "/proc/self/exe", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        *err = xasprintf("spawning the zygote: %s", strerror(rc));
        return -1;
    }
    zygote_fd = sv[0];
    return zygote_fd;
}

void exec_zygote_stop(void)
{
    if (zygote_fd != -1)
        close(zygote_fd);
    zygote_fd = -1;
    if (zygote_pid > 0)
        waitpid(zygote_pid, NULL, 0);
    zygote_pid = -1;
    zygote_nexited = 0;
}

bool exec_zygote_running(void)
{
    return zygote_fd != -1;
}

static void zygote_note_exit(pid_t pid)
{
    xgrow((void **)&zygote_exited, &zygote_cap, zygote_nexited + 1, sizeof *zygote_exited);
    zygote_exited[zygote_nexited++] = pid;
}

pid_t exec_zygote_fork(const struct exec_spec *spec, int dir_fd, int lock_fd, int ready_fd,
                       char **err)
{
    char *text = exec_spec_encode(spec);
    uint32_t len = (uint32_t)strlen(text);
    unsigned char hdr[4] = {len >> 24, len >> 16, len >> 8, len};
    int fds[3] = {lock_fd, dir_fd, ready_fd};
    char control[CMSG_SPACE(sizeof fds)];
    struct iovec iov = {hdr, sizeof hdr};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    ssize_t sent;
    while ((sent = sendmsg(zygote_fd, &msg, MSG_NOSIGNAL)) == -1 && errno == EINTR)
        ;
    if (sent == -1 && (errno == EPIPE || errno == ECONNRESET)) {
        free(text); /* it died (a kill, a crash) before it could read anything */
        return EXEC_ZYGOTE_GONE;
    }
    int rc = sent == (ssize_t)sizeof hdr ? io_write_all(zygote_fd, text, len) : -1;
    free(text);
    struct zygote_record rec;
    while (rc == 0 && (rc = io_read_all(zygote_fd, &rec, sizeof rec)) == 0) {
        if (rec.type == ZYGOTE_FORKED)
            break;
        zygote_note_exit(rec.pid);
    }
    if (rc == -1) {
        *err = xstrdup("the zygote is gone");
        return -1;
    }
    if (rec.pid <= 0) {
        *err = xasprintf("fork: %s", strerror(-rec.pid));
        return -1;
    }
    return rec.pid;
}

int exec_zygote_exited(pid_t *pids, int max)
{
    int n = 0;
    while (zygote_nexited > 0 && n < max)
        pids[n++] = zygote_exited[--zygote_nexited];
    while (n < max) {
        struct pollfd p = {zygote_fd, POLLIN, 0};
        if (poll(&p, 1, 0) != 1)
            break;
        struct zygote_record rec;
        if (io_read_all(zygote_fd, &rec, sizeof rec) == -1)
            return n > 0 ? n : -1;
        if (rec.type == ZYGOTE_EXITED)
            pids[n++] = rec.pid;
    }
    return n;
}

/* ---- the zygote's side ------------------------------------------------------------------- */

/* Receives one request: its spec and its three descriptors. -1 at EOF or on a bad frame. */
static json_t *zygote_receive(int fds[3])
{
    unsigned char hdr[4];
    char control[CMSG_SPACE(3 * sizeof(int))];
    struct iovec iov = {hdr, sizeof hdr};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    ssize_t r;
    while ((r = recvmsg(ZYGOTE_SOCK_FD, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL)) == -1 &&
           errno == EINTR)
        ;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (r != (ssize_t)sizeof hdr || cm == NULL || cm->cmsg_type != SCM_RIGHTS ||
        cm->cmsg_len != CMSG_LEN(3 * sizeof(int)))
        return NULL;
    memcpy(fds, CMSG_DATA(cm), 3 * sizeof(int));
    uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    char *text = xmalloc(len + 1);
    json_t *spec = NULL;
    if (io_read_all(ZYGOTE_SOCK_FD, text, len) == 0)
        spec = json_loadb(text, len, 0, NULL);
    free(text);
    return spec;
}

static void zygote_reap(void)
{
    pid_t pid;
    while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
        struct zygote_record rec = {ZYGOTE_EXITED, pid};
        if (io_write_all(ZYGOTE_SOCK_FD, &rec, sizeof rec) == -1)
            _exit(0);
    }
}

static void zygote_fork_one(void)
{
    int fds[3];
    json_t *o = zygote_receive(fds);
    if (o == NULL)
        _exit(0); /* the daemon closed its end, or spoke nonsense */
    struct exec_spec spec;
    exec_spec_decode(o, &spec);
    pid_t pid = fork();
    if (pid == 0) {
        close(ZYGOTE_SOCK_FD);
        supervisor_run(&spec, fds[0], fds[1], fds[2]);
    }
    struct zygote_record rec = {ZYGOTE_FORKED, pid > 0 ? pid : -errno};
    exec_spec_release(&spec);
    json_decref(o);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    if (io_write_all(ZYGOTE_SOCK_FD, &rec, sizeof rec) == -1)
        _exit(0);
}

int exec_zygote_main(void)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    /* Started with every signal blocked and default dispositions: SIGCHLD is read from a
     * signalfd, and the rest stay blocked until a supervisor resets them for itself. */
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd == -1)
        _exit(1);
    for (;;) {
        struct pollfd p[2] = {{ZYGOTE_SOCK_FD, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, -1) == -1 && errno != EINTR)
            _exit(1);
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0)
                ;
            zygote_reap();
        }
        if (p[0].revents & (POLLIN | POLLHUP))
            zygote_fork_one();
    }
}
