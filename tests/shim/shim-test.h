/* shim-test.h - shared setup for librota's tests: preloading, child processes, the test counters, a device. */
#ifndef ROTA_TESTS_SHIM_TEST_H
#define ROTA_TESTS_SHIM_TEST_H

/*
 * Header-only: the Makefile builds each tests/shim/NAME-t.c as a program (linked with -lcuda, libtap, the
 * kernels) and nothing else. The test programs are compiled like the driver (__CUDA_API_VERSION_INTERNAL),
 * so every exact variant (cuMemAlloc_v2, cuLaunchKernel_ptsz) can be named and called directly.
 *
 * Preloading: a test re-executes itself (/proc/self/exe) with LD_PRELOAD=$ROTA_BUILD/lib/librota.so and
 * ROTA_TEST_COUNTERS set; SHIM_TEST_MARK in the environment says "already done". Under a sanitizer whose
 * runtime must come first in the initial library list (ASan, TSan), the runtime this very test is running
 * with is put in front of librota in LD_PRELOAD - which works because the test binary is built with the same
 * sanitizer as librota (make SANITIZER=... builds both into one folder).
 *
 * Counters: cuGetProcAddress_v2("rota_test_counters") returns rota's counter getter only when
 * ROTA_TEST_COUNTERS is set (see shim/counters.c); shim_hits(name) reads one.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/kernels/load.h"
#include "tests/tap/tap.h"

extern char **environ;

/* Built with ASan or TSan (their runtimes must come first, and refuse RTLD_DEEPBIND). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHIM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SHIM_TEST_SANITIZED 1
#endif
#endif
#ifndef SHIM_TEST_SANITIZED
#define SHIM_TEST_SANITIZED 0
#endif

#define SHIM_TEST_MARK "ROTA_SHIM_TEST_PRELOADED"
#define SHIM_TEST_ROLE "ROTA_SHIM_TEST_ROLE"

/* ---- paths ------------------------------------------------------------------------------------------- */
static inline const char *shim_build(void)
{
    const char *b = getenv("ROTA_BUILD");
    if (b == NULL || b[0] == '\0') bail("ROTA_BUILD is not set (run through make test, or export it)");
    return b;
}

static inline const char *shim_librota(void)
{
    static char path[4096];
    if (!path[0]) snprintf(path, sizeof(path), "%s/lib/librota.so", shim_build());
    if (access(path, R_OK) != 0) bail("%s: %s", path, strerror(errno));
    return path;
}

static int shim_find_runtime_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *n = info->dlpi_name, *slash = n ? strrchr(n, '/') : NULL;
    const char *base = slash ? slash + 1 : n;
    if (base && (strncmp(base, "libasan.so", 10) == 0 || strncmp(base, "libtsan.so", 10) == 0)) {
        snprintf((char *)data, 4096, "%s", n);
        return 1;
    }
    return 0;
}

/* The LD_PRELOAD value that loads librota into a child of this test (sanitizer runtime first). */
static inline const char *shim_preload(void)
{
    static char val[8192];
    char rt[4096] = "";
    dl_iterate_phdr(shim_find_runtime_cb, rt);
    snprintf(val, sizeof(val), "%s%s%s", rt, rt[0] ? ":" : "", shim_librota());
    return val;
}

/* ---- environment for children ---------------------------------------------------------------------- */
typedef struct shim_env {
    char *v[512];
    int n;
    char store[16384];
    size_t used;
} shim_env_t;

/* Copies this process's environment minus every variable named in drop (NULL-terminated), then adds
 * NAME=value pairs with shim_env_set. */
static inline void shim_env_init(shim_env_t *e, const char *const *drop)
{
    e->n = 0;
    e->used = 0;
    for (char **p = environ; *p && e->n < 480; p++) {
        bool skip_it = false;
        for (const char *const *d = drop; d && *d; d++) {
            size_t l = strlen(*d);
            if (strncmp(*p, *d, l) == 0 && (*p)[l] == '=') skip_it = true;
        }
        if (!skip_it) e->v[e->n++] = *p;
    }
    e->v[e->n] = NULL;
}

static inline void shim_env_set(shim_env_t *e, const char *name, const char *value)
{
    for (int i = 0; i < e->n; i++) {
        size_t l = strlen(name);
        if (strncmp(e->v[i], name, l) == 0 && e->v[i][l] == '=') {
            memmove(&e->v[i], &e->v[i + 1], (size_t)(e->n - i) * sizeof(char *));
            e->n--;
            i--;
        }
    }
    size_t need = strlen(name) + strlen(value) + 2;
    if (e->used + need > sizeof(e->store) || e->n >= 510) bail("shim_env_set: environment too large");
    char *s = e->store + e->used;
    snprintf(s, need, "%s=%s", name, value);
    e->used += need;
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

/* ---- re-executing under librota ------------------------------------------------------------------- */
static char shim_counters_file[256];

/* The counters file of this run (created by the first, unpreloaded image; inherited after exec). */
static inline const char *shim_counters_path(void)
{
    const char *p = getenv("ROTA_TEST_COUNTERS");
    if (p && p[0]) return p;
    if (!shim_counters_file[0]) {
        snprintf(shim_counters_file, sizeof(shim_counters_file), "/tmp/rota-shim-counters-XXXXXX");
        int fd = mkstemp(shim_counters_file);
        if (fd < 0) bail("mkstemp: %s", strerror(errno));
        close(fd);
    }
    return shim_counters_file;
}

/* Replaces this process by itself under librota (ROTA_TEST_COUNTERS set, a node of its own), unless that
 * already happened. Returns only in the preloaded image. */
static inline void shim_preload_self(char **argv, const char *tag)
{
    if (getenv(SHIM_TEST_MARK)) return;
    static const char *const drop[] = {"LD_PRELOAD", "ROTA_DISABLE", "ROTA_LOG", "ROTA_REAL_LIBCUDA", NULL};
    static shim_env_t e;
    char node[96];
    shim_env_init(&e, drop);
    shim_env_set(&e, "LD_PRELOAD", shim_preload());
    shim_env_set(&e, "ROTA_TEST_COUNTERS", shim_counters_path());
    shim_env_set(&e, SHIM_TEST_MARK, "1");
    shim_env_set(&e, "ROTA_LOG", "error"); /* no "rotad is not running" warning in every test */
    snprintf(node, sizeof(node), "rota-shim-%s-%ld", tag, (long)getpid());
    shim_env_set(&e, "SIMCUDA_NODE", node);
    execve("/proc/self/exe", argv, e.v);
    bail("execve /proc/self/exe: %s", strerror(errno));
}

/* Removes this run's simulated node and counters file (simcuda keeps the node in /dev/shm). */
static inline void shim_cleanup(void)
{
    const char *node = getenv("SIMCUDA_NODE");
    if (node && strncmp(node, "rota-shim-", 10) == 0) {
        char p[128];
        snprintf(p, sizeof(p), "/dev/shm/%s", node);
        unlink(p);
    }
    const char *c = getenv("ROTA_TEST_COUNTERS");
    if (c && strncmp(c, "/tmp/rota-shim-counters-", 24) == 0) unlink(c);
}

/* ---- children ------------------------------------------------------------------------------------- */
typedef struct shim_child {
    int status;      /* waitpid status; -1 if it could not run */
    char out[16384]; /* its stdout and stderr, merged */
    size_t len;
} shim_child_t;

/* Runs this program again as `role` with environment env (NULL: this process's), collecting its output;
 * kills it after timeout_s. Returns false if it could not be started. */
static inline bool shim_run(const char *role, char *const *env, unsigned timeout_s, shim_child_t *c)
{
    int fds[2];
    posix_spawn_file_actions_t fa;
    pid_t pid;
    char *argv[] = {(char *)"shim-child", (char *)role, NULL};
    c->status = -1;
    c->len = 0;
    c->out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env ? env : environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return false;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, 200);
        if (r > 0) {
            ssize_t n = read(fds[0], c->out + c->len, sizeof(c->out) - 1 - c->len);
            if (n <= 0) break;
            c->len += (size_t)n;
            c->out[c->len] = '\0';
            if (c->len >= sizeof(c->out) - 1) break;
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > (time_t)timeout_s) {
            kill(pid, SIGKILL);
            diag("child %s killed after %us", role, timeout_s);
            break;
        }
    }
    close(fds[0]);
    while (c->len > 0 && (c->out[c->len - 1] == '\n' || c->out[c->len - 1] == ' ')) c->out[--c->len] = '\0';
    while (waitpid(pid, &c->status, 0) < 0 && errno == EINTR) {}
    return true;
}

/* 0..255 for a normal exit, 1000 + signal for a kill. */
static inline int shim_exit_code(int st)
{
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* The CUDA version the tests' cuGetProcAddress lookups ask for: 13.0, this toolkit's, or the driver's own where
 * that is older, since a driver refuses a lookup above its version (CUDA_ERROR_INVALID_VALUE). Every variant the
 * tests expect is older than CUDA 12.0, so the answers are the same from 12.0 on. */
static inline int shim_ask_version(void)
{
    int v = 0;
    if (cuDriverGetVersion(&v) != CUDA_SUCCESS || v <= 0) return 13000;
    return v < 13000 ? v : 13000;
}

/* ---- counters ------------------------------------------------------------------------------------- */
typedef uint64_t (*shim_counter_fn)(const char *);

/* rota's counter getter, or NULL when this process does not run under librota with counters. */
static inline shim_counter_fn shim_counters(void)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (cuGetProcAddress_v2("rota_test_counters", &p, shim_ask_version(), 0, &st) != CUDA_SUCCESS) return NULL;
    return (shim_counter_fn)p;
}

static inline uint64_t shim_hits(const char *name)
{
    static shim_counter_fn fn;
    if (fn == NULL && (fn = shim_counters()) == NULL) bail("not running under librota with ROTA_TEST_COUNTERS");
    uint64_t v = fn(name);
    if (v == UINT64_MAX) bail("rota has no counter named %s", name);
    return v;
}

/* ---- a device --------------------------------------------------------------------------------------- */
typedef struct shim_dev {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, add, spin;
    bool simcuda;
} shim_dev_t;

static inline void shim_dev_init(shim_dev_t *d)
{
    char name[256];
    need_cu(cuInit(0));
    need_cu(cuDeviceGet(&d->dev, 0));
    need_cu(cuDevicePrimaryCtxRetain(&d->ctx, d->dev));
    need_cu(cuCtxSetCurrent(d->ctx));
    need_cu(kernels_load(&d->mod, cuModuleLoadData, cuDriverGetVersion));
    need_cu(cuModuleGetFunction(&d->fill, d->mod, "fill_u32"));
    need_cu(cuModuleGetFunction(&d->add, d->mod, "add_f32"));
    need_cu(cuModuleGetFunction(&d->spin, d->mod, "spin_ns"));
    need_cu(cuDeviceGetName(name, sizeof(name), d->dev));
    d->simcuda = strncmp(name, "simcuda", 7) == 0;
}

static inline void shim_dev_fini(shim_dev_t *d)
{
    cuModuleUnload(d->mod);
    cuDevicePrimaryCtxRelease_v2(d->dev);
}

/* fill_u32(dst, v, n) on stream s through the launch entry point given (cuLaunchKernel or _ptsz). */
static inline CUresult shim_fill(const shim_dev_t *d, CUstream s, CUdeviceptr dst, uint32_t v, uint64_t n)
{
    void *args[] = {&dst, &v, &n};
    return cuLaunchKernel(d->fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL);
}

/* Reads n words of dst back and checks every one is v. */
static inline bool shim_check_words(CUdeviceptr dst, uint32_t v, size_t n)
{
    uint32_t *buf = malloc(n * sizeof(uint32_t));
    bool good = buf != NULL && cuMemcpyDtoH_v2(buf, dst, n * sizeof(uint32_t)) == CUDA_SUCCESS;
    for (size_t i = 0; good && i < n; i++) good = buf[i] == v;
    free(buf);
    return good;
}

#endif
