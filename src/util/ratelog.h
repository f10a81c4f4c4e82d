/* A log line that may repeat without bound (accept() failing while out of descriptors, a client
 * refused again and again) goes through a struct ratelog: it is written at most once per
 * LIMIT_LOG_REPEAT_S (util/limits.h), and the next line written says how many were left out, so
 * an attack costs the log a line every few seconds instead of one per event. */
#ifndef DROVER_RATELOG_H
#define DROVER_RATELOG_H

#include <stdio.h>

struct ratelog {
    double next;              /* monotonic seconds before which lines are only counted */
    unsigned long suppressed; /* lines left out since the last one written */
};

/* Writes the line (a newline is added) to stderr, or counts it. A zeroed struct ratelog is
 * ready to use. */
void ratelog(struct ratelog *rl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same at a given time (monotonic seconds) onto a given stream: for the tests. Returns
 * whether the line was written. */
int ratelog_at(struct ratelog *rl, double now, FILE *out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
