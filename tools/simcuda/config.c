/* config.c - the SIMCUDA_* knobs: one table (name, type, default, bounds), strictly parsed, one clear error. */
#include "tools/simcuda/node-internal.h"

#include "runtime/lib/parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { KNOB_NAME, KNOB_UINT, KNOB_SIZE, KNOB_DOUBLE, KNOB_PATH, KNOB_DEVSIZES } knob_type_t;

typedef struct knob {
    const char *name;
    knob_type_t type;
    const char *def;         /* default, parsed by the same rules (NULL: computed, for SIMCUDA_NODE; a KNOB_PATH
                              * has none: unset means off) */
    double min, max;         /* bounds, in the knob's own unit */
    uint64_t scale;          /* multiply the parsed integer into the config field (us -> ns) */
    size_t off;              /* field in simnode_config_t */
    const char *hint;        /* "(use e.g. 80G)" part of the message */
    const char *help;
} knob_t;

#define CFG(f) offsetof(simnode_config_t, f)

static const knob_t knobs[SIMNODE_K_COUNT] = {
    [SIMNODE_K_NODE] = {"SIMCUDA_NODE", KNOB_NAME, NULL, 1, 63, 1, CFG(node), "letters, digits, '.', '_', '-'",
                        "which simulated node (shm object /dev/shm/NAME); default simcuda-UID"},
    [SIMNODE_K_DEVICES] = {"SIMCUDA_DEVICES", KNOB_UINT, "1", 1, SIMNODE_MAX_DEVICES, 1, CFG(devices),
                           "an integer from 1 to 16", "devices on the node"},
    [SIMNODE_K_MEM] = {"SIMCUDA_MEM", KNOB_SIZE, "80G", 1, (double)(1ull << 50), 1, CFG(mem_bytes),
                       "use e.g. 80G", "memory per device, bytes with optional K/M/G/T suffix (binary)"},
    [SIMNODE_K_TIMESLICE] = {"SIMCUDA_TIMESLICE_US", KNOB_UINT, "2000", 1, 10000000, 1000, CFG(timeslice_ns),
                             "microseconds, 1 to 10000000", "timeslice of a context on the compute engine"},
    [SIMNODE_K_SWITCH] = {"SIMCUDA_SWITCH_US", KNOB_UINT, "25", 0, 1000000, 1000, CFG(switch_ns),
                          "microseconds, 0 to 1000000", "engine time of a context switch (not counted busy)"},
    [SIMNODE_K_LAUNCH] = {"SIMCUDA_LAUNCH_NS", KNOB_UINT, "3000", 0, 1000000000, 1, CFG(launch_ns),
                          "nanoseconds, 0 to 1000000000", "fixed device time of every built-in kernel"},
    [SIMNODE_K_MEM_GBPS] = {"SIMCUDA_MEM_GBPS", KNOB_DOUBLE, "2000", 0.001, 1e6, 1, CFG(mem_gbps),
                            "GB/s, 0.001 to 1000000", "device memory bandwidth of fill_u32/add_f32"},
    [SIMNODE_K_COPY_GBPS] = {"SIMCUDA_COPY_GBPS", KNOB_DOUBLE, "25", 0.001, 1e6, 1, CFG(copy_gbps),
                             "GB/s, 0.001 to 1000000", "copy engine bandwidth (cuMemcpy*)"},
    [SIMNODE_K_COPY_LATENCY] = {"SIMCUDA_COPY_LATENCY_NS", KNOB_UINT, "2000", 0, 1000000000, 1,
                                CFG(copy_latency_ns), "nanoseconds, 0 to 1000000000", "fixed cost of every copy"},
    /* Per process, not part of the node: what this process's driver is (cuDriverGetVersion, and the newest PTX
     * its module loads accept, runtime/lib/ptxver.h), for programs that must cope with an older driver. */
    [SIMNODE_K_DRIVER] = {"SIMCUDA_DRIVER_VERSION", KNOB_UINT, "13000", 10000, 99990, 1, CFG(driver_version),
                          "a CUDA version as cuDriverGetVersion gives it, 10000 to 99990, e.g. 12040 for 12.4",
                          "the CUDA version of this process's driver: cuDriverGetVersion, and the newest PTX "
                          "loaded"},
    /* Per process, not part of the node: each process writes its own file (timeline.c). */
    [SIMNODE_K_TIMELINE] = {"SIMCUDA_TIMELINE", KNOB_PATH, NULL, 1, sizeof ((simnode_config_t *)0)->timeline - 1, 1,
                            CFG(timeline), "an absolute directory path, at most 255 bytes",
                            "write the compute-engine segments this process retires to DIR/timeline-PID.txt"},
    /* Per process: how long a foreign kernel (one an nvcc fatbin or a library brings, which simcuda cannot run)
     * occupies the device: SIMCUDA_LAUNCH_NS plus this per wave, a wave being one pass of its grid over the
     * device (sm_count x 2048 resident threads), so a bigger grid takes proportionally longer. */
    [SIMNODE_K_WAVE] = {"SIMCUDA_WAVE_NS", KNOB_UINT, "10000", 0, 1000000000, 1, CFG(wave_ns),
                        "nanoseconds, 0 to 1000000000",
                        "device time per wave (sm_count x 2048 threads) of a kernel simcuda does not model"},
    /* A node knob: whether each device has an MPS server, whose clients run concurrently (engine.c). */
    [SIMNODE_K_MPS] = {"SIMCUDA_MPS", KNOB_UINT, "0", 0, 1, 1, CFG(mps), "0 or 1",
                       "1: an MPS server per device, clients run concurrently on their shares of the SMs"},
    /* Per process, NVIDIA's own name: an MPS client's share of the SMs, read when it attaches (cuInit), before
     * it can create a context, as a real client's is at context creation. */
    [SIMNODE_K_MPS_PCT] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", KNOB_DOUBLE, "100", 1, 100, 1, CFG(mps_pct),
                           "a percentage, 1 to 100", "with SIMCUDA_MPS=1: this client's share of the SMs"},
    /* Per process, NVIDIA's own name and format: an MPS client's device memory limit per device ordinal. */
    [SIMNODE_K_MPS_MEM] = {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", KNOB_DEVSIZES, NULL, 1, (double)(1ull << 50), 1,
                           CFG(mps_mem_limit), "ORDINAL=SIZE[,ORDINAL=SIZE...], e.g. 0=1G,1=512M",
                           "with SIMCUDA_MPS=1: this client's device memory limit per device (default none)"},
};

static char simnode_errbuf[512];

void simnode_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(simnode_errbuf, sizeof simnode_errbuf, fmt, ap);
    va_end(ap);
}

const char *simnode_error(void)
{
    return simnode_errbuf[0] ? simnode_errbuf : "simcuda: no error";
}

const char *simnode_knob_name(int k)
{
    return (k >= 0 && k < SIMNODE_K_COUNT) ? knobs[k].name : "?";
}

static bool knob_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63 || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static int knob_parse(const knob_t *k, const char *v, simnode_config_t *cfg)
{
    char *field = (char *)cfg + k->off;
    uint64_t u = 0;
    double d = 0;
    int rc;
    switch (k->type) {
    case KNOB_NAME:
        if (!knob_name_ok(v)) {
            simnode_set_error("simcuda: %s='%s': not a node name (1 to 63 of: %s)", k->name, v, k->hint);
            return -EINVAL;
        }
        snprintf(field, sizeof cfg->node, "%s", v);
        return 0;
    case KNOB_UINT:
    case KNOB_SIZE:
        rc = k->type == KNOB_SIZE ? parse_size(v, (uint64_t)k->min, (uint64_t)k->max, &u)
                                  : parse_u64(v, (uint64_t)k->min, (uint64_t)k->max, &u);
        if (rc == -EINVAL) {
            simnode_set_error("simcuda: %s='%s': not %s (%s)", k->name, v,
                              k->type == KNOB_SIZE ? "a size" : "an integer", k->hint);
            return -EINVAL;
        }
        if (rc) {
            if (k->type == KNOB_SIZE)
                simnode_set_error("simcuda: %s='%s': out of range (1 byte to 1024T)", k->name, v);
            else
                simnode_set_error("simcuda: %s='%s': out of range (%s)", k->name, v, k->hint);
            return -EINVAL;
        }
        if (k->off == CFG(devices)) {
            cfg->devices = (int)u;
        } else {
            u *= k->scale;
            memcpy(field, &u, sizeof u);
        }
        return 0;
    case KNOB_DOUBLE:
        rc = parse_double(v, k->min, k->max, &d);
        if (rc) {
            simnode_set_error("simcuda: %s='%s': %s (%s)", k->name, v, rc == -EINVAL ? "not a number" : "out of range",
                              k->hint);
            return -EINVAL;
        }
        memcpy(field, &d, sizeof d);
        return 0;
    case KNOB_DEVSIZES: {
        /* "0=1G,1=512M": each ordinal once, each size in bounds; the table's bounds are the size's. */
        uint64_t lim[SIMNODE_MAX_DEVICES] = {0};
        char buf[256];
        if (strlen(v) >= sizeof buf) {
            simnode_set_error("simcuda: %s='%.40s...': too long (%s)", k->name, v, k->hint);
            return -EINVAL;
        }
        memcpy(buf, v, strlen(v) + 1);
        char *save = NULL;
        for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (eq) *eq = '\0';
            if (!eq || parse_u64(item, 0, SIMNODE_MAX_DEVICES - 1, &u) || lim[u] ||
                parse_size(eq + 1, (uint64_t)k->min, (uint64_t)k->max, &lim[u])) {
                simnode_set_error("simcuda: %s='%s': not a list of device limits (%s)", k->name, v, k->hint);
                return -EINVAL;
            }
        }
        if (!v[0]) {
            simnode_set_error("simcuda: %s='': not a list of device limits (%s)", k->name, k->hint);
            return -EINVAL;
        }
        memcpy(field, lim, sizeof lim);
        return 0;
    }
    case KNOB_PATH:
        if (v[0] != '/') {
            simnode_set_error("simcuda: %s='%s': not an absolute path (%s)", k->name, v, k->hint);
            return -EINVAL;
        }
        if (strlen(v) > (size_t)k->max) {
            simnode_set_error("simcuda: %s='%.40s...': too long (%s)", k->name, v, k->hint);
            return -EINVAL;
        }
        memcpy(field, v, strlen(v) + 1);
        return 0;
    }
    return -EINVAL;
}

int simnode_config_parse(simnode_config_t *cfg, bool is_set[SIMNODE_K_COUNT])
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < SIMNODE_K_COUNT; i++) {
        const knob_t *k = &knobs[i];
        const char *v = getenv(k->name);
        is_set[i] = v != NULL;
        char defbuf[64];
        if (!v && (k->type == KNOB_PATH || k->type == KNOB_DEVSIZES)) continue; /* off: the field stays empty */
        if (!v) {
            if (k->def) {
                v = k->def;
            } else {
                snprintf(defbuf, sizeof defbuf, "simcuda-%u", (unsigned)getuid());
                v = defbuf;
            }
        }
        int rc = knob_parse(k, v, cfg);
        if (rc) return rc;
    }
    return 0;
}

int simnode_config_driver(int *version)
{
    simnode_config_t cfg;
    const knob_t *k = &knobs[SIMNODE_K_DRIVER];
    const char *v = getenv(k->name);
    int rc = knob_parse(k, v ? v : k->def, &cfg);
    if (!rc) *version = (int)cfg.driver_version;
    return rc;
}

void simnode_config_describe(FILE *f)
{
    for (int i = 0; i < SIMNODE_K_COUNT; i++) {
        const knob_t *k = &knobs[i];
        const char *def = k->def                      ? k->def
                          : k->type == KNOB_PATH     ? "off"
                          : k->type == KNOB_DEVSIZES ? "none"
                                                     : "simcuda-UID";
        fprintf(f, "  %-24s default %-12s %s (%s)\n", k->name, def, k->help, k->hint);
    }
}

int simnode_config_node(const char *name, char out[64])
{
    simnode_config_t cfg;
    const knob_t *k = &knobs[SIMNODE_K_NODE];
    char defbuf[64];
    if (!name) name = getenv(k->name);
    if (!name) {
        snprintf(defbuf, sizeof defbuf, "simcuda-%u", (unsigned)getuid());
        name = defbuf;
    }
    int rc = knob_parse(k, name, &cfg);
    if (rc) return rc;
    memcpy(out, cfg.node, sizeof cfg.node);
    return 0;
}

void simnode_config_log(const simnode_config_t *c)
{
    const char *log = getenv("ROTA_LOG");
    if (!log || strcmp(log, "debug")) return;
    fprintf(stderr,
            "simcuda: pid %d: SIMCUDA_NODE=%s SIMCUDA_DEVICES=%d SIMCUDA_MEM=%llu SIMCUDA_TIMESLICE_US=%llu "
            "SIMCUDA_SWITCH_US=%llu SIMCUDA_LAUNCH_NS=%llu SIMCUDA_MEM_GBPS=%g SIMCUDA_COPY_GBPS=%g "
            "SIMCUDA_COPY_LATENCY_NS=%llu SIMCUDA_DRIVER_VERSION=%llu SIMCUDA_WAVE_NS=%llu SIMCUDA_TIMELINE=%s "
            "SIMCUDA_MPS=%llu CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%g\n",
            (int)getpid(), c->node, c->devices, (unsigned long long)c->mem_bytes,
            (unsigned long long)(c->timeslice_ns / 1000), (unsigned long long)(c->switch_ns / 1000),
            (unsigned long long)c->launch_ns, c->mem_gbps, c->copy_gbps, (unsigned long long)c->copy_latency_ns,
            (unsigned long long)c->driver_version, (unsigned long long)c->wave_ns, c->timeline[0] ? c->timeline : "off",
            (unsigned long long)c->mps, c->mps_pct);
}
