/* Placement: which node and GPUs a request gets, and the bookkeeping of what is claimed.
 *
 * A GPU is either shared (tasks with a per-GPU memory claim, packed while the claims fit) or
 * exclusive (one task, which claims all of its memory). Best fit sends a shared task to the
 * fullest GPUs it still fits on, so whole GPUs stay free for exclusive and multi-GPU tasks. */
#include "core/place.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

static uint64_t place_gpu_free(const struct core_place_gpu *gpu)
{
    return gpu->mem_total > gpu->mem_claimed ? gpu->mem_total - gpu->mem_claimed : 0;
}

/* A GPU some task could still use: see struct core_place. */
static bool place_gpu_open(const struct core_place_gpu *gpu)
{
    return !gpu->exclusive && (gpu->tasks == 0 || gpu->mem_claimed < gpu->mem_total);
}

static bool place_node_cpu_open(const struct core_place_node *node)
{
    return node->cpus == 0 || node->cpus_used < node->cpus;
}

static bool place_gpu_qualifies(const struct core_place_gpu *gpu, uint64_t gpu_mem)
{
    if (gpu->exclusive)
        return false;
    if (gpu_mem == 0)
        return gpu->tasks == 0 && gpu->mem_claimed == 0;
    return place_gpu_free(gpu) >= gpu_mem;
}

void core_place_init(struct core_place *place, const struct core_node *nodes, int nnodes)
{
    core_place_free(place);
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
        node->mem = nodes[i].mem;
        for (int g = 0; g < node->ngpus; g++)
            node->gpu[g].mem_total = nodes[i].gpu_mem[g];
        place->open_gpus += node->ngpus;
        place->open_cpu_nodes++;
    }
}

void core_place_free(struct core_place *place)
{
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

/* Picks req->gpus GPUs on one node; *free_sum is their free memory before the claim (the
 * smaller, the tighter the fit). */
static bool place_node_gpus(const struct core_place_node *node, int index,
                            const struct core_request *req, bool best_fit,
                            const struct core_place_reserve *rsv, struct core_placement *out,
                            uint64_t *free_sum)
{
    int cand[CORE_MAX_NODE_GPUS];
    int n = 0;
    uint64_t mask = rsv != NULL && rsv->node == index ? rsv->gpu_mask : 0;
    if (req->gpus > node->ngpus)
        return false;
    for (int g = 0; g < node->ngpus; g++)
        if (!(mask & (1ULL << g)) && place_gpu_qualifies(&node->gpu[g], req->gpu_mem))
            cand[n++] = g;
    if (n < req->gpus)
        return false;
    if (best_fit && req->gpu_mem > 0)
        place_sort_by_free(node, cand, n);
    *free_sum = 0;
    for (int i = 0; i < req->gpus; i++) {
        out->gpu[i] = cand[i];
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
    return req->gpus >= 0 && req->gpus <= CORE_MAX_NODE_GPUS && req->cpus >= 0 &&
           req->time_limit >= 0;
}

/* Nodes are tried in order (first fit), except that a shared request under best fit goes to
 * the node where its GPUs fit tightest. */
bool core_place_fit(const struct core_place *place, const struct core_request *req, bool best_fit,
                    const struct core_place_reserve *rsv, struct core_placement *out)
{
    if (!place_request_sane(req))
        return false;
    bool tightest = best_fit && req->gpus > 0 && req->gpu_mem > 0;
    bool found = false;
    uint64_t best = 0;
    struct core_placement pl;
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        uint64_t free_sum = 0;
        memset(&pl, 0, sizeof pl);
        pl.node = i;
        if (!place_node_has(node, i, req, rsv))
            continue;
        if (req->gpus > 0 && !place_node_gpus(node, i, req, best_fit, rsv, &pl, &free_sum))
            continue;
        if (!found || free_sum < best) {
            *out = pl;
            best = free_sum;
            found = true;
        }
        if (!tightest)
            break;
    }
    return found;
}

/* Adds (sign 1) or removes (sign -1) the open-capacity contribution of what pl touches. */
static void place_count_open(struct core_place *place, const struct core_placement *pl, int sign)
{
    const struct core_place_node *node = &place->nodes[pl->node];
    for (int i = 0; i < pl->ngpus; i++)
        place->open_gpus += sign * place_gpu_open(&node->gpu[pl->gpu[i]]);
    place->open_cpu_nodes += sign * place_node_cpu_open(node);
}

void core_place_claim(struct core_place *place, const struct core_placement *pl,
                      const struct core_request *req)
{
    struct core_place_node *node = &place->nodes[pl->node];
    place_count_open(place, pl, -1);
    for (int i = 0; i < pl->ngpus; i++) {
        struct core_place_gpu *gpu = &node->gpu[pl->gpu[i]];
        gpu->tasks++;
        if (pl->gpu_mem == 0) {
            gpu->exclusive = true;
            gpu->mem_claimed += gpu->mem_total;
        } else {
            gpu->mem_claimed += pl->gpu_mem;
        }
    }
    node->cpus_used += core_place_cpus(req);
    node->mem_used += req->mem;
    place_count_open(place, pl, 1);
}

static uint64_t place_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

void core_place_release(struct core_place *place, const struct core_placement *pl,
                        const struct core_request *req)
{
    struct core_place_node *node = &place->nodes[pl->node];
    place_count_open(place, pl, -1);
    for (int i = 0; i < pl->ngpus; i++) {
        struct core_place_gpu *gpu = &node->gpu[pl->gpu[i]];
        gpu->tasks--;
        if (pl->gpu_mem == 0) {
            /* Only a restore can put two claims on an exclusive GPU; stay exclusive until the
             * last one leaves (the safe side). */
            gpu->exclusive = gpu->tasks > 0;
            gpu->mem_claimed = place_sub(gpu->mem_claimed, gpu->mem_total);
        } else {
            gpu->mem_claimed = place_sub(gpu->mem_claimed, pl->gpu_mem);
        }
    }
    node->cpus_used -= core_place_cpus(req);
    if (node->cpus_used < 0)
        node->cpus_used = 0;
    node->mem_used = place_sub(node->mem_used, req->mem);
    place_count_open(place, pl, 1);
}

bool core_place_valid(const struct core_place *place, const struct core_placement *pl)
{
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

/* Whether the node could ever hold req's GPUs (empty): at least req->gpus of them, each with
 * req->gpu_mem of memory when the claim is shared. */
static bool place_node_gpus_ever(const struct core_place_node *node, const struct core_request *req)
{
    int n = 0;
    for (int g = 0; g < node->ngpus; g++)
        if (req->gpu_mem == 0 || node->gpu[g].mem_total >= req->gpu_mem)
            n++;
    return n >= req->gpus;
}

static bool place_node_cpus_ever(const struct core_place_node *node, const struct core_request *req)
{
    return node->cpus == 0 || core_place_cpus(req) <= node->cpus;
}

static bool place_node_mem_ever(const struct core_place_node *node, const struct core_request *req)
{
    return node->mem == 0 || req->mem <= node->mem;
}

int core_place_check(const struct core_place *place, const struct core_request *req,
                     const char **why)
{
    const char *reason = NULL;
    int max_gpus = 0;
    uint64_t max_gpu_mem = 0;
    bool gpus_ok = false, cpus_ok = false, mem_ok = false, all_ok = false;
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        if (node->ngpus > max_gpus)
            max_gpus = node->ngpus;
        for (int g = 0; g < node->ngpus; g++)
            if (node->gpu[g].mem_total > max_gpu_mem)
                max_gpu_mem = node->gpu[g].mem_total;
        bool gpus = place_node_gpus_ever(node, req);
        bool cpus = place_node_cpus_ever(node, req);
        bool mem = place_node_mem_ever(node, req);
        gpus_ok |= gpus;
        cpus_ok |= cpus;
        mem_ok |= mem;
        all_ok |= gpus && cpus && mem;
    }
    if (req->gpus < 0 || req->cpus < 0 || req->time_limit < 0)
        reason = "asks for a negative amount of a resource";
    else if (place->nnodes == 0)
        reason = "there is no node to run it on";
    else if (req->gpus > max_gpus)
        reason = "asks for more GPUs than any node has";
    else if (req->gpus > 0 && req->gpu_mem > max_gpu_mem)
        reason = "asks for more memory per GPU than any GPU has";
    else if (!gpus_ok)
        reason = "no node has that many GPUs with that much memory each";
    else if (!cpus_ok)
        reason = "asks for more CPUs than any node has";
    else if (!mem_ok)
        reason = "asks for more memory than any node has";
    else if (!all_ok)
        reason = "no single node has all the GPUs, CPUs and memory it asks for";
    if (reason != NULL && why != NULL)
        *why = reason;
    return reason == NULL ? 0 : -1;
}
