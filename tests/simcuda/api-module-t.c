/* api-module-t.c - PTX versions in simcuda's module loads (SIMCUDA_DRIVER_VERSION) and kernels_load's retry. */
#include <cuda.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"
#include "tools/kernels/load.h"

/* What a process with SIMCUDA_DRIVER_VERSION=drv (NULL: unset) sees; each case runs in a child of its own, since
 * the knob is read once per process. */
typedef struct seen {
    int ver_rc, ver_pre, init_rc, ver;  /* cuDriverGetVersion before cuInit, cuInit, after */
    int load_rc, lib_rc;                /* the embedded PTX through cuModuleLoadData, cuLibraryLoadData */
    int kload_rc, kload_calls, spin_rc; /* kernels_load, its calls of the loader, spin_ns found and run */
    int isa_at_rc, isa_above_rc;        /* PTX that says the driver's own ISA, and the next one */
    int bad_rc, bin_rc;                 /* a malformed directive; a binary image */
} seen_t;

static int calls;
static CUresult counting_load(CUmodule *m, const void *image)
{
    calls++;
    return cuModuleLoadData(m, image);
}

static seen_t child_run(int isa)
{
    seen_t s;
    memset(&s, 0x7f, sizeof s);
    s.ver_rc = cuDriverGetVersion(&s.ver_pre);
    s.init_rc = cuInit(0);
    if (s.init_rc) return s;
    cuDriverGetVersion(&s.ver);
    CUcontext ctx;
    if (cuCtxCreate(&ctx, NULL, 0, 0)) return s;
    CUmodule m;
    CUlibrary l;
    s.load_rc = cuModuleLoadData(&m, rota_kernels_ptx);
    s.lib_rc = cuLibraryLoadData(&l, rota_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0);
    s.kload_rc = kernels_load(&m, counting_load, cuDriverGetVersion);
    s.kload_calls = calls;
    CUfunction spin;
    uint64_t ns = 1000;
    void *args[] = {&ns};
    s.spin_rc = s.kload_rc;
    if (!s.spin_rc) s.spin_rc = cuModuleGetFunction(&spin, m, "spin_ns");
    if (!s.spin_rc) s.spin_rc = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
    if (!s.spin_rc) s.spin_rc = cuCtxSynchronize();
    char at[64], above[64];
    snprintf(at, sizeof at, "// test\n.version %d.%d\n.target sm_75\n", isa / 10, isa % 10);
    snprintf(above, sizeof above, "// test\n.version %d.%d\n.target sm_75\n", (isa + 1) / 10, (isa + 1) % 10);
    s.isa_at_rc = cuModuleLoadData(&m, at);
    s.isa_above_rc = cuModuleLoadData(&m, above);
    s.bad_rc = cuModuleLoadData(&m, ".version 9\n.target sm_75\n");
    static const unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0}; /* a header, no sections */
    s.bin_rc = cuModuleLoadData(&m, elf);
    return s;
}

/* quiet: the child's stderr goes to /dev/null (cuInit prints a bad knob's message). */
static seen_t run(const char *drv, int isa, bool quiet)
{
    seen_t s;
    memset(&s, 0xff, sizeof s);
    int p[2];
    if (pipe(p)) bail("pipe");
    pid_t pid = fork();
    if (pid < 0) bail("fork");
    if (pid == 0) {
        close(p[0]);
        if (quiet && !freopen("/dev/null", "w", stderr)) _exit(1);
        if (drv)
            setenv("SIMCUDA_DRIVER_VERSION", drv, 1);
        else
            unsetenv("SIMCUDA_DRIVER_VERSION");
        seen_t r = child_run(isa);
        _exit(write(p[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(p[1]);
    if (read(p[0], &s, sizeof s) != (ssize_t)sizeof s) bail("the child for SIMCUDA_DRIVER_VERSION=%s died", drv);
    close(p[0]);
    waitpid(pid, NULL, 0);
    return s;
}

/* A process on a driver of CUDA ver (SIMCUDA_DRIVER_VERSION=drv, NULL: unset), whose PTX ISA is isa: it reports
 * ver before and after cuInit, loads PTX up to isa and no newer, and kernels_load gets the kernels running, at
 * once on a CUDA 13 driver and at its second load, lowered, on an older one. */
static void check_driver(const char *drv, int ver, int isa)
{
    seen_t s = run(drv, isa, false);
    bool old = ver < 13000;
    const char *d = drv ? drv : "unset";
    ok(s.ver_rc == 0 && s.ver_pre == ver, "SIMCUDA_DRIVER_VERSION %s: cuDriverGetVersion before cuInit says %d (%d)", d,
       ver, s.ver_pre);
    ok(s.init_rc == 0 && s.ver == ver, "  cuInit, then %d (rc %d, %d)", ver, s.init_rc, s.ver);
    CUresult want = old ? CUDA_ERROR_UNSUPPORTED_PTX_VERSION : CUDA_SUCCESS;
    is_int(s.load_rc, want, "  CUDA 13's PTX (ISA 9.0) %s", old ? "is refused, as such a driver does" : "loads");
    is_int(s.lib_rc, want, "  as a library too");
    is_int(s.kload_rc, 0, "  kernels_load succeeds");
    is_int(s.kload_calls, old ? 2 : 1, "  at its %s load", old ? "second, lowered," : "first");
    is_int(s.spin_rc, 0, "  spin_ns runs from that module");
    is_int(s.isa_at_rc, 0, "  ISA %d.%d loads", isa / 10, isa % 10);
    is_int(s.isa_above_rc, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "  ISA %d.%d does not (UNSUPPORTED_PTX_VERSION)",
           (isa + 1) / 10, (isa + 1) % 10);
}

/* Fakes for kernels_load's own rules: a driver that refuses everything with rc, of CUDA version fake_ver. */
static int fake_calls, fake_ver;
static CUresult fake_rc;
static char fake_last[16];
static CUresult fake_load(CUmodule *m, const void *image)
{
    (void)m;
    fake_calls++;
    snprintf(fake_last, sizeof fake_last, "%.12s", strstr(image, ".version"));
    return fake_rc;
}
static CUresult fake_version(int *v)
{
    *v = fake_ver;
    return fake_ver ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
static void fake_case(CUresult rc, int ver, CUresult want, int want_calls, const char *last, const char *what)
{
    CUmodule m;
    fake_rc = rc;
    fake_ver = ver;
    fake_calls = 0;
    fake_last[0] = 0;
    is_int(kernels_load(&m, fake_load, fake_version), want, "kernels_load: %s", what);
    ok(fake_calls == want_calls && !strcmp(fake_last, last), "  %d load(s), the last of '%s' (got %d, '%s')",
       want_calls, last, fake_calls, fake_last);
}

int main(void)
{
    node_setup("module", "1G");

    check_driver(NULL, 13000, 90);
    check_driver("12040", 12040, 84);
    check_driver("11080", 11080, 78);

    seen_t s = run(NULL, 90, false);
    is_int(s.bad_rc, CUDA_ERROR_INVALID_PTX, "a malformed .version is INVALID_PTX");
    is_int(s.bin_rc, CUDA_ERROR_INVALID_IMAGE, "an ELF header alone is not an image: INVALID_IMAGE");

    s = run("9020", 0, true);
    is_int(s.ver_rc, CUDA_ERROR_INVALID_VALUE, "SIMCUDA_DRIVER_VERSION=9020 (out of range): cuDriverGetVersion fails");
    is_int(s.init_rc, CUDA_ERROR_INVALID_VALUE, "  and so does cuInit");

    fake_case(CUDA_SUCCESS, 12040, CUDA_SUCCESS, 1, ".version 9.0", "a driver that takes the PTX: one load");
    fake_case(CUDA_ERROR_INVALID_VALUE, 12040, CUDA_ERROR_INVALID_VALUE, 1, ".version 9.0",
              "any other error is returned as it is");
    fake_case(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 12080, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 2, ".version 8.7",
              "refused twice: the second error is returned");
    fake_case(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 0, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 1, ".version 9.0",
              "no driver version: no retry");
    fake_case(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 9020, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 1, ".version 9.0",
              "a driver older than any ISA known: no retry");
    fake_case(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 13000, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 1, ".version 9.0",
              "a driver of the PTX's own version: nothing older to try");

    node_remove();
    return done_testing();
}
