/* fuzz_gpu — what gpu/gpu.c parses: nvidia-smi's CSV (the inventory, and each sample's GPU and
 * process lists), DROVER_FAKE_GPUS specs, and the `gpus` allow-list.
 *
 * The input is up to three parts separated by NUL bytes:
 *   1. the inventory: `nvidia-smi --query-gpu=index,name,uuid,memory.total` output, and the
 *      same text as a DROVER_FAKE_GPUS spec;
 *   2. a sample: `--query-gpu=uuid,memory.used,memory.total,utilization.gpu,...` output, read for
 *      every GPU of the inventory (or one stand-in GPU when the inventory is empty), and the same
 *      text as a `gpus` allow-list applied to both inventories;
 *   3. the processes: `--query-compute-apps=gpu_uuid,pid,used_memory` output (absent: NULL, as
 *      when nvidia-smi could not list them).
 * Beyond the sanitizers: an inventory holds at most GPU_MAX GPUs with memory, a sample at most
 * NVML_MAX_PROCS processes, and a filtered inventory is a subsequence of the one it came from.
 */
#include "fuzz.h"
#include "gpu/gpu.h"
#include "gpu/nvml.h"

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_gpu: %s\n", what);
    abort();
}

static void fuzz_check_inventory(const struct gpu_inventory *inv)
{
    if (inv->count < 0 || inv->count > GPU_MAX)
        fuzz_fail("an inventory with a bad count");
    for (int i = 0; i < inv->count; i++)
        if (inv->gpu[i].mem_total == 0 || memchr(inv->gpu[i].name, 0, sizeof inv->gpu[i].name) ==
                                              NULL)
            fuzz_fail("a GPU without memory or with an unterminated name");
}

static void fuzz_filter(const struct gpu_inventory *inv, const char *list)
{
    struct gpu_inventory kept = *inv;
    char *err = NULL;
    if (gpu_filter(&kept, list, &err) < 0) {
        free(err);
        return;
    }
    fuzz_check_inventory(&kept);
    int j = 0; /* kept must be a subsequence of inv, in order */
    for (int i = 0; i < kept.count; i++) {
        while (j < inv->count && memcmp(&inv->gpu[j], &kept.gpu[i], sizeof kept.gpu[i]) != 0)
            j++;
        if (j++ == inv->count)
            fuzz_fail("gpu_filter kept a GPU that was not there, or out of order");
    }
}

static void fuzz_sample(const char *gpus_csv, const char *apps_csv, const struct gpu_info *gi)
{
    struct gpu_sample s;
    gpu_parse_smi_sample(gpus_csv, apps_csv, gi, &s);
    if (s.nprocs > NVML_MAX_PROCS || (apps_csv == NULL && s.nprocs != -1) ||
        (apps_csv != NULL && s.nprocs < 0))
        fuzz_fail("a sample with a bad process count");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf, *part[3];
    size_t n = fuzz_split(data, size, &buf, part, 3);
    const char *inventory = part[0], *sample = n > 1 ? part[1] : "", *apps = n > 2 ? part[2] : NULL;
    const char *err;
    static struct gpu_inventory smi, fake; /* 13 KiB each: not on the stack */
    if (gpu_parse_smi(inventory, &smi, &err) < 0)
        memset(&smi, 0, sizeof smi);
    fuzz_check_inventory(&smi);
    if (gpu_parse_fake(inventory, &fake, &err) == 0) {
        fuzz_check_inventory(&fake);
        if (fake.count == 0)
            fuzz_fail("gpu_parse_fake accepted no GPU");
    }
    struct gpu_info standin = {.index = 0, .name = "stand-in", .uuid = "GPU-0", .mem_total = 1};
    for (int i = 0; i < smi.count; i++)
        fuzz_sample(sample, apps, &smi.gpu[i]);
    if (smi.count == 0)
        fuzz_sample(sample, apps, &standin);
    fuzz_filter(&smi, sample);
    if (fake.count > 0)
        fuzz_filter(&fake, sample);
    free(buf);
    return 0;
}
