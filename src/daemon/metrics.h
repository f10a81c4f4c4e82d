/* The Prometheus side: the daemon's machine snapshot (the `gpus` reply, docs in op_gpus) rendered
 * as text exposition format 0.0.4. Pure: no I/O, no daemon state, so it is unit-tested on JSON
 * literals. */
#ifndef DROVER_METRICS_H
#define DROVER_METRICS_H

#include <jansson.h>

/* The version drover_build_info reports. */
#define METRICS_BUILD_VERSION "0.5"

/* Renders snapshot as Prometheus text. Fields that are missing, null or of the wrong type are
 * left out (a figure is never written as NaN); any snapshot, NULL included, renders. Returns a
 * malloc'd string; the caller frees it. */
char *metrics_render(const json_t *snapshot);

#endif
