/* rotad-helpers.h - the runtime tests' shared helpers (header-only): a private rotad, client processes driven
 * over pipes, jobs on a simulated four-GPU node, and the client side's driver setup. */
#ifndef ROTA_TESTS_ROTAD_HELPERS_H
#define ROTA_TESTS_ROTAD_HELPERS_H

#include "runtime/lib/conn.h"
#include "runtime/lib/proto.h"
#include "tools/kernels/load.h"
#include "tests/tap/tap.h"

#include <cuda.h>
#include <dlfcn.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Built with ASan or TSan: timing goals are not meaningful (every atomic and call is instrumented). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TH_SANITIZED 1
#endif
#endif
#ifndef TH_SANITIZED
#define TH_SANITIZED 0
#endif

/* A unique temp dir per test program; rotad's socket in it. */
static char th_dir[64], th_sock[96];

static void th_setup(const char *name)
{
    snprintf(th_dir, sizeof th_dir, "/tmp/rota-%s.XXXXXX", name);
    if (!mkdtemp(th_dir)) bail("mkdtemp: %s", strerror(errno));
    snprintf(th_sock, sizeof th_sock, "%s/rotad.sock", th_dir);
}

static const char *th_rotad_path(void)
{
    static char p[512];
    const char *b = getenv("ROTA_BUILD");
    if (!b) bail("ROTA_BUILD is not set (run through make test, or export it)");
    snprintf(p, sizeof p, "%s/bin/rotad", b);
    return p;
}

/* Whether th_rotad_start lets rotad probe the node's GPUs. Off by default: rotad runs with the test's environment,
 * whose simcuda node is not its clients' (each sets its own), and GPUs of another node are no place for them. A
 * test that gives rotad its clients' node (SIMCUDA_NODE and knobs in its own environment) turns it on. */
static bool th_rotad_probe;

/* Starts rotad --foreground on th_sock (plus extra args, NULL-terminated), waiting for its readiness line. */
static pid_t th_rotad_start_args(const char *const *extra)
{
    int p[2];
    if (pipe(p) < 0) bail("pipe");
    pid_t pid = fork();
    if (pid < 0) bail("fork");
    if (pid == 0) {
        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test, whatever kills it */
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[1]);
        const char *argv[16] = {"rotad", "--foreground", "--socket", th_sock, "--notify-fd", fd};
        int n = 6;
        if (!th_rotad_probe) argv[n++] = "--no-probe";
        for (; extra && *extra && n < 15; extra++) argv[n++] = *extra;
        argv[n] = NULL;
        setenv("ROTA_LOG", getenv("ROTA_TEST_DEBUG") ? "debug" : "quiet", 1);
        execv(th_rotad_path(), (char **)argv);
        _exit(127);
    }
    close(p[1]);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    char c = 0;
    if (poll(&pf, 1, 10000) != 1 || read(p[0], &c, 1) != 1 || c != '\n') bail("rotad did not become ready");
    close(p[0]);
    return pid;
}

static pid_t th_rotad_start(void)
{
    return th_rotad_start_args(NULL);
}

/* SIGTERM and reap; returns the exit status (or 128+signal). */
static int th_rotad_stop(pid_t pid)
{
    int st = 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* Removes th_dir and everything the test left in it (its socket, lock file, configs, children's logs). */
static void th_cleanup(void)
{
    DIR *d = opendir(th_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[sizeof th_dir + 256];
        snprintf(p, sizeof p, "%s/%s", th_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(th_dir);
}

/* Removes a simulated node's shared memory object ("/NODE"), which outlives every process attached to it: a test
 * that names a node of its own removes it at the end, or /dev/shm keeps one per run. */
static inline void th_node_remove(const char *node)
{
    char p[96];
    snprintf(p, sizeof p, "/%s", node);
    shm_unlink(p);
}

/* This process's environment, which rotad and the children inherit: a simulated node of one GPU of mem named
 * "NAME-<pid>" (into node, n bytes), simcuda itself rather than a driver it would stand in front of. th_node1_leave
 * undoes it and removes the node. */
static inline void th_node1_enter(const char *name, const char *mem, char *node, size_t n)
{
    snprintf(node, n, "%s-%d", name, (int)getpid());
    setenv("SIMCUDA_NODE", node, 1);
    setenv("SIMCUDA_DEVICES", "1", 1);
    setenv("SIMCUDA_MEM", mem, 1);
    unsetenv("ROTA_REAL_LIBCUDA");
}

static inline void th_node1_leave(const char *node)
{
    unsetenv("SIMCUDA_NODE");
    unsetenv("SIMCUDA_DEVICES");
    unsetenv("SIMCUDA_MEM");
    th_node_remove(node);
}

/* CPU time pid has used (user + system, in clock ticks, /proc/PID/stat), or -1: what a test charges to rotad. */
static inline long th_proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (long)(ut + st);
}

/* Monotonic milliseconds, for deadlines and the durations clients report. */
static inline double th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Where librota.so should be in the build, when it is not there (the test skips or bails); else NULL. */
static inline const char *th_librota_missing(void)
{
    static char lib[600];
    const char *b = getenv("ROTA_BUILD");
    snprintf(lib, sizeof lib, "%s/lib/librota.so", b ? b : ".");
    return access(lib, R_OK) ? lib : NULL;
}

/* The sanitizer runtime this program runs with when it is a shared object, else NULL: in a child's LD_PRELOAD
 * it must come first, before librota.so. */
static inline const char *th_sanitizer_so(void)
{
    Dl_info di;
    void *rt = dlsym(RTLD_DEFAULT, "__asan_init");
    if (!rt) rt = dlsym(RTLD_DEFAULT, "__tsan_init");
    if (rt && dladdr(rt, &di) && di.dli_fname && strstr(di.dli_fname, ".so")) return di.dli_fname;
    return NULL;
}

/* In a child about to exec: LD_PRELOAD=librota.so, after the sanitizer runtime when there is one. */
static inline void th_preload_librota(void)
{
    char pre[1200];
    const char *rt = th_sanitizer_so();
    if (rt) snprintf(pre, sizeof pre, "%s %s/lib/librota.so", rt, getenv("ROTA_BUILD"));
    else snprintf(pre, sizeof pre, "%s/lib/librota.so", getenv("ROTA_BUILD"));
    setenv("LD_PRELOAD", pre, 1);
}

/* ---- the client side: the re-executed program's driver --------------------------------------------------- */

/* A driver entry point as the client sees it (librota's wrapper when it is preloaded); without it the client
 * says "nosym NAME" and exits 2 (it is a child of the test, not the test). */
static inline void *th_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        printf("nosym %s\n", name);
        exit(2);
    }
    return p;
}

/* Loads the driver RTLD_GLOBAL (dlsym(RTLD_DEFAULT) then finds librota's wrappers first, as a -lcuda program
 * would); false, having said "nolib WHY", without it. */
static inline bool th_cuda_load(void)
{
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) return true;
    printf("nolib %s\n", dlerror());
    return false;
}

/* cuInit, then device 0's primary context made current: the client's first calls. */
static inline CUresult th_cuda_ctx(CUdevice *dev)
{
    CUresult (*init)(unsigned) = th_sym("cuInit");
    CUresult (*get)(CUdevice *, int) = th_sym("cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = th_sym("cuDevicePrimaryCtxRetain");
    CUresult (*setcur)(CUcontext) = th_sym("cuCtxSetCurrent");
    CUcontext ctx;
    CUresult rc = init(0);
    if (!rc) rc = get(dev, 0);
    if (!rc) rc = retain(&ctx, *dev);
    if (!rc) rc = setcur(ctx);
    return rc;
}

/* The tests' spin_ns kernel (tools/kernels/load.h) loaded in the current context, and a non-blocking stream. */
static inline CUresult th_cuda_spin(CUfunction *spin, CUstream *st)
{
    kernels_load_fn load = th_sym("cuModuleLoadData");
    kernels_version_fn version = th_sym("cuDriverGetVersion");
    CUresult (*getfn)(CUfunction *, CUmodule, const char *) = th_sym("cuModuleGetFunction");
    CUresult (*mkstream)(CUstream *, unsigned) = th_sym("cuStreamCreate");
    CUmodule mod;
    CUresult rc = kernels_load(&mod, load, version);
    if (!rc) rc = getfn(spin, mod, "spin_ns");
    if (!rc) rc = mkstream(st, CU_STREAM_NON_BLOCKING);
    return rc;
}

/* ---- client processes: this test program re-executed under librota.so, driven over two pipes ---------- */

typedef struct th_child {
    pid_t pid;
    FILE *to, *from;
    char err[160]; /* the child's stderr, kept in th_dir */
} th_child_t;

static int th_nchild; /* children (and jobs) spawned so far: th_dir/child<i>.err for i < th_nchild */

/* Re-executes /proc/self/exe as argv0 with role_var=1 set, LD_PRELOAD=librota.so (under a sanitizer its
 * runtime first, as it must be), rotad's socket, its own simcuda node (1G) and ROTA_LOG=log; env: NULL-
 * terminated "NAME=value" extras applied last. ROTA_TRACE is cleared so a child traces only when asked. */
static inline void th_spawn(th_child_t *c, const char *role_var, const char *argv0, const char *node,
                            const char *log, const char *const *env)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) bail("pipe"); /* other children must not hold them */
    snprintf(c->err, sizeof c->err, "%s/child%d.err", th_dir, th_nchild++);
    c->pid = fork();
    if (c->pid < 0) bail("fork");
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        int e = open(c->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(e, 2);
        th_preload_librota();
        setenv(role_var, "1", 1);
        setenv("ROTA_SOCKET", th_sock, 1);
        setenv("SIMCUDA_NODE", node, 1);
        setenv("SIMCUDA_MEM", "1G", 1);
        setenv("ROTA_LOG", log, 1);
        unsetenv("ROTA_TRACE");
        for (; env && *env; env++) putenv((char *)*env);
        execl("/proc/self/exe", argv0, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->to = fdopen(in[1], "w");
    c->from = fdopen(out[0], "r");
    setvbuf(c->to, NULL, _IOLBF, 0);
}

/* Sends a command (NULL: none) and reads one answer line within ms; "" on timeout or EOF. */
static inline const char *th_say(th_child_t *c, const char *cmd, int ms)
{
    static char line[256];
    if (cmd) fprintf(c->to, "%s\n", cmd);
    struct pollfd p = {.fd = fileno(c->from), .events = POLLIN};
    line[0] = 0;
    if (poll(&p, 1, ms) != 1 || !fgets(line, sizeof line, c->from)) return "";
    line[strcspn(line, "\n")] = 0;
    return line;
}

/* Bails with why unless the child's first line, within 10 s, is "init 0": its driver setup succeeded. */
static inline void th_ready(th_child_t *c, const char *why)
{
    if (strcmp(th_say(c, NULL, 10000), "init 0")) bail("%s", why);
}

/* Closes the child's stdin and reaps it; returns its exit status (or 128+signal). */
static inline int th_finish(th_child_t *c)
{
    fclose(c->to);
    int st = 0;
    waitpid(c->pid, &st, 0);
    fclose(c->from);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline void th_kill9(th_child_t *c)
{
    kill(c->pid, SIGKILL);
    th_finish(c);
}

/* How many lines of the child's stderr contain what. */
static inline int th_err_count(const th_child_t *c, const char *what)
{
    FILE *f = fopen(c->err, "r");
    char l[512];
    int n = 0;
    while (f && fgets(l, sizeof l, f)) n += strstr(l, what) != NULL;
    if (f) fclose(f);
    return n;
}

/* Removes the children's stderr files (th_dir/child<i>.err), before th_cleanup removes th_dir. */
static inline void th_cleanup_children(void)
{
    char p[192];
    for (int i = 0; i < th_nchild; i++) {
        snprintf(p, sizeof p, "%s/child%d.err", th_dir, i);
        unlink(p);
    }
}

/* ---- jobs: a program on a node of four simulated GPUs that reports once what it sees, then holds -------- */

/* A job's report line is "RC COUNT UUID VISIBLE": cuInit..cuMemAlloc's result, the device count, device 0's
 * UUID and CUDA_VISIBLE_DEVICES ("-" when unset). */
typedef struct th_job {
    pid_t pid;
    int in, out; /* its stdin (closing it ends the job) and stdout */
    int rc, count;
    char uuid[PROTO_UUID_STR + 8], vis[256];
    char err[160]; /* its stderr, kept in th_dir; "" when inherited */
} th_job_t;

/* Forks a job with stdin and stdout on pipes, stderr in th_dir/child<i>.err when keep_err (else inherited);
 * returns true in the child, which never outlives the test and goes on to set its environment and exec. */
static inline bool th_job_fork(th_job_t *j, bool keep_err)
{
    int pin[2], pout[2];
    if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC)) bail("pipe"); /* other jobs must not hold them */
    memset(j, 0, sizeof *j);
    if (keep_err) snprintf(j->err, sizeof j->err, "%s/child%d.err", th_dir, th_nchild++);
    j->pid = fork();
    if (j->pid < 0) bail("fork");
    if (j->pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        int e = keep_err ? open(j->err, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
        if (e >= 0) dup2(e, 2);
        close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        return true;
    }
    close(pin[0]);
    close(pout[1]);
    j->in = pin[1];
    j->out = pout[0];
    return false;
}

/* th_setup(name), then this process's environment, which rotad and the jobs inherit: a simulated node of four
 * 4G GPUs named "NAME-<pid>" (in node, n bytes), rotad's socket th_sock, no CUDA_VISIBLE_DEVICES. */
static inline void th_node4_setup(const char *name, char *node, size_t n)
{
    th_setup(name);
    snprintf(node, n, "%s-%d", name, (int)getpid());
    setenv("SIMCUDA_NODE", node, 1);
    setenv("SIMCUDA_DEVICES", "4", 1);
    setenv("SIMCUDA_MEM", "4G", 1);
    setenv("ROTA_SOCKET", th_sock, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

/* In the job: cuInit (init: the entry point the job got) .. a 64 MiB cuMemAlloc on device 0, through whatever is
 * preloaded; the device count in *n and device 0's UUID in uuid (left as it is unless every call succeeds). */
static inline CUresult th_job_calls(CUresult (*init)(unsigned), int *n, char uuid[PROTO_UUID_STR])
{
    CUresult (*count)(int *) = th_sym("cuDeviceGetCount");
    CUresult (*get)(CUdevice *, int) = th_sym("cuDeviceGet");
    CUresult (*getuuid)(CUuuid *, CUdevice) = th_sym("cuDeviceGetUuid_v2");
    CUresult (*retain)(CUcontext *, CUdevice) = th_sym("cuDevicePrimaryCtxRetain");
    CUresult (*setcur)(CUcontext) = th_sym("cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = th_sym("cuMemAlloc_v2");
    CUdevice d;
    CUuuid u;
    CUcontext ctx;
    CUdeviceptr p;
    CUresult rc = init(0);
    if (!rc) rc = count(n);
    if (!rc) rc = get(&d, 0);
    if (!rc) rc = getuuid(&u, d);
    if (!rc) rc = retain(&ctx, d);
    if (!rc) rc = setcur(ctx);
    if (!rc) rc = alloc(&p, 64u << 20);
    if (!rc) proto_uuid_str((const uint8_t *)u.bytes, uuid);
    return rc;
}

/* In the job: its report line (vis for VISIBLE), then it holds what it took until its stdin closes; 0. */
static inline int th_job_say(CUresult rc, int n, const char *uuid, const char *vis)
{
    printf("%d %d %s %s\n", (int)rc, n, uuid, vis);
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

/* Reads the job's report line (rc count uuid visible); false on EOF or timeout. */
static inline bool th_job_report(th_job_t *j)
{
    char buf[512];
    size_t n = 0;
    struct pollfd p = {.fd = j->out, .events = POLLIN};
    while (n < sizeof buf - 1) {
        if (poll(&p, 1, 15000) != 1) return false;
        ssize_t r = read(j->out, buf + n, 1);
        if (r != 1) return false;
        if (buf[n] == '\n') break;
        n++;
    }
    buf[n] = 0;
    return sscanf(buf, "%d %d %48s %255s", &j->rc, &j->count, j->uuid, j->vis) == 4;
}

/* Closes stdin, reaps; returns the exit status (or 128+signal). */
static inline int th_job_finish(th_job_t *j)
{
    if (j->in >= 0) close(j->in);
    j->in = -1;
    int st = 0;
    waitpid(j->pid, &st, 0);
    close(j->out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The simulated GPUs' UUIDs in ordinal order, read through the driver here (all four visible). */
static inline int th_sim_uuids(char u[4][PROTO_UUID_STR])
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*uuid)(CUuuid *, CUdevice) = (CUresult(*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid_v2");
    if (!init || !get || !uuid || init(0)) return -1;
    for (int i = 0; i < 4; i++) {
        CUdevice d;
        CUuuid x;
        if (get(&d, i) || uuid(&x, d)) return -1;
        proto_uuid_str((const uint8_t *)x.bytes, u[i]);
    }
    return 0;
}

/* Which of the four UUIDs s is, or -1. */
static inline int th_uuid_index(char u[4][PROTO_UUID_STR], const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(u[i], s)) return i;
    return -1;
}

/* Output of a command line (popen), or "" */
static inline char *th_run_out(const char *cmd)
{
    static char buf[65536];
    buf[0] = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    pclose(f);
    return buf;
}

/* rotad's ledger: bytes reserved on its first GPU (0 with none), read by an observer of th_sock's rotad;
 * UINT64_MAX when rotad does not answer. */
static inline uint64_t th_ledger_reserved(void)
{
    conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_OBSERVER};
    conn_t *c;
    char err[256];
    if (conn_open(&o, &c, err, sizeof err)) return UINT64_MAX;
    const rota_region_t *r = conn_region(c);
    uint64_t v = atomic_load(&r->ndevices) ? atomic_load(&r->devices[0].reserved) : 0;
    conn_close(c);
    return v;
}

/* A copy of the client table of th_sock's rotad as this process may see it (root: every client), through an
 * observer connection of its own (LIST); NULL when rotad does not answer. Free with th_table_free. */
static inline const rota_table_t *th_table(void)
{
    conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_OBSERVER};
    conn_t *c;
    char err[256];
    if (conn_open(&o, &c, err, sizeof err)) return NULL;
    const rota_table_t *t = NULL;
    if (conn_table(c, &t)) t = NULL;
    conn_close(c);
    return t;
}

static inline void th_table_free(const rota_table_t *t)
{
    conn_table_free(t);
}

/* Slot i of rotad's client table now (a fresh copy); state ROTA_SLOT_FREE when rotad does not answer. */
static inline rota_slot_t th_slot(unsigned i)
{
    rota_slot_t v;
    memset(&v, 0, sizeof v);
    const rota_table_t *t = th_table();
    if (t && i < ROTA_MAX_CLIENTS) memcpy(&v, &t->slots[i], sizeof v); /* a sealed copy: nobody writes it */
    th_table_free(t);
    return v;
}

/* The slot of the live client pid in rotad's client table, or -1. */
static inline int th_slot_index(pid_t pid)
{
    const rota_table_t *t = th_table();
    int idx = -1;
    for (unsigned i = 0; t && i < ROTA_MAX_CLIENTS && idx < 0; i++)
        if (atomic_load(&t->slots[i].state) == ROTA_SLOT_LIVE && atomic_load(&t->slots[i].pid) == pid) idx = (int)i;
    th_table_free(t);
    return idx;
}

/* Group g's use on GPU d in rotad's client table now; UINT64_MAX when rotad does not answer. */
static inline uint64_t th_group_used(unsigned g, unsigned d)
{
    const rota_table_t *t = th_table();
    uint64_t v = t && g < ROTA_MAX_GROUPS && d < ROTA_MAX_DEVICES ? atomic_load(&t->groups[g].used[d]) : UINT64_MAX;
    th_table_free(t);
    return v;
}

/* simcuda-stat's counter NAME of device dev on node nd (its text format): simcuda's own view, or -1. */
static inline long long th_node_stat(const char *nd, int dev, const char *name)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s/bin/simcuda-stat --node %s", getenv("ROTA_BUILD"), nd);
    char *out = th_run_out(cmd);
    char key[64];
    snprintf(key, sizeof key, "device %d:", dev);
    char *line = strstr(out, key);
    if (!line) return -1;
    char *eol = strchr(line, '\n');
    if (eol) *eol = 0;
    snprintf(key, sizeof key, " %s=", name);
    char *v = strstr(line, key);
    return v ? strtoll(v + strlen(key), NULL, 10) : -1;
}

#endif
