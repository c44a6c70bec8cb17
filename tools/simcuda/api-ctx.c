/* api-ctx.c - contexts: every cuCtxCreate version, destroy, synchronize, their properties, primary contexts. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;   /* primary-context state, ctx ids */
static CUcontext primaries[SIMNODE_MAX_DEVICES];
static unsigned long long ctx_next_id = 1;
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER; /* serialises retain/release/reset */

int api_ctx_reset_primaries(void)
{
    /* Called by cuInit with its lock held. A forked child's old slots stay allocated, since the parent's handles
     * that the child still holds may be checked (api_handle_is) and must not point at freed memory; each new slot
     * links the one it replaces, so they stay reachable (no leak report) rather than lost. */
    CUcontext fresh[SIMNODE_MAX_DEVICES];
    int n;
    for (n = 0; n < SIMNODE_MAX_DEVICES; n++) {
        if (!(fresh[n] = api_calloc(1, sizeof(*fresh[n]))))
            goto out_free;
    }
    pthread_mutex_init(&ctx_lock, NULL);
    pthread_mutex_init(&primary_lock, NULL);
    for (int i = 0; i < SIMNODE_MAX_DEVICES; i++) {
        CUcontext c = fresh[i];
        c->dev = i;
        c->primary = true;
        c->abandoned = primaries[i];
        pthread_mutex_init(&c->lock, NULL);
        primaries[i] = c;
    }
    return 0;
out_free:
    while (n-- > 0)
        free(fresh[n]);
    return -ENOMEM;
}

static CUresult check_flags(unsigned int flags)
{
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    switch (flags & CU_CTX_SCHED_MASK) {
    case CU_CTX_SCHED_AUTO:
    case CU_CTX_SCHED_SPIN:
    case CU_CTX_SCHED_YIELD:
    case CU_CTX_SCHED_BLOCKING_SYNC:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Brings a context to life: node context, legacy stream, registry. */
static CUresult ctx_start(CUcontext c, int dev, unsigned flags)
{
    uint32_t id;
    int rc = simnode_ctx_open(dev, &id);
    if (rc == -EAGAIN)
        return CUDA_ERROR_MPS_SERVER_NOT_READY; /* recovering from a client's fatal fault */
    if (rc < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->legacy = NULL;
    c->dev = dev;
    c->node_id = id;
    c->flags = flags;
    c->sticky = CUDA_SUCCESS;
    c->streams = NULL;
    c->zombies = NULL;
    c->modules = NULL;
    pthread_mutex_lock(&ctx_lock);
    c->id = ctx_next_id++;
    pthread_mutex_unlock(&ctx_lock);
    if (!(c->legacy = api_stream_new(c, 0, 0, API_STREAM_LEGACY)))
        goto out_close;
    if (api_handle_add(c, API_KIND_CTX) < 0)
        goto out_legacy;
    c->active = true;
    return CUDA_SUCCESS;
out_legacy:
    api_stream_destroy_all(c, api_capture_stream_gone);  /* frees the legacy stream, which never ran anything */
out_close:
    simnode_ctx_close(dev, id);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void free_range(const api_range_t *r)
{
    if (r->kind == API_RANGE_HOST && r->owner)
        return;                  /* registered user memory: only forgotten, never freed */
    simnode_mem_unreserve(r->dev, r->charged);
    free((void *)r->base);
}

/* Waits for and frees everything the context owns; the struct itself survives (primaries reuse it). */
static void ctx_stop(CUcontext c)
{
    api_handle_del(c);
    c->active = false;
    api_stream_destroy_all(c, api_capture_stream_gone);
    api_module_drop_ctx(c);
    api_range_drop_ctx(c, free_range);
    simnode_ctx_close(c->dev, c->node_id);
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_flags(flags)) != CUDA_SUCCESS)
        return rc;
    if ((rc = api_check_device(dev)) != CUDA_SUCCESS)
        return rc;
    if (api_ctx_stack_full())
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUcontext c = api_calloc(1, sizeof(*c));
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&c->lock, NULL);
    if ((rc = ctx_start(c, api_dev_phys(dev), flags)) != CUDA_SUCCESS) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return rc;
    }
    api_ctx_stack_push(c);
    *pctx = c;
    return CUDA_SUCCESS;
}

static CUresult check_affinity(const CUexecAffinityParam *p, int n, CUdevice dev)
{
    if (n < 0 || (n > 0 && !p))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++) {
        if (p[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
            return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
        const simnode_devinfo_t *d = simnode_device(api_dev_phys(dev));
        if (p[i].param.smCount.val == 0 || (d && p[i].param.smCount.val > (unsigned)d->sm_count))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                        CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc == CUDA_SUCCESS)
        rc = check_affinity(paramsArray, numParams, dev);
    return rc == CUDA_SUCCESS ? ctx_create(pctx, flags, dev) : rc;
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctxCreateParams) {
        if (ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams)
            return CUDA_ERROR_INVALID_VALUE;
        if (ctxCreateParams->cigParams)
            return CUDA_ERROR_NOT_SUPPORTED;
        rc = check_affinity(ctxCreateParams->execAffinityParams, ctxCreateParams->numExecAffinityParams, dev);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api_ctx_alive(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    api_ctx_stack_remove(ctx);
    ctx_stop(ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    return api_cuCtxDestroy_v2(ctx);
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    CUcontext c;
    if (!device) {
        CUresult rc = api_ready();
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    *device = api_dev_visible(c->dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!ctx)
        return api_cuCtxGetDevice(device);
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = api_dev_visible(ctx->dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctx && (rc = api_ctx_current(&ctx)) != CUDA_SUCCESS)
        return rc;
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctxId = ctx->id;
    return CUDA_SUCCESS;
}

/* Does the context have a capturing stream? Synchronising it would be illegal. */
static bool ctx_capturing(CUcontext c)
{
    bool cap = false;
    pthread_mutex_lock(&c->lock);
    for (api_stream_t *s = c->streams; s; s = s->next) {
        if (api_stream_capturing(s)) {
            api_capture_invalidate_stream(s);
            cap = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return cap;
}

static CUresult ctx_synchronize(CUcontext c)
{
    if (ctx_capturing(c))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult rc = api_ctx_sync(c);
    api_pool_trim_all();
    return rc;
}

CUresult cuCtxSynchronize(void)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    return rc != CUDA_SUCCESS ? rc : ctx_synchronize(c);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    if (!ctx)
        return api_cuCtxSynchronize();
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_synchronize(ctx);
}

/* Lower is more urgent: 0 (least) .. -5 (greatest), as on Hopper. */
CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* ---- primary contexts --------------------------------------------------------------------------------- */
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&primary_lock);
    CUcontext c = primaries[api_dev_phys(dev)];
    if (!c->active)
        rc = ctx_start(c, c->dev, c->flags);
    if (rc == CUDA_SUCCESS) {
        c->primary_refs++;
        *pctx = c;
    }
    pthread_mutex_unlock(&primary_lock);
    return rc;
}

static CUresult primary_get(CUdevice dev, CUcontext *out)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&ctx_lock);
    *out = primaries[api_dev_phys(dev)];
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUcontext c;
    CUresult rc = primary_get(dev, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&primary_lock);
    if (!c->active || c->primary_refs == 0) {
        pthread_mutex_unlock(&primary_lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (--c->primary_refs == 0)
        ctx_stop(c);
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return api_cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUcontext c;
    CUresult rc = primary_get(dev, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&primary_lock);
    if (c->active)
        ctx_stop(c);
    c->primary_refs = 0;
    c->flags = 0;
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return api_cuDevicePrimaryCtxReset_v2(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUcontext c;
    CUresult rc = primary_get(dev, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&primary_lock);
    *flags = c->flags;
    *active = c->active ? 1 : 0;
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUcontext c;
    CUresult rc = primary_get(dev, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = check_flags(flags)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&primary_lock);
    c->flags = flags;
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

/* Before CUDA 11 the flags of an active primary context could not change. */
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    CUcontext c;
    CUresult rc = primary_get(dev, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&primary_lock);
    bool active = c->active;
    pthread_mutex_unlock(&primary_lock);
    return active ? CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE : api_cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuCtxCreate); API_ALIAS(cuCtxCreate_v2); API_ALIAS(cuCtxCreate_v3); API_ALIAS(cuCtxCreate_v4);
API_ALIAS(cuCtxDestroy); API_ALIAS(cuCtxDestroy_v2); API_ALIAS(cuCtxGetDevice); API_ALIAS(cuCtxGetDevice_v2);
API_ALIAS(cuCtxGetFlags); API_ALIAS(cuCtxGetId); API_ALIAS(cuCtxGetStreamPriorityRange); API_ALIAS(cuCtxSynchronize);
API_ALIAS(cuCtxSynchronize_v2); API_ALIAS(cuDevicePrimaryCtxGetState); API_ALIAS(cuDevicePrimaryCtxRelease);
API_ALIAS(cuDevicePrimaryCtxRelease_v2); API_ALIAS(cuDevicePrimaryCtxReset); API_ALIAS(cuDevicePrimaryCtxReset_v2);
API_ALIAS(cuDevicePrimaryCtxRetain); API_ALIAS(cuDevicePrimaryCtxSetFlags); API_ALIAS(cuDevicePrimaryCtxSetFlags_v2);
