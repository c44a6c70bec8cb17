/* api-init.c - cuInit (and again in a forked child) and the driver version. */
#include "tools/simcuda/api-internal.h"

#include <stdio.h>

static bool error_printed;       /* under the core's init lock */

CUresult cuInit(unsigned int Flags)
{
    CUresult rc = CUDA_SUCCESS;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    api_core_init_lock();
    if (api_ready() == CUDA_SUCCESS) {
        rc = api_dev_count() ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
        goto out;
    }
    int err = simnode_attach();
    if (err < 0) {
        if (!error_printed) {
            fprintf(stderr, "%s\n", simnode_error());   /* already "simcuda: ..." */
            error_printed = true;
        }
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (api_core_forked()) {
        /* A forked child: forget the parent's objects (kept reachable, never used). */
        if (api_core_registry_renew() < 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        api_range_reset();
        api_pool_reset();
        api_vmm_reset();
        api_capture_reset();
    }
    api_dev_parse_visible();
    if (api_ctx_reset_primaries() < 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    api_core_set_ready();
    if (api_dev_count() == 0)
        rc = CUDA_ERROR_NO_DEVICE;   /* initialised, with no device to use */
out:
    api_core_init_unlock();
    return rc;
}

int api_driver_version(void)
{
    const simnode_config_t *cfg = simnode_config();
    if (cfg)
        return (int)cfg->driver_version;
    /* before cuInit: the knob alone; a bad value is cuInit's to report */
    int v;
    return simnode_config_driver(&v) ? -1 : v;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    int v = api_driver_version();
    if (v < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = v;
    return CUDA_SUCCESS;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuDriverGetVersion); API_ALIAS(cuInit);
