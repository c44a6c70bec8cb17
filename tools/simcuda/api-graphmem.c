/* api-graphmem.c - graph allocations: the graph owns an allocation node's address, launches allocate it, free
 * nodes release it (api-memasync.c records the nodes under stream capture). */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * CUDA's rules, as modelled here:
 *  - cuMemAllocAsync on a capturing stream adds an allocation node and returns its address at once; the
 *    address is the graph's, the same for every launch, and later captured work may use it;
 *  - device memory is charged by the launch that allocates it (cuGraphLaunch returns
 *    CUDA_ERROR_OUT_OF_MEMORY when the device is full) and given back once the free has run in stream order;
 *    the address stays the graph's while a graph or executable graph holds the allocation node;
 *  - a launch allocates: launching again while its allocation is still live (not freed by a free node, by
 *    cuMemFreeAsync or cuMemFree) fails with CUDA_ERROR_INVALID_VALUE; a free of an allocation that is not
 *    live is CUDA_ERROR_INVALID_VALUE too;
 *  - cuMemFreeAsync on a capturing stream of a graph allocation adds a free node; an allocation the graph
 *    does not free outlives the launch (and the graph) until the application frees it.
 * The address range is mapped for the whole life of the node (its pages are dropped when the allocation is
 * released), so a kernel that runs late never touches unmapped memory.
 */
struct api_gmem {
    uintptr_t base;
    size_t size, map_size;
    int dev;                     /* physical */
    CUcontext ctx;               /* the capturing context (cuMemFree synchronises it) */
    unsigned owners;             /* graphs and executable graphs holding the allocation node */
    unsigned held;               /* launches' allocations whose free has not run yet (stream order) */
    bool charged;                /* device memory charged to the node (while held) */
    bool live;                   /* allocated by a launch, not freed yet */
    bool scratch;                /* api_gmem_launch's dry run */
};

static pthread_mutex_t gmem_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under gmem_lock: gives back what nobody holds any more. */
static void gmem_maybe_release_locked(api_gmem_t *m)
{
    if (m->held || !m->charged)
        goto out_unused;
    simnode_mem_unreserve(m->dev, m->size);
    m->charged = false;
    madvise((void *)m->base, m->map_size, MADV_DONTNEED);
out_unused:
    if (m->owners || m->held || m->live)
        return;
    api_range_remove(m->base, NULL);
    munmap((void *)m->base, m->map_size);
    free(m);
}

api_gmem_t *api_gmem_new(CUcontext ctx, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page)
        return NULL;
    api_gmem_t *m = api_calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->size = bytes;
    m->map_size = (bytes + page - 1) / page * page;
    m->dev = ctx->dev;
    m->ctx = ctx;
    m->owners = 1;               /* the capture's graph */
    void *va = mmap(NULL, m->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED)
        goto out_free;
    m->base = (uintptr_t)va;
    api_range_t r = { .base = m->base, .size = bytes, .kind = API_RANGE_GRAPH, .dev = m->dev, .owner = m };
    if (api_range_add(&r) < 0)
        goto out_unmap;
    return m;
out_unmap:
    munmap(va, m->map_size);
out_free:
    free(m);
    return NULL;
}

void api_gmem_discard(api_gmem_t *m)
{
    api_range_remove(m->base, NULL);
    munmap((void *)m->base, m->map_size);
    free(m);
}

CUdeviceptr api_gmem_base(const api_gmem_t *m)
{
    return (CUdeviceptr)m->base;
}

CUcontext api_gmem_ctx(const api_gmem_t *m)
{
    return m->ctx;
}

void api_gmem_nodes_ref(const api_op_t *v, size_t n)
{
    pthread_mutex_lock(&gmem_lock);
    for (size_t i = 0; i < n; i++)
        if (v[i].kind == API_OP_MEM_ALLOC)
            v[i].u.gm.m->owners++;
    pthread_mutex_unlock(&gmem_lock);
}

void api_gmem_nodes_unref(const api_op_t *v, size_t n)
{
    pthread_mutex_lock(&gmem_lock);
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind == API_OP_MEM_ALLOC) {
            api_gmem_t *m = v[i].u.gm.m;
            m->owners--;
            gmem_maybe_release_locked(m);
        }
    }
    pthread_mutex_unlock(&gmem_lock);
}

CUresult api_gmem_launch(const api_op_t *v, size_t n)
{
    CUresult rc = CUDA_SUCCESS;
    size_t i, charged = 0;
    pthread_mutex_lock(&gmem_lock);
    /* Dry run in launch order: every allocation must be free to allocate, every free must find it live. */
    for (i = 0; i < n; i++)
        if (v[i].kind == API_OP_MEM_ALLOC || v[i].kind == API_OP_MEM_FREE)
            v[i].u.gm.m->scratch = v[i].u.gm.m->live;
    for (i = 0; i < n; i++) {
        api_gmem_t *m = v[i].u.gm.m;
        if (v[i].kind == API_OP_MEM_ALLOC) {
            if (m->scratch)
                rc = CUDA_ERROR_INVALID_VALUE;   /* the last launch's allocation was not freed */
            m->scratch = true;
        } else if (v[i].kind == API_OP_MEM_FREE) {
            if (!m->scratch)
                rc = CUDA_ERROR_INVALID_VALUE;
            m->scratch = false;
        }
    }
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    for (i = 0; i < n; i++) {
        api_gmem_t *m = v[i].u.gm.m;
        if (v[i].kind != API_OP_MEM_ALLOC || m->charged)
            continue;
        int err = simnode_mem_reserve(m->dev, m->size);
        if (err < 0) {
            rc = err == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
            goto out_uncharge;
        }
        m->charged = true;
        charged = i + 1;
    }
    for (i = 0; i < n; i++) {
        if (v[i].kind == API_OP_MEM_ALLOC) {
            v[i].u.gm.m->live = true;
            v[i].u.gm.m->held++;
        } else if (v[i].kind == API_OP_MEM_FREE) {
            v[i].u.gm.m->live = false;   /* given back when its queued free op runs (or is dropped) */
        }
    }
    goto out_unlock;
out_uncharge:
    for (i = 0; i < charged; i++) {
        api_gmem_t *m = v[i].u.gm.m;
        if (v[i].kind == API_OP_MEM_ALLOC && m->charged && !m->held) {
            simnode_mem_unreserve(m->dev, m->size);
            m->charged = false;
        }
    }
out_unlock:
    pthread_mutex_unlock(&gmem_lock);
    return rc;
}

void api_gmem_free_done(api_gmem_t *m)
{
    pthread_mutex_lock(&gmem_lock);
    if (m->held)
        m->held--;
    gmem_maybe_release_locked(m);
    pthread_mutex_unlock(&gmem_lock);
}

void api_gmem_launch_abort(const api_op_t *v, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++)
        if (v[i].kind == API_OP_MEM_FREE)
            api_gmem_free_done(v[i].u.gm.m);
}

bool api_gmem_free_begin(api_gmem_t *m)
{
    pthread_mutex_lock(&gmem_lock);
    bool live = m->live;
    m->live = false;
    m->held++;                   /* a guard: m stays while the op is handed over */
    pthread_mutex_unlock(&gmem_lock);
    return live;
}

void api_gmem_free_end(api_gmem_t *m, bool live, bool queued)
{
    pthread_mutex_lock(&gmem_lock);
    if (live && !queued) {
        m->live = true;          /* not freed after all: undo the failed op's api_gmem_free_done */
        m->held++;
    }
    m->held--;
    gmem_maybe_release_locked(m);
    pthread_mutex_unlock(&gmem_lock);
}

CUresult api_gmem_free_now(api_gmem_t *m)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&gmem_lock);
    if (!m->live) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        m->live = false;
        if (m->held)
            m->held--;
        gmem_maybe_release_locked(m);
    }
    pthread_mutex_unlock(&gmem_lock);
    return rc;
}
