/* drover top's frame (top_render): fixture snapshots in the schema of the daemon's `gpus` reply,
 * rendered into memory and checked for what they must say and for fitting the terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/top.h"

#define NOW 1764380000000LL

/* A machine as the full schema describes it: GPU 0 shared by two tasks plus a process that is
 * not drover's, GPU 1 held whole by one task, GPU 2 offline and GPU 3 busy. */
static const char full_snapshot[] =
    "{\"ok\": true, \"now\": 1764380000000, \"source\": \"nvml\", \"sample_interval_ms\": 5000,"
    " \"sampled_at\": 1764379999000, \"cpus\": 16, \"mem\": 134217728000, \"draining\": false,"
    " \"gpus\": ["
    "  {\"index\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-a\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 17179869184, \"exclusive\": false,"
    "   \"mem_used\": 12884901888, \"util\": 73, \"mem_util\": 20, \"temp_c\": 61,"
    "   \"power_w\": 300.0, \"busy\": false, \"offline\": false, \"offline_reason\": null,"
    "   \"tasks\": [12, 15],"
    "   \"processes\": [{\"pid\": 4242, \"mem\": 8589934592, \"task\": 12},"
    "                   {\"pid\": 4343, \"mem\": 2147483648, \"task\": 15},"
    "                   {\"pid\": 777, \"mem\": 1073741824, \"task\": null}]},"
    "  {\"index\": 1, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-b\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 85899345920, \"exclusive\": true,"
    "   \"mem_used\": 64424509440, \"util\": 99, \"mem_util\": 60, \"temp_c\": 75,"
    "   \"power_w\": 650.0, \"busy\": false, \"offline\": false, \"offline_reason\": null,"
    "   \"tasks\": [16], \"processes\": [{\"pid\": 5000, \"mem\": 64424509440, \"task\": 16}]},"
    "  {\"index\": 2, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-c\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 0, \"exclusive\": false,"
    "   \"mem_used\": null, \"util\": null, \"mem_util\": null, \"temp_c\": null,"
    "   \"power_w\": null, \"busy\": false, \"offline\": true, \"offline_reason\": \"XID 79\","
    "   \"tasks\": [], \"processes\": []},"
    "  {\"index\": 3, \"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-d\","
    "   \"mem_total\": 85899345920, \"mem_claimed\": 0, \"exclusive\": false,"
    "   \"mem_used\": 4294967296, \"util\": 95, \"mem_util\": 10, \"temp_c\": 70,"
    "   \"power_w\": 500.0, \"busy\": true, \"offline\": false, \"offline_reason\": null,"
    "   \"tasks\": [], \"processes\": [{\"pid\": 888, \"mem\": null, \"task\": null}]}],"
    " \"states\": {\"held\": 0, \"pending\": 1, \"queued\": 2, \"running\": 4, \"retrying\": 0},"
    " \"queue_length\": 2,"
    " \"running\": ["
    "  {\"id\": 12, \"name\": \"train-a\", \"attempt\": 1, \"started\": 1764379000000,"
    "   \"gpus\": [0], \"claim\": 8589934592, \"gpu_mem\": 8589934592, \"util\": 73},"
    "  {\"id\": 15, \"name\": null, \"attempt\": 2, \"started\": 1764379990000,"
    "   \"gpus\": [0], \"claim\": 8589934592, \"gpu_mem\": null, \"util\": null},"
    "  {\"id\": 16, \"name\": \"pretrain-big\", \"attempt\": 1, \"started\": 1764370000000,"
    "   \"gpus\": [1], \"claim\": 0, \"gpu_mem\": 64424509440, \"util\": 99},"
    "  {\"id\": 17, \"name\": \"preprocess\", \"attempt\": 1, \"started\": 1764379940000,"
    "   \"gpus\": [], \"claim\": 0, \"gpu_mem\": null, \"util\": null}],"
    " \"queued\": ["
    "  {\"id\": 20, \"name\": null, \"priority\": 0, \"gpus\": 1, \"claim\": 0,"
    "   \"since\": 1764379500000},"
    "  {\"id\": 21, \"name\": \"eval\", \"priority\": 5, \"gpus\": 2, \"claim\": 10737418240,"
    "   \"since\": 1764379940000}]}";

/* A fake inventory under NVML-less telemetry: every figure null, nothing running or queued. */
static const char null_snapshot[] =
    "{\"ok\": true, \"now\": 1764380000000, \"source\": \"fake\", \"sample_interval_ms\": 0,"
    " \"sampled_at\": null, \"cpus\": 2, \"mem\": 8589934592, \"draining\": true,"
    " \"gpus\": [{\"index\": 0, \"name\": \"Fake GPU 16G\", \"uuid\": \"FAKE-0\","
    "   \"mem_total\": 17179869184, \"mem_claimed\": 0, \"exclusive\": false,"
    "   \"mem_used\": null, \"util\": null, \"mem_util\": null, \"temp_c\": null,"
    "   \"power_w\": null, \"busy\": false, \"offline\": false, \"offline_reason\": null,"
    "   \"tasks\": [], \"processes\": []}],"
    " \"states\": {\"running\": 0}, \"queue_length\": 0, \"running\": [], \"queued\": []}";

/* What a daemon without the telemetry fields sends today. */
static const char old_snapshot[] =
    "{\"ok\": true, \"source\": \"fake\", \"cpus\": 2, \"mem\": 8589934592,"
    " \"gpus\": [{\"index\": 0, \"name\": \"Fake GPU 16G\", \"uuid\": \"FAKE-0\","
    "   \"mem_total\": 17179869184, \"mem_claimed\": 8589934592, \"exclusive\": false,"
    "   \"tasks\": [3]}]}";

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (j == NULL)
        fail_msg("fixture: %s at line %d", err.text, err.line);
    return j;
}

/* A snapshot with `listed` queued tasks out of `total`. */
static json_t *long_queue(int listed, int total)
{
    json_t *s = load(null_snapshot), *queued = json_array();
    for (int i = 0; i < listed; i++)
        json_array_append_new(queued, json_pack("{s:i,s:s,s:i,s:i,s:I,s:I}", "id", 100 + i,
                                                "name", "sweep", "priority", 0, "gpus", 1,
                                                "claim", (json_int_t)(4ll << 30), "since",
                                                (json_int_t)(NOW - 60000)));
    json_object_set_new(s, "queued", queued);
    json_object_set_new(s, "queue_length", json_integer(total));
    return s;
}

static char *render(const json_t *s, int width, int height, bool color)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    top_render(s, width, height, color, fp);
    fclose(fp);
    return buf;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* The widest line in display columns: escape sequences take none, a UTF-8 character one. */
static int widest(const char *text)
{
    int most = 0, cols = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n') {
            most = cols > most ? cols : most;
            cols = 0;
        } else if (*p == 0x1b) {
            assert_int_equal(p[1], '[');
            for (p += 2; *p && !(*p >= 0x40 && *p <= 0x7e); p++)
                ;
        } else if ((*p & 0xc0) != 0x80) {
            cols++;
        }
    }
    assert_int_equal(cols, 0); /* every line ends in '\n' */
    return most;
}

static void assert_has(const char *text, const char *what)
{
    if (strstr(text, what) == NULL)
        fail_msg("'%s' missing from:\n%s", what, text);
}

static void assert_lacks(const char *text, const char *what)
{
    if (strstr(text, what) != NULL)
        fail_msg("'%s' unexpected in:\n%s", what, text);
}

/* The line that contains `what` (a copy; the caller frees it). */
static char *line_with(const char *text, const char *what)
{
    const char *at = strstr(text, what);
    assert_non_null(at);
    while (at > text && at[-1] != '\n')
        at--;
    return strndup(at, strcspn(at, "\n"));
}

static void test_header(void **state)
{
    json_t *s = load(full_snapshot);
    char *out = render(s, 120, 0, false);
    char *head = line_with(out, "drover top");
    assert_has(head, "source nvml");
    assert_has(head, "queued 2");
    assert_has(head, "running 4");
    assert_has(head, "draining no");
    assert_has(head, "sampled 1.0s ago");
    free(head);
    free(out);
    json_decref(s);
    s = load(null_snapshot);
    out = render(s, 120, 0, false);
    assert_has(out, "draining yes");
    assert_has(out, "no telemetry");
    free(out);
    json_decref(s);
}

static void test_shared_gpu(void **state)
{
    json_t *s = load(full_snapshot);
    char *out = render(s, 100, 0, false);
    char *title = line_with(out, "GPU 0");
    assert_has(title, "NVIDIA H100 80GB HBM3");
    assert_has(title, "temp 61C");
    assert_has(title, "power 300W");
    assert_has(title, "shared");
    free(title);
    char *usage = line_with(out, "12G/80G");
    assert_has(usage, "claimed 16G");
    assert_has(usage, "73%");
    assert_has(usage, "[#");
    free(usage);
    char *task = line_with(out, "#12");
    assert_has(task, "train-a");
    assert_has(task, "try 1");
    assert_has(task, "up 16m40s");
    assert_has(task, "claim 8G");
    assert_has(task, "mem 8G");
    assert_has(task, "util 73%");
    free(task);
    task = line_with(out, "#15");
    assert_has(task, "try 2");
    assert_has(task, "up 10s");
    assert_has(task, "mem -");
    assert_has(task, "util -");
    free(task);
    char *other = line_with(out, "pid 777");
    assert_has(other, "mem 1G");
    free(other);
    assert_lacks(out, "pid 4242"); /* drover's own processes are its tasks' lines */
    assert_lacks(out, "pid 4343");
    free(out);
    json_decref(s);
}

static void test_exclusive_busy_offline(void **state)
{
    json_t *s = load(full_snapshot);
    char *out = render(s, 100, 0, false);
    char *line = line_with(out, "GPU 1");
    assert_has(line, "exclusive");
    free(line);
    line = line_with(out, "#16");
    assert_has(line, "pretrain-big");
    assert_has(line, "exclusive");
    assert_has(line, "up 2h46m");
    free(line);
    line = line_with(out, "GPU 2");
    assert_has(line, "OFFLINE (XID 79)");
    assert_has(line, "temp -");
    assert_has(line, "power -");
    free(line);
    line = line_with(out, "GPU 3");
    assert_has(line, "BUSY");
    assert_lacks(line, "OFFLINE");
    free(line);
    line = line_with(out, "pid 888");
    assert_has(line, "mem -");
    free(line);
    line = line_with(out, "#17"); /* a CPU-only task, under no GPU */
    assert_has(line, "preprocess");
    free(line);
    assert_has(out, "CPU only");
    free(out);
    json_decref(s);
}

static void test_queue(void **state)
{
    json_t *s = load(full_snapshot);
    char *out = render(s, 100, 0, false);
    assert_has(out, "QUEUE  2 queued");
    char *line = line_with(out, "#20");
    assert_has(line, "exclusive");
    assert_has(line, "8m20s");
    free(line);
    line = line_with(out, "#21");
    assert_has(line, "eval");
    assert_has(line, "10G");
    assert_has(line, "1m00s");
    free(line);
    assert_lacks(out, "more");
    free(out);
    json_decref(s);
}

static void test_nulls_everywhere(void **state)
{
    json_t *s = load(null_snapshot);
    char *out = render(s, 100, 0, false);
    char *line = line_with(out, "GPU 0");
    assert_has(line, "Fake GPU 16G");
    assert_has(line, "temp -");
    assert_has(line, "power -");
    assert_has(line, "free");
    free(line);
    line = line_with(out, "-/16G");
    assert_has(line, "claimed 0B");
    assert_has(line, "   -");
    free(line);
    assert_has(out, "QUEUE  empty");
    assert_lacks(out, "null");
    assert_lacks(out, "more");
    free(out);
    json_decref(s);
}

static void test_old_daemon(void **state)
{
    json_t *s = load(old_snapshot);
    char *out = render(s, 100, 0, false);
    assert_has(out, "queued -");
    assert_has(out, "running -");
    assert_has(out, "draining -");
    assert_has(out, "QUEUE  -");
    char *line = line_with(out, "#3");
    assert_has(line, "up -");
    free(line);
    line = line_with(out, "-/16G");
    assert_has(line, "claimed 8G");
    assert_has(line, "[#"); /* the claim fills the bar when the use is unknown */
    free(line);
    free(out);
    json_decref(s);
}

static void test_long_queue_fits(void **state)
{
    json_t *s = long_queue(50, 120);
    for (int height = 8; height <= 40; height += 4) {
        char *out = render(s, 80, height, false);
        int lines = count_lines(out);
        int rows = 0;
        for (const char *p = out; (p = strstr(p, "sweep")) != NULL; p++)
            rows++;
        char want[32];
        snprintf(want, sizeof want, "\xe2\x80\xa6 %d more", 120 - rows);
        assert_true(lines <= height);
        assert_true(lines >= height - 1); /* the queue uses the room it has */
        assert_true(rows > 0);
        assert_has(out, want);
        assert_has(out, "QUEUE  120 queued");
        free(out);
    }
    char *out = render(s, 80, 0, false); /* no height: all it lists, then what it did not */
    assert_has(out, "\xe2\x80\xa6 70 more");
    assert_has(out, "#149");
    free(out);
    json_decref(s);
    s = long_queue(5, 5);
    out = render(s, 80, 0, false);
    assert_lacks(out, "more");
    free(out);
    out = render(s, 80, 3, false); /* no room below the GPU: the title is all there is */
    assert_int_equal(count_lines(out), 3);
    free(out);
    json_decref(s);
}

static void test_widths(void **state)
{
    static const int widths[] = {1, 10, 40, 60, 72, 80, 100, 132, 200, 400};
    json_t *fixtures[] = {load(full_snapshot), load(null_snapshot), load(old_snapshot),
                          long_queue(50, 60)};
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
            for (int color = 0; color < 2; color++) {
                char *out = render(fixtures[f], widths[w], 30, color);
                if (widest(out) > widths[w])
                    fail_msg("a line wider than %d:\n%s", widths[w], out);
                free(out);
            }
        }
        json_decref(fixtures[f]);
    }
}

static void test_color(void **state)
{
    json_t *s = load(full_snapshot);
    char *out = render(s, 100, 0, false);
    assert_null(strchr(out, '\033'));
    free(out);
    out = render(s, 100, 0, true);
    assert_non_null(strchr(out, '\033'));
    assert_has(out, "\033[31mOFFLINE");
    free(out);
    json_decref(s);
}

/* A task name is the user's: it must not reach the terminal as control characters. */
static void test_hostile_names(void **state)
{
    json_t *s = load(full_snapshot);
    json_t *r = json_array_get(json_object_get(s, "running"), 0);
    json_object_set_new(r, "name", json_string("\033[2J\ttab\xc2\x9b" "31m\xe2\x80\xa6ok"));
    char *out = render(s, 100, 0, false);
    assert_null(strchr(out, '\033'));
    assert_null(strchr(out, '\t'));
    assert_null(strstr(out, "\xc2\x9b"));
    assert_has(out, "?[2J?tab?31m\xe2\x80\xa6ok");
    free(out);
    json_object_set_new(r, "name", json_string("a-very-long-name-that-will-not-fit-in-the-column"));
    out = render(s, 100, 0, false);
    assert_has(out, "a-very-long-name-that-w\xe2\x80\xa6");
    free(out);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),          cmocka_unit_test(test_shared_gpu),
        cmocka_unit_test(test_exclusive_busy_offline), cmocka_unit_test(test_queue),
        cmocka_unit_test(test_nulls_everywhere), cmocka_unit_test(test_old_daemon),
        cmocka_unit_test(test_long_queue_fits), cmocka_unit_test(test_widths),
        cmocka_unit_test(test_color),           cmocka_unit_test(test_hostile_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
