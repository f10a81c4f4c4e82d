/* Validation arithmetic: the bar a trial must clear, and whether it cleared it. */
#include "exp/validate.h"

#include <math.h>
#include <stdlib.h>

double exp_validation_need(double baseline, const json_t *improvement, bool maximize)
{
    double delta = 0;
    if (json_is_string(improvement)) {
        char *end;
        double pct = strtod(json_string_value(improvement), &end);
        if (end != json_string_value(improvement) && *end == '%')
            delta = fabs(baseline) * pct / 100;
    } else if (json_is_number(improvement)) {
        delta = json_number_value(improvement);
    }
    return maximize ? baseline + delta : baseline - delta;
}

bool exp_validation_passes(double best, double need, bool maximize)
{
    return maximize ? best >= need : best <= need;
}

bool exp_epoch_time_ok(int64_t run_ms, int64_t epochs, int64_t max_ms)
{
    return epochs > 0 && run_ms / epochs <= max_ms;
}
