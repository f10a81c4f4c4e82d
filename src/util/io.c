#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* write(), or send() with flags when flags is not 0; restarts on EINTR and short writes. */
static int io_put_all(int fd, const void *data, size_t len, int flags)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = flags ? send(fd, p, len, flags) : write(fd, p, len);
        if (w == -1 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int io_write_all(int fd, const void *data, size_t len)
{
    return io_put_all(fd, data, len, 0);
}

int io_send_all(int fd, const void *data, size_t len)
{
    return io_put_all(fd, data, len, MSG_NOSIGNAL);
}

int io_read_all(int fd, void *data, size_t len)
{
    char *p = data;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r == -1 && errno == EINTR)
            continue;
        if (r == 0)
            errno = ECONNRESET;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

void io_close_from(int first)
{
    if (close_range((unsigned)first, ~0U, 0) == 0)
        return;
    DIR *dir = opendir("/proc/self/fd"); /* a kernel older than 5.9 */
    if (dir == NULL) {
        for (long fd = first; fd < sysconf(_SC_OPEN_MAX); fd++)
            close((int)fd);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        int fd = atoi(entry->d_name);
        if (fd >= first && fd != dirfd(dir))
            close(fd);
    }
    closedir(dir);
}
