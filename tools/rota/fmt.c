/* fmt.c - numbers as the rota tool's text output shows them (sizes in binary units). */
#include "tools/rota/fmt.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

void rota_fmt_size(char *out, size_t n, uint64_t v)
{
    static const char *const unit[] = {"B", "K", "M", "G", "T", "P"};
    double d = (double)v;
    unsigned u = 0;
    while (d >= 1024 && u < 5) {
        d /= 1024;
        u++;
    }
    if (u == 0) snprintf(out, n, "%" PRIu64 "B", v);
    else snprintf(out, n, "%.1f%s", d, unit[u]);
}

double rota_place_wait_oldest_s(const rota_region_t *r, uint64_t now_ns)
{
    uint64_t since = atomic_load_explicit(&r->place_wait_since_ns, memory_order_relaxed);
    return since && now_ns > since ? (double)(now_ns - since) / 1e9 : 0.0;
}

bool rota_fmt_place_waiting(char *out, size_t n, const rota_region_t *r, uint64_t now_ns)
{
    uint32_t k = atomic_load_explicit(&r->place_waiting, memory_order_relaxed);
    if (n) out[0] = 0;
    if (!k) return false;
    char sz[16];
    rota_fmt_size(sz, sizeof sz, atomic_load_explicit(&r->place_wait_bytes, memory_order_relaxed));
    snprintf(out, n, "%u job%s waiting for a GPU with room (%s in all; the first for %.1f s)", k, k == 1 ? "" : "s",
             sz, rota_place_wait_oldest_s(r, now_ns));
    return true;
}
