/* util/slurm.c: the request → sbatch mapping (docs/SLURM.md, "Mapping"). Every row of the table,
 * the rounding edges, arrays, empty optional fields and every refusal, each checked as the exact
 * argv vector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/slurm.h"

#define SCRIPT "/shared/drover/jobs/7.sh"

/* A job with only what every job has. */
static struct slurm_job job_base(void)
{
    return (struct slurm_job){.task = 7, .script = SCRIPT};
}

/* The argv drover always starts and ends with, around the middle words given (NULL-ended). */
static void expect_argv_v(const struct slurm_job *job, const struct slurm_settings *s,
                          const char *const *middle)
{
    char **argv = NULL, *err = NULL;
    int rc = slurm_sbatch_argv(job, s, &argv, &err);
    if (rc != 0)
        fail_msg("refused: %s", err);
    assert_null(err);
    const char *head[] = {"sbatch", "--parsable", "--export=NONE"};
    size_t n = 0;
    for (size_t i = 0; i < 3; i++, n++) {
        assert_non_null(argv[n]);
        assert_string_equal(argv[n], head[i]);
    }
    for (size_t i = 0; middle[i]; i++, n++) {
        if (argv[n] == NULL)
            fail_msg("argv ends before '%s'", middle[i]);
        assert_string_equal(argv[n], middle[i]);
    }
    assert_non_null(argv[n]);
    assert_string_equal(argv[n], job->script);
    if (argv[n + 1] != NULL)
        fail_msg("argv has more after the script: '%s'", argv[n + 1]);
    slurm_argv_free(argv);
}
#define expect_argv(job, s, ...) expect_argv_v(job, s, (const char *const[]){__VA_ARGS__, NULL})

/* The one word (after the fixed head and the name) that a field maps to. */
static void expect_flag(const struct slurm_job *job, const char *flag)
{
    expect_argv(job, NULL, "--job-name=drover-7", flag, "--signal=B:USR1@90");
}

static void expect_refused(const struct slurm_job *job, const struct slurm_settings *s,
                           const char *needle)
{
    char **argv = (char **)1, *err = NULL;
    assert_int_equal(slurm_sbatch_argv(job, s, &argv, &err), -1);
    assert_null(argv);
    assert_non_null(err);
    if (strstr(err, needle) == NULL)
        fail_msg("error '%s' does not say '%s'", err, needle);
    assert_null(strchr(err, '\n'));
    free(err);
}

static void test_minimal(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90");
    /* Empty optional strings are not set. */
    job.name = job.gpu_type = job.workdir = job.run_dir = "";
    struct slurm_settings s = {.partition = "", .account = "", .qos = ""};
    expect_argv(&job, &s, "--job-name=drover-7", "--signal=B:USR1@90");
    job.task = 0;
    expect_argv(&job, &s, "--job-name=drover", "--signal=B:USR1@90");
}

static void test_every_row(void **state)
{
    (void)state;
    int64_t index[] = {0, 1, 2, 3}, ok[] = {11, 12}, any[] = {13};
    char *extra[] = {"--constraint=a100", "--nice", "10"};
    struct slurm_job job = {
        .name = "train lr=0.1",
        .task = 42,
        .gpus = 2,
        .gpu_type = "a100",
        .cpus = 8,
        .mem = 32ULL << 30,
        .timeout_ms = 2 * 3600 * 1000,
        .array_index = index,
        .nindex = 4,
        .array_limit = 2,
        .afterok = ok,
        .nafterok = 2,
        .afterany = any,
        .nafterany = 1,
        .workdir = "/home/ada/proj",
        .run_dir = "/shared/drover/runs/42/1",
        .script = "/shared/drover/jobs/42.sh",
    };
    struct slurm_settings s = {.partition = "gpu",
                               .account = "lab",
                               .qos = "normal",
                               .extra_args = extra,
                               .nextra = 3};
    expect_argv(&job, &s, "--job-name=train lr=0.1", "--partition=gpu", "--account=lab",
                "--qos=normal", "--array=0-3%2", "--gres=gpu:a100:2", "--cpus-per-task=8",
                "--mem=32768M", "--time=120", "--signal=B:USR1@90",
                "--dependency=afterok:11:12,afterany:13", "--kill-on-invalid-dep=yes",
                "--chdir=/home/ada/proj", "--output=/shared/drover/runs/42/1/%a/stdout",
                "--error=/shared/drover/runs/42/1/%a/stderr", "--constraint=a100", "--nice", "10");
}

static void test_gpus(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    job.gpus = 1;
    expect_flag(&job, "--gres=gpu:1");
    job.gpus = 8;
    expect_flag(&job, "--gres=gpu:8");
    job.gpu_type = "h100_80gb";
    expect_flag(&job, "--gres=gpu:h100_80gb:8");
    /* A type alone is one GPU, as drover submit --gpu-type is. */
    job.gpus = 0;
    expect_flag(&job, "--gres=gpu:h100_80gb:1");
}

static void test_cpus(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    job.cpus = 1;
    expect_flag(&job, "--cpus-per-task=1");
    job.cpus = 128;
    expect_flag(&job, "--cpus-per-task=128");
}

static void test_mem_rounds_up_to_mib(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    const struct {
        uint64_t bytes;
        const char *flag;
    } rows[] = {
        {1, "--mem=1M"},
        {1024 * 1024 - 1, "--mem=1M"},
        {1024 * 1024, "--mem=1M"},
        {1024 * 1024 + 1, "--mem=2M"},
        {16ULL << 30, "--mem=16384M"},
        {(16ULL << 30) + 1, "--mem=16385M"},
        {UINT64_MAX, "--mem=17592186044416M"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        job.mem = rows[i].bytes;
        expect_flag(&job, rows[i].flag);
    }
}

static void test_time_rounds_up_to_minutes(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    const struct {
        int64_t ms;
        const char *flag;
    } rows[] = {
        {1, "--time=1"},
        {59999, "--time=1"},
        {60000, "--time=1"},
        {60001, "--time=2"},
        {61000, "--time=2"},
        {3600000, "--time=60"},
        {86400000LL, "--time=1440"},
        {86400000LL + 1, "--time=1441"},
        {7 * 86400000LL, "--time=10080"},
        {(int64_t)SLURM_MAX_TIME_MIN * 60000, "--time=35791393"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        job.timeout_ms = rows[i].ms;
        expect_flag(&job, rows[i].flag);
    }
    job.timeout_ms = (int64_t)SLURM_MAX_TIME_MIN * 60000 + 1;
    expect_refused(&job, NULL, "longer than Slurm's largest time limit, 35791393 minutes");
    job.timeout_ms = INT64_MAX;
    expect_refused(&job, NULL, "longer than Slurm's largest");
}

static void expect_array(const int64_t *index, size_t n, int limit, const char *flag)
{
    struct slurm_job job = job_base();
    job.array_index = index;
    job.nindex = n;
    job.array_limit = limit;
    expect_flag(&job, flag);
}

static void test_arrays(void **state)
{
    (void)state;
    int64_t one[] = {5};
    expect_array(one, 1, 0, "--array=5");
    expect_array(one, 1, 1, "--array=5%1");
    int64_t zero[] = {0};
    expect_array(zero, 1, 0, "--array=0");
    int64_t folded[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 20, 21, 22};
    expect_array(folded, 14, 0, "--array=0-9,12,20-22");
    expect_array(folded, 14, 4, "--array=0-9,12,20-22%4");
    int64_t unsorted[] = {22, 3, 12, 21, 2, 20, 2, 12, 4, 3};
    expect_array(unsorted, 10, 0, "--array=2-4,12,20-22");
    int64_t pair[] = {7, 8};
    expect_array(pair, 2, 0, "--array=7-8");
    int64_t sparse[] = {1, 3, 5};
    expect_array(sparse, 3, 2, "--array=1,3,5%2");
    int64_t dup[] = {9, 9, 9};
    expect_array(dup, 3, 0, "--array=9");
    int64_t edge[] = {1000, 0};
    expect_array(edge, 2, 0, "--array=0,1000");
}

static void test_array_limits(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    int64_t over[] = {0, 1001};
    job.array_index = over;
    job.nindex = 2;
    expect_refused(&job, NULL,
                   "array index 1001 is above Slurm's largest, 1000 (MaxArraySize 1001)");
    /* A cluster with a larger MaxArraySize takes it. */
    struct slurm_settings big = {.max_array_size = 4000001};
    expect_argv(&job, &big, "--job-name=drover-7", "--array=0,1001", "--signal=B:USR1@90");
    big.max_array_size = 1001;
    expect_refused(&job, &big, "MaxArraySize 1001");
    struct slurm_settings small = {.max_array_size = 10};
    int64_t nine[] = {9}, ten[] = {10};
    job.array_index = nine;
    job.nindex = 1;
    expect_argv(&job, &small, "--job-name=drover-7", "--array=9", "--signal=B:USR1@90");
    job.array_index = ten;
    expect_refused(&job, &small, "array index 10 is above Slurm's largest, 9 (MaxArraySize 10)");
    int64_t negative[] = {3, -1};
    job.array_index = negative;
    job.nindex = 2;
    expect_refused(&job, NULL, "array index -1 is negative");
    job.nindex = 0;
    job.array_limit = 2;
    expect_refused(&job, NULL, "array limit %2 without array indices");
    job.array_index = nine;
    job.nindex = 1;
    job.array_limit = -1;
    expect_refused(&job, NULL, "array limit -1 is negative");
    job.array_limit = 0;
    job.array_index = NULL;
    expect_refused(&job, NULL, "array indices missing");
    small.max_array_size = -5;
    job.array_index = nine;
    expect_refused(&job, &small, "MaxArraySize -5 is negative");
}

static void test_dependencies(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    int64_t ok[] = {100, 101, 102}, any[] = {7, 8};
    job.afterok = ok;
    job.nafterok = 1;
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--dependency=afterok:100", "--kill-on-invalid-dep=yes");
    job.nafterok = 3;
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--dependency=afterok:100:101:102", "--kill-on-invalid-dep=yes");
    job.nafterok = 0;
    job.afterany = any;
    job.nafterany = 2;
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--dependency=afterany:7:8", "--kill-on-invalid-dep=yes");
    job.nafterok = 1;
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--dependency=afterok:100,afterany:7:8", "--kill-on-invalid-dep=yes");
    int64_t zero[] = {0}, big[] = {SLURM_MAX_JOB_ID + 1}, max[] = {SLURM_MAX_JOB_ID};
    job.afterok = max;
    job.nafterany = 0;
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--dependency=afterok:4294967293", "--kill-on-invalid-dep=yes");
    job.afterok = zero;
    expect_refused(&job, NULL, "afterok dependency 0 is not a Slurm job id");
    job.nafterok = 0;
    job.afterany = big;
    job.nafterany = 1;
    expect_refused(&job, NULL, "afterany dependency 4294967294 is not a Slurm job id");
}

static void test_names_and_paths(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    job.name = "sweep/lr=1e-3, bs=64 'x' $HOME;rm -rf /";
    expect_argv(&job, NULL, "--job-name=sweep/lr=1e-3, bs=64 'x' $HOME;rm -rf /",
                "--signal=B:USR1@90");
    job.name = "-leading-dash";
    expect_argv(&job, NULL, "--job-name=-leading-dash", "--signal=B:USR1@90");
    job.name = NULL;
    job.workdir = "/home/ada/my proj";
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--chdir=/home/ada/my proj");
    job.workdir = NULL;
    job.run_dir = "/shared/runs/7/2";
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--output=/shared/runs/7/2/stdout", "--error=/shared/runs/7/2/stderr");
    /* A '%' is sbatch's pattern character: doubled. Trailing slashes go. */
    job.run_dir = "/shared/100%/runs/7/2//";
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90",
                "--output=/shared/100%%/runs/7/2/stdout", "--error=/shared/100%%/runs/7/2/stderr");
    job.run_dir = "/";
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90", "--output=//stdout",
                "--error=//stderr");
}

/* Slurm's own length limits (slurmctld: "Pathname of a file, directory or other parameter too
 * long"), found on 22.05: a name of 1024 bytes, paths of 4096. */
static void test_lengths(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    char name[SLURM_MAX_NAME + 2], flag[SLURM_MAX_PATH + 32], path[SLURM_MAX_PATH + 2];
    memset(name, 'n', SLURM_MAX_NAME);
    name[SLURM_MAX_NAME] = '\0';
    job.name = name;
    snprintf(flag, sizeof flag, "--job-name=%s", name);
    expect_argv(&job, NULL, flag, "--signal=B:USR1@90");
    strcat(name, "n");
    expect_refused(&job, NULL, "the job name is 1025 bytes long; Slurm takes at most 1024");
    job.name = NULL;
    memset(path, 'p', SLURM_MAX_PATH);
    path[0] = '/';
    path[SLURM_MAX_PATH] = '\0';
    job.workdir = path;
    snprintf(flag, sizeof flag, "--chdir=%s", path);
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90", flag);
    strcat(path, "p");
    expect_refused(&job, NULL,
                   "the working directory is 4097 bytes long; Slurm takes at most 4096");
    job.workdir = NULL;
    /* The run directory's limit counts "/stdout" (and "/%a" for an array). */
    path[SLURM_MAX_PATH - strlen("/stdout")] = '\0';
    job.run_dir = path;
    char error[SLURM_MAX_PATH + 32];
    snprintf(flag, sizeof flag, "--output=%s/stdout", path);
    snprintf(error, sizeof error, "--error=%s/stderr", path);
    expect_argv(&job, NULL, "--job-name=drover-7", "--signal=B:USR1@90", flag, error);
    int64_t index[] = {0};
    job.array_index = index;
    job.nindex = 1;
    expect_refused(&job, NULL, "stdout path is 4099 bytes long; Slurm takes at most 4096");
}

static void test_settings(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    struct slurm_settings s = {.partition = "gpu,gpu-long"};
    expect_argv(&job, &s, "--job-name=drover-7", "--partition=gpu,gpu-long",
                "--signal=B:USR1@90");
    s = (struct slurm_settings){.account = "proj-17"};
    expect_argv(&job, &s, "--job-name=drover-7", "--account=proj-17", "--signal=B:USR1@90");
    s = (struct slurm_settings){.qos = "high"};
    expect_argv(&job, &s, "--job-name=drover-7", "--qos=high", "--signal=B:USR1@90");
    s = (struct slurm_settings){.warn_signal_s = 300};
    expect_argv(&job, &s, "--job-name=drover-7", "--signal=B:USR1@300");
    s.warn_signal_s = SLURM_MAX_WARN_S;
    expect_argv(&job, &s, "--job-name=drover-7", "--signal=B:USR1@65535");
    s.warn_signal_s = -1;
    expect_argv(&job, &s, "--job-name=drover-7");
    s.warn_signal_s = SLURM_MAX_WARN_S + 1;
    expect_refused(&job, &s, "above Slurm's largest, 65535 s");
    /* Extra words are passed as they are, one argv word each, after drover's flags. */
    char *extra[] = {"--partition", "debug", "--comment=a b,c", "-N1", "--parsable"};
    s = (struct slurm_settings){.extra_args = extra, .nextra = 5};
    expect_argv(&job, &s, "--job-name=drover-7", "--signal=B:USR1@90", "--partition", "debug",
                "--comment=a b,c", "-N1", "--parsable");
    s.extra_args = NULL;
    expect_refused(&job, &s, "slurm-args missing");
}

static void test_refusals(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    job.name = "two\nlines";
    expect_refused(&job, NULL, "the job name has a line break");
    job.name = "cr\r";
    expect_refused(&job, NULL, "the job name has a line break");
    job = job_base();
    job.workdir = "/home/a\nb";
    expect_refused(&job, NULL, "the working directory has a line break");
    job.workdir = "relative/dir";
    expect_refused(&job, NULL, "the working directory 'relative/dir' is not an absolute path");
    job = job_base();
    job.run_dir = "/runs/\n";
    expect_refused(&job, NULL, "the run directory has a line break");
    job.run_dir = "runs/7";
    expect_refused(&job, NULL, "the run directory 'runs/7' is not an absolute path");
    job.run_dir = "/runs/a\\b";
    expect_refused(&job, NULL, "has a '\\', which turns off sbatch's file name patterns");
    job = job_base();
    job.script = NULL;
    expect_refused(&job, NULL, "no batch script");
    job.script = "";
    expect_refused(&job, NULL, "no batch script");
    job.script = "-x.sh";
    expect_refused(&job, NULL, "the batch script '-x.sh' is not an absolute path");
    job.script = "/a\nb.sh";
    expect_refused(&job, NULL, "the batch script has a line break");
    job = job_base();
    const char *types[] = {"a100:2", "a100,h100", "a 100", "a100\n"};
    for (size_t i = 0; i < 3; i++) {
        job.gpu_type = types[i];
        job.gpus = 1;
        expect_refused(&job, NULL, "which a Slurm GRES type cannot have");
    }
    job.gpu_type = types[3];
    expect_refused(&job, NULL, "the GPU type has a line break");
    job = job_base();
    job.gpus = -1;
    expect_refused(&job, NULL, "gpus -1 is negative");
    job = job_base();
    job.cpus = -2;
    expect_refused(&job, NULL, "cpus -2 is negative");
    job = job_base();
    job.timeout_ms = -1;
    expect_refused(&job, NULL, "timeout -1 ms is negative");
    job = job_base();
    struct slurm_settings s = {.partition = "gpu\n--wrap=id"};
    expect_refused(&job, &s, "the slurm-partition has a line break");
    s = (struct slurm_settings){.account = "a\n"};
    expect_refused(&job, &s, "the slurm-account has a line break");
    s = (struct slurm_settings){.qos = "\r"};
    expect_refused(&job, &s, "the slurm-qos has a line break");
}

/* slurm-args may add flags, not take over the ones drover reads back. */
static void test_reserved_extra_args(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    const struct {
        char *word;
        const char *needle;
    } rows[] = {
        {"--array=0-3", "may not set --array"},
        {"--dependency", "may not set --dependency"},
        {"--export=ALL", "may not set --export"},
        {"--output=/tmp/x", "may not set --output"},
        {"--error", "may not set --error"},
        {"--chdir=/", "may not set --chdir"},
        {"--wrap=id", "may not set --wrap"},
        {"-a", "may not set -a"},
        {"-d", "may not set -d"},
        {"-o/tmp/x", "may not set -o"},
        {"-e", "may not set -e"},
        {"-D/", "may not set -D"},
        {"--x\n", "the slurm-args word has a line break"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *extra[] = {"--nice=5", rows[i].word};
        struct slurm_settings s = {.extra_args = extra, .nextra = 2};
        expect_refused(&job, &s, rows[i].needle);
    }
    /* Longer options that only begin like a reserved one are someone else's. */
    char *fine[] = {"--exports", "--output-mode", "--error-x"};
    struct slurm_settings s = {.extra_args = fine, .nextra = 3};
    expect_argv(&job, &s, "--job-name=drover-7", "--signal=B:USR1@90", "--exports",
                "--output-mode", "--error-x");
}

/* err may be NULL (the caller only wants to know); a refusal still frees everything. */
static void test_null_err(void **state)
{
    (void)state;
    struct slurm_job job = job_base();
    int64_t ok[] = {0};
    job.afterok = ok;
    job.nafterok = 1;
    job.run_dir = "/runs";
    char **argv = NULL;
    assert_int_equal(slurm_sbatch_argv(&job, NULL, &argv, NULL), -1);
    assert_null(argv);
    slurm_argv_free(NULL);
}

/* slurm-args: words as a shell splits them, with nothing expanded. */
static void test_split_words(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *words[6];
    } cases[] = {
        {"", {NULL}},
        {"   \t ", {NULL}},
        {"--nice=10", {"--nice=10", NULL}},
        {"  --nice=10   --exclusive ", {"--nice=10", "--exclusive", NULL}},
        {"--constraint='a100&nvlink'", {"--constraint=a100&nvlink", NULL}},
        {"--comment=\"two words\" x", {"--comment=two words", "x", NULL}},
        {"a\\ b 'c\\d' \"e\\\"f\"", {"a b", "c\\d", "e\"f", NULL}},
        {"$HOME `id` *", {"$HOME", "`id`", "*", NULL}},
        {"''", {"", NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char **words = NULL, *err = NULL;
        assert_int_equal(slurm_split_words(cases[c].text, &words, &err), 0);
        size_t i = 0;
        for (; cases[c].words[i] != NULL; i++) {
            assert_non_null(words[i]);
            assert_string_equal(words[i], cases[c].words[i]);
        }
        assert_null(words[i]);
        slurm_argv_free(words);
    }
    char **words = (char **)1, *err = NULL;
    assert_int_equal(slurm_split_words("--comment='open", &words, &err), -1);
    assert_null(words);
    assert_string_equal(err, "unterminated ' quote");
    free(err);
    assert_int_equal(slurm_split_words("a \"b", &words, &err), -1);
    assert_string_equal(err, "unterminated \" quote");
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal),
        cmocka_unit_test(test_every_row),
        cmocka_unit_test(test_gpus),
        cmocka_unit_test(test_cpus),
        cmocka_unit_test(test_mem_rounds_up_to_mib),
        cmocka_unit_test(test_time_rounds_up_to_minutes),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_array_limits),
        cmocka_unit_test(test_dependencies),
        cmocka_unit_test(test_names_and_paths),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_reserved_extra_args),
        cmocka_unit_test(test_null_err),
        cmocka_unit_test(test_split_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
