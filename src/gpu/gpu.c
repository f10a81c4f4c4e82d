#include "gpu/gpu.h"
#include "gpu/nvml.h"
#include "util/parse.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

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

/* Runs nvidia-smi if it is on the PATH; its stdout (malloc'd) or NULL. */
static char *gpu_run_smi(void)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        execlp("nvidia-smi", "nvidia-smi", "--query-gpu=index,name,uuid,memory.total",
               "--format=csv,noheader,nounits", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0, cap = 4096;
    char *out = xmalloc(cap);
    ssize_t r;
    while ((r = read(fd[0], out + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (cap - len < 2)
            out = xrealloc(out, cap *= 2);
    }
    out[len] = '\0';
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(out);
        return NULL;
    }
    return out;
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
    char *out = gpu_run_smi();
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
