/* api-graph-t.c - simcuda stream capture and graphs: recording instead of executing, replay per launch,
 * fork/join across streams, illegal calls during capture, capture modes, error codes. */
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

static atomic_int calls;
static void CUDA_CB count(void *p)
{
    (void)p;
    atomic_fetch_add(&calls, 1);
}

#define N 1024

static CUfunction fill;
static CUcontext ctx;

static CUresult launch_fill(CUstream s, CUdeviceptr p, uint32_t v, uint64_t n)
{
    void *args[] = { &p, &v, &n };
    return cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

static CUstream wrong_thread_stream;
static void *end_elsewhere(void *arg)
{
    CUgraph g;
    cuCtxSetCurrent(ctx);
    *(CUresult *)arg = cuStreamEndCapture(wrong_thread_stream, &g);
    return NULL;
}

static size_t nodes_of(CUgraph g)
{
    size_t n = 0;
    return cuGraphGetNodes(g, NULL, &n) == CUDA_SUCCESS ? n : (size_t)-1;
}

int main(void)
{
    node_setup("graph", "1G");
    alarm(60);
    need_cu(cuInit(0));
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));
    CUmodule mod;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CUstream s, s2, nb;
    need_cu(cuStreamCreate(&s, 0));
    need_cu(cuStreamCreate(&s2, 0));
    need_cu(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    need_cu(cuMemAlloc(&a, N * 4));
    need_cu(cuMemAlloc(&b, N * 4));
    need_cu(cuMemsetD32(a, 0, N));
    need_cu(cuMemsetD32(b, 0, N));
    static uint32_t host[N], out[N];
    for (int i = 0; i < N; i++)
        host[i] = (uint32_t)i;

    CUstreamCaptureStatus st;
    CUgraph g;
    is_int(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "capturing the legacy stream");
    is_int(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE, "unknown capture mode");
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE, "ending a capture that never began");
    ok(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE, "not capturing");

    /* capture: nothing runs, everything is recorded */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE, "capture begun twice");
    ok(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing");
    ok_cu(cuMemsetD32Async(a, 1, N, s));
    ok_cu(launch_fill(s, a, 5, N / 2));
    ok_cu(cuLaunchHostFunc(s, count, NULL));
    ok_cu(cuMemcpyDtoDAsync(b, a, N * 4, s));
    ok_cu(cuMemcpyHtoDAsync(a, host, N * 4, s));
    is_int(cuStreamEndCapture(s, NULL), CUDA_ERROR_INVALID_VALUE, "cuStreamEndCapture(NULL graph)");
    ok_cu(cuStreamEndCapture(s, &g));
    is_uint(nodes_of(g), 5, "five nodes captured");
    CUgraphNode nodes[5];
    size_t nn = 5;
    CUgraphNodeType t0, t1, t2;
    ok(cuGraphGetNodes(g, nodes, &nn) == CUDA_SUCCESS && cuGraphNodeGetType(nodes[0], &t0) == CUDA_SUCCESS &&
           cuGraphNodeGetType(nodes[1], &t1) == CUDA_SUCCESS && cuGraphNodeGetType(nodes[2], &t2) == CUDA_SUCCESS &&
           t0 == CU_GRAPH_NODE_TYPE_MEMSET && t1 == CU_GRAPH_NODE_TYPE_KERNEL && t2 == CU_GRAPH_NODE_TYPE_HOST,
       "node types in capture order");
    ok_cu(cuStreamSynchronize(s));
    is_int(atomic_load(&calls), 0, "captured host function did not run");
    ok_cu(cuMemcpyDtoH(out, b, sizeof out));
    is_uint(out[0], 0, "captured work did not run");

    CUgraphExec x;
    is_int(cuGraphInstantiateWithFlags(&x, g, 0x100), CUDA_ERROR_INVALID_VALUE, "instantiate with unknown flags");
    is_int(cuGraphInstantiateWithFlags(NULL, g, 0), CUDA_ERROR_INVALID_VALUE, "instantiate into NULL");
    ok_cu(cuGraphInstantiate(&x, g, 0));
    ok_cu(cuGraphDestroy(g));       /* the exec keeps its own copy */
    for (int round = 1; round <= 3; round++) {
        ok_cu(cuMemsetD32(b, 0, N));
        ok_cu(cuGraphLaunch(x, round == 2 ? s2 : s));
        ok_cu(cuCtxSynchronize());
        ok_cu(cuMemcpyDtoH(out, b, sizeof out));
        ok(out[0] == 5 && out[N / 2 - 1] == 5 && out[N / 2] == 1 && out[N - 1] == 1,
           "launch %d replayed memset, fill and copy in order", round);
        is_int(atomic_load(&calls), round, "host function ran once per launch (%d)", round);
    }
    ok_cu(cuMemcpyDtoH(out, a, sizeof out));
    ok(out[7] == 7 && out[N - 1] == N - 1, "the captured HtoD copy ran last");
    ok_cu(cuGraphExecDestroy(x));
    is_int(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_HANDLE, "launching a destroyed exec");
    is_int(cuGraphDestroy(g), CUDA_ERROR_INVALID_HANDLE, "destroying a graph twice");

    /* illegal calls invalidate the capture */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(launch_fill(s, a, 1, N));
    is_int(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamSynchronize while capturing");
    ok(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "invalidated");
    is_int(launch_fill(s, a, 1, N), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "work on an invalidated capture");
    g = (CUgraph)&calls;
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "ending an invalidated capture");
    ok(g == NULL, "no graph from an invalidated capture");
    ok(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE, "capture ended");

    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuMemcpyHtoD(a, host, 16), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "sync memcpy during a global capture");
    CUdeviceptr d;
    is_int(cuMemAlloc(&d, 16), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemAlloc during a global capture");
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the unsafe call invalidated it");

    /* a thread in relaxed interaction mode may make unsafe calls; the capture info names the capture */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    ok(cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS && mode == CU_STREAM_CAPTURE_MODE_GLOBAL,
       "the thread's interaction mode was GLOBAL");
    ok_cu(cuMemAlloc(&d, 16));
    ok_cu(cuMemFree(d));
    ok_cu(cuThreadExchangeStreamCaptureMode(&mode));
    is_int(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE, "cuThreadExchangeStreamCaptureMode(NULL)");
    cuuint64_t cid = 0;
    CUgraph cg = NULL;
    size_t ndeps = 9;
    ok(cuStreamGetCaptureInfo(s, &st, &cid, &cg, NULL, NULL, &ndeps) == CUDA_SUCCESS &&
           st == CU_STREAM_CAPTURE_STATUS_ACTIVE && cid != 0 && cg != NULL,
       "cuStreamGetCaptureInfo: active, with an id and a graph");
    ok_cu(cuStreamEndCapture(s, &g));
    ok(g == cg, "the graph of the capture info is the captured graph");
    ok_cu(cuGraphDestroy(g));

    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(launch_fill(NULL, a, 1, N), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "legacy-stream work while a blocking stream captures");
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "implicit sync invalidated it");

    ok_cu(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
    ok_cu(launch_fill(NULL, a, 2, N));
    ok_cu(cuMemAlloc(&d, 16));
    ok_cu(cuMemFree(d));
    ok_cu(launch_fill(nb, a, 3, N));
    ok_cu(cuStreamEndCapture(nb, &g));
    is_uint(nodes_of(g), 1, "relaxed capture of a non-blocking stream: legacy work and cuMemAlloc allowed");
    ok_cu(cuGraphDestroy(g));

    /* fork and join through events */
    CUevent fork_ev, join_ev;
    need_cu(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    need_cu(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(launch_fill(s, a, 8, N));
    ok_cu(cuEventRecord(fork_ev, s));
    is_int(cuEventQuery(fork_ev), CUDA_ERROR_CAPTURED_EVENT, "querying an event recorded in a capture");
    ok_cu(cuStreamWaitEvent(s2, fork_ev, 0));
    ok(cuStreamIsCapturing(s2, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE,
       "the waiting stream joined the capture");
    ok_cu(cuMemcpyDtoDAsync(b, a, N * 4, s2));
    ok_cu(cuEventRecord(join_ev, s2));
    ok_cu(cuStreamWaitEvent(s, join_ev, 0));
    ok_cu(cuStreamEndCapture(s, &g));
    ok(cuStreamIsCapturing(s2, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE,
       "the forked stream left the capture");
    is_uint(nodes_of(g), 2, "the forked stream's copy is in the graph");
    ok_cu(cuGraphInstantiateWithFlags(&x, g, 0));
    ok_cu(cuMemsetD32(b, 0, N));
    ok_cu(cuGraphLaunch(x, s));
    ok_cu(cuStreamSynchronize(s));
    ok_cu(cuMemcpyDtoH(out, b, sizeof out));
    ok(out[0] == 8 && out[N - 1] == 8, "fork/join graph replayed");
    ok_cu(cuGraphExecDestroy(x));
    ok_cu(cuGraphDestroy(g));

    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(cuEventRecord(fork_ev, s));
    ok_cu(cuStreamWaitEvent(s2, fork_ev, 0));
    ok_cu(launch_fill(s2, a, 9, N));
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "ending with an unjoined fork");
    ok(cuStreamIsCapturing(s2, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE, "fork released");

    /* waiting on an event from outside the capture crosses its boundary */
    ok_cu(cuEventRecord(join_ev, s2));
    ok_cu(cuStreamSynchronize(s2));
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuStreamWaitEvent(s, join_ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "waiting on an outside event");
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "isolation invalidated the capture");

    /* a global or thread-local capture must end on its own thread */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    wrong_thread_stream = s;
    CUresult other = CUDA_SUCCESS;
    pthread_t th;
    pthread_create(&th, NULL, end_elsewhere, &other);
    pthread_join(th, NULL);
    is_int(other, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "ending a thread-local capture from another thread");
    ok_cu(cuStreamEndCapture(s, &g));
    is_uint(nodes_of(g), 0, "an empty capture is an empty graph");
    ok_cu(cuGraphDestroy(g));

    /* graphs built by hand: an empty graph launches */
    ok_cu(cuGraphCreate(&g, 0));
    is_int(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE, "cuGraphCreate with flags");
    ok_cu(cuGraphInstantiateWithFlags(&x, g, 0));
    ok_cu(cuGraphLaunch(x, NULL));
    ok_cu(cuCtxSynchronize());
    ok_cu(cuGraphExecDestroy(x));
    ok_cu(cuGraphDestroy(g));

    /* memory nodes: cuMemAllocAsync/cuMemFreeAsync under capture record allocation and free nodes */
    size_t free0, free1, total;
    ok_cu(cuMemGetInfo(&free0, &total));
    CUdeviceptr gp = 0;
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok(cuMemAllocAsync(&gp, N * 4, s) == CUDA_SUCCESS && gp != 0, "cuMemAllocAsync while capturing: an allocation node");
    ok_cu(launch_fill(s, gp, 9, N));
    ok_cu(cuMemcpyDtoDAsync(b, gp, N * 4, s));
    ok_cu(cuMemFreeAsync(gp, s));
    ok_cu(cuStreamEndCapture(s, &g));
    CUgraphNode mn[8];
    size_t mnn = 8;
    CUgraphNodeType mt0 = CU_GRAPH_NODE_TYPE_EMPTY, mt3 = CU_GRAPH_NODE_TYPE_EMPTY;
    ok(cuGraphGetNodes(g, mn, &mnn) == CUDA_SUCCESS && mnn == 4 && cuGraphNodeGetType(mn[0], &mt0) == CUDA_SUCCESS &&
           cuGraphNodeGetType(mn[3], &mt3) == CUDA_SUCCESS && mt0 == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
           mt3 == CU_GRAPH_NODE_TYPE_MEM_FREE,
       "alloc, kernel, copy, free: node types MEM_ALLOC ... MEM_FREE");
    ok(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free1 == free0, "capture charges no device memory");
    ok_cu(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int round = 0; round < 2; round++) {
        ok_cu(cuMemsetD32(b, 0, N));
        ok_cu(cuGraphLaunch(x, s));     /* allocated and freed inside: launches back to back are fine */
        ok_cu(cuStreamSynchronize(s));
        ok_cu(cuMemcpyDtoH(out, b, N * 4));
        ok(out[0] == 9 && out[N - 1] == 9, "launch %d: the graph's allocation held the kernel's data", round);
    }
    ok(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free1 == free0, "freed by its free node: nothing charged");
    ok_cu(cuGraphExecDestroy(x));
    ok_cu(cuGraphDestroy(g));

    /* an allocation the graph does not free: the graph owns it until it is freed */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(cuMemAllocAsync(&gp, N * 4, s));
    ok_cu(launch_fill(s, gp, 4, N));
    ok_cu(cuStreamEndCapture(s, &g));
    is_int(cuMemFree(gp), CUDA_ERROR_INVALID_VALUE, "freeing a graph allocation no launch has made");
    ok_cu(cuGraphInstantiateWithFlags(&x, g, 0));
    ok_cu(cuGraphLaunch(x, s));
    ok_cu(cuStreamSynchronize(s));
    ok(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free0 - free1 >= N * 4, "a launch charges the allocation");
    ok_cu(cuMemcpyDtoH(out, gp, N * 4));
    ok(out[0] == 4 && out[N - 1] == 4, "the allocation outlives the launch, data intact");
    is_int(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE, "relaunch while its allocation is live");
    ok_cu(cuMemFreeAsync(gp, s));
    is_int(cuMemFreeAsync(gp, s), CUDA_ERROR_INVALID_VALUE, "freeing it twice");
    ok_cu(cuGraphLaunch(x, s));
    ok_cu(cuStreamSynchronize(s));
    /* destroyed graph and exec: the live allocation stays until freed */
    ok_cu(cuGraphExecDestroy(x));
    ok_cu(cuGraphDestroy(g));
    ok_cu(cuMemcpyDtoH(out, gp, N * 4));
    ok(out[0] == 4, "still readable after the graph is gone");
    ok_cu(cuMemFree(gp));
    is_int(cuMemFree(gp), CUDA_ERROR_INVALID_VALUE, "freed: no longer an allocation");
    ok(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS && free1 == free0, "every graph allocation given back");

    /* a capture invalidated after an allocation node leaves nothing behind */
    ok_cu(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ok_cu(cuMemAllocAsync(&gp, N * 4, s));
    is_int(cuStreamWaitEvent(s, join_ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "invalidate the capture");
    is_int(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture ends invalidated");
    is_int(cuMemFree(gp), CUDA_ERROR_INVALID_VALUE, "its allocation node's address is gone");

    ok_cu(cuEventDestroy(fork_ev));
    ok_cu(cuEventDestroy(join_ev));
    ok_cu(cuMemFree(a));
    ok_cu(cuMemFree(b));
    ok_cu(cuCtxDestroy(ctx));
    node_remove();
    return done_testing();
}
