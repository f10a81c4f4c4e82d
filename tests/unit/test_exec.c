/* exec/: the supervisor, end to end. The test process plays the daemon: it calls exec_start and
 * reaps the supervisor (its child). Nothing sleeps a fixed time: every wait polls a condition
 * under a deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec-internal.h"
#include "util/paths.h"

#define DEADLINE_MS 20000 /* generous: the supervisor may run under valgrind */

struct fixture {
    char dir[64];
    char run_dir[PATH_MAX];
    char path[PATH_MAX]; /* scratch for a file in dir */
};

static char *default_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};

/* --- helpers --------------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void)
{
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
}

static const char *in_dir(struct fixture *f, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    return f->path;
}

static struct exec_spec spec_for(struct fixture *f, char *const *argv)
{
    return (struct exec_spec){
        .task_id = 1, .attempt = 1, .argv = argv, .env = default_env, .run_dir = f->run_dir,
    };
}

static pid_t start(const struct exec_spec *spec)
{
    pid_t pid = -1;
    char *err = NULL;
    if (exec_start(spec, &pid, &err) != 0)
        fail_msg("exec_start: %s", err);
    assert_null(err);
    assert_true(pid > 0);
    return pid;
}

/* Waits for our child pid; returns its wait status. */
static int reap(pid_t pid)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    int wstatus;
    pid_t rc;

    while ((rc = waitpid(pid, &wstatus, WNOHANG)) == 0 && now_ms() < deadline)
        nap();
    if (rc == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
        fail_msg("process %d did not exit in time", (int)pid);
    }
    assert_int_equal(rc, pid);
    return wstatus;
}

/* Reaps the supervisor, which must have exited 0, and returns the status it left. */
static struct exec_status finish(const char *run_dir, pid_t supervisor)
{
    struct exec_status status;
    int wstatus = reap(supervisor);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    assert_int_equal(exec_probe(run_dir, &status), EXEC_DONE);
    return status;
}

static struct exec_status run(const struct exec_spec *spec)
{
    return finish(spec->run_dir, start(spec));
}

/* The file's contents, or NULL if it cannot be read. The caller frees it. */
static char *slurp(const char *path)
{
    FILE *file = fopen(path, "re");
    if (file == NULL)
        return NULL;
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, file);
    buf[n] = '\0';
    fclose(file);
    return buf;
}

static char *slurp_run(struct fixture *f, const char *name)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", f->run_dir, name);
    return slurp(path);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* /proc/<pid>/stat: state and process group. False if there is no such process. */
static bool proc_stat(pid_t pid, char *state, pid_t *pgrp)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *text = slurp(path);
    if (text == NULL)
        return false;
    char *end = strrchr(text, ')'); /* the command name may hold anything */
    int group = 0;
    bool ok = end != NULL && sscanf(end + 2, "%c %*d %d", state, &group) == 2;
    free(text);
    *pgrp = group;
    return ok;
}

/* Alive: a zombie is dead (PID 1 here may never reap the orphans we kill). */
static bool proc_alive(pid_t pid)
{
    char state;
    pid_t pgrp;
    return proc_stat(pid, &state, &pgrp) && state != 'Z' && state != 'X';
}

static bool wait_dead(pid_t pid)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (proc_alive(pid) && now_ms() < deadline)
        nap();
    return !proc_alive(pid);
}

/* How many live processes are in group pgid. */
static int group_size(pid_t pgid)
{
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    int count = 0;

    assert_non_null(proc);
    while ((entry = readdir(proc)) != NULL) {
        pid_t pid = atoi(entry->d_name);
        char state;
        pid_t pgrp;
        if (pid > 0 && proc_stat(pid, &state, &pgrp) && pgrp == pgid && state != 'Z' &&
            state != 'X')
            count++;
    }
    closedir(proc);
    return count;
}

static bool wait_group_empty(pid_t pgid)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (group_size(pgid) > 0 && now_ms() < deadline)
        nap();
    return group_size(pgid) == 0;
}

/* run_dir/pid, parsed; false until it names a task. */
static bool read_pid_file(const char *run_dir, pid_t *supervisor, pid_t *pgid)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/pid", run_dir);
    char *text = slurp(path);
    int a = 0, b = 0;
    bool ok = text != NULL && sscanf(text, "%d %d", &a, &b) == 2 && b > 0;
    free(text);
    *supervisor = a;
    *pgid = b;
    return ok;
}

/* Waits until the task has exec'd comm in its own group; returns its pid. */
static pid_t wait_task(const char *run_dir, const char *comm)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    pid_t supervisor, task;

    while (now_ms() < deadline) {
        char state, path[64];
        pid_t pgrp;
        if (read_pid_file(run_dir, &supervisor, &task) && proc_stat(task, &state, &pgrp) &&
            pgrp == task) {
            snprintf(path, sizeof path, "/proc/%d/comm", (int)task);
            char *name = slurp(path);
            bool match = name != NULL && strncmp(name, comm, strlen(comm)) == 0;
            free(name);
            if (match)
                return task;
        }
        nap();
    }
    fail_msg("the task never became %s", comm);
    return -1;
}

/* A pid from a file the task writes, once it is there. */
static pid_t wait_pid_in(const char *path)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (now_ms() < deadline) {
        char *text = slurp(path);
        int pid = text != NULL ? atoi(text) : 0;
        size_t len = text != NULL ? strlen(text) : 0;
        free(text);
        if (pid > 0 && len > 0)
            return pid;
        nap();
    }
    fail_msg("no pid in %s", path);
    return -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/drover-exec-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->run_dir, sizeof f->run_dir, "%s/runs/7/1", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* A shell loop that waits for the file "$1" to appear, then says so. */
#define WAIT_FOR_ARG1 "while [ ! -e \"$1\" ]; do sleep 0.01; done; echo done"

/* --- exit status and output ------------------------------------------------------------------ */

static void test_exit_zero(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"true", NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t before = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;

    struct exec_status status = run(&spec);
    assert_int_equal(status.exit_code, 0);
    assert_int_equal(status.signal, 0);
    assert_false(status.timed_out);
    assert_false(status.cancelled);
    assert_string_equal(status.exec_error, "");
    assert_true(status.start_ms >= before - 1000);
    assert_true(status.end_ms >= status.start_ms);
    assert_true(status.pgid > 0);
}

static void test_exit_code_recorded(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "exit 3", NULL};
    struct exec_spec spec = spec_for(f, argv);

    struct exec_status status = run(&spec);
    assert_int_equal(status.exit_code, 3);
    assert_int_equal(status.signal, 0);
}

static void test_killing_signal_recorded(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "kill -USR1 $$", NULL};
    struct exec_spec spec = spec_for(f, argv);

    struct exec_status status = run(&spec);
    assert_int_equal(status.exit_code, -1);
    assert_int_equal(status.signal, SIGUSR1);
    assert_false(status.timed_out);
}

static void test_output_captured(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "echo out; echo err >&2", NULL};
    struct exec_spec spec = spec_for(f, argv);

    assert_int_equal(run(&spec).exit_code, 0);
    char *out = slurp_run(f, "stdout"), *err = slurp_run(f, "stderr");
    assert_string_equal(out, "out\n");
    assert_string_equal(err, "err\n");
    free(out);
    free(err);
    struct stat st;
    assert_int_equal(stat(f->run_dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
}

/* A second try in the same run_dir: the output is appended, and the first try's status is gone
 * while the second runs. */
static void test_second_try_appends_and_clears_status(void **state)
{
    struct fixture *f = *state;
    char *first[] = {"sh", "-c", "echo one; exit 4", NULL};
    char *second[] = {"sh", "-c", WAIT_FOR_ARG1, "sh", (char *)in_dir(f, "go"), NULL};
    struct exec_spec spec = spec_for(f, first);
    struct exec_status status;

    assert_int_equal(run(&spec).exit_code, 4);
    spec.argv = second;
    pid_t supervisor = start(&spec);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    write_text(in_dir(f, "go"), "", 0600);
    status = finish(f->run_dir, supervisor);
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "one\ndone\n");
    free(out);
}

/* --- environment, PATH, working directory ---------------------------------------------------- */

static void test_environment_is_the_specs(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "echo \"$FOO\"; echo \"${DROVER_TEST_LEAK-unset}\"", NULL};
    char *env[] = {"FOO=bar baz", "PATH=/usr/bin:/bin", NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.env = env;

    setenv("DROVER_TEST_LEAK", "leaked", 1);
    struct exec_status status = run(&spec);
    unsetenv("DROVER_TEST_LEAK");
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "bar baz\nunset\n");
    free(out);
}

/* argv[0] is looked up in the task's PATH, which the test process's PATH does not share. */
static void test_path_is_the_tasks(void **state)
{
    struct fixture *f = *state;
    char bin[128], path_var[160];
    snprintf(bin, sizeof bin, "%s/bin", f->dir);
    assert_int_equal(mkdir(bin, 0700), 0);
    write_text(in_dir(f, "bin/drover-test-tool"), "#!/bin/sh\necho tool \"$@\"\n", 0755);
    snprintf(path_var, sizeof path_var, "PATH=%s:/usr/bin:/bin", bin);
    char *argv[] = {"drover-test-tool", "x", NULL};
    char *env[] = {path_var, NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.env = env;

    struct exec_status status = run(&spec);
    assert_string_equal(status.exec_error, "");
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "tool x\n");
    free(out);
}

static void test_workdir(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"pwd", "-P", NULL};
    char *sh_argv[] = {"sh", "-c", "pwd -P >&2", NULL};
    char wd[128], real[PATH_MAX];
    snprintf(wd, sizeof wd, "%s/wd", f->dir);
    assert_int_equal(mkdir(wd, 0700), 0);
    assert_non_null(realpath(wd, real));
    struct exec_spec spec = spec_for(f, argv);
    spec.workdir = wd;

    assert_int_equal(run(&spec).exit_code, 0);
    spec.workdir = NULL;
    spec.argv = sh_argv;
    assert_int_equal(run(&spec).exit_code, 0);
    char *out = slurp_run(f, "stdout"), *err = slurp_run(f, "stderr");
    strcat(real, "\n");
    assert_string_equal(out, real);
    assert_string_equal(err, "/\n"); /* no workdir: "/" */
    free(out);
    free(err);
}

/* A relative run_dir and a relative workdir are both taken from the caller's directory. */
static void test_relative_paths(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "pwd -P", NULL};
    char cwd[PATH_MAX], real[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->dir), 0);
    assert_int_equal(mkdir("wd", 0700), 0);
    assert_non_null(realpath("wd", real));
    struct exec_spec spec = spec_for(f, argv);
    spec.run_dir = "rel/run";
    spec.workdir = "wd";

    struct exec_status status = run(&spec);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(status.exit_code, 0);
    char *out = slurp(in_dir(f, "rel/run/stdout"));
    strcat(real, "\n");
    assert_string_equal(out, real);
    free(out);
}

/* --- exec failures --------------------------------------------------------------------------- */

static void test_command_not_found(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"drover-no-such-command", NULL};
    struct exec_spec spec = spec_for(f, argv);

    struct exec_status status = run(&spec);
    assert_string_equal(status.exec_error, "drover-no-such-command: No such file or directory");
    assert_int_equal(status.exit_code, -1);
    assert_int_equal(status.signal, 0);
}

static void test_not_executable(void **state)
{
    struct fixture *f = *state;
    write_text(in_dir(f, "script"), "#!/bin/sh\nexit 0\n", 0644);
    char *argv[] = {f->path, NULL};
    struct exec_spec spec = spec_for(f, argv);

    struct exec_status status = run(&spec);
    assert_non_null(strstr(status.exec_error, "Permission denied"));
    assert_int_equal(strncmp(status.exec_error, f->path, strlen(f->path)), 0);
    assert_int_equal(status.exit_code, -1);
}

static void test_missing_workdir(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"true", NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.workdir = in_dir(f, "nowhere");

    struct exec_status status = run(&spec);
    assert_int_equal(strncmp(status.exec_error, "chdir ", 6), 0);
    assert_non_null(strstr(status.exec_error, "No such file or directory"));
    assert_int_equal(status.exit_code, -1);
}

static void test_start_refuses_bad_specs(void **state)
{
    struct fixture *f = *state;
    char *empty[] = {NULL};
    char *blank[] = {"", NULL};
    char *argv[] = {"true", NULL};
    struct exec_spec spec = spec_for(f, empty);
    pid_t pid = -1;
    char *err = NULL;

    assert_int_equal(exec_start(&spec, &pid, &err), -1);
    assert_non_null(err);
    free(err);
    spec.argv = blank;
    assert_int_equal(exec_start(&spec, &pid, &err), -1);
    free(err);

    write_text(in_dir(f, "file"), "", 0600);
    snprintf(f->run_dir, sizeof f->run_dir, "%s/file/run", f->dir);
    spec.argv = argv;
    assert_int_equal(exec_start(&spec, &pid, &err), -1);
    assert_non_null(strstr(err, "Not a directory"));
    free(err);
}

static void test_start_refuses_a_busy_run_dir(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sleep", "30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    pid_t pid = -1;
    char *err = NULL;

    pid_t supervisor = start(&spec);
    assert_int_equal(exec_start(&spec, &pid, &err), -1);
    assert_non_null(strstr(err, "running"));
    free(err);
    assert_int_equal(exec_cancel(f->run_dir), 0);
    assert_true(finish(f->run_dir, supervisor).cancelled);
}

/* --- time limit and cancel ------------------------------------------------------------------- */

static void test_time_limit_kills_the_group(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "sleep 30 & echo $! > \"$1\"; sleep 30", "sh",
                    (char *)in_dir(f, "grandchild"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 300;
    spec.grace_ms = 200;

    struct exec_status status = run(&spec);
    assert_true(status.timed_out);
    assert_false(status.cancelled);
    assert_int_equal(status.exit_code, -1);
    assert_int_equal(status.signal, SIGTERM);
    assert_true(status.end_ms - status.start_ms >= 300);
    assert_true(wait_dead(wait_pid_in(in_dir(f, "grandchild"))));
    assert_true(wait_group_empty(status.pgid));
}

static void test_time_limit_sigkills_after_grace(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "trap '' TERM; sleep 30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 200;
    spec.grace_ms = 200;

    struct exec_status status = run(&spec);
    assert_true(status.timed_out);
    assert_int_equal(status.signal, SIGKILL);
    assert_true(status.end_ms - status.start_ms >= 400);
    assert_true(wait_group_empty(status.pgid));
}

/* The main process dies of the SIGTERM while a grandchild ignores it: the group is SIGKILLed
 * then, not at the end of the (long) grace. */
static void test_time_limit_kills_survivors_at_once(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "(trap '' TERM; sleep 30; :) & echo $! > \"$1\"; sleep 30", "sh",
                    (char *)in_dir(f, "grandchild"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 300;
    spec.grace_ms = 60000;

    pid_t supervisor = start(&spec);
    pid_t grandchild = wait_pid_in(in_dir(f, "grandchild"));
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.timed_out);
    assert_int_equal(status.signal, SIGTERM);
    assert_true(status.end_ms - status.start_ms < 30000);
    assert_true(wait_dead(grandchild));
    assert_true(wait_group_empty(status.pgid));
}

/* A task that ends by itself may leave a background process behind: not ours to kill. */
static void test_normal_exit_leaves_the_group_alone(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "sleep 30 & echo $! > \"$1\"", "sh",
                    (char *)in_dir(f, "grandchild"), NULL};
    struct exec_spec spec = spec_for(f, argv);

    struct exec_status status = run(&spec);
    assert_int_equal(status.exit_code, 0);
    pid_t grandchild = wait_pid_in(in_dir(f, "grandchild"));
    assert_true(proc_alive(grandchild));
    kill(grandchild, SIGKILL);
    assert_true(wait_dead(grandchild));
}

static void test_cancel(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sleep", "30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 60000;

    pid_t supervisor = start(&spec);
    assert_int_equal(exec_supervisor_pid(f->run_dir), supervisor);
    wait_task(f->run_dir, "sleep");
    assert_int_equal(exec_cancel(f->run_dir), 0);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.cancelled);
    assert_false(status.timed_out);
    assert_int_equal(status.signal, SIGTERM);
    assert_int_equal(exec_cancel(f->run_dir), -1);
}

/* A cancel that arrives before the task has even been forked still stops it. */
static void test_cancel_right_away(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sleep", "30", NULL};
    struct exec_spec spec = spec_for(f, argv);

    pid_t supervisor = start(&spec);
    assert_int_equal(exec_cancel(f->run_dir), 0);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.cancelled);
    assert_true(wait_group_empty(status.pgid));
}

/* --- preemption (exec_preempt) ------------------------------------------------------------- */

/* The task's own signal to its group; it saves and exits in time: preempted, no overrun, the time
 * it was asked recorded; a second request and a cancel after it change nothing. */
static void test_preempt_with_the_tasks_signal(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "trap 'echo yielded; exit 3' USR2; echo up; echo $$ > \"$1\";"
                    " while :; do sleep 0.01; done", "sh", (char *)in_dir(f, "up"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 60000;
    spec.preempt_signal = SIGUSR2;
    spec.preempt_grace_ms = 30000;

    pid_t supervisor = start(&spec);
    wait_pid_in(in_dir(f, "up"));
    assert_int_equal(exec_preempt(f->run_dir), 0);
    exec_preempt(f->run_dir);
    exec_cancel(f->run_dir);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.preempted);
    assert_false(status.preempt_overrun);
    assert_false(status.cancelled);
    assert_false(status.timed_out);
    assert_int_equal(status.exit_code, 3);
    assert_true(status.preempt_ms >= status.start_ms && status.preempt_ms <= status.end_ms);
    assert_true(status.end_ms - status.preempt_ms < 30000);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "up\nyielded\n");
    free(out);
    assert_int_equal(exec_preempt(f->run_dir), -1); /* nothing runs there now */
}

/* A task that ignores the signal is killed when its grace is over: an overrun. */
static void test_preempt_overrun_is_killed(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "trap '' TERM; echo $$ > \"$1\"; while :; do sleep 0.01; done",
                    "sh", (char *)in_dir(f, "up"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.preempt_grace_ms = 300;

    pid_t supervisor = start(&spec);
    wait_pid_in(in_dir(f, "up"));
    assert_int_equal(exec_preempt(f->run_dir), 0);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.preempted);
    assert_true(status.preempt_overrun);
    assert_int_equal(status.signal, SIGKILL);
    assert_true(status.end_ms - status.preempt_ms >= 300);
    assert_true(wait_group_empty(status.pgid));
}

/* A task already stopping for its time limit is not preempted on top. */
static void test_preempt_after_time_limit_is_ignored(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "trap 'echo $$ > \"$1\"; sleep 0.3; exit 5' TERM;"
                    " while :; do sleep 0.01; done", "sh", (char *)in_dir(f, "termed"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.timeout_ms = 200;
    spec.grace_ms = 10000;

    pid_t supervisor = start(&spec);
    wait_pid_in(in_dir(f, "termed")); /* the time limit's SIGTERM arrived */
    exec_preempt(f->run_dir);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_true(status.timed_out);
    assert_false(status.preempted);
    assert_int_equal(status.exit_code, 5);
}

static void test_cancel_without_supervisor(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(exec_cancel(f->run_dir), -1);
    assert_int_equal(exec_cancel(f->dir), -1);
    assert_int_equal(exec_supervisor_pid(f->dir), -1);
}

/* --- output through the supervisor, a full disk, the reserved status ----------------------- */

/* The task writes to pipes the supervisor drains, never to the log files themselves. */
static void test_output_goes_through_pipes(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "readlink /proc/self/fd/1; readlink /proc/self/fd/2 >&2", NULL};
    struct exec_spec spec = spec_for(f, argv);

    assert_int_equal(run(&spec).exit_code, 0);
    char *out = slurp_run(f, "stdout"), *err = slurp_run(f, "stderr");
    assert_int_equal(strncmp(out, "pipe:", 5), 0);
    assert_int_equal(strncmp(err, "pipe:", 5), 0);
    free(out);
    free(err);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* A log that cannot grow (here RLIMIT_FSIZE, which the supervisor inherits: EFBIG) stops where it
 * is; the task is not harmed — it never sees the failure — and the status says where the log
 * stops and why. */
static void test_output_cut_when_the_log_cannot_grow(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "head -c 100000 /dev/zero; echo fine >&2", NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct rlimit old, small = {.rlim_cur = 8192, .rlim_max = RLIM_INFINITY};

    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small.rlim_max = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    pid_t supervisor = start(&spec);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_int_equal(status.exit_code, 0);
    assert_int_equal(status.signal, 0);
    assert_int_equal(status.truncated_at[0], 8192);
    assert_int_equal(status.truncated_at[1], -1);
    assert_int_equal(status.output_error, EFBIG);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/stdout", f->run_dir);
    assert_int_equal(file_size(path), 8192);
    char *err = slurp_run(f, "stderr");
    assert_string_equal(err, "fine\n");
    free(err);
}

/* While the task runs, status.tmp holds the status's reserved space; it is never read as a
 * status: a supervisor killed then is lost, not done. */
static void test_reserved_status_is_not_a_status(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sleep", "30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct exec_status status;
    char path[PATH_MAX + 16];

    pid_t supervisor = start(&spec);
    snprintf(path, sizeof path, "%s/status.tmp", f->run_dir);
    assert_int_equal(file_size(path), EXEC_STATUS_RESERVE);
    wait_task(f->run_dir, "sleep");
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    assert_int_equal(kill(supervisor, SIGKILL), 0);
    reap(supervisor);
    assert_int_equal(file_size(path), EXEC_STATUS_RESERVE);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_LOST);
    exec_kill_orphans(f->run_dir);
}

/* A status whose reserved padding could not be cut off still reads (whitespace after the JSON);
 * one from an older supervisor, without the output fields, reads as complete output. */
static void test_status_variants_read(void **state)
{
    struct fixture *f = *state;
    struct exec_status status = {.exit_code = 3, .truncated_at = {-1, 77}, .output_error = ENOSPC};
    struct exec_status back;
    char padded[EXEC_STATUS_RESERVE + 1], path[PATH_MAX + 16];

    assert_int_equal(paths_mkdir_p(f->run_dir), 0);
    char *text = exec_status_encode(&status);
    memset(padded, ' ', sizeof padded - 1);
    padded[sizeof padded - 1] = '\0';
    memcpy(padded, text, strlen(text));
    free(text);
    snprintf(path, sizeof path, "%s/status", f->run_dir);
    write_text(path, padded, 0600);
    assert_int_equal(exec_probe(f->run_dir, &back), EXEC_DONE);
    assert_int_equal(back.exit_code, 3);
    assert_int_equal(back.truncated_at[0], -1);
    assert_int_equal(back.truncated_at[1], 77);
    assert_int_equal(back.output_error, ENOSPC);

    write_text(path, "{\"exit_code\":0,\"signal\":0,\"timed_out\":false,\"cancelled\":false,"
                     "\"exec_error\":\"\",\"start_ms\":1,\"end_ms\":2,\"pgid\":5}\n", 0600);
    assert_int_equal(exec_probe(f->run_dir, &back), EXEC_DONE);
    assert_int_equal(back.truncated_at[0], -1);
    assert_int_equal(back.truncated_at[1], -1);
    assert_int_equal(back.output_error, 0);
}

/* Fills the file system under dir until a write fails with ENOSPC. */
static void fill_up(const char *dir)
{
    char path[PATH_MAX + 16], block[65536];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    memset(block, 'x', sizeof block);
    ssize_t n;
    size_t len = sizeof block;
    for (;;) {
        n = write(fd, block, len);
        if (n > 0)
            continue;
        if (len == 1)
            break;
        len /= 2; /* the last few blocks */
    }
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

/* The disk fills while the task runs: the task's end still reaches the status (its space was
 * reserved at start), with its real exit code, and the output it writes then is dropped and said
 * to be. Needs a small tmpfs (root); skipped otherwise. */
static void test_status_survives_a_full_disk(void **state)
{
    struct fixture *f = *state;
    char small[128];
    snprintf(small, sizeof small, "%s/small", f->dir);
    assert_int_equal(mkdir(small, 0700), 0);
    if (mount("tmpfs", small, "tmpfs", 0, "size=1m") == -1) {
        print_message("mount tmpfs: %s: skipped\n", strerror(errno));
        skip();
    }
    snprintf(f->run_dir, sizeof f->run_dir, "%s/runs/7/1", small);
    char *argv[] = {"sh", "-c", WAIT_FOR_ARG1 "; exit 0", "sh", (char *)in_dir(f, "go"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct exec_status status;

    pid_t supervisor = start(&spec);
    wait_task(f->run_dir, "sh");
    fill_up(small);
    write_text(in_dir(f, "go"), "", 0600);
    int wstatus = reap(supervisor);
    enum exec_probe probe = exec_probe(f->run_dir, &status);
    umount2(small, MNT_DETACH);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    assert_int_equal(probe, EXEC_DONE);
    assert_int_equal(status.exit_code, 0);
    assert_int_equal(status.truncated_at[0], 0); /* "done" found no room */
    assert_int_equal(status.output_error, ENOSPC);
}

/* Output written by what the task left behind, after the task itself ended, still reaches the
 * log (a drainer carries on for the supervisor). */
static void test_leftover_output_is_kept(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "(" WAIT_FOR_ARG1 ") & echo early", "sh",
                    (char *)in_dir(f, "go"), NULL};
    struct exec_spec spec = spec_for(f, argv);

    assert_int_equal(run(&spec).exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "early\n");
    free(out);
    write_text(in_dir(f, "go"), "", 0600);
    int64_t deadline = now_ms() + DEADLINE_MS;
    bool late = false;
    while (!late && now_ms() < deadline) {
        out = slurp_run(f, "stdout");
        late = strcmp(out, "early\ndone\n") == 0;
        free(out);
        if (!late)
            nap();
    }
    assert_true(late);
}

/* The task gets the umask it is given, not the supervisor's (the daemon's is 077). */
static void test_task_umask(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "umask", NULL};
    struct exec_spec spec = spec_for(f, argv);
    spec.set_umask = true;
    spec.task_umask = 027;

    mode_t old = umask(077);
    struct exec_status status = run(&spec);
    umask(old);
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "0027\n");
    free(out);
}

/* --- probing --------------------------------------------------------------------------------- */

static void test_probe_lifecycle(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", WAIT_FOR_ARG1, "sh", (char *)in_dir(f, "go"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct exec_status status;

    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_NOT_STARTED); /* no such dir */
    assert_int_equal(exec_probe(f->dir, &status), EXEC_NOT_STARTED);     /* empty dir */
    pid_t supervisor = start(&spec);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    assert_int_equal(exec_supervisor_pid(f->run_dir), supervisor);
    write_text(in_dir(f, "go"), "", 0600);
    status = finish(f->run_dir, supervisor);
    assert_int_equal(status.exit_code, 0);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_DONE);
}

/* kill -9 of the supervisor: its lock goes, its pid file stays, no status; the task runs on until
 * exec_kill_orphans. */
static void test_probe_lost_and_kill_orphans(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "sleep 30 & sleep 30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct exec_status status;

    pid_t supervisor = start(&spec);
    pid_t task = wait_task(f->run_dir, "sh");
    assert_int_equal(kill(supervisor, SIGKILL), 0);
    int wstatus = reap(supervisor);
    assert_true(WIFSIGNALED(wstatus));
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_LOST);
    assert_true(proc_alive(task));
    exec_kill_orphans(f->run_dir);
    assert_true(wait_dead(task));
    assert_true(wait_group_empty(task));
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_LOST);
}

/* A pid file from before this boot names strangers: exec_kill_orphans leaves them be. */
static void test_kill_orphans_ignores_an_earlier_boot(void **state)
{
    struct fixture *f = *state;
    char line[64], path[PATH_MAX + 8];
    pid_t victim = fork();
    if (victim == 0) {
        setpgid(0, 0);
        execlp("sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    assert_true(victim > 0);
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (getpgid(victim) != victim && now_ms() < deadline)
        nap();
    snprintf(line, sizeof line, "%d %d\n", (int)getpid(), (int)victim);
    snprintf(path, sizeof path, "%s/pid", f->dir);
    write_text(path, line, 0600);
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);

    exec_kill_orphans(f->dir);
    assert_int_equal(waitpid(victim, NULL, WNOHANG), 0);
    assert_int_equal(utimensat(AT_FDCWD, path, NULL, 0), 0);
    exec_kill_orphans(f->dir);
    int wstatus = reap(victim);
    assert_true(WIFSIGNALED(wstatus));
    assert_int_equal(WTERMSIG(wstatus), SIGKILL);
}

/* The daemon dies (without reaping) right after exec_start: the task carries on and its status
 * still appears. */
static void test_task_outlives_the_daemon(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", WAIT_FOR_ARG1, "sh", (char *)in_dir(f, "go"), NULL};
    struct exec_spec spec = spec_for(f, argv);
    struct exec_status status;

    pid_t daemon = fork();
    if (daemon == 0) {
        pid_t pid;
        char *err;
        _exit(exec_start(&spec, &pid, &err) == 0 ? 0 : 1);
    }
    int wstatus = reap(daemon);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    write_text(in_dir(f, "go"), "", 0600);

    int64_t deadline = now_ms() + DEADLINE_MS;
    enum exec_probe probe;
    while ((probe = exec_probe(f->run_dir, &status)) == EXEC_RUNNING && now_ms() < deadline)
        nap();
    assert_int_equal(probe, EXEC_DONE);
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "done\n");
    free(out);
}

/* --- descriptors ----------------------------------------------------------------------------- */

/* Whether /proc/<pid>/fd shows fds 0..last, and above last nothing but the supervisor's own if
 * extra_own: pipes (to the task and from its output), its signalfd and files of its run
 * directory (the logs, the reserved status). Fails at once if any fd is forbidden or
 * forbidden_too. Fds at or above our soft limit are valgrind's, when it runs us. */
static bool fds_settled(pid_t pid, int last, bool extra_own, const char *forbidden,
                        const char *forbidden_too)
{
    char dir_path[64], link_path[600], target[PATH_MAX];
    struct rlimit limit;
    struct dirent *entry;
    int seen = 0, extra = 0, bad_fd = -1;

    getrlimit(RLIMIT_NOFILE, &limit);
    snprintf(dir_path, sizeof dir_path, "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    while ((entry = readdir(dir)) != NULL) {
        int fd = atoi(entry->d_name);
        if (entry->d_name[0] == '.' || (rlim_t)fd >= limit.rlim_cur)
            continue;
        snprintf(link_path, sizeof link_path, "%s/%s", dir_path, entry->d_name);
        ssize_t n = readlink(link_path, target, sizeof target - 1);
        if (n <= 0)
            continue; /* closed meanwhile */
        target[n] = '\0';
        if (strcmp(target, forbidden) == 0 || strcmp(target, forbidden_too) == 0) {
            bad_fd = fd;
            break;
        }
        bool own = strncmp(target, "pipe:", 5) == 0 ||
                   strcmp(target, "anon_inode:[signalfd]") == 0 ||
                   strstr(target, "/runs/7/1/") != NULL;
        if (fd <= last)
            seen++;
        else if (!(extra_own && own))
            extra++;
    }
    closedir(dir);
    if (bad_fd >= 0)
        fail_msg("process %d holds fd %d -> %s", (int)pid, bad_fd, target);
    return seen == last + 1 && extra == 0;
}

/* A process may hold a descriptor for a moment (ld.so opening libc after exec): poll. */
static void check_fds(pid_t pid, int last, bool extra_own, const char *forbidden,
                      const char *forbidden_too)
{
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (!fds_settled(pid, last, extra_own, forbidden, forbidden_too) && now_ms() < deadline)
        nap();
    assert_true(fds_settled(pid, last, extra_own, forbidden, forbidden_too));
}

static void test_no_inherited_descriptors(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sleep", "30", NULL};
    struct exec_spec spec = spec_for(f, argv);
    int pipe_fds[2];
    char pipe_name[64], file_name[PATH_MAX], path[PATH_MAX + 16], target[PATH_MAX];
    char buf[1];

    /* Not close-on-exec, like a careless daemon's. */
    assert_int_equal(pipe(pipe_fds), 0);
    int file = open(in_dir(f, "leaky"), O_WRONLY | O_CREAT, 0600);
    assert_true(file >= 0);
    assert_non_null(realpath(f->path, file_name));
    struct stat st;
    assert_int_equal(fstat(pipe_fds[0], &st), 0);
    snprintf(pipe_name, sizeof pipe_name, "pipe:[%lu]", (unsigned long)st.st_ino);

    pid_t supervisor = start(&spec);
    /* Settled when exec_start returns: 0-2 /dev/null, 3 the lock (the run dir), 4 the run dir. */
    check_fds(supervisor, 4, true, pipe_name, file_name);
    snprintf(path, sizeof path, "/proc/%d/fd/3", (int)supervisor);
    ssize_t n = readlink(path, target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = '\0';
    /* The lock is the run directory itself (no lock file is made). */
    size_t tl = strlen(target);
    assert_true(tl >= strlen("/runs/7/1"));
    assert_string_equal(target + tl - strlen("/runs/7/1"), "/runs/7/1");
    snprintf(path, sizeof path, "/proc/%d/fd/0", (int)supervisor);
    n = readlink(path, target, sizeof target - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, "/dev/null");

    pid_t task = wait_task(f->run_dir, "sleep");
    check_fds(task, 2, false, pipe_name, file_name);

    /* Nobody else holds the write end: the read end sees EOF, not "would block". */
    close(pipe_fds[1]);
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    assert_int_equal(read(pipe_fds[0], buf, 1), 0);
    close(pipe_fds[0]);
    close(file);

    assert_int_equal(exec_cancel(f->run_dir), 0);
    assert_true(finish(f->run_dir, supervisor).cancelled);
}

/* The daemon dies while the supervisor is about to report ready: its ready word meets a pipe
 * nobody reads. The supervisor must not die of that SIGPIPE: the task runs and its status is
 * written, as with any daemon crash. */
static void test_ready_pipe_without_reader(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"sh", "-c", "echo ran", NULL};
    struct exec_spec spec = spec_for(f, argv);
    char *err = NULL;
    int ready[2];

    assert_int_equal(paths_mkdir_p(f->run_dir), 0);
    int dir_fd = open(f->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int lock_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* as exec_start */
    assert_true(dir_fd >= 0 && lock_fd >= 0);
    assert_int_equal(flock(lock_fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    close(ready[0]); /* the "daemon" is gone before the word is written */
    pid_t supervisor = exec_spawn_supervisor(&spec, dir_fd, lock_fd, ready[1], &err);
    assert_true(supervisor > 0);
    close(ready[1]);
    close(lock_fd);
    close(dir_fd);
    struct exec_status status = finish(f->run_dir, supervisor);
    assert_int_equal(status.exit_code, 0);
    char *out = slurp_run(f, "stdout");
    assert_string_equal(out, "ran\n");
    free(out);
}

/* A supervisor of a drover before 0.5 locked a `lock` file in the run directory, not the
 * directory: a daemon upgraded while it runs still sees it running, and starts nothing there. */
static void test_legacy_lock_file(void **state)
{
    struct fixture *f = *state;
    struct exec_status status;
    char *argv[] = {"true", NULL};
    struct exec_spec spec = spec_for(f, argv);
    pid_t pid;
    char *err = NULL;

    assert_int_equal(paths_mkdir_p(f->run_dir), 0);
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_NOT_STARTED);
    int dir = open(f->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int old = openat(dir, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    close(dir);
    assert_true(old >= 0);
    assert_int_equal(flock(old, LOCK_EX | LOCK_NB), 0); /* the old supervisor */
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_RUNNING);
    assert_int_equal(exec_start(&spec, &pid, &err), -1);
    assert_non_null(strstr(err, "a supervisor is running there"));
    free(err);
    close(old); /* it ended without a status: lost, as before */
    assert_int_equal(exec_probe(f->run_dir, &status), EXEC_NOT_STARTED);
}

int main(int argc, char **argv)
{
    /* exec_start spawns /proc/self/exe __supervise: this test binary plays drover's part. */
    if (argc > 1 && strcmp(argv[1], "__supervise") == 0)
        exec_supervise_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exit_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_pipe_without_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_lock_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_code_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killing_signal_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_captured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_try_appends_and_clears_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_environment_is_the_specs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_path_is_the_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_executable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_workdir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_refuses_bad_specs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_refuses_a_busy_run_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_limit_kills_the_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_limit_sigkills_after_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_limit_kills_survivors_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normal_exit_leaves_the_group_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_right_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_without_supervisor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_with_the_tasks_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_overrun_is_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_after_time_limit_is_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_lost_and_kill_orphans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_orphans_ignores_an_earlier_boot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_task_outlives_the_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_inherited_descriptors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_goes_through_pipes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_cut_when_the_log_cannot_grow, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reserved_status_is_not_a_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_variants_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_survives_a_full_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leftover_output_is_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_umask, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
