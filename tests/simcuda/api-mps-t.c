/* api-mps-t.c - TAP tests for simcuda's MPS server (SIMCUDA_MPS=1) through the Driver API: a client's fatal fault
 * reaches every client of the server, which takes no new client until the faulted ones are gone; a client's
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; CU_DEVICE_ATTRIBUTE_MPS_ENABLED. Clients are this program re-run (--client). */
#include <cuda.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

#define MIB (1024ull * 1024)

/* ---- the clients: each prints one CUresult per step on stdout, then waits for EOF on stdin ---------------- */

static void say(CUresult rc)
{
    printf("%d\n", (int)rc);
    fflush(stdout);
}

static void hold(void)
{
    char buf[16];
    while (read(0, buf, sizeof buf) > 0) {
    }
}

/* "fault": a context whose kernel writes past its allocation. "open": only a context. "mem": allocations
 * under CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8M. */
static int client(const char *role)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0)) return 2;
    CUresult rc = cuCtxCreate(&ctx, NULL, 0, dev);
    say(rc);
    if (rc != CUDA_SUCCESS) return 0;
    if (!strcmp(role, "fault")) {
        CUmodule mod;
        CUfunction fill;
        CUdeviceptr a;
        if (cuModuleLoadData(&mod, rota_kernels_ptx) || cuModuleGetFunction(&fill, mod, "fill_u32") ||
            cuMemAlloc(&a, 4096))
            return 2;
        uint32_t v = 1;
        uint64_t huge = 1 << 20;
        void *oob[] = { &a, &v, &huge };
        if (cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, oob, NULL)) return 2;
        say(cuCtxSynchronize());
    } else if (!strcmp(role, "mem")) {
        CUdeviceptr a, b;
        say(cuMemAlloc(&a, 6 * MIB));
        say(cuMemAlloc(&b, 4 * MIB));
        say(cuMemFree(a));
        say(cuMemAlloc(&b, 4 * MIB));
    }
    hold();
    return 0;
}

/* ---- the test ------------------------------------------------------------------------------------------ */

typedef struct child {
    pid_t pid;
    FILE *out; /* its stdout */
    int in;    /* its stdin: closing it ends it */
} child_t;

static child_t spawn(const char *role)
{
    int o[2], i[2];
    if (pipe(o) || pipe(i)) bail("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) bail("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(i[0], 0);
        close(o[0]), close(o[1]), close(i[0]), close(i[1]);
        execl("/proc/self/exe", "api-mps-t", "--client", role, (char *)NULL);
        _exit(127);
    }
    close(o[1]);
    close(i[0]);
    child_t c = { pid, fdopen(o[0], "r"), i[1] };
    if (!c.out) bail("fdopen: %s", strerror(errno));
    return c;
}

/* The child's next CUresult, or -1 when it printed none. */
static int next_rc(child_t *c)
{
    int rc;
    return fscanf(c->out, "%d", &rc) == 1 ? rc : -1;
}

static int finish(child_t *c)
{
    close(c->in);
    fclose(c->out);
    int st = 0;
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--client")) return client(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    node_setup("mps", "64M");
    setenv("SIMCUDA_MPS", "1", 1);

    CUdevice dev;
    CUcontext ctx;
    need_cu(cuInit(0));
    need_cu(cuDeviceGet(&dev, 0));
    int v = 0;
    ok(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) == CUDA_SUCCESS && v == 1,
       "CU_DEVICE_ATTRIBUTE_MPS_ENABLED is 1 with SIMCUDA_MPS=1");
    need_cu(cuCtxCreate(&ctx, NULL, 0, dev));
    CUmodule mod;
    CUfunction spin;
    need_cu(cuModuleLoadData(&mod, rota_kernels_ptx));
    need_cu(cuModuleGetFunction(&spin, mod, "spin_ns"));
    uint64_t ns = 1000;
    void *sa[] = { &ns };
    ok_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, sa, NULL));
    ok_cu(cuCtxSynchronize());

    /* A client's memory limit: its own allocations, however much the device has free. */
    setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8M", 1);
    child_t m = spawn("mem");
    unsetenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    is_int(next_rc(&m), CUDA_SUCCESS, "a client limited to 8 MiB (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8M) starts");
    is_int(next_rc(&m), CUDA_SUCCESS, "  allocates 6 MiB");
    is_int(next_rc(&m), CUDA_ERROR_OUT_OF_MEMORY, "  not 4 MiB more (the device has 64 MiB)");
    is_int(next_rc(&m), CUDA_SUCCESS, "  frees the 6 MiB");
    is_int(next_rc(&m), CUDA_SUCCESS, "  then allocates 4 MiB");
    is_int(finish(&m), 0, "  and exits normally");

    /* A fatal fault in one client reaches every client of the server. */
    child_t f = spawn("fault");
    is_int(next_rc(&f), CUDA_SUCCESS, "a second client creates its context");
    is_int(next_rc(&f), CUDA_ERROR_ILLEGAL_ADDRESS, "  its kernel writes past its allocation: CUDA_ERROR_ILLEGAL_ADDRESS");
    is_int(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, sa, NULL), CUDA_ERROR_ILLEGAL_ADDRESS,
           "this client's next launch fails with the other client's fault");
    is_int(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS, "  and so does its synchronize (sticky)");

    /* The server recovers only once every faulted client is gone. */
    child_t o = spawn("open");
    is_int(next_rc(&o), CUDA_ERROR_MPS_SERVER_NOT_READY,
           "a new client while faulted clients live: CUDA_ERROR_MPS_SERVER_NOT_READY");
    is_int(finish(&o), 0, "  it exits normally");
    is_int(finish(&f), 0, "the faulting client exits");
    ok_cu(cuCtxDestroy(ctx));
    o = spawn("open");
    is_int(next_rc(&o), CUDA_SUCCESS, "with every faulted context gone, a new client's context is created");
    is_int(finish(&o), 0, "  it exits normally");

    node_remove();
    return done_testing();
}
