/* run.c - `rota run`: places a job on a GPU, sets up LD_PRELOAD=librota.so and its ROTA_* options, execs it. */
#include "tools/rota/rota.h"

#include "tools/rota/fmt.h"
#include "tools/rota/sample.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/gpus.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/preload.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/simdriver.h"
#include "runtime/lib/trace.h"
#include "runtime/lib/visible.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char run_usage[] =
    "usage: rota run [--priority high|normal|low] [--weight W] [--mem SIZE] [--gpu auto|all|N]\n"
    "                [--place-wait S] [--socket PATH] [--lib PATH] [--quiet] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD under rota: LD_PRELOAD starts with librota.so (--lib, else $ROTA_LIBROTA, else\n"
    "BINDIR/../lib/librota.so next to this rota binary; an existing LD_PRELOAD is kept after it, but a\n"
    "sanitizer runtime in it stays first and a librota.so in it is dropped), and\n"
    "ROTA_PRIORITY, ROTA_WEIGHT (> 0, <= 1e6), ROTA_MEM_LIMIT (SIZE: bytes or K/M/G/T) and ROTA_GPU are set.\n"
    "\n"
    "GPU placement (--gpu, default auto), over the GPUs CMD could see (CUDA_VISIBLE_DEVICES is honoured):\n"
    "  auto  rotad picks a GPU where --mem fits, then the fewest clients and placements still pending\n"
    "        (jobs started at once spread), then the most free memory; CMD sees it as device 0\n"
    "        (CUDA_VISIBLE_DEVICES=GPU-<uuid>). Where --mem fits on no GPU yet, rota run waits up to\n"
    "        --place-wait seconds (default 30, 0 to 3600; fractions allowed; 0: no wait) for one to have room\n"
    "        and starts CMD there, else where the most memory is free (CMD then waits for memory there).\n"
    "        Without rotad, or without a CUDA driver, nothing is placed (one warning): CMD sees every GPU.\n"
    "  N     the N-th visible GPU, as device 0.\n"
    "  all   no placement: CUDA_VISIBLE_DEVICES is left as it is.\n"
    "--socket (default $ROTA_SOCKET, else rotad's default path) names rotad; --quiet drops the warnings.\n"
    "\n"
    "Exit codes: CMD's own status (rota execs CMD); 125 rota run itself failed (usage error included);\n"
    "126 CMD was found but could not be executed; 127 CMD was not found.\n";

enum { RUN_GPU_AUTO = -1, RUN_GPU_ALL = -2 };
#define RUN_PLACE_WAIT_MS 30000u /* as long as an allocation waits for memory by default (ROTA_MEM_WAIT) */
#define RUN_ANSWER_MS 5000u      /* how long rotad may take to answer beyond the job's wait */
#define RUN_WAIT_NOTE_MS 1000u   /* a job still waiting for a GPU with room after this is told so */

typedef struct run_opts {
    const char *priority;   /* validated name, or NULL */
    const char *weight;     /* validated text, or NULL */
    uint64_t mem;           /* 0 = not given */
    uint32_t place_wait_ms; /* how long a job that fits on no GPU waits for one with room */
    int gpu;                /* RUN_GPU_AUTO, RUN_GPU_ALL or an ordinal */
    const char *socket;
    const char *lib;
    bool quiet;
    char **cmd;
} run_opts_t;

static void run_warn(const run_opts_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_warn(const run_opts_t *o, const char *fmt, ...)
{
    if (o->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("rota run: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int run_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rota run: fatal: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fputs(run_usage, stderr);
    return ROTA_EXIT_RUN_FAIL;
}

/* "--name VALUE" or "--name=VALUE": returns the value (advancing *i) or NULL when argv[*i] is not --name. */
static const char *run_optval(int argc, char **argv, int *i, const char *name, bool *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n)) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n]) return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static int run_parse(int argc, char **argv, run_opts_t *o)
{
    *o = (run_opts_t){.gpu = RUN_GPU_AUTO, .socket = getenv("ROTA_SOCKET"), .lib = getenv("ROTA_LIBROTA"),
                      .place_wait_ms = RUN_PLACE_WAIT_MS};
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break; /* CMD starts here */
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(run_usage, stdout);
            return 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o->quiet = true;
        } else if ((v = run_optval(argc, argv, &i, "--priority", &missing))) {
            enum rota_prio p;
            if (prio_parse(v, &p)) return run_usage_error("--priority '%s': expected high, normal or low", v);
            o->priority = prio_name(p);
        } else if ((v = run_optval(argc, argv, &i, "--weight", &missing))) {
            double w;
            if (parse_double(v, 0, 1e6, &w) || !(w > 0))
                return run_usage_error("--weight '%s': expected a number > 0 and <= 1e6", v);
            o->weight = v;
        } else if ((v = run_optval(argc, argv, &i, "--mem", &missing))) {
            if (parse_size(v, 1, UINT64_C(1) << 50, &o->mem))
                return run_usage_error("--mem '%s': expected a size from 1 byte to 1P (e.g. 512M, 8G)", v);
        } else if ((v = run_optval(argc, argv, &i, "--gpu", &missing))) {
            uint64_t n;
            if (!strcmp(v, "auto")) o->gpu = RUN_GPU_AUTO;
            else if (!strcmp(v, "all")) o->gpu = RUN_GPU_ALL;
            else if (parse_u64(v, 0, 1023, &n) == 0) o->gpu = (int)n;
            else return run_usage_error("--gpu '%s': expected auto, all or a GPU index from 0 to 1023", v);
        } else if ((v = run_optval(argc, argv, &i, "--place-wait", &missing))) {
            double w;
            if (parse_double(v, 0, ROTA_MAX_WAIT_MS / 1000.0, &w))
                return run_usage_error("--place-wait '%s': expected seconds from 0 to %u", v, ROTA_MAX_WAIT_MS / 1000);
            o->place_wait_ms = (uint32_t)(w * 1000.0 + 0.5);
        } else if ((v = run_optval(argc, argv, &i, "--socket", &missing))) {
            if (!*v) return run_usage_error("--socket: empty path");
            o->socket = v;
        } else if ((v = run_optval(argc, argv, &i, "--lib", &missing))) {
            if (!*v) return run_usage_error("--lib: empty path");
            o->lib = v;
        } else if (missing) {
            return run_usage_error("%s needs a value", a);
        } else {
            return run_usage_error("unknown option '%s'", a);
        }
        if (missing) return run_usage_error("%s needs a value", a);
    }
    if (i >= argc || !argv[i][0]) return run_usage_error("no command to run");
    o->cmd = argv + i;
    return 0;
}

/* ---- GPUs CMD can see, through the Driver API (no context is created) -------------------------------------- */

typedef struct run_gpus {
    int n;
    rota_place_cand_t g[ROTA_MAX_DEVICES];
} run_gpus_t;

/* Returns 0, or -1 with a reason in why (no driver, cuInit failed, no GPU, ...). More than ROTA_MAX_DEVICES GPUs:
 * the first ROTA_MAX_DEVICES are candidates. The driver stays loaded: exec unloads it. */
static int run_enumerate(run_gpus_t *gs, char *why, size_t n)
{
    int k = gpus_list(gs->g, why, n);
    if (k < 0) return -1;
    gs->n = k;
    return 0;
}

/* conn_place's note: the job fits on no GPU yet and now waits for one with room. */
static void run_place_note(void *arg)
{
    const run_opts_t *o = arg;
    char sz[32];
    rota_fmt_size(sz, sizeof sz, o->mem);
    run_warn(o, "no GPU has room for --mem %s yet: waiting up to %.1f s for one (--place-wait)", sz,
             o->place_wait_ms / 1000.0);
}

/* Asks rotad which candidate to use: 0 and *pick (*waited_ms: how long rotad kept the job waiting for room), or -1
 * with a reason in why. */
static int run_ask_rotad(const run_opts_t *o, const run_gpus_t *gs, int *pick, uint64_t *waited_ms, char *why,
                         size_t n)
{
    conn_opts_t co = {.socket = o->socket, .role = ROTA_ROLE_OBSERVER, .priority = ROTA_PRIO_NORMAL,
                      .weight = 1000, .timeout_ms = 5000};
    conn_t *c;
    char err[256];
    if (conn_open(&co, &c, err, sizeof err)) {
        snprintf(why, n, "%s", err);
        return -1;
    }
    /* The job's class: --priority, else the ROTA_PRIORITY it inherits (a bad one: normal; librota refuses it). */
    enum rota_prio prio = ROTA_PRIO_NORMAL;
    prio_parse(o->priority ? o->priority : getenv("ROTA_PRIORITY"), &prio);
    conn_place_t p = {.prio = prio, .cand = gs->g, .ncand = (unsigned)gs->n, .mem = o->mem,
                      .wait_ms = o->mem ? o->place_wait_ms : 0, /* a job of unknown memory fits anywhere */
                      .answer_ms = RUN_ANSWER_MS};
    if (p.wait_ms) {
        p.note_ms = RUN_WAIT_NOTE_MS;
        p.note = run_place_note;
        p.arg = (void *)o;
    }
    int rc = conn_place(c, &p, pick, waited_ms);
    if (rc == -ETIMEDOUT) snprintf(why, n, "rotad did not answer the placement request");
    else if (rc == -EBADMSG) snprintf(why, n, "rotad sent no valid placement");
    else if (rc) snprintf(why, n, "rotad could not place the job (%s)", strerror(-rc));
    else if (*pick < 0 || *pick >= gs->n) snprintf(why, n, "rotad could not place the job (bad index)");
    conn_close(c);
    return rc || *pick < 0 || *pick >= gs->n ? -1 : 0;
}

static int run_setenv(const char *k, const char *v)
{
    if (setenv(k, v, 1) == 0) return 0;
    fprintf(stderr, "rota run: fatal: unable to set %s: %s\n", k, strerror(errno));
    return -1;
}

/* ROTA_TRACE: the placement as a "place" event (gpu: the index among the GPUs listed here; wait_us: how long the
 * job waited for a GPU with room). This process execs CMD, so the event's pid is CMD's. Tracing never fails the
 * run: a file that will not open is a warning. */
static void run_trace_place(const run_opts_t *o, int gpu, const char *uuid, const char *how, uint64_t waited_ms)
{
    const char *path = getenv("ROTA_TRACE");
    if (!path || !path[0]) return;
    int fd = trace_open(path);
    if (fd < 0) {
        run_warn(o, "unable to open ROTA_TRACE=%s: %s; not tracing the placement", path, strerror(-fd));
        return;
    }
    char extra[PROTO_UUID_STR + 96];
    snprintf(extra, sizeof extra, "\"uuid\":\"%s\",\"how\":\"%s\",\"wait_us\":%llu", uuid, how,
             (unsigned long long)waited_ms * 1000u);
    trace_write(fd, "place", gpu, 0, extra);
    close(fd);
}

/* Sets CUDA_VISIBLE_DEVICES (and ROTA_GPU) for the placement; returns 0 or an exit code. */
static int run_place(const run_opts_t *o)
{
    if (o->gpu == RUN_GPU_ALL) {
        /* every visible GPU: nothing to remap, and librota must not place CMD either */
        return run_setenv("ROTA_GPU", "all") ? ROTA_EXIT_RUN_FAIL : 0;
    }
    run_gpus_t gs = {0};
    char why[320];
    int pick = -1;
    uint64_t waited_ms = 0;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    int erc = run_enumerate(&gs, why, sizeof why);
    if (o->gpu >= 0) {
        char id[PROTO_UUID_STR + 8];
        if (erc == 0) {
            if (o->gpu >= gs.n) {
                fprintf(stderr, "rota run: fatal: --gpu %d: only %d GPU%s visible%s\n", o->gpu, gs.n,
                        gs.n == 1 ? " is" : "s are", vis ? " (CUDA_VISIBLE_DEVICES is set)" : "");
                return ROTA_EXIT_RUN_FAIL;
            }
            proto_uuid_str(gs.g[o->gpu].uuid, id);
            run_trace_place(o, o->gpu, id, "fixed", 0);
        } else if (vis) {
            if (visible_entry(vis, o->gpu, id, sizeof id)) {
                fprintf(stderr, "rota run: fatal: --gpu %d: CUDA_VISIBLE_DEVICES='%s' has no entry %d\n", o->gpu,
                        vis, o->gpu);
                return ROTA_EXIT_RUN_FAIL;
            }
        } else {
            snprintf(id, sizeof id, "%d", o->gpu); /* no driver here to ask: the ordinal itself */
        }
        if (run_setenv("CUDA_VISIBLE_DEVICES", id) || run_setenv("ROTA_GPU", "0")) return ROTA_EXIT_RUN_FAIL;
        return 0;
    }
    /* auto */
    if (erc) {
        run_warn(o, "%s: not placing; CMD sees every GPU", why);
        return run_setenv("ROTA_GPU", "auto") ? ROTA_EXIT_RUN_FAIL : 0;
    }
    if (gs.n == 0) return run_setenv("ROTA_GPU", "auto") ? ROTA_EXIT_RUN_FAIL : 0;
    if (gs.n == 1 && !(o->mem && o->place_wait_ms)) {
        pick = 0; /* nothing to choose and nothing to wait for */
    } else if (run_ask_rotad(o, &gs, &pick, &waited_ms, why, sizeof why)) {
        if (gs.n == 1) {
            /* the one GPU it can see is CMD's either way; it then waits for memory there */
            run_warn(o, "%s: starting CMD without waiting for room on the only GPU", why);
            pick = 0;
        } else {
            run_warn(o, "%s: not placing; CMD sees all %d GPUs and uses the first", why, gs.n);
            return run_setenv("ROTA_GPU", "auto") ? ROTA_EXIT_RUN_FAIL : 0;
        }
    }
    char id[PROTO_UUID_STR];
    proto_uuid_str(gs.g[pick].uuid, id);
    run_trace_place(o, pick, id, gs.n == 1 ? "only" : "rotad", waited_ms);
    if (run_setenv("CUDA_VISIBLE_DEVICES", id) || run_setenv("ROTA_GPU", "0")) return ROTA_EXIT_RUN_FAIL;
    return 0;
}

/* librota.so: --lib / $ROTA_LIBROTA, else ../lib/librota.so relative to this binary. */
static int run_libpath(const run_opts_t *o, char *out, size_t n)
{
    if (o->lib) {
        snprintf(out, n, "%s", o->lib);
    } else {
        char exe[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len <= 0) {
            fprintf(stderr, "rota run: fatal: unable to find this program's path: %s (set ROTA_LIBROTA)\n",
                    strerror(errno));
            return -1;
        }
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        if ((size_t)snprintf(out, n, "%s/../lib/librota.so", exe) >= n) {
            fprintf(stderr, "rota run: fatal: path too long: %s\n", exe);
            return -1;
        }
    }
    if (strchr(out, ':') || strchr(out, ' ')) {
        fprintf(stderr, "rota run: fatal: librota path '%s' cannot go in LD_PRELOAD (':' or ' ')\n", out);
        return -1;
    }
    if (access(out, R_OK)) {
        fprintf(stderr, "rota run: fatal: unable to use librota.so at %s: %s (set --lib or ROTA_LIBROTA)\n", out,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* LD_PRELOAD for CMD (preload.h): librota once, after the sanitizer runtimes of old. */
static char *run_preload(const char *lib, const char *old)
{
    size_t need = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *out = malloc(need);
    if (out && preload_compose(lib, old, out, need)) { /* cannot happen: need holds all of it */
        free(out);
        out = NULL;
    }
    return out;
}

/* Where no CUDA driver loads, CMD runs on simcuda from rota's own build or install: its folder goes first in
 * LD_LIBRARY_PATH, with one warning. A machine with a driver is left as it is. */
static int run_simdriver(const run_opts_t *o)
{
    char dir[PATH_MAX];
    if (!simdriver_needed() || simdriver_dir(dir, sizeof dir)) return 0;
    const char *old = getenv("LD_LIBRARY_PATH");
    size_t need = strlen(dir) + (old ? strlen(old) : 0) + 2;
    char *path = malloc(need);
    if (!path) {
        fprintf(stderr, "rota run: fatal: out of memory\n");
        return ROTA_EXIT_RUN_FAIL;
    }
    snprintf(path, need, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    int rc = run_setenv("LD_LIBRARY_PATH", path) ? ROTA_EXIT_RUN_FAIL : 0;
    free(path);
    if (!rc) run_warn(o, "no CUDA driver on this machine: CMD runs on simcuda (%s)", dir);
    return rc;
}

int rota_run_main(int argc, char **argv)
{
    run_opts_t o;
    int rc = run_parse(argc, argv, &o);
    if (rc) return rc == 1 ? ROTA_EXIT_OK : rc;
    char lib[PATH_MAX + 32];
    if (run_libpath(&o, lib, sizeof lib)) return ROTA_EXIT_RUN_FAIL;
    rc = run_simdriver(&o);
    if (rc) return rc;
    rc = run_place(&o);
    if (rc) return rc;

    char *pre = run_preload(lib, getenv("LD_PRELOAD"));
    if (!pre) {
        fprintf(stderr, "rota run: fatal: out of memory\n");
        return ROTA_EXIT_RUN_FAIL;
    }
    char mem[32];
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)o.mem);
    if (run_setenv("LD_PRELOAD", pre) || (o.priority && run_setenv("ROTA_PRIORITY", o.priority)) ||
        (o.weight && run_setenv("ROTA_WEIGHT", o.weight)) || (o.mem && run_setenv("ROTA_MEM_LIMIT", mem)) ||
        (o.socket && run_setenv("ROTA_SOCKET", o.socket))) {
        free(pre);
        return ROTA_EXIT_RUN_FAIL;
    }
    free(pre);
    fflush(NULL);
    execvp(o.cmd[0], o.cmd);
    int e = errno;
    fprintf(stderr, "rota run: fatal: unable to run %s: %s\n", o.cmd[0], strerror(e));
    return e == ENOENT || e == ENOTDIR ? ROTA_EXIT_RUN_NOTFOUND : ROTA_EXIT_RUN_NOEXEC;
}
