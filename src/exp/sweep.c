/* exp/sweep.c — the sweep: its checks (parameters are spec paths; ranges and distributions are
 * sound; the grid is not too big) and its expansion into each trial's values: a grid of lists and
 * {min, max, step} ranges, or random draws from a splitmix64 stream per trial. */
#include "exp/template-internal.h"
#include "util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_MAX_RANGE 1000000 /* points in one {min, max, step} */

bool sweep_is_random(const json_t *sweep)
{
    const json_t *method = json_object_get(sweep, "method");
    return method != NULL && strcmp(json_string_value(method), "random") == 0;
}

static double sweep_number_at(const json_t *object, const char *key)
{
    return json_number_value(json_object_get(object, key));
}

/* The points of {min, max, step}: min, min + step, … up to max, allowing for rounding (0.1 + 0.1
 * + 0.1 is a hair above 0.3, and 0.3 must still be in). */
static size_t sweep_range_count(const json_t *range)
{
    double min = sweep_number_at(range, "min"), max = sweep_number_at(range, "max");
    double step = sweep_number_at(range, "step");
    return (size_t)floor((max - min) / step + 1e-9) + 1;
}

static bool sweep_range_is_integer(const json_t *range)
{
    return json_is_integer(json_object_get(range, "min")) &&
           json_is_integer(json_object_get(range, "max")) &&
           json_is_integer(json_object_get(range, "step"));
}

/* Point j of a range. Integers stay integers; other values are cut to 12 significant digits so
 * that 0.1 + 2 * 0.1 is 0.3, not 0.30000000000000004. */
static json_t *sweep_range_point(const json_t *range, size_t j)
{
    if (sweep_range_is_integer(range))
        return json_integer(json_integer_value(json_object_get(range, "min")) +
                            (json_int_t)j * json_integer_value(json_object_get(range, "step")));
    char buf[40];
    snprintf(buf, sizeof buf, "%.12g",
             sweep_number_at(range, "min") + (double)j * sweep_number_at(range, "step"));
    return json_real(strtod(buf, NULL));
}

static size_t sweep_parameter_count(const json_t *values)
{
    if (json_is_array(values))
        return json_array_size(values);
    return json_object_get(values, "distribution") ? 1 : sweep_range_count(values);
}

/* --- the checks --- */

static int sweep_check_parameter(struct template *t, const char *name, const json_t *values,
                                 const char *path, bool random)
{
    char *suggestion = NULL;
    if (!template_good_path(name) || template_lookup(t->spec, name, &suggestion) == NULL) {
        char *hint = suggestion ? xasprintf("; did you mean '%s'?", suggestion) : xstrdup("");
        template_fail(t, path, AT_KEY, "sweep parameter '%s' is not in the spec%s", name, hint);
        free(hint);
        free(suggestion);
        return -1;
    }
    if (json_is_array(values))
        return 0;
    const json_t *distribution = json_object_get(values, "distribution");
    const json_t *step = json_object_get(values, "step");
    double min = sweep_number_at(values, "min"), max = sweep_number_at(values, "max");
    if (min > max)
        return template_fail(t, path, NAMES_PATH, "%s: max is below min", path);
    if (distribution != NULL) {
        const char *how = json_string_value(distribution);
        if (!random)
            return template_fail(t, path, NAMES_PATH, "%s: a distribution needs method: random",
                                 path);
        if (step != NULL) {
            char *child = template_join(path, "step");
            template_fail(t, child, AT_KEY | NAMES_PATH,
                          "%s: 'step' does not go with a distribution", path);
            free(child);
            return -1;
        }
        if (strcmp(how, "log_uniform") == 0 && min <= 0)
            return template_fail(t, path, NAMES_PATH, "%s: log_uniform needs min > 0", path);
        if (strcmp(how, "int_uniform") == 0 &&
            (!json_is_integer(json_object_get(values, "min")) ||
             !json_is_integer(json_object_get(values, "max")) || max - min > 1e15))
            return template_fail(t, path, NAMES_PATH, "%s: int_uniform needs integer min and max",
                                 path);
        return 0;
    }
    if (step == NULL)
        return template_fail(t, path, NAMES_PATH,
                             "%s: missing 'step' (a range is { min, max, step })", path);
    if (json_number_value(step) <= 0)
        return template_fail(t, path, NAMES_PATH, "%s: step must be greater than 0", path);
    if ((max - min) / json_number_value(step) >= SWEEP_MAX_RANGE)
        return template_fail(t, path, NAMES_PATH, "%s: more than %d values in the range", path,
                             SWEEP_MAX_RANGE);
    return 0;
}

/* The grid's size (random: max_trials; no sweep (NULL): 1), and in *ntrials how many trials a
 * load creates (SIZE_MAX: more than LIMIT_TEMPLATE_TASKS). */
double sweep_space(const json_t *sweep, size_t *ntrials)
{
    const json_t *max_trials = sweep ? json_object_get(sweep, "max_trials") : NULL;
    const char *name;
    json_t *values;
    double space = 1;
    if (sweep != NULL && sweep_is_random(sweep)) {
        space = (double)json_integer_value(max_trials);
    } else if (sweep != NULL) {
        json_object_foreach(json_object_get(sweep, "parameters"), name, values)
            space *= (double)sweep_parameter_count(values);
    }
    double trials = space;
    if (max_trials != NULL && (double)json_integer_value(max_trials) < trials)
        trials = (double)json_integer_value(max_trials);
    *ntrials = trials > LIMIT_TEMPLATE_TASKS ? SIZE_MAX : (size_t)trials;
    return space;
}

int sweep_check(struct template *t, const json_t *sweep, const char *path)
{
    bool random = sweep_is_random(sweep);
    const char *name;
    json_t *values;
    if (random && json_object_get(sweep, "max_trials") == NULL)
        return template_fail(t, path, NAMES_PATH,
                             "%s: missing 'max_trials' (method random needs it)", path);
    char *parameters = template_join(path, "parameters");
    json_object_foreach(json_object_get(sweep, "parameters"), name, values) {
        char *child = template_join(parameters, name);
        int rc = sweep_check_parameter(t, name, values, child, random);
        free(child);
        if (rc < 0)
            break;
    }
    free(parameters);
    if (t->err != NULL)
        return -1;
    size_t ntrials;
    double space = sweep_space(sweep, &ntrials);
    if (ntrials == SIZE_MAX)
        return template_fail(t, path, NAMES_PATH,
                             "%s: %.0f trials, more than LIMIT_TEMPLATE_TASKS (%d)%s", path, space,
                             LIMIT_TEMPLATE_TASKS, random ? "" : "; set max_trials");
    return 0;
}

/* --- each trial's values --- */

static uint64_t sweep_next(uint64_t *state)
{
    /* splitmix64: tiny, and good enough for picking hyperparameters reproducibly. */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double sweep_unit(uint64_t *state)
{
    return (double)(sweep_next(state) >> 11) * 0x1.0p-53;
}

/* A random draw from one parameter's values. */
static json_t *sweep_draw(const json_t *values, uint64_t *state)
{
    if (json_is_array(values)) {
        size_t pick = sweep_next(state) % json_array_size(values);
        return json_deep_copy(json_array_get(values, pick));
    }
    const json_t *distribution = json_object_get(values, "distribution");
    if (distribution == NULL)
        return sweep_range_point(values, sweep_next(state) % sweep_range_count(values));
    const char *how = json_string_value(distribution);
    double min = sweep_number_at(values, "min"), max = sweep_number_at(values, "max");
    if (strcmp(how, "int_uniform") == 0) {
        json_int_t low = json_integer_value(json_object_get(values, "min"));
        uint64_t span = (uint64_t)(json_integer_value(json_object_get(values, "max")) - low) + 1;
        return json_integer(low + (json_int_t)(sweep_next(state) % span));
    }
    double v = strcmp(how, "log_uniform") == 0
                   ? exp(log(min) + sweep_unit(state) * (log(max) - log(min)))
                   : min + sweep_unit(state) * (max - min);
    /* Six significant digits are finer than any search needs, and keep argv readable. */
    char buf[40];
    snprintf(buf, sizeof buf, "%.6g", v);
    v = strtod(buf, NULL);
    return json_real(v < min ? min : v > max ? max : v);
}

/* Trial `trial`'s values, {path: value} in the order the file lists the parameters; origins gets
 * path -> the document path of the value's source (for errors). Grid: the last parameter varies
 * fastest. Random: each trial draws from its own stream, so trial 7 is the same whether it is
 * drawn alone (exp_trials) or after trials 0 to 6. */
json_t *sweep_trial_params(const json_t *sweep, size_t trial, uint64_t seed, json_t *origins)
{
    const json_t *parameters = json_object_get(sweep, "parameters");
    json_t *params = json_object();
    const char *name;
    json_t *values;
    if (sweep_is_random(sweep)) {
        uint64_t state = seed;
        state = sweep_next(&state) ^ ((uint64_t)trial * 0xd1b54a32d192ed03ULL);
        json_object_foreach((json_t *)parameters, name, values) {
            json_object_set_new(params, name, sweep_draw(values, &state));
            json_object_set_new(origins, name,
                                json_sprintf("spec.sweep.parameters.%s", name));
        }
        return params;
    }
    size_t n = json_object_size(parameters), i = 0;
    size_t *index = xcalloc(n, sizeof *index);
    const char **names = xcalloc(n, sizeof *names);
    json_object_foreach((json_t *)parameters, name, values)
        names[i++] = name;
    for (i = n; i-- > 0;) {
        size_t count = sweep_parameter_count(json_object_get(parameters, names[i]));
        index[i] = trial % count;
        trial /= count;
    }
    for (i = 0; i < n; i++) {
        values = json_object_get(parameters, names[i]);
        if (json_is_array(values)) {
            json_object_set_new(params, names[i], json_deep_copy(json_array_get(values, index[i])));
            json_object_set_new(origins, names[i], json_sprintf("spec.sweep.parameters.%s[%zu]",
                                                                names[i], index[i]));
        } else {
            json_object_set_new(params, names[i], sweep_range_point(values, index[i]));
            json_object_set_new(origins, names[i],
                                json_sprintf("spec.sweep.parameters.%s", names[i]));
        }
    }
    free(index);
    free(names);
    return params;
}

/* The seed of a random sweep: sweep.seed if the spec fixes one, else the caller's. */
uint64_t sweep_seed(const json_t *spec, unsigned seed)
{
    const json_t *fixed = json_object_get(json_object_get(spec, "sweep"), "seed");
    return fixed ? (uint64_t)json_integer_value(fixed) : seed;
}
