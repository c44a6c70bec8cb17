/* nvml-t.c - simcuda's libnvidia-ml.so.1: devices, handles by index/UUID/PCI bus id, memory, processes, utilisation. */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"
#include "shim/nvml.h"

/*
 * Loaded as PyTorch and vLLM load it (dlopen("libnvidia-ml.so.1") and dlsym), beside this program's simcuda
 * libcuda.so.1 on the same node: NVML must name the devices as the driver does and see what the driver's
 * processes do (memory charged, kernels run).
 */
#define MIB (1024ull * 1024ull)
#define SYM(name) __typeof__(name) *p_##name = (__typeof__(name) *)dlsym(h, #name)

int main(void)
{
    node_setup("nvml", "1G");
    alarm(60);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) bail("dlopen libnvidia-ml.so.1: %s", dlerror());
    SYM(nvmlInit_v2); SYM(nvmlShutdown); SYM(nvmlErrorString); SYM(nvmlSystemGetDriverVersion);
    SYM(nvmlDeviceGetCount_v2); SYM(nvmlDeviceGetHandleByIndex_v2); SYM(nvmlDeviceGetHandleByUUID);
    SYM(nvmlDeviceGetHandleByPciBusId_v2); SYM(nvmlDeviceGetUUID); SYM(nvmlDeviceGetName);
    SYM(nvmlDeviceGetMemoryInfo); SYM(nvmlDeviceGetMemoryInfo_v2); SYM(nvmlDeviceGetComputeRunningProcesses);
    SYM(nvmlDeviceGetComputeRunningProcesses_v3); SYM(nvmlDeviceGetUtilizationRates); SYM(nvmlDeviceGetPciInfo_v3);
    SYM(nvmlSystemGetCudaDriverVersion_v2); SYM(nvmlDeviceGetGpuFabricInfoV);
    ok(p_nvmlInit_v2 && p_nvmlShutdown && p_nvmlErrorString && p_nvmlSystemGetDriverVersion && p_nvmlDeviceGetCount_v2 &&
           p_nvmlDeviceGetHandleByIndex_v2 && p_nvmlDeviceGetHandleByUUID && p_nvmlDeviceGetHandleByPciBusId_v2 &&
           p_nvmlDeviceGetUUID && p_nvmlDeviceGetName && p_nvmlDeviceGetMemoryInfo && p_nvmlDeviceGetMemoryInfo_v2 &&
           p_nvmlDeviceGetComputeRunningProcesses && p_nvmlDeviceGetComputeRunningProcesses_v3 &&
           p_nvmlDeviceGetUtilizationRates && p_nvmlDeviceGetPciInfo_v3 && p_nvmlSystemGetCudaDriverVersion_v2 &&
           p_nvmlDeviceGetGpuFabricInfoV,
       "every NVML entry point PyTorch, vLLM and nvidia-smi use is exported");
    unsigned n = 99;
    is_int(p_nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED, "before nvmlInit_v2: uninitialised");
    is_str(p_nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized", "nvmlErrorString");

    need_cu(cuInit(0));
    CUdevice dev;
    need_cu(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, dev));
    is_int(p_nvmlInit_v2(), NVML_SUCCESS, "nvmlInit_v2");
    int cn = 0;
    need_cu(cuDeviceGetCount(&cn));
    is_int(p_nvmlDeviceGetCount_v2(&n), NVML_SUCCESS, "nvmlDeviceGetCount_v2");
    is_int((int)n, cn, "as many devices as the driver has");
    char ver[80];
    is_int(p_nvmlSystemGetDriverVersion(ver, sizeof ver), NVML_SUCCESS, "nvmlSystemGetDriverVersion: %s", ver);
    int cv = 0;
    ok(p_nvmlSystemGetCudaDriverVersion_v2(&cv) == NVML_SUCCESS && cv == 13000, "CUDA driver version %d", cv);

    nvmlDevice_t d0, byuuid, bypci;
    is_int(p_nvmlDeviceGetHandleByIndex_v2(0, &d0), NVML_SUCCESS, "handle of device 0");
    is_int(p_nvmlDeviceGetHandleByIndex_v2(n, &byuuid), NVML_ERROR_INVALID_ARGUMENT, "no device past the count");
    char uuid[96], name[96], cname[96];
    is_int(p_nvmlDeviceGetUUID(d0, uuid, sizeof uuid), NVML_SUCCESS, "UUID %s", uuid);
    CUuuid cu;
    need_cu(cuDeviceGetUuid(&cu, dev));
    char want[96];
    const unsigned char *u = (const unsigned char *)cu.bytes;
    snprintf(want, sizeof want, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    is_str(uuid, want, "the driver's UUID (cuDeviceGetUuid)");
    is_int(p_nvmlDeviceGetUUID(d0, uuid, 10), NVML_ERROR_INSUFFICIENT_SIZE, "a short buffer: insufficient size");
    need_cu(cuDeviceGetName(cname, sizeof cname, dev));
    ok(p_nvmlDeviceGetName(d0, name, sizeof name) == NVML_SUCCESS && strcmp(name, cname) == 0, "name %s", name);
    p_nvmlDeviceGetUUID(d0, uuid, sizeof uuid);
    ok(p_nvmlDeviceGetHandleByUUID(uuid, &byuuid) == NVML_SUCCESS && byuuid == d0, "handle by UUID");
    is_int(p_nvmlDeviceGetHandleByUUID("GPU-nope", &byuuid), NVML_ERROR_NOT_FOUND, "an unknown UUID");
    char bus[32];
    need_cu(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    ok(p_nvmlDeviceGetHandleByPciBusId_v2(bus, &bypci) == NVML_SUCCESS && bypci == d0,
       "handle by the driver's PCI bus id %s", bus);
    nvmlPciInfo_t pci;
    ok(p_nvmlDeviceGetPciInfo_v3(d0, &pci) == NVML_SUCCESS && p_nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &bypci) ==
                                                                 NVML_SUCCESS && bypci == d0,
       "and by NVML's own %s", pci.busId);

    /* memory: what this process allocates shows as used, and as this process's */
    nvmlMemory_t m0, m1;
    is_int(p_nvmlDeviceGetMemoryInfo(d0, &m0), NVML_SUCCESS, "nvmlDeviceGetMemoryInfo");
    is_uint(m0.total, 1024 * MIB, "total = SIMCUDA_MEM");
    CUdeviceptr p;
    need_cu(cuMemAlloc(&p, 256 * MIB));
    p_nvmlDeviceGetMemoryInfo(d0, &m1);
    is_uint(m1.used - m0.used, 256 * MIB, "a 256 MiB allocation shows as used");
    ok(m1.free + m1.used == m1.total, "free + used = total");
    size_t cfree = 0, ctotal = 0;
    need_cu(cuMemGetInfo(&cfree, &ctotal));
    ok(cfree == m1.free && ctotal == m1.total, "the driver's cuMemGetInfo agrees (%zu free)", cfree);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    ok(p_nvmlDeviceGetMemoryInfo_v2(d0, &m2) == NVML_SUCCESS && m2.used == m1.used && m2.total == m1.total,
       "nvmlDeviceGetMemoryInfo_v2 the same");
    m2.version = 1;
    is_int(p_nvmlDeviceGetMemoryInfo_v2(d0, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "a wrong struct version");
    unsigned cnt = 0;
    is_int(p_nvmlDeviceGetComputeRunningProcesses_v3(d0, &cnt, NULL), NVML_ERROR_INSUFFICIENT_SIZE,
           "processes: count 0 asks how many");
    nvmlProcessInfo_t pi[8];
    cnt = 8;
    bool mine = false;
    is_int(p_nvmlDeviceGetComputeRunningProcesses_v3(d0, &cnt, pi), NVML_SUCCESS, "_v3: %u process(es)", cnt);
    for (unsigned i = 0; i < cnt; i++) mine |= pi[i].pid == (unsigned)getpid() && pi[i].usedGpuMemory >= 256 * MIB;
    ok(mine, "this process, with its 256 MiB");
    nvmlProcessInfo_v1_t p1[8];
    cnt = 8;
    mine = false;
    is_int(p_nvmlDeviceGetComputeRunningProcesses(d0, &cnt, p1), NVML_SUCCESS, "the unversioned (v1 layout) one");
    for (unsigned i = 0; i < cnt; i++) mine |= p1[i].pid == (unsigned)getpid() && p1[i].usedGpuMemory >= 256 * MIB;
    ok(mine, "the same");
    need_cu(cuMemFree(p));

    /* utilisation: a 100 ms kernel between two queries keeps the engine busy most of that time */
    CUmodule mod;
    CUfunction spin;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    nvmlUtilization_t ut;
    p_nvmlDeviceGetUtilizationRates(d0, &ut);
    SYM(nvmlDeviceGetProcessUtilization);
    nvmlProcessUtilizationSample_t smp[8];
    unsigned ns_cnt = 8;
    if (p_nvmlDeviceGetProcessUtilization) p_nvmlDeviceGetProcessUtilization(d0, smp, &ns_cnt, 0); /* consumed */
    uint64_t ns = 100000000;
    void *args[] = {&ns};
    need_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    need_cu(cuCtxSynchronize());
    is_int(p_nvmlDeviceGetUtilizationRates(d0, &ut), NVML_SUCCESS, "nvmlDeviceGetUtilizationRates");
    ok(ut.gpu >= 70 && ut.gpu <= 100, "gpu utilisation over the kernel: %u%%", ut.gpu);
    /* per process: this process's sample since the previous query, its kernel's share of the period */
    ns_cnt = 0;
    is_int(p_nvmlDeviceGetProcessUtilization ? (int)p_nvmlDeviceGetProcessUtilization(d0, NULL, &ns_cnt, 0) : -1,
           NVML_ERROR_INSUFFICIENT_SIZE, "process utilisation: NULL asks how many");
    is_uint(ns_cnt, 1, "one process ran kernels since the last query");
    ns_cnt = 8;
    is_int(p_nvmlDeviceGetProcessUtilization(d0, smp, &ns_cnt, 0), NVML_SUCCESS, "nvmlDeviceGetProcessUtilization");
    ok(ns_cnt == 1 && smp[0].pid == (unsigned)getpid() && smp[0].smUtil >= 50 && smp[0].timeStamp > 0,
       "one sample, this process's, SM %u%% over the kernel", ns_cnt ? smp[0].smUtil : 0);
    ns_cnt = 8;
    is_int(p_nvmlDeviceGetProcessUtilization(d0, smp, &ns_cnt, smp[0].timeStamp), NVML_ERROR_NOT_FOUND,
           "asked again with nothing run since: no sample (NVML_ERROR_NOT_FOUND)");
    usleep(100000);
    p_nvmlDeviceGetUtilizationRates(d0, &ut);
    ok(ut.gpu <= 10, "and over an idle 100 ms: %u%%", ut.gpu);
    is_int(p_nvmlDeviceGetGpuFabricInfoV(d0, NULL), NVML_ERROR_NOT_SUPPORTED, "fabric info: not supported");
    is_int(p_nvmlShutdown(), NVML_SUCCESS, "nvmlShutdown");
    is_int(p_nvmlShutdown(), NVML_ERROR_UNINITIALIZED, "a second shutdown: uninitialised");
    cuModuleUnload(mod);
    cuCtxDestroy(ctx);
    node_remove();
    return done_testing();
}
