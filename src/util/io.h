/* Whole reads and writes on blocking descriptors, retrying on EINTR and short transfers. */
#ifndef DROVER_IO_H
#define DROVER_IO_H
#include <stddef.h>

/* 0, or -1 with errno (ECONNRESET for an early end of input). */
int io_write_all(int fd, const void *data, size_t len);
int io_read_all(int fd, void *data, size_t len);

#endif
