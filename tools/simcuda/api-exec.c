/* api-exec.c - the executor: streams as in-order queues of ops, each run by one lazily started thread, and
 * what the ops do (copies, memsets, built-in kernels on the engines, event records and waits, frees). Every
 * executor thread is joined: by stream and context destruction, synchronisation, or at the latest at exit. */
#include "tools/simcuda/api-internal.h"

#include "runtime/lib/slice.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static _Atomic unsigned long long stream_next_id = 100;

/* ---- ops ---------------------------------------------------------------------------------------------- */
api_op_t *api_op_new(int kind)
{
    api_op_t *op = api_calloc(1, sizeof(*op));
    if (op)
        op->kind = kind;
    return op;
}

static void stream_unref(api_stream_t *s)
{
    pthread_mutex_lock(&s->ctx->lock);
    s->refs--;
    pthread_mutex_unlock(&s->ctx->lock);
}

void api_op_ref(api_op_t *op)
{
    switch (op->kind) {
    case API_OP_EVENT_RECORD:
    case API_OP_WAIT_EVENT:
        api_event_ref(op->u.ev.ev);
        break;
    case API_OP_WAIT_STREAM:
        pthread_mutex_lock(&op->u.ws.s->ctx->lock);
        op->u.ws.s->refs++;
        pthread_mutex_unlock(&op->u.ws.s->ctx->lock);
        break;
    default:
        break;
    }
}

void api_op_free(api_op_t *op)
{
    if (!op)
        return;
    switch (op->kind) {
    case API_OP_EVENT_RECORD:
    case API_OP_WAIT_EVENT:
        api_event_unref(op->u.ev.ev);
        break;
    case API_OP_WAIT_STREAM:
        stream_unref(op->u.ws.s);
        break;
    case API_OP_COPY:
        free(op->u.copy.staged);
        break;
    case API_OP_MEM_FREE:
        if (op->u.gm.m)
            api_gmem_free_done(op->u.gm.m);   /* queued but never run: the free is done all the same */
        break;
    default:
        break;
    }
    free(op);
}

static uint64_t memset_ns(const api_op_t *op)
{
    const simnode_config_t *cfg = simnode_config();
    return (cfg ? cfg->launch_ns : 0) + simnode_mem_kernel_ns((uint64_t)op->u.set.n * op->u.set.elem);
}

static void engine_enqueue_locked(api_stream_t *s, api_op_t *op, uint64_t after, uint64_t ready);
static void engine_chain_locked(api_stream_t *s, api_op_t *op);

/* An op's width on the device, for an MPS server (node.h): a kernel's from its grid (api-launch.c), 0 (every SM)
 * for a memset. */
static uint32_t op_sms(const api_op_t *op)
{
    return op->kind == API_OP_KERNEL ? op->u.k.sms : 0;
}

/* Serves ns of device time for a kernel or memset op on the compute engine: waits for the engine entry made
 * ahead of it (at submit, or behind the stream's previous kernel), else enters the engine now; and first puts
 * the kernels queued behind it on the engine too, so that the engine sees them when it ends. */
static void op_engine(api_stream_t *s, api_op_t *op, int prio, uint64_t ns)
{
    uint64_t end = 0;
    /* Runnable since the stream's previous operation ended, if it was launched by then: back to back on the
     * engine, as a GPU runs a stream's queue, however late this thread woke from that operation. */
    uint64_t ready = op->submit_ns > s->last_end_ns ? op->submit_ns : s->last_end_ns;
    pthread_mutex_lock(&s->lock);
    if (!op->on_engine) engine_enqueue_locked(s, op, 0, ready);
    bool queued = op->on_engine;
    if (queued) {
        if (op->engine_token)
            s->engine_ahead--;
        engine_chain_locked(s, op);
    }
    pthread_mutex_unlock(&s->lock);
    if (queued)
        simnode_kernel_wait(s->ctx->dev, op->engine_token, &end);
    else /* no waiter slot free: enter the engine the blocking way */
        simnode_kernel_exec_after(s->ctx->dev, s->ctx->node_id, prio, ns, op_sms(op), op->submit_ns, ready, &end);
    if (end) s->last_end_ns = end;
}

/* ---- the built-in kernels, on the stream's executor thread ------------------------------------------- */
static bool span_ok(uint64_t p, uint64_t n, uint64_t elem)
{
    if (n > SIZE_MAX / elem)
        return false;
    return n == 0 || (p != 0 && api_range_find((uintptr_t)p, (size_t)(n * elem), NULL));
}

/* Device time of a kernel op; *valid says whether its pointer arguments lie in device memory now. */
static uint64_t kernel_ns(const api_op_t *op, bool *valid)
{
    const uint64_t *a = op->u.k.args;
    const simnode_config_t *cfg = simnode_config();
    uint64_t launch_ns = cfg ? cfg->launch_ns : 0;
    *valid = true;
    switch (op->u.k.id) {
    case API_KERNEL_SPIN:
        return a[0];
    case API_KERNEL_FILL:
        *valid = span_ok(a[0], a[2], 4);
        return launch_ns + (*valid ? simnode_mem_kernel_ns(4 * a[2]) : 0);
    case API_KERNEL_ADD:
        *valid = span_ok(a[0], a[3], 4) && span_ok(a[1], a[3], 4) && span_ok(a[2], a[3], 4);
        return launch_ns + (*valid ? simnode_mem_kernel_ns(12 * a[3]) : 0);
    case API_KERNEL_OTHER:
        return launch_ns + a[0] * (cfg ? cfg->wave_ns : 0);
    default:
        *valid = false;
        return 0;
    }
}

/* Runs a kernel op on the calling (executor) thread. */
static void kernel_exec(api_stream_t *s, api_op_t *op)
{
    const uint64_t *a = op->u.k.args;
    if (op->u.k.id < 0 || op->u.k.id > API_KERNEL_OTHER)
        return;
    bool valid;
    uint64_t ns = kernel_ns(op, &valid);
    op_engine(s, op, op->u.k.prio, ns);
    if (!valid) {
        api_ctx_set_sticky(s->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
        simnode_ctx_fault(s->ctx->dev, s->ctx->node_id, CUDA_ERROR_ILLEGAL_ADDRESS); /* MPS: every client's */
        return;
    }
    if (op->u.k.id == API_KERNEL_FILL) {
        uint32_t *dst = (uint32_t *)(uintptr_t)a[0], v = (uint32_t)a[1];
        for (uint64_t i = 0; i < a[2]; i++)
            dst[i] = v;
    } else if (op->u.k.id == API_KERNEL_ADD) {
        const float *x = (const float *)(uintptr_t)a[0], *y = (const float *)(uintptr_t)a[1];
        float *z = (float *)(uintptr_t)a[2];
        for (uint64_t i = 0; i < a[3]; i++)
            z[i] = x[i] + y[i];
    }
}

/* With s->lock held: a kernel or memset enters the engine's queue ahead of its run, from the submitting thread
 * for an op at the head of its queue (runnable now), so the engine sees the context's work in launch order
 * whichever executor thread gets to run first (a 30 ms kernel launched on idle s0 runs before a 5 ms one
 * launched right after on idle s1); and behind the stream's previous kernel (token after) for the ops queued
 * after it, so that the engine sees a context's queued work when its running kernel ends, as a GPU's channel
 * holds it, without waiting for this process's threads: the context keeps the engine for that work while its
 * timeslice lasts. At most API_ENGINE_AHEAD ops per stream, so that one stream's long queue cannot take every
 * waiter slot of the device. ready: as simnode_kernel_exec_after's (0: now). */
#define API_ENGINE_AHEAD 8
static void engine_enqueue_locked(api_stream_t *s, api_op_t *op, uint64_t after, uint64_t ready)
{
    if (s->engine_ahead >= API_ENGINE_AHEAD)
        return;
    uint64_t ns;
    int prio;
    if (op->kind == API_OP_KERNEL) {
        bool valid;
        ns = kernel_ns(op, &valid);
        prio = op->u.k.prio;
    } else if (op->kind == API_OP_MEMSET) {
        ns = memset_ns(op);
        prio = s->prio;
    } else {
        return;
    }
    if (simnode_kernel_enqueue_after(s->ctx->dev, s->ctx->node_id, prio, ns, op_sms(op), op->submit_ns, ready, after,
                                     &op->engine_token) == 0) {
        op->on_engine = true;     /* else (no waiter slot free) the executor enters the engine itself */
        if (op->engine_token)     /* 0: no device time, nothing waits on the engine */
            s->engine_ahead++;
    }
}

/* With s->lock held: the kernels queued behind op (which is on the engine), in stream order, each behind the one
 * before. Event records between them take no device time and complete when the executor reaches them (after
 * the kernel before), so they do not break the chain (librota records one after each tracked launch); any other
 * operation does. */
static void engine_chain_locked(api_stream_t *s, api_op_t *op)
{
    api_op_t *p = op; /* the last kernel of the chain */
    for (api_op_t *n = op->next; n && p->on_engine; n = n->next) {
        if (n->kind == API_OP_EVENT_RECORD)
            continue;
        if (!n->on_engine) engine_enqueue_locked(s, n, p->engine_token, 0);
        p = n;
    }
}

static void memset_exec(api_stream_t *s, api_op_t *op)
{
    size_t n = op->u.set.n, elem = op->u.set.elem;
    op_engine(s, op, s->prio, memset_ns(op));
    if (elem == 1) {
        memset(op->u.set.dst, (int)(op->u.set.val & 0xff), n);
    } else if (elem == 2) {
        uint16_t v = (uint16_t)op->u.set.val, *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++)
            d[i] = v;
    } else {
        uint32_t v = op->u.set.val, *d = op->u.set.dst;
        for (size_t i = 0; i < n; i++)
            d[i] = v;
    }
}

static void op_exec(api_stream_t *s, api_op_t *op)
{
    switch (op->kind) {
    case API_OP_KERNEL:
        kernel_exec(s, op);
        break;
    case API_OP_COPY:
        simnode_copy_exec(s->ctx->dev, s->ctx->node_id, op->u.copy.bytes);
        memmove(op->u.copy.dst, op->u.copy.staged ? op->u.copy.staged : op->u.copy.src, op->u.copy.bytes);
        s->last_end_ns = api_now_ns();
        break;
    case API_OP_MEMSET:
        memset_exec(s, op);
        break;
    case API_OP_HOSTFN:
        op->u.host.fn(op->u.host.data);
        s->last_end_ns = api_now_ns();
        break;
    case API_OP_EVENT_RECORD:
        /* Its timestamp is where the stream got to it: when the previous operation ended, or when it was recorded
         * on a stream already done. The next kernel starts no earlier (it is runnable from there on). */
        if (op->submit_ns > s->last_end_ns) s->last_end_ns = op->submit_ns;
        api_event_complete(op->u.ev.ev, op->u.ev.gen, s->last_end_ns);
        break;
    case API_OP_WAIT_EVENT:
        api_event_wait_gen(op->u.ev.ev, op->u.ev.gen);
        s->last_end_ns = api_now_ns();
        break;
    case API_OP_WAIT_STREAM:
        api_stream_wait_seq(op->u.ws.s, op->u.ws.seq);
        s->last_end_ns = api_now_ns();
        break;
    case API_OP_POOL_FREE:
        api_pool_free_block(op->u.free.ptr);
        break;
    case API_OP_MEM_FREE:
        /* before the op counts as complete, so a synchronize that sees it done sees the memory back */
        api_gmem_free_done(op->u.gm.m);
        op->u.gm.m = NULL;
        break;
    default:
        break;
    }
}

/* ---- the graveyard: joins for the executors of destroyed streams --------------------------------------- */
/*
 * cuStreamDestroy returns at once, so a destroyed stream with pending work drains on its executor after the
 * call. When nobody claimed its join by then (stream_join, from a later destroy, create, synchronisation
 * or context destroy), the executor hands its join to this one-thread slot as it ends, and joins the
 * thread that was there before it: a chain, so at most one ended executor is unjoined at any time, and
 * joining the slot's thread means every thread handed off before it is gone too. grave_join empties the
 * slot; the library destructor closes it, after which ending executors detach themselves, so none ends
 * unjoined at process exit (ThreadSanitizer's "thread leak"). Lock order: stream, then grave_lock.
 */
static pthread_mutex_t grave_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t grave_thread;
static bool grave_full, grave_closed;
static pthread_once_t grave_once = PTHREAD_ONCE_INIT;

/* A forked child has none of its parent's threads: forget the slot (and a lock a parent thread held). */
static void grave_atfork_child(void)
{
    pthread_mutex_init(&grave_lock, NULL);
    grave_full = false;
}

static void grave_install(void)
{
    pthread_atfork(NULL, NULL, grave_atfork_child);
}

/* The calling executor ends without anyone holding its join: true with *prev when it must join the
 * thread handed off before it. */
static bool grave_handoff(pthread_t *prev)
{
    bool have = false;
    pthread_mutex_lock(&grave_lock);
    if (grave_closed) {
        pthread_detach(pthread_self());
    } else {
        have = grave_full;
        *prev = grave_thread;
        grave_thread = pthread_self();
        grave_full = true;
    }
    pthread_mutex_unlock(&grave_lock);
    return have;
}

/* Joins the last executor handed off, and with it every one before it. Never blocks for long: that thread
 * has ended its stream and at most joins its predecessor, which ended too. */
static void grave_join(void)
{
    pthread_mutex_lock(&grave_lock);
    bool have = grave_full;
    pthread_t t = grave_thread;
    grave_full = false;
    pthread_mutex_unlock(&grave_lock);
    if (have)
        pthread_join(t, NULL);
}

__attribute__((destructor)) static void grave_close(void)
{
    pthread_mutex_lock(&grave_lock);
    grave_closed = true;
    pthread_mutex_unlock(&grave_lock);
    grave_join();
}

/* ---- the executor ------------------------------------------------------------------------------------- */
/* Runs the queue in order; with until_empty (no thread could be started) it returns once the queue is empty,
 * or at once when the stream's thread or another caller already runs it: one runner at a time. */
static void stream_run(api_stream_t *s, bool until_empty)
{
    pthread_mutex_lock(&s->lock);
    if (until_empty) {
        if (s->has_thread || s->draining) {
            pthread_mutex_unlock(&s->lock);
            return;
        }
        s->draining = true;
    }
    for (;;) {
        while (!s->head && !s->stopping && !until_empty)
            pthread_cond_wait(&s->cond, &s->lock);
        if (!s->head)
            break;
        api_op_t *op = s->head;
        /* An event record completes together with the stream position it marks (the event under the stream's
         * lock): a thread that sees either done sees both (cuEventSynchronize then cuStreamQuery, or
         * cuStreamSynchronize then cuEventQuery). */
        bool record = op->kind == API_OP_EVENT_RECORD;
        pthread_mutex_unlock(&s->lock);
        if (!record)
            op_exec(s, op);
        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->completed = op->seq;
        s->retired = op;
        if (record)
            op_exec(s, op);  /* lock order: stream, then event */
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        api_op_free(op);
        pthread_mutex_lock(&s->lock);
        s->retired = NULL;       /* one runner per stream at a time: this one set it */
    }
    pthread_t prev;
    bool join_prev = false;
    if (until_empty) {
        s->draining = false;
    } else {
        s->exited = true;
        if (s->has_thread && !s->joining) {
            /* nobody holds this stream to join its thread: the last touch of s, it may be freed now */
            join_prev = grave_handoff(&prev);
            s->has_thread = false;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (join_prev)
        pthread_join(prev, NULL);
}

static void *stream_main(void *arg)
{
    /* The device model sleeps to absolute deadlines on this thread: no 50 us default timer slack. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    slice_request(SLICE_SHORT_NS); /* the device model, not the host, should set when its kernels end */
    stream_run(arg, false);
    return NULL;
}

/* With s->lock held: appends op and makes sure somebody runs the queue. Returns whether the caller must
 * drain it itself (no thread could be started). */
static bool enqueue_locked(api_stream_t *s, api_op_t *op)
{
    op->seq = ++s->submitted;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&s->cond);
    if (s->has_thread || s->draining)
        return false;            /* its runner takes this op too */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&s->thread, NULL, stream_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return true;
    s->has_thread = true;
    return false;
}

static api_op_t *wait_op(api_stream_t *t)
{
    api_op_t *d = api_op_new(API_OP_WAIT_STREAM);
    if (!d)
        return NULL;
    d->u.ws.s = t;
    d->u.ws.seq = t->submitted;
    t->refs++;                    /* ctx->lock held by the caller */
    return d;
}

static bool is_blocking(const api_stream_t *t)
{
    return t->kind != API_STREAM_LEGACY && !(t->flags & CU_STREAM_NON_BLOCKING);
}

static void free_list(api_op_t *l)
{
    while (l) {
        api_op_t *next = l->next;
        api_op_free(l);
        l = next;
    }
}

/* The implicit dependencies of new work on s: the legacy stream waits for every blocking stream of its
 * context, a blocking stream waits for the legacy stream. A list linked by next in *out; 0 or -ENOMEM. */
static int legacy_deps(api_stream_t *s, api_op_t **out)
{
    CUcontext c = s->ctx;
    api_op_t *deps = NULL, **tail = &deps;
    bool nomem = false;
    pthread_mutex_lock(&c->lock);
    if (s->kind == API_STREAM_LEGACY) {
        for (int list = 0; list < 2; list++) {
            for (api_stream_t *t = list ? c->zombies : c->streams; t; t = t->next) {
                if (!is_blocking(t))
                    continue;
                pthread_mutex_lock(&t->lock);
                if (t->completed < t->submitted) {
                    if ((*tail = wait_op(t)))
                        tail = &(*tail)->next;
                    else
                        nomem = true;
                }
                pthread_mutex_unlock(&t->lock);
            }
        }
    } else if (is_blocking(s) && c->legacy) {
        api_stream_t *l = c->legacy;
        pthread_mutex_lock(&l->lock);
        if (l->completed < l->submitted && !(*tail = wait_op(l)))
            nomem = true;
        pthread_mutex_unlock(&l->lock);
    }
    pthread_mutex_unlock(&c->lock);
    if (nomem) {
        free_list(deps);         /* after c->lock: dropping a stream reference takes it */
        return -ENOMEM;
    }
    *out = deps;
    return 0;
}

int api_stream_submit(api_stream_t *s, api_op_t *op, uint64_t *seqp)
{
    api_op_t *deps;
    if (legacy_deps(s, &deps) < 0)
        return -ENOMEM;
    bool drain = false;
    pthread_mutex_lock(&s->lock);
    while (deps) {
        api_op_t *d = deps;
        deps = d->next;
        drain |= enqueue_locked(s, d);
    }
    op->submit_ns = api_now_ns();
    op->on_engine = false;
    drain |= enqueue_locked(s, op);
    if (s->head == op)
        engine_enqueue_locked(s, op, 0, 0);
    else if (s->head->on_engine)
        engine_chain_locked(s, s->head); /* a kernel runs or waits: this one queues behind the stream's last */
    uint64_t seq = op->seq;
    pthread_mutex_unlock(&s->lock);
    if (drain)
        stream_run(s, true);
    if (seqp)
        *seqp = seq;
    return 0;
}

void api_stream_wait_seq(api_stream_t *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < seq)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

bool api_stream_idle(api_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    bool idle = s->completed >= s->submitted;
    pthread_mutex_unlock(&s->lock);
    return idle;
}

/* The streams a synchronisation waits for and the position of each, taken under ctx->lock. Short of host
 * memory (nomem), the waiter falls back to waiting until every stream in the set was idle once. */
typedef struct waitlist {
    api_stream_t **s;
    uint64_t *seq;
    size_t n, cap;
    bool nomem;
} waitlist_t;

static void waitlist_add(waitlist_t *w, api_stream_t *t)
{
    if (w->nomem)
        return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 8;
        api_stream_t **ns = realloc(w->s, cap * sizeof(*ns));
        if (ns)
            w->s = ns;
        uint64_t *nq = ns ? realloc(w->seq, cap * sizeof(*nq)) : NULL;
        if (nq)
            w->seq = nq;
        if (!ns || !nq) {
            w->nomem = true;
            return;
        }
        w->cap = cap;
    }
    pthread_mutex_lock(&t->lock);
    w->seq[w->n] = t->submitted;
    pthread_mutex_unlock(&t->lock);
    t->refs++;
    w->s[w->n++] = t;
}

/* Which streams of c a synchronisation covers: only (whole context), or s plus, for the legacy stream, the
 * blocking streams. */
static bool sync_covers(const api_stream_t *t, const api_stream_t *only)
{
    return !only || t == only || (only->kind == API_STREAM_LEGACY && is_blocking(t));
}

/* The allocation-free fallback: waits, one stream at a time, until each covered stream was idle. */
static void sync_drain(CUcontext c, api_stream_t *only)
{
    for (;;) {
        api_stream_t *busy = NULL;
        uint64_t seq = 0;
        pthread_mutex_lock(&c->lock);
        for (int list = 0; list < 3 && !busy; list++) {
            api_stream_t *t = list == 0 ? c->legacy : list == 1 ? c->streams : c->zombies;
            for (; t && !busy; t = list == 0 ? NULL : t->next) {
                if (!sync_covers(t, only))
                    continue;
                pthread_mutex_lock(&t->lock);
                if (t->completed < t->submitted) {
                    busy = t;
                    seq = t->submitted;
                    t->refs++;
                }
                pthread_mutex_unlock(&t->lock);
            }
        }
        pthread_mutex_unlock(&c->lock);
        if (!busy)
            return;
        api_stream_wait_seq(busy, seq);
        stream_unref(busy);
    }
}

static void waitlist_wait(waitlist_t *w, CUcontext c, api_stream_t *only)
{
    for (size_t i = 0; i < w->n; i++) {
        api_stream_wait_seq(w->s[i], w->seq[i]);
        stream_unref(w->s[i]);
    }
    free(w->s);
    free(w->seq);
    if (w->nomem)
        sync_drain(c, only);
}

static void sync_streams(CUcontext c, api_stream_t *only)
{
    waitlist_t w = { 0 };
    pthread_mutex_lock(&c->lock);
    if (c->legacy && sync_covers(c->legacy, only))
        waitlist_add(&w, c->legacy);
    for (int list = 0; list < 2; list++)
        for (api_stream_t *t = list ? c->zombies : c->streams; t; t = t->next)
            if (sync_covers(t, only))
                waitlist_add(&w, t);
    pthread_mutex_unlock(&c->lock);
    waitlist_wait(&w, c, only);
}

void api_stream_sync(api_stream_t *s)
{
    sync_streams(s->ctx, s);
}

CUresult api_ctx_sync(CUcontext c)
{
    sync_streams(c, NULL);
    api_stream_reap(c);             /* destroyed streams' work is done: their executors go too */
    return api_ctx_sticky(c);
}

/* ---- lifetime ----------------------------------------------------------------------------------------- */
api_stream_t *api_stream_new(CUcontext ctx, unsigned flags, int prio, int kind)
{
    api_stream_t *s = api_calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->ctx = ctx;
    s->flags = flags;
    s->prio = prio;
    s->kind = kind;
    s->refs = 1;
    s->id = stream_next_id++;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_once(&grave_once, grave_install);
    if (kind != API_STREAM_LEGACY && api_handle_add(s, API_KIND_STREAM) < 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
        return NULL;
    }
    return s;
}

/* Stops s and returns once its executor thread is gone: joined here, or by the caller that already joins
 * it, or handed to the graveyard. Waits for the queue to drain; never for the calling thread's own stream. */
static void stream_join(api_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    if (s->has_thread && !s->joining) {
        pthread_t t = s->thread;
        s->joining = true;
        pthread_mutex_unlock(&s->lock);
        pthread_join(t, NULL);
        pthread_mutex_lock(&s->lock);
        s->has_thread = false;
        s->joining = false;
        pthread_cond_broadcast(&s->cond);
    }
    while (s->has_thread)        /* another caller joins it: s stays until it is done */
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void stream_free(api_stream_t *s, void (*gone)(api_stream_t *))
{
    if (gone)
        gone(s);
    api_handle_del(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

/*
 * Called without locks: joins the executors of c's destroyed streams that ran out of work (each ends at once),
 * frees the destroyed streams nobody references any more, then joins the graveyard. Streams with work left
 * are left to drain; so is the calling thread's own (a host function that destroys its stream).
 */
void api_stream_reap(CUcontext c)
{
    pthread_t self = pthread_self();
    for (;;) {
        api_stream_t *idle = NULL, *dead = NULL;
        pthread_mutex_lock(&c->lock);
        for (api_stream_t **pp = &c->zombies; *pp && !idle;) {
            api_stream_t *z = *pp;
            pthread_mutex_lock(&z->lock);
            bool quiet = !z->head && !z->draining;
            bool own = z->has_thread && pthread_equal(z->thread, self);
            bool gone = quiet && !z->has_thread;
            if (quiet && z->has_thread && !own)
                idle = z;           /* stays linked, has_thread: nobody frees it while stream_join runs */
            pthread_mutex_unlock(&z->lock);
            if (gone && z->refs == 0) {
                *pp = z->next;
                dead = z;
                break;
            }
            pp = &z->next;
        }
        pthread_mutex_unlock(&c->lock);
        if (dead)
            stream_free(dead, NULL);   /* it left its capture in cuStreamDestroy */
        else if (idle)
            stream_join(idle);
        else
            break;
    }
    grave_join();
}

void api_stream_destroy_all(CUcontext c, void (*gone)(api_stream_t *))
{
    pthread_mutex_lock(&c->lock);
    api_stream_t *all = c->streams, *z = c->zombies, *l = c->legacy;
    c->streams = c->zombies = NULL;
    pthread_mutex_unlock(&c->lock);
    /* Stop (drain) everything first: a queue may wait on another queue of the context. */
    for (api_stream_t *s = all; s; s = s->next)
        stream_join(s);
    for (api_stream_t *s = z; s; s = s->next)
        stream_join(s);
    if (l)
        stream_join(l);
    pthread_mutex_lock(&c->lock);
    c->legacy = NULL;
    pthread_mutex_unlock(&c->lock);
    for (int list = 0; list < 2; list++) {
        for (api_stream_t *s = list ? z : all; s;) {
            api_stream_t *next = s->next;
            stream_free(s, gone);
            s = next;
        }
    }
    if (l)
        stream_free(l, gone);
    grave_join();                /* destroyed streams' executors that ended on their own */
}

/* ---- resolving stream arguments ----------------------------------------------------------------------- */
#define PT_CACHE 8
static __thread struct { unsigned long long ctx_id; uint64_t gen; api_stream_t *s; } pt_cache[PT_CACHE];

static api_stream_t *per_thread_stream(CUcontext c)
{
    for (int i = 0; i < PT_CACHE; i++)
        if (pt_cache[i].s && pt_cache[i].ctx_id == c->id && pt_cache[i].gen == api_gen())
            return pt_cache[i].s;
    pthread_t self = pthread_self();
    api_stream_t *s = NULL;
    pthread_mutex_lock(&c->lock);
    for (api_stream_t *t = c->streams; t; t = t->next) {
        if (t->kind == API_STREAM_PERTHREAD && pthread_equal(t->owner, self)) {
            s = t;
            break;
        }
    }
    if (!s && (s = api_stream_new(c, 0, 0, API_STREAM_PERTHREAD))) {
        s->owner = self;
        s->next = c->streams;
        c->streams = s;
    }
    pthread_mutex_unlock(&c->lock);
    if (!s)
        return NULL;
    int slot = (int)(c->id % PT_CACHE);
    pt_cache[slot].ctx_id = c->id;
    pt_cache[slot].gen = api_gen();
    pt_cache[slot].s = s;
    return s;
}

CUresult api_stream_resolve(CUstream h, bool ptds, api_stream_t **out)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        CUcontext c;
        if ((rc = api_ctx_current(&c)) != CUDA_SUCCESS)
            return rc;
        bool pt = h == CU_STREAM_PER_THREAD || (h == NULL && ptds);
        *out = pt ? per_thread_stream(c) : c->legacy;
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!api_handle_is(h, API_KIND_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!api_ctx_alive(h->ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = h;
    return CUDA_SUCCESS;
}
