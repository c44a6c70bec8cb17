/* newvariant-t.c - cuGetProcAddress answered by a driver newer than rota: an address rota does not recognise is
 * wrapped only when it is a variant rota knows, else handed out as the driver gave it (tests/shim/
 * fake-newer-driver.c, in front of simcuda, through ROTA_REAL_LIBCUDA). */
#include "tests/shim/shim-test.h"

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*getproc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_v3_fn)(CUdeviceptr *, size_t, unsigned long long);
typedef CUresult (*free_fn)(CUdeviceptr);

static bool in_lib(const void *p, const char *lib)
{
    Dl_info di;
    return p != NULL && dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, lib) != NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *b = getenv("ROTA_BUILD");
    if (!b) bail("ROTA_BUILD is not set (run through make test, or export it)");
    shim_preload_self(argv, "newvariant");
    static char drv[512];
    snprintf(drv, sizeof drv, "%s/tests/fake/libcuda-newer.so", b);
    if (!getenv("ROTA_REAL_LIBCUDA")) { /* shim_preload_self clears it: set it for librota's start */
        setenv("ROTA_REAL_LIBCUDA", drv, 1);
        execv("/proc/self/exe", argv);
        bail("execv: %s", strerror(errno));
    }
    atexit(shim_cleanup);
    alarm(30);
    plan(8);
    shim_dev_t d;
    shim_dev_init(&d);
    void *h = dlopen(drv, RTLD_NOW | RTLD_NOLOAD);
    if (!h) bail("the stand-in driver %s is not loaded: %s", drv, dlerror());
    unsigned long long *calls = dlsym(h, "fake_newer_calls"), *seen_flags = dlsym(h, "fake_newer_flags");
    if (!calls || !seen_flags) bail("the stand-in driver's counters are missing");

    getproc_v2_fn gp2 = (getproc_v2_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    getproc_v1_fn gp1 = (getproc_v1_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    ok(in_lib((void *)gp2, "librota") && in_lib((void *)gp1, "librota"), "cuGetProcAddress(_v2) are librota's");

    /* a variant newer than rota's table: the driver's pointer, never an older variant's wrapper */
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    is_int(gp2("cuMemAlloc", &p, 14000, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS,
           "cuMemAlloc at 14000 (a variant rota does not know) resolves");
    ok(p != NULL && !in_lib(p, "librota") && in_lib(p, "libcuda-newer"),
       "  to the driver's own function, not rota's wrapper of cuMemAlloc_v2 (%s)", in_lib(p, "librota") ? "librota" : "driver");
    CUdeviceptr dp = 0;
    ok(p && ((alloc_v3_fn)p)(&dp, 4096, 0xabcull) == CUDA_SUCCESS && *calls == 1 && *seen_flags == 0xabc,
       "  a call through it reaches the newer variant with its own arguments (flags 0x%llx)", *seen_flags);
    void *q = NULL;
    ok(gp1("cuMemAlloc", &q, 14000, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS && q == p,
       "  cuGetProcAddress (v1) the same");
    void *known = NULL;
    ok(gp2("cuMemAlloc", &known, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS && in_lib(known, "librota"),
       "cuMemAlloc at 13000 (cuMemAlloc_v2, exported by the driver): rota's wrapper");

    /* an address the driver does not export, for a variant rota knows: still wrapped */
    void *f = NULL;
    ok(gp2("cuMemFree", &f, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS && in_lib(f, "librota"),
       "cuMemFree through a private trampoline of cuMemFree_v2: rota's wrapper of cuMemFree_v2");
    is_int(f ? (int)((free_fn)f)(dp) : -1, CUDA_SUCCESS, "  which frees");
    shim_dev_fini(&d);
    return done_testing();
}
