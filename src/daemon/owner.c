/* owner.c — the daemon's side of running tasks as their owners (see owner.h).
 *
 * Everything the daemon creates for an owner is created through a descriptor of a directory the
 * daemon made and owns (mkdirat, openat with O_NOFOLLOW), and checked after opening (fstat: the
 * kind and owner expected): a link the owner planted is refused, never followed, so the owner
 * cannot make root create, chown or write anything elsewhere.
 */
#include "daemon/owner.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int daemon_owner_can_enter(const char *user, uid_t uid, gid_t gid, const char *dir, char **why)
{
    const char *who = user != NULL ? user : "the submitter";
    int wstatus;

    *why = NULL;
    if (uid == geteuid())
        return 1; /* the daemon's own tasks: entered as today, at start */
    /* A forked child, not vfork: initgroups may go through NSS, which allocates. */
    pid_t pid = fork();
    if (pid == -1) {
        *why = xasprintf("cannot check %s's access to %s: fork: %s", who, dir, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int rc = user != NULL ? initgroups(user, gid) : setgroups(1, &gid);
        if (rc == -1 || setgid(gid) == -1 || setuid(uid) == -1)
            _exit(255);
        _exit(chdir(dir) == 0 ? 0 : errno & 0xff);
    }
    while (waitpid(pid, &wstatus, 0) == -1)
        if (errno != EINTR) {
            *why = xasprintf("cannot check %s's access to %s: waitpid: %s", who, dir,
                             strerror(errno));
            return -1;
        }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) == 255) {
        *why = xasprintf("cannot check %s's access to %s: cannot take uid %ld", who, dir,
                         (long)uid);
        return -1;
    }
    if (WEXITSTATUS(wstatus) == 0)
        return 1;
    *why = xasprintf("%s cannot enter %s: %s", who, dir, strerror(WEXITSTATUS(wstatus)));
    return 0;
}

/* Opens name under parent_fd as a directory the daemon owns, making it (mode) if missing, and
 * gives it mode. The descriptor, or -1 with errno (ELOOP: a link; EPERM: not the daemon's). */
static int owner_daemon_dir(int parent_fd, const char *name, mode_t mode)
{
    struct stat st;

    if (mkdirat(parent_fd, name, mode) == -1 && errno != EEXIST)
        return -1;
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd == -1)
        return -1;
    int rc = fstat(fd, &st);
    if (rc == 0 && st.st_uid != geteuid())
        rc = (errno = EPERM, -1);
    else if (rc == 0 && (st.st_mode & 07777) != mode)
        rc = fchmod(fd, mode);
    if (rc == -1) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

/* checkpoints/TASK: the owner's, 0700 when made here. One the daemon made before (a per-user
 * daemon's, or a failed start's) is handed over; one of anybody else's is refused. */
static int owner_checkpoint_dir(int parent_fd, const char *name, uid_t uid, gid_t gid)
{
    struct stat st;

    if (mkdirat(parent_fd, name, 0700) == 0 &&
        fchownat(parent_fd, name, uid, gid, AT_SYMLINK_NOFOLLOW) == -1)
        return -1;
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd == -1)
        return -1;
    int rc = fstat(fd, &st);
    if (rc == 0 && st.st_uid != uid)
        rc = st.st_uid == geteuid() ? fchown(fd, uid, gid) : (errno = EPERM, -1);
    int error = errno;
    close(fd);
    errno = error;
    return rc;
}

/* metrics/NAME: a regular file of the owner's with one link, which the task appends to and the
 * daemon reads. */
static int owner_metrics_file(int parent_fd, const char *name, uid_t uid, gid_t gid)
{
    struct stat st;
    int fd = openat(parent_fd, name,
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd == -1)
        return -1;
    int rc = fstat(fd, &st);
    if (rc == 0 && (!S_ISREG(st.st_mode) || st.st_nlink != 1))
        rc = (errno = EPERM, -1);
    else if (rc == 0 && st.st_uid != uid)
        rc = fchown(fd, uid, gid);
    int error = errno;
    close(fd);
    errno = error;
    return rc;
}

int daemon_owner_prepare(const char *home, int64_t task, uid_t uid, char **why)
{
    struct passwd pwbuf, *pw = NULL;
    char buf[16384], name[32], what[64] = "";
    int fds[5] = {-1, -1, -1, -1, -1}, rc = -1;
    enum { HOME, RUNS, CKPTS, METRICS, RUN };
    struct stat st;

    *why = NULL;
    int lookup = getpwuid_r(uid, &pwbuf, buf, sizeof buf, &pw);
    if (pw == NULL) {
        errno = lookup != 0 ? lookup : ENOENT;
        *why = xasprintf("the owner, uid %ld: %s", (long)uid,
                         lookup != 0 ? strerror(lookup) : "no such user");
        return -1;
    }
    /* The state directory must let owners through to their checkpoints, metrics and logs;
     * listing it stays the daemon's alone. */
    if ((fds[HOME] = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
        fstat(fds[HOME], &st) == -1 ||
        ((st.st_mode & 0011) != 0011 && fchmod(fds[HOME], (st.st_mode & 07777) | 0011) == -1))
        goto out;
    snprintf(what, sizeof what, "/runs");
    if ((fds[RUNS] = owner_daemon_dir(fds[HOME], "runs", 0711)) == -1)
        goto out;
    snprintf(what, sizeof what, "/checkpoints");
    if ((fds[CKPTS] = owner_daemon_dir(fds[HOME], "checkpoints", 0711)) == -1)
        goto out;
    snprintf(what, sizeof what, "/metrics");
    if ((fds[METRICS] = owner_daemon_dir(fds[HOME], "metrics", 0711)) == -1)
        goto out;
    snprintf(name, sizeof name, "%lld", (long long)task);
    snprintf(what, sizeof what, "/runs/%s", name);
    if ((fds[RUN] = owner_daemon_dir(fds[RUNS], name, 0711)) == -1)
        goto out;
    snprintf(what, sizeof what, "/checkpoints/%s", name);
    if (owner_checkpoint_dir(fds[CKPTS], name, pw->pw_uid, pw->pw_gid) == -1)
        goto out;
    snprintf(name, sizeof name, "%lld.jsonl", (long long)task);
    snprintf(what, sizeof what, "/metrics/%s", name);
    if (owner_metrics_file(fds[METRICS], name, pw->pw_uid, pw->pw_gid) == -1)
        goto out;
    rc = 0;
out:
    if (rc == -1) {
        int error = errno;
        *why = xasprintf("%s%s: %s", home, what,
                         error == ELOOP ? "a symbolic link, refused" : strerror(error));
        errno = error;
    }
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] != -1)
            close(fds[i]);
    return rc;
}
