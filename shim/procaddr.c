/* procaddr.c - cuGetProcAddress and cuGetProcAddress_v2: the driver picks the variant, rota swaps in its wrapper. */
#include "shim/shim-internal.h"

#include "shim/counters.h"
#include "shim/log.h"
#include "shim/options.h"

#include <stdatomic.h>
#include <string.h>

/* The wrapper table: each exported row's wrapper (rota_self_<name>), which cuGetProcAddress and dlsym hand out.
 * Here, in the wrappers' layer, not in real.c: the real driver's layer knows no wrapper. */
void *const rota_self[ROTA_FN_COUNT] = {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) \
    ROTA_EXPORTED_##fam([ROTA_FN_##name] = (void *)rota_self_##name, )
#include "shim/wrappers.def"
#undef ROTA_FN
};

/*
 * The real resolver is called with the caller's exact arguments (symbol, version, flags, symbolStatus), so the
 * driver alone decides which variant a (version, flags) pair means. Its answer is an address; if that address
 * is the real function of a wrapped row, the wrapper of that very row is returned (cuLaunchKernel_ptsz's for
 * cuLaunchKernel_ptsz's address, never the legacy one). An address rota does not wrap is returned unchanged.
 *
 * A driver may hand out rota's wrapper itself (it took the address of its exported name, which the global
 * scope binds to librota's): that is its choice of variant, kept as is.
 * A driver whose resolver hands out addresses other than its exported symbols' would slip past that map;
 * then the row is chosen by name instead: same base name, same stream flavour as the flags ask, the newest
 * variant not newer than cudaVersion (the "since" column of wrappers.def, from cudaTypedefs.h). That row is
 * only a guess: a driver newer than rota may have a newer variant (a _v3 with another signature) at that
 * cudaVersion. So the driver is asked again, at the row's own version: only if it answers the same address is
 * it that variant, and wrapped; otherwise the driver's pointer is handed out unwrapped (rota does not see
 * those calls), said once per name in the log.
 */
static int find_by_name(const char *symbol, int version, cuuint64_t flags)
{
    int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1;
    for (int want_pt = pt; want_pt >= 0 && best < 0; want_pt--) {
        for (int i = 0; i < ROTA_FN_COUNT; i++) {
            const rota_fn_info_t *f = &rota_fn_info[i];
            if (!f->exported || f->pt != (want_pt != 0) || f->ver > version || strcmp(f->base, symbol) != 0) continue;
            if (best < 0 || f->ver > rota_fn_info[best].ver) best = i;
        }
    }
    return best;
}

static bool is_wrapper(const void *pfn)
{
    for (int i = 0; i < ROTA_FN_COUNT; i++)
        if (rota_self[i] != NULL && rota_self[i] == pfn) return true;
    return false;
}

/* The driver's answer for symbol at version (through the entry point the caller used), or NULL. */
static void *ask_driver(bool v2, const char *symbol, int version, cuuint64_t flags)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CUresult rc = v2 ? ROTA_REAL(cuGetProcAddress_v2)(symbol, &p, version, flags, &st)
                     : ROTA_REAL(cuGetProcAddress)(symbol, &p, version, flags);
    return rc == CUDA_SUCCESS ? p : NULL;
}

/* Rows whose unknown newer variant was already reported (one log line per name). */
static _Atomic bool newer_logged[ROTA_FN_COUNT];

static void *map_pfn(bool v2, const char *symbol, void *pfn, int version, cuuint64_t flags)
{
    /* Already rota's: a driver that takes its own exported names' addresses through the global scope
     * (simcuda built without -Bsymbolic) hands out the preloaded wrappers themselves. */
    if (pfn == NULL || is_wrapper(pfn)) return pfn;
    int i = rota_real_find_addr(pfn, symbol, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
    if (i < 0) {
        i = find_by_name(symbol, version, flags);
        if (i < 0) return pfn; /* not a name rota wraps */
        if (rota_fn_info[i].ver != version && ask_driver(v2, symbol, rota_fn_info[i].ver, flags) != pfn) {
            if (!atomic_exchange(&newer_logged[i], true))
                rota_log(ROTA_LOG_INFO,
                         "cuGetProcAddress(%s, %d, %llu): the driver's variant is newer than %s, the newest rota "
                         "knows: its calls pass by rota", symbol, version, (unsigned long long)flags,
                         rota_fn_info[i].name);
            return pfn;
        }
        rota_log(ROTA_LOG_DEBUG, "cuGetProcAddress(%s, %d, %llu): address not exported by the driver, chose %s",
                 symbol, version, (unsigned long long)flags, rota_fn_info[i].name);
    }
    return rota_real_present[i] ? rota_self[i] : pfn;
}

/* ROTA_LOG=debug: one line per lookup, in the form of tests/facts/cudart13-lookups.txt plus the answer
 * (tests/shim/cudart-t checks a real libcudart's start-up against those facts). */
static void log_lookup(const char *entry, const char *symbol, int version, cuuint64_t flags, CUresult rc,
                       const void *pfn)
{
    if (rota_options()->log_level < ROTA_LOG_DEBUG) return;
    rota_log(ROTA_LOG_DEBUG, "%s: %s ver=%d flags=%llu -> %d %s", entry, symbol ? symbol : "(null)", version,
             (unsigned long long)flags, (int)rc, pfn == NULL ? "null" : is_wrapper(pfn) ? "rota" : "driver");
}

static bool test_counters_symbol(const char *symbol, void **pfn, CUdriverProcAddressQueryResult *status)
{
    if (!rota_counting || symbol == NULL || pfn == NULL || strcmp(symbol, ROTA_TEST_COUNTERS_SYMBOL) != 0)
        return false;
    *pfn = (void *)rota_test_counter;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return true;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    ROTA_ENTER(cuGetProcAddress_v2, (symbol, pfn, cudaVersion, flags, symbolStatus));
    CUresult rc = CUDA_SUCCESS;
    if (!test_counters_symbol(symbol, pfn, symbolStatus)) {
        rc = ROTA_REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
        if (rc == CUDA_SUCCESS && pfn != NULL && symbol != NULL)
            *pfn = map_pfn(true, symbol, *pfn, cudaVersion, flags);
        log_lookup("cuGetProcAddress_v2", symbol, cudaVersion, flags, rc, pfn ? *pfn : NULL);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuGetProcAddress_v2)

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    ROTA_ENTER(cuGetProcAddress, (symbol, pfn, cudaVersion, flags));
    CUresult rc = CUDA_SUCCESS;
    if (!test_counters_symbol(symbol, pfn, NULL)) {
        rc = ROTA_REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
        if (rc == CUDA_SUCCESS && pfn != NULL && symbol != NULL)
            *pfn = map_pfn(false, symbol, *pfn, cudaVersion, flags);
        log_lookup("cuGetProcAddress", symbol, cudaVersion, flags, rc, pfn ? *pfn : NULL);
    }
    ROTA_LEAVE();
    return rc;
}
ROTA_SELF(cuGetProcAddress)
