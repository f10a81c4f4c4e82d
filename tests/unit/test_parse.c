/* The parsers for what users type, and the GPU inventory parsers. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpu/nvml.h"
#include "util/limits.h"
#include "util/parse.h"
#include "util/request.h"

static void test_sizes(void **state)
{
    const char *err;
    uint64_t v;
    static const struct { const char *in; uint64_t want; } ok[] = {
        {"1024", 1024}, {"16G", 16ull << 30}, {"512M", 512ull << 20}, {"1.5T", 3ull << 39},
        {"80GiB", 80ull << 30}, {"4k", 4096}, {"2GB", 2ull << 30}, {"0", 0}, {"10B", 10},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse_size(ok[i].in, &v, &err), 0);
        assert_true(v == ok[i].want);
    }
    static const char *const bad[] = {"", "G", "12Q", "1.5.5G", "-1G", "16 G", "1e400",
                                      "0.5", "16Gx", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(parse_size(bad[i], &v, &err), -1);
        assert_non_null(err);
    }
}

static void test_durations(void **state)
{
    const char *err;
    int64_t ms;
    static const struct { const char *in; int64_t want; } ok[] = {
        {"90s", 90000}, {"15m", 900000}, {"2h", 7200000}, {"1d", 86400000},
        {"1h30m", 5400000}, {"500ms", 500}, {"45", 45000}, {"0.5s", 500}, {"1m30s", 90000},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse_duration(ok[i].in, &ms, &err), 0);
        assert_int_equal(ms, ok[i].want);
    }
    static const char *const bad[] = {"", "0s", "10x", "s", "1h30", "-5s", "1e99h", "5 s",
                                      "0.0001s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_duration(bad[i], &ms, &err), -1);
}

static void test_signals(void **state)
{
    const char *err;
    int sig;
    static const struct { const char *in; int want; } ok[] = {
        {"TERM", SIGTERM}, {"SIGUSR1", SIGUSR1}, {"usr2", SIGUSR2}, {"sigint", SIGINT},
        {"HUP", SIGHUP},   {"10", 10},           {"64", 64},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(parse_signal(ok[i].in, &sig, &err), 0);
        assert_int_equal(sig, ok[i].want);
    }
    static const char *const bad[] = {"", "KILL", "SIGSTOP", "9", "19", "0", "65", "TERMX",
                                      "SIG", "-15", "1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_signal(bad[i], &sig, &err), -1);
}

static void test_hours_and_percent(void **state)
{
    const char *err;
    double s[4];
    int n;
    assert_int_equal(parse_hours("0.5,5,50", s, 4, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_true(s[0] == 1800 && s[2] == 180000);
    static const char *const bad[] = {"", "0", "10,1", "1,1", "1,", "x", "-1", "1,2,3,4,5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_hours(bad[i], s, 4, &n, &err), -1);
    char *v = parse_percent("p%40ss+x", 8, false);
    assert_string_equal(v, "p@ss+x");
    free(v);
    v = parse_percent("a+b%2F", 6, true);
    assert_string_equal(v, "a b/");
    free(v);
    assert_null(parse_percent("%zz", 3, false));
    assert_null(parse_percent("%2", 2, false));
    assert_null(parse_percent("%00", 3, false));
}

static void test_ints_and_ids(void **state)
{
    const char *err;
    long long v;
    int64_t *ids;
    size_t n;
    assert_int_equal(parse_int("42", 0, 100, &v, &err), 0);
    assert_int_equal(v, 42);
    assert_int_equal(parse_int("101", 0, 100, &v, &err), -1);
    assert_int_equal(parse_int("4x", 0, 100, &v, &err), -1);
    assert_int_equal(parse_int(" 4", 0, 100, &v, &err), -1);
    assert_int_equal(parse_int("99999999999999999999", 0, INT64_MAX, &v, &err), -1);
    assert_int_equal(parse_id_list("3,7,12", &ids, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[2], 12);
    free(ids);
    static const char *const bad[] = {"", "0", "3,", ",3", "3,,4", "a", "-1", "3;4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_id_list(bad[i], &ids, &n, &err), -1);
}

static void test_backoff(void **state)
{
    const char *err;
    int64_t ms[8];
    int n;
    assert_int_equal(parse_backoff("5,30,60", ms, 8, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ms[1], 30000);
    assert_int_equal(parse_backoff("0.2", ms, 8, &n, &err), 0);
    assert_int_equal(ms[0], 200);
    assert_int_equal(parse_backoff("1,2,3,4,5,6,7,8,9", ms, 8, &n, &err), -1);
    assert_int_equal(parse_backoff("5,,6", ms, 8, &n, &err), -1);
    assert_int_equal(parse_backoff("-1", ms, 8, &n, &err), -1);
}

static void test_arrays(void **state)
{
    const char *err;
    struct array_spec a;
    assert_int_equal(parse_array_spec("0-99%4", 100000, &a, &err), 0);
    assert_int_equal(a.count, 100);
    assert_int_equal(a.limit, 4);
    assert_int_equal(a.index[99], 99);
    array_spec_free(&a);
    assert_int_equal(parse_array_spec("9,1,5,5", 100000, &a, &err), 0);
    assert_int_equal(a.count, 3); /* sorted, unique */
    assert_int_equal(a.index[0], 1);
    assert_int_equal(a.index[2], 9);
    assert_int_equal(a.limit, 0);
    array_spec_free(&a);
    assert_int_equal(parse_array_spec("0-9,20-29%2", 100000, &a, &err), 0);
    assert_int_equal(a.count, 20);
    array_spec_free(&a);
    static const char *const bad[] = {"", "5-1", "0-9%0", "0-9%", "a-b", "1,,2", "-3",
                                      "0-99999999999", "0-9%x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(parse_array_spec(bad[i], 100000, &a, &err), -1);
    assert_int_equal(parse_array_spec("0-100000", 100000, &a, &err), -1);
    assert_string_equal(err, "array too large");
}

static void test_formatting(void **state)
{
    char buf[32];
    assert_string_equal(format_size(16ull << 30, buf, sizeof buf), "16G");
    assert_string_equal(format_size(3ull << 29, buf, sizeof buf), "1.5G");
    assert_string_equal(format_size(100, buf, sizeof buf), "100B");
    assert_string_equal(format_duration(400, buf, sizeof buf), "0.4s");
    assert_string_equal(format_duration(185000, buf, sizeof buf), "3m05s");
    assert_string_equal(format_duration(3720000, buf, sizeof buf), "1h02m");
}

static void test_utf8(void **state)
{
    static const char *const ok[] = {"", "plain", "caf\xc3\xa9", "\xe2\x82\xac 5",
                                     "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(utf8_check(ok[i]), 0);
    static const struct { const char *in; size_t at; } bad[] = {
        {"ab\xff" "c", 3},             /* never valid */
        {"k\xc3", 2},                  /* truncated at the end */
        {"x\xc3(", 2},                 /* a bad continuation */
        {"\x80", 1},                   /* a lone continuation */
        {"ok\xc0\xaf", 3},             /* overlong '/' */
        {"\xe0\x80\xaf", 1},          /* overlong, three bytes */
        {"\xed\xa0\x80", 1},          /* a surrogate */
        {"\xf4\x90\x80\x80", 1},      /* above U+10FFFF */
        {"\xf5\x80\x80\x80", 1},
        {"caf\xc3\xa9\xe2\x82", 6},   /* a valid character, then a truncated one */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(utf8_check(bad[i].in), bad[i].at);
}

/* The submit request check the CLI and the daemon share: every field, both sides of each bound. */
static void test_submit_request(void **state)
{
    static const char *const ok[] = {
        "{}",
        "{\"cpus\": 1, \"gpus\": 0, \"priority\": -1000000, \"retries\": 1000}",
        "{\"gpu_mem\": 1, \"mem\": 9223372036854775807, \"timeout_ms\": 1, \"stall_ms\": 1}",
        "{\"timeout_ms\": 1000000000000000, \"gpus\": 64, \"cpus\": null}",
        "{\"backoff\": [0, 1000000000000], \"after\": [3], \"after_any\": []}",
        "{\"array\": {\"index\": [0, 5, 100000000], \"limit\": 0}}",
        "{\"array\": {\"index\": [1]}, \"hold\": false, \"exclusive\": true}",
        "{\"name\": \"n\", \"key\": \"k\", \"profile\": \"p\", \"env\": {\"A\": \"\"}}",
    };
    static const char *const bad[] = {
        "{\"cpus\": 0}", "{\"cpus\": 1000001}", "{\"gpus\": 65}", "{\"gpus\": -1}",
        "{\"gpu_mem\": 0}", "{\"mem\": 0}", "{\"timeout_ms\": 0}",
        "{\"timeout_ms\": 1000000000000001}", "{\"stall_ms\": 0}", "{\"retries\": 1001}",
        "{\"priority\": 1000001}", "{\"cpus\": 1.5}", "{\"gpus\": \"2\"}",
        "{\"backoff\": []}", "{\"backoff\": [1, 1, 1, 1, 1, 1, 1, 1, 1]}",
        "{\"backoff\": [1000000000001]}", "{\"backoff\": [-1]}", "{\"backoff\": 5}",
        "{\"after\": [0]}", "{\"after_any\": \"3\"}",
        "{\"array\": {\"index\": []}}", "{\"array\": {\"index\": [1, 1]}}",
        "{\"array\": {\"index\": [2, 1]}}", "{\"array\": {\"index\": [100000001]}}",
        "{\"array\": {\"index\": [-1]}}", "{\"array\": {\"index\": [1], \"limit\": -1}}",
        "{\"array\": {\"index\": [1], \"limit\": 1000001}}", "{\"array\": [1]}",
        "{\"hold\": 1}", "{\"exclusive\": \"yes\"}", "{\"exclusive\": true, \"gpu_mem\": 5}",
        "{\"name\": \"\"}", "{\"key\": 5}", "{\"env\": {\"A=B\": \"x\"}}",
        "{\"env\": {\"\": \"x\"}}", "{\"env\": {\"A\": 1}}", "{\"env\": []}",
        "{\"command\": []}", "{\"command\": [\"\"]}", "{\"command\": [\"a\", 1]}",
        "{\"command\": \"true\"}", "{\"workdir\": \"relative\"}",
        "{\"workdir\": \"/nonexistent/dir\"}", "{\"workdir\": \"/dev/null\"}",
        "{\"workdir\": null}",
    };
    char *why = NULL;
    json_error_t jerr;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *list = pass == 0 ? ok : bad;
        size_t n = pass == 0 ? sizeof ok / sizeof ok[0] : sizeof bad / sizeof bad[0];
        for (size_t i = 0; i < n; i++) {
            json_t *req = json_loads(list[i], 0, &jerr);
            assert_non_null(req);
            if (json_object_get(req, "command") == NULL)
                json_object_set_new(req, "command", json_pack("[s]", "true"));
            if (json_object_get(req, "workdir") == NULL)
                json_object_set_new(req, "workdir", json_string("/"));
            int rc = request_check_submit(req, &why);
            if (rc != (pass == 0 ? 0 : -1))
                fail_msg("%s: %s", list[i], pass == 0 ? why : "accepted");
            if (pass == 1) {
                assert_non_null(why);
                free(why);
                why = NULL;
            }
            json_decref(req);
        }
    }
    /* The exec limits, through the same check. */
    json_t *req = json_pack("{s:[s,s],s:s}", "command", "echo", "", "workdir", "/");
    char *big = calloc(LIMIT_EXEC_STRING + 1, 1);
    memset(big, 'x', LIMIT_EXEC_STRING);
    json_array_set_new(json_object_get(req, "command"), 1, json_string(big));
    assert_int_equal(request_check_submit(req, &why), -1);
    assert_non_null(strstr(why, "argument 2 of the command"));
    assert_non_null(strstr(why, "LIMIT_EXEC_STRING"));
    free(why);
    big[LIMIT_EXEC_STRING - 1] = '\0';
    json_array_set_new(json_object_get(req, "command"), 1, json_string(big));
    assert_int_equal(request_check_submit(req, &why), 0);
    big[120000] = '\0';
    json_t *env = json_object();
    for (int i = 0; i < 8; i++)
        json_object_set_new(env, (char[]){'V', (char)('0' + i), '\0'}, json_string(big));
    json_object_set_new(req, "env", env);
    assert_int_equal(request_check_submit(req, &why), -1);
    assert_non_null(strstr(why, "LIMIT_EXEC_TOTAL"));
    free(why);
    free(big);
    json_decref(req);
}

static void test_fake_gpus(void **state)
{
    struct gpu_inventory inv;
    const char *err;
    assert_int_equal(gpu_parse_fake("4x24G,1x80G", &inv, &err), 0);
    assert_int_equal(inv.count, 5);
    assert_true(inv.gpu[3].mem_total == 24ull << 30);
    assert_true(inv.gpu[4].mem_total == 80ull << 30);
    assert_int_equal(inv.gpu[4].index, 4);
    assert_string_equal(inv.source, "fake");
    static const char *const bad[] = {"", "2", "x16G", "2x", "0x16G", "2x0", "65x1G",
                                      "2x16G,", "2y16G", "2x16Q"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gpu_parse_fake(bad[i], &inv, &err), -1);
}

static void test_nvidia_smi_output(void **state)
{
    struct gpu_inventory inv;
    const char *err;
    const char *csv = "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559\n"
                      "1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559\n";
    assert_int_equal(gpu_parse_smi(csv, &inv, &err), 0);
    assert_int_equal(inv.count, 2);
    assert_string_equal(inv.gpu[1].name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(inv.gpu[1].uuid, "GPU-bbbb");
    assert_true(inv.gpu[0].mem_total == 81559ull << 20);
    assert_int_equal(gpu_parse_smi("0, x, y\n", &inv, &err), -1);
    assert_int_equal(gpu_parse_smi("zero, x, y, 10\n", &inv, &err), -1);
    assert_int_equal(gpu_parse_smi("0, x, y, [N/A]\n", &inv, &err), -1);
}

/* Without NVML: the figures from nvidia-smi's CSV, unknown where it says N/A. */
static void test_nvidia_smi_sample(void **state)
{
    const char *gpus = "GPU-aa, 1024, 16384, 35, 10, 61, 250.50\n"
                       "GPU-bb, [N/A], 16384, [Not Supported], [N/A], 40, [N/A]\n";
    const char *apps = "GPU-aa, 4242, 900\nGPU-aa, 4243, [N/A]\nGPU-bb, 17, 10\n";
    struct gpu_info a = {.index = 0, .uuid = "GPU-aa"}, b = {.index = 1, .uuid = "GPU-bb"},
                    c = {.index = 2, .uuid = "GPU-cc"};
    struct gpu_sample s;
    assert_int_equal(gpu_parse_smi_sample(gpus, apps, &a, &s), 0);
    assert_true(s.ok);
    assert_true(s.mem_used == 1024ULL << 20 && s.mem_total == 16384ULL << 20);
    assert_int_equal(s.util, 35);
    assert_int_equal(s.mem_util, 10);
    assert_int_equal(s.temp_c, 61);
    assert_int_equal(s.power_mw, 250500);
    assert_int_equal(s.nprocs, 2);
    assert_int_equal(s.procs[0].pid, 4242);
    assert_true(s.procs[0].mem == 900ULL << 20);
    assert_true(s.procs[1].mem == NVML_UNKNOWN_U64);
    assert_int_equal(gpu_parse_smi_sample(gpus, NULL, &b, &s), 0);
    assert_true(s.mem_used == NVML_UNKNOWN_U64);
    assert_int_equal(s.util, -1);
    assert_int_equal(s.power_mw, -1);
    assert_int_equal(s.nprocs, -1); /* no process list asked for: unknown */
    assert_int_equal(gpu_parse_smi_sample(gpus, apps, &c, &s), -1); /* not listed: vanished */
    assert_false(s.ok);
    /* Figures too large to convert are unknown, not undefined behaviour (found by fuzz_gpu). */
    const char *huge = "GPU-aa, 3444460000000000, 1e300, 3444460000000, inf, 1e12, 1e300\n";
    const char *huge_apps = "GPU-aa, 1e30, 5\nGPU-aa, 7, 1e300\n";
    assert_int_equal(gpu_parse_smi_sample(huge, huge_apps, &a, &s), 0);
    assert_true(s.mem_used == NVML_UNKNOWN_U64 && s.mem_total == NVML_UNKNOWN_U64);
    assert_int_equal(s.util, -1);
    assert_int_equal(s.mem_util, -1);
    assert_int_equal(s.temp_c, -1);
    assert_int_equal(s.power_mw, -1);
    assert_int_equal(s.nprocs, 1);
    assert_int_equal(s.procs[0].pid, 7);
    assert_true(s.procs[0].mem == NVML_UNKNOWN_U64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),           cmocka_unit_test(test_durations),
        cmocka_unit_test(test_signals),         cmocka_unit_test(test_hours_and_percent),         cmocka_unit_test(test_ints_and_ids),    cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_arrays),          cmocka_unit_test(test_formatting),
        cmocka_unit_test(test_fake_gpus),       cmocka_unit_test(test_nvidia_smi_output),
        cmocka_unit_test(test_nvidia_smi_sample), cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_submit_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
