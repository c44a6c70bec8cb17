/* api-vmm-t.c - simcuda virtual memory management: granularity, create/release, reserve/free, map/unmap (one
 * allocation at two addresses), access, device charge, kernels on mapped memory, error codes. */
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

static size_t used_mem(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return t - f;
}

int main(void)
{
    node_setup("vmm", "64M");
    alarm(60);
    need_cu(cuInit(0));
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));

    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    size_t gran = 0;
    ok(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && gran > 0 &&
           (gran & (gran - 1)) == 0,
       "granularity %zu is a power of two", gran);
    is_int(cuMemGetAllocationGranularity(&gran, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE,
           "granularity of NULL props");
    is_int(cuMemGetAllocationGranularity(&gran, &prop, (CUmemAllocationGranularity_flags)5), CUDA_ERROR_INVALID_VALUE,
           "unknown granularity option");

    CUmemGenericAllocationHandle h;
    is_int(cuMemCreate(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE, "size not a multiple of the granularity");
    is_int(cuMemCreate(NULL, gran, &prop, 0), CUDA_ERROR_INVALID_VALUE, "cuMemCreate(NULL)");
    is_int(cuMemCreate(&h, 128 * MIB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY, "128 MiB on a 64 MiB device");
    ok_cu(cuMemCreate(&h, 2 * gran, &prop, 0));
    is_uint(used_mem(), 2 * gran, "physical memory is charged at cuMemCreate");

    CUdeviceptr va, va2;
    is_int(cuMemAddressReserve(&va, gran + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE, "reserve a partial granule");
    ok_cu(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    ok(va % gran == 0, "the reservation is aligned");
    ok_cu(cuMemAddressReserve(&va2, 2 * gran, 0, 0, 0));
    is_int(cuMemMap(va + 3 * gran, 2 * gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "mapping past the reservation");
    is_int(cuMemMap(va, 2 * gran, gran, h, 0), CUDA_ERROR_INVALID_VALUE, "mapping past the allocation");
    is_int(cuMemMap(va, 2 * gran, 0, 0, 0), CUDA_ERROR_INVALID_VALUE, "mapping a NULL handle");
    ok_cu(cuMemMap(va, 2 * gran, 0, h, 0));
    is_int(cuMemMap(va, 2 * gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "mapping over a mapping");
    ok_cu(cuMemMap(va2, 2 * gran, 0, h, 0));
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    is_int(cuMemSetAccess(va, 2 * gran, NULL, 1), CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess(NULL)");
    is_int(cuMemSetAccess(va, 3 * gran, &acc, 1), CUDA_ERROR_INVALID_VALUE, "access to an unmapped range");
    ok_cu(cuMemSetAccess(va, 2 * gran, &acc, 1));
    ok_cu(cuMemSetAccess(va2, 2 * gran, &acc, 1));

    /* one physical allocation, two addresses */
    CUmodule mod;
    CUfunction fill;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));
    uint32_t v = 31;
    uint64_t n = 2 * gran / 4;
    void *args[] = { &va, &v, &n };
    ok_cu(cuLaunchKernel(fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    uint32_t out[4];
    ok_cu(cuMemcpyDtoH(out, va2 + 2 * gran - sizeof out, sizeof out));
    ok(out[0] == 31 && out[3] == 31, "a kernel's writes through one mapping are seen through the other");
    ok_cu(cuMemsetD32(va2, 5, 4));
    ok_cu(cuMemcpyDtoH(out, va, sizeof out));
    ok(out[0] == 5 && out[3] == 5, "and the other way round");

    /* release while mapped keeps the memory until the last unmap */
    ok_cu(cuMemRelease(h));
    is_int(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE, "releasing twice");
    is_uint(used_mem(), 2 * gran, "still charged while mapped");
    ok_cu(cuMemcpyDtoH(out, va, sizeof out));
    ok(out[0] == 5, "mapped memory stays valid after cuMemRelease");
    is_int(cuMemAddressFree(va, 4 * gran), CUDA_ERROR_INVALID_VALUE, "freeing a reservation that has mappings");
    is_int(cuMemUnmap(va, gran), CUDA_ERROR_INVALID_VALUE, "unmapping part of a mapping");
    ok_cu(cuMemUnmap(va, 2 * gran));
    is_int(cuMemcpyDtoH(out, va, sizeof out), CUDA_ERROR_INVALID_VALUE, "an unmapped address is not device memory");
    ok_cu(cuMemUnmap(va2, 2 * gran));
    is_uint(used_mem(), 0, "uncharged after release and the last unmap");
    ok_cu(cuMemAddressFree(va, 4 * gran));
    ok_cu(cuMemAddressFree(va2, 2 * gran));
    is_int(cuMemAddressFree(va2, 2 * gran), CUDA_ERROR_INVALID_VALUE, "freeing a reservation twice");

    ok_cu(cuModuleUnload(mod));
    ok_cu(cuCtxDestroy(ctx));
    node_remove();
    return done_testing();
}
