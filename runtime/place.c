/* place.c - GPU placement for new processes: most free memory, then least load, with pending placements. */
#include "runtime/place.h"

#include "runtime/ledger.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

/* Forgets placements that timed out or whose process is gone (kill(pid, 0) fails with ESRCH). */
static void place_expire(place_t *pl, uint64_t now_ns)
{
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++) {
        place_pending_t *e = &pl->p[i];
        if (!e->pid) continue;
        if (now_ns >= e->deadline_ns || (kill(e->pid, 0) < 0 && errno == ESRCH)) memset(e, 0, sizeof *e);
    }
}

unsigned place_pending_count(const place_t *pl, int dev, uint64_t *mem)
{
    unsigned n = 0;
    uint64_t m = 0;
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++)
        if (pl->p[i].pid && pl->p[i].dev == dev) {
            n++;
            m += pl->p[i].mem;
        }
    if (mem) *mem = m;
    return n;
}

void place_settle(place_t *pl, pid_t pid)
{
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++)
        if (pl->p[i].pid == pid) memset(&pl->p[i], 0, sizeof pl->p[i]);
}

/* The slot for pid's new placement: its old one, a free one, or the one that expires first. */
static place_pending_t *place_slot(place_t *pl, pid_t pid)
{
    place_pending_t *best = NULL;
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++) {
        place_pending_t *e = &pl->p[i];
        if (e->pid == pid) return e;
        if (!best || (best->pid && (!e->pid || e->deadline_ns < best->deadline_ns))) best = e;
    }
    return best;
}

int place_choose(place_t *pl, rota_region_t *r, pid_t pid, const rota_msg_place_t *m, uint64_t now_ns)
{
    place_expire(pl, now_ns);
    place_settle(pl, pid); /* a pid that asks again replaces its earlier placement */
    int best = -1, best_dev = -1;
    uint64_t best_free = 0, best_cap = 0;
    unsigned best_load = 0;
    for (unsigned i = 0; i < m->ncand && i < ROTA_MAX_DEVICES; i++) {
        int dev = ledger_device(r, m->cand[i].uuid, m->cand[i].total_mem);
        if (dev < 0) continue;
        const rota_dev_t *d = &r->devices[dev];
        uint64_t cap = LD(&d->capacity), res = LD(&d->reserved), pmem = 0;
        unsigned load = LD(&d->clients) + place_pending_count(pl, dev, &pmem);
        uint64_t used = res + pmem;
        uint64_t free_b = used < cap ? cap - used : 0;
        bool better;
        if (best < 0) {
            better = true;
        } else {
            uint64_t big = cap > best_cap ? cap : best_cap;
            uint64_t slack = big / 100 * PLACE_MEM_SLACK_PCT;
            uint64_t diff = free_b > best_free ? free_b - best_free : best_free - free_b;
            if (diff > slack) better = free_b > best_free;
            else better = load < best_load;
        }
        if (better) {
            best = (int)i;
            best_dev = dev;
            best_free = free_b;
            best_cap = cap;
            best_load = load;
        }
    }
    if (best < 0) return -ENOSPC;
    place_pending_t *e = place_slot(pl, pid);
    e->pid = pid;
    e->dev = best_dev;
    e->mem = m->mem;
    e->deadline_ns = now_ns + (uint64_t)ROTA_PLACE_PENDING_MS * 1000000u;
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_release);
    return best;
}
