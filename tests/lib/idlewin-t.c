/* idlewin-t.c - TAP tests for the learned idle window (runtime/lib/idlewin.c): the cost it minimises, by cases and
 * against a brute force over the raw gaps. */
#include "runtime/lib/idlewin.h"
#include "tests/tap/tap.h"

#include <math.h>
#include <stdlib.h>

#define US 1000ull
#define MS 1000000ull

/* cost(w) of idlewin.h, exactly, over raw gaps. */
static long double cost(const uint64_t *g, size_t n, uint64_t w, uint64_t p)
{
    long double c = 0;
    for (size_t i = 0; i < n; i++) c += g[i] <= w ? (long double)g[i] : (long double)(w + p);
    return c;
}

static uint64_t rng_exp_ns(double mean)
{
    return (uint64_t)(-log(1.0 - tap_rand_unit()) * mean);
}

static void fill(idlewin_t *w, const uint64_t *g, size_t n)
{
    idlewin_reset(w);
    for (size_t i = 0; i < n; i++) idlewin_add(w, g[i]);
}

int main(void)
{
    static idlewin_t w;
    static uint64_t g[4096];
    const uint64_t P = 2 * MS;

    /* buckets */
    bool mono = true;
    for (unsigned k = 1; k + 1 < IDLEWIN_BUCKETS; k++) mono &= idlewin_bound_ns(k) > idlewin_bound_ns(k - 1);
    ok(mono, "bucket bounds increase");
    is_uint(idlewin_bound_ns(0), 8 * US, "the first bound is 8 us");
    is_uint(idlewin_bound_ns(2), 16 * US, "bounds double every two buckets");
    is_uint(idlewin_bound_ns(IDLEWIN_BUCKETS - 1), UINT64_MAX, "the last bucket is open");
    ok(idlewin_bound_ns(IDLEWIN_BUCKETS - 2) > 200 * MS, "the buckets reach past 200 ms");

    /* too few gaps: the fixed window */
    idlewin_reset(&w);
    for (unsigned i = 0; i + 1 < IDLEWIN_MIN_GAPS; i++) idlewin_add(&w, 10 * MS);
    is_uint(idlewin_choose(&w, P), P, "fewer than IDLEWIN_MIN_GAPS gaps: the window is P");
    idlewin_add(&w, 10 * MS);
    is_uint(idlewin_choose(&w, P), 0, "then gaps all 5x P: release at once");
    is_uint(idlewin_choose(&w, 0), 0, "P = 0 stays 0");

    /* all short: nothing gained by releasing, ties keep the longest window */
    for (size_t i = 0; i < 200; i++) g[i] = 50 * US;
    fill(&w, g, 200);
    is_uint(idlewin_choose(&w, P), P, "gaps all 50 us: the window stays P");

    /* bimodal: queued requests follow at ~50 us, the others after milliseconds */
    for (size_t i = 0; i < 1000; i++)
        g[i] = i % 5 < 2 ? 30 * US + (uint64_t)(tap_rand_unit() * 40 * US) : 5 * MS + rng_exp_ns(5e6);
    fill(&w, g, 1000);
    uint64_t win = idlewin_choose(&w, P);
    ok(win >= 70 * US && win <= 128 * US, "40%% gaps of 30-70 us, 60%% of 5+ ms: window just above 70 us (%llu ns)",
       (unsigned long long)win);

    /* memoryless gaps: mean above P releases at once, mean below P keeps P (the ski-rental extremes) */
    for (size_t i = 0; i < 4000; i++) g[i] = rng_exp_ns(10e6);
    fill(&w, g, 4000);
    ok(idlewin_choose(&w, P) <= 64 * US, "exponential gaps, mean 5x P: window near 0 (%llu ns)",
       (unsigned long long)idlewin_choose(&w, P));
    for (size_t i = 0; i < 4000; i++) g[i] = rng_exp_ns(0.4e6);
    fill(&w, g, 4000);
    ok(idlewin_choose(&w, P) >= P / 2, "exponential gaps, mean P/5: window near P (%llu ns)",
       (unsigned long long)idlewin_choose(&w, P));

    /* against brute force: the window chosen costs no more than any bucket bound under P, or 0 */
    bool best = true, bounded = true;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 20 + (size_t)(tap_rand_unit() * 400);
        double a = 5e3 + tap_rand_unit() * 3e6, b = 5e3 + tap_rand_unit() * 3e6, f = tap_rand_unit();
        for (size_t i = 0; i < n; i++)
            g[i] = tap_rand_unit() < f ? rng_exp_ns(a) : (uint64_t)(b * (0.5 + tap_rand_unit()));
        fill(&w, g, n);
        uint64_t p = (uint64_t)(100e3 + tap_rand_unit() * 5e6);
        uint64_t c = idlewin_choose(&w, p);
        bounded &= c <= p;
        long double got = cost(g, n, c, p);
        for (unsigned k = 0; k < IDLEWIN_BUCKETS && idlewin_bound_ns(k) < p; k++) {
            long double alt = cost(g, n, idlewin_bound_ns(k), p);
            if (got > alt * (1 + 1e-12L)) {
                best = false;
                diag("trial %d: window %llu costs %Lg, bound %llu costs %Lg", trial, (unsigned long long)c, got,
                     (unsigned long long)idlewin_bound_ns(k), alt);
            }
        }
        if (got > cost(g, n, 0, p) * (1 + 1e-12L)) best = false;
    }
    ok(bounded, "200 random mixes: the window never exceeds P");
    ok(best, "200 random mixes: no bucket bound under P, nor 0, costs less than the window chosen");

    /* decay: a client whose traffic changes is followed */
    idlewin_reset(&w);
    for (int i = 0; i < 2000; i++) {
        idlewin_add(&w, 20 * MS);
        (void)idlewin_choose(&w, P);
    }
    ok(w.total < IDLEWIN_DECAY_AT + 1, "counts decay (%u held)", (unsigned)w.total);
    is_uint(idlewin_choose(&w, P), 0, "long gaps only: release at once");
    for (int i = 0; i < 2000; i++) {
        idlewin_add(&w, i % 2 ? 40 * US : 20 * MS);
        (void)idlewin_choose(&w, P);
    }
    win = idlewin_choose(&w, P);
    ok(win >= 40 * US && win <= 64 * US, "then half the gaps 40 us: the window follows to just above (%llu ns)",
       (unsigned long long)win);
    for (int i = 0; i < 3000; i++) {
        idlewin_add(&w, 40 * US);
        (void)idlewin_choose(&w, P);
    }
    is_uint(idlewin_choose(&w, P), P, "then only 40 us gaps: back to P");
    /* the idle rule rotad and the client share */
    is_uint(idlewin_due(100 * MS, P, 0, 0), 102 * MS, "due: no completion recorded: the idle window after the launch");
    is_uint(idlewin_due(100 * MS, P, 101 * MS, 0), 101 * MS, "due: window 0: at the completion");
    is_uint(idlewin_due(100 * MS, P, 101 * MS, 300 * US), 101 * MS + 300 * US, "due: the window after the completion");
    is_uint(idlewin_due(100 * MS, P, 101 * MS, 5 * MS), 103 * MS, "due: a window longer than the idle window is "
            "clamped to it, after the completion");
    is_uint(idlewin_due(100 * MS, P, 104 * MS, 300 * US), 104 * MS + 300 * US,
            "due: work that outlasts the idle window (launched at 100 ms, done at 104 ms): still the window after "
            "the completion, not at once because the launch is 4 ms old (a queued request's gap is not released)");
    is_uint(idlewin_due(100 * MS, P, 104 * MS, P), 106 * MS, "due: unlearned (window = the idle window): the idle "
            "window after the completion");
    is_uint(idlewin_due(100 * MS, P, 99 * MS, 0), 102 * MS, "due: a completion before the last launch is void");
    is_uint(idlewin_due(100 * MS, P, 100 * MS, 0), 102 * MS, "due: ... and one at the same instant");
    return done_testing();
}
