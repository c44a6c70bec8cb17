// kernels.cu - the three kernels every rota test and workload uses; simcuda implements the same names natively.
#include <stdint.h>

// Occupies the SM it runs on for ns nanoseconds of wall time, read from the global nanosecond timer.
extern "C" __global__ void spin_ns(uint64_t ns)
{
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

extern "C" __global__ void fill_u32(uint32_t *dst, uint32_t v, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

extern "C" __global__ void add_f32(const float *a, const float *b, float *c, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
