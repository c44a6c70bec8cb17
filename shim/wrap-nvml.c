/* wrap-nvml.c - NVML's memory and process queries in a rota'd process report its limit and usage, as cuMemGetInfo. */
#include "shim/shim-internal.h"

#include "shim/client.h"
#include "shim/nvml.h"
#include "shim/options.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/*
 * vLLM sizes its KV cache from nvmlDeviceGetMemoryInfo, nvidia-smi and DCGM read NVML, PyTorch's OOM report
 * lists nvmlDeviceGetComputeRunningProcesses: none of them asks the driver, so without this a process limited
 * by rota (ROTA_MEM_LIMIT, rota run --mem, rotad's per-group limits) would be told the whole GPU is its own.
 *
 * librota exports the names of shim/nvml.def, and rota's dlsym hands out the same wrappers for them (PyTorch
 * dlopens libnvidia-ml.so.1 and dlsyms). Each wrapper calls the real NVML (the loaded libnvidia-ml.so.1,
 * through its own handle) and then, for a device this process's driver also sees (matched by UUID):
 *   memory      total and free become what client_mem_view makes of them for cuMemGetInfo (the limit, what is
 *               left of it, never more than the device has), used = total - free;
 *   processes   under a limit, the device as the process sees it: only itself, holding total - free of it;
 *               without one, NVML's list unchanged.
 * Before CUDA is initialised (NVML asked first, as vLLM and monitoring code do), the driver cannot say which
 * device is which, but the process's own limit (ROTA_MEM_LIMIT, set by rota run --mem) is known from the start:
 * every device CUDA_VISIBLE_DEVICES lets it see (all where unset; entries by NVML index or GPU-UUID prefix)
 * reports total = the limit and free no more than it. Per-group limits come from rotad, at the first CUDA call.
 * A device the driver does not show this process, a failed query and ROTA_DISABLE pass NVML's answer through.
 */
typedef nvmlReturn_t (*nvml_uuid_fn)(nvmlDevice_t, char *, unsigned int);

static void *nvml_real(const char *name)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == NULL) h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return NULL;
    void *p = rota_real_dlsym()(h, name);
    dlclose(h); /* the library stays loaded: the application's handle (or link) holds it */
    return p;
}

#define NVML_REAL(name) ((__typeof__(&name))nvml_real(#name))

/* This process's CUDA ordinal of an NVML device, or -1. */
static int nvml_cuda_device(nvmlDevice_t device)
{
    if (rota_steady_mode() != ROTA_MODE_ACTIVE) return -1;
    nvml_uuid_fn uuid_of = (nvml_uuid_fn)nvml_real("nvmlDeviceGetUUID");
    char want[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int n = 0;
    if (!uuid_of || uuid_of(device, want, sizeof want) != NVML_SUCCESS ||
        ROTA_REAL(cuDeviceGetCount)(&n) != CUDA_SUCCESS)
        return -1;
    for (int d = 0; d < n; d++) {
        CUuuid u;
        char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        if (ROTA_REAL(cuDeviceGetUuid)(&u, d) != CUDA_SUCCESS) continue;
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        if (strcasecmp(s, want) == 0) return d;
    }
    return -1;
}

/* Whether CUDA_VISIBLE_DEVICES lets this process see the NVML device (read as CUDA reads it: up to the first
 * entry that is not an index or a GPU- UUID prefix). */
static bool nvml_visible(nvmlDevice_t device)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis) return true;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    unsigned index = ~0u;
    nvml_uuid_fn uuid_of = (nvml_uuid_fn)nvml_real("nvmlDeviceGetUUID");
    __typeof__(&nvmlDeviceGetIndex) index_of = NVML_REAL(nvmlDeviceGetIndex);
    if (uuid_of && uuid_of(device, uuid, sizeof uuid) != NVML_SUCCESS) uuid[0] = '\0';
    if (index_of && index_of(device, &index) != NVML_SUCCESS) index = ~0u;
    for (const char *p = vis; *p;) {
        size_t n = strcspn(p, ",");
        char e[128];
        if (n == 0 || n >= sizeof e) return false;
        memcpy(e, p, n);
        e[n] = '\0';
        char *end;
        unsigned long i = strtoul(e, &end, 10);
        if (e[0] >= '0' && e[0] <= '9' && *end == '\0') {
            if (i == index) return true;
        } else if (strncasecmp(e, "GPU-", 4) == 0) {
            if (uuid[0] && strncasecmp(uuid, e, n) == 0) return true;
        } else {
            return false;
        }
        p += n;
        if (*p == ',') p++;
    }
    return false;
}

/* Before CUDA is initialised: the process's own limit on a device it will see; false where none applies. */
static bool nvml_view_early(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_bytes)
{
    int n;
    if (rota_steady_mode() != ROTA_MODE_ACTIVE || ROTA_REAL(cuDeviceGetCount)(&n) != CUDA_ERROR_NOT_INITIALIZED)
        return false;
    uint64_t lim = rota_options()->mem_limit;
    if (!lim || !nvml_visible(device)) return false;
    if (lim < *total) *total = lim;
    if (*free_bytes > *total) *free_bytes = *total;
    return true;
}

/* NVML's total and free as this process sees them; false if the device is not one of its CUDA devices. */
static bool nvml_view(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_bytes)
{
    rota_driver_init();
    int d = nvml_cuda_device(device);
    if (d < 0) return nvml_view_early(device, total, free_bytes);
    size_t t = (size_t)*total, f = (size_t)*free_bytes;
    client_mem_view(d, &f, &t);
    *total = t;
    *free_bytes = f;
    return true;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    __typeof__(&nvmlDeviceGetMemoryInfo) real = NVML_REAL(nvmlDeviceGetMemoryInfo);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory && nvml_view(device, &memory->total, &memory->free))
        memory->used = memory->total - memory->free;
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    __typeof__(&nvmlDeviceGetMemoryInfo_v2) real = NVML_REAL(nvmlDeviceGetMemoryInfo_v2);
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory && nvml_view(device, &memory->total, &memory->free)) {
        memory->reserved = 0;
        memory->used = memory->total - memory->free;
    }
    return rc;
}

/* Under a limit: the one entry this process sees, else false (NVML's list stands). */
static bool nvml_own_entry(nvmlDevice_t device, unsigned long long *used)
{
    nvmlMemory_t m;
    __typeof__(&nvmlDeviceGetMemoryInfo) real = NVML_REAL(nvmlDeviceGetMemoryInfo);
    if (!real || real(device, &m) != NVML_SUCCESS) return false;
    unsigned long long total = m.total, free_bytes = m.free;
    if (!nvml_view(device, &total, &free_bytes) || total >= m.total) return false;
    *used = total - free_bytes;
    return true;
}

#define NVML_PROCS(fn, info_t, fill)                                                                        \
    nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, info_t *infos)                           \
    {                                                                                                       \
        __typeof__(&fn) real = NVML_REAL(fn);                                                               \
        if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;                                                    \
        unsigned long long used;                                                                            \
        if (!infoCount || !nvml_own_entry(device, &used)) return real(device, infoCount, infos);            \
        if (*infoCount < 1) {                                                                               \
            *infoCount = 1;                                                                                 \
            return NVML_ERROR_INSUFFICIENT_SIZE;                                                            \
        }                                                                                                   \
        if (!infos) return NVML_ERROR_INVALID_ARGUMENT;                                                     \
        *infoCount = 1;                                                                                     \
        fill;                                                                                               \
        return NVML_SUCCESS;                                                                                \
    }

NVML_PROCS(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t,
           infos[0] = ((nvmlProcessInfo_v1_t){.pid = (unsigned)getpid(), .usedGpuMemory = used}))
NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t,
           infos[0] = ((nvmlProcessInfo_t){.pid = (unsigned)getpid(), .usedGpuMemory = used,
                                           .gpuInstanceId = ~0u, .computeInstanceId = ~0u}))
NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t,
           infos[0] = ((nvmlProcessInfo_t){.pid = (unsigned)getpid(), .usedGpuMemory = used,
                                           .gpuInstanceId = ~0u, .computeInstanceId = ~0u}))

static const struct {
    const char *name;
    void *fn;
} nvml_wrappers[] = {
#define ROTA_NVML(name) {#name, (void *)name},
#include "shim/nvml.def"
#undef ROTA_NVML
};

void *rota_nvml_dlsym(void *handle, const char *name, const char *version)
{
    for (size_t i = 0; i < sizeof nvml_wrappers / sizeof nvml_wrappers[0]; i++) {
        if (strcmp(nvml_wrappers[i].name, name) != 0) continue;
        void *addr = version ? rota_real_dlvsym()(handle, name, version) : rota_real_dlsym()(handle, name);
        if (addr == NULL || addr == nvml_wrappers[i].fn) return addr; /* none, or ours already (global scope) */
        return rota_steady_mode() == ROTA_MODE_DISABLED ? addr : nvml_wrappers[i].fn;
    }
    return NULL;
}
