/* sample-t.c - TAP tests of the rota tool's rates (tools/rota/sample.c): every rate from one window, and a GPU's
 * clients never summing to more device time than the GPU had busy (issue 24: 0.91 against the GPU's 0.75). */
#include "tools/rota/sample.h"

#include "tests/tap/tap.h"

#include <stdlib.h>

#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

static void live(rota_table_t *t, unsigned i, int dev, uint64_t busy, uint64_t launches)
{
    ST(&t->slots[i].state, ROTA_SLOT_LIVE);
    ST(&t->slots[i].gen, i + 1);
    ST(&t->slots[i].device, dev);
    ST(&t->slots[i].busy_ns, busy);
    ST(&t->slots[i].launches, launches);
}

int main(void)
{
    rota_region_t *r = calloc(1, sizeof *r);
    rota_table_t *t = calloc(1, sizeof *t);
    rota_sample_t *s = calloc(2, sizeof *s);
    if (!r || !t || !s) bail("out of memory");
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) ST(&t->slots[i].device, -1);
    ST(&r->ndevices, 2);

    /* GPU 0: rotad saw it busy 0.75 s of the second; its two clients measured 0.50 + 0.41 s (overlapping). */
    live(t, 0, 0, 1000000000, 10);
    live(t, 1, 0, 2000000000, 20);
    ST(&r->devices[0].busy_ns, 5000000000);
    /* GPU 1: no measure of rotad's own (0): the GPU's time is its client's sum. */
    live(t, 2, 1, 0, 0);
    rota_sample_take(r, t, &s[0]);
    ST(&t->slots[0].busy_ns, 1500000000);
    ST(&t->slots[0].launches, 110);
    ST(&t->slots[1].busy_ns, 2410000000);
    ST(&r->devices[0].busy_ns, 5750000000);
    ST(&t->slots[2].busy_ns, 300000000);
    rota_sample_take(r, t, &s[1]);
    s[1].t_ns = s[0].t_ns + 1000000000; /* exactly one second later */

    double gpu = 0, clients = 0, l0 = 0, b0 = 0, l1 = 0, b1 = 0, l2 = 0, b2 = 0;
    ok(rota_sample_dev_busy(&s[0], &s[1], 0, &gpu), "GPU 0's busy fraction is known");
    in_range(gpu, 0.7499, 0.7501, "GPU 0 was busy 0.75 (%.4f)", gpu);
    ok(rota_sample_rates(&s[0], &s[1], 0, &l0, &b0) && rota_sample_rates(&s[0], &s[1], 1, &l1, &b1),
       "both clients' rates are known");
    in_range(l0, 99.99, 100.01, "launches/s from the same window (%.2f)", l0);
    in_range(b0 + b1, 0.7499, 0.7501, "the clients of GPU 0 sum to the GPU's 0.75, not 0.91 (%.4f)", b0 + b1);
    in_range(b0 / b1, 0.5 / 0.41 - 0.001, 0.5 / 0.41 + 0.001, "in proportion to what each measured (%.4f)", b0 / b1);
    ok(rota_sample_dev_clients(&s[0], &s[1], 0, &clients), "GPU 0's clients' sum is known");
    in_range(clients, b0 + b1 - 1e-9, b0 + b1 + 1e-9, "and is the sum of their rows (%.4f)", clients);
    ok(clients <= gpu + 1e-12, "never more than the GPU's");

    ok(rota_sample_rates(&s[0], &s[1], 2, &l2, &b2), "GPU 1's client's rates are known");
    in_range(b2, 0.2999, 0.3001, "without a measure of rotad's, a client keeps what it measured (%.4f)", b2);
    ok(rota_sample_dev_busy(&s[0], &s[1], 1, &gpu), "GPU 1's busy fraction is known");
    in_range(gpu, 0.2999, 0.3001, "and is its clients' sum (%.4f)", gpu);

    /* Clients under the GPU's time are left alone. */
    ST(&t->slots[0].busy_ns, 1600000000);
    ST(&t->slots[1].busy_ns, 2510000000);
    ST(&r->devices[0].busy_ns, 6750000000);
    rota_sample_take(r, t, &s[0]);
    s[0].t_ns = s[1].t_ns + 1000000000;
    ok(rota_sample_rates(&s[1], &s[0], 0, &l0, &b0), "a second window");
    in_range(b0, 0.0999, 0.1001, "a client within the GPU's time is not scaled (%.4f)", b0);

    /* A slot with a new owner has no rate. */
    ST(&t->slots[1].gen, 99);
    rota_sample_take(r, t, &s[1]);
    ok(!rota_sample_rates(&s[0], &s[1], 1, &l1, &b1), "no rate across a change of owner");
    free(r);
    free(t);
    free(s);
    return done_testing();
}
