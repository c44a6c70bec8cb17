/* shim-internal.h - what librota's wrappers share: their self addresses, the lifecycle, the entry protocol. */
#ifndef ROTA_SHIM_INTERNAL_H
#define ROTA_SHIM_INTERNAL_H

#include "shim/real.h" /* first: it includes cuda.h with __CUDA_API_VERSION_INTERNAL */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/counters.h"

/* Every wrapper has a hidden alias rota_self_<name>: its address inside librota, whatever the global scope
 * binds the exported name to. ROTA_SELF(name) follows each wrapper's definition. */
#define ROTA_SELF_DECL(fam, name) ROTA_EXPORTED_##fam(extern __typeof__(name) rota_self_##name \
                                                      __attribute__((visibility("hidden")));)
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) ROTA_SELF_DECL(fam, name)
#include "shim/wrappers.def"
#undef ROTA_FN
#define ROTA_SELF(name) extern __typeof__(name) rota_self_##name __attribute__((alias(#name)));

/* The wrapper of each exported row (NULL for REAL rows); procaddr.c holds it. */
extern void *const rota_self[ROTA_FN_COUNT];

/* ---- lifecycle (shim.c) -------------------------------------------------------------------------------- */
enum rota_mode {
    ROTA_MODE_INIT = 0,  /* nothing done yet (or an entry point raced the first one) */
    ROTA_MODE_ACTIVE,    /* wrappers run their hooks */
    ROTA_MODE_DISABLED,  /* ROTA_DISABLE=1: every wrapper is a plain pass-through */
    ROTA_MODE_FAILED,    /* a bad ROTA_* value: cuInit fails with CUDA_ERROR_INVALID_VALUE */
    ROTA_MODE_NODRIVER,  /* the real driver could not be loaded */
    ROTA_MODE_FORKED,    /* ACTIVE in the parent; this child has not re-run client_process_init yet */
};
extern _Atomic int rota_mode;

/* What a wrapper does after rota_path_slow: run its hooks, call the real function and nothing else, or return
 * the (non-negative) CUresult given instead. */
#define ROTA_PATH_HOOK (-1)
#define ROTA_PATH_REAL (-2)
int rota_path_slow(unsigned idx);
/* Resolves the driver (once per process image) without connecting to rotad; for dlsym. */
void rota_driver_init(void);
/* dlsym/dlvsym of an NVML name librota wraps (shim/nvml.def): its wrapper where the lookup finds the real one,
 * else libc's answer; NULL for any other name (wrap-nvml.c). */
void *rota_nvml_dlsym(void *handle, const char *name, const char *version);
/* What the process settles in once initialised (ACTIVE, DISABLED, FAILED, NODRIVER); after rota_driver_init. */
int rota_steady_mode(void);

/*
 * The entry protocol of every wrapper. Fast path: one acquire load (a plain load on x86) and one TLS load,
 * no lock, no syscall, no getenv. Anything else (first call, after fork, disabled, failed, nested) goes to
 * rota_path_slow. DISABLED is checked inline so that the kill switch is a direct tail call.
 */
#define ROTA_ENTER(name, args)                                                              \
    do {                                                                                    \
        int rota_m_ = atomic_load_explicit(&rota_mode, memory_order_acquire);               \
        if (ROTA_UNLIKELY(rota_m_ != ROTA_MODE_ACTIVE || rota_in_shim)) {                   \
            if (rota_m_ == ROTA_MODE_DISABLED) return ROTA_REAL(name) args;                 \
            int rota_path_ = rota_path_slow(ROTA_FN_##name);                                \
            if (rota_path_ == ROTA_PATH_REAL) return ROTA_REAL(name) args;                  \
            if (rota_path_ != ROTA_PATH_HOOK) return (CUresult)rota_path_;                  \
        }                                                                                   \
        rota_count(ROTA_FN_##name);                                                         \
        rota_in_shim = 1;                                                                   \
    } while (0)
#define ROTA_LEAVE() (rota_in_shim = 0)

#endif
