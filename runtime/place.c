/* place.c - GPU placement for new processes: where the job fits, then least load, then most free memory; a job
 * that fits nowhere may wait for room. */
#include "runtime/place.h"

#include "runtime/ledger.h"
#include "runtime/lib/prio.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

/* Sums of what clients declare saturate: a claim of 2^56 bytes, many times over, never wraps to little. */
static uint64_t place_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Forgets placements that timed out or whose process is gone (kill(pid, 0) fails with ESRCH). */
static void place_expire(place_t *pl, uint64_t now_ns)
{
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++) {
        place_pending_t *e = &pl->p[i];
        if (!e->pid) continue;
        if (now_ns >= e->deadline_ns || (kill(e->pid, 0) < 0 && errno == ESRCH)) memset(e, 0, sizeof *e);
    }
}

/* Pending placements on dev: their count, memory and how many are of class prio or above (rivals); *others gets
 * the memory of those of another user than uid (NULL: not asked). */
static unsigned place_pending_on(const place_t *pl, int dev, uint64_t *mem, enum rota_prio prio, unsigned *rivals,
                                 uid_t uid, uint64_t *others)
{
    unsigned n = 0, h = 0;
    uint64_t m = 0, o = 0;
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++)
        if (pl->p[i].pid && pl->p[i].dev == dev) {
            n++;
            h += pl->p[i].prio <= prio;
            m = place_add(m, pl->p[i].mem);
            if (pl->p[i].uid != uid) o = place_add(o, pl->p[i].mem);
        }
    if (mem) *mem = m;
    if (rivals) *rivals = h;
    if (others) *others = o;
    return n;
}

unsigned place_pending_count(const place_t *pl, int dev, uint64_t *mem)
{
    return place_pending_on(pl, dev, mem, 0, NULL, 0, NULL);
}

void place_settle(place_t *pl, pid_t pid)
{
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++)
        if (pl->p[i].pid == pid) memset(&pl->p[i], 0, sizeof pl->p[i]);
}

/* The slot for pid's new placement: its old one, a free one, or the one that expires first; once uid has
 * PLACE_MAX_PENDING_PER_USER placements pending, one of its own (so one user's processes cannot evict everyone
 * else's placements). */
static place_pending_t *place_slot(place_t *pl, pid_t pid, uid_t uid)
{
    place_pending_t *best = NULL, *mine = NULL;
    unsigned n = 0;
    for (unsigned i = 0; i < PLACE_MAX_PENDING; i++) {
        place_pending_t *e = &pl->p[i];
        if (e->pid == pid) return e;
        if (e->pid && e->uid == uid) {
            n++;
            if (!mine || e->deadline_ns < mine->deadline_ns) mine = e;
        }
        if (!best || (best->pid && (!e->pid || e->deadline_ns < best->deadline_ns))) best = e;
    }
    return n >= PLACE_MAX_PENDING_PER_USER ? mine : best;
}

int place_add_known(place_t *pl, rota_region_t *r, const rota_place_cand_t *gpus, int n)
{
    int added = 0;
    for (int i = 0; i < n && i < ROTA_MAX_DEVICES; i++) {
        int dev = ledger_device(r, gpus[i].uuid, gpus[i].total_mem);
        if (dev < 0) continue;
        pl->known |= 1u << dev;
        atomic_fetch_or(&r->devices[dev].flags, ROTA_DEV_PROBED); /* for librota's remap (client-place.c) */
        added++;
    }
    return added;
}

/* What a GPU offers a new job. */
typedef struct place_gpu {
    uint64_t cap;          /* capacity */
    uint64_t expect;       /* memory its jobs hold or will hold (place.h) */
    uint64_t others;       /* of expect: pending placements of other users (claims, not yet memory) */
    unsigned load;         /* clients + pending placements */
    unsigned rivals;       /* clients at home here + pending placements of the job's class or above */
    unsigned busy;         /* busy fraction of the last >= 100 ms, permille (sched.c) */
} place_gpu_t;

static void place_measure(const place_t *pl, const rota_region_t *r, int dev, enum rota_prio prio, uid_t uid,
                          place_gpu_t *g)
{
    const rota_dev_t *d = &r->devices[dev];
    uint64_t pmem = 0, more = 0;
    g->cap = LD(&d->capacity);
    unsigned prival = 0;
    g->load = LD(&d->clients) + place_pending_on(pl, dev, &pmem, prio, &prival, uid, &g->others);
    g->rivals = prival;
    g->busy = LD(&d->busy_permille);
    /* Beyond what is reserved: requests queued here, and the rest of the declared limit (ROTA_MEM_LIMIT, rota
     * run --mem) of each job at home here (its first GPU, or the one it queues on), which it will grow to. */
    for (unsigned i = 0; pl->t && i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *sl = &pl->t->slots[i];
        if (LD(&sl->state) != ROTA_SLOT_LIVE) continue;
        int wdev = LD(&sl->wait_dev), home = LD(&sl->device);
        uint64_t used = LD(&sl->used[dev]), w = wdev == dev ? LD(&sl->waiting) : 0, lim = LD(&sl->limit);
        if (home < 0) home = wdev;
        if (home == dev && lim > used + w) w = lim - used;
        if (home == dev && LD(&sl->priority) <= prio) g->rivals++;
        more = place_add(more, w);
    }
    g->expect = place_add(place_add(LD(&d->reserved), more), pmem);
}

/* Memory the GPU has left for a new job. */
static uint64_t place_free(const place_gpu_t *g)
{
    return g->expect < g->cap ? g->cap - g->expect : 0;
}

/* Memory the GPU has left for a new job of user uid, counting no other user's pending placements: what another
 * user only claims may steer where a job goes, never make it wait (issue 32, item 5). */
static uint64_t place_free_own(const place_gpu_t *g)
{
    uint64_t e = g->expect - (g->others < g->expect ? g->others : g->expect);
    return e < g->cap ? g->cap - e : 0;
}

/* Whether a is a better home than b for a job of mem bytes (0: unknown): see place.h. */
static bool place_better(const place_gpu_t *a, const place_gpu_t *b, uint64_t mem)
{
    uint64_t fa = place_free(a), fb = place_free(b);
    bool ka = fa >= mem, kb = fb >= mem;
    if (ka != kb) return ka;
    if (ka && a->rivals != b->rivals) return a->rivals < b->rivals;
    if (ka && a->load != b->load) return a->load < b->load;
    /* Equal load: the idler GPU gives the job more device time (PLACE_BUSY_SLACK_PERMILLE is noise). */
    int db = (int)a->busy - (int)b->busy;
    if (ka && (db > PLACE_BUSY_SLACK_PERMILLE || db < -PLACE_BUSY_SLACK_PERMILLE)) return db < 0;
    uint64_t big = a->cap > b->cap ? a->cap : b->cap;
    uint64_t slack = big / 100 * PLACE_MEM_SLACK_PCT;
    uint64_t diff = fa > fb ? fa - fb : fb - fa;
    /* A job of known memory that fits both: the tighter fit, which keeps the larger hole for a larger job to
     * come (a 3G job beside 6G rather than beside 4G leaves 12G free for a 12G one). Of unknown memory, or
     * fitting neither: the most free memory. */
    if (diff > slack) return mem && ka ? fa < fb : fa > fb;
    if (a->load != b->load) return a->load < b->load;
    return db < -PLACE_BUSY_SLACK_PERMILLE;
}

int place_choose_as(place_t *pl, rota_region_t *r, pid_t pid, uid_t uid, const rota_msg_place_t *m, uint64_t now_ns)
{
    place_expire(pl, now_ns);
    place_settle(pl, pid); /* a pid that asks again replaces its earlier placement */
    bool known = m->flags & ROTA_PLACE_KNOWN;
    enum rota_prio prio = prio_from_place_flags(m->flags);
    /* The candidates as region device indices; the answer is an index into this list (cand mode) or the
     * device itself (known mode). */
    int devs[ROTA_MAX_DEVICES], n = 0;
    if (known) {
        unsigned nd = LD(&r->ndevices);
        for (unsigned d = 0; d < nd && d < ROTA_MAX_DEVICES; d++)
            if (pl->known & (1u << d)) devs[n++] = (int)d;
        if (!n) return -ENODEV;
    } else {
        /* A rotad that enumerated the node's GPUs takes no other from a client (issue 21, phantom GPUs): a
         * candidate it does not know is no place for a job here. Without a probe, candidates are entered as the
         * clients' RESERVEs enter them. */
        for (unsigned i = 0; i < m->ncand && i < ROTA_MAX_DEVICES; i++)
            devs[n++] = pl->known ? ledger_find(r, m->cand[i].uuid)
                                  : ledger_device(r, m->cand[i].uuid, m->cand[i].total_mem);
    }
    int best = -1;
    place_gpu_t bg = {0};
    uint64_t maxcap = 0;
    bool fits_own = false;
    for (int i = 0; i < n; i++) {
        if (devs[i] < 0) continue;
        place_gpu_t g;
        place_measure(pl, r, devs[i], prio, uid, &g);
        if (g.cap > maxcap) maxcap = g.cap;
        fits_own |= place_free_own(&g) >= m->mem;
        if (best < 0 || place_better(&g, &bg, m->mem)) {
            best = i;
            bg = g;
        }
    }
    if (best < 0) return known || pl->known ? -ENODEV : -ENOSPC;
    /* The best fits nowhere, even without other users' claims: wait for room, unless the job is larger than every
     * candidate (it would wait for nothing, holding a waiter). */
    if (m->wait_ms && !fits_own && m->mem <= maxcap) return -EAGAIN;
    place_pending_t *e = place_slot(pl, pid, uid);
    e->pid = pid;
    e->uid = uid;
    e->dev = devs[best];
    e->mem = m->mem < bg.cap ? m->mem : bg.cap; /* a claim counts at most its GPU */
    e->prio = prio;
    e->deadline_ns = now_ns + (uint64_t)ROTA_PLACE_PENDING_MS * 1000000u;
    return known ? devs[best] : best;
}

int place_choose_now(place_t *pl, rota_region_t *r, pid_t pid, uid_t uid, const rota_msg_place_t *m,
                     uint64_t now_ns)
{
    rota_msg_place_t at_once = *m;
    at_once.wait_ms = 0;
    return place_choose_as(pl, r, pid, uid, &at_once, now_ns);
}

int place_choose(place_t *pl, rota_region_t *r, pid_t pid, const rota_msg_place_t *m, uint64_t now_ns)
{
    return place_choose_as(pl, r, pid, 0, m, now_ns);
}

/* ---- requests that wait for room ---------------------------------------------------------------------------- */

int place_wait_add(place_t *pl, void *who, pid_t pid, uid_t uid, const rota_msg_place_t *m, uint64_t now_ns)
{
    place_waiter_t *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    w->who = who;
    w->pid = pid;
    w->uid = uid;
    w->prio = prio_from_place_flags(m->flags);
    w->since_ns = now_ns;
    w->deadline_ns = now_ns + (uint64_t)m->wait_ms * 1000000u;
    w->m = *m;
    place_waiter_t **pp = &pl->waiters;
    while (*pp && (*pp)->prio <= w->prio) pp = &(*pp)->next; /* behind its class and the better ones */
    w->next = *pp;
    *pp = w;
    return 0;
}

/* Unlinks *pp, places it without waiting any longer, answers it and frees it. */
static void place_wait_give_up(place_t *pl, rota_region_t *r, place_waiter_t **pp, uint64_t now_ns,
                               place_answer_fn *fn, void *ctx)
{
    place_waiter_t *w = *pp;
    *pp = w->next;
    fn(ctx, w, place_choose_now(pl, r, w->pid, w->uid, &w->m, now_ns));
    free(w);
}

unsigned place_wait_serve(place_t *pl, rota_region_t *r, uint64_t now_ns, place_answer_fn *fn, void *ctx)
{
    unsigned n = 0;
    for (place_waiter_t **pp = &pl->waiters; *pp;) {
        if (now_ns < (*pp)->deadline_ns) {
            pp = &(*pp)->next;
            continue;
        }
        place_wait_give_up(pl, r, pp, now_ns, fn, ctx);
        n++;
    }
    place_waiter_t *w;
    while ((w = pl->waiters)) {
        int i = place_choose_as(pl, r, w->pid, w->uid, &w->m, now_ns);
        if (i == -EAGAIN) break; /* it still fits nowhere: those behind it wait too */
        pl->waiters = w->next;
        fn(ctx, w, i);
        free(w);
        n++;
    }
    return n;
}

unsigned place_wait_flush(place_t *pl, rota_region_t *r, uint64_t now_ns, place_answer_fn *fn, void *ctx)
{
    unsigned n = 0;
    for (; pl->waiters; n++) place_wait_give_up(pl, r, &pl->waiters, now_ns, fn, ctx);
    return n;
}

void place_wait_drop(place_t *pl, const void *who)
{
    for (place_waiter_t **pp = &pl->waiters; *pp;) {
        place_waiter_t *w = *pp;
        if (w->who != who) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        free(w);
    }
}

uint64_t place_wait_next(const place_t *pl)
{
    uint64_t t = UINT64_MAX;
    for (const place_waiter_t *w = pl->waiters; w; w = w->next)
        if (w->deadline_ns < t) t = w->deadline_ns;
    return t;
}

unsigned place_wait_count(const place_t *pl)
{
    unsigned n = 0;
    for (const place_waiter_t *w = pl->waiters; w; w = w->next) n++;
    return n;
}

void place_wait_publish(const place_t *pl, rota_region_t *r)
{
    uint32_t n = 0;
    uint64_t bytes = 0, since = 0;
    for (const place_waiter_t *w = pl->waiters; w; w = w->next) {
        n++;
        bytes = place_add(bytes, w->m.mem);
        if (!since || w->since_ns < since) since = w->since_ns;
    }
    atomic_store_explicit(&r->place_wait_since_ns, since, memory_order_relaxed);
    atomic_store_explicit(&r->place_wait_bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&r->place_waiting, n, memory_order_relaxed);
}
