/* fake-newer-driver.c - newvariant-t's stand-in for a driver newer than rota: simcuda (its dependency) answers
 * everything, but its resolver hands out addresses simcuda does not export, as a driver may:
 *   cuMemAlloc at cudaVersion >= 14000: a variant newer than any rota knows (a "cuMemAlloc_v3" with a third
 *     argument), which records the arguments it was called with;
 *   cuMemFree (any version): a private trampoline to cuMemFree_v2, the variant rota knows. */
/* every versioned name declared literally, as the driver itself is built */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#define NEWER_VERSION 14000

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*getproc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*free_fn)(CUdeviceptr);

/* What the newer variant saw: the test reads these (exported under names rota does not know). */
unsigned long long fake_newer_calls, fake_newer_flags;

static CUresult newer_mem_alloc_v3(CUdeviceptr *dptr, size_t bytes, unsigned long long flags)
{
    fake_newer_calls++;
    fake_newer_flags = flags;
    return cuMemAlloc_v2(dptr, bytes);
}

static CUresult free_trampoline(CUdeviceptr p)
{
    return cuMemFree_v2(p);
}

/* simcuda's own resolver (this library's names shadow its exports in the global scope). */
static void *sim(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = h ? dlsym(h, name) : NULL;
    if (h) dlclose(h);
    return p;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *st)
{
    if (symbol && pfn && strcmp(symbol, "cuMemAlloc") == 0 && version >= NEWER_VERSION) {
        *pfn = (void *)newer_mem_alloc_v3;
        if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (symbol && pfn && strcmp(symbol, "cuMemFree") == 0 && version >= 3020) {
        *pfn = (void *)free_trampoline;
        if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    getproc_v2_fn real = (getproc_v2_fn)sim("cuGetProcAddress_v2");
    if (!real) return CUDA_ERROR_NOT_FOUND;
    /* simcuda is a CUDA 13.0 driver: a newer version means what 13.0 knows, for the other names */
    return real(symbol, pfn, version > 13000 ? 13000 : version, flags, st);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}
