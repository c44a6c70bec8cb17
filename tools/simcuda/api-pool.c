/* api-pool.c - memory pools: blocks with reuse, trimming, release thresholds and reserved/used attributes,
 * default and current pools per device (api-memasync.c allocates from them in stream order). */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_block {
    uintptr_t base;
    size_t size;
    bool freeing;                /* a cuMemFreeAsync is queued */
    CUmemoryPool pool;
    struct pool_block *next;     /* in the pool's free list */
} pool_block_t;

struct CUmemPoolHandle_st {
    int dev;
    bool is_default, destroyed;
    size_t max_size;
    uint64_t threshold;
    uint64_t reserved, reserved_high, used, used_high;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    size_t live;                 /* blocks handed out */
    pool_block_t *free_list;
    CUmemoryPool next;           /* in the list of pools */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CUmemoryPool pools;
static CUmemoryPool default_pool[SIMNODE_MAX_DEVICES], current_pool[SIMNODE_MAX_DEVICES];

static CUmemoryPool stale_pools[16];     /* pool lists abandoned at fork, kept reachable */
static int nstale;

void api_pool_reset(void)
{
    /* After fork: the parent's pools are abandoned (still reachable through stale_pools). */
    pthread_mutex_init(&pool_lock, NULL);
    if (pools && nstale < 16)
        stale_pools[nstale++] = pools;
    pools = NULL;
    memset(default_pool, 0, sizeof(default_pool));
    memset(current_pool, 0, sizeof(current_pool));
}

static CUmemoryPool pool_new_locked(int dev, bool is_default, size_t max_size)
{
    CUmemoryPool p = api_calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    if (api_handle_add(p, API_KIND_POOL) < 0) {
        free(p);
        return NULL;
    }
    p->dev = dev;
    p->is_default = is_default;
    p->max_size = max_size;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    p->next = pools;
    pools = p;
    return p;
}

/* dev's default pool (created on first use), or NULL when out of host memory. */
static CUmemoryPool default_locked(int dev)
{
    if (!default_pool[dev] && !(default_pool[dev] = pool_new_locked(dev, true, 0)))
        return NULL;
    if (!current_pool[dev])
        current_pool[dev] = default_pool[dev];
    return default_pool[dev];
}

static void block_release_locked(pool_block_t *b)
{
    CUmemoryPool p = b->pool;
    simnode_mem_unreserve(p->dev, b->size);
    p->reserved -= b->size;
    free((void *)b->base);
    free(b);
}

/* Releases free blocks until at most keep bytes stay reserved. */
static void trim_locked(CUmemoryPool p, uint64_t keep)
{
    while (p->reserved > keep && p->free_list) {
        pool_block_t *b = p->free_list;
        p->free_list = b->next;
        block_release_locked(b);
    }
}

static void pool_free_locked(CUmemoryPool p)
{
    for (CUmemoryPool *pp = &pools; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    trim_locked(p, 0);
    free(p);
}

static void block_return_locked(pool_block_t *b)
{
    CUmemoryPool p = b->pool;
    b->freeing = false;
    p->used -= b->size;
    p->live--;
    b->next = p->free_list;
    p->free_list = b;
    if (p->destroyed && p->live == 0)
        pool_free_locked(p);
}

void api_pool_free_block(CUdeviceptr ptr)
{
    api_range_t r;
    if (!api_range_remove((uintptr_t)ptr, &r))
        return;
    api_pool_free_now(&r);
}

void api_pool_free_now(const api_range_t *r)
{
    pthread_mutex_lock(&pool_lock);
    block_return_locked(r->owner);
    pthread_mutex_unlock(&pool_lock);
}

void api_pool_trim_all(void)
{
    pthread_mutex_lock(&pool_lock);
    for (CUmemoryPool p = pools; p; p = p->next)
        trim_locked(p, p->threshold);
    pthread_mutex_unlock(&pool_lock);
}

static CUresult pool_alloc(CUmemoryPool p, size_t bytes, CUdeviceptr *out)
{
    size_t size = (bytes + 511) & ~(size_t)511;
    pthread_mutex_lock(&pool_lock);
    pool_block_t *b = NULL;
    for (pool_block_t **pp = &p->free_list; *pp; pp = &(*pp)->next) {
        if ((*pp)->size >= size && (*pp)->size / 2 <= size) {
            b = *pp;
            *pp = b->next;
            break;
        }
    }
    if (!b) {
        if (p->max_size && p->reserved + size > p->max_size)
            trim_locked(p, p->max_size > size ? p->max_size - size : 0);
        if (p->max_size && p->reserved + size > p->max_size) {
            pthread_mutex_unlock(&pool_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        int err = simnode_mem_reserve(p->dev, size);
        if (err == -ENOMEM) {
            trim_locked(p, 0);   /* give back this pool's cached memory and retry */
            err = simnode_mem_reserve(p->dev, size);
        }
        void *mem = NULL;
        if (err == 0 && posix_memalign(&mem, 512, size) != 0) {
            simnode_mem_unreserve(p->dev, size);
            err = -ENOMEM;
        }
        if (err < 0) {
            pthread_mutex_unlock(&pool_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!(b = api_calloc(1, sizeof(*b)))) {
            free(mem);
            simnode_mem_unreserve(p->dev, size);
            pthread_mutex_unlock(&pool_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        b->base = (uintptr_t)mem;
        b->size = size;
        b->pool = p;
        p->reserved += size;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    api_range_t r = { .base = b->base, .size = bytes, .kind = API_RANGE_POOL, .dev = p->dev, .owner = b };
    if (api_range_add(&r) < 0) {
        b->next = p->free_list;  /* stays reserved in the pool, free for the next allocation */
        p->free_list = b;
        pthread_mutex_unlock(&pool_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    b->next = NULL;
    p->used += b->size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    p->live++;
    pthread_mutex_unlock(&pool_lock);
    *out = (CUdeviceptr)b->base;
    return CUDA_SUCCESS;
}

CUresult api_pool_alloc(CUmemoryPool pool, int dev, size_t bytes, CUdeviceptr *out)
{
    if (!pool) {
        pthread_mutex_lock(&pool_lock);
        if (default_locked(dev))
            pool = current_pool[dev];
        pthread_mutex_unlock(&pool_lock);
        if (!pool)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return pool_alloc(pool, bytes, out);
}

int api_pool_freeing(const api_range_t *r, bool on)
{
    pool_block_t *b = r->owner;
    pthread_mutex_lock(&pool_lock);
    bool was = b->freeing;
    b->freeing = on;
    pthread_mutex_unlock(&pool_lock);
    return on && was ? -EALREADY : 0;
}

/* ---- pools -------------------------------------------------------------------------------------------- */
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (api_check_device(poolProps->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&pool_lock);
    *pool = pool_new_locked(api_dev_phys(poolProps->location.id), false, poolProps->maxSize);
    pthread_mutex_unlock(&pool_lock);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult check_pool(CUmemoryPool p)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    return p && api_handle_is(p, API_KIND_POOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult rc = check_pool(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    api_handle_del(pool);
    pthread_mutex_lock(&pool_lock);
    if (current_pool[pool->dev] == pool)
        current_pool[pool->dev] = default_pool[pool->dev];
    pool->destroyed = true;
    /* Outstanding allocations stay valid; the pool goes when the last of them is freed. */
    if (pool->live == 0)
        pool_free_locked(pool);
    else
        trim_locked(pool, 0);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CUresult rc = check_pool(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&pool_lock);
    trim_locked(pool, minBytesToKeep);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult rc = check_pool(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    rc = CUDA_SUCCESS;
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: pool->reuse_follow = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: pool->reuse_opportunistic = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: pool->reuse_internal = *(int *)value; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: pool->threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            pool->reserved_high = pool->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            pool->used_high = pool->used;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;   /* read-only or unknown */
        break;
    }
    pthread_mutex_unlock(&pool_lock);
    return rc;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult rc = check_pool(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    rc = CUDA_SUCCESS;
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = pool->reuse_follow; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = pool->reuse_opportunistic; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = pool->reuse_internal; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = pool->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = pool->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = pool->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = pool->used_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&pool_lock);
    return rc;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    *pool_out = default_locked(api_dev_phys(dev));
    pthread_mutex_unlock(&pool_lock);
    return *pool_out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = api_dev_phys(dev);
    pthread_mutex_lock(&pool_lock);
    bool have = default_locked(phys) != NULL;
    if (have)
        *pool = current_pool[phys];
    pthread_mutex_unlock(&pool_lock);
    return have ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = check_pool(pool)) != CUDA_SUCCESS)
        return rc;
    int phys = api_dev_phys(dev);
    if (pool->dev != phys)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pool_lock);
    default_locked(phys);        /* may fail: the default pool is then created on first use */
    current_pool[phys] = pool;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuDeviceGetDefaultMemPool); API_ALIAS(cuDeviceGetMemPool); API_ALIAS(cuDeviceSetMemPool);
API_ALIAS(cuMemPoolCreate); API_ALIAS(cuMemPoolDestroy); API_ALIAS(cuMemPoolGetAttribute);
API_ALIAS(cuMemPoolSetAttribute); API_ALIAS(cuMemPoolTrimTo);
