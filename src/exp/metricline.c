/* Metrics from what a trial writes: JSON lines and log lines matched by patterns. */
#include "exp/metricline.h"
#include "exp/settings.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int metricline_emit(metric_fn fn, void *arg, int64_t step, const char *name, double value)
{
    return isfinite(value) ? fn(arg, step, name, value) : 0;
}

int metricline_json(const char *line, const char *rung_unit, int64_t *counter, metric_fn fn,
                    void *arg)
{
    json_t *obj = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return 0;
    }
    const char *unit = rung_unit != NULL ? rung_unit : EXP_DEFAULT_RUNG_UNIT;
    json_t *s = json_object_get(obj, unit);
    if (!json_is_number(s))
        s = json_object_get(obj, "step");
    int64_t step = json_is_number(s) ? (int64_t)json_number_value(s) : ++*counter;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(obj, key, v) {
        if (!json_is_number(v) || strcmp(key, "step") == 0 || strcmp(key, unit) == 0)
            continue;
        if ((rc = metricline_emit(fn, arg, step, key, json_number_value(v))) != 0)
            break;
    }
    json_decref(obj);
    return rc;
}

static bool metricline_ident(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* "loss: {value}": the literal before {value} anywhere in the line, then a number. */
static bool metricline_literal(const char *pattern, const char *vp, const char *line, char *name,
                               size_t name_len, double *value)
{
    size_t n = 0, lit = (size_t)(vp - pattern);
    while (metricline_ident(pattern[n]) && n + 1 < name_len)
        n++;
    if (n == 0)
        return false;
    for (const char *at = line; *at; at++) {
        if (strncmp(at, pattern, lit) != 0)
            continue;
        char *end;
        *value = strtod(at + lit, &end);
        if (end != at + lit) {
            memcpy(name, pattern, n);
            name[n] = '\0';
            return true;
        }
    }
    return false;
}

bool metricline_match(const char *pattern, const char *line, char *name, size_t name_len,
                      double *value)
{
    const char *vp = strstr(pattern, "{value}"), *np = strstr(pattern, "{name}");
    if (vp == NULL || name_len == 0)
        return false;
    if (np == NULL)
        return metricline_literal(pattern, vp, line, name, name_len, value);
    if (np > vp)
        return false;
    /* {name}SEP{value}: an identifier that starts a word, the separator, a number. */
    const char *sep = np + strlen("{name}");
    size_t seplen = (size_t)(vp - sep);
    for (const char *at = line; *at; at++) {
        if (!(isalpha((unsigned char)*at) || *at == '_') || (at > line && metricline_ident(at[-1])))
            continue;
        size_t n = 0;
        while (metricline_ident(at[n]) || at[n] == '.')
            n++;
        if (n >= name_len || strncmp(at + n, sep, seplen) != 0)
            continue;
        char *end;
        *value = strtod(at + n + seplen, &end);
        if (end == at + n + seplen)
            continue;
        memcpy(name, at, n);
        name[n] = '\0';
        return true;
    }
    return false;
}

int metricline_log(const char *line, char *const *patterns, size_t npatterns, int64_t *step,
                   metric_fn fn, void *arg)
{
    for (size_t i = 0; i < npatterns; i++) {
        char name[METRIC_NAME_MAX];
        double value;
        if (!metricline_match(patterns[i], line, name, sizeof name, &value))
            continue;
        ++*step;
        int rc = metricline_emit(fn, arg, *step, name, value);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int metricline_text(char *text, const char *rung_unit, char *const *patterns, size_t npatterns,
                    int64_t *counter, metric_fn fn, void *arg)
{
    char *save = NULL;
    int rc = 0;
    for (char *line = strtok_r(text, "\n", &save); line != NULL && rc == 0;
         line = strtok_r(NULL, "\n", &save))
        rc = patterns != NULL ? metricline_log(line, patterns, npatterns, counter, fn, arg)
                              : metricline_json(line, rung_unit, counter, fn, arg);
    return rc;
}
