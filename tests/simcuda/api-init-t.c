/* api-init-t.c - simcuda initialisation and devices: cuInit (bad knobs, fork), versions, device queries,
 * attributes, PCI bus ids, UUIDs, error codes. */
#include <cuda.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/tap.h"

CUresult cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev) __asm__("cuDeviceGetUuid");
/* deprecated in cuda.h, still exported: declared again without the attribute */
CUresult compute_capability(int *major, int *minor, CUdevice dev) __asm__("cuDeviceComputeCapability");

/* Interposes getpid() for the whole process (libcuda.so.1 included): API calls must not make a syscall
 * each to detect fork. */
static atomic_long getpid_calls;
pid_t getpid(void)
{
    atomic_fetch_add(&getpid_calls, 1);
    return (pid_t)syscall(SYS_getpid);
}

/* Runs cuInit twice in a child with a bad SIMCUDA_MEM; returns its stderr and cuInit results. */
static void bad_knob(char *err, size_t size, int *rc1, int *rc2)
{
    int p[2], r[2];
    if (pipe(p) || pipe(r))
        bail("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        setenv("SIMCUDA_MEM", "12Q", 1);
        int res[2] = { cuInit(0), cuInit(0) };
        if (write(r[1], res, sizeof res) != (ssize_t)sizeof res)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    close(r[1]);
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = read(p[0], err + len, size - 1 - len)) > 0)
        len += (size_t)n;
    err[len] = '\0';
    int res[2] = { -1, -1 };
    if (read(r[0], res, sizeof res) != (ssize_t)sizeof res)
        res[0] = res[1] = -1;
    *rc1 = res[0];
    *rc2 = res[1];
    close(p[0]);
    close(r[0]);
    waitpid(pid, NULL, 0);
}

/* ---- CUDA_VISIBLE_DEVICES, on a node of its own with 4 devices, each case in a child of its own ---- */
#define VIS_DEVS 4
static char vis_node[80];
typedef struct vis_result {
    int init_rc, count, count_rc;
    int phys[VIS_DEVS];          /* physical device behind each visible ordinal (by UUID), -1 unknown */
    CUuuid uuid[VIS_DEVS];
} vis_result_t;
static CUuuid phys_uuid[VIS_DEVS];

static vis_result_t vis_run(const char *value)
{
    vis_result_t r;
    memset(&r, 0xff, sizeof r);
    int p[2];
    if (pipe(p))
        bail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        bail("fork");
    if (pid == 0) {
        setenv("SIMCUDA_NODE", vis_node, 1);
        setenv("SIMCUDA_DEVICES", "4", 1);
        if (value)
            setenv("CUDA_VISIBLE_DEVICES", value, 1);
        else
            unsetenv("CUDA_VISIBLE_DEVICES");
        r.init_rc = cuInit(0);
        r.count_rc = cuDeviceGetCount(&r.count);
        for (int i = 0; i < r.count && i < VIS_DEVS; i++)
            cuDeviceGetUuid(&r.uuid[i], i);
        if (write(p[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], &r, sizeof r) != (ssize_t)sizeof r)
        memset(&r, 0xff, sizeof r);
    close(p[0]);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < VIS_DEVS; i++) {
        int ph = -1;
        for (int d = 0; i < r.count && d < VIS_DEVS; d++)
            if (memcmp(r.uuid[i].bytes, phys_uuid[d].bytes, 16) == 0)
                ph = d;
        r.phys[i] = ph;
    }
    return r;
}

/* Visible ordinals as a string of physical indices, "2,0" */
static const char *vis_str(const vis_result_t *r, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->count && i < VIS_DEVS && len + 4 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? "," : "", r->phys[i]);
    return buf;
}

static void vis_case(const char *value, const char *want, const char *what)
{
    char got[64];
    vis_result_t r = vis_run(value);
    vis_str(&r, got, sizeof got);
    int want_rc = want[0] ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
    ok(r.init_rc == want_rc && r.count_rc == CUDA_SUCCESS && strcmp(got, want) == 0,
       "CUDA_VISIBLE_DEVICES='%s' shows physical [%s] (got [%s], cuInit %d): %s", value, want, got, r.init_rc,
       what);
}

/* With CUDA_VISIBLE_DEVICES=2,0: the app sees ordinals 0 and 1, the node charges physical device 2. */
static int vis_child_mapping(void)
{
    setenv("SIMCUDA_NODE", vis_node, 1);
    setenv("SIMCUDA_DEVICES", "4", 1);
    setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
    if (cuInit(0) != CUDA_SUCCESS)
        return 2;
    CUcontext c;
    CUdevice d = -1;
    if (cuCtxCreate(&c, NULL, 0, 0) != CUDA_SUCCESS || cuCtxGetDevice(&d) != CUDA_SUCCESS || d != 0)
        return 3;
    char bus[32], bus2[32];
    CUdevice back = -1;
    if (cuDeviceGetPCIBusId(bus, sizeof bus, 0) || cuDeviceGetByPCIBusId(&back, bus) || back != 0)
        return 4;
    if (cuDeviceGetPCIBusId(bus2, sizeof bus2, 1) || strcmp(bus, bus2) == 0)
        return 5;
    size_t free0, total0, free1, total1, free0b, total0b;
    if (cuMemGetInfo(&free0, &total0))
        return 6;
    CUdeviceptr p;
    if (cuMemAlloc(&p, 64 << 20) != CUDA_SUCCESS)
        return 7;
    int ord = -1;
    if (cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) || ord != 0)
        return 8;
    if (cuMemGetInfo(&free0b, &total0b) || free0 - free0b < (64 << 20))
        return 9;
    /* the other visible device (physical 0) is not charged */
    CUcontext c1;
    if (cuCtxCreate(&c1, NULL, 0, 1) != CUDA_SUCCESS || cuMemGetInfo(&free1, &total1) || free1 != total1)
        return 10;
    if (cuCtxGetDevice(&d) != CUDA_SUCCESS || d != 1)
        return 11;
    cuCtxDestroy(c1);
    /* simcuda-stat reports physical devices, whatever CUDA_VISIBLE_DEVICES says */
    const char *b = getenv("ROTA_BUILD");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/bin/simcuda-stat --node %s", b ? b : "build", vis_node);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 12;
    char line[1024];
    int devs = 0, charged = -1;
    while (fgets(line, sizeof line, f)) {
        int dv;
        unsigned long long used;
        const char *m = strstr(line, "mem_used=");
        if (sscanf(line, "device %d:", &dv) == 1 && m && sscanf(m, "mem_used=%llu", &used) == 1) {
            devs++;
            if (used >= (64ull << 20))
                charged = charged == -1 ? dv : -2;
        }
    }
    if (pclose(f) != 0 || devs != VIS_DEVS)
        return 13;
    if (charged != 2)
        return 14;
    cuMemFree(p);
    cuCtxDestroy(c);
    return 0;
}

static void visible_devices(void)
{
    snprintf(vis_node, sizeof vis_node, "%s-vis", node);
    vis_result_t all = vis_run(NULL);
    for (int d = 0; d < VIS_DEVS; d++)
        phys_uuid[d] = all.uuid[d];
    ok(all.init_rc == CUDA_SUCCESS && all.count == VIS_DEVS, "unset: all %d devices visible", VIS_DEVS);
    vis_case("2,0", "2,0", "renumbered in list order");
    vis_case("3", "3", "a single device");
    vis_case("0,2,-1,1", "0,2", "stops at a negative entry");
    vis_case("1,7,0", "1", "stops at an out-of-range ordinal");
    vis_case("1,x,0", "1", "stops at garbage");
    vis_case("1,,0", "1", "stops at an empty entry");
    vis_case(" 1gpu2,3", "1,3", "ordinals read like strtoul");
    vis_case("+2", "2", "a plus sign is accepted");
    char id[64], list[160];
    const unsigned char *u = (const unsigned char *)phys_uuid[2].bytes;
    snprintf(id, sizeof id, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    vis_case(id, "2", "a full UUID");
    /* the shortest prefix unique among the 4 devices */
    char pre[64];
    for (size_t n = 5; n <= strlen(id); n++) {
        snprintf(pre, sizeof pre, "%.*s", (int)n, id);
        int hits = 0;
        for (int d = 0; d < VIS_DEVS; d++) {
            char o[64];
            const unsigned char *v = (const unsigned char *)phys_uuid[d].bytes;
            snprintf(o, sizeof o, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", v[0],
                     v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15]);
            hits += strncmp(o, pre, n) == 0;
        }
        if (hits == 1)
            break;
    }
    snprintf(list, sizeof list, "%s,1", pre);
    vis_case(list, "2", "a unique UUID prefix; an ordinal after UUIDs is invalid");
    for (char *c = id + 4; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    vis_case(id, "2", "UUID hex in upper case");
    snprintf(list, sizeof list, "1,%s", pre);
    vis_case(list, "1", "a UUID in an ordinal list is invalid");
    vis_case("GPU-zzzz,0", "", "an unknown UUID stops the list at once");
    vis_result_t r = vis_run("GPU-");
    ok(r.count == 0 && r.init_rc == CUDA_ERROR_NO_DEVICE, "'GPU-' alone is ambiguous among 4 devices");
    r = vis_run("0,1,0");
    ok(r.init_rc == CUDA_ERROR_NO_DEVICE && r.count_rc == CUDA_SUCCESS && r.count == 0,
       "a device named twice hides every device");
    r = vis_run("");
    is_int(r.init_rc, CUDA_ERROR_NO_DEVICE, "CUDA_VISIBLE_DEVICES='': cuInit returns CUDA_ERROR_NO_DEVICE");
    ok(r.count_rc == CUDA_SUCCESS && r.count == 0, "and cuDeviceGetCount gives 0");
    pid_t pid = fork();
    if (pid == 0)
        _exit(vis_child_mapping());
    int st = -1;
    waitpid(pid, &st, 0);
    is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
           "CUDA_VISIBLE_DEVICES=2,0: app ordinals visible, memory and simcuda-stat physical (exit = failing step)");
    char path[96];
    snprintf(path, sizeof path, "/%s", vis_node);
    shm_unlink(path);
}

/* In a forked child: unusable until cuInit, then fully working. Exit code = first failing step. */
static int child_after_fork(void)
{
    int n;
    if (cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED)
        return 2;
    if (cuInit(0) != CUDA_SUCCESS)
        return 3;
    CUcontext c;
    CUdeviceptr d;
    if (cuCtxCreate(&c, NULL, 0, 0) != CUDA_SUCCESS || cuMemAlloc(&d, 4096) != CUDA_SUCCESS)
        return 4;
    char in[4096], out[4096];
    memset(in, 0x5a, sizeof in);
    if (cuMemcpyHtoD(d, in, sizeof in) || cuMemcpyDtoH(out, d, sizeof out) || memcmp(in, out, sizeof in))
        return 5;
    if (cuMemFree(d) || cuCtxDestroy(c))
        return 6;
    return 0;
}

int main(void)
{
    node_setup("init", "2G");
    setenv("SIMCUDA_DEVICES", "2", 1);
    alarm(60);

    int v = 0, n = -1;
    ok(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 13000, "cuDriverGetVersion before cuInit is 13000");
    is_int(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE, "cuDriverGetVersion(NULL)");
    is_int(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED, "cuDeviceGetCount before cuInit");
    CUdevice dev;
    is_int(cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED, "cuDeviceGet before cuInit");

    char err[1024];
    int rc1, rc2;
    bad_knob(err, sizeof err, &rc1, &rc2);
    is_int(rc1, CUDA_ERROR_INVALID_VALUE, "cuInit with a bad knob");
    is_int(rc2, CUDA_ERROR_INVALID_VALUE, "and again");
    bool one = strstr(err, "SIMCUDA_MEM") != NULL && strchr(err, '\n') == strrchr(err, '\n');
    err[strcspn(err, "\n")] = '\0';
    ok(one, "one message naming the knob: %s", err);

    visible_devices();

    is_int(cuInit(1), CUDA_ERROR_INVALID_VALUE, "cuInit(1)");
    ok_cu(cuInit(0));
    ok_cu(cuInit(0));
    ok(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 2, "SIMCUDA_DEVICES=2 gives 2 devices");
    is_int(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount(NULL)");
    is_int(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet(2)");
    is_int(cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet(-1)");
    is_int(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGet(NULL)");
    ok(cuDeviceGet(&dev, 1) == CUDA_SUCCESS && dev == 1, "cuDeviceGet(1)");

    char name[256];
    ok(cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS && strncmp(name, "simcuda", 7) == 0,
       "device name '%s'", name);
    is_int(cuDeviceGetName(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName(NULL)");
    is_int(cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName of length 0");
    is_int(cuDeviceGetName(name, sizeof name, 7), CUDA_ERROR_INVALID_DEVICE, "cuDeviceGetName of device 7");
    size_t total = 0;
    ok(cuDeviceTotalMem(&total, 1) == CUDA_SUCCESS && total == 2ull << 30, "cuDeviceTotalMem is SIMCUDA_MEM");
    is_int(cuDeviceTotalMem(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem(NULL)");

    CUuuid u0, u1, u0v1;
    ok_cu(cuDeviceGetUuid(&u0, 0));
    ok_cu(cuDeviceGetUuid(&u1, 1));
    ok_cu(cuDeviceGetUuid_v1(&u0v1, 0));
    ok(memcmp(u0.bytes, u1.bytes, 16) != 0, "devices have distinct UUIDs");
    ok(memcmp(u0.bytes, u0v1.bytes, 16) == 0, "cuDeviceGetUuid and _v2 agree");
    is_int(cuDeviceGetUuid(NULL, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetUuid(NULL)");

    static const struct {
        CUdevice_attribute a;
        int want;
        const char *what;
    } attrs[] = {
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9, "compute capability major" },
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0, "compute capability minor" },
        { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32, "warp size" },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024, "max threads per block" },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024, "max block x" },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64, "max block z" },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647, "max grid x" },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535, "max grid y" },
        { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1, "unified addressing" },
        { CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1, "concurrent managed access" },
        { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1, "memory pools" },
        { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1, "VMM" },
        { CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1, "stream priorities" },
        { CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1, "cooperative launch" },
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int got = -1;
        ok(cuDeviceGetAttribute(&got, attrs[i].a, 0) == CUDA_SUCCESS && got == attrs[i].want, "%s is %d (got %d)",
           attrs[i].what, attrs[i].want, got);
    }
    int maj = 0, min = -1;
    ok(compute_capability(&maj, &min, 0) == CUDA_SUCCESS && maj == 9 && min == 0, "cuDeviceComputeCapability");
    int sms = 0, clock = 0, bus = 0;
    ok(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS && sms > 0,
       "SM count %d", sms);
    ok(cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0) == CUDA_SUCCESS && clock > 0, "clock rate");
    ok(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 0) == CUDA_SUCCESS && bus > 0,
       "memory bus width");
    is_int(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE,
           "cuDeviceGetAttribute(NULL)");
    is_int(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE, "unknown attribute");
    is_int(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 2), CUDA_ERROR_INVALID_DEVICE, "attribute of device 2");

    /* PCI bus ids round-trip */
    for (int i = 0; i < 2; i++) {
        char id[32];
        CUdevice back = -1;
        ok(cuDeviceGetPCIBusId(id, sizeof id, i) == CUDA_SUCCESS && strlen(id) == 12 && id[4] == ':' &&
               id[7] == ':' && id[10] == '.',
           "device %d bus id '%s' is dddd:bb:dd.f", i, id);
        ok(cuDeviceGetByPCIBusId(&back, id) == CUDA_SUCCESS && back == i, "cuDeviceGetByPCIBusId('%s')", id);
        for (char *c = id; *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
        ok(cuDeviceGetByPCIBusId(&back, id) == CUDA_SUCCESS && back == i, "lower case '%s'", id);
    }
    is_int(cuDeviceGetByPCIBusId(&dev, "not a bus id"), CUDA_ERROR_INVALID_VALUE, "garbage bus id");
    is_int(cuDeviceGetByPCIBusId(&dev, "ffff:ff:1f.0"), CUDA_ERROR_INVALID_DEVICE, "unknown bus id");
    is_int(cuDeviceGetByPCIBusId(NULL, "0000:00:00.0"), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetByPCIBusId(NULL)");
    is_int(cuDeviceGetPCIBusId(NULL, 13, 0), CUDA_ERROR_INVALID_VALUE, "cuDeviceGetPCIBusId(NULL)");

    /* no syscall per API call: the fork check is a plain load */
    long calls0 = atomic_load(&getpid_calls);
    CUcontext none;
    for (int i = 0; i < 1000; i++) {
        cuDeviceGetCount(&n);
        cuCtxGetCurrent(&none);
        cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0);
    }
    is_int(atomic_load(&getpid_calls) - calls0, 0, "3000 API calls make no getpid() call");

    /* fork: the child must call cuInit, and then works normally (no thread exists here yet) */
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_after_fork());
    int st = -1;
    waitpid(pid, &st, 0);
    is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "a forked child re-initialises and works");
    ok(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 2, "the parent is unaffected");
    node_remove();
    return done_testing();
}
