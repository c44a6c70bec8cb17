/* real.h - the real driver (real.c): the rows of wrappers.def, their resolution, and the thread guard. */
#ifndef ROTA_SHIM_REAL_H
#define ROTA_SHIM_REAL_H

/*
 * librota's lowest layer: it includes no other rota header, and every other file of shim/ may include it. The
 * wrappers use it all (the rows, libc's dlsym, the address map); the client of rotad (shim/client*.c) uses only
 * this, small on purpose:
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
 *                                     client creates itself should set it to 1 first thing, so that driver
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
#include <stddef.h>

/* ROTA_FN_<name>: the row of every name in shim/wrappers.def. */
enum rota_fn_index {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) ROTA_FN_##name,
#include "shim/wrappers.def"
#undef ROTA_FN
    ROTA_FN_COUNT
};

#define ROTA_LIKELY(x) __builtin_expect(!!(x), 1)
#define ROTA_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Code that may run before a sanitizer runtime is initialised (our dlsym, called by the ASan and TSan runtimes'
 * own start-up). clang's no_sanitize("thread") still emits __tsan_func_entry/exit, which crash there, so clang
 * also gets disable_sanitizer_instrumentation (clang 14+; gcc lacks it, clang 14's ASan ignores it). */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define ROTA_NO_SANITIZE \
    __attribute__((disable_sanitizer_instrumentation, no_sanitize("address", "undefined", "thread", "memory")))
#endif
#endif
#ifndef ROTA_NO_SANITIZE
#define ROTA_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#endif

/* ---- the rows of wrappers.def ---------------------------------------------------------------------------- */
/* ROTA_EXPORTED_<family>(x) is x for the families librota exports, nothing for REAL. */
#define ROTA_EXPORTED_INIT(...) __VA_ARGS__
#define ROTA_EXPORTED_PROC(...) __VA_ARGS__
#define ROTA_EXPORTED_DEVICE(...) __VA_ARGS__
#define ROTA_EXPORTED_CTX(...) __VA_ARGS__
#define ROTA_EXPORTED_SYNC(...) __VA_ARGS__
#define ROTA_EXPORTED_LAUNCH(...) __VA_ARGS__
#define ROTA_EXPORTED_LAUNCHN(...) __VA_ARGS__
#define ROTA_EXPORTED_MEM(...) __VA_ARGS__
#define ROTA_EXPORTED_MEMINFO(...) __VA_ARGS__
#define ROTA_EXPORTED_CAPTURE(...) __VA_ARGS__
#define ROTA_EXPORTED_REAL(...)

typedef struct rota_fn_info {
    const char *name;  /* exact symbol */
    const char *base;  /* what cuGetProcAddress is asked for */
    int ver;           /* CUDA version that introduced the variant */
    bool pt;           /* per-thread default stream variant */
    bool exported;     /* librota exports a wrapper of this name */
} rota_fn_info_t;
extern const rota_fn_info_t rota_fn_info[ROTA_FN_COUNT];

/* ---- real-symbol resolution (real.c) ------------------------------------------------------------------- */
typedef void *(*rota_dlsym_fn)(void *, const char *);
typedef void *(*rota_dlvsym_fn)(void *, const char *, const char *);
/* libc's own dlsym and dlvsym, found without calling either (our exports shadow both). */
rota_dlsym_fn rota_real_dlsym(void);
rota_dlvsym_fn rota_real_dlvsym(void);
/* Opens the real driver at path ("" = "libcuda.so.1" by the search path) and resolves every row (a stub where the
 * driver lacks the name); 0, or -errno with the reason, one sentence, in why. Called once, from rota_driver_init. */
int rota_real_resolve(const char *path, char *why, size_t why_len);
/* Whether rota_real_resolve has completed (acquire). */
bool rota_real_resolved(void);
/* The row whose real function is addr, preferring the row named `name` or, failing that, the variant that
 * matches base name and stream flavour; -1 if addr is no wrapped row's real function. */
int rota_real_find_addr(const void *addr, const char *name, int pt);
/* The exported row named name, or -1. */
int rota_fn_find(const char *name);

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
