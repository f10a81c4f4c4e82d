/* disk.c — a full disk under DROVER_HOME: the ballast, refusing new work, and the way back.
 *
 * What must survive a full disk is what has already happened: attempts that end. Their statuses
 * are safe in their run directories (the supervisor reserves that space when it starts, exec/), but
 * the store must still commit their ends. So the daemon keeps a ballast, $DROVER_HOME/reserve, of
 * R = exec_disk_reserve() = min(8 MiB, a sixteenth of the file system) allocated at start, and
 * gives it up a quarter at a time to commits that would otherwise find no room. Supervisors stop
 * growing logs below R/2 free too (exec/relay.c), so what is given up goes to the commits.
 *
 * The mode, in a table (free = what statvfs says non-root users may still use):
 *   normal: free < R/2, a commit failed, the ballast could not be made, an attempt could not
 *           start for want of room                                -> full
 *   full:   core drains (no attempt starts; those running go on), submissions are refused with
 *           one line, commits that find free < R/8 release ballast first; every second the
 *           daemon retries what could not be committed, and once free >= 2R and nothing is
 *           left to commit it makes the ballast whole again                       -> normal
 * The user's own drain (a store setting) is what core returns to.
 */
#include "daemon/daemon.h"
#include "exec/exec.h"
#include "util/paths.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DISK_BLOCK 4096ULL

struct disk {
    char *path;        /* $DROVER_HOME/reserve */
    int fd;            /* the ballast; -1 if it could not be opened */
    uint64_t size;     /* R: what the ballast holds when whole */
    uint64_t held;     /* what it holds now */
    bool full;         /* refusing new work */
    struct event *timer;
};

/* What the file system under home still offers an unprivileged writer, or UINT64_MAX if unknown
 * (then it is not the disk that fails). *total: its size. */
static uint64_t disk_free(const struct daemon *d, uint64_t *total)
{
    struct statvfs sv;
    if (statvfs(d->home, &sv) == -1) {
        if (total)
            *total = 0;
        return UINT64_MAX;
    }
    if (total)
        *total = (uint64_t)sv.f_blocks * sv.f_frsize;
    return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Makes the ballast whole. Returns 0, or -1 (it then holds nothing). */
static int disk_fill(struct disk *k)
{
    int rc = k->fd == -1 ? EBADF : posix_fallocate(k->fd, 0, (off_t)k->size);
    if (rc == 0) {
        k->held = k->size;
        return 0;
    }
    if (k->fd != -1 && ftruncate(k->fd, 0) == -1) {
        /* a partial ballast is still a ballast */
    }
    k->held = 0;
    return -1;
}

/* Gives a quarter of the ballast back to the file system. Returns false if it held nothing. */
static bool disk_release(struct disk *k)
{
    if (k->held == 0)
        return false;
    uint64_t chunk = k->size / 4 > DISK_BLOCK ? k->size / 4 : DISK_BLOCK;
    k->held = k->held > chunk ? k->held - chunk : 0;
    if (ftruncate(k->fd, (off_t)k->held) == -1)
        k->held = 0; /* cannot shrink it: let it all go */
    if (k->held == 0 && ftruncate(k->fd, 0) == -1)
        return false;
    return true;
}

static void disk_enter(struct daemon *d, const char *why)
{
    struct disk *k = d->disk;
    core_set_drain(d->core, true);
    if (k->full)
        return;
    k->full = true;
    fprintf(stderr, "drover daemon: disk full under %s (%s): refusing new work until there is"
                    " room\n", d->home, why);
}

static void disk_leave(struct daemon *d)
{
    struct disk *k = d->disk;
    char *draining = store_setting(d->store, "draining");
    k->full = false;
    core_set_drain(d->core, draining != NULL && strcmp(draining, "1") == 0);
    free(draining);
    fprintf(stderr, "drover daemon: room again under %s: taking new work\n", d->home);
    daemon_kick(d);
}

/* Every second: notice a disk that fills, retry what could not be committed, and come back once
 * there is room. */
static void disk_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct daemon *d = arg;
    struct disk *k = d->disk;
    uint64_t free_bytes = disk_free(d, NULL);
    if (!k->full) {
        if (free_bytes < k->size / 2)
            disk_enter(d, "little space left");
        return;
    }
    core_set_drain(d->core, true); /* even if `drover undrain` came meanwhile */
    if (d->acts.n > 0 || d->nends > 0) {
        daemon_apply(d);
        if (d->acts.n > 0 || d->nends > 0)
            return;
    }
    if (free_bytes != UINT64_MAX && free_bytes < 2 * k->size)
        return;
    if (disk_fill(k) == 0)
        disk_leave(d);
}

void disk_start(struct daemon *d)
{
    struct disk *k = xcalloc(1, sizeof *k);
    uint64_t total;
    d->disk = k;
    disk_free(d, &total);
    k->size = exec_disk_reserve(total);
    k->path = paths_join(d->home, "reserve");
    k->fd = open(k->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (disk_fill(k) < 0)
        disk_enter(d, k->fd == -1 ? strerror(errno) : "no room for the ballast");
    k->timer = event_new(d->base, -1, EV_PERSIST, disk_on_timer, d);
    struct timeval second = {1, 0};
    event_add(k->timer, &second);
}

void disk_stop(struct daemon *d)
{
    struct disk *k = d->disk;
    if (k == NULL)
        return;
    if (k->timer)
        event_free(k->timer);
    if (k->fd != -1)
        close(k->fd);
    free(k->path);
    free(k);
    d->disk = NULL;
}

bool disk_is_full(const struct daemon *d)
{
    return d->disk != NULL && d->disk->full;
}

bool disk_can_commit(const struct daemon *d)
{
    return d->disk == NULL || !d->disk->full || d->disk->held > 0;
}

json_t *disk_refusal(struct daemon *d)
{
    struct disk *k = d->disk;
    if (k == NULL)
        return NULL;
    if (!k->full && disk_free(d, NULL) < k->size / 2)
        disk_enter(d, "little space left");
    if (!k->full)
        return NULL;
    return reply_error(1, "disk full under %s: refusing new work until there is room", d->home);
}

void disk_before_commit(struct daemon *d)
{
    struct disk *k = d->disk;
    if (k == NULL || k->held == 0)
        return;
    uint64_t free_bytes = disk_free(d, NULL);
    if (free_bytes >= k->size / 8)
        return;
    disk_enter(d, "little space left");
    while (free_bytes < k->size / 8 && disk_release(k))
        free_bytes = disk_free(d, NULL);
}

bool disk_commit_failed(struct daemon *d, int code)
{
    struct disk *k = d->disk;
    if (k == NULL || (code != SQLITE_FULL && code != SQLITE_IOERR))
        return false;
    disk_enter(d, code == SQLITE_FULL ? "the store is full" : "the store cannot write");
    return disk_release(k);
}

void disk_no_room(struct daemon *d)
{
    if (d->disk != NULL)
        disk_enter(d, "an attempt found no room to start");
}
