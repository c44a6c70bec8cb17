/* fmt.h - numbers as the rota tool's text output shows them. */
#ifndef ROTA_TOOL_FMT_H
#define ROTA_TOOL_FMT_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* v bytes in binary units: "512B", "1.5K" .. "2.0P" (one decimal past bytes), in out (n bytes). */
void rota_fmt_size(char *out, size_t n, uint64_t v);
/* The jobs rota run keeps waiting for a GPU with room, as one line (no newline) in out, at now_ns
 * (CLOCK_MONOTONIC): false, out empty, when nobody waits. */
bool rota_fmt_place_waiting(char *out, size_t n, const rota_region_t *r, uint64_t now_ns);
/* How long the first of those jobs has waited at now_ns, in seconds (0 when nobody waits). */
double rota_place_wait_oldest_s(const rota_region_t *r, uint64_t now_ns);

#endif
