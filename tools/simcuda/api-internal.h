/* api-internal.h - internals shared by simcuda's Driver API layer (api-*.c): handles, contexts, streams, ops. */
#ifndef SIMCUDA_API_INTERNAL_H
#define SIMCUDA_API_INTERNAL_H

#include "tools/simcuda/api-core.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tools/simcuda/node.h"

/* The API level of the entry points (cuGetProcAddress); cuDriverGetVersion reports SIMCUDA_DRIVER_VERSION. */
#define API_DRIVER_VERSION 13000
#define API_CTX_STACK_MAX 64
#define API_MAX_KERNEL_ARGS 4

/* ---- driver and devices (api-init.c, api-device.c) ---- */
/* The CUDA version this driver reports (SIMCUDA_DRIVER_VERSION), before cuInit too; -1 for a bad knob. */
int api_driver_version(void);
CUresult api_check_device(CUdevice dev);  /* ready + a visible ordinal, else INVALID_DEVICE */
/* CUDA_VISIBLE_DEVICES: the app's device ordinals are visible ones; contexts, ranges, pools and the node
 * (memory, engines) use physical devices. -1 when there is no such device. */
int api_dev_phys(CUdevice dev);
CUdevice api_dev_visible(int phys);
int api_dev_count(void);                  /* visible devices */
void api_dev_parse_visible(void);         /* cuInit: reads CUDA_VISIBLE_DEVICES */

/* ---- device memory ranges (api-range.c; UVA: a CUdeviceptr is a host address) ---- */
enum api_range_kind {
    API_RANGE_DEVICE = 1, API_RANGE_MANAGED, API_RANGE_HOST, API_RANGE_POOL, API_RANGE_VMM,
    API_RANGE_GRAPH,             /* a graph allocation node's address (owner: its api_gmem_t) */
};
typedef struct api_range {
    uintptr_t base;
    size_t size;
    int kind;
    int dev;
    CUcontext ctx;         /* owning context (NULL for pool and VMM ranges) */
    uint64_t charged;      /* bytes charged to the node for this range */
    void *owner;           /* pool block, VMM mapping, or non-NULL for registered host memory */
    unsigned flags;        /* host allocation flags */
} api_range_t;
int api_range_add(const api_range_t *r);                   /* 0 or -ENOMEM */
bool api_range_remove(uintptr_t base, api_range_t *out);   /* exact base */
bool api_range_find(uintptr_t p, size_t len, api_range_t *out); /* [p, p+len) inside one range */
/* Removes every range owned by ctx, calling fn on each (after removal). */
void api_range_drop_ctx(CUcontext ctx, void (*fn)(const api_range_t *));
void api_range_reset(void);

/* ---- contexts (api-ctx.c; the calling thread's stack and checks: api-current.c) ---- */
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
    struct CUctx_st *abandoned;  /* primary: the slot it replaced at a forked child's cuInit (kept, not freed) */
};
int api_ctx_reset_primaries(void);   /* cuInit: fresh primary-context slots; 0 or -ENOMEM (api-ctx.c) */
/* Unlinks and frees every module of ctx (context teardown). */
void api_module_drop_ctx(CUcontext ctx);
/* The calling thread's context stack (api-current.c): cuCtxCreate pushes, cuCtxDestroy removes everywhere. */
bool api_ctx_stack_full(void);
void api_ctx_stack_push(CUcontext c);
void api_ctx_stack_remove(CUcontext c);
/* The calling thread's current context, validated: INVALID_CONTEXT if none or dead. */
CUresult api_ctx_current(CUcontext *out);
bool api_ctx_alive(CUcontext ctx);
CUresult api_ctx_sync(CUcontext ctx);     /* waits for every stream of ctx (api-exec.c) */
void api_ctx_set_sticky(CUcontext ctx, CUresult err);
CUresult api_ctx_sticky(CUcontext ctx);

/* ---- streams and ops (api-exec.c: the executor and stream lifetime; api-stream.c: the stream API) ---- */
enum api_stream_kind { API_STREAM_USER = 0, API_STREAM_LEGACY, API_STREAM_PERTHREAD };
enum api_op_kind {
    API_OP_NOP = 0, API_OP_KERNEL, API_OP_COPY, API_OP_MEMSET, API_OP_HOSTFN, API_OP_EVENT_RECORD,
    API_OP_WAIT_EVENT, API_OP_WAIT_STREAM, API_OP_POOL_FREE,
    API_OP_MEM_ALLOC, API_OP_MEM_FREE,   /* graph memory nodes (api-graphmem.c) */
};
/* The built-in kernels simcuda runs, and API_KERNEL_OTHER: any other name, which only occupies the device for a
 * modelled time (SIMCUDA_LAUNCH_NS + waves x SIMCUDA_WAVE_NS; its args[0] holds the waves). */
enum api_kernel_id { API_KERNEL_SPIN = 0, API_KERNEL_FILL, API_KERNEL_ADD, API_KERNEL_COUNT,
                     API_KERNEL_OTHER = API_KERNEL_COUNT };

typedef struct api_capture api_capture_t;
typedef struct api_op api_op_t;
typedef struct api_gmem api_gmem_t;
struct api_op {
    api_op_t *next;
    int kind;
    uint64_t seq;
    uint64_t submit_ns;          /* CLOCK_MONOTONIC time it was enqueued (engine order within a context) */
    uint64_t engine_token;       /* kernel/memset queued on the engine ahead of its run (simnode_kernel_enqueue*) */
    bool on_engine;              /* engine_token is valid: the executor waits for it instead of submitting; the
                                  * stream's next kernel may queue behind it (it stays set until the op retires) */
    union {
        struct { int id; int prio; uint32_t sms; uint64_t args[API_MAX_KERNEL_ARGS]; } k; /* sms: width (api-launch.c) */
        struct { void *dst; const void *src; size_t bytes; void *staged; } copy;
        struct { void *dst; uint32_t val; unsigned elem; size_t n; } set;
        struct { CUhostFn fn; void *data; } host;
        struct { CUevent ev; uint64_t gen; } ev;
        struct { api_stream_t *s; uint64_t seq; } ws;
        struct { CUdeviceptr ptr; } free;
        struct { api_gmem_t *m; } gm;
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
    api_op_t *retired;           /* the op just completed, until its runner frees it outside the lock: a child
                                  * forked meanwhile inherits it here rather than on a thread it does not have */
    uint64_t submitted, completed;
    uint64_t last_end_ns;        /* the runner's: when the last operation ended (engine timeline for kernels) */
    unsigned engine_ahead;       /* its ops on the engine not waited for yet (under lock; at most API_ENGINE_AHEAD) */
    unsigned refs;               /* 1 while not destroyed + 1 per op of another stream waiting on it */
    bool stopping, exited, destroyed;
    /* The executor thread: has_thread while it runs or waits to be joined by someone who holds the stream;
     * joining while a caller joins it (outside the lock). A destroyed stream's executor that drains on its
     * own clears has_thread as its last touch of the stream and leaves its join to api-exec.c's graveyard. */
    bool has_thread, joining;
    bool draining;               /* a caller runs the queue itself (no thread could be started): no other may */
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
/* Enqueues op (ownership passes) after the implicit legacy-stream dependencies; *seq (may be NULL) gets its
 * seq. -ENOMEM: nothing was enqueued and op is still the caller's. */
int api_stream_submit(api_stream_t *s, api_op_t *op, uint64_t *seq);
void api_stream_wait_seq(api_stream_t *s, uint64_t seq);
/* The stream's own work plus, for the legacy stream, the blocking streams' work it depends on. */
void api_stream_sync(api_stream_t *s);
bool api_stream_idle(api_stream_t *s);
api_stream_t *api_stream_new(CUcontext ctx, unsigned flags, int prio, int kind); /* NULL: out of memory */
/* Stops and joins every stream of ctx (draining their queues), frees them, and joins what the destroyed
 * streams' executors left behind: no thread of ctx outlives it. gone (may be NULL) sees each stream before
 * it is freed (api-ctx.c ends its capture: the executor calls nothing above it). */
void api_stream_destroy_all(CUcontext ctx, void (*gone)(api_stream_t *));
/* Joins the executors of ctx's destroyed streams that ran out of work and frees what nobody references. */
void api_stream_reap(CUcontext ctx);
api_op_t *api_op_new(int kind);         /* NULL when out of host memory */
void api_op_free(api_op_t *op);         /* releases what the op references */
void api_op_ref(api_op_t *op);          /* takes the references a queued copy of op needs */

/* ---- events (api-event.c) ---- */
struct CUevent_st {
    CUcontext ctx;
    unsigned flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t rec_gen;            /* records so far; record n is "generation" n */
    uint64_t *pending;           /* generations recorded but not reached by their stream yet */
    size_t npending, cap_pending;
    uint64_t time_ns;
    unsigned refs;
    bool destroyed;
    api_capture_t *cap;          /* recorded inside this capture (api_capture_lock) */
    api_stream_t *cap_stream;
    uint64_t cap_mark;           /* cap_stream->cap_nodes when recorded */
};
void api_event_ref(CUevent e);
void api_event_unref(CUevent e);
void api_event_complete(CUevent e, uint64_t gen, uint64_t time_ns); /* time_ns: its timestamp (0 or later: now) */
void api_event_wait_gen(CUevent e, uint64_t gen);
/* A new generation in *gen, pending until api_event_complete; 0 or -ENOMEM. */
int api_event_record_gen(CUevent e, uint64_t *gen);
bool api_event_done_locked(CUevent e, uint64_t gen);
/* Forgets the capture e was last recorded in (it is recorded outside one now, or destroyed). */
void api_event_uncapture(CUevent e);

/* ---- kernels (api-module.c looks them up, api-launch.c launches, api-exec.c runs) ---- */
/* A CUfunction; a library's CUkernel is the same object (a CUkernel may be passed where a CUfunction is). */
typedef struct CUfunc_st api_func_t;
struct CUfunc_st {
    int id;                      /* enum api_kernel_id */
    char *name;                  /* as looked up (cuFuncGetName) */
    api_func_t *next;            /* in its module's or library's list */
    bool is_kernel;              /* a CUkernel of a library (context-independent) */
    CUcontext ctx;               /* owning context of a module's function */
    _Atomic int max_dyn_smem;    /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (set while others launch) */
    int regs, max_threads;       /* per thread; per block: from its cubin where it records them (image.c) */
    int local_bytes, binary_version;
};
#define API_FUNC_REGS 16         /* registers per thread of a kernel whose image does not say (PTX) */
/* JIT options (api-module.c): each one CUDA defines, the outputs filled as after a JIT that logged nothing. */
CUresult api_jit_options(unsigned int n, CUjit_option *opts, void **vals);
int api_kernel_lookup(const char *name);          /* -1 if unknown */
size_t api_kernel_arg_count(int id);

/* ---- pools (api-pool.c) ---- */
void api_pool_free_block(CUdeviceptr ptr);        /* stream-ordered free reached on its stream */
void api_pool_trim_all(void);                     /* at synchronisation points: honour release thresholds */
void api_pool_reset(void);
/* frees a pool range found by cuMemFree_v2 */
void api_pool_free_now(const api_range_t *r);
/* An allocation from pool, or with pool NULL from device dev's current pool (api-memasync.c). */
CUresult api_pool_alloc(CUmemoryPool pool, int dev, size_t bytes, CUdeviceptr *out);
/* Marks (on) or unmarks a pool block queued for cuMemFreeAsync: -EALREADY if it was marked already. */
int api_pool_freeing(const api_range_t *r, bool on);

/* ---- graph allocations (api-graphmem.c) ---- */
/* A capture's allocation node: its address range mapped and registered (API_RANGE_GRAPH), owned by the
 * capture's graph. NULL when out of memory. api_gmem_discard undoes it (the node was never recorded). */
api_gmem_t *api_gmem_new(CUcontext ctx, size_t bytes);
void api_gmem_discard(api_gmem_t *m);
CUdeviceptr api_gmem_base(const api_gmem_t *m);
CUcontext api_gmem_ctx(const api_gmem_t *m);     /* the capturing context */
/* A graph or executable graph takes / drops its allocation nodes (v: its node array). */
void api_gmem_nodes_ref(const api_op_t *v, size_t n);
void api_gmem_nodes_unref(const api_op_t *v, size_t n);
/* cuGraphLaunch, before queueing the nodes: checks every allocation may be made (INVALID_VALUE while the
 * last launch's is still live) and every free finds it live, charges device memory (OUT_OF_MEMORY). If
 * queueing then stops at node from, api_gmem_launch_abort accounts the frees that were never queued. */
CUresult api_gmem_launch(const api_op_t *v, size_t n);
void api_gmem_launch_abort(const api_op_t *v, size_t from, size_t n);
/* A queued free (API_OP_MEM_FREE) is done: from the executor. */
void api_gmem_free_done(api_gmem_t *m);
/* cuMemFreeAsync outside a graph: api_gmem_free_begin marks m freed and guards it, returning whether it was
 * live; api_gmem_free_end drops the guard, undoing the free when a live m's op was not queued. */
bool api_gmem_free_begin(api_gmem_t *m);
void api_gmem_free_end(api_gmem_t *m, bool live, bool queued);
/* cuMemFree of a live graph allocation (the caller synchronised its context): INVALID_VALUE if not live. */
CUresult api_gmem_free_now(api_gmem_t *m);

/* ---- VMM (api-vmm.c) ---- */
void api_vmm_reset(void);                         /* after fork: forget the parent's reservations */

/* ---- stream capture and the graphs it builds (api-capture.c; api-graph.c instantiates, launches) ---- */
typedef struct api_node_array {
    api_op_t *v;
    size_t n, cap;
} api_node_array_t;

struct CUgraph_st {
    CUcontext ctx;
    api_node_array_t nodes;
};

CUgraph api_graph_new(CUcontext ctx);                        /* NULL when out of host memory */
void api_graph_free(CUgraph g);
int api_graph_push(api_node_array_t *a, const api_op_t *op);  /* appends a copy of op: 0 or -ENOMEM */
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

/* ---- the common submission path of every stream-ordered call (api-stream.c) ---- */
/* Records into a capture or enqueues op on s; with wait, blocks until it completed (sync calls). Takes op
 * in every case (freed on error); op NULL (api_op_new failed) gives CUDA_ERROR_OUT_OF_MEMORY. */
CUresult api_launch_op(api_stream_t *s, api_op_t *op, bool wait);

/* ---- hidden aliases ---- */
/*
 * Every entry point cuX also has a hidden alias api_cuX, defined next to it (API_ALIAS at the end of each
 * api-*.c). simcuda's own calls between entry points and the addresses cuGetProcAddress hands out use the
 * aliases, so they bind inside the library like the real driver's: an LD_PRELOADed interposer (librota)
 * sees only the application's calls, and cuGetProcAddress returns simcuda's functions, never the
 * interposer's, even though the library is linked without -Bsymbolic.
 */
#define API_ALIAS(name) extern __typeof__(name) api_##name __attribute__((alias(#name), visibility("hidden")))
#define API_INTERNAL(name) extern __typeof__(name) api_##name __attribute__((visibility("hidden")))
API_INTERNAL(cuCtxCreate); API_INTERNAL(cuCtxCreate_v2); API_INTERNAL(cuCtxCreate_v3);
API_INTERNAL(cuCtxCreate_v4); API_INTERNAL(cuCtxDestroy); API_INTERNAL(cuCtxDestroy_v2);
API_INTERNAL(cuCtxGetCurrent); API_INTERNAL(cuCtxGetDevice); API_INTERNAL(cuCtxGetDevice_v2);
API_INTERNAL(cuCtxGetFlags); API_INTERNAL(cuCtxGetId); API_INTERNAL(cuCtxGetStreamPriorityRange);
API_INTERNAL(cuCtxPopCurrent); API_INTERNAL(cuCtxPopCurrent_v2); API_INTERNAL(cuCtxPushCurrent);
API_INTERNAL(cuCtxPushCurrent_v2); API_INTERNAL(cuCtxSetCurrent); API_INTERNAL(cuCtxSynchronize);
API_INTERNAL(cuCtxSynchronize_v2); API_INTERNAL(cuDeviceComputeCapability); API_INTERNAL(cuDeviceGet);
API_INTERNAL(cuDeviceGetAttribute); API_INTERNAL(cuDeviceGetByPCIBusId); API_INTERNAL(cuDeviceGetCount);
API_INTERNAL(cuDeviceGetDefaultMemPool); API_INTERNAL(cuDeviceGetMemPool); API_INTERNAL(cuDeviceGetName);
API_INTERNAL(cuDeviceGetPCIBusId); API_INTERNAL(cuDeviceGetUuid); API_INTERNAL(cuDeviceGetUuid_v2);
API_INTERNAL(cuDevicePrimaryCtxGetState); API_INTERNAL(cuDevicePrimaryCtxRelease);
API_INTERNAL(cuDevicePrimaryCtxRelease_v2); API_INTERNAL(cuDevicePrimaryCtxReset);
API_INTERNAL(cuDevicePrimaryCtxReset_v2); API_INTERNAL(cuDevicePrimaryCtxRetain);
API_INTERNAL(cuDevicePrimaryCtxSetFlags); API_INTERNAL(cuDevicePrimaryCtxSetFlags_v2);
API_INTERNAL(cuDeviceSetMemPool); API_INTERNAL(cuDeviceTotalMem); API_INTERNAL(cuDeviceTotalMem_v2);
API_INTERNAL(cuDriverGetVersion); API_INTERNAL(cuEventCreate); API_INTERNAL(cuEventDestroy);
API_INTERNAL(cuEventDestroy_v2); API_INTERNAL(cuEventElapsedTime); API_INTERNAL(cuEventElapsedTime_v2);
API_INTERNAL(cuEventQuery); API_INTERNAL(cuEventRecord); API_INTERNAL(cuEventRecordWithFlags);
API_INTERNAL(cuEventRecordWithFlags_ptsz); API_INTERNAL(cuEventRecord_ptsz); API_INTERNAL(cuEventSynchronize);
API_INTERNAL(cuFuncGetAttribute); API_INTERNAL(cuFuncGetName); API_INTERNAL(cuFuncSetAttribute);
API_INTERNAL(cuGetErrorName); API_INTERNAL(cuGetErrorString); API_INTERNAL(cuGetProcAddress);
API_INTERNAL(cuGetProcAddress_v2); API_INTERNAL(cuGraphCreate); API_INTERNAL(cuGraphDestroy);
API_INTERNAL(cuGraphExecDestroy); API_INTERNAL(cuGraphGetNodes); API_INTERNAL(cuGraphInstantiate);
API_INTERNAL(cuGraphInstantiateWithFlags); API_INTERNAL(cuGraphInstantiate_v2); API_INTERNAL(cuGraphLaunch);
API_INTERNAL(cuGraphLaunch_ptsz); API_INTERNAL(cuGraphNodeGetType); API_INTERNAL(cuInit);
API_INTERNAL(cuKernelGetAttribute); API_INTERNAL(cuKernelGetFunction); API_INTERNAL(cuKernelGetName);
API_INTERNAL(cuLaunchCooperativeKernel); API_INTERNAL(cuLaunchCooperativeKernel_ptsz);
API_INTERNAL(cuLaunchHostFunc); API_INTERNAL(cuLaunchHostFunc_ptsz); API_INTERNAL(cuLaunchKernel);
API_INTERNAL(cuLaunchKernelEx); API_INTERNAL(cuLaunchKernelEx_ptsz); API_INTERNAL(cuLaunchKernel_ptsz);
API_INTERNAL(cuLibraryGetKernel); API_INTERNAL(cuLibraryGetKernelCount); API_INTERNAL(cuLibraryLoadData);
API_INTERNAL(cuLibraryLoadFromFile); API_INTERNAL(cuLibraryUnload); API_INTERNAL(cuMemAddressFree);
API_INTERNAL(cuMemAddressReserve); API_INTERNAL(cuMemAlloc); API_INTERNAL(cuMemAllocAsync);
API_INTERNAL(cuMemAllocAsync_ptsz); API_INTERNAL(cuMemAllocFromPoolAsync);
API_INTERNAL(cuMemAllocFromPoolAsync_ptsz); API_INTERNAL(cuMemAllocHost); API_INTERNAL(cuMemAllocHost_v2);
API_INTERNAL(cuMemAllocManaged); API_INTERNAL(cuMemAllocPitch_v2); API_INTERNAL(cuMemAlloc_v2);
API_INTERNAL(cuMemCreate); API_INTERNAL(cuMemFree); API_INTERNAL(cuMemFreeAsync);
API_INTERNAL(cuMemFreeAsync_ptsz); API_INTERNAL(cuMemFreeHost); API_INTERNAL(cuMemFree_v2);
API_INTERNAL(cuMemGetAddressRange_v2); API_INTERNAL(cuMemGetAllocationGranularity); API_INTERNAL(cuMemGetInfo);
API_INTERNAL(cuMemGetInfo_v2); API_INTERNAL(cuMemHostAlloc); API_INTERNAL(cuMemHostGetDevicePointer_v2);
API_INTERNAL(cuMemHostGetFlags); API_INTERNAL(cuMemHostRegister); API_INTERNAL(cuMemHostRegister_v2);
API_INTERNAL(cuMemHostUnregister); API_INTERNAL(cuMemMap); API_INTERNAL(cuMemPoolCreate);
API_INTERNAL(cuMemPoolDestroy); API_INTERNAL(cuMemPoolGetAttribute); API_INTERNAL(cuMemPoolSetAttribute);
API_INTERNAL(cuMemPoolTrimTo); API_INTERNAL(cuMemRelease); API_INTERNAL(cuMemSetAccess); API_INTERNAL(cuMemUnmap);
API_INTERNAL(cuMemcpy); API_INTERNAL(cuMemcpyAsync); API_INTERNAL(cuMemcpyAsync_ptsz);
API_INTERNAL(cuMemcpyDtoDAsync_v2); API_INTERNAL(cuMemcpyDtoDAsync_v2_ptsz); API_INTERNAL(cuMemcpyDtoD_v2);
API_INTERNAL(cuMemcpyDtoD_v2_ptds); API_INTERNAL(cuMemcpyDtoHAsync_v2); API_INTERNAL(cuMemcpyDtoHAsync_v2_ptsz);
API_INTERNAL(cuMemcpyDtoH_v2); API_INTERNAL(cuMemcpyDtoH_v2_ptds); API_INTERNAL(cuMemcpyHtoDAsync_v2);
API_INTERNAL(cuMemcpyHtoDAsync_v2_ptsz); API_INTERNAL(cuMemcpyHtoD_v2); API_INTERNAL(cuMemcpyHtoD_v2_ptds);
API_INTERNAL(cuMemcpy_ptds); API_INTERNAL(cuMemsetD16Async); API_INTERNAL(cuMemsetD16Async_ptsz);
API_INTERNAL(cuMemsetD16_v2); API_INTERNAL(cuMemsetD16_v2_ptds); API_INTERNAL(cuMemsetD32Async);
API_INTERNAL(cuMemsetD32Async_ptsz); API_INTERNAL(cuMemsetD32_v2); API_INTERNAL(cuMemsetD32_v2_ptds);
API_INTERNAL(cuMemsetD8Async); API_INTERNAL(cuMemsetD8Async_ptsz); API_INTERNAL(cuMemsetD8_v2);
API_INTERNAL(cuMemsetD8_v2_ptds); API_INTERNAL(cuModuleGetFunction); API_INTERNAL(cuModuleGetFunctionCount);
API_INTERNAL(cuModuleLoad); API_INTERNAL(cuModuleLoadData); API_INTERNAL(cuModuleLoadDataEx);
API_INTERNAL(cuModuleLoadFatBinary); API_INTERNAL(cuModuleUnload); API_INTERNAL(cuPointerGetAttribute);
API_INTERNAL(cuStreamAddCallback); API_INTERNAL(cuStreamAddCallback_ptsz); API_INTERNAL(cuStreamBeginCapture);
API_INTERNAL(cuStreamBeginCapture_ptsz); API_INTERNAL(cuStreamBeginCapture_v2);
API_INTERNAL(cuStreamBeginCapture_v2_ptsz); API_INTERNAL(cuStreamCreate); API_INTERNAL(cuStreamCreateWithPriority);
API_INTERNAL(cuStreamDestroy); API_INTERNAL(cuStreamDestroy_v2); API_INTERNAL(cuStreamEndCapture);
API_INTERNAL(cuStreamEndCapture_ptsz); API_INTERNAL(cuStreamGetCaptureInfo);
API_INTERNAL(cuStreamGetCaptureInfo_ptsz); API_INTERNAL(cuStreamGetCaptureInfo_v2);
API_INTERNAL(cuStreamGetCaptureInfo_v2_ptsz); API_INTERNAL(cuStreamGetCaptureInfo_v3);
API_INTERNAL(cuStreamGetCaptureInfo_v3_ptsz); API_INTERNAL(cuStreamGetCtx); API_INTERNAL(cuStreamGetCtx_ptsz);
API_INTERNAL(cuStreamGetCtx_v2); API_INTERNAL(cuStreamGetCtx_v2_ptsz); API_INTERNAL(cuStreamGetFlags);
API_INTERNAL(cuStreamGetFlags_ptsz); API_INTERNAL(cuStreamGetId); API_INTERNAL(cuStreamGetId_ptsz);
API_INTERNAL(cuStreamGetPriority); API_INTERNAL(cuStreamGetPriority_ptsz); API_INTERNAL(cuStreamIsCapturing);
API_INTERNAL(cuStreamIsCapturing_ptsz); API_INTERNAL(cuStreamQuery); API_INTERNAL(cuStreamQuery_ptsz);
API_INTERNAL(cuStreamSynchronize); API_INTERNAL(cuStreamSynchronize_ptsz); API_INTERNAL(cuStreamWaitEvent);
API_INTERNAL(cuStreamWaitEvent_ptsz); API_INTERNAL(cuThreadExchangeStreamCaptureMode);

#endif
