/* client-launch.c - the launch gate: obeys rotad's holds, bounds lower-class work in flight, reports activity. */
#include "shim/client-internal.h"

#include "shim/client.h"
#include "shim/log.h"
#include "shim/options.h"
#include "shim/trace.h"

#include "runtime/lib/admit.h"
#include "runtime/lib/idlewin.h"

#include <errno.h>
#include <link.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The gate of a launch (runtime/abi.h, "Launch scheduling", has the protocol):
 *
 *   every class   stamp channel.last_launch_ns; on the first launch after idling, set channel.active and ring
 *                 channel.doorbell (one FUTEX_WAKE: rotad's scheduler hears it in microseconds).
 *   high          on that first launch, also mark the board (board.devices[its GPU].high_pending, abi.h) after
 *                 setting channel.active, and time it: that store is the moment lower classes are held. Else
 *                 nothing: a few loads and stores, never a wait.
 *   normal, low   while rotad holds the client (slot.hold != 0, in the read-only region) or the board marks a
 *                 high activation on its GPU that rotad has not answered yet, the calling thread waits on that
 *                 futex word in slices of LAUNCH_HOLD_SLICE_NS, checking the socket between them: rotad gone =
 *                 fail-open. Then at most ROTA_MAX_INFLIGHT gated launches of the process may be in flight: the
 *                 thread waits (process-private futex) for the completion tracker (client-tracker.c). Where
 *                 the GPU's only high client has put the time its next request is due on the board, a launch
 *                 that would still run then waits for it, once per launch (ROTA_ADMIT; runtime/lib/admit.h).
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
 * Uncontended (rotad's slot.contended == 0, runtime/abi.h), a normal/low launch passes with a few loads: no bound, and
 * no event but for the device time: the launches form windows (up to LAUNCH_SAMPLE_EVERY launches within
 * LAUNCH_SAMPLE_NS of the first), and a window's first launch is sampled: timed events before and after it, handed
 * to the tracker as one unit in flight, give its own device time. When the window closes (a launch past it, a
 * synchronisation: client_launch_synced, tracking resuming), its other launches count at the newest sample's time
 * each, never more than the window lasted. So an uncontended client's device time shows, at one event pair per
 * window, at most one a millisecond (bench/shim-overhead). A synchronisation also mirrors the launch count, which
 * the gate mirrors before each launch. At the first launch that reads contended == 1 (or a hold) again, one
 * event is recorded on its stream for the untracked backlog and counted as one launch in flight (backlog on other
 * streams or contexts is not covered: it runs like kernels already running when a high client arrives).
 */

#define LAUNCH_SAMPLE_EVERY 1024u
#define LAUNCH_SAMPLE_NS 1000000u
#define LAUNCH_HOLD_SLICE_NS 20000000ll   /* re-check that rotad is alive this often while held */
#define LAUNCH_INFLIGHT_SLICE_NS 100000000ll
/* How often a high client's tracker asks whether its launching thread sleeps for input, while its idle window
 * lasts: a few tens of microseconds, against windows of hundreds (one pread each; the tracker's timer slack is
 * 1 us, client-tracker.c). */
#define LAUNCH_PROBE_NS 25000u
#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#ifndef MADV_POPULATE_READ
#define LAUNCH_MADV_POPULATE_READ 22 /* Linux 5.14 */
#else
#define LAUNCH_MADV_POPULATE_READ MADV_POPULATE_READ
#endif

/* The process's launch state, in one place. A fork child starts with nothing in flight and nobody waiting: the
 * fork handler (launch_atfork_child) resets the work part; the totals carry on, as the parent's figures. */
typedef struct launch_state {
    struct launch_work {
        _Atomic uint32_t inflight;  /* this process's tracked launches in flight (reserved included) */
        _Atomic uint32_t waiters;
        _Atomic uint32_t backlog;   /* 1: untracked launches since the last tracked one */
        /* The open window of uncontended launches: how many, when its first (sampled) one passed its gate (0:
         * none open). */
        _Atomic uint32_t sample_n;
        _Atomic uint64_t sample_from;
        _Atomic uint32_t unmirrored; /* 1: an uncontended launch counted after its gate mirrored the count */
        /* A high client's gaps, from a completion that left nothing in flight to the next launch, and that
         * completion's time until the next launch takes it (0: taken). They give its learned idle window (abi.h). */
        idlewin_t gaps;
        _Atomic uint64_t idle_from;
        /* A high client's request starts (launches that found nothing in flight): when its next one is due. */
        admit_pred_t reqs;
        _Atomic uint32_t dead_gen;  /* the connection (client_conn_gen) whose rotad was found gone; 0: none */
    } work;
    _Atomic uint32_t done_seq;      /* futex word: bumped on every completion */
    _Atomic uint64_t count, busy_ns;
    _Atomic uint64_t kernel_ns;     /* moving average of a tracked launch's device time (0: none yet) */
    _Atomic uint64_t head_ns;       /* when the oldest launch in flight began running, about */
    _Atomic uint64_t sample_own_ns; /* the newest sample's own device time (0: none yet) */
} launch_state_t;

/* This process's launches (shared by its threads). */
static launch_state_t launches;

typedef struct launch_thread {
    unsigned pending;      /* gates passed whose after has not run */
    unsigned reserved;     /* of which reserved an in-flight slot */
    unsigned untracked;    /* of which passed uncontended: not tracked */
    unsigned sampled;      /* of which are to be sampled (an event, for the device time): 0 or 1 */
    CUevent sample_start;  /* its timed event recorded before it, in sample_ctx */
    CUcontext sample_ctx;
    uint64_t sample_ns;    /* when its gate passed (its device time lies after it) */
    conn_t *conn;          /* cache of the device key of ctx on conn */
    CUcontext ctx;
    uint32_t key;
    unsigned misses;
} launch_thread_t;

/* The calling thread's gates and its device-key cache. */
static __thread launch_thread_t this_thread __attribute__((tls_model("initial-exec")));

static void launch_atfork_child(void)
{
    /* The child has one thread: nothing reads these while they are cleared. */
    memset(&launches.work, 0, sizeof launches.work);
    this_thread = (launch_thread_t){0};
}

static int launch_prefault_seg(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t self = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || self < lo || self >= lo + ph->p_memsz) continue;
        /* found librota: populate every loadable segment of it */
        long pg = sysconf(_SC_PAGESIZE);
        for (int k = 0; k < info->dlpi_phnum; k++) {
            const ElfW(Phdr) *q = &info->dlpi_phdr[k];
            if (q->p_type != PT_LOAD || pg <= 0) continue;
            uintptr_t a = (info->dlpi_addr + q->p_vaddr) & ~(uintptr_t)(pg - 1);
            uintptr_t e = info->dlpi_addr + q->p_vaddr + q->p_memsz;
            madvise((void *)a, e - a, LAUNCH_MADV_POPULATE_READ); /* best effort: EINVAL before Linux 5.14 */
        }
        return 1;
    }
    return 0;
}

static pthread_once_t launch_once = PTHREAD_ONCE_INIT;
static void launch_setup(void)
{
    pthread_atfork(NULL, NULL, launch_atfork_child);
    /* A launch gate that runs code of librota for the first time takes a page fault per page of it, tens of
     * microseconds in a VM: the first activation of a high client would hold lower classes that much later.
     * Map all of librota now, once per process, when it connects to rotad. */
    dl_iterate_phdr(launch_prefault_seg, (void *)(uintptr_t)&launch_prefault_seg);
}

void launch_warm(void)
{
    pthread_once(&launch_once, launch_setup);
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

/* The connection whose rotad was found gone is not gated any more (until a memory hook reconnects): known by its
 * generation (launches.work.dead_gen), not its address, which conn_close frees and a reconnect may get again. */
static void launch_mark_dead(void)
{
    atomic_store(&launches.work.dead_gen, client_conn_gen());
}

/* With the read lock held: whether the connection in hand is the one found dead. */
static bool launch_conn_dead(void)
{
    uint32_t d = atomic_load_explicit(&launches.work.dead_gen, memory_order_relaxed);
    return d && d == client_conn_gen();
}

/* What one gate consults: the client's slot (rotad's holds) and its GPU's board words. */
typedef struct launch_gate {
    conn_t *c;
    const rota_region_t *r;
    const rota_slot_sched_t *sl;
    uint32_t key;            /* region device index + 1; 0 = unknown GPU: no board words */
    _Atomic uint32_t *mark;  /* board high_pending: a high activation rotad has not answered yet */
    _Atomic uint32_t *idle;  /* board high_idle: the GPU's only high client ended its activity (direct release) */
    rota_board_dev_t *bd;    /* the GPU's board words (NULL: none): high_due_ns for admission */
} launch_gate_t;

static void launch_gate_init(launch_gate_t *g, conn_t *c, uint32_t key)
{
    rota_board_t *b = conn_board(c);
    bool dev = b && key && key <= ROTA_MAX_DEVICES;
    g->c = c;
    g->r = conn_region(c);
    g->sl = &g->r->sched[conn_slot(c)];
    g->key = key;
    g->mark = dev ? &b->devices[key - 1].high_pending : NULL;
    g->idle = dev ? &b->devices[key - 1].high_idle : NULL;
    g->bd = dev ? &b->devices[key - 1] : NULL;
}

/* The direct release applies on g's GPU (abi.h): its board words are known and it has one high client. */
static bool launch_one_high(const launch_gate_t *g)
{
    return g->idle && LD(&g->r->devices[g->key - 1].high_clients) == 1;
}

/* A priority hold that can end through the board: exactly ROTA_HOLD_PRIO, where the direct release applies. */
static bool launch_direct(const launch_gate_t *g, uint32_t h)
{
    return h == ROTA_HOLD_PRIO && launch_one_high(g);
}

/* ... and that high client has ended it: its idle bit is set and no activation of it is pending. */
static bool launch_prio_over(const launch_gate_t *g, uint32_t h)
{
    return launch_direct(g, h) && (atomic_load(g->idle) & 1) && !LD(g->mark);
}

/* The board's mark of g's GPU, where it counts: rotad trusts a high client there (dev.high_clients != 0; a mark
 * by a client rotad judged stalled, or for a GPU it does not run on, holds nobody: abi.h). Read only when the mark
 * is set, so the passing path costs no more. */
static uint32_t launch_mark(const launch_gate_t *g)
{
    uint32_t m = g->mark ? LD(g->mark) : 0;
    return m && LD(&g->r->devices[g->key - 1].high_clients) ? m : 0;
}

/* Held: by rotad (slot.hold, unless the high client ended the priority hold itself), or by a high activation rotad
 * has not answered yet (the board). */
static bool launch_held(const launch_gate_t *g)
{
    uint32_t h = LD(&g->sl->hold);
    if (h) return !launch_prio_over(g, h);
    return launch_mark(g) != 0;
}

/* A launch of a high client: clear its GPU's idle bit (add 1 to an odd word; rotad adds 2 concurrently, hence the
 * loop), so that the lower classes are held again. The caller counted the launch in flight first (see
 * launch_high_idle). */
static void launch_high_busy(_Atomic uint32_t *idle)
{
    if (!idle) return;
    uint32_t w = atomic_load(idle);
    while ((w & 1) && !atomic_compare_exchange_weak(idle, &w, w + 1)) {
    }
}

/* Asks rotad's scheduler thread to look at this client now (one FUTEX_WAKE on the channel's doorbell). */
static void launch_ring(rota_channel_t *ch)
{
    atomic_fetch_add(&ch->doorbell, 1);
    syscall(SYS_futex, &ch->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A high client's activating launch: mark the board, and record how long the gate took to get there. */
static void launch_mark_high(rota_channel_t *ch, _Atomic uint32_t *mark, uint64_t t_in)
{
    atomic_fetch_add(mark, 1); /* seq_cst, after channel.active: rotad reads the board, then the channels */
    uint64_t lat = client_now_ns() - t_in;
    static const uint32_t bound_us[ROTA_LAT_BUCKETS] = ROTA_LAT_BOUNDS_US;
    unsigned k = 0;
    while (k + 1 < ROTA_LAT_BUCKETS && lat > (uint64_t)bound_us[k] * 1000u) k++;
    atomic_fetch_add_explicit(&ch->hold_lat_hist[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ch->hold_lat_sum_ns, lat, memory_order_relaxed);
    uint64_t mx = LD(&ch->hold_lat_max_ns);
    while (lat > mx && !atomic_compare_exchange_weak(&ch->hold_lat_max_ns, &mx, lat)) {
    }
    atomic_fetch_add(&ch->hold_events, 1); /* last: rotad adds up the others once it sees this grow */
}

/* Every gated launch: stamp the channel; the first after idling also sets channel.active, marks the board (a high
 * client's: mark != NULL, t_in its gate entry) and rings rotad. */
static uint64_t launch_stamp(rota_channel_t *ch, _Atomic uint32_t *mark, uint64_t t_in)
{
    uint64_t now = client_now_ns();
    atomic_store(&ch->last_launch_ns, now); /* seq_cst, then active: pairs with rotad's idle check (sched.c) */
    if (atomic_load(&ch->active)) return now;
    atomic_store_explicit(&ch->active_since_ns, now, memory_order_relaxed);
    atomic_store(&ch->active, 1);
    if (mark) launch_mark_high(ch, mark, t_in);
    launch_ring(ch);
    return now;
}

static void launch_wait_hold(const launch_gate_t *g, rota_channel_t *ch)
{
    conn_t *c = g->c;
    const rota_slot_sched_t *sl = g->sl;
    _Atomic uint32_t *mark = g->mark;
    if (launch_rotad_gone(c)) {
        launch_mark_dead();
        return;
    }
    atomic_fetch_add(&ch->held_waiting, 1);
    /* ROTA_TRACE: a hold span, only for a launch that actually waits here (never on the passing path). */
    uint32_t h0 = atomic_load(&sl->hold);
    bool marked = !h0 && launch_mark(g);
    bool traced = (h0 || marked) && rota_trace_on();
    const char *why = h0 & ROTA_HOLD_PRIO || marked ? "\"reason\":\"prio\""
                      : h0 & ROTA_HOLD_QUANTUM ? "\"reason\":\"quantum\""
                                               : "\"reason\":\"share\"";
    CUdevice dev = traced ? rota_real_current_device() : -1;
    if (traced) rota_trace_event("hold", dev, 0, why);
    bool direct = false;
    for (;;) {
        uint32_t h = atomic_load(&sl->hold), m = h ? 0 : launch_mark(g);
        if (!h && !m) break;
        /* The region is mapped read-only: FUTEX_WAIT only reads the word. rotad wakes the board's word once
         * the slot holds are out, so a marked wait turns into a slot wait (or ends) within one tick. A priority
         * hold the high client may end itself waits on the board's idle word, which both it and rotad (after
         * any hold change here) move and wake: read after the word, the hold is the one that word's value
         * answers for. */
        if (launch_direct(g, h)) {
            uint32_t w = atomic_load(g->idle);
            if ((w & 1) && !atomic_load(mark)) {
                direct = true;
                break;
            }
            if (atomic_load(&sl->hold) == h) launch_futex_wait(g->idle, w, LAUNCH_HOLD_SLICE_NS, true);
        } else if (h) {
            launch_futex_wait((_Atomic uint32_t *)&sl->hold, h, LAUNCH_HOLD_SLICE_NS, true);
        } else {
            launch_futex_wait(mark, m, LAUNCH_HOLD_SLICE_NS, true);
        }
        if (launch_held(g) && launch_rotad_gone(c)) {
            launch_mark_dead();
            rota_log(ROTA_LOG_WARN, "rotad went away while this process was held; launching uncoordinated");
            break;
        }
    }
    if (traced)
        rota_trace_event("release", dev, 0, direct ? "\"reason\":\"prio\",\"end\":\"high_idle\""
                                             : launch_held(g) ? "\"end\":\"rotad_gone\"" : why);
    atomic_fetch_sub(&ch->held_waiting, 1);
}

/* How many lower-class launches may be in flight: the one running plus ROTA_INFLIGHT_US of device time queued
 * behind it at this process's average launch, at most ROTA_MAX_INFLIGHT (one until the tracker measured one).
 * What a high client that arrives waits for is the work already in flight: bounding the queue by time, not count,
 * keeps that wait short for long kernels and still lets short ones keep the GPU busy. The bound is for the
 * classes above the client (a high client for normal; high or normal for low: normal preempts low by holding it).
 * With none of them on its GPU (dev.high_clients, dev.normal_clients: rotad keeps them), at least two: a single
 * launch in flight leaves the GPU idle from each completion to the next launch, the tracker's and the launching
 * thread's wake-ups, tens of microseconds per launch. */
static unsigned launch_bound(const rota_options_t *o, const rota_region_t *r, uint32_t key)
{
    unsigned cap = o->max_inflight ? o->max_inflight : 1;
    if (!o->inflight_us) return cap; /* ROTA_INFLIGHT_US=0: the count alone */
    uint64_t k = LD(&launches.kernel_ns);
    if (!k) return 1;
    uint64_t n = 1 + (uint64_t)o->inflight_us * 1000u / k;
    bool above = !key || key > ROTA_MAX_DEVICES || LD(&r->devices[key - 1].high_clients) ||
                 (o->priority == ROTA_PRIO_LOW && LD(&r->devices[key - 1].normal_clients));
    if (!above && n < 2) n = 2;
    return n > cap ? cap : (unsigned)n;
}

/* Device time still ahead of a launch made now, with n in flight of k ns each on average: the rest of the one
 * running, which began at launches.head_ns (the completion before it as the tracker saw it, a wake-up late, so
 * the estimate errs long; or its own reservation when nothing was in flight), plus the n - 1 behind it. */
static uint64_t launch_ahead_ns(uint32_t n, uint64_t k, uint64_t now)
{
    if (!n) return 0;
    uint64_t end = LD(&launches.head_ns) + k;
    return (end > now ? end - now : 0) + (uint64_t)(n - 1) * k;
}

/* Kernel-length-aware admission (runtime/lib/admit.h), for a lower launch that reserved its in-flight slot: until
 * when it waits for the high request due on its GPU, 0: it launches now. One load when nothing is due. Only where
 * the GPU has one high client that rotad trusts (a stalled one counts as none), as for the direct release. */
static uint64_t launch_admit_until(const launch_gate_t *g, const rota_options_t *o)
{
    if (!g->bd) return 0;
    uint64_t due = atomic_load_explicit(&g->bd->high_due_ns, memory_order_acquire);
    if (!due || !launch_one_high(g)) return 0;
    uint64_t span = LD(&g->bd->high_due_span_ns), k = LD(&launches.kernel_ns), now = client_now_ns();
    uint32_t n = atomic_load(&launches.work.inflight); /* this launch's slot included */
    return admit_until(now, launch_ahead_ns(n ? n - 1 : 0, k, now), k, due, span, (uint64_t)o->admit_wait_us * 1000u);
}

/* Waits until the high request comes (the lower classes are held: the caller then waits for that hold) or until.
 * On the board's idle word, which rotad moves and wakes after every hold change on the GPU and the high client
 * wakes when it releases: a wait that misses a change ends at until all the same. */
static void launch_admit_wait(const launch_gate_t *g, uint64_t until)
{
    uint64_t t0 = client_now_ns(), now = t0;
    while (now < until && !launch_held(g)) {
        uint32_t w = atomic_load(g->idle);
        if (launch_held(g)) break;
        launch_futex_wait(g->idle, w, (long long)(until - now), true);
        now = client_now_ns();
    }
    if (rota_trace_on()) {
        char extra[96];
        snprintf(extra, sizeof extra, "\"wait_us\":%.1f,\"end\":\"%s\"", (double)(client_now_ns() - t0) / 1e3,
                 launch_held(g) ? "high" : "due");
        rota_trace_event("admit", rota_real_current_device(), 0, extra);
    }
}

/* Reserves one in-flight slot, waiting while max are in flight. A launch past max may go once what is in flight
 * is due to end within ROTA_REFILL_US (never past ROTA_MAX_INFLIGHT): waiting for the completion itself leaves the
 * GPU idle through the tracker's and this thread's wake-ups, at every launch of a client bounded to one. The
 * price is what a high client meets on arrival in that window: at most the refill time more. A thread that waits
 * raises channel.inflight_waiting, once (unless raised, which says it already did) and leaves it raised: the
 * gate lowers it only once channel.inflight shows the slot it launches with (see client_launch_gate). Returns
 * raised. */
static bool launch_reserve(const rota_options_t *o, rota_channel_t *ch, unsigned max, bool raised)
{
    unsigned cap = o->max_inflight ? o->max_inflight : 1;
    uint64_t refill = (uint64_t)o->refill_us * 1000u;
    for (;;) {
        uint32_t n = atomic_load(&launches.work.inflight);
        uint64_t now = client_now_ns(), k = LD(&launches.kernel_ns);
        long long wait = LAUNCH_INFLIGHT_SLICE_NS;
        bool go = n < max;
        if (!go && n < cap && refill && k) {
            uint64_t ahead = launch_ahead_ns(n, k, now);
            go = ahead <= refill;
            if (!go && ahead - refill < (uint64_t)wait) wait = (long long)(ahead - refill);
        }
        if (go) {
            if (!atomic_compare_exchange_weak(&launches.work.inflight, &n, n + 1)) continue;
            if (!n) atomic_store_explicit(&launches.head_ns, now, memory_order_relaxed);
            break;
        }
        uint32_t seq = atomic_load(&launches.done_seq);
        atomic_fetch_add(&launches.work.waiters, 1);
        if (!raised) atomic_fetch_add(&ch->inflight_waiting, 1);
        raised = true;
        if (atomic_load(&launches.work.inflight) == n) launch_futex_wait(&launches.done_seq, seq, wait, false);
        atomic_fetch_sub(&launches.work.waiters, 1);
    }
    return raised;
}

/* channel.inflight = this process's count. Several threads publish it (the tracker at a completion, a gate at a
 * reservation): each one re-reads after its store and stores again if the count moved meanwhile, so the last
 * store is never a stale count. rotad reads a client with nothing in flight and nobody waiting as idle. */
static void launch_publish(rota_channel_t *ch)
{
    uint32_t v = atomic_load(&launches.work.inflight);
    for (;;) {
        atomic_store(&ch->inflight, v);
        uint32_t w = atomic_load(&launches.work.inflight);
        if (w == v) break;
        v = w;
    }
}

static void launch_unreserve(void)
{
    atomic_fetch_sub(&launches.work.inflight, 1);
    atomic_fetch_add(&launches.done_seq, 1);
    if (atomic_load(&launches.work.waiters))
        syscall(SYS_futex, &launches.done_seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, 0);
}

/* The process's launch counters into its channel (with the connection's read lock held). */
static void launch_mirror_to(rota_channel_t *ch)
{
    launch_publish(ch);
    atomic_store_explicit(&ch->launches, atomic_load(&launches.count), memory_order_relaxed);
    atomic_store_explicit(&ch->busy_ns, atomic_load(&launches.busy_ns), memory_order_relaxed);
}

static void launch_mirror(void)
{
    conn_t *c = client_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    if (ch) launch_mirror_to(ch);
    if (c) client_conn_unlock();
}

/* A high client's launch that found nothing in flight, entering the gate at t: the gap since the completion that
 * left nothing in flight, for the learned idle window. Only a completion after the previous launch counts (one
 * the tracker stored after this launch counted itself in flight is older than that launch, and is skipped). */
static void launch_learn(const rota_region_t *r, rota_channel_t *ch, uint64_t t)
{
    if (!LD(&r->high_idle_learn)) return;
    uint64_t from = atomic_exchange(&launches.work.idle_from, 0);
    if (from && from > LD(&ch->last_launch_ns) && t > from) idlewin_add(&launches.work.gaps, t - from);
}

/* Sets the GPU's idle bit and wakes whom the priority hold keeps there (direct release). The bit is set before
 * launches.work.inflight is read again, and a launch counts itself in flight before it reads the bit
 * (client_launch_gate): a launch that raced with this either finds the bit set and clears it, or shows here, and
 * then the bit is cleared again. */
static void launch_set_idle(_Atomic uint32_t *idle)
{
    uint32_t w = atomic_load(idle);
    while (!(w & 1) && !atomic_compare_exchange_weak(idle, &w, w | 1)) {
    }
    if (atomic_load(&launches.work.inflight)) {
        launch_high_busy(idle);
        return;
    }
    syscall(SYS_futex, idle, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The high client has nothing in flight (the tracker, at now): if rotad would now find it idle, release its GPU's
 * lower classes itself, rather than leave that to rotad's wake-up (abi.h, direct release); if it will be idle
 * later, by the rule rotad applies (no launch for the idle window, or the learned window passed since the
 * completion that left nothing in flight), return when, for the tracker to call launch_idle_due then. Only as the
 * GPU's only high client: with two, one of them going idle frees nothing. 0: nothing to wait for. */
static uint64_t launch_high_idle(conn_t *c, rota_channel_t *ch, uint64_t now)
{
    launch_gate_t g;
    launch_gate_init(&g, c, LD(&ch->sched_dev));
    uint64_t win = LD(&g.r->high_idle_ns);
    if (!win || !launch_one_high(&g)) return 0;
    uint64_t last = atomic_load(&ch->last_launch_ns);
    if (now < last) return 0;
    bool learn = LD(&g.r->high_idle_learn);
    uint64_t from = LD(&ch->idle_from_ns);
    uint64_t due = idlewin_due(last, win, from, learn ? LD(&ch->idle_win_ns) : win);
    if (now < due) {
        /* The window is learned, so it may end sooner: at once if the thread that launched last sleeps waiting
         * for input (client-idleprobe.c), asked every LAUNCH_PROBE_NS meanwhile. */
        bool probe = learn && rota_options()->idle_probe && from > last && now >= from;
        if (!probe) return due;
        long nr;
        if (!idleprobe_input_wait(&nr)) return due - now > LAUNCH_PROBE_NS ? now + LAUNCH_PROBE_NS : due;
        /* This gap's window ends now, for rotad too: the window, then its completion time again (release), as
         * launch_high_done stores them. */
        atomic_store_explicit(&ch->idle_win_ns, now - from, memory_order_relaxed);
        atomic_store_explicit(&ch->idle_from_ns, from, memory_order_release);
        if (rota_trace_on()) {
            char extra[64];
            snprintf(extra, sizeof extra, "\"syscall\":%ld,\"after_us\":%.1f", nr, (double)(now - from) / 1e3);
            /* the tracker's current context is the completed launch's */
            rota_trace_event("idle_probe", rota_real_current_device(), 0, extra);
        }
    }
    launch_set_idle(g.idle);
    return 0;
}

/* The high client's last launch in flight completed at now: its gap starts, the idle window counts from here, and
 * when learning, its window for that gap is the one its gaps so far make cheapest (runtime/lib/idlewin.h), stored
 * before the completion time, which releases it: rotad reads the time (acquire), then the window, so the window it
 * reads is this one or a newer one. */
static void launch_high_done(const rota_region_t *r, rota_channel_t *ch, uint64_t now)
{
    if (LD(&r->high_idle_learn)) {
        atomic_store(&launches.work.idle_from, now);
        uint64_t w = idlewin_choose(&launches.work.gaps, LD(&r->high_idle_ns));
        atomic_store_explicit(&ch->idle_win_ns, w, memory_order_relaxed);
    }
    atomic_store_explicit(&ch->idle_from_ns, now, memory_order_release);
}

/* The high client's last launch in flight completed: when its next request is due (runtime/lib/admit.h; 0 when its
 * starts do not tell), on its GPU's board, before it releases the lower classes (the span first, the due time with
 * release: a gate reads them in the other order). */
static void launch_due_publish(conn_t *c, rota_channel_t *ch)
{
    rota_board_t *b = conn_board(c);
    uint32_t key = LD(&ch->sched_dev);
    if (!b || !key || key > ROTA_MAX_DEVICES) return;
    rota_board_dev_t *bd = &b->devices[key - 1];
    uint64_t due, span;
    admit_pred_due(&launches.work.reqs, &due, &span);
    if (!due && !LD(&bd->high_due_ns)) return; /* unpredictable, and nothing to take back: no store */
    atomic_store_explicit(&bd->high_due_span_ns, span, memory_order_relaxed);
    atomic_store_explicit(&bd->high_due_ns, due, memory_order_release);
}

uint64_t launch_idle_due(uint64_t now)
{
    conn_t *c = client_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    uint64_t due = ch && !atomic_load(&launches.work.inflight) ? launch_high_idle(c, ch, now) : 0;
    if (c) client_conn_unlock();
    return due;
}

uint64_t launch_complete(uint64_t busy_ns, uint64_t now_ns)
{
    uint64_t due = 0;
    /* The next launch in flight, if any, runs from about now (before the count drops: see launch_ahead_ns). */
    atomic_store_explicit(&launches.head_ns, now_ns, memory_order_relaxed);
    atomic_fetch_add(&launches.busy_ns, busy_ns);
    /* Only the tracker thread writes the average: 1/8 of the newest sample, a backlog unit clamped to 100 ms. */
    uint64_t k = LD(&launches.kernel_ns), b = busy_ns > 100000000u ? 100000000u : busy_ns;
    atomic_store_explicit(&launches.kernel_ns, k ? k - k / 8 + b / 8 : (b ? b : 1), memory_order_relaxed);
    launch_unreserve();
    conn_t *c = client_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    if (ch) launch_mirror_to(ch);
    /* The last launch in flight completed: the client may be idle now, and whoever rotad holds on its GPU (for
     * a high client: every lower one; for a lower one: those over their share) waits for rotad to see that.
     * Ring, so rotad looks now rather than at its next tick; the tracker thread pays the syscall, never a
     * launch. A lower client rings only when someone else on its GPU is held: nobody waits otherwise. */
    if (ch && !atomic_load(&launches.work.inflight)) {
        bool high = rota_options()->priority == ROTA_PRIO_HIGH && conn_high(c);
        uint32_t key = LD(&ch->sched_dev);
        const rota_region_t *r = conn_region(c);
        uint32_t self = LD(&r->sched[conn_slot(c)].hold) != 0; /* held itself: not among the others */
        if (high) {
            launch_due_publish(c, ch);
            launch_high_done(r, ch, now_ns);
            due = launch_high_idle(c, ch, now_ns);
        }
        if (high || (key && key <= ROTA_MAX_DEVICES && LD(&r->devices[key - 1].held) > self)) launch_ring(ch);
    }
    if (c) client_conn_unlock();
    return due;
}

/* One event on stream for what was launched untracked before it, as one unit in flight: the backlog (start NULL),
 * or a sample (start: the timed event recorded before the launch). */
static void launch_track_unit(CUcontext ctx, CUstream stream, CUevent start, uint64_t launch_ns)
{
    CUevent ev = ctx ? tracker_event_get(ctx, start != NULL) : NULL;
    if (ev && ROTA_REAL(cuEventRecord)(ev, stream) != CUDA_SUCCESS) {
        tracker_event_put(ev, ctx, start != NULL);
        ev = NULL;
    }
    if (!ev) {
        if (start) tracker_event_put(start, ctx, true);
        return;
    }
    atomic_fetch_add(&launches.work.inflight, 1);
    if (!tracker_push(ev, ctx, launch_ns ? launch_ns : client_now_ns(), start)) {
        tracker_event_put(ev, ctx, start != NULL);
        if (start) tracker_event_put(start, ctx, true);
        launch_unreserve();
    }
}

void launch_sample_own(uint64_t own_ns)
{
    atomic_store_explicit(&launches.sample_own_ns, own_ns ? own_ns : 1, memory_order_relaxed);
}

/* Closes a window of n launches opened at from_ns, at now: its first was sampled (the tracker counts it); the
 * other n - 1 count at the newest sample's time each, at most the window's length less that one. */
static void launch_window_close(uint32_t n, uint64_t from_ns, uint64_t now)
{
    uint64_t own = LD(&launches.sample_own_ns), span = now > from_ns ? now - from_ns : 0;
    if (n < 2 || !from_ns) return;
    if (!own) own = LD(&launches.kernel_ns);
    span = span > own ? span - own : 0;
    uint64_t est = own ? (uint64_t)(n - 1) * own : span;
    atomic_fetch_add(&launches.busy_ns, est < span ? est : span);
}

/* Tracking resumes: the open window closes, and one unit stands for the untracked backlog. */
static void launch_track_backlog(CUcontext ctx, CUstream stream)
{
    uint64_t from = atomic_exchange(&launches.work.sample_from, 0);
    uint32_t n = atomic_exchange(&launches.work.sample_n, 0);
    launch_window_close(n, from, client_now_ns());
    launch_track_unit(ctx, stream, NULL, 0);
}

void client_launch_synced(void)
{
    /* two loads when nothing was launched uncontended since the last synchronisation */
    if (!LD(&launches.work.sample_from) && !LD(&launches.work.unmirrored)) return;
    uint64_t from = atomic_exchange(&launches.work.sample_from, 0);
    uint32_t n = atomic_exchange(&launches.work.sample_n, 0);
    if (from) launch_window_close(n, from, client_now_ns());
    atomic_store_explicit(&launches.work.unmirrored, 0, memory_order_relaxed);
    launch_mirror(); /* the count and device time as they are now: the last launch shows once synchronised */
}

/* An uncontended launch that passed its gate at now: whether it opens a window (and is sampled). */
static bool launch_sample_due(uint64_t now)
{
    uint64_t from = LD(&launches.work.sample_from);
    if (from) {
        uint32_t n = atomic_fetch_add_explicit(&launches.work.sample_n, 1, memory_order_relaxed) + 1;
        if (n <= LAUNCH_SAMPLE_EVERY && now - from < LAUNCH_SAMPLE_NS) return false;
        /* past the window: close it (the thread that swaps from does) and open the next with this launch */
        if (!atomic_compare_exchange_strong(&launches.work.sample_from, &from, now)) return false;
        uint32_t m = atomic_exchange(&launches.work.sample_n, 1);
        launch_window_close(m > 0 ? m - 1 : 0, from, now);
        return true;
    }
    uint64_t z = 0;
    if (!atomic_compare_exchange_strong(&launches.work.sample_from, &z, now)) {
        atomic_fetch_add_explicit(&launches.work.sample_n, 1, memory_order_relaxed);
        return false;
    }
    atomic_store(&launches.work.sample_n, 1);
    return true;
}

/* Whether this client may contend on its GPU: rotad's slot.contended word (runtime/abi.h), 1 while its launches
 * must be tracked and bounded, 0 while it is alone there (uncontended). */
static inline bool launch_contended(const rota_slot_sched_t *sl)
{
    return LD(&sl->contended) != 0;
}

/* The rotad device key (index + 1, 0 unknown) of the current context, cached per thread. */
static uint32_t launch_dev_key(conn_t *c, CUcontext ctx)
{
    launch_thread_t *t = &this_thread;
    if (t->conn == c && t->ctx == ctx && (t->key || (++t->misses & 255))) return t->key;
    CUdevice dev;
    uint32_t key = 0;
    if (ctx && ROTA_REAL(cuCtxGetDevice)(&dev) == CUDA_SUCCESS) {
        int x = client_region_dev(c, dev);
        key = x >= 0 ? (uint32_t)x + 1 : 0;
    }
    t->conn = c;
    t->ctx = ctx;
    t->key = key;
    return key;
}

CUresult client_launch_gate(CUstream stream)
{
    (void)stream;
    const rota_options_t *o = rota_options();
    if (o->disable || !client_conn_peek()) return CUDA_SUCCESS; /* uncoordinated: no lock taken */
    bool high = o->priority == ROTA_PRIO_HIGH;
    uint64_t t_in = high ? client_now_ns() : 0; /* the start of "high launch -> lower classes held" */
    conn_t *c = client_conn_lock();
    rota_channel_t *ch = c ? conn_channel(c) : NULL;
    if (!ch || launch_conn_dead()) {
        if (c) client_conn_unlock();
        return CUDA_SUCCESS; /* uncoordinated: nothing gated, nothing tracked */
    }
    high = high && conn_high(c); /* rotad's policy may have made it normal (then its board is read-only) */
    /* launch_setup ran when this connection was made (launch_warm, before client.c publishes it). */
    CUcontext ctx = NULL;
    ROTA_REAL(cuCtxGetCurrent)(&ctx);
    uint32_t key = launch_dev_key(c, ctx);
    if (LD(&ch->sched_dev) != key) atomic_store_explicit(&ch->sched_dev, key, memory_order_relaxed);
    launch_gate_t g;
    launch_gate_init(&g, c, key);
    const rota_slot_sched_t *sl = g.sl;
    if (high) {
        /* Counted in flight from here, before the idle bit is read (launch_high_idle), never bounded; and shown
         * to rotad from here: the launch and what follows it (the tracker's start at a process's first launch)
         * may take longer than rotad's idle window, and a client showing nothing in flight that long would read
         * as idle while its kernel runs. */
        if (!atomic_fetch_add(&launches.work.inflight, 1)) {
            launch_learn(g.r, ch, t_in);
            admit_pred_start(&launches.work.reqs, t_in); /* a request starts */
        }
        launch_publish(ch);
        this_thread.reserved++;
        launch_high_busy(g.idle);
        /* First thing once the GPU is known: the sooner the board is marked, the sooner lower classes hold. */
        launch_stamp(ch, g.mark, t_in);
        this_thread.pending++;
        idleprobe_note_launch(); /* after the mark: the lower classes hold first */
        client_conn_unlock();
        return CUDA_SUCCESS;
    }
    /* A multi-device launch passes one gate per stream before launching: only its first gate may wait (a
     * second one waiting for a completion would wait for its own first stream's launch). */
    bool lone = false;
    if (!this_thread.pending && !launch_contended(sl) && !launch_held(&g)) {
        this_thread.untracked++; /* uncontended: nothing to bound, nothing to track */
        lone = true;
        if (!LD(&launches.work.backlog)) atomic_store_explicit(&launches.work.backlog, 1, memory_order_relaxed);
        /* The mirror of the last completion may have raced with another (last writer wins): refresh it. */
        atomic_store_explicit(&ch->inflight, LD(&launches.work.inflight), memory_order_relaxed);
        atomic_store_explicit(&ch->launches, LD(&launches.count), memory_order_relaxed);
    } else if (this_thread.pending) {
        atomic_fetch_add(&launches.work.inflight, 1);
        this_thread.reserved++;
    } else {
        unsigned max = launch_bound(o, conn_region(c), key);
        if (LD(&launches.work.backlog) && atomic_exchange(&launches.work.backlog, 0)) launch_track_backlog(ctx, stream);
        /* From the first wait for a completion until channel.inflight shows the slot this launch takes, the
         * thread counts as waiting: between the completion it waited for and its launch, rotad must not see a
         * client with nothing in flight and nobody waiting (idle), which would release whom it holds. */
        bool raised = false, admitted = !o->admit;
        for (;;) {
            if (launch_held(&g)) {
                launch_wait_hold(&g, ch); /* at once when rotad is gone */
                admitted = true; /* a hold ended: the start of a gap, where a kernel delays the next request least */
            }
            raised = launch_reserve(o, ch, max, raised);
            uint64_t until = admitted ? 0 : launch_admit_until(&g, o);
            admitted = true; /* once per launch: what it waits for is one request */
            if (until) {
                launch_unreserve();
                launch_publish(ch);
                launch_admit_wait(&g, until);
                continue;
            }
            /* A hold may have come while we waited for a completion: obey it before launching. */
            if (!launch_held(&g) || launch_conn_dead()) break;
            launch_unreserve();
            launch_publish(ch); /* the slot given back must not stay counted (rotad charges what is in flight) */
        }
        launch_publish(ch);
        if (raised) atomic_fetch_sub(&ch->inflight_waiting, 1);
        this_thread.reserved++;
    }
    this_thread.pending++;
    uint64_t now = launch_stamp(ch, NULL, 0);
    if (lone && !this_thread.sample_start && launch_sample_due(now)) {
        /* the sample's own device time: a timed event before it, one after it (client_launch_after) */
        CUevent st = ctx ? tracker_event_get(ctx, true) : NULL;
        if (st && ROTA_REAL(cuEventRecord)(st, stream) != CUDA_SUCCESS) {
            tracker_event_put(st, ctx, true);
            st = NULL;
        }
        this_thread.sample_start = st;
        this_thread.sample_ctx = ctx;
        this_thread.sample_ns = now;
        this_thread.sampled = st != NULL;
    }
    client_conn_unlock();
    return CUDA_SUCCESS;
}

void client_launch_after(CUstream stream, CUresult rc)
{
    if (!this_thread.pending) return; /* the gate let it through uncoordinated */
    this_thread.pending--;
    if (this_thread.untracked) {
        this_thread.untracked--;
        CUevent start = NULL;
        if (this_thread.sampled && this_thread.untracked == 0) { /* the sampled gate is this thread's first */
            this_thread.sampled = 0;
            start = this_thread.sample_start;
            this_thread.sample_start = NULL;
        }
        if (rc != CUDA_SUCCESS) {
            if (start) tracker_event_put(start, this_thread.sample_ctx, true);
            return;
        }
        atomic_fetch_add_explicit(&launches.count, 1, memory_order_relaxed);
        if (start) launch_track_unit(this_thread.sample_ctx, stream, start, this_thread.sample_ns);
        /* the gate mirrored the count before this launch: the next gate or synchronisation mirrors it after */
        if (!LD(&launches.work.unmirrored)) atomic_store_explicit(&launches.work.unmirrored, 1, memory_order_relaxed);
        return;
    }
    bool reserved = this_thread.reserved > 0;
    if (reserved) this_thread.reserved--;
    if (rc != CUDA_SUCCESS) {
        if (reserved) launch_unreserve();
        return;
    }
    atomic_fetch_add(&launches.count, 1);
    if (!reserved) atomic_fetch_add(&launches.work.inflight, 1); /* the gate counts every tracked launch: defensive */
    CUcontext ctx = NULL;
    ROTA_REAL(cuCtxGetCurrent)(&ctx);
    CUevent ev = ctx ? tracker_event_get(ctx, false) : NULL;
    uint64_t now = client_now_ns();
    if (ev && ROTA_REAL(cuEventRecord)(ev, stream) != CUDA_SUCCESS) {
        tracker_event_put(ev, ctx, false);
        ev = NULL;
    }
    if (!ev || !tracker_push(ev, ctx, now, NULL)) {
        if (ev) tracker_event_put(ev, ctx, false);
        launch_unreserve(); /* untracked: it cannot count against the bound */
    }
    launch_mirror();
}
