/* api-mem.c - device, pitch, managed and host allocations, cuMemGetInfo, memcpy and memset (sync and Async). */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocations -------------------------------------------------------------------------------------- */
/* Registered pageable memory: a host range the API did not allocate (never freed by cuMemFreeHost). */
static char registered_tag;

static void *host_block(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 512, bytes ? bytes : 1) != 0)
        return NULL;
    return p;
}

/* Charges and backs a device allocation owned by ctx. */
static CUresult dev_alloc(CUcontext c, size_t bytes, int kind, CUdeviceptr *out)
{
    int err = simnode_mem_reserve(c->dev, bytes);
    if (err == -ENOMEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (err < 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = host_block(bytes);
    if (!p) {
        simnode_mem_unreserve(c->dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    api_range_t r = { .base = (uintptr_t)p, .size = bytes, .kind = kind, .dev = c->dev, .ctx = c,
                      .charged = bytes };
    if (api_range_add(&r) < 0) {
        free(p);
        simnode_mem_unreserve(c->dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult alloc_prologue(CUcontext *c)
{
    CUresult rc = api_ctx_current(c);
    if (rc != CUDA_SUCCESS)
        return rc;
    return api_capture_check_unsafe();
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CUcontext c;
    CUresult rc = alloc_prologue(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return dev_alloc(c, bytesize, API_RANGE_DEVICE, dptr);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    /* The 32-bit ABI cannot hold a 64-bit host address. */
    (void)dptr;
    (void)bytesize;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    CUcontext c;
    CUresult rc = alloc_prologue(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_INVALID_VALUE;
    rc = dev_alloc(c, pitch * Height, API_RANGE_DEVICE, dptr);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    CUcontext c;
    CUresult rc = alloc_prologue(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    return dev_alloc(c, bytesize, API_RANGE_MANAGED, dptr);
}

/* cuMemFree of a graph allocation (outside a graph). */
static CUresult gmem_free_sync(const api_range_t *r)
{
    api_gmem_t *m = r->owner;
    CUcontext c = api_gmem_ctx(m);
    if (c && api_ctx_alive(c))
        api_ctx_sync(c);         /* like cuMemFree of any memory: work that may use it finishes first */
    return api_gmem_free_now(m);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == 0)
        return CUDA_SUCCESS;          /* free(NULL) semantics, as the real driver */
    if ((rc = api_capture_check_unsafe()) != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!api_range_find((uintptr_t)dptr, 0, &r) || r.base != (uintptr_t)dptr ||
        (r.kind != API_RANGE_DEVICE && r.kind != API_RANGE_MANAGED && r.kind != API_RANGE_POOL &&
         r.kind != API_RANGE_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    if (r.kind == API_RANGE_GRAPH)
        return gmem_free_sync(&r);
    /* Like the real driver, freeing waits for the work that might still use the memory. */
    if (r.ctx && api_ctx_alive(r.ctx))
        api_ctx_sync(r.ctx);
    if (!api_range_remove(r.base, &r))
        return CUDA_ERROR_INVALID_VALUE;   /* lost a race with another free */
    if (r.kind == API_RANGE_POOL) {
        api_pool_free_now(&r);
        return CUDA_SUCCESS;
    }
    simnode_mem_unreserve(r.dev, r.charged);
    free((void *)r.base);
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    return dptr == 0 ? api_cuMemFree_v2(0) : CUDA_ERROR_INVALID_VALUE;
}

#define HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CUcontext c;
    CUresult rc = alloc_prologue(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pp || bytesize == 0 || (Flags & ~(unsigned)HOST_ALLOC_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    void *p = host_block(bytesize);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Host allocations are pinned host memory: not charged to the device. */
    api_range_t r = { .base = (uintptr_t)p, .size = bytesize, .kind = API_RANGE_HOST, .dev = c->dev, .ctx = c,
                      .flags = Flags };
    if (api_range_add(&r) < 0) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return api_cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    return api_cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p)
        return CUDA_SUCCESS;
    api_range_t r;
    if (!api_range_find((uintptr_t)p, 0, &r) || r.base != (uintptr_t)p || r.kind != API_RANGE_HOST ||
        r.owner == &registered_tag)
        return CUDA_ERROR_INVALID_VALUE;
    if (r.ctx && api_ctx_alive(r.ctx))
        api_ctx_sync(r.ctx);
    if (!api_range_remove(r.base, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    free(p);
    return CUDA_SUCCESS;
}


#define HOST_REGISTER_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY | \
                             CU_MEMHOSTREGISTER_READ_ONLY)

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p || bytesize == 0 || (Flags & ~(unsigned)HOST_REGISTER_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (api_range_find((uintptr_t)p, 0, NULL) || api_range_find((uintptr_t)p + bytesize - 1, 0, NULL))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    api_range_t r = { .base = (uintptr_t)p, .size = bytesize, .kind = API_RANGE_HOST, .dev = c->dev, .ctx = c,
                      .owner = &registered_tag, .flags = Flags };
    return api_range_add(&r) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return api_cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void *p)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    api_range_t r;
    if (!api_range_find((uintptr_t)p, 0, &r) || r.base != (uintptr_t)p || r.owner != &registered_tag)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (r.ctx && api_ctx_alive(r.ctx))
        api_ctx_sync(r.ctx);
    return api_range_remove(r.base, NULL) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!pdptr || !p || Flags != 0 || !api_range_find((uintptr_t)p, 0, &r) || r.kind != API_RANGE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!pFlags || !p || !api_range_find((uintptr_t)p, 0, &r) || r.kind != API_RANGE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!api_range_find((uintptr_t)dptr, 0, &r) || r.kind == API_RANGE_HOST)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = (CUdeviceptr)r.base;
    if (psize)
        *psize = r.size;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t used = 0, tot = 0;
    simnode_mem_info(c->dev, &used, &tot);
    *free_bytes = (size_t)(used < tot ? tot - used : 0);
    *total = (size_t)tot;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    size_t f = 0, t = 0;
    CUresult rc = api_cuMemGetInfo_v2(free_bytes ? &f : NULL, total ? &t : NULL);
    if (rc == CUDA_SUCCESS) {
        *free_bytes = f > 0xffffffffu ? 0xffffffffu : (unsigned)f;
        *total = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
    }
    return rc;
}

static CUresult pointer_attribute(void *data, CUpointer_attribute attribute, const api_range_t *r, uintptr_t p)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = r->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = r->kind == API_RANGE_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = (CUdeviceptr)p;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (r->kind != API_RANGE_HOST && r->kind != API_RANGE_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)p;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = r->kind == API_RANGE_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = api_dev_visible(r->dev);
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)r->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = r->size;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = (unsigned long long)r->base;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(int *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    api_range_t r;
    if (!data || !ptr || !api_range_find((uintptr_t)ptr, 0, &r))
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, &r, (uintptr_t)ptr);
}

/* The size of an attribute's value, for the defaults cuPointerGetAttributes writes. */
static size_t pointer_attribute_size(CUpointer_attribute a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        return 8;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
        return 4;
    }
}

/* Never fails on a pointer CUDA does not know (PyTorch asks this of any tensor's data): each attribute then gets
 * its empty value (NULL context, memory type 0, device ordinal -2), as does one that does not apply. */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    api_range_t r;
    bool known = ptr && api_range_find((uintptr_t)ptr, 0, &r);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        if (known && pointer_attribute(data[i], attributes[i], &r, (uintptr_t)ptr) == CUDA_SUCCESS)
            continue;
        memset(data[i], 0, pointer_attribute_size(attributes[i]));
        if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            *(int *)data[i] = -2;
    }
    return CUDA_SUCCESS;
}

/* ---- copies and memsets ------------------------------------------------------------------------------- */
static bool dev_ok(CUdeviceptr p, size_t n)
{
    return p != 0 && api_range_find((uintptr_t)p, n, NULL);
}

static bool host_pinned(const void *p, size_t n)
{
    api_range_t r;
    return api_range_find((uintptr_t)p, n, &r) && (r.kind == API_RANGE_HOST || r.kind == API_RANGE_MANAGED);
}

enum { DIR_HTOD, DIR_DTOH, DIR_DTOD, DIR_ANY };

static CUresult copy(void *dst, const void *src, size_t n, int dir, CUstream h, bool async, bool ptds)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    api_stream_t *s;
    if (async) {
        rc = api_stream_resolve(h, ptds, &s);
    } else {
        CUcontext c;
        rc = api_ctx_current(&c);
        if (rc == CUDA_SUCCESS)
            rc = api_stream_resolve(NULL, ptds, &s);
        if (rc == CUDA_SUCCESS)
            rc = api_capture_check_unsafe();
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == 0)
        return CUDA_SUCCESS;
    bool dst_dev = dir == DIR_HTOD || dir == DIR_DTOD, src_dev = dir == DIR_DTOH || dir == DIR_DTOD;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    if (dir == DIR_ANY) {
        /* cuMemcpy: unified addressing, either side may be host or device memory. */
        dst_dev = api_range_find((uintptr_t)dst, n, NULL);
        src_dev = api_range_find((uintptr_t)src, n, NULL);
    } else if ((dst_dev && !dev_ok((CUdeviceptr)(uintptr_t)dst, n)) ||
               (src_dev && !dev_ok((CUdeviceptr)(uintptr_t)src, n))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    api_op_t *op = api_op_new(API_OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.bytes = n;
    bool capturing = api_stream_capturing(s);
    /* Synchronous copies return once complete. (A real device-to-device copy may return earlier; any call may
     * block, the documentation says, and waiting keeps programs written against a real GPU's timing correct
     * here, where the legacy stream's executor can be scheduled after another stream's.) */
    bool wait = !async;
    if (async && !capturing) {
        /* Pageable host memory: the source is staged before returning, and a copy into pageable memory
         * returns once it completed (the documented synchronous behaviour of async copies). */
        if (!src_dev && !host_pinned(src, n)) {
            op->u.copy.staged = malloc(n);
            if (!op->u.copy.staged) {
                api_op_free(op);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            memcpy(op->u.copy.staged, src, n);
        }
        if (!dst_dev && !host_pinned(dst, n))
            wait = true;
    }
    return api_launch_op(s, op, wait);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dstDevice, srcHost, ByteCount, DIR_HTOD, NULL, false, false);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dstDevice, srcHost, ByteCount, DIR_HTOD, NULL, false, true);
}
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOH, NULL, false, false);
}
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOH, NULL, false, true);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOD, NULL,
                false, false);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOD, NULL,
                false, true);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    return copy((void *)(uintptr_t)dstDevice, srcHost, ByteCount, DIR_HTOD, hStream, true, false);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    return copy((void *)(uintptr_t)dstDevice, srcHost, ByteCount, DIR_HTOD, hStream, true, true);
}
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return copy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOH, hStream, true, false);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return copy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOH, hStream, true, true);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return copy((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOD, hStream,
                true, false);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    return copy((void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, DIR_DTOD, hStream,
                true, true);
}
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, DIR_ANY, NULL, false, false);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, DIR_ANY, NULL, false, true);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, DIR_ANY, hStream, true, false);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, DIR_ANY, hStream, true, true);
}

static CUresult memset_any(CUdeviceptr dst, uint32_t val, unsigned elem, size_t n, CUstream h, bool async,
                           bool ptds)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    api_stream_t *s;
    rc = api_stream_resolve(async ? h : NULL, ptds, &s);
    if (rc == CUDA_SUCCESS && !async)
        rc = api_capture_check_unsafe();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == 0)
        return CUDA_SUCCESS;
    if (n > SIZE_MAX / elem || (dst % elem) != 0 || !dev_ok(dst, n * elem))
        return CUDA_ERROR_INVALID_VALUE;
    api_op_t *op = api_op_new(API_OP_MEMSET);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.set.dst = (void *)(uintptr_t)dst;
    op->u.set.val = val;
    op->u.set.elem = elem;
    op->u.set.n = n;
    /* Synchronous memsets return once complete (a real one may return earlier for device memory: see copy()). */
    return api_launch_op(s, op, !async);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return memset_any(dstDevice, uc, 1, N, NULL, false, false);
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return memset_any(dstDevice, uc, 1, N, NULL, false, true);
}
CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    return memset_any(dstDevice, us, 2, N, NULL, false, false);
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    return memset_any(dstDevice, us, 2, N, NULL, false, true);
}
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return memset_any(dstDevice, ui, 4, N, NULL, false, false);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return memset_any(dstDevice, ui, 4, N, NULL, false, true);
}
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, uc, 1, N, hStream, true, false);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, uc, 1, N, hStream, true, true);
}
CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, us, 2, N, hStream, true, false);
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, us, 2, N, hStream, true, true);
}
CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, ui, 4, N, hStream, true, false);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    return memset_any(dstDevice, ui, 4, N, hStream, true, true);
}

/* cuStreamWriteValue32: a 4-byte store ordered on the stream, as a one-word memset (flags only hint at
 * memory ordering, which simcuda's in-order streams always give). */
static CUresult write_value32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags, bool ptds)
{
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
        return CUDA_ERROR_INVALID_VALUE;
    return memset_any(addr, value, 4, 1, s, true, ptds);
}
CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value32(stream, addr, value, flags, false);
}
CUresult cuStreamWriteValue32_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value32(stream, addr, value, flags, true);
}
CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value32(stream, addr, value, flags, false);
}
CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return write_value32(stream, addr, value, flags, true);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuMemAlloc); API_ALIAS(cuMemAllocHost); API_ALIAS(cuMemAllocHost_v2); API_ALIAS(cuMemAllocManaged);
API_ALIAS(cuMemAllocPitch_v2); API_ALIAS(cuMemAlloc_v2); API_ALIAS(cuMemFree); API_ALIAS(cuMemFreeHost);
API_ALIAS(cuMemFree_v2); API_ALIAS(cuMemGetAddressRange_v2); API_ALIAS(cuMemGetInfo); API_ALIAS(cuMemGetInfo_v2);
API_ALIAS(cuMemHostAlloc); API_ALIAS(cuMemHostGetDevicePointer_v2); API_ALIAS(cuMemHostGetFlags);
API_ALIAS(cuMemHostRegister); API_ALIAS(cuMemHostRegister_v2); API_ALIAS(cuMemHostUnregister); API_ALIAS(cuMemcpy);
API_ALIAS(cuMemcpyAsync); API_ALIAS(cuMemcpyAsync_ptsz); API_ALIAS(cuMemcpyDtoDAsync_v2);
API_ALIAS(cuMemcpyDtoDAsync_v2_ptsz); API_ALIAS(cuMemcpyDtoD_v2); API_ALIAS(cuMemcpyDtoD_v2_ptds);
API_ALIAS(cuMemcpyDtoHAsync_v2); API_ALIAS(cuMemcpyDtoHAsync_v2_ptsz); API_ALIAS(cuMemcpyDtoH_v2);
API_ALIAS(cuMemcpyDtoH_v2_ptds); API_ALIAS(cuMemcpyHtoDAsync_v2); API_ALIAS(cuMemcpyHtoDAsync_v2_ptsz);
API_ALIAS(cuMemcpyHtoD_v2); API_ALIAS(cuMemcpyHtoD_v2_ptds); API_ALIAS(cuMemcpy_ptds); API_ALIAS(cuMemsetD16Async);
API_ALIAS(cuMemsetD16Async_ptsz); API_ALIAS(cuMemsetD16_v2); API_ALIAS(cuMemsetD16_v2_ptds);
API_ALIAS(cuMemsetD32Async); API_ALIAS(cuMemsetD32Async_ptsz); API_ALIAS(cuMemsetD32_v2);
API_ALIAS(cuMemsetD32_v2_ptds); API_ALIAS(cuMemsetD8Async); API_ALIAS(cuMemsetD8Async_ptsz);
API_ALIAS(cuMemsetD8_v2); API_ALIAS(cuMemsetD8_v2_ptds); API_ALIAS(cuPointerGetAttribute); API_ALIAS(cuPointerGetAttributes);
API_ALIAS(cuStreamWriteValue32); API_ALIAS(cuStreamWriteValue32_ptsz); API_ALIAS(cuStreamWriteValue32_v2);
API_ALIAS(cuStreamWriteValue32_v2_ptsz);
