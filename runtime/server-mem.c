/* server-mem.c - rotad's memory requests: RESERVE (granted, queued or refused), RELEASE, ADOPT, and the credit a
 * client may allocate from without asking (abi.h), over the ledger (runtime/ledger.c) and the queue
 * (runtime/waitq.c). */
#include "runtime/server-internal.h"

#include "runtime/devmem.h"
#include "runtime/ledger.h"
#include "runtime/lib/proto.h"
#include "runtime/place.h"
#include "runtime/stats.h"
#include "runtime/waitq.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Takes back every client's unused credit on dev (an exchange with 0 races exactly with a client's
 * compare-exchange: each byte ends up either used or returned). A client that inflated its credit word only
 * gives back its own bytes: the uncharge is clamped to what it holds. */
static void server_revoke(server_t *s, unsigned dev)
{
    /* Pairs with conn_credit_put: a client that added to its word after this fence sees the waiter just
     * published and gives its bytes back itself; one that added before has them taken here. */
    atomic_thread_fence(memory_order_seq_cst);
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->slot < 0 || !c->ch || !(c->devmask & (1u << dev))) continue;
        uint64_t x = atomic_exchange(&c->ch->credit[dev], 0);
        if (x) ledger_uncharge(s->rg.r, s->rg.t, (unsigned)c->slot, dev, x);
    }
}

/* Tops the client's credit on dev up to the configured amount when the GPU has room for that and as much
 * again, nobody waits, and the client's limits allow it. Returns the bytes added. */
static uint64_t server_grant_credit(server_t *s, client_t *c, unsigned dev)
{
    uint64_t chunk = s->o.cfg ? s->o.cfg->credit : 0;
    if (!chunk || !c->ch || waitq_count_dev(&s->q, dev)) return 0;
    uint64_t cur = atomic_load(&c->ch->credit[dev]);
    if (cur >= chunk) return 0;
    uint64_t top = chunk - cur;
    if (ledger_check(s->rg.r, s->rg.t, (unsigned)c->slot, dev, top + chunk)) return 0;
    ledger_charge(s->rg.r, s->rg.t, (unsigned)c->slot, dev, top);
    atomic_fetch_add(&c->ch->credit[dev], top);
    return top;
}

void server_answer(void *ctx, const waiter_t *w, int status)
{
    server_t *s = ctx;
    client_t *c = s->by_slot[w->slot];
    if (!c || c->gen != w->gen) return;
    if (status == 0 || status == -ENOMEM) {
        uint64_t now = server_now_ns();
        stats_mem_wait(s->rg.r, s->rg.t, w->slot, w->dev, now > w->since_ns ? now - w->since_ns : 0, status == 0);
    }
    server_log(s, 2, "pid %d: %s %llu bytes on GPU %u", (int)c->pid, status ? "refused" : "granted (queued)",
               (unsigned long long)w->bytes, w->dev);
    server_result(s, c, w->seq, status, (int)w->dev);
}

void server_serve(server_t *s, unsigned dev)
{
    if (s->grace_end_ns) return;
    /* While requests wait, unused credit is memory nobody uses: clients put what they free there (abi.h). */
    if (waitq_count_dev(&s->q, dev)) server_revoke(s, dev);
    waitq_serve(&s->q, dev, server_answer, s);
}

static void server_use_dev(server_t *s, client_t *c, int dev)
{
    if (c->devmask & (1u << dev)) return;
    if (!c->devmask) place_settle(&s->pl, c->pid); /* counted in devices[].clients from now on */
    c->devmask |= 1u << dev;
    rota_dev_t *d = &s->rg.r->devices[dev];
    ST(&d->clients, LD(&d->clients) + 1);
}

/* The region index of the GPU a RESERVE or ADOPT names. When rotad enumerated the node's GPUs itself (probe), those
 * are the only ones: an unknown UUID is -ENODEV, so no client can add a device or choose its capacity. Only a
 * rotad that knows no GPU of its own (--no-probe, or a driver without GPUs) learns them from its clients. */
static int server_device(server_t *s, client_t *c, const rota_msg_mem_t *m)
{
    if (s->pl.known) {
        int dev = ledger_find(s->rg.r, m->uuid);
        if (dev < 0) server_log_client(s, c, "names a GPU this node does not have; refused");
        return dev < 0 ? -ENODEV : dev;
    }
    int dev = ledger_device(s->rg.r, m->uuid, m->total_mem);
    if (dev < 0) server_log_client(s, c, "more than " ROTA_STR(ROTA_MAX_DEVICES) " GPUs: not tracking another one");
    return dev;
}

void server_on_reserve(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_mem_t *m = msg;
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    int dev = server_device(s, c, m);
    c->reserved = true;
    if (dev < 0) {
        server_result(s, c, m->h.seq, dev, -1);
        return;
    }
    unsigned slot = (unsigned)c->slot, d = (unsigned)dev;
    server_use_dev(s, c, dev);
    int rc = ledger_check_ever(r, t, slot, d, m->bytes);
    if (rc) {
        server_result(s, c, m->h.seq, rc, dev);
        return;
    }
    uint64_t now = server_now_ns();
    bool grace = now < s->grace_end_ns && !ledger_check(r, t, slot, d, m->bytes);
    if (!grace && !waitq_count_dev(&s->q, d)) {
        rc = ledger_check(r, t, slot, d, m->bytes);
        if (rc) {
            server_revoke(s, d); /* pressure: unused credit first */
            rc = ledger_check(r, t, slot, d, m->bytes);
        }
        if (!rc) {
            ledger_charge(r, t, slot, d, m->bytes);
            uint64_t credit = server_grant_credit(s, c, d);
            server_result_credit(s, c, m->h.seq, 0, dev, credit);
            return;
        }
        if (!m->wait_ms) {
            server_result(s, c, m->h.seq, rc, dev);
            return;
        }
    }
    /* Past what this client's own frees could make room for (its holdings plus the request exceed its limit or its
     * group's): no other client can help, so it never waits on itself. A framework that caches memory
     * (PyTorch) learns at once that it must release some (docs/design/memory.md). Its unused credit is its own
     * holding too: taken back first. */
    if (ledger_check_own(t, slot, d, m->bytes)) {
        uint64_t x = c->ch ? atomic_exchange(&c->ch->credit[d], 0) : 0;
        if (x) ledger_uncharge(r, t, slot, d, x);
        rc = ledger_check_own(t, slot, d, m->bytes);
        if (rc) {
            server_result(s, c, m->h.seq, rc, dev);
            if (x) waitq_serve(&s->q, d, server_answer, s);
            return;
        }
    }
    /* Queued requests are capped per client and per user (issue 32, item 3: 40,000 of them cost rotad seconds of
     * CPU); one over a cap is refused like a request that does not fit. */
    unsigned mine, users;
    waitq_count_owner(&s->q, slot, (uint32_t)c->uid, &mine, &users);
    if (mine >= WAITQ_MAX_PER_CLIENT || users >= s->o.cfg->max_waits_per_user) {
        server_log_client(s, c, "has too many memory requests queued: refused");
        server_result(s, c, m->h.seq, -ENOMEM, dev);
        return;
    }
    /* Queue behind earlier requests of the same or a better class, then serve: this request may be the one
     * that fits now. */
    uint64_t deadline = now + (uint64_t)m->wait_ms * 1000000u;
    if (grace && deadline < s->grace_end_ns) deadline = s->grace_end_ns; /* answered when the grace ends */
    waiter_t *w = waitq_add(&s->q, slot, c->gen, m->h.seq, d, m->bytes, c->prio, deadline);
    if (!w) {
        server_result(s, c, m->h.seq, -ENOMEM, dev);
        return;
    }
    w->since_ns = now;
    server_log(s, 2, "pid %d: queued %llu bytes on GPU %d for %u ms", (int)c->pid,
               (unsigned long long)m->bytes, dev, m->wait_ms);
    if (grace) return;
    server_serve(s, d);
    if (!m->wait_ms && waitq_contains(&s->q, w)) {
        waitq_remove(&s->q, w);
        server_result(s, c, m->h.seq, -ENOMEM, dev);
    }
}

void server_on_release(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_mem_t *m = msg;
    int dev = ledger_find(s->rg.r, m->uuid);
    if (dev < 0) return; /* never reserved there: nothing to give back */
    /* At most what the client holds outside its unused credit: bytes still in its credit word stay charged until
     * it takes them or rotad revokes them, whatever it claims to have freed (abi.h: every byte is in a credit
     * word or in use). Only the client takes from its credit, and only before it allocates, frees and then
     * sends this, so the credit read now is at most what it was then: a real release is never cut short. */
    uint64_t held = LD(&s->rg.t->slots[c->slot].used[dev]), credit = c->ch ? LD(&c->ch->credit[dev]) : 0;
    uint64_t in_use = held > credit ? held - credit : 0;
    uint64_t back = ledger_uncharge(s->rg.r, s->rg.t, (unsigned)c->slot, (unsigned)dev,
                                    m->bytes < in_use ? m->bytes : in_use);
    if (back < m->bytes)
        server_log(s, 2, "pid %d released %llu bytes but held only %llu", (int)c->pid,
                   (unsigned long long)m->bytes, (unsigned long long)back);
    if (!back) return;
    if (waitq_count_dev(&s->q, (unsigned)dev)) server_serve(s, (unsigned)dev);
    else server_grant_credit(s, c, (unsigned)dev); /* refill: an alloc/free loop stays on the fast path */
}

/* An ADOPT is memory the process holds in the driver: where NVML says what that is (devmem.h), the client's charge
 * in use there (outside its unused credit) never exceeds it (issue 32, item 1: a client claiming a whole GPU it
 * does not hold). Where NVML cannot tell, rotad says so once and the ledger's own bounds are all there is; a rotad
 * that did not probe its GPUs asks the driver nothing. */
static uint64_t server_adopt_cap(server_t *s, client_t *c, unsigned d, uint64_t bytes)
{
    char why[192];
    uint64_t drv = 0;
    if (!s->pl.known) return bytes; /* GPUs learnt from clients (--no-probe): rotad asks the driver nothing */
    int rc = devmem_proc_bytes(s->rg.r->devices[d].uuid, c->pid, bytes, &drv, why, sizeof why);
    if (rc) {
        if (why[0]) server_log(s, 1, "cannot check re-registered memory against the driver (%s): ADOPTs are bounded "
                                     "by the GPU and the limits only", why);
        return bytes;
    }
    uint64_t held = LD(&s->rg.t->slots[c->slot].used[d]), credit = c->ch ? LD(&c->ch->credit[d]) : 0;
    uint64_t in_use = held > credit ? held - credit : 0, room = drv > in_use ? drv - in_use : 0;
    if (bytes <= room) return bytes;
    server_log_client(s, c, "re-registered %llu bytes on GPU %u, the driver says it holds %llu; charged %llu",
                      (unsigned long long)bytes, d, (unsigned long long)drv, (unsigned long long)room);
    return room;
}

/* Charges an ADOPT as far as the GPU and the client's limits allow, after taking back unused credit: what does not
 * fit is not charged (the client only loses its own accounting: a later RELEASE is clamped to what it holds). */
static void server_adopt_charge(server_t *s, client_t *c, unsigned d, uint64_t bytes)
{
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    unsigned slot = (unsigned)c->slot;
    bytes = server_adopt_cap(s, c, d, bytes);
    if (!bytes) return;
    int rc = ledger_check(r, t, slot, d, bytes);
    if (rc) {
        server_revoke(s, d);
        rc = ledger_check(r, t, slot, d, bytes);
    }
    if (rc) {
        server_log_client(s, c, "re-registered more memory than its GPU or limits allow; not charged");
        return;
    }
    ledger_charge(r, t, slot, d, bytes);
    server_log(s, 2, "pid %d re-registered %llu bytes on GPU %u", (int)c->pid, (unsigned long long)bytes, d);
}

/* ADOPT: memory the client already holds (re-registration after a reconnect, or a driver-chosen pitch above what
 * it reserved). It is bounded by the same rules as a RESERVE (capacity, process and group limits), and cannot
 * push the ledger past the GPU or a limit. During the restart grace it waits its turn (issue 32, item 1): the
 * clients of the rotad before re-register then, and the first to ADOPT must not take the GPU from the others
 * (another user's claim of a whole GPU would leave the real holders uncounted). ADOPTs of the grace are summed
 * per client and GPU and charged when it ends, smallest first: a real holder re-registers what it holds, a claim
 * larger than that comes last and gets what is left. */
void server_on_adopt(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_mem_t *m = msg;
    int dev = server_device(s, c, m);
    if (dev < 0) return;
    server_use_dev(s, c, dev);
    if (!s->grace_end_ns || server_now_ns() >= s->grace_end_ns) {
        server_adopt_charge(s, c, (unsigned)dev, m->bytes);
        return;
    }
    for (uint32_t i = 0; i < s->nadopts; i++) {
        struct server_adopt *a = &s->adopts[i];
        if (a->slot == (unsigned)c->slot && a->gen == c->gen && a->dev == (unsigned)dev) {
            a->bytes = a->bytes > UINT64_MAX - m->bytes ? UINT64_MAX : a->bytes + m->bytes;
            return;
        }
    }
    /* One entry per client and GPU: at most the table's slots times the GPUs. */
    if (s->nadopts == s->adopt_cap) {
        uint32_t cap = s->adopt_cap ? s->adopt_cap * 2 : 64;
        void *p = realloc(s->adopts, cap * sizeof *s->adopts);
        if (!p) {
            server_log_client(s, c, "re-registered memory during the restart grace, out of memory to keep it");
            return;
        }
        s->adopts = p;
        s->adopt_cap = cap;
    }
    s->adopts[s->nadopts++] = (struct server_adopt){(unsigned)c->slot, c->gen, (unsigned)dev, m->bytes};
}

static int server_adopt_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct server_adopt *)a)->bytes, y = ((const struct server_adopt *)b)->bytes;
    return x < y ? -1 : x > y;
}

void server_adopt_settle(server_t *s)
{
    if (!s->nadopts) return;
    qsort(s->adopts, s->nadopts, sizeof *s->adopts, server_adopt_cmp);
    for (uint32_t i = 0; i < s->nadopts; i++) {
        const struct server_adopt *a = &s->adopts[i];
        client_t *c = s->by_slot[a->slot];
        if (c && c->gen == a->gen && !c->doomed) server_adopt_charge(s, c, a->dev, a->bytes);
    }
    free(s->adopts);
    s->adopts = NULL;
    s->nadopts = s->adopt_cap = 0;
}
