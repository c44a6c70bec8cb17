/* engine.c - a device under its lock: engine arbitration (timeslicing between contexts like a GPU without MPS,
 * concurrent lanes on SM shares with one), repair after a dead lock owner, and reclaiming what dead processes
 * left. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * The engine runs on a virtual timeline of absolute CLOCK_MONOTONIC times. The thread whose kernel holds the
 * engine sleeps until its segment's end (TIMER_ABSTIME), then accounts it and hands the engine on from that
 * exact virtual time, so late wake-ups never stretch the timeline: busy_ns is the sum of served kernel time.
 * Nor do they hold the engine: if that thread is late by SIMNODE_STEP_IN_NS, a thread waiting for the engine
 * retires the segment for it (engine_advance), as does a kernel arriving, so one process's slow wake-up
 * never delays another's kernels.
 *
 * Hand-over rules, decided at the end of every segment:
 *  - the current context keeps the engine for its next waiter (lowest prio value, then submission time, then
 *    arrival) while its
 *    timeslice lasts, or indefinitely (renewing the slice) while no other context waits;
 *  - otherwise the engine goes round-robin (by context index) to the next context with a waiter, charging
 *    the switch time (counted in switch_ns, not busy_ns); a kernel still unfinished at its slice boundary is
 *    preempted (counted) and waits, keeping its place among its context's waiters;
 *  - a context that has no kernel waiting at the moment its kernel ends loses the engine to a waiting one.
 * Starting a different context than the one that last ran also counts as a switch, even from idle.
 * These rules are per lane: the device's one lane without MPS, each client process's own with it (below).
 */

void simnode_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

bool simnode_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000ull), .tv_nsec = (long)(timeout_ns % 1000000000ull)};
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
    return rc != 0 && errno == ETIMEDOUT;
}

void simnode_sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void simnode_engine_init(simnode_dev_t *dev)
{
    for (uint32_t l = 0; l < SIMNODE_MAX_LANES; l++) {
        simnode_lane_t *ln = &dev->lane[l];
        ln->holder = SIMNODE_NONE;
        ln->cur_ctx = SIMNODE_NONE;
        ln->alloc_sms = 0;
        ln->rate_ppm = 0;
        ln->slice_end_ns = 0;
        ln->vtime_ns = 0;
    }
    dev->next_ticket = 1;
    dev->copy_free_ns = 0;
    atomic_store(&dev->seq, 0);
}

static void bump(simnode_dev_t *dev)
{
    atomic_fetch_add(&dev->seq, 1);
    simnode_futex_wake(&dev->seq);
}

/* Time in [from, to) that falls after the last reset. */
static uint64_t since_reset(const simnode_dev_t *dev, uint64_t from, uint64_t to)
{
    uint64_t reset = atomic_load(&dev->c.reset_ns);
    if (from < reset) from = reset;
    return to > from ? to - from : 0;
}

static bool better(const simnode_waiter_t *a, const simnode_waiter_t *b)
{
    if (a->prio != b->prio) return a->prio < b->prio;
    if (a->submit_ns != b->submit_ns) return a->submit_ns < b->submit_ns;
    return a->ticket < b->ticket;
}

/* The lane a waiter runs on: its process's under MPS, the device's one lane otherwise. */
static uint32_t lane_of(const simnode_shm_t *shm, const simnode_waiter_t *w)
{
    return shm->cfg.mps ? w->proc : 0;
}

static uint32_t lane_count(const simnode_shm_t *shm)
{
    return shm->cfg.mps ? SIMNODE_MAX_LANES : 1;
}

/* Whether waiter w may run now: waiting, and its stream's previous kernel (w->after) served. */
static bool runnable(const simnode_dev_t *dev, const simnode_waiter_t *w)
{
    if (w->state != SIMNODE_W_WAITING) return false;
    if (!w->after) return true;
    const simnode_waiter_t *p = &dev->w[w->after % SIMNODE_MAX_WAITERS];
    return p->ticket != w->after / SIMNODE_MAX_WAITERS ||
           (p->state != SIMNODE_W_WAITING && p->state != SIMNODE_W_RUNNING);
}

/* The most urgent runnable waiter of context ctx on lane l, or SIMNODE_NONE. (A context index freed and reused
 * by another process may still be a lane's cur_ctx: the lane test keeps each client's lane its own.) */
static uint32_t best_of_ctx(const simnode_shm_t *shm, const simnode_dev_t *dev, uint32_t l, uint32_t ctx)
{
    uint32_t best = SIMNODE_NONE;
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        const simnode_waiter_t *w = &dev->w[i];
        if (w->ctx != ctx || lane_of(shm, w) != l || !runnable(dev, w)) continue;
        if (best == SIMNODE_NONE || better(w, &dev->w[best])) best = i;
    }
    return best;
}

/* The next context of lane l after cur (round-robin by index) that has a runnable waiter other than cur itself,
 * or NONE. */
static uint32_t next_other_ctx(const simnode_shm_t *shm, const simnode_dev_t *dev, uint32_t l, uint32_t cur)
{
    uint32_t best = SIMNODE_NONE, best_dist = UINT32_MAX;
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        const simnode_waiter_t *w = &dev->w[i];
        if (w->ctx == cur || lane_of(shm, w) != l || !runnable(dev, w)) continue;
        uint32_t dist = cur == SIMNODE_NONE ? w->ctx : (w->ctx - cur - 1) % SIMNODE_MAX_CTX;
        if (dist < best_dist) {
            best_dist = dist;
            best = w->ctx;
        }
    }
    return best;
}

/*
 * MPS (SIMCUDA_MPS=1): every client process has a lane of its own, and the lanes run concurrently: there is no
 * time slicing between clients, only between the contexts of one client (as without MPS). A kernel has a width:
 * the SMs its blocks occupy at once (waiter.sms, from its grid: the API layer's rule, docs/simcuda.md), and its
 * modelled device time is its time at that width. A segment is granted SMs when it starts: as many as its width
 * needs, at most its client's share (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of the SMs, rounded up to whole SMs) and
 * at most what the other lanes' running segments leave free; with none free it waits. It runs at granted /
 * width of its full speed, and keeps its SMs until the segment ends (running blocks are not moved). A segment
 * lasts at most one timeslice, so a long kernel's grant is re-evaluated at least every SIMCUDA_TIMESLICE_US:
 * whenever a segment ends, its SMs go back and the other waiting lanes take theirs first, then its own lane
 * takes what is left. busy_ns counts SM time over the SM count (a 1-SM kernel of 1 ms: 1/132 ms).
 * Without MPS the one lane always gets every SM at full speed: busy_ns is the time a context held the device.
 */
static uint32_t lane_alloc(const simnode_shm_t *shm, const simnode_dev_t *dev, uint32_t l, const simnode_waiter_t *w,
                           uint32_t *rate_ppm)
{
    *rate_ppm = SIMNODE_FULL_PPM;
    if (!shm->cfg.mps) return SIMNODE_SM_COUNT;
    uint32_t used = 0;
    for (uint32_t i = 0; i < SIMNODE_MAX_LANES; i++)
        if (i != l && dev->lane[i].holder != SIMNODE_NONE) used += dev->lane[i].alloc_sms;
    uint32_t free = used >= SIMNODE_SM_COUNT ? 0 : SIMNODE_SM_COUNT - used;
    uint64_t share = shm->procs[l].mps_share_ppm ? shm->procs[l].mps_share_ppm : SIMNODE_FULL_PPM;
    uint32_t share_sms = (uint32_t)((share * SIMNODE_SM_COUNT + SIMNODE_FULL_PPM - 1) / SIMNODE_FULL_PPM);
    uint32_t width = w->sms && w->sms < SIMNODE_SM_COUNT ? w->sms : SIMNODE_SM_COUNT;
    uint32_t a = width;
    if (share_sms < a) a = share_sms;
    if (free < a) a = free;
    *rate_ppm = (uint32_t)((uint64_t)a * SIMNODE_FULL_PPM / width);
    return a;
}

/* Engine time that serving work ns (its time at full speed) takes at rate_ppm of full speed, and the work that d ns
 * of engine time at that rate serves. */
static uint64_t work_to_time(uint64_t work, uint32_t rate_ppm)
{
    if (rate_ppm >= SIMNODE_FULL_PPM) return work;
    return (uint64_t)(((unsigned __int128)work * SIMNODE_FULL_PPM + rate_ppm - 1) / rate_ppm);
}

static uint64_t time_to_work(uint64_t d, uint32_t rate_ppm)
{
    if (rate_ppm >= SIMNODE_FULL_PPM) return d;
    return (uint64_t)((unsigned __int128)d * rate_ppm / SIMNODE_FULL_PPM);
}

/* The busy time a lane's segment of span d adds: all of it without MPS, its SMs' share of it with. */
static uint64_t busy_of(const simnode_lane_t *ln, uint64_t d)
{
    if (ln->alloc_sms >= SIMNODE_SM_COUNT) return d;
    return (uint64_t)((unsigned __int128)d * ln->alloc_sms / SIMNODE_SM_COUNT);
}

/* Under dev->lock, the engine going idle: a kernel served in full waits (SIMNODE_W_DONE) for its owner's thread
 * to collect it, and one retired for a process killed before it collected never would be. Those left over
 * SIMNODE_DONE_STALE_NS are checked for a live owner (one fcntl each: a live owner's thread is that late only
 * on a loaded host, or stopped) and a dead owner's are reclaimed, which dispatches again. Otherwise they would
 * hold waiter slots until a sweep. Returns whether it reclaimed. */
static bool engine_reap(simnode_shm_t *shm, int fd, simnode_dev_t *dev)
{
    uint64_t now = simnode_now_ns();
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        const simnode_waiter_t *w = &dev->w[i];
        if (w->state != SIMNODE_W_DONE || w->seg_end_ns + SIMNODE_DONE_STALE_NS > now) continue;
        if (simnode_proc_alive(shm, fd, w->proc)) continue;
        simnode_dev_reclaim_proc(shm, fd, (uint32_t)(dev - shm->dev), w->proc);
        return true;
    }
    return false;
}

/* Under dev->lock with lane l free: give it, free since virtual time t0, to its next waiter. */
static void dispatch(simnode_shm_t *shm, int fd, simnode_dev_t *dev, uint32_t l, uint64_t t0)
{
    simnode_lane_t *ln = &dev->lane[l];
    if (ln->vtime_ns > t0) t0 = ln->vtime_ns;
    uint32_t same = ln->cur_ctx == SIMNODE_NONE ? SIMNODE_NONE : best_of_ctx(shm, dev, l, ln->cur_ctx);
    uint32_t other = next_other_ctx(shm, dev, l, ln->cur_ctx);
    uint32_t pick;
    bool sw;
    if (same != SIMNODE_NONE) {
        uint64_t start = t0 > dev->w[same].arrival_ns ? t0 : dev->w[same].arrival_ns;
        sw = other != SIMNODE_NONE && start >= ln->slice_end_ns;
        pick = sw ? best_of_ctx(shm, dev, l, other) : same;
    } else if (other != SIMNODE_NONE) {
        pick = best_of_ctx(shm, dev, l, other);
        sw = true;
    } else {
        if (!shm->cfg.mps && engine_reap(shm, fd, dev)) return;
        ln->holder = SIMNODE_NONE;
        ln->vtime_ns = t0;
        bump(dev);
        return;
    }
    simnode_waiter_t *w = &dev->w[pick];
    if (!simnode_proc_alive(shm, fd, w->proc)) {
        /* Never hand the engine to a dead process: reclaim it, which dispatches again without it. */
        simnode_dev_reclaim_proc(shm, fd, (uint32_t)(dev - shm->dev), w->proc);
        return;
    }
    uint32_t rate;
    uint32_t alloc = lane_alloc(shm, dev, l, w, &rate);
    if (alloc == 0) {
        /* MPS: every SM is taken by the other clients' segments; the next one to end kicks this lane. */
        ln->holder = SIMNODE_NONE;
        ln->vtime_ns = t0;
        bump(dev);
        return;
    }
    uint64_t start = t0 > w->arrival_ns ? t0 : w->arrival_ns;
    uint64_t slice = shm->cfg.timeslice_ns;
    if (sw) {
        if (ln->cur_ctx != SIMNODE_NONE) {
            uint64_t s = shm->cfg.switch_ns;
            atomic_fetch_add(&dev->c.switches, 1);
            atomic_fetch_add(&dev->c.switch_ns, since_reset(dev, start, start + s));
            start += s;
        }
        ln->cur_ctx = w->ctx;
        ln->slice_end_ns = start + slice;
    } else if (start >= ln->slice_end_ns || shm->cfg.mps) {
        /* nobody else waits: the slice renews; under MPS every segment is one slice at most, its grant's span */
        ln->slice_end_ns = start + slice;
    }
    uint64_t left = ln->slice_end_ns - start;
    uint64_t need = work_to_time(w->remaining_ns, rate);
    w->state = SIMNODE_W_RUNNING;
    w->seg_start_ns = start;
    w->seg_end_ns = start + (need < left ? need : left);
    ln->alloc_sms = alloc;
    ln->rate_ppm = rate;
    ln->holder = pick;
    bump(dev);
}

/* Under dev->lock: dispatch every free lane with a runnable waiter, lane skip last (NONE: none skipped), so that
 * a lane giving its SMs back at a slice boundary lets the others take theirs first. */
static void kick_lanes(simnode_shm_t *shm, int fd, simnode_dev_t *dev, uint64_t t0, uint32_t skip)
{
    if (!shm->cfg.mps) {
        if (dev->lane[0].holder == SIMNODE_NONE) dispatch(shm, fd, dev, 0, t0);
        return;
    }
    bool want[SIMNODE_MAX_LANES] = {false};
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++)
        if (runnable(dev, &dev->w[i])) want[dev->w[i].proc] = true;
    for (uint32_t l = 0; l < SIMNODE_MAX_LANES; l++)
        if (l != skip && want[l] && dev->lane[l].holder == SIMNODE_NONE) dispatch(shm, fd, dev, l, t0);
    if (skip != SIMNODE_NONE && want[skip] && dev->lane[skip].holder == SIMNODE_NONE) dispatch(shm, fd, dev, skip, t0);
    bool busy = false;
    for (uint32_t l = 0; l < SIMNODE_MAX_LANES && !busy; l++) busy = dev->lane[l].holder != SIMNODE_NONE;
    if (!busy && engine_reap(shm, fd, dev)) return;
    bump(dev);
}

void simnode_engine_kick(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now)
{
    kick_lanes(shm, fd, &shm->dev[d], now, SIMNODE_NONE);
}

bool simnode_engine_holds(const simnode_shm_t *shm, const simnode_dev_t *dev, uint32_t me)
{
    return dev->lane[lane_of(shm, &dev->w[me])].holder == me;
}

uint64_t simnode_engine_next_end(const simnode_shm_t *shm, const simnode_dev_t *dev, bool *any)
{
    uint64_t end = UINT64_MAX;
    *any = false;
    for (uint32_t l = 0; l < lane_count(shm); l++) {
        uint32_t h = dev->lane[l].holder;
        if (h == SIMNODE_NONE) continue;
        *any = true;
        if (dev->w[h].seg_end_ns < end) end = dev->w[h].seg_end_ns;
    }
    return end;
}

bool simnode_engine_holder_dead(simnode_shm_t *shm, int fd, const simnode_dev_t *dev)
{
    for (uint32_t l = 0; l < lane_count(shm); l++) {
        uint32_t h = dev->lane[l].holder;
        if (h != SIMNODE_NONE && !simnode_proc_alive(shm, fd, dev->w[h].proc)) return true;
    }
    return false;
}

uint64_t simnode_engine_inflight_busy(simnode_dev_t *dev, uint64_t now)
{
    uint64_t busy = 0;
    for (uint32_t l = 0; l < SIMNODE_MAX_LANES; l++) {
        const simnode_lane_t *ln = &dev->lane[l];
        if (ln->holder == SIMNODE_NONE) continue;
        const simnode_waiter_t *w = &dev->w[ln->holder];
        uint64_t end = now < w->seg_end_ns ? now : w->seg_end_ns;
        busy += busy_of(ln, since_reset(dev, w->seg_start_ns, end));
    }
    return busy;
}

/* Under dev->lock: the running lane whose segment ended first by now, or SIMNODE_NONE. */
static uint32_t first_ended(const simnode_shm_t *shm, const simnode_dev_t *dev, uint64_t now)
{
    uint32_t best = SIMNODE_NONE;
    uint64_t best_end = UINT64_MAX;
    for (uint32_t l = 0; l < lane_count(shm); l++) {
        uint32_t h = dev->lane[l].holder;
        if (h == SIMNODE_NONE) continue;
        const simnode_waiter_t *w = &dev->w[h];
        if (w->state != SIMNODE_W_RUNNING || w->seg_end_ns > now || w->seg_end_ns >= best_end) continue;
        best = l;
        best_end = w->seg_end_ns;
    }
    return best;
}

/* Under dev->lock: retires every segment of the engine's timeline that has ended by now, whichever thread
 * calls, in the order they ended (lanes run concurrently under MPS). The thread of the process that owns the
 * running kernel sleeps until its segment's end, but on a
 * loaded host it may wake milliseconds late, or be stopped; a GPU does not wait for the host to move on to
 * the next kernel, so neither does the engine: a thread waiting for it, or a kernel arriving, retires the
 * ended segment itself. A kernel served in full becomes SIMNODE_W_DONE (seg_end_ns: its end) for its owner
 * to collect; one cut at a timeslice boundary waits again, or keeps the engine while nobody else waits.
 * Lines go to this process's SIMCUDA_TIMELINE file, naming the owner's pid (*tl_flush as in waiter_serve).
 * busy_ns counts SM time: a segment on a fraction f of the SMs counts f of its length (f = 1 without MPS).
 * Returns whether it retired anything. */
bool simnode_engine_advance(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now, bool *tl_flush)
{
    simnode_dev_t *dev = &shm->dev[d];
    bool any = false;
    uint32_t l;
    while ((l = first_ended(shm, dev, now)) != SIMNODE_NONE) {
        simnode_lane_t *ln = &dev->lane[l];
        simnode_waiter_t *w = &dev->w[ln->holder];
        any = true;
        uint64_t span = w->seg_end_ns - w->seg_start_ns;
        atomic_fetch_add(&dev->c.busy_ns, busy_of(ln, since_reset(dev, w->seg_start_ns, w->seg_end_ns)));
        atomic_fetch_add(&shm->procs[w->proc].busy_ns[d], span);
        /* Under the lock, so the lines of a device in one file stay in engine order; record makes no syscall.
         * Off, this is the one test. */
        if (simnode_g.cfg.timeline[0] &&
            simnode_timeline_record(d, w->ctx, w->seg_start_ns, w->seg_end_ns, shm->procs[w->proc].pid))
            *tl_flush = true;
        uint64_t served = span >= work_to_time(w->remaining_ns, ln->rate_ppm) ? w->remaining_ns
                                                                               : time_to_work(span, ln->rate_ppm);
        w->remaining_ns -= served < w->remaining_ns ? served : w->remaining_ns;
        ln->vtime_ns = w->seg_end_ns;
        if (w->remaining_ns == 0) {
            atomic_fetch_add(&dev->c.kernels, 1);
            w->state = SIMNODE_W_DONE;
            ln->holder = SIMNODE_NONE;
            if (shm->cfg.mps) /* its SMs go back: the other lanes take theirs first (wakes everyone) */
                kick_lanes(shm, fd, dev, ln->vtime_ns, l);
            else
                dispatch(shm, fd, dev, l, ln->vtime_ns); /* wakes everyone, the owner too */
        } else if (next_other_ctx(shm, dev, l, ln->cur_ctx) != SIMNODE_NONE) {
            /* Timeslice boundary with another context waiting: preempted, keeping its place. */
            atomic_fetch_add(&dev->c.preemptions, 1);
            w->state = SIMNODE_W_WAITING;
            ln->holder = SIMNODE_NONE;
            if (shm->cfg.mps)
                kick_lanes(shm, fd, dev, ln->vtime_ns, l);
            else
                dispatch(shm, fd, dev, l, ln->vtime_ns);
        } else if (shm->cfg.mps) {
            /* Its grant ends: the SMs go back, the other lanes take theirs first, then it takes what is left. */
            w->state = SIMNODE_W_WAITING;
            ln->holder = SIMNODE_NONE;
            kick_lanes(shm, fd, dev, ln->vtime_ns, l);
        } else {
            /* Nobody else waits: the slice renews and the kernel goes on (no wake-up: only its owner sleeps
             * on this segment's end; the others' timed waits find the new end when they next look). */
            uint64_t start = w->seg_end_ns;
            uint64_t slice = shm->cfg.timeslice_ns;
            ln->slice_end_ns = start + slice;
            w->seg_start_ns = start;
            w->seg_end_ns = start + (w->remaining_ns < slice ? w->remaining_ns : slice);
        }
    }
    return any;
}

/* ---- the device lock, and reclaiming dead processes ---------------------------------------------------- */
/* Recompute what a process that died inside the critical section may have left half-updated. */
static void dev_repair(simnode_shm_t *shm, int fd, uint32_t d)
{
    simnode_dev_t *dev = &shm->dev[d];
    simnode_dev_sweep(shm, fd, d);
    uint64_t used = 0;
    for (uint32_t s = 0; s < SIMNODE_MAX_PROCS; s++)
        if (atomic_load(&shm->procs[s].state) == SIMNODE_SLOT_USED) used += shm->procs[s].charge[d];
    dev->mem_used = used;
    uint32_t live = 0;
    for (uint32_t i = 0; i < SIMNODE_MAX_CTX; i++) live += dev->ctx[i].state == SIMNODE_SLOT_USED;
    dev->live_ctx = live;
    simnode_engine_kick(shm, fd, d, simnode_now_ns());
}

void simnode_dev_lock(simnode_shm_t *shm, int fd, uint32_t d)
{
    bool repair = false;
    simnode_mutex_lock(&shm->dev[d].lock, &repair);
    if (repair) dev_repair(shm, fd, d);
}

void simnode_dev_unlock(simnode_shm_t *shm, uint32_t d)
{
    pthread_mutex_unlock(&shm->dev[d].lock);
}

void simnode_dev_reclaim_proc(simnode_shm_t *shm, int fd, uint32_t d, uint32_t s)
{
    simnode_dev_t *dev = &shm->dev[d];
    uint64_t now = simnode_now_ns();
    bool found = false;
    uint64_t charge = shm->procs[s].charge[d];
    if (charge) {
        dev->mem_used = dev->mem_used >= charge ? dev->mem_used - charge : 0;
        shm->procs[s].charge[d] = 0;
        found = true;
    }
    for (uint32_t i = 0; i < SIMNODE_MAX_CTX; i++) {
        if (dev->ctx[i].state == SIMNODE_SLOT_USED && dev->ctx[i].proc == s) {
            dev->ctx[i].state = SIMNODE_SLOT_FREE;
            atomic_store(&dev->ctx[i].fault, 0);
            if (dev->live_ctx) dev->live_ctx--;
            found = true;
        }
    }
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        simnode_waiter_t *w = &dev->w[i];
        if (w->state == SIMNODE_W_FREE || w->proc != s) continue;
        simnode_lane_t *ln = &dev->lane[lane_of(shm, w)];
        if (ln->holder == i) {
            /* The kernel ran until its process died: that time was busy. */
            uint64_t end = now < w->seg_end_ns ? now : w->seg_end_ns;
            atomic_fetch_add(&dev->c.busy_ns, busy_of(ln, since_reset(dev, w->seg_start_ns, end)));
            if (end > ln->vtime_ns) ln->vtime_ns = end;
            ln->holder = SIMNODE_NONE;
        }
        w->state = SIMNODE_W_FREE;
        found = true;
    }
    if (found) {
        atomic_fetch_add(&dev->c.reclaims, 1);
        simnode_engine_kick(shm, fd, d, now);
    }
}

int simnode_dev_sweep(simnode_shm_t *shm, int fd, uint32_t d)
{
    int n = 0;
    for (uint32_t s = 0; s < SIMNODE_MAX_PROCS; s++) {
        if (atomic_load(&shm->procs[s].state) != SIMNODE_SLOT_USED) continue;
        if (simnode_proc_alive(shm, fd, s)) continue;
        simnode_dev_reclaim_proc(shm, fd, d, s);
        n++;
    }
    return n;
}
