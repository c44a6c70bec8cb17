/* api-internal.h - internals shared by simcuda's Driver API layer (api-*.c): handles, contexts, streams, ops. */
#ifndef SIMCUDA_API_INTERNAL_H
#define SIMCUDA_API_INTERNAL_H

/*
 * The API files are compiled the way NVIDIA builds its own driver: with __CUDA_API_VERSION_INTERNAL, cuda.h
 * declares every exported name literally (cuMemAlloc and cuMemAlloc_v2, cuLaunchKernel and
 * cuLaunchKernel_ptsz, ...) and #undefs its renaming macros at the end, so each definition below defines
 * exactly the symbol it names. CUDA_API_PER_THREAD_DEFAULT_STREAM is never defined here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tools/simcuda/node.h"

#define API_DRIVER_VERSION 13000
#define API_CTX_STACK_MAX 64
#define API_MAX_KERNEL_ARGS 4

/* ---- handle registry: every live handle, so a stale or foreign one gives CUDA_ERROR_INVALID_HANDLE ---- */
enum api_kind {
    API_KIND_CTX = 1, API_KIND_STREAM, API_KIND_EVENT, API_KIND_MODULE, API_KIND_FUNC, API_KIND_LIBRARY,
    API_KIND_POOL, API_KIND_GRAPH, API_KIND_GRAPHEXEC, API_KIND_MEMHANDLE,
};
void api_handle_add(const void *h, int kind);
void api_handle_del(const void *h);
bool api_handle_is(const void *h, int kind);

/* ---- process state ---- */
/* CUDA_SUCCESS once cuInit succeeded in this process (a forked child must call cuInit again). */
CUresult api_ready(void);
uint64_t api_gen(void);            /* bumped by every (re)initialisation after fork */
uint64_t api_now_ns(void);         /* CLOCK_MONOTONIC */
void *api_xcalloc(size_t n, size_t size); /* calloc that never returns NULL (aborts only on true exhaustion) */
CUresult api_check_device(CUdevice dev);  /* ready + in range, else INVALID_DEVICE */

/* ---- device memory ranges (UVA: a CUdeviceptr is a host address) ---- */
enum api_range_kind { API_RANGE_DEVICE = 1, API_RANGE_MANAGED, API_RANGE_HOST, API_RANGE_POOL, API_RANGE_VMM };
typedef struct api_range {
    uintptr_t base;
    size_t size;
    int kind;
    int dev;
    CUcontext ctx;         /* owning context (NULL for pool and VMM ranges) */
    uint64_t charged;      /* bytes charged to the node for this range */
    void *owner;           /* pool block or VMM mapping */
    unsigned flags;        /* host allocation flags */
} api_range_t;
void api_range_add(const api_range_t *r);
bool api_range_remove(uintptr_t base, api_range_t *out);   /* exact base */
bool api_range_find(uintptr_t p, size_t len, api_range_t *out); /* [p, p+len) inside one range */
/* Removes every range owned by ctx, calling fn on each (after removal). */
void api_range_drop_ctx(CUcontext ctx, void (*fn)(const api_range_t *));
void api_range_reset(void);

/* ---- contexts ---- */
typedef struct CUstream_st api_stream_t;
struct CUctx_st {
    int dev;
    uint32_t node_id;
    unsigned flags;
    bool primary;
    bool active;                 /* primary: retained or in use */
    unsigned primary_refs;
    unsigned long long id;
    pthread_mutex_t lock;        /* streams, zombies, sticky */
    api_stream_t *legacy;        /* the NULL / CU_STREAM_LEGACY stream */
    api_stream_t *streams;       /* user and per-thread streams, linked by next */
    api_stream_t *zombies;       /* destroyed streams still draining */
    CUresult sticky;             /* sticky error (illegal address in a kernel) */
    void *modules;               /* api-module.c's list of this context's modules */
};
void api_ctx_reset_primaries(void);  /* cuInit: fresh primary-context slots */
/* Unlinks and frees every module of ctx (context teardown). */
void api_module_drop_ctx(CUcontext ctx);
/* The calling thread's current context, validated: INVALID_CONTEXT if none or dead. */
CUresult api_ctx_current(CUcontext *out);
bool api_ctx_alive(CUcontext ctx);
CUresult api_ctx_sync(CUcontext ctx);     /* waits for every stream of ctx */
void api_ctx_set_sticky(CUcontext ctx, CUresult err);
CUresult api_ctx_sticky(CUcontext ctx);

/* ---- streams and ops ---- */
enum api_stream_kind { API_STREAM_USER = 0, API_STREAM_LEGACY, API_STREAM_PERTHREAD };
enum api_op_kind {
    API_OP_NOP = 0, API_OP_KERNEL, API_OP_COPY, API_OP_MEMSET, API_OP_HOSTFN, API_OP_EVENT_RECORD,
    API_OP_WAIT_EVENT, API_OP_WAIT_STREAM, API_OP_POOL_FREE,
};
enum api_kernel_id { API_KERNEL_SPIN = 0, API_KERNEL_FILL, API_KERNEL_ADD, API_KERNEL_COUNT };

typedef struct api_capture api_capture_t;
typedef struct api_op api_op_t;
struct api_op {
    api_op_t *next;
    int kind;
    uint64_t seq;
    union {
        struct { int id; int prio; uint64_t args[API_MAX_KERNEL_ARGS]; } k;
        struct { void *dst; const void *src; size_t bytes; void *staged; } copy;
        struct { void *dst; uint32_t val; unsigned elem; size_t n; } set;
        struct { CUhostFn fn; void *data; } host;
        struct { CUevent ev; uint64_t gen; } ev;
        struct { api_stream_t *s; uint64_t seq; } ws;
        struct { CUdeviceptr ptr; } free;
    } u;
};

struct CUstream_st {
    CUcontext ctx;
    unsigned flags;
    int prio;
    int kind;
    unsigned long long id;
    pthread_mutex_t lock;
    pthread_cond_t cond;         /* broadcast on enqueue and on every completion */
    api_op_t *head, *tail;
    uint64_t submitted, completed;
    unsigned refs;               /* 1 while not destroyed + 1 per op of another stream waiting on it */
    bool has_thread, stopping, exited, destroyed;
    pthread_t thread;
    pthread_t owner;             /* per-thread default stream: its thread */
    api_stream_t *next;
    /* capture state, protected by api_capture_lock */
    api_capture_t *cap;
    bool cap_tail_unjoined;      /* a forked stream's last captured work is not joined back yet */
    uint64_t cap_nodes;          /* nodes this stream added to its capture */
};

/* Resolves a CUstream argument (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a handle); ptds says
 * whether NULL means the per-thread stream (the _ptsz/_ptds entry points). */
CUresult api_stream_resolve(CUstream h, bool ptds, api_stream_t **out);
/* Enqueues op (ownership passes) after the implicit legacy-stream dependencies; returns its seq. */
uint64_t api_stream_submit(api_stream_t *s, api_op_t *op);
void api_stream_wait_seq(api_stream_t *s, uint64_t seq);
/* The stream's own work plus, for the legacy stream, the blocking streams' work it depends on. */
void api_stream_sync(api_stream_t *s);
bool api_stream_idle(api_stream_t *s);
api_stream_t *api_stream_new(CUcontext ctx, unsigned flags, int prio, int kind);
/* Stops and joins every stream of ctx (draining their queues) and frees them. */
void api_stream_destroy_all(CUcontext ctx);
api_op_t *api_op_new(int kind);
void api_op_free(api_op_t *op);         /* releases what the op references */
void api_op_exec(api_stream_t *s, api_op_t *op);
void api_op_ref(api_op_t *op);          /* takes the references a queued copy of op needs */

/* ---- events (api-event.c) ---- */
struct CUevent_st {
    CUcontext ctx;
    unsigned flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t rec_gen, done_gen;
    uint64_t time_ns;
    unsigned refs;
    bool destroyed;
    api_capture_t *cap;          /* recorded inside this capture (api_capture_lock) */
    api_stream_t *cap_stream;
    uint64_t cap_mark;           /* cap_stream->cap_nodes when recorded */
};
void api_event_ref(CUevent e);
void api_event_unref(CUevent e);
void api_event_complete(CUevent e, uint64_t gen);
void api_event_wait_gen(CUevent e, uint64_t gen);

/* ---- kernels (api-module.c / api-launch.c) ---- */
/* A CUfunction; a library's CUkernel is the same object (a CUkernel may be passed where a CUfunction is). */
typedef struct CUfunc_st api_func_t;
struct CUfunc_st {
    int id;                      /* enum api_kernel_id */
    bool is_kernel;              /* a CUkernel of a library (context-independent) */
    CUcontext ctx;               /* owning context of a module's function */
    int max_dyn_smem;            /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
};
int api_kernel_lookup(const char *name);          /* -1 if unknown */
const char *api_kernel_name(int id);
size_t api_kernel_arg_count(int id);
/* Runs a kernel op on the calling (executor) thread. */
void api_kernel_exec(api_stream_t *s, api_op_t *op);

/* ---- pools (api-pool.c) ---- */
void api_pool_free_block(CUdeviceptr ptr);        /* stream-ordered free reached on its stream */
void api_pool_trim_all(void);                     /* at synchronisation points: honour release thresholds */
void api_pool_reset(void);
/* frees a pool range found by cuMemFree_v2 */
void api_pool_free_now(const api_range_t *r);

/* ---- stream capture (api-graph.c) ---- */
extern pthread_mutex_t api_capture_lock;
/* If s is capturing, records op (ownership passes) into its graph and returns CUDA_SUCCESS with *taken set;
 * an invalidated capture returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. */
CUresult api_capture_record(api_stream_t *s, api_op_t *op, bool *taken);
bool api_stream_capturing(api_stream_t *s);
void api_capture_invalidate_stream(api_stream_t *s);
/* Work on the legacy stream of ctx while a blocking stream of ctx captures: invalidates it and returns
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; else CUDA_SUCCESS. */
CUresult api_capture_check_legacy(CUcontext ctx);
/* Potentially unsafe calls (sync memcpy, cuMemAlloc, ...) under a global-mode capture, or a relaxed/thread-
 * local capture of this thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
CUresult api_capture_check_unsafe(void);
void api_capture_event_record(api_stream_t *s, CUevent e);
CUresult api_capture_wait_event(api_stream_t *s, CUevent e, bool *handled);
void api_capture_stream_gone(api_stream_t *s);
void api_capture_reset(void);

/* ---- the common submission path of every stream-ordered call ---- */
/* Records into a capture or enqueues op on s; with wait, blocks until it completed (sync calls). */
CUresult api_launch_op(api_stream_t *s, api_op_t *op, bool wait);

#endif
