/* The simulator's readers: traces (itp, alibaba2023, csv), node lists and cluster specs. Each
 * test writes small files into a temporary directory; one reads the real traces when present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/trace.h"
#include "util/xalloc.h"

static char dir[] = "/tmp/drover-test-trace-XXXXXX";
static char path[512];

static int group_setup(void **state)
{
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char file[PATH_MAX];
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        unlink(file);
    }
    closedir(d);
    return rmdir(dir);
}

/* Writes len bytes of text to dir/name; returns the path (a static buffer, reused by the next
 * call). */
static const char *write_bytes(const char *name, const char *text, size_t len)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static const char *write_text(const char *name, const char *text)
{
    return write_bytes(name, text, strlen(text));
}

/* Reads text as format and expects the error "PATH:<want>", where want starts with the line. */
static void expect_trace_error(enum sim_format format, const char *text, const char *want)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, expected[1024];
    const char *p = write_text("bad.csv", text);
    snprintf(expected, sizeof expected, "%s:%s", p, want);
    assert_int_equal(sim_trace_read(p, format, false, &types, &trace, &err), -1);
    assert_non_null(err);
    if (strcmp(err, expected) != 0)
        print_error("input:\n%s\n", text);
    assert_string_equal(err, expected);
    assert_null(trace.jobs);
    assert_int_equal(trace.n, 0);
    free(err);
    sim_types_free(&types);
}

static void test_format_names(void **state)
{
    enum sim_format f;
    const char *err = NULL;
    assert_int_equal(sim_format_parse("itp", &f, &err), 0);
    assert_int_equal(f, SIM_FORMAT_ITP);
    assert_int_equal(sim_format_parse("alibaba2023", &f, &err), 0);
    assert_int_equal(f, SIM_FORMAT_ALIBABA2023);
    assert_int_equal(sim_format_parse("csv", &f, &err), 0);
    assert_int_equal(f, SIM_FORMAT_CSV);
    static const char *const bad[] = {"", "ITP", "csv ", "alibaba", "auto", "itp,csv"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(sim_format_parse(bad[i], &f, &err), -1);
        assert_non_null(err);
    }
}

static void test_types(void **state)
{
    struct sim_types types = {0};
    char name[16];
    assert_int_equal(sim_types_intern(&types, "V100"), 0);
    assert_int_equal(sim_types_intern(&types, "T4"), 1);
    assert_int_equal(sim_types_intern(&types, "V100"), 0);
    assert_int_equal(sim_types_intern(&types, ""), 2);
    for (int i = 3; i < SIM_MAX_TYPES; i++) {
        snprintf(name, sizeof name, "type%d", i);
        assert_int_equal(sim_types_intern(&types, name), i);
    }
    assert_int_equal(types.n, SIM_MAX_TYPES);
    assert_int_equal(sim_types_intern(&types, "one-too-many"), -1);
    assert_int_equal(sim_types_intern(&types, "T4"), 1); /* a full table still finds its own */
    sim_types_free(&types);
    assert_int_equal(types.n, 0);
    sim_types_free(&types);
    sim_types_free(NULL);
}

static void test_itp(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL;
    const char *p = write_text("itp.csv", "job_id,submission_time,duration,num_gpu\n"
                                          "late,300,60,8\n"
                                          "early,100.5,0.0005,1\n"
                                          "tie-b,200,10,2\n"
                                          "tie-a,200,1.2345,0\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, false, &types, &trace, &err), 0);
    assert_null(err);
    assert_int_equal(trace.n, 4);
    assert_int_equal(trace.skipped_pending, 0);
    assert_int_equal(trace.skipped_bad, 0);
    assert_null(trace.first_bad);
    /* sorted by submit time, then by line */
    assert_string_equal(trace.jobs[0].id, "early");
    assert_int_equal(trace.jobs[0].submit_ms, 100500);
    assert_int_equal(trace.jobs[0].duration_ms, 1); /* 0.5 ms rounds up */
    assert_int_equal(trace.jobs[0].line, 3);
    assert_string_equal(trace.jobs[1].id, "tie-b");
    assert_int_equal(trace.jobs[1].line, 4);
    assert_string_equal(trace.jobs[2].id, "tie-a");
    assert_int_equal(trace.jobs[2].duration_ms, 1235);
    assert_int_equal(trace.jobs[2].gpus, 0);
    assert_string_equal(trace.jobs[3].id, "late");
    assert_int_equal(trace.jobs[3].submit_ms, 300000);
    assert_int_equal(trace.jobs[3].duration_ms, 60000);
    assert_int_equal(trace.jobs[3].gpus, 8);
    for (size_t i = 0; i < trace.n; i++) {
        assert_int_equal(trace.jobs[i].gpu_milli, 1000);
        assert_int_equal(trace.jobs[i].priority, 0);
        assert_true(trace.jobs[i].gpu_types == 0);
        assert_int_equal(trace.jobs[i].cpu_milli, 0);
        assert_true(trace.jobs[i].mem_bytes == 0);
    }
    sim_trace_free(&trace);
    assert_null(trace.jobs);

    /* no header, CRLF line ends, no final newline */
    p = write_text("itp2.csv", "b,5,1,4\r\na,1e1,2,1");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 2);
    assert_string_equal(trace.jobs[0].id, "b");
    assert_int_equal(trace.jobs[0].gpus, 4);
    assert_string_equal(trace.jobs[1].id, "a");
    assert_int_equal(trace.jobs[1].submit_ms, 10000);
    assert_int_equal(trace.jobs[1].line, 2);
    sim_trace_free(&trace);
    assert_int_equal(types.n, 0);
    sim_types_free(&types);
}

static void test_csv(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL;
    const char *p = write_text("jobs.csv", "# drover trace\n"
                                           "\n"
                                           "job_id,submit_time,duration,gpus,gpu_mem_fraction,"
                                           "priority\n"
                                           "whole,0,10,2\n"
                                           "# a comment between rows\n"
                                           "half,1,20,1,0.5\n"
                                           "\n"
                                           "tiny,2,30,1,0.0001,-5\n"
                                           "full,3,40,4,1,1000000\n"
                                           "cpu,4,50,0,0.25,-1000000\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_CSV, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 5);
    assert_string_equal(trace.jobs[0].id, "whole");
    assert_int_equal(trace.jobs[0].line, 4);
    assert_int_equal(trace.jobs[0].gpus, 2);
    assert_int_equal(trace.jobs[0].gpu_milli, 1000);
    assert_int_equal(trace.jobs[0].priority, 0);
    assert_int_equal(trace.jobs[1].gpu_milli, 500);
    assert_int_equal(trace.jobs[1].line, 6);
    assert_int_equal(trace.jobs[2].gpu_milli, 1); /* clamped up: some share is asked for */
    assert_int_equal(trace.jobs[2].priority, -5);
    assert_int_equal(trace.jobs[2].line, 8);
    assert_int_equal(trace.jobs[3].gpu_milli, 1000);
    assert_int_equal(trace.jobs[3].priority, 1000000);
    assert_int_equal(trace.jobs[3].duration_ms, 40000);
    assert_int_equal(trace.jobs[4].gpus, 0);
    assert_int_equal(trace.jobs[4].gpu_milli, 1000);
    assert_int_equal(trace.jobs[4].priority, -1000000);
    sim_trace_free(&trace);

    /* no header; a header is recognised only as the first row */
    p = write_text("jobs2.csv", "x,7,1,1\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_CSV, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 1);
    assert_int_equal(trace.jobs[0].submit_ms, 7000);
    sim_trace_free(&trace);
    expect_trace_error(SIM_FORMAT_CSV, "x,7,1,1\njob_id,submit_time,duration,gpus\n",
                       "2: submit_time \"submit_time\" is not a number of seconds >= 0");
    sim_types_free(&types);
}

/* The csv trace's user column: names interned in order of first appearance, rows without one
 * "-" (only when some row names a user). */
static void test_csv_users(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL;
    const char *p = write_text("users.csv", "job_id,submit_time,duration,gpus,gpu_mem_fraction,"
                                            "priority,user\n"
                                            "a,0,10,1,1,0,alice\n"
                                            "b,1,10,1,0.5,3,bob\n"
                                            "c,2,10,1\n"
                                            "d,3,10,1,1,0,alice\n"
                                            "e,4,10,1,1,0,\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_CSV, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 5);
    assert_int_equal(trace.nusers, 3);
    assert_string_equal(trace.users[0], "alice");
    assert_string_equal(trace.users[1], "bob");
    assert_string_equal(trace.users[2], "-");
    assert_int_equal(trace.jobs[0].user, 0);
    assert_int_equal(trace.jobs[0].gpu_milli, 1000);
    assert_int_equal(trace.jobs[0].priority, 0);
    assert_int_equal(trace.jobs[1].user, 1);
    assert_int_equal(trace.jobs[1].gpu_milli, 500);
    assert_int_equal(trace.jobs[1].priority, 3);
    assert_int_equal(trace.jobs[2].user, 2);
    assert_int_equal(trace.jobs[3].user, 0);
    assert_int_equal(trace.jobs[4].user, 2); /* an empty name is "-" too */
    sim_trace_free(&trace);

    /* No user anywhere: no users at all, every job user 0. */
    p = write_text("nousers.csv", "a,0,10,1\nb,1,10,1,1,0\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_CSV, false, &types, &trace, &err), 0);
    assert_int_equal(trace.nusers, 0);
    assert_null(trace.users);
    assert_int_equal(trace.jobs[0].user, 0);
    assert_int_equal(trace.jobs[1].user, 0);
    sim_trace_free(&trace);
    expect_trace_error(SIM_FORMAT_CSV, "a,0,10,1,1,0,alice,more\n",
                       "1: expected 4 to 7 fields (job_id,submit_time,duration,gpus"
                       "[,gpu_mem_fraction,priority,user]), found 8");
    sim_types_free(&types);
}

/* Synthetic users: deterministic for a seed, the heavy user's share of the work (GPU-time)
 * honoured, the others alike, the trace's own users replaced. */
static void test_assign_users(void **state)
{
    struct sim_trace trace = {0};
    const char *why;
    trace.n = 10000;
    trace.jobs = xcalloc(trace.n, sizeof *trace.jobs);
    for (size_t i = 0; i < trace.n; i++) {
        trace.jobs[i].duration_ms = 1000 * (int64_t)(1 + i % 7);
        trace.jobs[i].gpus = 1 + (int)(i % 3);
        trace.jobs[i].gpu_milli = i % 5 == 0 ? 500 : 1000;
    }
    assert_int_equal(sim_trace_assign_users(&trace, 10, 0.5, 42, &why), 0);
    assert_int_equal(trace.nusers, 10);
    assert_string_equal(trace.users[0], "user1");
    assert_string_equal(trace.users[9], "user10");
    size_t count[10] = {0};
    double work[10] = {0}, total = 0;
    uint32_t first[20];
    for (size_t i = 0; i < trace.n; i++) {
        const struct sim_job *j = &trace.jobs[i];
        assert_true(j->user < 10);
        double w = (double)j->duration_ms * j->gpus * j->gpu_milli / 1000;
        count[j->user]++;
        work[j->user] += w;
        total += w;
        if (i < 20)
            first[i] = j->user;
    }
    assert_true(work[0] / total > 0.499 && work[0] / total < 0.501);
    size_t light = (trace.n - count[0]) / 9;
    for (int u = 1; u < 10; u++)
        assert_in_range(count[u], light * 3 / 4, light * 5 / 4);
    /* The same seed, the same assignment (and the previous names are replaced, not added). */
    assert_int_equal(sim_trace_assign_users(&trace, 10, 0.5, 42, &why), 0);
    assert_int_equal(trace.nusers, 10);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(trace.jobs[i].user, first[i]);
    /* Another seed, another draw of the light users. */
    assert_int_equal(sim_trace_assign_users(&trace, 10, 0.5, 43, &why), 0);
    bool differs = false;
    for (size_t i = 0; i < 20; i++)
        differs |= trace.jobs[i].user != first[i];
    assert_true(differs);
    assert_int_equal(sim_trace_assign_users(&trace, 3, 1, 1, &why), 0);
    for (size_t i = 0; i < trace.n; i++)
        assert_int_equal(trace.jobs[i].user, 0);
    assert_int_equal(sim_trace_assign_users(&trace, 3, 0, 1, &why), 0);
    for (size_t i = 0; i < trace.n; i++)
        assert_true(trace.jobs[i].user != 0);
    assert_int_equal(sim_trace_assign_users(&trace, 0, 0.5, 1, &why), -1);
    assert_string_equal(why, "the number of users must be from 1 to 1000");
    assert_int_equal(sim_trace_assign_users(&trace, 3, 1.5, 1, &why), -1);
    assert_string_equal(why, "the heavy user's share must be from 0 to 1");
    sim_trace_free(&trace);
}

static const char ali_header[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                 "pod_phase,creation_time,deletion_time,scheduled_time\n";

static void test_alibaba(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, text[2048];
    assert_int_equal(sim_types_intern(&types, "T4"), 0); /* e.g. from the node list */
    snprintf(text, sizeof text, "%s"
             "pod-0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
             "pod-1,6000,12288,1,460,V100M16|V100M32,LS,Succeeded,427061,427161.5,427062\n"
             "pod-2,11908,47104,1,1000,,BE,Pending,10001278,10001403,\n"
             "pod-3,20000,65536,0,0,,LS,Failed,50,90,60\n"
             "pod-4,1000,1024,8,1000,T4,BE,Running,40,40,40\n"
             "pod-5,1000,1024,2,500,T4|V100M32|,BE,Pending,30,35,31\n",
             ali_header);
    const char *p = write_text("pods.csv", text);
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ALIBABA2023, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 4);
    assert_int_equal(trace.skipped_pending, 2);
    assert_int_equal(trace.skipped_bad, 0);

    const struct sim_job *j = &trace.jobs[0];
    assert_string_equal(j->id, "pod-0");
    assert_int_equal(j->submit_ms, 0);
    assert_int_equal(j->duration_ms, 12537496000LL);
    assert_int_equal(j->gpus, 1);
    assert_int_equal(j->gpu_milli, 1000);
    assert_int_equal(j->cpu_milli, 12000);
    assert_true(j->mem_bytes == 16384ull << 20);
    assert_true(j->gpu_types == 0);
    assert_int_equal(j->line, 2);

    j = &trace.jobs[1];
    assert_string_equal(j->id, "pod-4");
    assert_int_equal(j->duration_ms, 0);
    assert_int_equal(j->gpus, 8);
    assert_true(j->gpu_types == 1ull << 0);

    j = &trace.jobs[2];
    assert_string_equal(j->id, "pod-3");
    assert_int_equal(j->submit_ms, 50000);
    assert_int_equal(j->duration_ms, 30000); /* deletion - scheduled, not - creation */
    assert_int_equal(j->gpus, 0);
    assert_int_equal(j->gpu_milli, 1000);

    j = &trace.jobs[3];
    assert_string_equal(j->id, "pod-1");
    assert_int_equal(j->duration_ms, 99500);
    assert_int_equal(j->gpu_milli, 460);
    assert_int_equal(types.n, 3); /* pod-5 was skipped before its types were read */
    assert_string_equal(types.name[1], "V100M16");
    assert_string_equal(types.name[2], "V100M32");
    assert_true(j->gpu_types == ((1ull << 1) | (1ull << 2)));
    sim_trace_free(&trace);

    /* no header at all */
    p = write_text("pods2.csv", "pod-9,1,1,1,1,,LS,Running,5,6,5\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ALIBABA2023, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 1);
    assert_int_equal(trace.jobs[0].gpu_milli, 1);
    sim_trace_free(&trace);
    sim_types_free(&types);
}

static void test_alibaba_header_checked(void **state)
{
    expect_trace_error(SIM_FORMAT_ALIBABA2023,
                       "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                       "openb-pod-0000,12000,16384,1,1000\n",
                       "1: alibaba2023 needs the columns name,cpu_milli,memory_mib,num_gpu,"
                       "gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                       "scheduled_time (this file has no times)");
    expect_trace_error(SIM_FORMAT_ALIBABA2023,
                       "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                       "creation_time,scheduled_time,deletion_time\n",
                       "1: alibaba2023 needs the columns name,cpu_milli,memory_mib,num_gpu,"
                       "gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                       "scheduled_time (this file has name,cpu_milli,memory_mib,num_gpu,"
                       "gpu_milli,gpu_spec,qos,pod_phase,creation_time,scheduled_time,"
                       "deletion_time)");
    expect_trace_error(SIM_FORMAT_ITP, "job_id,submit_time,duration,gpus,gpu_mem_fraction\n",
                       "1: itp needs the columns job_id,submission_time,duration,num_gpu "
                       "(this file has job_id,submit_time,duration,gpus,gpu_mem_fraction)");
}

static void test_bad_rows(void **state)
{
    static const struct {
        enum sim_format format;
        const char *row;
        const char *want; /* after "PATH:LINE: " */
    } cases[] = {
        {SIM_FORMAT_ITP, "a,1,2", "expected 4 fields (job_id,submission_time,duration,num_gpu), "
                                  "found 3"},
        {SIM_FORMAT_ITP, "a,1,2,3,4", "expected 4 fields (job_id,submission_time,duration,"
                                      "num_gpu), found 5"},
        {SIM_FORMAT_ITP, "a,1,-3,1", "duration \"-3\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,-1,3,1", "submission_time \"-1\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,nan,3,1", "submission_time \"nan\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,1,inf,1", "duration \"inf\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,,3,1", "submission_time \"\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a, 1,3,1", "submission_time \" 1\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,0x10,3,1", "submission_time \"0x10\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,1,3s,1", "duration \"3s\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,1,1e400,1", "duration \"1e400\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ITP, "a,1e14,3,1", "submission_time \"1e14\" is too large"},
        {SIM_FORMAT_ITP, "a,1,3,", "num_gpu \"\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ITP, "a,1,3,1.5", "num_gpu \"1.5\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ITP, "a,1,3,-1", "num_gpu \"-1\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ITP, "a,1,3,4097", "num_gpu \"4097\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ITP, "a,1,3,99999999999999999999",
         "num_gpu \"99999999999999999999\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ITP, ",1,3,1", "job_id is empty"},
        {SIM_FORMAT_ITP, "a,\"1\",3,1", "quoted fields are not supported"},
        {SIM_FORMAT_CSV, "a,1,2", "expected 4 to 7 fields (job_id,submit_time,duration,gpus"
                                  "[,gpu_mem_fraction,priority,user]), found 3"},
        {SIM_FORMAT_CSV, "a,1,2,1,0.5,0,u,8", "expected 4 to 7 fields (job_id,submit_time,"
                                              "duration,gpus[,gpu_mem_fraction,priority,"
                                              "user]), found 8"},
        {SIM_FORMAT_CSV, "a,1,-2,1", "duration \"-2\" is not a number of seconds >= 0"},
        {SIM_FORMAT_CSV, "a,1,2,x", "gpus \"x\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_CSV, "a,1,2,1,0", "gpu_mem_fraction \"0\" is not a number in (0,1]"},
        {SIM_FORMAT_CSV, "a,1,2,1,1.5", "gpu_mem_fraction \"1.5\" is not a number in (0,1]"},
        {SIM_FORMAT_CSV, "a,1,2,1,-0.5", "gpu_mem_fraction \"-0.5\" is not a number in (0,1]"},
        {SIM_FORMAT_CSV, "a,1,2,1,", "gpu_mem_fraction \"\" is not a number in (0,1]"},
        {SIM_FORMAT_CSV, "a,1,2,1,nan", "gpu_mem_fraction \"nan\" is not a number in (0,1]"},
        {SIM_FORMAT_CSV, "a,1,2,1,1,1000001",
         "priority \"1000001\" is not a whole number from -1000000 to 1000000"},
        {SIM_FORMAT_CSV, "a,1,2,1,1,1.0",
         "priority \"1.0\" is not a whole number from -1000000 to 1000000"},
        {SIM_FORMAT_CSV, "a,1,2,1,1,",
         "priority \"\" is not a whole number from -1000000 to 1000000"},
        {SIM_FORMAT_CSV, "a,1,2,1,1,--1",
         "priority \"--1\" is not a whole number from -1000000 to 1000000"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,1,1,,LS,Running,0,1",
         "expected 11 fields (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
         "pod_phase,creation_time,deletion_time,scheduled_time), found 10"},
        {SIM_FORMAT_ALIBABA2023, "p,x,1,1,1,,LS,Running,0,1,0",
         "cpu_milli \"x\" is not a whole number from 0 to 2147483647"},
        {SIM_FORMAT_ALIBABA2023, "p,1,,1,1,,LS,Running,0,1,0",
         "memory_mib \"\" is not a whole number from 0 to 1099511627776"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,9999,1,,LS,Running,0,1,0",
         "num_gpu \"9999\" is not a whole number from 0 to 4096"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,1,0,,LS,Running,0,1,0",
         "gpu_milli \"0\" is not a whole number from 1 to 1000"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,2,1001,,LS,Running,0,1,0",
         "gpu_milli \"1001\" is not a whole number from 1 to 1000"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,0,1001,,LS,Running,0,1,0",
         "gpu_milli \"1001\" is not a whole number from 0 to 1000"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,1,1,,LS,Running,0,5,",
         "scheduled_time \"\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,1,1,,LS,Failed,-1,5,1",
         "creation_time \"-1\" is not a number of seconds >= 0"},
        {SIM_FORMAT_ALIBABA2023, "p,1,1,1,1,,LS,Running,0,5,6",
         "deletion_time \"5\" is before scheduled_time \"6\""},
        {SIM_FORMAT_ALIBABA2023, ",1,1,1,1,,LS,Running,0,5,1", "name is empty"},
    };
    char text[512], want[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* a header, a good row, then the bad one on line 3 */
        switch (cases[i].format) {
        case SIM_FORMAT_ITP:
            snprintf(text, sizeof text, "job_id,submission_time,duration,num_gpu\n"
                                        "good,1,1,1\n%s\n", cases[i].row);
            break;
        case SIM_FORMAT_CSV:
            snprintf(text, sizeof text, "job_id,submit_time,duration,gpus\n"
                                        "good,1,1,1\n%s\n", cases[i].row);
            break;
        default:
            snprintf(text, sizeof text, "%sgood,1,1,1,1,,LS,Running,0,1,0\n%s\n", ali_header,
                     cases[i].row);
            break;
        }
        snprintf(want, sizeof want, "3: %s", cases[i].want);
        expect_trace_error(cases[i].format, text, want);
    }

    /* line numbers count blank and comment lines, and a header that is not there */
    expect_trace_error(SIM_FORMAT_CSV, "# c\n\nok,1,1,1\n\n# c\nbad,1,1\n",
                       "6: expected 4 to 7 fields (job_id,submit_time,duration,gpus"
                       "[,gpu_mem_fraction,priority,user]), found 3");
    /* comments are a csv thing only */
    expect_trace_error(SIM_FORMAT_ITP, "# c\n", "1: expected 4 fields (job_id,submission_time,"
                                                "duration,num_gpu), found 1");

    static const char nul[] = "job_id,submit_time,duration,gpus\nok,1,1,1\na,1\0,1,1\n";
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL;
    const char *p = write_bytes("nul.csv", nul, sizeof nul - 1);
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_CSV, false, &types, &trace, &err), -1);
    snprintf(want, sizeof want, "%s:3: the line holds a NUL byte", p);
    assert_string_equal(err, want);
    free(err);
}

static void test_gpu_spec_table_full(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, name[16], text[1024], want[1024];
    for (int i = 0; i < SIM_MAX_TYPES - 1; i++) {
        snprintf(name, sizeof name, "t%d", i);
        sim_types_intern(&types, name);
    }
    snprintf(text, sizeof text, "%sa,1,1,1,1,t5|NEW1,LS,Running,0,1,0\n"
                                "b,1,1,1,1,NEW1|t7,LS,Running,0,1,0\n"
                                "c,1,1,1,1,NEW2|t7,LS,Running,0,1,0\n",
             ali_header);
    const char *p = write_text("full.csv", text);
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ALIBABA2023, false, &types, &trace, &err), -1);
    snprintf(want, sizeof want, "%s:4: gpu_spec \"NEW2|t7\": more than 64 GPU types", p);
    assert_string_equal(err, want);
    free(err);
    assert_int_equal(types.n, SIM_MAX_TYPES);
    assert_string_equal(types.name[SIM_MAX_TYPES - 1], "NEW1");
    sim_types_free(&types);
}

static void test_skip_bad_rows(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, want[1024];
    const char *p = write_text("skip.csv", "job_id,submission_time,duration,num_gpu\n"
                                           "a,5,1,1\n"
                                           "b,1,-1,1\n"
                                           "c,1,1\n"
                                           "d,3,1,2\n"
                                           "e,x,1,1\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, true, &types, &trace, &err), 0);
    assert_null(err);
    assert_int_equal(trace.n, 2);
    assert_int_equal(trace.skipped_bad, 3);
    snprintf(want, sizeof want, "%s:3: duration \"-1\" is not a number of seconds >= 0", p);
    assert_string_equal(trace.first_bad, want);
    assert_string_equal(trace.jobs[0].id, "d");
    assert_string_equal(trace.jobs[1].id, "a");
    sim_trace_free(&trace);
    assert_null(trace.first_bad);

    /* without skip_bad_rows the first bad row stops the read */
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, false, &types, &trace, &err), -1);
    assert_string_equal(err, want);
    free(err);

    /* skipping every row leaves no jobs, which is still an error */
    p = write_text("allbad.csv", "a,1,1\nb,1,1\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, true, &types, &trace, &err), -1);
    snprintf(want, sizeof want, "%s: no jobs (2 bad rows skipped, the first: %s:1: expected 4 "
                                "fields (job_id,submission_time,duration,num_gpu), found 3)",
             p, p);
    assert_string_equal(err, want);
    assert_null(trace.first_bad);
    free(err);

    /* a bad header is not a row to skip */
    p = write_text("badhead.csv", "job_id,a,b\nx,1,1,1\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_ITP, true, &types, &trace, &err), -1);
    assert_non_null(strstr(err, ":1: itp needs the columns"));
    free(err);
    sim_types_free(&types);
}

static void test_auto_detect(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, text[512];
    const char *p = write_text("auto-itp.csv", "job_id,submission_time,duration,num_gpu\n"
                                               "a,1,2,3\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 1);
    assert_int_equal(trace.jobs[0].gpus, 3);
    sim_trace_free(&trace);
    /* itp, so five fields are too many */
    expect_trace_error(SIM_FORMAT_AUTO, "job_id,submission_time,duration,num_gpu\na,1,2,3,0.5\n",
                       "2: expected 4 fields (job_id,submission_time,duration,num_gpu), "
                       "found 5");

    snprintf(text, sizeof text, "%sp,1,1,1,1,,LS,Pending,0,1,\nq,1,1,1,1,,LS,Running,0,1,0\n",
             ali_header);
    p = write_text("auto-ali.csv", text);
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 1);
    assert_int_equal(trace.skipped_pending, 1);
    sim_trace_free(&trace);
    expect_trace_error(SIM_FORMAT_AUTO, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n",
                       "1: alibaba2023 needs the columns name,cpu_milli,memory_mib,num_gpu,"
                       "gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                       "scheduled_time (this file has no times)");

    p = write_text("auto-csv.csv", "# mine\njob_id,submit_time,duration,gpus,gpu_mem_fraction\n"
                                   "a,1,2,1,0.25\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.jobs[0].gpu_milli, 250);
    sim_trace_free(&trace);
    p = write_text("auto-csv2.csv", "a,1,2,1,0.25,3\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.jobs[0].priority, 3);
    sim_trace_free(&trace);
    /* a byte-order mark does not hide the header */
    p = write_text("auto-bom.csv", "\xEF\xBB\xBFjob_id,submission_time,duration,num_gpu\n"
                                   "a,1,2,3\n");
    assert_int_equal(sim_trace_read(p, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 1);
    sim_trace_free(&trace);
    sim_types_free(&types);
}

static void test_empty_and_unreadable(void **state)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL, want[1024], missing[512];
    snprintf(missing, sizeof missing, "%s/no-such-file.csv", dir);
    assert_int_equal(sim_trace_read(missing, SIM_FORMAT_AUTO, false, &types, &trace, &err), -1);
    snprintf(want, sizeof want, "%s: No such file or directory", missing);
    assert_string_equal(err, want);
    free(err);
    sim_trace_free(&trace); /* zeroed on failure */

    assert_int_equal(sim_trace_read(dir, SIM_FORMAT_CSV, false, &types, &trace, &err), -1);
    snprintf(want, sizeof want, "%s: Is a directory", dir);
    assert_string_equal(err, want);
    free(err);

    static const struct {
        enum sim_format format;
        const char *text;
        const char *want; /* after "PATH" */
    } empty[] = {
        {SIM_FORMAT_AUTO, "", ": no jobs"},
        {SIM_FORMAT_CSV, "\n\n# nothing\n", ": no jobs"},
        {SIM_FORMAT_ITP, "job_id,submission_time,duration,num_gpu\n", ": no jobs"},
        {SIM_FORMAT_ALIBABA2023, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                 "pod_phase,creation_time,deletion_time,scheduled_time\n"
                                 "p,1,1,1,1,,LS,Pending,0,1,\np,1,1,1,1,,LS,Pending,0,1,\n",
         ": no jobs (2 Pending rows skipped)"},
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        const char *p = write_text("empty.csv", empty[i].text);
        assert_int_equal(sim_trace_read(p, empty[i].format, false, &types, &trace, &err), -1);
        snprintf(want, sizeof want, "%s%s", p, empty[i].want);
        assert_string_equal(err, want);
        free(err);
    }

    struct sim_trace zero = {0};
    sim_trace_free(&zero);
    sim_trace_free(NULL);
    sim_types_free(&types);
}

/* Rows written in reverse time order come back sorted; the time is printed, not asserted
 * (valgrind runs this too). */
static void test_many_rows(void **state)
{
    enum { ROWS = 100000 };
    struct sim_types types = {0};
    struct sim_trace trace;
    struct timespec t0, t1;
    char *err = NULL;
    snprintf(path, sizeof path, "%s/many.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "job_id,submission_time,duration,num_gpu\n");
    for (int i = 0; i < ROWS; i++)
        fprintf(f, "%08x-0000-4000-8000-%012d,%d.%03d,%d,%d\n", i, i, (ROWS - i) / 2,
                i % 1000, 60 + i % 3600, 1 << (i % 4));
    assert_int_equal(fclose(f), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(sim_trace_read(path, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("[          ] %d rows read in %.3f s\n", ROWS,
                  (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    assert_int_equal(trace.n, ROWS);
    for (size_t i = 1; i < trace.n; i++) {
        const struct sim_job *a = &trace.jobs[i - 1], *b = &trace.jobs[i];
        assert_true(a->submit_ms < b->submit_ms ||
                    (a->submit_ms == b->submit_ms && a->line < b->line));
    }
    sim_trace_free(&trace);
    unlink(path);
}

static void test_nodes(void **state)
{
    struct sim_types types = {0};
    struct sim_nodes nodes;
    char *err = NULL, want[1024];
    const char *p = write_text("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n"
                                            "node-0,64000,262144,2,P100\n"
                                            "\n"
                                            "node-1,96000,786432,8,V100M32\n"
                                            "node-2,32000,131072,0,\n"
                                            "node-3,64000,262144,4,P100\r\n");
    assert_int_equal(sim_nodes_read(p, &types, &nodes, &err), 0);
    assert_null(err);
    assert_int_equal(nodes.n, 4);
    assert_string_equal(nodes.v[0].name, "node-0");
    assert_int_equal(nodes.v[0].ngpus, 2);
    assert_int_equal(nodes.v[0].cpu_milli, 64000);
    assert_true(nodes.v[0].mem_bytes == 262144ull << 20);
    assert_int_equal(nodes.v[0].type, 0);
    assert_int_equal(nodes.v[1].type, 1);
    assert_int_equal(nodes.v[1].ngpus, 8);
    assert_int_equal(nodes.v[2].ngpus, 0);
    assert_int_equal(nodes.v[2].type, 2);
    assert_string_equal(types.name[2], "");
    assert_int_equal(nodes.v[3].type, 0);
    assert_string_equal(types.name[nodes.v[3].type], "P100");
    sim_nodes_free(&nodes);
    assert_null(nodes.v);

    p = write_text("nodes2.csv", "n,1,1,64,A\n");
    assert_int_equal(sim_nodes_read(p, &types, &nodes, &err), 0);
    assert_int_equal(nodes.n, 1);
    assert_int_equal(nodes.v[0].ngpus, 64);
    assert_int_equal(nodes.v[0].type, 3);
    sim_nodes_free(&nodes);

    static const struct {
        const char *text;
        const char *want; /* after "PATH" */
    } bad[] = {
        {"", ": no nodes"},
        {"sn,cpu_milli,memory_mib,gpu,model\n\n", ": no nodes"},
        {"sn,cpu_milli,memory_mib,gpu\n", ":1: expected 5 fields (sn,cpu_milli,memory_mib,gpu,"
                                          "model), found 4"},
        {"a,1,1,1,A\nb,1,1,1\n", ":2: expected 5 fields (sn,cpu_milli,memory_mib,gpu,model), "
                                 "found 4"},
        {"a,1,1,65,A\n", ":1: gpu \"65\" is not a whole number from 0 to 64"},
        {"a,1,1,-1,A\n", ":1: gpu \"-1\" is not a whole number from 0 to 64"},
        {"a,1,1,2.0,A\n", ":1: gpu \"2.0\" is not a whole number from 0 to 64"},
        {"a,x,1,1,A\n", ":1: cpu_milli \"x\" is not a whole number from 0 to 2147483647"},
        {"a,1,,1,A\n", ":1: memory_mib \"\" is not a whole number from 0 to 1099511627776"},
        {"sn,cpu_milli,memory_mib,gpu,model\n,1,1,1,A\n", ":2: sn is empty"},
        {"a,1,1,1,\"A\"\n", ":1: quoted fields are not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_text("badnodes.csv", bad[i].text);
        assert_int_equal(sim_nodes_read(p, &types, &nodes, &err), -1);
        snprintf(want, sizeof want, "%s%s", p, bad[i].want);
        assert_string_equal(err, want);
        assert_null(nodes.v);
        free(err);
    }
    sim_types_free(&types);

    /* a full type table */
    char name[16], text[128];
    for (int i = 0; i < SIM_MAX_TYPES; i++) {
        snprintf(name, sizeof name, "t%d", i);
        sim_types_intern(&types, name);
    }
    p = write_text("fullnodes.csv", "a,1,1,1,t3\nb,1,1,1,H100\n");
    assert_int_equal(sim_nodes_read(p, &types, &nodes, &err), -1);
    snprintf(text, sizeof text, "%s:2: model \"H100\": more than 64 GPU types", p);
    assert_string_equal(err, text);
    free(err);
    sim_types_free(&types);

    struct sim_nodes zero = {0};
    sim_nodes_free(&zero);
    sim_nodes_free(NULL);
}

static void test_cluster_specs(void **state)
{
    int nodes = -1, gpus = -1;
    uint64_t mem = 1;
    const char *err = NULL;
    assert_int_equal(sim_cluster_parse("12x8", &nodes, &gpus, &mem, &err), 0);
    assert_int_equal(nodes, 12);
    assert_int_equal(gpus, 8);
    assert_true(mem == 0);
    assert_int_equal(sim_cluster_parse("12x8:80G", &nodes, &gpus, &mem, &err), 0);
    assert_true(mem == 80ull << 30);
    assert_int_equal(sim_cluster_parse("1x1:16GiB", &nodes, &gpus, &mem, &err), 0);
    assert_int_equal(nodes, 1);
    assert_int_equal(gpus, 1);
    assert_true(mem == 16ull << 30);
    assert_int_equal(sim_cluster_parse("100000x64", &nodes, &gpus, &mem, &err), 0);
    assert_int_equal(nodes, 100000);
    assert_int_equal(gpus, 64);

    static const struct {
        const char *in;
        const char *want;
    } bad[] = {
        {"", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"12", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"12x", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"x8", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"12*8", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"12x8G", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"12x8,80G", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {" 12x8", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"-1x8", "expected NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
        {"0x8", "the number of nodes must be 1 to 100000"},
        {"100001x8", "the number of nodes must be 1 to 100000"},
        {"99999999999999999999x8", "the number of nodes must be 1 to 100000"},
        {"12x0", "the GPUs per node must be 1 to 64"},
        {"12x65", "the GPUs per node must be 1 to 64"},
        {"12x8:", "the memory per GPU must be a size above 0, such as 80G"},
        {"12x8:0", "the memory per GPU must be a size above 0, such as 80G"},
        {"12x8:80Q", "the memory per GPU must be a size above 0, such as 80G"},
        {"12x8:-80G", "the memory per GPU must be a size above 0, such as 80G"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nodes = gpus = -1;
        err = NULL;
        assert_int_equal(sim_cluster_parse(bad[i].in, &nodes, &gpus, &mem, &err), -1);
        assert_string_equal(err, bad[i].want);
        assert_int_equal(nodes, -1); /* untouched on failure */
    }
}

/* The real traces under /work/shared/traces (or $DROVER_TRACES), when this machine has them. */
static void test_real_traces(void **state)
{
    const char *root = getenv("DROVER_TRACES");
    struct sim_types types = {0};
    struct sim_trace trace;
    struct sim_nodes nodes;
    struct stat st;
    char file[PATH_MAX], *err = NULL;
    if (root == NULL || *root == '\0')
        root = "/work/shared/traces";
    if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
        print_message("[  SKIPPED ] no traces at %s\n", root);
        return;
    }

    snprintf(file, sizeof file, "%s/itp-2021/cluster10.csv", root);
    assert_int_equal(sim_trace_read(file, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 260);
    sim_trace_free(&trace);

    size_t itp_total = 0;
    for (int i = 1; i <= 10; i++) {
        snprintf(file, sizeof file, "%s/itp-2021/cluster%02d.csv", root, i);
        assert_int_equal(sim_trace_read(file, SIM_FORMAT_ITP, false, &types, &trace, &err), 0);
        itp_total += trace.n;
        sim_trace_free(&trace);
    }
    assert_int_equal(itp_total, 69351);

    snprintf(file, sizeof file, "%s/alibaba-gpu-2023/openb_node_list_gpu_node.csv", root);
    assert_int_equal(sim_nodes_read(file, &types, &nodes, &err), 0);
    assert_int_equal(nodes.n, 1213);
    int total_gpus = 0;
    for (int i = 0; i < nodes.n; i++)
        total_gpus += nodes.v[i].ngpus;
    assert_int_equal(total_gpus, 6212);
    assert_int_equal(types.n, 7);
    sim_nodes_free(&nodes);

    snprintf(file, sizeof file, "%s/alibaba-gpu-2023/openb_pod_list_default.csv", root);
    assert_int_equal(sim_trace_read(file, SIM_FORMAT_AUTO, false, &types, &trace, &err), 0);
    assert_int_equal(trace.n, 8152 - 897);
    assert_int_equal(trace.skipped_pending, 897);
    assert_int_equal(trace.skipped_bad, 0);
    sim_trace_free(&trace);

    static const char *const samples[] = {"gpushare40", "gpushare100"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/alibaba-gpu-2023/openb_pod_list_%s.csv", root,
                 samples[i]);
        assert_int_equal(sim_trace_read(file, SIM_FORMAT_ALIBABA2023, false, &types, &trace,
                                        &err), 0);
        assert_true(trace.n > 0);
        sim_trace_free(&trace);
    }

    snprintf(file, sizeof file, "%s/alibaba-gpu-2023/openb_pod_list_multigpu50.csv", root);
    assert_int_equal(sim_trace_read(file, SIM_FORMAT_ALIBABA2023, false, &types, &trace, &err),
                     -1);
    assert_non_null(strstr(err, ":1: alibaba2023 needs the columns"));
    assert_non_null(strstr(err, "(this file has no times)"));
    free(err);
    sim_types_free(&types);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_itp),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_csv_users),
        cmocka_unit_test(test_assign_users),
        cmocka_unit_test(test_alibaba),
        cmocka_unit_test(test_alibaba_header_checked),
        cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_gpu_spec_table_full),
        cmocka_unit_test(test_skip_bad_rows),
        cmocka_unit_test(test_auto_detect),
        cmocka_unit_test(test_empty_and_unreadable),
        cmocka_unit_test(test_many_rows),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_cluster_specs),
        cmocka_unit_test(test_real_traces),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
