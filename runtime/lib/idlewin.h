/* idlewin.h - the learned idle window of a high-priority client: how long after its work ends to keep holding. */
#ifndef ROTA_IDLEWIN_H
#define ROTA_IDLEWIN_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * When a high client's last launch in flight completes, the lower classes on its GPU are held until it is judged
 * idle. Holding on costs the GPU's idle time for as long as the client stays away; letting go too soon costs
 * its next request the lower classes' work in flight (and a re-hold). That is the ski-rental problem: waiting
 * is renting, a release that the client's return proves wrong is buying. A fixed window of P (rotad --idle-ms)
 * is the classic answer that is never worse than twice the best choice made in hindsight; knowing how the
 * client's gaps are distributed does better: pick the window w that minimises, over the gaps g seen,
 *
 *     cost(w) = sum over g <= w of g  +  sum over g > w of (w + P)
 *
 * A server whose requests follow each other by microseconds when queued and by milliseconds otherwise then
 * gets a window just above its queued gaps; one whose gaps are all short keeps P; one whose gaps are all long
 * is released at once. The gaps are measured from the completion of the last launch in flight (as the client's
 * tracker sees it) to the next launch, so they do not depend on the window chosen.
 *
 * The gaps go into a histogram of IDLEWIN_BUCKETS geometric buckets (half-octaves from 8 us) with the sum of
 * each bucket's gaps, so cost() is exact at the buckets' bounds, the only windows considered (with 0 and P).
 * Counts decay: once IDLEWIN_DECAY_AT gaps are held, all are halved, so the window follows a client whose
 * traffic changes. Until IDLEWIN_MIN_GAPS gaps were seen the window is P.
 *
 * Lock-free: idlewin_add may run on any thread at once (atomic adds); idlewin_choose on one thread at a time.
 */
#define IDLEWIN_BUCKETS 32
#define IDLEWIN_MIN_GAPS 16u
#define IDLEWIN_DECAY_AT 512u

typedef struct idlewin {
    _Atomic uint32_t n[IDLEWIN_BUCKETS];
    _Atomic uint64_t sum_ns[IDLEWIN_BUCKETS];
    _Atomic uint32_t total;
} idlewin_t;

/* Forgets every gap. */
void idlewin_reset(idlewin_t *w);
/* The upper bound of bucket k (ns); the last bucket has none (UINT64_MAX). */
uint64_t idlewin_bound_ns(unsigned k);
/* One gap, from a completion that left nothing in flight to the next launch. */
void idlewin_add(idlewin_t *w, uint64_t gap_ns);
/* The window that minimises cost() for break-even penalty_ns (rotad --idle-ms), at most penalty_ns. */
uint64_t idlewin_choose(idlewin_t *w, uint64_t penalty_ns);
/* When a high client with nothing in flight is idle, for rotad and for its own direct release alike (abi.h,
 * learned idle window): win_ns (at most idle_ns; idle_ns itself unless learning) after from_ns, the completion that
 * left nothing in flight. Only a completion after the last launch counts: a launch since voids it, and with none
 * known (from_ns 0) it is idle_ns after the last launch (last_ns). Counting from the completion, not the launch:
 * a request whose work outlasts idle_ns was launched longer ago than that when it completes, and the launch rule
 * alone then releases the lower classes at once, into the gap before the next request that was already queued. */
uint64_t idlewin_due(uint64_t last_ns, uint64_t idle_ns, uint64_t from_ns, uint64_t win_ns);

#endif
