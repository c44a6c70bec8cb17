/* kernel.c - this process's kernels and copies on a device's engines: submit, enqueue, wait its turn, serve it. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <stdint.h>

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
                           uint32_t sms, uint64_t submit_ns, uint64_t ready_ns, uint64_t after, bool block,
                           uint32_t *out, bool *tl_flush)
{
    simnode_dev_t *dev = &shm->dev[d];
    uint32_t me;
    while ((me = waiter_alloc(dev)) == SIMNODE_NONE) {
        /* SIMNODE_MAX_WAITERS kernels already queue on this device: wait for one to finish. */
        if (simnode_dev_sweep(shm, fd, d) > 0) continue;
        if (!block) return -EAGAIN;
        uint32_t seq = atomic_load(&dev->seq);
        simnode_dev_unlock(shm, d);
        simnode_futex_wait(&dev->seq, seq, SIMNODE_WAIT_TIMEOUT_NS);
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
    w->after = after;
    w->sms = sms == 0 || sms > SIMNODE_SM_COUNT ? SIMNODE_SM_COUNT : sms;
    w->state = SIMNODE_W_WAITING;
    /* A segment that ended while its owner's thread slept on is over: the engine may be free for this one. */
    simnode_engine_advance(shm, fd, d, now, tl_flush);
    simnode_engine_kick(shm, fd, d, w->arrival_ns);
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
        if (simnode_engine_advance(shm, fd, d, now, tl_flush)) continue;
        if (simnode_engine_holds(shm, dev, me)) {
            uint64_t end = w->seg_end_ns;
            simnode_dev_unlock(shm, d);
            timeline_sync(tl_flush); /* a long kernel's earlier slices (the sleep is absolute: no engine time lost) */
            simnode_sleep_until(end);
            simnode_dev_lock(shm, fd, d);
            continue;
        }
        /* Another kernel runs (or none, defensively): wait for a change of the engine's state, or until the
         * running segment's end plus SIMNODE_STEP_IN_NS, when its owner has not retired it: then we do. */
        uint64_t timeout = SIMNODE_WAIT_TIMEOUT_NS;
        bool running;
        uint64_t next_end = simnode_engine_next_end(shm, dev, &running);
        if (running) {
            uint64_t due = next_end + SIMNODE_STEP_IN_NS; /* > now: advance retired it otherwise */
            if (due - now < timeout) timeout = due - now;
        }
        uint32_t seq = atomic_load(&dev->seq);
        simnode_dev_unlock(shm, d);
        timeline_sync(tl_flush); /* before sleeping: lines this thread retired, or a preempted kernel's */
        bool timed_out = simnode_futex_wait(&dev->seq, seq, timeout);
        simnode_dev_lock(shm, fd, d);
        if (timed_out) {
            /* Liveness: a dead holder's slices would go on being retired by time; reclaim it instead. */
            if (simnode_engine_holder_dead(shm, fd, dev)) simnode_dev_sweep(shm, fd, d);
            simnode_engine_kick(shm, fd, d, simnode_now_ns());
        }
    }
}

/* Both submissions: a kernel of ns on device dev_i for ctx_id. token NULL: wait for it and run it (the
 * blocking path); else register it without waiting and name it in *token for simnode_kernel_wait. */
static int kernel_submit(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint32_t sms, uint64_t submit_ns,
                         uint64_t ready_ns, uint64_t after, uint64_t *token, uint64_t *end_ns)
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
    rc = waiter_register(shm, fd, d, ctx_id, prio, ns, sms, submit_ns, ready_ns, after, token == NULL, &me,
                         &tl_flush);
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
    return kernel_submit(dev_i, ctx_id, prio, ns, 0, submit_ns, 0, 0, NULL, NULL);
}

int simnode_kernel_exec_after(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint32_t sms, uint64_t submit_ns,
                              uint64_t ready_ns, uint64_t *end_ns)
{
    if (end_ns) *end_ns = 0;
    return kernel_submit(dev_i, ctx_id, prio, ns, sms, submit_ns, ready_ns, 0, NULL, end_ns);
}

/* A token names a waiter slot and its ticket, so a stale token is detected; 0 means nothing to wait for. */
int simnode_kernel_enqueue(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns,
                           uint64_t *token)
{
    return simnode_kernel_enqueue_after(dev_i, ctx_id, prio, ns, 0, submit_ns, 0, 0, token);
}

int simnode_kernel_enqueue_after(int dev_i, uint32_t ctx_id, int prio, uint64_t ns, uint32_t sms, uint64_t submit_ns,
                                 uint64_t ready_ns, uint64_t after, uint64_t *token)
{
    *token = 0;
    return kernel_submit(dev_i, ctx_id, prio, ns, sms, submit_ns, ready_ns, after, token, NULL);
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
    simnode_sleep_until(end);
    return 0;
}
