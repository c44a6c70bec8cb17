/* api-range.c - the device memory ranges (UVA: a CUdeviceptr is a host address), sorted and binary-searched. */
#include "tools/simcuda/api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_rwlock_t range_lock = PTHREAD_RWLOCK_INITIALIZER;
static api_range_t *ranges;
static size_t nranges, cap_ranges;

static size_t range_lower(uintptr_t p)    /* first index with base > p */
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int api_range_add(const api_range_t *r)
{
    pthread_rwlock_wrlock(&range_lock);
    if (nranges == cap_ranges) {
        size_t cap = cap_ranges ? 2 * cap_ranges : 64;
        api_range_t *n = api_calloc(cap, sizeof(*n));
        if (!n) {
            pthread_rwlock_unlock(&range_lock);
            return -ENOMEM;
        }
        if (nranges)
            memcpy(n, ranges, nranges * sizeof(*n));
        free(ranges);
        ranges = n;
        cap_ranges = cap;
    }
    size_t i = range_lower(r->base);
    memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof(*ranges));
    ranges[i] = *r;
    nranges++;
    pthread_rwlock_unlock(&range_lock);
    return 0;
}

bool api_range_remove(uintptr_t base, api_range_t *out)
{
    bool found = false;
    pthread_rwlock_wrlock(&range_lock);
    size_t i = range_lower(base);
    if (i > 0 && ranges[i - 1].base == base) {
        if (out)
            *out = ranges[i - 1];
        memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof(*ranges));
        nranges--;
        found = true;
    }
    pthread_rwlock_unlock(&range_lock);
    return found;
}

bool api_range_find(uintptr_t p, size_t len, api_range_t *out)
{
    bool found = false;
    pthread_rwlock_rdlock(&range_lock);
    size_t i = range_lower(p);
    if (i > 0) {
        const api_range_t *r = &ranges[i - 1];
        if (p >= r->base && p - r->base <= r->size && len <= r->size - (p - r->base) && (len || p < r->base + r->size)) {
            if (out)
                *out = *r;
            found = true;
        }
    }
    pthread_rwlock_unlock(&range_lock);
    return found;
}

void api_range_drop_ctx(CUcontext ctx, void (*fn)(const api_range_t *))
{
    api_range_t *gone = NULL;
    size_t ngone = 0;
    pthread_rwlock_wrlock(&range_lock);
    size_t j = 0;
    for (size_t i = 0; i < nranges; i++) {
        if (ranges[i].ctx == ctx) {
            api_range_t *g = realloc(gone, (ngone + 1) * sizeof(*g));
            if (g) {
                gone = g;
                gone[ngone++] = ranges[i];
                continue;
            }
        }
        ranges[j++] = ranges[i];
    }
    nranges = j;
    pthread_rwlock_unlock(&range_lock);
    for (size_t i = 0; i < ngone; i++)
        fn(&gone[i]);
    free(gone);
}

static api_range_t *stale_ranges[64];   /* tables abandoned at fork, kept reachable */
static int nstale;

void api_range_reset(void)
{
    /* After fork the child starts with an empty table; the parent's stays referenced by stale_ranges. */
    pthread_rwlock_init(&range_lock, NULL);
    if (ranges && nstale < 64)
        stale_ranges[nstale++] = ranges;
    ranges = NULL;
    nranges = cap_ranges = 0;
}
