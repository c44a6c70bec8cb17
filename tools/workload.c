/* workload.c - plays one ML job (inference server, training, fine-tune, batch inference) through the Driver API. */
#include <cuda.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/lib/parse.h"
#include "tools/kernels/load.h"

#define PROG "workload"

static const char USAGE[] =
    "usage: workload --kind infer|train|finetune|batch --out PATH [options]\n"
    "       workload --list-devices\n"
    "Plays one job on device --device through the CUDA Driver API and writes a JSON record to --out.\n"
    "  --kind K          infer: request server; train: iterations with host gaps; finetune: variable batch\n"
    "                    sizes (memory grows with the largest batch seen); batch: back-to-back batches\n"
    "  --out PATH        where the JSON record goes (written at the end, also on OOM)\n"
    "  --spec FILE       read options from FILE, one 'name = value' per line ('#' comments); later\n"
    "                    command-line options override it\n"
    "  --name NAME       job name in the record (default: the kind)\n"
    "  --seed N          random seed; the job is deterministic given it (default 1)\n"
    "  --device N        device ordinal (default 0)\n"
    "  --mem SIZE        memory footprint (K/M/G suffixes; default 256M)\n"
    "  --blocks N        large blocks allocated at start, then reused (default 4)\n"
    "  --kernels LIST    spin_ns kernels per request or iteration: microseconds, comma-separated, USxN for\n"
    "                    N kernels of US each (\"300x10,1000\"; at most 64; default 1000)\n"
    "  --spin-blocks N   blocks of one thread in each spin_ns kernel, each spinning for the kernel's time\n"
    "                    (default 1; 0: the device's SMs x its most resident blocks per SM, so that the kernel\n"
    "                    holds every SM for its whole time, as a large GEMM does; simcuda times a kernel alike\n"
    "                    whatever its grid, except on an MPS server, where the SMs it occupies count)\n"
    "  --add SIZE        bytes per array of one add_f32 after each request/iteration (default 64K; 0: none)\n"
    "  --duration S      infer: seconds of arrivals; others: stop after S seconds (default 0: unbounded)\n"
    "  --requests N      infer: stop after N requests (default 0: unbounded)\n"
    "  --load F          infer: offered load, fraction of device time, 0 < F <= 1 (default 0.4)\n"
    "  --arrivals A      infer: poisson, bursty or periodic (default poisson); periodic: one request every\n"
    "                    service/load ns (a decode loop, a video pipeline, a control loop)\n"
    "  --burst N         bursty: requests per burst (default 8)\n"
    "  --jitter F        periodic: each arrival moves from its tick by up to F x the period either way,\n"
    "                    uniformly (seeded), 0 <= F <= 0.5 (default 0)\n"
    "  --iters N         train/finetune/batch: iterations (default 0: bounded by --duration)\n"
    "  --gap-us N        train/finetune: host gap per iteration, data loading (default 0)\n"
    "  --batch-min N     finetune: smallest batch (default 1)\n"
    "  --batch-max N     finetune: largest batch; kernel time and activations scale with batch/batch-max\n"
    "                    (default 8)\n"
    "  --act-frac F      finetune: share of --mem that is activations at the largest batch (default 0.5)\n"
    "  --allocator A     plain: cuMemAlloc segments taken once, an OOM crashes (default); torch: PyTorch's\n"
    "                    caching allocator (block rounding, small/large pools, split blocks, an OOM retried\n"
    "                    after releasing cached blocks); torch-expandable: the same with expandable segments\n"
    "                    (cuMemCreate/cuMemMap in 2 MiB and 20 MiB pages). With torch*, train, finetune and\n"
    "                    batch allocate their activations (--act-frac of --mem, scaled by the batch) every\n"
    "                    iteration and free them into the cache\n"
    "  --max-split SIZE  torch*: PyTorch's max_split_size_mb (default 0: unlimited, PyTorch's default)\n"
    "  --empty-cache N   torch*: torch.cuda.empty_cache() every N iterations (default 0: never)\n"
    "  --list-devices    print the devices as JSON (ordinal, name, PCI bus id, uuid) and exit\n"
    "The record (times are CLOCK_MONOTONIC ns): name, kind, status (ok, crashed: OOM, error: ..., terminated),\n"
    "pid, device and its pci_bus_id/uuid, start_ns/ready_ns (allocations done)/end_ns, device_ns (spin_ns\n"
    "time asked for), memory footprint and allocations, mem_wait_ns and each wait (cuMemAlloc calls over 10 ms),\n"
    "per request arrival_ns and latency_ns (arrival to completion), per iteration iter_start_ns (its first\n"
    "launch), iter_end_ns and iter_batch; with torch*: allocator, mem_reserved_peak, cache misses (mem_misses),\n"
    "those that failed and were retried after releasing the cache (mem_retries), bytes released, and per miss\n"
    "grant_ns (first attempt to memory in hand) and grant_attempts.\n"
    "Exit codes: 0 done; 1 CUDA or system error (record written when possible); 2 usage;\n"
    "            3 crashed: out of memory (record written, status \"crashed: OOM\"); 4 terminated by a signal.\n";

enum { EXIT_USAGE = 2, EXIT_OOM = 3, EXIT_SIGNAL = 4 };
enum { KIND_INFER, KIND_TRAIN, KIND_FINETUNE, KIND_BATCH };
static const char *const kind_names[] = {"infer", "train", "finetune", "batch", NULL};
enum { ARRIVE_POISSON, ARRIVE_BURSTY, ARRIVE_PERIODIC };
static const char *const arrival_names[] = {"poisson", "bursty", "periodic", NULL};
enum { ALLOC_PLAIN, ALLOC_TORCH, ALLOC_TORCH_EXPANDABLE };
static const char *const allocator_names[] = {"plain", "torch", "torch-expandable", NULL};

#define MAX_KERNELS 64
#define MAX_BLOCKS 64
#define MAX_SEGMENTS 256
/* An allocation slower than this waited for memory: a plain cuMemAlloc takes microseconds (about 1 ms under
 * AddressSanitizer, which poisons the block), a queued one as long as another job holds the memory. */
#define MEM_WAIT_NS 10000000ull
#define SEG_ROUND (2ull << 20) /* PyTorch rounds large segments to 2 MiB */

typedef struct job_opts {
    char *spec, *name, *out, *kernels_s;
    uint64_t kind, seed, device, mem, blocks, add, requests, iters, gap_us, batch_min, batch_max, burst;
    uint64_t arrivals, allocator, max_split, empty_cache, spin_blocks;
    double duration, load, act_frac, jitter;
    bool list_devices;
    /* derived */
    uint64_t kernels_ns[MAX_KERNELS];
    unsigned nkernels;
} job_opts_t;

typedef enum { OPT_STR, OPT_U64, OPT_SIZE, OPT_DBL, OPT_ENUM, OPT_FLAG } opt_type_t;
typedef struct opt_def {
    const char *name;
    opt_type_t type;
    size_t off;
    double min, max;
    const char *const *choices;
} opt_def_t;

#define OFF(f) offsetof(job_opts_t, f)
static const opt_def_t opt_table[] = {
    {"spec", OPT_STR, OFF(spec), 0, 0, NULL},
    {"name", OPT_STR, OFF(name), 0, 0, NULL},
    {"out", OPT_STR, OFF(out), 0, 0, NULL},
    {"kind", OPT_ENUM, OFF(kind), 0, 0, kind_names},
    {"seed", OPT_U64, OFF(seed), 0, (double)UINT32_MAX, NULL},
    {"device", OPT_U64, OFF(device), 0, 1023, NULL},
    {"mem", OPT_SIZE, OFF(mem), 1 << 20, 1ull << 50, NULL},
    {"blocks", OPT_U64, OFF(blocks), 1, MAX_BLOCKS, NULL},
    {"kernels", OPT_STR, OFF(kernels_s), 0, 0, NULL},
    {"add", OPT_SIZE, OFF(add), 0, 1ull << 30, NULL},
    {"duration", OPT_DBL, OFF(duration), 0, 86400, NULL},
    {"requests", OPT_U64, OFF(requests), 0, 100000000, NULL},
    {"load", OPT_DBL, OFF(load), 1e-6, 1, NULL},
    {"arrivals", OPT_ENUM, OFF(arrivals), 0, 0, arrival_names},
    {"burst", OPT_U64, OFF(burst), 1, 10000, NULL},
    {"jitter", OPT_DBL, OFF(jitter), 0, 0.5, NULL},
    {"iters", OPT_U64, OFF(iters), 0, 100000000, NULL},
    {"gap-us", OPT_U64, OFF(gap_us), 0, 60000000, NULL},
    {"batch-min", OPT_U64, OFF(batch_min), 1, 1 << 20, NULL},
    {"batch-max", OPT_U64, OFF(batch_max), 1, 1 << 20, NULL},
    {"act-frac", OPT_DBL, OFF(act_frac), 0, 0.95, NULL},
    {"allocator", OPT_ENUM, OFF(allocator), 0, 0, allocator_names},
    {"max-split", OPT_SIZE, OFF(max_split), 0, 1ull << 50, NULL},
    {"empty-cache", OPT_U64, OFF(empty_cache), 0, 100000000, NULL},
    {"spin-blocks", OPT_U64, OFF(spin_blocks), 0, 1 << 20, NULL},
    {"list-devices", OPT_FLAG, OFF(list_devices), 0, 0, NULL},
};

static void usage_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": usage error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", USAGE);
    va_end(ap);
    exit(EXIT_USAGE);
}

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": fatal: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static const opt_def_t *opt_find(const char *name)
{
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++)
        if (!strcmp(opt_table[i].name, name)) return &opt_table[i];
    return NULL;
}

static void opts_load_spec(job_opts_t *o, const char *path, int depth);

/* Sets one option from its text; where says where it came from for the message. */
static void opt_set(job_opts_t *o, const opt_def_t *d, const char *val, const char *where)
{
    char *base = (char *)o + d->off;
    int rc = 0;
    switch (d->type) {
    case OPT_STR: {
        char *copy = strdup(val);
        if (!copy) fatal("unable to allocate: %s", strerror(errno));
        free(*(char **)base);
        *(char **)base = copy;
        if (!*val) usage_fail("%s--%s: empty value", where, d->name);
        return;
    }
    case OPT_U64: rc = parse_u64(val, (uint64_t)d->min, (uint64_t)d->max, (uint64_t *)base); break;
    case OPT_SIZE: rc = parse_size(val, (uint64_t)d->min, (uint64_t)d->max, (uint64_t *)base); break;
    case OPT_DBL: rc = parse_double(val, d->min, d->max, (double *)base); break;
    case OPT_ENUM:
        for (uint64_t i = 0; d->choices[i]; i++)
            if (!strcmp(d->choices[i], val)) {
                *(uint64_t *)base = i;
                return;
            }
        usage_fail("%s--%s: '%s' is not one of the choices", where, d->name, val);
    case OPT_FLAG: {
        bool b;
        if (parse_bool(val, &b)) usage_fail("%s--%s: '%s' is not a boolean", where, d->name, val);
        *(bool *)base = b;
        return;
    }
    }
    if (rc == -ERANGE)
        usage_fail("%s--%s: '%s' is out of range [%g, %g]", where, d->name, val, d->min, d->max);
    if (rc) usage_fail("%s--%s: '%s' is not a valid value", where, d->name, val);
}

static void opts_load_spec(job_opts_t *o, const char *path, int depth)
{
    if (depth > 4) usage_fail("--spec nested too deeply at %s", path);
    FILE *f = fopen(path, "r");
    if (!f) usage_fail("--spec %s: %s", path, strerror(errno));
    char line[4096], where[4200];
    unsigned lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') usage_fail("%s:%u: line too long", path, lineno);
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) usage_fail("%s:%u: expected 'name = value'", path, lineno);
        char *k = s, *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        *ke = 0;
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t') v++;
        const opt_def_t *d = opt_find(k);
        if (!d) usage_fail("%s:%u: unknown option '%s'", path, lineno, k);
        snprintf(where, sizeof where, "%s:%u: ", path, lineno);
        if (d->type == OPT_STR && !strcmp(d->name, "spec")) {
            opts_load_spec(o, v, depth + 1);
            continue;
        }
        opt_set(o, d, v, where);
    }
    fclose(f);
}

static void opts_parse_kernels(job_opts_t *o)
{
    const char *s = o->kernels_s ? o->kernels_s : "1000";
    char buf[32];
    o->nkernels = 0;
    for (;;) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof buf) usage_fail("--kernels: bad list '%s'", o->kernels_s);
        memcpy(buf, s, n);
        buf[n] = 0;
        uint64_t us, rep = 1;
        char *x = strchr(buf, 'x');
        if (x) {
            *x = 0;
            if (parse_u64(x + 1, 1, MAX_KERNELS, &rep))
                usage_fail("--kernels: '%s' is not a repeat count (1..%d)", x + 1, MAX_KERNELS);
        }
        if (parse_u64(buf, 1, 10000000, &us))
            usage_fail("--kernels: '%s' is not a duration in microseconds (1..10000000)", buf);
        if (o->nkernels + rep > MAX_KERNELS) usage_fail("--kernels: more than %d kernels", MAX_KERNELS);
        while (rep--) o->kernels_ns[o->nkernels++] = us * 1000;
        if (!s[n]) break;
        s += n + 1;
    }
}

static void opts_parse(job_opts_t *o, int argc, char **argv)
{
    *o = (job_opts_t){.kind = UINT64_MAX, .seed = 1, .mem = 256ull << 20, .blocks = 4, .add = 64 << 10, .spin_blocks = 1,
                      .load = 0.4, .burst = 8, .batch_min = 1, .batch_max = 8, .act_frac = 0.5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) usage_fail("unexpected argument '%s'", a);
        const char *name = a + 2, *val = NULL;
        char key[64];
        const char *eq = strchr(name, '=');
        if (eq) {
            if ((size_t)(eq - name) >= sizeof key) usage_fail("unknown option '%s'", a);
            memcpy(key, name, (size_t)(eq - name));
            key[eq - name] = 0;
            name = key;
            val = eq + 1;
        }
        const opt_def_t *d = opt_find(name);
        if (!d) usage_fail("unknown option '%s'", a);
        if (d->type == OPT_FLAG) {
            if (!val) val = "1";
        } else if (!val) {
            if (i + 1 >= argc) usage_fail("--%s needs a value", name);
            val = argv[++i];
        }
        if (!strcmp(d->name, "spec")) opts_load_spec(o, val, 0);
        else opt_set(o, d, val, "");
    }
    if (o->list_devices) return;
    if (o->kind == UINT64_MAX) usage_fail("--kind is required");
    if (!o->out) usage_fail("--out is required");
    if (o->batch_min > o->batch_max) usage_fail("--batch-min is larger than --batch-max");
    if (o->kind == KIND_INFER && o->duration == 0 && o->requests == 0)
        usage_fail("--kind infer needs --duration or --requests");
    if (o->kind != KIND_INFER && o->duration == 0 && o->iters == 0)
        usage_fail("--kind %s needs --iters or --duration", kind_names[o->kind]);
    if (!o->name) o->name = strdup(kind_names[o->kind]);
    opts_parse_kernels(o);
}

/* ---- time and randomness -------------------------------------------------------------------------------- */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig)
{
    stop_signal = sig;
}

/* Sleeps until the absolute CLOCK_MONOTONIC time t; false if a signal asked us to stop. */
static bool sleep_until(uint64_t t)
{
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
    while (!stop_signal) {
        int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if (rc == 0) return true;
        if (rc != EINTR) return true;
    }
    return false;
}

static uint64_t rng_state;
static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(void) /* [0, 1) */
{
    return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}
static double rng_exp(double mean)
{
    return -log(1.0 - rng_unit()) * mean;
}

/* ---- growable arrays for the record --------------------------------------------------------------------- */
typedef struct u64vec {
    uint64_t *v;
    size_t n, cap;
} u64vec_t;

static void vec_push(u64vec_t *a, uint64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        uint64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) fatal("unable to allocate: %s", strerror(errno));
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

/* ---- the job's state ------------------------------------------------------------------------------------ */
typedef struct job {
    job_opts_t o;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUmodule mod;
    CUfunction f_spin, f_fill, f_add;
    unsigned spin_grid; /* --spin-blocks, 0 resolved */
    char dev_name[128], pci[32], uuid[40];
    /* memory: the caching allocator's segments; blocks are the fixed part, act the growing part */
    CUdeviceptr seg[MAX_SEGMENTS];
    uint64_t seg_bytes[MAX_SEGMENTS];
    unsigned nseg;
    uint64_t mem_reserved, act_capacity;
    u64vec_t wait_t, wait_dur, wait_bytes; /* allocations that waited > MEM_WAIT_NS */
    uint64_t mem_wait_ns, alloc_ns, nallocs;
    CUdeviceptr add_a, add_b, add_c;
    uint64_t add_n;
    /* --allocator torch*: the caching allocator's segments and blocks (tc_*), its counters */
    struct tc_seg *tseg;
    struct tc_block *tblk;
    unsigned ntseg, ntblk;
    uint64_t total_mem, mem_reserved_peak, tc_misses, tc_retries, tc_released;
    u64vec_t grant_ns, grant_attempts;
    CUdeviceptr act;
    /* progress */
    uint64_t start_ns, ready_ns, end_ns, device_ns, kernels;
    u64vec_t arrival, latency, iter_start, iter_end, iter_batch;
    const char *status;
    char status_buf[160];
    CUresult err;
} job_t;

static const char *cu_name(CUresult rc)
{
    const char *s = NULL;
    if (cuGetErrorName(rc, &s) != CUDA_SUCCESS || !s) return "unknown CUresult";
    return s;
}

/* Records a failure of call; returns false so callers can `return job_fail(...)`. */
static bool job_fail(job_t *j, const char *call, CUresult rc)
{
    j->err = rc;
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) j->status = "crashed: OOM";
    else {
        snprintf(j->status_buf, sizeof j->status_buf, "error: %s: %s", call, cu_name(rc));
        j->status = j->status_buf;
    }
    fprintf(stderr, PROG ": %s: %s failed: %s\n", j->o.name, call, cu_name(rc));
    return false;
}

#define CU_TRY(j, call)                                     \
    do {                                                    \
        CUresult try_rc_ = (call);                          \
        if (try_rc_ != CUDA_SUCCESS) return job_fail((j), #call, try_rc_); \
    } while (0)

/* A timed driver allocation (cuMemAlloc or cuMemCreate): a slow one is a memory wait. */
static void job_alloc_timed(job_t *j, uint64_t t0, uint64_t bytes)
{
    uint64_t dt = now_ns() - t0;
    j->alloc_ns += dt;
    j->nallocs++;
    if (dt > MEM_WAIT_NS) {
        j->mem_wait_ns += dt;
        vec_push(&j->wait_t, t0);
        vec_push(&j->wait_dur, dt);
        vec_push(&j->wait_bytes, bytes);
    }
}

/* One cuMemAlloc, timed: a slow one is a memory wait (rota queues instead of failing). */
static bool job_alloc(job_t *j, uint64_t bytes)
{
    if (j->nseg == MAX_SEGMENTS) /* the footprint grew in more than MAX_SEGMENTS steps: a spec problem */
        return job_fail(j, "cuMemAlloc (more than 256 segments)", CUDA_ERROR_NOT_SUPPORTED);
    bytes = (bytes + SEG_ROUND - 1) / SEG_ROUND * SEG_ROUND;
    CUdeviceptr p;
    uint64_t t0 = now_ns();
    CUresult rc = cuMemAlloc(&p, bytes);
    job_alloc_timed(j, t0, bytes);
    if (rc != CUDA_SUCCESS) return job_fail(j, "cuMemAlloc", rc);
    j->seg[j->nseg] = p;
    j->seg_bytes[j->nseg] = bytes;
    j->nseg++;
    j->mem_reserved += bytes;
    return true;
}

/* ---- --allocator torch*: PyTorch's CUDA caching allocator, modelled --------------------------------------------
 * Facts from c10/cuda/CUDACachingAllocator.cpp (the model is ours):
 *   - a request is rounded up to a multiple of 512 bytes (kMinBlockSize); up to 1 MiB (kSmallSize) it is served
 *     from the small pool, above from the large pool;
 *   - a cache miss allocates a segment of 2 MiB (kSmallBuffer) for the small pool, 20 MiB (kLargeBuffer) for a
 *     request under 10 MiB (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge);
 *   - a cached block is found best fit in its pool and split when the rest is more than 512 bytes (small pool)
 *     or 1 MiB (large pool); blocks of max_split_size or more are never split and serve only requests of
 *     max_split_size or more that are at most 20 MiB smaller; a freed block merges with free neighbours;
 *   - a miss is tried three times: alloc_block; release_available_cached_blocks (frees unsplit cached blocks of
 *     max_split_size or more, the smallest one large enough, else the largest first until the request is
 *     covered; with max_split_size unlimited, PyTorch's default, it frees nothing and this attempt is skipped)
 *     then alloc_block; release_cached_blocks (synchronise, free every unsplit cached segment) then a last
 *     alloc_block; then OutOfMemoryError (here: status "crashed: OOM");
 *   - empty_cache is release_cached_blocks;
 *   - expandable segments: one segment per pool reserves address space for 1 1/8 of the device's memory and maps
 *     physical pages at its end as needed, 2 MiB (small pool) or 20 MiB (large pool) per cuMemCreate; a page that
 *     cannot be created (OOM) releases the pages created for this request, and the attempt fails; releasing the
 *     cache unmaps (cuMemUnmap + cuMemRelease) the free pages. Simplification: only the free pages at the end of
 *     the segment are unmapped (PyTorch also unmaps free pages inside it, leaving holes it fills later). */
#define TC_MAX_SEGS 512
#define TC_MAX_BLOCKS 4096
#define TC_MIN_BLOCK 512ull
#define TC_SMALL_SIZE (1ull << 20)
#define TC_SMALL_BUFFER (2ull << 20)
#define TC_LARGE_BUFFER (20ull << 20)
#define TC_MIN_LARGE_ALLOC (10ull << 20)
#define TC_ROUND_LARGE (2ull << 20)
enum { TC_SMALL, TC_LARGE };

typedef struct tc_seg {
    bool used, expandable;
    int pool;
    CUdeviceptr base;
    uint64_t size;                          /* mapped (expandable) or allocated bytes */
    uint64_t va_size, page;                 /* expandable: reserved address space, page size */
    CUmemGenericAllocationHandle *pages;    /* expandable: one handle per mapped page */
} tc_seg_t;

typedef struct tc_block {
    bool used, alloc;
    int seg;
    uint64_t off, size;
} tc_block_t;

static bool tc_on(const job_t *j)
{
    return j->o.allocator != ALLOC_PLAIN;
}

static uint64_t tc_round(uint64_t bytes)
{
    return bytes < TC_MIN_BLOCK ? TC_MIN_BLOCK : (bytes + TC_MIN_BLOCK - 1) / TC_MIN_BLOCK * TC_MIN_BLOCK;
}

static uint64_t tc_alloc_size(uint64_t size)
{
    if (size <= TC_SMALL_SIZE) return TC_SMALL_BUFFER;
    if (size < TC_MIN_LARGE_ALLOC) return TC_LARGE_BUFFER;
    return (size + TC_ROUND_LARGE - 1) / TC_ROUND_LARGE * TC_ROUND_LARGE;
}

static int tc_block_new(job_t *j, int seg, uint64_t off, uint64_t size, bool alloc)
{
    for (unsigned i = 0; i < TC_MAX_BLOCKS; i++) {
        tc_block_t *b = &j->tblk[i];
        if (b->used) continue;
        *b = (tc_block_t){.used = true, .alloc = alloc, .seg = seg, .off = off, .size = size};
        if (i >= j->ntblk) j->ntblk = i + 1;
        return (int)i;
    }
    return -1;
}

static int tc_seg_new(job_t *j)
{
    for (unsigned i = 0; i < TC_MAX_SEGS; i++)
        if (!j->tseg[i].used) {
            j->tseg[i] = (tc_seg_t){.used = true};
            if (i >= j->ntseg) j->ntseg = i + 1;
            return (int)i;
        }
    return -1;
}

/* The block of seg at offset off, or -1. */
static int tc_block_at(const job_t *j, int seg, uint64_t off)
{
    for (unsigned i = 0; i < j->ntblk; i++)
        if (j->tblk[i].used && j->tblk[i].seg == seg && j->tblk[i].off == off) return (int)i;
    return -1;
}

/* The free block at the end of seg, or -1. */
static int tc_tail_free(const job_t *j, int seg)
{
    for (unsigned i = 0; i < j->ntblk; i++) {
        const tc_block_t *b = &j->tblk[i];
        if (b->used && b->seg == seg && b->off + b->size == j->tseg[seg].size) return b->alloc ? -1 : (int)i;
    }
    return -1;
}

static void tc_reserved(job_t *j, int64_t delta)
{
    j->mem_reserved += (uint64_t)delta;
    if (j->mem_reserved > j->mem_reserved_peak) j->mem_reserved_peak = j->mem_reserved;
}

/* Best fit among the pool's free blocks, with max_split_size's rules; -1 if none. */
static int tc_find(const job_t *j, int pool, uint64_t size)
{
    uint64_t ms = j->o.max_split ? j->o.max_split : UINT64_MAX;
    int best = -1;
    for (unsigned i = 0; i < j->ntblk; i++) {
        const tc_block_t *b = &j->tblk[i];
        if (!b->used || b->alloc || j->tseg[b->seg].pool != pool || b->size < size) continue;
        if (size < ms && b->size >= ms) continue;                  /* oversize blocks serve only large requests */
        if (size >= ms && b->size >= size + TC_LARGE_BUFFER) continue; /* ... and only those close to their size */
        if (best < 0 || b->size < j->tblk[best].size) best = (int)i;
    }
    return best;
}

/* Expandable: maps pages at the end of the pool's segment until its free tail holds size; false on OOM (the pages
 * created for this request are released again) or another error (in j). */
static bool tc_expand(job_t *j, int pool, uint64_t size, bool *err)
{
    int s = -1;
    for (unsigned i = 0; i < j->ntseg; i++)
        if (j->tseg[i].used && j->tseg[i].expandable && j->tseg[i].pool == pool) s = (int)i;
    if (s < 0) {
        if ((s = tc_seg_new(j)) < 0) return false;
        tc_seg_t *g = &j->tseg[s];
        g->expandable = true;
        g->pool = pool;
        g->page = pool == TC_SMALL ? TC_SMALL_BUFFER : TC_LARGE_BUFFER;
        uint64_t want = j->total_mem + j->total_mem / 8;
        uint64_t npages = (want + g->page - 1) / g->page;
        g->va_size = npages * g->page;
        g->pages = calloc(npages, sizeof *g->pages);
        CUresult rc = g->pages ? cuMemAddressReserve(&g->base, g->va_size, 0, 0, 0) : CUDA_ERROR_OUT_OF_MEMORY;
        if (rc != CUDA_SUCCESS) {
            free(g->pages);
            g->used = false;
            *err = true;
            return job_fail(j, "cuMemAddressReserve", rc);
        }
    }
    tc_seg_t *g = &j->tseg[s];
    int tail = tc_tail_free(j, s);
    uint64_t have = tail >= 0 ? j->tblk[tail].size : 0;
    uint64_t n = (size - have + g->page - 1) / g->page, first = g->size / g->page;
    if ((first + n) * g->page > g->va_size) return false;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = j->dev}};
    for (uint64_t k = 0; k < n; k++) {
        uint64_t t0 = now_ns();
        CUresult rc = cuMemCreate(&g->pages[first + k], g->page, &prop, 0);
        job_alloc_timed(j, t0, g->page);
        if (rc != CUDA_SUCCESS) {
            while (k-- > 0) cuMemRelease(g->pages[first + k]);
            if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
            *err = true;
            return job_fail(j, "cuMemCreate", rc);
        }
    }
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (uint64_t k = 0; k < n; k++) {
        CUresult rc = cuMemMap(g->base + (first + k) * g->page, g->page, 0, g->pages[first + k], 0);
        if (rc == CUDA_SUCCESS) rc = cuMemSetAccess(g->base + (first + k) * g->page, g->page, &acc, 1);
        if (rc != CUDA_SUCCESS) {
            *err = true;
            return job_fail(j, "cuMemMap", rc);
        }
    }
    uint64_t grow = n * g->page;
    if (tail >= 0) j->tblk[tail].size += grow;
    else if (tc_block_new(j, s, g->size, grow, false) < 0) return false;
    g->size += grow;
    tc_reserved(j, (int64_t)grow);
    return true;
}

/* alloc_block: a new segment (or pages) for size; false on OOM, or with *err on another failure. */
static bool tc_alloc_block(job_t *j, int pool, uint64_t size, bool *err)
{
    if (j->o.allocator == ALLOC_TORCH_EXPANDABLE) return tc_expand(j, pool, size, err);
    uint64_t bytes = tc_alloc_size(size);
    int s = tc_seg_new(j);
    if (s < 0) return false;
    uint64_t t0 = now_ns();
    CUresult rc = cuMemAlloc(&j->tseg[s].base, bytes);
    job_alloc_timed(j, t0, bytes);
    if (rc != CUDA_SUCCESS) {
        j->tseg[s].used = false;
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
        *err = true;
        return job_fail(j, "cuMemAlloc", rc);
    }
    j->tseg[s].pool = pool;
    j->tseg[s].size = bytes;
    if (tc_block_new(j, s, 0, bytes, false) < 0) return false;
    tc_reserved(j, (int64_t)bytes);
    return true;
}

/* Frees one whole cached segment (its only block, free). */
static void tc_release_seg(job_t *j, int blk)
{
    tc_block_t *b = &j->tblk[blk];
    tc_seg_t *g = &j->tseg[b->seg];
    cuMemFree(g->base);
    j->tc_released += g->size;
    tc_reserved(j, -(int64_t)g->size);
    g->used = false;
    b->used = false;
}

static bool tc_unsplit_free(const job_t *j, const tc_block_t *b)
{
    const tc_seg_t *g = &j->tseg[b->seg];
    return b->used && !b->alloc && !g->expandable && b->off == 0 && b->size == g->size;
}

/* release_available_cached_blocks: only with max_split_size set. */
static bool tc_release_available(job_t *j, int pool, uint64_t size)
{
    uint64_t ms = j->o.max_split;
    if (!ms || j->o.allocator == ALLOC_TORCH_EXPANDABLE) return false;
    uint64_t key = size < ms ? ms : size;
    int best = -1;
    for (unsigned i = 0; i < j->ntblk; i++) {
        const tc_block_t *b = &j->tblk[i];
        if (tc_unsplit_free(j, b) && j->tseg[b->seg].pool == pool && b->size >= key &&
            (best < 0 || b->size < j->tblk[best].size))
            best = (int)i;
    }
    if (best >= 0) {
        tc_release_seg(j, best);
        return true;
    }
    uint64_t freed = 0;
    while (freed < key) {
        int big = -1;
        for (unsigned i = 0; i < j->ntblk; i++) {
            const tc_block_t *b = &j->tblk[i];
            if (tc_unsplit_free(j, b) && j->tseg[b->seg].pool == pool && b->size >= ms &&
                (big < 0 || b->size > j->tblk[big].size))
                big = (int)i;
        }
        if (big < 0) break;
        freed += j->tblk[big].size;
        tc_release_seg(j, big);
    }
    return freed >= key;
}

/* release_cached_blocks (and empty_cache): synchronise, free every unsplit cached segment, unmap free pages. */
static bool tc_release_cached(job_t *j)
{
    cuCtxSynchronize();
    for (unsigned i = 0; i < j->ntblk; i++)
        if (tc_unsplit_free(j, &j->tblk[i])) tc_release_seg(j, (int)i);
    for (unsigned s = 0; s < j->ntseg; s++) {
        tc_seg_t *g = &j->tseg[s];
        if (!g->used || !g->expandable) continue;
        int t = tc_tail_free(j, s);
        if (t < 0) continue;
        tc_block_t *b = &j->tblk[t];
        uint64_t keep_end = (b->off + g->page - 1) / g->page * g->page; /* pages wholly inside the free tail */
        while (g->size > keep_end) {
            uint64_t p = g->size / g->page - 1;
            cuMemUnmap(g->base + p * g->page, g->page);
            cuMemRelease(g->pages[p]);
            g->size -= g->page;
            j->tc_released += g->page;
            tc_reserved(j, -(int64_t)g->page);
        }
        b->size = g->size - b->off;
        if (!b->size) b->used = false;
    }
    return true;
}

/* The allocator's malloc: from the cache, else a new segment tried three times. */
static bool tc_malloc(job_t *j, uint64_t bytes, CUdeviceptr *out)
{
    uint64_t size = tc_round(bytes);
    int pool = size <= TC_SMALL_SIZE ? TC_SMALL : TC_LARGE;
    int b = tc_find(j, pool, size);
    if (b < 0) {
        bool err = false;
        unsigned attempts = 1;
        uint64_t t0 = now_ns();
        j->tc_misses++;
        bool ok = tc_alloc_block(j, pool, size, &err);
        if (!ok && !err && tc_release_available(j, pool, size)) {
            attempts++;
            ok = tc_alloc_block(j, pool, size, &err);
        }
        if (!ok && !err && tc_release_cached(j)) {
            attempts++;
            ok = tc_alloc_block(j, pool, size, &err);
        }
        if (attempts > 1) j->tc_retries++;
        vec_push(&j->grant_ns, now_ns() - t0);
        vec_push(&j->grant_attempts, attempts);
        if (err) return false;
        if (!ok) return job_fail(j, "the caching allocator (OutOfMemoryError)", CUDA_ERROR_OUT_OF_MEMORY);
        if ((b = tc_find(j, pool, size)) < 0)
            return job_fail(j, "the caching allocator (no block after a new segment)", CUDA_ERROR_UNKNOWN);
    }
    tc_block_t *k = &j->tblk[b];
    uint64_t rest = k->size - size, min_rest = pool == TC_SMALL ? TC_MIN_BLOCK : TC_SMALL_SIZE;
    bool oversize = j->o.max_split && k->size >= j->o.max_split;
    if (rest > min_rest && !oversize) {
        if (tc_block_new(j, k->seg, k->off + size, rest, false) < 0)
            return job_fail(j, "the caching allocator (more than 4096 blocks)", CUDA_ERROR_NOT_SUPPORTED);
        k = &j->tblk[b];
        k->size = size;
    }
    k->alloc = true;
    *out = j->tseg[k->seg].base + k->off;
    return true;
}

/* The allocator's free: the block goes back to the cache, merged with its free neighbours. */
static void tc_free(job_t *j, CUdeviceptr p)
{
    for (unsigned i = 0; i < j->ntblk; i++) {
        tc_block_t *b = &j->tblk[i];
        if (!b->used || !b->alloc || j->tseg[b->seg].base + b->off != p) continue;
        b->alloc = false;
        int n = tc_block_at(j, b->seg, b->off + b->size);
        if (n >= 0 && !j->tblk[n].alloc) {
            b->size += j->tblk[n].size;
            j->tblk[n].used = false;
        }
        for (unsigned k = 0; k < j->ntblk; k++) {
            tc_block_t *q = &j->tblk[k];
            if (q->used && !q->alloc && q->seg == b->seg && q->off + q->size == b->off) {
                q->size += b->size;
                b->used = false;
                break;
            }
        }
        return;
    }
}

static bool tc_setup(job_t *j)
{
    j->tseg = calloc(TC_MAX_SEGS, sizeof *j->tseg);
    j->tblk = calloc(TC_MAX_BLOCKS, sizeof *j->tblk);
    if (!j->tseg || !j->tblk) fatal("unable to allocate: %s", strerror(errno));
    size_t total = 0;
    CU_TRY(j, cuDeviceTotalMem(&total, j->dev));
    j->total_mem = total;
    return true;
}

static bool launch_spin(job_t *j, uint64_t ns)
{
    void *args[] = {&ns};
    CU_TRY(j, cuLaunchKernel(j->f_spin, j->spin_grid, 1, 1, 1, 1, 1, 0, j->stream, args, NULL));
    j->device_ns += ns;
    j->kernels++;
    return true;
}

static unsigned grid_for(uint64_t n)
{
    uint64_t g = (n + 255) / 256;
    return g == 0 ? 1 : g > 1024 ? 1024 : (unsigned)g;
}

static bool launch_fill(job_t *j, CUdeviceptr dst, uint32_t v, uint64_t n)
{
    void *args[] = {&dst, &v, &n};
    CU_TRY(j, cuLaunchKernel(j->f_fill, grid_for(n), 1, 1, 256, 1, 1, 0, j->stream, args, NULL));
    j->kernels++;
    return true;
}

static bool launch_add(job_t *j)
{
    if (!j->add_n) return true;
    void *args[] = {&j->add_a, &j->add_b, &j->add_c, &j->add_n};
    CU_TRY(j, cuLaunchKernel(j->f_add, grid_for(j->add_n), 1, 1, 256, 1, 1, 0, j->stream, args, NULL));
    j->kernels++;
    return true;
}

/* The kernels of one request or iteration, each scaled by num/den (batch size), then the add. */
static bool launch_step(job_t *j, uint64_t num, uint64_t den)
{
    for (unsigned k = 0; k < j->o.nkernels; k++) {
        uint64_t ns = j->o.kernels_ns[k] * num / den;
        if (!launch_spin(j, ns ? ns : 1)) return false;
    }
    return launch_add(j);
}

static bool job_sync(job_t *j)
{
    CU_TRY(j, cuStreamSynchronize(j->stream));
    return true;
}

static bool job_setup(job_t *j)
{
    CU_TRY(j, cuInit(0));
    int count = 0;
    CU_TRY(j, cuDeviceGetCount(&count));
    if ((uint64_t)count <= j->o.device) return job_fail(j, "cuDeviceGet (no such device)", CUDA_ERROR_INVALID_DEVICE);
    CU_TRY(j, cuDeviceGet(&j->dev, (int)j->o.device));
    CU_TRY(j, cuDeviceGetName(j->dev_name, sizeof j->dev_name, j->dev));
    CU_TRY(j, cuDeviceGetPCIBusId(j->pci, sizeof j->pci, j->dev));
    CUuuid u;
    CU_TRY(j, cuDeviceGetUuid(&u, j->dev));
    for (int i = 0; i < 16; i++) snprintf(j->uuid + 2 * i, 3, "%02x", (unsigned char)u.bytes[i]);
    /* Like PyTorch: the primary context, blocking sync so waiting costs no CPU. */
    CU_TRY(j, cuDevicePrimaryCtxSetFlags(j->dev, CU_CTX_SCHED_BLOCKING_SYNC));
    CU_TRY(j, cuDevicePrimaryCtxRetain(&j->ctx, j->dev));
    CU_TRY(j, cuCtxSetCurrent(j->ctx));
    CU_TRY(j, cuStreamCreate(&j->stream, CU_STREAM_NON_BLOCKING));
    CU_TRY(j, kernels_load(&j->mod, cuModuleLoadData, cuDriverGetVersion));
    CU_TRY(j, cuModuleGetFunction(&j->f_spin, j->mod, "spin_ns"));
    j->spin_grid = (unsigned)j->o.spin_blocks;
    if (!j->spin_grid) {
        int sms = 0, per_sm = 0;
        CU_TRY(j, cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, j->dev));
        CU_TRY(j, cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, j->dev));
        j->spin_grid = (unsigned)(sms > 0 ? sms : 1) * (unsigned)(per_sm > 0 ? per_sm : 1);
    }
    CU_TRY(j, cuModuleGetFunction(&j->f_fill, j->mod, "fill_u32"));
    CU_TRY(j, cuModuleGetFunction(&j->f_add, j->mod, "add_f32"));

    /* The caching allocator: a few large blocks at start (weights, optimizer state, workspace), reused for the
     * whole run; a fine-tune keeps act_frac of its footprint for activations that grow with the batch. With
     * --allocator torch*, every kind but infer does, and allocates them each iteration (run_loop). */
    uint64_t fixed = j->o.mem;
    if (j->o.kind == KIND_FINETUNE || (tc_on(j) && j->o.kind != KIND_INFER))
        fixed = (uint64_t)((double)j->o.mem * (1.0 - j->o.act_frac));
    uint64_t per = fixed / j->o.blocks;
    if (per < SEG_ROUND) per = SEG_ROUND;
    if (tc_on(j) && !tc_setup(j)) return false;
    for (uint64_t b = 0; b < j->o.blocks; b++) {
        if (tc_on(j)) {
            if (j->nseg == MAX_SEGMENTS || !tc_malloc(j, per, &j->seg[j->nseg])) return false;
            j->seg_bytes[j->nseg++] = per;
        } else if (!job_alloc(j, per)) {
            return false;
        }
        /* "load the weights": touch the first MiB of each block */
        if (!launch_fill(j, j->seg[j->nseg - 1], (uint32_t)b, (1u << 20) / 4)) return false;
    }
    /* add_f32 works on three arrays carved from block 0 when they fit. */
    uint64_t n = j->o.add / 4;
    if (n && 3 * n * 4 <= j->seg_bytes[0]) {
        j->add_n = n;
        j->add_a = j->seg[0];
        j->add_b = j->seg[0] + n * 4;
        j->add_c = j->seg[0] + 2 * n * 4;
    }
    return job_sync(j);
}

/* Fine-tune: activations for this batch; a larger batch than any before grows the cache by a new segment. */
static bool job_grow(job_t *j, uint64_t batch)
{
    uint64_t act_max = j->o.mem - (uint64_t)((double)j->o.mem * (1.0 - j->o.act_frac));
    uint64_t need = (uint64_t)((double)act_max * (double)batch / (double)j->o.batch_max);
    if (need <= j->act_capacity) return true;
    uint64_t before = j->mem_reserved;
    if (!job_alloc(j, need - j->act_capacity)) return false;
    j->act_capacity += j->mem_reserved - before;
    return true;
}

static bool time_up(const job_t *j, uint64_t deadline)
{
    return stop_signal || (deadline && now_ns() >= deadline);
}

static bool run_infer(job_t *j)
{
    uint64_t service = 0;
    for (unsigned k = 0; k < j->o.nkernels; k++) service += j->o.kernels_ns[k];
    double mean_gap = (double)service / j->o.load; /* ns between requests on average */
    uint64_t t0 = j->ready_ns, horizon = j->o.duration > 0 ? (uint64_t)(j->o.duration * 1e9) : UINT64_MAX;
    uint64_t max_req = j->o.requests ? j->o.requests : UINT64_MAX;
    double t = 0; /* ns after t0 of the next arrival */
    uint64_t in_burst = 0;
    for (uint64_t i = 0; i < max_req; i++) {
        if (j->o.arrivals == ARRIVE_POISSON) {
            t += rng_exp(mean_gap);
        } else if (j->o.arrivals == ARRIVE_PERIODIC) {
            /* tick i + 1, moved by the jitter: the ticks never drift, whatever the jitter drew before */
            double d = j->o.jitter > 0 ? (2 * rng_unit() - 1) * j->o.jitter * mean_gap : 0;
            t = (double)(i + 1) * mean_gap + d;
        } else if (in_burst == 0) {
            t += rng_exp(mean_gap * (double)j->o.burst);
            in_burst = j->o.burst - 1;
        } else {
            t += rng_exp((double)service * 0.05); /* requests of a burst come almost together */
            in_burst--;
        }
        if (t >= (double)horizon) break;
        uint64_t arrive = t0 + (uint64_t)t;
        if (now_ns() < arrive && !sleep_until(arrive)) break;
        if (stop_signal) break;
        if (!launch_step(j, 1, 1) || !job_sync(j)) return false;
        uint64_t done = now_ns();
        vec_push(&j->arrival, arrive);
        vec_push(&j->latency, done - arrive);
    }
    return true;
}

static bool run_loop(job_t *j)
{
    uint64_t deadline = j->o.duration > 0 ? j->ready_ns + (uint64_t)(j->o.duration * 1e9) : 0;
    uint64_t iters = j->o.iters ? j->o.iters : UINT64_MAX;
    for (uint64_t i = 0; i < iters && !time_up(j, deadline); i++) {
        uint64_t batch = j->o.batch_max;
        if (j->o.kind == KIND_FINETUNE) batch = j->o.batch_min + rng_next() % (j->o.batch_max - j->o.batch_min + 1);
        if (tc_on(j)) {
            /* this iteration's activations, from the cache or a new segment (which may wait, or retry) */
            uint64_t act_max = (uint64_t)((double)j->o.mem * j->o.act_frac);
            uint64_t need = (uint64_t)((double)act_max * (double)batch / (double)j->o.batch_max);
            if (need && !tc_malloc(j, need, &j->act)) return false;
            if (!need) j->act = 0;
        } else if (j->o.kind == KIND_FINETUNE && !job_grow(j, batch)) {
            return false;
        }
        /* From here until its kernels end, the job has work for the device (scripts/bench attributes the
         * device's idle time by that); growing its memory before it is host time, or a memory wait. */
        vec_push(&j->iter_start, now_ns());
        if (!launch_step(j, batch, j->o.batch_max)) return false;
        if (j->act) tc_free(j, j->act); /* the tensors go out of scope: the block goes back to the cache */
        j->act = 0;
        if (tc_on(j) && j->o.empty_cache && (i + 1) % j->o.empty_cache == 0) tc_release_cached(j);
        /* training and fine-tune read the loss every step (loss.item()); batch inference runs ahead and
         * synchronises every 4 batches, like a pipelined DataLoader */
        if (j->o.kind != KIND_BATCH || i % 4 == 3 || i + 1 == iters)
            if (!job_sync(j)) return false;
        vec_push(&j->iter_end, now_ns());
        vec_push(&j->iter_batch, batch);
        if (j->o.gap_us && j->o.kind != KIND_BATCH && !sleep_until(now_ns() + j->o.gap_us * 1000)) break;
    }
    return job_sync(j);
}

/* ---- the record ----------------------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_vec(FILE *f, const char *key, const u64vec_t *a)
{
    fprintf(f, ",\n  \"%s\": [", key);
    for (size_t i = 0; i < a->n; i++) fprintf(f, "%s%" PRIu64, i ? "," : "", a->v[i]);
    fputc(']', f);
}

/* The record goes atomically (a temporary file beside it, renamed over it) only when the target is a regular file or does
 * not exist: renaming over anything else would replace it, and as root `--out /dev/null` would turn the
 * machine's null device into a regular file. Anything else (a device, a FIFO) is written straight through. */
static int job_write(const job_t *j)
{
    char tmp[4200];
    struct stat st;
    bool atomic = stat(j->o.out, &st) != 0 ? errno == ENOENT : S_ISREG(st.st_mode);
    if (atomic && snprintf(tmp, sizeof tmp, "%s.XXXXXX", j->o.out) >= (int)sizeof tmp) {
        fprintf(stderr, PROG ": fatal: unable to write record: path too long\n");
        return -ENAMETOOLONG;
    }
    const char *path = atomic ? tmp : j->o.out;
    /* mkstemp: a temporary name of our own (O_EXCL), never one somebody else placed */
    int fd = atomic ? mkstemp(tmp) : open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0 && atomic) (void)fchmod(fd, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        fprintf(stderr, PROG ": fatal: unable to open %s: %s\n", path, strerror(e));
        return -e;
    }
    fprintf(f, "{\n  \"name\": ");
    json_str(f, j->o.name);
    fprintf(f, ",\n  \"kind\": \"%s\",\n  \"status\": ", kind_names[j->o.kind]);
    json_str(f, j->status);
    fprintf(f, ",\n  \"pid\": %ld,\n  \"seed\": %" PRIu64 ",\n  \"device\": %" PRIu64, (long)getpid(), j->o.seed,
            j->o.device);
    fprintf(f, ",\n  \"device_name\": ");
    json_str(f, j->dev_name);
    fprintf(f, ",\n  \"pci_bus_id\": ");
    json_str(f, j->pci);
    fprintf(f, ",\n  \"uuid\": \"%s\"", j->uuid);
    fprintf(f, ",\n  \"start_ns\": %" PRIu64 ",\n  \"ready_ns\": %" PRIu64 ",\n  \"end_ns\": %" PRIu64, j->start_ns,
            j->ready_ns, j->end_ns);
    fprintf(f, ",\n  \"device_ns\": %" PRIu64 ",\n  \"kernels\": %" PRIu64, j->device_ns, j->kernels);
    fprintf(f, ",\n  \"mem_footprint\": %" PRIu64 ",\n  \"mem_reserved\": %" PRIu64 ",\n  \"mem_allocs\": %" PRIu64,
            j->o.mem, j->mem_reserved, j->nallocs);
    fprintf(f, ",\n  \"alloc_ns\": %" PRIu64 ",\n  \"mem_wait_ns\": %" PRIu64, j->alloc_ns, j->mem_wait_ns);
    json_vec(f, "mem_wait_start_ns", &j->wait_t);
    json_vec(f, "mem_wait_dur_ns", &j->wait_dur);
    json_vec(f, "mem_wait_bytes", &j->wait_bytes);
    if (tc_on(j)) {
        fprintf(f, ",\n  \"allocator\": \"%s\",\n  \"mem_reserved_peak\": %" PRIu64, allocator_names[j->o.allocator],
                j->mem_reserved_peak);
        fprintf(f, ",\n  \"mem_misses\": %" PRIu64 ",\n  \"mem_retries\": %" PRIu64 ",\n  \"mem_released\": %" PRIu64,
                j->tc_misses, j->tc_retries, j->tc_released);
        json_vec(f, "grant_ns", &j->grant_ns);
        json_vec(f, "grant_attempts", &j->grant_attempts);
    }
    fprintf(f, ",\n  \"requests\": %zu", j->latency.n);
    json_vec(f, "arrival_ns", &j->arrival);
    json_vec(f, "latency_ns", &j->latency);
    fprintf(f, ",\n  \"iterations\": %zu", j->iter_end.n);
    json_vec(f, "iter_start_ns", &j->iter_start);
    json_vec(f, "iter_end_ns", &j->iter_end);
    json_vec(f, "iter_batch", &j->iter_batch);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0 || (atomic && rename(tmp, j->o.out) != 0)) {
        fprintf(stderr, PROG ": fatal: unable to write %s: %s\n", j->o.out, strerror(errno));
        if (atomic) unlink(tmp);
        return -EIO;
    }
    return 0;
}

static int list_devices(void)
{
    CUresult rc = cuInit(0);
    int n = 0;
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetCount(&n);
    if (rc != CUDA_SUCCESS) fatal("unable to list devices: %s", cu_name(rc));
    printf("[");
    for (int i = 0; i < n; i++) {
        CUdevice d;
        char name[128] = "", pci[32] = "";
        CUuuid u;
        if (cuDeviceGet(&d, i) || cuDeviceGetName(name, sizeof name, d) ||
            cuDeviceGetPCIBusId(pci, sizeof pci, d) || cuDeviceGetUuid(&u, d))
            fatal("unable to query device %d", i);
        printf("%s\n  {\"ordinal\": %d, \"name\": ", i ? "," : "", i);
        json_str(stdout, name);
        printf(", \"pci_bus_id\": ");
        json_str(stdout, pci);
        printf(", \"uuid\": \"");
        for (int k = 0; k < 16; k++) printf("%02x", (unsigned char)u.bytes[k]);
        printf("\"}");
    }
    printf("\n]\n");
    return 0;
}

int main(int argc, char **argv)
{
    static job_t j;
    j.start_ns = now_ns();
    opts_parse(&j.o, argc, argv);
    if (j.o.list_devices) return list_devices();
    rng_state = j.o.seed * 0x2545f4914f6cdd1dull + 1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* arrivals on time, not 50 us late */
    j.status = "ok";

    bool good = job_setup(&j);
    j.ready_ns = now_ns();
    if (good) good = j.o.kind == KIND_INFER ? run_infer(&j) : run_loop(&j);
    if (good && stop_signal) j.status = "terminated";
    j.end_ns = now_ns();
    /* Leave like a process that exits: its memory and context go with it (no explicit frees needed). */
    if (job_write(&j) != 0) return 1;
    if (!good) return j.err == CUDA_ERROR_OUT_OF_MEMORY ? EXIT_OOM : 1;
    return stop_signal ? EXIT_SIGNAL : 0;
}
