/* exp/asha.h — early stopping decisions, pure: fed a stream of (trial, resource, value) results
 * as they arrive, says which trials must stop. No clock, no I/O.
 *
 * ASHA (asynchronous successive halving, Li et al. 2020, as early stopping): rungs at resource
 * r_k = grace * eta^k (k = 0, 1, …, r_k <= max_resource). When a trial first reports at or past a
 * rung, its value is recorded at that rung and compared with every value recorded there so far
 * (its own included): it continues only if it is within the best 1/eta of them (for mode max:
 * value >= the (1 - 1/eta) quantile; min: <= the 1/eta quantile). A trial alone at a rung
 * continues. Results below the first rung decide nothing.
 *
 * Median stopping (Golovin et al. 2017): after `grace` resource units, a trial stops when its best
 * value so far is worse than the median of the other trials' running means at the same resource.
 */
#ifndef DROVER_EXP_ASHA_H
#define DROVER_EXP_ASHA_H

#include <stdbool.h>
#include <stddef.h>

enum stop_rule { STOP_ASHA, STOP_MEDIAN };

struct stop_config {
    enum stop_rule rule;
    bool maximize;        /* mode: max */
    int grace;            /* >= 1: the first rung (ASHA) / the resource before any stop (median) */
    double eta;           /* ASHA reduction factor, > 1 (default 3) */
    int max_resource;     /* ASHA: no rung beyond it; 0 = no bound */
};

struct stopper;

struct stopper *stopper_new(const struct stop_config *config);
void stopper_free(struct stopper *s);

struct stop_decision {
    bool stop;
    int rung;             /* ASHA: the rung index decided at; -1 when no rung was reached */
    double cutoff;        /* the value it had to reach there */
};

/* Trial `trial` (>= 0) reported `value` at `resource` (e.g. epoch 3; non-decreasing per trial).
 * Fills *d; a trial told to stop should report nothing more (later reports are ignored and
 * say stop again). */
void stopper_report(struct stopper *s, int trial, int resource, double value,
                    struct stop_decision *d);

#endif
