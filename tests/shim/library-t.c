/* library-t.c - kernels as cudart launches them: an nvcc fatbin library, CUkernel handles, gated by rota. */
#include "tests/shim/shim-test.h"

/*
 * cudart 13 (see tests/facts/README.md) loads a program's kernels with cuLibraryLoadData of the fatbin
 * wrapper nvcc emits (magic 0x466243B1), looks each up with cuLibraryGetKernel by its mangled name at the
 * first launch, and passes the CUkernel, cast to CUfunction, straight to cuLaunchKernel; cuBLASLt also turns
 * CUkernels into CUfunctions with cuKernelGetFunction. Each such launch must pass rota's gate like any other.
 * On simcuda, a kernel it does not model (scale_f32 here) occupies the device SIMCUDA_LAUNCH_NS plus
 * SIMCUDA_WAVE_NS per wave of its grid (sm_count x 2048 threads); this test sets the wave to 2 ms.
 * A library's handle and its first kernel's must differ (simcuda once gave the library's own address).
 */
extern const char rota_foreign_fatbin[];
#define SCALE_F32 "_Z9scale_f32Pffy"

typedef struct fatbin_wrapper {
    int magic;
    int version;
    const void *data;
    void *filename_or_fatbins;
} fatbin_wrapper_t;

static double now_ms(void)
{
    return (double)tap_now_ns() / 1e6;
}

int main(int argc, char **argv)
{
    (void)argc;
    setenv("SIMCUDA_WAVE_NS", "2000000", 1);
    setenv("SIMCUDA_LAUNCH_NS", "3000", 1);
    shim_preload_self(argv, "library");
    atexit(shim_cleanup);
    alarm(60);
    plan(14);

    shim_dev_t d;
    shim_dev_init(&d);
    fatbin_wrapper_t w = {0x466243B1, 1, rota_foreign_fatbin, NULL};
    CUlibrary lib;
    is_int(cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS,
           "cuLibraryLoadData of nvcc's fatbin wrapper");

    CUkernel scale, again;
    is_int(cuLibraryGetKernel(&scale, lib, SCALE_F32), CUDA_SUCCESS,
           "cuLibraryGetKernel by the mangled name (the library's first kernel)");
    ok((void *)scale != (void *)lib, "its handle is not the library's");
    is_int(cuLibraryGetKernel(&again, lib, SCALE_F32), CUDA_SUCCESS, "looked up again");
    ok(again == scale, "the same handle");

    CUdeviceptr x;
    unsigned long long n = 1 << 20;
    float a = 2.0f;
    need_cu(cuMemAlloc_v2(&x, n * sizeof(float)));
    void *args[] = {&x, &a, &n};
    uint64_t gate0 = shim_hits("rota.launch_gate"), calls0 = shim_hits("cuLaunchKernel");
    is_int(cuLaunchKernel((CUfunction)(void *)scale, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL),
           CUDA_SUCCESS, "cuLaunchKernel of the CUkernel cast to CUfunction");
    CUfunction f;
    is_int(cuKernelGetFunction(&f, scale), CUDA_SUCCESS, "cuKernelGetFunction");
    is_int(cuLaunchKernel(f, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS,
           "cuLaunchKernel of that CUfunction");
    is_int(cuCtxSynchronize(), CUDA_SUCCESS, "both ran");
    is_int((long long)(shim_hits("cuLaunchKernel") - calls0), 2, "librota's cuLaunchKernel saw both launches");
    is_int((long long)(shim_hits("rota.launch_gate") - gate0), 2, "and gated each");

    if (d.simcuda) {
        int sms = 0;
        need_cu(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.dev));
        unsigned blocks = (unsigned)sms * 2048 / 256; /* one wave */
        double t0 = now_ms();
        need_cu(cuLaunchKernel((CUfunction)(void *)scale, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        need_cu(cuCtxSynchronize());
        double one = now_ms() - t0;
        t0 = now_ms();
        need_cu(cuLaunchKernel((CUfunction)(void *)scale, 5 * blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        need_cu(cuCtxSynchronize());
        double five = now_ms() - t0;
        in_range(one, 1.9, 8, "one wave of a foreign kernel takes SIMCUDA_WAVE_NS (2 ms): %.2f ms", one);
        in_range(five, 9.9, 20, "five waves take five times that: %.2f ms", five);
    } else {
        skip("the modelled duration is simcuda's");
        skip("the modelled duration is simcuda's");
    }
    is_int(cuLibraryUnload(lib), CUDA_SUCCESS, "cuLibraryUnload");
    cuMemFree_v2(x);
    shim_dev_fini(&d);
    return done_testing();
}
