#include "gpu/gpu.h"
#include "gpu/nvml.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

extern char **environ;

int gpu_parse_fake(const char *spec, struct gpu_inventory *inv, const char **err)
{
    char *copy = xstrdup(spec), *next = copy;
    memset(inv, 0, sizeof *inv);
    inv->source = "fake";
    while (next) {
        char *part = next, *comma = strchr(part, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        char *x = strchr(part, 'x');
        long long count;
        uint64_t mem;
        if (x == NULL) {
            *err = "expected COUNTxSIZE such as 2x16G or 4x24G,1x80G";
            goto fail;
        }
        *x = '\0';
        if (parse_int(part, 1, GPU_MAX, &count, err) < 0 || parse_size(x + 1, &mem, err) < 0)
            goto fail;
        if (mem == 0) {
            *err = "a GPU needs some memory";
            goto fail;
        }
        if (inv->count + count > GPU_MAX) {
            *err = "too many GPUs (at most 64)";
            goto fail;
        }
        for (long long i = 0; i < count; i++) {
            struct gpu_info *g = &inv->gpu[inv->count];
            g->index = inv->count;
            g->mem_total = mem;
            snprintf(g->name, sizeof g->name, "Fake GPU %lluG",
                     (unsigned long long)(mem >> 30));
            snprintf(g->uuid, sizeof g->uuid, "GPU-fake-%04d", inv->count);
            inv->count++;
        }
    }
    if (inv->count == 0) {
        *err = "expected COUNTxSIZE such as 2x16G or 4x24G,1x80G";
        goto fail;
    }
    free(copy);
    return 0;
fail:
    free(copy);
    memset(inv, 0, sizeof *inv);
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int gpu_parse_smi(const char *csv, struct gpu_inventory *inv, const char **err)
{
    char *copy = xstrdup(csv), *save = NULL;
    memset(inv, 0, sizeof *inv);
    inv->source = "nvidia-smi";
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4], *fs = NULL;
        int n = 0;
        for (char *t = strtok_r(line, ",", &fs); t && n < 4; t = strtok_r(NULL, ",", &fs))
            f[n++] = trim(t);
        long long index, mib;
        if (n < 4 || parse_int(f[0], 0, 1023, &index, err) < 0 ||
            parse_int(f[3], 1, 1LL << 40, &mib, err) < 0 || inv->count == GPU_MAX) {
            *err = "unexpected nvidia-smi output";
            free(copy);
            return -1;
        }
        struct gpu_info *g = &inv->gpu[inv->count++];
        g->index = (int)index;
        snprintf(g->name, sizeof g->name, "%s", f[1]);
        snprintf(g->uuid, sizeof g->uuid, "%s", f[2]);
        g->mem_total = (uint64_t)mib << 20;
    }
    free(copy);
    return 0;
}

/* Runs nvidia-smi with one argument list if it is on the PATH; its stdout (malloc'd), or NULL.
 * posix_spawn, not fork: the daemon calls it every sample, and a fork of the daemon copies its
 * page tables (docs/BENCHMARKS.md). */
static char *gpu_run_smi(const char *query, const char *format)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"nvidia-smi", (char *)query, (char *)format, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "nvidia-smi", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        return NULL;
    }
    size_t len = 0, cap = 4096;
    char *out = xmalloc(cap);
    ssize_t r;
    while ((r = read(fd[0], out + len, cap - len - 1)) > 0 || (r < 0 && errno == EINTR)) {
        if (r < 0)
            continue;
        len += (size_t)r;
        if (cap - len < 2)
            out = xrealloc(out, cap *= 2);
    }
    out[len] = '\0';
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* A number from nvidia-smi, or -1 for "[N/A]", "[Not Supported]" and the like. */
/* A figure from nvidia-smi's CSV, or -1 when it is not a number from 0 to max ("[N/A]", garbage,
 * inf, nan, or too large to convert without overflow: the fuzzer found 3.4e12 cast to int). */
static double gpu_smi_number(const char *s, double max)
{
    char *end;
    double v = strtod(s, &end);
    return end != s && *trim(end) == '\0' && v >= 0 && v <= max ? v : -1;
}

#define SMI_MAX_MIB 17592186044415.0 /* 2^44 - 1: MiB that still fit in bytes as uint64_t */

int gpu_parse_smi_sample(const char *gpus_csv, const char *apps_csv, const struct gpu_info *gi,
                         struct gpu_sample *out)
{
    memset(out, 0, sizeof *out);
    out->mem_used = out->mem_total = out->ecc_uncorrected = NVML_UNKNOWN_U64;
    out->util = out->mem_util = out->temp_c = out->power_mw = -1;
    out->nprocs = apps_csv != NULL ? 0 : -1;
    char *copy = xstrdup(gpus_csv), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[8], *fs = NULL;
        int n = 0;
        for (char *t = strtok_r(line, ",", &fs); t && n < 8; t = strtok_r(NULL, ",", &fs))
            f[n++] = trim(t);
        if (n < 7 || strcmp(f[0], gi->uuid) != 0)
            continue;
        double used = gpu_smi_number(f[1], SMI_MAX_MIB), total = gpu_smi_number(f[2], SMI_MAX_MIB);
        double util = gpu_smi_number(f[3], 100), mem_util = gpu_smi_number(f[4], 100);
        double temp = gpu_smi_number(f[5], 1000), power = gpu_smi_number(f[6], 1e6);
        out->ok = true;
        out->mem_used = used >= 0 ? (uint64_t)used << 20 : NVML_UNKNOWN_U64;
        out->mem_total = total >= 0 ? (uint64_t)total << 20 : NVML_UNKNOWN_U64;
        out->util = (int)util;
        out->mem_util = (int)mem_util;
        out->temp_c = (int)temp;
        out->power_mw = power >= 0 ? (int)(power * 1000) : -1;
    }
    free(copy);
    if (apps_csv == NULL)
        return out->ok ? 0 : -1;
    copy = xstrdup(apps_csv);
    save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4], *fs = NULL;
        int n = 0;
        for (char *t = strtok_r(line, ",", &fs); t && n < 4; t = strtok_r(NULL, ",", &fs))
            f[n++] = trim(t);
        double pid = n >= 3 ? gpu_smi_number(f[1], 2147483647.0) : -1;
        if (n < 3 || strcmp(f[0], gi->uuid) != 0 || pid <= 0 || out->nprocs == NVML_MAX_PROCS)
            continue;
        double mem = gpu_smi_number(f[2], SMI_MAX_MIB);
        out->procs[out->nprocs++] = (struct nvml_proc){
            .pid = (unsigned)pid, .mem = mem >= 0 ? (uint64_t)mem << 20 : NVML_UNKNOWN_U64};
    }
    free(copy);
    return out->ok ? 0 : -1;
}

int gpu_smi_sample(const struct gpu_inventory *inv, struct gpu_sample *out)
{
    char *gpus = gpu_run_smi("--query-gpu=uuid,memory.used,memory.total,utilization.gpu,"
                             "utilization.memory,temperature.gpu,power.draw",
                             "--format=csv,noheader,nounits");
    char *apps = gpus ? gpu_run_smi("--query-compute-apps=gpu_uuid,pid,used_memory",
                                    "--format=csv,noheader,nounits")
                      : NULL;
    for (int i = 0; i < inv->count; i++)
        if (gpus == NULL || gpu_parse_smi_sample(gpus, apps, &inv->gpu[i], &out[i]) < 0)
            out[i].ok = false; /* a GPU nvidia-smi no longer lists has vanished */
    free(gpus);
    free(apps);
    return 0;
}

int gpu_detect(struct gpu_inventory *inv, char **err)
{
    const char *fake = getenv("DROVER_FAKE_GPUS");
    const char *why;
    if (fake && *fake) {
        if (gpu_parse_fake(fake, inv, &why) < 0) {
            *err = xasprintf("DROVER_FAKE_GPUS=%s: %s", fake, why);
            return -1;
        }
        return 0;
    }
    char *nvml_err = NULL;
    if (nvml_open(&nvml_err) == 0) {
        if (nvml_inventory(inv) > 0)
            return 0;
        nvml_close();
    }
    free(nvml_err);
    char *out = gpu_run_smi("--query-gpu=index,name,uuid,memory.total",
                            "--format=csv,noheader,nounits");
    if (out && gpu_parse_smi(out, inv, &why) == 0 && inv->count > 0) {
        free(out);
        return 0;
    }
    free(out);
    memset(inv, 0, sizeof *inv);
    inv->source = "none";
    return 0;
}

/* Whether entry (an index or a UUID, or a unique prefix of one) names g. */
static bool gpu_named(const struct gpu_info *g, const char *entry)
{
    char *end;
    long v = strtol(entry, &end, 10);
    if (end != entry && *end == '\0')
        return v == g->index;
    return strncmp(g->uuid, entry, strlen(entry)) == 0;
}

int gpu_filter(struct gpu_inventory *inv, const char *list, char **err)
{
    struct gpu_inventory kept = {.source = inv->source};
    char *copy = xstrdup(list), *save = NULL;
    bool chosen[GPU_MAX] = {false};
    for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        while (*entry == ' ')
            entry++;
        int found = -1;
        for (int i = 0; i < inv->count; i++)
            if (gpu_named(&inv->gpu[i], entry))
                found = found == -1 ? i : -2;
        if (found < 0) {
            *err = xasprintf("GPU '%s' %s", entry,
                             found == -1 ? "is not on this machine" : "is ambiguous");
            free(copy);
            return -1;
        }
        chosen[found] = true;
    }
    free(copy);
    for (int i = 0; i < inv->count; i++)
        if (chosen[i])
            kept.gpu[kept.count++] = inv->gpu[i];
    *inv = kept;
    return 0;
}
