/* api-proc-t.c - simcuda cuGetProcAddress(_v2): versioned variants, legacy vs per-thread variants, symbol
 * status, unknown names and too-low versions; cuGetErrorName and cuGetErrorString. */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/tap/tap.h"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM
#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define DEFAULT CU_GET_PROC_ADDRESS_DEFAULT

/* What the real driver returns: (base name, cudaVersion, flags) -> exported symbol. */
static const struct {
    const char *name;
    int version;
    cuuint64_t flags;
    const char *want;
} cases[] = {
    { "cuInit", 2000, DEFAULT, "cuInit" },
    { "cuMemAlloc", 2000, DEFAULT, "cuMemAlloc" },
    { "cuMemAlloc", 3020, DEFAULT, "cuMemAlloc_v2" },
    { "cuMemAlloc", 13000, PTDS, "cuMemAlloc_v2" },
    { "cuMemFree", 12000, DEFAULT, "cuMemFree_v2" },
    { "cuMemGetInfo", 12000, DEFAULT, "cuMemGetInfo_v2" },
    { "cuMemAllocHost", 12000, DEFAULT, "cuMemAllocHost_v2" },
    { "cuMemAllocPitch", 12000, DEFAULT, "cuMemAllocPitch_v2" },
    { "cuDeviceTotalMem", 3010, DEFAULT, "cuDeviceTotalMem" },
    { "cuDeviceTotalMem", 3020, DEFAULT, "cuDeviceTotalMem_v2" },
    { "cuDeviceGetUuid", 11000, DEFAULT, "cuDeviceGetUuid" },
    { "cuDeviceGetUuid", 11040, DEFAULT, "cuDeviceGetUuid_v2" },
    { "cuCtxCreate", 3010, DEFAULT, "cuCtxCreate" },
    { "cuCtxCreate", 3020, DEFAULT, "cuCtxCreate_v2" },
    { "cuCtxCreate", 11040, DEFAULT, "cuCtxCreate_v3" },
    { "cuCtxCreate", 12040, DEFAULT, "cuCtxCreate_v3" },
    { "cuCtxCreate", 12050, DEFAULT, "cuCtxCreate_v4" },
    { "cuCtxDestroy", 4000, DEFAULT, "cuCtxDestroy_v2" },
    { "cuCtxPopCurrent", 4000, DEFAULT, "cuCtxPopCurrent_v2" },
    { "cuCtxPushCurrent", 3020, DEFAULT, "cuCtxPushCurrent" },
    { "cuCtxSynchronize", 12000, DEFAULT, "cuCtxSynchronize" },
    { "cuCtxSynchronize", 13000, DEFAULT, "cuCtxSynchronize_v2" },
    { "cuDevicePrimaryCtxRelease", 10000, DEFAULT, "cuDevicePrimaryCtxRelease" },
    { "cuDevicePrimaryCtxRelease", 11000, DEFAULT, "cuDevicePrimaryCtxRelease_v2" },
    { "cuDevicePrimaryCtxReset", 11000, DEFAULT, "cuDevicePrimaryCtxReset_v2" },
    { "cuDevicePrimaryCtxSetFlags", 11000, DEFAULT, "cuDevicePrimaryCtxSetFlags_v2" },
    { "cuStreamDestroy", 4000, DEFAULT, "cuStreamDestroy_v2" },
    { "cuEventDestroy", 4000, DEFAULT, "cuEventDestroy_v2" },
    { "cuEventElapsedTime", 12000, DEFAULT, "cuEventElapsedTime" },
    { "cuEventElapsedTime", 12080, DEFAULT, "cuEventElapsedTime_v2" },
    { "cuMemcpyHtoD", 12000, DEFAULT, "cuMemcpyHtoD_v2" },
    { "cuMemcpyHtoD", 12000, LEGACY, "cuMemcpyHtoD_v2" },
    { "cuMemcpyHtoD", 12000, PTDS, "cuMemcpyHtoD_v2_ptds" },
    { "cuMemcpyHtoD", 6050, PTDS, "cuMemcpyHtoD_v2" },
    { "cuMemcpyDtoH", 12000, PTDS, "cuMemcpyDtoH_v2_ptds" },
    { "cuMemcpyDtoD", 12000, PTDS, "cuMemcpyDtoD_v2_ptds" },
    { "cuMemcpyHtoDAsync", 12000, PTDS, "cuMemcpyHtoDAsync_v2_ptsz" },
    { "cuMemcpyDtoHAsync", 12000, LEGACY, "cuMemcpyDtoHAsync_v2" },
    { "cuMemcpyDtoDAsync", 12000, PTDS, "cuMemcpyDtoDAsync_v2_ptsz" },
    { "cuMemcpy", 12000, PTDS, "cuMemcpy_ptds" },
    { "cuMemcpyAsync", 12000, PTDS, "cuMemcpyAsync_ptsz" },
    { "cuMemsetD8", 12000, PTDS, "cuMemsetD8_v2_ptds" },
    { "cuMemsetD32", 12000, DEFAULT, "cuMemsetD32_v2" },
    { "cuMemsetD32Async", 12000, PTDS, "cuMemsetD32Async_ptsz" },
    { "cuMemsetD8Async", 12000, LEGACY, "cuMemsetD8Async" },
    { "cuMemAllocAsync", 12000, PTDS, "cuMemAllocAsync_ptsz" },
    { "cuMemAllocAsync", 12000, DEFAULT, "cuMemAllocAsync" },
    { "cuMemFreeAsync", 12000, PTDS, "cuMemFreeAsync_ptsz" },
    { "cuMemAllocFromPoolAsync", 12000, PTDS, "cuMemAllocFromPoolAsync_ptsz" },
    { "cuLaunchKernel", 4000, PTDS, "cuLaunchKernel" },
    { "cuLaunchKernel", 12000, PTDS, "cuLaunchKernel_ptsz" },
    { "cuLaunchKernel", 12000, LEGACY, "cuLaunchKernel" },
    { "cuLaunchKernelEx", 12000, PTDS, "cuLaunchKernelEx_ptsz" },
    { "cuLaunchCooperativeKernel", 12000, PTDS, "cuLaunchCooperativeKernel_ptsz" },
    { "cuLaunchHostFunc", 12000, PTDS, "cuLaunchHostFunc_ptsz" },
    { "cuStreamSynchronize", 12000, PTDS, "cuStreamSynchronize_ptsz" },
    { "cuStreamQuery", 12000, DEFAULT, "cuStreamQuery" },
    { "cuStreamWaitEvent", 12000, PTDS, "cuStreamWaitEvent_ptsz" },
    { "cuStreamGetPriority", 12000, PTDS, "cuStreamGetPriority_ptsz" },
    { "cuEventRecord", 12000, PTDS, "cuEventRecord_ptsz" },
    { "cuStreamBeginCapture", 10000, DEFAULT, "cuStreamBeginCapture" },
    { "cuStreamBeginCapture", 10000, PTDS, "cuStreamBeginCapture_ptsz" },
    { "cuStreamBeginCapture", 10010, DEFAULT, "cuStreamBeginCapture_v2" },
    { "cuStreamBeginCapture", 12000, PTDS, "cuStreamBeginCapture_v2_ptsz" },
    { "cuStreamEndCapture", 12000, PTDS, "cuStreamEndCapture_ptsz" },
    { "cuStreamIsCapturing", 12000, PTDS, "cuStreamIsCapturing_ptsz" },
    { "cuGraphLaunch", 12000, PTDS, "cuGraphLaunch_ptsz" },
    { "cuGraphInstantiate", 10000, DEFAULT, "cuGraphInstantiate" },
    { "cuGraphInstantiate", 11000, DEFAULT, "cuGraphInstantiate_v2" },
    { "cuGraphInstantiate", 12000, DEFAULT, "cuGraphInstantiateWithFlags" },
    { "cuGraphInstantiateWithFlags", 11040, DEFAULT, "cuGraphInstantiateWithFlags" },
    { "cuGetProcAddress", 11030, DEFAULT, "cuGetProcAddress" },
    { "cuGetProcAddress", 12000, DEFAULT, "cuGetProcAddress_v2" },
    { "cuStreamGetCtx", 12040, PTDS, "cuStreamGetCtx_ptsz" },
    { "cuStreamGetCtx", 12050, DEFAULT, "cuStreamGetCtx_v2" },
    { "cuStreamGetCtx", 13000, PTDS, "cuStreamGetCtx_v2_ptsz" },
    { "cuStreamGetCaptureInfo", 11030, PTDS, "cuStreamGetCaptureInfo_v2_ptsz" },
    { "cuStreamGetCaptureInfo", 12030, DEFAULT, "cuStreamGetCaptureInfo_v3" },
    { "cuStreamAddCallback", 12000, PTDS, "cuStreamAddCallback_ptsz" },
    { "cuMemHostRegister", 6050, DEFAULT, "cuMemHostRegister_v2" },
    { "cuLibraryLoadData", 12000, DEFAULT, "cuLibraryLoadData" },
    { "cuKernelGetFunction", 12000, DEFAULT, "cuKernelGetFunction" },
    { "cuMemCreate", 10020, DEFAULT, "cuMemCreate" },
    { "cuMemPoolCreate", 11020, DEFAULT, "cuMemPoolCreate" },
    { "cuDeviceGetDefaultMemPool", 11020, DEFAULT, "cuDeviceGetDefaultMemPool" },
};

int main(void)
{
    char node[64], path[80];
    snprintf(node, sizeof node, "api-proc-%ld", (long)getpid());
    snprintf(path, sizeof path, "/%s", node);
    setenv("SIMCUDA_NODE", node, 1);
    void *pfn = NULL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    /* cuGetProcAddress works before cuInit (that is how runtimes find cuInit) */
    ok(cuGetProcAddress_v2("cuInit", &pfn, 13000, 0, &st) == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS &&
           pfn == dlsym(RTLD_DEFAULT, "cuInit"),
       "cuInit found before cuInit");
    need_cu(cuInit(0));

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *want = dlsym(RTLD_DEFAULT, cases[i].want);
        pfn = NULL;
        st = (CUdriverProcAddressQueryResult)99;
        CUresult rc = cuGetProcAddress_v2(cases[i].name, &pfn, cases[i].version, cases[i].flags, &st);
        ok(want && rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && pfn == want, "%s @%d flags %llu -> %s",
           cases[i].name, cases[i].version, (unsigned long long)cases[i].flags, cases[i].want);
    }

    pfn = &st;
    ok(cuGetProcAddress_v2("cuNoSuchThing", &pfn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND &&
           st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && pfn == NULL,
       "unknown name: CUDA_ERROR_NOT_FOUND, SYMBOL_NOT_FOUND, NULL pfn");
    pfn = &st;
    ok(cuGetProcAddress_v2("cuMemAllocAsync", &pfn, 11000, 0, &st) == CUDA_ERROR_NOT_FOUND &&
           st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && pfn == NULL,
       "cuMemAllocAsync at 11000: VERSION_NOT_SUFFICIENT");
    ok(cuGetProcAddress_v2("cuMemAlloc_v2", &pfn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND &&
           st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
       "a suffixed name is not a base name");
    ok(cuGetProcAddress_v2("cuLaunchKernel", &pfn, 13000, PTDS, NULL) == CUDA_SUCCESS &&
           pfn == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"),
       "symbolStatus may be NULL");
    is_int(cuGetProcAddress_v2(NULL, &pfn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE, "NULL symbol");
    is_int(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE, "NULL pfn");
    is_int(cuGetProcAddress_v2("cuInit", &pfn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE, "unknown flags");
    is_int(cuGetProcAddress_v2("cuInit", &pfn, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE,
           "a cudaVersion newer than the driver");
    ok(cuGetProcAddress("cuMemAlloc", &pfn, 12000, 0) == CUDA_SUCCESS && pfn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"),
       "the 4-argument cuGetProcAddress");

    /* calling through a returned pointer works */
    CUresult (*get_count)(int *) = NULL;
    int n = 0;
    ok(cuGetProcAddress_v2("cuDeviceGetCount", (void **)&get_count, 13000, 0, NULL) == CUDA_SUCCESS && get_count &&
           get_count(&n) == CUDA_SUCCESS && n >= 1,
       "cuDeviceGetCount through its pointer");

    /* simcuda's own calls and the addresses above bind inside the library: an LD_PRELOADed interposer
     * never sees them (no dynamic relocation of libcuda.so.1 refers to a cu* name) */
    Dl_info di;
    if (dladdr((void *)cuInit, &di) && di.dli_fname) {
        char cmd[4200], line[512];
        snprintf(cmd, sizeof cmd, "objdump -R '%s' 2>/dev/null", di.dli_fname);
        FILE *f = popen(cmd, "r");
        int lines = 0, cu = 0;
        while (f && fgets(line, sizeof line, f)) {
            lines++;
            cu += strstr(line, " cu") != NULL;
        }
        if (f)
            pclose(f);
        if (lines > 0)
            is_int(cu, 0, "no dynamic relocation of %s names a cu* symbol", di.dli_fname);
        else
            skip("objdump is not available to list the relocations of %s", di.dli_fname);
    } else {
        skip("dladdr cannot name the library holding cuInit");
    }

    /* errors */
    const char *s = NULL;
    ok(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s) == CUDA_SUCCESS && s && strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0,
       "cuGetErrorName");
    ok(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS && s && strcmp(s, "out of memory") == 0,
       "cuGetErrorString");
    ok(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &s) == CUDA_SUCCESS && s &&
           strcmp(s, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") == 0,
       "capture errors have names");
    ok(cuGetErrorString(CUDA_ERROR_UNKNOWN, &s) == CUDA_SUCCESS && s && *s, "CUDA_ERROR_UNKNOWN has a string");
    s = "x";
    ok(cuGetErrorName((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE && s == NULL, "unknown code: no name");
    s = "x";
    ok(cuGetErrorString((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE && s == NULL, "unknown code: no string");
    is_int(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE, "cuGetErrorName(NULL)");
    shm_unlink(path);
    return done_testing();
}
