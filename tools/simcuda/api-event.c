/* api-event.c - events: the generations records make (api-stream.c) and the executor completes; query,
 * synchronize (condition variable), timing. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

void api_event_ref(CUevent e)
{
    pthread_mutex_lock(&e->lock);
    e->refs++;
    pthread_mutex_unlock(&e->lock);
}

void api_event_unref(CUevent e)
{
    pthread_mutex_lock(&e->lock);
    bool last = --e->refs == 0;
    pthread_mutex_unlock(&e->lock);
    if (last) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        free(e->pending);
        free(e);
    }
}

/* Each record is a generation; a wait or query looks at one generation, so a later record completing first
 * (on another stream) does not release a wait on an earlier one. */
int api_event_record_gen(CUevent e, uint64_t *genp)
{
    pthread_mutex_lock(&e->lock);
    if (e->npending == e->cap_pending) {
        size_t cap = e->cap_pending ? 2 * e->cap_pending : 4;
        uint64_t *v = api_calloc(cap, sizeof(*v));
        if (!v) {
            pthread_mutex_unlock(&e->lock);
            return -ENOMEM;
        }
        for (size_t i = 0; i < e->npending; i++)
            v[i] = e->pending[i];
        free(e->pending);
        e->pending = v;
        e->cap_pending = cap;
    }
    uint64_t gen = ++e->rec_gen;
    e->pending[e->npending++] = gen;
    e->refs++;                   /* held by the queued record */
    pthread_mutex_unlock(&e->lock);
    *genp = gen;
    return 0;
}

bool api_event_done_locked(CUevent e, uint64_t gen)
{
    for (size_t i = 0; i < e->npending; i++)
        if (e->pending[i] == gen)
            return false;
    return true;
}

void api_event_complete(CUevent e, uint64_t gen, uint64_t time_ns)
{
    uint64_t now = api_now_ns();
    if (time_ns && time_ns < now) now = time_ns;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->npending; i++) {
        if (e->pending[i] == gen) {
            e->pending[i] = e->pending[--e->npending];
            break;
        }
    }
    if (gen == e->rec_gen)
        e->time_ns = now;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void api_event_wait_gen(CUevent e, uint64_t gen)
{
    pthread_mutex_lock(&e->lock);
    while (!api_event_done_locked(e, gen))
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    CUevent e = api_calloc(1, sizeof(*e));
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = c;
    e->flags = Flags;
    e->refs = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    if (api_handle_add(e, API_KIND_EVENT) < 0) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* The checks of the calls that take one event: the driver is ready and e is a live event. */
static CUresult event_check(CUevent e)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    return e && api_handle_is(e, API_KIND_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Forgets the capture e was last recorded in (it is recorded outside one now, or destroyed). */
void api_event_uncapture(CUevent e)
{
    pthread_mutex_lock(&api_capture_lock);
    e->cap = NULL;
    e->cap_stream = NULL;
    pthread_mutex_unlock(&api_capture_lock);
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult rc = event_check(hEvent);
    if (rc != CUDA_SUCCESS)
        return rc;
    api_handle_del(hEvent);
    api_event_uncapture(hEvent);
    /* Queued records and waits hold references: the event is freed when the last of them ran. */
    api_event_unref(hEvent);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent)
{
    return api_cuEventDestroy_v2(hEvent);
}

static bool event_in_capture(CUevent e)
{
    pthread_mutex_lock(&api_capture_lock);
    bool cap = e->cap != NULL;
    pthread_mutex_unlock(&api_capture_lock);
    return cap;
}

CUresult cuEventQuery(CUevent hEvent)
{
    CUresult rc = event_check(hEvent);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event_in_capture(hEvent))
        return CUDA_ERROR_CAPTURED_EVENT;   /* last recorded in a capturing stream */
    pthread_mutex_lock(&hEvent->lock);
    bool done = api_event_done_locked(hEvent, hEvent->rec_gen);
    pthread_mutex_unlock(&hEvent->lock);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult rc = event_check(hEvent);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (event_in_capture(hEvent))
        return CUDA_ERROR_CAPTURED_EVENT;   /* last recorded in a capturing stream */
    pthread_mutex_lock(&hEvent->lock);
    uint64_t gen = hEvent->rec_gen;
    pthread_mutex_unlock(&hEvent->lock);
    /* Blocking-sync and default events both sleep on the condition variable: no spinning on a shared host. */
    api_event_wait_gen(hEvent, gen);
    api_pool_trim_all();
    return api_ctx_alive(hEvent->ctx) ? api_ctx_sticky(hEvent->ctx) : CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hStart || !hEnd || !api_handle_is(hStart, API_KIND_EVENT) || !api_handle_is(hEnd, API_KIND_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (event_in_capture(hStart) || event_in_capture(hEnd))
        return CUDA_ERROR_CAPTURED_EVENT;   /* last recorded in a capturing stream */
    uint64_t t[2];
    CUevent ev[2] = { hStart, hEnd };
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&ev[i]->lock);
        bool recorded = ev[i]->rec_gen > 0, done = api_event_done_locked(ev[i], ev[i]->rec_gen);
        t[i] = ev[i]->time_ns;
        pthread_mutex_unlock(&ev[i]->lock);
        if (!recorded)
            return CUDA_ERROR_INVALID_HANDLE;
        if (!done)
            return CUDA_ERROR_NOT_READY;
    }
    *pMilliseconds = (float)(((double)t[1] - (double)t[0]) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return api_cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuEventCreate); API_ALIAS(cuEventDestroy); API_ALIAS(cuEventDestroy_v2); API_ALIAS(cuEventElapsedTime);
API_ALIAS(cuEventElapsedTime_v2); API_ALIAS(cuEventQuery); API_ALIAS(cuEventSynchronize);
