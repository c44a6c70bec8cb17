/* shim-internal.h - what librota's files share: the wrapper table, the entry protocol, capture state, counters. */
#ifndef ROTA_SHIM_INTERNAL_H
#define ROTA_SHIM_INTERNAL_H

#include "shim/real.h" /* first: it includes cuda.h with __CUDA_API_VERSION_INTERNAL */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/client.h"
#include "shim/log.h"
#include "shim/options.h"

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

/* ---- the table (wrappers.def) -------------------------------------------------------------------------- */
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

/* ---- real-symbol resolution (real.c) ------------------------------------------------------------------- */
typedef void *(*rota_dlsym_fn)(void *, const char *);
typedef void *(*rota_dlvsym_fn)(void *, const char *, const char *);
/* libc's own dlsym and dlvsym, found without calling either (our exports shadow both). */
rota_dlsym_fn rota_real_dlsym(void);
rota_dlvsym_fn rota_real_dlvsym(void);
/* Opens the real driver and resolves every row; 0 or -errno (logged). Called once, from rota_driver_init. */
int rota_real_resolve(void);
/* Whether rota_real_resolve has completed (acquire). */
bool rota_real_resolved(void);
/* The row whose real function is addr, preferring the row named `name` or, failing that, the variant that
 * matches base name and stream flavour; -1 if addr is no wrapped row's real function. */
int rota_real_find_addr(const void *addr, const char *name, int pt);
/* The exported row named name, or -1. */
int rota_fn_find(const char *name);

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
/* Resolves the driver (once per process image) without connecting to the coordinator; for dlsym. */
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

/* ---- test-only counters (counters.c), enabled by ROTA_TEST_COUNTERS ------------------------------------ */
enum rota_event {
    ROTA_EV_PROCESS_INIT = ROTA_FN_COUNT, /* client_process_init calls */
    ROTA_EV_LAUNCH_GATE,                  /* client_launch_gate calls */
    ROTA_EV_LAUNCH_AFTER,                 /* client_launch_after calls */
    ROTA_EV_LAUNCH_CAPTURING,             /* launches let through ungated because their stream captures */
    ROTA_EV_MEM_RESERVE,                  /* client_mem_reserve calls */
    ROTA_EV_MEM_NOWAIT,                   /* ... of which with may_wait = false */
    ROTA_EV_MEM_COMMIT,
    ROTA_EV_MEM_ABORT,
    ROTA_EV_MEM_RELEASE,
    ROTA_EV_MEM_VIEW,
    ROTA_EV_CAPTURE_BEGIN,                /* captures rota saw start (and tracks) */
    ROTA_EV_CAPTURE_END,                  /* captures rota saw end */
    ROTA_COUNTER_COUNT
};
extern bool rota_counting;
extern _Atomic uint64_t rota_hits[ROTA_COUNTER_COUNT];
static inline void rota_count(unsigned i)
{
    if (ROTA_UNLIKELY(rota_counting)) atomic_fetch_add_explicit(&rota_hits[i], 1, memory_order_relaxed);
}
void rota_counters_init(const char *path);
/* The count of a wrapper (by exact name) or an event ("rota.launch_gate" ...); UINT64_MAX if unknown. What
 * cuGetProcAddress("rota_test_counters") returns when ROTA_TEST_COUNTERS is set. */
uint64_t rota_test_counter(const char *name);
typedef uint64_t (*rota_test_counter_fn)(const char *name);
#define ROTA_TEST_COUNTERS_SYMBOL "rota_test_counters"

/* ---- stream capture (capture.c) ------------------------------------------------------------------------ */
/* How many captures are in progress (streams rota saw begin and not yet end). */
extern _Atomic unsigned rota_capture_count;
bool rota_stream_capturing_slow(CUstream s);
/* Whether s (normalised, see rota_stream_norm) is capturing; no driver call while nothing captures. */
static inline bool rota_stream_capturing(CUstream s)
{
    if (ROTA_LIKELY(atomic_load_explicit(&rota_capture_count, memory_order_relaxed) == 0)) return false;
    return rota_stream_capturing_slow(s);
}
/* Whether an allocation made by this thread (not on a stream) may queue: not while this thread captures
 * or a global-mode capture is in progress anywhere. */
bool rota_thread_may_wait(void);
void rota_capture_fork_child(void);

/* A per-thread-default-stream entry point's NULL stream is this thread's per-thread stream. */
static inline CUstream rota_stream_norm(CUstream s, int pt)
{
    return pt && s == NULL ? CU_STREAM_PER_THREAD : s;
}

#endif
