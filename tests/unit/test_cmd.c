/* daemon/cmd.c: external commands run from a real libevent loop. The test plays the daemon: a
 * SIGCHLD signal event reaps every child and hands it to cmd_reaped, and a 50 ms timer ticks all
 * along, so that a blocked loop shows as missing ticks. Nothing sleeps a fixed time: every wait
 * runs the loop until a condition holds, under a deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/cmd.h"

#define DEADLINE_MS 20000 /* generous: the test may run under valgrind */
#define TICK_MS 50

static struct event_base *base;
static struct event *sigchld, *tick;
static int ticks;
static int foreign_pids; /* reaped children that were no command's */

/* What a callback saw, copied (the result is only valid during the callback). */
struct got {
    int calls;
    int status;
    bool timed_out;
    char *out, *err, *error;
    size_t out_len, err_len;
    int64_t at_ms;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_sigchld(evutil_socket_t fd, short what, void *arg)
{
    pid_t pid;
    int st;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        if (!cmd_reaped(pid, st))
            foreign_pids++;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    ticks++;
}

static void record(struct got *g, const struct cmd_result *r)
{
    g->calls++;
    g->status = r->status;
    g->timed_out = r->timed_out;
    assert_int_equal(r->out[r->out_len], '\0');
    assert_int_equal(r->err[r->err_len], '\0');
    g->out = malloc(r->out_len + 1);
    memcpy(g->out, r->out, r->out_len + 1);
    g->out_len = r->out_len;
    g->err = strdup(r->err);
    g->err_len = r->err_len;
    g->error = r->error != NULL ? strdup(r->error) : NULL;
    g->at_ms = now_ms();
}

static void on_done(void *arg, const struct cmd_result *r)
{
    record(arg, r);
}

static void got_release(struct got *g)
{
    free(g->out);
    free(g->err);
    free(g->error);
    memset(g, 0, sizeof *g);
}

/* Runs the loop until *count reaches want; false at the deadline. */
static bool loop_until(const int *count, int want)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (*count < want && now_ms() < deadline)
        event_base_loop(base, EVLOOP_ONCE); /* the tick wakes it at least every 50 ms */
    return *count >= want;
}

static void start(char *const argv[], const struct cmd_opts *opts, struct got *g)
{
    static const struct cmd_opts none;
    char *err = NULL;
    int rc = cmd_start(base, argv, opts != NULL ? opts : &none, on_done, g, &err);
    if (rc != 0)
        fail_msg("cmd_start %s: %s", argv[0], err);
}

static void run(char *const argv[], const struct cmd_opts *opts, struct got *g)
{
    start(argv, opts, g);
    assert_true(loop_until(&g->calls, 1));
    assert_int_equal(g->calls, 1);
}

static int setup(void **state)
{
    base = event_base_new();
    sigchld = evsignal_new(base, SIGCHLD, on_sigchld, NULL);
    tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    const struct timeval period = {0, TICK_MS * 1000};
    event_add(sigchld, NULL);
    event_add(tick, &period);
    ticks = foreign_pids = 0;
    return 0;
}

static int teardown(void **state)
{
    cmd_abort_all();
    event_free(sigchld);
    event_free(tick);
    event_base_free(base);
    /* Whatever a test left is collected here, so that the next one starts with no child. */
    while (waitpid(-1, NULL, 0) > 0)
        ;
    return 0;
}

/* Every child of the test has been reaped, and every command is done. */
static void assert_nothing_left(void)
{
    assert_int_equal(cmd_running(), 0);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    assert_int_equal(foreign_pids, 0);
}

static void test_echo(void **state)
{
    struct got g = {0};
    char *const argv[] = {"echo", "hi", NULL};
    run(argv, NULL, &g);
    assert_true(WIFEXITED(g.status));
    assert_int_equal(WEXITSTATUS(g.status), 0);
    assert_false(g.timed_out);
    assert_string_equal(g.out, "hi\n");
    assert_int_equal(g.out_len, 3);
    assert_int_equal(g.err_len, 0);
    assert_null(g.error);
    assert_nothing_left();
    got_release(&g);
}

static void test_exit_code_and_stderr(void **state)
{
    struct got g = {0};
    char *const argv[] = {"sh", "-c", "echo e >&2; exit 3", NULL};
    run(argv, NULL, &g);
    assert_true(WIFEXITED(g.status));
    assert_int_equal(WEXITSTATUS(g.status), 3);
    assert_string_equal(g.err, "e\n");
    assert_int_equal(g.out_len, 0);
    assert_null(g.error);
    got_release(&g);
}

/* An exec failure is status -1 with a reason naming the command, and its child (which exited
 * 127) is consumed, not left to the daemon. */
static void test_missing_binary(void **state)
{
    struct got g = {0};
    char *const argv[] = {"drover-no-such-command", "x", NULL};
    run(argv, NULL, &g);
    assert_int_equal(g.status, -1);
    assert_non_null(g.error);
    assert_non_null(strstr(g.error, "drover-no-such-command"));
    /* EACCES when a directory of PATH cannot be searched (execvp's rule): so in root's PATH,
     * for anyone else */
    assert_true(strstr(g.error, strerror(ENOENT)) != NULL ||
                strstr(g.error, strerror(EACCES)) != NULL);
    assert_nothing_left();
    got_release(&g);
}

static void test_refused_at_start(void **state)
{
    char *err = NULL;
    char *const empty[] = {NULL};
    const struct cmd_opts opts = {0};
    assert_int_equal(cmd_start(base, empty, &opts, on_done, NULL, &err), -1);
    assert_non_null(err);
    free(err);
    assert_int_equal(cmd_running(), 0);
}

/* The time limit kills the group, and the loop went on meanwhile: the tick kept firing. */
static void test_timeout(void **state)
{
    struct got g = {0};
    char *const argv[] = {"sleep", "30", NULL};
    const struct cmd_opts opts = {.timeout_ms = 200};
    int64_t t0 = now_ms();
    start(argv, &opts, &g);
    assert_true(now_ms() - t0 < 1000); /* cmd_start itself returned at once */
    int before = ticks;
    assert_true(loop_until(&g.calls, 1));
    int64_t took = g.at_ms - t0;
    assert_true(g.timed_out);
    assert_true(WIFSIGNALED(g.status));
    assert_int_equal(WTERMSIG(g.status), SIGKILL);
    assert_true(took >= 190); /* libevent reads a coarse clock: a few ms early at most */
    assert_true(took < 10000);
    /* About took / 50 ticks; a blocked loop would have none. Lenient for a loaded machine. */
    assert_true(ticks - before >= 2);
    assert_true(ticks - before >= (int)(took / TICK_MS) / 2);
    assert_nothing_left();
    got_release(&g);
}

/* A grandchild that keeps stdout open: the command is done at its EOF when that comes first… */
static void test_grandchild_eof_first(void **state)
{
    struct got g = {0};
    char *const argv[] = {"sh", "-c", "(sleep 0.3; echo late) & echo early", NULL};
    run(argv, NULL, &g);
    assert_false(g.timed_out);
    assert_true(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0);
    assert_string_equal(g.out, "early\nlate\n");
    got_release(&g);
}

/* …and at the time limit otherwise, the group killed (the grandchild with it). */
static void test_grandchild_timeout_first(void **state)
{
    struct got g = {0};
    char path[] = "/tmp/test_cmd_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char *script = NULL;
    assert_true(asprintf(&script, "sleep 30 & echo $! > %s; exit 0", path) > 0);
    char *const argv[] = {"sh", "-c", script, NULL};
    const struct cmd_opts opts = {.timeout_ms = 300};
    run(argv, &opts, &g);
    assert_true(g.timed_out);
    assert_true(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0); /* sh itself exited */
    FILE *f = fopen(path, "r");
    long grandchild = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &grandchild), 1);
    fclose(f);
    unlink(path);
    free(script);
    /* Killed: gone, or a zombie waiting for a reaper that is not us. */
    int64_t deadline = now_ms() + DEADLINE_MS;
    char stat_path[64], buf[512], *state_char = NULL;
    snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", grandchild);
    for (;;) {
        f = fopen(stat_path, "r");
        if (f == NULL)
            break;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        state_char = strrchr(buf, ')');
        if (state_char != NULL && (state_char[2] == 'Z' || state_char[2] == 'X'))
            break;
        assert_true(now_ms() < deadline);
        event_base_loop(base, EVLOOP_ONCE);
    }
    assert_nothing_left();
    got_release(&g);
}

/* 3 MiB written, 1 MiB kept, the rest read and dropped: the child never blocks on the pipe. */
static void test_output_bounded(void **state)
{
    struct got g = {0};
    char *const argv[] = {"sh", "-c", "yes | head -c 3145728", NULL};
    const struct cmd_opts opts = {.max_output = 1 << 20};
    run(argv, &opts, &g);
    assert_false(g.timed_out);
    assert_true(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0);
    assert_int_equal(g.out_len, 1 << 20);
    assert_memory_equal(g.out, "y\ny\n", 4);
    assert_int_equal(g.out[(1 << 20) - 1], '\n');
    assert_int_equal(g.err_len, 0);
    got_release(&g);
}

static void test_twenty_at_once(void **state)
{
    enum { N = 20 };
    struct got g[N];
    char arg[N][16], *argv[N][3];
    int done = 0;
    memset(g, 0, sizeof g);
    for (int i = 0; i < N; i++) {
        snprintf(arg[i], sizeof arg[i], "%d", i);
        argv[i][0] = "echo";
        argv[i][1] = arg[i];
        argv[i][2] = NULL;
        start(argv[i], NULL, &g[i]);
    }
    assert_int_equal(cmd_running(), N);
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (done < N && now_ms() < deadline) {
        event_base_loop(base, EVLOOP_ONCE);
        done = 0;
        for (int i = 0; i < N; i++)
            done += g[i].calls;
    }
    for (int i = 0; i < N; i++) {
        char want[20];
        snprintf(want, sizeof want, "%d\n", i);
        assert_int_equal(g[i].calls, 1);
        assert_string_equal(g[i].out, want);
        assert_true(WIFEXITED(g[i].status) && WEXITSTATUS(g[i].status) == 0);
        got_release(&g[i]);
    }
    assert_nothing_left();
}

/* A callback may start the next command. */
struct chain {
    struct got first, second;
};

static void on_first(void *arg, const struct cmd_result *r)
{
    struct chain *c = arg;
    char *const argv[] = {"echo", "second", NULL};
    const struct cmd_opts opts = {0};
    char *err = NULL;
    record(&c->first, r);
    assert_int_equal(cmd_running(), 0); /* this one no longer counts */
    assert_int_equal(cmd_start(base, argv, &opts, on_done, &c->second, &err), 0);
    assert_int_equal(cmd_running(), 1);
}

static void test_callback_starts_another(void **state)
{
    struct chain c;
    char *const argv[] = {"echo", "first", NULL};
    const struct cmd_opts opts = {0};
    char *err = NULL;
    memset(&c, 0, sizeof c);
    assert_int_equal(cmd_start(base, argv, &opts, on_first, &c, &err), 0);
    assert_true(loop_until(&c.second.calls, 1));
    assert_int_equal(c.first.calls, 1);
    assert_string_equal(c.first.out, "first\n");
    assert_string_equal(c.second.out, "second\n");
    assert_nothing_left();
    got_release(&c.first);
    got_release(&c.second);
}

/* stdin is /dev/null and no descriptor of the daemon's reaches the command. */
static void test_descriptors(void **state)
{
    struct got g = {0};
    int fd = open("/dev/null", O_RDONLY);
    assert_int_equal(dup2(fd, 37), 37); /* not close-on-exec */
    close(fd);
    char *const argv[] = {"sh", "-c", "cat; ls /proc/$$/fd", NULL};
    run(argv, NULL, &g);
    close(37);
    assert_true(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0);
    assert_null(strstr(g.out, "37"));
    assert_non_null(strstr(g.out, "2\n"));
    got_release(&g);
}

/* The working directory is opts' (the daemon's when NULL); one that cannot be entered is a
 * failure to run, naming it. */
static void test_workdir(void **state)
{
    struct got g = {0};
    char *const argv[] = {"pwd", NULL};
    const struct cmd_opts in_tmp = {.workdir = "/tmp"};
    run(argv, &in_tmp, &g);
    assert_string_equal(g.out, "/tmp\n");
    got_release(&g);
    const struct cmd_opts missing = {.workdir = "/drover-no-such-dir"};
    run(argv, &missing, &g);
    assert_int_equal(g.status, -1);
    assert_non_null(strstr(g.error, "chdir /drover-no-such-dir"));
    assert_non_null(strstr(g.error, strerror(ENOENT)));
    assert_nothing_left();
    got_release(&g);
}

/* cmd_abort_all: no callback, nothing left running; the processes are killed. */
static void test_abort_all(void **state)
{
    enum { N = 3 };
    struct got g[N];
    char path[N][32], *script[N];
    pid_t pid[N];
    memset(g, 0, sizeof g);
    for (int i = 0; i < N; i++) {
        snprintf(path[i], sizeof path[i], "/tmp/test_cmd_XXXXXX");
        int fd = mkstemp(path[i]);
        assert_true(fd >= 0);
        close(fd);
        assert_true(asprintf(&script[i], "echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 30",
                             path[i], path[i], path[i]) > 0);
        unlink(path[i]);
        char *const argv[] = {"sh", "-c", script[i], NULL};
        start(argv, NULL, &g[i]);
    }
    /* Each has written its pid (the loop runs meanwhile). */
    for (int i = 0; i < N; i++) {
        int64_t deadline = now_ms() + DEADLINE_MS;
        FILE *f;
        while ((f = fopen(path[i], "r")) == NULL) {
            assert_true(now_ms() < deadline);
            event_base_loop(base, EVLOOP_ONCE);
        }
        long p = 0;
        assert_int_equal(fscanf(f, "%ld", &p), 1);
        fclose(f);
        unlink(path[i]);
        free(script[i]);
        pid[i] = (pid_t)p;
    }
    assert_int_equal(cmd_running(), N);
    cmd_abort_all();
    assert_int_equal(cmd_running(), 0);
    for (int i = 0; i < N; i++) {
        int st;
        assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), SIGKILL);
        assert_int_equal(kill(pid[i], 0), -1);
        assert_int_equal(errno, ESRCH);
    }
    /* The loop runs on: no callback comes. */
    int64_t until = now_ms() + 3 * TICK_MS;
    while (now_ms() < until)
        event_base_loop(base, EVLOOP_ONCE);
    for (int i = 0; i < N; i++)
        assert_int_equal(g[i].calls, 0);
    assert_nothing_left();
}

/* as_user: the command runs as that user, with its HOME/USER/LOGNAME. Root only. */
static void test_as_user(void **state)
{
    struct passwd *pw = getpwnam("nobody");
    if (geteuid() != 0 || pw == NULL)
        skip();
    struct got g = {0};
    char *const argv[] = {"sh", "-c", "id -u; echo $USER $LOGNAME; id -G", NULL};
    const struct cmd_opts opts = {.as_user = true, .uid = pw->pw_uid, .workdir = "/"};
    run(argv, &opts, &g);
    assert_true(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0);
    char want[128];
    snprintf(want, sizeof want, "%ld\nnobody nobody\n%ld\n", (long)pw->pw_uid,
             (long)pw->pw_gid);
    assert_string_equal(g.out, want); /* 65534 on Debian */
    assert_nothing_left();
    got_release(&g);
}

/* as_user for a uid no passwd entry has: status -1, and why. Root only. */
static void test_as_unknown_user(void **state)
{
    if (geteuid() != 0)
        skip();
    struct got g = {0};
    char *const argv[] = {"id", "-u", NULL};
    const struct cmd_opts opts = {.as_user = true, .uid = 3999999};
    if (getpwuid(opts.uid) != NULL)
        skip();
    run(argv, &opts, &g);
    assert_int_equal(g.status, -1);
    assert_non_null(g.error);
    assert_non_null(strstr(g.error, "3999999"));
    assert_non_null(strstr(g.error, "no such user"));
    assert_int_equal(g.out_len, 0);
    assert_nothing_left();
    got_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_code_and_stderr, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grandchild_eof_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grandchild_timeout_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_twenty_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callback_starts_another, setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_as_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_as_unknown_user, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
