/* api-alloc-t.c - simcuda under host-memory exhaustion: every host allocation an API call makes is failed in
 * turn; the call must return CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY (never abort the process), leave
 * nothing half-made, and everything must work once memory is back. */
#include <cuda.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_HOOKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_HOOKS 0
#endif
#endif
#ifndef ALLOC_HOOKS
#define ALLOC_HOOKS 1
#endif

/* ---- failure injection: the calling thread's allocation number fail_at returns NULL ---- */
static __thread long fail_at = -1;
static __thread long nallocs;

#if ALLOC_HOOKS
static bool fail_now(void)
{
    if (fail_at < 0 || nallocs++ != fail_at)
        return false;
    errno = ENOMEM;              /* as glibc's allocator does (its own callers rely on it) */
    return true;
}

/* The executable's definitions interpose glibc's for the whole process, libcuda.so.1 included. (The
 * address and thread sanitizers own malloc themselves: there the program skips.) */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t n)
{
    return fail_now() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (fail_now())
        return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
#endif

static CUcontext mc;
static CUstream sb;              /* a blocking stream */
static CUfunction fill, spin;
static CUdeviceptr buf;
#define N 1024

static void CUDA_CB host_noop(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

static void CUDA_CB cb_noop(CUstream h, CUresult st, void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

/* Each scenario makes its calls and undoes what succeeded, returning the first failure. */
#define TRY(call)                                                                                            \
    do {                                                                                                     \
        rc = (call);                                                                                         \
        if (rc != CUDA_SUCCESS)                                                                              \
            goto out;                                                                                        \
    } while (0)

static CUresult sc_ctx(void)
{
    CUcontext c;
    CUresult rc = cuCtxCreate(&c, NULL, 0, 0);
    if (rc == CUDA_SUCCESS)
        cuCtxDestroy(c);
    return rc;
}

static CUresult sc_primary(void)
{
    CUcontext c;
    CUresult rc = cuDevicePrimaryCtxRetain(&c, 0);
    if (rc == CUDA_SUCCESS)
        cuDevicePrimaryCtxRelease(0);
    return rc;
}

static CUresult sc_stream_event(void)
{
    CUstream s = NULL;
    CUevent e = NULL;
    CUresult rc;
    TRY(cuStreamCreateWithPriority(&s, 0, -1));
    TRY(cuEventCreate(&e, 0));
    TRY(cuEventRecord(e, s));
    TRY(cuStreamWaitEvent(sb, e, 0));
    TRY(cuEventSynchronize(e));
out:
    if (e)
        cuEventDestroy(e);
    if (s)
        cuStreamDestroy(s);
    cuCtxSynchronize();
    return rc;
}

static CUresult sc_mem(void)
{
    CUdeviceptr d = 0;
    void *h = NULL;
    static char page[8192];
    bool reg = false;
    CUresult rc;
    TRY(cuMemAlloc(&d, 1 << 20));
    TRY(cuMemHostAlloc(&h, 4096, 0));
    TRY(cuMemHostRegister(page, sizeof page, 0));
    reg = true;
out:
    if (reg)
        cuMemHostUnregister(page);
    if (h)
        cuMemFreeHost(h);
    if (d)
        cuMemFree(d);
    return rc;
}

static CUresult sc_module(void)
{
    CUmodule m = NULL;
    CUlibrary l = NULL;
    CUfunction f;
    CUresult rc;
    TRY(cuModuleLoadData(&m, rota_kernels_ptx));
    TRY(cuModuleGetFunction(&f, m, "fill_u32"));
    TRY(cuLibraryLoadData(&l, rota_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
out:
    if (l)
        cuLibraryUnload(l);
    if (m)
        cuModuleUnload(m);
    return rc;
}

static CUresult sc_work(void)
{
    static uint32_t host[N];
    static atomic_int ran;
    uint32_t v = 7;
    uint64_t n = N, ns = 100000;
    void *fa[] = { &buf, &v, &n }, *sa[] = { &ns };
    CUresult rc;
    TRY(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, sb, fa, NULL));
    TRY(cuMemsetD32Async(buf, 3, N, sb));
    TRY(cuMemcpyHtoDAsync(buf, host, sizeof host, sb));   /* pageable: staged */
    TRY(cuMemcpyDtoH(host, buf, sizeof host));
    TRY(cuLaunchHostFunc(sb, host_noop, &ran));
    TRY(cuStreamAddCallback(sb, cb_noop, &ran, 0));
    /* legacy-stream work behind a busy blocking stream: an implicit wait op */
    TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, sb, sa, NULL));
    TRY(cuLaunchHostFunc(NULL, host_noop, &ran));
    TRY(cuLaunchHostFunc(CU_STREAM_PER_THREAD, host_noop, &ran));
out:
    cuCtxSynchronize();
    return rc;
}

static CUresult sc_sync_many(void)
{
    CUstream s[12] = { 0 };
    static atomic_int ran;
    CUresult rc;
    for (int i = 0; i < 12; i++)
        TRY(cuStreamCreate(&s[i], 0));
    for (int i = 0; i < 12; i++)
        TRY(cuLaunchHostFunc(s[i], host_noop, &ran));
    TRY(cuStreamSynchronize(NULL));
    TRY(cuCtxSynchronize());
out:
    for (int i = 0; i < 12; i++)
        if (s[i])
            cuStreamDestroy(s[i]);
    return rc;
}

static CUresult sc_pool(void)
{
    CUmemoryPool p = NULL, dp;
    CUdeviceptr a = 0, b = 0;
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUresult rc;
    TRY(cuDeviceGetDefaultMemPool(&dp, 0));
    TRY(cuMemPoolCreate(&p, &props));
    TRY(cuMemAllocAsync(&a, 4096, sb));
    TRY(cuMemAllocFromPoolAsync(&b, 4096, p, sb));
    rc = cuMemFreeAsync(a, sb);
    if (rc == CUDA_SUCCESS)
        a = 0;
    else
        goto out;
    rc = cuMemFreeAsync(b, sb);
    if (rc == CUDA_SUCCESS)
        b = 0;
out:
    if (a)
        cuMemFree(a);
    if (b)
        cuMemFree(b);
    cuStreamSynchronize(sb);
    if (p)
        cuMemPoolDestroy(p);
    return rc;
}

static CUresult sc_vmm(void)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    size_t g = 0;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    bool mapped = false;
    CUresult rc;
    TRY(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    TRY(cuMemCreate(&h, g, &prop, 0));
    TRY(cuMemAddressReserve(&va, g, 0, 0, 0));
    TRY(cuMemMap(va, g, 0, h, 0));
    mapped = true;
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    TRY(cuMemSetAccess(va, g, &acc, 1));
    TRY(cuMemsetD8(va, 1, g));
out:
    if (mapped)
        cuMemUnmap(va, g);
    if (va)
        cuMemAddressFree(va, g);
    if (h)
        cuMemRelease(h);
    return rc;
}

/* The cleanup of the graph scenarios: what they created, the stream drained first. */
static void graph_scenario_free(CUgraphExec x, CUgraph gr, CUstream s)
{
    if (x)
        cuGraphExecDestroy(x);
    if (gr)
        cuGraphDestroy(gr);
    if (s) {
        cuStreamSynchronize(s);
        cuStreamDestroy(s);
    }
}

static CUresult sc_graph(void)
{
    CUstream s = NULL;
    CUgraph gr = NULL;
    CUgraphExec x = NULL;
    uint32_t v = 5;
    uint64_t n = N;
    void *fa[] = { &buf, &v, &n };
    CUresult rc;
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult lrc = cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, fa, NULL);
    CUresult mrc = cuMemsetD32Async(buf, 1, N, s);
    rc = cuStreamEndCapture(s, &gr);
    /* A capture call short of memory invalidates the capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED from
     * cuStreamEndCapture is then the documented consequence of that CUDA_ERROR_OUT_OF_MEMORY. */
    if (lrc == CUDA_ERROR_OUT_OF_MEMORY || mrc == CUDA_ERROR_OUT_OF_MEMORY) {
        ok(rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || rc == CUDA_SUCCESS,
           "a capture short of memory ends invalidated (%d)", (int)rc);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (rc == CUDA_SUCCESS) {
        rc = lrc ? lrc : mrc;
    }
    if (rc != CUDA_SUCCESS)
        goto out;
    TRY(cuGraphInstantiate(&x, gr, 0));
    TRY(cuGraphLaunch(x, s));
    TRY(cuStreamSynchronize(s));
out:
    graph_scenario_free(x, gr, s);
    return rc;
}

static CUresult sc_graphmem(void)
{
    CUstream s = NULL;
    CUgraph gr = NULL;
    CUgraphExec x = NULL;
    CUdeviceptr p = 0;
    uint32_t v = 3;
    uint64_t n = N;
    CUresult rc, arc = CUDA_SUCCESS, frc = CUDA_SUCCESS;
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    arc = cuMemAllocAsync(&p, 4096, s);
    void *fa[] = { &p, &v, &n };
    if (arc == CUDA_SUCCESS) {
        cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, fa, NULL);
        frc = cuMemFreeAsync(p, s);
    }
    rc = cuStreamEndCapture(s, &gr);
    if (arc == CUDA_ERROR_OUT_OF_MEMORY || frc == CUDA_ERROR_OUT_OF_MEMORY)
        rc = CUDA_ERROR_OUT_OF_MEMORY;    /* the capture ended invalidated because of it */
    else if (rc == CUDA_SUCCESS)
        rc = arc ? arc : frc;
    if (rc != CUDA_SUCCESS)
        goto out;
    TRY(cuGraphInstantiate(&x, gr, 0));
    TRY(cuGraphLaunch(x, s));
    TRY(cuStreamSynchronize(s));
    TRY(cuGraphLaunch(x, s));
    TRY(cuStreamSynchronize(s));
out:
    graph_scenario_free(x, gr, s);
    return rc;
}

/* Fails the scenario's allocations one at a time, then runs it with none failing. */
static void sweep(const char *name, CUresult (*fn)(void))
{
    long n;
    bool all_ok = true;
    for (n = 0; n < 400; n++) {
        fail_at = n;
        nallocs = 0;
        CUresult rc = fn();
        bool hit = nallocs > n;
        fail_at = -1;
        cuCtxSetCurrent(mc);
        if (!hit) {
            is_int(rc, CUDA_SUCCESS, "%s: succeeds with no allocation failing (%ld allocations)", name, n);
            break;
        }
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY) {
            diag("%s: allocation %ld failing gave %d", name, n, (int)rc);
            all_ok = false;
        }
    }
    ok(all_ok && n > 0, "%s: each of its %ld allocations failing gives CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY",
       name, n);
    is_int(fn(), CUDA_SUCCESS, "%s: works again once memory is back", name);
}

int main(void)
{
    if (!ALLOC_HOOKS)
        skip_all("the address and thread sanitizers own malloc: no failure injection under them");
    node_setup("alloc", "1G");
    alarm(120);

    fail_at = 0;
    nallocs = 0;
    CUresult rc = cuInit(0);
    fail_at = -1;
    ok(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY, "cuInit with its first allocation failing: %d",
       (int)rc);
    need_cu(cuInit(0));
    need_cu(cuCtxCreate(&mc, NULL, 0, 0));
    need_cu(cuStreamCreate(&sb, 0));
    CUmodule mod;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    need_cu(cuMemAlloc(&buf, N * sizeof(uint32_t)));

    sweep("cuCtxCreate/cuCtxDestroy", sc_ctx);
    sweep("primary context retain/release", sc_primary);
    sweep("streams and events", sc_stream_event);
    sweep("device, host and registered memory", sc_mem);
    sweep("modules and libraries", sc_module);
    sweep("kernels, memsets, copies, host functions, implicit waits", sc_work);
    sweep("synchronising 12 streams", sc_sync_many);
    sweep("stream-ordered allocation and pools", sc_pool);
    sweep("virtual memory management", sc_vmm);
    sweep("graph capture, instantiate, launch", sc_graph);
    sweep("graph memory nodes", sc_graphmem);

    /* the device is intact: data round trip */
    uint32_t v = 42, host[N];
    uint64_t n = N;
    void *fa[] = { &buf, &v, &n };
    ok_cu(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, fa, NULL));
    ok_cu(cuMemcpyDtoH(host, buf, sizeof host));
    ok(host[0] == 42 && host[N - 1] == 42, "a kernel still fills device memory");
    size_t fr = 0, tot = 0;
    ok_cu(cuMemFree(buf));
    ok_cu(cuMemGetInfo(&fr, &tot));
    is_uint(fr, tot, "no device memory left charged after the sweeps");
    ok_cu(cuStreamDestroy(sb));
    ok_cu(cuModuleUnload(mod));
    ok_cu(cuCtxDestroy(mc));
    node_remove();
    return done_testing();
}
