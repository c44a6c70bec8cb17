/* ledger.c - reserve/charge/uncharge on the per-GPU (region), per-client and per-group (table) counters. */
#include "runtime/ledger.h"

#include <errno.h>
#include <string.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

/* Saturating: a counter pinned at UINT64_MAX refuses every later request instead of wrapping to a small value. */
static uint64_t ledger_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void ledger_add(_Atomic uint64_t *p, uint64_t v)
{
    ST(p, ledger_sat_add(LD(p), v));
}

int ledger_find(const rota_region_t *r, const uint8_t uuid[ROTA_UUID_LEN])
{
    unsigned n = LD(&r->ndevices);
    for (unsigned i = 0; i < n && i < ROTA_MAX_DEVICES; i++)
        if (!memcmp(r->devices[i].uuid, uuid, ROTA_UUID_LEN)) return (int)i;
    return -1;
}

int ledger_device(rota_region_t *r, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem)
{
    int d = ledger_find(r, uuid);
    if (d >= 0) return d;
    unsigned n = LD(&r->ndevices);
    if (n >= ROTA_MAX_DEVICES) return -ENOSPC;
    rota_dev_t *dv = &r->devices[n];
    memcpy(dv->uuid, uuid, ROTA_UUID_LEN);
    ST(&dv->capacity, total_mem);
    ST(&dv->reserved, 0);
    /* Publish the entry only once it is complete. */
    atomic_store_explicit(&r->ndevices, n + 1, memory_order_release);
    return (int)n;
}

static uint64_t ledger_min_limit(uint64_t a, uint64_t b)
{
    if (!a) return b;
    if (!b) return a;
    return a < b ? a : b;
}

uint64_t ledger_limit(const rota_table_t *t, unsigned slot, unsigned dev)
{
    const rota_slot_t *s = &t->slots[slot];
    uint64_t lim = LD(&s->limit);
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS) lim = ledger_min_limit(lim, t->groups[g].limit);
    (void)dev;
    return lim;
}

int ledger_check_ever(const rota_region_t *r, const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes)
{
    const rota_slot_t *s = &t->slots[slot];
    if (bytes > LD(&r->devices[dev].capacity)) return -ENOMEM;
    uint64_t lim = LD(&s->limit);
    if (lim && bytes > lim) return -EDQUOT;
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS && bytes > t->groups[g].limit) return -EDQUOT;
    return 0;
}

int ledger_check(const rota_region_t *r, const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes)
{
    const rota_slot_t *s = &t->slots[slot];
    const rota_dev_t *d = &r->devices[dev];
    uint64_t lim = LD(&s->limit), used = LD(&s->used[dev]);
    if (lim && (used > lim || bytes > lim - used)) return -EDQUOT;
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS) {
        uint64_t gl = t->groups[g].limit, gu = LD(&t->groups[g].used[dev]);
        if (gu > gl || bytes > gl - gu) return -EDQUOT;
    }
    uint64_t cap = LD(&d->capacity), res = LD(&d->reserved);
    if (res > cap || bytes > cap - res) return -ENOMEM;
    return 0;
}

int ledger_check_own(const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes)
{
    const rota_slot_t *s = &t->slots[slot];
    uint64_t used = LD(&s->used[dev]), lim = LD(&s->limit);
    if (used > UINT64_MAX - bytes) return -EDQUOT;
    uint64_t want = used + bytes;
    if (lim && want > lim) return -EDQUOT;
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS && want > t->groups[g].limit) return -EDQUOT;
    return 0;
}

void ledger_charge(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes)
{
    rota_slot_t *s = &t->slots[slot];
    ledger_add(&r->devices[dev].reserved, bytes);
    ledger_add(&s->used[dev], bytes);
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS) ledger_add(&t->groups[g].used[dev], bytes);
    if (LD(&s->device) < 0) ST(&s->device, (int32_t)dev);
}

static uint64_t ledger_sub(_Atomic uint64_t *p, uint64_t v)
{
    uint64_t cur = LD(p);
    if (v > cur) v = cur;
    ST(p, cur - v);
    return v;
}

uint64_t ledger_uncharge(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes)
{
    rota_slot_t *s = &t->slots[slot];
    uint64_t held = LD(&s->used[dev]);
    if (bytes > held) bytes = held;
    if (!bytes) return 0;
    ledger_sub(&s->used[dev], bytes);
    ledger_sub(&r->devices[dev].reserved, bytes);
    int g = LD(&s->group);
    if (g >= 0 && g < ROTA_MAX_GROUPS) ledger_sub(&t->groups[g].used[dev], bytes);
    return bytes;
}

uint32_t ledger_reclaim(rota_region_t *r, rota_table_t *t, unsigned slot)
{
    uint32_t mask = 0;
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
        if (ledger_uncharge(r, t, slot, d, UINT64_MAX)) mask |= 1u << d;
    return mask;
}
