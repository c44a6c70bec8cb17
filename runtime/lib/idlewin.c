/* idlewin.c - the learned idle window of a high-priority client (see idlewin.h for the cost it minimises). */
#include "runtime/lib/idlewin.h"

#include <stdbool.h>

#define IDLEWIN_BASE_NS 8000u

void idlewin_reset(idlewin_t *w)
{
    for (unsigned k = 0; k < IDLEWIN_BUCKETS; k++) {
        atomic_store_explicit(&w->n[k], 0, memory_order_relaxed);
        atomic_store_explicit(&w->sum_ns[k], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&w->total, 0, memory_order_relaxed);
}

uint64_t idlewin_due(uint64_t last_ns, uint64_t idle_ns, uint64_t from_ns, uint64_t win_ns)
{
    if (from_ns <= last_ns) return last_ns + idle_ns; /* no completion since the last launch is known */
    return from_ns + (win_ns < idle_ns ? win_ns : idle_ns);
}

uint64_t idlewin_bound_ns(unsigned k)
{
    if (k + 1 >= IDLEWIN_BUCKETS) return UINT64_MAX;
    /* 8 us * 2^(k/2): the odd bounds times sqrt(2), in integers (181/128 = 1.414). */
    uint64_t b = (uint64_t)IDLEWIN_BASE_NS << (k / 2);
    return k & 1 ? b * 181 / 128 : b;
}

static unsigned idlewin_bucket(uint64_t g)
{
    unsigned lo = 0, hi = IDLEWIN_BUCKETS - 1; /* the first bucket whose bound is >= g */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (g <= idlewin_bound_ns(mid)) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

void idlewin_add(idlewin_t *w, uint64_t gap_ns)
{
    unsigned k = idlewin_bucket(gap_ns);
    atomic_fetch_add_explicit(&w->sum_ns[k], gap_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->n[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->total, 1, memory_order_relaxed);
}

/* Halves every count and sum, subtracting rather than storing so that concurrent adds are kept. */
static void idlewin_decay(idlewin_t *w)
{
    uint32_t t = 0;
    for (unsigned k = 0; k < IDLEWIN_BUCKETS; k++) {
        uint32_t n = atomic_load_explicit(&w->n[k], memory_order_relaxed);
        uint64_t s = atomic_load_explicit(&w->sum_ns[k], memory_order_relaxed);
        atomic_fetch_sub_explicit(&w->n[k], n - n / 2, memory_order_relaxed);
        atomic_fetch_sub_explicit(&w->sum_ns[k], s - s / 2, memory_order_relaxed);
        t += n - n / 2;
    }
    atomic_fetch_sub_explicit(&w->total, t, memory_order_relaxed);
}

uint64_t idlewin_choose(idlewin_t *w, uint64_t penalty_ns)
{
    uint32_t n[IDLEWIN_BUCKETS];
    uint64_t sum[IDLEWIN_BUCKETS];
    if (atomic_load_explicit(&w->total, memory_order_relaxed) >= IDLEWIN_DECAY_AT) idlewin_decay(w);
    uint64_t all = 0;
    for (unsigned k = 0; k < IDLEWIN_BUCKETS; k++) {
        n[k] = atomic_load_explicit(&w->n[k], memory_order_relaxed);
        sum[k] = atomic_load_explicit(&w->sum_ns[k], memory_order_relaxed);
        all += n[k];
    }
    if (all < IDLEWIN_MIN_GAPS || !penalty_ns) return penalty_ns;
    /* cost(w) = below_sum + above_n * (w + P), with below = the buckets whose bound is <= w. Windows in
     * increasing order: 0, then each bound under P, then P itself, where the gaps of the bucket P falls in are
     * counted above: P's cost is then an upper bound, so P is chosen only where it costs no more than every
     * other window. Ties keep the longer window: fewer releases for the same cost. In long double, as gaps
     * times windows can pass 2^64 ns^2. */
    long double best = (long double)all * (long double)penalty_ns; /* w = 0 */
    uint64_t best_w = 0, above = all;
    long double below = 0;
    for (unsigned k = 0; k < IDLEWIN_BUCKETS; k++) {
        uint64_t b = idlewin_bound_ns(k);
        bool last = b >= penalty_ns;
        if (b <= penalty_ns) { /* every gap of bucket k is <= its bound, so <= the window */
            below += (long double)sum[k];
            above -= n[k];
        }
        uint64_t cand = last ? penalty_ns : b;
        long double cost = below + (long double)above * (long double)(cand + penalty_ns);
        if (cost <= best) {
            best = cost;
            best_w = cand;
        }
        if (last) break;
    }
    return best_w;
}
