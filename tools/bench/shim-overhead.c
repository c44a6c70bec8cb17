/* shim-overhead.c - what librota adds to a pass-through cuLaunchKernel and cuMemAlloc_v2 + cuMemFree_v2. */

/*
 * A benchmark, not a test: run it with and without LD_PRELOAD=librota.so (tools/bench/shim-overhead.sh does
 * both, plus ROTA_DISABLE=1 and callgrind) and compare. It prints one line:
 *   launch_ns=<mean ns per cuLaunchKernel> alloc_free_ns=<mean ns per cuMemAlloc_v2 + cuMemFree_v2 pair of
 *   ALLOC_BYTES each (default 1 MiB)>
 *   passthrough_ns=<mean ns per cuDeviceGet, a wrapped call that costs the driver almost nothing>
 *   launch_call_ns=<median over batches of 256 launches of the calls' mean, synchronisation excluded>
 *   gate_ns=<mean ns per launch of a NULL function: librota's launch path over a driver that refuses at once>
 * The launches go to one stream and are synchronised every 256 launches, so the queue stays short; set
 * SIMCUDA_LAUNCH_NS=0 so the simulated device keeps up. bench_launches and bench_allocs are separate,
 * non-inlined functions so that callgrind can count their instructions alone (--toggle-collect).
 *
 * make builds it as build/bin/shim-overhead (every C file in tools/bench is a program linked with simcuda).
 * Usage: shim-overhead [ITERATIONS [ALLOC_BYTES [allocs]]]   (defaults 200000, 1048576)
 * With "allocs", only the alloc+free pairs run (for strace: what syscalls a pair makes).
 * Exit: 0 done, 1 a CUDA call failed, 2 bad usage.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/kernels/load.h"

#define USAGE "usage: shim-overhead [ITERATIONS [ALLOC_BYTES [allocs]]]\n"

static CUfunction fill;
static CUstream stream;
static CUdeviceptr buf;
static size_t alloc_bytes = 1u << 20;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int check(CUresult rc, const char *what)
{
    if (rc == CUDA_SUCCESS) return 0;
    fprintf(stderr, "shim-overhead: fatal: unable to %s: CUresult %d\n", what, (int)rc);
    exit(1);
}

/* Per batch of 256 launches, the mean time of the launch calls alone (the synchronisation between batches
 * excluded): their median, launch_call_ns, is steadier on a shared machine than the overall mean. */
#define BATCH 256
static double *batch_ns;
static unsigned long nbatch;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

__attribute__((noinline)) static void bench_launches(unsigned long n)
{
    uint32_t v = 1;
    uint64_t cnt = 1;
    void *args[] = {&buf, &v, &cnt};
    uint64_t t0 = now_ns();
    nbatch = 0;
    for (unsigned long i = 0; i < n; i++) {
        check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL), "launch");
        if ((i & (BATCH - 1)) == BATCH - 1) {
            if (batch_ns) batch_ns[nbatch++] = (double)(now_ns() - t0) / BATCH;
            check(cuStreamSynchronize(stream), "synchronise");
            t0 = now_ns();
        }
    }
    check(cuStreamSynchronize(stream), "synchronise");
}

/* The launch path of librota with almost no driver under it: a launch of a NULL function, which the driver
 * refuses at its first check. librota passes it through its whole gate (the gate runs before the driver sees
 * the arguments) and its after-hook, so with and without librota the difference is what librota adds to every
 * launch, free of the simulated device's queueing, which varies by more than that between runs. */
__attribute__((noinline)) static void bench_gate(unsigned long n)
{
    void *args[] = {&buf};
    for (unsigned long i = 0; i < n; i++)
        if (cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL) == CUDA_SUCCESS) {
            fputs("shim-overhead: fatal: a launch of a NULL function succeeded\n", stderr);
            exit(1);
        }
}

/* The wrapper protocol alone: cuDeviceGet is wrapped as a plain pass-through and costs the driver little. */
__attribute__((noinline)) static void bench_passthrough(unsigned long n)
{
    CUdevice d;
    for (unsigned long i = 0; i < n; i++) check(cuDeviceGet(&d, 0), "get device 0");
}

__attribute__((noinline)) static void bench_allocs(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++) {
        CUdeviceptr p;
        check(cuMemAlloc(&p, alloc_bytes), "allocate");
        check(cuMemFree(p), "free");
    }
}

int main(int argc, char **argv)
{
    unsigned long n = 200000;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    if (argc > 4 || (argc >= 2 && (n = strtoul(argv[1], NULL, 10)) == 0) ||
        (argc >= 3 && (alloc_bytes = strtoul(argv[2], NULL, 10)) == 0) || (argc == 4 && strcmp(argv[3], "allocs"))) {
        fputs(USAGE, stderr);
        return 2;
    }
    check(cuInit(0), "initialise the driver");
    check(cuDeviceGet(&dev, 0), "get device 0");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain the primary context");
    check(cuCtxSetCurrent(ctx), "set the context");
    check(kernels_load(&mod, cuModuleLoadData, cuDriverGetVersion), "load the kernels");
    check(cuModuleGetFunction(&fill, mod, "fill_u32"), "find fill_u32");
    check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "create a stream");
    check(cuMemAlloc(&buf, 4096), "allocate");

    if (argc == 4) { /* the allocations alone */
        bench_allocs(n);
        printf("alloc_bytes=%zu iterations=%lu\n", alloc_bytes, n);
        return 0;
    }
    bench_launches(n / 10); /* warm up */
    bench_allocs(n / 10);
    bench_passthrough(n / 10);
    batch_ns = calloc(n / BATCH + 1, sizeof *batch_ns);
    if (!batch_ns) {
        fputs("shim-overhead: fatal: out of memory\n", stderr);
        return 1;
    }
    uint64_t t0 = now_ns();
    bench_launches(n);
    uint64_t t1 = now_ns();
    bench_allocs(n);
    uint64_t t2 = now_ns();
    bench_passthrough(n);
    uint64_t t3 = now_ns();
    bench_gate(n);
    uint64_t t4 = now_ns();
    qsort(batch_ns, nbatch, sizeof *batch_ns, cmp_double);
    double call = nbatch ? batch_ns[nbatch / 2] : (double)(t1 - t0) / (double)n;
    printf("launch_ns=%.1f alloc_free_ns=%.1f passthrough_ns=%.1f iterations=%lu launch_call_ns=%.1f gate_ns=%.1f "
           "alloc_bytes=%zu\n",
           (double)(t1 - t0) / (double)n, (double)(t2 - t1) / (double)n, (double)(t3 - t2) / (double)n, n, call,
           (double)(t4 - t3) / (double)n, alloc_bytes);
    free(batch_ns);
    cuMemFree(buf);
    cuStreamDestroy(stream);
    cuModuleUnload(mod);
    cuDevicePrimaryCtxRelease(dev);
    return 0;
}
