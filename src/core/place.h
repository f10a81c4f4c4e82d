/* core/place.h — resources of the nodes and placing requests on them (internal to core/). */
#ifndef DROVER_CORE_PLACE_H
#define DROVER_CORE_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

struct core_place_gpu {
    uint64_t mem_total;
    uint64_t mem_claimed;     /* an exclusive claim counts mem_total */
    int tasks;
    bool exclusive;
    uint8_t type;
    /* The driver's view (core_set_gpu_state): memory no claim covers, too busy, out of service. */
    uint64_t outside;
    bool busy;
    bool offline;
    int util;
};

struct core_place_node {
    int ngpus;
    int cpus;                 /* 0 = not accounted */
    int cpus_used;
    uint64_t mem;             /* 0 = not accounted */
    uint64_t mem_used;
    int gpus_busy;            /* GPUs with a task on them */
    struct core_place_gpu gpu[CORE_MAX_NODE_GPUS];
};

struct core_place {
    struct core_place_node *nodes;
    int nnodes;
    /* Open capacity, kept by claim/release so that "can anything start at all?" is O(1):
     * GPUs a task could still use (not exclusive, with free memory or no task), and nodes with
     * a CPU free (or CPUs not accounted). Every task needs a GPU or a CPU, so when both are 0
     * nothing fits. */
    int open_gpus;
    int open_cpu_nodes;
    int max_gpus;             /* the largest node's GPUs: a request for more spans nodes */
    uint8_t **link;           /* per node: ngpus x ngpus closeness, or NULL (owned; a copy of
                               * the place shares none: its fits treat GPUs as alike) */
    /* idle[k]: nodes with exactly k GPUs without a task, so that "no node has k idle GPUs" (an
     * exclusive request that cannot fit) is answered without visiting every node. */
    int idle[CORE_MAX_NODE_GPUS + 1];
    /* epoch: bumped whenever capacity may have grown (a release, a GPU's state, the nodes
     * set), so that "did not fit at epoch E" stays true while the epoch is E: claims only
     * take capacity away. version: bumped by every claim too (anything placement reads). */
    uint64_t epoch;
    uint64_t version;
};

/* Backfill's constraint for a task that may still run when the blocked head is due to start:
 * on `node`, the GPUs in gpu_mask are the head's, and only the cpus/mem the node will have to
 * spare beside the head then may be used. A spanning head reserves whole nodes instead: node n
 * is the head's when whole[n] == whole_mark (whole may be NULL). */
struct core_place_reserve {
    const uint32_t *whole;
    uint32_t whole_mark;
    int node;                 /* -1: none */
    uint64_t gpu_mask;
    bool cpus_limited;
    int cpus_spare;
    bool mem_limited;
    uint64_t mem_spare;
};

/* Whether the GPU is of a type req accepts. */
static inline bool core_place_type_ok(const struct core_place_gpu *gpu,
                                      const struct core_request *req)
{
    return req->gpu_types == 0 || (req->gpu_types >> gpu->type & 1) != 0;
}

void core_place_init(struct core_place *place, const struct core_node *nodes, int nnodes);
void core_place_free(struct core_place *place);
void core_place_copy(struct core_place *dst, const struct core_place *src);

/* The CPUs a request counts: req.cpus, or 1 for a CPU-only task that gave none. */
int core_place_cpus(const struct core_request *req);
/* Finds where req fits now (under rsv when non-NULL); fills *out and returns true. */
bool core_place_fit(const struct core_place *place, const struct core_request *req, bool best_fit,
                    const struct core_place_reserve *rsv, struct core_placement *out);
/* Whether req fits on this one node now (never for a spanning request). */
bool core_place_fit_node(const struct core_place *place, int index,
                         const struct core_request *req, bool best_fit,
                         struct core_placement *out);
/* Whether req spans nodes (asks for more GPUs than the largest node has). */
bool core_place_spans(const struct core_place *place, const struct core_request *req);
/* Whether node could be one of a spanning req's nodes now: every GPU free and of an allowed
 * type, and the node has req's cpus/mem. */
bool core_place_span_ok(const struct core_place_node *node, const struct core_request *req);
/* Picks whole nodes for a spanning req from cand[0..n) (each span_ok): the largest first, then
 * the lowest index, until they hold req->gpus. Reorders cand. */
bool core_place_span_pick(const struct core_place *place, const struct core_request *req,
                          int *cand, int n, struct core_placement *out);
void core_place_claim(struct core_place *place, const struct core_placement *pl,
                      const struct core_request *req);
void core_place_release(struct core_place *place, const struct core_placement *pl,
                        const struct core_request *req);
/* Sets what the driver sees of a GPU, keeping the open-capacity count right. */
void core_place_set_state(struct core_place *place, int node, int gpu,
                          const struct core_gpu_state *st);
/* Whether pl names an existing node and distinct existing GPUs on it, ascending. */
bool core_place_valid(const struct core_place *place, const struct core_placement *pl);
bool core_place_open(const struct core_place *place);
/* core_check_request (core/place-check.c). */
int core_place_check(const struct core_place *place, const struct core_request *req, char *why,
                     size_t len);

#endif
