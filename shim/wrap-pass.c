/* wrap-pass.c - the generated wrappers: cuInit, device enumeration, context creation, synchronisation. */
#include "shim/shim-internal.h"

#include "shim/client.h"

/*
 * These calls have no coordinator hook yet: the wrapper counts the call and passes it through with the
 * thread guard set, so that rota initialises from whichever of them comes first and later work (device
 * remapping for ROTA_GPU, sync-time accounting) has a place to go. Rows: INIT, DEVICE, CTX, SYNC; a SYNC row
 * also re-reads the pools the process allocated from (shim/client-mempool.c).
 */
#define ROTA_WRAP_PASS(name, params, args)        \
    CUresult CUDAAPI name params                  \
    {                                             \
        ROTA_ENTER(name, args);                   \
        CUresult rc = ROTA_REAL(name) args;       \
        ROTA_LEAVE();                             \
        return rc;                                \
    }                                             \
    ROTA_SELF(name)

#define ROTA_PASS_INIT(...) __VA_ARGS__
#define ROTA_PASS_DEVICE(...) __VA_ARGS__
#define ROTA_PASS_CTX(...) __VA_ARGS__
/* A synchronisation is when the driver gives a pool's memory above its release threshold back: the ledger follows,
 * and under pressure rota trims the pools (client_mempool_sync_idle, cheap when the process allocated from no pool). */
/* A synchronisation that returned (not a query) also accounts the device time of the uncontended launches
 * not sampled yet (client_launch_synced, one load when there are none). */
#define ROTA_WRAP_SYNC(name, base, params, args)  \
    CUresult CUDAAPI name params                  \
    {                                             \
        ROTA_ENTER(name, args);                   \
        CUresult rc = ROTA_REAL(name) args;       \
        client_mempool_sync_idle();               \
        if (rc == CUDA_SUCCESS && __builtin_strcmp(#base, "cuStreamQuery") != 0) client_launch_synced(); \
        ROTA_LEAVE();                             \
        return rc;                                \
    }                                             \
    ROTA_SELF(name)
#define ROTA_PASS_SYNC(...)
#define ROTA_PASS_PROC(...)
#define ROTA_PASS_LAUNCH(...)
#define ROTA_PASS_LAUNCHN(...)
#define ROTA_PASS_MEM(...)
#define ROTA_PASS_MEMINFO(...)
#define ROTA_PASS_CAPTURE(...)
#define ROTA_PASS_REAL(...)

#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) ROTA_PASS_##fam(ROTA_WRAP_PASS(name, params, args))
#include "shim/wrappers.def"
#undef ROTA_FN
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) ROTA_SYNC_##fam(ROTA_WRAP_SYNC(name, base, params, args))
#define ROTA_SYNC_SYNC(...) __VA_ARGS__
#define ROTA_SYNC_INIT(...)
#define ROTA_SYNC_PROC(...)
#define ROTA_SYNC_DEVICE(...)
#define ROTA_SYNC_CTX(...)
#define ROTA_SYNC_LAUNCH(...)
#define ROTA_SYNC_LAUNCHN(...)
#define ROTA_SYNC_MEM(...)
#define ROTA_SYNC_MEMINFO(...)
#define ROTA_SYNC_CAPTURE(...)
#define ROTA_SYNC_REAL(...)
#include "shim/wrappers.def"
#undef ROTA_FN
