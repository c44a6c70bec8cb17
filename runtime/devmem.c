/* devmem.c - what the driver says a process holds on a GPU: NVML, loaded at the first question (devmem.h). */
#include "runtime/devmem.h"

#include "shim/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Entries asked of NVML at once; a GPU with more processes is asked again with room for them all. */
#define DEVMEM_LIST_MIN 64u
#define DEVMEM_RETRY_NS 1000000ull

typedef nvmlReturn_t (*devmem_init_fn)(void);
typedef nvmlReturn_t (*devmem_by_uuid_fn)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*devmem_procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
typedef nvmlReturn_t (*devmem_procs_v1_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
typedef nvmlReturn_t (*devmem_shutdown_fn)(void);
typedef const char *(*devmem_error_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*devmem_util_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                                       unsigned long long);
#define DEVMEM_SM_PIDS 256u /* processes whose device work is remembered per GPU (the oldest make way) */

/* One GPU's process list as NVML last gave it. */
typedef struct devmem_gpu {
    uint8_t uuid[ROTA_UUID_LEN];
    bool used;
    nvmlDevice_t dev;
    uint64_t at_ns;       /* when asked (0: never) */
    unsigned n;
    unsigned pid[DEVMEM_LIST_MIN * 4];
    uint64_t bytes[DEVMEM_LIST_MIN * 4];
    /* device work: when asked, NVML's timestamp of that answer, and when each process was last seen on the SMs */
    uint64_t util_at_ns;
    unsigned long long util_seen_us;
    bool util_ok;         /* the last question was answered */
    unsigned nsm;
    unsigned sm_pid[DEVMEM_SM_PIDS];
    uint64_t sm_ns[DEVMEM_SM_PIDS];
} devmem_gpu_t;

static struct {
    enum { DEVMEM_UNTRIED, DEVMEM_ON, DEVMEM_OFF } state;
    bool told;            /* why NVML cannot tell was said once */
    void *lib;
    devmem_procs_fn procs;          /* _v3, else _v2: the same layout */
    devmem_procs_v1_fn procs_v1;    /* the unversioned symbol of older drivers */
    devmem_by_uuid_fn by_uuid;
    devmem_shutdown_fn shutdown;
    devmem_error_fn error;
    devmem_util_fn util;  /* NULL: an NVML without per-process utilisation */
    bool told_util;
    char why[160];
    devmem_gpu_t gpus[ROTA_MAX_DEVICES];
} dm;

/* rotad's event loop (memory) and its scheduler thread (device work) ask; NVML itself is thread-safe. */
static pthread_mutex_t devmem_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t devmem_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *devmem_err(nvmlReturn_t rc)
{
    const char *s = dm.error ? dm.error(rc) : NULL;
    return s ? s : "NVML error";
}

/* dlopen + nvmlInit_v2, once. On failure, why[] says why and NVML is not asked again. */
static void devmem_load(void)
{
    const char *path = getenv("ROTA_REAL_NVML");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    dm.state = DEVMEM_OFF;
    if (strcmp(path, "none") == 0) {
        snprintf(dm.why, sizeof dm.why, "ROTA_REAL_NVML=none");
        return;
    }
    dm.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dm.lib) {
        snprintf(dm.why, sizeof dm.why, "%s", dlerror());
        return;
    }
    devmem_init_fn init = (devmem_init_fn)dlsym(dm.lib, "nvmlInit_v2");
    dm.by_uuid = (devmem_by_uuid_fn)dlsym(dm.lib, "nvmlDeviceGetHandleByUUID");
    dm.shutdown = (devmem_shutdown_fn)dlsym(dm.lib, "nvmlShutdown");
    dm.error = (devmem_error_fn)dlsym(dm.lib, "nvmlErrorString");
    dm.util = (devmem_util_fn)dlsym(dm.lib, "nvmlDeviceGetProcessUtilization");
    dm.procs = (devmem_procs_fn)dlsym(dm.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!dm.procs) dm.procs = (devmem_procs_fn)dlsym(dm.lib, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!dm.procs) dm.procs_v1 = (devmem_procs_v1_fn)dlsym(dm.lib, "nvmlDeviceGetComputeRunningProcesses");
    if (!init || !dm.by_uuid || (!dm.procs && !dm.procs_v1)) {
        snprintf(dm.why, sizeof dm.why, "%s lacks NVML's process queries", path);
        goto out_close;
    }
    nvmlReturn_t rc = init();
    if (rc != NVML_SUCCESS) {
        snprintf(dm.why, sizeof dm.why, "nvmlInit_v2: %s", devmem_err(rc));
        goto out_close;
    }
    dm.state = DEVMEM_ON;
    return;
out_close:
    dlclose(dm.lib);
    dm.lib = NULL;
}

static void devmem_uuid_string(const uint8_t *u, char out[NVML_DEVICE_UUID_V2_BUFFER_SIZE])
{
    snprintf(out, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* The cache entry of the GPU with this UUID, its NVML handle found: NULL where NVML does not know it. */
static devmem_gpu_t *devmem_gpu(const uint8_t *uuid)
{
    devmem_gpu_t *free_g = NULL;
    for (unsigned i = 0; i < ROTA_MAX_DEVICES; i++) {
        devmem_gpu_t *g = &dm.gpus[i];
        if (g->used && memcmp(g->uuid, uuid, ROTA_UUID_LEN) == 0) return g->dev ? g : NULL;
        if (!g->used && !free_g) free_g = g;
    }
    if (!free_g) return NULL;
    char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    devmem_uuid_string(uuid, s);
    memset(free_g, 0, sizeof *free_g);
    memcpy(free_g->uuid, uuid, ROTA_UUID_LEN);
    free_g->used = true; /* remembered either way: an unknown GPU is not asked again */
    if (dm.by_uuid(s, &free_g->dev) != NVML_SUCCESS) free_g->dev = NULL;
    return free_g->dev ? free_g : NULL;
}

/* Asks NVML for g's processes. The buffer has room for entries of a larger layout than the one read (NVML
 * releases that briefly added a field to nvmlProcessInfo_t), so no NVML writes past it. Returns 0 or -ENODATA. */
static int devmem_refresh(devmem_gpu_t *g, uint64_t now)
{
    enum { STRIDE_MAX = 40 };
    unsigned cap = sizeof g->pid / sizeof g->pid[0], n = cap;
    unsigned char *buf = calloc(cap, STRIDE_MAX);
    if (!buf) return -ENODATA;
    nvmlReturn_t rc;
    size_t stride;
    if (dm.procs) {
        rc = dm.procs(g->dev, &n, (nvmlProcessInfo_t *)(void *)buf);
        stride = sizeof(nvmlProcessInfo_t);
    } else {
        rc = dm.procs_v1(g->dev, &n, (nvmlProcessInfo_v1_t *)(void *)buf);
        stride = sizeof(nvmlProcessInfo_v1_t);
    }
    int ret = -ENODATA;
    if (rc != NVML_SUCCESS || n > cap) goto out_free; /* more processes than we keep: no bound from a partial list */
    for (unsigned i = 0; i < n; i++) {
        nvmlProcessInfo_v1_t e;
        memcpy(&e, buf + i * stride, sizeof e);
        g->pid[i] = e.pid;
        g->bytes[i] = e.usedGpuMemory;
    }
    g->n = n;
    g->at_ns = now;
    ret = 0;
out_free:
    free(buf);
    return ret;
}

/* The cached figure of pid on g: 0 and *bytes, or -ENODATA (NVML gives no per-process figure: NOT_AVAILABLE). */
static int devmem_lookup(const devmem_gpu_t *g, pid_t pid, uint64_t *bytes)
{
    for (unsigned i = 0; i < g->n; i++) {
        if (g->pid[i] != (unsigned)pid) continue;
        if (g->bytes[i] == NVML_VALUE_NOT_AVAILABLE_ulonglong) return -ENODATA;
        *bytes = g->bytes[i];
        return 0;
    }
    *bytes = 0;
    return 0;
}

static int devmem_proc_bytes_locked(const uint8_t uuid[ROTA_UUID_LEN], pid_t pid, uint64_t want, uint64_t *bytes,
                                    char *why, size_t whylen)
{
    if (whylen) why[0] = 0;
    if (dm.state == DEVMEM_UNTRIED) devmem_load();
    devmem_gpu_t *g = dm.state == DEVMEM_ON ? devmem_gpu(uuid) : NULL;
    if (dm.state == DEVMEM_ON && !g) snprintf(dm.why, sizeof dm.why, "NVML does not know this GPU");
    if (!g) goto out_nodata;
    uint64_t now = devmem_now_ns();
    int rc = 0;
    if (!g->at_ns || now - g->at_ns >= DEVMEM_FRESH_NS) rc = devmem_refresh(g, now);
    if (!rc) rc = devmem_lookup(g, pid, bytes);
    if (!rc && *bytes < want && now - g->at_ns >= DEVMEM_RETRY_NS && !devmem_refresh(g, now))
        rc = devmem_lookup(g, pid, bytes);
    if (!rc) return 0;
    snprintf(dm.why, sizeof dm.why, "NVML gives no per-process memory for this GPU");
out_nodata:
    if (!dm.told && whylen) {
        snprintf(why, whylen, "%s", dm.why);
        dm.told = true;
    }
    return -ENODATA;
}

int devmem_proc_bytes(const uint8_t uuid[ROTA_UUID_LEN], pid_t pid, uint64_t want, uint64_t *bytes, char *why,
                      size_t whylen)
{
    pthread_mutex_lock(&devmem_mu);
    int rc = devmem_proc_bytes_locked(uuid, pid, want, bytes, why, whylen);
    pthread_mutex_unlock(&devmem_mu);
    return rc;
}

/* Notes that pid used the SMs at now (replacing the entry seen longest ago when the table is full). */
static void devmem_sm_note(devmem_gpu_t *g, unsigned pid, uint64_t now)
{
    unsigned k = 0, old = 0;
    while (k < g->nsm && g->sm_pid[k] != pid) {
        if (g->sm_ns[k] < g->sm_ns[old]) old = k;
        k++;
    }
    if (k == g->nsm && g->nsm < DEVMEM_SM_PIDS) g->nsm++;
    else if (k == g->nsm) k = old;
    g->sm_pid[k] = pid;
    g->sm_ns[k] = now;
}

/* Asks NVML for g's process samples since the last answer. NVML_ERROR_NOT_FOUND is an answer: no process used
 * the GPU in the period. Returns 0 or -ENODATA. */
static int devmem_util_refresh(devmem_gpu_t *g, uint64_t now)
{
    enum { N = 256 };
    static nvmlProcessUtilizationSample_t smp[N]; /* under devmem_mu */
    unsigned n = N;
    nvmlReturn_t rc = dm.util(g->dev, smp, &n, g->util_seen_us);
    g->util_at_ns = now;
    g->util_ok = rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND;
    if (rc != NVML_SUCCESS) return g->util_ok ? 0 : -ENODATA;
    for (unsigned i = 0; i < n && i < N; i++) {
        if (smp[i].timeStamp > g->util_seen_us) g->util_seen_us = smp[i].timeStamp;
        if (smp[i].smUtil) devmem_sm_note(g, smp[i].pid, now);
    }
    return 0;
}

int devmem_proc_sm(const uint8_t uuid[ROTA_UUID_LEN], pid_t pid, uint64_t *seen_ns, char *why, size_t whylen)
{
    if (whylen) why[0] = 0;
    pthread_mutex_lock(&devmem_mu);
    if (dm.state == DEVMEM_UNTRIED) devmem_load();
    devmem_gpu_t *g = dm.state == DEVMEM_ON ? devmem_gpu(uuid) : NULL;
    int rc = -ENODATA;
    if (!g || !dm.util) goto out_unlock;
    uint64_t now = devmem_now_ns();
    if (!g->util_at_ns || now - g->util_at_ns >= DEVMEM_UTIL_NS) devmem_util_refresh(g, now);
    if (!g->util_ok) goto out_unlock;
    *seen_ns = 0;
    for (unsigned k = 0; k < g->nsm; k++)
        if (g->sm_pid[k] == (unsigned)pid) *seen_ns = g->sm_ns[k];
    rc = 0;
out_unlock:
    if (rc && !dm.told_util && whylen) {
        snprintf(why, whylen, "%s", dm.state != DEVMEM_ON ? dm.why
                                    : !g                  ? "NVML does not know this GPU"
                                    : !dm.util            ? "NVML lacks per-process utilisation"
                                                          : "NVML's per-process utilisation does not answer");
        dm.told_util = true;
    }
    pthread_mutex_unlock(&devmem_mu);
    return rc;
}

void devmem_close(void)
{
    pthread_mutex_lock(&devmem_mu);
    if (dm.state == DEVMEM_ON && dm.shutdown) dm.shutdown();
    if (dm.lib) dlclose(dm.lib);
    memset(&dm, 0, sizeof dm);
    pthread_mutex_unlock(&devmem_mu);
}
