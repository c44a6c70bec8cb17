/* wrap-mem.c - every allocation and free (reserve -> allocate -> commit/abort, release) and the memory views. */
#include "shim/shim-internal.h"

#include "shim/capture.h"
#include "shim/client.h"
#include "shim/counters.h"

#include <limits.h>

/*
 * Which device an allocation lands on: the current context's (cuCtxGetDevice), the location of a
 * cuMemCreate property, nothing for host-located VMM allocations (not device memory). With no current
 * context nothing is reserved and the driver returns its own error. A zero-byte request is not reserved
 * either: the driver rejects it. Stream-ordered allocations may queue unless their stream is capturing;
 * the others unless this thread captures (see rota_thread_may_wait).
 *
 * Keys: the CUdeviceptr for cuMemAlloc*, the CUmemGenericAllocationHandle for cuMemCreate. Stream-ordered
 * allocations are counted per pool, as what the pool holds (shim/client-mempool.c): a cuMemFreeAsync gives nothing
 * back when it is enqueued, the pool shrinking does (a synchronisation, cuMemPoolTrimTo, the release threshold).
 * Those of a capturing stream become graph memory: counted per allocation, as before. cuMemAllocPitch reserves width rounded up to 512 bytes x height, an
 * upper bound of the pitch real devices choose, and commits pitch x height, what the driver really chose.
 */
typedef struct mem_op {
    client_resv_t r;
    bool reserved;
} mem_op_t;

static CUresult mem_begin_kind(mem_op_t *op, CUdevice dev, uint64_t bytes, bool may_wait, bool page)
{
    op->reserved = false;
    op->r.dev = dev;
    op->r.bytes = bytes;
    op->r.token = 0;
    if (dev < 0 || bytes == 0) return CUDA_SUCCESS;
    rota_count(ROTA_EV_MEM_RESERVE);
    if (!may_wait) rota_count(ROTA_EV_MEM_NOWAIT);
    CUresult rc = page ? client_mem_reserve_page(dev, bytes, may_wait, &op->r)
                       : client_mem_reserve(dev, bytes, may_wait, &op->r);
    op->reserved = rc == CUDA_SUCCESS;
    return rc;
}

static CUresult mem_begin(mem_op_t *op, CUdevice dev, uint64_t bytes, bool may_wait)
{
    return mem_begin_kind(op, dev, bytes, may_wait, false);
}

/* actual: the bytes the driver really allocated when it chose the size (pitch), 0 = as reserved. */
static void mem_end_sized(mem_op_t *op, CUresult rc, uint64_t key, uint64_t actual)
{
    if (!op->reserved) return;
    if (rc == CUDA_SUCCESS) {
        rota_count(ROTA_EV_MEM_COMMIT);
        client_mem_commit(&op->r, key, actual);
    } else {
        rota_count(ROTA_EV_MEM_ABORT);
        client_mem_abort(&op->r);
    }
}

static void mem_end(mem_op_t *op, CUresult rc, uint64_t key)
{
    mem_end_sized(op, rc, key, 0);
}

static void mem_release(CUresult rc, uint64_t key)
{
    if (rc != CUDA_SUCCESS) return;
    rota_count(ROTA_EV_MEM_RELEASE);
    client_mem_release(key);
}

static uint64_t pitch_bytes(size_t width, size_t height)
{
    uint64_t w, b;
    if (__builtin_add_overflow((uint64_t)width, 511, &w)) return 0;
    w &= ~(uint64_t)511;
    if (__builtin_mul_overflow(w, (uint64_t)height, &b)) return 0; /* the driver will refuse it */
    return b;
}

/* ---- allocations ---- */
CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    ROTA_ENTER(cuMemAlloc, (dptr, bytesize));
    mem_op_t op;
    CUresult rc = mem_begin(&op, rota_real_current_device(), bytesize, rota_thread_may_wait());
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemAlloc)(dptr, bytesize);
        mem_end(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemAlloc)

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    ROTA_ENTER(cuMemAlloc_v2, (dptr, bytesize));
    mem_op_t op;
    CUresult rc = mem_begin(&op, rota_real_current_device(), bytesize, rota_thread_may_wait());
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemAlloc_v2)(dptr, bytesize);
        mem_end(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemAlloc_v2)

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                 unsigned int Height, unsigned int ElementSizeBytes)
{
    ROTA_ENTER(cuMemAllocPitch, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    mem_op_t op;
    CUresult rc = mem_begin(&op, rota_real_current_device(), pitch_bytes(WidthInBytes, Height), rota_thread_may_wait());
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemAllocPitch)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        mem_end_sized(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0, rc == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemAllocPitch)

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes)
{
    ROTA_ENTER(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    mem_op_t op;
    CUresult rc = mem_begin(&op, rota_real_current_device(), pitch_bytes(WidthInBytes, Height), rota_thread_may_wait());
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        mem_end_sized(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0, rc == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemAllocPitch_v2)

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    ROTA_ENTER(cuMemAllocManaged, (dptr, bytesize, flags));
    mem_op_t op;
    CUresult rc = mem_begin(&op, rota_real_current_device(), bytesize, rota_thread_may_wait());
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
        mem_end(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemAllocManaged)

/* A stream-ordered allocation from pool (NULL: the current device's current pool). */
typedef struct pool_op {
    client_resv_t r;
    CUmemoryPool pool; /* NULL: not counted */
    CUdevice dev;
} pool_op_t;

static CUresult pool_begin(pool_op_t *op, CUmemoryPool pool, uint64_t bytes)
{
    op->dev = rota_real_current_device();
    op->r.token = 0;
    op->pool = op->dev < 0 || bytes == 0 ? NULL : pool ? pool : client_mempool_of(op->dev);
    if (!op->pool) return CUDA_SUCCESS;
    rota_count(ROTA_EV_MEM_RESERVE);
    return client_mempool_reserve(op->pool, op->dev, bytes, true, &op->r);
}

static void pool_end(pool_op_t *op, CUresult rc)
{
    if (!op->pool) return;
    rota_count(rc == CUDA_SUCCESS ? ROTA_EV_MEM_COMMIT : ROTA_EV_MEM_ABORT);
    client_mempool_settle(op->pool, op->dev, &op->r);
}

#define ROTA_WRAP_ALLOC_ASYNC(name, pt, params, args, stream, poolarg)                            \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc;                                                                            \
        if (rota_stream_capturing(rota_stream_norm(stream, pt))) {                              \
            mem_op_t op;                                                                        \
            rc = mem_begin(&op, rota_real_current_device(), bytesize, false);                   \
            if (rc == CUDA_SUCCESS) {                                                           \
                rc = ROTA_REAL(name) args;                                                      \
                mem_end(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0);                               \
            }                                                                                   \
        } else {                                                                                \
            pool_op_t op;                                                                       \
            rc = pool_begin(&op, poolarg, bytesize);                                            \
            if (rc == CUDA_SUCCESS) {                                                           \
                rc = ROTA_REAL(name) args;                                                      \
                pool_end(&op, rc);                                                              \
            }                                                                                   \
        }                                                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

ROTA_WRAP_ALLOC_ASYNC(cuMemAllocAsync, 0, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
                      (dptr, bytesize, hStream), hStream, NULL)
ROTA_WRAP_ALLOC_ASYNC(cuMemAllocAsync_ptsz, 1, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
                      (dptr, bytesize, hStream), hStream, NULL)
ROTA_WRAP_ALLOC_ASYNC(cuMemAllocFromPoolAsync, 0,
                      (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                      (dptr, bytesize, pool, hStream), hStream, pool)
ROTA_WRAP_ALLOC_ASYNC(cuMemAllocFromPoolAsync_ptsz, 1,
                      (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                      (dptr, bytesize, pool, hStream), hStream, pool)

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    ROTA_ENTER(cuMemCreate, (handle, size, prop, flags));
    mem_op_t op;
    CUdevice dev = prop != NULL && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    CUresult rc = mem_begin_kind(&op, dev, size, rota_thread_may_wait(), true);
    if (rc == CUDA_SUCCESS) {
        rc = ROTA_REAL(cuMemCreate)(handle, size, prop, flags);
        mem_end(&op, rc, rc == CUDA_SUCCESS ? *handle : 0);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemCreate)

/* ---- frees ---- */
CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
    ROTA_ENTER(cuMemFree, (dptr));
    CUresult rc = ROTA_REAL(cuMemFree)(dptr);
    mem_release(rc, dptr);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemFree)

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    ROTA_ENTER(cuMemFree_v2, (dptr));
    CUresult rc = ROTA_REAL(cuMemFree_v2)(dptr);
    mem_release(rc, dptr);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemFree_v2)

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    ROTA_ENTER(cuMemFreeAsync, (dptr, hStream));
    CUresult rc = ROTA_REAL(cuMemFreeAsync)(dptr, hStream);
    mem_release(rc, dptr); /* graph memory only: pool memory is counted as its pool */
    if (rc == CUDA_SUCCESS) client_mempool_sync(NULL);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemFreeAsync)

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    ROTA_ENTER(cuMemFreeAsync_ptsz, (dptr, hStream));
    CUresult rc = ROTA_REAL(cuMemFreeAsync_ptsz)(dptr, hStream);
    mem_release(rc, dptr); /* graph memory only: pool memory is counted as its pool */
    if (rc == CUDA_SUCCESS) client_mempool_sync(NULL);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemFreeAsync_ptsz)

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ROTA_ENTER(cuMemRelease, (handle));
    CUresult rc = ROTA_REAL(cuMemRelease)(handle);
    mem_release(rc, handle);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemRelease)

/* ---- pools: what they hold may shrink ---- */
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    ROTA_ENTER(cuMemPoolTrimTo, (pool, minBytesToKeep));
    CUresult rc = ROTA_REAL(cuMemPoolTrimTo)(pool, minBytesToKeep);
    if (rc == CUDA_SUCCESS) client_mempool_sync(pool);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemPoolTrimTo)

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    ROTA_ENTER(cuMemPoolSetAttribute, (pool, attr, value));
    CUresult rc = ROTA_REAL(cuMemPoolSetAttribute)(pool, attr, value);
    if (rc == CUDA_SUCCESS) client_mempool_sync(pool);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemPoolSetAttribute)

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    ROTA_ENTER(cuMemPoolDestroy, (pool));
    CUresult rc = ROTA_REAL(cuMemPoolDestroy)(pool);
    if (rc == CUDA_SUCCESS) client_mempool_sync(pool); /* the pool is gone: no longer counted */
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemPoolDestroy)

/* ---- what the process sees: the coordinator may lower free and total to the process's share ---- */
static void mem_view(CUdevice dev, size_t *free_bytes, size_t *total_bytes)
{
    if (dev < 0) return;
    rota_count(ROTA_EV_MEM_VIEW);
    client_mem_view(dev, free_bytes, total_bytes);
}

static unsigned int clamp_uint(size_t v)
{
    return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    ROTA_ENTER(cuMemGetInfo_v2, (free, total));
    CUresult rc = ROTA_REAL(cuMemGetInfo_v2)(free, total);
    if (rc == CUDA_SUCCESS && free != NULL && total != NULL) mem_view(rota_real_current_device(), free, total);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemGetInfo_v2)

CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    ROTA_ENTER(cuMemGetInfo, (free, total));
    CUresult rc = ROTA_REAL(cuMemGetInfo)(free, total);
    if (rc == CUDA_SUCCESS && free != NULL && total != NULL) {
        size_t f = *free, t = *total;
        mem_view(rota_real_current_device(), &f, &t);
        *free = clamp_uint(f);
        *total = clamp_uint(t);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuMemGetInfo)

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ROTA_ENTER(cuDeviceTotalMem_v2, (bytes, dev));
    CUresult rc = ROTA_REAL(cuDeviceTotalMem_v2)(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes != NULL) {
        size_t f = *bytes; /* the view's free is not reported here */
        mem_view(dev, &f, bytes);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuDeviceTotalMem_v2)

CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    ROTA_ENTER(cuDeviceTotalMem, (bytes, dev));
    CUresult rc = ROTA_REAL(cuDeviceTotalMem)(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes != NULL) {
        size_t f = *bytes, t = *bytes;
        mem_view(dev, &f, &t);
        *bytes = clamp_uint(t);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuDeviceTotalMem)
