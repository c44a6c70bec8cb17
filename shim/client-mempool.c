/* client-mempool.c - stream-ordered memory counted as what each CUDA memory pool really holds on the device. */
#include "shim/client-internal.h"

#include "shim/client.h"
#include "shim/options.h"

#include <pthread.h>
#include <stdbool.h>

/*
 * A pool keeps what is freed into it (up to its release threshold; PyTorch's cudaMallocAsync backend sets
 * UINT64_MAX: everything), and a cuMemFreeAsync only frees once the stream reaches it. Counting allocations would
 * give the ledger back bytes the device still holds, and rotad would then grant them to another process that the
 * device refuses. So the ledger follows each pool's CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: re-read after every
 * stream-ordered allocation, free, synchronisation, trim, threshold change and destroy. A pool's reserve shrinks
 * only at those points (the driver releases over-threshold memory when it synchronises), so nothing is missed for
 * longer than the process's next such call; meanwhile the ledger errs on the safe side (it counts more).
 *
 * Under pressure (requests queue for memory on the pool's GPU), a synchronisation also trims each of the process's
 * pools on that GPU to what is in use (cuMemPoolTrimTo): the stream is idle then, so what the pool keeps is
 * unused, and handing it back is what the threshold would do. The process pays with new device allocations when
 * its pool grows again; the queued processes get their memory instead of waiting for the holder to exit.
 *
 * Known limits: an allocation from a pool of another device (cuMemAllocFromPoolAsync while another device's
 * context is current) is counted on the current device; a pool destroyed with allocations outstanding is no longer
 * counted (the driver keeps those until they are freed); at most POOL_MAX pools per process are followed, the
 * others are not counted at all.
 */

#define POOL_MAX 64

typedef struct pool_acct {
    CUmemoryPool pool;
    int dev;          /* client device index */
    uint64_t charged; /* what the ledger counts for this pool */
} pool_acct_t;

static struct {
    pthread_mutex_t mu;
    pool_acct_t p[POOL_MAX];
    unsigned n;
    _Atomic bool any; /* a pool is followed: synchronisations re-read them */
} pa = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

static bool pool_off(void)
{
    const rota_options_t *o = rota_options();
    return o->disable || rota_options_errors();
}

void client_mempool_reset_child(void)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pa.mu = mu;
    pa.n = 0;
    pa.any = false;
}

CUmemoryPool client_mempool_of(CUdevice dev)
{
    CUmemoryPool p = NULL;
    if (pool_off() || ROTA_REAL(cuDeviceGetMemPool)(&p, dev) != CUDA_SUCCESS) return NULL;
    return p;
}

static bool pool_attr(CUmemoryPool p, CUmemPool_attribute a, uint64_t *v)
{
    cuuint64_t x = 0;
    if (ROTA_REAL(cuMemPoolGetAttribute)(p, a, &x) != CUDA_SUCCESS) return false;
    *v = x;
    return true;
}

CUresult client_mempool_reserve(CUmemoryPool pool, CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r)
{
    r->dev = dev;
    r->bytes = 0;
    r->token = 0;
    if (pool_off()) return CUDA_SUCCESS;
    /* What the pool serves from its unused reserve needs no new memory (a block of another size may still make it
     * grow: settle charges that, the device having given it). */
    uint64_t res = 0, used = 0, need = bytes;
    if (pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res) &&
        pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) && res > used)
        need = bytes > res - used ? bytes - (res - used) : 0;
    if (!need) return CUDA_SUCCESS;
    return client_reserve(dev, need, may_wait, CLIENT_RETRY_NONE, r); /* stream-ordered callers do not retry */
}

/* With pa.mu held: the entry of pool (added if new), or NULL when the table is full. */
static pool_acct_t *pool_find_locked(CUmemoryPool pool, int dev, bool add)
{
    for (unsigned i = 0; i < pa.n; i++)
        if (pa.p[i].pool == pool) return &pa.p[i];
    if (!add || pa.n == POOL_MAX) return NULL;
    pa.p[pa.n] = (pool_acct_t){.pool = pool, .dev = dev};
    pa.any = true;
    return &pa.p[pa.n++];
}

/* With pa.mu held: the ledger follows what the pool holds now; a pool the driver no longer knows is dropped. */
static void pool_sync_locked(pool_acct_t *e)
{
    uint64_t now = 0;
    bool alive = pool_attr(e->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now);
    if (now > e->charged) client_dev_charge(e->dev, now - e->charged);
    else if (now < e->charged) client_dev_uncharge(e->dev, e->charged - now);
    e->charged = now;
    if (!alive) *e = pa.p[--pa.n];
}

void client_mempool_settle(CUmemoryPool pool, CUdevice dev, client_resv_t *r)
{
    if (pool_off()) return;
    int di = client_dev_index(dev);
    pthread_mutex_lock(&pa.mu);
    pool_acct_t *e = di < 0 ? NULL : pool_find_locked(pool, di, true);
    if (!e) {
        pthread_mutex_unlock(&pa.mu);
        client_mem_abort(r); /* not followed: not counted */
        return;
    }
    if (r->token) {
        /* The reservation becomes part of the pool's charge, then both follow what the pool holds. */
        e->charged += r->bytes;
        r->token = 0;
    }
    pool_sync_locked(e);
    pthread_mutex_unlock(&pa.mu);
}

void client_mempool_sync(CUmemoryPool pool)
{
    if (!pa.any) return;
    pthread_mutex_lock(&pa.mu);
    for (unsigned i = pa.n; i-- > 0;)
        if (!pool || pa.p[i].pool == pool) pool_sync_locked(&pa.p[i]);
    pthread_mutex_unlock(&pa.mu);
}

void client_mempool_sync_idle(void)
{
    if (!pa.any) return;
    pthread_mutex_lock(&pa.mu);
    for (unsigned i = pa.n; i-- > 0;) {
        pool_acct_t *e = &pa.p[i];
        uint64_t res = 0, used = 0;
        if (e->charged && client_dev_contended(e->dev) &&
            pool_attr(e->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res) &&
            pool_attr(e->pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) && res > used)
            ROTA_REAL(cuMemPoolTrimTo)(e->pool, used); /* others wait: what the pool keeps unused goes back */
        pool_sync_locked(e);
    }
    pthread_mutex_unlock(&pa.mu);
}
