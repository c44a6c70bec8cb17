/* shim.c - librota's lifecycle: a constructor that costs nothing, lazy init from every entry point, fork. */
#include "shim/shim-internal.h"

#include "shim/client.h"
#include "shim/counters.h"
#include "shim/log.h"
#include "shim/options.h"

#include <dlfcn.h>
#include <pthread.h>

/*
 * States (enum rota_mode): INIT until the first driver call of the process finishes initialising, then
 * ACTIVE, DISABLED, FAILED or NODRIVER for good; ACTIVE becomes FORKED in a fork child until its first
 * driver call re-runs client_process_init; with ROTA_REQUIRE=1 and no rotad the process stays in INIT (every call
 * retries, cuInit returns the client's error). A process that never calls the driver stays in INIT: the
 * constructor only parses the environment (no I/O, no threads, no dlopen), and an option error is reported
 * at the first driver call, not at load - `ls` with a typo in ROTA_LOG prints nothing.
 *
 * GPU placement: `rota run` (tools/rota/run.c) asks rotad and sets CUDA_VISIBLE_DEVICES=GPU-<uuid> before exec. A
 * process started without it is remapped here (ROTA_GPU, shim/client-place.c): CUDA_VISIBLE_DEVICES must be set
 * before the real cuInit, so client_process_init does it before the process's first call reaches the driver,
 * whichever call that is. The process has no driver to list GPUs with yet; rotad has: it enumerated the node's
 * GPUs at start (runtime/probe.c) and chooses among those.
 *
 * Thread safety: the one-time work runs under pthread_once (which glibc resets in a fork child), the
 * per-process work under proc_lock (re-initialised in the child). rota_in_shim is set around all of it, so a
 * driver or coordinator that calls an exported name back during initialisation gets a plain pass-through (or
 * CUDA_ERROR_NOT_INITIALIZED before the driver is resolved) instead of a deadlock.
 */

_Atomic int rota_mode = ROTA_MODE_INIT;

static int steady_mode = ROTA_MODE_INIT; /* what INIT resolves to; written once under drv_once */
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor)) static void rota_ctor(void)
{
    rota_options(); /* getenv and string parsing only */
}

static void rota_fork_child(void)
{
    /* The child has one thread: nothing can hold these now. */
    pthread_mutex_init(&proc_lock, NULL);
    if (steady_mode == ROTA_MODE_ACTIVE) atomic_store_explicit(&rota_mode, ROTA_MODE_FORKED, memory_order_release);
}

/* ROTA_LOG=debug: which driver was loaded and how many of wrappers.def's names it has. */
static void driver_log_resolved(const rota_options_t *o)
{
    if (o->log_level < ROTA_LOG_DEBUG) return;
    int found = 0;
    for (int i = 0; i < ROTA_FN_COUNT; i++) found += rota_real_present[i];
    Dl_info di;
    const char *file = dladdr((void *)rota_real.fn_cuInit, &di) && di.dli_fname ? di.dli_fname
                       : o->real_libcuda[0]                               ? o->real_libcuda
                                                                          : "libcuda.so.1";
    rota_log(ROTA_LOG_DEBUG, "real driver %s: %d of %d names resolved", file, found, (int)ROTA_FN_COUNT);
}

static void driver_init_once(void)
{
    const rota_options_t *o = rota_options();
    unsigned bad = rota_options_errors();
    int saved = rota_in_shim;

    rota_in_shim = 1;
    rota_options_report();
    char why[1024];
    int rc = rota_real_resolve(o->real_libcuda, why, sizeof why);
    if (rc == 0) driver_log_resolved(o);
    if (rc != 0) {
        rota_log(ROTA_LOG_ERROR, "%s", why);
        steady_mode = ROTA_MODE_NODRIVER;
        rota_log(ROTA_LOG_ERROR,
                 "no real driver: every CUDA call fails (cuInit: CUDA_ERROR_SHARED_OBJECT_INIT_FAILED)");
    } else if (o->disable) {
        steady_mode = ROTA_MODE_DISABLED;
        if (bad) rota_log(ROTA_LOG_WARN, "ROTA_DISABLE=1: ignoring the bad values above, rota is off");
        rota_log(ROTA_LOG_INFO, "ROTA_DISABLE=1: every call goes straight to the driver");
    } else if (bad) {
        steady_mode = ROTA_MODE_FAILED;
        rota_log(ROTA_LOG_ERROR, "%u bad ROTA_* value%s: rota is inactive and cuInit returns CUDA_ERROR_INVALID_VALUE",
                 bad, bad == 1 ? "" : "s");
    } else {
        steady_mode = ROTA_MODE_ACTIVE;
        rota_counters_init(o->test_counters);
        if (pthread_atfork(NULL, NULL, rota_fork_child) != 0)
            rota_log(ROTA_LOG_WARN, "pthread_atfork failed: a fork child will not reconnect to the coordinator");
    }
    rota_in_shim = saved;
}

void rota_driver_init(void)
{
    pthread_once(&drv_once, driver_init_once);
}

int rota_steady_mode(void)
{
    return steady_mode;
}

/*
 * Runs what the process needs before its first hooked call; returns the mode that results. *res gets what the
 * coordinator said (CUDA_SUCCESS, or with ROTA_REQUIRE=1 and no rotad the error cuInit returns): then the mode
 * stays INIT/FORKED, so that every later call comes back here and retries (the client rate-limits that to
 * once a second) instead of running uncoordinated.
 */
static int process_init(CUresult *res)
{
    *res = CUDA_SUCCESS;
    rota_driver_init();
    if (steady_mode != ROTA_MODE_ACTIVE) {
        atomic_store_explicit(&rota_mode, steady_mode, memory_order_release);
        return steady_mode;
    }
    pthread_mutex_lock(&proc_lock);
    if (atomic_load_explicit(&rota_mode, memory_order_acquire) != ROTA_MODE_ACTIVE) {
        rota_in_shim = 1;
        *res = client_process_init();
        rota_count(ROTA_EV_PROCESS_INIT);
        rota_in_shim = 0;
        if (*res == CUDA_SUCCESS) atomic_store_explicit(&rota_mode, ROTA_MODE_ACTIVE, memory_order_release);
    }
    pthread_mutex_unlock(&proc_lock);
    return ROTA_MODE_ACTIVE;
}

int rota_path_slow(unsigned idx)
{
    /* Nested: rota itself, the driver or the client of rotad calling an exported name. */
    if (rota_in_shim) return rota_real_resolved() ? ROTA_PATH_REAL : CUDA_ERROR_NOT_INITIALIZED;

    int m = atomic_load_explicit(&rota_mode, memory_order_acquire);
    CUresult res = CUDA_SUCCESS;
    if (m == ROTA_MODE_INIT || m == ROTA_MODE_FORKED) m = process_init(&res);
    switch (m) {
    case ROTA_MODE_ACTIVE:
        if (res == CUDA_SUCCESS) return ROTA_PATH_HOOK;
        /* ROTA_REQUIRE=1 and rotad unreachable (the client said so once, in one line): cuInit returns the
         * client's error; cuGetProcAddress still resolves, so that the application reaches cuInit. */
        if (idx == ROTA_FN_cuInit) return (int)res;
        if (idx == ROTA_FN_cuGetProcAddress || idx == ROTA_FN_cuGetProcAddress_v2) return ROTA_PATH_HOOK;
        return CUDA_ERROR_NOT_INITIALIZED;
    case ROTA_MODE_DISABLED:
        return ROTA_PATH_REAL;
    case ROTA_MODE_FAILED:
        /* The entry points keep resolving to rota, so that the application reaches cuInit and its error. */
        if (idx == ROTA_FN_cuInit) return CUDA_ERROR_INVALID_VALUE;
        if (idx == ROTA_FN_cuGetProcAddress || idx == ROTA_FN_cuGetProcAddress_v2) return ROTA_PATH_HOOK;
        return CUDA_ERROR_NOT_INITIALIZED;
    default: /* NODRIVER */
        return idx == ROTA_FN_cuInit ? CUDA_ERROR_SHARED_OBJECT_INIT_FAILED : CUDA_ERROR_NOT_INITIALIZED;
    }
}
