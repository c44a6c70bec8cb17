/* nvml-t.c - NVML in a rota'd process: memory and process queries report its limit and usage, as cuMemGetInfo. */
#include "tests/shim/shim-test.h"

#include "shim/nvml.h"

/*
 * Under librota with ROTA_MEM_LIMIT=256M on a 1 GiB simcuda device, after a 64 MiB allocation: NVML reached as
 * PyTorch and vLLM reach it (dlopen("libnvidia-ml.so.1") + dlsym) gives librota's wrappers, and they report
 * total 256 MiB with the same free as cuMemGetInfo, and a process list of this process alone holding 64 MiB.
 * A program linked with -lnvidia-ml gets the same wrappers from the global scope (librota's exports). Asked before
 * CUDA's first call, NVML already reports the limit (ROTA_MEM_LIMIT is known from the start).
 * Skipped on a real driver (its NVML is NVIDIA's, the device sizes are not the test's).
 */
#define MIB (1024ull * 1024ull)

static bool in_lib(const void *p, const char *lib)
{
    Dl_info di;
    return p != NULL && dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, lib) != NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    setenv("ROTA_MEM_LIMIT", "256M", 1);
    setenv("SIMCUDA_MEM", "1G", 1);
    shim_preload_self(argv, "nvml");
    atexit(shim_cleanup);
    alarm(30);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) bail("dlopen libnvidia-ml.so.1: %s", dlerror());
    __typeof__(&nvmlInit_v2) init = (__typeof__(&nvmlInit_v2))dlsym(h, "nvmlInit_v2");
    __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index =
        (__typeof__(&nvmlDeviceGetHandleByIndex_v2))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    __typeof__(&nvmlDeviceGetMemoryInfo) meminfo = (__typeof__(&nvmlDeviceGetMemoryInfo))dlsym(h, "nvmlDeviceGetMemoryInfo");
    __typeof__(&nvmlDeviceGetMemoryInfo_v2) meminfo2 =
        (__typeof__(&nvmlDeviceGetMemoryInfo_v2))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) procs3 =
        (__typeof__(&nvmlDeviceGetComputeRunningProcesses_v3))dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    __typeof__(&nvmlDeviceGetComputeRunningProcesses) procs1 =
        (__typeof__(&nvmlDeviceGetComputeRunningProcesses))dlsym(h, "nvmlDeviceGetComputeRunningProcesses");
    if (!init || !by_index || !meminfo || !meminfo2 || !procs3 || !procs1) bail("NVML symbols missing");
    /* before any CUDA call */
    nvmlMemory_t early = {0};
    nvmlDevice_t edev;
    nvmlReturn_t early_rc = init();
    if (early_rc == NVML_SUCCESS) early_rc = by_index(0, &edev);
    if (early_rc == NVML_SUCCESS) early_rc = meminfo(edev, &early);
    shim_dev_t d;
    shim_dev_init(&d);
    if (!d.simcuda) {
        shim_dev_fini(&d);
        skip_all("not simcuda: the real NVML and device sizes");
    }
    plan(15);
    ok(early_rc == NVML_SUCCESS && early.total == 256 * MIB && early.free <= 256 * MIB,
       "before cuInit, NVML already reports the limit (total %llu MiB)", early.total / MIB);
    ok(in_lib((void *)meminfo, "librota") && in_lib((void *)meminfo2, "librota") && in_lib((void *)procs3, "librota") &&
           in_lib((void *)procs1, "librota"),
       "dlsym on libnvidia-ml.so.1's handle gives librota's wrappers of the memory and process queries");
    ok(in_lib((void *)init, "libnvidia-ml"), "and NVML's own functions for the rest");
    ok(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo") == (void *)meminfo,
       "a program linked with -lnvidia-ml binds the same (librota's export)");

    CUdeviceptr p;
    need_cu(cuMemAlloc_v2(&p, 64 * MIB));
    size_t cfree = 0, ctotal = 0;
    need_cu(cuMemGetInfo_v2(&cfree, &ctotal));
    is_uint(ctotal, 256 * MIB, "cuMemGetInfo: total is the limit");
    if (init() != NVML_SUCCESS) bail("nvmlInit_v2 failed");
    nvmlDevice_t dev;
    if (by_index(0, &dev) != NVML_SUCCESS) bail("nvmlDeviceGetHandleByIndex_v2 failed");
    nvmlMemory_t m;
    is_int(meminfo(dev, &m), NVML_SUCCESS, "nvmlDeviceGetMemoryInfo");
    is_uint(m.total, 256 * MIB, "total: the process's limit, as cuMemGetInfo");
    is_uint(m.free, cfree, "free: as cuMemGetInfo (%llu MiB)", m.free / MIB);
    is_uint(m.used, 64 * MIB, "used: what the process holds");
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    ok(meminfo2(dev, &m2) == NVML_SUCCESS && m2.total == 256 * MIB && m2.free == cfree && m2.used == 64 * MIB,
       "nvmlDeviceGetMemoryInfo_v2 the same");
    unsigned n = 0;
    is_int(procs3(dev, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE, "processes: asked for the count");
    is_int((int)n, 1, "one: the device as this process sees it");
    nvmlProcessInfo_t pi[4];
    n = 4;
    ok(procs3(dev, &n, pi) == NVML_SUCCESS && n == 1 && pi[0].pid == (unsigned)getpid() &&
           pi[0].usedGpuMemory == 64 * MIB,
       "_v3: this process, 64 MiB");
    nvmlProcessInfo_v1_t p1[4];
    n = 4;
    ok(procs1(dev, &n, p1) == NVML_SUCCESS && n == 1 && p1[0].pid == (unsigned)getpid() &&
           p1[0].usedGpuMemory == 64 * MIB,
       "the unversioned (v1 layout) the same");
    need_cu(cuMemFree_v2(p));
    ok(meminfo(dev, &m) == NVML_SUCCESS && m.used == 0 && m.free == 256 * MIB, "after the free: all of the limit free");
    shim_dev_fini(&d);
    return done_testing();
}
