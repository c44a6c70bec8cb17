/* fake-c10.c - memq-t's stand-in for PyTorch's libc10_cuda.so: device allocations made from inside it. */
#include <cuda.h>
#include <dlfcn.h>

int fake_c10_malloc(unsigned long long bytes, unsigned long long *ptr);

/* cuMemAlloc_v2 as the process resolves it (librota's wrapper when preloaded), called from this library, so that
 * the library is on the calling stack as PyTorch's caching allocator is on a cudaMalloc's. */
__attribute__((noinline)) int fake_c10_malloc(unsigned long long bytes, unsigned long long *ptr)
{
    CUresult (*alloc)(CUdeviceptr *, size_t) =
        (CUresult(*)(CUdeviceptr *, size_t))dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    CUdeviceptr p = 0;
    int rc = alloc ? (int)alloc(&p, (size_t)bytes) : -1;
    *ptr = p;
    return rc;
}
