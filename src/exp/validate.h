/* exp/validate.h — the arithmetic of an experiment's validation, pure (unit-tested on its own):
 * what the best trial must reach, and whether it did. */
#ifndef DROVER_EXP_VALIDATE_H
#define DROVER_EXP_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The value the best trial must reach: baseline plus the improvement (a string "2%": relative to
 * |baseline|; a number: absolute; NULL or anything else: 0) for mode max, minus it for min. */
double exp_validation_need(double baseline, const json_t *improvement, bool maximize);
bool exp_validation_passes(double best, double need, bool maximize);
/* Mean time per epoch (run_ms over epochs) within max_ms; false when no epoch was reported. */
bool exp_epoch_time_ok(int64_t run_ms, int64_t epochs, int64_t max_ms);

#endif
