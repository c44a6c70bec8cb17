/* stream-t.c - stream order, events (query, synchronize, timing), cross-stream waits, host functions, queries. */
#include "tests/clients/client.h"

#include <stdatomic.h>

#define N (1u << 18)
#define MS 1000000ull

static client_t c;

static bool all_f32(const float *h, float want, size_t n, long *bad)
{
    for (size_t i = 0; i < n; i++) {
        if (h[i] != want) {
            *bad = (long)i;
            return false;
        }
    }
    return true;
}

/* A chain of dependent kernels on one stream behind a spin: only in-order execution yields the result. */
static void test_order(void)
{
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, x;
    need_cu(cuMemAlloc(&a, N * 4));
    need_cu(cuMemAlloc(&b, N * 4));
    need_cu(cuMemAlloc(&x, N * 4));
    float *h;
    need_cu(cuMemAllocHost((void **)&h, N * 4));
    bool q = true;
    q &= client_spin(&c, s, 5 * MS) == CUDA_SUCCESS;
    q &= client_fill(&c, s, a, client_f32_bits(1.0f), N) == CUDA_SUCCESS;
    q &= client_fill(&c, s, b, client_f32_bits(2.0f), N) == CUDA_SUCCESS;
    q &= client_add(&c, s, a, b, x, N) == CUDA_SUCCESS; /* x = 3 */
    q &= client_add(&c, s, x, b, a, N) == CUDA_SUCCESS; /* a = 5 */
    q &= client_add(&c, s, a, a, x, N) == CUDA_SUCCESS; /* x = 10 */
    q &= client_fill(&c, s, b, client_f32_bits(0.5f), N) == CUDA_SUCCESS;
    q &= client_add(&c, s, x, b, a, N) == CUDA_SUCCESS; /* a = 10.5 */
    q &= cuMemcpyDtoHAsync(h, a, N * 4, s) == CUDA_SUCCESS;
    ok(q, "queued spin, 3 fills, 4 dependent adds and a DtoH on one stream");
    ok_cu(cuStreamSynchronize(s));
    long bad = -1;
    if (!ok(all_f32(h, 10.5f, N, &bad), "the chain computed 10.5 everywhere (in-order execution)"))
        diag("h[%ld] = %g", bad, (double)h[bad]);
    cuMemFreeHost(h);
    cuMemFree(a);
    cuMemFree(b);
    cuMemFree(x);
    ok_cu(cuStreamDestroy(s));
}

static void test_events(void)
{
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1, enot, edis, eblk;
    ok_cu(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    ok_cu(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    ok_cu(cuEventCreate(&enot, CU_EVENT_DEFAULT));
    ok_cu(cuEventCreate(&edis, CU_EVENT_DISABLE_TIMING));
    ok_cu(cuEventCreate(&eblk, CU_EVENT_BLOCKING_SYNC));

    is_int(cuEventQuery(enot), CUDA_SUCCESS, "cuEventQuery of a never-recorded event: CUDA_SUCCESS");
    float ms = -1;
    is_int(cuEventElapsedTime(&ms, e0, enot), CUDA_ERROR_INVALID_HANDLE,
           "cuEventElapsedTime with unrecorded events: CUDA_ERROR_INVALID_HANDLE");

    ok_cu(cuEventRecord(e0, s));
    ok_cu(client_spin(&c, s, 20 * MS));
    ok_cu(cuEventRecord(e1, s));
    ok_cu(cuEventRecord(edis, s));
    /* the 20 ms spin is still running: a host thread would have to stall 20 ms between the calls to miss this */
    is_int(cuEventQuery(e1), CUDA_ERROR_NOT_READY, "cuEventQuery behind a 20 ms spin: CUDA_ERROR_NOT_READY");
    is_int(cuStreamQuery(s), CUDA_ERROR_NOT_READY, "cuStreamQuery with the spin queued: CUDA_ERROR_NOT_READY");
    is_int(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY,
           "cuEventElapsedTime before the end event completed: CUDA_ERROR_NOT_READY");
    ok_cu(cuEventSynchronize(e1));
    is_int(cuEventQuery(e1), CUDA_SUCCESS, "cuEventQuery after cuEventSynchronize: CUDA_SUCCESS");
    ok_cu(cuEventElapsedTime(&ms, e0, e1));
    in_range(ms, 19.5, 45.0, "ElapsedTime around spin_ns(20 ms) is %.3f ms (tolerance -0.5/+25 ms, loaded host)",
             (double)ms);
    ok_cu(cuEventSynchronize(edis));
    is_int(cuEventElapsedTime(&ms, e0, edis), CUDA_ERROR_INVALID_HANDLE,
           "cuEventElapsedTime with a DISABLE_TIMING event: CUDA_ERROR_INVALID_HANDLE");
    is_int(cuEventQuery(edis), CUDA_SUCCESS, "a DISABLE_TIMING event still completes");
    is_int(cuStreamQuery(s), CUDA_SUCCESS, "cuStreamQuery of the drained stream: CUDA_SUCCESS");

    /* a blocking-sync event: cuEventSynchronize waits for the work before it */
    uint64_t t0 = tap_now_ns();
    ok_cu(client_spin(&c, s, 10 * MS));
    ok_cu(cuEventRecord(eblk, s));
    ok_cu(cuEventSynchronize(eblk));
    double waited = client_ms_since(t0);
    ok(waited >= 9.5, "cuEventSynchronize on a BLOCKING_SYNC event waited for the 10 ms spin (%.2f ms)", waited);

    /* re-recording moves the event: elapsed time of two back-to-back records is small but not negative */
    ok_cu(cuEventRecord(e0, s));
    ok_cu(cuEventRecord(e1, s));
    ok_cu(cuEventSynchronize(e1));
    ok_cu(cuEventElapsedTime(&ms, e0, e1));
    in_range(ms, 0.0, 5.0, "ElapsedTime of back-to-back records is %.3f ms (0..5 ms)", (double)ms);

    cuEventDestroy(e0);
    cuEventDestroy(e1);
    cuEventDestroy(enot);
    cuEventDestroy(edis);
    cuEventDestroy(eblk);
    ok_cu(cuStreamDestroy(s));
}

/* s2 waits on an event recorded on s1 after a spin and a fill: its copy must see the fill. */
static void test_wait_event(void)
{
    CUstream s1, s2;
    need_cu(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent ev;
    need_cu(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    need_cu(cuMemAlloc(&d, N * 4));
    uint32_t *h;
    need_cu(cuMemAllocHost((void **)&h, N * 4));
    need_cu(cuMemsetD32(d, 0, N));
    memset(h, 0xff, N * 4);

    uint64_t t0 = tap_now_ns();
    ok_cu(client_spin(&c, s1, 50 * MS));
    ok_cu(client_fill(&c, s1, d, 77, N));
    ok_cu(cuEventRecord(ev, s1));
    ok_cu(cuStreamWaitEvent(s2, ev, 0));
    ok_cu(cuMemcpyDtoHAsync(h, d, N * 4, s2));
    ok_cu(cuStreamSynchronize(s2));
    double waited = client_ms_since(t0);
    ok(waited >= 49.5, "s2 finished only after s1's 50 ms spin (%.1f ms)", waited);
    is_int(cuEventQuery(ev), CUDA_SUCCESS, "the awaited event is complete when s2 is");
    bool good = true;
    for (size_t i = 0; i < N && good; i++) good = h[i] == 77;
    ok(good, "s2's copy after cuStreamWaitEvent saw s1's fill (77 everywhere)");

    /* without the wait, s2's copy does not wait for s1 (it sees the old data or is at least done first) */
    ok_cu(cuMemsetD32(d, 5, N));
    ok_cu(client_spin(&c, s1, 50 * MS));
    ok_cu(client_fill(&c, s1, d, 6, N));
    t0 = tap_now_ns();
    ok_cu(cuMemcpyDtoHAsync(h, d, 4, s2));
    ok_cu(cuStreamSynchronize(s2));
    double alone = client_ms_since(t0);
    is_int(cuStreamQuery(s1), CUDA_ERROR_NOT_READY, "without a wait s2 completed while s1 still ran");
    is_uint(h[0], 5, "so s2 read the value from before s1's fill");
    diag("s2 alone took %.2f ms", alone);
    ok_cu(cuStreamSynchronize(s1));

    cuMemFreeHost(h);
    cuMemFree(d);
    cuEventDestroy(ev);
    ok_cu(cuStreamDestroy(s1));
    ok_cu(cuStreamDestroy(s2));
}

/* ---- host functions ---- */

typedef struct hostfn_state {
    _Atomic int seq;
    _Atomic int order[3];
    _Atomic uint32_t seen_before;  /* value host fn 1 saw in the buffer the preceding copy wrote */
    _Atomic uint32_t seen_after;   /* value host fn 1 saw in the buffer the following copy writes */
    const uint32_t *h1, *h2;
} hostfn_state_t;

static hostfn_state_t hs;

static void CUDA_CB host_fn1(void *arg)
{
    (void)arg;
    atomic_store(&hs.order[0], atomic_fetch_add(&hs.seq, 1) + 1);
    atomic_store(&hs.seen_before, hs.h1[0]);
    client_sleep_ns(20 * MS); /* the work queued after this must wait for it */
    atomic_store(&hs.seen_after, hs.h2[0]);
}

static void CUDA_CB host_fn2(void *arg)
{
    atomic_store(&hs.order[1], atomic_fetch_add(&hs.seq, 1) + 1);
    atomic_store((_Atomic uint32_t *)arg, hs.h2[0]);
}

static void test_host_func(void)
{
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    need_cu(cuMemAlloc(&d, 4096));
    uint32_t *h1, *h2;
    need_cu(cuMemAllocHost((void **)&h1, 4096));
    need_cu(cuMemAllocHost((void **)&h2, 4096));
    h1[0] = 0;
    h2[0] = 0;
    hs.h1 = h1;
    hs.h2 = h2;
    static _Atomic uint32_t fn2_saw;
    atomic_store(&fn2_saw, 0);

    ok_cu(client_spin(&c, s, 10 * MS));
    ok_cu(client_fill(&c, s, d, 7, 1024));
    ok_cu(cuMemcpyDtoHAsync(h1, d, 4096, s));
    ok_cu(cuLaunchHostFunc(s, host_fn1, NULL));
    ok_cu(client_fill(&c, s, d, 8, 1024));
    ok_cu(cuMemcpyDtoHAsync(h2, d, 4096, s));
    ok_cu(cuLaunchHostFunc(s, host_fn2, (void *)&fn2_saw));
    is_int(atomic_load(&hs.seq), 0, "host functions have not run right after queueing (10 ms spin ahead)");
    ok_cu(cuStreamSynchronize(s));
    is_int(atomic_load(&hs.order[0]), 1, "host fn 1 ran first");
    is_int(atomic_load(&hs.order[1]), 2, "host fn 2 ran second");
    is_uint(atomic_load(&hs.seen_before), 7, "host fn 1 saw the copy queued before it");
    is_uint(atomic_load(&hs.seen_after), 0, "the copy queued after host fn 1 waited for it to return");
    is_uint(atomic_load(&fn2_saw), 8, "host fn 2 saw the copy queued before it");

    cuMemFreeHost(h1);
    cuMemFreeHost(h2);
    cuMemFree(d);
    ok_cu(cuStreamDestroy(s));
}

static void test_ctx_sync(void)
{
    CUstream s1, s2;
    need_cu(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    ok_cu(client_spin(&c, s1, 15 * MS));
    ok_cu(client_spin(&c, s2, 15 * MS));
    ok_cu(cuCtxSynchronize());
    is_int(cuStreamQuery(s1), CUDA_SUCCESS, "cuCtxSynchronize drained stream 1");
    is_int(cuStreamQuery(s2), CUDA_SUCCESS, "cuCtxSynchronize drained stream 2");
    is_int(cuStreamQuery(NULL), CUDA_SUCCESS, "the idle legacy stream queries CUDA_SUCCESS");
    ok_cu(cuStreamDestroy(s1));
    ok_cu(cuStreamDestroy(s2));
}

int main(void)
{
    client_deadline(60);
    client_node("stream", NULL);
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");
    test_order();
    test_events();
    test_wait_event();
    test_host_func();
    test_ctx_sync();
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
