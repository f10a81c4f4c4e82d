/* The frame `drover top` draws, as a pure function of the daemon's `gpus` snapshot (the reply of
 * {"op": "gpus"}), so that it is tested without a terminal or a daemon. */
#ifndef DROVER_TOP_H
#define DROVER_TOP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Writes one frame for `snapshot` to out: a header, each GPU with the drover tasks and the other
 * processes on it, then the queue. Every line ends in '\n' and spans at most `width` display
 * columns (one per character; bars are ASCII). With height > 0 the frame has at most `height`
 * lines and the queue is cut to fit, ending in "… N more"; with height <= 0 every queued task
 * the snapshot lists is shown. A figure that is absent or null shows as "-"; times are measured
 * against the snapshot's "now" ("-" without it). With color false no escape sequence is written
 * at all. Keeps no state; the caller owns everything. */
void top_render(const json_t *snapshot, int width, int height, bool color, FILE *out);

#endif
