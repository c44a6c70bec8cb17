/* dlsym.c - dlsym and dlvsym interposition: dlopen + dlsym of the driver lands on rota's wrappers. */
#include "shim/shim-internal.h"

#include <dlfcn.h>

/*
 * PyTorch, JAX and most runtimes never link -lcuda: they dlopen("libcuda.so.1") and dlsym cuGetProcAddress
 * (or every cu* name) from that handle, which bypasses LD_PRELOAD. Every dlsym/dlvsym of the process comes
 * here, so the common case must cost nothing: a name that is not a wrapped cu* name is a tail call to libc's
 * dlsym, which therefore still sees its real caller (dlsym(RTLD_NEXT, ...) keeps its meaning for everyone,
 * libasan's start-up included - these two functions run before any sanitizer runtime is ready).
 *
 * For a wrapped name:
 *   - any handle (the driver's, RTLD_DEFAULT, a library that links the driver, one opened RTLD_DEEPBIND): libc
 *     looks the name up; if the address is the real function of a wrapped row, the wrapper is returned; if it is
 *     rota's own export (RTLD_DEFAULT finds librota first), it is returned when the driver has the name, else
 *     NULL, as without rota;
 *   - RTLD_NEXT: rota's wrapper whenever the driver has the name, whoever asks (a caller before librota would
 *     get it anyway; another shim after it gets rota instead of the driver, so rota is never bypassed and the
 *     wrapper calls the driver directly, without recursion);
 *   - inside rota (rota_in_shim) or while the driver is being loaded: libc's answer; under ROTA_DISABLE, libc's
 *     answer except that rota's own export of a name the driver lacks is NULL.
 *
 * Not covered (no LD_PRELOAD shim can): a library opened with RTLD_DEEPBIND that links libcuda itself binds
 * its cu* calls, and its own dlsym calls, inside its own dependency tree first. Pointers it gets from rota
 * (through cuGetProcAddress or a handle the application passes it) stay rota's.
 */
static void *dlsym_wrapped(void *handle, const char *name, const char *version, int i)
{
    if (rota_in_shim) return version ? rota_real_dlvsym()(handle, name, version) : rota_real_dlsym()(handle, name);
    rota_driver_init();
    bool on = rota_steady_mode() != ROTA_MODE_DISABLED;
    if (on && handle == RTLD_NEXT && rota_real_present[i]) return rota_self[i];
    void *addr = version ? rota_real_dlvsym()(handle, name, version) : rota_real_dlsym()(handle, name);
    if (addr == NULL) return NULL;
    /* rota's own export, found first in the global scope: only if the driver has the name. */
    if (addr == rota_self[i]) return rota_real_present[i] ? addr : NULL;
    if (!on) return addr;
    int j = rota_real_find_addr(addr, name, -1);
    return j >= 0 ? rota_self[j] : addr;
}

ROTA_NO_SANITIZE void *dlsym(void *handle, const char *name)
{
    if (ROTA_UNLIKELY(name[0] == 'c' && name[1] == 'u')) { /* name is nonnull, as for libc */
        int i = rota_fn_find(name);
        if (i >= 0) return dlsym_wrapped(handle, name, NULL, i);
    }
    if (ROTA_UNLIKELY(name[0] == 'n' && name[1] == 'v' && !rota_in_shim)) { /* NVML: shim/wrap-nvml.c */
        void *p = rota_nvml_dlsym(handle, name, NULL);
        if (p) return p;
    }
    return rota_real_dlsym()(handle, name);
}

ROTA_NO_SANITIZE void *dlvsym(void *handle, const char *name, const char *version)
{
    if (ROTA_UNLIKELY(name[0] == 'c' && name[1] == 'u')) { /* name is nonnull, as for libc */
        int i = rota_fn_find(name);
        if (i >= 0) return dlsym_wrapped(handle, name, version, i);
    }
    if (ROTA_UNLIKELY(name[0] == 'n' && name[1] == 'v' && !rota_in_shim)) { /* NVML: shim/wrap-nvml.c */
        void *p = rota_nvml_dlsym(handle, name, version);
        if (p) return p;
    }
    return rota_real_dlvsym()(handle, name, version);
}
