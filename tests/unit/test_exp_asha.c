/* exp/asha.c: scripted streams of results whose decisions were worked out by hand (and checked
 * against numpy.percentile's default interpolation). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "exp/asha.h"

/* One report and what it must decide. cutoff is checked when it is not NaN. */
struct step {
    int trial, resource;
    double value;
    bool stop;
    int rung;
    double cutoff;
};

#define NO_CUTOFF NAN

static void feed(struct stopper *s, const struct step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct stop_decision d;
        stopper_report(s, steps[i].trial, steps[i].resource, steps[i].value, &d);
        if (d.stop != steps[i].stop || d.rung != steps[i].rung)
            fail_msg("step %zu (trial %d, resource %d, value %g): got stop=%d rung=%d, want "
                     "stop=%d rung=%d", i, steps[i].trial, steps[i].resource, steps[i].value,
                     d.stop, d.rung, steps[i].stop, steps[i].rung);
        if (!isnan(steps[i].cutoff) && d.cutoff != steps[i].cutoff &&
            !(fabs(d.cutoff - steps[i].cutoff) <= 1e-9))
            fail_msg("step %zu: cutoff %.12g, want %.12g", i, d.cutoff, steps[i].cutoff);
    }
}

static struct stopper *asha_new(bool maximize, int grace, double eta, int max_resource)
{
    struct stop_config c = {.rule = STOP_ASHA, .maximize = maximize, .grace = grace, .eta = eta,
                            .max_resource = max_resource};
    return stopper_new(&c);
}

/* Nine trials, eta 3, grace 1, max_resource 9: rungs at epochs 1, 3 and 9. Each trial is compared
 * with the values recorded at its rung when it arrives, in this order. */
static const struct step nine_trials[] = {
    /* rung 0 (epoch 1) */
    {0, 1, 0.50, false, 0, 0.50},       /* alone */
    {1, 1, 0.60, false, 0, 0.566666666667},
    {2, 1, 0.40, true, 0, 0.533333333333},
    {3, 1, 0.70, false, 0, 0.60},       /* n = 4: exactly the third value */
    {4, 1, 0.55, true, 0, 0.583333333333},
    {5, 1, 0.80, false, 0, 0.633333333333},
    {6, 1, 0.30, true, 0, 0.60},
    {7, 1, 0.65, false, 0, 0.633333333333},
    {8, 1, 0.90, false, 0, 0.666666666667},
    /* epoch 2: between rungs, nothing to decide */
    {0, 2, 0.52, false, -1, NO_CUTOFF},
    {1, 2, 0.70, false, -1, NO_CUTOFF},
    {3, 2, 0.72, false, -1, NO_CUTOFF},
    {5, 2, 0.82, false, -1, NO_CUTOFF},
    {7, 2, 0.68, false, -1, NO_CUTOFF},
    {8, 2, 0.92, false, -1, NO_CUTOFF},
    /* rung 1 (epoch 3): trial 0 arrives first and is kept, though it turns out the worst */
    {0, 3, 0.55, false, 1, 0.55},
    {1, 3, 0.72, false, 1, 0.663333333333},
    {3, 3, 0.74, false, 1, 0.726666666667},
    {5, 3, 0.85, false, 1, 0.74},
    {7, 3, 0.70, true, 1, 0.733333333333},
    {8, 3, 0.95, false, 1, 0.776666666667},
    /* a stopped trial that reports anyway is told to stop again, with its first decision */
    {2, 2, 0.99, true, 0, 0.533333333333},
    {7, 4, 0.99, true, 1, 0.733333333333},
    /* rung 2 (epoch 9), arriving best first */
    {8, 9, 0.97, false, 2, 0.97},
    {5, 9, 0.90, true, 2, 0.946666666667},
    {3, 9, 0.75, true, 2, 0.923333333333},
    {1, 9, 0.80, true, 2, 0.90},
    {0, 9, 0.60, true, 2, 0.866666666667},
    /* past max_resource there is no rung 3 (27 > 9) */
    {8, 27, 0.10, false, -1, NO_CUTOFF},
};

static void test_asha_nine_trials_max(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 9);
    feed(s, nine_trials, sizeof nine_trials / sizeof nine_trials[0]);
    stopper_free(s);
}

/* The same stream as a loss (1 - accuracy) in mode min stops the same trials at the same rungs,
 * with the cutoffs mirrored. */
static void test_asha_nine_trials_min(void **state)
{
    enum { N = sizeof nine_trials / sizeof nine_trials[0] };
    struct step loss[N];
    for (size_t i = 0; i < N; i++) {
        loss[i] = nine_trials[i];
        loss[i].value = 1.0 - nine_trials[i].value;
        loss[i].cutoff = isnan(nine_trials[i].cutoff) ? NO_CUTOFF : 1.0 - nine_trials[i].cutoff;
    }
    struct stopper *s = asha_new(false, 1, 3, 9);
    feed(s, loss, N);
    stopper_free(s);

    /* and by hand: min keeps the lowest third */
    static const struct step small[] = {
        {0, 1, 0.3, false, 0, 0.3},
        {1, 1, 0.2, false, 0, 0.233333333333},
        {2, 1, 0.5, true, 0, 0.266666666667},
    };
    s = asha_new(false, 1, 3, 0);
    feed(s, small, sizeof small / sizeof small[0]);
    stopper_free(s);
}

/* Which trials the nine-trial stream stops where, as a table: the summary an experiment prints. */
static void test_asha_stop_rungs(void **state)
{
    static const int want[9] = {2, 2, 0, 2, 0, 2, 0, 1, -1}; /* -1: never stopped */
    struct stopper *s = asha_new(true, 1, 3, 9);
    int got[9];
    for (int i = 0; i < 9; i++)
        got[i] = -1;
    for (size_t i = 0; i < sizeof nine_trials / sizeof nine_trials[0]; i++) {
        struct stop_decision d;
        const struct step *st = &nine_trials[i];
        stopper_report(s, st->trial, st->resource, st->value, &d);
        if (d.stop && got[st->trial] < 0)
            got[st->trial] = d.rung;
    }
    for (int i = 0; i < 9; i++)
        assert_int_equal(got[i], want[i]);
    stopper_free(s);
}

static void test_asha_alone_continues(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 0);
    static const struct step steps[] = {
        {0, 1, 0.01, false, 0, 0.01}, /* the only value at rung 0, however bad */
        {1, 1, 0.90, false, 0, 0.603333333333},
        {0, 3, 0.02, false, 1, 0.02}, /* first at rung 1: alone there */
        {0, 9, 0.03, false, 2, 0.03},
        {0, 27, 0.04, false, 3, 0.04}, /* no max_resource: rungs go on */
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);
}

static void test_asha_below_first_rung(void **state)
{
    struct stopper *s = asha_new(true, 2, 3, 0); /* rungs at 2, 6, 18 */
    static const struct step steps[] = {
        {0, 0, 0.9, false, -1, NO_CUTOFF}, {1, 1, 0.1, false, -1, NO_CUTOFF},
        {2, 1, 0.0, false, -1, NO_CUTOFF}, {3, 1, -5.0, false, -1, NO_CUTOFF},
        {0, 1, 0.9, false, -1, NO_CUTOFF}, /* nothing recorded, so trial 1 is alone at rung 0: */
        {1, 2, 0.1, false, 0, 0.1},        {0, 2, 0.9, false, 0, 0.633333333333},
        {2, 2, 0.0, true, 0, 0.366666666667},
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);
}

/* Every report is a decision the trial keeps: later reports say stop with the same rung and
 * cutoff, whatever they carry. */
static void test_asha_stop_is_final(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 0);
    static const struct step steps[] = {
        {0, 1, 0.9, false, 0, 0.9},       {1, 1, 0.1, true, 0, 0.633333333333},
        {1, 2, 1.0, true, 0, 0.633333333333}, {1, 3, 1.0, true, 0, 0.633333333333},
        {1, 100, 1.0, true, 0, 0.633333333333},
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);
}

/* Rungs are grace * eta^k up to max_resource; a report past several rungs is recorded at each of
 * them and decided at the first it fails. */
static void test_asha_max_resource(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 10); /* rungs 1, 3, 9 */
    static const struct step bounded[] = {
        {0, 27, 0.8, false, 2, 0.8}, /* skips to 27: alone at 0, 1 and 2 */
        {1, 27, 0.5, true, 0, 0.7},  /* fails at rung 0 already */
        {2, 100, 0.9, false, 2, 0.8 + (0.9 - 0.8) / 3},
    };
    feed(s, bounded, sizeof bounded / sizeof bounded[0]);
    stopper_free(s);

    s = asha_new(true, 1, 3, 2); /* only rung 0 fits under 2 */
    static const struct step one_rung[] = {
        {0, 3, 0.8, false, 0, 0.8}, {1, 9, 0.9, false, 0, 0.8 + (0.9 - 0.8) * 2 / 3},
        {0, 9, 0.1, false, -1, NO_CUTOFF},
    };
    feed(s, one_rung, sizeof one_rung / sizeof one_rung[0]);
    stopper_free(s);

    s = asha_new(true, 1, 3, 0); /* no bound: rung 3 at 27 */
    static const struct step unbounded[] = {{0, 27, 0.8, false, 3, 0.8}};
    feed(s, unbounded, 1);
    stopper_free(s);

    s = asha_new(true, 2, 2, 16); /* grace 2, eta 2: rungs 2, 4, 8, 16 */
    static const struct step eta2[] = {
        {0, 16, 0.5, false, 3, 0.5}, {1, 15, 0.6, false, 2, 0.55}, {1, 16, 0.6, false, 3, 0.55},
        {1, 17, 0.6, false, -1, NO_CUTOFF},
    };
    feed(s, eta2, sizeof eta2 / sizeof eta2[0]);
    stopper_free(s);
}

/* Asynchronous: each trial is judged against the values there when it arrives. A good trial that
 * comes last continues, and the earlier, worse trials that were kept are not stopped afterwards
 * because a better one turned up. */
static void test_asha_asynchronous(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 0);
    static const struct step steps[] = {
        {0, 1, 0.1, false, 0, 0.1},   {1, 1, 0.2, false, 0, 0.166666666667},
        {2, 1, 0.3, false, 0, 0.233333333333}, {3, 1, 0.4, false, 0, 0.3},
        {4, 1, 0.9, false, 0, 0.366666666667},   /* the late good trial */
        {0, 2, 0.1, false, -1, NO_CUTOFF}, /* kept: rung 0 was decided on arrival */
        {5, 1, 0.15, true, 0, 0.333333333333},   /* a late bad one is stopped */
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);
}

/* With ten values the (1 - 1/3) quantile sits exactly on the seventh: 9 * 2/3 = 6. A trial that
 * ties it continues (9 * (1 - 1/3) would round to 6.000000000000001 and stop it). */
static void test_asha_exact_quantile(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 0);
    static const double first[9] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0};
    struct stop_decision d;
    for (int i = 0; i < 9; i++)
        stopper_report(s, i, 1, first[i], &d);
    stopper_report(s, 9, 1, 0.7, &d); /* sorted: … 0.6, [0.7], 0.8 … */
    assert_false(d.stop);
    assert_int_equal(d.rung, 0);
    assert_true(d.cutoff == 0.7);
    stopper_report(s, 10, 1, 0.65, &d);
    assert_true(d.stop);
    stopper_free(s);
}

/* A NaN (a diverged run) stops its trial, even alone, and counts as the worst value for others;
 * a report at a lower resource than before (a run restarted from scratch) decides nothing. */
static void test_asha_nan_and_restart(void **state)
{
    struct stopper *s = asha_new(true, 1, 3, 0);
    static const struct step steps[] = {
        {0, 1, NAN, true, 0, NO_CUTOFF},
        {1, 1, 0.3, false, 0, -INFINITY}, /* between -inf and 0.3: the limit, -inf */
        {1, 5, 0.5, false, 1, 0.5},
        {1, 2, 0.1, false, -1, NO_CUTOFF}, /* went back: ignored */
        {1, 4, 0.1, false, -1, NO_CUTOFF}, /* still below 5 */
        {1, 9, 0.6, false, 2, 0.6},
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);
}

static void test_median_rule(void **state)
{
    struct stop_config c = {.rule = STOP_MEDIAN, .maximize = true, .grace = 2};
    struct stopper *s = stopper_new(&c);
    static const struct step steps[] = {
        /* trial 0 alone: nobody to compare with */
        {0, 1, 0.5, false, -1, NO_CUTOFF}, {0, 2, 0.6, false, -1, NO_CUTOFF},
        {0, 3, 0.7, false, -1, NO_CUTOFF}, {0, 4, 0.8, false, -1, NO_CUTOFF},
        /* trial 1: one other, whose running mean at 2 is .55 (.6 at 3, .65 at 4) */
        {1, 1, 0.4, false, -1, NO_CUTOFF}, /* within grace */
        {1, 2, 0.5, true, -1, 0.55},
        /* trial 2: the others' means at 2 are .55 and .45 (trial 1's, though it stopped) */
        {2, 1, 0.1, false, -1, NO_CUTOFF}, /* within grace, however bad */
        {2, 2, 0.2, true, -1, 0.50},
        /* trial 3: its best (.9, within grace) counts; trial 2 reached only 2 */
        {3, 1, 0.9, false, -1, NO_CUTOFF},
        {3, 2, 0.3, false, -1, 0.45},                 /* others at 2: .15 .45 .55 */
        {3, 3, 0.3, false, -1, 0.6},                  /* others at 3: trial 0 alone */
        /* trial 4: the median of an even count is the mean of the middle two */
        {4, 2, 0.56, false, -1, (0.45 + 0.55) / 2},   /* .15 .45 .55 .6 */
        {4, 3, 0.40, false, -1, (0.5 + 0.6) / 2},     /* .5 (trial 3) .6; its best is .56 */
        {4, 4, 0.40, true, -1, 0.65},                 /* .65 (trial 0) */
        {4, 5, 0.99, true, -1, 0.65},                 /* and stays stopped */
    };
    feed(s, steps, sizeof steps / sizeof steps[0]);
    stopper_free(s);

    /* min mode: a loss above the median of the others' means stops */
    c.maximize = false;
    c.grace = 1;
    s = stopper_new(&c);
    static const struct step loss[] = {
        {0, 1, 1.0, false, -1, NO_CUTOFF}, {1, 1, 2.0, true, -1, 1.0},
        {2, 1, 1.0, false, -1, 1.5},       {2, 1, 0.5, false, -1, 1.5},
    };
    feed(s, loss, sizeof loss / sizeof loss[0]);
    stopper_free(s);
}

/* The same stream gives the same decisions, whatever else ran before in the process. */
static void test_determinism(void **state)
{
    enum { TRIALS = 40, EPOCHS = 30 };
    static bool first[2][TRIALS * EPOCHS];
    static int rungs[2][TRIALS * EPOCHS];
    for (int rule = 0; rule < 2; rule++) {
        for (int run = 0; run < 2; run++) {
            struct stop_config c = {.rule = rule ? STOP_MEDIAN : STOP_ASHA, .maximize = true,
                                    .grace = 1, .eta = 3, .max_resource = EPOCHS};
            struct stopper *s = stopper_new(&c);
            uint64_t x = 0x2545f4914f6cdd1dULL;
            size_t k = 0;
            for (int e = 1; e <= EPOCHS; e++)
                for (int t = 0; t < TRIALS; t++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    struct stop_decision d;
                    stopper_report(s, (t * 7) % TRIALS, e, (double)(x % 1000) / 1000, &d);
                    if (run == 0) {
                        first[rule][k] = d.stop;
                        rungs[rule][k] = d.rung;
                    } else {
                        assert_int_equal(d.stop, first[rule][k]);
                        assert_int_equal(d.rung, rungs[rule][k]);
                    }
                    k++;
                }
            stopper_free(s);
        }
    }
    stopper_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asha_nine_trials_max), cmocka_unit_test(test_asha_nine_trials_min),
        cmocka_unit_test(test_asha_stop_rungs),      cmocka_unit_test(test_asha_alone_continues),
        cmocka_unit_test(test_asha_below_first_rung), cmocka_unit_test(test_asha_stop_is_final),
        cmocka_unit_test(test_asha_max_resource),    cmocka_unit_test(test_asha_asynchronous),
        cmocka_unit_test(test_asha_exact_quantile),  cmocka_unit_test(test_asha_nan_and_restart),
        cmocka_unit_test(test_median_rule),          cmocka_unit_test(test_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
