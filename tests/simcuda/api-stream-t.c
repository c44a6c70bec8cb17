/* api-stream-t.c - simcuda streams: order, query/sync, priorities, the legacy and per-thread default streams,
 * event waits, host functions, destroy with pending work, lazy executor threads and their joins. Ordering is
 * checked with host-function gates, not timing. */
#include <cuda.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/tap.h"

CUresult cuStreamSynchronize_ptsz(CUstream hStream);
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuStreamQuery_ptsz(CUstream hStream);

static atomic_int seq;
static void CUDA_CB mark(void *p)
{
    atomic_store((atomic_int *)p, atomic_fetch_add(&seq, 1) + 1);
}

static CUstream cb_stream;
static CUresult cb_status = CUDA_ERROR_UNKNOWN;
static void CUDA_CB callback(CUstream h, CUresult status, void *p)
{
    cb_stream = h;
    cb_status = status;
    mark(p);
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int thread_count(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static CUcontext ctx;

/* A host function that destroys its own stream and another one. CUDA forbids API calls in host functions,
 * but one that makes them must not hang the process or leak the executor threads. */
static struct {
    CUstream self, other;
    CUresult rc_self, rc_other;
} dcb = { NULL, NULL, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN };
static void CUDA_CB destroy_fn(void *p)
{
    (void)p;
    dcb.rc_self = cuStreamDestroy(dcb.self);
    dcb.rc_other = cuStreamDestroy(dcb.other);
}

static void *noop(void *arg)
{
    return arg;
}

/* Per-thread default streams: this thread's per-thread stream is independent of the main thread's. */
static void *other_thread(void *arg)
{
    atomic_int *ran = arg;
    cuCtxSetCurrent(ctx);
    cuLaunchHostFunc(CU_STREAM_PER_THREAD, mark, ran);
    cuStreamSynchronize(CU_STREAM_PER_THREAD);
    return NULL;
}

int main(void)
{
    node_setup("stream", "1G");
    alarm(60); /* a missing wake-up is a failure, not a stuck prove */
    CUstream s1, s2, s3;
    is_int(cuStreamCreate(&s1, 0), CUDA_ERROR_NOT_INITIALIZED, "cuStreamCreate before cuInit");
    need_cu(cuInit(0));
    is_int(cuStreamCreate(&s1, 0), CUDA_ERROR_INVALID_CONTEXT, "cuStreamCreate without a context");
    /* A first thread start lets a sanitizer start its own helper thread before the baseline is taken. */
    pthread_t warm;
    pthread_create(&warm, NULL, noop, NULL);
    pthread_join(warm, NULL);
    int t0 = thread_count();
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    is_int(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuStreamCreate(NULL)");
    is_int(cuStreamCreate(&s1, 4), CUDA_ERROR_INVALID_VALUE, "cuStreamCreate with unknown flags");
    need_cu(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    need_cu(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    is_int(thread_count(), t0, "no executor thread before any work");

    /* priorities: clamped into [greatest, least] = [-5, 0] */
    int lo, hi, p;
    ok_cu(cuCtxGetStreamPriorityRange(&lo, &hi));
    ok(lo == 0 && hi == -5, "priority range 0 .. -5");
    need_cu(cuStreamCreateWithPriority(&s3, 0, -3));
    ok(cuStreamGetPriority(s3, &p) == CUDA_SUCCESS && p == -3, "priority -3 kept");
    ok_cu(cuStreamDestroy(s3));
    need_cu(cuStreamCreateWithPriority(&s3, 0, -100));
    ok(cuStreamGetPriority(s3, &p) == CUDA_SUCCESS && p == -5, "priority -100 clamped to -5");
    ok_cu(cuStreamDestroy(s3));
    need_cu(cuStreamCreateWithPriority(&s3, 0, 7));
    ok(cuStreamGetPriority(s3, &p) == CUDA_SUCCESS && p == 0, "priority 7 clamped to 0");
    ok(cuStreamGetPriority(NULL, &p) == CUDA_SUCCESS && p == 0, "legacy stream priority 0");
    is_int(cuStreamGetPriority(s3, NULL), CUDA_ERROR_INVALID_VALUE, "cuStreamGetPriority(NULL)");
    unsigned fl;
    ok(cuStreamGetFlags(s2, &fl) == CUDA_SUCCESS && fl == CU_STREAM_NON_BLOCKING, "cuStreamGetFlags");
    CUcontext sc;
    ok(cuStreamGetCtx(s2, &sc) == CUDA_SUCCESS && sc == ctx, "cuStreamGetCtx");
    unsigned long long id1, id2;
    ok(cuStreamGetId(s1, &id1) == CUDA_SUCCESS && cuStreamGetId(s2, &id2) == CUDA_SUCCESS && id1 != id2,
       "stream ids differ");

    /* in-order execution, query, synchronize */
    gate_t g;
    gate_init(&g);
    atomic_int a = 0, b = 0, c = 0;
    ok_cu(cuLaunchHostFunc(s1, gate_fn, &g));
    ok_cu(cuLaunchHostFunc(s1, mark, &a));
    ok_cu(cuLaunchHostFunc(s1, mark, &b));
    is_int(thread_count(), t0 + 1, "one executor thread once a stream has work");
    is_int(cuStreamQuery(s1), CUDA_ERROR_NOT_READY, "cuStreamQuery of a blocked stream");
    nap_ms(20);
    is_int(atomic_load(&a), 0, "nothing runs past a closed gate");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(s1));
    ok(atomic_load(&a) > 0 && atomic_load(&b) == atomic_load(&a) + 1, "host functions run in order");
    ok_cu(cuStreamQuery(s1));
    is_int(cuLaunchHostFunc(s1, NULL, NULL), CUDA_ERROR_INVALID_VALUE, "cuLaunchHostFunc(NULL fn)");
    c = 0;
    ok_cu(cuStreamAddCallback(s1, callback, &c, 0));
    ok_cu(cuStreamSynchronize(s1));
    ok(atomic_load(&c) > 0 && cb_stream == s1 && cb_status == CUDA_SUCCESS, "cuStreamAddCallback ran with its stream");
    is_int(cuStreamAddCallback(s1, callback, &c, 1), CUDA_ERROR_INVALID_VALUE, "cuStreamAddCallback flags != 0");
    is_int(cuStreamSynchronize((CUstream)&a), CUDA_ERROR_INVALID_HANDLE, "synchronize a bogus stream");

    /* the legacy stream waits for blocking streams, not for non-blocking ones */
    gate_t g1, g2;
    gate_init(&g1);
    gate_init(&g2);
    a = b = c = 0;
    ok_cu(cuLaunchHostFunc(s1, gate_fn, &g1));
    ok_cu(cuLaunchHostFunc(s2, gate_fn, &g2));
    ok_cu(cuLaunchHostFunc(NULL, mark, &a));
    nap_ms(20);
    is_int(atomic_load(&a), 0, "legacy-stream work waits for a blocked blocking stream");
    gate_open(&g1);
    ok_cu(cuStreamSynchronize(NULL));
    ok(atomic_load(&a) > 0, "legacy-stream work ran once the blocking stream moved on");
    is_int(cuStreamQuery(s2), CUDA_ERROR_NOT_READY, "the legacy stream did not wait for the non-blocking stream");
    gate_open(&g2);
    ok_cu(cuStreamSynchronize(s2));

    /* a blocking stream waits for the legacy stream; a non-blocking one does not */
    gate_init(&g);
    a = b = 0;
    ok_cu(cuLaunchHostFunc(CU_STREAM_LEGACY, gate_fn, &g));
    ok_cu(cuLaunchHostFunc(s1, mark, &a));
    ok_cu(cuLaunchHostFunc(s2, mark, &b));
    ok_cu(cuStreamSynchronize(s2));
    ok(atomic_load(&b) > 0, "non-blocking stream ran while the legacy stream was blocked");
    nap_ms(20);
    is_int(atomic_load(&a), 0, "blocking stream waits for the legacy stream");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(s1));
    ok(atomic_load(&a) > 0, "blocking stream ran after the legacy stream");

    /* per-thread default streams: independent per thread, ordered after the legacy stream */
    gate_init(&g);
    a = b = 0;
    ok_cu(cuLaunchHostFunc(CU_STREAM_PER_THREAD, gate_fn, &g));
    pthread_t th;
    pthread_create(&th, NULL, other_thread, &b);
    pthread_join(th, NULL);
    ok(atomic_load(&b) > 0, "another thread's per-thread stream is not blocked by this thread's");
    is_int(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY, "this thread's per-thread stream is blocked");
    is_int(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY, "NULL in a _ptsz entry point is the per-thread stream");
    ok_cu(cuStreamQuery(NULL));
    gate_open(&g);
    ok_cu(cuStreamSynchronize_ptsz(NULL));
    gate_init(&g);
    ok_cu(cuLaunchHostFunc(NULL, gate_fn, &g));
    ok_cu(cuLaunchHostFunc_ptsz(NULL, mark, &a));
    nap_ms(20);
    is_int(atomic_load(&a), 0, "the per-thread stream waits for the legacy stream");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    ok(atomic_load(&a) > 0, "per-thread work ran after the legacy stream");

    /* cuStreamWaitEvent */
    CUevent e;
    need_cu(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    gate_init(&g);
    a = 0;
    ok_cu(cuLaunchHostFunc(s1, gate_fn, &g));
    ok_cu(cuEventRecord(e, s1));
    ok_cu(cuStreamWaitEvent(s2, e, 0));
    ok_cu(cuLaunchHostFunc(s2, mark, &a));
    nap_ms(20);
    is_int(atomic_load(&a), 0, "a stream waiting on an event does not run ahead of it");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(s2));
    ok(atomic_load(&a) > 0, "the waiting stream ran once the event completed");
    /* the wait is on the record made before it, not on a later re-record that completes first */
    gate_init(&g);
    a = 0;
    ok_cu(cuLaunchHostFunc(s1, gate_fn, &g));
    ok_cu(cuEventRecord(e, s1));
    ok_cu(cuStreamWaitEvent(s2, e, 0));
    ok_cu(cuLaunchHostFunc(s2, mark, &a));
    CUstream s4;
    need_cu(cuStreamCreate(&s4, CU_STREAM_NON_BLOCKING));
    ok_cu(cuEventRecord(e, s4));
    ok_cu(cuStreamSynchronize(s4));
    ok_cu(cuEventQuery(e));
    nap_ms(20);
    is_int(atomic_load(&a), 0, "a re-record completing does not release a wait on the earlier record");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(s2));
    ok(atomic_load(&a) > 0, "released when the earlier record completed");
    ok_cu(cuStreamDestroy(s4));
    is_int(cuStreamWaitEvent(s2, NULL, 0), CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent(NULL event)");
    is_int(cuStreamWaitEvent(s2, e, 2), CUDA_ERROR_INVALID_VALUE, "cuStreamWaitEvent with unknown flags");
    CUevent never;
    need_cu(cuEventCreate(&never, 0));
    ok_cu(cuStreamWaitEvent(s2, never, 0));
    ok_cu(cuStreamSynchronize(s2));
    ok_cu(cuEventDestroy(never));
    ok_cu(cuEventDestroy(e));

    /* destroy with pending work returns at once; the work still runs */
    gate_init(&g);
    a = 0;
    ok_cu(cuLaunchHostFunc(s1, gate_fn, &g));
    ok_cu(cuLaunchHostFunc(s1, mark, &a));
    ok_cu(cuStreamDestroy(s1));
    is_int(cuStreamQuery(s1), CUDA_ERROR_INVALID_HANDLE, "a destroyed stream is an invalid handle");
    is_int(cuStreamDestroy(s1), CUDA_ERROR_INVALID_HANDLE, "destroying twice");
    is_int(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE, "destroying the NULL stream");
    gate_open(&g);
    ok_cu(cuCtxSynchronize());
    ok(atomic_load(&a) > 0, "work queued before cuStreamDestroy completed");

    /* Many streams destroyed with pending work: every cuStreamDestroy returns while the work is still held
     * by a closed gate, and the next synchronisation joins every executor, so the thread count is back at
     * its baseline exactly (an executor that only was told to stop could still be running). */
    enum { NDESTROY = 24 };
    static atomic_int ran[NDESTROY];
    int t1 = thread_count();
    gate_init(&g);
    bool all = true;
    for (int i = 0; i < NDESTROY; i++) {
        CUstream s;
        all &= cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
               cuLaunchHostFunc(s, gate_fn, &g) == CUDA_SUCCESS &&
               cuLaunchHostFunc(s, mark, &ran[i]) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS;
    }
    ok(all, "%d streams created, given gated work and destroyed at once", NDESTROY);
    int pending = 0;
    for (int i = 0; i < NDESTROY; i++)
        pending += atomic_load(&ran[i]) == 0;
    is_int(pending, NDESTROY, "no destroyed stream's work ran past the closed gate");
    is_int(thread_count(), t1 + NDESTROY, "each destroyed stream's executor still runs its pending work");
    gate_open(&g);
    ok_cu(cuCtxSynchronize());
    pending = 0;
    for (int i = 0; i < NDESTROY; i++)
        pending += atomic_load(&ran[i]) == 0;
    is_int(pending, 0, "cuCtxSynchronize waited for the work of every destroyed stream");
    is_int(thread_count(), t1, "... and joined their executors: the thread count is back at its baseline");

    /* The same when the work is done before the destroy: cuStreamDestroy joins the idle executor itself. */
    need_cu(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    a = 0;
    ok_cu(cuLaunchHostFunc(s3, mark, &a));
    ok_cu(cuStreamSynchronize(s3));
    is_int(thread_count(), t1 + 1, "an idle stream keeps its executor");
    ok_cu(cuStreamDestroy(s3));
    is_int(thread_count(), t1, "cuStreamDestroy of an idle stream joined its executor");

    /* A host function that destroys its own stream and an idle one: no deadlock (the alarm), the work queued
     * after it still runs, and both executors are joined by the next synchronisation. */
    need_cu(cuStreamCreate(&dcb.self, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamCreate(&dcb.other, CU_STREAM_NON_BLOCKING));
    ok_cu(cuLaunchHostFunc(dcb.other, mark, &a));
    ok_cu(cuStreamSynchronize(dcb.other));
    gate_init(&g);
    b = 0;
    ok_cu(cuLaunchHostFunc(dcb.self, gate_fn, &g));
    ok_cu(cuLaunchHostFunc(dcb.self, destroy_fn, NULL));
    ok_cu(cuLaunchHostFunc(dcb.self, mark, &b));
    is_int(thread_count(), t1 + 2, "two streams, two executors");
    gate_open(&g);
    ok_cu(cuCtxSynchronize());
    ok(dcb.rc_self == CUDA_SUCCESS && dcb.rc_other == CUDA_SUCCESS, "a host function destroyed its own stream and another");
    ok(atomic_load(&b) > 0, "work queued after the destroying host function ran");
    is_int(thread_count(), t1, "both executors were joined");

    ok_cu(cuStreamDestroy(s2));
    ok_cu(cuCtxDestroy(ctx));
    is_int(thread_count(), t0, "destroying the context joined every executor thread");

    /* Process exit: a destroyed stream whose executor ended on its own, with no simcuda call after it, is
     * joined at exit all the same (under SANITIZER=thread an unjoined one fails this program: "thread
     * leak"). The context is left alive on purpose. */
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    need_cu(cuStreamCreate(&s3, 0));
    a = 0;
    ok_cu(cuLaunchHostFunc(s3, mark, &a));
    ok_cu(cuStreamDestroy(s3));
    for (int i = 0; i < 2000 && atomic_load(&a) == 0; i++)
        nap_ms(1);
    ok(atomic_load(&a) > 0, "a destroyed stream's work ran without any synchronisation");
    nap_ms(20);                    /* lets its executor end */
    node_remove();
    return done_testing();
}
