/* client.h - shared setup for the end-to-end Driver API test programs: context, kernels, children, simcuda-stat. */
#ifndef ROTA_TESTS_CLIENT_H
#define ROTA_TESTS_CLIENT_H

/*
 * Header-only on purpose: the Makefile builds each tests/<dir>/NAME-t.c as a program and links only the files of
 * tests/tap as a library. Every program here uses the Driver API alone and runs unchanged on simcuda and on a
 * real GPU.
 *
 * Children: a real CUDA driver does not survive fork() once the parent called cuInit, so a child is this very
 * program re-executed (posix_spawn of /proc/self/exe) in a named role: client_main() runs the role's function
 * instead of the tests. The child reads commands on fd CLIENT_CMD_FD and writes reports on fd CLIENT_REP_FD,
 * both pipes to the parent. Spawning instead of forking also keeps TSan and ASan happy.
 *
 * Isolation: client_node() gives every run its own simulated node (SIMCUDA_NODE) so timing and memory checks
 * see only this program's processes; the real driver ignores the variable.
 */
#include <cuda.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/kernels/load.h"
#include "tests/tap/tap.h"

extern char **environ;

#define CLIENT_CMD_FD 3
#define CLIENT_REP_FD 4
#define CLIENT_MIB (1024ull * 1024ull)

typedef struct client {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction spin, fill, add;
    bool simcuda;       /* the device name starts with "simcuda" */
    char name[256];
} client_t;

/* ---- environment -------------------------------------------------------------------------------------- */

/* The node name chosen by client_node(), for removal at the end. */
static char client_node_name[96];

/* Puts this run on a node of its own (before cuInit; children inherit it). mem: SIMCUDA_MEM or NULL. */
static inline void client_node(const char *tag, const char *mem)
{
    snprintf(client_node_name, sizeof(client_node_name), "rota-clients-%s-%ld", tag, (long)getpid());
    if (setenv("SIMCUDA_NODE", client_node_name, 1) != 0) bail("setenv SIMCUDA_NODE: %s", strerror(errno));
    if (mem && setenv("SIMCUDA_MEM", mem, 1) != 0) bail("setenv SIMCUDA_MEM: %s", strerror(errno));
}

/* Removes the node's shared memory object (simcuda only: "/dev/shm/<SIMCUDA_NODE>"); harmless elsewhere. */
static inline void client_node_remove(const client_t *c)
{
    if (c->simcuda && client_node_name[0]) {
        char path[128];
        snprintf(path, sizeof(path), "/%s", client_node_name);
        shm_unlink(path);
    }
}

/* Fails the whole program if it runs longer than s seconds, so a hang is a failure, not a stuck prove. */
static inline void client_deadline(unsigned s)
{
    signal(SIGALRM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN); /* a dead child's pipe gives EPIPE, not a dead parent */
    alarm(s);
}

/* ---- context and kernels ------------------------------------------------------------------------------ */

/* cuInit, device 0, its primary context made current, the kernels module loaded. Bails on any failure. */
static inline void client_init(client_t *c)
{
    memset(c, 0, sizeof(*c));
    need_cu(cuInit(0));
    need_cu(cuDeviceGet(&c->dev, 0));
    need_cu(cuDeviceGetName(c->name, (int)sizeof(c->name), c->dev));
    c->simcuda = strncmp(c->name, "simcuda", 7) == 0;
    need_cu(cuDevicePrimaryCtxRetain(&c->ctx, c->dev));
    need_cu(cuCtxSetCurrent(c->ctx));
    need_cu(kernels_load(&c->mod, cuModuleLoadData, cuDriverGetVersion));
    need_cu(cuModuleGetFunction(&c->spin, c->mod, "spin_ns"));
    need_cu(cuModuleGetFunction(&c->fill, c->mod, "fill_u32"));
    need_cu(cuModuleGetFunction(&c->add, c->mod, "add_f32"));
}

static inline void client_fini(client_t *c)
{
    if (c->mod) cuModuleUnload(c->mod);
    if (c->ctx) cuDevicePrimaryCtxRelease(c->dev);
    c->mod = NULL;
    c->ctx = NULL;
}

/* spin_ns(ns): one thread, occupies the device for ns nanoseconds. */
static inline CUresult client_spin(const client_t *c, CUstream s, uint64_t ns)
{
    void *args[] = {&ns};
    return cuLaunchKernel(c->spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static inline unsigned client_grid(uint64_t n)
{
    uint64_t g = (n + 255) / 256;
    if (g == 0) g = 1;
    return g > 1024 ? 1024 : (unsigned)g;
}

/* fill_u32(dst, v, n) */
static inline CUresult client_fill(const client_t *c, CUstream s, CUdeviceptr dst, uint32_t v, uint64_t n)
{
    void *args[] = {&dst, &v, &n};
    return cuLaunchKernel(c->fill, client_grid(n), 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* add_f32(a, b, out, n): out = a + b */
static inline CUresult client_add(const client_t *c, CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out,
                                  uint64_t n)
{
    void *args[] = {&a, &b, &out, &n};
    return cuLaunchKernel(c->add, client_grid(n), 1, 1, 256, 1, 1, 0, s, args, NULL);
}

static inline uint32_t client_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline double client_ms_since(uint64_t t0_ns)
{
    return (double)(tap_now_ns() - t0_ns) / 1e6;
}

static inline void client_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- children ------------------------------------------------------------------------------------------ */

/* A child role: fn runs in the re-executed program with the command and report fds; its return is the exit
 * status. */
typedef int (*client_role_fn)(const char *arg);
typedef struct client_role {
    const char *name;
    client_role_fn fn;
} client_role_t;

typedef struct client_child {
    pid_t pid;
    int cmd;   /* parent writes commands here */
    int rep;   /* parent reads reports here */
} client_child_t;

/* Call first in main: when the program was started as a child (argv[1] == "--client-role"), runs that role
 * and returns true with *status set; otherwise returns false and main runs the tests. */
static inline bool client_main(int argc, char **argv, const client_role_t *roles, int *status)
{
    if (argc < 3 || strcmp(argv[1], "--client-role") != 0) return false;
    for (const client_role_t *r = roles; r && r->name; r++) {
        if (strcmp(r->name, argv[2]) == 0) {
            *status = r->fn(argc > 3 ? argv[3] : "");
            return true;
        }
    }
    fprintf(stderr, "%s: fatal: unknown child role '%s'\n", argv[0], argv[2]);
    *status = 111;
    return true;
}

/* Starts this program again as a child in role (with one string argument). Bails on failure. */
static inline client_child_t client_spawn(const char *role, const char *arg)
{
    int cmd[2], rep[2];
    if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) bail("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, cmd[0], CLIENT_CMD_FD);
    posix_spawn_file_actions_adddup2(&fa, rep[1], CLIENT_REP_FD);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) bail("readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    char *argv[] = {self, (char *)"--client-role", (char *)role, (char *)arg, NULL};
    client_child_t ch = {.pid = -1, .cmd = cmd[1], .rep = rep[0]};
    int rc = posix_spawn(&ch.pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(cmd[0]);
    close(rep[1]);
    if (rc != 0) bail("posix_spawn %s: %s", self, strerror(rc));
    return ch;
}

/* Reads one report line (without the newline) from a child; false on EOF/error or after timeout_ms. */
static inline bool client_read_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t len = 0;
    uint64_t deadline = tap_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (len + 1 < size) {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(fd, &rd);
        uint64_t now = tap_now_ns();
        if (now >= deadline) break;
        struct timeval tv = {(time_t)((deadline - now) / 1000000000ull),
                             (suseconds_t)((deadline - now) % 1000000000ull / 1000)};
        int r = select(fd + 1, &rd, NULL, NULL, &tv);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        char ch;
        ssize_t got = read(fd, &ch, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (ch == '\n') {
            buf[len] = '\0';
            return true;
        }
        buf[len++] = ch;
    }
    buf[len] = '\0';
    return false;
}

static inline bool client_send(int fd, const char *line)
{
    size_t len = strlen(line);
    return write(fd, line, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
}

/* In a child: report one line to the parent. */
static inline void client_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void client_report(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    client_send(CLIENT_REP_FD, buf);
}

/* In a child: wait for the parent's next command (false when the parent went away). */
static inline bool client_command(char *buf, size_t size, int timeout_ms)
{
    return client_read_line(CLIENT_CMD_FD, buf, size, timeout_ms);
}

/* Waits up to timeout_ms for the child to end; returns its wait status, or -1 (then kills and reaps it). */
static inline int client_wait(client_child_t *ch, int timeout_ms)
{
    int st = -1;
    uint64_t deadline = tap_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        pid_t r = waitpid(ch->pid, &st, WNOHANG);
        if (r == ch->pid) break;
        if (r < 0 && errno != EINTR) {
            st = -1;
            break;
        }
        if (tap_now_ns() >= deadline) {
            kill(ch->pid, SIGKILL);
            waitpid(ch->pid, NULL, 0);
            st = -1;
            break;
        }
        client_sleep_ns(1000000);
    }
    if (ch->cmd >= 0) close(ch->cmd);
    if (ch->rep >= 0) close(ch->rep);
    ch->cmd = ch->rep = -1;
    ch->pid = -1;
    return st;
}

/* The exit code of a wait status, or -1 when the child did not exit normally. */
static inline int client_exit_code(int st)
{
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- simcuda-stat ---------------------------------------------------------------------------------------- */

typedef struct client_stat {
    uint64_t busy_ns, wall_ns, switch_ns, kernels, switches, preemptions, reclaims, mem_used, mem_total, contexts;
    bool have_mem, have_contexts;
} client_stat_t;

/* Runs $ROTA_BUILD/bin/simcuda-stat with one option and collects its stdout; returns its exit code or -1. */
static inline int client_stat_run(const char *opt, char *out, size_t size)
{
    const char *build = getenv("ROTA_BUILD");
    if (!build || !*build) bail("ROTA_BUILD is not set (run through make test, or export it)");
    char prog[4096];
    snprintf(prog, sizeof(prog), "%s/bin/simcuda-stat", build);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) bail("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[] = {prog, (char *)opt, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        bail("posix_spawn %s: %s", prog, strerror(rc));
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(p[0], out + len, size - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (len + 1 >= size) break;
    }
    out[len] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return client_exit_code(st);
}

/* Finds the text of the dev-th object of the "devices" array (or of the top-level array) in json. */
static inline const char *client_json_device(const char *json, int dev, size_t *len)
{
    const char *p = strstr(json, "\"devices\"");
    p = p ? strchr(p, '[') : strchr(json, '[');
    if (!p) return NULL;
    p++;
    int idx = 0;
    while (*p) {
        while (*p && *p != '{' && *p != ']') p++;
        if (*p != '{') return NULL;
        const char *start = p;
        int depth = 0;
        bool str = false;
        for (; *p; p++) {
            if (str) {
                if (*p == '\\' && p[1]) p++;
                else if (*p == '"') str = false;
            } else if (*p == '"') {
                str = true;
            } else if (*p == '{') {
                depth++;
            } else if (*p == '}' && --depth == 0) {
                break;
            }
        }
        if (!*p) return NULL;
        p++;
        if (idx++ == dev) {
            *len = (size_t)(p - start);
            return start;
        }
    }
    return NULL;
}

/* The unsigned number after "key": inside obj[0..len). */
static inline bool client_json_u64(const char *obj, size_t len, const char *key, uint64_t *out)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    size_t pl = strlen(pat);
    for (const char *p = obj; p + pl <= obj + len; p++) {
        if (memcmp(p, pat, pl) != 0) continue;
        const char *q = p + pl;
        while (q < obj + len && (*q == ' ' || *q == ':' || *q == '\t' || *q == '\n')) q++;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(q, &end, 10);
        if (end == q || errno) return false;
        *out = v;
        return true;
    }
    return false;
}

/* Reads device dev's counters from simcuda-stat --json; bails when the output lacks busy_ns or wall_ns. */
static inline void client_stat(int dev, client_stat_t *st)
{
    static char json[1 << 16];
    memset(st, 0, sizeof(*st));
    int rc = client_stat_run("--json", json, sizeof(json));
    if (rc != 0) bail("simcuda-stat --json exited with %d", rc);
    size_t len = 0;
    const char *obj = client_json_device(json, dev, &len);
    if (!obj) bail("simcuda-stat --json: no device %d in: %.200s", dev, json);
    if (!client_json_u64(obj, len, "busy_ns", &st->busy_ns) || !client_json_u64(obj, len, "wall_ns", &st->wall_ns))
        bail("simcuda-stat --json: no busy_ns/wall_ns for device %d in: %.300s", dev, obj);
    client_json_u64(obj, len, "kernels", &st->kernels);
    if (!client_json_u64(obj, len, "switches", &st->switches))
        client_json_u64(obj, len, "context_switches", &st->switches);
    client_json_u64(obj, len, "preemptions", &st->preemptions);
    client_json_u64(obj, len, "switch_ns", &st->switch_ns);
    client_json_u64(obj, len, "reclaims", &st->reclaims);
    st->have_mem = client_json_u64(obj, len, "mem_used", &st->mem_used);
    if (!client_json_u64(obj, len, "mem_total", &st->mem_total))
        client_json_u64(obj, len, "mem_capacity", &st->mem_total);
    st->have_contexts = client_json_u64(obj, len, "contexts", &st->contexts) ||
                        client_json_u64(obj, len, "live_contexts", &st->contexts);
}

/* simcuda-stat --reset: zero the counters of this node's devices. Bails on failure. */
static inline void client_stat_reset(void)
{
    static char out[1 << 14];
    int rc = client_stat_run("--reset", out, sizeof(out));
    if (rc != 0) bail("simcuda-stat --reset exited with %d", rc);
}

#endif
