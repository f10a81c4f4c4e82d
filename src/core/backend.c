/* Backends: which tasks go to a Slurm cluster, and starting them there.
 *
 * A Slurm task is decided at submission (core_choose_backend: asked for, or spilled because no
 * node here could ever run it) and keeps its backend for life. When ready it waits in a queue of
 * its own, in the same order as local tasks (priority, then ready time), and a pass starts it at
 * once: Slurm's own scheduler decides when it really runs, so core holds it back only for what
 * drover promises itself — its array's parallel limit, a drain, and a cluster that does not
 * answer (the daemon's commands to it failed: core_set_slurm_up). Its attempt claims nothing
 * here (placement node -1), counts against no user limit or share of this machine, and is never
 * reserved around by backfill (an unclaimed run is skipped there).
 *
 * Cost: a pass walks the Slurm queue once, O(1) per task; tasks skipped for their array's limit
 * count against max_scan, as in the local pass. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

int core_choose_backend(const struct core *core, const struct core_request *req,
                        enum core_backend asked, enum core_backend *backend, char *why,
                        size_t len)
{
    if (asked == CORE_BACKEND_SLURM) {
        if (!core->policy.slurm) {
            if (why != NULL && len > 0)
                snprintf(why, len, "no Slurm cluster is set up (shared-dir)");
            return -1;
        }
        *backend = CORE_BACKEND_SLURM;
        return 0;
    }
    if (core_check_request(core, req, why, len) == 0) {
        *backend = CORE_BACKEND_LOCAL;
        return 0;
    }
    if (core->policy.slurm && core->policy.spill == CORE_SPILL_UNFIT) {
        *backend = CORE_BACKEND_SLURM;
        if (why != NULL && len > 0)
            why[0] = '\0';
        return 0;
    }
    return -1;
}

void core_set_slurm_up(struct core *core, bool up)
{
    core->slurm_down = !up;
}

void core_schedule_slurm(struct core *core, core_time now, struct core_actions *out)
{
    if (core->slurm_down || core->slurm_queue.n == 0)
        return;
    const struct core_placement none = {.node = -1};
    int skipped = 0, max_scan = core->policy.max_scan;
    struct core_task *t;
    core_queue_iter_start(&core->slurm_queue);
    while ((t = core_queue_iter_next(&core->slurm_queue)) != NULL) {
        if (t->array_id != 0 && t->array_limit > 0 &&
            core_array_running(core, t->array_id) >= t->array_limit) {
            if (max_scan > 0 && ++skipped >= max_scan)
                break;
            continue;
        }
        core_attempt_start(core, t, &none, now, out);
    }
}
