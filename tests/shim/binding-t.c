/* binding-t.c - every way a program binds to the driver x every launch and allocation variant reaches rota. */
#include "tests/shim/shim-test.h"

/*
 * Paths: a direct call (-lcuda), dlopen("libcuda.so.1") + dlsym, dlopen("libcuda.so") + dlsym, dlsym of
 * RTLD_DEFAULT and RTLD_NEXT, dlvsym, cuGetProcAddress_v2 and cuGetProcAddress with each flags value.
 * For each (path, variant) the pointer obtained is called once, and rota's test counters must show exactly
 * one more hooked call of that exact variant - not of its legacy or per-thread sibling - and one more call of
 * the family's hook (launch gate, memory reserve, memory release).
 *
 * Which variants the driver has is found before librota is loaded (plain dlsym in the first, unpreloaded
 * image, passed on in ROTA_SHIM_TEST_PRESENT): for a variant the driver lacks, every dlsym path must give
 * NULL as it would without rota, and a direct call reaches the wrapper and returns CUDA_ERROR_NOT_SUPPORTED.
 * The expected cuGetProcAddress answers are written out here (request version per variant), not derived
 * from rota's table.
 */
/* Names a driver may lack (simcuda has none of these): weak, so this program links with any driver; under
 * librota they resolve to its wrappers. */
#pragma weak cuLaunch
#pragma weak cuLaunchGrid
#pragma weak cuLaunchGridAsync
#pragma weak cuLaunchCooperativeKernelMultiDevice
#pragma weak cuMemAllocPitch

enum kind { K_LAUNCH, K_ALLOC, K_FREE };
typedef struct variant {
    const char *name, *base;
    int pt;
    int req_ver; /* the cudaVersion for which cuGetProcAddress(base) is this variant */
    int kind;
} variant_t;

static const variant_t variants[] = {
    {"cuLaunchKernel", "cuLaunchKernel", 0, 13000, K_LAUNCH},
    {"cuLaunchKernel_ptsz", "cuLaunchKernel", 1, 13000, K_LAUNCH},
    {"cuLaunchKernelEx", "cuLaunchKernelEx", 0, 13000, K_LAUNCH},
    {"cuLaunchKernelEx_ptsz", "cuLaunchKernelEx", 1, 13000, K_LAUNCH},
    {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 0, 13000, K_LAUNCH},
    {"cuLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel", 1, 13000, K_LAUNCH},
    {"cuGraphLaunch", "cuGraphLaunch", 0, 13000, K_LAUNCH},
    {"cuGraphLaunch_ptsz", "cuGraphLaunch", 1, 13000, K_LAUNCH},
    {"cuLaunch", "cuLaunch", 0, 2000, K_LAUNCH},
    {"cuLaunchGrid", "cuLaunchGrid", 0, 2000, K_LAUNCH},
    {"cuLaunchGridAsync", "cuLaunchGridAsync", 0, 2000, K_LAUNCH},
    {"cuLaunchCooperativeKernelMultiDevice", "cuLaunchCooperativeKernelMultiDevice", 0, 9000, K_LAUNCH},
    {"cuMemAlloc", "cuMemAlloc", 0, 2000, K_ALLOC},
    {"cuMemAlloc_v2", "cuMemAlloc", 0, 13000, K_ALLOC},
    {"cuMemAllocPitch", "cuMemAllocPitch", 0, 2000, K_ALLOC},
    {"cuMemAllocPitch_v2", "cuMemAllocPitch", 0, 13000, K_ALLOC},
    {"cuMemAllocManaged", "cuMemAllocManaged", 0, 13000, K_ALLOC},
    {"cuMemAllocAsync", "cuMemAllocAsync", 0, 13000, K_ALLOC},
    {"cuMemAllocAsync_ptsz", "cuMemAllocAsync", 1, 13000, K_ALLOC},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 0, 13000, K_ALLOC},
    {"cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync", 1, 13000, K_ALLOC},
    {"cuMemCreate", "cuMemCreate", 0, 13000, K_ALLOC},
    {"cuMemFree", "cuMemFree", 0, 2000, K_FREE},
    {"cuMemFree_v2", "cuMemFree", 0, 13000, K_FREE},
    {"cuMemFreeAsync", "cuMemFreeAsync", 0, 13000, K_FREE},
    {"cuMemFreeAsync_ptsz", "cuMemFreeAsync", 1, 13000, K_FREE},
    {"cuMemRelease", "cuMemRelease", 0, 13000, K_FREE},
};
#define NVAR ((int)(sizeof(variants) / sizeof(variants[0])))
/* A request version, capped at the driver's (shim_ask_version): the variants asked for at 13000 are the same
 * from CUDA 12.0 on. */
#define ASK(v) ((v) < ask_version ? (v) : ask_version)
static int ask_version = 13000;

static shim_dev_t d;
static CUstream stream;
static CUgraphExec gexec;
static CUmemoryPool pool;
static CUmemAllocationProp vmm_prop;
static size_t vmm_size;
static CUdeviceptr buf;

/* Calls variant v through fn (NULL: by name, a direct call) with valid arguments; allocations are freed
 * and frees are given something to free, by direct calls of other names. */
#define FN(name) (fn ? (__typeof__(&name))fn : &name)
static CUresult call_variant(const variant_t *v, void *fn)
{
    const char *n = v->name;
    uint32_t val = 7;
    uint64_t cnt = 64;
    void *args[] = {&buf, &val, &cnt};
    CUresult rc;

    if (!strcmp(n, "cuLaunchKernel")) return FN(cuLaunchKernel)(d.fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL);
    if (!strcmp(n, "cuLaunchKernel_ptsz"))
        return FN(cuLaunchKernel_ptsz)(d.fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL);
    if (!strncmp(n, "cuLaunchKernelEx", 16)) {
        CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                              .blockDimZ = 1, .hStream = stream};
        return v->pt ? FN(cuLaunchKernelEx_ptsz)(&cfg, d.fill, args, NULL)
                     : FN(cuLaunchKernelEx)(&cfg, d.fill, args, NULL);
    }
    if (!strcmp(n, "cuLaunchCooperativeKernel"))
        return FN(cuLaunchCooperativeKernel)(d.fill, 1, 1, 1, 64, 1, 1, 0, stream, args);
    if (!strcmp(n, "cuLaunchCooperativeKernel_ptsz"))
        return FN(cuLaunchCooperativeKernel_ptsz)(d.fill, 1, 1, 1, 64, 1, 1, 0, stream, args);
    if (!strcmp(n, "cuGraphLaunch")) return FN(cuGraphLaunch)(gexec, stream);
    if (!strcmp(n, "cuGraphLaunch_ptsz")) return FN(cuGraphLaunch_ptsz)(gexec, stream);
    if (!strcmp(n, "cuLaunch")) return FN(cuLaunch)(d.fill);
    if (!strcmp(n, "cuLaunchGrid")) return FN(cuLaunchGrid)(d.fill, 1, 1);
    if (!strcmp(n, "cuLaunchGridAsync")) return FN(cuLaunchGridAsync)(d.fill, 1, 1, stream);
    if (!strcmp(n, "cuLaunchCooperativeKernelMultiDevice")) {
        CUDA_LAUNCH_PARAMS lp = {.function = d.fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
                                 .blockDimY = 1, .blockDimZ = 1, .hStream = stream, .kernelParams = args};
        return FN(cuLaunchCooperativeKernelMultiDevice)(&lp, 1, 0);
    }
    if (!strcmp(n, "cuMemAlloc")) {
        CUdeviceptr_v1 p = 0;
        rc = FN(cuMemAlloc)(&p, 4096);
        if (rc == CUDA_SUCCESS) cuMemFree(p);
        return rc;
    }
    if (!strcmp(n, "cuMemAllocPitch")) {
        CUdeviceptr_v1 p = 0;
        unsigned pitch;
        rc = FN(cuMemAllocPitch)(&p, &pitch, 100, 4, 4);
        if (rc == CUDA_SUCCESS) cuMemFree(p);
        return rc;
    }
    CUdeviceptr p = 0;
    if (!strcmp(n, "cuMemAlloc_v2")) rc = FN(cuMemAlloc_v2)(&p, 4096);
    else if (!strcmp(n, "cuMemAllocPitch_v2")) {
        size_t pitch;
        rc = FN(cuMemAllocPitch_v2)(&p, &pitch, 100, 4, 4);
    } else if (!strcmp(n, "cuMemAllocManaged")) rc = FN(cuMemAllocManaged)(&p, 4096, CU_MEM_ATTACH_GLOBAL);
    else if (!strcmp(n, "cuMemAllocAsync")) rc = FN(cuMemAllocAsync)(&p, 4096, stream);
    else if (!strcmp(n, "cuMemAllocAsync_ptsz")) rc = FN(cuMemAllocAsync_ptsz)(&p, 4096, stream);
    else if (!strcmp(n, "cuMemAllocFromPoolAsync")) rc = FN(cuMemAllocFromPoolAsync)(&p, 4096, pool, stream);
    else if (!strcmp(n, "cuMemAllocFromPoolAsync_ptsz")) rc = FN(cuMemAllocFromPoolAsync_ptsz)(&p, 4096, pool, stream);
    else if (!strcmp(n, "cuMemCreate")) {
        CUmemGenericAllocationHandle h;
        rc = FN(cuMemCreate)(&h, vmm_size, &vmm_prop, 0);
        if (rc == CUDA_SUCCESS) cuMemRelease(h);
        return rc;
    } else if (!strcmp(n, "cuMemFree")) {
        return FN(cuMemFree)(0); /* nothing 32-bit to free on a 64-bit driver: an error, still a call */
    } else if (!strcmp(n, "cuMemFree_v2")) {
        need_cu(cuMemAlloc_v2(&p, 4096));
        return FN(cuMemFree_v2)(p);
    } else if (!strncmp(n, "cuMemFreeAsync", 14)) {
        need_cu(cuMemAllocAsync(&p, 4096, stream));
        rc = v->pt ? FN(cuMemFreeAsync_ptsz)(p, stream) : FN(cuMemFreeAsync)(p, stream);
        cuStreamSynchronize(stream);
        return rc;
    } else if (!strcmp(n, "cuMemRelease")) {
        CUmemGenericAllocationHandle h;
        need_cu(cuMemCreate(&h, vmm_size, &vmm_prop, 0));
        return FN(cuMemRelease)(h);
    } else {
        bail("no call for %s", n);
    }
    /* the stream-ordered and plain allocations above */
    if (rc == CUDA_SUCCESS) {
        if (strstr(n, "Async")) {
            cuMemFreeAsync(p, stream);
            cuStreamSynchronize(stream);
        } else {
            cuMemFree_v2(p);
        }
    }
    return rc;
}
#undef FN

typedef struct snap {
    uint64_t self, sibling, gate, after, reserve, commit, abort_, release;
} snap_t;

static const char *sibling_of(const variant_t *v)
{
    for (int i = 0; i < NVAR; i++)
        if (&variants[i] != v && !strcmp(variants[i].base, v->base) && variants[i].pt != v->pt) return variants[i].name;
    return NULL;
}

static snap_t take(const variant_t *v)
{
    const char *sib = sibling_of(v);
    snap_t s = {shim_hits(v->name), sib ? shim_hits(sib) : 0, shim_hits("rota.launch_gate"),
                shim_hits("rota.launch_after"), shim_hits("rota.mem_reserve"), shim_hits("rota.mem_commit"),
                shim_hits("rota.mem_abort"), shim_hits("rota.mem_release")};
    return s;
}

/* Calls v through fn and checks that exactly the wrapper of v and its family's hook ran once. */
static void check_call(const variant_t *v, void *fn, const char *path)
{
    snap_t a = take(v);
    CUresult rc = call_variant(v, fn);
    snap_t b = take(v);
    bool hook;
    if (v->kind == K_LAUNCH) hook = b.gate - a.gate == 1 && b.after - a.after == 1;
    else if (v->kind == K_ALLOC)
        hook = b.reserve - a.reserve == 1 && b.commit - a.commit == (rc == CUDA_SUCCESS) &&
               b.abort_ - a.abort_ == (rc != CUDA_SUCCESS);
    else hook = b.release - a.release == (uint64_t)(rc == CUDA_SUCCESS);
    if (!ok(b.self - a.self == 1 && b.sibling == a.sibling && hook, "%s via %s reaches its wrapper and hook (rc %d)",
            v->name, path, (int)rc))
        diag("self +%llu, sibling +%llu, gate +%llu after +%llu reserve +%llu commit +%llu abort +%llu release +%llu",
             (unsigned long long)(b.self - a.self), (unsigned long long)(b.sibling - a.sibling),
             (unsigned long long)(b.gate - a.gate), (unsigned long long)(b.after - a.after),
             (unsigned long long)(b.reserve - a.reserve), (unsigned long long)(b.commit - a.commit),
             (unsigned long long)(b.abort_ - a.abort_), (unsigned long long)(b.release - a.release));
}

static void setup(void)
{
    CUgraph g;
    shim_dev_init(&d);
    need_cu(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    need_cu(cuMemAlloc_v2(&buf, 4096));
    need_cu(cuDeviceGetDefaultMemPool(&pool, d.dev));
    need_cu(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    uint32_t val = 9;
    uint64_t cnt = 64;
    void *args[] = {&buf, &val, &cnt};
    need_cu(cuLaunchKernel(d.fill, 1, 1, 1, 64, 1, 1, 0, stream, args, NULL));
    need_cu(cuStreamEndCapture(stream, &g));
    need_cu(cuGraphInstantiateWithFlags(&gexec, g, 0));
    cuGraphDestroy(g);
    vmm_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vmm_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vmm_prop.location.id = d.dev;
    need_cu(cuMemGetAllocationGranularity(&vmm_size, &vmm_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

/* Before librota: which variants the driver has, as a string of 0/1 (dlsym) and the same for dlvsym. */
static void probe_driver(void)
{
    static char bits[2 * NVAR + 2];
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) bail("dlopen libcuda.so.1: %s", dlerror());
    for (int i = 0; i < NVAR; i++) {
        bits[i] = dlsym(h, variants[i].name) ? '1' : '0';
        bits[NVAR + 1 + i] = dlvsym(h, variants[i].name, "libcuda.so.1") ? '1' : '0';
    }
    bits[NVAR] = ':';
    setenv("ROTA_SHIM_TEST_PRESENT", bits, 1);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!getenv(SHIM_TEST_MARK)) probe_driver();
    shim_preload_self(argv, "binding");
    const char *present = getenv("ROTA_SHIM_TEST_PRESENT");
    if (present == NULL || strlen(present) != 2 * NVAR + 1) bail("ROTA_SHIM_TEST_PRESENT is missing");
    alarm(60);
    setup();
    ask_version = shim_ask_version();

    void *h1 = dlopen("libcuda.so.1", RTLD_NOW), *h0 = dlopen("libcuda.so", RTLD_LAZY);
    if (h1 == NULL || h0 == NULL) bail("dlopen libcuda: %s", dlerror());
    ok(h0 == h1, "libcuda.so and libcuda.so.1 are one library");

    for (int i = 0; i < NVAR; i++) {
        const variant_t *v = &variants[i];
        bool has = present[i] == '1', vhas = present[NVAR + 1 + i] == '1';
        void *self = dlsym(RTLD_DEFAULT, v->name);
        void *p1 = dlsym(h1, v->name), *p0 = dlsym(h0, v->name), *pn = dlsym(RTLD_NEXT, v->name);
        void *pv = dlvsym(h1, v->name, "libcuda.so.1");
        Dl_info di;

        if (!has) {
            ok(self == NULL && p1 == NULL && p0 == NULL && pn == NULL && pv == NULL,
               "%s: the driver lacks it, and so does every dlsym path", v->name);
            CUresult rc = call_variant(v, NULL);
            is_int(rc, CUDA_ERROR_NOT_SUPPORTED, "%s: a direct call reaches rota's stand-in", v->name);
            continue;
        }
        ok(self != NULL && dladdr(self, &di) && di.dli_fname && strstr(di.dli_fname, "librota"),
           "%s: RTLD_DEFAULT gives rota's wrapper", v->name);
        ok(p1 == self && p0 == self && pn == self,
           "%s: dlsym of libcuda.so.1, libcuda.so and RTLD_NEXT give the same wrapper", v->name);
        ok(vhas ? pv == self : pv == NULL, "%s: dlvsym gives %s, as the driver does", v->name,
           vhas ? "the wrapper" : "NULL");

        check_call(v, NULL, "a direct call");
        check_call(v, p1, "dlsym(libcuda.so.1)");
        check_call(v, p0, "dlsym(libcuda.so)");
        check_call(v, pn, "dlsym(RTLD_NEXT)");

        /* cuGetProcAddress: the legacy variant for DEFAULT and LEGACY, the per-thread one for PER_THREAD;
         * a name without a per-thread sibling is the same variant for all three. */
        bool has_sib = sibling_of(v) != NULL;
        cuuint64_t flags_list[3];
        int nflags = 0;
        if (v->pt) flags_list[nflags++] = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        else {
            flags_list[nflags++] = CU_GET_PROC_ADDRESS_DEFAULT;
            flags_list[nflags++] = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
            if (!has_sib) flags_list[nflags++] = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        }
        for (int f = 0; f < nflags; f++) {
            void *pp = NULL, *pq = NULL;
            CUdriverProcAddressQueryResult st = -1;
            char path[128];
            CUresult r2 = cuGetProcAddress_v2(v->base, &pp, ASK(v->req_ver), flags_list[f], &st);
            CUresult r1 = cuGetProcAddress(v->base, &pq, ASK(v->req_ver), flags_list[f]);
            ok(r2 == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && pp == self && r1 == CUDA_SUCCESS &&
                   pq == self,
               "%s: cuGetProcAddress(_v2)(%s, %d, flags %llu) gives its wrapper", v->name, v->base, ASK(v->req_ver),
               (unsigned long long)flags_list[f]);
            snprintf(path, sizeof(path), "cuGetProcAddress_v2(flags %llu)", (unsigned long long)flags_list[f]);
            check_call(v, pp ? pp : self, path);
            snprintf(path, sizeof(path), "cuGetProcAddress(flags %llu)", (unsigned long long)flags_list[f]);
            check_call(v, pq ? pq : self, path);
        }
    }

    /* symbolStatus may be NULL; asking for cuGetProcAddress itself gives rota's. */
    void *gp = NULL;
    ok(cuGetProcAddress_v2("cuGetProcAddress", &gp, ASK(13000), 0, NULL) == CUDA_SUCCESS &&
           gp == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"),
       "cuGetProcAddress(\"cuGetProcAddress\", %d) with a NULL symbolStatus gives rota's cuGetProcAddress_v2",
       ASK(13000));
    ok(cuGetProcAddress_v2("cuGetProcAddress", &gp, 11030, 0, NULL) == CUDA_SUCCESS &&
           gp == dlsym(RTLD_DEFAULT, "cuGetProcAddress"),
       "cuGetProcAddress(\"cuGetProcAddress\", 11030) gives rota's cuGetProcAddress");
    /* An unwrapped name is the driver's own function. */
    void *um = NULL;
    Dl_info di;
    ok(cuGetProcAddress_v2("cuModuleGetFunction", &um, ASK(13000), 0, NULL) == CUDA_SUCCESS && um != NULL &&
           dladdr(um, &di) && di.dli_fname && strstr(di.dli_fname, "librota") == NULL &&
           um == dlsym(h1, "cuModuleGetFunction"),
       "an unwrapped name (cuModuleGetFunction) is the driver's own function");
    CUdriverProcAddressQueryResult st = -1;
    um = &um;
    ok(cuGetProcAddress_v2("cuNoSuchFunction", &um, ASK(13000), 0, &st) == CUDA_ERROR_NOT_FOUND &&
           st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
       "an unknown name is CUDA_ERROR_NOT_FOUND with SYMBOL_NOT_FOUND, as from the driver");

    cuGraphExecDestroy(gexec);
    cuMemFree_v2(buf);
    cuStreamDestroy_v2(stream);
    shim_dev_fini(&d);
    shim_cleanup();
    return done_testing();
}
