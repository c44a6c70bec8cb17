/* wrap-launch.c - every launch entry point: gated by rotad's client unless its stream is capturing. */
#include "shim/shim-internal.h"

#include "shim/capture.h"
#include "shim/client.h"
#include "shim/counters.h"

/*
 * A launch on a capturing stream only records a graph node: it must never wait, so it skips the gate (and
 * is counted as rota.launch_capturing). Graph launches are gated like kernels. The stream handed to the
 * hooks is normalised: a _ptsz entry point's NULL stream is CU_STREAM_PER_THREAD, the legacy NULL stream
 * stays NULL.
 */
static CUresult launch_gate(CUstream s, bool *gated)
{
    if (rota_stream_capturing(s)) {
        rota_count(ROTA_EV_LAUNCH_CAPTURING);
        *gated = false;
        return CUDA_SUCCESS;
    }
    *gated = true;
    rota_count(ROTA_EV_LAUNCH_GATE);
    return client_launch_gate(s);
}

/* Only a gate that let the launch through gets its after (a refused one took nothing). */
static void launch_after(CUstream s, CUresult rc)
{
    rota_count(ROTA_EV_LAUNCH_AFTER);
    client_launch_after(s, rc);
}

#define ROTA_WRAP_LAUNCH(name, pt, params, args, stream) \
    CUresult CUDAAPI name params                         \
    {                                                    \
        ROTA_ENTER(name, args);                          \
        CUstream s = rota_stream_norm((stream), pt);     \
        bool gated;                                      \
        CUresult rc = launch_gate(s, &gated);            \
        if (rc == CUDA_SUCCESS) {                        \
            rc = ROTA_REAL(name) args;                   \
            if (gated) launch_after(s, rc);              \
        }                                                \
        ROTA_LEAVE();                                    \
        return rc;                                       \
    }                                                    \
    ROTA_SELF(name)

#define ROTA_LAUNCH_LAUNCH(...) __VA_ARGS__
#define ROTA_LAUNCH_INIT(...)
#define ROTA_LAUNCH_PROC(...)
#define ROTA_LAUNCH_DEVICE(...)
#define ROTA_LAUNCH_CTX(...)
#define ROTA_LAUNCH_SYNC(...)
#define ROTA_LAUNCH_LAUNCHN(...)
#define ROTA_LAUNCH_MEM(...)
#define ROTA_LAUNCH_MEMINFO(...)
#define ROTA_LAUNCH_CAPTURE(...)
#define ROTA_LAUNCH_REAL(...)

#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) \
    ROTA_LAUNCH_##fam(ROTA_WRAP_LAUNCH(name, pt, params, args, stream))
#include "shim/wrappers.def"
#undef ROTA_FN

/* One cooperative launch across several devices' streams: every distinct stream passes the gate first (in
 * list order, so two such launches cannot gate each other crosswise), and each gated stream gets its after. */
#define MULTI_MAX 64
CUresult CUDAAPI cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList, unsigned int numDevices,
                                                      unsigned int flags)
{
    ROTA_ENTER(cuLaunchCooperativeKernelMultiDevice, (launchParamsList, numDevices, flags));
    CUstream gated[MULTI_MAX];
    unsigned n = 0;
    CUresult rc = CUDA_SUCCESS;
    if (launchParamsList != NULL && numDevices <= MULTI_MAX) {
        for (unsigned i = 0; i < numDevices && rc == CUDA_SUCCESS; i++) {
            CUstream s = launchParamsList[i].hStream;
            bool dup = false, g;
            for (unsigned j = 0; j < n; j++) dup |= gated[j] == s;
            if (dup) continue;
            rc = launch_gate(s, &g);
            if (g && rc == CUDA_SUCCESS) gated[n++] = s;
        }
    }
    if (rc == CUDA_SUCCESS) rc = ROTA_REAL(cuLaunchCooperativeKernelMultiDevice)(launchParamsList, numDevices, flags);
    for (unsigned j = 0; j < n; j++) launch_after(gated[j], rc);
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuLaunchCooperativeKernelMultiDevice)
