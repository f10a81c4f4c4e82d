/* An experiment's spec decoded once into typed settings, with the defaults of exp/settings.h. */
#include "exp/settings.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *settings_str(const json_t *obj, const char *key, const char *fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : fallback;
}

static double settings_num(const json_t *obj, const char *key, double fallback)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : fallback;
}

/* A whole number in [min, max], else fallback. */
static int settings_int(const json_t *obj, const char *key, int min, int max, int fallback)
{
    double v = settings_num(obj, key, fallback);
    return v >= min && v <= max ? (int)v : fallback;
}

static char *settings_dup(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

static void settings_early_stopping(const json_t *es, struct exp_settings *s)
{
    const char *type = settings_str(es, "type", NULL), *mode = settings_str(es, "mode", NULL);
    s->rung_unit = xstrdup(settings_str(es, "rung_unit", EXP_DEFAULT_RUNG_UNIT));
    s->stop = (struct stop_config){
        .rule = type == NULL ? EXP_DEFAULT_STOP_RULE
                : strcmp(type, "median") == 0 ? STOP_MEDIAN : STOP_ASHA,
        .maximize = mode == NULL ? EXP_DEFAULT_MAXIMIZE : strcmp(mode, "min") != 0,
        .grace = settings_int(es, "grace", 1, 1 << 30, EXP_DEFAULT_GRACE),
        .eta = settings_num(es, "reduction_factor", EXP_DEFAULT_REDUCTION_FACTOR),
        .max_resource = settings_int(es, "max_rung", 0, 1 << 30, EXP_DEFAULT_MAX_RUNG),
    };
    if (!(s->stop.eta > 1))
        s->stop.eta = EXP_DEFAULT_REDUCTION_FACTOR;
    s->stop_metric = settings_dup(settings_str(es, "metric", NULL));
    s->early_stopping = s->stop_metric != NULL;
}

static void settings_validation(const json_t *val, const json_t *es, struct exp_settings *s)
{
    const char *mode = settings_str(val, "mode", settings_str(es, "mode", NULL));
    json_t *base = json_object_get(val, "baseline");
    json_t *epoch = json_object_get(val, "max_epoch_time");
    s->validation = json_is_object(val);
    s->val_metric = settings_dup(settings_str(val, "metric", NULL));
    s->val_maximize = mode == NULL ? EXP_DEFAULT_MAXIMIZE : strcmp(mode, "min") != 0;
    s->baseline_is_value = json_is_number(base);
    s->baseline = json_is_number(base) ? json_number_value(base) : 0;
    s->baseline_experiment = settings_dup(settings_str(base, "experiment", NULL));
    s->improvement = json_incref(json_object_get(val, "improvement"));
    s->min_gpu_util = settings_num(val, "min_gpu_util", -1);
    const char *bad;
    if (json_is_string(epoch) && parse_duration(json_string_value(epoch), &s->max_epoch_ms,
                                                &bad) == 0) {
        s->max_epoch_time = xstrdup(json_string_value(epoch));
    } else if (json_is_number(epoch) && json_number_value(epoch) > 0 &&
               json_number_value(epoch) < 1e12) {
        s->max_epoch_ms = llround(json_number_value(epoch) * 1000);
        s->max_epoch_time = xasprintf("%gs", json_number_value(epoch));
    }
    if (s->max_epoch_ms <= 0) {
        free(s->max_epoch_time);
        s->max_epoch_time = NULL;
        s->max_epoch_ms = 0;
    }
}

void exp_settings_decode(const json_t *spec, struct exp_settings *s)
{
    json_t *es = json_object_get(spec, "early_stopping");
    json_t *metrics = json_object_get(spec, "metrics"), *val = json_object_get(spec, "validation");
    json_t *patterns = json_object_get(metrics, "patterns");
    json_t *gen = json_object_get(json_object_get(spec, "generator"), "command"), *p;
    size_t i;
    memset(s, 0, sizeof *s);
    settings_early_stopping(json_is_object(es) ? es : NULL, s);
    json_t *file = json_object_get(metrics, "file");
    s->file_metrics = json_is_boolean(file) ? json_is_true(file) : EXP_DEFAULT_FILE_METRICS;
    s->patterns = xcalloc(json_array_size(patterns) + 1, sizeof *s->patterns);
    json_array_foreach(patterns, i, p)
        if (json_is_string(p))
            s->patterns[s->npatterns++] = xstrdup(json_string_value(p));
    settings_validation(json_is_object(val) ? val : NULL, json_is_object(es) ? es : NULL, s);
    s->board_metric = s->stop_metric ? s->stop_metric : s->val_metric;
    s->board_maximize = s->stop_metric ? s->stop.maximize : s->val_maximize;
    s->breaker = settings_int(json_object_get(spec, "circuit_breaker"), "failures", 0, 1 << 30,
                              EXP_DEFAULT_BREAKER);
    s->parallel = settings_int(json_object_get(spec, "sweep"), "parallel", 0, 1 << 30,
                               EXP_DEFAULT_PARALLEL);
    if (json_is_array(gen) && json_array_size(gen) > 0)
        s->generator = json_incref(gen);
}

void exp_settings_free(struct exp_settings *s)
{
    if (s == NULL)
        return;
    free(s->stop_metric);
    free(s->rung_unit);
    for (size_t i = 0; i < s->npatterns; i++)
        free(s->patterns[i]);
    free(s->patterns);
    free(s->val_metric);
    free(s->baseline_experiment);
    json_decref(s->improvement);
    free(s->max_epoch_time);
    json_decref(s->generator);
    memset(s, 0, sizeof *s);
}
