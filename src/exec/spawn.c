/* Starting the supervisor as a fresh process image: posix_spawn of this same binary in its
 * internal mode (`drover __supervise`), handed its spec as JSON on a pipe.
 *
 * Why not fork and run the supervisor in the copy: a forked supervisor shares the daemon's pages
 * copy-on-write for its whole life, and every page the daemon then writes costs a page fault and
 * a TLB shootdown across CPUs — on a virtual machine that made the daemon spend ~12 ms of system
 * time per task (bench/throughput.sh, docs/BENCHMARKS.md). posix_spawn uses vfork semantics: no
 * page tables are copied and the daemon's pages stay its own.
 */
#include "exec/exec-internal.h"
#include "util/io.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The descriptors the supervisor finds at start. */
enum { SPAWN_LOCK_FD = 3, SPAWN_DIR_FD = 4, SPAWN_READY_FD = 5, SPAWN_SPEC_FD = 6 };

/* The spec on the wire, to the zygote and to a spawned supervisor: the fixed fields, then the
 * strings, each a 32-bit length and its bytes (SPEC_NULL for a NULL one), in host order (both ends
 * are this binary). Binary, not JSON: printing and parsing a task's environment as JSON was a
 * tenth of the daemon's CPU per task and most of the zygote's (issue 13). */
enum { SPEC_MAGIC = 0x64727332 /* "drs2" */ };
#define SPEC_NULL UINT32_MAX

struct spec_head {
    uint32_t magic;
    int32_t attempt;
    int64_t task_id, timeout_ms, grace_ms, preempt_grace_ms;
    int32_t preempt_signal;
    uint64_t nofile;
    int32_t umask;     /* -1: the supervisor's */
    int32_t as_owner;
    uint32_t owner_uid;
    uint32_t argc, envc;
};

static size_t spec_str_size(const char *str)
{
    return sizeof(uint32_t) + (str != NULL ? strlen(str) : 0);
}

static char *spec_put_str(char *p, const char *str)
{
    uint32_t len = str != NULL ? (uint32_t)strlen(str) : SPEC_NULL;
    memcpy(p, &len, sizeof len);
    p += sizeof len;
    if (str != NULL) {
        memcpy(p, str, len);
        p += len;
    }
    return p;
}

char *exec_spec_encode(const struct exec_spec *spec, size_t *len)
{
    struct spec_head h = {
        .magic = SPEC_MAGIC, .attempt = spec->attempt, .task_id = spec->task_id,
        .timeout_ms = spec->timeout_ms, .grace_ms = spec->grace_ms, .nofile = spec->task_nofile,
        .preempt_grace_ms = spec->preempt_grace_ms, .preempt_signal = spec->preempt_signal,
        .umask = spec->set_umask ? (int32_t)(spec->task_umask & 0777) : -1,
        .as_owner = spec->as_owner, .owner_uid = (uint32_t)spec->owner_uid,
    };
    size_t size = sizeof h + spec_str_size(spec->workdir) + spec_str_size(spec->run_dir) +
                  spec_str_size(spec->make_dir) + spec_str_size(spec->as_owner ? spec->owner : NULL);
    for (; spec->argv && spec->argv[h.argc]; h.argc++)
        size += spec_str_size(spec->argv[h.argc]);
    for (; spec->env && spec->env[h.envc]; h.envc++)
        size += spec_str_size(spec->env[h.envc]);
    char *buf = xmalloc(size), *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    p = spec_put_str(p, spec->workdir);
    p = spec_put_str(p, spec->run_dir);
    p = spec_put_str(p, spec->make_dir);
    p = spec_put_str(p, spec->as_owner ? spec->owner : NULL);
    for (uint32_t i = 0; i < h.argc; i++)
        p = spec_put_str(p, spec->argv[i]);
    for (uint32_t i = 0; i < h.envc; i++)
        p = spec_put_str(p, spec->env[i]);
    *len = size;
    return buf;
}

/* One string of the wire at *p (within end): a malloc'd copy, or NULL for a NULL one; *bad set
 * when it runs past the end. */
static char *spec_get_str(const char **p, const char *end, bool *bad)
{
    uint32_t len;
    if (*bad || end - *p < (ptrdiff_t)sizeof len) {
        *bad = true;
        return NULL;
    }
    memcpy(&len, *p, sizeof len);
    *p += sizeof len;
    if (len == SPEC_NULL)
        return NULL;
    if ((size_t)(end - *p) < len) {
        *bad = true;
        return NULL;
    }
    char *str = xstrndup(*p, len);
    *p += len;
    return str;
}

static char **spec_get_strv(const char **p, const char *end, uint32_t n, bool *bad)
{
    /* Each string takes at least its length word: a count beyond that is a lie. */
    if ((size_t)(end - *p) / sizeof(uint32_t) < n) {
        *bad = true;
        return NULL;
    }
    char **v = xcalloc((size_t)n + 1, sizeof *v);
    for (uint32_t i = 0; i < n && !*bad; i++)
        if ((v[i] = spec_get_str(p, end, bad)) == NULL)
            *bad = true;
    return v;
}

int exec_spec_decode(const char *buf, size_t len, struct exec_spec *spec)
{
    struct spec_head h;
    memset(spec, 0, sizeof *spec);
    if (len < sizeof h)
        return -1;
    memcpy(&h, buf, sizeof h);
    if (h.magic != SPEC_MAGIC)
        return -1;
    const char *p = buf + sizeof h, *end = buf + len;
    bool bad = false;
    spec->task_id = h.task_id;
    spec->attempt = h.attempt;
    spec->timeout_ms = h.timeout_ms;
    spec->grace_ms = h.grace_ms;
    spec->preempt_grace_ms = h.preempt_grace_ms;
    spec->preempt_signal = h.preempt_signal;
    spec->task_nofile = h.nofile;
    spec->set_umask = h.umask >= 0;
    spec->task_umask = (mode_t)(h.umask & 0777);
    spec->as_owner = h.as_owner != 0;
    spec->owner_uid = (uid_t)h.owner_uid;
    spec->workdir = spec_get_str(&p, end, &bad);
    char *run_dir = spec_get_str(&p, end, &bad);
    spec->run_dir = run_dir != NULL ? run_dir : xstrdup(".");
    spec->make_dir = spec_get_str(&p, end, &bad);
    spec->owner = spec_get_str(&p, end, &bad);
    spec->argv = spec_get_strv(&p, end, h.argc, &bad);
    spec->env = spec_get_strv(&p, end, h.envc, &bad);
    if (bad || p != end || h.argc == 0 || spec->argv[0][0] == '\0') {
        exec_spec_release(spec);
        memset(spec, 0, sizeof *spec);
        return -1;
    }
    return 0;
}

/* A copy of fd at or above 10, close-on-exec, so that the dup2s below cannot clobber a source. */
static int spawn_lift(int fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

pid_t exec_spawn_supervisor(const struct exec_spec *spec, int dir_fd, int lock_fd,
                            int ready_fd, char **err)
{
    int pipefd[2], fds[4] = {-1, -1, -1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all, none;
    pid_t pid = -1;

    if (pipe2(pipefd, O_CLOEXEC) == -1) {
        *err = xasprintf("pipe: %s", strerror(errno));
        return -1;
    }
    const int src[4] = {lock_fd, dir_fd, ready_fd, pipefd[0]};
    const int dst[4] = {SPAWN_LOCK_FD, SPAWN_DIR_FD, SPAWN_READY_FD, SPAWN_SPEC_FD};
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 4; i++) {
        if ((fds[i] = spawn_lift(src[i])) == -1) {
            *err = xasprintf("fcntl: %s", strerror(errno));
            goto out;
        }
        posix_spawn_file_actions_adddup2(&fa, fds[i], dst[i]);
    }
    /* The supervisor starts with every signal blocked and default dispositions; it resets the
     * mask itself once its descriptors are settled. */
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&attr, &all);
    posix_spawnattr_setsigdefault(&attr, &all);
    char *const argv[] = {"drover", "__supervise", NULL};
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        *err = xasprintf("spawning the supervisor: %s", strerror(rc));
        pid = -1;
        goto out;
    }
    close(pipefd[0]);
    pipefd[0] = -1;
    size_t len;
    char *text = exec_spec_encode(spec, &len);
    if (io_write_all(pipefd[1], text, len) == -1) {
        /* The supervisor died before reading: the ready pipe will say so. */
    }
    free(text);
out:
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 4; i++)
        if (fds[i] != -1)
            close(fds[i]);
    if (pipefd[0] != -1)
        close(pipefd[0]);
    close(pipefd[1]);
    return pid;
}

/* The whole spec from its pipe, decoded; -1 if it is not one. */
static int spawn_read_spec(struct exec_spec *spec)
{
    size_t len = 0, cap = 16384;
    char *buf = xmalloc(cap);
    for (;;) {
        ssize_t r = read(SPAWN_SPEC_FD, buf + len, cap - len);
        if (r == -1 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap)
            buf = xrealloc(buf, cap *= 2);
    }
    close(SPAWN_SPEC_FD);
    int rc = exec_spec_decode(buf, len, spec);
    free(buf);
    return rc;
}

static void spawn_strv_free(char *const *v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free((void *)v);
}

void exec_spec_release(struct exec_spec *spec)
{
    spawn_strv_free(spec->argv);
    spawn_strv_free(spec->env);
    free((char *)spec->workdir);
    free((char *)spec->run_dir);
    free((char *)spec->make_dir);
    free((char *)spec->owner);
}

int exec_supervise_main(void)
{
    struct exec_spec spec;
    if (spawn_read_spec(&spec) == -1)
        _exit(127); /* exec_start sees the ready pipe close without a word */
    supervisor_run(&spec, SPAWN_LOCK_FD, SPAWN_DIR_FD, SPAWN_READY_FD);
}
