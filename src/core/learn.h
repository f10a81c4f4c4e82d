/* core/learn.h — the arithmetic of what drover learns from telemetry, kept pure so that it is
 * unit-tested on its own (tests/unit/test_learn.c); the daemon feeds it measurements. */
#ifndef DROVER_CORE_LEARN_H
#define DROVER_CORE_LEARN_H

#include <stdbool.h>
#include <stdint.h>

/* The claim for a task of a profile whose recent successful attempts peaked at `peak` bytes
 * per GPU: the peak plus margin_pct percent, rounded up to 256 MiB. 0 (whole GPUs) when nothing
 * was learned (peak 0) or the claim would not leave room on the smallest GPU. */
uint64_t learn_claim(uint64_t peak, int margin_pct, uint64_t smallest_gpu);
/* The claim after running out of memory: the larger of the peak seen and the old claim, times
 * factor, rounded up to 256 MiB. 0 (whole GPUs) when that reaches the GPU's size. */
uint64_t learn_oom_claim(uint64_t peak, uint64_t claim, double factor, uint64_t gpu_size);
/* The utilisation rule: a GPU becomes busy at `high` percent or more and stays busy until it
 * falls to `low` or less; util < 0 (unknown) changes nothing. */
bool learn_busy(bool busy, int util, int high, int low);

#endif
