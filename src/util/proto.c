#include "util/proto.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
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

int proto_send(int fd, const json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (text == NULL) {
        errno = EINVAL;
        return -1;
    }
    size_t len = strlen(text);
    unsigned char hdr[4] = {len >> 24, len >> 16, len >> 8, len};
    int rc = write_all(fd, hdr, 4) == 0 && write_all(fd, text, len) == 0 ? 0 : -1;
    free(text);
    return rc;
}

int proto_recv(int fd, json_t **msg, size_t max)
{
    unsigned char hdr[4];
    if (read_all(fd, hdr, 4) < 0)
        return -1;
    size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (len > max) {
        errno = EPROTO;
        return -1;
    }
    char *buf = xmalloc(len + 1);
    if (read_all(fd, buf, len) < 0) {
        free(buf);
        return -1;
    }
    json_error_t jerr;
    *msg = json_loadb(buf, len, 0, &jerr);
    free(buf);
    if (*msg == NULL) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}
