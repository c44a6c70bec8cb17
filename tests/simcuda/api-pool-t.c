/* api-pool-t.c - simcuda stream-ordered allocation and memory pools: reuse, release threshold, trimming,
 * reserved/used attributes, explicit pools, device charge, error codes. */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

#define MIB (1024ull * 1024ull)

static cuuint64_t attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = ~0ull;
    return cuMemPoolGetAttribute(p, a, &v) == CUDA_SUCCESS ? v : ~0ull;
}

static size_t used_mem(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return t - f;
}

int main(void)
{
    node_setup("pool", "64M");
    alarm(60);
    need_cu(cuInit(0));
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    CUstream s;
    need_cu(cuStreamCreate(&s, 0));
    CUmodule mod;
    CUfunction fill;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));

    CUmemoryPool def, cur;
    is_int(cuDeviceGetDefaultMemPool(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetDefaultMemPool(NULL)");
    is_int(cuDeviceGetDefaultMemPool(&def, 4), CUDA_ERROR_INVALID_DEVICE, "default pool of device 4");
    ok_cu(cuDeviceGetDefaultMemPool(&def, 0));
    ok(cuDeviceGetMemPool(&cur, 0) == CUDA_SUCCESS && cur == def, "the current pool is the default pool");
    is_uint(attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0, "default release threshold 0");

    /* stream-ordered allocation, use and free */
    CUdeviceptr d, d2;
    is_int(cuMemAllocAsync(NULL, 16, s), CUDA_ERROR_INVALID_VALUE, "cuMemAllocAsync(NULL)");
    is_int(cuMemAllocAsync(&d, 0, s), CUDA_ERROR_INVALID_VALUE, "cuMemAllocAsync of 0 bytes");
    is_int(cuMemAllocAsync(&d, 16, (CUstream)&d), CUDA_ERROR_INVALID_HANDLE, "cuMemAllocAsync on a bogus stream");
    ok_cu(cuMemAllocAsync(&d, 4 * MIB, s));
    ok(attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 4 * MIB, "used >= 4 MiB");
    ok(attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
       "reserved >= used");
    ok(used_mem() >= 4 * MIB, "the pool's memory is charged to the device");
    uint32_t v = 77;
    uint64_t n = MIB;
    void *args[] = { &d, &v, &n };
    ok_cu(cuLaunchKernel(fill, 64, 1, 1, 256, 1, 1, 0, s, args, NULL));
    uint32_t out[4];
    ok_cu(cuMemcpyDtoHAsync(out, d + 4 * (MIB - 4), sizeof out, s));
    ok(out[0] == 77 && out[3] == 77, "kernel wrote the stream-ordered allocation");
    ok_cu(cuMemFreeAsync(d, s));
    is_int(cuMemFreeAsync(d, s), CUDA_ERROR_INVALID_VALUE, "cuMemFreeAsync twice");
    ok_cu(cuStreamSynchronize(s));
    is_uint(attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "used 0 after the free ran");
    is_uint(attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0, "threshold 0: released at synchronisation");
    is_uint(used_mem(), 0, "and uncharged");
    ok(attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= 4 * MIB, "used high watermark kept");

    /* a high threshold keeps memory cached for reuse */
    cuuint64_t big = ~0ull;
    ok_cu(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
    ok_cu(cuMemAllocAsync(&d, 8 * MIB, s));
    ok_cu(cuMemFreeAsync(d, s));
    ok_cu(cuStreamSynchronize(s));
    ok(attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 8 * MIB, "memory stays reserved below the threshold");
    ok_cu(cuMemAllocAsync(&d2, 8 * MIB, s));
    ok(d2 == d, "the cached block is reused");
    ok_cu(cuMemFreeAsync(d2, s));
    ok_cu(cuStreamSynchronize(s));
    ok_cu(cuMemPoolTrimTo(def, 0));
    is_uint(attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0, "cuMemPoolTrimTo(0) releases it");
    cuuint64_t zero = 0, one = 1;
    ok_cu(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    is_uint(attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0, "resetting the used high watermark");
    is_int(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE,
           "a high watermark can only be reset to 0");
    is_int(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE,
           "RESERVED_MEM_CURRENT is read-only");
    is_int(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, NULL), CUDA_ERROR_INVALID_VALUE,
           "cuMemPoolGetAttribute(NULL)");

    /* capacity: a cached block is given back when the device is otherwise full */
    ok_cu(cuMemAllocAsync(&d, 40 * MIB, s));
    ok_cu(cuMemFreeAsync(d, s));
    ok_cu(cuStreamSynchronize(s));
    ok(attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 40 * MIB, "40 MiB cached in the pool");
    ok_cu(cuMemAllocAsync(&d, 60 * MIB, s));   /* fits only once the pool gives its cache back */
    is_int(cuMemAllocAsync(&d2, 60 * MIB, s), CUDA_ERROR_OUT_OF_MEMORY, "pool allocation past the capacity");
    ok_cu(cuMemFreeAsync(d, s));
    ok_cu(cuStreamSynchronize(s));
    ok_cu(cuMemPoolTrimTo(def, 0));

    /* explicit pools */
    CUmemoryPool p;
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    is_int(cuMemPoolCreate(&p, NULL), CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate(NULL props)");
    props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    is_int(cuMemPoolCreate(&p, &props), CUDA_ERROR_INVALID_VALUE, "an invalid allocation type");
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.id = 3;
    is_int(cuMemPoolCreate(&p, &props), CUDA_ERROR_INVALID_VALUE, "a pool on device 3");
    props.location.id = 0;
    ok_cu(cuMemPoolCreate(&p, &props));
    ok_cu(cuMemAllocFromPoolAsync(&d, MIB, p, s));
    is_int(cuMemAllocFromPoolAsync(&d2, MIB, NULL, s), CUDA_ERROR_INVALID_VALUE, "cuMemAllocFromPoolAsync(NULL pool)");
    ok(attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= MIB && attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0,
       "the allocation came from the explicit pool");
    ok_cu(cuDeviceSetMemPool(0, p));
    ok_cu(cuMemAllocAsync(&d2, MIB, s));
    ok(attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 2 * MIB, "cuMemAllocAsync uses the device's current pool");
    ok_cu(cuMemFreeAsync(d2, s));
    ok_cu(cuMemFree(d));            /* cuMemFree also frees stream-ordered memory */
    ok_cu(cuStreamSynchronize(s));
    is_int(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE, "destroying the default pool");
    ok_cu(cuMemPoolDestroy(p));
    is_int(cuMemPoolTrimTo(p, 0), CUDA_ERROR_INVALID_VALUE, "a destroyed pool");
    ok(cuDeviceGetMemPool(&cur, 0) == CUDA_SUCCESS && cur == def, "destroying the current pool restores the default");
    is_uint(used_mem(), 0, "every pool byte returned to the device");

    ok_cu(cuStreamDestroy(s));
    ok_cu(cuModuleUnload(mod));
    ok_cu(cuCtxDestroy(ctx));
    node_remove();
    return done_testing();
}
