/* load.c - loading the embedded kernels, lowering their PTX version for a driver older than the toolkit. */
#include "tools/kernels/load.h"

#include "runtime/lib/ptxver.h"
#include "tests/tap/kernels.h"

#include <stdlib.h>

CUresult kernels_load(CUmodule *mod, kernels_load_fn load, kernels_version_fn version)
{
    CUresult rc = load(mod, rota_kernels_ptx);
    if (rc != CUDA_ERROR_UNSUPPORTED_PTX_VERSION) return rc;
    int drv = 0;
    if (version(&drv) != CUDA_SUCCESS) return rc;
    int want = ptxver_for_driver(drv), have = ptxver_of_image(rota_kernels_ptx);
    if (want <= 0 || have <= want) return rc; /* nothing older to try */
    char *lowered = NULL;
    if (ptxver_rewrite(rota_kernels_ptx, want, &lowered)) return rc;
    CUresult again = load(mod, lowered);
    free(lowered);
    return again;
}
