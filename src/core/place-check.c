/* The request check: could some node (or, for a request larger than any node, some set of whole
 * nodes) ever run this request, were it empty? If not, why, with the figures of the machine that
 * rule it out ("asks for 32G of memory; the largest node has 23.5G"), so that whoever reads the
 * refusal knows what would fit. core does no I/O: the reason is formatted into the caller's
 * buffer. GPU types are numbers here (the driver names them), so a reason about types says what
 * the nodes have of "its types" rather than naming them. */
#include "core/place.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* The most the nodes have of each thing a request asks for, each figure on its own (the node
 * with the largest GPU need not be the one with the most CPUs). */
struct check_most {
    int gpus;            /* on one node: GPUs of an allowed type with req's claim free, empty */
    int typed_gpus;      /* on all nodes: GPUs of an allowed type */
    uint64_t gpu_mem;    /* the largest GPU of an allowed type */
    int cpus;            /* of the nodes that count CPUs */
    uint64_t mem;        /* of the nodes that count memory */
    bool gpus_ok, cpus_ok, mem_ok, all_ok; /* some node has enough of it (all: of everything) */
};

/* "23.5G": bytes in binary units, as the CLI prints sizes (util/parse.c's format_size; core links
 * nothing but libc, so it has its own). */
static const char *check_size(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "BKMGT";
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%lluB", (unsigned long long)bytes);
    else if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%.0f%c", v, units[u]);
    else
        snprintf(buf, len, "%.1f%c", v, units[u]);
    return buf;
}

static int check_fail(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int check_fail(char *why, size_t len, const char *fmt, ...)
{
    if (why != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void check_survey(const struct core_place *place, const struct core_request *req,
                         struct check_most *most)
{
    memset(most, 0, sizeof *most);
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        int fit = 0;
        for (int g = 0; g < node->ngpus; g++) {
            const struct core_place_gpu *gpu = &node->gpu[g];
            if (!core_place_type_ok(gpu, req))
                continue;
            most->typed_gpus++;
            if (gpu->mem_total > most->gpu_mem)
                most->gpu_mem = gpu->mem_total;
            if (req->gpu_mem == 0 || gpu->mem_total >= req->gpu_mem)
                fit++;
        }
        if (fit > most->gpus)
            most->gpus = fit;
        if (node->cpus > most->cpus)
            most->cpus = node->cpus;
        if (node->mem > most->mem)
            most->mem = node->mem;
        bool gpus = fit >= req->gpus;
        bool cpus = node->cpus == 0 || core_place_cpus(req) <= node->cpus;
        bool mem = node->mem == 0 || req->mem <= node->mem;
        most->gpus_ok |= gpus;
        most->cpus_ok |= cpus;
        most->mem_ok |= mem;
        most->all_ok |= gpus && cpus && mem;
    }
}

/* "2 GPUs of its types with 40G each": the GPU part of a request, for reasons. */
static const char *check_gpus_asked(const struct core_request *req, char *buf, size_t len)
{
    char size[16];
    int n = snprintf(buf, len, "%d GPU%s%s", req->gpus, req->gpus == 1 ? "" : "s",
                     req->gpu_types != 0 ? " of its types" : "");
    if (req->gpu_mem > 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " with %s each",
                 check_size(req->gpu_mem, size, sizeof size));
    return buf;
}

/* A spanning request: could the nodes that suit it (GPUs all of its types, its CPUs and memory
 * on each), emptied, ever hold it? */
static int check_span(const struct core_place *place, const struct core_request *req, char *why,
                      size_t len)
{
    int *cand = core_xmalloc((size_t)place->nnodes * sizeof *cand);
    int n = 0, total = 0;
    struct core_placement pl;
    for (int i = 0; i < place->nnodes; i++) {
        const struct core_place_node *node = &place->nodes[i];
        bool types = true;
        for (int g = 0; g < node->ngpus; g++)
            types &= core_place_type_ok(&node->gpu[g], req);
        if (node->ngpus > 0 && types &&
            (node->cpus == 0 || core_place_cpus(req) <= node->cpus) &&
            (node->mem == 0 || req->mem <= node->mem)) {
            cand[n++] = i;
            total += node->ngpus;
        }
    }
    int rc = 0;
    if (total < req->gpus)
        rc = check_fail(why, len, "asks for %d GPUs%s; the nodes it could span have %d in all",
                        req->gpus, req->gpu_types != 0 ? " of its types" : "", total);
    else if (!core_place_span_pick(place, req, cand, n, &pl))
        rc = check_fail(why, len, "asks for %d GPUs, which would span more nodes than a task "
                        "may (%d)", req->gpus, CORE_MAX_SPAN);
    free(cand);
    return rc;
}

/* Everything it asks for, when no one node has all of it: "16 CPUs and 65G of memory". */
static int check_all(const struct core_request *req, char *why, size_t len)
{
    char gpus[64] = "", cpus[32] = "", mem[48] = "", size[16];
    if (req->gpus > 0)
        check_gpus_asked(req, gpus, sizeof gpus);
    if (core_place_cpus(req) > 0)
        snprintf(cpus, sizeof cpus, "%d CPU%s", core_place_cpus(req),
                 core_place_cpus(req) == 1 ? "" : "s");
    if (req->mem > 0)
        snprintf(mem, sizeof mem, "%s of memory", check_size(req->mem, size, sizeof size));
    const char *part[3] = {gpus, cpus, mem}, *list[3];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (part[i][0] != '\0')
            list[n++] = part[i];
    if (n == 3)
        return check_fail(why, len, "asks for %s, %s and %s; no single node has all of them",
                          list[0], list[1], list[2]);
    if (n == 2)
        return check_fail(why, len, "asks for %s and %s; no single node has both", list[0],
                          list[1]);
    return check_fail(why, len, "no single node has all it asks for"); /* not reached */
}

int core_place_check(const struct core_place *place, const struct core_request *req, char *why,
                     size_t len)
{
    char a[16], b[16], gpus[64];
    if (req->gpus < 0)
        return check_fail(why, len, "asks for a negative number of GPUs (%d)", req->gpus);
    if (req->cpus < 0)
        return check_fail(why, len, "asks for a negative number of CPUs (%d)", req->cpus);
    if (req->time_limit < 0)
        return check_fail(why, len, "has a negative time limit (%lld ms)",
                          (long long)req->time_limit);
    if (place->nnodes == 0)
        return check_fail(why, len, "there is no node to run it on");
    struct check_most most;
    check_survey(place, req, &most);
    if (req->gpus > place->max_gpus && place->nnodes == 1)
        return check_fail(why, len, "asks for %d GPUs; the largest node has %d", req->gpus,
                          place->max_gpus);
    if (req->gpus > CORE_MAX_SPAN * CORE_MAX_NODE_GPUS)
        return check_fail(why, len, "asks for %d GPUs; a task may span at most %d nodes of %d",
                          req->gpus, CORE_MAX_SPAN, CORE_MAX_NODE_GPUS);
    if (req->gpus > 0 && req->gpu_types != 0 && most.typed_gpus == 0)
        return check_fail(why, len, "asks for GPUs of types that no node has");
    if (core_place_spans(place, req))
        return check_span(place, req, why, len);
    if (req->gpus > 0 && req->gpu_mem > most.gpu_mem)
        return check_fail(why, len, "asks for %s of memory per GPU; the largest GPU%s has %s",
                          check_size(req->gpu_mem, a, sizeof a),
                          req->gpu_types != 0 ? " of its types" : "",
                          check_size(most.gpu_mem, b, sizeof b));
    if (!most.gpus_ok)
        return check_fail(why, len, "asks for %s; the most any node has is %d",
                          check_gpus_asked(req, gpus, sizeof gpus), most.gpus);
    if (!most.cpus_ok)
        return check_fail(why, len, "asks for %d CPUs; the largest node has %d",
                          core_place_cpus(req), most.cpus);
    if (!most.mem_ok)
        return check_fail(why, len, "asks for %s of memory; the largest node has %s",
                          check_size(req->mem, a, sizeof a), check_size(most.mem, b, sizeof b));
    if (!most.all_ok)
        return check_all(req, why, len);
    return 0;
}
