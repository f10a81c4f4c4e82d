/* The zygote: a small process, spawned once by the daemon (`drover __zygote`), that forks the
 * supervisors.
 *
 * Why: a supervisor forked from the daemon shares the daemon's pages copy-on-write, and every page
 * the daemon then writes costs a fault and a cross-CPU TLB shootdown; a supervisor exec'd afresh
 * costs an exec of this binary per attempt. A fork of the zygote costs neither: the zygote's few
 * pages are all it shares, and it never writes them while supervisors live. Measured in
 * docs/BENCHMARKS.md.
 *
 * Protocol on a socketpair (stream): daemon -> zygote, a 4-byte length, the spec (spawn.c's wire
 * form), and the lock, run_dir and ready-pipe descriptors as SCM_RIGHTS on the same sendmsg;
 * zygote -> daemon, 8-byte records {ZYGOTE_EXITED, pid} for each reaped supervisor. A request has
 * no answer on the socket: the supervisor's ready word carries its pid (exec.c), and a failed
 * fork writes its errno there instead; waiting for an answer here too cost the daemon a second
 * sleep per start (issue 13). The zygote does not even decode the spec: the supervisor does, in
 * its own pages, so that the zygote's heap stays as it was while supervisors share it. The
 * zygote exits when the daemon's end closes; supervisors it forked run on (they are the run
 * directory's, not the zygote's), and a restarted daemon re-adopts them.
 */
#include "exec/exec-internal.h"
#include "util/io.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
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

enum { ZYGOTE_EXITED = 2 };
enum { ZYGOTE_SOCK_FD = 3 };

struct zygote_record {
    int32_t type;
    int32_t pid;
};

static int zygote_fd = -1;          /* the daemon's end */
static pid_t zygote_pid = -1;
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
}

bool exec_zygote_running(void)
{
    return zygote_fd != -1;
}

int exec_zygote_fork(const struct exec_spec *spec, int dir_fd, int lock_fd, int ready_fd,
                     char **err)
{
    size_t size;
    char *text = exec_spec_encode(spec, &size);
    uint32_t len = (uint32_t)size;
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
    if (rc == -1) {
        /* Part of a request went: the zygote will read the rest as garbage and leave, and
         * the ready pipe says the supervisor never came. */
        *err = xstrdup("the zygote is gone");
        return -1;
    }
    return 0;
}

int exec_zygote_exited(pid_t *pids, int max)
{
    int n = 0;
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

/* Receives one request: its spec's bytes (*len of them) and its three descriptors. NULL at EOF
 * or on a bad frame. */
static char *zygote_receive(int fds[3], size_t *len)
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
    *len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    char *buf = xmalloc(*len + 1);
    if (io_read_all(ZYGOTE_SOCK_FD, buf, *len) == -1) {
        free(buf);
        return NULL;
    }
    return buf;
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
    size_t len;
    char *buf = zygote_receive(fds, &len);
    if (buf == NULL)
        _exit(0); /* the daemon closed its end, or spoke nonsense */
    pid_t pid = fork();
    if (pid == 0) {
        close(ZYGOTE_SOCK_FD);
        struct exec_spec spec;
        if (exec_spec_decode(buf, len, &spec) == -1)
            _exit(127); /* the ready pipe closes without a word */
        free(buf);
        supervisor_run(&spec, fds[0], fds[1], fds[2]);
    }
    if (pid == -1) {
        struct exec_ready word = {errno, 0};
        ssize_t w = write(fds[2], &word, sizeof word); /* the daemon reads why */
        (void)w;
    }
    free(buf);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
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
