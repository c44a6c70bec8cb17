/* admit.h - kernel-length-aware admission: when a high client's next request is due, and whether a lower launch waits. */
#ifndef ROTA_ADMIT_H
#define ROTA_ADMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A hold stops launches, not a kernel already on the GPU: a high request that arrives while a lower client's
 * long kernel runs waits for it. Where the high client's requests come at a steady cadence (a decode loop, a
 * video pipeline, a control loop), its next request is due at a time it can predict, and a lower launch that
 * would still run then can wait for it instead.
 *
 * The prediction (the high client): the starts of its requests, a request being a launch that found nothing of
 * it in flight, and the intervals between consecutive starts (the last ADMIT_RING). When its last launch in
 * flight completes, the next start is due at
 *
 *     due  = last start + q(1/8)          span = q(7/8) - q(1/8), at most half the median
 *
 * with q(x) the x-quantile of those intervals, once ADMIT_MIN_INTERVALS were seen and only while they are
 * concentrated: q(3/4) - q(1/8) at most a quarter of the median. Start to start, not completion to launch: a
 * request's starts follow its arrivals, while its completions move with whatever delayed its work (the very
 * kernels this is about). The low quantile makes the due time early rather than late. The span, how long the
 * others wait for a request that has not come yet, reaches a high quantile: a wait that ends before a late
 * request comes lets a kernel start just before it (with arrivals jittered by +-5 % of the period, ending at
 * q(3/4) left the service's p90 at 1.39x of alone, at q(7/8) 1.30x), and a long span costs nothing when the
 * request comes (the wait ends then); half the median keeps a double interval out of it. Poisson arrivals (q(3/4) - q(1/8) = 1.25 x the mean against a median of
 * 0.69) are never predicted; a request that found the previous one still in flight (a backlog) starts no
 * interval, so a missed start shows as a double interval, above q(3/4) while fewer than a quarter are.
 *
 * The rule (a lower client's launch gate, admit_until): with kernel_ns its average device time per launch and
 * ahead_ns what it has in flight before this launch, a launch waits when its expected end, now + ahead + kernel,
 * falls after due - ADMIT_MARGIN_NS, and the due time has not passed by more than span: until due + span, at most
 * cap_ns. The caller waits once per launch: a high request that came meanwhile holds it as usual, and the launch
 * goes when that hold ends, at the start of the next gap, whether it fits there or not. So a kernel that never
 * fits between two requests (longer than the gap) waits for at most one request per launch and then runs right
 * after it, which is where it delays the service least.
 *
 * Bounds: span counts no more than the kernel's own time (a lying due time costs a waiting launch at most
 * ahead + 2 x kernel + ADMIT_MARGIN_NS, and never more than cap_ns), and a due time more than ADMIT_HORIZON_NS
 * ahead is not acted on.
 */
#define ADMIT_RING 32u
#define ADMIT_MIN_INTERVALS 16u
#define ADMIT_MARGIN_NS 100000u            /* what the lower kernel's expected end may be off by */
#define ADMIT_HORIZON_NS 1000000000ull      /* due times further ahead are not acted on */

/* Lock-free: admit_pred_start on the thread whose launch found nothing in flight, admit_pred_due on any thread;
 * a reader that races with a writer sees a mix of two consecutive states, a due time one interval off at worst. */
typedef struct admit_pred {
    _Atomic uint64_t last_ns;              /* the newest start (0: none) */
    _Atomic uint32_t n;                    /* intervals recorded, saturating at UINT32_MAX */
    _Atomic uint32_t iv_us[ADMIT_RING];    /* the intervals, microseconds (ring, by n) */
} admit_pred_t;

/* Forgets every start. */
void admit_pred_reset(admit_pred_t *p);
/* A request started at t_ns (CLOCK_MONOTONIC). */
void admit_pred_start(admit_pred_t *p, uint64_t t_ns);
/* The next start's due time and span (above); false, both 0, when the intervals do not predict it. */
bool admit_pred_due(const admit_pred_t *p, uint64_t *due_ns, uint64_t *span_ns);

/* Until when (CLOCK_MONOTONIC ns) a lower launch at now waits for the high request due at due_ns (0: none),
 * span_ns late at most; 0: it launches now. cap_ns: the longest wait (0: no admission). */
uint64_t admit_until(uint64_t now, uint64_t ahead_ns, uint64_t kernel_ns, uint64_t due_ns, uint64_t span_ns,
                     uint64_t cap_ns);

#endif
