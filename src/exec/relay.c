/* relay.c — the task's output, moved by its supervisor from two pipes into run_dir/stdout and
 * run_dir/stderr.
 *
 * Why not hand the task the files themselves: on a full disk the task's own write fails (Python
 * raises on print) and the task dies of the disk, not of itself. Through a pipe, the task only
 * ever writes to the supervisor, which keeps draining the pipe whatever the disk says: when a log
 * write fails (ENOSPC, EDQUOT, EFBIG, EIO) — or once the file system is full to drover (less than
 * half of exec_disk_reserve free, so that logs do not eat the room the daemon frees for its
 * commits) — that log stops growing, the rest is read and dropped, and the status says where the
 * log stops and why.
 *
 * Cost: splice(2) moves pipe pages into the file's page cache without a copy through user space;
 * a task that writes nothing costs two pipes and the EOF on each. Where splice is refused (a file
 * system without splice_write) the relay falls back to read and write through one buffer.
 *
 * Output written after the task's main process exited by processes it left behind (a daemon it
 * started) is still kept: if a pipe still has writers when the supervisor is done, a small forked
 * drainer holding nothing but the pipes and the logs carries on until they close.
 */
#include "exec/exec-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define RELAY_CHUNK (1 << 20) /* at most this much per splice; the pipe holds far less */

static char relay_buffer[65536]; /* the copy and drop paths; the supervisor has one thread */

void relay_init(struct relay *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 2; i++) {
        r->stream[i].pipe_fd = -1;
        r->stream[i].write_fd = -1;
        r->stream[i].log_fd = -1;
    }
}

/* The log is lost from here on: it keeps what it has, and the pipe is drained into nothing. */
static void relay_lose(struct relay *r, struct relay_stream *s, int error)
{
    s->full = true;
    if (r->error == 0)
        r->error = error != 0 ? error : EIO;
}

int relay_open(struct relay *r, int dir_fd)
{
    static const char *const names[2] = {"stdout", "stderr"};

    for (int i = 0; i < 2; i++) {
        struct relay_stream *s = &r->stream[i];
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) == -1)
            return errno;
        s->pipe_fd = fds[0];
        s->write_fd = fds[1];
        /* Only our end: the task's stays blocking, as a file or a terminal would be. */
        if (fcntl(s->pipe_fd, F_SETFL, O_NONBLOCK) == -1)
            return errno;
        /* Not O_APPEND: splice refuses such files. The supervisor is the only writer, so the
         * end of the file found once is where every write goes (a second try appends). */
        s->log_fd = openat(dir_fd, names[i],
                           O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        off_t end = s->log_fd != -1 ? lseek(s->log_fd, 0, SEEK_END) : -1;
        if (end == -1) {
            relay_lose(r, s, errno); /* the task runs all the same; its output is dropped */
            end = 0;
        }
        s->kept = end;
    }
    return 0;
}

void relay_task_fds(const struct relay *r, int *out, int *err)
{
    *out = r->stream[0].write_fd;
    *err = r->stream[1].write_fd;
}

void relay_started(struct relay *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->stream[i].write_fd != -1)
            close(r->stream[i].write_fd);
        r->stream[i].write_fd = -1;
    }
}

/* Writes all of buf to the log; on failure the log is lost where it stands. */
static void relay_copy(struct relay *r, struct relay_stream *s, const char *buf, size_t len)
{
    while (len > 0 && !s->full) {
        ssize_t n = write(s->log_fd, buf, len);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0) {
            relay_lose(r, s, n == -1 ? errno : EIO);
            break;
        }
        s->kept += n;
        buf += n;
        len -= (size_t)n;
    }
}

/* One move from the pipe: > 0 moved (or dropped), 0 at EOF, -1 with errno EAGAIN when empty. */
static ssize_t relay_once(struct relay *r, struct relay_stream *s)
{
    ssize_t n;

    if (!s->full && !s->copy) {
        n = splice(s->pipe_fd, NULL, s->log_fd, NULL, RELAY_CHUNK,
                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0)
            s->kept += n;
        if (n >= 0 || errno == EAGAIN || errno == EINTR)
            return n == -1 && errno == EINTR ? 1 : n;
        if (errno == EINVAL) {
            s->copy = true; /* no splice into this file system: copy */
            return 1;
        }
        relay_lose(r, s, errno);
        return 1;
    }
    n = read(s->pipe_fd, relay_buffer, sizeof relay_buffer);
    if (n == -1 && errno == EINTR)
        return 1;
    if (n > 0 && !s->full)
        relay_copy(r, s, relay_buffer, (size_t)n);
    return n;
}

/* After output was written: a file system full to drover stops the log here. One fstatvfs per
 * wake that moved output, none for a task that writes nothing. */
static void relay_check_room(struct relay *r, struct relay_stream *s)
{
    struct statvfs sv;
    if (fstatvfs(s->log_fd, &sv) == -1)
        return;
    uint64_t total = (uint64_t)sv.f_blocks * sv.f_frsize;
    if ((uint64_t)sv.f_bavail * sv.f_frsize < exec_disk_reserve(total) / 2)
        relay_lose(r, s, ENOSPC);
}

void relay_pump(struct relay *r, int i)
{
    struct relay_stream *s = &r->stream[i];
    bool dropped = false, wrote = false;

    while (s->pipe_fd != -1) {
        ssize_t n = relay_once(r, s);
        if (n > 0) {
            dropped |= s->full;
            wrote |= !s->full;
            continue;
        }
        if (n == 0 || errno != EAGAIN) { /* EOF: every writer is gone */
            close(s->pipe_fd);
            s->pipe_fd = -1;
        }
        break;
    }
    if (wrote)
        relay_check_room(r, s);
    /* Output dropped still shows as activity: the log's time moves on (an inode update, which a
     * full disk allows), so stall detection (daemon/telemetry.c) does not take a task that
     * writes to a full disk for a hung one. */
    if (dropped && s->log_fd != -1)
        futimens(s->log_fd, NULL);
}

void relay_poll_fds(const struct relay *r, struct pollfd *fds)
{
    for (int i = 0; i < 2; i++)
        fds[i] = (struct pollfd){.fd = r->stream[i].pipe_fd, .events = POLLIN};
}

void relay_result(const struct relay *r, struct exec_status *status)
{
    for (int i = 0; i < 2; i++)
        status->truncated_at[i] = r->stream[i].full ? r->stream[i].kept : -1;
    status->output_error = r->error;
}

/* The drainer: nothing but the pipes and the logs, until every writer is gone. */
static void __attribute__((noreturn)) relay_drainer(struct relay *r)
{
    struct pollfd fds[2];

    for (;;) {
        relay_poll_fds(r, fds);
        if (fds[0].fd == -1 && fds[1].fd == -1)
            _exit(0);
        if (poll(fds, 2, -1) == -1 && errno != EINTR)
            _exit(1);
        for (int i = 0; i < 2; i++)
            if (fds[i].revents != 0)
                relay_pump(r, i);
    }
}

void relay_finish(struct relay *r, const int *not_for_drainer, int n)
{
    relay_started(r); /* a task that never ran: our write ends would hold off the EOF */
    relay_pump(r, 0);
    relay_pump(r, 1);
    if (r->stream[0].pipe_fd != -1 || r->stream[1].pipe_fd != -1) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Most of all the lock: a flock belongs to the open file, so a copy held here would
             * keep the attempt "running" for as long as the leftovers live. */
            for (int i = 0; i < n; i++)
                if (not_for_drainer[i] != -1)
                    close(not_for_drainer[i]);
            relay_drainer(r);
        }
        /* No fork: the leftovers' later writes meet a closed pipe (EPIPE), as after a kill. */
    }
    for (int i = 0; i < 2; i++) {
        struct relay_stream *s = &r->stream[i];
        if (s->pipe_fd != -1)
            close(s->pipe_fd);
        if (s->log_fd != -1)
            close(s->log_fd);
        s->pipe_fd = s->log_fd = -1;
    }
}
