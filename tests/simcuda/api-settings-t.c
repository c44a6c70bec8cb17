/* api-settings-t.c - what clients query and set before the private export tables: device attributes, limits,
 * cache configs, loading mode, kernel attributes, occupancy, pointer attributes, stream writes, globals, VMM
 * handles. Each of these was a missing symbol or a NOT_SUPPORTED stub before simcuda implemented it. */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

extern const char rota_foreign_fatbin[];

static size_t smem_for(int bs)
{
    return (size_t)bs * 64;
}

int main(void)
{
    node_setup("settings", "256M");
    alarm(60);
    need_cu(cuInit(0));
    CUdevice dev;
    need_cu(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    need_cu(cuDevicePrimaryCtxRetain(&ctx, dev));
    need_cu(cuCtxSetCurrent(ctx));

    /* every attribute of cuda.h's enum is known */
    int bad = 0, v;
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
        if (cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev) != CUDA_SUCCESS) {
            bad++;
            diag("attribute %d unknown", a);
        }
    }
    is_int(bad, 0, "every device attribute up to CU_DEVICE_ATTRIBUTE_MAX is answered");
    is_int(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev), CUDA_ERROR_INVALID_VALUE, "MAX itself is not");

    /* limits and configurations */
    size_t lim = 0;
    ok_cu(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    is_uint(lim, 1024, "default stack size");
    ok_cu(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20));
    ok_cu(cuCtxGetLimit(&lim, CU_LIMIT_MALLOC_HEAP_SIZE));
    is_uint(lim, 64 << 20, "a limit set reads back");
    is_int(cuCtxSetLimit(CU_LIMIT_SHMEM_SIZE, 1), CUDA_ERROR_INVALID_VALUE, "a query-only limit cannot be set");
    CUfunc_cache cc;
    ok_cu(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1));
    ok_cu(cuCtxGetCacheConfig(&cc));
    is_int(cc, CU_FUNC_CACHE_PREFER_L1, "cache config reads back");
    CUmoduleLoadingMode mode;
    ok_cu(cuModuleGetLoadingMode(&mode));
    is_int(mode, CU_MODULE_LAZY_LOADING, "lazy loading by default");
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    ok_cu(cuModuleGetLoadingMode(&mode));
    is_int(mode, CU_MODULE_EAGER_LOADING, "CUDA_MODULE_LOADING=EAGER");
    unsigned api = 0;
    ok_cu(cuCtxGetApiVersion(NULL, &api));
    int peer = -1;
    ok_cu(cuDeviceCanAccessPeer(&peer, dev, dev));
    is_int(peer, 0, "no peer access");

    /* a library from nvcc's fatbin: kernel attributes, occupancy, a global */
    struct { int magic, version; const void *data; void *f; } w = {0x466243B1, 1, rota_foreign_fatbin, NULL};
    CUlibrary lib;
    need_cu(cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    need_cu(cuLibraryGetKernel(&k, lib, "_Z9scale_f32Pffy"));
    ok_cu(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000, k, dev));
    ok_cu(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, dev));
    is_int(v, 100000, "cuKernelSetAttribute reads back through cuKernelGetAttribute");
    ok_cu(cuKernelSetCacheConfig(k, CU_FUNC_CACHE_PREFER_SHARED, dev));
    CUfunction f;
    need_cu(cuKernelGetFunction(&f, k));
    int blocks = 0;
    ok_cu(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    is_int(blocks, 8, "256-thread blocks: 8 per multiprocessor (2048 threads)");
    ok_cu(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 100000));
    is_int(blocks, 2, "100000 bytes of shared memory each: 2 fit in 228 KiB");
    int grid = 0, bs = 0, sms = 0;
    need_cu(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    ok_cu(cuOccupancyMaxPotentialBlockSize(&grid, &bs, f, smem_for, 0, 0));
    ok(bs > 0 && bs <= 1024 && bs % 32 == 0 && grid % sms == 0 && grid > 0,
       "cuOccupancyMaxPotentialBlockSize: block %d, min grid %d", bs, grid);
    size_t dyn = 0;
    ok_cu(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 2, 256));
    is_uint(dyn, 100000, "dynamic shared memory for 2 blocks: half the multiprocessor's, capped by the kernel's maximum");
    ok_cu(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 4, 256));
    is_uint(dyn, 233472 / 4 - 1024, "for 4 blocks: a quarter, less the 1 KiB each block reserves");
    CUdeviceptr g = 0;
    size_t gbytes = 0;
    ok_cu(cuLibraryGetGlobal(&g, &gbytes, lib, "some_var"));
    ok(g != 0 && gbytes > 0, "cuLibraryGetGlobal gives device memory (%zu bytes)", gbytes);
    uint32_t word = 0;
    ok_cu(cuMemcpyHtoD(g, &(uint32_t){7}, 4));
    ok_cu(cuMemcpyDtoH(&word, g, 4));
    is_int(word, 7, "which holds what is copied there");
    CUmodule mod;
    need_cu(cuModuleLoadData(&mod, ".version 8.0\n.target sm_75\n.address_size 64\n.global .align 4 .u32 counter;\n"));
    ok_cu(cuModuleGetGlobal(&g, &gbytes, mod, "counter"));
    is_int(cuModuleGetGlobal(&g, &gbytes, mod, "nothing"), CUDA_ERROR_NOT_FOUND, "PTX without the variable");
    ok_cu(cuModuleUnload(mod));
    ok_cu(cuLibraryUnload(lib));

    /* pointer attributes, stream writes */
    CUdeviceptr p;
    need_cu(cuMemAlloc(&p, 4096));
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_HOST_POINTER};
    CUcontext pc = NULL;
    unsigned mt = 0;
    int ord = 5;
    void *hp = (void *)1;
    void *data[] = {&pc, &mt, &ord, &hp};
    ok_cu(cuPointerGetAttributes(4, attrs, data, p));
    ok(pc == ctx && mt == CU_MEMORYTYPE_DEVICE && ord == 0 && hp == NULL,
       "cuPointerGetAttributes of device memory: its context, device, ordinal 0, no host pointer");
    int local;
    ok_cu(cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)&local));
    ok(pc == NULL && mt == 0 && ord == -2, "of host memory CUDA does not know: empty values, no error");
    ok_cu(cuStreamWriteValue32(NULL, p + 8, 0xabcd, 0));
    ok_cu(cuCtxSynchronize());
    ok_cu(cuMemcpyDtoH(&word, p + 8, 4));
    is_int(word, 0xabcd, "cuStreamWriteValue32 stores the word");
    ok_cu(cuMemFree(p));

    /* VMM: retain the handle of mapped memory, read its properties */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va;
    need_cu(cuMemCreate(&h, 2 << 20, &prop, 0));
    need_cu(cuMemAddressReserve(&va, 2 << 20, 0, 0, 0));
    need_cu(cuMemMap(va, 2 << 20, 0, h, 0));
    ok_cu(cuMemRelease(h));
    ok_cu(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 4096)));
    ok(h2 == h, "cuMemRetainAllocationHandle gives the mapped allocation's handle, after its release too");
    CUmemAllocationProp got;
    ok_cu(cuMemGetAllocationPropertiesFromHandle(&got, h2));
    ok(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           got.location.id == 0, "cuMemGetAllocationPropertiesFromHandle: pinned, on device 0");
    ok_cu(cuMemRelease(h2));
    is_int(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE, "released as often as retained, the handle is gone");
    ok_cu(cuMemUnmap(va, 2 << 20));
    ok_cu(cuMemAddressFree(va, 2 << 20));
    char shareable[64];
    is_int(cuMemExportToShareableHandle(shareable, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_NOT_SUPPORTED, "exporting: not supported, as the device attribute says");

    cuDevicePrimaryCtxRelease(dev);
    node_remove();
    return done_testing();
}
