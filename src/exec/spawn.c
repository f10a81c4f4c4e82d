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
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The descriptors the supervisor finds at start. */
enum { SPAWN_LOCK_FD = 3, SPAWN_DIR_FD = 4, SPAWN_READY_FD = 5, SPAWN_SPEC_FD = 6 };

static json_t *spawn_strv_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++) {
        json_t *s = json_stringn_nocheck(v[i], strlen(v[i]));
        json_array_append_new(a, s);
    }
    return a;
}

/* The spec as JSON text (the caller frees it). Strings are bytes: jansson's nocheck variants
 * carry what is not UTF-8 through. */
char *exec_spec_encode(const struct exec_spec *spec)
{
    json_t *o = json_pack("{s:I,s:i,s:o,s:o,s:s?,s:s,s:I,s:I,s:i,s:I}", "task_id",
                          (json_int_t)spec->task_id, "attempt", spec->attempt, "argv",
                          spawn_strv_json(spec->argv), "env", spawn_strv_json(spec->env),
                          "workdir", spec->workdir, "run_dir", spec->run_dir, "timeout_ms",
                          (json_int_t)spec->timeout_ms, "grace_ms", (json_int_t)spec->grace_ms,
                          "umask", spec->set_umask ? (int)spec->task_umask : -1, "nofile",
                          (json_int_t)spec->task_nofile);
    if (o == NULL)
        fatalx("spawn_encode: json_pack failed");
    if (spec->make_dir != NULL)
        json_object_set_new(o, "make_dir", json_stringn_nocheck(spec->make_dir,
                                                                strlen(spec->make_dir)));
    if (spec->as_owner) {
        json_object_set_new(o, "owner_uid", json_integer((json_int_t)spec->owner_uid));
        if (spec->owner != NULL)
            json_object_set_new(o, "owner", json_stringn_nocheck(spec->owner,
                                                                  strlen(spec->owner)));
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text == NULL)
        fatalx("spawn_encode: out of memory");
    return text;
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
    char *text = exec_spec_encode(spec);
    if (io_write_all(pipefd[1], text, strlen(text)) == -1) {
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

static char **spawn_strv(json_t *a)
{
    size_t n = json_array_size(a);
    char **v = xcalloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(a, i);
        v[i] = xstrndup(json_string_value(s), json_string_length(s));
    }
    return v;
}

/* The whole spec from its pipe (jansson's own fd reader reads a byte at a time). */
static json_t *spawn_read_spec(void)
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
    json_error_t jerr;
    json_t *o = json_loadb(buf, len, 0, &jerr);
    free(buf);
    return o;
}

void exec_spec_decode(json_t *o, struct exec_spec *spec)
{
    json_t *workdir = json_object_get(o, "workdir"), *run_dir = json_object_get(o, "run_dir");
    json_t *make_dir = json_object_get(o, "make_dir");
    json_int_t mask = json_integer_value(json_object_get(o, "umask"));
    *spec = (struct exec_spec){
        .task_id = json_integer_value(json_object_get(o, "task_id")),
        .attempt = (int)json_integer_value(json_object_get(o, "attempt")),
        .argv = spawn_strv(json_object_get(o, "argv")),
        .env = spawn_strv(json_object_get(o, "env")),
        .workdir = json_is_string(workdir) ? xstrdup(json_string_value(workdir)) : NULL,
        .run_dir = xstrdup(json_is_string(run_dir) ? json_string_value(run_dir) : "."),
        .make_dir = json_is_string(make_dir) ? xstrdup(json_string_value(make_dir)) : NULL,
        .timeout_ms = json_integer_value(json_object_get(o, "timeout_ms")),
        .grace_ms = json_integer_value(json_object_get(o, "grace_ms")),
        .set_umask = mask >= 0 && json_is_integer(json_object_get(o, "umask")),
        .task_umask = (mode_t)(mask & 0777),
        .task_nofile = (uint64_t)json_integer_value(json_object_get(o, "nofile")),
    };
    json_t *owner_uid = json_object_get(o, "owner_uid"), *owner = json_object_get(o, "owner");
    if (json_is_integer(owner_uid)) {
        spec->as_owner = true;
        spec->owner_uid = (uid_t)json_integer_value(owner_uid);
        spec->owner = json_is_string(owner) ? xstrdup(json_string_value(owner)) : NULL;
    }
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
    json_t *o = spawn_read_spec();
    if (o == NULL || !json_is_array(json_object_get(o, "argv")) || json_array_size(json_object_get(o, "argv")) == 0)
        _exit(127); /* exec_start sees the ready pipe close without a word */
    struct exec_spec spec;
    exec_spec_decode(o, &spec);
    json_decref(o);
    supervisor_run(&spec, SPAWN_LOCK_FD, SPAWN_DIR_FD, SPAWN_READY_FD);
}
