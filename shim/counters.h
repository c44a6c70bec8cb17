/* counters.h - test-only hit counters of every wrapper and hook (counters.c), enabled by ROTA_TEST_COUNTERS. */
#ifndef ROTA_SHIM_COUNTERS_H
#define ROTA_SHIM_COUNTERS_H

#include "shim/real.h" /* first: it includes cuda.h with __CUDA_API_VERSION_INTERNAL */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum rota_event {
    ROTA_EV_PROCESS_INIT = ROTA_FN_COUNT, /* client_process_init calls */
    ROTA_EV_LAUNCH_GATE,                  /* client_launch_gate calls */
    ROTA_EV_LAUNCH_AFTER,                 /* client_launch_after calls */
    ROTA_EV_LAUNCH_CAPTURING,             /* launches let through ungated because their stream captures */
    ROTA_EV_MEM_RESERVE,                  /* client_mem_reserve calls */
    ROTA_EV_MEM_NOWAIT,                   /* ... of which with may_wait = false */
    ROTA_EV_MEM_COMMIT,
    ROTA_EV_MEM_ABORT,
    ROTA_EV_MEM_RELEASE,
    ROTA_EV_MEM_VIEW,
    ROTA_EV_CAPTURE_BEGIN,                /* captures rota saw start (and tracks) */
    ROTA_EV_CAPTURE_END,                  /* captures rota saw end */
    ROTA_COUNTER_COUNT
};
extern bool rota_counting;
extern _Atomic uint64_t rota_hits[ROTA_COUNTER_COUNT];
static inline void rota_count(unsigned i)
{
    if (ROTA_UNLIKELY(rota_counting)) atomic_fetch_add_explicit(&rota_hits[i], 1, memory_order_relaxed);
}
void rota_counters_init(const char *path);
/* The count of a wrapper (by exact name) or an event ("rota.launch_gate" ...); UINT64_MAX if unknown. What
 * cuGetProcAddress("rota_test_counters") returns when ROTA_TEST_COUNTERS is set. */
uint64_t rota_test_counter(const char *name);
typedef uint64_t (*rota_test_counter_fn)(const char *name);
#define ROTA_TEST_COUNTERS_SYMBOL "rota_test_counters"

#endif
