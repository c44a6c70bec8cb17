/* capture.h - what rota knows about stream captures in progress (capture.c), for the launch and memory wrappers. */
#ifndef ROTA_SHIM_CAPTURE_H
#define ROTA_SHIM_CAPTURE_H

#include "shim/real.h" /* first: it includes cuda.h with __CUDA_API_VERSION_INTERNAL */

#include <stdatomic.h>
#include <stdbool.h>

/* How many captures are in progress (streams rota saw begin and not yet end). */
extern _Atomic unsigned rota_capture_count;
bool rota_stream_capturing_slow(CUstream s);
/* Whether s (normalised, see rota_stream_norm) is capturing; no driver call while nothing captures. */
static inline bool rota_stream_capturing(CUstream s)
{
    if (ROTA_LIKELY(atomic_load_explicit(&rota_capture_count, memory_order_relaxed) == 0)) return false;
    return rota_stream_capturing_slow(s);
}
/* Whether an allocation made by this thread (not on a stream) may queue: not while this thread captures
 * or a global-mode capture is in progress anywhere. */
bool rota_thread_may_wait(void);

/* A per-thread-default-stream entry point's NULL stream is this thread's per-thread stream. */
static inline CUstream rota_stream_norm(CUstream s, int pt)
{
    return pt && s == NULL ? CU_STREAM_PER_THREAD : s;
}

#endif
