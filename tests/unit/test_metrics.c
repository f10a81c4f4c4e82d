/* The Prometheus rendering of the machine snapshot (daemon/metrics.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/metrics.h"

/* The schema's example, with figures null on GPU 1 (no telemetry for it) and on task 15, and a
 * task name that needs escaping: a"b\c. */
static const char snapshot_json[] =
    "{\"ok\": true, \"now\": 1764380000000, \"source\": \"nvml\", \"sample_interval_ms\": 5000,"
    " \"sampled_at\": 1764379999000, \"cpus\": 16, \"mem\": 134217728000, \"draining\": false,"
    " \"gpus\": ["
    "  {\"index\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-aaaa\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 17179869184, \"exclusive\": false,"
    "   \"mem_used\": 12884901888, \"util\": 73, \"mem_util\": 20, \"temp_c\": 61,"
    "   \"power_w\": 312.5, \"busy\": false, \"offline\": false, \"offline_reason\": null,"
    "   \"tasks\": [12], \"processes\": [{\"pid\": 4242, \"mem\": 8589934592, \"task\": 12},"
    "   {\"pid\": 777, \"mem\": null, \"task\": null}]},"
    "  {\"index\": 1, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-bbbb\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 85899345920, \"exclusive\": true,"
    "   \"mem_used\": null, \"util\": null, \"mem_util\": null, \"temp_c\": null,"
    "   \"power_w\": null, \"busy\": true, \"offline\": true, \"offline_reason\": \"XID 79\","
    "   \"tasks\": [15], \"processes\": []}],"
    " \"states\": {\"held\": 0, \"pending\": 1, \"queued\": 7, \"running\": 2, \"retrying\": 0,"
    "  \"succeeded\": 40, \"failed\": 3, \"timed_out\": 0, \"cancelled\": 1,"
    "  \"upstream_failed\": 0},"
    " \"queue_length\": 7,"
    " \"running\": ["
    "  {\"id\": 12, \"name\": \"a\\\"b\\\\c\", \"attempt\": 1, \"started\": 1764379000000,"
    "   \"gpus\": [0], \"claim\": 8589934592, \"gpu_mem\": 8589934592, \"util\": 73},"
    "  {\"id\": 15, \"name\": null, \"attempt\": 2, \"started\": 1764379500000,"
    "   \"gpus\": [1], \"claim\": 0, \"gpu_mem\": null, \"util\": null}],"
    " \"queued\": [{\"id\": 20, \"name\": null, \"priority\": 0, \"gpus\": 1, \"claim\": 0,"
    "  \"since\": 1764379500000}],"
    " \"attempts\": {\"succeeded\": 40, \"failed\": 5, \"timed_out\": 0, \"cancelled\": 1,"
    "  \"lost\": 0, \"oom\": 1, \"stalled\": 0, \"gpu_fault\": 0, \"not_started\": 0},"
    " \"latency\": {\"buckets\": [[1, 10], [5, 20], [30, 25], [60, 30], [300, 38], [1800, 40],"
    "  [3600, 41], [21600, 42], [86400, 42]], \"sum\": 1234.5, \"count\": 42}}";

/* Snapshots with parts missing or of the wrong type; [5] is the garbage one, [6] a histogram
 * without a sum. */
static const char *const odd_inputs[] = {
    "{}",
    "[]",
    "42",
    "null",
    "{\"gpus\": \"x\", \"states\": [], \"running\": {}, \"attempts\": 3, \"latency\": []}",
    "{\"gpus\": [1, null, [], {}, {\"index\": \"a\", \"util\": \"73\", \"busy\": 1,"
    "  \"uuid\": 7, \"name\": null, \"temp_c\": true, \"offline\": false}],"
    " \"states\": {\"queued\": \"7\", \"bogus\": 1},"
    " \"running\": [{\"id\": \"12\", \"gpu_mem\": 1}, 5, {\"id\": 3, \"gpus\": 2,"
    "  \"claim\": null, \"name\": 9}],"
    " \"attempts\": {\"x\": \"y\", \"odd \\\"key\\\"\": 2},"
    " \"latency\": {\"buckets\": [[1], [null, 2], [\"a\", 3], [5, \"b\"], [1, 1], 7,"
    "  [2, 1, 1], [0.5, 1]], \"sum\": 1, \"count\": 2},"
    " \"sampled_at\": \"yesterday\", \"draining\": \"no\", \"queue_length\": null}",
    "{\"latency\": {\"buckets\": [[1, 1]], \"sum\": null, \"count\": 1}}",
};

static char *render_json(const char *text)
{
    json_error_t error;
    json_t *snapshot = json_loads(text, JSON_DECODE_ANY, &error);
    if (snapshot == NULL)
        fail_msg("bad JSON literal: %s (line %d)", error.text, error.line);
    char *out = metrics_render(snapshot);
    json_decref(snapshot);
    assert_non_null(out);
    return out;
}

/* Whether out holds line as a whole line. */
static bool has_line(const char *out, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = out; (p = strstr(p, line)) != NULL; p++)
        if ((p == out || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

#define assert_line(out, line)                                                                   \
    do {                                                                                         \
        if (!has_line(out, line))                                                                \
            fail_msg("missing line: %s\n--- output:\n%s", line, out);                            \
    } while (0)

#define assert_no_text(out, text)                                                                \
    do {                                                                                         \
        if (strstr(out, text) != NULL)                                                           \
            fail_msg("unexpected text: %s\n--- output:\n%s", text, out);                         \
    } while (0)

static void test_gpu_families(void **state)
{
    char *out = render_json(snapshot_json);
    const char *l0 = "{gpu=\"0\",uuid=\"GPU-aaaa\",name=\"NVIDIA H100 80GB HBM3\"}";
    const char *l1 = "{gpu=\"1\",uuid=\"GPU-bbbb\",name=\"NVIDIA H100 80GB HBM3\"}";
    static const struct { const char *metric, *value0, *value1; } want[] = {
        {"drover_gpu_utilization_ratio", "0.73", NULL},
        {"drover_gpu_memory_utilization_ratio", "0.2", NULL},
        {"drover_gpu_memory_used_bytes", "12884901888", NULL},
        {"drover_gpu_memory_total_bytes", "85899345920", "85899345920"},
        {"drover_gpu_memory_claimed_bytes", "17179869184", "85899345920"},
        {"drover_gpu_temperature_celsius", "61", NULL},
        {"drover_gpu_power_watts", "312.5", NULL},
        {"drover_gpu_busy", "0", "1"},
        {"drover_gpu_offline", "0", "1"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char line[256];
        snprintf(line, sizeof line, "# TYPE %s gauge", want[i].metric);
        assert_line(out, line);
        snprintf(line, sizeof line, "%s%s %s", want[i].metric, l0, want[i].value0);
        assert_line(out, line);
        /* GPU 1's null figures are left out, not written as NaN. */
        snprintf(line, sizeof line, "%s%s", want[i].metric, l1);
        if (want[i].value1) {
            snprintf(line, sizeof line, "%s%s %s", want[i].metric, l1, want[i].value1);
            assert_line(out, line);
        } else {
            assert_no_text(out, line);
        }
    }
    assert_no_text(out, "NaN");
    free(out);
}

static void test_task_families(void **state)
{
    char *out = render_json(snapshot_json);
    assert_line(out, "# TYPE drover_tasks gauge");
    assert_line(out, "drover_tasks{state=\"held\"} 0");
    assert_line(out, "drover_tasks{state=\"queued\"} 7");
    assert_line(out, "drover_tasks{state=\"succeeded\"} 40");
    assert_line(out, "drover_tasks{state=\"upstream_failed\"} 0");
    assert_line(out, "drover_queue_length 7");
    assert_line(out, "drover_draining 0");
    /* The name a"b\c escaped as the format wants; a null name is an empty label. */
    assert_line(out, "drover_task_gpu_memory_bytes{task=\"12\",name=\"a\\\"b\\\\c\"} 8589934592");
    assert_no_text(out, "drover_task_gpu_memory_bytes{task=\"15\"");
    assert_line(out, "drover_task_gpu_claim_bytes{task=\"12\",name=\"a\\\"b\\\\c\"} 8589934592");
    assert_line(out, "drover_task_gpu_claim_bytes{task=\"15\",name=\"\"} 0");
    assert_line(out, "drover_task_gpus{task=\"15\",name=\"\"} 1");
    free(out);
    out = render_json("{\"running\": [{\"id\": 1, \"name\": \"x\\ny\", \"gpus\": [0, 1]}]}");
    assert_line(out, "drover_task_gpus{task=\"1\",name=\"x\\ny\"} 2");
    free(out);
    out = render_json(snapshot_json);
    /* Queued tasks have no per-task samples. */
    assert_no_text(out, "task=\"20\"");
    assert_line(out, "# TYPE drover_attempts_total counter");
    assert_line(out, "drover_attempts_total{outcome=\"failed\"} 5");
    assert_line(out, "drover_attempts_total{outcome=\"not_started\"} 0");
    assert_line(out, "drover_telemetry_last_sample_timestamp_seconds 1764379999");
    assert_line(out, "drover_build_info{version=\"0.5\"} 1");
    free(out);
}

static void test_latency_histogram(void **state)
{
    char *out = render_json(snapshot_json);
    assert_line(out, "# TYPE drover_schedule_latency_seconds histogram");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"1\"} 10");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"300\"} 38");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"86400\"} 42");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"+Inf\"} 42");
    assert_line(out, "drover_schedule_latency_seconds_sum 1234.5");
    assert_line(out, "drover_schedule_latency_seconds_count 42");
    /* The +Inf bucket is the count even when the last finite bucket is not. */
    free(out);
    out = render_json("{\"latency\": {\"buckets\": [[0.5, 1], [2.5, 3]], \"sum\": 9.25,"
                      " \"count\": 5}}");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"0.5\"} 1");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"2.5\"} 3");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"+Inf\"} 5");
    free(out);
}

/* Every sample belongs to a family announced by # HELP and # TYPE, and each family is one run of
 * lines: what promtool checks, here without it. */
static void test_families_are_whole(void **state)
{
    char *out = render_json(snapshot_json);
    char family[128] = "", seen[8192] = " ";
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128];
        if (sscanf(line, "# HELP %127s", name) == 1) {
            char key[132];
            snprintf(key, sizeof key, " %s ", name);
            if (strstr(seen, key) != NULL)
                fail_msg("family %s written twice", name);
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
            snprintf(family, sizeof family, "%s", name);
            continue;
        }
        if (line[0] == '#')
            continue;
        if (strncmp(line, family, strlen(family)) != 0 || family[0] == '\0')
            fail_msg("sample outside its family (%s): %s", family, line);
    }
    free(out);
}

/* promtool from PATH, or NULL. */
static char *find_promtool(void)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        return NULL;
    char *dirs = strdup(path), *save = NULL, *found = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char candidate[4096];
        snprintf(candidate, sizeof candidate, "%s/promtool", *dir ? dir : ".");
        if (access(candidate, X_OK) == 0)
            found = strdup(candidate);
    }
    free(dirs);
    return found;
}

/* Runs promtool check metrics on text; fails the test unless it exits 0. */
static void promtool_check(const char *promtool, const char *text)
{
    char file[] = "/tmp/drover-metrics-XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char command[8192];
    snprintf(command, sizeof command, "'%s' check metrics < '%s'", promtool, file);
    int status = system(command);
    unlink(file);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("promtool check metrics failed (status %d) on:\n%s", status, text);
}

static void test_promtool_accepts(void **state)
{
    char *promtool = find_promtool();
    if (promtool == NULL) {
        print_message("note: promtool not on PATH (Debian package prometheus); not checked\n");
        skip();
    }
    char *out = render_json(snapshot_json);
    promtool_check(promtool, out);
    free(out);
    for (size_t i = 0; i < sizeof odd_inputs / sizeof odd_inputs[0]; i++) {
        out = render_json(odd_inputs[i]);
        promtool_check(promtool, out);
        free(out);
    }
    free(promtool);
}

/* Whatever comes in, something well-formed comes out: at least the build info. */
static void test_empty_and_garbage(void **state)
{
    char *out = metrics_render(NULL);
    assert_line(out, "drover_build_info{version=\"0.5\"} 1");
    free(out);
    for (size_t i = 0; i < sizeof odd_inputs / sizeof odd_inputs[0]; i++) {
        out = render_json(odd_inputs[i]);
        assert_line(out, "drover_build_info{version=\"0.5\"} 1");
        assert_no_text(out, "NaN");
        assert_no_text(out, "drover_queue_length");
        assert_no_text(out, "drover_draining");
        assert_no_text(out, "drover_telemetry");
        free(out);
    }
    /* The garbage case: only what is well-typed gets through. */
    out = render_json(odd_inputs[5]);
    assert_line(out, "drover_gpu_offline{gpu=\"4\",uuid=\"\",name=\"\"} 0");
    assert_no_text(out, "drover_gpu_busy");
    assert_no_text(out, "drover_gpu_utilization_ratio");
    assert_no_text(out, "drover_gpu_temperature_celsius");
    assert_no_text(out, "drover_tasks");
    assert_no_text(out, "task=\"12\"");
    assert_no_text(out, "drover_task_gpus");
    assert_line(out, "drover_attempts_total{outcome=\"odd \\\"key\\\"\"} 2");
    assert_no_text(out, "outcome=\"x\"");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"1\"} 1");
    assert_no_text(out, "le=\"0.5\"");
    assert_no_text(out, "le=\"2\"");
    assert_no_text(out, "le=\"5\"");
    assert_line(out, "drover_schedule_latency_seconds_bucket{le=\"+Inf\"} 2");
    free(out);
    /* Without a sum the histogram is left out whole. */
    out = render_json(odd_inputs[6]);
    assert_no_text(out, "drover_schedule_latency");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_families),       cmocka_unit_test(test_task_families),
        cmocka_unit_test(test_latency_histogram),  cmocka_unit_test(test_families_are_whole),
        cmocka_unit_test(test_promtool_accepts),   cmocka_unit_test(test_empty_and_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
