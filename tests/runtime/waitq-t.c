/* waitq-t.c - TAP tests for runtime/waitq.c: priority then arrival, capacity blocks, limits skip, expiry. */
#include "runtime/ledger.h"
#include "runtime/region.h"
#include "runtime/waitq.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <string.h>

static unsigned order[32], norder;
static int statuses[32];

static void record(void *ctx, const waiter_t *w, int status)
{
    (void)ctx;
    order[norder] = w->seq;
    statuses[norder++] = status;
}

int main(void)
{
    region_t rg;
    if (region_create(&rg, NULL)) bail("region_create failed");
    rota_region_t *r = rg.r;
    rota_table_t *t = rg.t;
    uint8_t u[16] = {7};
    ledger_device(r, u, 100);
    waitq_t q;
    waitq_init(&q, r, t);

    ledger_charge(r, t, 9, 0, 100); /* the GPU is full */
    waitq_add(&q, 1, 1, 11, 0, 10, ROTA_PRIO_LOW, 1000);
    waitq_add(&q, 2, 1, 21, 0, 10, ROTA_PRIO_NORMAL, 1000);
    waitq_add(&q, 3, 1, 31, 0, 10, ROTA_PRIO_HIGH, 1000);
    waitq_add(&q, 4, 1, 41, 0, 10, ROTA_PRIO_NORMAL, 1000);
    is_uint(atomic_load(&r->devices[0].waiters), 4, "four waiters counted on the GPU");
    is_uint(atomic_load(&t->slots[2].waiting), 10, "slot 2 shows its waiting bytes");
    is_uint(waitq_serve(&q, 0, record, NULL), 0, "nothing fits on a full GPU");

    ledger_uncharge(r, t, 9, 0, 25);
    is_uint(waitq_serve(&q, 0, record, NULL), 2, "25 bytes back: two 10-byte requests granted");
    is_uint(order[0], 31, "high priority first");
    is_uint(order[1], 21, "then the first normal one (arrival order)");
    ledger_uncharge(r, t, 9, 0, 100);
    waitq_serve(&q, 0, record, NULL);
    is_uint(norder, 4, "the rest granted");
    is_uint(order[2], 41, "second normal");
    is_uint(order[3], 11, "low last");
    is_uint(atomic_load(&r->devices[0].reserved), 40, "granted requests were charged");
    is_uint(atomic_load(&r->devices[0].waiters), 0, "no waiters left");
    is_uint(atomic_load(&t->slots[2].waiting), 0, "slot waiting cleared");
    is_int(atomic_load(&t->slots[2].wait_dev), -1, "slot wait_dev cleared");

    /* A big request blocked by capacity is not starved by smaller ones behind it. */
    norder = 0;
    ledger_charge(r, t, 9, 0, 50); /* 90 reserved of 100 */
    waitq_add(&q, 5, 1, 51, 0, 30, ROTA_PRIO_NORMAL, 1000);
    waitq_add(&q, 6, 1, 61, 0, 5, ROTA_PRIO_NORMAL, 1000);
    is_uint(waitq_serve(&q, 0, record, NULL), 0, "the small later request does not overtake the big one");
    /* A request blocked by its own limit does not block others. */
    atomic_store(&t->slots[7].limit, 1);
    waitq_add(&q, 7, 1, 71, 0, 1, ROTA_PRIO_HIGH, 1000);
    atomic_store(&t->slots[7].used[0], 1);
    is_uint(waitq_serve(&q, 0, record, NULL), 0, "limit-blocked high waiter skipped, capacity still blocks");
    is_uint(waitq_count_dev(&q, 0), 3, "three queued");

    /* Every holder waits: nobody can free for the big request, so one behind it that fits goes. */
    norder = 0;
    for (unsigned s = 1; s <= 9; s++) ledger_uncharge(r, t, s, 0, UINT64_MAX); /* the first part's holders leave */
    ledger_charge(r, t, 5, 0, 50);
    ledger_charge(r, t, 6, 0, 40); /* 90 reserved again, by the waiting clients 5 and 6 */
    atomic_store(&t->slots[7].used[0], 0);
    atomic_store(&t->slots[7].limit, 0);
    ledger_charge(r, t, 7, 0, 1);
    atomic_store(&t->slots[7].limit, 1); /* 7 holds 1 and waits too (blocked by its limit): 91 of 100 */
    is_uint(waitq_serve(&q, 0, record, NULL), 1, "every holder waits: the small request behind the big one goes");
    is_uint(order[0], 61, "(slot 6's 5 bytes)");
    ledger_charge(r, t, 9, 0, 1); /* a running client holds memory: it may free, the order holds again */
    waitq_add(&q, 6, 1, 62, 0, 5, ROTA_PRIO_NORMAL, 1000);
    is_uint(waitq_serve(&q, 0, record, NULL), 0, "with a running holder, the big request is not overtaken");
    ledger_uncharge(r, t, 9, 0, 1);
    is_uint(waitq_serve(&q, 0, record, NULL), 0, "nothing behind it fits: nothing moves");
    waiter_t *x = NULL;
    for (waiter_t *y = q.head; y; y = y->next)
        if (y->seq == 62) x = y;
    waitq_remove(&q, x);
    is_uint(waitq_count_dev(&q, 0), 2, "two queued (the big one, the limit-blocked one)");
    norder = 0;

    is_uint(waitq_next_deadline(&q), 1000, "next deadline");
    is_uint(waitq_expire(&q, 999, record, NULL), 0, "nothing expires early");
    is_uint(waitq_expire(&q, 1000, record, NULL), 2, "all expire at their deadline");
    is_int(statuses[0], -ENOMEM, "expired requests are answered -ENOMEM");
    is_uint(waitq_next_deadline(&q), UINT64_MAX, "empty queue has no deadline");

    waiter_t *w = waitq_add(&q, 8, 1, 81, 0, 5, ROTA_PRIO_LOW, 5);
    ok(waitq_contains(&q, w), "contains");
    waitq_add(&q, 8, 1, 82, 0, 5, ROTA_PRIO_LOW, 5);
    waitq_add(&q, 9, 1, 91, 0, 5, ROTA_PRIO_LOW, 5);
    waitq_drop_slot(&q, 8);
    is_uint(q.count, 1, "dropping a dead client's requests");
    is_uint(atomic_load(&t->slots[8].waiting), 0, "its waiting bytes cleared");
    norder = 0;
    waitq_flush(&q, -ESHUTDOWN, record, NULL);
    is_uint(norder, 1, "flush answers the rest");
    is_int(statuses[0], -ESHUTDOWN, "with the given status");
    region_destroy(&rg);
    return done_testing();
}
