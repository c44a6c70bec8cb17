/* memq-t.c - TAP tests of rota's memory queue with caching allocators and pools (docs/design/memory.md): a request
 * past the process's own limit never waits, a PyTorch-like retry is served from its own released cache at once or
 * waits for others, plain programs keep queue-instead-of-OOM, and a pool's reserve stays counted until trimmed.
 * Clients are this program re-executed with LD_PRELOAD=librota.so over simcuda, driven line by line. */
#include "runtime/lib/conn.h"
#include "runtime/lib/parse.h"
#include "tests/runtime/rotad-helpers.h"

#include <cuda.h>
#include <dlfcn.h>

/* ---- the client side ---------------------------------------------------------------------------------------- */

static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_cuMemFreeAsync)(CUdeviceptr, CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuDeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
static CUresult (*p_cuMemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
static CUresult (*p_cuMemPoolTrimTo)(CUmemoryPool, size_t);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void **, void **);
static CUresult (*p_cuCtxSynchronize)(void);

static int (*p_fake_c10_malloc)(unsigned long long, unsigned long long *);

/* An allocation from inside the fake libc10_cuda.so (after "c10load"), or directly. */
static CUresult client_alloc(CUdeviceptr *p, uint64_t b, bool c10)
{
    if (!c10) return p_cuMemAlloc(p, b);
    unsigned long long x = 0;
    int rc = p_fake_c10_malloc(b, &x);
    *p = (CUdeviceptr)x;
    return (CUresult)rc;
}

static CUdeviceptr ptrs[64];
static int nptr, npinned; /* ptrs[0..npinned) are in use ("pin"), the rest is cache */

/* A caching allocator's malloc in miniature: on OOM, free every cached block (all this client holds, unless keep:
 * then all it holds is in use) and try once more, as PyTorch's release_cached_blocks + last attempt. Prints
 * "rc attempts ms". */
static void client_torch(uint64_t b, bool keep, bool slow, bool c10)
{
    uint64_t t0 = tap_now_ns();
    CUdeviceptr p = 0;
    int attempts = 1;
    CUresult rc = client_alloc(&p, b, c10);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        if (slow) usleep(1500000); /* a long synchronisation before the frees */
        while (nptr > npinned && !keep) p_cuMemFree(ptrs[--nptr]);
        attempts++;
        rc = client_alloc(&p, b, c10);
    }
    if (!rc && nptr < 64) ptrs[nptr++] = p;
    printf("%d %d %.0f\n", (int)rc, attempts, (double)(tap_now_ns() - t0) / 1e6);
}

static int child_main(void)
{
    if (!th_cuda_load()) return 2;
    p_cuMemAlloc = th_sym("cuMemAlloc_v2");
    p_cuMemFree = th_sym("cuMemFree_v2");
    p_cuMemAllocAsync = th_sym("cuMemAllocAsync");
    p_cuMemFreeAsync = th_sym("cuMemFreeAsync");
    p_cuStreamSynchronize = th_sym("cuStreamSynchronize");
    p_cuDeviceGetDefaultMemPool = th_sym("cuDeviceGetDefaultMemPool");
    p_cuMemPoolSetAttribute = th_sym("cuMemPoolSetAttribute");
    p_cuMemPoolTrimTo = th_sym("cuMemPoolTrimTo");
    p_cuLaunchKernel = th_sym("cuLaunchKernel");
    p_cuCtxSynchronize = th_sym("cuCtxSynchronize");
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUresult rc = th_cuda_ctx(&dev);
    printf("init %d\n", (int)rc);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char arg[64] = "";
        uint64_t b = 0;
        if (sscanf(line, "alloc %63s", arg) == 1 || sscanf(line, "c10alloc %63s", arg) == 1) {
            parse_size(arg, 1, UINT64_MAX, &b);
            uint64_t t0 = tap_now_ns();
            CUdeviceptr p = 0;
            rc = client_alloc(&p, b, line[0] == 'c');
            if (!rc && nptr < 64) ptrs[nptr++] = p;
            printf("%d %.0f\n", (int)rc, (double)(tap_now_ns() - t0) / 1e6);
        } else if (sscanf(line, "torch %63s", arg) == 1 || sscanf(line, "c10torch %63s", arg) == 1) {
            parse_size(arg, 1, UINT64_MAX, &b);
            client_torch(b, strstr(line, " keep") != NULL, strstr(line, " slow") != NULL, line[0] == 'c');
        } else if (!strncmp(line, "c10load", 7)) {
            char path[512];
            snprintf(path, sizeof path, "%s/tests/fake/libc10_cuda.so", getenv("ROTA_BUILD"));
            void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            p_fake_c10_malloc = h ? (int (*)(unsigned long long, unsigned long long *))dlsym(h, "fake_c10_malloc")
                                  : NULL;
            printf("%d\n", p_fake_c10_malloc ? 0 : 1);
        } else if (!strncmp(line, "freeall", 7)) {
            while (nptr) p_cuMemFree(ptrs[--nptr]);
            npinned = 0;
            printf("0\n");
        } else if (!strncmp(line, "pin", 3)) {
            npinned = nptr;
            printf("0\n");
        } else if (sscanf(line, "pool %63s", arg) == 1) {
            /* stream-ordered alloc and free from the default pool, which keeps everything (as PyTorch's
             * cudaMallocAsync backend sets it), then a sync: the pool still holds the memory */
            parse_size(arg, 1, UINT64_MAX, &b);
            CUmemoryPool pool;
            cuuint64_t keep = UINT64_MAX;
            CUdeviceptr p = 0;
            rc = p_cuDeviceGetDefaultMemPool(&pool, dev);
            if (!rc) rc = p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
            if (!rc) rc = p_cuMemAllocAsync(&p, b, NULL);
            if (!rc) rc = p_cuMemFreeAsync(p, NULL);
            if (!rc) rc = p_cuStreamSynchronize(NULL);
            printf("%d\n", (int)rc);
        } else if (sscanf(line, "behind %63s", arg) == 1) {
            /* a free queued behind a 1 s kernel, from the default pool with a release threshold of 0 */
            parse_size(arg, 1, UINT64_MAX, &b);
            static CUfunction spin;
            static CUstream st;
            CUmemoryPool pool;
            cuuint64_t keep = 0;
            uint64_t ns = 1000000000ull;
            void *args[] = {&ns};
            CUdeviceptr p = 0;
            rc = spin ? CUDA_SUCCESS : th_cuda_spin(&spin, &st);
            if (!rc) rc = p_cuDeviceGetDefaultMemPool(&pool, dev);
            if (!rc) rc = p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
            if (!rc) rc = p_cuMemAllocAsync(&p, b, st);
            if (!rc) rc = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
            if (!rc) rc = p_cuMemFreeAsync(p, st);
            printf("%d\n", (int)rc);
        } else if (sscanf(line, "apool %63s", arg) == 1) {
            /* a stream-ordered allocation, kept: "rc ms" */
            parse_size(arg, 1, UINT64_MAX, &b);
            uint64_t t0 = tap_now_ns();
            CUdeviceptr p = 0;
            rc = p_cuMemAllocAsync(&p, b, NULL);
            printf("%d %.0f\n", (int)rc, (double)(tap_now_ns() - t0) / 1e6);
        } else if (!strncmp(line, "sync", 4)) {
            printf("%d\n", (int)p_cuCtxSynchronize());
        } else if (!strncmp(line, "trim", 4)) {
            CUmemoryPool pool;
            rc = p_cuDeviceGetDefaultMemPool(&pool, dev);
            if (!rc) rc = p_cuMemPoolTrimTo(pool, 0);
            printf("%d\n", (int)rc);
        } else if (!strncmp(line, "exit", 4)) {
            break;
        }
    }
    return 0;
}

/* ---- the test side ------------------------------------------------------------------------------------------- */

typedef th_child_t child_t;

static char node[64];

static void spawn(child_t *c, const char *const *env)
{
    th_spawn(c, "ROTA_MEMQ_T_CHILD", "memq-t-client", node, "info", env);
    th_ready(c, "a client did not initialise under librota + rotad");
}

/* "alloc SIZE" (or torch SIZE): rc, and the ms it took (and attempts for torch) */
static int say_rc(child_t *c, const char *cmd, int ms, double *took, int *attempts)
{
    const char *r = th_say(c, cmd, ms);
    int rc = -1, n = 1;
    double t = -1;
    if (attempts ? sscanf(r, "%d %d %lf", &rc, &n, &t) != 3 : sscanf(r, "%d %lf", &rc, &t) != 2) rc = -1;
    if (took) *took = t;
    if (attempts) *attempts = n;
    return rc;
}

/* a command answered by a bare result code ("freeall", "pool", "trim") */
static int say_code(child_t *c, const char *cmd, int ms)
{
    const char *r = th_say(c, cmd, ms);
    int rc = -1;
    if (sscanf(r, "%d", &rc) != 1) rc = -1;
    return rc;
}

#define M (UINT64_C(1) << 20)

int main(void)
{
    if (getenv("ROTA_MEMQ_T_CHILD")) return child_main();
    signal(SIGPIPE, SIG_IGN);
    const char *lib = th_librota_missing();
    if (lib) skip_all("librota.so is not built (%s)", lib);
    th_setup("memq");
    snprintf(node, sizeof node, "memq-t-%d", (int)getpid());
    pid_t rotad = th_rotad_start();
    child_t a, b, c;
    double took = 0;
    int attempts = 0;

    /* 1. past the process's own limit: refused at once, not after ROTA_MEM_WAIT (nobody else can make room) */
    const char *lim[] = {"ROTA_MEM_LIMIT=256M", "ROTA_MEM_WAIT=5", "ROTA_MEM_RETRY=off", NULL};
    spawn(&a, lim);
    is_int(say_rc(&a, "alloc 200M", 5000, NULL, NULL), 0, "200M under a 256M limit");
    is_int(say_rc(&a, "alloc 100M", 8000, &took, NULL), CUDA_ERROR_OUT_OF_MEMORY, "300M over the 256M limit: OOM");
    ok(took >= 0 && took < 1000, "at once, though it may wait 5 s (%.0f ms): only its own frees could make room",
       took);
    const char *whole[] = {"ROTA_MEM_WAIT=5", "ROTA_MEM_RETRY=on", NULL};
    spawn(&b, whole);
    is_int(say_rc(&b, "alloc 600M", 5000, NULL, NULL), 0, "B (torch-like) holds 600M of the 1G GPU, all in use");
    is_int(say_rc(&b, "torch 500M keep", 8000, &took, &attempts), CUDA_ERROR_OUT_OF_MEMORY,
           "B's 500M more, which the GPU cannot hold beside its own 600M: OOM");
    is_int(attempts, 2, "after its retry");
    ok(took >= 0 && took < 1000, "at once (%.0f ms): it would only wait on itself", took);
    th_finish(&a);
    th_finish(&b);

    /* 2. a caching allocator (ROTA_MEM_RETRY=on) whose own cache makes room: served from it at once, ahead of a
     *    plain client already queued */
    const char *plain[] = {"ROTA_MEM_WAIT=10", "ROTA_MEM_RETRY=off", NULL};
    const char *torch[] = {"ROTA_MEM_WAIT=10", "ROTA_MEM_RETRY=on", NULL};
    spawn(&a, torch);
    spawn(&b, plain);
    spawn(&c, plain);
    is_int(say_rc(&b, "alloc 500M", 5000, NULL, NULL), 0, "B holds 500M");
    is_int(say_rc(&a, "alloc 400M", 5000, NULL, NULL), 0, "A (torch-like) caches 400M");
    fprintf(c.to, "alloc 300M\n"); /* C queues: 100M are left */
    usleep(200000);
    is_int(say_rc(&a, "torch 300M", 8000, &took, &attempts), 0, "A's 300M is granted");
    is_int(attempts, 2, "at its second attempt: the first failed fast and it released its cache");
    ok(took >= 0 && took < 1000, "well under a second (%.0f ms), though C waits for the same memory", took);
    is_str(th_say(&c, NULL, 100), "", "C still waits (A's released cache went to A's retry)");
    is_int(say_code(&b, "freeall", 5000), 0, "B frees its 500M");
    is_int(say_rc(&c, NULL, 5000, NULL, NULL), 0, "C's queued 300M is granted");

    /* 3. a caching allocator whose cache is not enough: it waits for others and succeeds */
    is_int(say_code(&a, "freeall", 5000), 0, "A frees its 300M");
    child_t e;
    spawn(&e, torch);
    is_int(say_rc(&e, "alloc 300M", 5000, NULL, NULL), 0, "E (torch-like) caches 300M");
    is_int(say_rc(&b, "alloc 400M", 5000, NULL, NULL), 0, "B holds 400M again (C 300M, E 300M)");
    fprintf(e.to, "torch 400M\n");
    usleep(300000);
    is_int(say_code(&b, "freeall", 5000), 0, "B frees while E waits");
    is_int(say_rc(&e, NULL, 8000, &took, &attempts), 0, "E's 400M, beyond its own 300M, waited and is granted");
    is_int(attempts, 2, "at its second attempt");
    ok(took >= 250 && took < 5000, "after B's free (%.0f ms)", took);
    is_int(say_code(&e, "freeall", 5000), 0, "E frees");
    is_int(say_code(&c, "freeall", 5000), 0, "C frees");
    th_finish(&e);

    /* 3b. a retry that comes long after the refusal (a slow synchronisation) queues: it is never refused twice */
    spawn(&e, torch);
    is_int(say_rc(&e, "alloc 100M", 5000, NULL, NULL), 0, "F (torch-like) uses 100M");
    is_int(say_code(&e, "pin", 5000), 0, "(in use, not cache)");
    is_int(say_rc(&e, "alloc 100M", 5000, NULL, NULL), 0, "and caches 100M more");
    is_int(say_rc(&b, "alloc 800M", 5000, NULL, NULL), 0, "B holds 800M");
    fprintf(e.to, "torch 300M slow\n");
    usleep(2000000);
    is_int(say_code(&b, "freeall", 5000), 0, "B frees while F's retry waits");
    is_int(say_rc(&e, NULL, 8000, &took, &attempts), 0, "F's 300M is granted");
    is_int(attempts, 2, "at its second attempt, 1.5 s after the first was refused (%.0f ms in all)", took);
    is_int(say_code(&e, "freeall", 5000), 0, "F frees");
    th_finish(&e);

    /* 4. a plain program (ROTA_MEM_RETRY=auto without PyTorch) holding memory still queues instead of OOM */
    const char *autoenv[] = {"ROTA_MEM_WAIT=10", NULL};
    child_t d;
    spawn(&d, autoenv);
    is_int(say_rc(&d, "alloc 100M", 5000, NULL, NULL), 0, "D (plain, auto) holds 100M");
    is_int(say_rc(&b, "alloc 800M", 5000, NULL, NULL), 0, "B holds 800M");
    fprintf(d.to, "torch 300M\n");
    usleep(300000);
    is_int(say_code(&b, "freeall", 5000), 0, "B frees while D waits");
    is_int(say_rc(&d, NULL, 8000, &took, &attempts), 0, "D's 300M is granted");
    is_int(attempts, 1, "at its first attempt: it queued, it was not refused");
    th_finish(&d);
    is_int(say_code(&a, "freeall", 5000), 0, "A holds nothing");
    th_finish(&a);
    th_finish(&c);

    /* 5. a pool that keeps its memory after the free stays counted: a second process queues for it instead of
     *    being granted by rotad and refused by the device; trimming gives it back */
    spawn(&a, plain);
    is_int(say_code(&a, "pool 600M", 5000), 0, "A: 600M from the default pool (threshold: keep all), "
                                                        "freed and synchronised");
    uint64_t r = th_ledger_reserved();
    ok(r >= 600 * M && r != UINT64_MAX, "the ledger still counts the pool's 600M (%llu)", (unsigned long long)r);
    fprintf(b.to, "alloc 600M\n");
    usleep(300000);
    is_str(th_say(&b, NULL, 100), "", "B's 600M waits (the device really holds A's pool)");
    is_int(say_code(&a, "trim", 5000), 0, "A trims its pool to 0");
    is_int(say_rc(&b, NULL, 5000, &took, NULL), 0, "B's 600M is granted after the trim");
    ok(took >= 250, "having waited (%.0f ms)", took);
    th_finish(&a);

    /* 5b. while another process waits, a synchronisation trims the pool: what it keeps unused goes back */
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    spawn(&a, plain);
    is_int(say_code(&a, "pool 600M", 5000), 0, "A: 600M kept by its pool again");
    fprintf(b.to, "alloc 600M\n");
    usleep(300000);
    is_str(th_say(&b, NULL, 100), "", "B's 600M waits");
    is_int(say_code(&a, "sync", 5000), 0, "A synchronises (it does not trim)");
    is_int(say_rc(&b, NULL, 5000, &took, NULL), 0, "B's 600M is granted: rota trimmed A's pool while B waited");
    r = th_ledger_reserved();
    ok(r >= 600 * M && r < 700 * M, "the ledger counts B's 600M, not A's pool any more (%llu)", (unsigned long long)r);
    th_finish(&a);

    /* 6. a free queued behind a running kernel is not given back before the device frees it */
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    spawn(&a, plain);
    is_int(say_code(&a, "behind 600M", 5000), 0, "A: 600M from the default pool (threshold 0), its free queued "
                                                  "behind a 1 s kernel");
    r = th_ledger_reserved();
    ok(r >= 600 * M && r != UINT64_MAX, "the ledger still counts the 600M (%llu)", (unsigned long long)r);
    fprintf(b.to, "alloc 600M\n");
    usleep(300000);
    is_str(th_say(&b, NULL, 100), "", "B's 600M waits (the device still holds A's 600M)");
    is_int(say_code(&a, "sync", 5000), 0, "A synchronises: the free runs and the pool gives its memory back");
    is_int(say_rc(&b, NULL, 5000, &took, NULL), 0, "B's 600M is granted");
    ok(took >= 250, "having waited (%.0f ms)", took);
    th_finish(&a);

    /* 7. a stream-ordered allocation of a process in retry mode queues: PyTorch's cudaMallocAsync backend raises
     *    OutOfMemoryError at its first failure, it never retries */
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    spawn(&a, torch);
    is_int(say_rc(&a, "alloc 100M", 5000, NULL, NULL), 0, "A (retry mode) holds 100M");
    is_int(say_rc(&b, "alloc 800M", 5000, NULL, NULL), 0, "B holds 800M");
    fprintf(a.to, "apool 300M\n");
    usleep(300000);
    is_str(th_say(&a, NULL, 100), "", "A's stream-ordered 300M waits (it is not refused)");
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    is_int(say_rc(&a, NULL, 5000, &took, NULL), 0, "A's 300M is granted");
    th_finish(&a);

    /* 8. ROTA_MEM_RETRY=auto: retry mode for PyTorch's caching allocator (libc10_cuda.so loaded and on the stack),
     *    not for the same process's other allocations (NCCL's, say) */
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    spawn(&a, autoenv);
    is_int(say_code(&a, "c10load", 5000), 0, "A loads a libc10_cuda.so");
    is_int(say_rc(&a, "alloc 100M", 5000, NULL, NULL), 0, "A holds 100M");
    is_int(say_rc(&b, "alloc 800M", 5000, NULL, NULL), 0, "B holds 800M");
    fprintf(a.to, "alloc 300M\n");
    usleep(300000);
    is_str(th_say(&a, NULL, 100), "", "A's 300M from outside libc10_cuda waits (it is not refused)");
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    is_int(say_rc(&a, NULL, 5000, NULL, NULL), 0, "A's 300M is granted");
    is_int(say_code(&a, "pin", 5000), 0, "A's 400M are in use");
    is_int(say_rc(&a, "c10alloc 100M", 5000, NULL, NULL), 0, "A caches 100M through libc10_cuda");
    is_int(say_rc(&b, "alloc 500M", 5000, NULL, NULL), 0, "B holds 500M");
    fprintf(a.to, "c10torch 300M\n");
    usleep(300000);
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    is_int(say_rc(&a, NULL, 5000, &took, &attempts), 0, "A's 300M through libc10_cuda is granted");
    is_int(attempts, 2, "at its second attempt: the first, from libc10_cuda, was refused at once");
    th_finish(&a);
    th_finish(&b);

    /* 9. ROTA_MEM_RETRY=auto follows PyTorch's allocator configuration: with PYTORCH_NO_CUDA_MEMORY_CACHING or
     *    backend:cudaMallocAsync PyTorch raises OutOfMemoryError at its first refusal (no retry), so a request from
     *    libc10_cuda queues; with backend:native (the caching allocator, among other settings) it is refused once */
    static const char *const torchconf[][3] = {
        {"ROTA_MEM_WAIT=10", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", NULL},
        {"ROTA_MEM_WAIT=10", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False, backend: cudaMallocAsync", NULL},
        {"ROTA_MEM_WAIT=10", "PYTORCH_ALLOC_CONF=backend:cudaMallocAsync", NULL},
        {"ROTA_MEM_WAIT=10", "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,backend:native", NULL},
    };
    for (int k = 0; k < 4; k++) {
        bool retries = k == 3;
        spawn(&a, (const char **)torchconf[k]);
        spawn(&b, plain);
        is_int(say_code(&a, "c10load", 5000), 0, "%s: A loads a libc10_cuda.so", torchconf[k][1]);
        is_int(say_rc(&a, "c10alloc 100M", 5000, NULL, NULL), 0, "  A holds 100M through libc10_cuda");
        is_int(say_rc(&b, "alloc 800M", 5000, NULL, NULL), 0, "  B holds 800M");
        fprintf(a.to, "c10torch 300M\n");
        fflush(a.to);
        usleep(300000);
        if (!retries) is_str(th_say(&a, NULL, 100), "", "  A's 300M through libc10_cuda waits (not refused: no retry)");
        is_int(say_code(&b, "freeall", 5000), 0, "  B frees");
        is_int(say_rc(&a, NULL, 5000, NULL, &attempts), 0, "  A's 300M is granted");
        is_int(attempts, retries ? 2 : 1, "  %s", retries ? "at its second attempt (the caching allocator retries)"
                                                           : "at its first attempt");
        th_finish(&a);
        th_finish(&b);
    }

    /* 10. refused at its own limit, a caching allocator's released cache serves its retry, not a queued job */
    spawn(&a, (const char *[]){"ROTA_MEM_WAIT=10", "ROTA_MEM_RETRY=on", "ROTA_MEM_LIMIT=256M", NULL});
    spawn(&b, plain);
    spawn(&c, plain);
    is_int(say_rc(&b, "alloc 700M", 5000, NULL, NULL), 0, "B holds 700M");
    is_int(say_rc(&a, "alloc 200M", 5000, NULL, NULL), 0, "A (limit 256M) caches 200M");
    fprintf(c.to, "alloc 250M\n"); /* C queues: 124M are left */
    usleep(200000);
    is_int(say_rc(&a, "torch 100M", 5000, &took, &attempts), 0, "A's 100M, past its limit with its cache, is granted");
    is_int(attempts, 2, "after a refusal at its limit");
    ok(took >= 0 && took < 1000, "from its cache, at once (%.0f ms), though C waits", took);
    is_int(say_code(&b, "freeall", 5000), 0, "B frees");
    is_int(say_rc(&c, NULL, 5000, NULL, NULL), 0, "C's 250M is granted");
    th_finish(&a);
    th_finish(&b);
    th_finish(&c);

    /* 9. once its retry is served, a caching allocator's next miss (of the same size) is refused at once again,
     *    and served from its cache: it does not queue holding releasable memory */
    spawn(&a, torch);
    spawn(&b, plain);
    is_int(say_rc(&b, "alloc 700M", 5000, NULL, NULL), 0, "B holds 700M");
    is_int(say_rc(&a, "alloc 200M", 5000, NULL, NULL), 0, "A caches 200M");
    is_int(say_rc(&a, "torch 150M", 5000, &took, &attempts), 0, "A's 150M is granted");
    is_int(attempts, 2, "from its cache, after a refusal");
    is_int(say_code(&a, "pin", 5000), 0, "A's 150M are in use");
    is_int(say_rc(&a, "alloc 150M", 5000, NULL, NULL), 0, "A caches 150M more");
    is_int(say_rc(&a, "torch 150M", 15000, &took, &attempts), 0, "A's next 150M is granted");
    is_int(attempts, 2, "after a refusal again");
    ok(took >= 0 && took < 1000, "from its cache, at once (%.0f ms)", took);
    th_finish(&a);
    th_finish(&b);

    is_int(th_rotad_stop(rotad), 0, "rotad stops");
    th_cleanup_children();
    th_node_remove(node);
    th_cleanup();
    return done_testing();
}
