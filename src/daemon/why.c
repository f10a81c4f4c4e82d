/* Why tasks wait, in words (core/why.c decides; this writes times in the daemon's clock and
 * names a GPU type by the pattern the task gave). */
#include "daemon/daemon.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "14:03:05", or "Dec 2 14:03:05" when not today. */
static void why_clock(core_time at, char *buf, size_t len)
{
    time_t t = (time_t)(at / 1000), now = time(NULL);
    struct tm tm, today;
    localtime_r(&t, &tm);
    localtime_r(&now, &today);
    strftime(buf, len,
             tm.tm_yday == today.tm_yday && tm.tm_year == today.tm_year ? "%H:%M:%S"
                                                                         : "%b %e %H:%M:%S",
             &tm);
}

json_t *daemon_why(struct daemon *d, const int64_t *ids, size_t n, json_t *task)
{
    struct core_why *w = xcalloc(n + 1, sizeof *w);
    json_t *list = json_array();
    core_why(d->core, ids, n, daemon_now(), w);
    for (size_t i = 0; i < n; i++) {
        char when[32], *text = NULL;
        switch (w[i].wait) {
        case CORE_WAIT_NONE:
            json_array_append_new(list, json_null());
            continue;
        case CORE_WAIT_BACKOFF:
            why_clock(w[i].until, when, sizeof when);
            text = xasprintf("%s until %s", w[i].text, when);
            break;
        case CORE_WAIT_BEGIN: /* "begins at 22:00:00" */
        case CORE_WAIT_OFF_PEAK: { /* "off-peak: the window opens at 20:00:00" */
            /* The time goes after the reason itself, before the note that follows it. */
            int base = (int)(w[i].reason_len > 0 ? w[i].reason_len : strlen(w[i].text));
            const char *rest = w[i].reason_len > 0 ? w[i].text + w[i].reason_len : NULL;
            if (w[i].until == CORE_TIME_NEVER) {
                text = xasprintf("%.*s (the off-peak setting)%s", base, w[i].text,
                                 rest != NULL ? rest : "");
                break;
            }
            why_clock(w[i].until, when, sizeof when);
            text = xasprintf("%.*s at %s%s", base, w[i].text, when, rest != NULL ? rest : "");
            break;
        }
        case CORE_WAIT_NO_TYPE: {
            json_t *mine = task ? json_object_get(json_object_get(task, "request"), "gpu_type")
                                : NULL;
            char *pattern = NULL;
            struct core_task_spec spec;
            struct core_dep *deps = NULL;
            if (mine == NULL && store_task_spec(d->store, ids[i], &spec, &deps, &pattern) == 0)
                free(deps);
            const char *type = mine ? json_string_value(mine) : pattern;
            text = type ? xasprintf("no GPU of type %s here", type) : xstrdup(w[i].text);
            free(pattern);
            break;
        }
        default:
            text = xstrdup(w[i].text);
            break;
        }
        json_array_append_new(list, json_string(text));
        free(text);
    }
    free(w);
    return list;
}
