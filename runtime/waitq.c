/* waitq.c - the memory wait queue: a list sorted by (priority, arrival), served as memory comes back. */
#include "runtime/waitq.h"

#include "runtime/ledger.h"

#include <errno.h>
#include <stdlib.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

void waitq_init(waitq_t *q, rota_region_t *r, rota_table_t *t)
{
    q->r = r;
    q->t = t;
    q->head = NULL;
    q->arrivals = 0;
    q->count = 0;
}

static void waitq_account(waitq_t *q, const waiter_t *w, int sign)
{
    rota_dev_t *d = &q->r->devices[w->dev];
    rota_slot_t *s = &q->t->slots[w->slot];
    if (sign > 0) {
        ST(&d->waiters, LD(&d->waiters) + 1);
        ST(&s->waiting, LD(&s->waiting) + w->bytes);
        ST(&s->wait_dev, (int32_t)w->dev);
    } else {
        uint32_t dw = LD(&d->waiters);
        ST(&d->waiters, dw ? dw - 1 : 0);
        uint64_t sw = LD(&s->waiting);
        ST(&s->waiting, sw > w->bytes ? sw - w->bytes : 0);
        if (!LD(&s->waiting)) ST(&s->wait_dev, -1);
    }
}

waiter_t *waitq_add(waitq_t *q, unsigned slot, unsigned gen, uint32_t seq, unsigned dev, uint64_t bytes,
                    enum rota_prio prio, uint64_t deadline_ns)
{
    waiter_t *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    *w = (waiter_t){.slot = slot, .gen = gen, .seq = seq, .dev = dev, .bytes = bytes, .prio = prio,
                    .arrival = ++q->arrivals, .deadline_ns = deadline_ns};
    waiter_t **pp = &q->head;
    while (*pp && (*pp)->prio <= prio) pp = &(*pp)->next; /* after every waiter of the same or better class */
    w->next = *pp;
    *pp = w;
    q->count++;
    waitq_account(q, w, +1);
    return w;
}

static void waitq_unlink(waitq_t *q, waiter_t **pp)
{
    waiter_t *w = *pp;
    *pp = w->next;
    q->count--;
    waitq_account(q, w, -1);
}

void waitq_remove(waitq_t *q, waiter_t *w)
{
    for (waiter_t **pp = &q->head; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            waitq_unlink(q, pp);
            free(w);
            return;
        }
}

bool waitq_contains(const waitq_t *q, const waiter_t *w)
{
    for (const waiter_t *x = q->head; x; x = x->next)
        if (x == w) return true;
    return false;
}

/* Whether every client that holds memory on dev (more than its unused credit) waits for more there: then nobody
 * can free until one of the waiters is served, and the queue's order would hold them all until they time out. */
static bool waitq_stuck(const waitq_t *q, unsigned dev)
{
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &q->t->slots[i];
        uint64_t used = LD(&s->used[dev]), credit = LD(&s->credit);
        if (used <= credit) continue;
        if (!LD(&s->waiting) || LD(&s->wait_dev) != (int32_t)dev) return false;
    }
    return true;
}

/* A user's fair share of dev: its capacity over the users with memory or a request there (issue 32, item 3). */
static uint64_t waitq_fair_share(const waitq_t *q, unsigned dev)
{
    uint32_t uids[64];
    unsigned n = 0;
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS && n < 64; i++) {
        const rota_slot_t *s = &q->t->slots[i];
        if (LD(&s->state) != ROTA_SLOT_LIVE) continue;
        if (!LD(&s->used[dev]) && !(LD(&s->waiting) && LD(&s->wait_dev) == (int32_t)dev)) continue;
        uint32_t uid = LD(&s->uid);
        bool seen = false;
        for (unsigned k = 0; k < n && !seen; k++) seen = uids[k] == uid;
        if (!seen) uids[n++] = uid;
    }
    return LD(&q->r->devices[dev].capacity) / (n ? n : 1);
}

unsigned waitq_serve(waitq_t *q, unsigned dev, waitq_answer_fn *fn, void *ctx)
{
    unsigned granted = 0;
    int stuck = -1; /* unknown until a request is blocked by the capacity */
    uint64_t share = 0; /* a user's fair share of dev; 0 until a request is blocked by the capacity */
    unsigned blocked[16], nblocked = 0; /* clients with a request blocked ahead: theirs never overtake it */
    waiter_t **pp = &q->head;
    while (*pp) {
        waiter_t *w = *pp;
        if (w->dev != dev) {
            pp = &w->next;
            continue;
        }
        bool mine = false;
        for (unsigned i = 0; i < nblocked; i++) mine |= blocked[i] == w->slot;
        if (mine) {
            pp = &w->next;
            continue;
        }
        int rc = ledger_check(q->r, q->t, w->slot, dev, w->bytes);
        if (rc == -EDQUOT) {
            pp = &w->next;
            continue;
        }
        if (rc) {
            /* Blocked by the capacity: the walk stops (a large request is not starved by smaller ones behind it),
             * unless every holder waits (a request behind that fits is then the only way anything moves), or the
             * request is larger than its user's fair share of the GPU: such a request waits for room without
             * holding back the others (one user's whole-GPU request must not stall everyone's allocations). */
            if (!share) share = waitq_fair_share(q, dev);
            if (stuck < 0 && w->bytes <= share) stuck = waitq_stuck(q, dev);
            if ((w->bytes <= share && !stuck) || nblocked == 16) break;
            blocked[nblocked++] = w->slot;
            pp = &w->next;
            continue;
        }
        ledger_charge(q->r, q->t, w->slot, dev, w->bytes);
        waitq_unlink(q, pp);
        fn(ctx, w, 0);
        free(w);
        granted++;
    }
    return granted;
}

unsigned waitq_expire(waitq_t *q, uint64_t now_ns, waitq_answer_fn *fn, void *ctx)
{
    unsigned n = 0;
    waiter_t **pp = &q->head;
    while (*pp) {
        waiter_t *w = *pp;
        if (w->deadline_ns > now_ns) {
            pp = &w->next;
            continue;
        }
        waitq_unlink(q, pp);
        fn(ctx, w, -ENOMEM);
        free(w);
        n++;
    }
    return n;
}

uint64_t waitq_next_deadline(const waitq_t *q)
{
    uint64_t best = UINT64_MAX;
    for (const waiter_t *w = q->head; w; w = w->next)
        if (w->deadline_ns < best) best = w->deadline_ns;
    return best;
}

void waitq_drop_slot(waitq_t *q, unsigned slot)
{
    waiter_t **pp = &q->head;
    while (*pp) {
        waiter_t *w = *pp;
        if (w->slot != slot) {
            pp = &w->next;
            continue;
        }
        waitq_unlink(q, pp);
        free(w);
    }
}

void waitq_flush(waitq_t *q, int status, waitq_answer_fn *fn, void *ctx)
{
    while (q->head) {
        waiter_t *w = q->head;
        waitq_unlink(q, &q->head);
        fn(ctx, w, status);
        free(w);
    }
}

unsigned waitq_count_dev(const waitq_t *q, unsigned dev)
{
    unsigned n = 0;
    for (const waiter_t *w = q->head; w; w = w->next) n += w->dev == dev;
    return n;
}

void waitq_count_owner(const waitq_t *q, unsigned slot, uint32_t uid, unsigned *of_slot, unsigned *of_uid)
{
    unsigned a = 0, b = 0;
    for (const waiter_t *w = q->head; w; w = w->next) {
        a += w->slot == slot;
        b += LD(&q->t->slots[w->slot].uid) == uid;
    }
    *of_slot = a;
    *of_uid = b;
}
