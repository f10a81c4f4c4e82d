/* gpu/nvml.c — NVML loaded with dlopen, against prototypes declared here.
 *
 * Why no nvml.h: drover must build on machines without CUDA and run on machines whose driver is
 * older or newer than any header we could pin. Every symbol is optional; a figure whose function
 * is missing or answers "not supported" stays unknown. The layouts below are NVML's stable ABI.
 */
#include "gpu/nvml.h"
#include "util/xalloc.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned gpu, memory;
} nvmlUtilization_t;

/* The plain nvmlDevice*RunningProcesses symbols keep this v1 layout for old binaries. */
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* The _v2 and _v3 functions' layout (MIG instance ids added). */
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

/* nvmlEventSetWait_v2's layout; the legacy nvmlEventSetWait fills only the first three fields. */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
};

enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_VOLATILE_ECC = 0,
    NVML_P2P_CAPS_INDEX_NVLINK = 2, /* READ 0, WRITE 1, NVLINK 2, ATOMICS 3, PCI 4 */
    NVML_P2P_STATUS_OK = 0,
};

enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50,
};

#define NVML_EVENT_XID_CRITICAL 0x8ull
/* Events drained per sample at most, so a storm of events cannot stall the event loop. */
#define NVML_EVENTS_PER_POLL 256

typedef nvmlReturn_t (*nvml_void_fn)(void);
typedef nvmlReturn_t (*nvml_count_fn)(unsigned *);
typedef nvmlReturn_t (*nvml_handle_fn)(unsigned, nvmlDevice_t *);
typedef nvmlReturn_t (*nvml_string_fn)(nvmlDevice_t, char *, unsigned);
typedef nvmlReturn_t (*nvml_memory_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*nvml_temp_fn)(nvmlDevice_t, int, unsigned *);
typedef nvmlReturn_t (*nvml_power_fn)(nvmlDevice_t, unsigned *);
typedef nvmlReturn_t (*nvml_ecc_fn)(nvmlDevice_t, int, int, unsigned long long *);
typedef nvmlReturn_t (*nvml_procs_fn)(nvmlDevice_t, unsigned *, void *);
typedef nvmlReturn_t (*nvml_topo_fn)(nvmlDevice_t, nvmlDevice_t, int *);
typedef nvmlReturn_t (*nvml_p2p_fn)(nvmlDevice_t, nvmlDevice_t, int, int *);
typedef nvmlReturn_t (*nvml_set_create_fn)(nvmlEventSet_t *);
typedef nvmlReturn_t (*nvml_register_fn)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
typedef nvmlReturn_t (*nvml_wait_fn)(nvmlEventSet_t, nvmlEventData_t *, unsigned);
typedef nvmlReturn_t (*nvml_set_free_fn)(nvmlEventSet_t);
typedef const char *(*nvml_error_fn)(nvmlReturn_t);

/* One way of listing a device's processes: newest first, since the symbols that exist need not
 * all work (a hidden or unimplemented variant answers "not supported"). */
struct nvml_proc_variant {
    nvml_procs_fn get;
    size_t stride;               /* sizeof the entry layout this variant writes */
};

static struct {
    void *lib;
    bool loaded;
    nvml_void_fn shutdown;
    nvml_count_fn count;
    nvml_handle_fn handle_by_index;
    nvml_string_fn name, uuid;
    nvml_memory_fn memory;
    nvml_util_fn util;
    nvml_temp_fn temperature;
    nvml_power_fn power;
    nvml_ecc_fn ecc;
    struct nvml_proc_variant compute[3], graphics[3];
    nvml_topo_fn topology;
    nvml_p2p_fn p2p;
    nvml_set_create_fn set_create;
    nvml_register_fn register_events;
    nvml_wait_fn wait;
    nvml_set_free_fn set_free;
    nvml_error_fn error_string;

    int ndevices;
    nvmlDevice_t handle[GPU_MAX];       /* NULL: not fetched, or dropped after a failure */
    nvmlEventSet_t events;              /* NULL when the driver has no events */
    nvmlDevice_t registered[GPU_MAX];   /* the handle XID events are registered (and arrive) for */
    unsigned long long xid[GPU_MAX];    /* last XID since the device's previous sample */
} nvml;

/* The first of `names` (NULL-terminated) that the library exports, or NULL. */
static void *nvml_symbol(const char *const *names)
{
    for (; *names; names++) {
        void *sym = dlsym(nvml.lib, *names);
        if (sym)
            return sym;
    }
    return NULL;
}

#define NVML_BIND(field, type, ...) \
    (nvml.field = (type)nvml_symbol((const char *const[]){__VA_ARGS__, NULL}))

static void nvml_bind_procs(struct nvml_proc_variant *variant, const char *base)
{
    static const struct { const char *suffix; size_t stride; } order[3] = {
        {"_v3", sizeof(nvmlProcessInfo_v2_t)},
        {"_v2", sizeof(nvmlProcessInfo_v2_t)},
        {"", sizeof(nvmlProcessInfo_v1_t)},
    };
    for (int i = 0; i < 3; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s%s", base, order[i].suffix);
        variant[i].get = (nvml_procs_fn)dlsym(nvml.lib, name);
        variant[i].stride = order[i].stride;
    }
}

static void nvml_bind(void)
{
    NVML_BIND(shutdown, nvml_void_fn, "nvmlShutdown");
    NVML_BIND(count, nvml_count_fn, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    NVML_BIND(handle_by_index, nvml_handle_fn, "nvmlDeviceGetHandleByIndex_v2",
              "nvmlDeviceGetHandleByIndex");
    NVML_BIND(name, nvml_string_fn, "nvmlDeviceGetName");
    NVML_BIND(uuid, nvml_string_fn, "nvmlDeviceGetUUID");
    NVML_BIND(memory, nvml_memory_fn, "nvmlDeviceGetMemoryInfo");
    NVML_BIND(util, nvml_util_fn, "nvmlDeviceGetUtilizationRates");
    NVML_BIND(temperature, nvml_temp_fn, "nvmlDeviceGetTemperature");
    NVML_BIND(power, nvml_power_fn, "nvmlDeviceGetPowerUsage");
    NVML_BIND(ecc, nvml_ecc_fn, "nvmlDeviceGetTotalEccErrors");
    NVML_BIND(topology, nvml_topo_fn, "nvmlDeviceGetTopologyCommonAncestor");
    NVML_BIND(p2p, nvml_p2p_fn, "nvmlDeviceGetP2PStatus");
    NVML_BIND(set_create, nvml_set_create_fn, "nvmlEventSetCreate");
    NVML_BIND(register_events, nvml_register_fn, "nvmlDeviceRegisterEvents");
    NVML_BIND(wait, nvml_wait_fn, "nvmlEventSetWait_v2", "nvmlEventSetWait");
    NVML_BIND(set_free, nvml_set_free_fn, "nvmlEventSetFree");
    NVML_BIND(error_string, nvml_error_fn, "nvmlErrorString");
    nvml_bind_procs(nvml.compute, "nvmlDeviceGetComputeRunningProcesses");
    nvml_bind_procs(nvml.graphics, "nvmlDeviceGetGraphicsRunningProcesses");
}

static const char *nvml_error(nvmlReturn_t rc)
{
    const char *s = nvml.error_string ? nvml.error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

/* Answers that mean "this figure is not available here", as opposed to a device in trouble. */
static bool nvml_unsupported(nvmlReturn_t rc)
{
    return rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND ||
           rc == NVML_ERROR_NO_PERMISSION;
}

/* Registers XID events for a device once per handle; a device that refuses simply has none. */
static void nvml_register(int index)
{
    nvmlDevice_t dev = nvml.handle[index];
    if (!nvml.events || !nvml.register_events || !dev || nvml.registered[index] == dev)
        return;
    if (nvml.register_events(dev, NVML_EVENT_XID_CRITICAL, nvml.events) == NVML_SUCCESS)
        nvml.registered[index] = dev;
}

/* The cached handle of device `index`, fetched when there is none. NULL: the GPU is lost. */
static nvmlDevice_t nvml_handle(int index, bool refetch)
{
    if (refetch)
        nvml.handle[index] = NULL;
    if (!nvml.handle[index] && nvml.handle_by_index) {
        nvmlDevice_t dev = NULL;
        if (nvml.handle_by_index((unsigned)index, &dev) == NVML_SUCCESS)
            nvml.handle[index] = dev;
        nvml_register(index);
    }
    return nvml.handle[index];
}

/* Refreshes the device count; handles already fetched stay (NVML's are stable). */
static void nvml_refresh_count(void)
{
    unsigned n = 0;
    if (!nvml.count || nvml.count(&n) != NVML_SUCCESS)
        n = 0;
    nvml.ndevices = n > GPU_MAX ? GPU_MAX : (int)n;
    for (int i = nvml.ndevices; i < GPU_MAX; i++)
        nvml.handle[i] = NULL;
}

int nvml_open(char **err)
{
    if (nvml.loaded)
        return 0;
    char *why = NULL;
    nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml.lib) {
        const char *dl = dlerror();
        why = xasprintf("cannot load libnvidia-ml.so.1: %s", dl ? dl : "not found");
        goto fail;
    }
    nvml_void_fn init = (nvml_void_fn)nvml_symbol((const char *const[]){"nvmlInit_v2",
                                                                        "nvmlInit", NULL});
    nvml_bind();
    if (!init) {
        why = xstrdup("libnvidia-ml.so.1 has no nvmlInit");
        goto fail;
    }
    nvmlReturn_t rc = init();
    if (rc != NVML_SUCCESS) {
        why = xasprintf("nvmlInit failed: %s (NVML error %d)", nvml_error(rc), rc);
        goto fail;
    }
    nvml.loaded = true;
    if (nvml.set_create && nvml.set_create(&nvml.events) != NVML_SUCCESS)
        nvml.events = NULL;
    nvml_refresh_count();
    for (int i = 0; i < nvml.ndevices; i++)
        nvml_handle(i, false);
    return 0;
fail:
    if (nvml.lib)
        dlclose(nvml.lib);
    memset(&nvml, 0, sizeof nvml);
    if (err)
        *err = why;
    else
        free(why);
    return -1;
}

void nvml_close(void)
{
    if (!nvml.loaded)
        return;
    if (nvml.events && nvml.set_free)
        nvml.set_free(nvml.events);
    if (nvml.shutdown)
        nvml.shutdown();
    dlclose(nvml.lib);
    /* Everything cached belongs to this load; a later nvml_open starts from nothing. */
    memset(&nvml, 0, sizeof nvml);
}

bool nvml_loaded(void)
{
    return nvml.loaded;
}

int nvml_inventory(struct gpu_inventory *inv)
{
    memset(inv, 0, sizeof *inv);
    inv->source = "nvml";
    if (!nvml.loaded)
        return -1;
    nvml_refresh_count();
    for (int i = 0; i < nvml.ndevices; i++) {
        struct gpu_info *g = &inv->gpu[i];
        g->index = i;
        /* A device that does not answer keeps its place, so indices stay NVML's. */
        nvmlDevice_t dev = nvml_handle(i, true);
        if (!dev)
            continue;
        if (!nvml.name || nvml.name(dev, g->name, sizeof g->name) != NVML_SUCCESS)
            g->name[0] = '\0';
        if (!nvml.uuid || nvml.uuid(dev, g->uuid, sizeof g->uuid) != NVML_SUCCESS)
            g->uuid[0] = '\0';
        g->name[sizeof g->name - 1] = g->uuid[sizeof g->uuid - 1] = '\0';
        nvmlMemory_t mem;
        if (nvml.memory && nvml.memory(dev, &mem) == NVML_SUCCESS)
            g->mem_total = mem.total;
    }
    inv->count = nvml.ndevices;
    return inv->count;
}

/* Drains pending events into the per-device slots: an event for another device waits there
 * for that device's sample. */
static void nvml_poll_events(void)
{
    if (!nvml.events || !nvml.wait)
        return;
    for (int n = 0; n < NVML_EVENTS_PER_POLL; n++) {
        nvmlEventData_t data;
        memset(&data, 0, sizeof data);
        if (nvml.wait(nvml.events, &data, 0) != NVML_SUCCESS)
            return;
        if (!(data.eventType & NVML_EVENT_XID_CRITICAL))
            continue;
        for (int i = 0; i < GPU_MAX; i++) {
            if (nvml.registered[i] && nvml.registered[i] == data.device) {
                nvml.xid[i] = data.eventData;
                break;
            }
        }
    }
}

static void nvml_add_proc(struct gpu_sample *out, unsigned pid, unsigned long long mem)
{
    uint64_t bytes = mem == ULLONG_MAX ? NVML_UNKNOWN_U64 : (uint64_t)mem;
    for (int i = 0; i < out->nprocs; i++) {
        if (out->procs[i].pid == pid) {
            /* The same process in both lists: keep whichever list knew its memory. */
            if (out->procs[i].mem == NVML_UNKNOWN_U64)
                out->procs[i].mem = bytes;
            return;
        }
    }
    if (out->nprocs < NVML_MAX_PROCS)
        out->procs[out->nprocs++] = (struct nvml_proc){.pid = pid, .mem = bytes};
}

/* Adds one list of processes. Returns whether NVML answered it. */
static bool nvml_list_procs(const struct nvml_proc_variant *variants, nvmlDevice_t dev,
                            struct gpu_sample *out)
{
    for (int v = 0; v < 3; v++) {
        const struct nvml_proc_variant *variant = &variants[v];
        if (!variant->get)
            continue;
        nvmlProcessInfo_v2_t stack[NVML_MAX_PROCS];
        unsigned char *buf = (unsigned char *)stack;
        unsigned n = NVML_MAX_PROCS;
        nvmlReturn_t rc = variant->get(dev, &n, buf);
        if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
            /* n now says how many there are; leave room for processes started meanwhile. */
            unsigned cap = n + 16;
            buf = xcalloc(cap, variant->stride);
            n = cap;
            rc = variant->get(dev, &n, buf);
        }
        if (rc == NVML_SUCCESS) {
            for (unsigned i = 0; i < n; i++) {
                unsigned pid;
                unsigned long long mem;
                if (variant->stride == sizeof(nvmlProcessInfo_v1_t)) {
                    const nvmlProcessInfo_v1_t *p = (const nvmlProcessInfo_v1_t *)buf + i;
                    pid = p->pid;
                    mem = p->usedGpuMemory;
                } else {
                    const nvmlProcessInfo_v2_t *p = (const nvmlProcessInfo_v2_t *)buf + i;
                    pid = p->pid;
                    mem = p->usedGpuMemory;
                }
                nvml_add_proc(out, pid, mem);
            }
        }
        if (buf != (unsigned char *)stack)
            free(buf);
        if (rc == NVML_SUCCESS)
            return true;
        if (!nvml_unsupported(rc))
            return false;
    }
    return false;
}

static void nvml_sample_figures(nvmlDevice_t dev, struct gpu_sample *out)
{
    nvmlUtilization_t util;
    if (nvml.util && nvml.util(dev, &util) == NVML_SUCCESS) {
        out->util = (int)util.gpu;
        out->mem_util = (int)util.memory;
    }
    unsigned value;
    if (nvml.temperature && nvml.temperature(dev, NVML_TEMPERATURE_GPU, &value) == NVML_SUCCESS)
        out->temp_c = (int)value;
    if (nvml.power && nvml.power(dev, &value) == NVML_SUCCESS && value <= INT_MAX)
        out->power_mw = (int)value;
    unsigned long long ecc;
    if (nvml.ecc && nvml.ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) ==
                        NVML_SUCCESS)
        out->ecc_uncorrected = ecc;
    bool compute = nvml_list_procs(nvml.compute, dev, out);
    bool graphics = nvml_list_procs(nvml.graphics, dev, out);
    if (!compute && !graphics)
        out->nprocs = -1;
}

int nvml_sample(int index, struct gpu_sample *out)
{
    memset(out, 0, sizeof *out);
    out->mem_used = out->mem_total = out->ecc_uncorrected = NVML_UNKNOWN_U64;
    out->util = out->mem_util = out->temp_c = out->power_mw = -1;
    out->nprocs = -1;
    if (!nvml.loaded || index < 0 || index >= GPU_MAX)
        return -1;
    nvml_poll_events();
    out->xid = nvml.xid[index];
    nvml.xid[index] = 0;

    /* A cached handle can go stale (GPU reset, driver reload): on any failure fetch it again
     * once before calling the GPU lost. */
    for (int attempt = 0; attempt < 2; attempt++) {
        nvmlDevice_t dev = nvml_handle(index, attempt > 0);
        if (!dev)
            break;
        nvmlMemory_t mem;
        nvmlReturn_t rc = nvml.memory ? nvml.memory(dev, &mem) : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (rc == NVML_SUCCESS || nvml_unsupported(rc)) {
            out->ok = true;
            if (rc == NVML_SUCCESS) {
                out->mem_used = mem.used;
                out->mem_total = mem.total;
            }
            out->nprocs = 0;
            nvml_sample_figures(dev, out);
            return 0;
        }
    }
    nvml.handle[index] = NULL;
    return 0;
}

static enum nvml_link nvml_topology_link(int level)
{
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
    case NVML_TOPOLOGY_MULTIPLE:
        return NVML_LINK_SWITCH;
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return NVML_LINK_HOSTBRIDGE;
    case NVML_TOPOLOGY_NODE:
        return NVML_LINK_SOCKET;
    default:
        return NVML_LINK_SYSTEM;
    }
}

enum nvml_link nvml_link(int a, int b)
{
    if (!nvml.loaded || a < 0 || b < 0 || a >= GPU_MAX || b >= GPU_MAX)
        return NVML_LINK_SYSTEM;
    nvmlDevice_t da = nvml_handle(a, false), db = nvml_handle(b, false);
    if (!da || !db)
        return NVML_LINK_SYSTEM;
    int status;
    if (nvml.p2p && nvml.p2p(da, db, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_SUCCESS &&
        status == NVML_P2P_STATUS_OK)
        return NVML_LINK_NVLINK;
    int level;
    if (nvml.topology && nvml.topology(da, db, &level) == NVML_SUCCESS)
        return nvml_topology_link(level);
    return NVML_LINK_SYSTEM;
}

const char *nvml_link_name(enum nvml_link link)
{
    switch (link) {
    case NVML_LINK_NVLINK:
        return "NVLink";
    case NVML_LINK_SWITCH:
        return "PCIe switch";
    case NVML_LINK_HOSTBRIDGE:
        return "host bridge";
    case NVML_LINK_SOCKET:
        return "CPU socket";
    case NVML_LINK_SYSTEM:
        return "system";
    }
    return "system";
}
