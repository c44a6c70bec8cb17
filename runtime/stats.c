/* stats.c - rotad's operating statistics: memory waits, placement waits and hold time, kept in the region
 * (node and GPU totals) and in rotad's table (per client). */
#include "runtime/stats.h"

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
/* Inside a hold_seq write section: release stores keep each store after the one that made hold_seq odd, as a
 * release fence would (ThreadSanitizer does not model fences; readers pair with acquire loads). */
#define STR(p, v) atomic_store_explicit((p), (v), memory_order_release)

void stats_slot_reset(rota_table_t *t, unsigned slot)
{
    if (slot >= ROTA_MAX_CLIENTS) return;
    rota_slot_stats_t *st = &t->stats[slot];
    uint32_t q = LD(&st->hold_seq);
    ST(&st->hold_seq, q + 1);
    STR(&st->mem_wait_ns, 0);
    STR(&st->mem_waits_granted, 0);
    STR(&st->mem_waits_timed_out, 0);
    for (unsigned k = 0; k < 3; k++) STR(&st->held_ns[k], 0);
    STR(&st->hold_since_ns, 0);
    STR(&st->hold_bits, 0);
    atomic_store_explicit(&st->hold_seq, q + 2, memory_order_release);
}

void stats_mem_wait(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t waited_ns, bool granted)
{
    if (slot < ROTA_MAX_CLIENTS) {
        rota_slot_stats_t *st = &t->stats[slot];
        ST(&st->mem_wait_ns, LD(&st->mem_wait_ns) + waited_ns);
        if (granted) ST(&st->mem_waits_granted, LD(&st->mem_waits_granted) + 1);
        else ST(&st->mem_waits_timed_out, LD(&st->mem_waits_timed_out) + 1);
    }
    if (dev < ROTA_MAX_DEVICES) {
        rota_dev_stats_t *d = &r->stats.devices[dev];
        ST(&d->mem_wait_ns, LD(&d->mem_wait_ns) + waited_ns);
        if (granted) ST(&d->mem_waits_granted, LD(&d->mem_waits_granted) + 1);
        else ST(&d->mem_waits_timed_out, LD(&d->mem_waits_timed_out) + 1);
    }
}

void stats_place_wait(rota_region_t *r, uint64_t waited_ns)
{
    ST(&r->stats.place_waits, LD(&r->stats.place_waits) + 1);
    ST(&r->stats.place_wait_ns, LD(&r->stats.place_wait_ns) + waited_ns);
}

void stats_hold(rota_table_t *t, unsigned slot, uint32_t bits, uint64_t now_ns)
{
    if (slot >= ROTA_MAX_CLIENTS) return;
    rota_slot_stats_t *st = &t->stats[slot];
    bits &= ROTA_HOLD_PRIO | ROTA_HOLD_SHARE | ROTA_HOLD_QUANTUM;
    uint32_t old = LD(&st->hold_bits);
    if (old == bits) return;
    uint32_t q = LD(&st->hold_seq);
    ST(&st->hold_seq, q + 1);
    if (old) {
        uint64_t since = LD(&st->hold_since_ns), d = now_ns > since ? now_ns - since : 0;
        for (unsigned k = 0; k < 3; k++)
            if (old & (1u << k)) STR(&st->held_ns[k], LD(&st->held_ns[k]) + d);
    }
    STR(&st->hold_since_ns, now_ns);
    STR(&st->hold_bits, bits);
    atomic_store_explicit(&st->hold_seq, q + 2, memory_order_release);
}
