/* Placement: which node and GPUs a request gets, and the bookkeeping of what is claimed.
 *
 * A GPU is either shared (tasks with a per-GPU memory claim, packed while the claims fit) or
 * exclusive (one task, which claims all of its memory). Best fit sends a shared task to the
 * fullest GPUs it still fits on, so whole GPUs stay free for exclusive and multi-GPU tasks. */
#include "core/place.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* Memory neither claimed nor used outside the claims. */
static uint64_t place_gpu_free(const struct core_place_gpu *gpu)
{
    uint64_t used = gpu->mem_claimed + gpu->outside;
    return gpu->mem_total > used ? gpu->mem_total - used : 0;
}

/* A GPU some task could still use: see struct core_place. */
static bool place_gpu_open(const struct core_place_gpu *gpu)
{
    return !gpu->exclusive && !gpu->offline && !gpu->busy &&
           (gpu->tasks == 0 || place_gpu_free(gpu) > 0);
}

static bool place_node_cpu_open(const struct core_place_node *node)
{
    return node->cpus == 0 || node->cpus_used < node->cpus;
}

/* An exclusive request takes a GPU nothing else uses: no task, and no memory used outside the
 * claims (its claim is the whole GPU); a shared one needs its claim free. */
static bool place_gpu_qualifies(const struct core_place_gpu *gpu, const struct core_request *req)
{
    if (gpu->exclusive || gpu->offline || gpu->busy || !core_place_type_ok(gpu, req))
        return false;
    if (req->gpu_mem == 0)
        return gpu->tasks == 0 && gpu->mem_claimed == 0 && gpu->outside == 0;
    return place_gpu_free(gpu) >= req->gpu_mem;
}

/* The nodes pl touches: nodes[] when it spans, else its one node. */
static int place_nodes_of(const struct core_placement *pl, const int **nodes)
{
    if (pl->nnodes > 1) {
        *nodes = pl->nodes;
        return pl->nnodes;
    }
    *nodes = &pl->node;
    return 1;
}

static bool place_whole_reserved(const struct core_place_reserve *rsv, int index)
{
    return rsv != NULL && rsv->whole != NULL && rsv->whole[index] == rsv->whole_mark;
}

/* One more (delta 1) or one fewer (-1) of node's GPUs has a task. */
static void place_busy(struct core_place *place, struct core_place_node *node, int delta)
{
    place->idle[node->ngpus - node->gpus_busy]--;
    node->gpus_busy += delta;
    place->idle[node->ngpus - node->gpus_busy]++;
}

/* Whether some node has at least k GPUs without a task. */
static bool place_some_idle(const struct core_place *place, int k)
{
    for (int i = place->max_gpus; i >= k; i--)
        if (place->idle[i] > 0)
            return true;
    return false;
}

void core_place_init(struct core_place *place, const struct core_node *nodes, int nnodes)
{
    uint64_t epoch = place->epoch, version = place->version;
    core_place_free(place);
    place->epoch = epoch + 1;
    place->version = version + 1;
    if (nnodes < 0)
        nnodes = 0;
    place->nodes = core_xcalloc((size_t)nnodes, sizeof *place->nodes);
    place->nnodes = nnodes;
    for (int i = 0; i < nnodes; i++) {
        struct core_place_node *node = &place->nodes[i];
        node->ngpus = nodes[i].ngpus < 0 ? 0 : nodes[i].ngpus;
        if (node->ngpus > CORE_MAX_NODE_GPUS)
            node->ngpus = CORE_MAX_NODE_GPUS;
        node->cpus = nodes[i].cpus < 0 ? 0 : nodes[i].cpus;
        if (nodes[i].gpu_link != NULL && node->ngpus > 1) {
            if (place->link == NULL)
                place->link = core_xcalloc((size_t)nnodes, sizeof *place->link);
            size_t size = (size_t)node->ngpus * (size_t)node->ngpus;
            place->link[i] = core_xmalloc(size);
            memcpy(place->link[i], nodes[i].gpu_link, size);
        }
        node->mem = nodes[i].mem;
        for (int g = 0; g < node->ngpus; g++) {
            node->gpu[g].mem_total = nodes[i].gpu_mem[g];
            node->gpu[g].type = nodes[i].gpu_type[g] < CORE_MAX_GPU_TYPES ? nodes[i].gpu_type[g]
                                                                          : 0;
        }
        if (node->ngpus > place->max_gpus)
            place->max_gpus = node->ngpus;
        place->idle[node->ngpus]++;
        place->open_gpus += node->ngpus;
        place->open_cpu_nodes++;
    }
}

void core_place_free(struct core_place *place)
{
    if (place->link != NULL)
        for (int i = 0; i < place->nnodes; i++)
            free(place->link[i]);
    free(place->link);
    free(place->nodes);
    memset(place, 0, sizeof *place);
}

void core_place_copy(struct core_place *dst, const struct core_place *src)
{
    if (dst->nnodes != src->nnodes) {
        free(dst->nodes);
        dst->nodes = core_xcalloc((size_t)src->nnodes, sizeof *dst->nodes);
    }
    if (src->nnodes > 0)
        memcpy(dst->nodes, src->nodes, (size_t)src->nnodes * sizeof *dst->nodes);
    dst->nnodes = src->nnodes;
    dst->open_gpus = src->open_gpus;
    dst->open_cpu_nodes = src->open_cpu_nodes;
    dst->max_gpus = src->max_gpus;
    memcpy(dst->idle, src->idle, sizeof dst->idle);
}

int core_place_cpus(const struct core_request *req)
{
    if (req->cpus > 0)
        return req->cpus;
    return req->gpus == 0 ? 1 : 0;
}

/* Whether the node has the request's CPUs and host memory free now (and to spare under rsv). */
static bool place_node_has(const struct core_place_node *node, int index,
                           const struct core_request *req, const struct core_place_reserve *rsv)
{
    bool reserved = rsv != NULL && rsv->node == index;
    int cpus = core_place_cpus(req);
    if (node->cpus > 0 && cpus > 0) {
        int64_t free_cpus = (int64_t)node->cpus - node->cpus_used;
        if (reserved && rsv->cpus_limited && rsv->cpus_spare < free_cpus)
            free_cpus = rsv->cpus_spare;
        if (cpus > free_cpus)
            return false;
    }
    if (node->mem > 0 && req->mem > 0) {
        uint64_t free_mem = node->mem > node->mem_used ? node->mem - node->mem_used : 0;
        if (reserved && rsv->mem_limited && rsv->mem_spare < free_mem)
            free_mem = rsv->mem_spare;
        if (req->mem > free_mem)
            return false;
    }
    return true;
}

/* Orders candidate GPUs by free memory, then index: the fullest that still fits first. */
static void place_sort_by_free(const struct core_place_node *node, int *cand, int n)
{
    for (int i = 1; i < n; i++) {
        int g = cand[i];
        uint64_t free_mem = place_gpu_free(&node->gpu[g]);
        int j = i;
        for (; j > 0 && place_gpu_free(&node->gpu[cand[j - 1]]) > free_mem; j--)
            cand[j] = cand[j - 1];
        cand[j] = g;
    }
}

static int place_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static const uint8_t *place_link(const struct core_place *place, int index)
{
    return place->link != NULL ? place->link[index] : NULL;
}

/* How spread a set of GPUs is: its farthest pair first, then the sum over all pairs. */
static uint64_t place_spread(const uint8_t *link, int ngpus, const int *set, int k)
{
    unsigned worst = 0, sum = 0;
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++) {
            unsigned d = link[set[i] * ngpus + set[j]];
            worst = d > worst ? d : worst;
            sum += d;
        }
    return (uint64_t)worst << 32 | sum;
}

/* Moves to the front of cand[0..n) the k GPUs that are closest together: from each candidate,
 * grow a set by the GPU nearest to it (farthest member, then total), and keep the tightest set
 * (ties: the one found first, from the lowest seed). O(n^2 k), n <= 64. */
static void place_closest(const uint8_t *link, int ngpus, int *cand, int n, int k)
{
    int best[CORE_MAX_NODE_GPUS], set[CORE_MAX_NODE_GPUS];
    uint64_t best_spread = UINT64_MAX;
    for (int seed = 0; seed < n; seed++) {
        bool used[CORE_MAX_NODE_GPUS] = {false};
        int m = 0;
        set[m++] = cand[seed];
        used[seed] = true;
        while (m < k) {
            int pick = -1;
            uint64_t pick_cost = UINT64_MAX;
            for (int c = 0; c < n; c++) {
                if (used[c])
                    continue;
                set[m] = cand[c];
                uint64_t cost = place_spread(link, ngpus, set, m + 1);
                if (cost < pick_cost) {
                    pick_cost = cost;
                    pick = c;
                }
            }
            used[pick] = true;
            set[m++] = cand[pick];
        }
        uint64_t spread = place_spread(link, ngpus, set, k);
        if (spread < best_spread) {
            best_spread = spread;
            memcpy(best, set, (size_t)k * sizeof *set);
        }
    }
    /* The chosen first, then the rest in their order. */
    int rest[CORE_MAX_NODE_GPUS], r = 0;
    for (int c = 0; c < n; c++) {
        bool chosen = false;
        for (int i = 0; i < k; i++)
            chosen |= best[i] == cand[c];
        if (!chosen)
            rest[r++] = cand[c];
    }
    memcpy(cand, best, (size_t)k * sizeof *cand);
    memcpy(cand + k, rest, (size_t)r * sizeof *cand);
}

/* Picks req->gpus GPUs on one node; *free_sum is their free memory before the claim (the
 * smaller, the tighter the fit). */
static bool place_node_gpus(const struct core_place_node *node, const uint8_t *link, int index,
                            const struct core_request *req, bool best_fit,
                            const struct core_place_reserve *rsv, struct core_placement *out,
                            uint64_t *free_sum)
{
    int cand[CORE_MAX_NODE_GPUS];
    int n = 0;
    uint64_t mask = rsv != NULL && rsv->node == index ? rsv->gpu_mask : 0;
    if (req->gpus > node->ngpus)
        return false;
    /* An exclusive request needs GPUs without a task: cheap to rule out on a busy node. */
    if (req->gpu_mem == 0 && node->ngpus - node->gpus_busy < req->gpus)
        return false;
    for (int g = 0; g < node->ngpus; g++)
        if (!(mask & (1ULL << g)) && place_gpu_qualifies(&node->gpu[g], req))
            cand[n++] = g;
    if (n < req->gpus)
        return false;
    if (best_fit && req->gpu_mem > 0)
        place_sort_by_free(node, cand, n);
    if (link != NULL && req->gpu_mem == 0 && req->gpus >= 2 && n > req->gpus)
        place_closest(link, node->ngpus, cand, n, req->gpus);
    /* The tightness of the fit: free memory left on the chosen GPUs for a shared request, and
     * for an exclusive one the node's idle GPUs (the fewer, the less a whole node is broken). */
    *free_sum = req->gpu_mem > 0 ? 0 : (uint64_t)(node->ngpus - node->gpus_busy);
    for (int i = 0; i < req->gpus; i++) {
        out->gpu[i] = cand[i];
        if (req->gpu_mem > 0)
            *free_sum += place_gpu_free(&node->gpu[cand[i]]);
    }
    qsort(out->gpu, (size_t)req->gpus, sizeof out->gpu[0], place_cmp_int);
    out->ngpus = req->gpus;
    out->gpu_mem = req->gpu_mem;
    out->node = index;
    return true;
}

static bool place_request_sane(const struct core_request *req)
{
    return req->gpus >= 0 && req->gpus <= CORE_MAX_SPAN * CORE_MAX_NODE_GPUS && req->cpus >= 0 &&
           req->time_limit >= 0;
}

bool core_place_spans(const struct core_place *place, const struct core_request *req)
{
    return req->gpus > place->max_gpus;
}

bool core_place_span_ok(const struct core_place_node *node, const struct core_request *req)
{
    if (node->ngpus == 0 || node->gpus_busy > 0 || !place_node_has(node, -1, req, NULL))
        return false;
    /* No task on any GPU: none is exclusive or claimed; only the types are left to check. */
    for (int g = 0; g < node->ngpus; g++)
        if (!core_place_type_ok(&node->gpu[g], req))
            return false;
    return true;
}

static const struct core_place *place_sort_ctx; /* core is single-threaded */

static int place_cmp_span(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    int gx = place_sort_ctx->nodes[x].ngpus, gy = place_sort_ctx->nodes[y].ngpus;
    if (gx != gy)
        return gx > gy ? -1 : 1;
    return (x > y) - (x < y);
}

bool core_place_span_pick(const struct core_place *place, const struct core_request *req,
                          int *cand, int n, struct core_placement *out)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += place->nodes[cand[i]].ngpus;
    if (total < req->gpus)
        return false;
    place_sort_ctx = place;
    qsort(cand, (size_t)n, sizeof *cand, place_cmp_span);
    memset(out, 0, sizeof *out);
    int taken = 0, k = 0;
    for (; k < n && taken < req->gpus; k++)
        taken += place->nodes[cand[k]].ngpus;
    if (k > CORE_MAX_SPAN)
        return false;
    memcpy(out->nodes, cand, (size_t)k * sizeof *cand);
    qsort(out->nodes, (size_t)k, sizeof out->nodes[0], place_cmp_int);
    out->nnodes = k;
    out->node = out->nodes[0];
    out->ngpus = taken; /* k >= 2: no one node holds req->gpus */
    return true;
}

static bool place_fit_span(const struct core_place *place, const struct core_request *req,
                           const struct core_place_reserve *rsv, struct core_placement *out)
{
    int *cand = core_xmalloc((size_t)place->nnodes * sizeof *cand);
    int n = 0;
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        if (place_whole_reserved(rsv, i) || (rsv != NULL && rsv->node == i && rsv->gpu_mask))
            continue;
        if (core_place_span_ok(node, req) && place_node_has(node, i, req, rsv))
            cand[n++] = i;
    }
    bool found = core_place_span_pick(place, req, cand, n, out);
    free(cand);
    return found;
}

bool core_place_fit_node(const struct core_place *place, int index,
                         const struct core_request *req, bool best_fit,
                         struct core_placement *out)
{
    const struct core_place_node *node = &place->nodes[index];
    uint64_t free_sum = 0;
    if (!place_request_sane(req) || core_place_spans(place, req))
        return false;
    memset(out, 0, sizeof *out);
    out->node = index;
    if (!place_node_has(node, index, req, NULL))
        return false;
    return req->gpus == 0 || place_node_gpus(node, place_link(place, index), index, req, best_fit,
                                             NULL, out, &free_sum);
}

/* Nodes are tried in order (first fit), except that under best fit a shared request goes to the
 * node where its GPUs have the least memory left, and an exclusive request for several GPUs to
 * the node with the fewest idle GPUs (ties: the lowest index), so that whole GPUs and whole nodes
 * stay free for bigger tasks. An exclusive request for one GPU takes the first node with a GPU
 * free, as first fit does. Why, measured (docs/BENCHMARKS.md, "Policies on real cluster
 * traces"; durations are unknown, so no rule can aim at the node that frees first): sending
 * one-GPU tasks to the fullest node as well, with ties to the node whose attempts are oldest on
 * average, to the youngest, or to the lowest index, was slower than EASY backfill (first fit
 * for everything) on some overloaded cluster every time. With the oldest, one-GPU tasks waited
 * 20% longer than under first fit on a 100,000-job trace at 135% of its load (average JCT 8%
 * worse than backfill's); with the others, two or three of the ITP clusters at half size were
 * slower. The tight fit of several-GPU requests is where the gain is: with first fit for them
 * too, the schedules are backfill's, 17% slower on that trace and 19% on one of those clusters. */
bool core_place_fit(const struct core_place *place, const struct core_request *req, bool best_fit,
                    const struct core_place_reserve *rsv, struct core_placement *out)
{
    if (!place_request_sane(req))
        return false;
    if (core_place_spans(place, req))
        return place_fit_span(place, req, rsv, out);
    if (req->gpus > 0 && req->gpu_mem == 0 && !place_some_idle(place, req->gpus))
        return false;
    bool exclusive = req->gpus > 0 && req->gpu_mem == 0;
    bool tightest = best_fit && (req->gpu_mem > 0 ? req->gpus > 0
                                                  : req->gpus > 1 && place->nnodes > 1);
    /* The tightest a fit can be: then no other node can do better. */
    uint64_t perfect = req->gpu_mem > 0 ? req->gpu_mem * (uint64_t)req->gpus : (uint64_t)req->gpus;
    bool found = false;
    uint64_t best = 0;
    struct core_placement pl;
    memset(&pl, 0, sizeof pl); /* large: cleared once, and each node sets what it uses */
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        uint64_t free_sum = 0;
        /* Cheapest first: an exclusive request needs that many GPUs without a task. */
        if ((exclusive && node->ngpus - node->gpus_busy < req->gpus) ||
            place_whole_reserved(rsv, i))
            continue;
        pl.node = i;
        if (!place_node_has(node, i, req, rsv))
            continue;
        if (req->gpus > 0 &&
            !place_node_gpus(node, place_link(place, i), i, req, best_fit, rsv, &pl, &free_sum))
            continue;
        if (!found || free_sum < best) {
            *out = pl;
            best = free_sum;
            found = true;
        }
        if (!tightest || best <= perfect)
            break;
    }
    return found;
}

/* The k-th GPU pl takes on a node: from its gpu[] list, or every GPU of a spanned node. */
static int place_gpus_on(const struct core_placement *pl, int k)
{
    return pl->nnodes > 1 ? k : pl->gpu[k];
}

static int place_ngpus_on(const struct core_place_node *node, const struct core_placement *pl)
{
    return pl->nnodes > 1 ? node->ngpus : pl->ngpus;
}

/* Adds (sign 1) or removes (sign -1) the open-capacity contribution of what pl touches. */
static void place_count_open(struct core_place *place, const struct core_placement *pl, int sign)
{
    const int *nodes;
    int nnodes = place_nodes_of(pl, &nodes);
    for (int k = 0; k < nnodes; k++) {
        const struct core_place_node *node = &place->nodes[nodes[k]];
        for (int i = 0; i < place_ngpus_on(node, pl); i++)
            place->open_gpus += sign * place_gpu_open(&node->gpu[place_gpus_on(pl, i)]);
        place->open_cpu_nodes += sign * place_node_cpu_open(node);
    }
}

static uint64_t place_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* Claims (sign 1) or releases (sign -1) one GPU's share of pl: the whole GPU, exclusively, for
 * an exclusive or spanning request, else pl's memory on it. */
static void place_gpu_apply(struct core_place *place, struct core_place_node *node,
                            struct core_place_gpu *gpu, const struct core_placement *pl, int sign)
{
    bool whole = pl->gpu_mem == 0 || pl->nnodes > 1;
    uint64_t mem = whole ? gpu->mem_total : pl->gpu_mem;
    if (sign > 0) {
        if (gpu->tasks++ == 0)
            place_busy(place, node, 1);
        if (whole)
            gpu->exclusive = true;
        gpu->mem_claimed += mem;
        return;
    }
    if (--gpu->tasks == 0)
        place_busy(place, node, -1);
    /* Only a restore can put two claims on an exclusive GPU; stay exclusive until the last one
     * leaves (the safe side). */
    if (whole)
        gpu->exclusive = gpu->tasks > 0;
    gpu->mem_claimed = place_sub(gpu->mem_claimed, mem);
}

/* Claims (sign 1) or releases (sign -1) a node's CPUs and memory for req. */
static void place_node_apply(struct core_place_node *node, const struct core_request *req,
                             int sign)
{
    if (sign > 0) {
        node->cpus_used += core_place_cpus(req);
        node->mem_used += req->mem;
        return;
    }
    node->cpus_used -= core_place_cpus(req);
    if (node->cpus_used < 0)
        node->cpus_used = 0;
    node->mem_used = place_sub(node->mem_used, req->mem);
}

/* What claim and release share: every GPU and node pl touches, with the open-capacity counts
 * taken out before and put back after. */
static void place_apply(struct core_place *place, const struct core_placement *pl,
                        const struct core_request *req, int sign)
{
    const int *nodes;
    int nnodes = place_nodes_of(pl, &nodes);
    place->version++;
    if (sign < 0)
        place->epoch++;
    place_count_open(place, pl, -1);
    for (int k = 0; k < nnodes; k++) {
        struct core_place_node *node = &place->nodes[nodes[k]];
        for (int i = 0; i < place_ngpus_on(node, pl); i++)
            place_gpu_apply(place, node, &node->gpu[place_gpus_on(pl, i)], pl, sign);
        place_node_apply(node, req, sign);
    }
    place_count_open(place, pl, 1);
}

void core_place_claim(struct core_place *place, const struct core_placement *pl,
                      const struct core_request *req)
{
    place_apply(place, pl, req, 1);
}

void core_place_release(struct core_place *place, const struct core_placement *pl,
                        const struct core_request *req)
{
    place_apply(place, pl, req, -1);
}

void core_place_set_state(struct core_place *place, int node, int gpu,
                          const struct core_gpu_state *st)
{
    struct core_place_gpu *g = &place->nodes[node].gpu[gpu];
    g->util = st->util;
    /* The driver reports every GPU at every sample: only a real change may start a pass. */
    if (g->outside == st->outside && g->busy == st->busy && g->offline == st->offline)
        return;
    place->epoch++;
    place->version++;
    place->open_gpus -= place_gpu_open(g);
    g->outside = st->outside;
    g->busy = st->busy;
    g->offline = st->offline;
    place->open_gpus += place_gpu_open(g);
}

bool core_place_valid(const struct core_place *place, const struct core_placement *pl)
{
    if (pl->nnodes > 1) {
        if (pl->nnodes > CORE_MAX_SPAN || pl->node != pl->nodes[0])
            return false;
        for (int k = 0; k < pl->nnodes; k++)
            if (pl->nodes[k] < 0 || pl->nodes[k] >= place->nnodes ||
                (k > 0 && pl->nodes[k] <= pl->nodes[k - 1]))
                return false;
        return true;
    }
    if (pl->node < 0 || pl->node >= place->nnodes)
        return false;
    const struct core_place_node *node = &place->nodes[pl->node];
    if (pl->ngpus < 0 || pl->ngpus > node->ngpus)
        return false;
    for (int i = 0; i < pl->ngpus; i++) {
        if (pl->gpu[i] < 0 || pl->gpu[i] >= node->ngpus)
            return false;
        if (i > 0 && pl->gpu[i] <= pl->gpu[i - 1])
            return false;
    }
    return true;
}

bool core_place_open(const struct core_place *place)
{
    return place->open_gpus > 0 || place->open_cpu_nodes > 0;
}
