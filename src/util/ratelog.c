/* Rate-limited log lines: see ratelog.h. */
#include "util/ratelog.h"
#include "util/limits.h"

#include <stdarg.h>
#include <time.h>

static int ratelog_v(struct ratelog *rl, double now, FILE *out, const char *fmt, va_list ap)
{
    if (now < rl->next) {
        rl->suppressed++;
        return 0;
    }
    vfprintf(out, fmt, ap);
    if (rl->suppressed > 0)
        fprintf(out, " (%lu more like it not logged)", rl->suppressed);
    fputc('\n', out);
    fflush(out);
    rl->suppressed = 0;
    rl->next = now + LIMIT_LOG_REPEAT_S;
    return 1;
}

int ratelog_at(struct ratelog *rl, double now, FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int written = ratelog_v(rl, now, out, fmt, ap);
    va_end(ap);
    return written;
}

void ratelog(struct ratelog *rl, const char *fmt, ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    va_list ap;
    va_start(ap, fmt);
    ratelog_v(rl, (double)ts.tv_sec + ts.tv_nsec / 1e9, stderr, fmt, ap);
    va_end(ap);
}
