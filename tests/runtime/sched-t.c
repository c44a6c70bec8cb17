/* sched-t.c - TAP tests of launch scheduling (runtime/sched.c + shim/client-launch.c) over simcuda with rotad:
 * a high-priority client's latency beside low-priority spinners, weighted fair share, capture under holds,
 * sync while held, kill -9 of held and high clients, rotad killed while a client is held (fail-open).
 * Clients are this program re-executed with LD_PRELOAD=librota.so; they report on stdout, line by line. */
#include "runtime/lib/conn.h"
#include "runtime/lib/idlewin.h"
#include "tests/runtime/rotad-helpers.h"
#include "tests/tap/kernels.h"

#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

/* ---- the client side ------------------------------------------------------------------------------------ */

static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void **, void **);
static CUresult (*p_cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
static CUresult (*p_cuStreamEndCapture)(CUstream, CUgraph *);
static CUresult (*p_cuGraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*p_cuGraphLaunch)(CUgraphExec, CUstream);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuEventCreate)(CUevent *, unsigned);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);

static CUfunction spin;
static CUstream cst;

static CUresult launch_spin(uint64_t ns)
{
    void *args[] = {&ns};
    return p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, cst, args, NULL);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t env_u(const char *n, uint64_t def)
{
    const char *v = getenv(n);
    return v ? strtoull(v, NULL, 10) : def;
}

/* SCHED_MODE=spin: launch spin_ns(SCHED_KNS) back to back for SCHED_DUR_MS, "n COUNT" every 100 ms, "done COUNT".
 *           =req:  SCHED_REQS requests of 3 x spin_ns(SCHED_KNS) + sync, SCHED_GAP_MS apart; "lat P50 P99".
 *           =periodic: SCHED_REQS requests of one spin_ns(SCHED_KNS) + sync, one every SCHED_PERIOD_US on a fixed
 *                  clock (a late one goes at once); "plat P50 P90" in ms from its tick to its completion.
 *           =burst: for SCHED_DUR_MS, iterations of SCHED_BURST x spin_ns(SCHED_KNS) + sync + a host gap of
 *                  SCHED_GAP_US (a training step and its data loading); "iter MEAN_MS COUNT".
 *           =cmd:  commands on stdin: "spin N KNS" (async), "sync", "capture" (capture + instantiate, then
 *                  graph launch + sync), "sleep MS" (clock_nanosleep), "busy MS" (on the CPU), "wait MS" (a
 *                  condition variable's timed wait: a futex), each answered with its duration in ms. */
static int child_main(void)
{
    if (!th_cuda_load()) return 2;
    p_cuMemAlloc = th_sym("cuMemAlloc_v2");
    p_cuStreamCreate = th_sym("cuStreamCreate");
    p_cuStreamSynchronize = th_sym("cuStreamSynchronize");
    p_cuLaunchKernel = th_sym("cuLaunchKernel");
    p_cuStreamBeginCapture = th_sym("cuStreamBeginCapture_v2");
    p_cuStreamEndCapture = th_sym("cuStreamEndCapture");
    p_cuGraphInstantiate = th_sym("cuGraphInstantiateWithFlags");
    p_cuGraphLaunch = th_sym("cuGraphLaunch");
    p_cuStreamDestroy = th_sym("cuStreamDestroy_v2");
    p_cuEventCreate = th_sym("cuEventCreate");
    p_cuEventRecord = th_sym("cuEventRecord");
    p_cuEventSynchronize = th_sym("cuEventSynchronize");
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUdeviceptr buf;
    CUresult rc = th_cuda_ctx(&dev);
    if (!rc) rc = p_cuMemAlloc(&buf, 1 << 20); /* registers the GPU with rotad */
    if (!rc) rc = th_cuda_spin(&spin, &cst);
    printf("init %d\n", (int)rc);
    if (rc) return 1;
    const char *mode = getenv("SCHED_MODE");
    uint64_t kns = env_u("SCHED_KNS", 2000000);
    if (!strcmp(mode, "spin")) {
        double end = th_now_ms() + (double)env_u("SCHED_DUR_MS", 1000), next = th_now_ms() + 100;
        unsigned long n = 0, every = env_u("SCHED_SYNC_EVERY", 8), window = env_u("SCHED_WINDOW", 0);
        CUevent win[64];
        if (window > 64) window = 64;
        for (unsigned long i = 0; i < window; i++)
            if (p_cuEventCreate(&win[i], CU_EVENT_DISABLE_TIMING)) return 3;
        while (th_now_ms() < end) {
            /* SCHED_WINDOW=N: at most N kernels queued, and the queue never drains (a busy high client);
             * else the application's own bound as frameworks keep a few steps queued: a sync every 8. */
            if (window && n >= window && p_cuEventSynchronize(win[n % window])) return 3;
            if (launch_spin(kns)) return 3;
            if (window && p_cuEventRecord(win[n % window], cst)) return 3;
            n++;
            if (!window && n % every == 0) p_cuStreamSynchronize(cst);
            if (th_now_ms() >= next) {
                printf("n %lu\n", n);
                next += 100;
            }
        }
        p_cuStreamSynchronize(cst);
        printf("done %lu\n", n);
    } else if (!strcmp(mode, "burst")) {
        unsigned long burst = env_u("SCHED_BURST", 4), gap = env_u("SCHED_GAP_US", 4000), n = 0;
        double t0 = th_now_ms(), end = t0 + (double)env_u("SCHED_DUR_MS", 1000);
        while (th_now_ms() < end) {
            for (unsigned long k = 0; k < burst; k++)
                if (launch_spin(kns)) return 3;
            if (p_cuStreamSynchronize(cst)) return 3;
            usleep((useconds_t)gap);
            n++;
        }
        printf("iter %.3f %lu\n", n ? (th_now_ms() - t0) / (double)n : 0.0, n);
    } else if (!strcmp(mode, "periodic")) {
        unsigned reqs = (unsigned)env_u("SCHED_REQS", 100);
        uint64_t period = env_u("SCHED_PERIOD_US", 8000) * 1000u;
        double *lat = calloc(reqs, sizeof *lat);
        usleep(200000); /* let the spinner get going */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        for (unsigned r = 0; r < reqs; r++) {
            uint64_t tick = t0 + (r + 1) * period;
            struct timespec at = {.tv_sec = (time_t)(tick / 1000000000u), .tv_nsec = (long)(tick % 1000000000u)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
            }
            if (launch_spin(kns)) return 3;
            p_cuStreamSynchronize(cst);
            lat[r] = th_now_ms() - (double)tick / 1e6;
        }
        qsort(lat, reqs, sizeof *lat, cmp_d);
        printf("plat %.3f %.3f\n", lat[reqs / 2], lat[(reqs * 9) / 10]);
        free(lat);
    } else if (!strcmp(mode, "req")) {
        unsigned reqs = (unsigned)env_u("SCHED_REQS", 20), gap = (unsigned)env_u("SCHED_GAP_MS", 10);
        double *lat = calloc(reqs, sizeof *lat);
        usleep(200000); /* let the spinners get going */
        for (unsigned r = 0; r < reqs; r++) {
            double t0 = th_now_ms();
            for (int k = 0; k < 3; k++)
                if (launch_spin(kns)) return 3;
            p_cuStreamSynchronize(cst);
            lat[r] = th_now_ms() - t0;
            usleep(gap * 1000);
        }
        qsort(lat, reqs, sizeof *lat, cmp_d);
        printf("lat %.3f %.3f\n", lat[reqs / 2], lat[(reqs * 99) / 100 < reqs ? (reqs * 99) / 100 : reqs - 1]);
        free(lat);
    } else {
        char line[128];
        while (fgets(line, sizeof line, stdin)) {
            unsigned n;
            unsigned long long ns;
            double t0 = th_now_ms();
            if (sscanf(line, "spin %u %llu", &n, &ns) == 2) {
                for (unsigned i = 0; i < n; i++) rc = launch_spin(ns);
                printf("%d %.3f\n", (int)rc, th_now_ms() - t0);
            } else if (!strncmp(line, "ephemeral", 9)) {
                /* A stream destroyed while its tracked launches are still in flight. */
                CUstream keep = cst, tmp;
                rc = p_cuStreamCreate(&tmp, CU_STREAM_NON_BLOCKING);
                cst = tmp;
                for (int i = 0; i < 3 && !rc; i++) rc = launch_spin(5000000);
                cst = keep;
                if (!rc) rc = p_cuStreamDestroy(tmp);
                printf("%d %.3f\n", (int)rc, th_now_ms() - t0);
            } else if (!strncmp(line, "alloc", 5)) {
                CUdeviceptr b;
                rc = p_cuMemAlloc(&b, 1 << 20); /* a memory hook: reconnects to rotad if it went away */
                printf("%d %.3f\n", (int)rc, th_now_ms() - t0);
            } else if (!strncmp(line, "sync", 4)) {
                rc = p_cuStreamSynchronize(cst);
                printf("%d %.3f\n", (int)rc, th_now_ms() - t0);
            } else if (sscanf(line, "sleep %u", &n) == 1) {
                struct timespec ts = {.tv_sec = n / 1000, .tv_nsec = (long)(n % 1000) * 1000000};
                while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
                }
                printf("0 %.3f\n", th_now_ms() - t0);
            } else if (sscanf(line, "busy %u", &n) == 1) {
                while (th_now_ms() - t0 < n) {
                }
                printf("0 %.3f\n", th_now_ms() - t0);
            } else if (sscanf(line, "wait %u", &n) == 1) {
                pthread_condattr_t a;
                pthread_cond_t cv;
                pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
                pthread_condattr_init(&a);
                pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
                pthread_cond_init(&cv, &a);
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += n / 1000;
                ts.tv_nsec += (long)(n % 1000) * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_mutex_lock(&mu);
                while (pthread_cond_timedwait(&cv, &mu, &ts) != ETIMEDOUT) {
                }
                pthread_mutex_unlock(&mu);
                pthread_cond_destroy(&cv);
                pthread_condattr_destroy(&a);
                printf("0 %.3f\n", th_now_ms() - t0);
            } else if (!strncmp(line, "capture", 7)) {
                CUgraph g;
                CUgraphExec ge;
                rc = p_cuStreamBeginCapture(cst, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
                for (int i = 0; i < 3 && !rc; i++) rc = launch_spin(1000000);
                if (!rc) rc = p_cuStreamEndCapture(cst, &g);
                if (!rc) rc = p_cuGraphInstantiate(&ge, g, 0);
                double t1 = th_now_ms();
                if (!rc) rc = p_cuGraphLaunch(ge, cst);
                double t2 = th_now_ms();
                if (!rc) rc = p_cuStreamSynchronize(cst);
                printf("%d %.3f %.3f\n", (int)rc, t1 - t0, t2 - t1);
            }
        }
    }
    return 0;
}

/* ---- the test side --------------------------------------------------------------------------------------- */

typedef th_child_t child_t;

static char node[64];

/* env: NULL-terminated "NAME=value" extras. */
static void spawn(child_t *c, const char *const *env)
{
    th_spawn(c, "ROTA_SCHED_T_CHILD", "sched-t-client", node, "warn", env);
}

/* Reads lines until one starts with prefix (within ms); returns it or "". */
static const char *expect(child_t *c, const char *prefix, int ms)
{
    double end = th_now_ms() + ms;
    for (;;) {
        int left = (int)(end - th_now_ms());
        if (left <= 0) return "";
        const char *l = th_say(c, NULL, left);
        if (!l[0]) return "";
        if (!strncmp(l, prefix, strlen(prefix))) return l;
    }
}

/* Runs a request client (high) beside nspin spinners; returns the request p50 (ms), spinner counts in counts. */
/* The index of the histogram bucket holding the p99 (nearest rank) of the activations counted since before[]. */
/* The histogram bucket that holds the pct-th percentile of the activations since before (*n: how many). */
static unsigned hold_pct_bucket(const rota_dev_t *d, const uint64_t before[ROTA_LAT_BUCKETS], unsigned pct,
                                uint64_t *n)
{
    uint64_t h[ROTA_LAT_BUCKETS], total = 0, acc = 0;
    for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) total += h[k] = atomic_load(&d->hold_lat_hist[k]) - before[k];
    *n = total;
    for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) {
        acc += h[k];
        if (acc * 100 >= total * pct) return k;
    }
    return ROTA_LAT_BUCKETS - 1;
}

static double run_mix(int nspin, bool rota, double *p99, unsigned long *counts)
{
    child_t sp[2], rq;
    const char *spenv[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=1800", "SCHED_KNS=2000000", "ROTA_PRIORITY=low", "ROTA_MAX_INFLIGHT=1",
                           rota ? "ROTA_LOG=warn" : "ROTA_DISABLE=1", NULL};
    const char *rqenv[] = {"SCHED_MODE=req", "SCHED_REQS=40", "SCHED_GAP_MS=15", "SCHED_KNS=1000000",
                           "ROTA_PRIORITY=high", rota ? "ROTA_LOG=warn" : "ROTA_DISABLE=1", NULL};
    for (int i = 0; i < nspin; i++) {
        spawn(&sp[i], spenv);
        th_ready(&sp[i], "spinner did not start");
    }
    spawn(&rq, rqenv);
    th_ready(&rq, "request client did not start");
    double p50 = -1;
    *p99 = -1;
    const char *l = expect(&rq, "lat", 15000);
    if (sscanf(l, "lat %lf %lf", &p50, p99) != 2) p50 = -1;
    th_finish(&rq);
    for (int i = 0; i < nspin; i++) {
        l = expect(&sp[i], "done", 10000);
        counts[i] = 0;
        sscanf(l, "done %lu", &counts[i]);
        th_finish(&sp[i]);
    }
    return p50;
}

/* Two spinners of 2 ms kernels for 3 s, the same but for one variable each (e.g. "ROTA_WEIGHT=3"). */
static void pair_start(child_t *a, child_t *b, const char *va, const char *vb)
{
    const char *ea[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=3000", "SCHED_KNS=2000000", va, NULL};
    const char *eb[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=3000", "SCHED_KNS=2000000", vb, NULL};
    spawn(a, ea);
    spawn(b, eb);
    th_ready(a, "spinners");
    th_ready(b, "spinners");
}

/* Waits for both spinners of pair_start; returns a's kernels over b's (0 if b ran none). */
static double pair_finish(child_t *a, child_t *b, unsigned long *na, unsigned long *nb)
{
    *na = *nb = 0;
    sscanf(expect(a, "done", 10000), "done %lu", na);
    sscanf(expect(b, "done", 10000), "done %lu", nb);
    th_finish(a);
    th_finish(b);
    return *nb ? (double)*na / (double)*nb : 0;
}

/* Runs a burst-mode client (a) beside a spinner (b) to their ends: a's mean step (ms) and steps, b's kernels. */
static void burst_pair(const char *const *ea, const char *const *eb, double *it, unsigned long *na,
                       unsigned long *nb)
{
    child_t a, b;
    *it = 0;
    *na = *nb = 0;
    spawn(&a, ea);
    spawn(&b, eb);
    th_ready(&a, "burst client");
    th_ready(&b, "spinner");
    sscanf(expect(&a, "iter", 10000), "iter %lf %lu", it, na);
    sscanf(expect(&b, "done", 10000), "done %lu", nb);
    th_finish(&a);
    th_finish(&b);
}

static conn_t *observe(void)
{
    conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_OBSERVER};
    conn_t *c;
    char err[256];
    if (conn_open(&o, &c, err, sizeof err)) bail("observer: %s", err);
    return c;
}

/* The launch-gate words (hold, contended) of pid's slot in the region, or NULL: the slot found in rotad's client
 * table. */
static const rota_slot_sched_t *slot_of(const rota_region_t *r, pid_t pid)
{
    int i = th_slot_index(pid);
    return i < 0 ? NULL : &r->sched[i];
}

/* The details of the client whose words in region r are w, as rotad's client table has them now (a fresh copy). */
static rota_slot_t detail(const rota_region_t *r, const rota_slot_sched_t *w)
{
    return th_slot((unsigned)(w - r->sched));
}

/* rotad's copy of the client's launches in flight, and the idle window it applies to a high client (detail()). */
static uint32_t detail_inflight(const rota_region_t *r, const rota_slot_sched_t *w)
{
    rota_slot_t d = detail(r, w);
    return atomic_load(&d.inflight);
}

static uint64_t detail_idle_win(const rota_region_t *r, const rota_slot_sched_t *w)
{
    rota_slot_t d = detail(r, w);
    return atomic_load(&d.idle_win_ns);
}

/* Waits up to ms for slot->hold to become (nonzero if want, else zero). */
static bool wait_hold(const rota_slot_sched_t *s, bool want, int ms)
{
    double end = th_now_ms() + ms;
    while (th_now_ms() < end) {
        if ((atomic_load(&s->hold) != 0) == want) return true;
        usleep(1000);
    }
    return false;
}

/* Waits up to ms for slot->contended to become want. */
static bool wait_track(const rota_slot_sched_t *s, uint32_t want, int ms)
{
    double end = th_now_ms() + ms;
    while (th_now_ms() < end) {
        if (atomic_load(&s->contended) == want) return true;
        usleep(1000);
    }
    return false;
}

/* Sends cmd to a command-mode child and watches slot->inflight (rotad's copy) until the child answers, for at
 * most 20 s; returns the most it saw, and the answer in *reply ("" on timeout) when reply is not NULL. */
static unsigned long max_inflight_during(child_t *c, const rota_region_t *r, const rota_slot_sched_t *s,
                                         const char *cmd, const char **reply)
{
    unsigned long mx = 0;
    const char *l = "";
    fprintf(c->to, "%s\n", cmd);
    for (int i = 0; i < 20000 && !l[0]; i++) {
        rota_slot_t d = detail(r, s);
        unsigned long v = atomic_load(&d.inflight);
        if (v > mx) mx = v;
        l = th_say(c, NULL, 1);
    }
    if (reply) *reply = l;
    return mx;
}

/* A command-mode high client and a normal one, the normal one's GPU known to rotad (it launched once); returns
 * the normal client's slot in r. */
static const rota_slot_sched_t *hold_pair_env(child_t *hi, child_t *lo, const rota_region_t *r, const char *hi_extra,
                                        const char *hi_extra2)
{
    const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", hi_extra ? hi_extra : hi_extra2,
                        hi_extra ? hi_extra2 : NULL, NULL};
    const char *el[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=normal", NULL};
    spawn(hi, eh);
    spawn(lo, el);
    th_ready(hi, "high command client");
    th_ready(lo, "normal command client");
    th_say(lo, "spin 1 1000000", 5000); /* its GPU is known from its first launch */
    th_say(lo, "sync", 5000);
    const rota_slot_sched_t *ls = slot_of(r, lo->pid);
    if (!ls) bail("no slot for the normal client");
    return ls;
}

/* A high and a normal command client; the normal one has launched once. Returns the normal client's slot. */
static const rota_slot_sched_t *hold_pair(child_t *hi, child_t *lo, const rota_region_t *r)
{
    return hold_pair_env(hi, lo, r, NULL, NULL);
}

/* Last "n COUNT" progress line within ms (0 if none). */
static unsigned long progress(child_t *c, int ms)
{
    unsigned long n = 0, v;
    double end = th_now_ms() + ms;
    while (th_now_ms() < end) {
        const char *l = th_say(c, NULL, (int)(end - th_now_ms()) + 1);
        if (!l[0]) break;
        if (sscanf(l, "n %lu", &v) == 1) n = v;
    }
    return n;
}

/* A held command-mode client's 1 ms launch: sent now, its answer in *l ("" if none within ms); returns the ms
 * from t0 to the answer. */
static double held_launch(child_t *c, double t0, int ms, const char **l)
{
    fprintf(c->to, "spin 1 1000000\n");
    *l = expect(c, "0 ", ms);
    return th_now_ms() - t0;
}

/* The whole of a small file, NUL-terminated (NULL if unreadable); the caller frees it. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

/* The end of a section with its own rotad: both clients, the observer, rotad. */
static void pair_done(child_t *hi, child_t *lo, conn_t **obs, pid_t rotad)
{
    th_finish(hi);
    th_finish(lo);
    conn_close(*obs);
    *obs = NULL;
    th_rotad_stop(rotad);
}

int main(void)
{
    if (getenv("ROTA_SCHED_T_CHILD")) return child_main();
    if (!getenv("ROTA_BUILD")) bail("ROTA_BUILD is not set");
    signal(SIGPIPE, SIG_IGN);
    th_setup("sched");
    snprintf(node, sizeof node, "rota-sched-t-%d", (int)getpid());
    /* An idle window of 5 ms (default 2): a loaded 2-core machine may not run a client's thread for 2 ms
     * between two of its launches, which would count as idle. */
    const char *rargs[] = {"--idle-ms", "5", NULL};
    pid_t rotad = th_rotad_start_args(rargs);

    const char *only = getenv("SCHED_T_ONLY"); /* debugging: run one section (1..21) */
#define SECTION(n) if (!only || atoi(only) == (n))
    conn_t *obs = observe();
    const rota_region_t *r = conn_region(obs);
    const rota_dev_t *d0 = &r->devices[0];
    /* 1. priority: a high client's requests beside two low spinners */
    SECTION(1) {
    double p99_solo, p99_rota, p99_none;
    unsigned long cnt[2] = {0, 0}, cnt_none[2] = {0, 0};
    double solo = run_mix(0, true, &p99_solo, cnt);
    (void)cnt_none;
    double none = run_mix(2, false, &p99_none, cnt_none);
    double with = run_mix(2, true, &p99_rota, cnt);
    diag("request of 3 x spin_ns(1 ms), low spinners of spin_ns(2 ms) with ROTA_MAX_INFLIGHT=1, p50/p99 ms: solo %.2f/%.2f, beside 2 low spinners without rota %.2f/%.2f, "
         "with rota %.2f/%.2f; spinner kernels without rota %lu+%lu, with rota %lu+%lu",
         solo, p99_solo, none, p99_none, with, p99_rota, cnt_none[0], cnt_none[1], cnt[0], cnt[1]);
    ok(solo > 0 && with > 0 && none > 0, "every request client ran");
    /* Slack: the one 2 ms kernel each spinner may have in flight (ROTA_MAX_INFLIGHT=1) when a request starts. */
    ok(with <= 1.5 * solo + 5.0, "with rota, the high client's p50 stays near solo (<= 1.5 x solo + 5 ms): %.2f vs %.2f",
       with, solo);
    ok(with < none, "with rota the high client is faster than without (%.2f < %.2f ms)", with, none);
    ok(cnt[0] >= 20 && cnt[1] >= 20, "the low spinners still made progress (>= 20 kernels each in 1.8 s): %lu, %lu",
       cnt[0], cnt[1]);
    usleep(50000); /* rotad adds up the last activation's figures at its next tick */
    uint64_t ev = atomic_load(&d0->hold_events), cev = atomic_load(&d0->confirm_events);
    ok(ev >= 1, "the high client measured high-launch-to-held latency (%llu activations)", (unsigned long long)ev);
    static const uint32_t bound_us[ROTA_LAT_BUCKETS] = ROTA_LAT_BOUNDS_US;
    static const uint64_t zero[ROTA_LAT_BUCKETS];
    uint64_t hist_n = 0;
    unsigned p99k = hold_pct_bucket(d0, zero, 99, &hist_n);
    if (ev)
        diag("high launch -> lower classes held (board): mean %.2f us, max %.1f us, p99 <= %u us over %llu "
             "activations; rotad confirmed with slot holds: mean %.1f us, max %.1f us over %llu",
             atomic_load(&d0->hold_lat_sum_ns) / 1e3 / (double)ev, atomic_load(&d0->hold_lat_max_ns) / 1e3,
             bound_us[p99k], (unsigned long long)ev,
             cev ? atomic_load(&d0->confirm_lat_sum_ns) / 1e3 / (double)cev : 0.0,
             atomic_load(&d0->confirm_lat_max_ns) / 1e3, (unsigned long long)cev);
    char hs[256];
    size_t hl = 0;
    for (unsigned k = 0; k < ROTA_LAT_BUCKETS && hl < sizeof hs; k++)
        hl += (size_t)snprintf(hs + hl, sizeof hs - hl, " %s%u:%llu", k + 1 < ROTA_LAT_BUCKETS ? "<=" : ">",
                               bound_us[k + 1 < ROTA_LAT_BUCKETS ? k : k - 1],
                               (unsigned long long)atomic_load(&d0->hold_lat_hist[k]));
    diag("histogram (us: activations):%s", hs);
    is_uint(hist_n, ev, "the latency histogram counts every activation");
    ok(ev && atomic_load(&d0->hold_lat_max_ns) < 50000000ull, "and its maximum is under a loose sanity bound (50 ms)");
    ok(cev >= 1 && atomic_load(&d0->confirm_lat_max_ns) < 50000000ull,
       "rotad confirmed the holds, under a loose sanity bound (50 ms)");
    }

    /* 10. high launch -> lower classes held, over enough activations for a p99 to mean something (300; 80 would
     * make it the maximum): short requests 8 ms apart (idle window 5 ms, so each one activates) beside a low
     * spinner. The hold is the gate's own store on the board, a few loads and one atomic add: the median must be
     * that (<= 20 us), where rotad's round trip, which it replaces, takes 50-70 us on average. Issue 5's goal, p99
     * <= 20 us, is a speed figure, shown here and in the README: on this 2-core machine a preemption inside that
     * span in 3 of the 300 activations puts the p99 in the 50-200 us bucket (one run in four, at times). */
    SECTION(10) {
        static const uint32_t bound_us[ROTA_LAT_BUCKETS] = ROTA_LAT_BOUNDS_US;
        uint64_t before[ROTA_LAT_BUCKETS];
        for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) before[k] = atomic_load(&d0->hold_lat_hist[k]);
        child_t sp, rq;
        const char *spenv[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=4000", "SCHED_KNS=500000", "ROTA_PRIORITY=low", NULL};
        const char *rqenv[] = {"SCHED_MODE=req", "SCHED_REQS=300", "SCHED_GAP_MS=8", "SCHED_KNS=100000",
                               "ROTA_PRIORITY=high", NULL};
        spawn(&sp, spenv);
        th_ready(&sp, "spinner did not start");
        spawn(&rq, rqenv);
        th_ready(&rq, "request client did not start");
        expect(&rq, "lat", 30000);
        th_finish(&rq);
        expect(&sp, "done", 10000);
        th_finish(&sp);
        usleep(50000); /* rotad adds up the last activations at its next tick */
        uint64_t n = 0;
        unsigned k = hold_pct_bucket(d0, before, 99, &n), k50 = hold_pct_bucket(d0, before, 50, &n);
        diag("high launch -> lower classes held: p50 <= %u us, p99 <= %u us (issue 5's goal: 20) over %llu "
             "activations", bound_us[k50], bound_us[k], (unsigned long long)n);
        ok(n >= 250, "the requests activated the high client again and again (%llu activations)", (unsigned long long)n);
        if (TH_SANITIZED)
            skip("the 20 us median is for uninstrumented builds; this one has a sanitizer (p50 <= %u us)",
                 bound_us[k50]);
        else
            ok(n && bound_us[k50] <= 20, "the median high launch -> lower classes held is the board's store, <= 20 us "
               "(<= %u us)", bound_us[k50]);
    }

    /* 2. weighted fair share among one class: weights 3 and 1 */
    SECTION(2) {
        child_t a, b;
        pair_start(&a, &b, "ROTA_WEIGHT=3", "ROTA_WEIGHT=1");
        /* Mid-run: the region shows both as live clients with launches and device time. */
        usleep(1500000);
        const rota_slot_sched_t *sa = slot_of(r, a.pid), *sb = slot_of(r, b.pid);
        rota_slot_t da = sa ? detail(r, sa) : (rota_slot_t){0}, db = sb ? detail(r, sb) : (rota_slot_t){0};
        ok(sa && sb && atomic_load(&da.launches) > 0 && atomic_load(&db.busy_ns) > 0 &&
               atomic_load(&da.priority) == ROTA_PRIO_NORMAL && atomic_load(&da.weight) == 3000,
           "the region shows class, weight, launches and device time per client");
        ok(atomic_load(&d0->busy_permille) > 500, "and the GPU's busy fraction (%u permille)",
           atomic_load(&d0->busy_permille));
        unsigned long na, nb;
        double ratio = pair_finish(&a, &b, &na, &nb);
        diag("fair share, weights 3:1: %lu vs %lu kernels of 2 ms, ratio %.2f", na, nb, ratio);
        ok(ratio >= 2.0 && ratio <= 4.5, "device time splits by weight 3:1 (ratio in 2.0..4.5): %.2f", ratio);
        ok(na + nb >= 700, "work-conserving: the GPU stayed busy (>= 700 of ~1500 kernel slots): %lu", na + nb);
    }

    /* 11. normal over low: equal weights, a low client's device time counts rotad's low factor (default 2) times,
     * so normal gets about 2/3 of the GPU and low 1/3; with nothing else active low would get all of it. */
    SECTION(11) {
        child_t a, b;
        pair_start(&a, &b, "ROTA_PRIORITY=normal", "ROTA_PRIORITY=low");
        unsigned long na, nb;
        double ratio = pair_finish(&a, &b, &na, &nb);
        diag("normal beside low, equal weights, low factor 2: %lu vs %lu kernels of 2 ms, ratio %.2f", na, nb, ratio);
        ok(ratio >= 1.4 && ratio <= 3.0, "normal gets about twice low's device time (ratio in 1.4..3.0): %.2f", ratio);
        ok(nb >= 100, "low still progresses (>= 100 kernels of 2 ms in 3 s): %lu", nb);
        ok(na + nb >= 700, "work-conserving: the GPU stayed busy (>= 700 of ~1500 kernel slots): %lu", na + nb);
    }

    /* 13. a bursty normal client (training steps with host gaps) beside a low spinner: normal keeps its pace,
     * low fills its gaps. rotad releases low when normal has nothing in flight and no thread launching
     * (--idle-low-us 0), hears it from normal's completion tracker rather than at its next tick, and normal comes
     * back with a credit (sched.c), so low is held again for normal's next step. */
    SECTION(13) {
        const char *eb[] = {"SCHED_MODE=burst", "SCHED_DUR_MS=2000", "SCHED_KNS=1000000", "SCHED_BURST=4",
                            "SCHED_GAP_US=4000", "ROTA_PRIORITY=normal", NULL};
        const char *el[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=2000", "SCHED_KNS=1000000", "ROTA_PRIORITY=low", NULL};
        child_t a;
        double it_solo = 0, it = 0;
        unsigned long n_solo = 0, n = 0, nl = 0;
        spawn(&a, eb);
        th_ready(&a, "bursty client");
        sscanf(expect(&a, "iter", 10000), "iter %lf %lu", &it_solo, &n_solo);
        th_finish(&a);
        burst_pair(eb, el, &it, &n, &nl);
        /* What normal leaves: the run less normal's 4 ms of kernels per step (2000 ms is both runs' length). */
        double gaps_ms = 2000.0 - 4.0 * (double)n, filled = gaps_ms > 0 ? (double)nl / gaps_ms : 0;
        diag("bursty normal (4 x 1 ms + 4 ms host gap): %.2f ms per step alone, %.2f beside a low spinner of 1 ms "
             "kernels, which ran %lu kernels in normal's %.0f ms of gaps (%.2f)", it_solo, it, nl, gaps_ms, filled);
        ok(n_solo > 0 && n > 0 && it <= 1.35 * it_solo + 0.5,
           "normal keeps its pace beside low (step <= 1.35 x alone + 0.5 ms): %.2f vs %.2f ms", it, it_solo);
        ok(filled >= 0.6, "low fills normal's host gaps (>= 0.6 of them with kernels): %.2f", filled);
    }

    /* 14. a client that syncs after every launch and works 1 ms on the host is idle between each completion and
     * its next launch: it must still be held back to its weight, not dodge its share hold at every sync. Weights
     * 1:3 against a spinner: dodging gives 1.0; kept to its share, about 1.9 here rather than 3, because rotad's
     * estimate charges the client's one kernel as in flight while it waits behind the spinner's timeslice. */
    SECTION(14) {
        const char *ea[] = {"SCHED_MODE=burst", "SCHED_DUR_MS=3000", "SCHED_KNS=2000000", "SCHED_BURST=1",
                            "SCHED_GAP_US=1000", "ROTA_WEIGHT=1", NULL};
        const char *eb[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=3000", "SCHED_KNS=2000000", "ROTA_WEIGHT=3", NULL};
        double it;
        unsigned long na, nb;
        burst_pair(ea, eb, &it, &na, &nb);
        double ratio = na ? (double)nb / (double)na : 0;
        diag("weight 3 spinner against weight 1 launch+sync client: %lu vs %lu kernels of 2 ms, ratio %.2f", nb, na,
             ratio);
        ok(ratio >= 1.4 && ratio <= 4.5, "the syncing client is held to its weight (ratio in 1.4..4.5): %.2f", ratio);
        ok(na + nb >= 1100, "work-conserving: the GPU stayed busy (>= 1100 of ~1500 kernel slots): %lu", na + nb);
    }

    /* 3. capture under a hold, sync while held */
    SECTION(3) {
        child_t hi, lo;
        const char *eh[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=1500", "SCHED_KNS=2000000", "ROTA_PRIORITY=high",
                            "SCHED_WINDOW=16", NULL};
        const char *el[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", NULL};
        spawn(&lo, el);
        th_ready(&lo, "low client");
        const char *l = th_say(&lo, "spin 2 50000000", 5000); /* 100 ms of work in flight before the hold */
        int rc = -1;
        sscanf(l, "%d", &rc);
        double t0 = th_now_ms();
        spawn(&hi, eh);
        th_ready(&hi, "high client");
        const rota_slot_sched_t *sl = slot_of(r, lo.pid);
        ok(rc == 0 && sl && wait_hold(sl, true, 3000), "a low client is held while a high client launches");
        double cap = -1, gl = -1;
        l = th_say(&lo, "sync", 5000);
        double sy = -1;
        bool got = sscanf(l, "%d %lf", &rc, &sy) == 2;
        ok(got && rc == 0 && sy < 1000,
           "a held client's sync of its already-issued work returns (%.1f ms)", sy);
        l = th_say(&lo, "capture", 10000);
        got = sscanf(l, "%d %lf %lf", &rc, &cap, &gl) == 3;
        ok(got && rc == 0, "capture + graph launch on a held stream work");
        double left = 1500 - (th_now_ms() - t0);
        ok(cap >= 0 && cap < 300, "the capture itself does not wait for the hold (%.1f ms)", cap);
        ok(gl > 100, "the graph launch is gated: it waited for the high client (%.1f ms > 100 ms; %.0f ms were left)",
           gl, left + gl);
        th_finish(&hi);
        l = th_say(&lo, "ephemeral", 5000);
        rc = -1;
        sscanf(l, "%d", &rc);
        is_int(rc, 0, "launches on a stream destroyed while they are in flight");
        l = th_say(&lo, "spin 4 5000000", 5000);
        rc = -1;
        sscanf(l, "%d", &rc);
        l = th_say(&lo, "sync", 5000);
        int rc2 = -1;
        sscanf(l, "%d", &rc2);
        ok(rc == 0 && rc2 == 0, "and the tracker goes on: later launches are bounded and complete (%d, %d)", rc, rc2);
        th_finish(&lo);
    }

    /* 7. uncontended launches are not tracked; a high client's registration brings the bound back */
    SECTION(7) {
        child_t lo, hi;
        const char *el[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", "ROTA_MAX_INFLIGHT=1", NULL};
        const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
        spawn(&lo, el);
        th_ready(&lo, "low client");
        const rota_slot_sched_t *sl = slot_of(r, lo.pid);
        th_say(&lo, "spin 1 1000000", 5000); /* rotad learns its GPU */
        th_say(&lo, "sync", 5000);
        ok(sl && wait_track(sl, 0, 3000), "a lone low client is uncontended (slot.contended 0)");
        for (int i = 0; sl && detail_inflight(r, sl) && i < 1000; i++) usleep(1000); /* rotad saw it done */
        double t = -1;
        int rc = -1;
        uint64_t dev0 = atomic_load(&d0->busy_ns);
        sscanf(th_say(&lo, "spin 4 50000000", 5000), "%d %lf", &rc, &t);
        /* A tracked launch shows in slot.inflight (rotad copies it every tick) for its 50 ms: of the 4, only the
         * first, sampled for its device time, may. */
        bool zero = true;
        for (int i = 0; sl && i < 10; i++, usleep(5000)) zero &= detail_inflight(r, sl) <= 1;
        ok(rc == 0 && zero && t >= 0 && t < 100,
           "uncontended: at most the sampled launch tracked (slot.inflight <= 1 over 50 ms) and no bound (4 x 50 ms "
           "in %.1f ms < 100)", t);
        /* Yet rotad sees all of it once the client synchronised: its 5 launches (the count once lagged by the last
         * one) and its device time, 200 ms of kernels (sampled, timed by events; once 0 while uncontended). */
        th_say(&lo, "sync", 5000);
        rota_slot_t dl = {0};
        for (int i = 0; sl && i < 200; i++, usleep(5000)) {
            dl = detail(r, sl);
            if (atomic_load(&dl.launches) >= 5 && atomic_load(&dl.busy_ns) >= 100000000ull) break;
        }
        is_int((long long)atomic_load(&dl.launches), 5, "uncontended: rotad counts every launch once synchronised");
        uint64_t bz = atomic_load(&dl.busy_ns);
        ok(bz >= 100000000ull && bz <= 400000000ull,
           "uncontended: its device time is seen (%.1f ms for 201 ms of kernels; 100-400 accepted)", (double)bz / 1e6);
        /* and its GPU's busy time (rota top's BUSY%, the metrics) counts them, credited over the next ticks */
        uint64_t dbz = 0;
        for (int i = 0; i < 100; i++, usleep(10000))
            if ((dbz = atomic_load(&d0->busy_ns) - dev0) >= 150000000ull) break;
        ok(dbz >= 150000000ull && dbz <= 400000000ull, "uncontended: the GPU's busy time grew %.1f ms (150-400 accepted)",
           (double)dbz / 1e6);
        spawn(&hi, eh);
        th_ready(&hi, "high client");
        ok(sl && wait_track(sl, 1, 3000), "a high client registers: the low client tracks again (slot.contended 1)");
        rc = -1;
        t = -1;
        sscanf(th_say(&lo, "spin 3 50000000", 5000), "%d %lf", &rc, &t);
        ok(rc == 0 && t >= 90, "and its bound is in effect: 3 x 50 ms with ROTA_MAX_INFLIGHT=1 take %.1f ms >= 90", t);
        th_say(&lo, "sync", 5000);
        th_finish(&hi);
        th_finish(&lo);
    }

    /* 9. the default in-flight bound is device time (ROTA_INFLIGHT_US=500): one 50 ms kernel at a time, several
     * 20 us ones, beside an idle high client (so the low client tracks) */
    SECTION(9) {
        child_t lo, hi;
        /* The count alone: no launch queued ahead of a completion (the refill has its own check below). */
        const char *el[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", "ROTA_REFILL_US=0", NULL};
        const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
        spawn(&hi, eh);
        spawn(&lo, el);
        th_ready(&hi, "bound clients");
        th_ready(&lo, "bound clients");
        const rota_slot_sched_t *sl = slot_of(r, lo.pid);
        ok(sl && wait_track(sl, 1, 3000), "beside a registered high client the low client tracks");
        unsigned long maxinf[2] = {0, 0};
        double took[2] = {-1, -1};
        const char *cmds[2] = {"spin 6 50000000", "spin 3000 20000"};
        /* The bound follows a moving average of the client's launches (1/8 per completion): teach it first. */
        const char *teach[2] = {"spin 4 50000000", "spin 64 20000"};
        for (int k = 0; k < 2 && sl; k++) {
            th_say(&lo, teach[k], 5000);
            th_say(&lo, "sync", 5000);
            const char *l;
            maxinf[k] = max_inflight_during(&lo, r, sl, cmds[k], &l);
            int rc = -1;
            sscanf(l, "%d %lf", &rc, &took[k]);
            th_say(&lo, "sync", 10000);
        }
        diag("in flight at most %lu with 50 ms kernels (6 launched in %.1f ms), %lu with 20 us kernels", maxinf[0],
             took[0], maxinf[1]);
        ok(maxinf[0] == 1 && took[0] >= 200, "50 ms kernels: one in flight (seen %lu), so 6 launches wait for 5 (%.1f ms)",
           maxinf[0], took[0]);
        ok(maxinf[1] >= 3, "20 us kernels: several in flight under the same 500 us budget (seen %lu)", maxinf[1]);
        th_finish(&hi);
        /* With no client of a class above it on the GPU, nobody waits for its queue but a peer taking over from a
         * held one: two in flight, so the GPU does not idle from each completion to the next launch. A second
         * low client keeps it contended (tracked). Beside a normal client (which preempts low) the time bound
         * holds again. */
        bool gone = false;
        for (int i = 0; i < 300 && !(gone = atomic_load(&d0->high_clients) == 0); i++) usleep(10000);
        ok(gone, "rotad counts the high client gone (dev.high_clients 0)");
        th_finish(&lo);
        /* A new low client of a large weight: its share never holds it, whatever it ran before. */
        const char *ew[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", "ROTA_WEIGHT=1000", "ROTA_REFILL_US=0", NULL};
        spawn(&lo, ew);
        th_ready(&lo, "bound client");
        sl = slot_of(r, lo.pid);
        th_say(&lo, "spin 4 50000000", 5000); /* teach the bound its 50 ms average (1/8 per completion) */
        th_say(&lo, "sync", 5000);
        unsigned long mx2[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            child_t sp;
            const char *es[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=1500", "SCHED_KNS=2000000",
                                k ? "ROTA_PRIORITY=normal" : "ROTA_PRIORITY=low", NULL};
            spawn(&sp, es);
            th_ready(&sp, "spinner");
            /* the spinner's class counts from its first launch (rotad publishes it with the contended word) */
            for (int i = 0; k && i < 3000 && atomic_load(&d0->normal_clients) == 0; i++) usleep(1000);
            if (sl && wait_track(sl, 1, 3000)) {
                if (!k) { /* alone it was not tracked (the only client rotad has): teach the bound now */
                    th_say(&lo, "spin 4 50000000", 5000);
                    th_say(&lo, "sync", 5000);
                }
                mx2[k] = max_inflight_during(&lo, r, sl, "spin 4 50000000", NULL);
                th_say(&lo, "sync", 10000);
            }
            expect(&sp, "done", 10000);
            th_finish(&sp);
        }
        ok(mx2[0] == 2, "beside another low client only: 50 ms kernels keep two in flight (seen %lu)", mx2[0]);
        ok(mx2[1] == 1, "beside a normal client: one (seen %lu)", mx2[1]);
        th_finish(&lo);
        /* ROTA_REFILL_US: a client bounded to one launch (2 ms kernels, a 1 us time budget, beside a high
         * client) queues its next launch once the running one is due to end within the refill time, so the GPU
         * does not idle through the wake-ups from each completion to the next launch: two in flight for a moment
         * at each launch, never three (two are 2 ms ahead, more than the refill). With 0, never more than one. */
        unsigned long mr[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            child_t h2, l2;
            const char *eh2[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
            const char *el2[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", "ROTA_INFLIGHT_US=1",
                                 k ? "ROTA_REFILL_US=0" : "ROTA_REFILL_US=800", NULL};
            spawn(&h2, eh2);
            spawn(&l2, el2);
            th_ready(&h2, "high client");
            th_ready(&l2, "bound client");
            const rota_slot_sched_t *s2 = slot_of(r, l2.pid);
            if (s2 && wait_track(s2, 1, 3000)) {
                th_say(&l2, "spin 8 2000000", 5000); /* teach the bound its 2 ms average */
                th_say(&l2, "sync", 5000);
                mr[k] = max_inflight_during(&l2, r, s2, "spin 200 2000000", NULL);
                th_say(&l2, "sync", 10000);
            }
            th_finish(&l2);
            th_finish(&h2);
        }
        ok(mr[0] == 2, "ROTA_REFILL_US=800: the next 2 ms launch queues before the running one ends, two in flight "
                       "at most (seen %lu)", mr[0]);
        ok(mr[1] == 1, "ROTA_REFILL_US=0: one in flight (seen %lu)", mr[1]);
    }

    /* 4. kill -9 of a held client, then of the high client */
    SECTION(4) {
        child_t hi, lo1, lo2;
        const char *eh[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=20000", "SCHED_KNS=2000000", "ROTA_PRIORITY=high",
                            "SCHED_WINDOW=16", NULL};
        const char *el[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=3000", "SCHED_KNS=2000000", "ROTA_PRIORITY=low", NULL};
        spawn(&hi, eh);
        th_ready(&hi, "high client");
        spawn(&lo1, el);
        spawn(&lo2, el);
        th_ready(&lo1, "low");
        th_ready(&lo2, "low");
        const rota_slot_sched_t *s1 = slot_of(r, lo1.pid), *s2 = slot_of(r, lo2.pid);
        ok(s1 && s2 && wait_hold(s1, true, 3000) && wait_hold(s2, true, 3000), "both low clients are held");
        unsigned long before = progress(&lo2, 300);
        th_kill9(&lo1);
        ok(wait_hold(s2, true, 200), "kill -9 of a held client: the other stays held while the high one runs");
        unsigned long held_n = progress(&lo2, 300);
        double t = th_now_ms();
        th_kill9(&hi);
        bool released = wait_hold(s2, false, 2000);
        double rel = th_now_ms() - t;
        unsigned long after = progress(&lo2, 400);
        ok(released && rel < 1000, "kill -9 of the high client releases the held one within 1 s (%.1f ms)", rel);
        ok(after > held_n + 20, "and it makes progress again (%lu -> %lu kernels; %lu while held)", held_n, after,
           held_n - before);
        th_finish(&lo2);
    }

    /* 8. the board holds lower classes before rotad has run at all: rotad stopped (SIGSTOP), a high client's
     * activating launch still holds a low client's next launch, and rotad, once it runs, answers and releases. */
    SECTION(8) {
        child_t hi, lo;
        const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
        const char *el[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=low", NULL};
        spawn(&hi, eh);
        spawn(&lo, el);
        th_ready(&hi, "board clients");
        th_ready(&lo, "board clients");
        /* Both idle: a low launch passes at once. */
        const char *l = th_say(&lo, "spin 1 1000", 5000);
        double t = -1;
        int rc = -1;
        bool got = sscanf(l, "%d %lf", &rc, &t) == 2;
        ok(got && rc == 0 && t < 1000, "an idle high client holds nobody (%.1f ms)", t);
        th_say(&lo, "sync", 5000);
        usleep(300000); /* both idle again for rotad (--idle-ms 5, plus the shared machine's slack) */
        const rota_slot_sched_t *sl = slot_of(r, lo.pid);
        ok(sl && atomic_load(&sl->hold) == 0, "the low client is not held by rotad");
        kill(rotad, SIGSTOP);
        usleep(20000);
        l = th_say(&hi, "spin 1 20000000", 5000); /* 20 ms of high work: activates with rotad asleep */
        rc = -1;
        ok(sscanf(l, "%d", &rc) == 1 && rc == 0, "a high client launches while rotad is stopped");
        fprintf(lo.to, "spin 1 1000\n");
        l = th_say(&lo, NULL, 400);
        ok(!l[0], "the low client's next launch is held by the board alone (no answer in 400 ms)");
        ok(atomic_load(&sl->hold) == 0, "while rotad itself never set its hold");
        kill(rotad, SIGCONT);
        l = th_say(&lo, NULL, 5000);
        rc = -1;
        got = sscanf(l, "%d %lf", &rc, &t) == 2;
        ok(got && rc == 0 && t >= 400,
           "rotad runs again: it answers the board and the low launch goes once the high client is idle (%.1f ms)", t);
        th_say(&lo, "sync", 5000);
        th_finish(&hi);
        th_finish(&lo);
    }

    /* 15. direct release (runtime/abi.h): the GPU's only high client ends a lower client's priority hold itself
     * when its last kernel completes. rotad is stopped (SIGSTOP) once its hold is out, so only the board can end
     * it; with a second high client registered, nothing does until rotad runs again. */
    SECTION(15) {
        child_t hi, lo, hi2;
        const rota_slot_sched_t *ls = hold_pair(&hi, &lo, r);
        const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
        is_uint(atomic_load(&r->high_idle_ns), 5000000, "rotad publishes its idle window for high clients (--idle-ms 5)");

        const char *hr = th_say(&hi, "spin 1 300000000", 5000);
        if (!ok(wait_hold(ls, true, 2000), "a high client's 300 ms kernel holds the normal client")) {
            const rota_slot_sched_t *hs = slot_of(r, hi.pid);
            rota_slot_t hd = hs ? detail(r, hs) : (rota_slot_t){0};
            diag("high reply '%s' slot %s: device %d state %u inflight %u; GPU 0: high_active %u high_clients %u "
                 "held %u", hr, hs ? "found" : "missing", hs ? (int)atomic_load(&hd.device) : -9,
                 hs ? atomic_load(&hd.sched_state) : 9u, hs ? atomic_load(&hd.inflight) : 9u,
                 atomic_load(&d0->high_active), atomic_load(&d0->high_clients), atomic_load(&d0->held));
            char cmd[512];
            snprintf(cmd, sizeof cmd, "tail -c 3000 %s >&2; echo --- >&2; tail -c 1500 %s >&2", hi.err, lo.err);
            if (system(cmd)) diag("could not show the clients' stderr");
        }
        usleep(20000); /* rotad has answered the board's mark */
        kill(rotad, SIGSTOP);
        double t0 = th_now_ms();
        fprintf(lo.to, "spin 1 1000000\n");
        const char *l = expect(&lo, "0 ", 5000);
        double dt = th_now_ms() - t0;
        uint32_t h = atomic_load(&ls->hold);
        ok(l[0] && h == ROTA_HOLD_PRIO, "rotad stopped: the held launch went once the high kernel ended, with its "
           "slot still held by rotad (hold %u)", h);
        ok(l[0] && dt > 100, "  not before: %.0f ms after it was asked for (about 280 ms of the kernel were left)", dt);

        th_say(&hi, "spin 1 200000000", 5000);
        t0 = th_now_ms();
        fprintf(lo.to, "spin 1 1000000\n");
        l = expect(&lo, "0 ", 5000);
        dt = th_now_ms() - t0;
        ok(l[0] && dt > 100, "rotad still stopped: the high client's next kernel holds it again, and its end releases "
           "it (%.0f ms of that 200 ms kernel)", dt);
        kill(rotad, SIGCONT);
        ok(wait_hold(ls, false, 3000), "rotad, running again, releases the slot too");
        th_say(&lo, "sync", 5000);

        spawn(&hi2, eh);
        th_ready(&hi2, "second high client");
        double end = th_now_ms() + 3000;
        while (atomic_load(&d0->high_clients) != 2 && th_now_ms() < end) usleep(1000);
        is_uint(atomic_load(&d0->high_clients), 2, "a second high client registers on the GPU");
        th_say(&hi, "spin 1 200000000", 5000);
        ok(wait_hold(ls, true, 2000), "the high kernel holds the normal client again");
        usleep(20000);
        kill(rotad, SIGSTOP);
        fprintf(lo.to, "spin 1 1000000\n");
        l = expect(&lo, "0 ", 700);
        ok(!l[0], "with two high clients one going idle frees nobody: still held 700 ms later (the kernel took 200)");
        kill(rotad, SIGCONT);
        l = expect(&lo, "0 ", 5000);
        ok(l[0], "  until rotad runs again");
        th_say(&lo, "sync", 5000);
        th_finish(&hi2);
        th_finish(&hi);
        th_finish(&lo);
    }

    /* 17. a direct release frees only whom rotad would free: a normal client held for its share (weight 1 beside
     * a spinner of weight 1000) when a high kernel comes keeps the share bit beside the priority bit, so the
     * high client's idle bit frees the spinner, not it (rotad stopped, as in 15). */
    SECTION(17) {
        child_t hi, a, b;
        const char *eh[] = {"SCHED_MODE=cmd", "ROTA_PRIORITY=high", NULL};
        const char *ea[] = {"SCHED_MODE=cmd", "ROTA_WEIGHT=1", NULL};
        /* the spinner keeps 4 kernels queued (it never drains, so never idles and frees the share meanwhile) */
        const char *eb[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=6000", "SCHED_KNS=1000000", "SCHED_WINDOW=4",
                            "ROTA_WEIGHT=1000", NULL};
        spawn(&hi, eh);
        spawn(&a, ea);
        spawn(&b, eb);
        th_ready(&hi, "high command client");
        th_ready(&a, "weight-1 client");
        th_ready(&b, "weight-1000 spinner");
        const rota_slot_sched_t *as = slot_of(r, a.pid), *bs = slot_of(r, b.pid);
        if (!as || !bs) bail("no slot for the normal clients");
        fprintf(a.to, "spin 40 2000000\n"); /* held for its share before these are all launched */
        bool share = false;
        for (int i = 0; i < 3000 && !(share = atomic_load(&as->hold) & ROTA_HOLD_SHARE); i++) usleep(1000);
        ok(share, "a weight-1 client beside a weight-1000 spinner is held for its share");
        th_say(&hi, "spin 1 300000000", 5000);
        uint32_t want = ROTA_HOLD_PRIO | ROTA_HOLD_SHARE, ha = 0, hb = 0;
        for (int i = 0; i < 2000; i++) {
            ha = atomic_load(&as->hold);
            hb = atomic_load(&bs->hold);
            if (ha == want && hb == ROTA_HOLD_PRIO) break;
            usleep(1000);
        }
        ok(ha == want && hb == ROTA_HOLD_PRIO, "a high kernel: the share-held client keeps its share bit beside the "
           "priority bit (hold %u), the spinner is held for priority alone (hold %u)", ha, hb);
        usleep(20000);
        kill(rotad, SIGSTOP);
        unsigned long n0 = progress(&b, 50);
        usleep(400000); /* the high kernel ends within this */
        unsigned long n1 = progress(&b, 300);
        const char *l = th_say(&a, NULL, 10);
        ok(n1 > n0, "rotad stopped, the high kernel over: the spinner runs again (its kernel count: %lu reported "
           "while held, %lu after)", n0, n1);
        ok(!l[0] && atomic_load(&as->hold) == want, "  the client over its share stays held: its launches wait for "
           "rotad");
        kill(rotad, SIGCONT);
        l = expect(&a, "0 ", 15000);
        ok(l[0], "rotad, running again, lets it go in its turn");
        th_say(&a, "sync", 5000);
        expect(&b, "done", 10000);
        th_finish(&b);
        th_finish(&a);
        th_finish(&hi);
    }

    /* 5. rotad killed while a client is held: the client proceeds (fail-open) */
    SECTION(5) {
        child_t hi, lo;
        const char *eh[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=4000", "SCHED_KNS=2000000", "ROTA_PRIORITY=high",
                            "SCHED_WINDOW=16", NULL};
        const char *el[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=2500", "SCHED_KNS=2000000", "ROTA_PRIORITY=low", NULL};
        spawn(&hi, eh);
        th_ready(&hi, "high client");
        spawn(&lo, el);
        th_ready(&lo, "low client");
        const rota_slot_sched_t *sl = slot_of(r, lo.pid);
        ok(sl && wait_hold(sl, true, 3000), "the low client is held");
        unsigned long held_n = progress(&lo, 300);
        conn_close(obs);
        obs = NULL;
        kill(rotad, SIGKILL);
        waitpid(rotad, NULL, 0);
        unsigned long after = progress(&lo, 800);
        ok(after > held_n + 20, "rotad killed: the held client proceeds uncoordinated (%lu -> %lu kernels)", held_n,
           after);
        th_kill9(&hi);
        unsigned long n = 0;
        sscanf(expect(&lo, "done", 10000), "done %lu", &n);
        ok(th_finish(&lo) == 0 && n > 0, "and finishes normally");
    }
    /* 6. exclusive-quantum mode: one client of a class at a time */
    SECTION(6) {
        if (!only || atoi(only) != 6) th_cleanup(); /* rotad was killed: its lock and socket stay behind */
        else th_rotad_stop(rotad);
        const char *qargs[] = {"--quantum-ms", "50", NULL};
        rotad = th_rotad_start_args(qargs);
        obs = observe();
        r = conn_region(obs);
        child_t a, b;
        const char *e[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=1500", "SCHED_KNS=2000000", NULL};
        spawn(&a, e);
        spawn(&b, e);
        th_ready(&a, "spinners");
        th_ready(&b, "spinners");
        usleep(200000);
        const rota_slot_sched_t *sa = slot_of(r, a.pid), *sb = slot_of(r, b.pid);
        int one = 0, samples = 0;
        for (; sa && sb && samples < 40; samples++) {
            uint32_t ha = atomic_load(&sa->hold), hb = atomic_load(&sb->hold);
            one += ((ha == ROTA_HOLD_QUANTUM) + (hb == ROTA_HOLD_QUANTUM)) == 1;
            usleep(20000);
        }
        unsigned long na = 0, nb = 0;
        sscanf(expect(&a, "done", 10000), "done %lu", &na);
        sscanf(expect(&b, "done", 10000), "done %lu", &nb);
        th_finish(&a);
        th_finish(&b);
        diag("exclusive quanta of 50 ms: exactly one of two spinners held in %d of %d samples; kernels %lu + %lu", one,
             samples, na, nb);
        ok(samples && one * 2 >= samples, "--quantum-ms: one client of the class runs at a time (most samples)");
        ok(na > 100 && nb > 100 && na < 2 * nb && nb < 2 * na, "and the quanta alternate fairly (%lu vs %lu)", na, nb);
        conn_close(obs);
        obs = NULL;
        th_rotad_stop(rotad);
    }

    /* 12. rotad --low-factor 1: each class shares on its own, so a normal and a low spinner split the GPU evenly
     * (against about 2:1 with the default, section 11). */
    SECTION(12) {
        if (only) { /* the first rotad still runs: section 6 did not stop it */
            conn_close(obs);
            obs = NULL;
            th_rotad_stop(rotad);
        }
        const char *largs[] = {"--low-factor", "1", NULL};
        rotad = th_rotad_start_args(largs);
        child_t a, b;
        pair_start(&a, &b, "ROTA_PRIORITY=normal", "ROTA_PRIORITY=low");
        unsigned long na, nb;
        double ratio = pair_finish(&a, &b, &na, &nb);
        diag("normal beside low, equal weights, --low-factor 1: %lu vs %lu kernels of 2 ms, ratio %.2f", na, nb, ratio);
        ok(ratio >= 0.67 && ratio <= 1.5, "--low-factor 1: normal and low split evenly (ratio in 0.67..1.5): %.2f",
           ratio);
        ok(na + nb >= 700, "work-conserving: the GPU stayed busy (>= 700 of ~1500 kernel slots): %lu", na + nb);
        th_rotad_stop(rotad);
    }
    /* 16. direct release keeps rotad's idle rule: with --idle-ms 400, a high kernel of 150 ms ends before the
     * window and releases nobody itself; rotad does, 400 ms after the high launch. */
    SECTION(16) {
        if (only) { /* the first rotad still runs */
            conn_close(obs);
            th_rotad_stop(rotad);
        }
        const char *iargs[] = {"--idle-ms", "400", NULL};
        rotad = th_rotad_start_args(iargs);
        obs = observe();
        const rota_region_t *ri = conn_region(obs);
        child_t hi, lo;
        const rota_slot_sched_t *ls = hold_pair(&hi, &lo, ri);
        double t0 = th_now_ms();
        th_say(&hi, "spin 1 150000000", 5000);
        ok(wait_hold(ls, true, 2000), "--idle-ms 400: a high kernel of 150 ms holds the normal client");
        const char *l;
        double dt = held_launch(&lo, t0, 5000, &l);
        ok(l[0] && dt > 300, "  whose launch goes once rotad's window has passed, %.0f ms after the high launch (the "
           "high kernel ended at 150 ms, the window at 400)", dt);
        th_say(&lo, "sync", 5000);
        pair_done(&hi, &lo, &obs, rotad);
    }
    /* 18. the learned idle window (abi.h): with --idle-ms 40, a high client whose gaps all outlast 40 ms learns to
     * release at once; one with short gaps between them learns a window above those; --idle-fixed keeps 40 ms,
     * counted from the completion of work that outlasts it. */
    SECTION(18) {
        if (only) { /* the first rotad still runs */
            if (obs) conn_close(obs);
            th_rotad_stop(rotad);
        }
        for (int fixed = 0; fixed < 2; fixed++) {
            const char *largs[] = {"--idle-ms", "40", fixed ? "--idle-fixed" : NULL, NULL};
            rotad = th_rotad_start_args(largs);
            obs = observe();
            const rota_region_t *ri = conn_region(obs);
            is_uint(atomic_load(&ri->high_idle_learn), fixed ? 0 : 1, "%s: rotad publishes whether windows are "
                    "learned", fixed ? "--idle-fixed" : "default");
            child_t hi, lo;
            const rota_slot_sched_t *ls = hold_pair(&hi, &lo, ri);
            const rota_slot_sched_t *hs = slot_of(ri, hi.pid);
            if (!hs) bail("no slot for the high client");
            for (unsigned i = 0; i < IDLEWIN_MIN_GAPS + 3; i++) { /* gaps of 60 ms: all beyond the 40 ms price */
                th_say(&hi, "spin 1 3000000", 5000);
                th_say(&hi, "sync", 5000);
                usleep(60000);
            }
            double win = detail_idle_win(ri, hs) / 1e6;
            if (!fixed) ok(win == 0, "%u gaps of 60 ms beside --idle-ms 40: the window rotad applies is 0 (%.3f ms)",
                           IDLEWIN_MIN_GAPS + 3, win);
            else ok(win == 40, "--idle-fixed: the window stays 40 ms (%.3f ms)", win);
            char cmd[1024];
            snprintf(cmd, sizeof cmd, "%s/bin/rota status --json --sample 0 --socket %s", getenv("ROTA_BUILD"),
                     th_sock);
            char *js = th_run_out(cmd), *at = strstr(js, "\"idle_win_us\":");
            ok(at && !strstr(at + 1, "\"idle_win_us\":") && !strncmp(at + 14, fixed ? "40000.0" : "0.0", fixed ? 7 : 3),
               "  rota status --json shows it for the high client only: %.24s", at ? at : "(none)");
            double t0 = th_now_ms();
            th_say(&hi, "spin 1 3000000", 5000);
            ok(wait_hold(ls, true, 2000), "  a 3 ms high kernel holds the normal client");
            const char *l;
            double dt = held_launch(&lo, t0, 5000, &l);
            if (!fixed) ok(l[0] && dt < 25, "  whose launch goes when that kernel ends, %.1f ms after the high launch "
                           "(accepted: under 25; the fixed window ends at 40)", dt);
            else ok(l[0] && dt > 35, "  whose launch goes when the window ends, %.1f ms after the high launch "
                    "(accepted: over 35)", dt);
            th_say(&lo, "sync", 5000);
            if (fixed) {
                /* work that outlasts the window: idle counts from its completion, not from its launch */
                t0 = th_now_ms();
                th_say(&hi, "spin 1 60000000", 5000);
                ok(wait_hold(ls, true, 2000), "  a 60 ms high kernel, longer than the window, holds the normal client");
                dt = held_launch(&lo, t0, 5000, &l);
                ok(l[0] && dt > 90, "  whose launch goes 40 ms after that kernel ends, %.1f ms after the high launch "
                   "(accepted: over 90; counted from the launch, the window had passed when the kernel ended)", dt);
                th_say(&lo, "sync", 5000);
            }
            if (!fixed) {
                /* a server whose requests follow at ~1 ms when queued: the window covers those gaps */
                for (int i = 0; i < 24; i++) {
                    th_say(&hi, "spin 1 3000000", 5000);
                    th_say(&hi, "sync", 5000);
                    usleep(1000);
                    th_say(&hi, "spin 1 3000000", 5000);
                    th_say(&hi, "sync", 5000);
                    usleep(60000);
                }
                win = detail_idle_win(ri, hs) / 1e6;
                ok(win >= 1 && win <= 20, "  then half its gaps 1 ms: a window above them, under half the price "
                   "(%.3f ms; accepted 1..20)", win);
                /* rotad stopped once its hold is out: only the high client's tracker, at the end of that
                 * window after the kernel, can release the normal client (the timed direct release) */
                const rota_dev_t *dv = &ri->devices[0];
                uint64_t conf0 = atomic_load(&dv->confirm_events);
                t0 = th_now_ms();
                th_say(&hi, "spin 1 3000000", 5000);
                ok(wait_hold(ls, true, 2000), "  a 3 ms high kernel holds the normal client again");
                /* Stopped between publishing the slot holds and clearing the board's mark (the same tick, a few
                 * microseconds apart), rotad would leave the mark of an activation it has not answered, which
                 * keeps the lower classes held until it runs again: stop it once that tick is over, which the
                 * confirmation it counts after both shows. */
                for (double end = th_now_ms() + 200; atomic_load(&dv->confirm_events) == conf0 && th_now_ms() < end;)
                    usleep(100);
                kill(rotad, SIGSTOP);
                dt = held_launch(&lo, t0, 3000, &l);
                uint32_t h = atomic_load(&ls->hold);
                kill(rotad, SIGCONT);
                ok(l[0] && dt < 30 && h == ROTA_HOLD_PRIO, "  rotad stopped: the high client's tracker releases it "
                   "once the window has passed after the kernel, %.1f ms after the high launch (accepted: under 30), "
                   "its slot still held by rotad (hold %u)", dt, h);
                if (!l[0]) expect(&lo, "0 ", 5000);
                th_say(&lo, "sync", 5000);
            }
            pair_done(&hi, &lo, &obs, rotad);
        }
    }
    /* 19. the idle probe (shim/client-idleprobe.c): with --idle-ms 40, a high client whose launching thread sleeps
     * once its 3 ms kernel is out releases the normal client when that kernel ends; one whose thread runs on the
     * CPU, or waits on a futex, keeps the 40 ms window after it; so does a sleeping one with ROTA_IDLE_PROBE=0. */
    SECTION(19) {
        if (only) { /* the first rotad still runs */
            if (obs) conn_close(obs);
            th_rotad_stop(rotad);
        }
        static const struct {
            const char *cmd, *what, *env;
            bool early;
        } cases[] = {
            {"sleep 80", "sleeps (clock_nanosleep)", NULL, true},
            {"busy 80", "runs on the CPU", NULL, false},
            {"wait 80", "waits on a condition variable (a futex)", NULL, false},
            {"sleep 80", "sleeps, with ROTA_IDLE_PROBE=0", "ROTA_IDLE_PROBE=0", false},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            const char *pargs[] = {"--idle-ms", "40", NULL};
            rotad = th_rotad_start_args(pargs);
            obs = observe();
            const rota_region_t *ri = conn_region(obs);
            child_t hi, lo;
            char tpath[256], tenv[300];
            snprintf(tpath, sizeof tpath, "%s/idle-probe-%zu.jsonl", th_dir, k);
            snprintf(tenv, sizeof tenv, "ROTA_TRACE=%s", tpath);
            unlink(tpath);
            const rota_slot_sched_t *ls = hold_pair_env(&hi, &lo, ri, cases[k].env, tenv);
            double t0 = th_now_ms();
            th_say(&hi, "spin 1 3000000", 5000);
            fprintf(hi.to, "%s\n", cases[k].cmd);
            fflush(hi.to);
            bool held = wait_hold(ls, true, 2000);
            const char *l;
            double dt = held_launch(&lo, t0, 5000, &l);
            if (cases[k].early)
                ok(held && l[0] && dt < 25, "a high client that %s once its 3 ms kernel is out releases the normal "
                   "client when the kernel ends: its launch goes %.1f ms after the high launch (accepted: under "
                   "25; the window ends at 43)", cases[k].what, dt);
            else
                ok(held && l[0] && dt > 35, "a high client that %s keeps the window: the normal client's launch "
                   "goes %.1f ms after the high launch (accepted: over 35)", cases[k].what, dt);
            ok(expect(&hi, "0 ", 5000)[0], "  and its %s returns", cases[k].cmd);
            th_say(&lo, "sync", 5000);
            pair_done(&hi, &lo, &obs, rotad);
            /* ROTA_TRACE: an idle_probe event (the call, how long after the completion) exactly when it ended */
            char *tr = read_all(tpath);
            unlink(tpath);
            const char *ev = tr ? strstr(tr, "\"ev\":\"idle_probe\"") : NULL;
            if (cases[k].early)
                ok(ev && strstr(ev, "\"syscall\":") && strstr(ev, "\"after_us\":") && !strstr(ev + 10, "\"ev\":\"idle_probe\""),
                   "  ROTA_TRACE has one idle_probe event, with the call and the time since the completion: %.90s",
                   ev ? ev : "(none)");
            else
                ok(!ev, "  ROTA_TRACE has no idle_probe event");
            free(tr);
        }
    }
    /* 20. rotad killed while a client is held, then back: the client launched uncoordinated meanwhile (fail-open),
     * and once it reconnected it is gated again. librota marks the connection found dead by its generation, not
     * its address: a reconnect's connection that got the freed one's address must not stay ungated. (Whether the
     * allocator reuses the address is its choice: here it did not, so this guards the path, not the old bug.) */
    SECTION(20) {
        if (only) th_rotad_stop(rotad); /* else section 19 stopped its own */
        rotad = th_rotad_start_args(rargs);
        obs = observe();
        child_t hi, lo;
        const rota_slot_sched_t *ls = hold_pair(&hi, &lo, conn_region(obs));
        fprintf(hi.to, "spin 200 2000000\n"); /* 400 ms of high work */
        fflush(hi.to);
        ok(wait_hold(ls, true, 3000), "gen: the normal client is held beside the high one");
        conn_close(obs);
        obs = NULL;
        kill(rotad, SIGKILL);
        waitpid(rotad, NULL, 0);
        const char *l;
        double dt = held_launch(&lo, th_now_ms(), 3000, &l);
        ok(l[0] != 0, "gen: rotad killed: the held launch goes uncoordinated (%.1f ms)", dt);
        expect(&hi, "0 ", 5000);
        th_say(&hi, "sync", 5000);
        th_say(&lo, "sync", 5000);
        rotad = th_rotad_start_args(rargs);
        obs = observe();
        const rota_region_t *r2 = conn_region(obs);
        usleep(1100000); /* past librota's reconnect interval (1 s) */
        const char *ah = th_say(&hi, "alloc", 5000), *al = th_say(&lo, "alloc", 5000);
        const rota_slot_sched_t *ls2 = slot_of(r2, lo.pid);
        ok(ah[0] == '0' && al[0] == '0' && ls2 && slot_of(r2, hi.pid), "gen: both clients reconnected to the new rotad");
        th_say(&lo, "spin 1 1000000", 5000); /* its GPU known to the new rotad */
        th_say(&lo, "sync", 5000);
        fprintf(hi.to, "spin 200 2000000\n");
        fflush(hi.to);
        ok(ls2 && wait_hold(ls2, true, 3000), "gen: the new rotad holds the reconnected normal client");
        double t0 = th_now_ms();
        dt = held_launch(&lo, t0, 150, &l);
        ok(!l[0], "gen: and its launch waits (no answer in 150 ms: gated on the new connection)");
        expect(&hi, "0 ", 5000);
        th_say(&hi, "sync", 5000);
        if (!l[0]) expect(&lo, "0 ", 5000);
        th_say(&lo, "sync", 5000);
        pair_done(&hi, &lo, &obs, rotad);
    }
    /* 21. kernel-length-aware admission (runtime/lib/admit.h): a high client with a request of one 0.5 ms kernel
     * every 8 ms, beside a low client of back-to-back 3 ms kernels. After a request the low client fits two
     * kernels in the 7.5 ms gap; the third would still run when the next request comes. With ROTA_ADMIT=1 it waits
     * for that request and runs after it, so the request finds the GPU free; with ROTA_ADMIT=0 it starts, and the
     * request waits for it (or for the end of its time slice). */
    SECTION(21) {
        if (only) { /* the first rotad still runs; else section 20 stopped its own */
            if (obs) conn_close(obs);
            th_rotad_stop(rotad);
        }
        rotad = th_rotad_start_args(rargs);
        obs = observe();
        /* [1] with admission, [0] without, [2] the high client alone */
        double p50[3] = {-1, -1, -1}, p90[3] = {-1, -1, -1};
        unsigned long nk[3] = {0, 0, 0};
        size_t nadmit[3] = {0, 0, 0};
        for (int on = 2; on >= 0; on--) {
            char tpath[256], tenv[300];
            snprintf(tpath, sizeof tpath, "%s/admit-%d.jsonl", th_dir, on);
            snprintf(tenv, sizeof tenv, "ROTA_TRACE=%s", tpath);
            unlink(tpath);
            const char *el[] = {"SCHED_MODE=spin", "SCHED_DUR_MS=2000", "SCHED_KNS=3000000", "ROTA_PRIORITY=low",
                                on ? "ROTA_ADMIT=1" : "ROTA_ADMIT=0", tenv, NULL};
            const char *eh[] = {"SCHED_MODE=periodic", "SCHED_REQS=200", "SCHED_PERIOD_US=8000", "SCHED_KNS=500000",
                                "ROTA_PRIORITY=high", NULL};
            child_t lo, hi;
            if (on < 2) {
                spawn(&lo, el);
                th_ready(&lo, "low spinner");
            }
            spawn(&hi, eh);
            th_ready(&hi, "periodic high client");
            if (sscanf(expect(&hi, "plat", 15000), "plat %lf %lf", &p50[on], &p90[on]) != 2) p50[on] = p90[on] = -1;
            th_finish(&hi);
            if (on == 2) continue;
            sscanf(expect(&lo, "done", 10000), "done %lu", &nk[on]);
            th_finish(&lo);
            char *tr = read_all(tpath);
            unlink(tpath);
            for (const char *e = tr; e && (e = strstr(e, "\"ev\":\"admit\"")); e++) nadmit[on]++;
            free(tr);
        }
        diag("admission: a request of 0.5 ms every 8 ms beside 3 ms low kernels: request p50/p90 %.2f/%.2f ms alone, "
             "%.2f/%.2f ms with ROTA_ADMIT=1, %.2f/%.2f ms with ROTA_ADMIT=0; low kernels in 2 s %lu and %lu; "
             "admission waits %zu and %zu", p50[2], p90[2], p50[1], p90[1], p50[0], p90[0], nk[1], nk[0], nadmit[1],
             nadmit[0]);
        ok(p50[2] > 0 && p50[1] > 0 && p50[0] > 0, "admit: the periodic client ran alone and beside both low clients");
        /* beside a low client a request also pays a context switch; the 2-core machine adds its noise */
        ok(p50[1] > 0 && p50[1] <= p50[2] + 0.25, "admit: with admission the median request takes %.2f ms, %.2f alone "
           "(accepted: within 0.25 ms)", p50[1], p50[2]);
        ok(p50[0] >= p50[1] + 0.3, "admit: without it the median request waits for a low kernel: %.2f ms against "
           "%.2f (accepted: 0.3 ms more)", p50[0], p50[1]);
        ok(nadmit[1] >= 50 && nadmit[0] == 0, "admit: the low client waited for %zu requests (accepted: at least 50 "
           "of 200), none without admission", nadmit[1]);
        /* two of its three kernels fit in each gap: about 2/3 of the rate it has without admission */
        ok(nk[1] * 2 >= nk[0] && nk[1] >= 200, "admit: the low client is not starved: %lu kernels against %lu without "
           "(accepted: at least half, and 200)", nk[1], nk[0]);
        conn_close(obs);
        obs = NULL;
        th_rotad_stop(rotad);
    }
    (void)th_rotad_start;
    if (obs) conn_close(obs);
    if (only && atoi(only) != 5 && atoi(only) != 6 && atoi(only) != 12 && atoi(only) != 16 && atoi(only) != 18 &&
        atoi(only) != 19 && atoi(only) != 20 && atoi(only) != 21)
        th_rotad_stop(rotad);
    th_cleanup_children();
    th_cleanup();
    th_node_remove(node);
    return done_testing();
}
