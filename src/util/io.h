/* Whole reads and writes on blocking descriptors, retrying on EINTR and short transfers. */
#ifndef DROVER_IO_H
#define DROVER_IO_H
#include <stddef.h>

/* 0, or -1 with errno (ECONNRESET for an early end of input). */
int io_write_all(int fd, const void *data, size_t len);
/* The same with send(MSG_NOSIGNAL) on a socket: a peer that closed early is an error to report,
 * not a SIGPIPE that kills the caller silently. */
int io_send_all(int fd, const void *data, size_t len);
int io_read_all(int fd, void *data, size_t len);
/* Closes every descriptor from first up (close_range, else a walk of /proc/self/fd): for a
 * process about to exec something that must not hold its parent's descriptors. */
void io_close_from(int first);

#endif
