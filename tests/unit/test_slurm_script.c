/* util/slurm-script.c: the Slurm batch script (docs/SLURM.md, "The batch script"). Each test
 * writes a script, runs it with /bin/sh in a temporary directory (no Slurm), and signals it the
 * way Slurm would: the task's environment and words byte for byte, its working directory, exit
 * codes and signals, the forwarded SIGUSR1 and SIGTERM, and the markers. Every wait polls for a
 * condition under a deadline. DROVER_TEST_SH=bash runs the scripts with another shell. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/slurm-script.h"
#include "util/xalloc.h"

#define DEADLINE_MS 10000

struct fixture {
    char dir[64];     /* the temporary directory: job.sh, out, err, and the two below */
    char *run_dir;    /* DIR/run */
    char *work;       /* DIR/work */
    pid_t script;     /* the running script, or 0 once reaped */
    int status;       /* its wait status */
};

static char *fx_path(const struct fixture *fx, const char *name)
{
    return xasprintf("%s/%s", fx->dir, name);
}

static int fx_setup(void **state)
{
    struct fixture *fx = xcalloc(1, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/drover-script-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    fx->run_dir = fx_path(fx, "run");
    fx->work = fx_path(fx, "work");
    assert_int_equal(mkdir(fx->run_dir, 0700), 0);
    assert_int_equal(mkdir(fx->work, 0700), 0);
    *state = fx;
    return 0;
}

static int fx_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int fx_teardown(void **state)
{
    struct fixture *fx = *state;
    if (fx->script > 0) {
        kill(-fx->script, SIGKILL);
        waitpid(fx->script, NULL, 0);
    }
    nftw(fx->dir, fx_remove, 16, FTW_DEPTH | FTW_PHYS);
    free(fx->run_dir);
    free(fx->work);
    free(fx);
    return 0;
}

static void pause_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Polls (every 5 ms, up to DEADLINE_MS) for path to exist. */
static void wait_file(const char *path)
{
    for (int waited = 0; !exists(path); waited += 5) {
        if (waited >= DEADLINE_MS)
            fail_msg("%s did not appear", path);
        pause_ms(5);
    }
}

/* The whole of path (NUL bytes included; *len is its length), NUL-terminated, malloc'd. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t size = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        text = xrealloc(text, size + n + 1);
        memcpy(text + size, chunk, n);
        size += n;
    }
    fclose(f);
    text = xrealloc(text, size + 1);
    text[size] = '\0';
    if (len != NULL)
        *len = size;
    return text;
}

static void expect_file(const char *path, const char *text)
{
    char *got = slurp(path, NULL);
    assert_string_equal(got, text);
    free(got);
}

static char *run_file(const struct fixture *fx, const char *name)
{
    return xasprintf("%s/%s", fx->run_dir, name);
}

static bool run_has(const struct fixture *fx, const char *name)
{
    char *path = run_file(fx, name);
    bool has = exists(path);
    free(path);
    return has;
}

/* Writes the script for argv/env (in fx's directories) and starts it with /bin/sh, in its own
 * process group, stdout and stderr to DIR/out and DIR/err, with parent_env ("K=V", NULL-ended)
 * added to the environment it is started with (Slurm's part of the task's environment). */
static void fx_start(struct fixture *fx, char *const *argv, char *const *env,
                     char *const *parent_env)
{
    struct slurm_script s = {.task_id = 7, .attempt = 2, .argv = argv, .env = env,
                             .workdir = fx->work, .run_dir = fx->run_dir};
    char *err = NULL;
    char *text = slurm_script_text(&s, &err);
    if (text == NULL)
        fail_msg("refused: %s", err);
    assert_null(err);
    char *job = fx_path(fx, "job.sh"), *out = fx_path(fx, "out"), *errf = fx_path(fx, "err");
    FILE *f = fopen(job, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    free(text);
    const char *shell = getenv("DROVER_TEST_SH") != NULL ? getenv("DROVER_TEST_SH") : "/bin/sh";

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* As Slurm starts a batch script: default dispositions, nothing blocked, no core. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        setpgid(0, 0);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        for (char *const *p = parent_env; p != NULL && *p != NULL; p++)
            putenv(*p);
        execl(shell, shell, job, (char *)NULL);
        _exit(126);
    }
    setpgid(pid, pid); /* either side may get there first */
    fx->script = pid;
    free(job);
    free(out);
    free(errf);
}

/* Waits (polling, under the deadline) for the script to end; returns its wait status. */
static int fx_finish(struct fixture *fx)
{
    for (int waited = 0;; waited += 5) {
        pid_t rc = waitpid(fx->script, &fx->status, WNOHANG);
        assert_true(rc >= 0);
        if (rc == fx->script)
            break;
        if (waited >= DEADLINE_MS)
            fail_msg("the script did not end");
        pause_ms(5);
    }
    fx->script = 0;
    return fx->status;
}

static void expect_exit(int status, int code)
{
    if (!WIFEXITED(status))
        fail_msg("expected exit %d, got wait status %#x", code, status);
    assert_int_equal(WEXITSTATUS(status), code);
}

static void expect_signal(int status, int sig)
{
    if (!WIFSIGNALED(status))
        fail_msg("expected death by signal %d, got wait status %#x", sig, status);
    assert_int_equal(WTERMSIG(status), sig);
}

/* Runs `sh -c CODE task ARGS…` as the task to its end; returns the script's wait status. */
static int run_sh(struct fixture *fx, const char *code, char *const *env)
{
    char *argv[] = {"/bin/sh", "-c", (char *)code, "task", fx->dir, NULL};
    fx_start(fx, argv, env, NULL);
    return fx_finish(fx);
}

/* Values and keys that a shell would read if any of it reached one unquoted. */
static void test_env_is_byte_exact(void **state)
{
    struct fixture *fx = *state;
    char *env[] = {"Q1=it's", "Q2=say \"hi\"", "Q3=$HOME", "Q4=`id`", "Q5=line\nbreak",
                   "Q6=0.1,0.01", "Q7= two  spaces ", "A-B=a key sh cannot name",
                   "Q8=$(id) \\ ;|&<>*? '' \"", "Q9=", "Q10=a=b", "-x=dash first", NULL};
    char *argv[] = {"/usr/bin/env", "-0", NULL};
    fx_start(fx, argv, env, NULL);
    expect_exit(fx_finish(fx), 0);
    char *out_path = fx_path(fx, "out");
    size_t len;
    char *out = slurp(out_path, &len);
    for (char *const *e = env; *e != NULL; e++) {
        bool found = false;
        for (size_t at = 0; at < len; at += strlen(out + at) + 1)
            found = found || strcmp(out + at, *e) == 0;
        if (!found)
            fail_msg("the task's environment lacks '%s'", *e);
    }
    free(out);
    free(out_path);
}

static void test_argv_is_byte_exact(void **state)
{
    struct fixture *fx = *state;
    char *argv[] = {"/bin/sh", "-c", "for w; do printf '<%s>\\n' \"$w\"; done", "task",
                    "it's", "a b", "$HOME", "`id`", "new\nline", "", ",", "*", "-n", "\\t",
                    NULL};
    fx_start(fx, argv, NULL, NULL);
    expect_exit(fx_finish(fx), 0);
    char *out = fx_path(fx, "out");
    expect_file(out, "<it's>\n<a b>\n<$HOME>\n<`id`>\n<new\nline>\n<>\n<,>\n<*>\n<-n>\n<\\t>\n");
    free(out);
}

/* The task starts in the workdir, with the batch shell's environment plus the given entries,
 * which win (and a later duplicate wins over an earlier one). */
static void test_workdir_and_environment(void **state)
{
    struct fixture *fx = *state;
    char *env[] = {"FROM_REQUEST=first", "FROM_REQUEST=second", "SHADOWED=given", NULL};
    char *parent[] = {"SLURM_JOB_ID=42", "SHADOWED=parent", NULL};
    char *argv[] = {"/bin/sh", "-c", "pwd -P; echo \"$SLURM_JOB_ID $SHADOWED $FROM_REQUEST\"",
                    NULL};
    fx_start(fx, argv, env, parent);
    expect_exit(fx_finish(fx), 0);
    char *real = realpath(fx->work, NULL);
    char *expected = xasprintf("%s\n42 given second\n", real);
    char *out = fx_path(fx, "out");
    expect_file(out, expected);
    free(out);
    free(expected);
    free(real);
    assert_true(run_has(fx, SLURM_SCRIPT_STARTED));
    assert_false(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    assert_false(run_has(fx, SLURM_SCRIPT_WARNED));
}

static void test_exit_codes(void **state)
{
    struct fixture *fx = *state;
    expect_exit(run_sh(fx, "exit 0", NULL), 0);
    expect_exit(run_sh(fx, "exit 3", NULL), 3);
    expect_exit(run_sh(fx, "exit 255", NULL), 255);
    /* 128+N for a signal that would not end the shell: an exit, not a signal. */
    expect_exit(run_sh(fx, "exit 145", NULL), 145);
}

static void test_killed_by_signal(void **state)
{
    struct fixture *fx = *state;
    expect_signal(run_sh(fx, "kill -KILL $$", NULL), SIGKILL);
    expect_signal(run_sh(fx, "kill -SEGV $$", NULL), SIGSEGV);
    expect_signal(run_sh(fx, "kill -TERM $$", NULL), SIGTERM);
    char *core = xasprintf("%s/core", fx->work);
    assert_false(exists(core));
    free(core);
}

static pid_t read_pid(const char *path)
{
    wait_file(path);
    /* The file exists once the shell opened it; the number follows. */
    for (int waited = 0;; waited += 5) {
        char *text = slurp(path, NULL);
        long pid = strtol(text, NULL, 10);
        bool whole = strchr(text, '\n') != NULL;
        free(text);
        if (whole && pid > 0)
            return (pid_t)pid;
        if (waited >= DEADLINE_MS)
            fail_msg("%s holds no pid", path);
        pause_ms(5);
    }
}

/* The signal mask sh ignores for background jobs, from /proc (0 if unreadable). */
static unsigned long long ignored_signals(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "SigIgn: %llx", &mask) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return mask;
}

/* SIGUSR1 to the script: the marker, then the task (which catches it) sees it, and the script
 * goes on waiting until the task ends by itself. The task is its own session and group. */
static void test_usr1_reaches_a_task_that_catches_it(void **state)
{
    struct fixture *fx = *state;
    char *argv[] = {"/bin/sh", "-c",
                    "trap 'echo caught >\"$1/caught\"; exit 0' USR1; echo $$ >\"$1/pid.tmp\"; "
                    "mv \"$1/pid.tmp\" \"$1/pid\"; sleep 100 & wait",
                    "task", fx->dir, NULL};
    fx_start(fx, argv, NULL, NULL);
    char *pid_path = fx_path(fx, "pid"), *caught = fx_path(fx, "caught");
    pid_t task = read_pid(pid_path);
    assert_int_equal(getpgid(task), task);
    assert_int_equal(getsid(task), task);
    assert_int_not_equal(task, fx->script);
    assert_int_equal(getpgid(fx->script), fx->script);
    if (system("env --default-signal true 2>/dev/null") == 0)
        assert_int_equal(ignored_signals(task) & (1ULL << (SIGINT - 1)), 0);
    assert_true(run_has(fx, SLURM_SCRIPT_STARTED));
    assert_int_equal(kill(fx->script, SIGUSR1), 0);
    expect_exit(fx_finish(fx), 0);
    assert_true(run_has(fx, SLURM_SCRIPT_WARNED));
    expect_file(caught, "caught\n");
    free(pid_path);
    free(caught);
}

/* A task that does not catch SIGUSR1 dies of it, and the script reports that signal. */
static void test_usr1_ends_a_task_that_ignores_it(void **state)
{
    struct fixture *fx = *state;
    char *argv[] = {"/bin/sh", "-c", "echo $$ >\"$1/pid\"; exec sleep 100", "task", fx->dir,
                    NULL};
    fx_start(fx, argv, NULL, NULL);
    char *pid_path = fx_path(fx, "pid");
    pid_t task = read_pid(pid_path);
    /* The exec into sleep, seen as the name in /proc: after it USR1 ends sleep, not sh. */
    char comm_path[64];
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)task);
    for (int waited = 0;; waited += 5) {
        char *comm = slurp(comm_path, NULL);
        bool slept = strcmp(comm, "sleep\n") == 0;
        free(comm);
        if (slept)
            break;
        if (waited >= DEADLINE_MS)
            fail_msg("the task never became sleep");
        pause_ms(5);
    }
    assert_int_equal(kill(fx->script, SIGUSR1), 0);
    expect_signal(fx_finish(fx), SIGUSR1);
    assert_true(run_has(fx, SLURM_SCRIPT_WARNED));
    free(pid_path);
}

/* After forwarding SIGUSR1 or SIGTERM the script goes back to waiting: a task that catches
 * the signal and goes on decides how the script ends. */
static void test_script_waits_on_after_a_signal(void **state)
{
    struct fixture *fx = *state;
    const int sigs[] = {SIGUSR1, SIGTERM};
    const char *names[] = {"USR1", "TERM"};
    char *pid_path = fx_path(fx, "pid"), *caught = fx_path(fx, "caught");
    char *stop = fx_path(fx, "stop");
    for (size_t i = 0; i < 2; i++) {
        char *code = xasprintf("trap 'echo caught >\"$1/caught\"' %s; echo $$ >\"$1/pid.tmp\"; "
                               "mv \"$1/pid.tmp\" \"$1/pid\"; "
                               "while [ ! -e \"$1/stop\" ]; do sleep 0.01; done; exit 5",
                               names[i]);
        char *argv[] = {"/bin/sh", "-c", code, "task", fx->dir, NULL};
        fx_start(fx, argv, NULL, NULL);
        read_pid(pid_path);
        assert_int_equal(kill(fx->script, sigs[i]), 0);
        wait_file(caught);
        assert_int_equal(waitpid(fx->script, NULL, WNOHANG), 0);
        FILE *f = fopen(stop, "w");
        assert_non_null(f);
        fclose(f);
        expect_exit(fx_finish(fx), 5);
        assert_true(run_has(fx, SLURM_SCRIPT_WARNED) == (sigs[i] == SIGUSR1));
        remove(pid_path);
        remove(caught);
        remove(stop);
        free(code);
    }
    free(pid_path);
    free(caught);
    free(stop);
}

/* SIGTERM to the script reaches the task's whole group: a grandchild dies of it too. */
static void test_term_reaches_the_whole_group(void **state)
{
    struct fixture *fx = *state;
    /* Orphans come to this process, so the grandchild's end can be seen as such. */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char *argv[] = {"/bin/sh", "-c", "sleep 100 & echo $! >\"$1/gpid\"; wait", "task", fx->dir,
                    NULL};
    fx_start(fx, argv, NULL, NULL);
    char *gpid_path = fx_path(fx, "gpid");
    pid_t grandchild = read_pid(gpid_path);
    assert_int_equal(kill(fx->script, SIGTERM), 0);
    expect_signal(fx_finish(fx), SIGTERM);
    /* Ours to reap, once the task is gone: it must have died of SIGTERM. (Should the task
     * have reaped it before dying itself, it is at least gone.) */
    for (int waited = 0;; waited += 5) {
        int status = 0;
        pid_t rc = waitpid(grandchild, &status, WNOHANG);
        if (rc == grandchild) {
            expect_signal(status, SIGTERM);
            break;
        }
        if (rc < 0 && kill(grandchild, 0) == -1 && errno == ESRCH)
            break;
        if (waited >= DEADLINE_MS)
            fail_msg("the grandchild outlived SIGTERM");
        pause_ms(5);
    }
    assert_false(run_has(fx, SLURM_SCRIPT_WARNED));
    /* The shell says nothing of its own into the job's stderr. */
    char *err_path = fx_path(fx, "err");
    expect_file(err_path, "");
    free(err_path);
    free(gpid_path);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void expect_exec_error(struct fixture *fx, char *const *argv, char *const *env,
                              const char *marker)
{
    fx_start(fx, argv, env, NULL);
    expect_exit(fx_finish(fx), 127);
    char *path = run_file(fx, SLURM_SCRIPT_EXEC_ERROR);
    expect_file(path, marker);
    remove(path);
    free(path);
}

static void test_exec_error(void **state)
{
    struct fixture *fx = *state;
    char *missing_path[] = {"/nonexistent/tool", "x", NULL};
    expect_exec_error(fx, missing_path, NULL, "/nonexistent/tool: No such file or directory\n");
    char *missing_name[] = {"drover-no-such-command", NULL};
    expect_exec_error(fx, missing_name, NULL,
                      "drover-no-such-command: No such file or directory\n");
    char *odd_name[] = {"no\nsuch", NULL};
    expect_exec_error(fx, odd_name, NULL, "no?such: No such file or directory\n");
    char *plain = fx_path(fx, "plain");
    FILE *f = fopen(plain, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    char *not_executable[] = {plain, NULL};
    char *expected = xasprintf("%s: Permission denied\n", plain);
    expect_exec_error(fx, not_executable, NULL, expected);
    free(expected);
    char *directory[] = {fx->work, NULL};
    expected = xasprintf("%s: Permission denied\n", fx->work);
    expect_exec_error(fx, directory, NULL, expected);
    free(expected);
    /* Looked up in the task's PATH, not the batch shell's: the same name is found there. */
    assert_int_equal(chmod(plain, 0700), 0);
    char *path_env = xasprintf("PATH=%s", fx->dir);
    char *env[] = {path_env, NULL};
    char *by_name[] = {"plain", NULL};
    fx_start(fx, by_name, env, NULL);
    expect_exit(fx_finish(fx), 0);
    assert_false(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    /* Names that env or setsid could take for something else: a variable, an option. */
    const char *odd[] = {"x=y", "-n"};
    for (size_t i = 0; i < 2; i++) {
        char *link = xasprintf("%s/%s", fx->dir, odd[i]);
        assert_int_equal(symlink("/bin/true", link), 0);
        free(link);
        char *argv_odd[] = {(char *)odd[i], NULL};
        fx_start(fx, argv_odd, env, NULL);
        expect_exit(fx_finish(fx), 0);
        assert_false(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    }
    char *hidden[] = {"sh", "-c", "exit 0", NULL};
    fx_start(fx, hidden, env, NULL); /* sh is not in that PATH */
    expect_exit(fx_finish(fx), 127);
    assert_true(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    free(path_env);
    free(plain);
}

/* A command that runs and exits 127 is not an exec error. */
static void test_exit_127_is_not_an_exec_error(void **state)
{
    struct fixture *fx = *state;
    expect_exit(run_sh(fx, "exit 127", NULL), 127);
    assert_false(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    assert_true(run_has(fx, SLURM_SCRIPT_STARTED));
}

/* What a previous run of the job left (a Slurm requeue) is removed before this one starts. */
static void test_stale_markers_are_removed(void **state)
{
    struct fixture *fx = *state;
    const char *names[] = {SLURM_SCRIPT_WARNED, SLURM_SCRIPT_EXEC_ERROR};
    for (size_t i = 0; i < 2; i++) {
        char *path = run_file(fx, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        free(path);
    }
    expect_exit(run_sh(fx, "exit 0", NULL), 0);
    assert_false(run_has(fx, SLURM_SCRIPT_WARNED));
    assert_false(run_has(fx, SLURM_SCRIPT_EXEC_ERROR));
    assert_true(run_has(fx, SLURM_SCRIPT_STARTED));
}

static void test_workdir_that_cannot_be_entered(void **state)
{
    struct fixture *fx = *state;
    free(fx->work);
    fx->work = xstrdup("/nonexistent/work dir");
    expect_exit(run_sh(fx, "exit 0", NULL), 1);
    char *marker = run_file(fx, SLURM_SCRIPT_EXEC_ERROR);
    expect_file(marker, "chdir /nonexistent/work dir: No such file or directory\n");
    free(marker);
    assert_false(run_has(fx, SLURM_SCRIPT_STARTED));
    char *err_path = fx_path(fx, "err");
    char *err = slurp(err_path, NULL);
    assert_non_null(strstr(err, "drover: cannot enter the working directory /nonexistent/work "
                                "dir: No such file or directory\n"));
    free(err);
    free(err_path);
}

static void expect_refused(const struct slurm_script *s, const char *reason)
{
    char *err = NULL;
    assert_null(slurm_script_text(s, &err));
    assert_non_null(err);
    assert_string_equal(err, reason);
    free(err);
    assert_null(slurm_script_text(s, NULL));
}

static void test_refusals(void **state)
{
    (void)state;
    char *argv[] = {"true", NULL}, *empty_word[] = {"", NULL}, *none[] = {NULL};
    struct slurm_script s = {.task_id = 1, .attempt = 1, .argv = argv, .workdir = "/w",
                             .run_dir = "/r"};
    char *err = NULL;
    char *text = slurm_script_text(&s, &err);
    assert_non_null(text);
    assert_null(err);
    assert_non_null(strstr(text, "# drover task 1, attempt 1:"));
    free(text);

    s.argv = NULL;
    expect_refused(&s, "slurm: the command is empty");
    s.argv = none;
    expect_refused(&s, "slurm: the command is empty");
    s.argv = empty_word;
    expect_refused(&s, "slurm: the command is empty");
    s.argv = argv;
    char *empty_key[] = {"A=1", "=x", NULL}, *no_eq[] = {"NOEQ", NULL};
    s.env = empty_key;
    expect_refused(&s, "slurm: the environment entry '=x' has an empty name");
    s.env = no_eq;
    expect_refused(&s, "slurm: the environment entry 'NOEQ' has no '='");
    s.env = NULL;
    s.workdir = "work";
    expect_refused(&s, "slurm: the working directory 'work' is not an absolute path");
    s.workdir = NULL;
    expect_refused(&s, "slurm: the working directory '' is not an absolute path");
    s.workdir = "/w";
    s.run_dir = "runs/7/1";
    expect_refused(&s, "slurm: the run directory 'runs/7/1' is not an absolute path");
    s.run_dir = "";
    expect_refused(&s, "slurm: the run directory '' is not an absolute path");
}

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FX_TEST(test_env_is_byte_exact),
        FX_TEST(test_argv_is_byte_exact),
        FX_TEST(test_workdir_and_environment),
        FX_TEST(test_exit_codes),
        FX_TEST(test_killed_by_signal),
        FX_TEST(test_usr1_reaches_a_task_that_catches_it),
        FX_TEST(test_usr1_ends_a_task_that_ignores_it),
        FX_TEST(test_script_waits_on_after_a_signal),
        FX_TEST(test_term_reaches_the_whole_group),
        FX_TEST(test_exec_error),
        FX_TEST(test_exit_127_is_not_an_exec_error),
        FX_TEST(test_stale_markers_are_removed),
        FX_TEST(test_workdir_that_cannot_be_entered),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
