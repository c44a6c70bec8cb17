/* priority-t.c - stream priorities: with the device busy, a high-priority kernel overtakes queued low-priority ones. */
#include "tests/clients/client.h"

#define MS 1000000ull
#define NLOW 3
#define BLOCKER_MS 100
#define KERNEL_MS 20

static client_t c;
static unsigned full_grid; /* blocks of 256 threads that fill every SM of a real GPU */

/* spin_ns over the whole device, so that on a real GPU too one kernel occupies it and the next must wait. */
static CUresult spin_full(CUstream s, uint64_t ns)
{
    void *args[] = {&ns};
    return cuLaunchKernel(c.spin, full_grid, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* One round: a blocker on low[0], 10 ms later one kernel on each low stream, 5 ms later one on `last`.
 * Returns each kernel's completion time in ms after the blocker was queued: low[i] in t[i], last in t[NLOW]. */
static bool round_times(CUstream *low, CUstream last, float *t)
{
    CUevent base, ev[NLOW + 1];
    need_cu(cuEventCreate(&base, CU_EVENT_DEFAULT));
    for (int i = 0; i <= NLOW; i++) need_cu(cuEventCreate(&ev[i], CU_EVENT_DEFAULT));
    bool q = cuEventRecord(base, low[0]) == CUDA_SUCCESS;
    q &= spin_full(low[0], BLOCKER_MS * MS) == CUDA_SUCCESS;
    /* host gaps make the arrival order unambiguous: the blocker is running before the others come, and the
     * low kernels have been waiting for a while when the last one is queued */
    client_sleep_ns(10 * MS);
    for (int i = 0; i < NLOW; i++) {
        q &= spin_full(low[i], KERNEL_MS * MS) == CUDA_SUCCESS;
        q &= cuEventRecord(ev[i], low[i]) == CUDA_SUCCESS;
    }
    client_sleep_ns(5 * MS);
    q &= spin_full(last, KERNEL_MS * MS) == CUDA_SUCCESS;
    q &= cuEventRecord(ev[NLOW], last) == CUDA_SUCCESS;
    q &= cuCtxSynchronize() == CUDA_SUCCESS;
    for (int i = 0; i <= NLOW; i++) {
        q &= cuEventElapsedTime(&t[i], base, ev[i]) == CUDA_SUCCESS;
        cuEventDestroy(ev[i]);
    }
    cuEventDestroy(base);
    return q;
}

int main(void)
{
    client_deadline(60);
    client_node("priority", NULL);
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");

    int least = 0, greatest = 0;
    ok_cu(cuCtxGetStreamPriorityRange(&least, &greatest));
    if (least == greatest) {
        skip("the device has a single stream priority (%d): nothing to order", least);
        client_fini(&c);
        client_node_remove(&c);
        return done_testing();
    }
    ok(greatest < least, "greatest priority %d is numerically below least %d", greatest, least);

    int sms = 0, thr = 0;
    need_cu(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c.dev));
    need_cu(cuDeviceGetAttribute(&thr, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c.dev));
    full_grid = (unsigned)(sms > 0 ? sms : 1) * (unsigned)(thr >= 256 ? thr / 256 : 1);

    CUstream low[NLOW], high, same, out_of_range;
    for (int i = 0; i < NLOW; i++) need_cu(cuStreamCreateWithPriority(&low[i], CU_STREAM_NON_BLOCKING, least));
    need_cu(cuStreamCreateWithPriority(&high, CU_STREAM_NON_BLOCKING, greatest));
    need_cu(cuStreamCreateWithPriority(&same, CU_STREAM_NON_BLOCKING, least));
    int p = 12345;
    ok_cu(cuStreamGetPriority(high, &p));
    is_int(p, greatest, "cuStreamGetPriority of the high stream");
    ok_cu(cuStreamGetPriority(low[0], &p));
    is_int(p, least, "cuStreamGetPriority of a low stream");
    /* out-of-range priorities are clamped to the range (cuStreamCreateWithPriority docs) */
    ok_cu(cuStreamCreateWithPriority(&out_of_range, CU_STREAM_NON_BLOCKING, greatest - 100));
    ok_cu(cuStreamGetPriority(out_of_range, &p));
    is_int(p, greatest, "a priority past the greatest is clamped to it");
    cuStreamDestroy(out_of_range);

    float t[NLOW + 1];
    ok(round_times(low, high, t), "round 1: blocker, %d low-priority kernels, then a high-priority one", NLOW);
    diag("round 1 completions (ms): low %.1f %.1f %.1f, high %.1f", (double)t[0], (double)t[1], (double)t[2],
         (double)t[NLOW]);
    for (int i = 0; i < NLOW; i++)
        ok(t[NLOW] < t[i], "high-priority kernel queued last completed before low kernel %d (%.1f < %.1f ms)", i,
           (double)t[NLOW], (double)t[i]);
    /* a GPU may even preempt the blocker for it; simcuda lets the running kernel finish first */
    in_range(t[NLOW], KERNEL_MS - 1, BLOCKER_MS + KERNEL_MS + 60,
             "high-priority kernel done %.1f ms in: waited at most for the blocker (+60 ms loaded host)",
             (double)t[NLOW]);

    /* control: the same round with the last stream at the low priority; on simcuda's single engine the kernels
     * then run first come, first served, so the last-queued one completes after the low streams' heads */
    ok(round_times(low, same, t), "round 2: the same with the last stream at low priority");
    diag("round 2 completions (ms): low %.1f %.1f %.1f, last %.1f", (double)t[0], (double)t[1], (double)t[2],
         (double)t[NLOW]);
    if (c.simcuda) {
        ok(t[NLOW] > t[1] && t[NLOW] > t[2],
           "simcuda: at equal priority the last-queued kernel completes after the earlier-queued ones");
    } else {
        skip("equal-priority order is unspecified on a real GPU");
    }

    for (int i = 0; i < NLOW; i++) cuStreamDestroy(low[i]);
    cuStreamDestroy(high);
    cuStreamDestroy(same);
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
