/* api-ctx-t.c - simcuda contexts: every cuCtxCreate version, the per-thread stack, destroy, primary contexts,
 * synchronize, priority range, error codes. */
#include <cuda.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

/* Older ABIs the header only declares for the driver's own build. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                        CUdevice dev);
CUresult cuDevicePrimaryCtxSetFlags_v1(CUdevice dev, unsigned int flags) __asm__("cuDevicePrimaryCtxSetFlags");

static CUcontext shared;

static void *other_thread(void *arg)
{
    CUresult *rc = arg;
    CUcontext cur = shared;
    cuCtxGetCurrent(&cur);
    rc[0] = cur == NULL ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
    CUdeviceptr d;
    rc[1] = cuMemAlloc(&d, 16);
    rc[2] = cuCtxSetCurrent(shared);
    rc[3] = cuMemAlloc(&d, 16);
    if (rc[3] == CUDA_SUCCESS)
        cuMemFree(d);
    return NULL;
}

int main(void)
{
    node_setup("ctx", "1G");
    alarm(60);
    CUcontext c1, c2, c3, cur;
    CUdevice dev;
    is_int(cuCtxCreate(&c1, NULL, 0, 0), CUDA_ERROR_NOT_INITIALIZED, "cuCtxCreate before cuInit");
    is_int(cuCtxGetCurrent(&cur), CUDA_ERROR_NOT_INITIALIZED, "cuCtxGetCurrent before cuInit");
    need_cu(cuInit(0));
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "no current context at first");
    is_int(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT, "cuCtxSynchronize without a context");
    is_int(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT, "cuCtxGetDevice without a context");
    is_int(cuCtxPopCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT, "pop from an empty stack");
    int lo, hi;
    is_int(cuCtxGetStreamPriorityRange(&lo, &hi), CUDA_ERROR_INVALID_CONTEXT, "priority range without a context");

    /* creation, every version */
    is_int(cuCtxCreate(NULL, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE, "cuCtxCreate(NULL)");
    is_int(cuCtxCreate(&c1, NULL, 0x100, 0), CUDA_ERROR_INVALID_VALUE, "flags outside CU_CTX_FLAGS_MASK");
    is_int(cuCtxCreate(&c1, NULL, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD, 0), CUDA_ERROR_INVALID_VALUE,
           "two scheduling flags");
    is_int(cuCtxCreate(&c1, NULL, 0, 5), CUDA_ERROR_INVALID_DEVICE, "device 5 of 1");
    CUctxCigParam cig = { 0 };
    CUctxCreateParams cp = { .cigParams = &cig };
    is_int(cuCtxCreate(&c1, &cp, 0, 0), CUDA_ERROR_NOT_SUPPORTED, "CIG contexts are not supported");
    CUexecAffinityParam aff = { .type = CU_EXEC_AFFINITY_TYPE_SM_COUNT };
    aff.param.smCount.val = 1;
    CUctxCreateParams ap = { .execAffinityParams = &aff, .numExecAffinityParams = 1 };
    ok_cu(cuCtxCreate(&c1, &ap, CU_CTX_SCHED_BLOCKING_SYNC, 0));
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c1, "cuCtxCreate_v4 made the context current");
    unsigned fl = 0;
    ok(cuCtxGetFlags(&fl) == CUDA_SUCCESS && fl == CU_CTX_SCHED_BLOCKING_SYNC, "cuCtxGetFlags");
    ok(cuCtxGetDevice(&dev) == CUDA_SUCCESS && dev == 0, "cuCtxGetDevice");
    ok_cu(cuCtxCreate_v3(&c2, &aff, 1, 0, 0));
    aff.type = (CUexecAffinityType)9;
    is_int(cuCtxCreate_v3(&c3, &aff, 1, 0, 0), CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "unknown affinity type");
    is_int(cuCtxCreate_v3(&c3, NULL, 1, 0, 0), CUDA_ERROR_INVALID_VALUE, "affinity count without params");
    ok_cu(cuCtxCreate_v2(&c3, 0, 0));
    unsigned long long id2, id3;
    ok(cuCtxGetId(c2, &id2) == CUDA_SUCCESS && cuCtxGetId(c3, &id3) == CUDA_SUCCESS && id2 != id3,
       "context ids differ");

    /* the stack: c1 c2 c3 */
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c3, "the newest context is current");
    ok(cuCtxPopCurrent(&cur) == CUDA_SUCCESS && cur == c3, "pop returns c3");
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c2, "c2 current after the pop");
    ok_cu(cuCtxPushCurrent(c3));
    is_int(cuCtxPushCurrent(NULL), CUDA_ERROR_INVALID_CONTEXT, "pushing NULL");
    ok_cu(cuCtxSetCurrent(c1));
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c1, "cuCtxSetCurrent replaces the top");
    ok(cuCtxPopCurrent(NULL) == CUDA_SUCCESS && cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c2,
       "below the replaced top is c2");
    ok_cu(cuCtxSetCurrent(NULL));
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c1, "cuCtxSetCurrent(NULL) pops");

    /* other threads start with no context */
    shared = c1;
    CUresult rc[4];
    pthread_t th;
    pthread_create(&th, NULL, other_thread, rc);
    pthread_join(th, NULL);
    is_int(rc[0], CUDA_SUCCESS, "a new thread has no current context");
    is_int(rc[1], CUDA_ERROR_INVALID_CONTEXT, "so cuMemAlloc fails there");
    is_int(rc[2], CUDA_SUCCESS, "another thread can make c1 current");
    is_int(rc[3], CUDA_SUCCESS, "and allocate in it");

    /* synchronize waits for every stream of the context */
    CUmodule mod;
    CUfunction spin;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    CUstream sa, sb;
    need_cu(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    need_cu(cuStreamCreate(&sb, 0));
    uint64_t ns = 30000000;
    void *args[] = { &ns };
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, sa, args, NULL));
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, sb, args, NULL));
    ok_cu(cuCtxSynchronize());
    ok(cuStreamQuery(sa) == CUDA_SUCCESS && cuStreamQuery(sb) == CUDA_SUCCESS, "cuCtxSynchronize waited for both");
    ok(cuCtxGetStreamPriorityRange(&lo, &hi) == CUDA_SUCCESS && lo == 0 && hi == -5, "priority range");
    ok_cu(cuCtxGetStreamPriorityRange(NULL, NULL));

    /* destroy: pops it from this thread, invalidates it, waits for its work */
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, sa, args, NULL));
    ok_cu(cuCtxDestroy(c1));
    is_int(cuCtxDestroy(c1), CUDA_ERROR_INVALID_CONTEXT, "destroying twice");
    is_int(cuCtxSetCurrent(c1), CUDA_ERROR_INVALID_CONTEXT, "a destroyed context cannot be made current");
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "destroy popped the current context");
    is_int(cuStreamQuery(sa), CUDA_ERROR_INVALID_HANDLE, "its streams are gone");
    ok_cu(cuCtxDestroy(c2));
    ok_cu(cuCtxDestroy(c3));

    /* primary contexts */
    unsigned pf = 99;
    int active = 99;
    ok(cuDevicePrimaryCtxGetState(0, &pf, &active) == CUDA_SUCCESS && pf == 0 && active == 0,
       "primary context inactive at first");
    is_int(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE, "GetState(NULL flags)");
    is_int(cuDevicePrimaryCtxGetState(3, &pf, &active), CUDA_ERROR_INVALID_DEVICE, "GetState of device 3");
    ok_cu(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_YIELD));
    is_int(cuDevicePrimaryCtxSetFlags(0, 0x1000), CUDA_ERROR_INVALID_VALUE, "SetFlags with unknown flags");
    is_int(cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE, "Retain(NULL)");
    CUcontext p1, p2;
    ok_cu(cuDevicePrimaryCtxRetain(&p1, 0));
    ok_cu(cuDevicePrimaryCtxRetain(&p2, 0));
    ok(p1 == p2, "both retains give the same primary context");
    ok(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "retain does not make it current");
    ok(cuDevicePrimaryCtxGetState(0, &pf, &active) == CUDA_SUCCESS && pf == CU_CTX_SCHED_YIELD && active == 1,
       "active with the flags set before");
    is_int(cuDevicePrimaryCtxSetFlags_v1(0, 0), CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
           "the pre-11 SetFlags refuses an active primary context");
    is_int(cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT, "cuCtxDestroy refuses a primary context");
    ok_cu(cuCtxSetCurrent(p1));
    CUdeviceptr d;
    ok_cu(cuMemAlloc(&d, 1 << 20));
    ok_cu(cuDevicePrimaryCtxRelease(0));
    ok(cuDevicePrimaryCtxGetState(0, &pf, &active) == CUDA_SUCCESS && active == 1, "still active after one release");
    ok_cu(cuDevicePrimaryCtxRelease(0));
    ok(cuDevicePrimaryCtxGetState(0, &pf, &active) == CUDA_SUCCESS && active == 0, "inactive after the last release");
    is_int(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT, "releasing an inactive primary context");
    is_int(cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT, "the released primary context is no longer usable");
    ok_cu(cuDevicePrimaryCtxRetain(&p1, 0));
    size_t f, t;
    ok(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && f == t, "its memory was freed with it");
    ok_cu(cuDevicePrimaryCtxReset(0));
    ok(cuDevicePrimaryCtxGetState(0, &pf, &active) == CUDA_SUCCESS && active == 0 && pf == 0,
       "reset deactivates and clears the flags");
    is_int(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE, "a module dies with its context");
    node_remove();
    return done_testing();
}
