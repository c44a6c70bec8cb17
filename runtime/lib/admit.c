/* admit.c - kernel-length-aware admission (see admit.h for the prediction and the rule). */
#include "runtime/lib/admit.h"

void admit_pred_reset(admit_pred_t *p)
{
    atomic_store_explicit(&p->last_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->n, 0, memory_order_relaxed);
    for (unsigned i = 0; i < ADMIT_RING; i++) atomic_store_explicit(&p->iv_us[i], 0, memory_order_relaxed);
}

void admit_pred_start(admit_pred_t *p, uint64_t t_ns)
{
    uint64_t last = atomic_exchange_explicit(&p->last_ns, t_ns, memory_order_relaxed);
    if (!last || t_ns <= last) return;
    uint64_t us = (t_ns - last) / 1000u;
    uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    atomic_store_explicit(&p->iv_us[n % ADMIT_RING], us > UINT32_MAX ? UINT32_MAX : (uint32_t)us,
                          memory_order_relaxed);
    if (n < UINT32_MAX) atomic_store_explicit(&p->n, n + 1, memory_order_release);
}

bool admit_pred_due(const admit_pred_t *p, uint64_t *due_ns, uint64_t *span_ns)
{
    *due_ns = *span_ns = 0;
    uint32_t n = atomic_load_explicit(&p->n, memory_order_acquire);
    uint64_t last = atomic_load_explicit(&p->last_ns, memory_order_relaxed);
    if (n < ADMIT_MIN_INTERVALS || !last) return false;
    unsigned m = n < ADMIT_RING ? n : ADMIT_RING;
    uint32_t s[ADMIT_RING];
    for (unsigned i = 0; i < m; i++) {
        /* insertion sort: 32 values at most, once per completion of a high client's last launch in flight */
        uint32_t v = atomic_load_explicit(&p->iv_us[i], memory_order_relaxed);
        unsigned j = i;
        for (; j > 0 && s[j - 1] > v; j--) s[j] = s[j - 1];
        s[j] = v;
    }
    uint64_t lo = s[m / 8], mid = s[m / 2], hi = s[(3 * m) / 4], top = s[(7 * m) / 8];
    if (!lo || (hi - lo) * 4 > mid) return false;
    *due_ns = last + lo * 1000u;
    *span_ns = (top - lo < mid / 2 ? top - lo : mid / 2) * 1000u;
    return true;
}

uint64_t admit_until(uint64_t now, uint64_t ahead_ns, uint64_t kernel_ns, uint64_t due_ns, uint64_t span_ns,
                     uint64_t cap_ns)
{
    if (!due_ns || !kernel_ns || !cap_ns) return 0;
    if (due_ns > now && due_ns - now > ADMIT_HORIZON_NS) return 0;
    if (span_ns > kernel_ns) span_ns = kernel_ns;
    uint64_t end = due_ns + span_ns; /* the request has surely come by then, if it comes */
    if (now >= end) return 0;
    if (now + ahead_ns + kernel_ns + ADMIT_MARGIN_NS <= due_ns) return 0; /* it ends before the request is due */
    return end - now > cap_ns ? now + cap_ns : end;
}
