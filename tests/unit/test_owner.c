/* Tasks run as their owners: the supervisor's privilege drop (exec/identity.c), the daemon's
 * preparation of an owner's directories against planted links, and the workdir check at submit
 * (daemon/owner.c). Needs root, to create a real user and group (useradd, removed at the end);
 * skipped otherwise. The test process plays the daemon: it calls exec_start and reaps the
 * supervisor. Waits poll a condition under a deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/owner.h"
#include "exec/exec-internal.h"

#define DEADLINE_MS 20000
/* Account changes take turns with the other tests that make users (tests/e2e/lib.sh). */
#define ACCOUNTS "flock /tmp/drover-tests-accounts.lock "

static char user[32], group[32], base[64];
static uid_t user_uid;
static gid_t user_gid, extra_gid;
static bool have_user;

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int setup_all(void **state)
{
    (void)state;
    if (geteuid() != 0)
        return 0;
    snprintf(user, sizeof user, "drvtst_o%ld", (long)getpid());
    snprintf(group, sizeof group, "drvtst_g%ld", (long)getpid());
    snprintf(base, sizeof base, "/tmp/drvtst-owner-XXXXXX");
    if (mkdtemp(base) == NULL || chmod(base, 0755) == -1)
        return -1;
    if (run(ACCOUNTS "groupadd %s", group) != 0 ||
        run(ACCOUNTS "useradd -M -d %s/home -s /bin/sh -G %s %s", base, group, user) != 0)
        return -1;
    struct passwd *pw = getpwnam(user);
    struct group *gr = getgrnam(group);
    if (pw == NULL || gr == NULL)
        return -1;
    user_uid = pw->pw_uid;
    user_gid = pw->pw_gid;
    extra_gid = gr->gr_gid;
    have_user = true;
    return 0;
}

static int teardown_all(void **state)
{
    (void)state;
    if (user[0] != '\0')
        run(ACCOUNTS "userdel %s 2>/dev/null; " ACCOUNTS "groupdel %s 2>/dev/null", user, group);
    if (base[0] != '\0' && strncmp(base, "/tmp/drvtst-owner-", 18) == 0)
        run("rm -rf '%s'", base);
    return 0;
}

static void need_root(void)
{
    if (!have_user)
        skip(); /* not root: no user to become */
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs argv as uid in a fresh run dir under base/name and waits for its status. */
static void run_task(const char *name, char *const *argv, uid_t uid, const char *workdir,
                     char *run_dir, size_t len, struct exec_status *status)
{
    static char *env[] = {"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "KEEP=1", NULL};
    snprintf(run_dir, len, "%s/%s/1", base, name);
    struct exec_spec spec = {.task_id = 1, .attempt = 1, .argv = argv, .env = env,
                             .workdir = workdir, .run_dir = run_dir, .as_owner = true,
                             .owner_uid = uid, .owner = user};
    pid_t pid;
    char *err = NULL;
    if (exec_start(&spec, &pid, &err) != 0)
        fail_msg("exec_start: %s", err);
    int wstatus;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    int64_t deadline = now_ms() + DEADLINE_MS;
    while (exec_probe(run_dir, status) != EXEC_DONE)
        if (now_ms() > deadline)
            fail_msg("no status in %s", run_dir);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The task's uid, groups, HOME, USER, LOGNAME and cwd are its owner's; the client's other
 * variables are kept; its logs are the owner's, and the run directory the daemon's, 0711. */
static void test_task_runs_as_owner(void **state)
{
    (void)state;
    need_root();
    char *argv[] = {"sh", "-c",
                    "id -u; id -G; echo \"$HOME $USER $LOGNAME $KEEP\"; pwd; echo out >&2", NULL};
    char run_dir[PATH_MAX], path[PATH_MAX + 16], want[512];
    struct exec_status st;
    run_task("as-owner", argv, user_uid, "/tmp", run_dir, sizeof run_dir, &st);
    assert_string_equal(st.exec_error, "");
    assert_int_equal(st.exit_code, 0);
    snprintf(path, sizeof path, "%s/stdout", run_dir);
    snprintf(want, sizeof want, "%ld\n%ld %ld\n%s/home %s %s 1\n/tmp\n", (long)user_uid,
             (long)user_gid, (long)extra_gid, base, user, user);
    assert_string_equal(slurp(path), want);
    struct stat sb;
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", run_dir, i == 0 ? "stdout" : "stderr");
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_uid, user_uid);
        assert_int_equal(sb.st_mode & 0777, 0600);
    }
    assert_int_equal(stat(run_dir, &sb), 0);
    assert_int_equal(sb.st_uid, 0);
    assert_int_equal(sb.st_mode & 0777, 0711);
    snprintf(path, sizeof path, "%s/status", run_dir);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_uid, 0); /* what the daemon trusts stays root's */
}

/* The drop cannot be undone by the task: setuid(0) and reading a root-only file fail. */
static void test_drop_holds(void **state)
{
    (void)state;
    need_root();
    char *argv[] = {"sh", "-c", "cat /etc/shadow >/dev/null 2>&1 && echo READ; "
                                "su -c true root </dev/null >/dev/null 2>&1 && echo SU; echo done",
                    NULL};
    char run_dir[PATH_MAX], path[PATH_MAX + 16];
    struct exec_status st;
    run_task("holds", argv, user_uid, "/tmp", run_dir, sizeof run_dir, &st);
    snprintf(path, sizeof path, "%s/stdout", run_dir);
    assert_string_equal(slurp(path), "done\n");
}

/* An owner who cannot enter the workdir: an exec error, the task never ran. */
static void test_workdir_entered_as_owner(void **state)
{
    (void)state;
    need_root();
    char shut[PATH_MAX], marker[PATH_MAX + 16];
    snprintf(shut, sizeof shut, "%s/shut", base);
    assert_int_equal(mkdir(shut, 0700), 0);
    snprintf(marker, sizeof marker, "%s/ran", base);
    char *argv[] = {"touch", marker, NULL};
    char run_dir[PATH_MAX];
    struct exec_status st;
    run_task("shut", argv, user_uid, shut, run_dir, sizeof run_dir, &st);
    assert_non_null(strstr(st.exec_error, "chdir"));
    assert_non_null(strstr(st.exec_error, "Permission denied"));
    assert_int_equal(access(marker, F_OK), -1);
}

/* An owner with no passwd entry: refused before anything runs, never run as root. */
static void test_unknown_owner_refused(void **state)
{
    (void)state;
    need_root();
    uid_t ghost = 3999999;
    while (getpwuid(ghost) != NULL)
        ghost--;
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof marker, "%s/ghost-ran", base);
    char *argv[] = {"touch", marker, NULL};
    char run_dir[PATH_MAX];
    struct exec_status st;
    run_task("ghost", argv, ghost, "/tmp", run_dir, sizeof run_dir, &st);
    assert_non_null(strstr(st.exec_error, "no such user"));
    assert_int_equal(access(marker, F_OK), -1);
}

/* The daemon's own uid: nothing changes (per-user mode). */
static void test_own_uid_unchanged(void **state)
{
    (void)state;
    need_root();
    char *argv[] = {"sh", "-c", "id -u; echo $HOME", NULL};
    char run_dir[PATH_MAX], path[PATH_MAX + 16];
    struct exec_status st;
    run_task("own", argv, geteuid(), "/tmp", run_dir, sizeof run_dir, &st);
    snprintf(path, sizeof path, "%s/stdout", run_dir);
    assert_string_equal(slurp(path), "0\n/root\n");
    struct stat sb;
    assert_int_equal(stat(run_dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
}

static void test_can_enter(void **state)
{
    (void)state;
    need_root();
    char open_dir[PATH_MAX], shut[PATH_MAX], *why = NULL;
    snprintf(open_dir, sizeof open_dir, "%s/open", base);
    snprintf(shut, sizeof shut, "%s/closed", base);
    assert_int_equal(mkdir(open_dir, 0755), 0);
    assert_int_equal(mkdir(shut, 0700), 0);
    assert_int_equal(daemon_owner_can_enter(user, user_uid, user_gid, open_dir, &why), 1);
    assert_null(why);
    assert_int_equal(daemon_owner_can_enter(user, user_uid, user_gid, shut, &why), 0);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s cannot enter %s: Permission denied", user, shut);
    assert_string_equal(why, want);
    free(why);
    /* A group the user is in (supplementary) opens it. */
    assert_int_equal(chown(shut, 0, extra_gid), 0);
    assert_int_equal(chmod(shut, 0710), 0);
    assert_int_equal(daemon_owner_can_enter(user, user_uid, user_gid, shut, &why), 1);
    /* The daemon's own uid is never checked. */
    assert_int_equal(chmod(shut, 0700), 0);
    assert_int_equal(daemon_owner_can_enter("root", 0, 0, shut, &why), 1);
}

/* What the daemon prepares for an owner, and planted links refused without writing through. */
static void test_prepare(void **state)
{
    (void)state;
    need_root();
    char home[PATH_MAX], path[PATH_MAX + 32], *why = NULL;
    struct stat sb;
    snprintf(home, sizeof home, "%s/state", base);
    assert_int_equal(mkdir(home, 0700), 0);
    assert_int_equal(daemon_owner_prepare(home, 7, user_uid, &why), 0);
    assert_null(why);
    assert_int_equal(stat(home, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0711);
    snprintf(path, sizeof path, "%s/checkpoints/7", home);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_uid, user_uid);
    assert_int_equal(sb.st_mode & 0777, 0700);
    snprintf(path, sizeof path, "%s/metrics/7.jsonl", home);
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sb.st_uid, user_uid);
    snprintf(path, sizeof path, "%s/runs/7", home);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_uid, 0);
    assert_int_equal(sb.st_mode & 0777, 0711);
    /* Again: idempotent. */
    assert_int_equal(daemon_owner_prepare(home, 7, user_uid, &why), 0);

    /* Links planted where the task's entries go: each refused, the target left as it was. */
    char outside[PATH_MAX], target_file[PATH_MAX + 16];
    snprintf(outside, sizeof outside, "%s/outside", base);
    assert_int_equal(mkdir(outside, 0700), 0);
    snprintf(target_file, sizeof target_file, "%s/victim", outside);
    int fd = open(target_file, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof path, "%s/checkpoints/8", home);
    assert_int_equal(symlink(outside, path), 0);
    assert_int_equal(daemon_owner_prepare(home, 8, user_uid, &why), -1);
    assert_non_null(strstr(why, "checkpoints/8"));
    free(why);
    assert_int_equal(stat(outside, &sb), 0);
    assert_int_equal(sb.st_uid, 0);

    snprintf(path, sizeof path, "%s/metrics/9.jsonl", home);
    assert_int_equal(symlink(target_file, path), 0);
    assert_int_equal(daemon_owner_prepare(home, 9, user_uid, &why), -1);
    assert_non_null(strstr(why, "metrics/9.jsonl"));
    free(why);
    assert_int_equal(stat(target_file, &sb), 0);
    assert_int_equal(sb.st_uid, 0);

    /* A hard link to a file elsewhere is refused as well. */
    snprintf(path, sizeof path, "%s/metrics/10.jsonl", home);
    assert_int_equal(link(target_file, path), 0);
    assert_int_equal(daemon_owner_prepare(home, 10, user_uid, &why), -1);
    free(why);
    assert_int_equal(stat(target_file, &sb), 0);
    assert_int_equal(sb.st_uid, 0);

    /* A whole shared directory replaced by a link. */
    char home2[PATH_MAX];
    snprintf(home2, sizeof home2, "%s/state2", base);
    assert_int_equal(mkdir(home2, 0700), 0);
    snprintf(path, sizeof path, "%s/runs", home2);
    assert_int_equal(symlink(outside, path), 0);
    assert_int_equal(daemon_owner_prepare(home2, 1, user_uid, &why), -1);
    free(why);
    snprintf(path, sizeof path, "%s/1", outside);
    assert_int_equal(access(path, F_OK), -1);
}

int main(int argc, char **argv)
{
    /* exec_start spawns /proc/self/exe __supervise: this test binary plays drover's part. */
    if (argc > 1 && strcmp(argv[1], "__supervise") == 0)
        exec_supervise_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_runs_as_owner),
        cmocka_unit_test(test_drop_holds),
        cmocka_unit_test(test_workdir_entered_as_owner),
        cmocka_unit_test(test_unknown_owner_refused),
        cmocka_unit_test(test_own_uid_unchanged),
        cmocka_unit_test(test_can_enter),
        cmocka_unit_test(test_prepare),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
