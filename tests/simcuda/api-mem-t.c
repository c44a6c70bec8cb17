/* api-mem-t.c - simcuda memory: device/pitch/managed/host allocations, capacity across processes, GetInfo,
 * memcpy and memset (sync and Async, pageable staging), pointer validation and error codes. */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

#include <pthread.h>
#include <stdatomic.h>

#define MIB (1024ull * 1024ull)

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    return cuMemGetInfo(&f, &t) == CUDA_SUCCESS ? f : 0;
}

/* The child of the capacity test: holds 40 MiB of the 64 MiB device until the parent closes the pipe. */
static int child_hold(int ready, int release)
{
    CUcontext c;
    CUdeviceptr d;
    char x = 1;
    if (cuInit(0) || cuCtxCreate(&c, NULL, 0, 0) || cuMemAlloc(&d, 40 * MIB))
        x = 0;
    if (write(ready, &x, 1) != 1)
        return 1;
    (void)read(release, &x, 1);
    cuMemFree(d);
    cuCtxDestroy(c);
    return 0;
}

int main(void)
{
    node_setup("mem", "64M");
    alarm(60);

    /* another process holds 40 MiB: the capacity is the node's, not this process's (forked before any
     * thread exists here) */
    int up[2], down[2];
    if (pipe(up) || pipe(down))
        bail("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        _exit(child_hold(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    char x = 0;
    ok(read(up[0], &x, 1) == 1 && x == 1, "child allocated 40 MiB");

    CUdeviceptr d, d2;
    is_int(cuMemAlloc(&d, 16), CUDA_ERROR_NOT_INITIALIZED, "cuMemAlloc before cuInit");
    need_cu(cuInit(0));
    is_int(cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT, "cuMemAlloc without a context");
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    size_t f, t;
    ok(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && t == 64 * MIB && f == 24 * MIB,
       "cuMemGetInfo sees the other process's 40 MiB (free %zu, total %zu)", f, t);
    is_int(cuMemGetInfo(NULL, &t), CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo(NULL)");
    is_int(cuMemAlloc(&d, 32 * MIB), CUDA_ERROR_OUT_OF_MEMORY, "32 MiB do not fit beside 40 MiB on 64 MiB");
    ok_cu(cuMemAlloc(&d, 24 * MIB));
    is_int(cuMemAlloc(&d2, 1), CUDA_ERROR_OUT_OF_MEMORY, "the device is exactly full");
    ok_cu(cuMemFree(d));
    close(down[1]);
    int status = -1;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited cleanly");
    ok(free_mem() == 64 * MIB, "the child's memory came back");

    /* argument checks */
    is_int(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc(NULL)");
    is_int(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
    ok_cu(cuMemFree(0));
    is_int(cuMemFree((CUdeviceptr)(uintptr_t)&x), CUDA_ERROR_INVALID_VALUE, "cuMemFree of a host address");
    need_cu(cuMemAlloc(&d, 1 * MIB));
    ok(free_mem() == 63 * MIB, "1 MiB charged");
    is_int(cuMemFree(d + 16), CUDA_ERROR_INVALID_VALUE, "cuMemFree of an interior pointer");
    CUdeviceptr base = 0;
    size_t size = 0;
    ok(cuMemGetAddressRange(&base, &size, d + 100) == CUDA_SUCCESS && base == d && size == MIB,
       "cuMemGetAddressRange of an interior pointer");
    ok(d % 256 == 0, "allocations are 256-byte aligned");

    /* round trips */
    static uint32_t in[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        in[i] = 0x9e3779b9u * (uint32_t)i;
    ok_cu(cuMemcpyHtoD(d, in, sizeof in));
    need_cu(cuMemAlloc(&d2, sizeof in));
    ok_cu(cuMemcpyDtoD(d2, d, sizeof in));
    ok_cu(cuMemcpyDtoH(out, d2, sizeof out));
    ok(memcmp(in, out, sizeof in) == 0, "HtoD, DtoD, DtoH round trip");
    ok_cu(cuMemcpyHtoD(d, in, 0));
    is_int(cuMemcpyHtoD(d, NULL, 16), CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD from NULL");
    is_int(cuMemcpyHtoD(d2, in, sizeof in + 4), CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD past the allocation");
    is_int(cuMemcpyDtoH(out, (CUdeviceptr)(uintptr_t)in, 16), CUDA_ERROR_INVALID_VALUE,
           "cuMemcpyDtoH from non-device memory");
    ok_cu(cuMemcpy((CUdeviceptr)(uintptr_t)out, d, 64));
    ok(memcmp(in, out, 64) == 0, "cuMemcpy with unified addressing");

    /* memsets */
    ok_cu(cuMemsetD8(d2, 0xab, 10));
    ok_cu(cuMemsetD32(d2 + 16, 0xdeadbeef, 4));
    ok_cu(cuMemcpyDtoH(out, d2, 32));
    const unsigned char *o8 = (const unsigned char *)out;
    ok(o8[0] == 0xab && o8[9] == 0xab && o8[10] != 0xab && out[4] == 0xdeadbeef && out[7] == 0xdeadbeef,
       "cuMemsetD8 and cuMemsetD32");
    is_int(cuMemsetD32(d2 + 2, 0, 4), CUDA_ERROR_INVALID_VALUE, "misaligned cuMemsetD32");

    /* synchronous memsets and copies run on the legacy stream, after its earlier work */
    gate_t g;
    gate_init(&g);
    ok_cu(cuLaunchHostFunc(NULL, gate_fn, &g));
    gate_open(&g);
    ok_cu(cuMemsetD32(d2, 0x11111111u, 8));
    ok_cu(cuMemcpyDtoD(d2 + 32, d2, 32));
    uint32_t *peek = (uint32_t *)(uintptr_t)d2;   /* device memory is host memory in simcuda */
    ok(peek[0] == 0x11111111u && peek[15] == 0x11111111u, "synchronous memset and DtoD copy complete on return");
    is_int(cuMemsetD8(d2, 0, sizeof in + 1), CUDA_ERROR_INVALID_VALUE, "cuMemsetD8 past the allocation");

    /* async: pageable source staged at the call, pageable destination complete on return */
    CUmodule mod;
    CUfunction spin;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    CUstream s;
    need_cu(cuStreamCreate(&s, 0));
    uint64_t ns = 50000000;
    void *args[] = { &ns };
    static uint32_t src[1024];
    for (int i = 0; i < 1024; i++)
        src[i] = 1;
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    ok_cu(cuMemcpyHtoDAsync(d, src, sizeof src, s));
    for (int i = 0; i < 1024; i++)
        src[i] = 2;
    ok_cu(cuStreamSynchronize(s));
    ok_cu(cuMemcpyDtoH(out, d, sizeof src));
    ok(out[0] == 1 && out[1023] == 1, "async copy from pageable memory copied what was there at the call");
    ok_cu(cuMemsetD32Async(d, 7, 1024, s));
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    memset(out, 0, sizeof out);
    ok_cu(cuMemcpyDtoHAsync(out, d, 4096, s));
    ok(out[0] == 7 && out[1023] == 7, "async copy into pageable memory is complete on return");

    /* pinned host memory: really asynchronous */
    uint32_t *pinned;
    size_t before = free_mem();
    ok_cu(cuMemAllocHost((void **)&pinned, 4096));
    ok(free_mem() == before, "host allocations are not charged to the device");
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    ok_cu(cuMemcpyDtoHAsync(pinned, d, 4096, s));
    is_int(cuStreamQuery(s), CUDA_ERROR_NOT_READY, "async copy into pinned memory returns before the copy");
    ok_cu(cuStreamSynchronize(s));
    ok(pinned[0] == 7 && pinned[1023] == 7, "pinned destination filled");
    CUdeviceptr hd;
    ok(cuMemHostGetDevicePointer(&hd, pinned, 0) == CUDA_SUCCESS && hd == (CUdeviceptr)(uintptr_t)pinned,
       "pinned memory maps at the same address");
    ok_cu(cuMemFreeHost(pinned));
    is_int(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost twice");
    ok_cu(cuMemFreeHost(NULL));
    void *h;
    is_int(cuMemHostAlloc(&h, 64, 0x80), CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc with unknown flags");
    ok_cu(cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    unsigned hf = 0;
    ok(cuMemHostGetFlags(&hf, h) == CUDA_SUCCESS && hf == (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
       "cuMemHostGetFlags");
    ok_cu(cuMemFreeHost(h));

    /* registered pageable memory and pointer attributes */
    static uint32_t reg[1024];
    ok_cu(cuMemHostRegister(reg, sizeof reg, 0));
    is_int(cuMemHostRegister(reg, sizeof reg, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "registering twice");
    is_int(cuMemFreeHost(reg), CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost of registered memory");
    unsigned mt = 0;
    ok(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)reg) == CUDA_SUCCESS &&
           mt == CU_MEMORYTYPE_HOST,
       "registered memory is host memory");
    ok_cu(cuMemHostUnregister(reg));
    is_int(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "unregistering twice");
    is_int(cuMemHostUnregister(NULL), CUDA_ERROR_INVALID_VALUE, "cuMemHostUnregister(NULL)");
    is_int(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)reg),
           CUDA_ERROR_INVALID_VALUE, "pointer attribute of unregistered host memory");
    CUcontext pc = NULL;
    size_t rs = 0;
    ok(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d2 + 8) == CUDA_SUCCESS &&
           mt == CU_MEMORYTYPE_DEVICE && cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, d2) == CUDA_SUCCESS &&
           pc == ctx && cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d2 + 8) == CUDA_SUCCESS &&
           rs == sizeof in,
       "device pointer attributes: type, context, range size");

    /* pitch and managed */
    size_t pitch = 0;
    is_int(cuMemAllocPitch(&d, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE, "pitch element size 3");
    ok_cu(cuMemFree(d));
    ok_cu(cuMemAllocPitch(&d, &pitch, 100, 10, 4));
    ok(pitch >= 100 && pitch % 256 == 0, "pitch %zu covers the width, aligned", pitch);
    ok(free_mem() <= 64 * MIB - pitch * 10 - sizeof in, "pitched allocation charged");
    ok_cu(cuMemFree(d));
    is_int(cuMemFree(d), CUDA_ERROR_INVALID_VALUE, "cuMemFree twice");
    uint32_t *m;
    is_int(cuMemAllocManaged(&d, 64, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged without attach flags");
    ok_cu(cuMemAllocManaged(&d, 4096, CU_MEM_ATTACH_GLOBAL));
    m = (uint32_t *)(uintptr_t)d;
    m[3] = 42;
    ok_cu(cuMemcpyDtoH(out, d, 16));
    ok(out[3] == 42, "managed memory is host-accessible");
    ok_cu(cuMemsetD32(d, 9, 4));
    ok(m[0] == 9 && m[3] == 9, "a memset of managed memory is complete on return");
    ok_cu(cuMemFree(d));

    ok_cu(cuMemFree(d2));
    ok(free_mem() == 64 * MIB, "every byte returned");
    ok_cu(cuMemHostRegister(reg, sizeof reg, 0));   /* left registered: the context's destroy must not free it */
    ok_cu(cuStreamDestroy(s));
    ok_cu(cuModuleUnload(mod));
    need_cu(cuMemAlloc(&d, 8 * MIB));
    ok_cu(cuCtxDestroy(ctx));
    CUcontext c2;
    need_cu(cuCtxCreate(&c2, NULL, 0, 0));
    ok(free_mem() == 64 * MIB, "destroying a context frees its allocations");
    ok_cu(cuCtxDestroy(c2));
    node_remove();
    return done_testing();
}
