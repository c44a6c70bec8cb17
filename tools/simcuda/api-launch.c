/* api-launch.c - cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and running the built-in
 * kernels (spin_ns, fill_u32, add_f32) on host memory after the device model served their time. */
#include "tools/simcuda/api-internal.h"

#include <string.h>

/* Argument sizes of the built-in kernels, in order; the extra buffer uses natural alignment. */
static const unsigned arg_size[API_KERNEL_COUNT][API_MAX_KERNEL_ARGS] = {
    [API_KERNEL_SPIN] = { 8 },
    [API_KERNEL_FILL] = { 8, 4, 8 },
    [API_KERNEL_ADD] = { 8, 8, 8, 8 },
};

static uint64_t read_arg(const void *p, unsigned size)
{
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static CUresult parse_params(int id, void **kernelParams, void **extra, uint64_t *args)
{
    size_t n = api_kernel_arg_count(id);
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (id == API_KERNEL_OTHER)
        return CUDA_SUCCESS;                  /* its parameters are not interpreted */
    if (kernelParams) {
        for (size_t i = 0; i < n; i++) {
            if (!kernelParams[i])
                return CUDA_ERROR_INVALID_VALUE;
            args[i] = read_arg(kernelParams[i], arg_size[id][i]);
        }
        return CUDA_SUCCESS;
    }
    if (!extra)
        return CUDA_ERROR_INVALID_VALUE;      /* every built-in kernel takes arguments */
    const char *buf = NULL;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0;; i += 2) {
        void *key = extra[i];
        if (key == CU_LAUNCH_PARAM_END)
            break;
        if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            buf = extra[i + 1];
        } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(&size, extra[i + 1], sizeof(size));
            have_size = true;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (!buf || !have_size)
        return CUDA_ERROR_INVALID_VALUE;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned sz = arg_size[id][i];
        off = (off + sz - 1) / sz * sz;
        if (off + sz > size)
            return CUDA_ERROR_INVALID_VALUE;
        args[i] = read_arg(buf + off, sz);
        off += sz;
    }
    return CUDA_SUCCESS;
}

typedef struct launch {
    unsigned grid[3], block[3], smem;
    int prio;
    bool has_prio, coop;
} launch_t;

static CUresult check_dims(const launch_t *l, const api_func_t *f, int sm_count)
{
    static const unsigned max_grid[3] = { 2147483647u, 65535u, 65535u }, max_block[3] = { 1024u, 1024u, 64u };
    for (int i = 0; i < 3; i++) {
        if (l->grid[i] == 0 || l->grid[i] > max_grid[i] || l->block[i] == 0 || l->block[i] > max_block[i])
            return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->smem > (unsigned)f->max_dyn_smem)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->coop) {
        uint64_t per_sm = 2048 / threads;
        if (per_sm > 32)
            per_sm = 32;
        uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
        if (blocks > per_sm * (uint64_t)sm_count)
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    return CUDA_SUCCESS;
}

/* A kernel's width: the SMs its blocks occupy at once when it has the device to itself. The block scheduler
 * spreads a grid's blocks over the SMs one per SM first, so a grid of n blocks occupies min(n, SMs) of them (a
 * one-block kernel: one SM). Only an MPS server heeds it (tools/simcuda/engine.c). */
static uint32_t kernel_sms(const launch_t *l, int sm_count)
{
    uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    return blocks < (uint64_t)sm_count ? (uint32_t)blocks : (uint32_t)sm_count;
}

static CUresult launch(CUfunction f, launch_t *l, CUstream h, void **kernelParams, void **extra, bool ptds)
{
    api_stream_t *s;
    CUresult rc = api_stream_resolve(h, ptds, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!f || !api_handle_is(f, API_KIND_FUNC))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!f->is_kernel && f->ctx != s->ctx)
        return CUDA_ERROR_INVALID_HANDLE;    /* a module function of another context */
    const simnode_devinfo_t *d = simnode_device(s->ctx->dev);
    if ((rc = check_dims(l, f, d ? d->sm_count : 1)) != CUDA_SUCCESS)
        return rc;
    if ((rc = api_ctx_sticky(s->ctx)) != CUDA_SUCCESS)
        return rc;
    api_op_t *op = api_op_new(API_OP_KERNEL);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.k.id = f->id;
    op->u.k.prio = l->has_prio ? l->prio : s->prio;
    op->u.k.sms = kernel_sms(l, d ? d->sm_count : 1);
    if ((rc = parse_params(f->id, kernelParams, extra, op->u.k.args)) != CUDA_SUCCESS) {
        api_op_free(op);
        return rc;
    }
    if (f->id == API_KERNEL_OTHER) {
        /* waves: passes of the grid over the device's resident threads (sm_count x 2048), at least one */
        uint64_t threads = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
        uint64_t per_wave = (uint64_t)(d && d->sm_count > 0 ? d->sm_count : 1) * 2048;
        op->u.k.args[0] = threads / per_wave + (threads % per_wave != 0);
    }
    return api_launch_op(s, op, false);
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned smem, CUstream h, void **kernelParams, void **extra,
                              bool coop, bool ptds)
{
    launch_t l = { .grid = { gx, gy, gz }, .block = { bx, by, bz }, .smem = smem, .coop = coop };
    return launch(f, &l, h, kernelParams, extra, ptds);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                         hStream, kernelParams, extra, false, false);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                             unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                         hStream, kernelParams, extra, false, true);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                         hStream, kernelParams, NULL, true, false);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                         hStream, kernelParams, NULL, true, true);
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra,
                          bool ptds)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!config || (config->numAttrs > 0 && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    launch_t l = { .grid = { config->gridDimX, config->gridDimY, config->gridDimZ },
                   .block = { config->blockDimX, config->blockDimY, config->blockDimZ },
                   .smem = config->sharedMemBytes };
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        switch (a->id) {
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
            l.has_prio = true;
            l.prio = a->value.priority > 0 ? 0 : a->value.priority < -5 ? -5 : a->value.priority;
            break;
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            l.coop = a->value.cooperative != 0;
            break;
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            if (a->value.clusterDim.x > 1 || a->value.clusterDim.y > 1 || a->value.clusterDim.z > 1)
                return CUDA_ERROR_NOT_SUPPORTED;    /* the device reports no cluster launch */
            break;
        default:
            break;                                  /* performance hints: accepted, no effect */
        }
    }
    return launch(f, &l, config->hStream, kernelParams, extra, ptds);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, false);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, true);
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuLaunchCooperativeKernel); API_ALIAS(cuLaunchCooperativeKernel_ptsz); API_ALIAS(cuLaunchKernel);
API_ALIAS(cuLaunchKernelEx); API_ALIAS(cuLaunchKernelEx_ptsz); API_ALIAS(cuLaunchKernel_ptsz);
