/* engine.c - compute and copy engine arbitration: timeslicing between contexts like a GPU without MPS. */
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
 */

void simnode_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Wait while *word == val, at most timeout_ns; true when it timed out. */
static bool futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000ull), .tv_nsec = (long)(timeout_ns % 1000000000ull)};
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
    return rc != 0 && errno == ETIMEDOUT;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void simnode_engine_init(simnode_dev_t *dev)
{
    dev->holder = SIMNODE_NONE;
    dev->cur_ctx = SIMNODE_NONE;
    dev->slice_end_ns = 0;
    dev->vtime_ns = 0;
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

/* The most urgent waiter of context ctx, or SIMNODE_NONE. */
static uint32_t best_of_ctx(const simnode_dev_t *dev, uint32_t ctx)
{
    uint32_t best = SIMNODE_NONE;
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        const simnode_waiter_t *w = &dev->w[i];
        if (w->state != SIMNODE_W_WAITING || w->ctx != ctx) continue;
        if (best == SIMNODE_NONE || better(w, &dev->w[best])) best = i;
    }
    return best;
}

/* The next context after cur (round-robin by index) that has a waiter other than cur itself, or NONE. */
static uint32_t next_other_ctx(const simnode_dev_t *dev, uint32_t cur)
{
    uint32_t best = SIMNODE_NONE, best_dist = UINT32_MAX;
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++) {
        const simnode_waiter_t *w = &dev->w[i];
        if (w->state != SIMNODE_W_WAITING || w->ctx == cur) continue;
        uint32_t dist = cur == SIMNODE_NONE ? w->ctx : (w->ctx - cur - 1) % SIMNODE_MAX_CTX;
        if (dist < best_dist) {
            best_dist = dist;
            best = w->ctx;
        }
    }
    return best;
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

/* Under dev->lock with no holder: give the engine, free since virtual time t0, to the next waiter. */
static void dispatch(simnode_shm_t *shm, int fd, simnode_dev_t *dev, uint64_t t0)
{
    if (dev->vtime_ns > t0) t0 = dev->vtime_ns;
    uint32_t same = dev->cur_ctx == SIMNODE_NONE ? SIMNODE_NONE : best_of_ctx(dev, dev->cur_ctx);
    uint32_t other = next_other_ctx(dev, dev->cur_ctx);
    uint32_t pick;
    bool sw;
    if (same != SIMNODE_NONE) {
        uint64_t start = t0 > dev->w[same].arrival_ns ? t0 : dev->w[same].arrival_ns;
        sw = other != SIMNODE_NONE && start >= dev->slice_end_ns;
        pick = sw ? best_of_ctx(dev, other) : same;
    } else if (other != SIMNODE_NONE) {
        pick = best_of_ctx(dev, other);
        sw = true;
    } else {
        if (engine_reap(shm, fd, dev)) return;
        dev->holder = SIMNODE_NONE;
        dev->vtime_ns = t0;
        bump(dev);
        return;
    }
    simnode_waiter_t *w = &dev->w[pick];
    if (!simnode_proc_alive(shm, fd, w->proc)) {
        /* Never hand the engine to a dead process: reclaim it, which dispatches again without it. */
        simnode_dev_reclaim_proc(shm, fd, (uint32_t)(dev - shm->dev), w->proc);
        return;
    }
    uint64_t start = t0 > w->arrival_ns ? t0 : w->arrival_ns;
    uint64_t slice = shm->cfg.timeslice_ns;
    if (sw) {
        if (dev->cur_ctx != SIMNODE_NONE) {
            uint64_t s = shm->cfg.switch_ns;
            atomic_fetch_add(&dev->c.switches, 1);
            atomic_fetch_add(&dev->c.switch_ns, since_reset(dev, start, start + s));
            start += s;
        }
        dev->cur_ctx = w->ctx;
        dev->slice_end_ns = start + slice;
    } else if (start >= dev->slice_end_ns) {
        dev->slice_end_ns = start + slice; /* nobody else waits: the slice renews */
    }
    uint64_t left = dev->slice_end_ns - start;
    w->state = SIMNODE_W_RUNNING;
    w->seg_start_ns = start;
    w->seg_end_ns = start + (w->remaining_ns < left ? w->remaining_ns : left);
    dev->holder = pick;
    bump(dev);
}

void simnode_engine_kick(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now)
{
    simnode_dev_t *dev = &shm->dev[d];
    if (dev->holder == SIMNODE_NONE) dispatch(shm, fd, dev, now);
}

uint64_t simnode_engine_inflight_busy(simnode_dev_t *dev, uint64_t now)
{
    if (dev->holder == SIMNODE_NONE) return 0;
    const simnode_waiter_t *w = &dev->w[dev->holder];
    uint64_t end = now < w->seg_end_ns ? now : w->seg_end_ns;
    return since_reset(dev, w->seg_start_ns, end);
}

/* Under dev->lock: retires every segment of the engine's timeline that has ended by now, whichever thread
 * calls. The thread of the process that owns the running kernel sleeps until its segment's end, but on a
 * loaded host it may wake milliseconds late, or be stopped; a GPU does not wait for the host to move on to
 * the next kernel, so neither does the engine: a thread waiting for it, or a kernel arriving, retires the
 * ended segment itself. A kernel served in full becomes SIMNODE_W_DONE (seg_end_ns: its end) for its owner
 * to collect; one cut at a timeslice boundary waits again, or keeps the engine while nobody else waits.
 * Lines go to this process's SIMCUDA_TIMELINE file, naming the owner's pid (*tl_flush as in waiter_serve).
 * Returns whether it retired anything. */
static bool engine_advance(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now, bool *tl_flush)
{
    simnode_dev_t *dev = &shm->dev[d];
    bool any = false;
    while (dev->holder != SIMNODE_NONE) {
        simnode_waiter_t *w = &dev->w[dev->holder];
        if (w->state != SIMNODE_W_RUNNING || w->seg_end_ns > now) break;
        any = true;
        uint64_t served = w->seg_end_ns - w->seg_start_ns;
        atomic_fetch_add(&dev->c.busy_ns, since_reset(dev, w->seg_start_ns, w->seg_end_ns));
        /* Under the lock, so the lines of a device in one file stay in engine order; record makes no syscall.
         * Off, this is the one test. */
        if (simnode_g.cfg.timeline[0] &&
            simnode_timeline_record(d, w->ctx, w->seg_start_ns, w->seg_end_ns, shm->procs[w->proc].pid))
            *tl_flush = true;
        w->remaining_ns -= served < w->remaining_ns ? served : w->remaining_ns;
        dev->vtime_ns = w->seg_end_ns;
        if (w->remaining_ns == 0) {
            atomic_fetch_add(&dev->c.kernels, 1);
            w->state = SIMNODE_W_DONE;
            dev->holder = SIMNODE_NONE;
            dispatch(shm, fd, dev, dev->vtime_ns); /* wakes everyone, the owner too */
        } else if (next_other_ctx(dev, dev->cur_ctx) != SIMNODE_NONE) {
            /* Timeslice boundary with another context waiting: preempted, keeping its place. */
            atomic_fetch_add(&dev->c.preemptions, 1);
            w->state = SIMNODE_W_WAITING;
            dev->holder = SIMNODE_NONE;
            dispatch(shm, fd, dev, dev->vtime_ns);
        } else {
            /* Nobody else waits: the slice renews and the kernel goes on (no wake-up: only its owner sleeps
             * on this segment's end; the others' timed waits find the new end when they next look). */
            uint64_t start = w->seg_end_ns;
            uint64_t slice = shm->cfg.timeslice_ns;
            dev->slice_end_ns = start + slice;
            w->seg_start_ns = start;
            w->seg_end_ns = start + (w->remaining_ns < slice ? w->remaining_ns : slice);
        }
    }
    return any;
}

static int ctx_check(simnode_dev_t *dev, uint32_t ctx_id)
{
    const simnode_ctx_t *c = &dev->ctx[ctx_id & 0xffu];
    return c->state == SIMNODE_SLOT_USED && c->id == ctx_id ? 0 : -EINVAL;
}

static uint32_t waiter_alloc(simnode_dev_t *dev)
{
    for (uint32_t i = 0; i < SIMNODE_MAX_WAITERS; i++)
        if (dev->w[i].state == SIMNODE_W_FREE) return i;
    return SIMNODE_NONE;
}

int simnode_kernel_exec(int dev_i, uint32_t ctx_id, int prio, uint64_t ns)
{
    return simnode_kernel_exec_submitted(dev_i, ctx_id, prio, ns, UINT64_MAX);
}

/* Under dev->lock: takes a waiter slot for a kernel of ctx_id (ns > 0) and offers it to an idle engine.
 * With block, waits for a free slot; else -EAGAIN when all are taken. */
static int waiter_register(simnode_shm_t *shm, int fd, uint32_t d, uint32_t ctx_id, int prio, uint64_t ns,
                           uint64_t submit_ns, uint64_t ready_ns, bool block, uint32_t *out, bool *tl_flush)
{
    simnode_dev_t *dev = &shm->dev[d];
    uint32_t me;
    while ((me = waiter_alloc(dev)) == SIMNODE_NONE) {
        /* SIMNODE_MAX_WAITERS kernels already queue on this device: wait for one to finish. */
        if (simnode_dev_sweep(shm, fd, d) > 0) continue;
        if (!block) return -EAGAIN;
        uint32_t seq = atomic_load(&dev->seq);
        simnode_dev_unlock(shm, d);
        futex_wait(&dev->seq, seq, SIMNODE_WAIT_TIMEOUT_NS);
        simnode_dev_lock(shm, fd, d);
        int rc = ctx_check(dev, ctx_id);
        if (rc) return rc;
    }
    simnode_waiter_t *w = &dev->w[me];
    uint64_t now = simnode_now_ns();
    w->proc = simnode_g.slot;
    w->ctx = ctx_id & 0xffu;
    w->prio = prio;
    w->ticket = dev->next_ticket++;
    w->submit_ns = submit_ns < now ? submit_ns : now;
    /* A kernel that was runnable before its thread got here (ready_ns: its stream's previous operation ended
     * then, on the engine's timeline) starts from then on an engine that was free: the thread's wake-up after
     * that operation is the host's latency, which a GPU's stream queue does not have. Never before the engine
     * was free (dispatch: dev->vtime_ns). */
    w->arrival_ns = ready_ns && ready_ns < now ? ready_ns : now;
    w->remaining_ns = ns;
    w->seg_start_ns = w->seg_end_ns = 0;
    w->state = SIMNODE_W_WAITING;
    /* A segment that ended while its owner's thread slept on is over: the engine may be free for this one. */
    engine_advance(shm, fd, d, now, tl_flush);
    if (dev->holder == SIMNODE_NONE) dispatch(shm, fd, dev, w->arrival_ns);
    *out = me;
    return 0;
}

/* With dev->lock dropped: the timeline file I/O that simnode_timeline_record asked for (never set when off). */
static void timeline_sync(bool *pending)
{
    if (*pending) {
        *pending = false;
        simnode_timeline_flush();
    }
}

/* Under dev->lock: blocks until waiter me has been served its device time, then frees it; *end_ns (if not NULL)
 * is when it ended on the engine's timeline. *tl_flush: set when the caller, once it has dropped dev->lock,
 * must call timeline_sync (the lines of segments it retired are waiting to be written). */
static int waiter_serve(simnode_shm_t *shm, int fd, uint32_t d, uint32_t me, uint64_t *end_ns, bool *tl_flush)
{
    simnode_dev_t *dev = &shm->dev[d];
    simnode_waiter_t *w = &dev->w[me];
    for (;;) {
        if (w->state == SIMNODE_W_DONE) {
            if (end_ns) *end_ns = w->seg_end_ns;
            w->state = SIMNODE_W_FREE;
            return 0;
        }
        if (w->state == SIMNODE_W_FREE) /* reclaimed under us: cannot happen while we live */
            return -EOWNERDEAD;
        uint64_t now = simnode_now_ns();
        if (engine_advance(shm, fd, d, now, tl_flush)) continue;
        if (dev->holder == me) {
            uint64_t end = w->seg_end_ns;
            simnode_dev_unlock(shm, d);
            timeline_sync(tl_flush); /* a long kernel's earlier slices (the sleep is absolute: no engine time lost) */
            sleep_until(end);
            simnode_dev_lock(shm, fd, d);
            continue;
        }
        /* Another kernel runs (or none, defensively): wait for a change of the engine's state, or until the
         * running segment's end plus SIMNODE_STEP_IN_NS, when its owner has not retired it: then we do. */
        uint64_t timeout = SIMNODE_WAIT_TIMEOUT_NS;
        uint32_t h = dev->holder;
        if (h != SIMNODE_NONE) {
            uint64_t due = dev->w[h].seg_end_ns + SIMNODE_STEP_IN_NS; /* > now: advance retired it otherwise */
            if (due - now < timeout) timeout = due - now;
        }
        uint32_t seq = atomic_load(&dev->seq);
        simnode_dev_unlock(shm, d);
        timeline_sync(tl_flush); /* before sleeping: lines this thread retired, or a preempted kernel's */
        bool timed_out = futex_wait(&dev->seq, seq, timeout);
        simnode_dev_lock(shm, fd, d);
        if (timed_out) {
            /* Liveness: a dead holder's slices would go on being retired by time; reclaim it instead. */
            h = dev->holder;
            if (h != SIMNODE_NONE && !simnode_proc_alive(shm, fd, dev->w[h].proc)) simnode_dev_sweep(shm, fd, d);
            simnode_engine_kick(shm, fd, d, simnode_now_ns());
        }
    }
}

/* Both submissions: a kernel of ns on device dev_i for ctx_id. token NULL: wait for it and run it (the
 * blocking path); else register it without waiting and name it in *token for simnode_kernel_wait. */
static int kernel_submit(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns, uint64_t ready_ns,
                         uint64_t *token, uint64_t *end_ns)
{
    int rc = simnode_attach();
    if (rc) return rc;
    if (dev_i < 0 || dev_i >= simnode_g.cfg.devices) return -ENODEV;
    simnode_shm_t *shm = simnode_g.shm;
    int fd = simnode_g.fd;
    uint32_t d = (uint32_t)dev_i;
    simnode_dev_t *dev = &shm->dev[d];
    bool tl_flush = false;

    simnode_dev_lock(shm, fd, d);
    rc = ctx_check(dev, ctx_id);
    if (rc) goto out_unlock;
    if (ns == 0) {
        atomic_fetch_add(&dev->c.kernels, 1);
        goto out_unlock;
    }
    uint32_t me;
    rc = waiter_register(shm, fd, d, ctx_id, prio, ns, submit_ns, ready_ns, token == NULL, &me, &tl_flush);
    if (rc) goto out_unlock;
    if (token)
        *token = dev->w[me].ticket * SIMNODE_MAX_WAITERS + me;
    else
        rc = waiter_serve(shm, fd, d, me, end_ns, &tl_flush);
out_unlock:
    simnode_dev_unlock(shm, d);
    timeline_sync(&tl_flush);
    return rc;
}

int simnode_kernel_exec_submitted(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns)
{
    return kernel_submit(dev_i, ctx_id, prio, ns, submit_ns, 0, NULL, NULL);
}

int simnode_kernel_exec_after(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns, uint64_t ready_ns,
                              uint64_t *end_ns)
{
    if (end_ns) *end_ns = 0;
    return kernel_submit(dev_i, ctx_id, prio, ns, submit_ns, ready_ns, NULL, end_ns);
}

/* A token names a waiter slot and its ticket, so a stale token is detected; 0 means nothing to wait for. */
int simnode_kernel_enqueue(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns,
                           uint64_t *token)
{
    *token = 0;
    return kernel_submit(dev_i, ctx_id, prio, ns, submit_ns, 0, token, NULL);
}

int simnode_kernel_wait(int dev_i, uint64_t token, uint64_t *end_ns)
{
    if (end_ns) *end_ns = 0;
    if (token == 0) return 0;
    int rc = simnode_attach();
    if (rc) return rc;
    if (dev_i < 0 || dev_i >= simnode_g.cfg.devices) return -ENODEV;
    simnode_shm_t *shm = simnode_g.shm;
    int fd = simnode_g.fd;
    uint32_t d = (uint32_t)dev_i;
    uint32_t me = (uint32_t)(token % SIMNODE_MAX_WAITERS);
    simnode_dev_t *dev = &shm->dev[d];
    bool tl_flush = false;

    simnode_dev_lock(shm, fd, d);
    const simnode_waiter_t *w = &dev->w[me];
    if (w->state == SIMNODE_W_FREE || w->ticket != token / SIMNODE_MAX_WAITERS || w->proc != simnode_g.slot)
        rc = -EINVAL;
    else
        rc = waiter_serve(shm, fd, d, me, end_ns, &tl_flush);
    simnode_dev_unlock(shm, d);
    timeline_sync(&tl_flush);
    return rc;
}

int simnode_copy_exec(int dev_i, uint32_t ctx_id, uint64_t bytes)
{
    int rc = simnode_attach();
    if (rc) return rc;
    if (dev_i < 0 || dev_i >= simnode_g.cfg.devices) return -ENODEV;
    simnode_shm_t *shm = simnode_g.shm;
    uint32_t d = (uint32_t)dev_i;
    simnode_dev_t *dev = &shm->dev[d];
    simnode_dev_lock(shm, simnode_g.fd, d);
    rc = ctx_check(dev, ctx_id);
    if (rc) {
        simnode_dev_unlock(shm, d);
        return rc;
    }
    /* FIFO on a virtual timeline: each transfer starts when the previous one ends (or now). */
    uint64_t now = simnode_now_ns();
    uint64_t dur = shm->cfg.copy_latency_ns + (uint64_t)((double)bytes / shm->cfg.copy_gbps);
    uint64_t start = dev->copy_free_ns > now ? dev->copy_free_ns : now;
    uint64_t end = start + dur;
    dev->copy_free_ns = end;
    atomic_fetch_add(&dev->c.copies, 1);
    atomic_fetch_add(&dev->c.copy_bytes, bytes);
    atomic_fetch_add(&dev->c.copy_busy_ns, dur);
    simnode_dev_unlock(shm, d);
    sleep_until(end);
    return 0;
}
