/* api-launch-t.c - modules, libraries and kernel launches of simcuda: names, arguments, dims, data, errors. */
#include <cuda.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                             unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);

#define N 4096

static atomic_int order;
static void CUDA_CB mark(void *p)
{
    atomic_store((atomic_int *)p, atomic_fetch_add(&order, 1) + 1);
}

int main(void)
{
    node_setup("launch", "1G");
    CUmodule mod;
    CUfunction fill, add, spin, f;
    is_int(cuModuleLoadData(&mod, rota_kernels_ptx), CUDA_ERROR_NOT_INITIALIZED, "module load before cuInit");
    need_cu(cuInit(0));
    is_int(cuModuleLoadData(&mod, rota_kernels_ptx), CUDA_ERROR_INVALID_CONTEXT, "module load without a context");
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));

    /* modules */
    is_int(cuModuleLoadData(NULL, rota_kernels_ptx), CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData(NULL module)");
    is_int(cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData(NULL image)");
    is_int(cuModuleLoadDataEx(&mod, rota_kernels_ptx, 1, NULL, NULL), CUDA_ERROR_INVALID_VALUE,
           "cuModuleLoadDataEx: options count without arrays");
    is_int(cuModuleLoad(&mod, "/nonexistent/kernels.ptx"), CUDA_ERROR_FILE_NOT_FOUND, "cuModuleLoad of a missing file");
    ok_cu(cuModuleLoadDataEx(&mod, rota_kernels_ptx, 0, NULL, NULL));
    is_int(cuModuleGetFunction(&f, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND, "unknown kernel name");
    is_int(cuModuleGetFunction(NULL, mod, "fill_u32"), CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction(NULL)");
    is_int(cuModuleGetFunction(&f, NULL, "fill_u32"), CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction(NULL module)");
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));
    need_cu(cuModuleGetFunction(&add, mod, "add_f32"));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    const char *name = NULL;
    ok(cuFuncGetName(&name, add) == CUDA_SUCCESS && name && strcmp(name, "add_f32") == 0, "cuFuncGetName");
    int v = 0;
    ok(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill) == CUDA_SUCCESS && v == 1024,
       "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK is 1024");
    is_int(cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, fill), CUDA_ERROR_INVALID_VALUE,
           "cuFuncGetAttribute(NULL)");
    is_int(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)&v), CUDA_ERROR_INVALID_HANDLE,
           "cuFuncGetAttribute of a bogus function");

    /* data through fill_u32 and add_f32, arguments via kernelParams */
    CUdeviceptr a, b, c;
    need_cu(cuMemAlloc(&a, N * 4));
    need_cu(cuMemAlloc(&b, N * 4));
    need_cu(cuMemAlloc(&c, N * 4));
    uint64_t n = N;
    uint32_t one = 0x3f800000u, two = 0x40000000u; /* 1.0f, 2.0f */
    void *fa[] = { &a, &one, &n }, *fb[] = { &b, &two, &n }, *ad[] = { &a, &b, &c, &n };
    ok_cu(cuLaunchKernel(fill, 16, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
    ok_cu(cuLaunchKernel(fill, 16, 1, 1, 256, 1, 1, 0, NULL, fb, NULL));
    ok_cu(cuLaunchKernel(add, 16, 1, 1, 256, 1, 1, 0, NULL, ad, NULL));
    static float out[N];
    ok_cu(cuMemcpyDtoH(out, c, sizeof out));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != 3.0f;
    is_int(bad, 0, "add_f32(fill 1.0, fill 2.0) gives 3.0 everywhere");

    /* arguments via extra, natural alignment: dst at 0, v at 8, n at 16 */
    unsigned char buf[24] = { 0 };
    uint32_t seven = 7;
    uint64_t half = N / 2;
    memcpy(buf, &a, 8);
    memcpy(buf + 8, &seven, 4);
    memcpy(buf + 16, &half, 8);
    size_t size = sizeof buf;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
    ok_cu(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    static uint32_t u[N];
    ok_cu(cuMemcpyDtoH(u, a, sizeof u));
    ok(u[0] == 7 && u[N / 2 - 1] == 7 && u[N / 2] == one, "fill_u32 through CU_LAUNCH_PARAM_BUFFER_POINTER");
    size_t small = 20;
    void *extra_small[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
                            CU_LAUNCH_PARAM_END };
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra_small), CUDA_ERROR_INVALID_VALUE,
           "extra buffer smaller than the arguments");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, fa, extra), CUDA_ERROR_INVALID_VALUE,
           "both kernelParams and extra");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE,
           "no arguments for a kernel that takes some");

    /* dims and handles */
    is_int(cuLaunchKernel(fill, 0, 1, 1, 32, 1, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE, "gridDimX 0");
    is_int(cuLaunchKernel(fill, 1, 65536, 1, 32, 1, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE,
           "gridDimY 65536");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE,
           "blockDimX 1025");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 64, 32, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE,
           "2048 threads per block");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 65, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE, "blockDimZ 65");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 1 << 20, NULL, fa, NULL), CUDA_ERROR_INVALID_VALUE,
           "1 MiB of dynamic shared memory");
    is_int(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_HANDLE, "NULL function");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, (CUstream)&v, fa, NULL), CUDA_ERROR_INVALID_HANDLE,
           "bogus stream");
    is_int(cuLaunchCooperativeKernel(fill, 1u << 20, 1, 1, 1024, 1, 1, 0, NULL, fa),
           CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cooperative grid larger than the device");
    ok_cu(cuLaunchCooperativeKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, fa));

    /* cuLaunchKernelEx with a priority attribute, and the per-thread entry point */
    CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_PRIORITY };
    attr.value.priority = -1;
    CUlaunchConfig cfg = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                           .blockDimZ = 1, .attrs = &attr, .numAttrs = 1 };
    uint32_t nine = 9;
    void *f9[] = { &b, &nine, &n };
    ok_cu(cuLaunchKernelEx(&cfg, fill, f9, NULL));
    is_int(cuLaunchKernelEx(NULL, fill, f9, NULL), CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx(NULL config)");
    uint32_t ten = 10;
    void *f10[] = { &c, &ten, &n };
    ok_cu(cuLaunchKernel_ptsz(fill, 4, 1, 1, 64, 1, 1, 0, NULL, f10, NULL));
    ok_cu(cuCtxSynchronize());
    ok_cu(cuMemcpyDtoH(u, b, sizeof u));
    ok(u[0] == 9 && u[N - 1] == 9, "cuLaunchKernelEx ran");
    ok_cu(cuMemcpyDtoH(u, c, sizeof u));
    ok(u[0] == 10 && u[N - 1] == 10, "cuLaunchKernel_ptsz ran on the per-thread stream");

    /* spin_ns occupies the device for its argument: 20 ms within [20, 2000] ms on a loaded host */
    uint64_t ns = 20000000, t0 = tap_now_ns();
    void *sp[] = { &ns };
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, sp, NULL));
    ok_cu(cuCtxSynchronize());
    in_range((double)(tap_now_ns() - t0) / 1e6, 20.0, 2000.0, "spin_ns(20 ms) takes 20 ms (tolerance +1980 ms)");

    /* A stream's queue runs back to back on the engine, as on a GPU: the executor thread's wake-up after one
     * kernel (tens of microseconds on a loaded host) must not idle the engine before the next. 100 kernels of
     * 100 us, queued at once, take 10 ms of device time; 1 ms more is slack for the first launch and the
     * synchronize's wake-up (a wake-up's worth of gap per kernel, 13-35 us here, adds 1.3-3.5 ms by itself). */
    uint64_t ns100 = 100000;
    void *sp100[] = { &ns100 };
    double best = 1e9;
    CUresult lrc = CUDA_SUCCESS;
    for (int rep = 0; rep < 3; rep++) { /* the best of three: a host hiccup during the launches is not a gap */
        t0 = tap_now_ns();
        for (int i = 0; i < 100 && !lrc; i++) lrc = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, sp100, NULL);
        if (!lrc) lrc = cuCtxSynchronize();
        double ms = (double)(tap_now_ns() - t0) / 1e6;
        if (ms < best) best = ms;
    }
    is_int(lrc, CUDA_SUCCESS, "3 x 100 launches of spin_ns(100 us) and their synchronize");
    in_range(best, 10.0, 11.0, "100 queued spin_ns(100 us) run back to back: 10 ms of device time in %.2f ms", best);

    /* Kernel order across streams of one context follows launch order: a long kernel launched on idle s0,
     * then at once a short one on idle s1 (same priority), runs first, whichever executor thread wakes first.
     * The device serialises them, so each try is decided by the engine, not by timing. The host functions behind
     * them tell the order: in order, s1's runs short_ns after s0's, a margin for s0's executor waking late (a
     * 1 ms margin was once not enough under ThreadSanitizer); out of order, s0's runs long_ns after s1's. */
    CUstream s0, s1;
    need_cu(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    int tries = 20, in_order = 0;
    uint64_t long_ns = 8000000, short_ns = 4000000;
    void *lp[] = { &long_ns }, *shp[] = { &short_ns };
    for (int i = 0; i < tries; i++) {
        atomic_int ma = 0, mb = 0;
        ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s0, lp, NULL));
        ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s1, shp, NULL));
        ok_cu(cuLaunchHostFunc(s0, mark, &ma));
        ok_cu(cuLaunchHostFunc(s1, mark, &mb));
        ok_cu(cuCtxSynchronize());
        in_order += atomic_load(&ma) < atomic_load(&mb);
    }
    is_int(in_order, tries, "the kernel launched first on idle s0 ran before the one launched next on idle s1");
    ok_cu(cuStreamDestroy(s0));
    ok_cu(cuStreamDestroy(s1));

    /* libraries */
    CUlibrary lib;
    CUkernel k;
    is_int(cuLibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE,
           "cuLibraryLoadData(NULL code)");
    need_cu(cuLibraryLoadData(&lib, rota_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
    is_int(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND, "cuLibraryGetKernel of an unknown name");
    CUkernel spin_k;
    ok_cu(cuLibraryGetKernel(&spin_k, lib, "spin_ns"));
    ok((void *)spin_k != (void *)lib, "a library's first kernel is not the library's own handle");
    uint64_t spin_for = 1000;
    void *spin_a[] = { &spin_for };
    ok_cu(cuLaunchKernel((CUfunction)spin_k, 1, 1, 1, 1, 1, 1, 0, NULL, spin_a, NULL));
    ok_cu(cuLibraryGetKernel(&k, lib, "fill_u32"));
    ok_cu(cuKernelGetFunction(&f, k));
    uint32_t eleven = 11;
    void *f11[] = { &a, &eleven, &n };
    ok_cu(cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, NULL, f11, NULL));
    ok_cu(cuLaunchKernel((CUfunction)k, 2, 1, 1, 128, 1, 1, 0, NULL, f11, NULL));
    ok_cu(cuMemcpyDtoH(u, a, sizeof u));
    ok(u[0] == 11 && u[N - 1] == 11, "a library kernel fills");
    ok_cu(cuLibraryUnload(lib));
    is_int(cuLibraryGetKernel(&k, lib, "fill_u32"), CUDA_ERROR_INVALID_HANDLE, "unloaded library");

    /* an out-of-range pointer is an illegal address, sticky in the context */
    ok_cu(cuModuleUnload(mod));
    is_int(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE, "unloading twice");
    is_int(cuModuleGetFunction(&f, mod, "fill_u32"), CUDA_ERROR_INVALID_HANDLE, "unloaded module");
    is_int(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, fa, NULL), CUDA_ERROR_INVALID_HANDLE,
           "function of an unloaded module");
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));
    uint64_t huge = N * 2;
    void *oob[] = { &a, &one, &huge };
    ok_cu(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, oob, NULL));
    is_int(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS, "fill past the allocation: CUDA_ERROR_ILLEGAL_ADDRESS");
    ok_cu(cuCtxDestroy(ctx));
    node_remove();
    return done_testing();
}
