/* tests/fake-nvml/fake_nvml.c — a stand-in libnvidia-ml.so.1 driven by a text file, so that
 * gpu/nvml.c runs in the unit and end-to-end tests on machines without a GPU. libc only.
 *
 * Environment
 *   FAKE_NVML_STATE  the state file. Unset: nvmlInit fails with NVML_ERROR_LIBRARY_NOT_FOUND
 *                    (12), which is how "no NVML" is tested. Set but missing or unreadable:
 *                    NVML works and has no devices.
 *   FAKE_NVML_HIDE   comma-separated NVML function names, e.g.
 *                    "nvmlDeviceGetPowerUsage,nvmlDeviceGetTemperature". Each named function
 *                    answers NVML_ERROR_NOT_SUPPORTED (3). Names are exact: hiding
 *                    "nvmlDeviceGetComputeRunningProcesses_v3" leaves _v2 and the plain one.
 *                    dlsym still finds them; a caller must treat NOT_SUPPORTED like a missing
 *                    symbol. Read on every call.
 *
 * The state file is re-read whenever its inode, size, mtime or ctime changes, so a test may
 * rewrite it while a daemon runs (write a temporary file and rename(2) it into place). One
 * record per line, fields separated by blanks; '#' starts a comment line; unknown lines and
 * malformed fields are ignored.
 *
 *   init RC
 *       nvmlInit answers RC (e.g. 9 = NVML_ERROR_DRIVER_NOT_LOADED) instead of success.
 *   gpu INDEX [KEY=VALUE ...]
 *       Device INDEX (0..63). The device count is the highest INDEX + 1; a gap is a device
 *       that supports nothing. Keys (a missing key = that figure is not supported):
 *         name="Fake H100"    quoted (no escapes) or a bare word; ≤ 95 bytes
 *         uuid=GPU-...        ≤ 95 bytes
 *         mem_total=SIZE      memory info is supported when this is given
 *         mem_used=SIZE       default 0; free = total - used
 *         util=PCT mem_util=PCT   utilisation is supported when util is given; mem_util
 *                             defaults to 0
 *         temp=CELSIUS  power=MILLIWATTS  ecc=COUNT (volatile uncorrected)
 *         lost=1              every call for the device, handle lookup included, answers
 *                             NVML_ERROR_GPU_IS_LOST (15); lost=0 or absent: healthy
 *       SIZE is an integer count of bytes with an optional K, M, G or T suffix (powers of 1024).
 *   proc GPU PID MEM [compute|graphics|both]
 *       A process on device GPU. MEM is a SIZE, or "-" for NVML_VALUE_NOT_AVAILABLE. Listed by
 *       nvmlDeviceGetComputeRunningProcesses* (compute, the default), by
 *       nvmlDeviceGetGraphicsRunningProcesses* (graphics), or by both.
 *   link A B LEVEL
 *       How devices A and B are connected (either order). LEVEL:
 *         nvlink      nvmlDeviceGetP2PStatus(NVML_P2P_CAPS_INDEX_NVLINK) says OK; the common
 *                     ancestor is NVML_TOPOLOGY_SYSTEM
 *         internal | switch (= SINGLE) | multiple | hostbridge | socket (= NODE) | system
 *                     nvmlDeviceGetTopologyCommonAncestor answers that level
 *       A pair without a link line: topology answers NOT_SUPPORTED, NVLink status is
 *       NVML_P2P_STATUS_NOT_SUPPORTED. A device with itself: NVML_TOPOLOGY_INTERNAL.
 *   xid GPU CODE
 *       A critical XID event (eventType 0x8, eventData CODE) on device GPU. Each xid line is
 *       delivered once, by nvmlEventSetWait*, to an event set the device is registered with.
 *       A line is identified by its position among the xid lines and its content: append a
 *       line to raise a new event (the same content again is a new event). Lines already in
 *       the file when the device is registered count as delivered. The wait never blocks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FAKE_GPU_MAX 64
#define FAKE_PROC_MAX 512
#define FAKE_XID_MAX 1024
#define FAKE_UNSUPPORTED (-1LL)

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_GPU_IS_LOST = 15,
};

enum { PROC_COMPUTE = 1, PROC_GRAPHICS = 2 };
enum { LINK_NONE = -1, LINK_NVLINK = -2 };     /* else an NVML_TOPOLOGY_* level */

/* nvmlDevice_t points at one of these; they never move, so handles survive reloads. */
struct nvmlDevice_st {
    int index;
    char name[96], uuid[96];
    bool has_mem, lost;
    unsigned long long mem_total, mem_used;
    long long util, mem_util, temp, power, ecc;  /* FAKE_UNSUPPORTED when not given */
};
typedef struct nvmlDevice_st *nvmlDevice_t;

struct nvmlEventSet_st {
    unsigned long long mask[FAKE_GPU_MAX];
};
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
} nvmlEventData_v1_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

struct fake_proc {
    int gpu, kinds;
    unsigned pid;
    unsigned long long mem;
};

struct fake_xid {
    int gpu;
    unsigned long long code;
    bool delivered;
};

static struct {
    int inits;                          /* nvmlInit reference count */
    bool loaded;
    struct stat seen;                   /* of the state file last read */
    int init_rc;
    int ndevices;
    struct nvmlDevice_st gpu[FAKE_GPU_MAX];
    int nprocs;
    struct fake_proc proc[FAKE_PROC_MAX];
    signed char link[FAKE_GPU_MAX][FAKE_GPU_MAX];
    int nxids;
    struct fake_xid xid[FAKE_XID_MAX];
} fake;

static bool fake_hidden(const char *fn)
{
    const char *hide = getenv("FAKE_NVML_HIDE");
    size_t len = strlen(fn);
    while (hide && *hide) {
        const char *end = strchr(hide, ',');
        size_t n = end ? (size_t)(end - hide) : strlen(hide);
        if (n == len && strncmp(hide, fn, n) == 0)
            return true;
        hide = end ? end + 1 : NULL;
    }
    return false;
}

static bool fake_size(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return false;
    int shift = 0;
    switch (*end) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    }
    if (*end || (shift && v > (~0ull >> shift)))
        return false;
    *out = v << shift;
    return true;
}

static bool fake_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return false;
    *out = v;
    return true;
}

/* Splits the next field off *p: blanks separate fields, a double quote keeps blanks inside a
 * value (key="two words"). Returns NULL at the end of the line. */
static char *fake_field(char **p)
{
    char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    if (!*s)
        return NULL;
    char *field = s, *out = s;
    bool quoted = false;
    for (; *s; s++) {
        if (*s == '"') {
            quoted = !quoted;
            continue;
        }
        if (!quoted && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')) {
            s++;
            break;
        }
        *out++ = *s;
    }
    /* out never passes s, so terminating here cannot clobber the next field. */
    *out = '\0';
    *p = s;
    return field;
}

static void fake_copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src);
}

static void fake_gpu_key(struct nvmlDevice_st *g, const char *key, const char *value)
{
    unsigned long long size;
    long long n;
    if (strcmp(key, "name") == 0)
        fake_copy(g->name, sizeof g->name, value);
    else if (strcmp(key, "uuid") == 0)
        fake_copy(g->uuid, sizeof g->uuid, value);
    else if (strcmp(key, "mem_total") == 0 && fake_size(value, &size)) {
        g->mem_total = size;
        g->has_mem = true;
    } else if (strcmp(key, "mem_used") == 0 && fake_size(value, &size))
        g->mem_used = size;
    else if (!fake_int(value, &n) || n < 0)
        return;
    else if (strcmp(key, "util") == 0)
        g->util = n;
    else if (strcmp(key, "mem_util") == 0)
        g->mem_util = n;
    else if (strcmp(key, "temp") == 0)
        g->temp = n;
    else if (strcmp(key, "power") == 0)
        g->power = n;
    else if (strcmp(key, "ecc") == 0)
        g->ecc = n;
    else if (strcmp(key, "lost") == 0)
        g->lost = n != 0;
}

static void fake_reset_gpu(struct nvmlDevice_st *g, int index)
{
    memset(g, 0, sizeof *g);
    g->index = index;
    g->util = g->mem_util = g->temp = g->power = g->ecc = FAKE_UNSUPPORTED;
}

static bool fake_index(const char *s, long long *out)
{
    return s && fake_int(s, out) && *out >= 0 && *out < FAKE_GPU_MAX;
}

static int fake_level(const char *word)
{
    static const struct { const char *word; int level; } levels[] = {
        {"nvlink", LINK_NVLINK}, {"internal", 0}, {"switch", 10}, {"single", 10},
        {"multiple", 20},        {"hostbridge", 30}, {"socket", 40}, {"node", 40},
        {"system", 50},
    };
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strcmp(word, levels[i].word) == 0)
            return levels[i].level;
    return LINK_NONE;
}

static void fake_line(char *line, struct fake_xid *old, int nold)
{
    char *p = line, *kind = fake_field(&p);
    char *a = kind ? fake_field(&p) : NULL;
    long long i, j, n;
    if (!kind || kind[0] == '#')
        return;
    if (strcmp(kind, "init") == 0 && a && fake_int(a, &n)) {
        fake.init_rc = (int)n;
    } else if (strcmp(kind, "gpu") == 0 && fake_index(a, &i)) {
        struct nvmlDevice_st *g = &fake.gpu[i];
        if (i >= fake.ndevices)
            fake.ndevices = (int)i + 1;
        for (char *kv; (kv = fake_field(&p));) {
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                fake_gpu_key(g, kv, eq + 1);
            }
        }
    } else if (strcmp(kind, "proc") == 0 && fake_index(a, &i) && fake.nprocs < FAKE_PROC_MAX) {
        char *pid = fake_field(&p), *mem = pid ? fake_field(&p) : NULL;
        char *which = mem ? fake_field(&p) : NULL;
        struct fake_proc pr = {.gpu = (int)i, .kinds = PROC_COMPUTE, .mem = ~0ull};
        if (!mem || !fake_int(pid, &n) || n <= 0 || n > 0xffffffffLL ||
            (strcmp(mem, "-") != 0 && !fake_size(mem, &pr.mem)))
            return;
        pr.pid = (unsigned)n;
        if (which && strcmp(which, "graphics") == 0)
            pr.kinds = PROC_GRAPHICS;
        else if (which && strcmp(which, "both") == 0)
            pr.kinds = PROC_COMPUTE | PROC_GRAPHICS;
        fake.proc[fake.nprocs++] = pr;
    } else if (strcmp(kind, "link") == 0 && fake_index(a, &i)) {
        char *b = fake_field(&p), *word = b ? fake_field(&p) : NULL;
        if (fake_index(b, &j) && word && fake_level(word) != LINK_NONE)
            fake.link[i][j] = fake.link[j][i] = (signed char)fake_level(word);
    } else if (strcmp(kind, "xid") == 0 && fake_index(a, &i) && fake.nxids < FAKE_XID_MAX) {
        char *code = fake_field(&p);
        unsigned long long c;
        if (!code || !fake_size(code, &c))
            return;
        int k = fake.nxids++;
        fake.xid[k] = (struct fake_xid){.gpu = (int)i, .code = c};
        /* The same line in the same place was seen before: keep whether it was delivered. */
        if (k < nold && old[k].gpu == (int)i && old[k].code == c)
            fake.xid[k].delivered = old[k].delivered;
    }
}

/* Re-reads the state file when it changed since the last read. */
static void fake_load(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    struct stat st;
    memset(&st, 0, sizeof st);
    if (!path || stat(path, &st) != 0)
        memset(&st, 0, sizeof st);
    if (fake.loaded && st.st_ino == fake.seen.st_ino && st.st_dev == fake.seen.st_dev &&
        st.st_size == fake.seen.st_size && st.st_mtim.tv_sec == fake.seen.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == fake.seen.st_mtim.tv_nsec &&
        st.st_ctim.tv_sec == fake.seen.st_ctim.tv_sec &&
        st.st_ctim.tv_nsec == fake.seen.st_ctim.tv_nsec)
        return;

    static struct fake_xid old[FAKE_XID_MAX];
    int nold = fake.nxids;
    memcpy(old, fake.xid, sizeof old);
    fake.loaded = true;
    fake.seen = st;
    fake.init_rc = NVML_SUCCESS;
    fake.ndevices = fake.nprocs = fake.nxids = 0;
    for (int i = 0; i < FAKE_GPU_MAX; i++) {
        fake_reset_gpu(&fake.gpu[i], i);
        for (int j = 0; j < FAKE_GPU_MAX; j++)
            fake.link[i][j] = i == j ? 0 : LINK_NONE;
    }
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0)
        fake_line(line, old, nold);
    free(line);
    fclose(f);
}

/* The common prologue: hidden, not initialised, reload, and a valid device. */
static nvmlReturn_t fake_enter(const char *fn, nvmlDevice_t dev)
{
    if (fake_hidden(fn))
        return NVML_ERROR_NOT_SUPPORTED;
    if (fake.inits == 0)
        return NVML_ERROR_UNINITIALIZED;
    fake_load();
    if (dev) {
        if (dev < fake.gpu || dev >= fake.gpu + FAKE_GPU_MAX || dev->index >= fake.ndevices)
            return NVML_ERROR_INVALID_ARGUMENT;
        if (dev->lost)
            return NVML_ERROR_GPU_IS_LOST;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t fake_init(const char *fn)
{
    if (fake_hidden(fn))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!getenv("FAKE_NVML_STATE"))
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    fake.loaded = false;
    fake_load();
    if (fake.init_rc != NVML_SUCCESS)
        return fake.init_rc;
    fake.inits++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return fake_init("nvmlInit_v2"); }
nvmlReturn_t nvmlInit(void) { return fake_init("nvmlInit"); }

nvmlReturn_t nvmlShutdown(void)
{
    if (fake.inits == 0)
        return NVML_ERROR_UNINITIALIZED;
    fake.inits--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t fake_count(const char *fn, unsigned *count)
{
    nvmlReturn_t rc = fake_enter(fn, NULL);
    if (rc == NVML_SUCCESS)
        *count = (unsigned)fake.ndevices;
    return rc;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { return fake_count("nvmlDeviceGetCount_v2", n); }
nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { return fake_count("nvmlDeviceGetCount", n); }

static nvmlReturn_t fake_handle(const char *fn, unsigned index, nvmlDevice_t *dev)
{
    nvmlReturn_t rc = fake_enter(fn, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (index >= (unsigned)fake.ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake.gpu[index].lost)
        return NVML_ERROR_GPU_IS_LOST;
    *dev = &fake.gpu[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *dev)
{
    return fake_handle("nvmlDeviceGetHandleByIndex_v2", index, dev);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *dev)
{
    return fake_handle("nvmlDeviceGetHandleByIndex", index, dev);
}

static nvmlReturn_t fake_string(const char *fn, nvmlDevice_t dev, const char *s, char *out,
                                unsigned len)
{
    nvmlReturn_t rc = fake_enter(fn, dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!*s)
        return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(s) >= len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, s);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned len)
{
    return fake_string("nvmlDeviceGetName", dev, dev ? dev->name : "", name, len);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned len)
{
    return fake_string("nvmlDeviceGetUUID", dev, dev ? dev->uuid : "", uuid, len);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
    nvmlReturn_t rc = fake_enter("nvmlDeviceGetMemoryInfo", dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!dev || !dev->has_mem)
        return NVML_ERROR_NOT_SUPPORTED;
    mem->total = dev->mem_total;
    mem->used = dev->mem_used;
    mem->free = dev->mem_used < dev->mem_total ? dev->mem_total - dev->mem_used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util)
{
    nvmlReturn_t rc = fake_enter("nvmlDeviceGetUtilizationRates", dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!dev || dev->util == FAKE_UNSUPPORTED)
        return NVML_ERROR_NOT_SUPPORTED;
    util->gpu = (unsigned)dev->util;
    util->memory = dev->mem_util == FAKE_UNSUPPORTED ? 0 : (unsigned)dev->mem_util;
    return NVML_SUCCESS;
}

/* A figure of the device that NVML hands back as an unsigned int; *field is read after the
 * state file is reloaded. */
static nvmlReturn_t fake_uint(const char *fn, nvmlDevice_t dev, const long long *field,
                              unsigned *out)
{
    nvmlReturn_t rc = fake_enter(fn, dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!dev || *field == FAKE_UNSUPPORTED)
        return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned)*field;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned *temp)
{
    if (sensor != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fake_uint("nvmlDeviceGetTemperature", dev, dev ? &dev->temp : NULL, temp);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *mw)
{
    return fake_uint("nvmlDeviceGetPowerUsage", dev, dev ? &dev->power : NULL, mw);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type,
                                         unsigned long long *count)
{
    nvmlReturn_t rc = fake_enter("nvmlDeviceGetTotalEccErrors", dev);
    if (rc != NVML_SUCCESS)
        return rc;
    /* Only the figure drover reads: uncorrected (1), volatile (0). */
    if (!dev || dev->ecc == FAKE_UNSUPPORTED || error_type != 1 || counter_type != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = (unsigned long long)dev->ecc;
    return NVML_SUCCESS;
}

/* Lists the processes of `kind` on dev into infos, an array of `stride`-byte entries in the v1
 * or v2 layout. */
static nvmlReturn_t fake_procs(const char *fn, int kind, nvmlDevice_t dev, unsigned *count,
                               void *infos, bool v2)
{
    nvmlReturn_t rc = fake_enter(fn, dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!dev || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (int i = 0; i < fake.nprocs; i++)
        if (fake.proc[i].gpu == dev->index && (fake.proc[i].kinds & kind))
            n++;
    if (n > *count || (n > 0 && !infos)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned k = 0;
    for (int i = 0; i < fake.nprocs; i++) {
        const struct fake_proc *p = &fake.proc[i];
        if (p->gpu != dev->index || !(p->kinds & kind))
            continue;
        if (v2)
            ((nvmlProcessInfo_v2_t *)infos)[k++] = (nvmlProcessInfo_v2_t){
                .pid = p->pid, .usedGpuMemory = p->mem,
                .gpuInstanceId = ~0u, .computeInstanceId = ~0u};
        else
            ((nvmlProcessInfo_v1_t *)infos)[k++] =
                (nvmlProcessInfo_v1_t){.pid = p->pid, .usedGpuMemory = p->mem};
    }
    *count = n;
    return NVML_SUCCESS;
}

#define FAKE_PROCS(name, kind, v2)                                          \
    nvmlReturn_t name(nvmlDevice_t dev, unsigned *count, void *infos)       \
    {                                                                       \
        return fake_procs(#name, kind, dev, count, infos, v2);              \
    }

FAKE_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, PROC_COMPUTE, true)
FAKE_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, PROC_COMPUTE, true)
FAKE_PROCS(nvmlDeviceGetComputeRunningProcesses, PROC_COMPUTE, false)
FAKE_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, PROC_GRAPHICS, true)
FAKE_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, PROC_GRAPHICS, true)
FAKE_PROCS(nvmlDeviceGetGraphicsRunningProcesses, PROC_GRAPHICS, false)

/* Both devices checked and healthy. */
static nvmlReturn_t fake_pair(const char *fn, nvmlDevice_t a, nvmlDevice_t b)
{
    if (!a || !b)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = fake_enter(fn, a);
    return rc != NVML_SUCCESS ? rc : fake_enter(fn, b);
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level)
{
    nvmlReturn_t rc = fake_pair("nvmlDeviceGetTopologyCommonAncestor", a, b);
    if (rc != NVML_SUCCESS)
        return rc;
    int link = fake.link[a->index][b->index];
    if (link == LINK_NONE)
        return NVML_ERROR_NOT_SUPPORTED;
    *level = link == LINK_NVLINK ? 50 : link;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps_index, int *status)
{
    nvmlReturn_t rc = fake_pair("nvmlDeviceGetP2PStatus", a, b);
    if (rc != NVML_SUCCESS)
        return rc;
    /* NVML_P2P_CAPS_INDEX_NVLINK is 2; only NVLink is modelled. NVML_P2P_STATUS_OK is 0,
     * NVML_P2P_STATUS_NOT_SUPPORTED 5. */
    *status = caps_index == 2 && fake.link[a->index][b->index] == LINK_NVLINK ? 0 : 5;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t rc = fake_enter("nvmlEventSetCreate", NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    *set = calloc(1, sizeof **set);
    return *set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t rc = fake_enter("nvmlEventSetFree", NULL);
    if (rc == NVML_SUCCESS)
        free(set);
    return rc;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                      nvmlEventSet_t set)
{
    nvmlReturn_t rc = fake_enter("nvmlDeviceRegisterEvents", dev);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!dev || !set || (types & ~0x8ull))
        return NVML_ERROR_NOT_SUPPORTED;
    set->mask[dev->index] |= types;
    /* Events from before the registration are not the new listener's. */
    for (int k = 0; k < fake.nxids; k++)
        if (fake.xid[k].gpu == dev->index)
            fake.xid[k].delivered = true;
    return NVML_SUCCESS;
}

/* The next undelivered XID for a device registered with set, or NULL. */
static struct fake_xid *fake_next_xid(nvmlEventSet_t set)
{
    for (int k = 0; k < fake.nxids; k++) {
        struct fake_xid *x = &fake.xid[k];
        if (!x->delivered && x->gpu < fake.ndevices && (set->mask[x->gpu] & 0x8))
            return x;
    }
    return NULL;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms)
{
    nvmlReturn_t rc = fake_enter("nvmlEventSetWait_v2", NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    struct fake_xid *x = set ? fake_next_xid(set) : NULL;
    if (!x)
        return NVML_ERROR_TIMEOUT;
    x->delivered = true;
    *data = (nvmlEventData_t){.device = &fake.gpu[x->gpu], .eventType = 0x8,
                              .eventData = x->code, .gpuInstanceId = ~0u,
                              .computeInstanceId = ~0u};
    return NVML_SUCCESS;
}

/* The legacy wait writes the old, shorter event record. */
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t *data, unsigned timeout_ms)
{
    nvmlReturn_t rc = fake_enter("nvmlEventSetWait", NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    struct fake_xid *x = set ? fake_next_xid(set) : NULL;
    if (!x)
        return NVML_ERROR_TIMEOUT;
    x->delivered = true;
    *data = (nvmlEventData_v1_t){.device = &fake.gpu[x->gpu], .eventType = 0x8,
                                 .eventData = x->code};
    return NVML_SUCCESS;
}
