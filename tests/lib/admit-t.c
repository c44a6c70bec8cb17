/* admit-t.c - TAP tests for kernel-length-aware admission (runtime/lib/admit.c): the prediction of a high client's
 * next request from its starts, and the rule that keeps a lower launch back. */
#include "runtime/lib/admit.h"
#include "tests/tap/tap.h"

#include <math.h>

#define US 1000ull
#define MS 1000000ull

/* n starts from t0, period apart, each moved by up to jitter x period either way; returns the last. */
static uint64_t periodic(admit_pred_t *p, uint64_t t0, unsigned n, uint64_t period, double jitter)
{
    uint64_t t = t0;
    for (unsigned i = 0; i < n; i++) {
        t = t0 + (uint64_t)i * period + (uint64_t)((2 * tap_rand_unit() - 1) * jitter * (double)period);
        admit_pred_start(p, t);
    }
    return t;
}

int main(void)
{
    static admit_pred_t p;
    uint64_t due, span;

    /* the prediction */
    admit_pred_reset(&p);
    ok(!admit_pred_due(&p, &due, &span) && !due && !span, "no starts: nothing is due");
    uint64_t last = periodic(&p, 10 * MS, ADMIT_MIN_INTERVALS, 3 * MS, 0);
    ok(!admit_pred_due(&p, &due, &span), "%u starts (%u intervals): too few to predict", ADMIT_MIN_INTERVALS,
       ADMIT_MIN_INTERVALS - 1);
    admit_pred_start(&p, last + 3 * MS);
    ok(admit_pred_due(&p, &due, &span), "%u intervals of 3 ms: predicted", ADMIT_MIN_INTERVALS);
    is_uint(due, last + 6 * MS, "due one period after the last start");
    is_uint(span, 0, "span 0: every interval alike");

    admit_pred_reset(&p);
    last = periodic(&p, 1000 * MS, 200, 5 * MS, 0.05);
    bool pr = admit_pred_due(&p, &due, &span);
    ok(pr, "5 ms period, arrivals jittered by +-5 %%: predicted");
    ok(pr && due >= last + 5 * MS - 600 * US && due <= last + 5 * MS - 50 * US,
       "due early in the interval's spread: %.3f ms after the last start (period 5, jitter 0.25 ms)",
       (double)(due - last) / 1e6);
    ok(pr && span >= 300 * US && span <= 5 * MS / 4,
       "span from q(1/8) to q(7/8) of intervals within +-0.5 ms: %.3f ms", (double)span / 1e6);

    /* a backlog: every sixth start is missed (the request found the previous one in flight): a double interval */
    admit_pred_reset(&p);
    uint64_t t = 0;
    for (unsigned i = 1; i <= 200; i++)
        if (i % 6) admit_pred_start(&p, t = i * 4 * MS);
    ok(admit_pred_due(&p, &due, &span) && due == t + 4 * MS,
       "one start in six missed (double intervals): still due one period after the last start");
    is_uint(span, 2 * MS, "  its span: half the median, not the double interval");
    admit_pred_reset(&p);
    for (unsigned i = 1; i <= 200; i++)
        if (i % 3) admit_pred_start(&p, i * 4 * MS);
    ok(!admit_pred_due(&p, &due, &span), "one start in three missed: not predicted");

    /* Poisson: never */
    admit_pred_reset(&p);
    unsigned predicted = 0;
    t = 0;
    for (unsigned i = 0; i < 2000; i++) {
        t += (uint64_t)(-log(1.0 - tap_rand_unit()) * 3e6) + 1;
        admit_pred_start(&p, t);
        predicted += admit_pred_due(&p, &due, &span);
    }
    is_uint(predicted, 0, "Poisson arrivals (mean 3 ms), 2000 starts: never predicted");

    /* a change of cadence: followed within one ring */
    admit_pred_reset(&p);
    last = periodic(&p, 0, 100, 2 * MS, 0);
    last = periodic(&p, last + 10 * MS, ADMIT_RING + 1, 10 * MS, 0);
    ok(admit_pred_due(&p, &due, &span) && due == last + 10 * MS, "from 2 ms to 10 ms: due 10 ms after");

    /* the rule: now 0 is 100 ms after the epoch here, due 3 ms on */
    const uint64_t N = 100 * MS, cap = 20 * MS;
    is_uint(admit_until(N, 0, 1 * MS, 0, 0, cap), 0, "nothing due: launch");
    is_uint(admit_until(N, 0, 1 * MS, N + 3 * MS, 0, cap), 0, "a 1 ms kernel ends 2 ms before the due time: launch");
    is_uint(admit_until(N, 0, 2950 * US, N + 3 * MS, 0, cap), N + 3 * MS,
            "a 2.95 ms kernel ends inside the margin: wait until the due time");
    is_uint(admit_until(N, 0, 2 * MS, N + 3 * MS, 0, cap), 0, "2 ms ends 1 ms before: launch");
    is_uint(admit_until(N, 1200 * US, 2 * MS, N + 3 * MS, 0, cap), N + 3 * MS,
            "2 ms behind 1.2 ms in flight: wait");
    is_uint(admit_until(N, 0, 5 * MS, N + 3 * MS, 400 * US, cap), N + 3400 * US, "wait until due + span");
    is_uint(admit_until(N, 0, 1 * MS, N + 500 * US, 2 * MS, cap), N + 1500 * US,
            "span counts no more than the kernel's own time");
    is_uint(admit_until(N, 0, 5 * MS, N - 200 * US, 400 * US, cap), N + 200 * US,
            "due passed, within its span: wait for the rest of the span");
    is_uint(admit_until(N, 0, 5 * MS, N - 500 * US, 400 * US, cap), 0, "due passed beyond its span: launch");
    is_uint(admit_until(N, 0, 5 * MS, N + 3 * MS, 0, 1 * MS), N + 1 * MS, "the wait is capped (cap 1 ms)");
    is_uint(admit_until(N, 0, 5 * MS, N + 3 * MS, 0, 0), 0, "cap 0: no admission");
    is_uint(admit_until(N, 0, 0, N + 3 * MS, 0, cap), 0, "no kernel time known yet: launch");
    is_uint(admit_until(N, 0, 2 * ADMIT_HORIZON_NS, N + ADMIT_HORIZON_NS + 1, 0, UINT64_MAX), 0,
            "a due time past the horizon is not acted on");
    /* what a lying due time costs a launch at most: ahead + 2 x kernel + margin */
    uint64_t worst = 0;
    for (uint64_t d = N - 10 * MS; d < N + 10 * MS; d += 37 * US)
        for (uint64_t s = 0; s < 10 * MS; s += 311 * US) {
            uint64_t u = admit_until(N, 300 * US, 1 * MS, d, s, UINT64_MAX);
            if (u && u - N > worst) worst = u - N;
        }
    ok(worst <= 300 * US + 2 * MS + ADMIT_MARGIN_NS,
       "any due time and span: a 1 ms launch behind 0.3 ms waits at most %.2f ms", (double)worst / 1e6);
    return done_testing();
}
