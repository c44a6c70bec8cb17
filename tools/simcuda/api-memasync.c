/* api-memasync.c - stream-ordered allocation: cuMemAllocAsync/cuMemFreeAsync from memory pools, or graph
 * memory nodes on a capturing stream. */
#include "tools/simcuda/api-internal.h"

#include <stdlib.h>

/* cuMemAllocAsync on capturing s: an allocation node, its address in *out. */
static CUresult capture_alloc(api_stream_t *s, size_t bytes, CUdeviceptr *out)
{
    api_gmem_t *m = api_gmem_new(s->ctx, bytes);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    api_op_t *op = api_op_new(API_OP_MEM_ALLOC);
    if (!op) {
        api_gmem_discard(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.gm.m = m;
    bool taken = false;
    CUresult rc = api_capture_record(s, op, &taken);
    if (!taken) {
        free(op);                /* holds no reference */
        api_gmem_discard(m);
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = api_gmem_base(m);
    return CUDA_SUCCESS;
}

/* cuMemFreeAsync of graph allocation r on capturing s: a free node. */
static CUresult capture_free(api_stream_t *s, const api_range_t *r)
{
    api_op_t *op = api_op_new(API_OP_MEM_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.gm.m = r->owner;
    bool taken = false;
    CUresult rc = api_capture_record(s, op, &taken);
    if (!taken) {
        free(op);                /* a node holds no pending-free reference */
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    return CUDA_SUCCESS;
}

/* cuMemFreeAsync of graph allocation r outside a capture: freed in stream order. */
static CUresult gmem_free_async(api_stream_t *s, const api_range_t *r)
{
    api_gmem_t *m = r->owner;
    api_op_t *op = api_op_new(API_OP_MEM_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.gm.m = m;
    bool live = api_gmem_free_begin(m);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (!live) {
        free(op);                /* never queued: no free to account */
        goto out_unguard;
    }
    rc = api_launch_op(s, op, false);
out_unguard:
    api_gmem_free_end(m, live, rc == CUDA_SUCCESS);
    return rc;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream h, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (pool && !api_handle_is(pool, API_KIND_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    if (api_stream_capturing(s))
        return capture_alloc(s, bytesize, dptr);   /* an allocation node (of the graph, any pool) */
    return api_pool_alloc(pool, s->ctx->dev, bytesize, dptr);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return api_ready() != CUDA_SUCCESS ? api_ready() : CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, false);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return api_ready() != CUDA_SUCCESS ? api_ready() : CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, true);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!dptr || !api_range_find((uintptr_t)dptr, 0, &r) || r.base != (uintptr_t)dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (r.kind == API_RANGE_GRAPH)
        return api_stream_capturing(s) ? capture_free(s, &r) : gmem_free_async(s, &r);
    if (r.kind != API_RANGE_POOL) {
        /* Not stream-ordered memory: the documented fallback is a synchronous free. */
        return r.kind == API_RANGE_DEVICE || r.kind == API_RANGE_MANAGED ? api_cuMemFree_v2(dptr)
                                                                         : CUDA_ERROR_INVALID_VALUE;
    }
    if (api_stream_capturing(s)) {
        api_capture_invalidate_stream(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (api_pool_freeing(&r, true) < 0)
        return CUDA_ERROR_INVALID_VALUE;     /* a cuMemFreeAsync of it is queued already */
    api_op_t *op = api_op_new(API_OP_POOL_FREE);
    if (!op) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unmark;
    }
    op->u.free.ptr = dptr;
    if ((rc = api_launch_op(s, op, false)) != CUDA_SUCCESS)
        goto out_unmark;         /* not queued: the block stays allocated */
    return CUDA_SUCCESS;
out_unmark:
    api_pool_freeing(&r, false);
    return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, false);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, true);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuMemAllocAsync); API_ALIAS(cuMemAllocAsync_ptsz); API_ALIAS(cuMemAllocFromPoolAsync);
API_ALIAS(cuMemAllocFromPoolAsync_ptsz); API_ALIAS(cuMemFreeAsync); API_ALIAS(cuMemFreeAsync_ptsz);
