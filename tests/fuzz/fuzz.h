/* tests/fuzz/fuzz.h — what the harnesses share: the input as a file (for readers that take a
 * path), as a NUL-terminated string, and split in parts at NUL bytes. Nothing is written to the
 * file system: the file is a memfd, named by its /proc/self/fd path. */
#ifndef DROVER_FUZZ_H
#define DROVER_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/xalloc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A memfd whose contents the caller sets with fuzz_file_set. */
struct fuzz_file {
    int fd;
    char path[32]; /* /proc/self/fd/N: open() on it opens the memfd afresh, at offset 0 */
};

static inline void fuzz_file_open(struct fuzz_file *f, const char *name)
{
    f->fd = memfd_create(name, MFD_CLOEXEC);
    if (f->fd < 0)
        fatalx("fuzz: memfd_create failed");
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void fuzz_file_set(struct fuzz_file *f, const void *data, size_t size)
{
    if (ftruncate(f->fd, 0) < 0 || (size > 0 && pwrite(f->fd, data, size, 0) != (ssize_t)size))
        fatalx("fuzz: cannot write the memfd");
}

/* data[0..size) as a string (malloc'd); it ends at the first NUL byte if there is one. */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = xmalloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Splits a copy of data at NUL bytes into parts, at most max (what follows is ignored).
 * Returns the number of parts; part[i] point into *buf, which the caller frees. An input
 * without NUL is one part. */
static inline size_t fuzz_split(const uint8_t *data, size_t size, char **buf, char **part,
                                size_t max)
{
    size_t n = 0, start = 0;
    *buf = fuzz_string(data, size);
    for (size_t i = 0; i <= size && n < max; i++) {
        if (i == size || (*buf)[i] == '\0') {
            part[n++] = *buf + start;
            start = i + 1;
        }
    }
    return n;
}

/* The length of the first part (up to the first NUL, or all of it). */
static inline size_t fuzz_first_len(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    return nul ? (size_t)(nul - data) : size;
}

#endif
