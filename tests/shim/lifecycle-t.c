/* lifecycle-t.c - librota across fork, fork+exec, posix_spawn, new threads, and the ROTA_DISABLE kill switch. */
#include "tests/shim/shim-test.h"

#include <pthread.h>

/*
 * The counter rota.process_init counts client_process_init calls: 1 in a process that used the driver, and
 * one more in a fork child at its first driver call (the child is a new coordinator client). A fork child
 * that uses CUDA after its parent did only works on simcuda (a real driver refuses), so that case is
 * skipped on a GPU. fork+exec and posix_spawn start a fresh librota (LD_PRELOAD is inherited).
 */
static shim_dev_t d;

/* Role "work": a small job through rota, then a report line. Exit 0 when the data came back right. */
static int role_work(void)
{
    shim_dev_t w;
    CUdeviceptr p;
    shim_dev_init(&w);
    if (cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS) return 2;
    uint32_t v = 77;
    uint64_t n = 1024;
    void *args[] = {&p, &v, &n};
    if (cuLaunchKernel(w.fill, 4, 1, 1, 128, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS) return 3;
    if (cuCtxSynchronize() != CUDA_SUCCESS || !shim_check_words(p, 77, 1024)) return 4;
    cuMemFree_v2(p);
    shim_counter_fn c = shim_counters();
    printf("pid=%ld counters=%d process_init=%llu launch=%llu gate=%llu\n", (long)getpid(), c != NULL,
           c ? (unsigned long long)c("rota.process_init") : 0ull, c ? (unsigned long long)c("cuLaunchKernel") : 0ull,
           c ? (unsigned long long)c("rota.launch_gate") : 0ull);
    shim_dev_fini(&w);
    return 0;
}

/* Role "disabled": under ROTA_DISABLE=1 rota is invisible: no counters symbol, dlsym of the driver gives the
 * driver's own functions, cuGetProcAddress answers exactly what the driver's own does, and the job works. */
static int role_disabled(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW), *pfn = NULL, *want = NULL;
    Dl_info di;
    if (shim_counters() != NULL) return 10;
    if (h == NULL) return 11;
    void *real_gpa = dlsym(h, "cuGetProcAddress_v2"), *real_launch = dlsym(h, "cuLaunchKernel");
    if (!dladdr(real_launch, &di) || di.dli_fname == NULL || strstr(di.dli_fname, "librota")) return 12;
    if (!dladdr(real_gpa, &di) || di.dli_fname == NULL || strstr(di.dli_fname, "librota")) return 13;
    int ask = shim_ask_version();
    if (cuGetProcAddress_v2("cuLaunchKernel", &pfn, ask, 0, NULL) != CUDA_SUCCESS) return 14;
    __typeof__(&cuGetProcAddress_v2) gpa = (__typeof__(&cuGetProcAddress_v2))real_gpa;
    if (gpa("cuLaunchKernel", &want, ask, 0, NULL) != CUDA_SUCCESS) return 15;
    if (pfn != want) return 16;
    int rc = role_work();
    return rc ? 20 + rc : 0;
}

/* Role "race": the process's first driver calls come from 8 threads at once, through different entry points.
 * Exit 0 when every call succeeded and rota initialised exactly once. */
#define RACE_THREADS 8
static pthread_barrier_t race_barrier;
static void *race_thread(void *arg)
{
    long i = (long)arg;
    CUresult rc;
    pthread_barrier_wait(&race_barrier);
    if (i % 3 == 0) {
        rc = cuInit(0);
    } else if (i % 3 == 1) {
        void *p = NULL;
        /* 12000, not the driver's version: asking for it would be another first call; any 12+ driver takes it */
        rc = cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL);
        if (rc == CUDA_SUCCESS) rc = ((CUresult(*)(unsigned))p)(0);
    } else {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        CUresult (*init)(unsigned) = h ? (CUresult(*)(unsigned))dlsym(h, "cuInit") : NULL;
        rc = init ? init(0) : CUDA_ERROR_NOT_FOUND;
    }
    int n = 0;
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetCount(&n);
    return (void *)(long)(rc == CUDA_SUCCESS && n > 0 ? 0 : 1);
}

static int role_race(void)
{
    pthread_t t[RACE_THREADS];
    int bad = 0;
    pthread_barrier_init(&race_barrier, NULL, RACE_THREADS);
    for (long i = 0; i < RACE_THREADS; i++)
        if (pthread_create(&t[i], NULL, race_thread, (void *)i) != 0) return 50;
    for (int i = 0; i < RACE_THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    if (bad) return 51;
    if (shim_hits("rota.process_init") != 1) return 52;
    return shim_hits("cuInit") == RACE_THREADS && shim_hits("cuDeviceGetCount") == RACE_THREADS ? 0 : 53;
}

static void test_first_calls_race(void)
{
    static shim_child_t c;
    if (!shim_run("race", NULL, 20, &c)) bail("posix_spawn failed");
    is_int(shim_exit_code(c.status), 0,
           "8 threads making the first driver calls at once (cuInit, cuGetProcAddress, dlsym): one init, all counted");
}

static void test_fork_child_uses_cuda(void)
{
    if (!d.simcuda) {
        skip("a fork child using CUDA after its parent did needs simcuda (a real driver refuses it)");
        return;
    }
    uint64_t parent_init = shim_hits("rota.process_init");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) bail("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Child: its first driver call must re-run client_process_init, then work normally. */
        if (freopen("/dev/null", "w", stdout) == NULL) _exit(42); /* keep the report out of the TAP stream */
        int rc = shim_hits("rota.process_init") != parent_init ? 40 : 0;
        if (!rc) rc = role_work();
        if (!rc && shim_hits("rota.process_init") != parent_init + 1) rc = 41;
        _exit(rc);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    is_int(shim_exit_code(st), 0, "fork without exec: the child uses CUDA through rota and re-registers once");
    /* The parent is unaffected. */
    CUdeviceptr p;
    ok_cu(cuMemAlloc_v2(&p, 4096));
    cuMemFree_v2(p);
    is_int((long long)shim_hits("rota.process_init"), (long long)parent_init, "the parent registered only once");
}

static void test_fork_exec(void)
{
    char out[512] = "";
    int fds[2];
    if (pipe(fds) != 0) bail("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) bail("fork: %s", strerror(errno));
    if (pid == 0) {
        char *argv[] = {(char *)"shim-child", (char *)"work", NULL};
        dup2(fds[1], 1);
        close(fds[0]);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    ssize_t n, len = 0;
    while ((n = read(fds[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0) len += n;
    while (len > 0 && out[len - 1] == '\n') len--;
    out[len] = '\0';
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    is_int(shim_exit_code(st), 0, "fork + exec: the new image works under rota");
    ok(strstr(out, " counters=1 process_init=1 launch=1 gate=1") != NULL,
       "... with a fresh librota: registered once, its launch counted and gated once (%s)", out);
}

/* Also the at-exit dump of ROTA_TEST_COUNTERS: "<pid> <name> <count>" lines, then "<pid> end". */
static void test_posix_spawn(void)
{
    static shim_child_t c;
    static shim_env_t e;
    char path[] = "/tmp/rota-shim-dump-XXXXXX", line[256], want[64];
    int fd = mkstemp(path);
    long pid = 0;
    bool launch_line = false, end_line = false;
    if (fd < 0) bail("mkstemp: %s", strerror(errno));
    close(fd);
    shim_env_init(&e, NULL);
    shim_env_set(&e, "ROTA_TEST_COUNTERS", path);
    if (!shim_run("work", e.v, 20, &c)) bail("posix_spawn failed");
    is_int(shim_exit_code(c.status), 0, "posix_spawn: the child works under rota");
    ok(strstr(c.out, " counters=1 process_init=1 launch=1 gate=1") != NULL, "... with a fresh librota (%s)", c.out);
    const char *p = strstr(c.out, "pid=");
    if (p) pid = strtol(p + 4, NULL, 10);
    FILE *f = fopen(path, "r");
    snprintf(want, sizeof(want), "%ld cuLaunchKernel 1\n", pid);
    while (f && fgets(line, sizeof(line), f)) {
        char end[64];
        snprintf(end, sizeof(end), "%ld end\n", pid);
        launch_line |= strcmp(line, want) == 0;
        end_line |= strcmp(line, end) == 0;
    }
    if (f) fclose(f);
    ok(pid > 0 && launch_line && end_line,
       "at exit the child appended its counters to ROTA_TEST_COUNTERS (\"%ld cuLaunchKernel 1\", \"%ld end\")", pid, pid);
    unlink(path);
}

typedef struct thread_res {
    CUresult no_ctx, with_ctx, launch_no_ctx;
    uint64_t reserve_no_ctx, reserve_with_ctx, wrapper_calls;
} thread_res_t;

static void *thread_fn(void *arg)
{
    thread_res_t *r = arg;
    CUdeviceptr p = 0;
    uint64_t w0 = shim_hits("cuMemAlloc_v2"), r0 = shim_hits("rota.mem_reserve");
    r->no_ctx = cuMemAlloc_v2(&p, 4096);
    r->reserve_no_ctx = shim_hits("rota.mem_reserve") - r0;
    r->launch_no_ctx = cuLaunchKernel(d.fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    cuCtxSetCurrent(d.ctx);
    r0 = shim_hits("rota.mem_reserve");
    r->with_ctx = cuMemAlloc_v2(&p, 4096);
    r->reserve_with_ctx = shim_hits("rota.mem_reserve") - r0;
    r->wrapper_calls = shim_hits("cuMemAlloc_v2") - w0;
    if (r->with_ctx == CUDA_SUCCESS) cuMemFree_v2(p);
    return NULL;
}

static void test_thread_without_context(void)
{
    pthread_t t;
    thread_res_t r;
    memset(&r, 0, sizeof(r));
    if (pthread_create(&t, NULL, thread_fn, &r) != 0) bail("pthread_create");
    pthread_join(t, NULL);
    is_int(r.no_ctx, CUDA_ERROR_INVALID_CONTEXT,
           "a new thread's first call (no current context) gets the driver's error");
    is_int((long long)r.reserve_no_ctx, 0, "... and rota reserved nothing for it");
    is_int(r.launch_no_ctx, CUDA_ERROR_INVALID_CONTEXT, "a launch without a context gets the driver's error too");
    is_int(r.with_ctx, CUDA_SUCCESS, "after cuCtxSetCurrent the thread allocates");
    ok(r.reserve_with_ctx == 1 && r.wrapper_calls == 2, "... through rota (1 reservation, 2 wrapper calls)");
}

static void test_disable(void)
{
    static shim_env_t e;
    static shim_child_t c;
    shim_env_init(&e, NULL);
    shim_env_set(&e, "ROTA_DISABLE", "1");
    if (!shim_run("disabled", e.v, 20, &c)) bail("posix_spawn failed");
    is_int(shim_exit_code(c.status), 0,
           "ROTA_DISABLE=1: rota is invisible (driver pointers, no counters) and CUDA works");
    ok(strstr(c.out, "rota:") == NULL, "ROTA_DISABLE=1: rota says nothing (%s)", c.out);
}

int main(int argc, char **argv)
{
    if (argc > 1 && getenv(SHIM_TEST_MARK)) {
        int rc = !strcmp(argv[1], "work")       ? role_work()
                 : !strcmp(argv[1], "disabled") ? role_disabled()
                 : !strcmp(argv[1], "race")     ? role_race()
                                                : 99;
        fflush(stdout);
        return rc;
    }
    shim_preload_self(argv, "lifecycle");
    alarm(90);
    shim_dev_init(&d);
    is_int((long long)shim_hits("rota.process_init"), 1, "the first driver call registered this process once");
    test_thread_without_context();
    test_first_calls_race();
    test_fork_child_uses_cuda();
    test_fork_exec();
    test_posix_spawn();
    test_disable();
    shim_dev_fini(&d);
    shim_cleanup();
    return done_testing();
}
