/* bench/decision.c — what one scheduling decision costs in core/ as the queue grows.
 *
 * A 64-node x 8-GPU cluster (512 GPUs) kept full; N tasks queued behind it, of mixed shapes
 * (1, 2, 4, 8 and 16 GPUs; half with a time limit, so backfill has work to do). Then, R times:
 * the oldest running attempt ends and a scheduling pass runs (the decision: what starts now, the
 * head's reservation, the backfill scan), and one new task is submitted to keep N queued.
 * Also timed: a pass when nothing has ended (the cluster is full). Beside the times, what core
 * counted (core_stats()) over the rounds with a job's end: tasks a pass looked at, and
 * placement searches, per pass.
 *
 * Build: make (target bench_decision). Run: build/bench_decision [N ...] (default 1000 10000
 * 100000). Prints a Markdown table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

#define NODES 64
#define GPUS 8
#define ROUNDS 2000

/* CPU time, not wall time: a decision is single-threaded work, and this way a busy machine
 * (another benchmark, a CI run) does not count against it. */
static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct ring {
    int64_t *v;
    size_t head, n, cap;
};

static void ring_push(struct ring *r, int64_t id)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        int64_t *v = malloc(cap * sizeof *v);
        for (size_t i = 0; i < r->n; i++)
            v[i] = r->v[(r->head + i) % r->cap];
        free(r->v);
        r->v = v;
        r->head = 0;
        r->cap = cap;
    }
    r->v[(r->head + r->n++) % r->cap] = id;
}

static int64_t ring_pop(struct ring *r)
{
    int64_t id = r->v[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return id;
}

static void submit(struct core *core, int64_t id, int gpus, core_time now,
                   struct core_actions *out)
{
    static const int shapes[] = {1, 2, 4, 8, 16};
    struct core_task_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.id = id;
    spec.submit_time = now;
    spec.req.gpus = gpus > 0 ? gpus : shapes[id % 5];
    spec.req.time_limit = id % 2 ? 3600 * 1000 : 0;
    if (core_submit(core, &spec, now, out) != 0)
        abort();
}

static void collect(struct core_actions *out, struct ring *running)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].type == CORE_ACT_START)
            ring_push(running, out->v[i].task);
    core_actions_clear(out);
}

static void run(size_t queued)
{
    static struct core_node nodes[NODES];
    for (int i = 0; i < NODES; i++) {
        nodes[i].ngpus = GPUS;
        for (int g = 0; g < GPUS; g++)
            nodes[i].gpu_mem[g] = 80ULL << 30;
    }
    struct core_policy policy = core_policy_default();
    struct core *core = core_new(&policy);
    core_set_nodes(core, nodes, NODES);
    struct core_actions out = {0};
    struct ring running = {0};
    core_time t = 1000;
    int64_t id = 1;
    for (int i = 0; i < NODES * GPUS; i++)
        submit(core, id++, 1, t, &out);
    core_schedule(core, t, &out);
    collect(&out, &running);
    for (size_t i = 0; i < queued; i++)
        submit(core, id++, 0, t, &out);
    core_actions_clear(&out);

    double t0 = now_us();
    for (int i = 0; i < ROUNDS; i++)
        core_schedule(core, ++t, &out);
    double idle = (now_us() - t0) / ROUNDS;
    core_actions_clear(&out);

    double decide = 0, add = 0;
    struct core_stats before, after;
    core_stats(core, &before);
    for (int i = 0; i < ROUNDS; i++) {
        t += 1000;
        double a = now_us();
        core_attempt_exited(core, ring_pop(&running), CORE_OUTCOME_SUCCESS, t, &out);
        core_schedule(core, t, &out);
        double b = now_us();
        collect(&out, &running);
        submit(core, id++, 0, t, &out);
        double c = now_us();
        core_actions_clear(&out);
        decide += b - a;
        add += c - b;
    }
    core_stats(core, &after);
    size_t counts[TASK_NSTATES];
    core_count_states(core, counts);
    printf("| %zu | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", queued, counts[TASK_QUEUED],
           idle, decide / ROUNDS, add / ROUNDS,
           (double)(after.examined - before.examined) / ROUNDS,
           (double)(after.fit_checks - before.fit_checks) / ROUNDS);
    free(running.v);
    core_actions_free(&out);
    core_free(core);
}

int main(int argc, char **argv)
{
    printf("| queued | queued at the end | pass, cluster full (us) | job ends + pass (us) "
           "| submit (us) | looked at / pass | fit checks / pass |\n"
           "|---|---|---|---|---|---|---|\n");
    if (argc < 2) {
        run(1000);
        run(10000);
        run(100000);
    }
    for (int i = 1; i < argc; i++)
        run((size_t)strtoul(argv[i], NULL, 10));
    return 0;
}
