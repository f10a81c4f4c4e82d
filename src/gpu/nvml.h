/* gpu/nvml.h — NVML, loaded at run time.
 *
 * dlopen("libnvidia-ml.so.1") through the normal library search (so LD_LIBRARY_PATH works, and
 * the tests' fake library is found that way), every function looked up with dlsym against
 * prototypes declared here, never NVIDIA's headers. A function the driver lacks (or that answers
 * NVML_ERROR_NOT_SUPPORTED and the like) leaves its figure unknown; it is never an error.
 * Single-threaded: the daemon samples from its event loop.
 */
#ifndef DROVER_GPU_NVML_H
#define DROVER_GPU_NVML_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"

#define NVML_UNKNOWN_U64 UINT64_MAX
#define NVML_MAX_PROCS 64

struct nvml_proc {
    unsigned pid;
    uint64_t mem;                /* bytes; NVML_UNKNOWN_U64 when NVML does not say */
};

/* One GPU at one instant. Unknown figures: -1, or NVML_UNKNOWN_U64. */
struct gpu_sample {
    bool ok;                     /* the GPU answered (handle and memory info); false: lost */
    uint64_t mem_used, mem_total;
    int util;                    /* GPU utilisation, percent */
    int mem_util;                /* memory-controller utilisation, percent */
    int temp_c;
    int power_mw;
    uint64_t ecc_uncorrected;    /* volatile uncorrected ECC errors since the driver loaded */
    unsigned long long xid;      /* the last critical XID event seen since the previous sample,
                                  * 0 = none */
    int nprocs;                  /* compute and graphics processes, deduplicated by pid */
    struct nvml_proc procs[NVML_MAX_PROCS];
};

/* How close two GPUs are, best first (NVML topology, NVLink from P2P status). */
enum nvml_link {
    NVML_LINK_NVLINK = 0,        /* an NVLink between them */
    NVML_LINK_SWITCH = 1,        /* the same PCIe switch (NVML_TOPOLOGY_SINGLE/MULTIPLE/INTERNAL) */
    NVML_LINK_HOSTBRIDGE = 2,    /* the same host bridge */
    NVML_LINK_SOCKET = 3,        /* the same CPU socket / NUMA node (NVML_TOPOLOGY_NODE) */
    NVML_LINK_SYSTEM = 4,        /* across sockets, or unknown */
};

/* Loads NVML and initialises it. Returns 0, or -1 with *err (malloc'd) when the library is
 * absent or nvmlInit fails; then every other call reports nothing. Calling it again after a
 * success does nothing. */
int nvml_open(char **err);
void nvml_close(void);
bool nvml_loaded(void);

/* The devices, in NVML's order (index = NVML index). Fills name, uuid, mem_total, index.
 * Returns the count (0..GPU_MAX), or -1 if NVML is not loaded. */
int nvml_inventory(struct gpu_inventory *inv);
/* Samples device `index` (NVML index). Returns 0; a GPU that does not answer gives ok = false. */
int nvml_sample(int index, struct gpu_sample *out);
/* The link between two devices (NVML indices); NVML_LINK_SYSTEM when unknown. */
enum nvml_link nvml_link(int a, int b);
/* A short name for a link level ("NVLink", "PCIe switch", …). */
const char *nvml_link_name(enum nvml_link link);

/* Without NVML, the same figures from `nvidia-smi --query-gpu=… --query-compute-apps=…` (no
 * topology, ECC or XID): one sample per GPU of inv into out[0..count). A GPU nvidia-smi no longer
 * lists comes back lost. gpu_parse_smi_sample parses the two CSV outputs for one GPU (apps may be
 * NULL); it is separate for the tests. Both in gpu/gpu.c. */
int gpu_smi_sample(const struct gpu_inventory *inv, struct gpu_sample *out);
int gpu_parse_smi_sample(const char *gpus_csv, const char *apps_csv, const struct gpu_info *gi,
                         struct gpu_sample *out);

#endif
