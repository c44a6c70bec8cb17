/* client-t.c - TAP tests of the client of rotad (shim/client.c) inside librota.so over simcuda, with rotad:
 * limits, the cuMemGetInfo view, the ledger across processes, queue-instead-of-OOM, kill -9 of clients and of
 * rotad, fail-open, ROTA_REQUIRE. Clients are this program re-executed with LD_PRELOAD=librota.so, driven
 * line by line over pipes. */
#include "runtime/lib/conn.h"
#include "runtime/lib/parse.h"
#include "tests/runtime/rotad-helpers.h"

#include <cuda.h>
#include <dlfcn.h>

/* ---- the client side: a tiny command interpreter over the Driver API ------------------------------------ */

static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);

static int child_main(void)
{
    if (!th_cuda_load()) return 2;
    p_cuInit = th_sym("cuInit");
    p_cuDevicePrimaryCtxRetain = th_sym("cuDevicePrimaryCtxRetain");
    p_cuCtxSetCurrent = th_sym("cuCtxSetCurrent");
    p_cuMemAlloc = th_sym("cuMemAlloc_v2");
    p_cuMemFree = th_sym("cuMemFree_v2");
    p_cuMemGetInfo = th_sym("cuMemGetInfo_v2");
    p_cuDeviceTotalMem = th_sym("cuDeviceTotalMem_v2");
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUresult rc = th_cuda_ctx(&dev);
    printf("init %d\n", (int)rc);
    CUdeviceptr ptrs[64];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char arg[64] = "";
        if (sscanf(line, "alloc %63s", arg) == 1) {
            uint64_t b = 0;
            parse_size(arg, 1, UINT64_MAX, &b);
            uint64_t t0 = tap_now_ns();
            CUdeviceptr p = 0;
            rc = p_cuMemAlloc(&p, b);
            if (!rc && n < 64) ptrs[n++] = p;
            printf("%d %.0f\n", (int)rc, (double)(tap_now_ns() - t0) / 1e6);
        } else if (!strncmp(line, "free", 4)) {
            rc = n ? p_cuMemFree(ptrs[--n]) : CUDA_ERROR_INVALID_VALUE;
            printf("%d\n", (int)rc);
        } else if (!strncmp(line, "view", 4)) {
            size_t fr = 0, to = 0, dt = 0;
            CUresult a = p_cuMemGetInfo(&fr, &to), b = p_cuDeviceTotalMem(&dt, dev);
            printf("%d %d %zu %zu %zu\n", (int)a, (int)b, fr, to, dt);
        } else if (sscanf(line, "bench %63s", arg) == 1) {
            /* cuMemAlloc latency through librota (and rotad's ledger), alloc/free pairs of 1M */
            unsigned nb = (unsigned)atoi(arg), bad = 0;
            uint64_t *lat = calloc(nb, sizeof *lat);
            for (unsigned i = 0; i < nb; i++) {
                CUdeviceptr p = 0;
                uint64_t t0 = tap_now_ns();
                bad += p_cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS;
                lat[i] = tap_now_ns() - t0;
                p_cuMemFree(p);
            }
            for (unsigned i = 1; i < nb; i++) /* insertion sort: nb is small */
                for (unsigned j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
                    uint64_t t = lat[j];
                    lat[j] = lat[j - 1];
                    lat[j - 1] = t;
                }
            printf("%u %.2f %.2f\n", bad, (double)lat[nb / 2] / 1e3, (double)lat[nb * 99 / 100] / 1e3);
            free(lat);
        } else if (!strncmp(line, "fork", 4)) {
            /* The child drops the inherited connection and registers on its own first memory call. */
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                CUcontext cctx;
                CUdeviceptr p = 0;
                CUresult c = p_cuInit(0);
                if (!c) c = p_cuDevicePrimaryCtxRetain(&cctx, dev);
                if (!c) c = p_cuCtxSetCurrent(cctx);
                if (!c) c = p_cuMemAlloc(&p, 10 << 20);
                printf("child %d %d\n", (int)c, (int)getpid());
                fflush(stdout);
                usleep(1500000);
                _exit(0);
            }
            printf("forked %d\n", (int)pid);
        } else if (!strncmp(line, "exit", 4)) {
            break;
        }
    }
    return 0;
}

/* ---- the test side ----------------------------------------------------------------------------------------- */

typedef th_child_t child_t;

static char node[64];

/* env: NULL-terminated "NAME=value" extras. */
static void spawn(child_t *c, const char *const *env)
{
    th_spawn(c, "ROTA_CLIENT_T_CHILD", "client-t-client", node, "info", env);
}

static int alloc_rc(child_t *c, const char *size, int ms, double *took)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "alloc %s", size);
    const char *r = th_say(c, cmd, ms);
    int rc = -1;
    double t = -1;
    if (sscanf(r, "%d %lf", &rc, &t) != 2) rc = -1;
    if (took) *took = t;
    return rc;
}

#define M (UINT64_C(1) << 20)

int main(void)
{
    if (getenv("ROTA_CLIENT_T_CHILD")) return child_main();
    signal(SIGPIPE, SIG_IGN); /* a dead client must fail a test, not kill the program */
    const char *lib = th_librota_missing();
    if (lib) return skip_all("librota.so is not built (%s)", lib);
    th_setup("client");
    snprintf(node, sizeof node, "client-t-%d", (int)getpid());
    pid_t rotad = th_rotad_start();
    child_t a, c2, c3;

    /* limits and the view */
    const char *lim[] = {"ROTA_MEM_LIMIT=256M", "ROTA_MEM_WAIT=0", NULL};
    spawn(&a, lim);
    is_str(th_say(&a, NULL, 10000), "init 0", "client initialises under librota + rotad");
    char want[128];
    snprintf(want, sizeof want, "0 0 %llu %llu %llu", 256 * (unsigned long long)M, 256 * (unsigned long long)M,
             256 * (unsigned long long)M);
    is_str(th_say(&a, "view", 5000), want, "cuMemGetInfo/cuDeviceTotalMem show the 256M limit, all free");
    is_int(alloc_rc(&a, "100M", 5000, NULL), 0, "100M under a 256M limit");
    is_int(alloc_rc(&a, "100M", 5000, NULL), 0, "200M under a 256M limit");
    size_t fr = 0, to = 0;
    sscanf(th_say(&a, "view", 5000), "%*d %*d %zu %zu", &fr, &to);
    ok(to == 256 * M && fr <= 56 * M && fr > 50 * M, "view: what is left of the limit (%zu of %zu)", fr, to);
    is_int(alloc_rc(&a, "100M", 5000, NULL), CUDA_ERROR_OUT_OF_MEMORY, "300M over a 256M limit: OOM at once");
    is_str(th_say(&a, "free", 5000), "0", "free");
    is_int(alloc_rc(&a, "100M", 5000, NULL), 0, "after a free it fits again");
    is_str(th_say(&a, "free", 5000), "0", "free");
    is_str(th_say(&a, "free", 5000), "0", "free");
    ok(th_ledger_reserved() < 128 * M, "the ledger got the frees back (credit only: %llu)",
       (unsigned long long)th_ledger_reserved());
    th_finish(&a);
    ok(th_ledger_reserved() == 0 || (usleep(200000), th_ledger_reserved() == 0), "client exit: the ledger is at zero");

    /* across processes: queue instead of OOM, served on free; timeout; kill -9 */
    spawn(&a, NULL);
    th_say(&a, NULL, 10000);
    is_int(alloc_rc(&a, "900M", 5000, NULL), 0, "client A takes 900M of 1G");
    const char *wait10[] = {"ROTA_MEM_WAIT=10", NULL};
    spawn(&c2, wait10);
    th_say(&c2, NULL, 10000);
    fprintf(c2.to, "alloc 300M\n");
    usleep(300000);
    is_str(th_say(&a, "free", 5000), "0", "A frees its 900M while B waits");
    int rc = -1;
    double took = -1;
    sscanf(th_say(&c2, NULL, 10000), "%d %lf", &rc, &took);
    is_int(rc, 0, "B's 300M, which did not fit, is granted after A's free instead of OOM");
    in_range(took, 250, 9000, "B waited for it (ms, tolerance 250..9000)");
    const char *wait03[] = {"ROTA_MEM_WAIT=0.3", NULL};
    spawn(&c3, wait03);
    th_say(&c3, NULL, 10000);
    is_int(alloc_rc(&a, "600M", 5000, NULL), 0, "A takes 600M (900M reserved)");
    is_int(alloc_rc(&c3, "300M", 10000, &took), CUDA_ERROR_OUT_OF_MEMORY, "C's wait of 0.3 s times out: OOM");
    in_range(took, 250, 5000, "after about 0.3 s (ms, tolerance 250..5000)");
    fprintf(c3.to, "alloc 300M\n");
    usleep(300000);
    th_kill9(&a);
    /* C waits 0.3 s at most, about when A dies: A's memory may reach it in time (then C holds 300M of it and
     * gives it back, so that B's 600M fits beside B's 300M), or C times out first. */
    int c3rc = -1;
    sscanf(th_say(&c3, NULL, 5000), "%d", &c3rc);
    ok(c3rc == 0 || c3rc == CUDA_ERROR_OUT_OF_MEMORY, "C's second 300M, asked for just before A's kill -9: granted "
       "from A's memory or timed out (rc %d)", c3rc);
    if (c3rc == 0) th_say(&c3, "free", 5000);
    is_int(alloc_rc(&c2, "600M", 5000, NULL), 0, "kill -9 of A gave its 600M back: B gets 600M more");
    th_finish(&c3);
    th_finish(&c2);
    usleep(100000);
    is_uint(th_ledger_reserved(), 0, "every client gone: nothing leaked");

    /* rotad dies mid-run, then returns: clients pass through and re-register */
    spawn(&a, wait10);
    th_say(&a, NULL, 10000);
    is_int(alloc_rc(&a, "200M", 5000, NULL), 0, "A holds 200M");
    spawn(&c2, wait10);
    th_say(&c2, NULL, 10000);
    is_int(alloc_rc(&c2, "700M", 5000, NULL), 0, "B holds 700M");
    fprintf(a.to, "alloc 300M\n"); /* waits: 200 + 700 + 300 > 1G */
    usleep(300000);
    kill(rotad, SIGKILL);
    waitpid(rotad, NULL, 0);
    rc = -1;
    sscanf(th_say(&a, NULL, 5000), "%d %lf", &rc, &took);
    ok(rc == CUDA_ERROR_OUT_OF_MEMORY || rc == 0, "kill -9 of rotad wakes the waiting allocation (rc %d)", rc);
    in_range(took, 0, 4000, "promptly (ms), not after its 10 s wait");
    ok(th_err_count(&a, "running uncoordinated") > 0, "A says it runs uncoordinated");
    is_int(alloc_rc(&a, "50M", 5000, NULL), 0, "without rotad allocations pass through");
    rotad = th_rotad_start();
    usleep(1100000); /* reconnects are rate-limited to one a second */
    is_int(alloc_rc(&a, "10M", 5000, NULL), 0, "after rotad returns, the next allocation reconnects");
    is_int(alloc_rc(&c2, "10M", 5000, NULL), 0, "for both clients");
    uint64_t r = th_ledger_reserved();
    ok(r >= (200 + 50 + 10 + 700 + 10) * M && r <= (200 + 50 + 10 + 700 + 10) * M + 128 * M,
       "the new rotad's ledger has every live byte re-registered (%llu M, plus credit)",
       (unsigned long long)(r / M));
    th_finish(&a);
    th_finish(&c2);
    usleep(100000);
    is_uint(th_ledger_reserved(), 0, "and gets them all back at exit");

    /* the cost of an allocation through librota + rotad (the figure is the report; the bound is loose) */
    spawn(&a, NULL);
    th_say(&a, NULL, 10000);
    unsigned bad = 1;
    double p50 = -1, p99 = -1;
    sscanf(th_say(&a, "bench 5000", 30000), "%u %lf %lf", &bad, &p50, &p99);
    is_uint(bad, 0, "5000 cuMemAlloc calls through librota + rotad succeed");
    diag("cuMemAlloc(1M) through librota + rotad + simcuda: p50 %.2f us, p99 %.2f us (goal: ledger p99 <= 20 us)",
         p50, p99);
    in_range(p99, 0, 2000, "p99 under 2 ms (sanity bound for a loaded 2-core machine)");
    th_finish(&a);

    /* fork: parent and child are two clients, each with its own books */
    spawn(&a, NULL);
    th_say(&a, NULL, 10000);
    is_int(alloc_rc(&a, "20M", 5000, NULL), 0, "parent allocates 20M");
    int kid = 0, crc = -1, cpid = 0;
    for (int i = 0; i < 2; i++) { /* parent's and child's lines, in either order */
        const char *l = th_say(&a, i ? NULL : "fork", 10000);
        if (sscanf(l, "forked %d", &kid) != 1) sscanf(l, "child %d %d", &crc, &cpid);
    }
    if (!is_int(crc, 0, "the forked child allocates 10M")) {
        FILE *ef = fopen(a.err, "r");
        char l[512];
        while (ef && fgets(l, sizeof l, ef)) diag("client stderr: %s", l);
        if (ef) fclose(ef);
    }
    is_int(cpid, kid, "(that child)");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ROTA_SOCKET=%s %s/bin/rota status --json", th_sock, getenv("ROTA_BUILD"));
    FILE *st = popen(cmd, "r");
    char json[8192] = "";
    size_t jn = st ? fread(json, 1, sizeof json - 1, st) : 0;
    json[jn] = 0;
    if (st) pclose(st);
    char pat[64];
    snprintf(pat, sizeof pat, "\"pid\":%d,", (int)a.pid);
    ok(strstr(json, pat) != NULL, "rota status --json lists the parent (%s)", pat);
    snprintf(pat, sizeof pat, "\"pid\":%d,", kid);
    ok(strstr(json, pat) != NULL, "and the forked child as a client of its own (%s)", pat);
    ok(strstr(json, "\"used\":") && strstr(json, "\"priority\":\"normal\""), "with used and priority fields");
    is_int(alloc_rc(&a, "5M", 5000, NULL), 0, "the parent's connection survived the fork");
    waitpid(kid, NULL, 0); /* not our child: reaped by nobody here, just give it time */
    usleep(1600000);
    th_finish(&a);
    usleep(100000);
    is_uint(th_ledger_reserved(), 0, "parent and child gone: nothing leaked");

    /* fail-open and ROTA_REQUIRE without rotad */
    is_int(th_rotad_stop(rotad), 0, "rotad stops");
    spawn(&a, NULL);
    is_str(th_say(&a, NULL, 10000), "init 0", "no rotad: cuInit still succeeds");
    is_int(alloc_rc(&a, "10M", 5000, NULL), 0, "and allocations pass through");
    is_int(alloc_rc(&a, "10M", 5000, NULL), 0, "again");
    th_finish(&a);
    int nwarn = th_err_count(&a, "rotad is not running");
    is_int(nwarn, 1, "with exactly one warning");
    const char *req[] = {"ROTA_REQUIRE=1", NULL};
    spawn(&a, req);
    is_str(th_say(&a, NULL, 10000), "init 3", "ROTA_REQUIRE=1 without rotad: cuInit fails with CUDA_ERROR_NOT_INITIALIZED");
    rc = alloc_rc(&a, "10M", 5000, NULL);
    ok(rc != 0 && rc != -1, "and an allocation fails too (rc %d)", rc);
    th_finish(&a);
    nwarn = th_err_count(&a, "ROTA_REQUIRE=1 and rotad is not running");
    is_int(nwarn, 1, "with exactly one clear error");
    ok(th_err_count(&a, "cuInit: CUDA_ERROR_NOT_INITIALIZED") > 0, "which names cuInit's error");
    th_cleanup_children();
    th_cleanup();
    th_node_remove(node);
    return done_testing();
}
