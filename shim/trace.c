/* trace.c - librota's ROTA_TRACE events: opens the file lazily on the first event, one write() per line. */
#include "shim/trace.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "runtime/lib/trace.h"
#include "shim/log.h"
#include "shim/options.h"

#define TRACE_UNOPENED (-2)
#define TRACE_OFF (-1)

static _Atomic int trace_fd = TRACE_UNOPENED; /* the file, TRACE_OFF, or TRACE_UNOPENED */

/* The fd, opening it the first time (no lock: a thread that loses the race closes its own descriptor). */
static int trace_get(void)
{
    int fd = atomic_load_explicit(&trace_fd, memory_order_acquire);
    if (fd != TRACE_UNOPENED) return fd;
    const rota_options_t *o = rota_options();
    int want = TRACE_OFF;
    if (o->trace[0]) want = trace_open(o->trace); /* the fd or -errno (kept for the warning) */
    int expect = TRACE_UNOPENED;
    int store = want >= 0 ? want : TRACE_OFF;
    if (!atomic_compare_exchange_strong(&trace_fd, &expect, store)) {
        if (want >= 0) close(want);
        return expect;
    }
    if (want < 0 && o->trace[0]) rota_log(ROTA_LOG_WARN, "unable to open ROTA_TRACE=%s: %s; not tracing", o->trace,
                                          strerror(-want));
    return store;
}

bool rota_trace_on(void)
{
    int fd = atomic_load_explicit(&trace_fd, memory_order_relaxed);
    if (fd == TRACE_UNOPENED) return rota_options()->trace[0] != 0;
    return fd >= 0;
}

void rota_trace_event(const char *ev, int gpu, uint64_t bytes, const char *extra_json_or_NULL)
{
    int fd = trace_get();
    if (fd >= 0) trace_write(fd, ev, gpu, bytes, extra_json_or_NULL);
}
