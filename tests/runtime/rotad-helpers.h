/* rotad-helpers.h - starting and stopping a private rotad for the runtime tests (header-only helpers). */
#ifndef ROTA_TESTS_ROTAD_HELPERS_H
#define ROTA_TESTS_ROTAD_HELPERS_H

#include "tests/tap/tap.h"

#include <dlfcn.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

static void th_cleanup(void)
{
    char p[192];
    snprintf(p, sizeof p, "%s.lock", th_sock);
    unlink(p);
    unlink(th_sock);
    rmdir(th_dir);
}

/* ---- client processes: this test program re-executed under librota.so, driven over two pipes ---------- */

typedef struct th_child {
    pid_t pid;
    FILE *to, *from;
    char err[160]; /* the child's stderr, kept in th_dir */
} th_child_t;

static int th_nchild; /* children spawned so far: th_dir/child<i>.err for i < th_nchild */

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
        char pre[1200];
        Dl_info di;
        void *rt = dlsym(RTLD_DEFAULT, "__asan_init");
        if (!rt) rt = dlsym(RTLD_DEFAULT, "__tsan_init");
        if (rt && dladdr(rt, &di) && di.dli_fname && strstr(di.dli_fname, ".so"))
            snprintf(pre, sizeof pre, "%s %s/lib/librota.so", di.dli_fname, getenv("ROTA_BUILD"));
        else
            snprintf(pre, sizeof pre, "%s/lib/librota.so", getenv("ROTA_BUILD"));
        setenv("LD_PRELOAD", pre, 1);
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

#endif
