/* gpus.c - the GPUs a CUDA driver shows this process (see gpus.h). */
#include "runtime/lib/gpus.h"

#include "runtime/lib/simdriver.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpus_list(rota_place_cand_t out[ROTA_MAX_DEVICES], char *why, size_t whylen)
{
    const char *lib = getenv("ROTA_REAL_LIBCUDA");
    bool dflt = !lib || !*lib;
    if (dflt) lib = "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    char sim[PATH_MAX + 16];
    if (!h && dflt) {
        /* no driver on this machine: simcuda beside the program, as `rota run` gives its job (simdriver.h) */
        snprintf(why, whylen, "no CUDA driver (%s)", dlerror());
        char dir[PATH_MAX];
        if (simdriver_dir(dir, sizeof dir) == 0 &&
            snprintf(sim, sizeof sim, "%s/libcuda.so.1", dir) < (int)sizeof sim) {
            lib = sim;
            h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        }
        if (!h) return -EIO;
    } else if (!h) {
        snprintf(why, whylen, "no CUDA driver (%s)", dlerror());
        return -EIO;
    }
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(h, "cuDeviceGetCount");
    CUresult (*get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*uuid)(CUuuid *, CUdevice) = (CUresult(*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid_v2");
    if (!uuid) uuid = (CUresult(*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid");
    CUresult (*mem)(size_t *, CUdevice) = (CUresult(*)(size_t *, CUdevice))dlsym(h, "cuDeviceTotalMem_v2");
    if (!init || !count || !get || !uuid || !mem) {
        snprintf(why, whylen, "the CUDA driver %s lacks the device queries", lib);
        return -EIO;
    }
    int c = 0;
    CUresult rc = init(0);
    if (rc == CUDA_SUCCESS) rc = count(&c);
    if (rc != CUDA_SUCCESS) {
        snprintf(why, whylen, "the CUDA driver %s failed to initialise (CUresult %d)", lib, (int)rc);
        return rc == CUDA_ERROR_NO_DEVICE ? -ENODEV : -EIO;
    }
    int n = c < ROTA_MAX_DEVICES ? c : ROTA_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CUuuid u;
        size_t total = 0;
        rc = get(&d, i);
        if (rc == CUDA_SUCCESS) rc = uuid(&u, d);
        if (rc == CUDA_SUCCESS) rc = mem(&total, d);
        if (rc != CUDA_SUCCESS) {
            snprintf(why, whylen, "unable to query GPU %d (CUresult %d)", i, (int)rc);
            return -EIO;
        }
        memcpy(out[i].uuid, u.bytes, ROTA_UUID_LEN);
        out[i].total_mem = total < 1 ? 1 : total > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : total;
    }
    return n;
}
