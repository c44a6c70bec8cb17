/* load.h - loading the embedded kernels (tools/kernels/kernels.cu) on any driver that can JIT them. */
#ifndef ROTA_KERNELS_LOAD_H
#define ROTA_KERNELS_LOAD_H

#include <cuda.h>

/* The driver entry points kernels_load calls: a program linked with -lcuda passes cuModuleLoadData and
 * cuDriverGetVersion, one that resolves the driver at run time passes what it resolved. */
typedef CUresult (*kernels_load_fn)(CUmodule *, const void *);
typedef CUresult (*kernels_version_fn)(int *);

/* Loads rota_kernels_ptx into the current context. The PTX says the ISA of the toolkit that built it (CUDA 13:
 * 9.0); a driver of an older CUDA refuses that with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, whatever the code uses.
 * Then it is loaded once more with the directive lowered to the ISA of the driver's version (runtime/lib/ptxver.h):
 * the kernels use nothing newer than ISA 6.3. Returns the driver's result (the first one when no retry applies). */
CUresult kernels_load(CUmodule *mod, kernels_load_fn load, kernels_version_fn version);

#endif
