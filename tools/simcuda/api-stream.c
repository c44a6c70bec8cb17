/* api-stream.c - the stream API: create, destroy, query, synchronize, priorities, event records and waits,
 * host functions; and api_launch_op, the submission path of every stream-ordered call (capture or queue). */
#include "tools/simcuda/api-internal.h"

#include <stdlib.h>

CUresult api_launch_op(api_stream_t *s, api_op_t *op, bool wait)
{
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;    /* api_op_new failed: callers pass its result straight on */
    bool taken = false;
    CUresult rc = api_capture_record(s, op, &taken);
    if (taken || rc != CUDA_SUCCESS) {
        if (!taken)
            api_op_free(op);
        return rc;
    }
    if (s->kind == API_STREAM_LEGACY && (rc = api_capture_check_legacy(s->ctx)) != CUDA_SUCCESS) {
        api_op_free(op);
        return rc;
    }
    uint64_t seq;
    if (api_stream_submit(s, op, &seq) < 0) {
        api_op_free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (wait) {
        api_stream_wait_seq(s, seq);
        return api_ctx_sticky(s->ctx);
    }
    return CUDA_SUCCESS;
}

/* ---- the API ------------------------------------------------------------------------------------------ */
static CUresult stream_create(CUstream *phStream, unsigned int Flags, int priority)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    /* Out-of-range priorities are clamped, as documented. */
    if (priority > 0)
        priority = 0;
    if (priority < -5)
        priority = -5;
    api_stream_t *s = api_stream_new(c, Flags, priority, API_STREAM_USER);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    api_stream_reap(c);
    pthread_mutex_lock(&c->lock);
    s->next = c->streams;
    c->streams = s;
    pthread_mutex_unlock(&c->lock);
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    return stream_create(phStream, flags, priority);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD ||
        !api_handle_is(hStream, API_KIND_STREAM) || hStream->kind != API_STREAM_USER)
        return CUDA_ERROR_INVALID_HANDLE;
    api_stream_t *s = hStream;
    CUcontext c = s->ctx;
    api_capture_stream_gone(s);
    api_handle_del(s);
    pthread_mutex_lock(&c->lock);
    for (api_stream_t **pp = &c->streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    s->next = c->zombies;
    c->zombies = s;
    s->refs--;
    pthread_mutex_lock(&s->lock);
    s->destroyed = true;
    s->stopping = true;             /* the executor drains what is queued, then exits */
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&c->lock);
    api_stream_reap(c);                /* joins s now if it has no work left, else it drains first */
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream)
{
    return api_cuStreamDestroy_v2(hStream);
}

static CUresult stream_synchronize(CUstream h, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (api_stream_capturing(s)) {
        api_capture_invalidate_stream(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->kind == API_STREAM_LEGACY && (rc = api_capture_check_legacy(s->ctx)) != CUDA_SUCCESS)
        return rc;
    api_stream_sync(s);
    if (s->kind == API_STREAM_LEGACY)
        api_stream_reap(s->ctx);    /* it waited for the destroyed blocking streams too */
    api_pool_trim_all();
    return api_ctx_sticky(s->ctx);
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_synchronize(hStream, false);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_synchronize(hStream, true);
}

static CUresult stream_query(CUstream h, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (api_stream_capturing(s)) {
        api_capture_invalidate_stream(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (!api_stream_idle(s))
        return CUDA_ERROR_NOT_READY;
    return api_ctx_sticky(s->ctx);
}

CUresult cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, false);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, true);
}

/* The checks of the stream getters: *s is the stream h names and out, where the answer goes, is set. */
static CUresult stream_getter(CUstream h, bool ptds, const void *out, api_stream_t **s)
{
    CUresult rc = api_stream_resolve(h, ptds, s);
    if (rc != CUDA_SUCCESS)
        return rc;
    return out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult stream_get_priority(CUstream h, int *priority, bool ptds)
{
    api_stream_t *s;
    CUresult rc = stream_getter(h, ptds, priority, &s);
    if (rc == CUDA_SUCCESS)
        *priority = s->prio;
    return rc;
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    return stream_get_priority(hStream, priority, false);
}

CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
    return stream_get_priority(hStream, priority, true);
}

static CUresult stream_get_flags(CUstream h, unsigned int *flags, bool ptds)
{
    api_stream_t *s;
    CUresult rc = stream_getter(h, ptds, flags, &s);
    if (rc == CUDA_SUCCESS)
        *flags = s->flags;
    return rc;
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    return stream_get_flags(hStream, flags, false);
}

CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return stream_get_flags(hStream, flags, true);
}

static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, bool ptds)
{
    api_stream_t *s;
    CUresult rc = stream_getter(h, ptds, pctx, &s);
    if (rc == CUDA_SUCCESS)
        *pctx = s->ctx;
    return rc;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    return stream_get_ctx(hStream, pctx, false);
}

CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return stream_get_ctx(hStream, pctx, true);
}

/* CUDA 12.5: the green context too; simcuda has none, so it is NULL and the context is set. */
static CUresult stream_get_ctx_v2(CUstream h, CUcontext *pctx, CUgreenCtx *pgreen, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pctx && !pgreen)
        return CUDA_ERROR_INVALID_VALUE;
    if (pctx)
        *pctx = s->ctx;
    if (pgreen)
        *pgreen = NULL;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return stream_get_ctx_v2(hStream, pCtx, pGreenCtx, false);
}

CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return stream_get_ctx_v2(hStream, pCtx, pGreenCtx, true);
}

static CUresult stream_get_id(CUstream h, unsigned long long *id, bool ptds)
{
    api_stream_t *s;
    CUresult rc = stream_getter(h, ptds, id, &s);
    if (rc == CUDA_SUCCESS)
        *id = s->id;
    return rc;
}

CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    return stream_get_id(hStream, streamId, false);
}

CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
    return stream_get_id(hStream, streamId, true);
}

static CUresult event_record(CUevent e, CUstream h, unsigned flags, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!e || !api_handle_is(e, API_KIND_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (api_stream_capturing(s)) {
        api_capture_event_record(s, e);
        return CUDA_SUCCESS;
    }
    if (s->kind == API_STREAM_LEGACY && (rc = api_capture_check_legacy(s->ctx)) != CUDA_SUCCESS)
        return rc;
    api_event_uncapture(e);
    api_op_t *op = api_op_new(API_OP_EVENT_RECORD);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (api_event_record_gen(e, &op->u.ev.gen) < 0)
        goto out_free;           /* the op holds no event reference yet */
    op->u.ev.ev = e;
    if (api_stream_submit(s, op, NULL) < 0)
        goto out_complete;
    return CUDA_SUCCESS;
out_complete:
    /* Never queued: the new generation must not stay pending forever; api_op_free drops its reference. */
    api_event_complete(e, op->u.ev.gen, 0);
    api_op_free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
out_free:
    free(op);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, false);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, true);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, false);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, true);
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned int flags, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!e || !api_handle_is(e, API_KIND_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    bool handled = false;
    if ((rc = api_capture_wait_event(s, e, &handled)) != CUDA_SUCCESS || handled)
        return rc;
    pthread_mutex_lock(&e->lock);
    uint64_t gen = e->rec_gen;
    bool done = api_event_done_locked(e, gen);
    pthread_mutex_unlock(&e->lock);
    if (done)
        return CUDA_SUCCESS;        /* never recorded, or already complete: nothing to wait for */
    api_op_t *op = api_op_new(API_OP_WAIT_EVENT);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.ev.ev = e;
    op->u.ev.gen = gen;
    api_event_ref(e);
    return api_launch_op(s, op, false);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, false);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, true);
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *userData, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    api_op_t *op = api_op_new(API_OP_HOSTFN);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.data = userData;
    return api_launch_op(s, op, false);
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host_func(hStream, fn, userData, false);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host_func(hStream, fn, userData, true);
}

/* cuStreamAddCallback: the callback gets the stream it was added to and the status. */
typedef struct stream_callback {
    CUstreamCallback cb;
    CUstream h;
    void *data;
} stream_callback_t;

static void CUDA_CB run_callback(void *arg)
{
    stream_callback_t *c = arg;
    c->cb(c->h, CUDA_SUCCESS, c->data);
    free(c);
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void *userData, unsigned int flags, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (api_stream_capturing(s)) {
        api_capture_invalidate_stream(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;     /* not capturable: use cuLaunchHostFunc */
    }
    stream_callback_t *c = api_calloc(1, sizeof(*c));
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->cb = cb;
    c->h = h;
    c->data = userData;
    api_op_t *op = api_op_new(API_OP_HOSTFN);
    if (!op) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_free;
    }
    op->u.host.fn = run_callback;
    op->u.host.data = c;
    if ((rc = api_launch_op(s, op, false)) != CUDA_SUCCESS)
        goto out_free;           /* the op was freed, its callback never runs */
    return CUDA_SUCCESS;
out_free:
    free(c);
    return rc;
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, false);
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, true);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuEventRecord); API_ALIAS(cuEventRecordWithFlags); API_ALIAS(cuEventRecordWithFlags_ptsz);
API_ALIAS(cuEventRecord_ptsz); API_ALIAS(cuLaunchHostFunc); API_ALIAS(cuLaunchHostFunc_ptsz);
API_ALIAS(cuStreamAddCallback); API_ALIAS(cuStreamAddCallback_ptsz); API_ALIAS(cuStreamCreate);
API_ALIAS(cuStreamCreateWithPriority); API_ALIAS(cuStreamDestroy); API_ALIAS(cuStreamDestroy_v2);
API_ALIAS(cuStreamGetCtx); API_ALIAS(cuStreamGetCtx_ptsz); API_ALIAS(cuStreamGetCtx_v2);
API_ALIAS(cuStreamGetCtx_v2_ptsz); API_ALIAS(cuStreamGetFlags); API_ALIAS(cuStreamGetFlags_ptsz);
API_ALIAS(cuStreamGetId); API_ALIAS(cuStreamGetId_ptsz); API_ALIAS(cuStreamGetPriority);
API_ALIAS(cuStreamGetPriority_ptsz); API_ALIAS(cuStreamQuery); API_ALIAS(cuStreamQuery_ptsz);
API_ALIAS(cuStreamSynchronize); API_ALIAS(cuStreamSynchronize_ptsz); API_ALIAS(cuStreamWaitEvent);
API_ALIAS(cuStreamWaitEvent_ptsz);
