/* fmt.h - numbers as the rota tool's text output shows them. */
#ifndef ROTA_TOOL_FMT_H
#define ROTA_TOOL_FMT_H

#include <stddef.h>
#include <stdint.h>

/* v bytes in binary units: "512B", "1.5K" .. "2.0P" (one decimal past bytes), in out (n bytes). */
void rota_fmt_size(char *out, size_t n, uint64_t v);

#endif
