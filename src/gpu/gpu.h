/* gpu/ — the machine's GPU inventory, from one of three sources:
 *   fake        DROVER_FAKE_GPUS="2x16G" or "4x24G,1x80G" (machines without GPUs, tests)
 *   nvml        libnvidia-ml.so.1 loaded at run time (gpu/nvml.h): inventory and telemetry
 *   nvidia-smi  `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits`
 *   none        no GPU: CPU-only tasks run
 * `index` is the GPU's index on the machine (NVML's, which is CUDA's in PCI_BUS_ID order); an
 * inventory may keep only some of the machine's GPUs (gpu_filter), so it can differ from the
 * position in the inventory, which is what core/ calls the GPU.
 */
#ifndef DROVER_GPU_H
#define DROVER_GPU_H

#include <stdint.h>

#define GPU_MAX 64

struct gpu_info {
    int index;
    char name[96];
    char uuid[96];
    uint64_t mem_total; /* bytes */
};

struct gpu_inventory {
    int count;
    struct gpu_info gpu[GPU_MAX];
    const char *source; /* "fake", "nvml", "nvidia-smi" or "none" */
};

/* Parses a fake inventory spec. 0, or -1 with a static reason. */
int gpu_parse_fake(const char *spec, struct gpu_inventory *inv, const char **err);
/* Parses nvidia-smi's CSV output (index, name, uuid, memory.total MiB per line). */
int gpu_parse_smi(const char *csv, struct gpu_inventory *inv, const char **err);
/* Detects the inventory: DROVER_FAKE_GPUS, else nvidia-smi, else none. -1 with *err (malloc'd)
 * only when DROVER_FAKE_GPUS is malformed. */
int gpu_detect(struct gpu_inventory *inv, char **err);
/* Keeps only the GPUs list names ("0,2", UUIDs or unique UUID prefixes, comma-separated), in
 * the machine's order. Returns 0, or -1 with *err (malloc'd) naming an unknown entry. */
int gpu_filter(struct gpu_inventory *inv, const char *list, char **err);

#endif
