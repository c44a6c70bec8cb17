// foreign.cu - a kernel simcuda does not know, compiled by nvcc -fatbin into the tests as cudart would load it.
#include <stdint.h>

// C++ linkage on purpose: cudart looks kernels up by their mangled names (_Z9scale_f32Pffy).
__global__ void scale_f32(float *x, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
