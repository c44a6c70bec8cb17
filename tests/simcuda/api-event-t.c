/* api-event-t.c - simcuda events: record/query/synchronize, elapsed time, DISABLE_TIMING, BLOCKING_SYNC
 * (sleeps, no spinning), re-recording, destroy while pending, error codes. */
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(void)
{
    node_setup("event", "1G");
    alarm(60);
    CUevent e1, e2, e3;
    is_int(cuEventCreate(&e1, 0), CUDA_ERROR_NOT_INITIALIZED, "cuEventCreate before cuInit");
    need_cu(cuInit(0));
    is_int(cuEventCreate(&e1, 0), CUDA_ERROR_INVALID_CONTEXT, "cuEventCreate without a context");
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    CUmodule mod;
    CUfunction spin;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    CUstream s;
    need_cu(cuStreamCreate(&s, 0));

    is_int(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuEventCreate(NULL)");
    is_int(cuEventCreate(&e1, 0x10), CUDA_ERROR_INVALID_VALUE, "cuEventCreate with unknown flags");
    is_int(cuEventCreate(&e1, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE,
           "CU_EVENT_INTERPROCESS without CU_EVENT_DISABLE_TIMING");
    need_cu(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    need_cu(cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    need_cu(cuEventCreate(&e3, CU_EVENT_DISABLE_TIMING));
    ok_cu(cuEventQuery(e1));
    ok_cu(cuEventSynchronize(e1));
    float ms = -1;
    is_int(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE, "elapsed time of never-recorded events");

    /* a recorded event is not ready until its stream reaches it */
    gate_t g;
    gate_init(&g);
    ok_cu(cuLaunchHostFunc(s, gate_fn, &g));
    ok_cu(cuEventRecord(e1, s));
    is_int(cuEventQuery(e1), CUDA_ERROR_NOT_READY, "query before the stream reaches the record");
    ok_cu(cuEventRecord(e2, NULL));    /* the legacy stream waits for s */
    is_int(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_NOT_READY, "elapsed time of pending events");
    gate_open(&g);
    ok_cu(cuEventSynchronize(e2));
    ok_cu(cuEventQuery(e1));
    ok_cu(cuEventElapsedTime(&ms, e1, e2));
    ok(ms >= 0.0f, "legacy-stream event completes after the blocking stream's (%.3f ms)", ms);

    /* elapsed time around a 30 ms kernel: [30, 3000] ms on a loaded host */
    uint64_t ns = 30000000;
    void *args[] = { &ns };
    ok_cu(cuEventRecord(e1, s));
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    ok_cu(cuEventRecord(e2, s));
    ok_cu(cuEventSynchronize(e2));
    ok_cu(cuEventElapsedTime(&ms, e1, e2));
    in_range(ms, 29.9, 3000.0, "cuEventElapsedTime around spin_ns(30 ms) (tolerance -0.1/+2970 ms)");
    ok_cu(cuEventElapsedTime_v2(&ms, e1, e2));
    is_int(cuEventElapsedTime(NULL, e1, e2), CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime(NULL)");
    ok_cu(cuEventRecord(e3, s));
    ok_cu(cuEventSynchronize(e3));
    is_int(cuEventElapsedTime(&ms, e1, e3), CUDA_ERROR_INVALID_HANDLE, "elapsed time with DISABLE_TIMING");
    is_int(cuEventElapsedTime(&ms, NULL, e2), CUDA_ERROR_INVALID_HANDLE, "elapsed time with a NULL event");

    /* BLOCKING_SYNC sleeps: a 200 ms wait costs this thread under 100 ms of CPU */
    ns = 200000000;
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    ok_cu(cuEventRecord(e2, s));
    double cpu0 = thread_cpu_ms();
    ok_cu(cuEventSynchronize(e2));
    in_range(thread_cpu_ms() - cpu0, 0.0, 100.0, "BLOCKING_SYNC wait of 200 ms uses < 100 ms CPU");

    /* an event and the stream position it marks complete together, seen from either side */
    int stream_late = 0, event_late = 0;
    uint64_t zero = 0;
    void *zargs[] = { &zero };
    for (int i = 0; i < 200; i++) {
        cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, zargs, NULL);
        cuEventRecord(e1, s);
        cuEventSynchronize(e1);
        stream_late += cuStreamQuery(s) != CUDA_SUCCESS;
        cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, zargs, NULL);
        cuEventRecord(e1, s);
        cuStreamSynchronize(s);
        event_late += cuEventQuery(e1) != CUDA_SUCCESS;
    }
    is_int(stream_late, 0, "after cuEventSynchronize of its last event the stream is idle (200 tries)");
    is_int(event_late, 0, "after cuStreamSynchronize its last event is complete (200 tries)");

    /* re-recording: the event tracks its latest record */
    gate_init(&g);
    CUstream s2;
    need_cu(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    ok_cu(cuLaunchHostFunc(s, gate_fn, &g));
    ok_cu(cuEventRecord(e1, s));
    is_int(cuEventQuery(e1), CUDA_ERROR_NOT_READY, "first record pending");
    ok_cu(cuEventRecord(e1, s2));
    ok_cu(cuStreamSynchronize(s2));
    ok_cu(cuEventQuery(e1));

    /* destroy while a record is queued: resources go when the stream passes it */
    ok_cu(cuEventRecord(e3, s));
    ok_cu(cuEventDestroy(e3));
    is_int(cuEventQuery(e3), CUDA_ERROR_INVALID_HANDLE, "query a destroyed event");
    is_int(cuEventRecord(e3, s), CUDA_ERROR_INVALID_HANDLE, "record a destroyed event");
    is_int(cuEventDestroy(e3), CUDA_ERROR_INVALID_HANDLE, "destroy twice");
    is_int(cuEventRecord(e1, (CUstream)&g), CUDA_ERROR_INVALID_HANDLE, "record on a bogus stream");
    is_int(cuEventRecordWithFlags(e1, s, 0x8), CUDA_ERROR_INVALID_VALUE, "cuEventRecordWithFlags unknown flags");
    gate_open(&g);
    ok_cu(cuStreamSynchronize(s));
    ok_cu(cuEventRecordWithFlags(e1, s, CU_EVENT_RECORD_DEFAULT));
    ok_cu(cuEventSynchronize(e1));

    ok_cu(cuEventDestroy(e1));
    ok_cu(cuEventDestroy(e2));
    ok_cu(cuStreamDestroy(s));
    ok_cu(cuStreamDestroy(s2));
    ok_cu(cuModuleUnload(mod));
    ok_cu(cuCtxDestroy(ctx));
    node_remove();
    return done_testing();
}
