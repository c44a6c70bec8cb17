/* capture.c - stream capture: the begin/end wrappers and what rota knows about captures in progress. */
#include "shim/shim-internal.h"

#include "shim/capture.h"
#include "shim/counters.h"
#include "shim/log.h"

#include <pthread.h>

/*
 * rota_capture_count is the number of captures rota saw begin and not end. While it is 0 (almost always)
 * nothing here runs: launches and allocations check one relaxed atomic and make no driver call. While it is
 * non-zero, whether a given stream captures is asked of the driver (cuStreamIsCapturing), which also knows the
 * streams that joined a capture through an event wait; a query that fails (the legacy stream while a blocking
 * stream captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) counts as capturing, so rota never waits there and the
 * driver returns its own error for the launch.
 *
 * The table below remembers each capture's stream, beginning thread and mode, for rota_thread_may_wait (an
 * allocation that names no stream). A table overflow keeps the count exact and only loses the thread/mode
 * detail (may_wait then answers false while any capture is in progress: never wrong, only cautious).
 */
#define CAPTURE_MAX 256

typedef struct capture {
    CUstream stream;          /* normalised (CU_STREAM_PER_THREAD for a per-thread stream) */
    pthread_t owner;          /* the thread that began it (the key for per-thread streams) */
    CUstreamCaptureMode mode;
    bool used;
} capture_t;

_Atomic unsigned rota_capture_count;
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static capture_t captures[CAPTURE_MAX];
static unsigned capture_untracked; /* captures counted but not in the table */

static bool capture_match(const capture_t *c, CUstream s)
{
    if (!c->used || c->stream != s) return false;
    return s != CU_STREAM_PER_THREAD || pthread_equal(c->owner, pthread_self());
}

bool rota_stream_capturing_slow(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = ROTA_REAL(cuStreamIsCapturing)(s, &st);
    return rc != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool rota_thread_may_wait(void)
{
    if (ROTA_LIKELY(atomic_load_explicit(&rota_capture_count, memory_order_relaxed) == 0)) return true;
    bool may = true;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&capture_lock);
    if (capture_untracked) may = false;
    for (unsigned i = 0; i < CAPTURE_MAX && may; i++) {
        if (!captures[i].used) continue;
        if (captures[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL || pthread_equal(captures[i].owner, self)) may = false;
    }
    pthread_mutex_unlock(&capture_lock);
    return may;
}

/* A fork child starts with no capture: the table resets in it. Registered at the first capture (every other use of
 * the lock waits for a capture to be counted), so a process that never captures registers nothing; the shim's own
 * fork handler need not know this file. */
static void capture_fork_child(void)
{
    /* A child has none of the parent's streams in capture. */
    pthread_mutex_init(&capture_lock, NULL);
    for (unsigned i = 0; i < CAPTURE_MAX; i++) captures[i].used = false;
    capture_untracked = 0;
    atomic_store_explicit(&rota_capture_count, 0, memory_order_relaxed);
}

static pthread_once_t capture_fork_once = PTHREAD_ONCE_INIT;

static void capture_fork_register(void)
{
    if (pthread_atfork(NULL, NULL, capture_fork_child) != 0)
        rota_log(ROTA_LOG_WARN, "pthread_atfork failed: a fork child may keep its parent's captures counted");
}

static void capture_begun(CUstream s, CUstreamCaptureMode mode)
{
    rota_count(ROTA_EV_CAPTURE_BEGIN);
    pthread_once(&capture_fork_once, capture_fork_register);
    pthread_mutex_lock(&capture_lock);
    unsigned i;
    for (i = 0; i < CAPTURE_MAX && captures[i].used; i++) {}
    if (i < CAPTURE_MAX) captures[i] = (capture_t){.stream = s, .owner = pthread_self(), .mode = mode, .used = true};
    else capture_untracked++;
    atomic_fetch_add_explicit(&rota_capture_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&capture_lock);
}

/* After cuStreamEndCapture returned rc on s: forget the capture if it is over. It is over on success and on
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; other errors (wrong thread, not capturing) leave it as it was, which
 * the driver confirms. */
static void capture_maybe_ended(CUstream s, CUresult rc)
{
    if (atomic_load_explicit(&rota_capture_count, memory_order_relaxed) == 0) return;
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        if (ROTA_REAL(cuStreamIsCapturing)(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) return;
    }
    pthread_mutex_lock(&capture_lock);
    bool found = false;
    for (unsigned i = 0; i < CAPTURE_MAX; i++) {
        if (capture_match(&captures[i], s)) {
            captures[i].used = false;
            found = true;
            break;
        }
    }
    if (!found && capture_untracked) {
        capture_untracked--;
        found = true;
    }
    if (found) {
        atomic_fetch_sub_explicit(&rota_capture_count, 1, memory_order_relaxed);
        rota_count(ROTA_EV_CAPTURE_END);
    }
    pthread_mutex_unlock(&capture_lock);
}

/* ---- the wrappers ---- */
#define ROTA_WRAP_BEGIN(name, pt, params, args, mode)                          \
    CUresult CUDAAPI name params                                             \
    {                                                                        \
        ROTA_ENTER(name, args);                                              \
        CUresult rc = ROTA_REAL(name) args;                                  \
        if (rc == CUDA_SUCCESS) capture_begun(rota_stream_norm(hStream, pt), mode); \
        ROTA_LEAVE();                                                        \
        return rc;                                                           \
    }                                                                        \
    ROTA_SELF(name)

/* The first cuStreamBeginCapture had no mode argument: it captures in global mode. */
ROTA_WRAP_BEGIN(cuStreamBeginCapture, 0, (CUstream hStream), (hStream), CU_STREAM_CAPTURE_MODE_GLOBAL)
ROTA_WRAP_BEGIN(cuStreamBeginCapture_ptsz, 1, (CUstream hStream), (hStream), CU_STREAM_CAPTURE_MODE_GLOBAL)
ROTA_WRAP_BEGIN(cuStreamBeginCapture_v2, 0, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode), mode)
ROTA_WRAP_BEGIN(cuStreamBeginCapture_v2_ptsz, 1, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode), mode)
ROTA_WRAP_BEGIN(cuStreamBeginCaptureToGraph, 0,
                (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                 const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
                (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), mode)
ROTA_WRAP_BEGIN(cuStreamBeginCaptureToGraph_ptsz, 1,
                (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                 const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
                (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), mode)

#define ROTA_WRAP_END(name, pt)                                              \
    CUresult CUDAAPI name(CUstream hStream, CUgraph *phGraph)                \
    {                                                                        \
        ROTA_ENTER(name, (hStream, phGraph));                                \
        CUresult rc = ROTA_REAL(name)(hStream, phGraph);                     \
        capture_maybe_ended(rota_stream_norm(hStream, pt), rc);              \
        ROTA_LEAVE();                                                        \
        return rc;                                                           \
    }                                                                        \
    ROTA_SELF(name)

ROTA_WRAP_END(cuStreamEndCapture, 0)
ROTA_WRAP_END(cuStreamEndCapture_ptsz, 1)
