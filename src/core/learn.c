/* What telemetry teaches: claims from measured peaks, larger claims after an out-of-memory, and
 * the busy/quiet hysteresis of the utilisation rule. */
#include "core/learn.h"

#define LEARN_STEP (256ULL << 20)

static uint64_t learn_round_up(double bytes)
{
    uint64_t b = (uint64_t)bytes;
    return (b + LEARN_STEP - 1) / LEARN_STEP * LEARN_STEP;
}

uint64_t learn_claim(uint64_t peak, int margin_pct, uint64_t smallest_gpu)
{
    if (peak == 0)
        return 0;
    uint64_t claim = learn_round_up((double)peak * (100 + margin_pct) / 100);
    return claim < smallest_gpu ? claim : 0;
}

uint64_t learn_oom_claim(uint64_t peak, uint64_t claim, double factor, uint64_t gpu_size)
{
    uint64_t base = peak > claim ? peak : claim;
    uint64_t next = learn_round_up((double)base * factor);
    return next < gpu_size ? next : 0;
}

bool learn_busy(bool busy, int util, int high, int low)
{
    if (util < 0)
        return busy;
    if (util >= high)
        return true;
    if (util <= low)
        return false;
    return busy;
}
