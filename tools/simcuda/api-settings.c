/* api-settings.c - settings clients read and make at start-up that simcuda records but does not model: context
 * limits, cache and shared-memory configurations, kernel attributes, the module loading mode, peer access. */
#include "tools/simcuda/api-internal.h"

#include <stdlib.h>
#include <string.h>

API_INTERNAL(cuFuncSetCacheConfig);

/*
 * cudart, cuBLAS and PyTorch query or set these before any work (cudaDeviceGetLimit, cudaFuncSetAttribute,
 * cudaDeviceCanAccessPeer, ...). A value set is kept and read back; none of them changes how simcuda runs a
 * kernel. Limits are per process (a real driver keeps them per context; simcuda processes rarely have more
 * than the primary one), defaults those of an sm_90 device.
 */
static _Atomic size_t limits[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
    [CU_LIMIT_SHMEM_SIZE] = 232448,
    [CU_LIMIT_CIG_ENABLED] = 0,
    [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 1,
};
static _Atomic int cache_config = CU_FUNC_CACHE_PREFER_NONE;
static _Atomic int shared_config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pvalue || (unsigned)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pvalue = limits[limit];
    return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    switch (limit) {
    case CU_LIMIT_SHMEM_SIZE:
    case CU_LIMIT_CIG_ENABLED:
        return CUDA_ERROR_INVALID_VALUE;       /* query only */
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
        if (value > 128)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    default:
        if ((unsigned)limit >= CU_LIMIT_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    }
    limits[limit] = value;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = (CUfunc_cache)cache_config;
    return CUDA_SUCCESS;
}

static bool cache_ok(CUfunc_cache config)
{
    return config == CU_FUNC_CACHE_PREFER_NONE || config == CU_FUNC_CACHE_PREFER_SHARED ||
           config == CU_FUNC_CACHE_PREFER_L1 || config == CU_FUNC_CACHE_PREFER_EQUAL;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!cache_ok(config))
        return CUDA_ERROR_INVALID_VALUE;
    cache_config = config;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pConfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pConfig = (CUsharedconfig)shared_config;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    shared_config = config;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx && (rc = api_ctx_current(&ctx)) != CUDA_SUCCESS)
        return rc;
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;                           /* what every context created through the _v2 API reports */
    return CUDA_SUCCESS;
}

/* simcuda's devices share no memory: no peer access (cudaDeviceCanAccessPeer says 0, as on PCIe without P2P). */
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult rc = api_check_device(dev);
    if (rc == CUDA_SUCCESS)
        rc = api_check_device(peerDev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice, CUdevice dstDevice)
{
    CUresult rc = api_check_device(srcDevice);
    if (rc == CUDA_SUCCESS)
        rc = api_check_device(dstDevice);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!value || srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    *value = 0;
    return CUDA_SUCCESS;
}

/* CUDA_MODULE_LOADING=EAGER as with a real driver; lazy loading (the default since CUDA 12.2) otherwise. */
CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    const char *v = getenv("CUDA_MODULE_LOADING");
    *mode = v && strcmp(v, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

static CUresult func_ok(const void *f)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    return f && api_handle_is(f, API_KIND_FUNC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    CUresult rc = func_ok(hfunc);
    if (rc != CUDA_SUCCESS)
        return rc;
    return cache_ok(config) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    CUresult rc = func_ok(hfunc);
    if (rc != CUDA_SUCCESS)
        return rc;
    return (unsigned)config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return api_cuFuncSetCacheConfig((CUfunction)(void *)kernel, config);
}

/* The attribute applies to the kernel on dev; simcuda keeps one value for every device. */
CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return api_cuFuncSetAttribute((CUfunction)(void *)kernel, attrib, val);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuCtxGetApiVersion); API_ALIAS(cuCtxGetCacheConfig); API_ALIAS(cuCtxGetLimit);
API_ALIAS(cuCtxGetSharedMemConfig); API_ALIAS(cuCtxSetCacheConfig); API_ALIAS(cuCtxSetLimit);
API_ALIAS(cuCtxSetSharedMemConfig); API_ALIAS(cuDeviceCanAccessPeer); API_ALIAS(cuDeviceGetP2PAttribute);
API_ALIAS(cuFuncSetCacheConfig); API_ALIAS(cuFuncSetSharedMemConfig); API_ALIAS(cuKernelSetAttribute);
API_ALIAS(cuKernelSetCacheConfig); API_ALIAS(cuModuleGetLoadingMode);
