/* timeline-t.c - SIMCUDA_TIMELINE: per-process files of busy compute-engine segments, checked against busy_ns. */
#include <cuda.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

/* ThreadSanitizer kills a child forked from a multi-threaded process once it starts a thread, and the worker
 * below has simcuda's threads when it forks the child that runs a kernel: under TSan that child is not forked
 * and its checks are reported as skipped. */
#if defined(__SANITIZE_THREAD__)
#define TL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TL_TSAN 1
#endif
#endif
#ifndef TL_TSAN
#define TL_TSAN 0
#endif

#define MS 1000000ull
#define SLICE_NS MS /* SIMCUDA_TIMESLICE_US=1000: every kernel here is cut at slice boundaries */
#define MAX_SEGS 4096

static char dir[64];

typedef struct seg {
    unsigned long long dev, ctx, start, end, pid; /* pid: the kernel's owner (not always the file's process) */
} seg_t;

typedef struct timeline {
    bool exists;
    int n, bad;          /* lines read, lines that do not parse */
    seg_t s[MAX_SEGS];
} timeline_t;

static void tl_path(char *buf, size_t size, const char *d, long pid)
{
    snprintf(buf, size, "%s/timeline-%ld.txt", d, pid);
}

static bool file_exists(const char *d, long pid)
{
    char p[128];
    struct stat st;
    tl_path(p, sizeof p, d, pid);
    return stat(p, &st) == 0;
}

/* One decimal field followed by sep; strict: digits only, no sign, no blanks, fits 64 bits. */
static const char *field(const char *p, char sep, unsigned long long *v)
{
    if (*p < '0' || *p > '9') return NULL;
    char *end;
    errno = 0;
    *v = strtoull(p, &end, 10);
    if (errno || *end != sep) return NULL;
    return end + 1;
}

static void tl_read(timeline_t *t, long pid)
{
    char p[128], line[256];
    tl_path(p, sizeof p, dir, pid);
    memset(t, 0, sizeof *t);
    FILE *f = fopen(p, "r");
    if (!f) return;
    t->exists = true;
    while (fgets(line, sizeof line, f)) {
        seg_t s;
        const char *q = field(line, ' ', &s.dev);
        if (q) q = field(q, ' ', &s.ctx);
        if (q) q = field(q, ' ', &s.start);
        if (q) q = field(q, ' ', &s.end);
        if (q) q = field(q, '\n', &s.pid);
        if (!q || *q || s.end <= s.start || t->n == MAX_SEGS) {
            t->bad++;
            continue;
        }
        t->s[t->n++] = s;
    }
    fclose(f);
}

/* ---- the worker: a process of its own, so that its exit writes its file; exit code = the failing step ---- */

static int spin_on(CUfunction spin, CUstream s, uint64_t ns)
{
    void *args[] = { &ns };
    return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL) != CUDA_SUCCESS;
}

/* The child of the worker: one 2 ms kernel on device 1, in a file of its own. */
static int forked_child(void)
{
    CUcontext c;
    CUmodule m;
    CUfunction spin;
    if (cuInit(0) || cuCtxCreate(&c, NULL, 0, 1) || cuModuleLoadData(&m, rota_kernels_ptx) ||
        cuModuleGetFunction(&spin, m, "spin_ns"))
        return 40;
    if (spin_on(spin, NULL, 2 * MS) || cuCtxSynchronize()) return 41;
    return 0; /* exit(), not _exit(): the destructor writes the buffer */
}

/* Started with a different SIMCUDA_TIMELINE while the worker is attached: a per-process knob, no node mismatch. */
static int idle_child(const char *other)
{
    setenv("SIMCUDA_TIMELINE", other, 1);
    CUcontext c;
    if (cuInit(0)) return 50;
    if (cuCtxCreate(&c, NULL, 0, 0) || cuCtxDestroy(c)) return 51;
    return 0;
}

static int wait_code(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static pid_t fork_child_pid, idle_child_pid;

/* Contexts A and B on device 0 (each with one stream, so they preempt each other at every slice boundary),
 * C on device 1 (alone: its kernel is cut at slice boundaries without being preempted). */
static int worker(int report_fd)
{
    CUcontext a, b, c;
    CUmodule m;
    CUfunction spin;
    CUstream sa, sb, sc;
    if (cuInit(0)) return 10;
    if (cuCtxCreate(&a, NULL, 0, 0) || cuModuleLoadData(&m, rota_kernels_ptx) ||
        cuModuleGetFunction(&spin, m, "spin_ns") || cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING))
        return 11;
    if (file_exists(dir, (long)getpid())) return 12; /* nothing ran yet: no file */
    if (spin_on(spin, NULL, 1 * MS) || cuCtxSynchronize()) return 13;
    if (!file_exists(dir, (long)getpid())) return 14; /* created at the first segment, not at exit */

    if (cuCtxCreate(&b, NULL, 0, 0) || cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING)) return 15;
    if (cuCtxCreate(&c, NULL, 0, 1) || cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING)) return 16;
    CUmodule mb, mc;
    CUfunction spin_b, spin_c;
    if (cuCtxSetCurrent(b) || cuModuleLoadData(&mb, rota_kernels_ptx) || cuModuleGetFunction(&spin_b, mb, "spin_ns"))
        return 17;
    if (cuCtxSetCurrent(c) || cuModuleLoadData(&mc, rota_kernels_ptx) || cuModuleGetFunction(&spin_c, mc, "spin_ns"))
        return 18;
    /* A gate holds A's and B's queues until both are full, so that they compete for device 0 from the start. */
    gate_t g;
    gate_init(&g);
    if (cuCtxSetCurrent(a) || cuLaunchHostFunc(sa, gate_fn, &g) || spin_on(spin, sa, 5 * MS) ||
        spin_on(spin, sa, 3 * MS))
        return 19;
    if (cuCtxSetCurrent(b) || cuLaunchHostFunc(sb, gate_fn, &g) || spin_on(spin_b, sb, 4 * MS) ||
        spin_on(spin_b, sb, 2 * MS))
        return 20;
    if (cuCtxSetCurrent(c) || spin_on(spin_c, sc, 7 * MS)) return 21;
    gate_open(&g);
    if (cuStreamSynchronize(sa) || cuStreamSynchronize(sb) || cuStreamSynchronize(sc)) return 22;

    /* Lines of the kernels above are still buffered here: the child must neither write them nor append to
     * this process's file. */
    pid_t pid = -1;
    int code;
    if (!TL_TSAN) {
        pid = fork();
        if (pid < 0) return 23;
        if (pid == 0) exit(forked_child());
        code = wait_code(pid);
        if (code) return code;
    }
    char other[96];
    snprintf(other, sizeof other, "%s/other", dir);
    if (mkdir(other, 0755)) return 24;
    pid_t idle = fork();
    if (idle < 0) return 25;
    if (idle == 0) exit(idle_child(other));
    code = wait_code(idle);
    if (code) return code;
    pid_t pids[2] = { pid, idle };
    if (write(report_fd, pids, sizeof pids) != (ssize_t)sizeof pids) return 26;
    return 0;
}

/* ---- checks on the files ---- */

/* Counter key (e.g. "busy_ns") of device dev, as simcuda-stat reports it; -1 if unknown. */
static long long stat_field(int dev, const char *key)
{
    const char *b = getenv("ROTA_BUILD");
    char cmd[512], line[1024];
    snprintf(cmd, sizeof cmd, "%s/bin/simcuda-stat --node %s", b, node);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    long long val = -1;
    char want[64];
    snprintf(want, sizeof want, " %s=", key);
    while (fgets(line, sizeof line, p)) {
        int d;
        const char *f = strstr(line, want);
        if (sscanf(line, "device %d:", &d) == 1 && d == dev && f) val = strtoll(f + strlen(want), NULL, 10);
    }
    pclose(p);
    return val;
}

static int by_start(const void *x, const void *y)
{
    const seg_t *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The lines of t1 and t2 whose kernels pid owns, by start: a process's segments are mostly in its own file, but
 * one whose thread woke late for a segment's end has it in the file of the process that retired it. */
static void owned_by(timeline_t *out, const timeline_t *t1, const timeline_t *t2, unsigned long long pid)
{
    memset(out, 0, sizeof *out);
    out->exists = true;
    const timeline_t *ts[2] = { t1, t2 };
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < ts[k]->n; i++)
            if (ts[k]->s[i].pid == pid && out->n < MAX_SEGS) out->s[out->n++] = ts[k]->s[i];
    qsort(out->s, (size_t)out->n, sizeof out->s[0], by_start);
}

/* The segments of both files on device dev never overlap (a duplicated line would). */
static void check_no_overlap(const timeline_t *t1, const timeline_t *t2, unsigned dev)
{
    static seg_t all[2 * MAX_SEGS];
    int n = 0, overlaps = 0;
    for (int i = 0; i < t1->n; i++)
        if (t1->s[i].dev == dev) all[n++] = t1->s[i];
    for (int i = 0; i < t2->n; i++)
        if (t2->s[i].dev == dev) all[n++] = t2->s[i];
    qsort(all, (size_t)n, sizeof all[0], by_start);
    for (int i = 1; i < n; i++) overlaps += all[i].start < all[i - 1].end;
    is_int(overlaps, 0, "device %u: %d segments (both processes), none overlaps another", dev, n);
}

/* Sum of the durations of t's segments on dev (ctx UINT64_MAX: all contexts); *count: how many. */
static unsigned long long total(const timeline_t *t, unsigned dev, unsigned long long ctx, int *count)
{
    unsigned long long sum = 0;
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (t->s[i].dev == dev && (ctx == UINT64_MAX || t->s[i].ctx == ctx)) {
            sum += t->s[i].end - t->s[i].start;
            n++;
        }
    if (count) *count = n;
    return sum;
}

/* The context of t on dev whose segments add up to want_ns, or UINT64_MAX. */
static unsigned long long ctx_of_total(const timeline_t *t, unsigned dev, unsigned long long want_ns)
{
    for (int i = 0; i < t->n; i++)
        if (t->s[i].dev == dev && total(t, dev, t->s[i].ctx, NULL) == want_ns) return t->s[i].ctx;
    return UINT64_MAX;
}

/* One context's kernels ran one after another: the running sum of its segments (t in start order: owned_by)
 * passes exactly through the end of every kernel, and no segment is longer than a slice. */
static void check_kernels(const timeline_t *t, const char *name, unsigned dev, const uint64_t *lens, int nk)
{
    uint64_t want = 0;
    for (int k = 0; k < nk; k++) want += lens[k];
    unsigned long long ctx = ctx_of_total(t, dev, want);
    ok(ctx != UINT64_MAX, "context %s: its segments on device %u add up to its kernels' %.0f ms", name, dev,
       (double)want / MS);
    unsigned long long sum = 0;
    int k = 0, long_seg = 0;
    uint64_t kend = lens[0];
    for (int i = 0; i < t->n; i++) {
        const seg_t *s = &t->s[i];
        if (s->dev != dev || s->ctx != ctx) continue;
        long_seg += s->end - s->start > SLICE_NS;
        sum += s->end - s->start;
        while (k < nk && sum >= kend) {
            if (sum != kend) break; /* a segment runs past a kernel's end: mismatch */
            if (++k < nk) kend += lens[k];
        }
    }
    is_int(long_seg, 0, "context %s: no segment is longer than the 1 ms timeslice", name);
    is_int(k, nk, "context %s: segments end exactly at each of its %d kernels' ends (durations as launched)", name,
           nk);
}

/* Lines of one device in t's file that start before the previous one of that device ended. */
static int unordered_lines(const timeline_t *t)
{
    int n = 0;
    for (unsigned d = 0; d < 2; d++) {
        unsigned long long prev_end = 0;
        for (int i = 0; i < t->n; i++) {
            if (t->s[i].dev != d) continue;
            n += t->s[i].start < prev_end;
            prev_end = t->s[i].end;
        }
    }
    return n;
}

/* fork(), with the child's stderr in errfile (truncated) and SIMCUDA_TIMELINE=value: 0 in the child. */
static pid_t fork_timeline(const char *value, const char *errfile)
{
    pid_t pid = fork();
    if (pid < 0) bail("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(errfile, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        if (fd < 0 || dup2(fd, 2) < 0) _exit(99);
        setenv("SIMCUDA_TIMELINE", value, 1);
    }
    return pid;
}

/* Every SIMCUDA_TIMELINE value is checked by cuInit: exit code 0 when cuInit gave want (stderr to errfile). */
static int knob_child(const char *value, CUresult want, const char *errfile)
{
    pid_t pid = fork_timeline(value, errfile);
    if (pid == 0) {
        _exit(cuInit(0) == want ? 0 : 1);
    }
    return wait_code(pid);
}

static bool file_has(const char *path, const char *want)
{
    char buf[2048] = { 0 };
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, want) != NULL;
}

static int count_lines(const char *path, const char *needle)
{
    char line[1024];
    int n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

int main(void)
{
    if (!getenv("ROTA_BUILD")) bail("ROTA_BUILD must name the build folder (run through make test)");
    alarm(120);
    node_setup("timeline", "1G");
    setenv("SIMCUDA_DEVICES", "2", 1);
    setenv("SIMCUDA_TIMESLICE_US", "1000", 1);
    snprintf(dir, sizeof dir, "/tmp/timeline-t-XXXXXX");
    if (!mkdtemp(dir)) bail("mkdtemp: %s", strerror(errno));
    char errfile[128];
    snprintf(errfile, sizeof errfile, "%s/stderr", dir);

    /* bad values: the usual one clear error */
    is_int(knob_child("rel/dir", CUDA_ERROR_INVALID_VALUE, errfile), 0, "SIMCUDA_TIMELINE=rel/dir: cuInit fails "
           "with CUDA_ERROR_INVALID_VALUE");
    ok(file_has(errfile, "simcuda: SIMCUDA_TIMELINE='rel/dir': not an absolute path (an absolute directory path, "
                         "at most 255 bytes)"), "  with one clear message");
    is_int(knob_child("", CUDA_ERROR_INVALID_VALUE, errfile), 0, "SIMCUDA_TIMELINE='' (set, empty) fails cuInit");
    char longp[300];
    memset(longp, 'x', sizeof longp);
    longp[0] = '/';
    longp[256] = '\0';
    is_int(knob_child(longp, CUDA_ERROR_INVALID_VALUE, errfile), 0, "a 256-byte SIMCUDA_TIMELINE fails cuInit");
    ok(file_has(errfile, "': too long (an absolute directory path, at most 255 bytes)"), "  as too long");
    longp[255] = '\0';
    is_int(knob_child(longp, CUDA_SUCCESS, errfile), 0, "a 255-byte absolute SIMCUDA_TIMELINE is accepted");

    /* a directory that does not exist: one warning, the kernels run all the same (on a node of its own, so
     * that the busy_ns checked below is the worker's) */
    char missing[96], mnode[80];
    snprintf(mnode, sizeof mnode, "%s-m", node);
    snprintf(missing, sizeof missing, "%s/missing", dir);
    pid_t pid = fork_timeline(missing, errfile);
    if (pid == 0) {
        setenv("SIMCUDA_NODE", mnode, 1);
        CUcontext c;
        CUmodule m;
        CUfunction spin;
        if (cuInit(0) || cuCtxCreate(&c, NULL, 0, 0) || cuModuleLoadData(&m, rota_kernels_ptx) ||
            cuModuleGetFunction(&spin, m, "spin_ns"))
            exit(1);
        for (int i = 0; i < 3; i++)
            if (spin_on(spin, NULL, 2 * SLICE_NS) || cuCtxSynchronize()) exit(2);
        exit(0);
    }
    is_int(wait_code(pid), 0, "an uncreatable timeline file: kernels still run, the process exits normally");
    char want[256];
    snprintf(want, sizeof want, "simcuda: SIMCUDA_TIMELINE: cannot create %s/timeline-%ld.txt: %s", missing,
             (long)pid, strerror(ENOENT));
    is_int(count_lines(errfile, "SIMCUDA_TIMELINE"), 1, "  one warning on stderr");
    ok(file_has(errfile, want), "  saying: %s", want);
    unlink(errfile);
    char mpath[96];
    snprintf(mpath, sizeof mpath, "/%s", mnode);
    shm_unlink(mpath);

    /* the worker, its forked child and an idle process */
    int rp[2];
    if (pipe(rp)) bail("pipe: %s", strerror(errno));
    setenv("SIMCUDA_TIMELINE", dir, 1);
    pid_t w = fork();
    if (w < 0) bail("fork: %s", strerror(errno));
    if (w == 0) {
        close(rp[0]);
        exit(worker(rp[1]));
    }
    close(rp[1]);
    is_int(wait_code(w), 0, "worker: kernels on 3 contexts, a forked child with a kernel, an idle process "
           "(exit = failing step)");
    pid_t kids[2] = { -1, -1 };
    if (read(rp[0], kids, sizeof kids) != (ssize_t)sizeof kids) bail("the worker did not report its children");
    close(rp[0]);
    fork_child_pid = kids[0];
    idle_child_pid = kids[1];

    static timeline_t tw, tc, ow, oc;
    tl_read(&tw, (long)w);
    tl_read(&tc, (long)fork_child_pid);
    owned_by(&ow, &tw, &tc, (unsigned long long)w);
    owned_by(&oc, &tw, &tc, (unsigned long long)fork_child_pid);
    ok(tw.exists && tw.n > 0, "the worker wrote timeline-%ld.txt (%d lines)", (long)w, tw.n);
    is_int(tw.bad, 0, "  every line is '<dev> <ctx> <start_ns> <end_ns> <pid>'");
    int strangers = 0;
    for (int i = 0; i < tw.n; i++) strangers += tw.s[i].pid != (unsigned long long)w &&
                                                tw.s[i].pid != (unsigned long long)fork_child_pid;
    for (int i = 0; i < tc.n; i++) strangers += tc.s[i].pid != (unsigned long long)w &&
                                                tc.s[i].pid != (unsigned long long)fork_child_pid;
    is_int(strangers, 0, "  every line names the worker or its child as the kernel's owner");
    if (fork_child_pid > 0) {
        ok(tc.exists, "the forked child wrote a file of its own, timeline-%ld.txt", (long)fork_child_pid);
        is_int(tc.bad, 0, "  every line parses");
        int cn;
        unsigned long long csum = total(&oc, 1, UINT64_MAX, &cn);
        ok(cn == oc.n && csum == 2 * MS, "  the child's own lines: its 2 ms kernel on device 1 (%d lines, %.3f ms)",
           oc.n, (double)csum / MS);
    } else {
        for (int i = 0; i < 3; i++)
            skip("ThreadSanitizer: no kernels in a child forked from a multi-threaded process (the fork checks)");
    }
    ok(!file_exists(dir, (long)idle_child_pid), "a process that ran no kernel wrote no file");
    char other[96];
    snprintf(other, sizeof other, "%s/other", dir);
    ok(!file_exists(other, (long)idle_child_pid), "  (with a SIMCUDA_TIMELINE of its own, accepted on the same node)");

    static const uint64_t ka[] = { 1 * MS, 5 * MS, 3 * MS }, kb[] = { 4 * MS, 2 * MS }, kc[] = { 7 * MS };
    check_kernels(&ow, "A", 0, ka, 3);
    check_kernels(&ow, "B", 0, kb, 2);
    check_kernels(&ow, "C", 1, kc, 1);
    unsigned long long ca = ctx_of_total(&ow, 0, 9 * MS), cb = ctx_of_total(&ow, 0, 6 * MS);
    ok(ca != cb && ca != UINT64_MAX && cb != UINT64_MAX, "A and B are different contexts (%llu, %llu)", ca, cb);

    /* device 0: A and B preempted each other, so each has more segments than kernels */
    int na, nb;
    total(&ow, 0, ca, &na);
    total(&ow, 0, cb, &nb);
    ok(na >= 9 && nb >= 6, "slice boundaries are logged: A has %d segments for 9 ms, B %d for 6 ms", na, nb);
    long long pre = stat_field(0, "preemptions");
    ok(pre > 0, "  A and B preempted each other (%lld preemptions on device 0), and those segments are in", pre);

    for (unsigned d = 0; d < 2; d++) {
        check_no_overlap(&tw, &tc, d);
        int n0, n1;
        unsigned long long sum = total(&tw, d, UINT64_MAX, &n0) + total(&tc, d, UINT64_MAX, &n1);
        long long busy = stat_field((int)d, "busy_ns");
        ok(busy >= 0 && (unsigned long long)llabs(busy - (long long)sum) <= 1000ull * (unsigned)(n0 + n1),
           "device %u: segments add up to simcuda-stat's busy_ns (%llu vs %lld ns, 1 us per segment)", d, sum, busy);
    }
    /* each file's lines of one device are in engine order (file order is start order): recorded under the
     * device's lock, whoever's kernel they are */
    is_int(unordered_lines(&tw), 0, "each device's lines in the worker's file follow the engine's order");
    is_int(unordered_lines(&tc), 0, "  and in its child's file");
    char p[128];
    tl_path(p, sizeof p, dir, (long)w);
    unlink(p);
    if (fork_child_pid > 0) {
        tl_path(p, sizeof p, dir, (long)fork_child_pid);
        unlink(p);
    }
    rmdir(other);
    rmdir(dir);
    node_remove();
    return done_testing();
}
