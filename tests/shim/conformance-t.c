/* conformance-t.c - what real CUDA 13 clients look up (tests/facts) gets a CUDA 13 driver's answer via rota. */
#include "tests/shim/shim-test.h"

/*
 * The facts (recorded from NVIDIA's and PyTorch's libraries, see tests/facts/README.md):
 *   cudart13-lookups.txt         every cuGetProcAddress_v2(name, version, flags) libcudart 13 makes at start-up;
 *   cublaslt13-dlsym.txt         every name cuBLASLt 13 dlsyms on its own dlopen("libcuda.so.1") handle;
 *   pytorch-driver-entry-points.txt  the entry points PyTorch requires, looked up at version 12000.
 * Reached the way those clients reach the driver (dlopen("libcuda.so.1"), dlsym of cuGetProcAddress_v2 from
 * it) in a process with librota preloaded on simcuda, each must get what a CUDA 13 driver answers: found, the
 * variant NVIDIA's headers define for that version and flag (cuda-api.def, generated from cudaTypedefs.h),
 * and the pointer is librota's wrapper of that very variant when librota wraps it, the driver's function
 * otherwise (librota's export of the variant's name, else the name in the driver's handle).
 * On a real driver (scripts/gpu-check) the variants are the driver's choice: there each lookup at or below the
 * driver's version must be found, as librota's wrapper exactly for the names librota exports.
 */
static bool on_simcuda;
static int driver_version;
typedef struct row {
    const char *base;
    int version;
    int pt;
    const char *name;
} row_t;
static const row_t rows[] = {
#define SIM_EXPORT(name)
#define SIM_PROC(base, ver, pt, name) { #base, ver, pt, #name },
#define SIM_PROC_NONAME(base, ver, pt) { #base, ver, pt, NULL },
#include "tools/simcuda/cuda-api.def"
#undef SIM_EXPORT
#undef SIM_PROC
#undef SIM_PROC_NONAME
};

/* The exported name of the variant a CUDA 13 driver gives for (base, version, per_thread); NULL if none. */
static const char *expected_variant(const char *base, int version, bool per_thread, bool *known)
{
    const row_t *legacy = NULL, *pt = NULL;
    *known = false;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row_t *r = &rows[i];
        if (strcmp(r->base, base) != 0 || (*known = true, r->version > version)) continue;
        const row_t **best = r->pt ? &pt : &legacy;
        if (*best == NULL || r->version > (*best)->version) *best = r;
    }
    const row_t *r = per_thread && pt ? pt : legacy;
    return r ? r->name : NULL;
}

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static FILE *open_fact(const char *file)
{
    const char *src = getenv("ROTA_SRCDIR");
    char path[4096];
    if (src == NULL) bail("ROTA_SRCDIR is not set (make test exports it)");
    snprintf(path, sizeof(path), "%s/tests/facts/%s", src, file);
    FILE *f = fopen(path, "r");
    if (f == NULL) bail("%s: %s", path, strerror(errno));
    return f;
}

static bool in_lib(const void *p, const char *lib)
{
    Dl_info di;
    return p != NULL && dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, lib) != NULL;
}

/* librota's export of name if it wraps it (librota is first in the global scope), else the driver's own. */
static void *expected_pointer(void *drv, const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    return p && in_lib(p, "librota") ? p : dlsym(drv, name);
}

static void check_cudart(void *drv, getproc_fn getproc, FILE *f)
{
    char line[256], name[128];
    int n = 0, bad = 0, wrapped = 0;
    while (fgets(line, sizeof(line), f)) {
        int ver;
        unsigned long long flags;
        if (sscanf(line, "%127s ver=%d flags=%llu", name, &ver, &flags) != 3) continue;
        n++;
        bool known;
        const char *want = expected_variant(name, ver, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &known);
        void *pfn = (void *)1;
        CUdriverProcAddressQueryResult st = -1;
        CUresult rc = getproc(name, &pfn, ver, flags, &st);
        void *exp = want ? expected_pointer(drv, want) : NULL;
        if (!on_simcuda) {
            if (ver > driver_version) continue; /* a real driver refuses a version above its own */
            void *mine = want ? dlsym(RTLD_DEFAULT, want) : NULL;
            exp = mine && in_lib(mine, "librota") ? mine : pfn;
        }
        bool good = want ? rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && pfn != NULL && pfn == exp
                         : rc == CUDA_ERROR_NOT_FOUND && pfn == NULL &&
                               st == (known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        if (!good) {
            bad++;
            diag("%s ver=%d flags=%llu: rc %d status %d pfn %p; want %s (%p)", name, ver, flags, (int)rc, (int)st,
                 pfn, want ? want : "not found", exp);
            continue;
        }
        wrapped += in_lib(pfn, "librota");
    }
    ok(n == 439, "cudart 13's %d lookups read from the facts", n);
    is_int(bad, 0, "every lookup gets a CUDA 13 driver's answer: the variant for its version and flags");
    ok(wrapped > 20, "%d of them are librota's wrappers (the wrapped names), the rest simcuda's own functions",
       wrapped);
}

static void check_cublaslt(void *drv, FILE *f)
{
    char name[128];
    int n = 0, bad = 0, wrapped = 0;
    while (fscanf(f, "%127s", name) == 1) {
        n++;
        void *p = dlsym(drv, name), *exp = expected_pointer(drv, name);
        if (p == NULL || p != exp) {
            bad++;
            diag("dlsym(libcuda.so.1, %s) = %p, want %p", name, p, exp);
        }
        wrapped += in_lib(p, "librota");
    }
    ok(n == 83, "cuBLASLt 13's %d dlsym names read from the facts", n);
    is_int(bad, 0, "each resolves on the dlopen(\"libcuda.so.1\") handle, to librota's wrapper where rota wraps it");
    ok(wrapped >= 5, "%d of them are librota's wrappers", wrapped);
}

static void check_pytorch(getproc_fn getproc, FILE *f)
{
    char line[256], name[128];
    int n = 0, bad = 0;
    while (fgets(line, sizeof(line), f)) {
        int ver;
        if (line[0] == '#' || sscanf(line, "%127s %d", name, &ver) != 2) continue;
        n++;
        void *pfn = NULL;
        CUdriverProcAddressQueryResult st = -1;
        CUresult rc = getproc(name, &pfn, ver, CU_GET_PROC_ADDRESS_DEFAULT, &st);
        if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || pfn == NULL) {
            bad++;
            diag("PyTorch's %s at %d: rc %d status %d", name, ver, (int)rc, (int)st);
        }
    }
    ok(n == 18, "PyTorch's %d required entry points read from the facts", n);
    is_int(bad, 0, "all resolve at version 12000");
}

int main(int argc, char **argv)
{
    (void)argc;
    FILE *lookups = open_fact("cudart13-lookups.txt"), *lt = open_fact("cublaslt13-dlsym.txt"),
         *pt = open_fact("pytorch-driver-entry-points.txt");
    shim_preload_self(argv, "conformance");
    atexit(shim_cleanup);
    alarm(30);
    plan(13);
    shim_dev_t d;
    shim_dev_init(&d);
    on_simcuda = d.simcuda;
    need_cu(cuDriverGetVersion(&driver_version));

    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv == NULL) bail("dlopen libcuda.so.1: %s", dlerror());
    getproc_fn getproc = (getproc_fn)dlsym(drv, "cuGetProcAddress_v2");
    ok(in_lib((void *)getproc, "librota"), "dlsym(libcuda.so.1, \"cuGetProcAddress_v2\") is librota's");

    check_cudart(drv, getproc, lookups);
    check_cublaslt(drv, lt);
    check_pytorch(getproc, pt);

    if (!on_simcuda) {
        for (int i = 0; i < 4; i++) skip("simcuda's stubs and its version rules");
        shim_dev_fini(&d);
        return done_testing();
    }
    /* Not simulated: found, and answers CUDA_ERROR_NOT_SUPPORTED; a version before the first variant. */
    CUresult (*arr)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *) = NULL;
    CUdriverProcAddressQueryResult st = -1;
    is_int(getproc("cuArrayCreate", (void **)&arr, 13000, 0, &st), CUDA_SUCCESS, "cuArrayCreate is found");
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR desc = {0};
    is_int(arr ? (int)arr(&a, &desc) : -1, CUDA_ERROR_NOT_SUPPORTED, "and, not simulated, answers CUDA_ERROR_NOT_SUPPORTED");
    void *p = (void *)1;
    is_int(getproc("cuMemAllocAsync", &p, 11000, 0, &st), CUDA_ERROR_NOT_FOUND,
           "cuMemAllocAsync at 11000 (before its first variant): CUDA_ERROR_NOT_FOUND");
    ok(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "with NULL and VERSION_NOT_SUFFICIENT");
    shim_dev_fini(&d);
    return done_testing();
}
