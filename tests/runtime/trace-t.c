/* trace-t.c - TAP tests of ROTA_TRACE (shim/trace.c, runtime/lib/trace.c) over simcuda with rotad: a client
 * that waits for nothing writes no file; a memory waiter writes mem_wait/mem_grant (and a timed-out one
 * mem_wait/mem_deny); a low client held by a high one writes hold/release pairs; every line is well-formed;
 * a file that cannot be opened is one warning.
 * Clients are this program re-executed with LD_PRELOAD=librota.so, driven line by line over pipes. */
#include "runtime/lib/trace.h"
#include "tests/runtime/rotad-helpers.h"
#include "tests/tap/kernels.h"

#include <cuda.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <time.h>

/* ---- the client side ------------------------------------------------------------------------------------ */

static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void **, void **);
static CUresult (*p_cuStreamSynchronize)(CUstream);

/* Commands: "alloc SIZE", "free" (the last allocation), "spin N NS" (N kernels, then a sync),
 * "spinfor MS" (2 ms kernels back to back, a sync every 8, for MS ms); each answered "RC MS". */
static int child_main(void)
{
    if (!th_cuda_load()) return 2;
    CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t) = th_sym("cuMemAlloc_v2");
    CUresult (*p_cuMemFree)(CUdeviceptr) = th_sym("cuMemFree_v2");
    p_cuLaunchKernel = th_sym("cuLaunchKernel");
    p_cuStreamSynchronize = th_sym("cuStreamSynchronize");
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUfunction spin;
    CUstream st;
    CUresult rc = th_cuda_ctx(&dev);
    if (!rc) rc = th_cuda_spin(&spin, &st);
    printf("init %d\n", (int)rc);
    if (rc) return 1;
    CUdeviceptr ptrs[64];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char arg[64] = "";
        unsigned k;
        unsigned long long ns;
        double t0 = th_now_ms();
        if (sscanf(line, "alloc %63s", arg) == 1) {
            uint64_t bytes = strtoull(arg, NULL, 10) << 20; /* MiB */
            CUdeviceptr p = 0;
            rc = p_cuMemAlloc(&p, (size_t)bytes);
            if (!rc && n < 64) ptrs[n++] = p;
        } else if (!strncmp(line, "free", 4)) {
            rc = n ? p_cuMemFree(ptrs[--n]) : CUDA_ERROR_INVALID_VALUE;
        } else if (sscanf(line, "spin %u %llu", &k, &ns) == 2) {
            void *args[] = {&ns};
            rc = CUDA_SUCCESS;
            for (unsigned i = 0; i < k && !rc; i++) rc = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
            if (!rc) rc = p_cuStreamSynchronize(st);
        } else if (sscanf(line, "spinfor %u", &k) == 1) {
            ns = 2000000;
            void *args[] = {&ns};
            rc = CUDA_SUCCESS;
            for (unsigned i = 0; th_now_ms() - t0 < k && !rc; i++) {
                rc = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
                if (!rc && i % 8 == 7) rc = p_cuStreamSynchronize(st);
            }
            if (!rc) rc = p_cuStreamSynchronize(st);
        } else {
            rc = CUDA_ERROR_INVALID_VALUE;
        }
        printf("%d %.3f\n", (int)rc, th_now_ms() - t0);
    }
    return 0;
}

/* ---- the test side --------------------------------------------------------------------------------------- */

typedef th_child_t child_t;

static char node[64];

/* env: NULL-terminated "NAME=value" extras. */
static void spawn(child_t *c, const char *const *env)
{
    th_spawn(c, "ROTA_TRACE_T_CHILD", "trace-t-client", node, "warn", env);
}

static int say_rc(child_t *c, const char *cmd, int ms)
{
    int rc = -1;
    if (sscanf(th_say(c, cmd, ms), "%d", &rc) != 1) rc = -1;
    return rc;
}

/* ---- reading a trace ------------------------------------------------------------------------------------- */

typedef struct tev {
    uint64_t ts;
    int pid, gpu;
    char ev[16];
    uint64_t bytes;
    char extra[256];
} tev_t;

#define TEV_MAX 4096
static tev_t tevs[TEV_MAX];

/* Parses the file strictly (the fixed prefix of runtime/lib/trace.h, then nothing or ,"key":value... and "}");
 * returns the number of events, or -(1 + the first bad line's number). */
static int trace_read(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char l[1024];
    int n = 0, lineno = 0;
    while (fgets(l, sizeof l, f)) {
        lineno++;
        tev_t e = {0};
        unsigned long long ts, by;
        int used = 0;
        size_t len = strlen(l);
        if (len < 2 || l[len - 1] != '\n' || l[len - 2] != '}' || n >= TEV_MAX ||
            sscanf(l, "{\"ts_us\":%llu,\"pid\":%d,\"ev\":\"%15[a-z_]\",\"gpu\":%d,\"bytes\":%llu%n", &ts, &e.pid,
                   e.ev, &e.gpu, &by, &used) != 5 || used <= 0) {
            fclose(f);
            return -(1 + lineno);
        }
        const char *rest = l + used;
        size_t rl = strlen(rest) - 2; /* without "}\n" */
        if (rl && (rest[0] != ',' || rest[1] != '"' || rl >= sizeof e.extra || strchr(rest, '\\'))) {
            fclose(f);
            return -(1 + lineno);
        }
        memcpy(e.extra, rest, rl);
        e.ts = ts;
        e.bytes = by;
        tevs[n++] = e;
    }
    fclose(f);
    return n;
}

/* For one pid: opening events (open) must alternate with closing ones (close1|close2), in time order, all
 * closed at the end. Returns the number of complete spans, or -1 when they do not pair. */
static int trace_pairs(int n, int pid, const char *open, const char *close1, const char *close2, uint64_t bytes)
{
    int spans = 0;
    bool in = false;
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        const tev_t *e = &tevs[i];
        if (e->pid != pid) continue;
        bool o = !strcmp(e->ev, open), c = !strcmp(e->ev, close1) || (close2 && !strcmp(e->ev, close2));
        if (!o && !c) continue;
        if (e->ts < last || (bytes && e->bytes != bytes)) return -1;
        last = e->ts;
        if (o == in) return -1; /* an open inside a span, or a close outside one */
        in = o;
        if (c) spans++;
    }
    return in ? -1 : spans;
}

static int trace_count(int n, int pid, const char *ev, const char *extra_has)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += tevs[i].pid == pid && !strcmp(tevs[i].ev, ev) && (!extra_has || strstr(tevs[i].extra, extra_has));
    return k;
}

#define M 1048576ull

int main(void)
{
    if (getenv("ROTA_TRACE_T_CHILD")) return child_main();
    signal(SIGPIPE, SIG_IGN);
    plan(26);
    const char *lib = th_librota_missing();
    if (lib) bail("librota.so is not built (%s)", lib);
    th_setup("trace");
    snprintf(node, sizeof node, "trace-t-%d", (int)getpid());
    char quiet[160], mem[160], held[160], e_quiet[200], e_mem[200], e_held[200];
    snprintf(quiet, sizeof quiet, "%s/quiet.jsonl", th_dir);
    snprintf(mem, sizeof mem, "%s/mem.jsonl", th_dir);
    snprintf(held, sizeof held, "%s/held.jsonl", th_dir);
    snprintf(e_quiet, sizeof e_quiet, "ROTA_TRACE=%s", quiet);
    snprintf(e_mem, sizeof e_mem, "ROTA_TRACE=%s", mem);
    snprintf(e_held, sizeof e_held, "ROTA_TRACE=%s", held);
    pid_t rotad = th_rotad_start();
    child_t a, w, d, hi, lo;

    /* 1. nothing waits: no file */
    const char *eq[] = {e_quiet, "ROTA_MEM_WAIT=10", NULL};
    spawn(&a, eq);
    is_str(th_say(&a, NULL, 10000), "init 0", "a traced client initialises");
    is_int(say_rc(&a, "alloc 100", 5000), 0, "it allocates 100M of 1G (fits: no wait)");
    is_int(say_rc(&a, "spin 8 1000000", 5000), 0, "and launches alone (no hold)");
    is_int(say_rc(&a, "free", 5000), 0, "and frees");
    th_finish(&a);
    ok(access(quiet, F_OK) != 0 && errno == ENOENT, "a client that never waited created no trace file");

    /* 2. memory: a waiter that is granted, one that times out */
    const char *ea[] = {"ROTA_MEM_WAIT=0", NULL};
    spawn(&a, ea);
    th_ready(&a, "client A");
    is_int(say_rc(&a, "alloc 900", 5000), 0, "client A takes 900M of 1G");
    const char *ew[] = {e_mem, "ROTA_MEM_WAIT=10", NULL};
    spawn(&w, ew);
    th_ready(&w, "client W");
    fprintf(w.to, "alloc 300\n");
    usleep(300000);
    is_int(say_rc(&a, "free", 5000), 0, "A frees its 900M while W waits for 300M");
    is_int(say_rc(&w, NULL, 10000), 0, "W's allocation is granted");
    is_int(say_rc(&a, "alloc 600", 5000), 0, "A takes 600M again");
    const char *ed[] = {e_mem, "ROTA_MEM_WAIT=0.3", NULL};
    spawn(&d, ed);
    th_ready(&d, "client D");
    is_int(say_rc(&d, "alloc 400", 10000), CUDA_ERROR_OUT_OF_MEMORY, "D's 400M does not fit within 0.3 s: OOM");
    th_finish(&d);
    th_finish(&w);
    th_finish(&a);
    int n = trace_read(mem);
    ok(n > 0, "the waiters wrote a trace of well-formed lines (%d events%s)", n, n < 0 ? ": a bad line" : "");
    is_int(trace_pairs(n, w.pid, "mem_wait", "mem_grant", "mem_deny", 300 * M), 1,
           "W: one mem_wait ... mem_grant span of its 300M");
    is_int(trace_count(n, w.pid, "mem_grant", NULL), 1, "which ends in a grant");
    is_int(trace_pairs(n, d.pid, "mem_wait", "mem_grant", "mem_deny", 400 * M), 1,
           "D: one mem_wait ... mem_deny span of its 400M");
    is_int(trace_count(n, d.pid, "mem_deny", "\"reason\":\"timeout\""), 1, "which ends in a deny (timeout)");

    /* 3. launches: a low client held by a high one */
    const char *eh[] = {"ROTA_PRIORITY=high", NULL};
    const char *el[] = {e_held, "ROTA_PRIORITY=low", "ROTA_MAX_INFLIGHT=1", NULL};
    spawn(&lo, el);
    th_ready(&lo, "low client");
    spawn(&hi, eh);
    th_ready(&hi, "high client");
    fprintf(hi.to, "spinfor 1200\n");
    usleep(200000);
    is_int(say_rc(&lo, "spin 100 2000000", 15000), 0, "a low client launches beside a busy high client");
    is_int(say_rc(&hi, NULL, 10000), 0, "the high client's work completes");
    th_finish(&hi);
    th_finish(&lo);
    n = trace_read(held);
    ok(n > 0, "the held client wrote a trace of well-formed lines (%d events%s)", n, n < 0 ? ": a bad line" : "");
    int spans = trace_pairs(n, lo.pid, "hold", "release", NULL, 0);
    ok(spans >= 1, "hold ... release events pair up, at least one span (%d)", spans);
    ok(trace_count(n, lo.pid, "hold", "\"reason\":\"prio\"") >= 1, "a hold by a high client has reason prio");
    is_int(trace_count(n, hi.pid, "hold", NULL), 0, "the high client is never held");

    /* 4. a file that cannot be opened: one warning, tracing off, the client unharmed */
    const char *eb[] = {"ROTA_TRACE=/nonexistent-rota-dir/trace.jsonl", "ROTA_MEM_WAIT=0.2", NULL};
    spawn(&a, ea);
    th_ready(&a, "client A");
    is_int(say_rc(&a, "alloc 900", 5000), 0, "client A takes 900M of 1G again");
    spawn(&d, eb);
    th_ready(&d, "client D");
    is_int(say_rc(&d, "alloc 400", 10000), CUDA_ERROR_OUT_OF_MEMORY, "an untraceable waiter still times out as usual");
    is_int(say_rc(&d, "alloc 400", 10000), CUDA_ERROR_OUT_OF_MEMORY, "twice");
    th_finish(&d);
    th_finish(&a);
    is_int(th_err_count(&d, "unable to open ROTA_TRACE"), 1, "an unopenable ROTA_TRACE is exactly one warning");

    is_int(th_rotad_stop(rotad), 0, "rotad stops");
    unlink(mem);
    unlink(held);
    unlink(quiet);
    th_cleanup_children();
    th_cleanup();
    th_node_remove(node);
    return done_testing();
}
