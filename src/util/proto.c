#include "util/proto.h"
#include "util/io.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int proto_send(int fd, const json_t *msg, size_t *size)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (text == NULL) {
        errno = EINVAL;
        return -1;
    }
    size_t len = strlen(text);
    if (size != NULL)
        *size = len;
    if (len > PROTO_MAX_REQUEST) {
        free(text);
        errno = EMSGSIZE;
        return -1;
    }
    char hdr[4] = {(char)(len >> 24), (char)(len >> 16), (char)(len >> 8), (char)len};
    int rc = io_send_all(fd, hdr, 4) == 0 && io_send_all(fd, text, len) == 0 ? 0 : -1;
    free(text);
    return rc;
}

int proto_recv(int fd, json_t **msg, size_t max)
{
    unsigned char hdr[4];
    if (io_read_all(fd, hdr, 4) < 0)
        return -1;
    size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (len > max) {
        errno = EPROTO;
        return -1;
    }
    char *buf = xmalloc(len + 1);
    if (io_read_all(fd, buf, len) < 0) {
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
