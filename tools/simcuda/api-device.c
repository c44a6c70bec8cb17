/* api-device.c - devices: CUDA_VISIBLE_DEVICES, cuDeviceGet*, their attributes, PCI bus ids and UUIDs. */
#include "tools/simcuda/api-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA_VISIBLE_DEVICES ------------------------------------------------------------------------------ */
/*
 * CUDA_VISIBLE_DEVICES, read once by cuInit, as the real driver implements it:
 *  - unset: every device of the node is visible, in node order;
 *  - a comma-separated list of entries, each either a device ordinal of the node or a device UUID written
 *    as nvidia-smi prints it, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex, either case), of which any
 *    prefix that names exactly one device will do ("GPU-8932f937");
 *  - ordinals are read like strtoul: leading blanks are skipped and anything after the digits is ignored
 *    ("1gpu2" is 1); the kind of the first entry decides the list: a UUID in an ordinal list, or an ordinal
 *    in a UUID list, is invalid;
 *  - the visible devices are renumbered 0, 1, ... in list order;
 *  - parsing stops at the first invalid entry (not a number, negative, out of range, an unknown or
 *    ambiguous UUID, an empty entry): only the devices before it are visible ("0,2,-1,1" shows 0 and 2);
 *  - a device named twice hides every device (the real driver enumerates none);
 *  - an empty value hides every device: cuInit returns CUDA_ERROR_NO_DEVICE and cuDeviceGetCount gives 0.
 * cuDeviceGetUuid and cuDeviceGetPCIBusId report the physical device behind a visible ordinal; memory
 * accounting, the engines and simcuda-stat always use physical devices; every CUdevice and device ordinal
 * the application sees or passes (cuDeviceGet, cuCtxGetDevice, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, memory
 * locations of pools and VMM allocations) is a visible ordinal.
 */
static int vis_count;                        /* visible devices (set by cuInit) */
static int vis_phys[SIMNODE_MAX_DEVICES];    /* visible ordinal -> physical device */

static void uuid_format(const uint8_t *u, char *out, size_t size)
{
    snprintf(out, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* The physical device an entry names, or -1. len: the entry's length (up to the comma or the end). */
static int visible_entry(const char *e, size_t len, bool uuid, int ndev)
{
    if (uuid) {
        if (len < 4 || strncmp(e, "GPU-", 4) != 0)
            return -1;
        int found = -1;
        for (int d = 0; d < ndev; d++) {
            char id[48];
            uuid_format(simnode_device(d)->uuid, id, sizeof id);
            if (len <= strlen(id) && strncasecmp(e, id, len) == 0) {
                if (found >= 0)
                    return -1;       /* ambiguous prefix */
                found = d;
            }
        }
        return found;
    }
    size_t i = 0;
    while (i < len && (e[i] == ' ' || e[i] == '\t'))
        i++;
    if (i < len && e[i] == '+')
        i++;
    if (i == len || e[i] < '0' || e[i] > '9')
        return -1;
    long v = 0;
    for (; i < len && e[i] >= '0' && e[i] <= '9'; i++) {
        v = v * 10 + (e[i] - '0');
        if (v >= ndev)
            return -1;
    }
    return (int)v;
}

/* Fills vis_phys/vis_count from the environment (cuInit, under the core's init lock, after simnode_attach). */
void api_dev_parse_visible(void)
{
    int ndev = simnode_device_count();
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    vis_count = 0;
    if (!v) {
        for (int d = 0; d < ndev; d++)
            vis_phys[vis_count++] = d;
        return;
    }
    const char *p = v;
    while (*p == ' ' || *p == '\t')
        p++;
    bool uuid = strncmp(p, "GPU-", 4) == 0;
    while (*p && vis_count < SIMNODE_MAX_DEVICES) {
        size_t len = strcspn(p, ",");
        int d = visible_entry(p, len, uuid, ndev);
        if (d < 0)
            break;
        for (int i = 0; i < vis_count; i++) {
            if (vis_phys[i] == d) {
                vis_count = 0;       /* named twice: no device at all */
                return;
            }
        }
        vis_phys[vis_count++] = d;
        if (!p[len])
            break;
        p += len + 1;
    }
}

int api_dev_phys(CUdevice dev)
{
    return dev >= 0 && dev < vis_count ? vis_phys[dev] : -1;
}

CUdevice api_dev_visible(int phys)
{
    for (int i = 0; i < vis_count; i++)
        if (vis_phys[i] == phys)
            return i;
    return -1;
}

int api_dev_count(void)
{
    return vis_count;
}

/* ---- devices ------------------------------------------------------------------------------------------ */
CUresult api_check_device(CUdevice dev)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (api_dev_phys(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

/* The physical device's description of a visible ordinal already checked by api_check_device. */
static const simnode_devinfo_t *devinfo(CUdevice dev)
{
    return simnode_device(api_dev_phys(dev));
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (api_dev_phys(ordinal) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = vis_count;
    return CUDA_SUCCESS;
}

/* The string queries' checks: a visible device, then a caller's buffer of at least one byte. */
static CUresult device_string_check(CUdevice dev, const char *buf, int len)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return buf && len > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = device_string_check(dev, name, len);
    if (rc != CUDA_SUCCESS)
        return rc;
    snprintf(name, (size_t)len, "%s", devinfo(dev)->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    _Static_assert(sizeof(uuid->bytes) == sizeof(((simnode_devinfo_t *)0)->uuid), "uuid size");
    memcpy(uuid->bytes, devinfo(dev)->uuid, sizeof(uuid->bytes));
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return api_cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)devinfo(dev)->total_mem;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b = 0;
    CUresult rc = api_cuDeviceTotalMem_v2(bytes ? &b : NULL, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
    return rc;
}

/* The attributes of an H100/H200-class device (compute capability 9.0): one row each, the same on every device;
 * device_attribute adds the node's own (SM count, PCI location, compute capability). */
typedef struct attr_row {
    bool known;
    int value;
} attr_row_t;
#define A(name, v) [CU_DEVICE_ATTRIBUTE_##name] = {true, (v)}
static const attr_row_t attr_table[CU_DEVICE_ATTRIBUTE_MAX] = {
    A(MAX_THREADS_PER_BLOCK, 1024),
    A(MAX_BLOCK_DIM_X, 1024),
    A(MAX_BLOCK_DIM_Y, 1024),
    A(MAX_BLOCK_DIM_Z, 64),
    A(MAX_GRID_DIM_X, 2147483647),
    A(MAX_GRID_DIM_Y, 65535),
    A(MAX_GRID_DIM_Z, 65535),
    A(MAX_SHARED_MEMORY_PER_BLOCK, 49152),
    A(TOTAL_CONSTANT_MEMORY, 65536),
    A(WARP_SIZE, 32),
    A(MAX_PITCH, 2147483647),
    A(MAX_REGISTERS_PER_BLOCK, 65536),
    A(CLOCK_RATE, 1980000),
    A(TEXTURE_ALIGNMENT, 512),
    A(GPU_OVERLAP, 1),
    A(KERNEL_EXEC_TIMEOUT, 0),
    A(INTEGRATED, 0),
    A(CAN_MAP_HOST_MEMORY, 1),
    A(COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT),
    A(SURFACE_ALIGNMENT, 512),
    A(CONCURRENT_KERNELS, 1),
    A(ECC_ENABLED, 1),
    A(TCC_DRIVER, 0),
    A(MEMORY_CLOCK_RATE, 2619000),
    A(GLOBAL_MEMORY_BUS_WIDTH, 5120),
    A(L2_CACHE_SIZE, 52428800),
    A(MAX_THREADS_PER_MULTIPROCESSOR, 2048),
    A(ASYNC_ENGINE_COUNT, 1),
    A(UNIFIED_ADDRESSING, 1),
    A(TEXTURE_PITCH_ALIGNMENT, 32),
    A(STREAM_PRIORITIES_SUPPORTED, 1),
    A(GLOBAL_L1_CACHE_SUPPORTED, 1),
    A(LOCAL_L1_CACHE_SUPPORTED, 1),
    A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472),
    A(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
    A(MANAGED_MEMORY, 1),
    A(MULTI_GPU_BOARD, 0),
    A(MULTI_GPU_BOARD_GROUP_ID, 0),
    A(HOST_NATIVE_ATOMIC_SUPPORTED, 0),
    A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2),
    A(PAGEABLE_MEMORY_ACCESS, 0),
    A(CONCURRENT_MANAGED_ACCESS, 1),
    A(COMPUTE_PREEMPTION_SUPPORTED, 1),
    A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1),
    A(COOPERATIVE_LAUNCH, 1),
    A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448),
    A(CAN_FLUSH_REMOTE_WRITES, 0),
    A(HOST_REGISTER_SUPPORTED, 1),
    A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0),
    A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0),
    A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
    A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
    A(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0),
    A(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0),
    A(MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
    A(GENERIC_COMPRESSION_SUPPORTED, 0),
    A(MAX_PERSISTING_L2_CACHE_SIZE, 0),
    A(MAX_ACCESS_POLICY_WINDOW_SIZE, 0),
    A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0),
    A(RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
    A(SPARSE_CUDA_ARRAY_SUPPORTED, 0),
    A(READ_ONLY_HOST_REGISTER_SUPPORTED, 0),
    A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 0),
    A(MEMORY_POOLS_SUPPORTED, 1),
    A(GPU_DIRECT_RDMA_SUPPORTED, 0),
    A(MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_NONE),
    A(CLUSTER_LAUNCH, 0),
    A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 0),
    A(DMA_BUF_SUPPORTED, 0),
    A(IPC_EVENT_SUPPORTED, 0),
    A(MEM_SYNC_DOMAIN_COUNT, 1),
    A(NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE),
    A(NUMA_ID, -1),
    A(HOST_NUMA_ID, -1),
    /* texture and surface limits (sm_90's), stream memory operations, and what simcuda has none of */
    A(MAXIMUM_TEXTURE1D_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_HEIGHT, 65536),
    A(MAXIMUM_TEXTURE3D_WIDTH, 16384),
    A(MAXIMUM_TEXTURE3D_HEIGHT, 16384),
    A(MAXIMUM_TEXTURE3D_DEPTH, 16384),
    A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048),
    A(CAN_TEX2D_GATHER, 1),
    A(MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192),
    A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192),
    A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_SURFACE1D_WIDTH, 32768),
    A(MAXIMUM_SURFACE2D_WIDTH, 131072),
    A(MAXIMUM_SURFACE2D_HEIGHT, 65536),
    A(MAXIMUM_SURFACE3D_WIDTH, 16384),
    A(MAXIMUM_SURFACE3D_HEIGHT, 16384),
    A(MAXIMUM_SURFACE3D_DEPTH, 16384),
    A(MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_SURFACECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH, 268435456),
    A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000),
    A(MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120),
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768),
    A(CAN_USE_STREAM_MEM_OPS_V1, 1),
    A(CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 1),
    A(CAN_USE_64_BIT_STREAM_MEM_OPS, 1),
    A(CAN_USE_STREAM_WAIT_VALUE_NOR_V1, 0),
    A(CAN_USE_STREAM_WAIT_VALUE_NOR, 0),
    A(COOPERATIVE_MULTI_DEVICE_LAUNCH, 0),
    A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, 0),
    A(GPU_DIRECT_RDMA_WRITES_ORDERING, 0),
    A(TENSOR_MAP_ACCESS_SUPPORTED, 1),
    A(UNIFIED_FUNCTION_POINTERS, 1),
    A(GPU_PCI_DEVICE_ID, 0x233510de), /* H200's device and vendor ids */
    A(GPU_PCI_SUBSYSTEM_ID, 0x18bf10de),
    A(HANDLE_TYPE_FABRIC_SUPPORTED, 0),
    A(MULTICAST_SUPPORTED, 0),
    A(D3D12_CIG_SUPPORTED, 0),
    A(MEM_DECOMPRESS_ALGORITHM_MASK, 0),
    A(MEM_DECOMPRESS_MAXIMUM_LENGTH, 0),
    A(VULKAN_CIG_SUPPORTED, 0),
    A(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
    A(HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0),
    A(HOST_NUMA_MULTINODE_IPC_SUPPORTED, 0),
    A(HOST_MEMORY_POOLS_SUPPORTED, 0),
    A(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
    A(HOST_ALLOC_DMA_BUF_SUPPORTED, 0),
    A(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0),
};
#undef A

static int device_attribute(CUdevice_attribute a, const simnode_devinfo_t *d, bool *known)
{
    *known = true;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return d->sm_count;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: return simnode_mps();
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return d->pci_bus;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return d->pci_device;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return d->pci_domain;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return d->cc_major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return d->cc_minor;
    default:
        break;
    }
    *known = (int)a >= 0 && a < CU_DEVICE_ATTRIBUTE_MAX && attr_table[a].known;
    return *known ? attr_table[a].value : 0;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    bool known;
    int v = device_attribute(attrib, devinfo(dev), &known);
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = v;
    return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = devinfo(dev)->cc_major;
    *minor = devinfo(dev)->cc_minor;
    return CUDA_SUCCESS;
}

/* PCI bus ids are "dddd:bb:dd.f" (13 characters with the terminator). */
CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult rc = device_string_check(dev, pciBusId, len);
    if (rc != CUDA_SUCCESS)
        return rc;
    const simnode_devinfo_t *d = devinfo(dev);
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", (unsigned)d->pci_domain, (unsigned)d->pci_bus,
             (unsigned)d->pci_device);
    return CUDA_SUCCESS;
}

/* Accepts "domain:bus:device.function", "domain:bus:device" and "bus:device.function" (hex). */
CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned dom = 0, bus, devn, fn = 0;
    char tail;
    if (sscanf(pciBusId, "%x:%x:%x.%x%c", &dom, &bus, &devn, &fn, &tail) == 4 ||
        sscanf(pciBusId, "%x:%x:%x%c", &dom, &bus, &devn, &tail) == 3) {
        /* domain:bus:device[.function] */
    } else if (dom = 0, sscanf(pciBusId, "%x:%x.%x%c", &bus, &devn, &fn, &tail) == 3) {
        /* bus:device.function */
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (int i = 0; i < vis_count; i++) {
        const simnode_devinfo_t *d = devinfo(i);
        if (d && (unsigned)d->pci_domain == dom && (unsigned)d->pci_bus == bus &&
            (unsigned)d->pci_device == devn && fn == 0) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuDeviceComputeCapability); API_ALIAS(cuDeviceGet); API_ALIAS(cuDeviceGetAttribute);
API_ALIAS(cuDeviceGetByPCIBusId); API_ALIAS(cuDeviceGetCount); API_ALIAS(cuDeviceGetName);
API_ALIAS(cuDeviceGetPCIBusId); API_ALIAS(cuDeviceGetUuid); API_ALIAS(cuDeviceGetUuid_v2);
API_ALIAS(cuDeviceTotalMem); API_ALIAS(cuDeviceTotalMem_v2);
