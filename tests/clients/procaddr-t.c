/* procaddr-t.c - cuGetProcAddress(_v2): the exact variant for each version and stream flag, and calls through it. */
#include "tests/clients/client.h"

#include <dlfcn.h>

/*
 * The real driver's rules (cuda.h and the Driver Entry Point Access chapter of the programming guide):
 * - symbol is the base name; cudaVersion picks the newest variant introduced at or before that version (the
 *   versions are those of cudaTypedefs.h: PFN_cuMemAlloc_v3020 is cuMemAlloc_v2, PFN_cuMemAlloc_v2000 is
 *   cuMemAlloc). A version older than the first variant: NULL and CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.
 * - CU_GET_PROC_ADDRESS_LEGACY_STREAM never returns a per-thread (_ptsz/_ptds) variant;
 *   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM returns it where one exists, else the legacy one;
 *   CU_GET_PROC_ADDRESS_DEFAULT is legacy for a caller not built with per-thread default streams (the header's
 *   inline wrapper adds the per-thread flag otherwise), so the driver treats 0 as legacy.
 * - a name the driver does not have: CUDA_ERROR_NOT_FOUND, NULL and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND.
 * - cudaVersion above the driver's version: CUDA_ERROR_INVALID_VALUE.
 * cuGetProcAddress (the CUDA 11.3 entry point) has no symbolStatus argument; cuGetProcAddress_v2 has.
 */

typedef CUresult (*getproc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static getproc_v1_fn getproc_v1;
static getproc_v2_fn getproc_v2;
/* The version the generic lookups ask for: CUDA 13.0, or the driver's own when older (asking above the driver's
 * version is CUDA_ERROR_INVALID_VALUE). */
static int ask_version = 13000;

#define L CU_GET_PROC_ADDRESS_LEGACY_STREAM
#define P CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* One lookup: base name at a version; the variant for DEFAULT and LEGACY, and the one for PER_THREAD.
 * A NULL variant means "no function for this version": VERSION_NOT_SUFFICIENT. */
typedef struct lookup {
    const char *symbol;
    int version;
    const char *legacy;
    const char *per_thread;
} lookup_t;

static const lookup_t lookups[] = {
    /* launches */
    {"cuLaunchKernel", 13000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"cuLaunchKernel", 7000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"cuLaunchKernelEx", 13000, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"cuLaunchKernelEx", 11050, NULL, NULL},
    {"cuLaunchCooperativeKernel", 13000, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"cuLaunchCooperativeKernel", 8000, NULL, NULL},
    {"cuLaunchHostFunc", 13000, "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz"},
    {"cuGraphLaunch", 13000, "cuGraphLaunch", "cuGraphLaunch_ptsz"},
    {"cuGraphLaunch", 9020, NULL, NULL},
    {"cuGraphInstantiateWithFlags", 13000, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags"},
    {"cuStreamBeginCapture", 13000, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCapture", 10000, "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz"},
    {"cuStreamEndCapture", 13000, "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuStreamIsCapturing", 13000, "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
    /* allocation */
    {"cuMemAlloc", 13000, "cuMemAlloc_v2", "cuMemAlloc_v2"},
    {"cuMemAlloc", 3020, "cuMemAlloc_v2", "cuMemAlloc_v2"},
    {"cuMemAllocPitch", 13000, "cuMemAllocPitch_v2", "cuMemAllocPitch_v2"},
    {"cuMemAllocManaged", 13000, "cuMemAllocManaged", "cuMemAllocManaged"},
    {"cuMemAllocManaged", 5050, NULL, NULL},
    {"cuMemAllocAsync", 13000, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemAllocAsync", 11010, NULL, NULL},
    {"cuMemAllocFromPoolAsync", 13000, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemFree", 13000, "cuMemFree_v2", "cuMemFree_v2"},
    {"cuMemFreeAsync", 13000, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuMemAllocHost", 13000, "cuMemAllocHost_v2", "cuMemAllocHost_v2"},
    {"cuMemHostAlloc", 13000, "cuMemHostAlloc", "cuMemHostAlloc"},
    {"cuMemFreeHost", 13000, "cuMemFreeHost", "cuMemFreeHost"},
    {"cuMemCreate", 13000, "cuMemCreate", "cuMemCreate"},
    {"cuMemCreate", 10010, NULL, NULL},
    {"cuMemRelease", 13000, "cuMemRelease", "cuMemRelease"},
    {"cuMemAddressReserve", 13000, "cuMemAddressReserve", "cuMemAddressReserve"},
    {"cuMemAddressFree", 13000, "cuMemAddressFree", "cuMemAddressFree"},
    {"cuMemMap", 13000, "cuMemMap", "cuMemMap"},
    {"cuMemUnmap", 13000, "cuMemUnmap", "cuMemUnmap"},
    {"cuMemSetAccess", 13000, "cuMemSetAccess", "cuMemSetAccess"},
    {"cuMemGetAllocationGranularity", 13000, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity"},
    {"cuMemPoolCreate", 13000, "cuMemPoolCreate", "cuMemPoolCreate"},
    {"cuMemPoolDestroy", 13000, "cuMemPoolDestroy", "cuMemPoolDestroy"},
    {"cuMemPoolTrimTo", 13000, "cuMemPoolTrimTo", "cuMemPoolTrimTo"},
    {"cuDeviceGetDefaultMemPool", 13000, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool"},
    {"cuMemGetInfo", 13000, "cuMemGetInfo_v2", "cuMemGetInfo_v2"},
    /* copies and memsets: _v2 plus the per-thread _ptds (synchronous) and _ptsz (async) forms */
    {"cuMemcpyHtoD", 13000, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyDtoH", 13000, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
    {"cuMemcpyDtoD", 13000, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"},
    {"cuMemcpyHtoDAsync", 13000, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"},
    {"cuMemcpyDtoHAsync", 13000, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"},
    {"cuMemsetD8", 13000, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
    {"cuMemsetD32", 13000, "cuMemsetD32_v2", "cuMemsetD32_v2_ptds"},
    {"cuMemsetD8Async", 13000, "cuMemsetD8Async", "cuMemsetD8Async_ptsz"},
    {"cuMemsetD32Async", 13000, "cuMemsetD32Async", "cuMemsetD32Async_ptsz"},
    /* streams, events, contexts, the entry point itself */
    {"cuStreamSynchronize", 13000, "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
    {"cuStreamQuery", 13000, "cuStreamQuery", "cuStreamQuery_ptsz"},
    {"cuStreamWaitEvent", 13000, "cuStreamWaitEvent", "cuStreamWaitEvent_ptsz"},
    {"cuEventRecord", 13000, "cuEventRecord", "cuEventRecord_ptsz"},
    {"cuEventElapsedTime", 13000, "cuEventElapsedTime_v2", "cuEventElapsedTime_v2"},
    {"cuEventElapsedTime", 12000, "cuEventElapsedTime", "cuEventElapsedTime"},
    {"cuCtxCreate", 13000, "cuCtxCreate_v4", "cuCtxCreate_v4"},
    {"cuCtxCreate", 12050, "cuCtxCreate_v4", "cuCtxCreate_v4"},
    {"cuCtxCreate", 11040, "cuCtxCreate_v3", "cuCtxCreate_v3"},
    {"cuCtxCreate", 3020, "cuCtxCreate_v2", "cuCtxCreate_v2"},
    {"cuCtxDestroy", 13000, "cuCtxDestroy_v2", "cuCtxDestroy_v2"},
    {"cuDevicePrimaryCtxRelease", 13000, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease_v2"},
    {"cuDeviceTotalMem", 13000, "cuDeviceTotalMem_v2", "cuDeviceTotalMem_v2"},
    {"cuInit", 13000, "cuInit", "cuInit"},
    {"cuGetProcAddress", 13000, "cuGetProcAddress_v2", "cuGetProcAddress_v2"},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2", "cuGetProcAddress_v2"},
    {"cuGetProcAddress", 11030, "cuGetProcAddress", "cuGetProcAddress"},
};

/* Older first variants a driver may or may not still export (32-bit-size ABIs of CUDA 2.x/3.0): when it does
 * not, no other variant may be handed out in their place. */
static const lookup_t legacy_abi[] = {
    {"cuMemAlloc", 3000, "cuMemAlloc", "cuMemAlloc"},
    {"cuMemGetInfo", 3000, "cuMemGetInfo", "cuMemGetInfo"},
    {"cuCtxCreate", 3000, "cuCtxCreate", "cuCtxCreate"},
};

static const char *flag_name(cuuint64_t f)
{
    return f == L ? "LEGACY_STREAM" : f == P ? "PER_THREAD_DEFAULT_STREAM" : "DEFAULT";
}

static void check_lookup(const lookup_t *lk, cuuint64_t flags, bool maybe_absent)
{
    const char *want = flags == P ? lk->per_thread : lk->legacy;
    void *expect = want ? dlsym(RTLD_DEFAULT, want) : NULL;
    if (want && !expect && !maybe_absent) {
        ok(false, "%s@%d %s: the library exports %s", lk->symbol, lk->version, flag_name(flags), want);
        return;
    }
    void *pfn = (void *)&pfn;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = getproc_v2(lk->symbol, &pfn, lk->version, flags, &st);
    if (want && expect) {
        bool good = rc == CUDA_SUCCESS && pfn == expect && st == CU_GET_PROC_ADDRESS_SUCCESS;
        if (!ok(good, "cuGetProcAddress_v2(%s, %d, %s) is %s", lk->symbol, lk->version, flag_name(flags), want))
            diag("rc %d, status %d, pfn %p, dlsym %p", (int)rc, (int)st, pfn, expect);
        void *pfn1 = NULL;
        rc = getproc_v1(lk->symbol, &pfn1, lk->version, flags);
        if (!ok(rc == CUDA_SUCCESS && pfn1 == expect, "cuGetProcAddress(%s, %d, %s) agrees", lk->symbol,
                lk->version, flag_name(flags)))
            diag("rc %d, pfn %p", (int)rc, pfn1);
    } else {
        /* no variant for this version (or the old ABI is not exported): no pointer at all */
        bool good = pfn == NULL && (rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_FOUND) &&
                    st != CU_GET_PROC_ADDRESS_SUCCESS;
        if (!want) good = good && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (!ok(good, "cuGetProcAddress_v2(%s, %d, %s): NULL, %s", lk->symbol, lk->version, flag_name(flags),
                want ? "not found" : "VERSION_NOT_SUFFICIENT"))
            diag("rc %d, status %d, pfn %p", (int)rc, (int)st, pfn);
    }
}

static void test_errors(int driver_version)
{
    void *pfn = (void *)&pfn;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    is_int(getproc_v2("cuNoSuchFunction", &pfn, ask_version, 0, &st), CUDA_ERROR_NOT_FOUND,
           "unknown name: CUDA_ERROR_NOT_FOUND");
    ok(pfn == NULL, "unknown name: pfn is NULL");
    is_int(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "unknown name: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND");
    pfn = (void *)&pfn;
    is_int(getproc_v2("cuNoSuchFunction", &pfn, ask_version, 0, NULL), CUDA_ERROR_NOT_FOUND,
           "unknown name with symbolStatus NULL: CUDA_ERROR_NOT_FOUND");
    is_int(getproc_v1("cuNoSuchFunction", &pfn, ask_version, 0), CUDA_ERROR_NOT_FOUND,
           "cuGetProcAddress (v1), unknown name: CUDA_ERROR_NOT_FOUND");
    /* a variant's own name is not a base name */
    pfn = (void *)&pfn;
    getproc_v2("cuMemAlloc_v2", &pfn, ask_version, 0, &st);
    ok(pfn == NULL || pfn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"),
       "asking for the variant name cuMemAlloc_v2 never gives another function");
    pfn = NULL;
    ok_cu(getproc_v2("cuMemAlloc", &pfn, ask_version, 0, NULL));
    ok(pfn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "symbolStatus NULL is allowed on success");
    is_int(getproc_v2(NULL, &pfn, ask_version, 0, NULL), CUDA_ERROR_INVALID_VALUE, "NULL symbol: CUDA_ERROR_INVALID_VALUE");
    is_int(getproc_v2("cuMemAlloc", NULL, ask_version, 0, NULL), CUDA_ERROR_INVALID_VALUE,
           "NULL pfn: CUDA_ERROR_INVALID_VALUE");
    is_int(getproc_v2("cuMemAlloc", &pfn, driver_version + 1000, 0, &st), CUDA_ERROR_INVALID_VALUE,
           "cudaVersion above the driver's %d: CUDA_ERROR_INVALID_VALUE", driver_version);
}

/* Calls through looked-up pointers: allocate, memset, launch fill_u32 on the per-thread stream, copy back. */
static void test_call_through(void)
{
    client_t c;
    client_init(&c);
    void *p;
#define GET(var, sym, fl)                                                                             \
    do {                                                                                              \
        p = NULL;                                                                                     \
        if (getproc_v2(sym, &p, ask_version, fl, NULL) != CUDA_SUCCESS || !p) bail("cuGetProcAddress %s", sym); \
        memcpy(&var, &p, sizeof(p));                                                                  \
    } while (0)
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_info)(size_t *, size_t *);
    CUresult (*memset32)(CUdeviceptr, unsigned int, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*ssync)(CUstream);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    GET(mem_alloc, "cuMemAlloc", 0);
    GET(mem_free, "cuMemFree", 0);
    GET(mem_info, "cuMemGetInfo", 0);
    GET(memset32, "cuMemsetD32", P);
    GET(dtoh, "cuMemcpyDtoH", P);
    GET(launch, "cuLaunchKernel", P);
    GET(launch_ex, "cuLaunchKernelEx", L);
    GET(ssync, "cuStreamSynchronize", P);
    GET(alloc_async, "cuMemAllocAsync", P);
    GET(free_async, "cuMemFreeAsync", P);
#undef GET
    const size_t n = 1u << 16;
    CUdeviceptr d = 0;
    size_t free0 = 0, free1 = 0, total = 0;
    ok_cu(mem_info(&free0, &total));
    ok_cu(mem_alloc(&d, n * 4));
    ok_cu(mem_info(&free1, &total));
    ok(free1 < free0, "free memory dropped after the allocation (%zu -> %zu)", free0, free1);
    ok_cu(memset32(d, 1, n));
    uint32_t v = 9;
    uint64_t cnt = n / 2;
    void *args[] = {&d, &v, &cnt};
    /* on the per-thread entry points, stream 0 is this thread's per-thread default stream */
    ok_cu(launch(c.fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    ok_cu(ssync(NULL));
    uint32_t *h = malloc(n * 4);
    if (!h) bail("malloc");
    ok_cu(dtoh(h, d, n * 4));
    bool good = true;
    for (size_t i = 0; i < n && good; i++) good = h[i] == (i < n / 2 ? 9u : 1u);
    ok(good, "through the pointers: memset, fill_u32 on the per-thread stream, DtoH give the right data");

    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = 64;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    v = 11;
    cnt = n;
    ok_cu(launch_ex(&cfg, c.fill, args, NULL));
    CUdeviceptr da = 0;
    ok_cu(alloc_async(&da, n * 4, s));
    ok_cu(cuMemcpyDtoDAsync(da, d, n * 4, s));
    ok_cu(cuMemcpyDtoHAsync(h, da, n * 4, s));
    ok_cu(free_async(da, s));
    ok_cu(cuStreamSynchronize(s));
    good = true;
    for (size_t i = 0; i < n && good; i++) good = h[i] == 11u;
    ok(good, "through the pointers: cuLaunchKernelEx, cuMemAllocAsync and cuMemFreeAsync on a stream");
    ok_cu(mem_free(d));
    cuStreamDestroy(s);
    free(h);
    client_fini(&c);
    client_node_remove(&c);
}

int main(void)
{
    client_deadline(60);
    client_node("procaddr", NULL);
    void *p1 = dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    void *p2 = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    if (!p1 || !p2) bail("the driver lacks cuGetProcAddress or cuGetProcAddress_v2");
    memcpy(&getproc_v1, &p1, sizeof(p1));
    memcpy(&getproc_v2, &p2, sizeof(p2));

    /* before cuInit, as the CUDA runtime does it */
    void *pinit = NULL;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    ok_cu(getproc_v2("cuInit", &pinit, 12000, 0, &st));
    ok(pinit == dlsym(RTLD_DEFAULT, "cuInit") && st == CU_GET_PROC_ADDRESS_SUCCESS,
       "cuGetProcAddress_v2(cuInit) before cuInit is cuInit");
    CUresult (*init)(unsigned);
    memcpy(&init, &pinit, sizeof(pinit));
    if (!pinit || init(0) != CUDA_SUCCESS) bail("cuInit through its looked-up pointer failed");
    int driver_version = 0;
    need_cu(cuDriverGetVersion(&driver_version));
    diag("driver version %d", driver_version);
    if (driver_version < 12000)
        bail("driver version %d is older than CUDA 12.0, the oldest this test knows", driver_version);
    if (driver_version < ask_version) ask_version = driver_version;

    const cuuint64_t flags[] = {0, L, P};
    for (size_t i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++)
        for (int f = 0; f < 3; f++) {
            /* what a lookup at a version above the driver's gives is the variants of a newer CUDA: not knowable */
            if (lookups[i].version > driver_version)
                skip("cuGetProcAddress_v2(%s, %d, %s): the driver is CUDA %d", lookups[i].symbol,
                     lookups[i].version, flag_name(flags[f]), driver_version);
            else
                check_lookup(&lookups[i], flags[f], false);
        }
    for (size_t i = 0; i < sizeof(legacy_abi) / sizeof(legacy_abi[0]); i++)
        for (int f = 0; f < 3; f++) check_lookup(&legacy_abi[i], flags[f], true);
    test_errors(driver_version);
    test_call_through();
    return done_testing();
}
