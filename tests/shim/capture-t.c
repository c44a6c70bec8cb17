/* capture-t.c - data and graph replay unchanged under librota; capturing streams are never gated or queued. */
#include "tests/shim/shim-test.h"

#include <pthread.h>

/*
 * Under librota (with the coordinator absent, so its hooks let everything through):
 *   - a fill/add round trip gives the same words as without rota;
 *   - a captured graph replays: each cuGraphLaunch redoes the captured work, and each is gated once;
 *   - while a stream captures, a launch on it skips the gate (rota.launch_capturing), a stream-ordered
 *     allocation on it reserves with may_wait = false (rota.mem_reserve_nowait), and both come back once
 *     the capture ends; a per-thread (_ptsz, NULL stream) capture is tracked the same way;
 *   - a thread-local capture makes this thread's plain allocations non-waiting, not another thread's.
 */
static shim_dev_t d;

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static void test_round_trip(void)
{
    const uint64_t n = 4096;
    CUdeviceptr a, b, c;
    need_cu(cuMemAlloc_v2(&a, n * 4));
    need_cu(cuMemAlloc_v2(&b, n * 4));
    need_cu(cuMemAlloc_v2(&c, n * 4));
    uint32_t one = f32_bits(1.5f), two = f32_bits(2.25f);
    uint64_t nn = n;
    void *fa[] = {&a, &one, &nn}, *fb[] = {&b, &two, &nn}, *ad[] = {&a, &b, &c, &nn};
    uint64_t gate0 = shim_hits("rota.launch_gate");
    need_cu(cuLaunchKernel(d.fill, 8, 1, 1, 128, 1, 1, 0, NULL, fa, NULL));
    need_cu(cuLaunchKernel_ptsz(d.fill, 8, 1, 1, 128, 1, 1, 0, NULL, fb, NULL));
    need_cu(cuCtxSynchronize());
    need_cu(cuLaunchKernel(d.add, 8, 1, 1, 128, 1, 1, 0, NULL, ad, NULL));
    need_cu(cuCtxSynchronize());
    ok(shim_check_words(c, f32_bits(3.75f), n), "fill + fill + add round trip: every word of c is 1.5 + 2.25");
    is_int((long long)(shim_hits("rota.launch_gate") - gate0), 3, "the three launches were gated once each");

    uint32_t host[256], back[256];
    for (int i = 0; i < 256; i++) host[i] = (uint32_t)i * 2654435761u;
    need_cu(cuMemcpyHtoD_v2(a, host, sizeof(host)));
    need_cu(cuMemcpyDtoH_v2(back, a, sizeof(back)));
    ok(memcmp(host, back, sizeof(host)) == 0, "host -> device -> host copy returns the same bytes");
    cuMemFree_v2(a);
    cuMemFree_v2(b);
    cuMemFree_v2(c);
}

static void test_graph_replay(void)
{
    CUstream s;
    CUgraph g;
    CUgraphExec ge;
    CUdeviceptr p;
    const uint64_t n = 1024;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    need_cu(cuMemAlloc_v2(&p, n * 4));
    need_cu(cuMemsetD32_v2(p, 0, n));

    uint64_t gate0 = shim_hits("rota.launch_gate"), cap0 = shim_hits("rota.launch_capturing");
    uint64_t begin0 = shim_hits("rota.capture_begin"), end0 = shim_hits("rota.capture_end");
    need_cu(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    need_cu(cuStreamIsCapturing(s, &st));
    is_int(st, CU_STREAM_CAPTURE_STATUS_ACTIVE, "the stream captures");
    uint32_t v = 41;
    uint64_t nn = n;
    void *args[] = {&p, &v, &nn};
    need_cu(cuLaunchKernel(d.fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
    need_cu(cuLaunchKernel(d.fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
    is_int((long long)(shim_hits("rota.launch_gate") - gate0), 0, "launches on a capturing stream skip the gate");
    is_int((long long)(shim_hits("rota.launch_capturing") - cap0), 2, "... and are counted as capturing (2)");

    need_cu(cuStreamEndCapture(s, &g));
    is_int((long long)(shim_hits("rota.capture_begin") - begin0), 1, "rota saw the capture begin");
    is_int((long long)(shim_hits("rota.capture_end") - end0), 1, "rota saw the capture end");
    need_cu(cuGraphInstantiateWithFlags(&ge, g, 0));

    need_cu(cuGraphLaunch(ge, s));
    need_cu(cuStreamSynchronize(s));
    ok(shim_check_words(p, 41, n), "the first replay filled the buffer");
    need_cu(cuMemsetD32_v2(p, 0, n));
    need_cu(cuGraphLaunch_ptsz(ge, s));
    need_cu(cuGraphLaunch(ge, s));
    need_cu(cuStreamSynchronize(s));
    ok(shim_check_words(p, 41, n), "two more replays (legacy and _ptsz entry points) redo the captured work");
    is_int((long long)(shim_hits("rota.launch_gate") - gate0), 3, "each graph launch was gated once (3)");

    uint64_t gate1 = shim_hits("rota.launch_gate");
    need_cu(cuLaunchKernel(d.fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
    is_int((long long)(shim_hits("rota.launch_gate") - gate1), 1, "after the capture, launches are gated again");
    need_cu(cuStreamSynchronize(s));

    /* A stream-ordered allocation inside a capture (simcuda refuses it and invalidates the capture; a GPU
     * records a memory node): either way rota reserved without waiting and the capture ended for rota. */
    CUdeviceptr ap;
    CUgraph g2 = NULL;
    uint64_t nowait0 = shim_hits("rota.mem_reserve_nowait"), res0 = shim_hits("rota.mem_reserve");
    end0 = shim_hits("rota.capture_end");
    need_cu(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult arc = cuMemAllocAsync(&ap, 4096, s);
    if (arc == CUDA_SUCCESS) cuMemFreeAsync(ap, s);
    ok(shim_hits("rota.mem_reserve") - res0 == 1 && shim_hits("rota.mem_reserve_nowait") - nowait0 == 1,
       "a stream-ordered allocation on a capturing stream reserves without waiting (rc %d)", (int)arc);
    CUresult erc = cuStreamEndCapture(s, &g2);
    ok(shim_hits("rota.capture_end") - end0 == 1, "the capture ended for rota (cuStreamEndCapture rc %d)", (int)erc);
    if (g2) cuGraphDestroy(g2);
    gate1 = shim_hits("rota.launch_gate");
    need_cu(cuLaunchKernel(d.fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
    is_int((long long)(shim_hits("rota.launch_gate") - gate1), 1, "... and the stream is gated again");
    need_cu(cuStreamSynchronize(s));

    cuGraphExecDestroy(ge);
    cuGraphDestroy(g);
    cuMemFree_v2(p);
    cuStreamDestroy_v2(s);
}

static void test_ptsz_capture(void)
{
    CUgraph g;
    CUdeviceptr p;
    need_cu(cuMemAlloc_v2(&p, 4096));
    uint32_t v = 5;
    uint64_t nn = 1024;
    void *args[] = {&p, &v, &nn};
    uint64_t gate0 = shim_hits("rota.launch_gate"), cap0 = shim_hits("rota.launch_capturing");
    need_cu(cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    need_cu(cuLaunchKernel_ptsz(d.fill, 4, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    need_cu(cuLaunchKernel(d.fill, 4, 1, 1, 128, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL));
    ok(shim_hits("rota.launch_gate") == gate0 && shim_hits("rota.launch_capturing") - cap0 == 2,
       "a capture of the per-thread stream (_ptsz, NULL) skips the gate for both spellings of that stream");
    need_cu(cuStreamEndCapture_ptsz(NULL, &g));
    cuGraphDestroy(g);
    need_cu(cuLaunchKernel_ptsz(d.fill, 4, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    is_int((long long)(shim_hits("rota.launch_gate") - gate0), 1, "after it ends the per-thread stream is gated");
    need_cu(cuStreamSynchronize_ptsz(NULL));
    cuMemFree_v2(p);
}

static void *other_thread_alloc(void *arg)
{
    CUdeviceptr p;
    cuCtxSetCurrent(d.ctx);
    *(CUresult *)arg = cuMemAlloc_v2(&p, 4096);
    if (*(CUresult *)arg == CUDA_SUCCESS) cuMemFree_v2(p);
    return NULL;
}

static void test_thread_local_capture(void)
{
    CUstream s;
    CUgraph g;
    CUdeviceptr p;
    pthread_t t;
    CUresult trc = CUDA_ERROR_UNKNOWN;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));

    uint64_t nowait0 = shim_hits("rota.mem_reserve_nowait"), res0 = shim_hits("rota.mem_reserve");
    if (pthread_create(&t, NULL, other_thread_alloc, &trc) != 0) bail("pthread_create");
    pthread_join(t, NULL);
    ok(trc == CUDA_SUCCESS && shim_hits("rota.mem_reserve") - res0 == 1 &&
           shim_hits("rota.mem_reserve_nowait") == nowait0,
       "another thread's allocation during a thread-local capture may wait (rc %d)", (int)trc);

    res0 = shim_hits("rota.mem_reserve");
    CUresult rc = cuMemAlloc_v2(&p, 4096);
    if (rc == CUDA_SUCCESS) cuMemFree_v2(p);
    ok(shim_hits("rota.mem_reserve") - res0 == 1 && shim_hits("rota.mem_reserve_nowait") - nowait0 == 1,
       "the capturing thread's own allocation does not wait (rc %d)", (int)rc);

    /* That allocation is unsafe in a thread-local capture: the driver may have invalidated it. */
    g = NULL;
    CUresult erc = cuStreamEndCapture(s, &g);
    ok(erc == CUDA_SUCCESS || erc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture ends (rc %d)", (int)erc);
    if (g) cuGraphDestroy(g);
    res0 = shim_hits("rota.mem_reserve");
    uint64_t nowait1 = shim_hits("rota.mem_reserve_nowait");
    need_cu(cuMemAlloc_v2(&p, 4096));
    ok(shim_hits("rota.mem_reserve") - res0 == 1 && shim_hits("rota.mem_reserve_nowait") == nowait1,
       "after the capture the thread's allocations may wait again");
    cuMemFree_v2(p);
    cuStreamDestroy_v2(s);
}

int main(int argc, char **argv)
{
    (void)argc;
    shim_preload_self(argv, "capture");
    alarm(60);
    shim_dev_init(&d);
    test_round_trip();
    test_graph_replay();
    test_ptsz_capture();
    test_thread_local_capture();
    shim_dev_fini(&d);
    shim_cleanup();
    return done_testing();
}
