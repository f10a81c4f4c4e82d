/* failio: an LD_PRELOAD shim that makes one chosen write to the store fail, for fault tests.
 *
 * It interposes libc's write-type calls — write, writev, pwrite, pwrite64, pwritev, pwritev64,
 * fsync, fdatasync, ftruncate, ftruncate64, fallocate, fallocate64, posix_fallocate,
 * posix_fallocate64, sync_file_range — and, in the chosen process only, counts those made on a
 * file whose name starts with FAILIO_MATCH. The descriptor's file is resolved on each call
 * through /proc/self/fd/N, so no open() or close() has to be tracked and a reused descriptor is
 * never misattributed. SQLite, even linked statically into drover, reaches these through the
 * dynamic libc, so the shim sees every write it makes to drover.db, -wal and -shm (the -shm
 * file's contents change through mmap, which no shim can see; its size changes are counted).
 *
 * Environment (read once, at load):
 *   FAILIO_STATE  a file shared by every process of a run, created if absent: the counters live
 *                 there (mmap'ed), so a daemon restarted during the run continues the count, and
 *                 the test reads them afterwards (see struct failio_state). Without it the shim
 *                 does nothing.
 *   FAILIO_N      the 1-based number of the counted call that fails; 0 or unset: count only.
 *   FAILIO_MODE   "once" (default): only call N fails; "from": N and every later call fail.
 *   FAILIO_ERRNO  "EIO" (default) or "ENOSPC".
 *   FAILIO_MATCH  the file-name prefix that is counted (default "drover.db").
 *   FAILIO_ARGV1  only a process whose argv[1] is this counts (default "daemon": the drover
 *                 daemon, not the CLI, the zygote, supervisors or tasks that inherit the shim).
 *   FAILIO_TRACE  optional: a file to which each counted call appends "N op file fd result".
 *
 * A failed call does nothing and returns -1 with errno set: the model is a device that refuses
 * the write (EIO) or a file system with no room left (ENOSPC).
 *
 * The state file is struct failio_state in host byte order; tests/e2e/t-fault-store.sh reads it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

struct failio_state {
    uint64_t magic;     /* FAILIO_MAGIC once initialised */
    uint64_t calls;     /* counted calls so far, across every process of the run */
    uint64_t injected;  /* calls that were failed */
    uint64_t first_n;   /* the number of the first failed call (0: none yet) */
    int32_t first_pid;  /* the process that made it */
    int32_t first_errno;
    char first_op[24];  /* e.g. "pwrite64" */
    char first_file[64]; /* basename, e.g. "drover.db-wal" */
};

#define FAILIO_MAGIC 0x6f696c69616675ULL

static struct failio_state *state;
static uint64_t fail_n;
static int fail_from;
static int fail_errno = EIO;
static char match[64] = "drover.db";
static int trace_fd = -1;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fallocate64)(int, int, off64_t, off64_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_posix_fallocate64)(int, off64_t, off64_t);
static int (*real_sync_file_range)(int, off64_t, off64_t, unsigned int);

/* Resolves libc's own definition; a missing one is a broken libc, not a test result. */
static void *failio_next(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (fn == NULL) {
        fprintf(stderr, "failio: libc has no %s\n", name);
        abort();
    }
    return fn;
}

/* Looks up every real function; done at load, or at the first call if that comes earlier. */
static void failio_resolve(void)
{
    real_write = failio_next("write");
    real_writev = failio_next("writev");
    real_pwrite = failio_next("pwrite");
    real_pwrite64 = failio_next("pwrite64");
    real_pwritev = failio_next("pwritev");
    real_pwritev64 = failio_next("pwritev64");
    real_fsync = failio_next("fsync");
    real_fdatasync = failio_next("fdatasync");
    real_ftruncate = failio_next("ftruncate");
    real_ftruncate64 = failio_next("ftruncate64");
    real_fallocate = failio_next("fallocate");
    real_fallocate64 = failio_next("fallocate64");
    real_posix_fallocate = failio_next("posix_fallocate");
    real_posix_fallocate64 = failio_next("posix_fallocate64");
    real_sync_file_range = failio_next("sync_file_range");
}

#define NEXT(name) (real_##name ? real_##name : (failio_resolve(), real_##name))

/* Whether this process is the one the test aims at: argv[1] from /proc/self/cmdline. */
static int failio_is_target(const char *want)
{
    char buf[512];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    size_t first = strlen(buf) + 1;
    return first < (size_t)n && strcmp(buf + first, want) == 0;
}

static int failio_parse_errno(const char *s)
{
    if (s == NULL || strcmp(s, "EIO") == 0)
        return EIO;
    if (strcmp(s, "ENOSPC") == 0)
        return ENOSPC;
    return atoi(s) > 0 ? atoi(s) : EIO;
}

__attribute__((constructor)) static void failio_init(void)
{
    failio_resolve();
    const char *path = getenv("FAILIO_STATE");
    const char *argv1 = getenv("FAILIO_ARGV1");
    if (path == NULL || !failio_is_target(argv1 ? argv1 : "daemon"))
        return;
    const char *s = getenv("FAILIO_N");
    fail_n = s ? strtoull(s, NULL, 10) : 0;
    s = getenv("FAILIO_MODE");
    fail_from = s != NULL && strcmp(s, "from") == 0;
    fail_errno = failio_parse_errno(getenv("FAILIO_ERRNO"));
    s = getenv("FAILIO_MATCH");
    if (s != NULL && *s)
        snprintf(match, sizeof match, "%s", s);
    s = getenv("FAILIO_TRACE");
    if (s != NULL && *s)
        trace_fd = open(s, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size < (off_t)sizeof *state &&
        NEXT(ftruncate)(fd, sizeof *state) < 0) {
        close(fd);
        return;
    }
    void *map = mmap(NULL, sizeof *state, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    state = map;
    state->magic = FAILIO_MAGIC;
}

/* The basename of fd's file if it is one the shim counts, else NULL. */
static const char *failio_file(int fd, char *buf, size_t len)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, len - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    const char *base = strrchr(buf, '/');
    base = base ? base + 1 : buf;
    return strncmp(base, match, strlen(match)) == 0 ? base : NULL;
}

static void failio_trace(uint64_t n, const char *op, const char *file, int fd, int failed)
{
    char line[192];
    int len = snprintf(line, sizeof line, "%llu %s %.120s %d %s\n", (unsigned long long)n, op, file,
                       fd, failed ? "FAILED" : "ok");
    if (len > 0 && NEXT(write)(trace_fd, line, (size_t)len) < 0) {
        /* a lost trace line only makes the trace shorter */
    }
}

/* Counts a write-type call on fd; returns nonzero (errno set) if this one must fail. */
static int failio_check(int fd, const char *op)
{
    char buf[512];
    const char *file;
    if (state == NULL || (file = failio_file(fd, buf, sizeof buf)) == NULL)
        return 0;
    uint64_t n = __atomic_add_fetch(&state->calls, 1, __ATOMIC_SEQ_CST);
    int failed = fail_n > 0 && (n == fail_n || (fail_from && n > fail_n));
    if (failed) {
        uint64_t zero = 0;
        if (__atomic_compare_exchange_n(&state->first_n, &zero, n, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            state->first_pid = (int32_t)getpid();
            state->first_errno = fail_errno;
            snprintf(state->first_op, sizeof state->first_op, "%.20s", op);
            snprintf(state->first_file, sizeof state->first_file, "%.60s", file);
        }
        __atomic_add_fetch(&state->injected, 1, __ATOMIC_SEQ_CST);
    }
    if (trace_fd >= 0)
        failio_trace(n, op, file, fd, failed);
    if (failed)
        errno = fail_errno;
    return failed;
}

ssize_t write(int fd, const void *buf, size_t len)
{
    return failio_check(fd, "write") ? -1 : NEXT(write)(fd, buf, len);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    return failio_check(fd, "writev") ? -1 : NEXT(writev)(fd, iov, n);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    return failio_check(fd, "pwrite") ? -1 : NEXT(pwrite)(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
    return failio_check(fd, "pwrite64") ? -1 : NEXT(pwrite64)(fd, buf, len, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    return failio_check(fd, "pwritev") ? -1 : NEXT(pwritev)(fd, iov, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off)
{
    return failio_check(fd, "pwritev64") ? -1 : NEXT(pwritev64)(fd, iov, n, off);
}

int fsync(int fd)
{
    return failio_check(fd, "fsync") ? -1 : NEXT(fsync)(fd);
}

int fdatasync(int fd)
{
    return failio_check(fd, "fdatasync") ? -1 : NEXT(fdatasync)(fd);
}

int ftruncate(int fd, off_t len)
{
    return failio_check(fd, "ftruncate") ? -1 : NEXT(ftruncate)(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
    return failio_check(fd, "ftruncate64") ? -1 : NEXT(ftruncate64)(fd, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    return failio_check(fd, "fallocate") ? -1 : NEXT(fallocate)(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
    return failio_check(fd, "fallocate64") ? -1 : NEXT(fallocate64)(fd, mode, off, len);
}

/* posix_fallocate reports its error as the return value, not in errno. */
int posix_fallocate(int fd, off_t off, off_t len)
{
    return failio_check(fd, "posix_fallocate") ? fail_errno
                                               : NEXT(posix_fallocate)(fd, off, len);
}

int posix_fallocate64(int fd, off64_t off, off64_t len)
{
    return failio_check(fd, "posix_fallocate64") ? fail_errno
                                                 : NEXT(posix_fallocate64)(fd, off, len);
}

int sync_file_range(int fd, off64_t off, off64_t len, unsigned int flags)
{
    return failio_check(fd, "sync_file_range") ? -1
                                               : NEXT(sync_file_range)(fd, off, len, flags);
}
