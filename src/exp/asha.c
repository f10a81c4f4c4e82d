/* exp/asha.c — ASHA and median early stopping (exp/asha.h). Pure: libc and libm only, no clock,
 * no I/O, so the same stream of reports always gives the same decisions.
 *
 * Each ASHA rung keeps its recorded values sorted, so a report costs one insertion (a memmove over
 * at most a few thousand doubles) and an O(1) quantile. The median rule keeps every trial's
 * reports with running sums, so another trial's running mean at a resource is one binary search.
 */
#include "exp/asha.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* grace * eta^k passes INT_MAX (the largest resource a report can carry) within 64 rungs for any
 * eta >= 1.4; a smaller eta would make thousands of rungs, each holding a copy of every value,
 * for no useful decision, so the rungs past this many are not made. */
#define ASHA_MAX_RUNGS 64

struct asha_rung {
    double resource; /* grace * eta^k: reached by a report at resource >= this */
    double *values;  /* ascending */
    size_t n, cap;
};

struct asha_trial {
    int id;
    bool stopped;
    int stop_rung;       /* the decision repeated once stopped */
    double stop_cutoff;
    int next_rung;       /* ASHA: the first rung it has not been recorded at */
    double best;         /* median rule: its best value so far */
    /* The reports in order (resources non-decreasing), with running sums for the median rule:
     * points[i].sum / (i + 1) is its running mean after report i. */
    struct asha_point {
        int resource;
        double sum;
    } *points;
    size_t n, cap;
};

struct stopper {
    struct stop_config config;
    struct asha_rung rungs[ASHA_MAX_RUNGS];
    int nrungs;
    struct asha_trial **trials; /* ascending by id */
    size_t ntrials, trials_cap;
    double *scratch;            /* median rule: the other trials' running means */
    size_t scratch_cap;
};

static void *asha_xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (p == NULL)
        abort(); /* out of memory: the same contract as util/xalloc, without its I/O */
    return p;
}

static void asha_grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    *ptr = asha_xrealloc(*ptr, ncap * elem);
    *cap = ncap;
}

/* An invalid grace or eta is a caller's bug (exp/schema.c checks the YAML); it is mended to the
 * documented defaults rather than aborting a daemon over an early-stopping setting. */
struct stopper *stopper_new(const struct stop_config *config)
{
    struct stopper *s = asha_xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    s->config = *config;
    if (s->config.grace < 1)
        s->config.grace = 1;
    if (!(s->config.eta > 1.0) || !isfinite(s->config.eta))
        s->config.eta = 3.0;
    if (s->config.max_resource < 0)
        s->config.max_resource = 0;

    double bound = s->config.max_resource > 0 ? s->config.max_resource : (double)INT32_MAX;
    double resource = s->config.grace;
    while (s->nrungs < ASHA_MAX_RUNGS && resource <= bound) {
        s->rungs[s->nrungs++].resource = resource;
        /* Repeated products, not pow(): exact for an integral eta, so rung 2 of grace 1, eta 3
         * is 9.0 and epoch 9 reaches it. */
        resource *= s->config.eta;
    }
    return s;
}

void stopper_free(struct stopper *s)
{
    if (s == NULL)
        return;
    for (int k = 0; k < s->nrungs; k++)
        free(s->rungs[k].values);
    for (size_t i = 0; i < s->ntrials; i++) {
        free(s->trials[i]->points);
        free(s->trials[i]);
    }
    free(s->trials);
    free(s->scratch);
    free(s);
}

/* The trial with this id, made on its first report. */
static struct asha_trial *asha_trial_get(struct stopper *s, int id)
{
    size_t lo = 0, hi = s->ntrials;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->trials[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->ntrials && s->trials[lo]->id == id)
        return s->trials[lo];

    struct asha_trial *t = asha_xrealloc(NULL, sizeof *t);
    memset(t, 0, sizeof *t);
    t->id = id;
    t->stop_rung = -1;
    asha_grow((void **)&s->trials, &s->trials_cap, s->ntrials + 1, sizeof *s->trials);
    memmove(s->trials + lo + 1, s->trials + lo, (s->ntrials - lo) * sizeof *s->trials);
    s->trials[lo] = t;
    s->ntrials++;
    return t;
}

/* *values ascending and without NaN, before and after. */
static void asha_sorted_insert(double **values, size_t *n, size_t *cap, double value)
{
    asha_grow((void **)values, cap, *n + 1, sizeof **values);
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((*values)[mid] <= value)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(*values + lo + 1, *values + lo, (*n - lo) * sizeof **values);
    (*values)[lo] = value;
    (*n)++;
}

/* numpy.percentile's default ("linear"): position h = (n - 1) q between the order statistics.
 * The position comes in as a fraction num / den of (n - 1) so that an integral position (n = 10,
 * q = 2/3: 9 * 2 / 3 = 6) is computed exactly; 9 * (1 - 1/3) rounds to 6.000000000000001, which
 * would put the cutoff just above the seventh value and stop a trial that ties it. With an infinite end the limit is taken (a
 * value between -inf and x at any fraction below 1 is -inf), where plain arithmetic gives NaN. */
static double asha_quantile(const double *v, size_t n, double num, double den)
{
    if (n == 1)
        return v[0];
    double h = (double)(n - 1) * num / den;
    double lo_index = floor(h);
    if (lo_index < 0)
        lo_index = 0;
    size_t lo = (size_t)lo_index;
    if (lo >= n - 1)
        return v[n - 1];
    double frac = h - lo_index;
    double a = v[lo], b = v[lo + 1];
    if (frac == 0.0 || a == b)
        return a;
    if (isinf(a) && isinf(b))
        return frac < 0.5 ? a : b;
    if (isinf(a))
        return a;
    if (isinf(b))
        return b;
    return a + frac * (b - a);
}

static bool asha_better_or_equal(const struct stopper *s, double value, double cutoff)
{
    return s->config.maximize ? value >= cutoff : value <= cutoff;
}

/* Records value at every rung from t->next_rung up to the resource and decides at each (a report
 * can skip rungs: a trial that logs every third epoch). The trial stops if it falls outside the
 * best 1/eta at any of them; the decision names the first rung it failed, else the last it
 * passed. */
static void asha_report(struct stopper *s, struct asha_trial *t, int resource, double value,
                        struct stop_decision *d)
{
    double eta = s->config.eta;
    for (; t->next_rung < s->nrungs && resource >= s->rungs[t->next_rung].resource;
         t->next_rung++) {
        struct asha_rung *rung = &s->rungs[t->next_rung];
        asha_sorted_insert(&rung->values, &rung->n, &rung->cap, value);
        /* max: the (1 - 1/eta) quantile, min: the 1/eta quantile. */
        double cutoff = s->config.maximize ? asha_quantile(rung->values, rung->n, eta - 1, eta)
                                           : asha_quantile(rung->values, rung->n, 1, eta);
        bool pass = asha_better_or_equal(s, value, cutoff);
        if (!d->stop) {
            d->rung = t->next_rung;
            d->cutoff = cutoff;
        }
        if (!pass)
            d->stop = true;
    }
}

/* The running mean of t's reports at resources <= resource; false if it has none there. */
static bool asha_running_mean(const struct asha_trial *t, int resource, double *mean)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->points[mid].resource <= resource)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return false;
    *mean = t->points[lo - 1].sum / (double)lo;
    return true;
}

static int asha_double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Golovin et al.'s rule, asynchronously: the other trials compared are those that have reported
 * at or past this resource (their running mean is taken up to it); with none, nothing is
 * decided. */
static void asha_median_report(struct stopper *s, struct asha_trial *t, int resource,
                               struct stop_decision *d)
{
    if (resource < s->config.grace)
        return;
    size_t n = 0;
    for (size_t i = 0; i < s->ntrials; i++) {
        const struct asha_trial *other = s->trials[i];
        double mean;
        if (other == t || other->n == 0 || other->points[other->n - 1].resource < resource)
            continue;
        if (!asha_running_mean(other, resource, &mean) || isnan(mean))
            continue;
        asha_grow((void **)&s->scratch, &s->scratch_cap, n + 1, sizeof *s->scratch);
        s->scratch[n++] = mean;
    }
    if (n == 0)
        return;
    qsort(s->scratch, n, sizeof *s->scratch, asha_double_cmp);
    double median = asha_quantile(s->scratch, n, 1, 2);
    d->cutoff = median;
    if (!asha_better_or_equal(s, t->best, median))
        d->stop = true;
}

static void asha_history_append(struct asha_trial *t, int resource, double value)
{
    asha_grow((void **)&t->points, &t->cap, t->n + 1, sizeof *t->points);
    t->points[t->n].resource = resource;
    t->points[t->n].sum = (t->n ? t->points[t->n - 1].sum : 0.0) + value;
    t->n++;
}

/* Beyond the header: a NaN value (a diverged run) is recorded as the worst possible value (it
 * ranks below every other trial's) and stops its trial whatever the rung says: a network whose
 * metric went NaN does not come back. A report at a resource below one the trial already
 * reported (a run restarted from scratch) decides nothing and is not recorded, which keeps each
 * trial's history non-decreasing. */
void stopper_report(struct stopper *s, int trial, int resource, double value,
                    struct stop_decision *d)
{
    d->stop = false;
    d->rung = -1;
    d->cutoff = NAN;
    if (trial < 0)
        return;
    struct asha_trial *t = asha_trial_get(s, trial);
    if (t->stopped) {
        d->stop = true;
        d->rung = t->stop_rung;
        d->cutoff = t->stop_cutoff;
        return;
    }
    if (t->n > 0 && resource < t->points[t->n - 1].resource)
        return;

    bool diverged = isnan(value);
    if (diverged)
        value = s->config.maximize ? -INFINITY : INFINITY;
    if (t->n == 0 || !asha_better_or_equal(s, t->best, value))
        t->best = value;
    asha_history_append(t, resource, value);

    if (s->config.rule == STOP_ASHA)
        asha_report(s, t, resource, value, d);
    else
        asha_median_report(s, t, resource, d);
    if (diverged)
        d->stop = true;
    if (d->stop) {
        t->stopped = true;
        t->stop_rung = d->rung;
        t->stop_cutoff = d->cutoff;
    }
}
