/* api-occupancy.c - the occupancy calculator: how many blocks of a kernel fit on one multiprocessor. */
#include "tools/simcuda/api-internal.h"

API_INTERNAL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
API_INTERNAL(cuOccupancyMaxPotentialBlockSizeWithFlags);

/*
 * An sm_90 multiprocessor as device_attribute() reports it: 2048 threads, 32 blocks, 65536 registers, 228 KiB
 * of shared memory of which each block reserves 1 KiB. A kernel uses the registers per thread and the most
 * threads per block its cubin records (16 and 1024 where the image does not say: PTX) and no static shared
 * memory, so the limits are threads, blocks, registers and dynamic shared memory.
 * PyTorch and cuBLAS size their grids with these; simcuda's device time does not depend on the answer.
 */
#define SM_THREADS 2048
#define SM_BLOCKS 32
#define SM_REGS 65536
#define SM_SMEM 233472
#define BLOCK_SMEM_RESERVED 1024

static int blocks_per_sm(int block_size, size_t smem, int regs)
{
    if (block_size <= 0 || block_size > 1024)
        return 0;
    int warps_threads = (block_size + 31) / 32 * 32;
    int n = SM_THREADS / warps_threads;
    if (n > SM_BLOCKS)
        n = SM_BLOCKS;
    int by_regs = SM_REGS / (warps_threads * (regs > 0 ? regs : API_FUNC_REGS));
    if (by_regs < n)
        n = by_regs;
    size_t per_block = smem + BLOCK_SMEM_RESERVED;
    if ((size_t)n * per_block > SM_SMEM)
        n = (int)(SM_SMEM / per_block);
    return n;
}

static CUresult func_check(CUfunction f)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    return f && api_handle_is(f, API_KIND_FUNC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
                                                              size_t dynamicSMemSize, unsigned int flags)
{
    CUresult rc = func_check(func);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!numBlocks || blockSize <= 0 || blockSize > 1024 || dynamicSMemSize > (size_t)func->max_dyn_smem)
        return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = blockSize > func->max_threads ? 0 : blocks_per_sm(blockSize, dynamicSMemSize, func->regs);
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                     size_t dynamicSMemSize)
{
    return api_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize,
                                                                    CU_OCCUPANCY_DEFAULT);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                   size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags)
{
    CUresult rc = func_check(func);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!minGridSize || !blockSize)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext c;
    if ((rc = api_ctx_current(&c)) != CUDA_SUCCESS)
        return rc;
    const simnode_devinfo_t *d = simnode_device(c->dev);
    int limit = blockSizeLimit > 0 && blockSizeLimit < func->max_threads ? blockSizeLimit : func->max_threads;
    int best_bs = 0, best_threads = 0, best_blocks = 0;
    for (int bs = limit / 32 * 32; bs >= 32; bs -= 32) {
        size_t smem = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(bs) : dynamicSMemSize;
        int n = blocks_per_sm(bs, smem, func->regs);
        if (n * bs > best_threads) {
            best_threads = n * bs;
            best_bs = bs;
            best_blocks = n;
        }
    }
    *blockSize = best_bs;
    *minGridSize = best_blocks * (d && d->sm_count > 0 ? d->sm_count : 1);
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                          CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
                                          int blockSizeLimit)
{
    return api_cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                                         dynamicSMemSize, blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
                                                 int blockSize)
{
    CUresult rc = func_check(func);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0 || blockSize > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (blocks_per_sm(blockSize, 0, func->regs) < numBlocks) {
        *dynamicSmemSize = 0;
        return CUDA_SUCCESS;
    }
    size_t per = SM_SMEM / (size_t)numBlocks - BLOCK_SMEM_RESERVED;
    *dynamicSmemSize = per < (size_t)func->max_dyn_smem ? per : (size_t)func->max_dyn_smem;
    return CUDA_SUCCESS;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuOccupancyAvailableDynamicSMemPerBlock); API_ALIAS(cuOccupancyMaxActiveBlocksPerMultiprocessor);
API_ALIAS(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags); API_ALIAS(cuOccupancyMaxPotentialBlockSize);
API_ALIAS(cuOccupancyMaxPotentialBlockSizeWithFlags);
