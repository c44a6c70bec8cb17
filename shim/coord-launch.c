/* coord-launch.c - the launch gate: obeys rotad's holds, bounds lower-class work in flight, reports activity. */
#include "shim/coord-internal.h"

#include "shim/coord.h"
#include "shim/log.h"
#include "shim/options.h"
#include "shim/trace.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The gate of a launch (runtime/abi.h, "Launch scheduling", has the protocol):
 *
 *   every class   stamp channel.last_launch_ns; on the first launch after idling, set channel.active and ring
 *                 channel.doorbell (one FUTEX_WAKE: rotad's scheduler hears it in microseconds).
 *   high          nothing else: a few loads and stores, never a wait.
 *   normal, low   while rotad holds the client (slot.hold != 0, in the read-only region), the calling thread
 *                 waits on that futex word in slices of LAUNCH_HOLD_SLICE_NS, checking the socket between them:
 *                 rotad gone = fail-open. Then at most ROTA_MAX_INFLIGHT gated launches of the process may be in
 *                 flight: the thread waits (process-private futex) for the completion tracker (coord-track.c).
 *
 * A waiting thread holds the connection's read lock only (never a lock of the driver or of another hook), so
 * other threads' cuStreamSynchronize/cuCtxSynchronize, memory calls and the tracker all make progress, and
 * the work the held client already issued completes. The thread blocks, so its own launch order is kept.
 *
 * After the real launch, an event (CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) is recorded on the launch
 * stream and handed to the tracker; a launch whose event cannot be recorded (a stream of another context than
 * the current one) is not tracked. High clients are tracked too (rotad needs their in-flight count to tell
 * when they go idle), without a bound.
 *
 * Uncontended (rotad's slot.track == 0, runtime/abi.h), a normal/low launch passes with a few loads: no event, no
 * tracker, no bound. At the first launch that reads track == 1 (or a hold) again, one event is recorded on its
 * stream for the untracked backlog and counted as one launch in flight (backlog on other streams or contexts is
 * not covered: it runs like kernels already running when a high client arrives).
 */

#define LAUNCH_HOLD_SLICE_NS 20000000ll   /* re-check that rotad is alive this often while held */
#define LAUNCH_INFLIGHT_SLICE_NS 100000000ll
#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

static _Atomic uint32_t launch_inflight;  /* this process's tracked launches in flight (reserved included) */
static _Atomic uint32_t launch_done_seq;  /* futex word: bumped on every completion */
static _Atomic uint32_t launch_waiters;
static _Atomic uint32_t launch_backlog;   /* 1: untracked launches since the last tracked one */
static _Atomic uint64_t launch_count, launch_busy_ns;

typedef struct launch_thread {
    unsigned pending;      /* gates passed whose after has not run */
    unsigned reserved;     /* of which reserved an in-flight slot */
    unsigned untracked;    /* of which passed uncontended: not tracked */
    conn_t *conn;          /* cache of the device key of ctx on conn */
    CUcontext ctx;
    uint32_t key;
    unsigned misses;
} launch_thread_t;

static __thread launch_thread_t lt __attribute__((tls_model("initial-exec")));

static void launch_atfork_child(void)
{
    atomic_store(&launch_inflight, 0);
    atomic_store(&launch_waiters, 0);
    atomic_store(&launch_backlog, 0);
    lt = (launch_thread_t){0};
}

static pthread_once_t launch_once = PTHREAD_ONCE_INIT;
static void launch_setup(void)
{
    pthread_atfork(NULL, NULL, launch_atfork_child);
}

static long launch_futex_wait(_Atomic uint32_t *w, uint32_t val, long long ns, bool shared)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ll), .tv_nsec = (long)(ns % 1000000000ll)};
    return syscall(SYS_futex, w, shared ? FUTEX_WAIT : FUTEX_WAIT | FUTEX_PRIVATE_FLAG, val, &ts, NULL, 0);
}

/* rotad's end of the socket is gone (kill -9 included)? A poll with no events: no state is written. */
static bool launch_rotad_gone(conn_t *c)
{
    struct pollfd p = {.fd = conn_fd(c), .events = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* The connection whose rotad was found gone: not gated any more (until a memory hook reconnects). */
static _Atomic(conn_t *) launch_dead_conn;

static void launch_wait_hold(conn_t *c, const rota_slot_t *sl, rota_channel_t *ch)
{
    if (launch_rotad_gone(c)) {
        atomic_store(&launch_dead_conn, c);
        return;
    }
    atomic_fetch_add(&ch->held_waiting, 1);
    /* ROTA_TRACE: a hold span, only for a launch that actually waits here (never on the passing path). */
    uint32_t h0 = atomic_load(&sl->hold);
    bool traced = h0 && rota_trace_on();
    const char *why = h0 & ROTA_HOLD_PRIO ? "\"reason\":\"prio\""
                      : h0 & ROTA_HOLD_QUANTUM ? "\"reason\":\"quantum\""
                                               : "\"reason\":\"share\"";
    CUdevice dev = -1;
    if (traced) {
        if (ROTA_REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) dev = -1;
        rota_trace_event("hold", dev, 0, why);
    }
    for (;;) {
        uint32_t h = atomic_load(&sl->hold);
        if (!h) break;
        /* The region is mapped read-only: FUTEX_WAIT only reads the word. */
        launch_futex_wait((_Atomic uint32_t *)&sl->hold, h, LAUNCH_HOLD_SLICE_NS, true);
        if (atomic_load(&sl->hold) && launch_rotad_gone(c)) {
            atomic_store(&launch_dead_conn, c);
            rota_log(ROTA_LOG_WARN, "rotad went away while this process was held; launching uncoordinated");
            break;
        }
    }
    if (traced) rota_trace_event("release", dev, 0, atomic_load(&sl->hold) ? "\"end\":\"rotad_gone\"" : why);
    atomic_fetch_sub(&ch->held_waiting, 1);
}

/* Reserves one in-flight slot, waiting for a completion while max are in flight. */
static void launch_reserve(rota_channel_t *ch, unsigned max)
{
    for (;;) {
        uint32_t n = atomic_load(&launch_inflight);
        if (n < max) {
            if (atomic_compare_exchange_weak(&launch_inflight, &n, n + 1)) break;
            continue;
        }
        uint32_t seq = atomic_load(&launch_done_seq);
        atomic_fetch_add(&launch_waiters, 1);
        atomic_fetch_add(&ch->inflight_waiting, 1);
        if (atomic_load(&launch_inflight) >= max) launch_futex_wait(&launch_done_seq, seq, LAUNCH_INFLIGHT_SLICE_NS, false);
        atomic_fetch_sub(&ch->inflight_waiting, 1);
        atomic_fetch_sub(&launch_waiters, 1);
    }
}

static void launch_unreserve(void)
{
    atomic_fetch_sub(&launch_inflight, 1);
    atomic_fetch_add(&launch_done_seq, 1);
    if (atomic_load(&launch_waiters))
        syscall(SYS_futex, &launch_done_seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

static void launch_mirror(void)
{
    conn_t *c = coord_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    if (ch) {
        atomic_store_explicit(&ch->inflight, atomic_load(&launch_inflight), memory_order_relaxed);
        atomic_store_explicit(&ch->launches, atomic_load(&launch_count), memory_order_relaxed);
        atomic_store_explicit(&ch->busy_ns, atomic_load(&launch_busy_ns), memory_order_relaxed);
    }
    if (c) coord_conn_unlock();
}

void launch_complete(uint64_t busy_ns)
{
    atomic_fetch_add(&launch_busy_ns, busy_ns);
    launch_unreserve();
    launch_mirror();
}

/* Tracking resumes: one event on stream for whatever was launched untracked before, as one unit in flight. */
static void launch_track_backlog(CUcontext ctx, CUstream stream)
{
    CUevent ev = ctx ? track_event_get(ctx) : NULL;
    if (!ev) return;
    if (ROTA_REAL(cuEventRecord)(ev, stream) != CUDA_SUCCESS) {
        track_event_put(ev, ctx);
        return;
    }
    atomic_fetch_add(&launch_inflight, 1);
    if (!track_push(ev, ctx, coord_now_ns())) {
        track_event_put(ev, ctx);
        launch_unreserve();
    }
}

/* The rotad device key (index + 1, 0 unknown) of the current context, cached per thread. */
static uint32_t launch_dev_key(conn_t *c, CUcontext ctx)
{
    if (lt.conn == c && lt.ctx == ctx && (lt.key || (++lt.misses & 255))) return lt.key;
    CUdevice dev;
    uint32_t key = 0;
    if (ctx && ROTA_REAL(cuCtxGetDevice)(&dev) == CUDA_SUCCESS) {
        int x = coord_region_dev(c, dev);
        key = x >= 0 ? (uint32_t)x + 1 : 0;
    }
    lt.conn = c;
    lt.ctx = ctx;
    lt.key = key;
    return key;
}

CUresult coord_launch_gate(CUstream stream)
{
    (void)stream;
    const rota_options_t *o = rota_options();
    if (o->disable || !coord_conn_peek()) return CUDA_SUCCESS; /* uncoordinated: no lock taken */
    conn_t *c = coord_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    if (!ch || c == atomic_load_explicit(&launch_dead_conn, memory_order_relaxed)) {
        if (c) coord_conn_unlock();
        return CUDA_SUCCESS; /* uncoordinated: nothing gated, nothing tracked */
    }
    pthread_once(&launch_once, launch_setup);
    const rota_slot_t *sl = &conn_region(c)->slots[conn_slot(c)];
    CUcontext ctx = NULL;
    ROTA_REAL(cuCtxGetCurrent)(&ctx);
    uint32_t key = launch_dev_key(c, ctx);
    if (LD(&ch->sched_dev) != key) atomic_store_explicit(&ch->sched_dev, key, memory_order_relaxed);
    bool high = o->priority == ROTA_PRIORITY_HIGH;
    /* A multi-device launch passes one gate per stream before launching: only its first gate may wait (a
     * second one waiting for a completion would wait for its own first stream's launch). */
    if (!high && !lt.pending && !LD(&sl->track) && !LD(&sl->hold)) {
        lt.untracked++; /* uncontended: nothing to bound, nothing to track */
        if (!LD(&launch_backlog)) atomic_store_explicit(&launch_backlog, 1, memory_order_relaxed);
        /* The mirror of the last completion may have raced with another (last writer wins): refresh it. */
        atomic_store_explicit(&ch->inflight, LD(&launch_inflight), memory_order_relaxed);
        atomic_store_explicit(&ch->launches, LD(&launch_count), memory_order_relaxed);
    } else if (!high && lt.pending) {
        atomic_fetch_add(&launch_inflight, 1);
        lt.reserved++;
    } else if (!high) {
        unsigned max = o->max_inflight ? o->max_inflight : 1;
        if (LD(&launch_backlog) && atomic_exchange(&launch_backlog, 0)) launch_track_backlog(ctx, stream);
        for (;;) {
            if (LD(&sl->hold)) launch_wait_hold(c, sl, ch); /* returns at once when rotad is gone */
            launch_reserve(ch, max);
            /* A hold may have come while we waited for a completion: obey it before launching. */
            if (!LD(&sl->hold) || c == atomic_load(&launch_dead_conn)) break;
            launch_unreserve();
        }
        lt.reserved++;
    }
    lt.pending++;
    uint64_t now = coord_now_ns();
    atomic_store(&ch->last_launch_ns, now); /* seq_cst: pairs with rotad's idle check (runtime/sched.c) */
    if (!atomic_load(&ch->active)) {
        atomic_store_explicit(&ch->active_since_ns, now, memory_order_relaxed);
        atomic_store(&ch->active, 1);
        atomic_fetch_add(&ch->doorbell, 1);
        syscall(SYS_futex, &ch->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
    coord_conn_unlock();
    return CUDA_SUCCESS;
}

void coord_launch_after(CUstream stream, CUresult rc)
{
    if (!lt.pending) return; /* the gate let it through uncoordinated */
    lt.pending--;
    if (lt.untracked) {
        lt.untracked--;
        if (rc == CUDA_SUCCESS) atomic_fetch_add_explicit(&launch_count, 1, memory_order_relaxed);
        return;
    }
    bool reserved = lt.reserved > 0;
    if (reserved) lt.reserved--;
    if (rc != CUDA_SUCCESS) {
        if (reserved) launch_unreserve();
        return;
    }
    atomic_fetch_add(&launch_count, 1);
    if (!reserved) atomic_fetch_add(&launch_inflight, 1); /* high: counted, never bounded */
    CUcontext ctx = NULL;
    ROTA_REAL(cuCtxGetCurrent)(&ctx);
    CUevent ev = ctx ? track_event_get(ctx) : NULL;
    uint64_t now = coord_now_ns();
    if (ev && ROTA_REAL(cuEventRecord)(ev, stream) != CUDA_SUCCESS) {
        track_event_put(ev, ctx);
        ev = NULL;
    }
    if (!ev || !track_push(ev, ctx, now)) {
        if (ev) track_event_put(ev, ctx);
        launch_unreserve(); /* untracked: it cannot count against the bound */
    }
    launch_mirror();
}
