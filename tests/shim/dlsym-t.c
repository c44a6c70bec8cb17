/* dlsym-t.c - rota's dlsym/dlvsym: libc's meaning kept for every other name, the driver's handles mapped. */
#include "tests/shim/shim-test.h"

/*
 * librota exports dlsym and dlvsym. For a name that is not a wrapped cu* name they must behave exactly like
 * libc's, RTLD_NEXT included: libc resolves RTLD_NEXT from its caller's address, so rota's dlsym has to reach
 * libc's as a tail call. The test that catches a broken one: dlsym(RTLD_NEXT, "dlsym") from this program
 * must be the next dlsym after the main program - librota's own - exactly like dlsym(RTLD_DEFAULT, "dlsym");
 * a non-tail call would make libc see librota as the caller and return libc's.
 *
 * Driver handles: dlopen with RTLD_DEEPBIND, RTLD_NOLOAD and a library handle that reaches the driver
 * through its dependencies (the main program's) all give the wrapper. What RTLD_DEEPBIND cannot cover: a
 * library opened with it that calls cu* functions it links directly binds them to its own libcuda, and its
 * own calls to dlsym go to libc first - neither passes through any LD_PRELOAD shim (see shim/dlsym.c); what
 * it receives from cuGetProcAddress through rota is still rota's.
 */
static bool in_lib(void *p, const char *lib)
{
    Dl_info di;
    return p != NULL && dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, lib) != NULL;
}

/*
 * What dlsym(RTLD_NEXT, name) from the main program means, worked out without RTLD_NEXT: the first object
 * after the program in the global search order (the initial link map: preloads, then the dependencies)
 * that itself defines name (at version, with dlvsym, when not NULL). Each object is asked through its own
 * handle, whose lookup starts with the object; an answer from one of its dependencies does not count.
 * Under gcc the sanitizer runtimes are shared libraries, under clang they are linked into the program -
 * where RTLD_NEXT must then skip the program's own malloc, which RTLD_DEFAULT finds first.
 */
static void *next_after_program(const char *name, const char *version)
{
    void *self = dlopen(NULL, RTLD_NOW);
    struct link_map *prog = NULL;
    if (self == NULL || dlinfo(self, RTLD_DI_LINKMAP, &prog) != 0 || prog == NULL)
        bail("the program's link map: %s", dlerror());
    void *found = NULL;
    for (struct link_map *l = prog->l_next; l != NULL && found == NULL; l = l->l_next) {
        void *h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h == NULL)
            continue;            /* the vDSO, which defines nothing of libc's */
        void *p = version ? dlvsym(h, name, version) : dlsym(h, name);
        Dl_info di;
        struct link_map *def = NULL;
        if (p != NULL && dladdr1(p, &di, (void **)&def, RTLD_DL_LINKMAP) && def == l)
            found = p;
        dlclose(h);
    }
    dlclose(self);
    return found;
}

/* Whether the program itself (not a library) defines name: clang's static sanitizer runtimes do malloc. */
static bool program_defines(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    Dl_info di;
    struct link_map *def = NULL, *prog = NULL;
    void *self = dlopen(NULL, RTLD_NOW);
    if (self == NULL || dlinfo(self, RTLD_DI_LINKMAP, &prog) != 0)
        bail("the program's link map: %s", dlerror());
    dlclose(self);
    return p != NULL && dladdr1(p, &di, (void **)&def, RTLD_DL_LINKMAP) && def == prog;
}

int main(int argc, char **argv)
{
    (void)argc;
    shim_preload_self(argv, "dlsym");
    alarm(30);

    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc == NULL) bail("dlopen libc.so.6: %s", dlerror());

    /* ---- libc's meaning for every other name ---- */
    void *next_dlsym = dlsym(RTLD_NEXT, "dlsym"), *def_dlsym = dlsym(RTLD_DEFAULT, "dlsym");
    ok(in_lib(def_dlsym, "librota"), "dlsym(RTLD_DEFAULT, \"dlsym\") is librota's (it is preloaded)");
    ok(next_dlsym == def_dlsym,
       "dlsym(RTLD_NEXT, \"dlsym\") from the program is librota's too: libc saw the real caller");
    /* A name librota does not define: the next definition after the program, which is libc's or a shared
     * sanitizer runtime's malloc - or, with clang's sanitizer runtime linked into the program, the next one
     * after the program's own (RTLD_DEFAULT's) malloc. Under gcc's ASan (libasan, then librota, then libc)
     * a non-tail call would give libc's instead of libasan's. */
    bool own_malloc = program_defines("malloc");
    void *next_malloc = dlsym(RTLD_NEXT, "malloc"), *def_malloc = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info nd;
    diag("the program defines %s malloc; RTLD_NEXT's is in %s", own_malloc ? "its own" : "no",
         next_malloc && dladdr(next_malloc, &nd) && nd.dli_fname ? nd.dli_fname : "(none)");
    ok(next_malloc != NULL && next_malloc == next_after_program("malloc", NULL) && !in_lib(next_malloc, "librota") &&
           (next_malloc == def_malloc) == !own_malloc,
       "dlsym(RTLD_NEXT, \"malloc\") is the first malloc after the program");
    void *vm = dlvsym(RTLD_NEXT, "free", "GLIBC_2.2.5");
    ok(vm != NULL && vm == next_after_program("free", "GLIBC_2.2.5"),
       "dlvsym(RTLD_NEXT, \"free\", \"GLIBC_2.2.5\") is the first such free after the program");
    dlerror();
    ok(dlsym(libc, "no_such_symbol_rota") == NULL && dlerror() != NULL,
       "an unknown name is NULL with a dlerror() message, as from libc");
    ok(dlsym(RTLD_DEFAULT, "cuNoSuchFunction") == NULL && dlerror() != NULL,
       "an unknown cu* name is NULL with a dlerror() message");

    /* ---- the driver ---- */
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) bail("dlopen libcuda.so.1: %s", dlerror());
    dlerror();
    void *w = dlsym(h, "cuLaunchKernel");
    ok(in_lib(w, "librota") && dlerror() == NULL, "dlsym(libcuda, cuLaunchKernel) is rota's, and leaves no dlerror()");
    void *um = dlsym(h, "cuModuleLoadData");
    ok(um != NULL && !in_lib(um, "librota") && um == (void *)&cuModuleLoadData,
       "an unwrapped name (cuModuleLoadData) is the driver's own function");
    ok(dlsym(RTLD_NEXT, "cuModuleLoadData") == um, "... also through RTLD_NEXT");

#if SHIM_TEST_SANITIZED
    /* ASan and TSan refuse RTLD_DEEPBIND outright (google/sanitizers#611). */
    void *hd = dlopen("libcuda.so.1", RTLD_NOW);
    skip("RTLD_DEEPBIND under a sanitizer runtime");
#else
    void *hd = dlopen("libcuda.so.1", RTLD_NOW | RTLD_DEEPBIND);
    ok(hd == h && dlsym(hd, "cuLaunchKernel_ptsz") == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"),
       "a handle opened with RTLD_DEEPBIND gives the wrapper (cuLaunchKernel_ptsz)");
#endif
    void *hn = dlopen("libcuda.so", RTLD_LAZY | RTLD_NOLOAD);
    ok(hn == h && dlsym(hn, "cuMemAlloc_v2") == (void *)&cuMemAlloc_v2 && in_lib(dlsym(hn, "cuMemAlloc_v2"), "librota"),
       "dlopen(libcuda.so, RTLD_NOLOAD) + dlsym gives the wrapper the program calls directly");
    void *self = dlopen(NULL, RTLD_NOW);
    ok(dlsym(self, "cuInit") == (void *)&cuInit && in_lib(dlsym(self, "cuInit"), "librota"),
       "the main program's handle gives rota's cuInit");
    ok(dlsym(h, "cuGetProcAddress") == dlsym(RTLD_DEFAULT, "cuGetProcAddress") &&
           dlsym(h, "cuGetProcAddress_v2") == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"),
       "the driver handle's cuGetProcAddress and _v2 are rota's (how PyTorch and JAX start)");

    /* The wrapper reached through a driver handle works, before any other call initialised rota. */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    is_int(init(0), CUDA_SUCCESS, "cuInit through the driver handle succeeds");
    ok(shim_hits("cuInit") == 1, "... and was counted by rota (1 call)");

    dlclose(hd);
    dlclose(hn);
    dlclose(h);
    dlclose(self);
    dlclose(libc);
    shim_cleanup();
    return done_testing();
}
