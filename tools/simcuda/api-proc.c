/* api-proc.c - cuGetProcAddress (the driver's symbol table: one row per name and ABI version, with its
 * per-thread-default-stream variant) and the error names and strings. */
#include "tools/simcuda/api-internal.h"
#include "tools/simcuda/api-stubs.h"

#include <string.h>

/*
 * THE ENTRY-POINT TABLE. One row per (base name, ABI version): the version is the CUDA version that
 * introduced that ABI (cudaTypedefs.h names it PFN_<name>_v<version>), fn the legacy-stream function, and
 * for stream-ordered calls pt the per-thread-default-stream variant with the version it appeared in
 * (PFN_<name>_v<pt_version>_ptds/_ptsz).
 *
 * Lookup (cuGetProcAddress_v2): among the rows of the base name, the one with the highest version <=
 * cudaVersion; its pt function when the flags ask for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM and
 * cudaVersion >= pt_version, else its legacy function. CU_GET_PROC_ADDRESS_DEFAULT is the legacy stream
 * (the header's inline wrapper adds the per-thread flag when compiled with per-thread default streams).
 * Suffixed names ("cuMemAlloc_v2") are not base names and are not found, as with the real driver.
 * The addresses are simcuda's own (hidden aliases), never an interposer's of the same name.
 */
typedef struct proc_row {
    const char *name;
    int version;
    void *fn;
    void *pt;
    int pt_version;
} proc_row_t;

#define R(name, ver, fn) { #name, ver, (void *)(api_##fn), NULL, 0 }
#define P(name, ver, fn, pt, ptver) { #name, ver, (void *)(api_##fn), (void *)(api_##pt), ptver }

static const proc_row_t proc_table[] = {
    /* initialisation, version, devices */
    R(cuInit, 2000, cuInit),
    R(cuDriverGetVersion, 2020, cuDriverGetVersion),
    R(cuDeviceGet, 2000, cuDeviceGet),
    R(cuDeviceGetCount, 2000, cuDeviceGetCount),
    R(cuDeviceGetName, 2000, cuDeviceGetName),
    R(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
    R(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
    R(cuDeviceTotalMem, 2000, cuDeviceTotalMem),
    R(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    R(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    R(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId),
    R(cuDeviceGetByPCIBusId, 4010, cuDeviceGetByPCIBusId),
    R(cuDeviceComputeCapability, 2000, cuDeviceComputeCapability),
    /* contexts */
    R(cuCtxCreate, 2000, cuCtxCreate),
    R(cuCtxCreate, 3020, cuCtxCreate_v2),
    R(cuCtxCreate, 11040, cuCtxCreate_v3),
    R(cuCtxCreate, 12050, cuCtxCreate_v4),
    R(cuCtxDestroy, 2000, cuCtxDestroy),
    R(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    R(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    R(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    R(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
    R(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    R(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
    R(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    R(cuCtxGetDevice, 2000, cuCtxGetDevice),
    R(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    R(cuCtxGetFlags, 7000, cuCtxGetFlags),
    R(cuCtxGetId, 12000, cuCtxGetId),
    R(cuCtxSynchronize, 2000, cuCtxSynchronize),
    R(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    R(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
    R(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    R(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    R(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    R(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    R(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    R(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    R(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    R(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    /* memory */
    R(cuMemAlloc, 2000, cuMemAlloc),
    R(cuMemAlloc, 3020, cuMemAlloc_v2),
    R(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    R(cuMemAllocManaged, 6000, cuMemAllocManaged),
    R(cuMemFree, 2000, cuMemFree),
    R(cuMemFree, 3020, cuMemFree_v2),
    R(cuMemGetInfo, 2000, cuMemGetInfo),
    R(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    R(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    R(cuMemAllocHost, 2000, cuMemAllocHost),
    R(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    R(cuMemHostAlloc, 2020, cuMemHostAlloc),
    R(cuMemFreeHost, 2000, cuMemFreeHost),
    R(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2),
    R(cuMemHostGetFlags, 2030, cuMemHostGetFlags),
    R(cuMemHostRegister, 4000, cuMemHostRegister),
    R(cuMemHostRegister, 6050, cuMemHostRegister_v2),
    R(cuMemHostUnregister, 4000, cuMemHostUnregister),
    R(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    P(cuMemcpy, 4000, cuMemcpy, cuMemcpy_ptds, 7000),
    P(cuMemcpyAsync, 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz, 7000),
    P(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, 7000),
    P(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, 7000),
    P(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, 7000),
    P(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, 7000),
    P(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, 7000),
    P(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, 7000),
    P(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds, 7000),
    P(cuMemsetD16, 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds, 7000),
    P(cuMemsetD32, 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds, 7000),
    P(cuMemsetD8Async, 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz, 7000),
    P(cuMemsetD16Async, 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz, 7000),
    P(cuMemsetD32Async, 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz, 7000),
    /* stream-ordered allocation and pools */
    P(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
    P(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
    P(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
    R(cuMemPoolCreate, 11020, cuMemPoolCreate),
    R(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    R(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
    R(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute),
    R(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    R(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    R(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    R(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool),
    /* virtual memory management */
    R(cuMemCreate, 10020, cuMemCreate),
    R(cuMemRelease, 10020, cuMemRelease),
    R(cuMemAddressReserve, 10020, cuMemAddressReserve),
    R(cuMemAddressFree, 10020, cuMemAddressFree),
    R(cuMemMap, 10020, cuMemMap),
    R(cuMemUnmap, 10020, cuMemUnmap),
    R(cuMemSetAccess, 10020, cuMemSetAccess),
    R(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    /* streams */
    R(cuStreamCreate, 2000, cuStreamCreate),
    R(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    R(cuStreamDestroy, 2000, cuStreamDestroy),
    R(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    P(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000),
    P(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz, 7000),
    P(cuStreamWaitEvent, 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz, 7000),
    P(cuStreamGetPriority, 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz, 7000),
    P(cuStreamGetFlags, 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz, 7000),
    P(cuStreamGetCtx, 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz, 9020),
    P(cuStreamGetCtx, 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz, 12050),
    P(cuStreamGetId, 12000, cuStreamGetId, cuStreamGetId_ptsz, 12000),
    P(cuLaunchHostFunc, 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz, 10000),
    P(cuStreamAddCallback, 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz, 7000),
    /* events */
    R(cuEventCreate, 2000, cuEventCreate),
    R(cuEventDestroy, 2000, cuEventDestroy),
    R(cuEventDestroy, 4000, cuEventDestroy_v2),
    P(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz, 7000),
    P(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz, 11010),
    R(cuEventQuery, 2000, cuEventQuery),
    R(cuEventSynchronize, 2000, cuEventSynchronize),
    R(cuEventElapsedTime, 2000, cuEventElapsedTime),
    R(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
    /* modules, libraries, functions */
    R(cuModuleLoad, 2000, cuModuleLoad),
    R(cuModuleLoadData, 2000, cuModuleLoadData),
    R(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    R(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary),
    R(cuModuleUnload, 2000, cuModuleUnload),
    R(cuModuleGetFunction, 2000, cuModuleGetFunction),
    R(cuModuleGetFunctionCount, 12040, cuModuleGetFunctionCount),
    R(cuLibraryLoadData, 12000, cuLibraryLoadData),
    R(cuLibraryLoadFromFile, 12000, cuLibraryLoadFromFile),
    R(cuLibraryUnload, 12000, cuLibraryUnload),
    R(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
    R(cuLibraryGetKernelCount, 12040, cuLibraryGetKernelCount),
    R(cuKernelGetFunction, 12000, cuKernelGetFunction),
    R(cuKernelGetAttribute, 12000, cuKernelGetAttribute),
    R(cuKernelGetName, 12030, cuKernelGetName),
    R(cuFuncGetAttribute, 2020, cuFuncGetAttribute),
    R(cuFuncSetAttribute, 9000, cuFuncSetAttribute),
    R(cuFuncGetName, 12030, cuFuncGetName),
    /* launches */
    P(cuLaunchKernel, 4000, cuLaunchKernel, cuLaunchKernel_ptsz, 7000),
    P(cuLaunchKernelEx, 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
    P(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000),
    /* graphs */
    P(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz, 10000),
    P(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz, 10010),
    P(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz, 10000),
    P(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz, 10000),
    P(cuStreamGetCaptureInfo, 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz, 10010),
    P(cuStreamGetCaptureInfo, 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz, 11030),
    P(cuStreamGetCaptureInfo, 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz, 12030),
    R(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    R(cuGraphCreate, 10000, cuGraphCreate),
    R(cuGraphDestroy, 10000, cuGraphDestroy),
    R(cuGraphGetNodes, 10000, cuGraphGetNodes),
    R(cuGraphNodeGetType, 10000, cuGraphNodeGetType),
    R(cuGraphInstantiate, 10000, cuGraphInstantiate),
    R(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
    R(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags),
    R(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    P(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
    R(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    /* entry points and errors */
    R(cuGetProcAddress, 11030, cuGetProcAddress),
    R(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    R(cuGetErrorName, 6000, cuGetErrorName),
    R(cuGetErrorString, 6000, cuGetErrorString),
};

#undef R
#undef P

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    /* as the driver: a version above its own is refused (SIMCUDA_DRIVER_VERSION; a bad value, which cuInit
     * reports, leaves the entry points' own level) */
    int drv = api_driver_version();
    if (!symbol || !pfn || (flags & ~known) || cudaVersion > (drv > 0 ? drv : API_DRIVER_VERSION))
        return CUDA_ERROR_INVALID_VALUE;
    bool ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const proc_row_t *best = NULL;
    bool named = false;
    for (size_t i = 0; i < sizeof(proc_table) / sizeof(proc_table[0]); i++) {
        const proc_row_t *r = &proc_table[i];
        if (strcmp(r->name, symbol) != 0)
            continue;
        named = true;
        if (r->version <= cudaVersion && (!best || r->version > best->version))
            best = r;
    }
    /* The rest of CUDA 13's entry points (cuda-api.def): a newer variant than this table's, or a name it
     * lacks, answers with the exported function of that variant (simcuda's, or its NOT_SUPPORTED stub). */
    int gen_ver = 0;
    void *gen_fn = NULL;
    int gen = api_stubs_find(symbol, cudaVersion, ptds, &gen_ver, &gen_fn);
    named = named || gen >= 0;
    *pfn = NULL;
    if (gen == 1 && (!best || gen_ver > best->version)) {
        *pfn = gen_fn;
    } else if (best) {
        *pfn = ptds && best->pt && cudaVersion >= best->pt_version ? best->pt : best->fn;
    } else {
        if (symbolStatus)
            *symbolStatus = named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return api_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---- errors: every CUresult of cuda.h, with the strings the real driver gives for the common ones ------ */
static const struct error_row {
    CUresult code;
    const char *name;
    const char *str;
} errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS",
      "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
      "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
      "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
      "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED",
      "driver shutting down" },
    { CUDA_ERROR_PROFILER_DISABLED, "CUDA_ERROR_PROFILER_DISABLED",
      "This indicates profiler is not initialized for this run" },
    { CUDA_ERROR_PROFILER_NOT_INITIALIZED, "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
      "This error return is deprecated as of CUDA 5.0" },
    { CUDA_ERROR_PROFILER_ALREADY_STARTED, "CUDA_ERROR_PROFILER_ALREADY_STARTED",
      "This error return is deprecated as of CUDA 5.0" },
    { CUDA_ERROR_PROFILER_ALREADY_STOPPED, "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
      "This error return is deprecated as of CUDA 5.0" },
    { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
      "This indicates that the CUDA driver that the application has loaded is a stub library" },
    { CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
      "This indicates that the API call requires a newer CUDA driver than the one currently installed" },
    { CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
      "This indicates that requested CUDA device is unavailable at the current time" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
      "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
      "invalid device ordinal" },
    { CUDA_ERROR_DEVICE_NOT_LICENSED, "CUDA_ERROR_DEVICE_NOT_LICENSED",
      "This error indicates that the Grid license is not applied" },
    { CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
      "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
      "invalid device context" },
    { CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
      "This indicated that the context being supplied as a parameter to the API call was already the "
      "active context" },
    { CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED",
      "This indicates that a map or register operation has failed" },
    { CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED",
      "This indicates that an unmap or unregister operation has failed" },
    { CUDA_ERROR_ARRAY_IS_MAPPED, "CUDA_ERROR_ARRAY_IS_MAPPED",
      "This indicates that the specified array is currently mapped and thus cannot be destroyed" },
    { CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED",
      "This indicates that the resource is already mapped" },
    { CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
      "This indicates that there is no kernel image available that is suitable for the device" },
    { CUDA_ERROR_ALREADY_ACQUIRED, "CUDA_ERROR_ALREADY_ACQUIRED",
      "This indicates that a resource has already been acquired" },
    { CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED",
      "This indicates that a resource is not mapped" },
    { CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
      "This indicates that a mapped resource is not available for access as an array" },
    { CUDA_ERROR_NOT_MAPPED_AS_POINTER, "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
      "This indicates that a mapped resource is not available for access as a pointer" },
    { CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE",
      "This indicates that an uncorrectable ECC error was detected during execution" },
    { CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT",
      "This indicates that the CUlimit passed to the API call is not supported by the active device" },
    { CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
      "This indicates that the CUcontext passed to the API call can only be bound to a single CPU "
      "thread at a time but is already bound to a CPU thread" },
    { CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
      "This indicates that peer access is not supported across the given devices" },
    { CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
      "This indicates that a PTX JIT compilation failed" },
    { CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
      "This indicates an error with OpenGL or DirectX context" },
    { CUDA_ERROR_NVLINK_UNCORRECTABLE, "CUDA_ERROR_NVLINK_UNCORRECTABLE",
      "This indicates that an uncorrectable NVLink error was detected during the execution" },
    { CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
      "This indicates that the PTX JIT compiler library was not found" },
    { CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
      "This indicates that the provided PTX was compiled with an unsupported toolchain" },
    { CUDA_ERROR_JIT_COMPILATION_DISABLED, "CUDA_ERROR_JIT_COMPILATION_DISABLED",
      "This indicates that the PTX JIT compilation was disabled" },
    { CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
      "the provided execution affinity is not supported" },
    { CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
      "This indicates that the code to be compiled by the PTX JIT contains unsupported call to "
      "cudaDeviceSynchronize" },
    { CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED",
      "This indicates that an exception occurred on the device that is now contained by the GPU's "
      "error containment capability" },
    { CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE",
      "This indicates that the device kernel source is invalid" },
    { CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND",
      "file not found" },
    { CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
      "This indicates that a link to a shared object failed to resolve" },
    { CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
      "This indicates that initialization of a shared object failed" },
    { CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
      "This indicates that an OS call failed" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
      "invalid resource handle" },
    { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
      "the operation cannot be performed in the present state" },
    { CUDA_ERROR_LOSSY_QUERY, "CUDA_ERROR_LOSSY_QUERY",
      "This indicates an attempt was made to introspect an object in a way that would discard "
      "semantically important information" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
      "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY",
      "device not ready" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
      "an illegal memory access was encountered" },
    { CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
      "too many resources requested for launch" },
    { CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT",
      "This indicates that the device kernel took too long to execute" },
    { CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
      "This error indicates a kernel launch that uses an incompatible texturing mode" },
    { CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
      "This error indicates that a call to cuCtxEnablePeerAccess() is trying to re-enable peer access "
      "to a context which has already had peer access to it enabled" },
    { CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
      "This error indicates that cuCtxDisablePeerAccess() is trying to disable peer access which has "
      "not been enabled yet via cuCtxEnablePeerAccess()" },
    { CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
      "primary context active" },
    { CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
      "This error indicates that the context current to the calling thread has been destroyed using "
      "cuCtxDestroy, or is a primary context which has not yet been initialized" },
    { CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT",
      "A device-side assert triggered during kernel execution" },
    { CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS",
      "This error indicates that the hardware resources required to enable peer access have been "
      "exhausted for one or more of the devices passed to cuCtxEnablePeerAccess()" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
      "This error indicates that the memory range passed to cuMemHostRegister() has already been "
      "registered" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
      "This error indicates that the pointer passed to cuMemHostUnregister() does not correspond to "
      "any currently registered memory region" },
    { CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR",
      "While executing a kernel, the device encountered a stack error" },
    { CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
      "While executing a kernel, the device encountered an illegal instruction" },
    { CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS",
      "While executing a kernel, the device encountered a load or store instruction on a memory "
      "address which is not aligned" },
    { CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
      "While executing a kernel, the device encountered an instruction which can only operate on "
      "memory locations in certain address spaces (global, shared, or local), but was supplied a "
      "memory address not belonging to an allowed address space" },
    { CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC",
      "While executing a kernel, the device program counter wrapped its address space" },
    { CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
      "An exception occurred on the device while executing a kernel" },
    { CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
      "too many blocks in cooperative launch" },
    { CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK",
      "An exception occurred on the device while exiting a kernel using tensor memory: the tensor "
      "memory was not completely deallocated" },
    { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED",
      "This error indicates that the attempted operation is not permitted" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
      "operation not supported" },
    { CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY",
      "This error indicates that the system is not yet ready to start any CUDA work" },
    { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
      "This error indicates that there is a mismatch between the versions of the display driver and "
      "the CUDA driver" },
    { CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
      "This error indicates that the system was upgraded to run with forward compatibility but the "
      "visible hardware detected by CUDA does not support this configuration" },
    { CUDA_ERROR_MPS_CONNECTION_FAILED, "CUDA_ERROR_MPS_CONNECTION_FAILED",
      "This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS"
      " server" },
    { CUDA_ERROR_MPS_RPC_FAILURE, "CUDA_ERROR_MPS_RPC_FAILURE",
      "This error indicates that the remote procedural call between the MPS server and the MPS client "
      "failed" },
    { CUDA_ERROR_MPS_SERVER_NOT_READY, "CUDA_ERROR_MPS_SERVER_NOT_READY",
      "This error indicates that the MPS server is not ready to accept new MPS client requests" },
    { CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
      "This error indicates that the hardware resources required to create MPS client have been exhausted" },
    { CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
      "This error indicates the the hardware resources required to support device connections have "
      "been exhausted" },
    { CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
      "This error indicates that the MPS client has been terminated by the server" },
    { CUDA_ERROR_CDP_NOT_SUPPORTED, "CUDA_ERROR_CDP_NOT_SUPPORTED",
      "This error indicates that the module is using CUDA Dynamic Parallelism, but the current "
      "configuration, like MPS, does not support it" },
    { CUDA_ERROR_CDP_VERSION_MISMATCH, "CUDA_ERROR_CDP_VERSION_MISMATCH",
      "This error indicates that a module contains an unsupported interaction between different "
      "versions of CUDA Dynamic Parallelism" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
      "operation not permitted when stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
      "operation failed due to a previous error during capture" },
    { CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
      "operation would result in a merge of separate capture sequences" },
    { CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
      "capture was not ended in the same stream as it began" },
    { CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
      "capturing stream has unjoined work" },
    { CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
      "dependency created on uncaptured work in another stream" },
    { CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
      "operation would make the legacy stream depend on a capturing blocking stream" },
    { CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
      "This error indicates that the operation is not permitted on an event which was last recorded in"
      " a capturing stream" },
    { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
      "attempt to terminate a thread-local capture sequence from another thread" },
    { CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT",
      "This error indicates that the timeout specified for the wait operation has lapsed" },
    { CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
      "This error indicates that the graph update was not performed because it included changes which "
      "violated constraints specific to instantiated graph update" },
    { CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE",
      "This indicates that an async error has occurred in a device outside of CUDA. If CUDA was "
      "waiting for an external device's signal before consuming shared data, the external device "
      "signaled an error indicating that the data is not valid for consumption" },
    { CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE",
      "Indicates a kernel launch error due to cluster misconfiguration" },
    { CUDA_ERROR_FUNCTION_NOT_LOADED, "CUDA_ERROR_FUNCTION_NOT_LOADED",
      "Indiciates a function handle is not loaded when calling an API that requires a loaded function" },
    { CUDA_ERROR_INVALID_RESOURCE_TYPE, "CUDA_ERROR_INVALID_RESOURCE_TYPE",
      "This error indicates one or more resources passed in are not valid resource types for the operation" },
    { CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
      "This error indicates one or more resources are insufficient or non-applicable for the operation" },
    { CUDA_ERROR_KEY_ROTATION, "CUDA_ERROR_KEY_ROTATION",
      "This error indicates that an error happened during the key rotation sequence" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN",
      "unknown error" },

};

/* The row of error, or NULL when cuda.h has no such CUresult. */
static const struct error_row *error_find(CUresult error)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == error)
            return &errors[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct error_row *e = error_find(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct error_row *e = error_find(error);
    *pStr = e ? e->str : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuGetErrorName); API_ALIAS(cuGetErrorString); API_ALIAS(cuGetProcAddress);
API_ALIAS(cuGetProcAddress_v2);
