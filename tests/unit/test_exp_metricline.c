/* exp/metricline.c: JSON lines and log lines into (step, name, value), and exp/settings.c: a
 * stored spec decoded with its defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "exp/metricline.h"
#include "exp/settings.h"

/* What the callback saw, as "step:name=value" lines; it stops after stop_after values. */
struct seen {
    char text[1024];
    int n, stop_after;
};

static int record(void *arg, int64_t step, const char *name, double value)
{
    struct seen *s = arg;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof s->text - used, "%lld:%s=%g;", (long long)step, name, value);
    return ++s->n == s->stop_after ? 7 : 0;
}

static void test_json_line(void **state)
{
    struct seen s = {0};
    int64_t counter = 0;
    assert_int_equal(metricline_json("{\"epoch\": 3, \"loss\": 0.41, \"val_accuracy\": 0.91}",
                                     "epoch", &counter, record, &s), 0);
    assert_string_equal(s.text, "3:loss=0.41;3:val_accuracy=0.91;");
    assert_int_equal(counter, 0); /* it gave its step */
    /* No rung unit field: "step"; neither: the line's position among those without one. */
    memset(&s, 0, sizeof s);
    metricline_json("{\"step\": 7, \"acc\": 1}", "epoch", &counter, record, &s);
    metricline_json("{\"acc\": 0.5, \"name\": \"x\", \"ok\": true}", "epoch", &counter, record, &s);
    metricline_json("{\"acc\": 0.6}", "epoch", &counter, record, &s);
    assert_string_equal(s.text, "7:acc=1;1:acc=0.5;2:acc=0.6;");
    /* Another rung unit: that field is the step and not a metric; "step" is never a metric. */
    memset(&s, 0, sizeof s);
    metricline_json("{\"iteration\": 40, \"step\": 2, \"loss\": 1.5}", "iteration", &counter,
                    record, &s);
    assert_string_equal(s.text, "40:loss=1.5;");
    /* Not JSON objects: nothing. */
    memset(&s, 0, sizeof s);
    metricline_json("loss: 0.3", "epoch", &counter, record, &s);
    metricline_json("[1, 2]", "epoch", &counter, record, &s);
    metricline_json("{\"loss\": ", "epoch", &counter, record, &s);
    assert_string_equal(s.text, "");
    assert_int_equal(counter, 2);
}

static void test_json_stop(void **state)
{
    struct seen s = {.stop_after = 1};
    int64_t counter = 0;
    char text[] = "{\"epoch\": 1, \"a\": 1, \"b\": 2}\n{\"epoch\": 2, \"a\": 3}\n";
    /* The callback's answer comes back at once, and no later line is read. */
    assert_int_equal(metricline_text(text, NULL, NULL, 0, &counter, record, &s), 7);
    assert_string_equal(s.text, "1:a=1;");
}

static void test_match(void **state)
{
    char name[METRIC_NAME_MAX];
    double v;
    assert_true(metricline_match("loss: {value}", "step 1 loss: 0.9 acc=0.5", name, sizeof name,
                                 &v));
    assert_string_equal(name, "loss");
    assert_true(v == 0.9);
    assert_false(metricline_match("loss: {value}", "loss: n/a", name, sizeof name, &v));
    assert_false(metricline_match("loss: {value}", "no metric here", name, sizeof name, &v));
    assert_true(metricline_match("{name}={value}", "step 1 loss: 0.9 acc=0.5", name, sizeof name,
                                 &v));
    assert_string_equal(name, "acc");
    assert_true(v == 0.5);
    assert_true(metricline_match("{name}={value}", "train.loss=1e-3", name, sizeof name, &v));
    assert_string_equal(name, "train.loss");
    assert_true(v == 1e-3);
    /* Not in the middle of a word; a pattern without {value}, or {value} before {name}. */
    assert_false(metricline_match("{name}={value}", "9x=3", name, sizeof name, &v));
    assert_false(metricline_match("loss", "loss 3", name, sizeof name, &v));
    assert_false(metricline_match("{value} is {name}", "3 is x", name, sizeof name, &v));
    assert_false(metricline_match(": {value}", ": 3", name, sizeof name, &v)); /* no name */
    /* A name longer than the buffer is not cut short into another metric. */
    char small[4];
    assert_false(metricline_match("{name}={value}", "accuracy=1", small, sizeof small, &v));
}

static void test_log_lines(void **state)
{
    char *patterns[] = {"loss: {value}", "{name}={value}"};
    struct seen s = {0};
    int64_t step = 0;
    char text[] = "step 1 loss: 0.9 acc=0.5\nloss: 0.4\nnothing\nacc=0.75\nloss: nan\n";
    assert_int_equal(metricline_text(text, "epoch", patterns, 2, &step, record, &s), 0);
    /* Each match counts a step, the first of each pattern in a line; nan is no metric (its
     * step is still counted). */
    assert_string_equal(s.text, "1:loss=0.9;2:acc=0.5;3:loss=0.4;4:acc=0.75;");
    assert_int_equal(step, 5);
}

static void test_settings_defaults(void **state)
{
    struct exp_settings s;
    exp_settings_decode(NULL, &s);
    assert_false(s.early_stopping);
    assert_null(s.stop_metric);
    assert_string_equal(s.rung_unit, EXP_DEFAULT_RUNG_UNIT);
    assert_int_equal(s.stop.grace, EXP_DEFAULT_GRACE);
    assert_true(s.stop.eta == EXP_DEFAULT_REDUCTION_FACTOR);
    assert_int_equal(s.breaker, EXP_DEFAULT_BREAKER);
    assert_true(s.file_metrics);
    assert_int_equal(s.npatterns, 0);
    assert_false(s.validation);
    assert_null(s.generator);
    assert_null(s.board_metric);
    assert_int_equal(s.parallel, EXP_DEFAULT_PARALLEL);
    exp_settings_free(&s);
    exp_settings_free(NULL);
}

static void test_settings_decoded(void **state)
{
    json_t *spec = json_loads(
        "{\"early_stopping\": {\"type\": \"median\", \"metric\": \"loss\", \"mode\": \"min\","
        " \"rung_unit\": \"step\", \"grace\": 0, \"reduction_factor\": 1, \"max_rung\": 9},"
        " \"metrics\": {\"file\": false, \"patterns\": [\"loss: {value}\", 3]},"
        " \"validation\": {\"metric\": \"acc\", \"baseline\": {\"experiment\": \"old\"},"
        " \"improvement\": \"2%\", \"max_epoch_time\": \"90s\", \"min_gpu_util\": 0.7},"
        " \"circuit_breaker\": {\"failures\": 5}, \"sweep\": {\"parallel\": 4},"
        " \"generator\": {\"command\": [\"python3\", \"g.py\"]}}", 0, NULL);
    struct exp_settings s;
    exp_settings_decode(spec, &s);
    assert_true(s.early_stopping);
    assert_int_equal(s.stop.rule, STOP_MEDIAN);
    assert_false(s.stop.maximize);
    assert_string_equal(s.stop_metric, "loss");
    assert_string_equal(s.rung_unit, "step");
    assert_int_equal(s.stop.grace, EXP_DEFAULT_GRACE);                   /* 0: not allowed */
    assert_true(s.stop.eta == EXP_DEFAULT_REDUCTION_FACTOR);             /* 1: not allowed */
    assert_int_equal(s.stop.max_resource, 9);
    assert_false(s.file_metrics);
    assert_int_equal(s.npatterns, 1);
    assert_string_equal(s.patterns[0], "loss: {value}");
    assert_true(s.validation);
    assert_string_equal(s.val_metric, "acc");
    assert_false(s.val_maximize); /* early stopping's mode when validation names none */
    assert_false(s.baseline_is_value);
    assert_string_equal(s.baseline_experiment, "old");
    assert_string_equal(json_string_value(s.improvement), "2%");
    assert_int_equal(s.max_epoch_ms, 90000);
    assert_string_equal(s.max_epoch_time, "90s");
    assert_true(s.min_gpu_util == 0.7);
    assert_string_equal(s.board_metric, "loss");
    assert_false(s.board_maximize);
    assert_int_equal(s.breaker, 5);
    assert_int_equal(s.parallel, 4);
    assert_int_equal(json_array_size(s.generator), 2);
    exp_settings_free(&s);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_line),         cmocka_unit_test(test_json_stop),
        cmocka_unit_test(test_match),             cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_settings_defaults), cmocka_unit_test(test_settings_decoded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
