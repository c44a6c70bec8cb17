// foreign.cu - a kernel simcuda does not know, compiled by nvcc -fatbin into the tests as cudart would load it.
#include <stdint.h>

// C++ linkage on purpose: cudart looks kernels up by their mangled names (_Z9scale_f32Pffy).
__global__ void scale_f32(float *x, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

// C linkage and launch bounds: the cubin records 128 as its most threads per block (tests/simcuda/image-t).
extern "C" __global__ void __launch_bounds__(128) bounded_fill(unsigned *p, unsigned v)
{
    p[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
