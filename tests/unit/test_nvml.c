/* gpu/nvml.c against the fake libnvidia-ml.so.1 (tests/fake-nvml), found through
 * LD_LIBRARY_PATH and driven by a state file this test rewrites while NVML is open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpu/nvml.h"
#include "util/xalloc.h"

#define GIB (1ull << 30)
#define CHILD_FLAG "--child-without-nvml"
#define CHILD_FOUND_REAL_NVML 77

static char test_dir[] = "/tmp/drover-test-nvml-XXXXXX";
static char *state_path;
static char *state_text;               /* what the state file holds now */

/* Replaces the state file atomically, as the end-to-end tests do. */
static void state_write(const char *text)
{
    char *tmp = xasprintf("%s.tmp", state_path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, state_path), 0);
    free(tmp);
    char *copy = xstrdup(text);
    free(state_text);
    state_text = copy;
}

static void state_append(const char *line)
{
    char *text = xasprintf("%s%s", state_text ? state_text : "", line);
    state_write(text);
    free(text);
}

static void open_ok(void)
{
    char *err = NULL;
    int rc = nvml_open(&err);
    if (rc != 0)
        fail_msg("nvml_open: %s", err ? err : "(no message)");
    assert_true(nvml_loaded());
}

static struct gpu_sample sample(int index)
{
    struct gpu_sample s;
    assert_int_equal(nvml_sample(index, &s), 0);
    return s;
}

static const struct nvml_proc *find_proc(const struct gpu_sample *s, unsigned pid)
{
    for (int i = 0; i < s->nprocs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    return NULL;
}

static int setup(void **state)
{
    unsetenv("FAKE_NVML_HIDE");
    setenv("FAKE_NVML_STATE", state_path, 1);
    state_write("");
    return 0;
}

static int teardown(void **state)
{
    nvml_close();
    return 0;
}

/* Runs this binary again without LD_LIBRARY_PATH: the fake is then out of reach. */
static int run_without_library(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("LD_LIBRARY_PATH");
        execl(self, self, CHILD_FLAG, (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static int child_without_library(void)
{
    char *err = NULL;
    if (nvml_open(&err) == 0) {
        nvml_close();
        return CHILD_FOUND_REAL_NVML; /* this machine has a real driver */
    }
    int ok = err && strstr(err, "libnvidia-ml.so.1") && !nvml_loaded();
    free(err);
    return ok ? 0 : 1;
}

static void test_absent(void **state)
{
    char *err = NULL;
    struct gpu_inventory inv;
    struct gpu_sample s;

    unsetenv("FAKE_NVML_STATE"); /* the fake's nvmlInit then fails: LIBRARY_NOT_FOUND */
    assert_int_equal(nvml_open(&err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "nvmlInit"));
    free(err);
    assert_false(nvml_loaded());
    assert_int_equal(nvml_inventory(&inv), -1);
    assert_int_equal(nvml_sample(0, &s), -1);
    assert_false(s.ok);
    assert_int_equal(s.util, -1);
    assert_int_equal(nvml_link(0, 1), NVML_LINK_SYSTEM);
    assert_int_equal(nvml_open(NULL), -1); /* no message wanted: nothing leaks */

    setenv("FAKE_NVML_STATE", state_path, 1);
    state_write("init 9\ngpu 0 mem_total=1G\n");
    err = NULL;
    assert_int_equal(nvml_open(&err), -1);
    assert_non_null(strstr(err, "error 9"));
    free(err);
    assert_false(nvml_loaded());

    int rc = run_without_library();
    if (rc == CHILD_FOUND_REAL_NVML)
        skip(); /* a real libnvidia-ml.so.1 is installed: absence cannot be shown here */
    assert_int_equal(rc, 0);
}

static void test_inventory(void **state)
{
    struct gpu_inventory inv;
    state_write("# two GPUs and a gap\n"
                "gpu 0 name=\"Fake H100 80GB HBM3\" uuid=GPU-0000-aaaa mem_total=80G "
                "mem_used=1G\n"
                "gpu 1 name=FakeA10 uuid=GPU-1111-bbbb mem_total=24G\n"
                "gpu 3 name=\"Fake L4\" uuid=GPU-3333 mem_total=23034M\n"
                "bogus line here\n");
    open_ok();
    assert_int_equal(nvml_inventory(&inv), 4);
    assert_int_equal(inv.count, 4);
    assert_string_equal(inv.source, "nvml");
    assert_string_equal(inv.gpu[0].name, "Fake H100 80GB HBM3");
    assert_string_equal(inv.gpu[0].uuid, "GPU-0000-aaaa");
    assert_true(inv.gpu[0].mem_total == 80 * GIB);
    assert_string_equal(inv.gpu[1].name, "FakeA10");
    assert_string_equal(inv.gpu[1].uuid, "GPU-1111-bbbb");
    assert_true(inv.gpu[1].mem_total == 24 * GIB);
    /* The gap keeps its place with nothing known, so indices stay NVML's. */
    assert_int_equal(inv.gpu[2].index, 2);
    assert_string_equal(inv.gpu[2].name, "");
    assert_true(inv.gpu[2].mem_total == 0);
    assert_int_equal(inv.gpu[3].index, 3);
    assert_true(inv.gpu[3].mem_total == 23034ull << 20);
}

static void test_sample_figures(void **state)
{
    struct gpu_sample s;
    state_write("gpu 0 name=A uuid=GPU-a mem_total=80G mem_used=12G util=35 mem_util=10 "
                "temp=55 power=250000 ecc=2\n");
    open_ok();
    s = sample(0);
    assert_true(s.ok);
    assert_true(s.mem_used == 12 * GIB);
    assert_true(s.mem_total == 80 * GIB);
    assert_int_equal(s.util, 35);
    assert_int_equal(s.mem_util, 10);
    assert_int_equal(s.temp_c, 55);
    assert_int_equal(s.power_mw, 250000);
    assert_true(s.ecc_uncorrected == 2);
    assert_true(s.xid == 0);
    assert_int_equal(s.nprocs, 0);

    s = sample(5); /* no such device */
    assert_false(s.ok);
    assert_true(s.mem_total == NVML_UNKNOWN_U64);
    assert_int_equal(nvml_sample(-1, &s), -1);
    assert_int_equal(nvml_sample(GPU_MAX, &s), -1);
}

static void test_unsupported_figures(void **state)
{
    struct gpu_sample s;
    state_write("gpu 0 mem_total=16G\n"
                "gpu 1 mem_total=80G util=50 temp=60 power=300000 ecc=0\n"
                "gpu 2 util=7\n");
    setenv("FAKE_NVML_HIDE", "nvmlDeviceGetPowerUsage,nvmlDeviceGetTemperature", 1);
    open_ok();

    s = sample(0); /* only memory given */
    assert_true(s.ok);
    assert_true(s.mem_total == 16 * GIB);
    assert_true(s.mem_used == 0);
    assert_int_equal(s.util, -1);
    assert_int_equal(s.mem_util, -1);
    assert_int_equal(s.temp_c, -1);
    assert_int_equal(s.power_mw, -1);
    assert_true(s.ecc_uncorrected == NVML_UNKNOWN_U64);

    s = sample(1); /* temperature and power hidden */
    assert_true(s.ok);
    assert_int_equal(s.util, 50);
    assert_int_equal(s.mem_util, 0);
    assert_int_equal(s.temp_c, -1);
    assert_int_equal(s.power_mw, -1);
    assert_true(s.ecc_uncorrected == 0);

    s = sample(2); /* memory info not supported: unknown, but the GPU answers */
    assert_true(s.ok);
    assert_true(s.mem_total == NVML_UNKNOWN_U64);
    assert_true(s.mem_used == NVML_UNKNOWN_U64);
    assert_int_equal(s.util, 7);

    setenv("FAKE_NVML_HIDE",
           "nvmlDeviceGetComputeRunningProcesses_v3,nvmlDeviceGetComputeRunningProcesses_v2,"
           "nvmlDeviceGetComputeRunningProcesses,nvmlDeviceGetGraphicsRunningProcesses_v3,"
           "nvmlDeviceGetGraphicsRunningProcesses_v2,nvmlDeviceGetGraphicsRunningProcesses,"
           "nvmlDeviceGetMemoryInfo",
           1);
    s = sample(1);
    assert_true(s.ok);
    assert_int_equal(s.nprocs, -1); /* no list answered: unknown, not zero */
    assert_true(s.mem_total == NVML_UNKNOWN_U64);
    assert_int_equal(s.util, 50);
}

static void check_procs(void)
{
    struct gpu_sample s = sample(0);
    const struct nvml_proc *p;
    assert_true(s.ok);
    assert_int_equal(s.nprocs, 4);
    assert_non_null(p = find_proc(&s, 100));
    assert_true(p->mem == 1 * GIB);
    assert_non_null(p = find_proc(&s, 200));
    assert_true(p->mem == 2 * GIB);
    assert_non_null(p = find_proc(&s, 300)); /* in both lists, once here */
    assert_true(p->mem == 3 * GIB);
    assert_non_null(p = find_proc(&s, 400));
    assert_true(p->mem == NVML_UNKNOWN_U64);
    assert_null(find_proc(&s, 500));

    s = sample(1);
    assert_int_equal(s.nprocs, 1);
    assert_int_equal(s.procs[0].pid, 500);
    assert_true(s.procs[0].mem == 5 * GIB);
}

static void test_processes(void **state)
{
    state_write("gpu 0 mem_total=80G\n"
                "gpu 1 mem_total=80G\n"
                "proc 0 100 1G\n"
                "proc 0 200 2G graphics\n"
                "proc 0 300 3G both\n"
                "proc 0 400 - compute\n"
                "proc 1 500 5G\n");
    open_ok();
    check_procs();

    /* An older driver: only the plain symbols, with the v1 entry layout. */
    setenv("FAKE_NVML_HIDE",
           "nvmlDeviceGetComputeRunningProcesses_v3,nvmlDeviceGetComputeRunningProcesses_v2,"
           "nvmlDeviceGetGraphicsRunningProcesses_v3,nvmlDeviceGetGraphicsRunningProcesses_v2",
           1);
    check_procs();
    unsetenv("FAKE_NVML_HIDE");

    /* More than fit in one buffer: NVML answers INSUFFICIENT_SIZE first. */
    char *text = xstrdup("gpu 0 mem_total=80G\n");
    for (int i = 0; i < NVML_MAX_PROCS + 6; i++) {
        char *more = xasprintf("%sproc 0 %d 1M both\n", text, 1000 + i);
        free(text);
        text = more;
    }
    state_write(text);
    free(text);
    struct gpu_sample s = sample(0);
    assert_int_equal(s.nprocs, NVML_MAX_PROCS);
    for (int i = 0; i < s.nprocs; i++) {
        assert_true(s.procs[i].pid >= 1000 && s.procs[i].pid < 1000 + NVML_MAX_PROCS + 6);
        for (int j = 0; j < i; j++)
            assert_true(s.procs[i].pid != s.procs[j].pid);
    }
}

static void test_topology(void **state)
{
    state_write("gpu 0 mem_total=1G\ngpu 1 mem_total=1G\ngpu 2 mem_total=1G\n"
                "gpu 3 mem_total=1G\ngpu 4 mem_total=1G\n"
                "link 0 1 nvlink\n"
                "link 0 2 switch\n"
                "link 0 3 hostbridge\n"
                "link 1 2 socket\n"
                "link 1 3 system\n"
                "link 2 3 multiple\n");
    open_ok();
    assert_int_equal(nvml_link(0, 1), NVML_LINK_NVLINK);
    assert_int_equal(nvml_link(1, 0), NVML_LINK_NVLINK);
    assert_int_equal(nvml_link(0, 2), NVML_LINK_SWITCH);
    assert_int_equal(nvml_link(2, 0), NVML_LINK_SWITCH);
    assert_int_equal(nvml_link(0, 3), NVML_LINK_HOSTBRIDGE);
    assert_int_equal(nvml_link(1, 2), NVML_LINK_SOCKET);
    assert_int_equal(nvml_link(1, 3), NVML_LINK_SYSTEM);
    assert_int_equal(nvml_link(2, 3), NVML_LINK_SWITCH);
    assert_int_equal(nvml_link(0, 4), NVML_LINK_SYSTEM); /* NVML does not say */
    assert_int_equal(nvml_link(0, 9), NVML_LINK_SYSTEM); /* no such device */
    assert_int_equal(nvml_link(-1, 0), NVML_LINK_SYSTEM);

    setenv("FAKE_NVML_HIDE", "nvmlDeviceGetP2PStatus", 1);
    assert_int_equal(nvml_link(0, 1), NVML_LINK_SYSTEM); /* PCIe path only */
    assert_int_equal(nvml_link(0, 2), NVML_LINK_SWITCH);

    assert_string_equal(nvml_link_name(NVML_LINK_NVLINK), "NVLink");
    assert_string_equal(nvml_link_name(NVML_LINK_SWITCH), "PCIe switch");
    assert_string_equal(nvml_link_name(NVML_LINK_HOSTBRIDGE), "host bridge");
    assert_string_equal(nvml_link_name(NVML_LINK_SOCKET), "CPU socket");
    assert_string_equal(nvml_link_name(NVML_LINK_SYSTEM), "system");
}

static void test_xid_events(void **state)
{
    state_write("gpu 0 mem_total=80G\ngpu 1 mem_total=80G\n"
                "xid 0 13\n"); /* from before drover looked: not an event for it */
    open_ok();
    assert_true(sample(0).xid == 0);
    assert_true(sample(1).xid == 0);

    state_append("xid 1 79\n");
    assert_true(sample(0).xid == 0); /* drains GPU 1's event, keeps it for GPU 1 */
    assert_true(sample(1).xid == 79);
    assert_true(sample(1).xid == 0); /* once */

    state_append("xid 0 31\nxid 0 43\n");
    assert_true(sample(1).xid == 0);
    assert_true(sample(0).xid == 43); /* the last since the previous sample */
    assert_true(sample(0).xid == 0);

    state_append("xid 0 43\n"); /* the same code again is a new event */
    assert_true(sample(0).xid == 43);

    /* Rewriting the file with the same xid lines raises nothing. */
    char *text = xasprintf("%s# touched\n", state_text);
    state_write(text);
    free(text);
    assert_true(sample(0).xid == 0);
    assert_true(sample(1).xid == 0);

    /* A GPU that falls off the bus still reports why. */
    state_write("gpu 0 mem_total=80G\ngpu 1 mem_total=80G lost=1\n"
                "xid 0 13\nxid 1 79\nxid 0 31\nxid 0 43\nxid 0 43\nxid 1 79\n");
    struct gpu_sample s = sample(1);
    assert_false(s.ok);
    assert_true(s.xid == 79);
}

static void test_lost_gpu(void **state)
{
    static const char *healthy = "gpu 0 name=A mem_total=80G mem_used=3G util=20 temp=40\n"
                                 "gpu 1 name=B mem_total=80G util=5\n"
                                 "link 0 1 nvlink\n";
    struct gpu_sample s;
    struct gpu_inventory inv;
    state_write(healthy);
    open_ok();
    assert_true(sample(0).ok);

    state_write("gpu 0 name=A mem_total=80G mem_used=3G util=20 temp=40 lost=1\n"
                "gpu 1 name=B mem_total=80G util=5\n"
                "link 0 1 nvlink\n");
    s = sample(0);
    assert_false(s.ok);
    assert_true(s.mem_used == NVML_UNKNOWN_U64);
    assert_int_equal(s.util, -1);
    assert_int_equal(s.temp_c, -1);
    assert_true(sample(1).ok);
    assert_int_equal(nvml_link(0, 1), NVML_LINK_SYSTEM);
    assert_int_equal(nvml_inventory(&inv), 2);
    assert_string_equal(inv.gpu[0].name, "");
    assert_string_equal(inv.gpu[1].name, "B");
    assert_false(sample(0).ok); /* stays lost */

    state_write(healthy);
    s = sample(0);
    assert_true(s.ok);
    assert_true(s.mem_used == 3 * GIB);
    assert_int_equal(s.temp_c, 40);
    assert_int_equal(nvml_link(0, 1), NVML_LINK_NVLINK);
}

static void test_state_rewritten(void **state)
{
    struct gpu_inventory inv;
    state_write("gpu 0 name=A mem_total=80G mem_used=1G util=10\n");
    open_ok();
    assert_true(sample(0).mem_used == 1 * GIB);
    assert_int_equal(nvml_inventory(&inv), 1);

    state_write("gpu 0 name=A mem_total=80G mem_used=5G util=90\n"
                "gpu 1 name=B mem_total=40G\n");
    struct gpu_sample s = sample(0);
    assert_true(s.mem_used == 5 * GIB);
    assert_int_equal(s.util, 90);
    assert_int_equal(nvml_inventory(&inv), 2);
    assert_string_equal(inv.gpu[1].name, "B");
    assert_true(sample(1).ok);

    state_write("gpu 0 name=A mem_total=80G\n");
    assert_int_equal(nvml_inventory(&inv), 1);
    assert_false(sample(1).ok);

    unlink(state_path); /* gone: NVML still answers, with no devices */
    assert_int_equal(nvml_inventory(&inv), 0);
    assert_false(sample(0).ok);
}

static void test_reopen(void **state)
{
    struct gpu_inventory inv;
    state_write("gpu 0 name=A mem_total=8G util=1\n");
    open_ok();
    open_ok(); /* a second open does nothing */
    assert_int_equal(nvml_inventory(&inv), 1);
    nvml_close();
    assert_false(nvml_loaded());
    assert_int_equal(nvml_inventory(&inv), -1);
    nvml_close(); /* harmless */

    state_write("gpu 0 name=A mem_total=8G util=2\ngpu 1 name=B mem_total=8G\n"
                "xid 1 48\n");
    open_ok();
    assert_int_equal(nvml_inventory(&inv), 2);
    assert_int_equal(sample(0).util, 2);
    state_append("xid 1 94\n");
    assert_true(sample(1).xid == 94); /* events registered again after the reopen */
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], CHILD_FLAG) == 0)
        return child_without_library();
    if (!mkdtemp(test_dir)) {
        perror("mkdtemp");
        return 1;
    }
    state_path = xasprintf("%s/state", test_dir);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inventory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsupported_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topology, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xid_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);

    unlink(state_path);
    char *tmp = xasprintf("%s.tmp", state_path);
    unlink(tmp);
    free(tmp);
    rmdir(test_dir);
    free(state_path);
    free(state_text);
    return failed;
}
