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
    "  --add SIZE        bytes per array of one add_f32 after each request/iteration (default 64K; 0: none)\n"
    "  --duration S      infer: seconds of arrivals; others: stop after S seconds (default 0: unbounded)\n"
    "  --requests N      infer: stop after N requests (default 0: unbounded)\n"
    "  --load F          infer: offered load, fraction of device time, 0 < F <= 1 (default 0.4)\n"
    "  --arrivals A      infer: poisson or bursty (default poisson)\n"
    "  --burst N         bursty: requests per burst (default 8)\n"
    "  --iters N         train/finetune/batch: iterations (default 0: bounded by --duration)\n"
    "  --gap-us N        train/finetune: host gap per iteration, data loading (default 0)\n"
    "  --batch-min N     finetune: smallest batch (default 1)\n"
    "  --batch-max N     finetune: largest batch; kernel time and activations scale with batch/batch-max\n"
    "                    (default 8)\n"
    "  --act-frac F      finetune: share of --mem that is activations at the largest batch (default 0.5)\n"
    "  --list-devices    print the devices as JSON (ordinal, name, PCI bus id, uuid) and exit\n"
    "The record (times are CLOCK_MONOTONIC ns): name, kind, status (ok, crashed: OOM, error: ..., terminated),\n"
    "pid, device and its pci_bus_id/uuid, start_ns/ready_ns (allocations done)/end_ns, device_ns (spin_ns\n"
    "time asked for), memory footprint and allocations, mem_wait_ns and each wait (cuMemAlloc calls over 10 ms),\n"
    "per request arrival_ns and latency_ns (arrival to completion), per iteration iter_start_ns (its first\n"
    "launch), iter_end_ns and iter_batch.\n"
    "Exit codes: 0 done; 1 CUDA or system error (record written when possible); 2 usage;\n"
    "            3 crashed: out of memory (record written, status \"crashed: OOM\"); 4 terminated by a signal.\n";

enum { EXIT_USAGE = 2, EXIT_OOM = 3, EXIT_SIGNAL = 4 };
enum { KIND_INFER, KIND_TRAIN, KIND_FINETUNE, KIND_BATCH };
static const char *const kind_names[] = {"infer", "train", "finetune", "batch", NULL};
static const char *const arrival_names[] = {"poisson", "bursty", NULL};

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
    uint64_t arrivals;
    double duration, load, act_frac;
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
    {"iters", OPT_U64, OFF(iters), 0, 100000000, NULL},
    {"gap-us", OPT_U64, OFF(gap_us), 0, 60000000, NULL},
    {"batch-min", OPT_U64, OFF(batch_min), 1, 1 << 20, NULL},
    {"batch-max", OPT_U64, OFF(batch_max), 1, 1 << 20, NULL},
    {"act-frac", OPT_DBL, OFF(act_frac), 0, 0.95, NULL},
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
    *o = (job_opts_t){.kind = UINT64_MAX, .seed = 1, .mem = 256ull << 20, .blocks = 4, .add = 64 << 10,
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

/* One cuMemAlloc, timed: a slow one is a memory wait (rota queues instead of failing). */
static bool job_alloc(job_t *j, uint64_t bytes)
{
    if (j->nseg == MAX_SEGMENTS) /* the footprint grew in more than MAX_SEGMENTS steps: a spec problem */
        return job_fail(j, "cuMemAlloc (more than 256 segments)", CUDA_ERROR_NOT_SUPPORTED);
    bytes = (bytes + SEG_ROUND - 1) / SEG_ROUND * SEG_ROUND;
    CUdeviceptr p;
    uint64_t t0 = now_ns();
    CUresult rc = cuMemAlloc(&p, bytes);
    uint64_t dt = now_ns() - t0;
    j->alloc_ns += dt;
    j->nallocs++;
    if (dt > MEM_WAIT_NS) {
        j->mem_wait_ns += dt;
        vec_push(&j->wait_t, t0);
        vec_push(&j->wait_dur, dt);
        vec_push(&j->wait_bytes, bytes);
    }
    if (rc != CUDA_SUCCESS) return job_fail(j, "cuMemAlloc", rc);
    j->seg[j->nseg] = p;
    j->seg_bytes[j->nseg] = bytes;
    j->nseg++;
    j->mem_reserved += bytes;
    return true;
}

static bool launch_spin(job_t *j, uint64_t ns)
{
    void *args[] = {&ns};
    CU_TRY(j, cuLaunchKernel(j->f_spin, 1, 1, 1, 1, 1, 1, 0, j->stream, args, NULL));
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
    CU_TRY(j, cuModuleGetFunction(&j->f_fill, j->mod, "fill_u32"));
    CU_TRY(j, cuModuleGetFunction(&j->f_add, j->mod, "add_f32"));

    /* The caching allocator: a few large blocks at start (weights, optimizer state, workspace), reused for the
     * whole run; a fine-tune keeps act_frac of its footprint for activations that grow with the batch. */
    uint64_t fixed = j->o.mem;
    if (j->o.kind == KIND_FINETUNE) fixed = (uint64_t)((double)j->o.mem * (1.0 - j->o.act_frac));
    uint64_t per = fixed / j->o.blocks;
    if (per < SEG_ROUND) per = SEG_ROUND;
    for (uint64_t b = 0; b < j->o.blocks; b++) {
        if (!job_alloc(j, per)) return false;
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
        if (j->o.arrivals == 0) {
            t += rng_exp(mean_gap);
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
        if (j->o.kind == KIND_FINETUNE) {
            batch = j->o.batch_min + rng_next() % (j->o.batch_max - j->o.batch_min + 1);
            if (!job_grow(j, batch)) return false;
        }
        /* From here until its kernels end, the job has work for the device (scripts/bench attributes the
         * device's idle time by that); growing its memory before it is host time, or a memory wait. */
        vec_push(&j->iter_start, now_ns());
        if (!launch_step(j, batch, j->o.batch_max)) return false;
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
