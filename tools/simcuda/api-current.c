/* api-current.c - the calling thread's context stack (cuCtxGet/Set/Push/PopCurrent) and the checks every call
 * makes of a context: alive, current, its sticky error. */
#include "tools/simcuda/api-internal.h"

/* The calling thread's context stack; a generation mismatch (fork, re-init) empties it. */
static __thread CUcontext tls_stack[API_CTX_STACK_MAX];
static __thread int tls_depth;
static __thread uint64_t tls_gen;

static void tls_check(void)
{
    if (tls_gen != api_gen()) {
        tls_depth = 0;
        tls_gen = api_gen();
    }
}

bool api_ctx_alive(CUcontext ctx)
{
    return ctx && api_handle_is(ctx, API_KIND_CTX);
}

CUresult api_ctx_current(CUcontext *out)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    tls_check();
    if (tls_depth == 0 || !api_ctx_alive(tls_stack[tls_depth - 1]))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = tls_stack[tls_depth - 1];
    return CUDA_SUCCESS;
}

void api_ctx_set_sticky(CUcontext ctx, CUresult err)
{
    pthread_mutex_lock(&ctx->lock);
    if (ctx->sticky == CUDA_SUCCESS)
        ctx->sticky = err;
    pthread_mutex_unlock(&ctx->lock);
}

CUresult api_ctx_sticky(CUcontext ctx)
{
    /* Under MPS another client's fatal fault is this context's too (node.h); one atomic load in shm. */
    int fault = simnode_ctx_fault_of(ctx->dev, ctx->node_id);
    pthread_mutex_lock(&ctx->lock);
    if (fault && ctx->sticky == CUDA_SUCCESS)
        ctx->sticky = (CUresult)fault;
    CUresult rc = ctx->sticky;
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

bool api_ctx_stack_full(void)
{
    tls_check();
    return tls_depth == API_CTX_STACK_MAX;
}

void api_ctx_stack_push(CUcontext c)
{
    tls_check();
    tls_stack[tls_depth++] = c;
}

void api_ctx_stack_remove(CUcontext c)
{
    tls_check();
    int j = 0;
    for (int i = 0; i < tls_depth; i++)
        if (tls_stack[i] != c)
            tls_stack[j++] = tls_stack[i];
    tls_depth = j;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    tls_check();
    *pctx = tls_depth ? tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    tls_check();
    if (!ctx) {
        if (tls_depth)
            tls_depth--;
        return CUDA_SUCCESS;
    }
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth)
        tls_stack[tls_depth - 1] = ctx;
    else
        tls_stack[tls_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!api_ctx_alive(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    tls_check();
    if (tls_depth == API_CTX_STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls_stack[tls_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return api_cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    tls_check();
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = tls_stack[--tls_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return api_cuCtxPopCurrent_v2(pctx);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuCtxGetCurrent); API_ALIAS(cuCtxPopCurrent); API_ALIAS(cuCtxPopCurrent_v2); API_ALIAS(cuCtxPushCurrent);
API_ALIAS(cuCtxPushCurrent_v2); API_ALIAS(cuCtxSetCurrent);
