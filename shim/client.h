/* client.h - librota's client of rotad: what the wrappers ask rotad before and after driver calls. */
#ifndef ROTA_SHIM_CLIENT_H
#define ROTA_SHIM_CLIENT_H

/*
 * Contract between the interception layer (shim/, everything that resolves symbols and wraps calls) and the
 * client of rotad (shim/client*.c). The wrappers call these hooks; the hooks never
 * call the CUDA wrappers back, only the real driver through the resolver (shim/real.h), with the
 * thread-local guard set so that nothing is counted twice.
 *
 * Rules every hook keeps: it returns a valid CUresult (never exits or aborts), it is thread-safe, and with no
 * coordinator (rotad absent, ROTA_DISABLE) it costs a predictable branch. The hot paths (launch gate) take no
 * locks, make no syscalls and read no environment when nothing is contended.
 */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

/* Once per process image, before any other hook (shim.c, as the process settles in ACTIVE): wires the client's
 * files together (client-process.c). */
void client_init(void);
/* First driver call of this process (after fork too): connect to rotad lazily. Idempotent. Returns
 * CUDA_SUCCESS, or (ROTA_REQUIRE=1 and rotad unreachable) the error cuInit must return; while it fails, each
 * call retries the connection (at most once a second). */
CUresult client_process_init(void);

/* ---- memory ----------------------------------------------------------------------------------------------
 * Every allocation family goes: reserve -> real allocation -> commit (success) or abort (failure).
 * dev is the CUdevice the allocation lands on (the current context's, or the pool's / location's).
 * may_wait is false while the calling stream or thread is capturing: then a reservation that does not fit
 * fails at once instead of queueing. A result other than CUDA_SUCCESS is returned to the application
 * as is and the driver is not called. */
typedef struct client_resv {
    CUdevice dev;
    uint64_t bytes;
    uint64_t token; /* the client's handle of the reservation; 0 when nothing was reserved */
} client_resv_t;

CUresult client_mem_reserve(CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r);
/* The same for cuMemCreate: a caching allocator's expandable segment asks page by page, all of one size. */
CUresult client_mem_reserve_page(CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r);
/* key: the CUdeviceptr returned, or the CUmemGenericAllocationHandle of cuMemCreate. actual_bytes: what the
 * driver really allocated when it differs from the reservation (cuMemAllocPitch: pitch * height), else
 * r->bytes or 0 (= as reserved). More than reserved is charged, less is given back. */
void client_mem_commit(client_resv_t *r, uint64_t key, uint64_t actual_bytes);
void client_mem_abort(client_resv_t *r);
/* After a successful free/release of key; keys rota never saw are ignored (counters never underflow). */
void client_mem_release(uint64_t key);
/* Stream-ordered memory is counted per pool, as what the pool holds on the device (its reserved memory), not per
 * allocation: a cuMemFreeAsync gives nothing back when it is enqueued; the pool's reserve shrinking (at a
 * synchronisation, over its release threshold, or cuMemPoolTrimTo) does. client_mempool_reserve reserves what the
 * pool cannot serve from its unused reserve; client_mempool_settle, after the real call (success or not), charges or
 * gives back the difference between what was charged and what the pool now holds. client_mempool_sync re-reads one
 * pool (NULL: all this process allocated from) after a synchronisation, a trim, a threshold change or a destroy.
 * client_mempool_of: dev's current pool (cuDeviceGetMemPool), NULL if none. */
CUmemoryPool client_mempool_of(CUdevice dev);
CUresult client_mempool_reserve(CUmemoryPool pool, CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r);
void client_mempool_settle(CUmemoryPool pool, CUdevice dev, client_resv_t *r);
void client_mempool_sync(CUmemoryPool pool);
/* After a synchronisation: as client_mempool_sync(NULL), and while others queue for memory on a pool's GPU, the pool
 * is first trimmed to what is in use (docs/design/memory.md). */
void client_mempool_sync_idle(void);
/* After a synchronisation: the device time of the uncontended launches not sampled yet (client-launch.c). */
void client_launch_synced(void);
/* Rewrites what cuMemGetInfo_v2 / cuDeviceTotalMem_v2 returned: the process's limit and what is left of it,
 * never above what the device reports. */
void client_mem_view(CUdevice dev, size_t *free_bytes, size_t *total_bytes);

/* ---- launches --------------------------------------------------------------------------------------------
 * Called before every launch-family call on a stream that is not capturing (graph launches included); may
 * hold the calling thread while higher-priority work runs. after is called once the real launch returned. */
CUresult client_launch_gate(CUstream stream);
void client_launch_after(CUstream stream, CUresult rc);

#endif
