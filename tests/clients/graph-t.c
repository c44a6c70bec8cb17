/* graph-t.c - stream capture into a graph, instantiate, replay several times; capture states and illegal syncs. */
#include "tests/clients/client.h"

#define N (1u << 16)
#define MS 1000000ull
#define SPIN_MS 2

static client_t c;

static const char *status_name(CUstreamCaptureStatus st)
{
    switch (st) {
    case CU_STREAM_CAPTURE_STATUS_NONE: return "NONE";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE: return "ACTIVE";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED: return "INVALIDATED";
    }
    return "?";
}

static CUstreamCaptureStatus capturing(CUstream s)
{
    CUstreamCaptureStatus st = (CUstreamCaptureStatus)-1;
    if (cuStreamIsCapturing(s, &st) != CUDA_SUCCESS) return (CUstreamCaptureStatus)-1;
    return st;
}

static void test_capture_replay(void)
{
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, out;
    need_cu(cuMemAlloc(&a, N * 4));
    need_cu(cuMemAlloc(&b, N * 4));
    need_cu(cuMemAlloc(&out, N * 4));
    float *hin, *hout;
    need_cu(cuMemAllocHost((void **)&hin, N * 4));
    need_cu(cuMemAllocHost((void **)&hout, N * 4));
    for (size_t i = 0; i < N; i++) {
        hin[i] = 100.0f;
        hout[i] = -1.0f;
    }
    need_cu(cuMemsetD32(b, 0, N));

    is_str(status_name(capturing(s)), "NONE", "cuStreamIsCapturing before capture: NONE");
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_str(status_name(capturing(s)), "ACTIVE", "cuStreamIsCapturing during capture: ACTIVE");
    bool q = client_spin(&c, s, SPIN_MS * MS) == CUDA_SUCCESS;
    q &= client_fill(&c, s, b, client_f32_bits(1.0f), N) == CUDA_SUCCESS;
    q &= cuMemcpyHtoDAsync(a, hin, N * 4, s) == CUDA_SUCCESS;
    q &= client_add(&c, s, a, b, out, N) == CUDA_SUCCESS;
    q &= cuMemcpyDtoHAsync(hout, out, N * 4, s) == CUDA_SUCCESS;
    ok(q, "captured spin, fill, HtoD, add, DtoH");
    CUgraph g = NULL;
    ok_cu(cuStreamEndCapture(s, &g));
    ok(g != NULL, "cuStreamEndCapture returned a graph");
    is_str(status_name(capturing(s)), "NONE", "cuStreamIsCapturing after capture: NONE");
    ok_cu(cuStreamSynchronize(s));
    ok(hout[0] == -1.0f && hout[N - 1] == -1.0f, "capturing did not execute the work (output untouched)");
    float hb = -2;
    ok_cu(cuMemcpyDtoH(&hb, b, 4));
    ok(hb == 0.0f, "capturing did not run the fill either (b[0] = %g)", (double)hb);

    CUgraphExec ge = NULL;
    ok_cu(cuGraphInstantiate(&ge, g, 0));
    ok(ge != NULL, "cuGraphInstantiate gave an executable graph");

    CUevent e0, e1;
    need_cu(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    need_cu(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    for (int it = 0; it < 3; it++) {
        float in = 10.0f * (float)(it + 1);
        for (size_t i = 0; i < N; i++) {
            hin[i] = in + (float)(i % 8);
            hout[i] = -1.0f;
        }
        /* clear b outside the graph: the replayed fill must set it again */
        need_cu(cuMemsetD32(b, 0, N));
        ok_cu(cuEventRecord(e0, s));
        ok_cu(cuGraphLaunch(ge, s));
        ok_cu(cuEventRecord(e1, s));
        ok_cu(cuStreamSynchronize(s));
        bool good = true;
        long bad = -1;
        for (size_t i = 0; i < N && good; i++)
            if (hout[i] != in + (float)(i % 8) + 1.0f) {
                good = false;
                bad = (long)i;
            }
        if (!ok(good, "launch %d: output is the new input + 1 everywhere (copies, fill and add replayed)", it + 1))
            diag("hout[%ld] = %g", bad, (double)hout[bad]);
        float ms = 0;
        ok_cu(cuEventElapsedTime(&ms, e0, e1));
        ok(ms >= SPIN_MS - 0.1, "launch %d took %.2f ms >= the captured %d ms spin", it + 1, (double)ms, SPIN_MS);
    }

    /* back-to-back launches queue in stream order; each runs the 3 captured kernels */
    if (c.simcuda) client_stat_reset();
    ok_cu(cuEventRecord(e0, s));
    bool l = true;
    for (int it = 0; it < 5; it++) l &= cuGraphLaunch(ge, s) == CUDA_SUCCESS;
    ok(l, "5 back-to-back cuGraphLaunch calls");
    ok_cu(cuEventRecord(e1, s));
    ok_cu(cuStreamSynchronize(s));
    float ms = 0;
    ok_cu(cuEventElapsedTime(&ms, e0, e1));
    ok(ms >= 5 * SPIN_MS - 0.5, "5 launches took %.2f ms >= 5 x %d ms spins (each ran its kernels)", (double)ms,
       SPIN_MS);
    if (c.simcuda) {
        client_stat_t st;
        client_stat(0, &st);
        is_uint(st.kernels, 15, "simcuda-stat: the 5 launches ran 5 x 3 captured kernels");
    } else {
        skip("kernel count from simcuda-stat: not on simcuda");
    }

    ok_cu(cuGraphExecDestroy(ge));
    ok_cu(cuGraphDestroy(g));
    cuEventDestroy(e0);
    cuEventDestroy(e1);
    cuMemFreeHost(hin);
    cuMemFreeHost(hout);
    cuMemFree(a);
    cuMemFree(b);
    cuMemFree(out);
    ok_cu(cuStreamDestroy(s));
}

static void test_illegal(void)
{
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g = NULL;

    /* synchronizing a capturing stream is not permitted and invalidates the capture */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(client_spin(&c, s, 1 * MS));
    is_int(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "cuStreamSynchronize during capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    is_str(status_name(capturing(s)), "INVALIDATED", "the capture is now INVALIDATED");
    g = (CUgraph)(uintptr_t)1;
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "cuStreamEndCapture of an invalidated capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
    ok(g == NULL, "and it returns a NULL graph");
    is_str(status_name(capturing(s)), "NONE", "the stream is usable again (NONE)");
    ok_cu(client_spin(&c, s, 1 * MS));
    ok_cu(cuStreamSynchronize(s));

    /* querying a capturing stream is not permitted either */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "cuStreamQuery during capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    g = NULL;
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "... and invalidates the capture");
    if (g) cuGraphDestroy(g);

    /* the legacy stream cannot be captured */
    ok(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS,
       "cuStreamBeginCapture on the legacy stream fails");

    /* ending a capture that never began is an error and yields no graph */
    g = NULL;
    ok(cuStreamEndCapture(s, &g) != CUDA_SUCCESS && g == NULL, "cuStreamEndCapture without a capture fails");

    /* an empty capture is a valid (empty) graph */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    g = NULL;
    ok_cu(cuStreamEndCapture(s, &g));
    CUgraphExec ge = NULL;
    if (ok(g != NULL, "an empty capture gives a graph")) {
        ok_cu(cuGraphInstantiate(&ge, g, 0));
        ok_cu(cuGraphLaunch(ge, s));
        ok_cu(cuStreamSynchronize(s));
        cuGraphExecDestroy(ge);
        cuGraphDestroy(g);
    }
    ok_cu(cuStreamDestroy(s));
}

int main(void)
{
    client_deadline(60);
    client_node("graph", NULL);
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");
    test_capture_replay();
    test_illegal();
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
