/* api-vmm.c - virtual memory management: physical allocations are memfds, reservations PROT_NONE mappings,
 * cuMemMap maps the memfd into the reservation, so one allocation may appear at several addresses. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define VMM_GRANULARITY ((size_t)2 << 20)

typedef struct vmm_alloc {
    int fd;
    int dev;
    size_t size;
    unsigned refs;               /* 1 until cuMemRelease + 1 per mapping */
    unsigned handle_refs;        /* cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease; under vmm_lock */
} vmm_alloc_t;

typedef struct vmm_reserve {
    uintptr_t base;
    size_t size;
    size_t mapped;               /* mappings inside */
    struct vmm_reserve *next;
} vmm_reserve_t;

typedef struct vmm_map {
    uintptr_t base;
    size_t size;
    vmm_alloc_t *alloc;
    vmm_reserve_t *res;
} vmm_map_t;

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static vmm_reserve_t *reserves;
static vmm_reserve_t *stale_reserves;   /* a parent's list after fork, kept reachable */

void api_vmm_reset(void)
{
    pthread_mutex_init(&vmm_lock, NULL);
    if (reserves)
        stale_reserves = reserves;
    reserves = NULL;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (api_check_device(prop->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_prop(prop)) != CUDA_SUCCESS)
        return rc;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

static void alloc_unref_locked(vmm_alloc_t *a)
{
    if (--a->refs == 0) {
        close(a->fd);
        simnode_mem_unreserve(a->dev, a->size);
        free(a);
    }
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!handle || flags != 0 || size == 0 || size % VMM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_prop(prop)) != CUDA_SUCCESS)
        return rc;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    int dev = api_dev_phys(prop->location.id);
    int err = simnode_mem_reserve(dev, size);
    if (err < 0)
        return err == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
        if (fd >= 0)
            close(fd);
        simnode_mem_unreserve(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vmm_alloc_t *a = api_calloc(1, sizeof(*a));
    if (!a)
        goto out_close;
    a->fd = fd;
    a->dev = dev;
    a->size = size;
    a->refs = 1;
    a->handle_refs = 1;
    if (api_handle_add(a, API_KIND_MEMHANDLE) < 0)
        goto out_free;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
    return CUDA_SUCCESS;
out_free:
    free(a);
out_close:
    close(fd);
    simnode_mem_unreserve(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static vmm_alloc_t *as_alloc(CUmemGenericAllocationHandle h)
{
    void *p = (void *)(uintptr_t)h;
    return p && api_handle_is(p, API_KIND_MEMHANDLE) ? p : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    vmm_alloc_t *a = as_alloc(handle);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    /* Mappings keep the memory alive until they are unmapped; the handle lives until its last release. */
    pthread_mutex_lock(&vmm_lock);
    if (--a->handle_refs == 0)
        api_handle_del(a);
    alloc_unref_locked(a);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

/* The handle of the allocation mapped at addr, one more reference to it (released by cuMemRelease). */
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!handle || !addr)
        return CUDA_ERROR_INVALID_VALUE;
    api_range_t r;
    pthread_mutex_lock(&vmm_lock);
    if (!api_range_find((uintptr_t)addr, 0, &r) || r.kind != API_RANGE_VMM) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    vmm_alloc_t *a = ((vmm_map_t *)r.owner)->alloc;
    if (a->handle_refs == 0 && api_handle_add(a, API_KIND_MEMHANDLE) < 0) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->handle_refs++;
    a->refs++;
    pthread_mutex_unlock(&vmm_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    vmm_alloc_t *a = as_alloc(handle);
    if (!prop || !a)
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = api_dev_visible(a->dev);
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ptr || size == 0 || size % VMM_GRANULARITY != 0 || flags != 0 || (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < VMM_GRANULARITY)
        alignment = VMM_GRANULARITY;
    size_t span = size + alignment;
    void *m = mmap((void *)(uintptr_t)addr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)m + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)m)
        munmap(m, base - (uintptr_t)m);
    if ((uintptr_t)m + span > base + size)
        munmap((void *)(base + size), (uintptr_t)m + span - (base + size));
    vmm_reserve_t *r = api_calloc(1, sizeof(*r));
    if (!r) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->base = base;
    r->size = size;
    pthread_mutex_lock(&vmm_lock);
    r->next = reserves;
    reserves = r;
    pthread_mutex_unlock(&vmm_lock);
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_lock);
    for (vmm_reserve_t **pp = &reserves; *pp; pp = &(*pp)->next) {
        vmm_reserve_t *r = *pp;
        if (r->base == (uintptr_t)ptr && r->size == size) {
            if (r->mapped) {
                pthread_mutex_unlock(&vmm_lock);
                return CUDA_ERROR_INVALID_VALUE;    /* unmap first */
            }
            *pp = r->next;
            pthread_mutex_unlock(&vmm_lock);
            munmap((void *)r->base, r->size);
            free(r);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_ERROR_INVALID_VALUE;
}

static vmm_reserve_t *reserve_of_locked(uintptr_t p, size_t size)
{
    for (vmm_reserve_t *r = reserves; r; r = r->next)
        if (p >= r->base && p - r->base <= r->size && size <= r->size - (p - r->base))
            return r;
    return NULL;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    vmm_alloc_t *a = as_alloc(handle);
    if (!a || !ptr || size == 0 || flags != 0 || size % VMM_GRANULARITY || offset % VMM_GRANULARITY ||
        offset > a->size || size > a->size - offset)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    vmm_reserve_t *res = reserve_of_locked((uintptr_t)ptr, size);
    if (!res || api_range_find((uintptr_t)ptr, 0, NULL) ||
        api_range_find((uintptr_t)ptr + size - 1, 0, NULL)) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *m = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
                   (off_t)offset);
    if (m == MAP_FAILED) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vmm_map_t *map = api_calloc(1, sizeof(*map));
    if (!map)
        goto out_unmap;
    map->base = (uintptr_t)ptr;
    map->size = size;
    map->alloc = a;
    map->res = res;
    api_range_t r = { .base = (uintptr_t)ptr, .size = size, .kind = API_RANGE_VMM, .dev = a->dev, .owner = map };
    if (api_range_add(&r) < 0)
        goto out_free;
    a->refs++;
    res->mapped++;
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
out_free:
    free(map);
out_unmap:
    /* back to a reserved, inaccessible range */
    mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmm_lock);
    api_range_t r;
    if (!api_range_find((uintptr_t)ptr, 0, &r) || r.kind != API_RANGE_VMM || r.base != (uintptr_t)ptr ||
        r.size != size) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    api_range_remove(r.base, NULL);
    vmm_map_t *map = r.owner;
    mmap((void *)map->base, map->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    map->res->mapped--;
    alloc_unref_locked(map->alloc);
    free(map);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (api_check_device(desc[i].location.id) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* Every byte of the range must be mapped (possibly by several consecutive mappings). */
    uintptr_t p = (uintptr_t)ptr, end = p + size;
    while (p < end) {
        api_range_t r;
        if (!api_range_find(p, 0, &r) || r.kind != API_RANGE_VMM)
            return CUDA_ERROR_INVALID_VALUE;
        p = r.base + r.size;
    }
    /* Access flags are validated, not enforced: host memory stays read-write (a fault would kill the process
     * instead of giving an error). */
    return CUDA_SUCCESS;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuMemAddressFree); API_ALIAS(cuMemAddressReserve); API_ALIAS(cuMemCreate);
API_ALIAS(cuMemGetAllocationGranularity); API_ALIAS(cuMemMap); API_ALIAS(cuMemRelease); API_ALIAS(cuMemSetAccess);
API_ALIAS(cuMemUnmap); API_ALIAS(cuMemGetAllocationPropertiesFromHandle); API_ALIAS(cuMemRetainAllocationHandle);
