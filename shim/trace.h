/* trace.h - librota's ROTA_TRACE events: holds, releases and memory waits, on slow paths only. */
#ifndef ROTA_SHIM_TRACE_H
#define ROTA_SHIM_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* True when ROTA_TRACE is set and its file is (or may still be) usable. Cheap: one atomic load. */
bool rota_trace_on(void);
/* Appends one line (runtime/lib/trace.h has the format). The file opens on the first event, once; a failure
 * to open is one warning and turns tracing off. Thread-safe, lock-free, async-signal-safe after the open. */
void rota_trace_event(const char *ev, int gpu, uint64_t bytes, const char *extra_json_or_NULL);

#endif
