/* real.h - the real driver's entry points and the shim's thread guard, for rota's own driver calls. */
#ifndef ROTA_SHIM_REAL_H
#define ROTA_SHIM_REAL_H

/*
 * What the coordinator client (shim/client*.c) may use of the interception layer. Small on purpose:
 *
 *   ROTA_REAL(cuCtxGetDevice)(&dev)   calls the real driver's cuCtxGetDevice, never a rota wrapper. Every name of
 *                                     shim/wrappers.def is available, by its exact exported name (cuMemAlloc_v2,
 *                                     cuLaunchKernel_ptsz, cuStreamQuery, cuEventRecord, ...): add a REAL row there
 *                                     for a name rota does not wrap. Valid in every hook (the shim resolves the
 *                                     driver before the first hook runs). A name the driver lacks is a stub that
 *                                     returns CUDA_ERROR_NOT_SUPPORTED; ROTA_REAL_HAS(name) says whether it is real.
 *   rota_in_shim                      this thread is inside rota: while it is non-zero, every exported wrapper is a
 *                                     plain pass-through to the driver (no hooks, no counting). The wrappers set it
 *                                     around each hook and real call, so hooks need not touch it. A thread the
 *                                     coordinator creates itself should set it to 1 first thing, so that driver
 *                                     calls it makes through exported names (a library, a callback) are not gated.
 *
 * Include this header BEFORE <cuda.h> and shim/client.h: it compiles cuda.h the way the driver itself is built
 * (__CUDA_API_VERSION_INTERNAL), which declares every versioned name literally (cuMemAlloc is the 32-bit legacy
 * entry point, cuMemAlloc_v2 the current one) instead of renaming calls through macros.
 */
#if defined(CUDA_VERSION) && !defined(__CUDA_API_VERSION_INTERNAL)
#error "include shim/real.h before <cuda.h> and shim/client.h (it defines __CUDA_API_VERSION_INTERNAL)"
#endif
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <stdbool.h>

/* ROTA_FN_<name>: the row of every name in shim/wrappers.def. */
enum rota_fn_index {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) ROTA_FN_##name,
#include "shim/wrappers.def"
#undef ROTA_FN
    ROTA_FN_COUNT
};

/* The real driver's function of every row (member fn_<name>); a stub where the driver lacks the name. */
typedef struct rota_real_fns {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) CUresult (CUDAAPI *fn_##name) params;
#include "shim/wrappers.def"
#undef ROTA_FN
} rota_real_fns_t;

extern rota_real_fns_t rota_real;
extern bool rota_real_present[ROTA_FN_COUNT];
extern __thread int rota_in_shim __attribute__((tls_model("initial-exec")));

/* The name is pasted, not expanded, so ROTA_REAL(cuMemAlloc) is the legacy entry point even where cuda.h's
 * renaming macros are in force. */
#define ROTA_REAL(name) (rota_real.fn_##name)
#define ROTA_REAL_HAS(name) (rota_real_present[ROTA_FN_##name])

/* The device of the calling thread's current context, asked of the real driver; -1 with none (or an error). */
static inline CUdevice rota_real_current_device(void)
{
    CUdevice d;
    return ROTA_REAL(cuCtxGetDevice)(&d) == CUDA_SUCCESS ? d : -1;
}

#endif
