/* The fixture the core unit tests share: one node of 40G GPUs, a core, and its action list. */
#ifndef DROVER_TEST_CORE_FIXTURE_H
#define DROVER_TEST_CORE_FIXTURE_H

#include <string.h>

#include "core/core.h"

#define GB (1024ULL * 1024 * 1024)

struct fixture {
    struct core *core;
    struct core_actions out;
};

/* ngpus GPUs of 40G, cpus CPUs (0 = not accounted); policy NULL = the daemon's default. */
static inline void fixture_setup(struct fixture *f, int ngpus, int cpus,
                                 const struct core_policy *policy)
{
    struct core_node node;
    memset(&node, 0, sizeof node);
    node.ngpus = ngpus;
    for (int g = 0; g < ngpus; g++)
        node.gpu_mem[g] = 40 * GB;
    node.cpus = cpus;
    f->core = core_new(policy);
    core_set_nodes(f->core, &node, 1);
    memset(&f->out, 0, sizeof f->out);
}

static inline void teardown(struct fixture *f)
{
    core_actions_free(&f->out);
    core_free(f->core);
}

/* The first state action for task in f->out, or NULL. */
static inline const struct core_action *find_state(const struct fixture *f, int64_t task)
{
    for (size_t i = 0; i < f->out.n; i++)
        if (f->out.v[i].type == CORE_ACT_STATE && f->out.v[i].task == task)
            return &f->out.v[i];
    return NULL;
}

/* Runs a pass; returns the ids started, in order, 0-terminated, in a static buffer. */
static inline const int64_t *pass(struct fixture *f, core_time now)
{
    static int64_t started[64];
    size_t n = 0;
    core_actions_clear(&f->out);
    core_schedule(f->core, now, &f->out);
    for (size_t i = 0; i < f->out.n && n < 63; i++)
        if (f->out.v[i].type == CORE_ACT_START)
            started[n++] = f->out.v[i].task;
    started[n] = 0;
    return started;
}

static inline void assert_started(const int64_t *got, const int64_t *want)
{
    size_t i = 0;
    for (; want[i] != 0; i++)
        if (got[i] != want[i])
            fail_msg("start #%zu: got task %lld, want %lld", i, (long long)got[i],
                     (long long)want[i]);
    if (got[i] != 0)
        fail_msg("started task %lld too", (long long)got[i]);
}

#endif
