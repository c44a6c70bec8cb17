/* nvml.c - simcuda's libnvidia-ml.so.1: NVML's device, memory, process and utilisation queries on a simcuda node. */
#include "shim/nvml.h"

#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/*
 * nvidia-smi, vLLM, DCGM and PyTorch read NVML rather than the driver. This library answers from the simulated
 * node the process's libcuda.so.1 uses (SIMCUDA_NODE, else simcuda-UID), read like simcuda-stat does: mapped
 * without registering a process, created (by attaching, as cuInit would) if no process made it yet.
 *   devices       every device of the node (NVML ignores CUDA_VISIBLE_DEVICES), identified as simcuda's driver
 *                 identifies them: the same name, UUID ("GPU-" + cuDeviceGetUuid's bytes) and PCI bus id;
 *   memory        total = the device's, used = what its processes hold (the node's ledger), free = the rest;
 *   processes     each live process holding memory on the device, with the bytes it holds;
 *   utilisation   gpu = the compute engine's busy fraction since the previous query of this process (since the
 *                 counters' reset at the first), memory = the copy engine's, from the node's busy counters;
 *   per process   one sample per live process whose kernels the compute engine served since this process's
 *                 previous query (since its attach at the first): smUtil = that time over the period, at least 1.
 * Everything else NVML has is absent (a client that dlsyms it gets NULL, as from an older libnvidia-ml).
 */
#define NVML_DRIVER_VERSION "580.65.06" /* a CUDA 13.0 driver's */

struct nvmlDevice_st {
    unsigned index;
};

static pthread_mutex_t nvml_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned nvml_refs;
static simnode_shm_t *nvml_shm;
static int nvml_fd = -1;
static char nvml_node[64];
static struct nvmlDevice_st nvml_devs[SIMNODE_MAX_DEVICES];
static struct {
    uint64_t at_ns, busy_ns, copy_ns;
} nvml_last[SIMNODE_MAX_DEVICES];
/* nvmlDeviceGetProcessUtilization: each process slot's served time as this process last read it */
static struct {
    uint32_t gen;
    uint64_t at_ns, busy_ns;
} nvml_plast[SIMNODE_MAX_DEVICES][SIMNODE_MAX_PROCS];

static nvmlReturn_t node_open(void)
{
    if (simnode_config_node(NULL, nvml_node) != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    int rc = simnode_open_existing(nvml_node, &nvml_shm, &nvml_fd);
    if (rc == -ENOENT) {
        if (simnode_attach() != 0) return NVML_ERROR_DRIVER_NOT_LOADED; /* creates the node, as cuInit would */
        rc = simnode_open_existing(nvml_node, &nvml_shm, &nvml_fd);
    }
    if (rc != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    for (unsigned i = 0; i < SIMNODE_MAX_DEVICES; i++) nvml_devs[i].index = i;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&nvml_lock);
    if (nvml_refs == 0) rc = node_open();
    if (rc == NVML_SUCCESS) nvml_refs++;
    pthread_mutex_unlock(&nvml_lock);
    return rc;
}

nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&nvml_lock);
    if (nvml_refs == 0) {
        rc = NVML_ERROR_UNINITIALIZED;
    } else if (--nvml_refs == 0) {
        munmap(nvml_shm, sizeof *nvml_shm);
        close(nvml_fd);
        nvml_shm = NULL;
        nvml_fd = -1;
    }
    pthread_mutex_unlock(&nvml_lock);
    return rc;
}

static const struct {
    nvmlReturn_t rc;
    const char *s;
} nvml_errors[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < sizeof nvml_errors / sizeof nvml_errors[0]; i++)
        if (nvml_errors[i].rc == result) return nvml_errors[i].s;
    return "Unknown Error";
}

static nvmlReturn_t copy_string(char *out, unsigned int length, const char *s)
{
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return nvml_refs ? copy_string(version, length, NVML_DRIVER_VERSION) : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return nvml_refs ? copy_string(version, length, "13." NVML_DRIVER_VERSION) : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    int v = 13000;
    if (simnode_config_driver(&v) != 0) v = 13000;
    *cudaDriverVersion = v;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

static unsigned dev_count(void)
{
    return nvml_shm ? nvml_shm->cfg.devices : 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (!nvml_refs) return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = dev_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!nvml_refs) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= dev_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &nvml_devs[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* The device a handle names: its index, or -1 (not one of ours, or past the node's count). */
static int dev_of(nvmlDevice_t device)
{
    if (!nvml_refs || device < &nvml_devs[0] || device >= &nvml_devs[SIMNODE_MAX_DEVICES]) return -1;
    return device->index < dev_count() ? (int)device->index : -1;
}

static void dev_info(int d, simnode_devinfo_t *i)
{
    simnode_devinfo_of(nvml_node, nvml_shm, d, i);
}

static void uuid_string(const simnode_devinfo_t *i, char out[NVML_DEVICE_UUID_V2_BUFFER_SIZE])
{
    const uint8_t *u = i->uuid;
    snprintf(out, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static void bus_id(const simnode_devinfo_t *i, char out[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE], bool legacy)
{
    snprintf(out, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, legacy ? "%04x:%02x:%02x.0" : "%08x:%02x:%02x.0",
             (unsigned)i->pci_domain, (unsigned)i->pci_bus, (unsigned)i->pci_device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!nvml_refs) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned d = 0; d < dev_count(); d++) {
        simnode_devinfo_t i;
        char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        dev_info((int)d, &i);
        uuid_string(&i, s);
        if (strcasecmp(s, uuid) == 0) {
            *device = &nvml_devs[d];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* A PCI bus id in any of the forms clients pass ("00000000:10:00.0", "0000:10:00.0", "10:00.0"). */
static bool bus_id_parse(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
    unsigned fn;
    char end;
    if (sscanf(s, "%x:%x:%x.%x%c", dom, bus, dev, &fn, &end) == 4) return true;
    *dom = 0;
    return sscanf(s, "%x:%x.%x%c", bus, dev, &fn, &end) == 3;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    if (!nvml_refs) return NVML_ERROR_UNINITIALIZED;
    unsigned dom, bus, dv;
    if (!pciBusId || !device || !bus_id_parse(pciBusId, &dom, &bus, &dv)) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned d = 0; d < dev_count(); d++) {
        simnode_devinfo_t i;
        dev_info((int)d, &i);
        if ((unsigned)i.pci_domain == dom && (unsigned)i.pci_bus == bus && (unsigned)i.pci_device == dv) {
            *device = &nvml_devs[d];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    int d = dev_of(device);
    if (d < 0 || !index) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    *index = (unsigned)d;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    return nvmlDeviceGetIndex(device, minorNumber);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int d = dev_of(device);
    if (d < 0) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    simnode_devinfo_t i;
    dev_info(d, &i);
    return copy_string(name, length, i.name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int d = dev_of(device);
    if (d < 0) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    simnode_devinfo_t i;
    char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    dev_info(d, &i);
    uuid_string(&i, s);
    return copy_string(uuid, length, s);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    int d = dev_of(device);
    if (d < 0 || !pci) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    simnode_devinfo_t i;
    char s[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    dev_info(d, &i);
    memset(pci, 0, sizeof *pci);
    pci->domain = (unsigned)i.pci_domain;
    pci->bus = (unsigned)i.pci_bus;
    pci->device = (unsigned)i.pci_device;
    pci->pciDeviceId = 0x233510de;    /* as CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID */
    pci->pciSubSystemId = 0x18bf10de;
    bus_id(&i, s, false);
    memcpy(pci->busId, s, sizeof pci->busId);
    bus_id(&i, s, true);
    memcpy(pci->busIdLegacy, s, sizeof pci->busIdLegacy);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    int d = dev_of(device);
    if (d < 0 || !major || !minor) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    simnode_devinfo_t i;
    dev_info(d, &i);
    *major = i.cc_major;
    *minor = i.cc_minor;
    return NVML_SUCCESS;
}

/* used/total of device d, with dead processes' memory reclaimed first (as simcuda-stat reads them). */
static void mem_of(int d, uint64_t *used, uint64_t *total)
{
    simnode_dev_t *dev = &nvml_shm->dev[d];
    simnode_dev_lock(nvml_shm, nvml_fd, (uint32_t)d);
    simnode_dev_sweep(nvml_shm, nvml_fd, (uint32_t)d);
    *used = dev->mem_used;
    *total = dev->mem_total;
    simnode_dev_unlock(nvml_shm, (uint32_t)d);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    int d = dev_of(device);
    if (d < 0 || !memory) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    uint64_t used, total;
    mem_of(d, &used, &total);
    memory->total = total;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    int d = dev_of(device);
    if (d < 0 || !memory) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t used, total;
    mem_of(d, &used, &total);
    memory->total = total;
    memory->reserved = 0;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
}

/* The live processes holding memory on device d: up to max of them into pid/bytes; returns how many there are. */
static unsigned procs_of(int d, unsigned max, unsigned *pid, unsigned long long *bytes)
{
    unsigned n = 0;
    simnode_dev_lock(nvml_shm, nvml_fd, (uint32_t)d);
    simnode_dev_sweep(nvml_shm, nvml_fd, (uint32_t)d);
    for (uint32_t s = 0; s < SIMNODE_MAX_PROCS; s++) {
        const simnode_proc_t *p = &nvml_shm->procs[s];
        if (atomic_load(&p->state) != SIMNODE_SLOT_USED || p->charge[d] == 0) continue;
        if (n < max) {
            pid[n] = (unsigned)p->pid;
            bytes[n] = p->charge[d];
        }
        n++;
    }
    simnode_dev_unlock(nvml_shm, (uint32_t)d);
    return n;
}

#define NVML_MAX_LIST SIMNODE_MAX_PROCS

static nvmlReturn_t procs_query(nvmlDevice_t device, unsigned int *infoCount, unsigned *pid,
                                unsigned long long *bytes, unsigned *n)
{
    int d = dev_of(device);
    if (d < 0 || !infoCount) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    *n = procs_of(d, NVML_MAX_LIST, pid, bytes);
    if (*n > *infoCount) {
        *infoCount = *n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *infoCount = *n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    unsigned pid[NVML_MAX_LIST], n = 0;
    unsigned long long bytes[NVML_MAX_LIST];
    nvmlReturn_t rc = procs_query(device, infoCount, pid, bytes, &n);
    if (rc != NVML_SUCCESS) return rc;
    if (n && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; i++)
        infos[i] = (nvmlProcessInfo_t){.pid = pid[i], .usedGpuMemory = bytes[i], .gpuInstanceId = ~0u,
                                       .computeInstanceId = ~0u};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return nvmlDeviceGetComputeRunningProcesses_v3(device, infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    unsigned pid[NVML_MAX_LIST], n = 0;
    unsigned long long bytes[NVML_MAX_LIST];
    nvmlReturn_t rc = procs_query(device, infoCount, pid, bytes, &n);
    if (rc != NVML_SUCCESS) return rc;
    if (n && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; i++) infos[i] = (nvmlProcessInfo_v1_t){.pid = pid[i], .usedGpuMemory = bytes[i]};
    return NVML_SUCCESS;
}

static unsigned percent(uint64_t part, uint64_t whole)
{
    if (!whole) return 0;
    uint64_t p = (part * 100 + whole / 2) / whole;
    return p > 100 ? 100 : (unsigned)p;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    int d = dev_of(device);
    if (d < 0 || !utilization) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    simnode_dev_t *dev = &nvml_shm->dev[d];
    simnode_dev_lock(nvml_shm, nvml_fd, (uint32_t)d);
    uint64_t now = simnode_now_ns();
    simnode_dev_sweep(nvml_shm, nvml_fd, (uint32_t)d);
    uint64_t busy = atomic_load(&dev->c.busy_ns) + simnode_engine_inflight_busy(dev, now);
    uint64_t copy = atomic_load(&dev->c.copy_busy_ns), reset = atomic_load(&dev->c.reset_ns);
    simnode_dev_unlock(nvml_shm, (uint32_t)d);
    pthread_mutex_lock(&nvml_lock);
    uint64_t t0 = nvml_last[d].at_ns, b0 = nvml_last[d].busy_ns, c0 = nvml_last[d].copy_ns;
    if (t0 < reset || b0 > busy || c0 > copy) t0 = reset, b0 = 0, c0 = 0; /* first query, or counters reset */
    nvml_last[d].at_ns = now;
    nvml_last[d].busy_ns = busy;
    nvml_last[d].copy_ns = copy;
    pthread_mutex_unlock(&nvml_lock);
    utilization->gpu = percent(busy - b0, now - t0);
    utilization->memory = percent(copy - c0, now - t0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *gpuFabricInfo)
{
    (void)gpuFabricInfo;
    return dev_of(device) < 0 ? (nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED)
                              : NVML_ERROR_NOT_SUPPORTED;
}

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* NVML: one sample per process with non-zero SM utilisation in the period; utilization NULL asks how many
 * (NVML_ERROR_INSUFFICIENT_SIZE with the count); NVML_ERROR_NOT_FOUND when there is none. Samples carry the time
 * of this query, so a caller's lastSeenTimeStamp from an earlier one never hides them. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
    int d = dev_of(device);
    if (d < 0 || !processSamplesCount) return nvml_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    static nvmlProcessUtilizationSample_t smp[SIMNODE_MAX_PROCS]; /* under nvml_lock, with: */
    static uint32_t slot[SIMNODE_MAX_PROCS];
    static uint64_t seen[SIMNODE_MAX_PROCS];
    simnode_dev_t *dev = &nvml_shm->dev[d];
    unsigned n = 0;
    uint64_t us = wall_us();
    pthread_mutex_lock(&nvml_lock);
    simnode_dev_lock(nvml_shm, nvml_fd, (uint32_t)d);
    uint64_t now = simnode_now_ns();
    simnode_dev_sweep(nvml_shm, nvml_fd, (uint32_t)d);
    /* the segments in progress (one lane without MPS, one per client process with it): served so far */
    static uint64_t running[SIMNODE_MAX_PROCS];
    memset(running, 0, sizeof running);
    for (uint32_t l = 0; l < SIMNODE_MAX_LANES; l++) {
        uint32_t h = dev->lane[l].holder;
        if (h == SIMNODE_NONE) continue;
        const simnode_waiter_t *w = &dev->w[h];
        uint64_t end = now < w->seg_end_ns ? now : w->seg_end_ns;
        if (w->proc < SIMNODE_MAX_PROCS && end > w->seg_start_ns) running[w->proc] += end - w->seg_start_ns;
    }
    for (uint32_t p = 0; p < SIMNODE_MAX_PROCS; p++) {
        const simnode_proc_t *pr = &nvml_shm->procs[p];
        if (atomic_load(&pr->state) != SIMNODE_SLOT_USED) continue;
        uint64_t busy = atomic_load(&pr->busy_ns[d]) + running[p];
        if (nvml_plast[d][p].gen != pr->gen) { /* a new process in this slot: from its attach */
            nvml_plast[d][p].gen = pr->gen;
            nvml_plast[d][p].at_ns = pr->attach_ns;
            nvml_plast[d][p].busy_ns = 0;
        }
        uint64_t b0 = nvml_plast[d][p].busy_ns, t0 = nvml_plast[d][p].at_ns;
        if (busy <= b0 || lastSeenTimeStamp >= us) continue;
        unsigned u = percent(busy - b0, now > t0 ? now - t0 : 1);
        slot[n] = p;
        seen[n] = busy;
        smp[n++] = (nvmlProcessUtilizationSample_t){.pid = (unsigned)pr->pid, .timeStamp = us, .smUtil = u ? u : 1};
    }
    simnode_dev_unlock(nvml_shm, (uint32_t)d);
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!n) {
        rc = NVML_ERROR_NOT_FOUND;
    } else if (!utilization || *processSamplesCount < n) {
        rc = NVML_ERROR_INSUFFICIENT_SIZE; /* nothing consumed: the next call with room gets these */
    } else {
        memcpy(utilization, smp, n * sizeof smp[0]);
        for (unsigned i = 0; i < n; i++) { /* consumed: the next period starts here */
            nvml_plast[d][slot[i]].at_ns = now;
            nvml_plast[d][slot[i]].busy_ns = seen[i];
        }
    }
    *processSamplesCount = n;
    pthread_mutex_unlock(&nvml_lock);
    return rc;
}
