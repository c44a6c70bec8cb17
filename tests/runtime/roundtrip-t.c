/* roundtrip-t.c - measures an allocation's round trip through rotad's ledger (reserve + release) and reports
 * p50/p99; the assertion is a loose sanity bound, the figure (goal p99 <= 20 us) is printed for the record. */
#include "runtime/lib/conn.h"
#include "tests/runtime/rotad-helpers.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    th_setup("roundtrip");
    pid_t rotad = th_rotad_start();
    conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_CLIENT, .weight = 1000};
    conn_t *c;
    char err[256];
    if (conn_open(&o, &c, err, sizeof err)) bail("conn_open: %s", err);
    static const uint8_t u[16] = {0x42};
    unsigned n = 20000;
    const char *env = getenv("ROTA_BENCH_N");
    if (env) n = (unsigned)atoi(env);
    if (n < 100) n = 100;
    uint64_t *lat = calloc(n, sizeof *lat);
    int bad = 0;
    for (unsigned i = 0; i < 200; i++) { /* warm up */
        bad += conn_reserve(c, u, 1 << 30, 4096, 0, NULL, NULL) != 0;
        conn_release(c, u, 1 << 30, 4096);
    }
    /* 1: every reservation a round trip (rotad's answer awaited) */
    for (unsigned i = 0; i < n; i++) {
        uint64_t t0 = tap_now_ns();
        bad += conn_reserve(c, u, 1 << 30, 4096, 1000, NULL, NULL) != 0;
        lat[i] = tap_now_ns() - t0;
        conn_release(c, u, 1 << 30, 4096);
    }
    is_int(bad, 0, "%u reservations through rotad all granted", n);
    qsort(lat, n, sizeof *lat, cmp_u64);
    double p99 = (double)lat[n * 99 / 100] / 1e3;
    diag("round trip (no credit) over %u: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us", n,
         (double)lat[n / 2] / 1e3, p99, (double)lat[n * 999 / 1000] / 1e3, (double)lat[n - 1] / 1e3);
    in_range(p99, 0, 5000, "round-trip p99 under 5 ms (sanity bound for a loaded 2-core CI machine)");
    /* 2: what librota does: the channel's credit first, a round trip when it runs short */
    int dev = -1, slow = 0;
    conn_reserve(c, u, 1 << 30, 4096, 0, &dev, NULL);
    for (unsigned i = 0; i < n; i++) {
        uint64_t t0 = tap_now_ns();
        if (!conn_credit_take(c, dev, 4096)) {
            slow++;
            bad += conn_reserve(c, u, 1 << 30, 4096, 1000, NULL, NULL) != 0;
        }
        lat[i] = tap_now_ns() - t0;
        conn_release(c, u, 1 << 30, 4096);
    }
    is_int(bad, 0, "%u allocations with credit all granted", n);
    qsort(lat, n, sizeof *lat, cmp_u64);
    p99 = (double)lat[n * 99 / 100] / 1e3;
    diag("allocation through the ledger (credit fast path, %d round trips) over %u: p50 %.2f us, p99 %.2f us, "
         "p99.9 %.1f us, max %.1f us (goal p99 <= 20 us)",
         slow, n, (double)lat[n / 2] / 1e3, p99, (double)lat[n * 999 / 1000] / 1e3, (double)lat[n - 1] / 1e3);
    ok(slow < (int)n / 100, "fewer than 1%% of allocations need a round trip (%d)", slow);
    in_range(p99, 0, 1000, "fast-path p99 under 1 ms (sanity bound; goal 20 us)");
    conn_close(c);
    free(lat);
    is_int(th_rotad_stop(rotad), 0, "rotad stops cleanly");
    th_cleanup();
    return done_testing();
}
