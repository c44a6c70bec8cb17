/* client-tracker.c - the completion tracker: one thread per process waits (blocking sync) on gated launches. */
#include "shim/client-internal.h"

#include "runtime/lib/slice.h"
#include "shim/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/*
 * The tracker thread is started on the first tracked launch (never in a process that launches nothing). It
 * takes events in the order they were recorded, makes the event's context current (cuCtxSetCurrent, on its
 * own thread only), waits with cuEventSynchronize (the events are CU_EVENT_BLOCKING_SYNC: the thread sleeps),
 * and reports each completion to client-launch.c. Events are recycled through a small pool per context.
 *
 * Device time per client is the sum of completion gaps while busy: a launch completing at t after the previous
 * completion at p, launched at l, adds t - max(p, l). An uncontended client's launches are sampled (client-launch.c):
 * a sample adds its own device time, timed by events before and after it, at most t - max(p, l). This needs no timing events, so it works on a real GPU as
 * on simcuda; it is the time the client had work on the GPU, which overstates its device time when the GPU is
 * time-sliced between processes (rotad's share accounting, runtime/sched.c, divides by the clients in flight).
 *
 * A stream destroyed while its events are pending is fine (the events stay valid and complete). A context
 * destroyed meanwhile makes cuCtxSetCurrent or cuEventSynchronize fail: the launch counts as complete and the
 * event is dropped with its context.
 *
 * With nothing queued, the thread sleeps; in a high client, until the idle check that launch_complete asked for
 * (the learned idle window ending, client-launch.c), if no completion came first. The condition variable runs on
 * CLOCK_MONOTONIC, the clock of client_now_ns.
 */

#define TRACK_POOL_MAX 64
#define TRACK_WATCH_NS 1000000000ull /* client_watch's period while the thread has nothing else to do */

typedef struct tracker_entry {
    CUevent ev;
    CUcontext ctx;
    uint64_t launch_ns;
    CUevent start;          /* a sample's timed event before its launch (ev is timed then too), or NULL */
    bool timed;             /* in the pool: a timing event */
} tracker_entry_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tracker_entry_t *q;       /* ring */
    size_t cap, head, len;
    bool started, failed, sleeping;
    _Atomic bool watch;     /* call client_watch when idle (tracker_start) */
    tracker_entry_t pool[TRACK_POOL_MAX];
    size_t npool;
    uint64_t last_done_ns;  /* tracker thread only */
    uint64_t due_ns;        /* tracker thread only: when to call launch_idle_due (0: never) */
} tracker = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

static void tracker_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&tracker.cv, &a);
    pthread_condattr_destroy(&a);
}

static pthread_once_t tracker_once = PTHREAD_ONCE_INIT;
/* The launch gate's handlers (tracker_set_handler, before any launch). */
static tracker_handler_t tracker_handler;

void tracker_set_handler(const tracker_handler_t *h)
{
    tracker_handler = *h;
}

static void tracker_atfork_child(void)
{
    /* The thread and the parent's contexts are not ours: start from nothing. */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&tracker.mu, &mu, sizeof mu);
    tracker_cv_init();
    free(tracker.q);
    tracker.q = NULL;
    tracker.cap = tracker.head = tracker.len = 0;
    tracker.started = tracker.failed = tracker.sleeping = false;
    atomic_store_explicit(&tracker.watch, false, memory_order_relaxed);
    tracker.npool = 0;
    tracker.last_done_ns = 0;
    tracker.due_ns = 0;
}

static void tracker_setup(void)
{
    tracker_cv_init();
    pthread_atfork(NULL, NULL, tracker_atfork_child);
}

CUevent tracker_event_get(CUcontext ctx, bool timed)
{
    pthread_once(&tracker_once, tracker_setup);
    pthread_mutex_lock(&tracker.mu);
    for (size_t i = tracker.npool; i-- > 0;)
        if (tracker.pool[i].ctx == ctx && tracker.pool[i].timed == timed) {
            CUevent ev = tracker.pool[i].ev;
            tracker.pool[i] = tracker.pool[--tracker.npool];
            pthread_mutex_unlock(&tracker.mu);
            return ev;
        }
    pthread_mutex_unlock(&tracker.mu);
    CUevent ev = NULL;
    unsigned flags = CU_EVENT_BLOCKING_SYNC | (timed ? 0 : CU_EVENT_DISABLE_TIMING);
    if (ROTA_REAL(cuEventCreate)(&ev, flags) != CUDA_SUCCESS) return NULL;
    return ev;
}

void tracker_event_put(CUevent ev, CUcontext ctx, bool timed)
{
    pthread_mutex_lock(&tracker.mu);
    if (tracker.npool < TRACK_POOL_MAX) {
        tracker.pool[tracker.npool++] = (tracker_entry_t){.ev = ev, .ctx = ctx, .timed = timed};
        ev = NULL;
    }
    pthread_mutex_unlock(&tracker.mu);
    if (ev) ROTA_REAL(cuEventDestroy_v2)(ev);
}

static void *tracker_main(void *arg)
{
    (void)arg;
    rota_in_shim = 1; /* whatever this thread calls goes straight to the driver */
    /* Its timed waits (a high client's idle checks, client-launch.c) are tens of microseconds apart: the default
     * slack of 50 us would double them. */
    prctl(PR_SET_TIMERSLACK, 1000ul, 0ul, 0ul, 0ul);
    slice_request(SLICE_SHORT_NS); /* it ends holds: run it soon after a completion wakes it (slice.h) */
    CUcontext cur = NULL;
    for (;;) {
        pthread_mutex_lock(&tracker.mu);
        while (!tracker.len) {
            tracker.sleeping = true;
            if (!tracker.due_ns) {
                /* Idle: wake once a second to check the connection to rotad (client_watch), as long as this
                 * process holds memory rotad should know about. */
                if (!tracker.watch) {
                    pthread_cond_wait(&tracker.cv, &tracker.mu);
                    continue;
                }
                struct timespec ws;
                clock_gettime(CLOCK_MONOTONIC, &ws);
                ws.tv_sec += (time_t)(TRACK_WATCH_NS / 1000000000u);
                if (pthread_cond_timedwait(&tracker.cv, &tracker.mu, &ws) != ETIMEDOUT || tracker.len) continue;
                tracker.sleeping = false;
                pthread_mutex_unlock(&tracker.mu);
                bool again = client_watch();
                pthread_mutex_lock(&tracker.mu);
                tracker.watch = again;
                continue;
            }
            struct timespec ts = {.tv_sec = (time_t)(tracker.due_ns / 1000000000u),
                                  .tv_nsec = (long)(tracker.due_ns % 1000000000u)};
            if (pthread_cond_timedwait(&tracker.cv, &tracker.mu, &ts) != ETIMEDOUT || tracker.len) continue;
            /* No completion since launch_complete asked for this check: make it, without the lock. */
            tracker.sleeping = false;
            pthread_mutex_unlock(&tracker.mu);
            tracker.due_ns = tracker_handler.idle_due(client_now_ns());
            pthread_mutex_lock(&tracker.mu);
        }
        tracker.sleeping = false;
        tracker_entry_t e = tracker.q[tracker.head];
        tracker.head = (tracker.head + 1) % tracker.cap;
        tracker.len--;
        pthread_mutex_unlock(&tracker.mu);
        CUresult rc = CUDA_SUCCESS;
        if (e.ctx != cur) {
            rc = ROTA_REAL(cuCtxSetCurrent)(e.ctx);
            cur = rc == CUDA_SUCCESS ? e.ctx : NULL;
        }
        if (rc == CUDA_SUCCESS) rc = ROTA_REAL(cuEventSynchronize)(e.ev);
        uint64_t now = client_now_ns();
        uint64_t from = tracker.last_done_ns > e.launch_ns ? tracker.last_done_ns : e.launch_ns;
        uint64_t busy = now > from ? now - from : 0;
        if (e.start) {
            /* a sample: its launch's own device time, from the timed events around it (else the gap), never
             * more than the gap (the device ran it between its launch or the previous completion, and now) */
            float ms = 0;
            if (rc == CUDA_SUCCESS && ROTA_REAL(cuEventElapsedTime)(&ms, e.start, e.ev) == CUDA_SUCCESS && ms >= 0 &&
                (uint64_t)((double)ms * 1e6) < busy)
                busy = (uint64_t)((double)ms * 1e6);
            tracker_handler.sample(busy);
            if (rc == CUDA_SUCCESS) tracker_event_put(e.start, e.ctx, true);
        }
        tracker.last_done_ns = now;
        if (rc == CUDA_SUCCESS) tracker_event_put(e.ev, e.ctx, e.start != NULL);
        /* else: the context (and the event with it) is gone, or the event failed: drop it. */
        tracker.due_ns = tracker_handler.complete(busy, now);
    }
    return NULL;
}

/* With tracker.mu held: the thread runs (true), or could not be started. */
static bool tracker_start_locked(void)
{
    if (tracker.failed) return false;
    if (tracker.started) return true;
    int e = client_thread_start(tracker_main);
    if (e) {
        tracker.failed = true;
        rota_log(ROTA_LOG_WARN, "unable to start the launch tracker thread; launches are not bounded");
        return false;
    }
    tracker.started = true;
    return true;
}

void tracker_start(void)
{
    if (atomic_load_explicit(&tracker.watch, memory_order_relaxed)) return; /* every allocation asks: one load */
    pthread_once(&tracker_once, tracker_setup);
    pthread_mutex_lock(&tracker.mu);
    if (!tracker.watch && tracker_start_locked()) {
        tracker.watch = true;
        if (tracker.sleeping) pthread_cond_signal(&tracker.cv); /* from an untimed wait to the watch period */
    }
    pthread_mutex_unlock(&tracker.mu);
}

bool tracker_push(CUevent ev, CUcontext ctx, uint64_t launch_ns, CUevent start)
{
    pthread_once(&tracker_once, tracker_setup);
    pthread_mutex_lock(&tracker.mu);
    bool ok = tracker_start_locked();
    if (ok && tracker.len == tracker.cap) {
        size_t cap = tracker.cap ? tracker.cap * 2 : 64;
        tracker_entry_t *n = malloc(cap * sizeof *n);
        if (!n) {
            ok = false;
        } else {
            for (size_t i = 0; i < tracker.len; i++) n[i] = tracker.q[(tracker.head + i) % tracker.cap];
            free(tracker.q);
            tracker.q = n;
            tracker.cap = cap;
            tracker.head = 0;
        }
    }
    if (ok) {
        tracker.q[(tracker.head + tracker.len) % tracker.cap] = (tracker_entry_t){
            .ev = ev, .ctx = ctx, .launch_ns = launch_ns, .start = start};
        tracker.len++;
        if (tracker.sleeping) pthread_cond_signal(&tracker.cv);
    }
    pthread_mutex_unlock(&tracker.mu);
    return ok;
}
