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

/*
 * The wrappers are generated from wrappers.def: each MEM and MEMINFO row gets the body of its base name's shape
 * (MEM_SHAPE_<base> below), so that a name's variants (_v2, _ptsz, the 32-bit legacy entry point) share one
 * body; a row whose base has no shape here does not compile. A body names the parameters as cuda.h does (dptr,
 * bytesize, hStream, ...); key and pool arguments are positional (MEM_ARG1: a free's key, a pool call's pool).
 */
#define MEM_ARG1(a, ...) a
#define MEM_FIRST(args) MEM_ARG1 args

/* ---- allocations ---- */
/* On the current context's device; may queue unless this thread captures. */
#define ROTA_WRAP_ALLOC(name, pt, params, args)                                                 \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        mem_op_t op;                                                                            \
        CUresult rc = mem_begin(&op, rota_real_current_device(), bytesize,                     \
                                rota_thread_may_wait());                                        \
        if (rc == CUDA_SUCCESS) {                                                               \
            rc = ROTA_REAL(name) args;                                                          \
            mem_end(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0);                                   \
        }                                                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

/* Reserves the upper bound (pitch_bytes), commits what the driver chose: pitch x height. */
#define ROTA_WRAP_ALLOC_PITCH(name, pt, params, args)                                           \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        mem_op_t op;                                                                            \
        CUresult rc = mem_begin(&op, rota_real_current_device(),                                \
                                pitch_bytes(WidthInBytes, Height), rota_thread_may_wait());     \
        if (rc == CUDA_SUCCESS) {                                                               \
            rc = ROTA_REAL(name) args;                                                          \
            mem_end_sized(&op, rc, rc == CUDA_SUCCESS ? *dptr : 0,                              \
                          rc == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : 0);                 \
        }                                                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

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

#define ROTA_WRAP_ALLOC_ASYNC_FROM(name, pt, params, args, poolarg)                             \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc;                                                                            \
        if (rota_stream_capturing(rota_stream_norm(hStream, pt))) {                             \
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
/* From the current device's current pool, or from the pool given. */
#define ROTA_WRAP_ALLOC_ASYNC(name, pt, params, args) ROTA_WRAP_ALLOC_ASYNC_FROM(name, pt, params, args, NULL)
#define ROTA_WRAP_ALLOC_POOL_ASYNC(name, pt, params, args) ROTA_WRAP_ALLOC_ASYNC_FROM(name, pt, params, args, pool)

/* ---- frees ---- */
/* A free or release: the key (the first argument) is given back once the driver freed it. */
#define ROTA_WRAP_FREE(name, pt, params, args)                                                  \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc = ROTA_REAL(name) args;                                                     \
        mem_release(rc, MEM_FIRST(args));                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

/* Graph memory only is released per allocation: pool memory is counted as its pool, re-read here. */
#define ROTA_WRAP_FREE_ASYNC(name, pt, params, args)                                            \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc = ROTA_REAL(name) args;                                                     \
        mem_release(rc, dptr);                                                                  \
        if (rc == CUDA_SUCCESS) client_mempool_sync(NULL);                                      \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

/* ---- pools: what they hold may shrink (a trim, a new release threshold; a destroyed pool is no longer
 * counted) ---- */
#define ROTA_WRAP_POOL_SYNC(name, pt, params, args)                                             \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc = ROTA_REAL(name) args;                                                     \
        if (rc == CUDA_SUCCESS) client_mempool_sync(MEM_FIRST(args));                           \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

/* cuMemCreate: on the device of its property's location (nothing for host memory), page by page. */
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

/* ---- what the process sees: rotad's client may lower free and total to the process's share ---- */
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

/* v as the type of the variant's out parameter p: the 32-bit legacy entry points saturate at UINT_MAX. */
#define MEM_AS(p, v) _Generic(*(p), unsigned int: clamp_uint(v), default: (v))

#define ROTA_WRAP_GET_INFO(name, pt, params, args)                                              \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc = ROTA_REAL(name) args;                                                     \
        if (rc == CUDA_SUCCESS && free != NULL && total != NULL) {                              \
            size_t f = *free, t = *total;                                                       \
            mem_view(rota_real_current_device(), &f, &t);                                       \
            *free = MEM_AS(free, f);                                                            \
            *total = MEM_AS(total, t);                                                          \
        }                                                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

#define ROTA_WRAP_TOTAL_MEM(name, pt, params, args)                                             \
    CUresult CUDAAPI name params                                                                \
    {                                                                                           \
        ROTA_ENTER(name, args);                                                                 \
        CUresult rc = ROTA_REAL(name) args;                                                     \
        if (rc == CUDA_SUCCESS && bytes != NULL) {                                              \
            size_t f = *bytes, t = *bytes; /* the view's free is not reported here */           \
            mem_view(dev, &f, &t);                                                              \
            *bytes = MEM_AS(bytes, t);                                                          \
        }                                                                                       \
        ROTA_LEAVE();                                                                           \
        return rc;                                                                              \
    }                                                                                           \
    ROTA_SELF(name)

/* ---- the rows: each base name's shape ---- */
#define MEM_SHAPE_cuMemAlloc ROTA_WRAP_ALLOC
#define MEM_SHAPE_cuMemAllocManaged ROTA_WRAP_ALLOC
#define MEM_SHAPE_cuMemAllocPitch ROTA_WRAP_ALLOC_PITCH
#define MEM_SHAPE_cuMemAllocAsync ROTA_WRAP_ALLOC_ASYNC
#define MEM_SHAPE_cuMemAllocFromPoolAsync ROTA_WRAP_ALLOC_POOL_ASYNC
#define MEM_SHAPE_cuMemCreate(...) /* by hand, above: one variant, its device from the property */
#define MEM_SHAPE_cuMemFree ROTA_WRAP_FREE
#define MEM_SHAPE_cuMemRelease ROTA_WRAP_FREE
#define MEM_SHAPE_cuMemFreeAsync ROTA_WRAP_FREE_ASYNC
#define MEM_SHAPE_cuMemPoolTrimTo ROTA_WRAP_POOL_SYNC
#define MEM_SHAPE_cuMemPoolSetAttribute ROTA_WRAP_POOL_SYNC
#define MEM_SHAPE_cuMemPoolDestroy ROTA_WRAP_POOL_SYNC
#define MEM_SHAPE_cuMemGetInfo ROTA_WRAP_GET_INFO
#define MEM_SHAPE_cuDeviceTotalMem ROTA_WRAP_TOTAL_MEM

#define ROTA_MEM_MEM(...) __VA_ARGS__
#define ROTA_MEM_MEMINFO(...) __VA_ARGS__
#define ROTA_MEM_INIT(...)
#define ROTA_MEM_PROC(...)
#define ROTA_MEM_DEVICE(...)
#define ROTA_MEM_CTX(...)
#define ROTA_MEM_SYNC(...)
#define ROTA_MEM_LAUNCH(...)
#define ROTA_MEM_LAUNCHN(...)
#define ROTA_MEM_CAPTURE(...)
#define ROTA_MEM_REAL(...)

#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) \
    ROTA_MEM_##fam(MEM_SHAPE_##base(name, pt, params, args))
#include "shim/wrappers.def"
#undef ROTA_FN
