/* node-t.c - TAP tests for simcuda's device model (proc.c, config.c, timeline.c, engine.c, node.c, kernel.c), across
 * real processes. */
#include "tools/simcuda/node-internal.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull
#define US 1000ull

static char base[48];
static char made[16][64];
static int nmade;

/* A node name of this run; remembered so the end of the test removes it. */
static const char *node_name(const char *suffix)
{
    if (nmade == 16) bail("too many test nodes");
    char *n = made[nmade++];
    snprintf(n, 64, "%s%s%s", base, *suffix ? "-" : "", suffix);
    return n;
}

static void unlink_nodes(void)
{
    for (int i = 0; i < nmade; i++) {
        char p[80];
        snprintf(p, sizeof p, "/%.63s", made[i]);
        shm_unlink(p);
    }
}

static void sleep_ms(double ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

static int wait_code(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

/* Read exactly n bytes within timeout_ms; false on EOF, error or timeout. */
static bool read_full(int fd, void *buf, size_t n, int timeout_ms)
{
    char *p = buf;
    while (n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

static void write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(90);
        p += w;
        n -= (size_t)w;
    }
}

static void need_pipe(int p[2])
{
    if (pipe(p) != 0) bail("pipe: %s", strerror(errno));
}

static pid_t need_fork(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) bail("fork: %s", strerror(errno));
    return pid;
}

/* In a child: fail with a diagnostic. */
#define CHILD_CHECK(cond, code)                                                             \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "# child %d: %s:%d: check failed: %s\n", (int)getpid(), __FILE__, \
                    __LINE__, #cond);                                                       \
            _exit(code);                                                                    \
        }                                                                                   \
    } while (0)

static void set_knobs(const char *node, const char *mem, const char *slice)
{
    setenv("SIMCUDA_NODE", node, 1);
    if (mem) setenv("SIMCUDA_MEM", mem, 1); else unsetenv("SIMCUDA_MEM");
    if (slice) setenv("SIMCUDA_TIMESLICE_US", slice, 1); else unsetenv("SIMCUDA_TIMESLICE_US");
}

static void clear_knobs(void)
{
    static const char *const all[] = {"SIMCUDA_NODE", "SIMCUDA_DEVICES", "SIMCUDA_MEM", "SIMCUDA_TIMESLICE_US",
                                      "SIMCUDA_SWITCH_US", "SIMCUDA_LAUNCH_NS", "SIMCUDA_MEM_GBPS",
                                      "SIMCUDA_COPY_GBPS", "SIMCUDA_COPY_LATENCY_NS", "SIMCUDA_DRIVER_VERSION",
                                      "SIMCUDA_MPS", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) unsetenv(all[i]);
}

/* ---- knobs and validation ------------------------------------------------------------------------------- */

static void test_bad_knobs(void)
{
    static const struct { const char *knob, *value, *msg; } bad[] = {
        {"SIMCUDA_MEM", "10XB", "simcuda: SIMCUDA_MEM='10XB': not a size (use e.g. 80G)"},
        {"SIMCUDA_MEM", "0", "simcuda: SIMCUDA_MEM='0': out of range (1 byte to 1024T)"},
        {"SIMCUDA_MEM", "-1", "simcuda: SIMCUDA_MEM='-1': not a size (use e.g. 80G)"},
        {"SIMCUDA_MEM", "18446744073709551616", "simcuda: SIMCUDA_MEM='18446744073709551616': out of range (1 byte to 1024T)"},
        {"SIMCUDA_MEM", "1.5G", "simcuda: SIMCUDA_MEM='1.5G': not a size (use e.g. 80G)"},
        {"SIMCUDA_DEVICES", "0", "simcuda: SIMCUDA_DEVICES='0': out of range (an integer from 1 to 16)"},
        {"SIMCUDA_DEVICES", "17", "simcuda: SIMCUDA_DEVICES='17': out of range (an integer from 1 to 16)"},
        {"SIMCUDA_DEVICES", "abc", "simcuda: SIMCUDA_DEVICES='abc': not an integer (an integer from 1 to 16)"},
        {"SIMCUDA_DEVICES", "", "simcuda: SIMCUDA_DEVICES='': not an integer (an integer from 1 to 16)"},
        {"SIMCUDA_TIMESLICE_US", "0", "simcuda: SIMCUDA_TIMESLICE_US='0': out of range (microseconds, 1 to 10000000)"},
        {"SIMCUDA_TIMESLICE_US", "-1", "simcuda: SIMCUDA_TIMESLICE_US='-1': not an integer (microseconds, 1 to 10000000)"},
        {"SIMCUDA_SWITCH_US", "abc", "simcuda: SIMCUDA_SWITCH_US='abc': not an integer (microseconds, 0 to 1000000)"},
        {"SIMCUDA_LAUNCH_NS", "18446744073709551616",
         "simcuda: SIMCUDA_LAUNCH_NS='18446744073709551616': out of range (nanoseconds, 0 to 1000000000)"},
        {"SIMCUDA_MEM_GBPS", "0", "simcuda: SIMCUDA_MEM_GBPS='0': out of range (GB/s, 0.001 to 1000000)"},
        {"SIMCUDA_COPY_GBPS", "fast", "simcuda: SIMCUDA_COPY_GBPS='fast': not a number (GB/s, 0.001 to 1000000)"},
        {"SIMCUDA_COPY_GBPS", "inf", "simcuda: SIMCUDA_COPY_GBPS='inf': not a number (GB/s, 0.001 to 1000000)"},
        {"SIMCUDA_COPY_LATENCY_NS", "1e3", "simcuda: SIMCUDA_COPY_LATENCY_NS='1e3': not an integer (nanoseconds, 0 to 1000000000)"},
        {"SIMCUDA_DRIVER_VERSION", "9020", "simcuda: SIMCUDA_DRIVER_VERSION='9020': out of range (a CUDA version as "
                                           "cuDriverGetVersion gives it, 10000 to 99990, e.g. 12040 for 12.4)"},
        {"SIMCUDA_DRIVER_VERSION", "12.4", "simcuda: SIMCUDA_DRIVER_VERSION='12.4': not an integer (a CUDA version as "
                                           "cuDriverGetVersion gives it, 10000 to 99990, e.g. 12040 for 12.4)"},
        {"SIMCUDA_MPS", "2", "simcuda: SIMCUDA_MPS='2': out of range (0 or 1)"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "0",
         "simcuda: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='0': out of range (a percentage, 1 to 100)"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30%",
         "simcuda: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='30%': not a number (a percentage, 1 to 100)"},
        {"SIMCUDA_NODE", "a/b", "simcuda: SIMCUDA_NODE='a/b': not a node name (1 to 63 of: letters, digits, '.', '_', '-')"},
        {"SIMCUDA_NODE", "", "simcuda: SIMCUDA_NODE='': not a node name (1 to 63 of: letters, digits, '.', '_', '-')"},
    };
    const char *never = node_name("never");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_knobs();
        setenv("SIMCUDA_NODE", never, 1);
        setenv(bad[i].knob, bad[i].value, 1);
        is_int(simnode_attach(), -EINVAL, "attach refuses %s='%s'", bad[i].knob, bad[i].value);
        is_str(simnode_error(), bad[i].msg, "  with one clear message");
    }
    clear_knobs();
    char p[80];
    snprintf(p, sizeof p, "/%s", never);
    ok(shm_unlink(p) != 0 && errno == ENOENT, "a refused attach creates no node");
    ok(simnode_config() == NULL, "no config before a successful attach");
}

/* A region file with given size and header, to check that attach refuses it. */
static void write_region(const char *name, size_t size, uint64_t magic, uint32_t abi)
{
    char p[80];
    snprintf(p, sizeof p, "/%s", name);
    int fd = shm_open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) bail("shm %s: %s", name, strerror(errno));
    uint32_t hdr[6] = {(uint32_t)magic, (uint32_t)(magic >> 32), abi, 0, (uint32_t)size, 0};
    if (pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) bail("pwrite: %s", strerror(errno));
    close(fd);
}

static void test_bad_regions(void)
{
    const char *n = node_name("bad");
    setenv("SIMCUDA_NODE", n, 1);
    write_region(n, 4096, 0x1234, 1);
    is_int(simnode_attach(), -EPROTO, "attach refuses a region of the wrong size");
    ok(strstr(simnode_error(), "is not a simcuda node") != NULL, "  message: %s", simnode_error());
    write_region(n, sizeof(simnode_shm_t), 0xdeadbeefull, 1);
    is_int(simnode_attach(), -EPROTO, "attach refuses a region with a foreign magic");
    ok(strstr(simnode_error(), "bad magic") != NULL, "  message: %s", simnode_error());
    write_region(n, sizeof(simnode_shm_t), SIMNODE_MAGIC, SIMNODE_ABI + 1);
    is_int(simnode_attach(), -EPROTO, "attach refuses a region of another ABI version");
    char want[64];
    snprintf(want, sizeof want, "incompatible simcuda (ABI %u", SIMNODE_ABI + 1);
    ok(strstr(simnode_error(), want) != NULL, "  message: %s", simnode_error());
    write_region(n, sizeof(simnode_shm_t) + 64, SIMNODE_MAGIC, SIMNODE_ABI + 1);
    is_int(simnode_attach(), -EPROTO, "attach refuses a region of another size and ABI");
    ok(strstr(simnode_error(), "incompatible") != NULL, "  message: %s", simnode_error());

    /* A creator that died before publishing the magic left zeros: the next process initialises it. */
    const char *z = node_name("zero");
    write_region(z, sizeof(simnode_shm_t), 0, 0);
    setenv("SIMCUDA_NODE", z, 1);
    pid_t pid = need_fork();
    if (pid == 0) {
        CHILD_CHECK(simnode_attach() == 0, 1);
        CHILD_CHECK(atomic_load(&simnode_g.shm->magic) == SIMNODE_MAGIC, 2);
        _exit(0);
    }
    is_int(wait_code(pid), 0, "an unpublished (all-zero) region is initialised by the next process");
    unsetenv("SIMCUDA_NODE");
}

static void test_layout(void)
{
    is_int((long long)offsetof(simnode_shm_t, magic), 0, "layout: magic at 0");
    is_int((long long)offsetof(simnode_shm_t, abi), 8, "layout: ABI at 8");
    is_int((long long)offsetof(simnode_shm_t, size), 16, "layout: size at 16");
    is_int((long long)(offsetof(simnode_dev_t, seq) % 64), 0, "layout: futex word cache-line aligned");
    ok(atomic_is_lock_free(&simnode_g.shm->dev[0].seq) && atomic_is_lock_free(&simnode_g.shm->dev[0].c.busy_ns),
       "layout: shared atomics are lock-free");
    struct stat st;
    ok(fstat(simnode_g.fd, &st) == 0 && (uint64_t)st.st_size == sizeof(simnode_shm_t) &&
       simnode_g.shm->size == sizeof(simnode_shm_t), "layout: the shm object is exactly sizeof(simnode_shm_t) = %zu",
       sizeof(simnode_shm_t));
}

static void test_attach(const char *main_node)
{
    is_int(simnode_attach(), 0, "attach to %s", main_node);
    is_int(simnode_attach(), 0, "attach is idempotent");
    const simnode_config_t *c = simnode_config();
    ok(c != NULL, "config after attach");
    if (!c) bail("no config");
    is_str(c->node, main_node, "config: node");
    is_int(c->devices, 2, "config: SIMCUDA_DEVICES=2");
    is_uint(c->mem_bytes, 1u << 20, "config: SIMCUDA_MEM=1M");
    is_uint(c->timeslice_ns, 2000000, "config: timeslice default 2000 us");
    is_uint(c->switch_ns, 25000, "config: switch default 25 us");
    is_uint(c->launch_ns, 3000, "config: launch default 3000 ns");
    ok(c->mem_gbps == 2000 && c->copy_gbps == 25, "config: bandwidth defaults 2000 / 25 GB/s");
    is_uint(c->copy_latency_ns, 2000, "config: copy latency default 2000 ns");
    is_int(simnode_device_count(), 2, "device count");
    ok(simnode_device(2) == NULL && simnode_device(-1) == NULL, "devices out of range are NULL");
    const simnode_devinfo_t *d0 = simnode_device(0), *d1 = simnode_device(1);
    ok(d0 && d1, "devices 0 and 1");
    if (!d0 || !d1) bail("no devices");
    is_str(d0->name, "simcuda device 0", "device name");
    is_uint(d0->total_mem, 1u << 20, "device total memory");
    ok(memcmp(d0->uuid, d1->uuid, 16) != 0, "uuids differ per ordinal");
    ok(d0->cc_major == 9 && d0->cc_minor == 0, "compute capability 9.0");
    ok(d0->pci_bus != d1->pci_bus, "PCI bus ids differ");
    is_uint(simnode_mem_kernel_ns(2000ull * 1000), 1000, "mem kernel time = bytes / bandwidth (2 MB at 2000 GB/s)");

    /* A second process with the same knobs sees the same devices; a different explicit knob is refused. */
    uint8_t uuid[16];
    memcpy(uuid, d0->uuid, 16);
    pid_t pid = need_fork();
    if (pid == 0) {
        CHILD_CHECK(simnode_attach() == 0, 1);
        CHILD_CHECK(simnode_g.slot != SIMNODE_NONE, 2);
        CHILD_CHECK(memcmp(simnode_device(0)->uuid, uuid, 16) == 0, 3);
        _exit(0);
    }
    is_int(wait_code(pid), 0, "a forked child attaches as its own process and sees the same uuid");
    pid = need_fork();
    if (pid == 0) {
        setenv("SIMCUDA_MEM", "2M", 1);
        CHILD_CHECK(simnode_attach() == -EINVAL, 1);
        CHILD_CHECK(strstr(simnode_error(), "SIMCUDA_MEM='2M' differs from node") != NULL, 2);
        unsetenv("SIMCUDA_MEM");
        unsetenv("SIMCUDA_DEVICES");
        CHILD_CHECK(simnode_attach() == 0, 3);
        CHILD_CHECK(simnode_config()->mem_bytes == 1u << 20 && simnode_config()->devices == 2, 4);
        _exit(0);
    }
    is_int(wait_code(pid), 0, "another SIMCUDA_MEM while processes are attached is refused; unset, the node's is used");

    /* With no live process, the node takes the next process's knobs. */
    const char *n = node_name("reinit");
    for (int round = 0; round < 3; round++) {
        pid = need_fork();
        if (pid == 0) {
            setenv("SIMCUDA_NODE", n, 1);
            if (round < 2) setenv("SIMCUDA_MEM", round == 0 ? "1M" : "2M", 1);
            else unsetenv("SIMCUDA_MEM");
            CHILD_CHECK(simnode_attach() == 0, 1);
            CHILD_CHECK(simnode_config()->mem_bytes == (round == 0 ? 1u << 20 : 2u << 20), 2);
            _exit(0);
        }
        is_int(wait_code(pid), 0, "node without live processes: round %d gets %s", round,
               round == 0 ? "1M" : round == 1 ? "2M (re-created)" : "2M (adopted)");
    }
}

/* ---- memory ------------------------------------------------------------------------------------------------ */

static void test_memory(void)
{
    uint64_t used = 1, total = 0;
    simnode_mem_info(1, &used, &total);
    ok(used == 0 && total == 1u << 20, "device 1: 0 of 1M used");
    is_int(simnode_mem_reserve(1, 600 << 10), 0, "reserve 600K");
    is_int(simnode_mem_reserve(1, 500 << 10), -ENOMEM, "reserve 500K more: -ENOMEM");
    is_int(simnode_mem_reserve(2, 1), -ENODEV, "reserve on a device that does not exist: -ENODEV");
    is_int(simnode_mem_reserve(1, UINT64_MAX), -ENOMEM, "reserve 2^64-1: -ENOMEM (no overflow)");

    int up[2], down[2];
    need_pipe(up);
    need_pipe(down);
    pid_t pid = need_fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        CHILD_CHECK(simnode_attach() == 0, 1);
        CHILD_CHECK(simnode_g.shm->procs[simnode_g.slot].charge[1] == 0, 2); /* no inherited charge */
        simnode_mem_unreserve(1, 600 << 10);                                  /* not ours: no effect */
        uint64_t u = 0;
        simnode_mem_info(1, &u, NULL);
        CHILD_CHECK(u == 600 << 10, 3);
        CHILD_CHECK(simnode_mem_reserve(1, 600 << 10) == -ENOMEM, 4);
        CHILD_CHECK(simnode_mem_reserve(1, 424 << 10) == 0, 5);
        CHILD_CHECK(simnode_mem_reserve(1, 1) == -ENOMEM, 6);
        write_full(up[1], "r", 1);
        char c;
        read_full(down[0], &c, 1, 30000); /* until killed */
        _exit(7);
    }
    close(up[1]);
    close(down[0]);
    char c = 0;
    ok(read_full(up[0], &c, 1, 10000), "child process reserved the remaining 424K (and could not take the parent's)");
    simnode_mem_info(1, &used, NULL);
    is_uint(used, 1u << 20, "device 1 full across two processes");
    is_int(simnode_mem_reserve(1, 1), -ENOMEM, "parent: reserve 1 byte while the child lives: -ENOMEM");
    kill(pid, SIGKILL);
    is_int(wait_code(pid), 128 + SIGKILL, "child killed with SIGKILL");
    is_int(simnode_mem_reserve(1, 424 << 10), 0, "after kill -9 its 424K is reclaimed and can be reserved");
    simnode_mem_unreserve(1, 2u << 20);
    simnode_mem_info(1, &used, NULL);
    is_uint(used, 0, "unreserve is clamped to the process's own charge: back to 0");
    close(up[0]);
    close(down[1]);

    /* Racing reservations from 4 processes never overcommit: exactly capacity / chunk succeed. */
    enum { NPROC = 4, CHUNK = 4096 };
    int res[2], hold[2];
    need_pipe(res);
    need_pipe(hold);
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        kids[i] = need_fork();
        if (kids[i] == 0) {
            close(res[0]);
            close(hold[1]);
            CHILD_CHECK(simnode_attach() == 0, 1);
            uint32_t n = 0;
            int rc;
            while ((rc = simnode_mem_reserve(1, CHUNK)) == 0) n++;
            CHILD_CHECK(rc == -ENOMEM, 2);
            write_full(res[1], &n, sizeof n);
            char x;
            read_full(hold[0], &x, 1, 30000); /* stay alive (holding the charge) until the parent has counted */
            _exit(0);
        }
    }
    close(res[1]);
    close(hold[0]);
    uint64_t sum = 0;
    bool all = true;
    for (int i = 0; i < NPROC; i++) {
        uint32_t n = 0;
        all &= read_full(res[0], &n, sizeof n, 20000);
        sum += n;
    }
    ok(all, "4 racing processes reported");
    is_uint(sum, (1u << 20) / CHUNK, "racing reservations: exactly capacity / 4K succeeded (no overcommit)");
    simnode_mem_info(1, &used, NULL);
    is_uint(used, 1u << 20, "device 1 full");
    close(hold[1]);
    int bad = 0;
    for (int i = 0; i < NPROC; i++) bad += wait_code(kids[i]) != 0;
    is_int(bad, 0, "racing processes exited cleanly");
    close(res[0]);
    simnode_mem_info(1, &used, NULL);
    is_uint(used, 0, "exited processes' charges are reclaimed");

    /* A process that dies holding the device mutex: the robust mutex hands it on and state is repaired. */
    pid = need_fork();
    if (pid == 0) {
        CHILD_CHECK(simnode_attach() == 0, 1);
        CHILD_CHECK(simnode_mem_reserve(1, 8192) == 0, 2);
        pthread_mutex_lock(&simnode_g.shm->dev[1].lock);
        simnode_g.shm->dev[1].mem_used += 12345; /* a half-done update */
        _exit(0);
    }
    is_int(wait_code(pid), 0, "child exited holding the device mutex");
    is_int(simnode_mem_reserve(1, 4096), 0, "next reserve gets the mutex (EOWNERDEAD repaired)");
    simnode_mem_info(1, &used, NULL);
    is_uint(used, 4096, "used recomputed from live charges after the repair");
    simnode_mem_unreserve(1, 4096);
}

/* ---- contexts and the compute engine -------------------------------------------------------------------- */

typedef struct counts {
    uint64_t busy, sw_ns, kernels, switches, preempt, reclaims;
} counts_t;

static counts_t counts_of(simnode_shm_t *shm, int d)
{
    simnode_counters_t *c = &shm->dev[d].c;
    counts_t r = {atomic_load(&c->busy_ns), atomic_load(&c->switch_ns), atomic_load(&c->kernels),
                  atomic_load(&c->switches), atomic_load(&c->preemptions), atomic_load(&c->reclaims)};
    return r;
}

static void test_contexts(uint32_t *ctx)
{
    is_int(simnode_ctx_open(0, ctx), 0, "open a context on device 0");
    uint32_t c2 = 0;
    is_int(simnode_ctx_open(0, &c2), 0, "open a second context");
    ok(*ctx != c2 && *ctx && c2, "context ids are distinct and non-zero");
    is_uint(simnode_g.shm->dev[0].live_ctx, 2, "2 live contexts");
    simnode_ctx_close(0, c2);
    is_uint(simnode_g.shm->dev[0].live_ctx, 1, "close: 1 live context");
    is_int(simnode_kernel_exec(0, c2, 0, 1000), -EINVAL, "kernel on a closed context: -EINVAL");
    is_int(simnode_kernel_exec(0, 0x12345u, 0, 1000), -EINVAL, "kernel on a bogus context: -EINVAL");
    is_int(simnode_kernel_exec(5, *ctx, 0, 1000), -ENODEV, "kernel on a bogus device: -ENODEV");
    is_int(simnode_ctx_open(7, &c2), -ENODEV, "context on a bogus device: -ENODEV");

    pid_t pid = need_fork();
    if (pid == 0) {
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 2);
        _exit(0);
    }
    is_int(wait_code(pid), 0, "a child opened 2 contexts and exited");
    uint64_t u;
    simnode_mem_info(0, &u, NULL); /* sweeps the dead */
    is_uint(simnode_g.shm->dev[0].live_ctx, 1, "a dead process's contexts are reclaimed");
}

static void test_single(uint32_t ctx)
{
    simnode_shm_t *shm = simnode_g.shm;
    counts_t a = counts_of(shm, 0);
    uint64_t t0 = tap_now_ns();
    is_int(simnode_kernel_exec(0, ctx, 0, 50 * MS), 0, "a 50 ms kernel");
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    in_range(ms, 50.0, 80.0, "50 ms kernel alone: %.2f ms wall (tolerance 50..80 ms on a loaded machine)", ms);
    counts_t b = counts_of(shm, 0);
    is_uint(b.kernels - a.kernels, 1, "1 kernel counted");
    is_uint(b.busy - a.busy, 50 * MS, "busy_ns grew by exactly the kernel's 50 ms");

    a = b;
    t0 = tap_now_ns();
    for (int i = 0; i < 20; i++) simnode_kernel_exec(0, ctx, 0, 1 * MS);
    ms = (double)(tap_now_ns() - t0) / 1e6;
    b = counts_of(shm, 0);
    in_range(ms, 20.0, 60.0, "20 back-to-back 1 ms kernels: %.2f ms wall (tolerance 20..60 ms)", ms);
    is_uint(b.kernels - a.kernels, 20, "20 kernels counted");
    is_uint(b.switches - a.switches, 0, "one context back to back: no context switches");
    is_uint(b.preempt - a.preempt, 0, "one context back to back: no preemptions");
    is_uint(b.busy - a.busy, 20 * MS, "busy_ns grew by exactly 20 x 1 ms");
    is_uint(b.sw_ns - a.sw_ns, 0, "no switch time");
    is_int(simnode_kernel_exec(0, ctx, 0, 0), 0, "a 0 ns kernel completes at once");
}

/* nk processes, each running 10 ms kernels for 300 ms with a 2 ms slice, share the engine ~1/nk each. */
static void test_timeslice(int nk)
{
    simnode_shm_t *shm = simnode_g.shm;
    int ready[2], go[2], res[2];
    need_pipe(ready);
    need_pipe(go);
    need_pipe(res);
    pid_t kids[4];
    for (int i = 0; i < nk; i++) {
        kids[i] = need_fork();
        if (kids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            close(res[0]);
            uint32_t c;
            CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
            write_full(ready[1], "r", 1);
            char x;
            CHILD_CHECK(read_full(go[0], &x, 1, 20000), 2);
            uint64_t t0 = tap_now_ns();
            uint32_t n = 0;
            while (tap_now_ns() - t0 < 300 * MS) {
                CHILD_CHECK(simnode_kernel_exec(0, c, 0, 10 * MS) == 0, 3);
                n++;
            }
            write_full(res[1], &n, sizeof n);
            _exit(0);
        }
    }
    close(ready[1]);
    close(go[0]);
    close(res[1]);
    char x[4];
    if (!read_full(ready[0], x, (size_t)nk, 20000)) bail("children not ready");
    counts_t a = counts_of(shm, 0);
    uint64_t t0 = tap_now_ns();
    write_full(go[1], "gggg", (size_t)nk);
    uint32_t n[4] = {0};
    bool got = true;
    int bad = 0;
    uint64_t k = 0;
    for (int i = 0; i < nk; i++) {
        got &= read_full(res[0], &n[i], sizeof n[i], 20000);
        k += n[i];
    }
    for (int i = 0; i < nk; i++) bad += wait_code(kids[i]) != 0;
    double wall = (double)(tap_now_ns() - t0) / 1e6;
    counts_t b = counts_of(shm, 0);
    ok(got && bad == 0, "%d processes ran 10 ms kernels for 300 ms each", nk);
    double lo = nk == 2 ? 0.35 : 0.20, hi = nk == 2 ? 0.65 : 0.47;
    for (int i = 0; i < nk; i++) {
        double share = (double)n[i] / (double)(k ? k : 1);
        in_range(share, lo, hi, "%d contexts: process %d got %u of %llu kernels, share %.2f (ideal %.2f, tolerance "
                 "%.2f..%.2f)", nk, i, n[i], (unsigned long long)k, share, 1.0 / nk, lo, hi);
    }
    is_uint(b.kernels - a.kernels, k, "kernels counted = kernels served (%llu)", (unsigned long long)k);
    is_uint(b.busy - a.busy, k * 10 * MS, "busy_ns = sum of served kernel time (%llu x 10 ms)", (unsigned long long)k);
    uint64_t pre = b.preempt - a.preempt, sw = b.switches - a.switches;
    diag("%d contexts: %llu preemptions, %llu switches, %.1f ms wall", nk, (unsigned long long)pre,
         (unsigned long long)sw, wall);
    in_range((double)pre, (double)k, (double)k * 5,
             "preemptions counted: %llu for %llu contended 10 ms kernels (2 ms slices: ~4 each; at least 1)",
             (unsigned long long)pre, (unsigned long long)k);
    in_range((double)sw, (double)k, (double)k * 6, "context switches counted: %llu (at least 1 per kernel)",
             (unsigned long long)sw);
    is_uint(b.sw_ns - a.sw_ns, sw * 25000, "switch_ns = switches x 25 us");
    in_range((double)(b.busy - a.busy) / 1e6 / wall, 0.6, 1.0,
             "busy fraction over the run %.2f (tolerance 0.6..1.0: host gaps on a loaded machine)",
             (double)(b.busy - a.busy) / 1e6 / wall);
    close(ready[0]);
    close(go[1]);
    close(res[0]);
}

/* A process running a 100 ms kernel is preempted at its slice boundary for another context's short kernel. */
static void test_preempt_latency(uint32_t ctx)
{
    simnode_shm_t *shm = simnode_g.shm;
    int ready[2];
    need_pipe(ready);
    pid_t pid = need_fork();
    if (pid == 0) {
        close(ready[0]);
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        write_full(ready[1], "r", 1);
        uint64_t t0 = tap_now_ns();
        CHILD_CHECK(simnode_kernel_exec(0, c, 0, 100 * MS) == 0, 2);
        uint64_t el = tap_now_ns() - t0;
        CHILD_CHECK(el >= 100 * MS, 3);
        _exit(0);
    }
    close(ready[1]);
    char x;
    if (!read_full(ready[0], &x, 1, 20000)) bail("hog not ready");
    close(ready[0]);
    bool running = false;
    for (int i = 0; i < 2000 && !running; i++) {
        simnode_dev_lock(shm, simnode_g.fd, 0);
        running = shm->dev[0].lane[0].holder != SIMNODE_NONE;
        simnode_dev_unlock(shm, 0);
        if (!running) sleep_ms(1);
    }
    ok(running, "another process's 100 ms kernel holds the engine");
    sleep_ms(5);
    counts_t a = counts_of(shm, 0);
    uint64_t t0 = tap_now_ns();
    is_int(simnode_kernel_exec(0, ctx, 0, 1 * MS), 0, "a 1 ms kernel from our context");
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    counts_t b = counts_of(shm, 0);
    in_range(ms, 1.0, 30.0, "it waited at most a slice: %.2f ms (ideal <= 2 + 0.025 + 1; tolerance 30 ms, "
             "vs >= 90 ms without preemption)", ms);
    ok(b.preempt - a.preempt >= 1, "the 100 ms kernel was preempted (%llu)", (unsigned long long)(b.preempt - a.preempt));
    is_int(wait_code(pid), 0, "the preempted kernel resumed and served its full 100 ms");
}

/* Priorities within one context: lower prio value first, then arrival order. */
typedef struct prio_arg {
    uint32_t ctx;
    int prio;
    uint64_t ns;
    uint64_t end;
    uint64_t submit; /* 0: plain simnode_kernel_exec */
} prio_arg_t;

static void *prio_thread(void *p)
{
    prio_arg_t *a = p;
    int rc = a->submit ? simnode_kernel_exec_submitted(0, a->ctx, a->prio, a->ns, a->submit)
                       : simnode_kernel_exec(0, a->ctx, a->prio, a->ns);
    if (rc != 0) _exit(20);
    a->end = tap_now_ns();
    return NULL;
}

/* In a child: run a[0] (a long kernel) then a[1..n-1], started 15 ms apart; write their completion order. */
static void prio_round(prio_arg_t *a, int n, int fd)
{
    pthread_t t[4];
    for (int i = 0; i < n; i++) {
        CHILD_CHECK(pthread_create(&t[i], NULL, prio_thread, &a[i]) == 0, 2);
        sleep_ms(15);
    }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    char order[16] = "";
    int seen[4] = {0};
    for (int k = 1; k < n; k++) {
        int best = -1;
        for (int i = 1; i < n; i++)
            if (!seen[i] && (best < 0 || a[i].end < a[best].end)) best = i;
        seen[best] = 1;
        char s[16];
        snprintf(s, sizeof s, "%s%d", k > 1 ? "," : "", best);
        strcat(order, s);
    }
    write_full(fd, order, sizeof order);
}

static void test_priorities(void)
{
    int res[2];
    need_pipe(res);
    pid_t pid = need_fork();
    if (pid == 0) {
        close(res[0]);
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        /* arrival order: long kernel, low, high, low */
        prio_arg_t a[4] = {{c, 0, 100 * MS, 0, 0}, {c, 0, 5 * MS, 0, 0}, {c, -1, 5 * MS, 0, 0}, {c, 0, 5 * MS, 0, 0}};
        prio_round(a, 4, res[1]);
        /* submission order beats arrival order: 1 reaches the engine first but was submitted after 2 */
        uint64_t t0 = tap_now_ns();
        prio_arg_t b[3] = {{c, 0, 60 * MS, 0, 0}, {c, 0, 5 * MS, 0, t0 + 2}, {c, 0, 5 * MS, 0, t0 + 1}};
        prio_round(b, 3, res[1]);
        _exit(0);
    }
    close(res[1]);
    char order[16] = "", order2[16] = "";
    ok(read_full(res[0], order, sizeof order, 20000) && read_full(res[0], order2, sizeof order2, 20000),
       "priority runs reported");
    is_int(wait_code(pid), 0, "priority child exited cleanly");
    is_str(order, "2,1,3", "within a context: the prio -1 kernel (arrived 2nd) first, then prio 0 ones in arrival order");
    is_str(order2, "2,1", "equal prio: the kernel submitted first runs first, though it reached the engine last");
    close(res[0]);
}

/* Copy engine: latency + bytes / bandwidth, one transfer at a time. */
static void test_copy(uint32_t ctx)
{
    simnode_shm_t *shm = simnode_g.shm;
    uint64_t c0 = atomic_load(&shm->dev[0].c.copy_bytes), b0 = atomic_load(&shm->dev[0].c.copy_busy_ns);
    uint64_t t0 = tap_now_ns();
    is_int(simnode_copy_exec(0, ctx, 250000000), 0, "copy 250 MB");
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    in_range(ms, 10.0, 40.0, "250 MB at 25 GB/s + 2 us: %.2f ms (tolerance 10..40 ms)", ms);
    is_uint(atomic_load(&shm->dev[0].c.copy_bytes) - c0, 250000000, "copy bytes counted");
    is_uint(atomic_load(&shm->dev[0].c.copy_busy_ns) - b0, 10002000, "copy busy = 2000 + 250e6 / 25 ns");
    is_int(simnode_copy_exec(0, 0xabcdefu, 1), -EINVAL, "copy on a bogus context: -EINVAL");

    pid_t kids[2];
    t0 = tap_now_ns();
    for (int i = 0; i < 2; i++) {
        kids[i] = need_fork();
        if (kids[i] == 0) {
            uint32_t c;
            CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
            CHILD_CHECK(simnode_copy_exec(0, c, 500000000) == 0, 2);
            _exit(0);
        }
    }
    int bad = (wait_code(kids[0]) != 0) + (wait_code(kids[1]) != 0);
    ms = (double)(tap_now_ns() - t0) / 1e6;
    is_int(bad, 0, "two processes copied 20 ms each");
    in_range(ms, 40.0, 150.0, "copies serialise on the copy engine: %.1f ms for 2 x 20 ms (tolerance 40..150)", ms);
}

/* ---- kill -9 ------------------------------------------------------------------------------------------------- */

static bool poll_node(simnode_shm_t *shm, int fd, bool (*cond)(simnode_dev_t *), int timeout_ms)
{
    for (int i = 0; i < timeout_ms; i++) {
        simnode_dev_lock(shm, fd, 0);
        bool c = cond(&shm->dev[0]);
        simnode_dev_unlock(shm, 0);
        if (c) return true;
        sleep_ms(1);
    }
    return false;
}

static bool has_holder(simnode_dev_t *d)
{
    return d->lane[0].holder != SIMNODE_NONE;
}

static bool has_waiter(simnode_dev_t *d)
{
    for (int i = 0; i < SIMNODE_MAX_WAITERS; i++)
        if (d->w[i].state == SIMNODE_W_WAITING) return true;
    return false;
}

static pid_t spawn_kernel(const char *node, uint64_t ns, int ready_fd)
{
    pid_t pid = need_fork();
    if (pid == 0) {
        set_knobs(node, NULL, "10000000");
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        if (ready_fd >= 0) write_full(ready_fd, "r", 1);
        CHILD_CHECK(simnode_kernel_exec(0, c, 0, ns) == 0, 2);
        _exit(0);
    }
    return pid;
}

/* On node n, a process whose kernel of ns holds the engine (checked, named what); *shm and *fd map the node. */
static pid_t spawn_holder(const char *n, uint64_t ns, int ready[2], simnode_shm_t **shm, int *fd, const char *what)
{
    pid_t pid = spawn_kernel(n, ns, ready[1]);
    char x;
    if (!read_full(ready[0], &x, 1, 20000)) bail("%s: not ready", what);
    if (simnode_open_existing(n, shm, fd) != 0) bail("open %s: %s", n, simnode_error());
    ok(poll_node(*shm, *fd, has_holder, 5000), "%s holds the engine", what);
    return pid;
}

/* Engine entries of device 0 in state st. */
static int entries_in(simnode_shm_t *shm, int fd, uint32_t st)
{
    simnode_dev_lock(shm, fd, 0);
    int k = 0;
    for (int i = 0; i < SIMNODE_MAX_WAITERS; i++) k += shm->dev[0].w[i].state == st;
    simnode_dev_unlock(shm, 0);
    return k;
}

/* Engine entries of device 0 not free. */
static int entries_left(simnode_shm_t *shm, int fd)
{
    return SIMNODE_MAX_WAITERS - entries_in(shm, fd, SIMNODE_W_FREE);
}

static void test_kill(void)
{
    /* A node with a 10 s timeslice: only death detection can free the engine. */
    const char *n = node_name("kill");
    int ready[2];
    need_pipe(ready);
    simnode_shm_t *shm;
    int fd;
    char x;
    pid_t hog = spawn_holder(n, 5000 * MS, ready, &shm, &fd, "a 5 s kernel (timeslice 10 s)");
    pid_t w = spawn_kernel(n, 10 * MS, -1);
    ok(poll_node(shm, fd, has_waiter, 5000), "another process waits for the engine");
    counts_t a = counts_of(shm, 0);
    uint64_t t0 = tap_now_ns();
    kill(hog, SIGKILL);
    is_int(wait_code(hog), 128 + SIGKILL, "engine holder killed with SIGKILL mid-kernel");
    is_int(wait_code(w), 0, "the waiter's kernel completed");
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    in_range(ms, 10.0, 250.0, "within %.1f ms of the kill (10 ms kernel + <= 10 ms detection; tolerance 250 ms)", ms);
    counts_t b = counts_of(shm, 0);
    ok(b.reclaims - a.reclaims >= 1, "the dead holder was reclaimed");
    ok(b.busy - a.busy >= 10 * MS, "its partial kernel time and the waiter's 10 ms count as busy");

    /* A killed waiter: after the holder finishes, its dead entry must not wedge the engine. */
    pid_t h2 = spawn_kernel(n, 200 * MS, ready[1]);
    if (!read_full(ready[0], &x, 1, 20000)) bail("holder not ready");
    ok(poll_node(shm, fd, has_holder, 5000), "a 200 ms kernel holds the engine");
    pid_t w2 = spawn_kernel(n, 10 * MS, -1);
    ok(poll_node(shm, fd, has_waiter, 5000), "a second process waits");
    kill(w2, SIGKILL);
    is_int(wait_code(w2), 128 + SIGKILL, "waiter killed with SIGKILL");
    is_int(wait_code(h2), 0, "the holder finished its kernel");
    t0 = tap_now_ns();
    pid_t w3 = spawn_kernel(n, 1 * MS, -1);
    is_int(wait_code(w3), 0, "a new process's kernel runs");
    ms = (double)(tap_now_ns() - t0) / 1e6;
    in_range(ms, 1.0, 250.0, "  in %.1f ms despite the dead waiter (tolerance 250 ms)", ms);
    is_int(entries_left(shm, fd), 0, "no engine entries left behind");
    close(ready[0]);
    close(ready[1]);
    munmap(shm, sizeof *shm);
    close(fd);
}

/* A stream's queued kernels (simnode_kernel_enqueue_after): each runs only once the one before it was served,
 * whatever its priority, and back to back while its context has the engine, another process's kernel waiting
 * or not. On a node with a 10 s slice, so that the order is decided by the rules alone: a 300 ms kernel holds
 * the engine while a 100 ms one of a third process and the stream's three kernels queue. */
static void test_stream_chain(void)
{
    const char *n = node_name("chain");
    int ready[2], res[2];
    need_pipe(ready);
    need_pipe(res);
    simnode_shm_t *shm;
    int fd;
    pid_t hog = spawn_holder(n, 300 * MS, ready, &shm, &fd, "a 300 ms kernel (timeslice 10 s)");
    pid_t other = spawn_kernel(n, 100 * MS, -1);
    ok(poll_node(shm, fd, has_waiter, 5000), "another process's 100 ms kernel waits");
    pid_t pid = need_fork();
    if (pid == 0) {
        set_knobs(n, NULL, "10000000");
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        uint64_t now = tap_now_ns(), t[3] = {0}, end[3] = {0};
        /* 0.4 ms each, the second one more urgent: it must still wait for the first */
        CHILD_CHECK(simnode_kernel_enqueue_after(0, c, 0, 400 * US, 0, now, 0, 0, &t[0]) == 0, 2);
        CHILD_CHECK(simnode_kernel_enqueue_after(0, c, -1, 400 * US, 0, now, 0, t[0], &t[1]) == 0, 3);
        CHILD_CHECK(simnode_kernel_enqueue_after(0, c, 0, 400 * US, 0, now, 0, t[1], &t[2]) == 0, 4);
        for (int i = 2; i >= 0; i--) CHILD_CHECK(simnode_kernel_wait(0, t[i], &end[i]) == 0, 5 + i);
        write_full(res[1], end, sizeof end);
        _exit(0);
    }
    uint64_t end[3] = {0};
    ok(read_full(res[0], end, sizeof end, 20000), "a stream's three kernels, queued behind each other, were served");
    is_int(wait_code(pid), 0, "their process exited cleanly");
    ok(end[0] < end[1] && end[1] < end[2], "in stream order, priority notwithstanding");
    is_int((long long)(end[1] - end[0]), (long long)(400 * US), "the second right after the first (engine timeline)");
    is_int((long long)(end[2] - end[1]), (long long)(400 * US), "and the third right after the second");
    is_int(wait_code(hog), 0, "the 300 ms kernel was served");
    is_int(wait_code(other), 0, "and the other process's 100 ms kernel");
    close(ready[0]);
    close(ready[1]);
    close(res[0]);
    close(res[1]);
    munmap(shm, sizeof *shm);
    close(fd);
}

/* ---- a late owner: the engine moves on at a segment's end whether or not its owner's thread is awake -------- */

/* The first line of path (a timeline file) owned by pid: its duration, or 0. */
static uint64_t owned_line_ns(const char *path, long pid)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[128];
    uint64_t ns = 0;
    while (!ns && fgets(line, sizeof line, f)) {
        unsigned long long dev, ctx, a, b;
        long owner;
        if (sscanf(line, "%llu %llu %llu %llu %ld", &dev, &ctx, &a, &b, &owner) == 5 && owner == pid && b > a)
            ns = b - a;
    }
    fclose(f);
    return ns;
}

static void test_late_owner(void)
{
    /* 10 s timeslice (spawn_kernel): nothing is preempted, A's kernel runs whole, then B's. */
    const char *n = node_name("late");
    char tdir[] = "/tmp/node-t-late-XXXXXX";
    if (!mkdtemp(tdir)) bail("mkdtemp: %s", strerror(errno));
    int ready[2];
    need_pipe(ready);
    simnode_shm_t *shm;
    int fd;
    pid_t a = spawn_holder(n, 30 * MS, ready, &shm, &fd, "A's 30 ms kernel");
    kill(a, SIGSTOP); /* its thread sleeps until the segment's end, and will not wake up for it */
    counts_t c0 = counts_of(shm, 0);
    uint64_t t0 = tap_now_ns();
    setenv("SIMCUDA_TIMELINE", tdir, 1);
    pid_t b = spawn_kernel(n, 10 * MS, -1);
    unsetenv("SIMCUDA_TIMELINE");
    int st = -1;
    pid_t got = 0;
    for (int i = 0; i < 2000 && got == 0; i++) { /* A stays stopped for 2 s at most */
        got = waitpid(b, &st, WNOHANG);
        if (got == 0) sleep_ms(1);
    }
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    kill(a, SIGCONT);
    ok(got == b && WIFEXITED(st) && WEXITSTATUS(st) == 0, "B's 10 ms kernel completed while A was stopped");
    in_range(ms, 10.0, 250.0, "  in %.1f ms: after A's kernel ended on the engine's timeline, not after A woke "
             "(A stopped for up to 2 s; tolerance 10..250 ms)", ms);
    if (got == 0) wait_code(b);
    is_int(wait_code(a), 0, "A, continued, finds its kernel done and exits normally");
    counts_t c1 = counts_of(shm, 0);
    is_uint(c1.kernels - c0.kernels, 2, "2 kernels counted, A's once");
    is_uint(c1.busy - c0.busy, 40 * MS, "busy_ns grew by exactly A's 30 ms and B's 10 ms");
    char path[96];
    snprintf(path, sizeof path, "%s/timeline-%ld.txt", tdir, (long)b);
    uint64_t a_ns = owned_line_ns(path, (long)a);
    is_uint(a_ns, 30 * MS, "B, which retired A's segment, logged it in its own timeline naming A's pid (30 ms)");
    is_int(entries_left(shm, fd), 0, "no engine entries left behind");
    unlink(path);
    rmdir(tdir);
    close(ready[0]);
    close(ready[1]);
    munmap(shm, sizeof *shm);
    close(fd);
}

static void test_dead_done(void)
{
    /* A's kernel is retired for it while it is stopped, and A is killed before it collects it: the engine
     * reclaims that entry when it next goes idle, without a sweep (one would only come when waiter slots run
     * out, or from simcuda-stat). */
    const char *n = node_name("deaddone");
    int ready[2];
    need_pipe(ready);
    simnode_shm_t *shm;
    int fd;
    pid_t a = spawn_holder(n, 20 * MS, ready, &shm, &fd, "A's 20 ms kernel");
    kill(a, SIGSTOP);
    /* B: a 5 ms kernel (retiring A's segment), then, once told, a 2 ms one: no process attaches after A dies
     * (attaching sweeps the node) */
    int go[2], said[2];
    need_pipe(go);
    need_pipe(said);
    pid_t b = need_fork();
    if (b == 0) {
        set_knobs(n, NULL, "10000000");
        uint32_t c;
        char x;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        CHILD_CHECK(simnode_kernel_exec(0, c, 0, 5 * MS) == 0, 2);
        write_full(said[1], "1", 1);
        CHILD_CHECK(read_full(go[0], &x, 1, 20000), 3);
        CHILD_CHECK(simnode_kernel_exec(0, c, 0, 2 * MS) == 0, 4);
        write_full(said[1], "2", 1);
        CHILD_CHECK(read_full(go[0], &x, 1, 20000), 5);
        _exit(0);
    }
    char x;
    ok(read_full(said[0], &x, 1, 20000), "B's 5 ms kernel completes while A is stopped");
    is_int(entries_in(shm, fd, SIMNODE_W_DONE), 1, "A's kernel waits, done, for A to collect it");
    kill(a, SIGKILL);
    is_int(wait_code(a), 128 + SIGKILL, "A is killed without collecting it");
    write_full(go[1], "g", 1);
    ok(read_full(said[0], &x, 1, 20000), "B's 2 ms kernel completes");
    is_int(entries_left(shm, fd), 0, "the engine, going idle after it, reclaimed A's entry (no sweep, no attach)");
    write_full(go[1], "g", 1);
    is_int(wait_code(b), 0, "B exits");
    close(go[0]);
    close(go[1]);
    close(said[0]);
    close(said[1]);
    close(ready[0]);
    close(ready[1]);
    munmap(shm, sizeof *shm);
    close(fd);
}

/* ---- stress: 4 processes x 3 threads x 2 contexts of short kernels, one process killed midway ---------------- */
typedef struct stress_arg {
    uint32_t ctx[2];
    unsigned seed;
    uint64_t served;
} stress_arg_t;

static void *stress_thread(void *p)
{
    stress_arg_t *a = p;
    for (int i = 0; i < 30; i++) {
        uint64_t ns = 50000 + (uint64_t)(rand_r(&a->seed) % 450) * 1000;
        int prio = -(rand_r(&a->seed) % 3);
        if (simnode_kernel_exec(1, a->ctx[rand_r(&a->seed) % 2], prio, ns) != 0) _exit(30);
        a->served += ns;
    }
    return NULL;
}

static void test_stress(void)
{
    enum { NPROC = 4, NTHR = 3 };
    simnode_shm_t *shm = simnode_g.shm;
    int res[2];
    need_pipe(res);
    counts_t a = counts_of(shm, 1);
    uint64_t t0 = tap_now_ns();
    pid_t kids[NPROC];
    for (int k = 0; k < NPROC; k++) {
        kids[k] = need_fork();
        if (kids[k] == 0) {
            close(res[0]);
            stress_arg_t args[NTHR];
            pthread_t t[NTHR];
            uint32_t c[2];
            CHILD_CHECK(simnode_ctx_open(1, &c[0]) == 0 && simnode_ctx_open(1, &c[1]) == 0, 1);
            for (int i = 0; i < NTHR; i++) {
                args[i] = (stress_arg_t){{c[0], c[1]}, (unsigned)getpid() * 31u + (unsigned)i, 0};
                CHILD_CHECK(pthread_create(&t[i], NULL, stress_thread, &args[i]) == 0, 2);
            }
            uint64_t served = 0;
            for (int i = 0; i < NTHR; i++) {
                pthread_join(t[i], NULL);
                served += args[i].served;
            }
            write_full(res[1], &served, sizeof served);
            _exit(0);
        }
    }
    close(res[1]);
    sleep_ms(20);
    kill(kids[0], SIGKILL);
    int bad = 0;
    for (int k = 1; k < NPROC; k++) bad += wait_code(kids[k]) != 0;
    int dead = wait_code(kids[0]);
    double ms = (double)(tap_now_ns() - t0) / 1e6;
    uint64_t sum = 0, v;
    int reports = 0;
    while (read_full(res[0], &v, sizeof v, 1000)) {
        sum += v;
        reports++;
    }
    close(res[0]);
    counts_t b = counts_of(shm, 1);
    is_int(bad, 0, "stress: 3 surviving processes (3 threads, 2 contexts each) finished 90 kernels each");
    ok(dead == 128 + SIGKILL || dead == 0, "stress: the fourth was killed mid-run (or had already finished)");
    in_range(ms, 1, 15000, "stress: done in %.0f ms (no hang; tolerance 15 s)", ms);
    ok(reports >= 3, "stress: %d processes reported their served time", reports);
    ok(b.kernels - a.kernels >= 270, "stress: %llu kernels counted (>= 270)", (unsigned long long)(b.kernels - a.kernels));
    in_range((double)(b.busy - a.busy), (double)sum, ms * 1e6,
             "stress: busy_ns %.1f ms >= served by survivors (%.1f ms) and <= wall", (double)(b.busy - a.busy) / 1e6,
             (double)sum / 1e6);
    simnode_dev_lock(shm, simnode_g.fd, 1);
    int left = 0;
    for (int i = 0; i < SIMNODE_MAX_WAITERS; i++) left += shm->dev[1].w[i].state != SIMNODE_W_FREE;
    uint32_t holder = shm->dev[1].lane[0].holder;
    simnode_dev_unlock(shm, 1);
    ok(left == 0 && holder == SIMNODE_NONE, "stress: engine idle with no entries left (%d left)", left);
}

/* node-t --fixture: a process for tests/simcuda/simcuda-stat.t. On the node its environment names it reserves
 * 1M on device 0, opens a context, runs a 20 ms kernel and a 25 MB copy, prints "ready", then stays attached
 * until stdin reaches EOF and exits without cleaning up (so its state must be reclaimed). */
/* ---- MPS: clients run concurrently, each on its share of the SMs ---------------------------------------- */

typedef struct span { uint64_t start, end; } span_t;

/* A process on node n (SIMCUDA_MPS=mps, 10 s timeslice: no re-grant mid-kernel) whose share is pct %: it runs one
 * kernel of ns and writes {when it asked, when it ended on the engine's timeline} to out_fd. */
static pid_t spawn_client_w(const char *n, const char *mps, const char *pct, uint64_t ns, uint32_t sms, int out_fd)
{
    pid_t pid = need_fork();
    if (pid == 0) {
        set_knobs(n, NULL, "10000000");
        setenv("SIMCUDA_MPS", mps, 1);
        setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct, 1);
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        span_t s = {.start = simnode_now_ns()};
        CHILD_CHECK(simnode_kernel_exec_after(0, c, 0, ns, sms, UINT64_MAX, 0, &s.end) == 0, 2);
        write_full(out_fd, &s, sizeof s);
        _exit(0);
    }
    return pid;
}

/* The same with a kernel that fills the device (sms 0: every SM). */
static pid_t spawn_client(const char *n, const char *mps, const char *pct, uint64_t ns, int out_fd)
{
    return spawn_client_w(n, mps, pct, ns, 0, out_fd);
}

/* A 100 % client on node n (MPS) whose stream queues 3 kernels of ns, each behind the one before; writes {asked,
 * end of the last} to out_fd. */
static pid_t spawn_chain(const char *n, uint64_t ns, int out_fd)
{
    pid_t pid = need_fork();
    if (pid == 0) {
        set_knobs(n, NULL, "10000000");
        setenv("SIMCUDA_MPS", "1", 1);
        uint32_t c;
        CHILD_CHECK(simnode_ctx_open(0, &c) == 0, 1);
        span_t s = {.start = simnode_now_ns()};
        uint64_t t[3] = {0, 0, 0};
        for (int i = 0; i < 3; i++)
            CHILD_CHECK(simnode_kernel_enqueue_after(0, c, 0, ns, 0, s.start, 0, i ? t[i - 1] : 0, &t[i]) == 0, 2);
        for (int i = 0; i < 3; i++) CHILD_CHECK(simnode_kernel_wait(0, t[i], &s.end) == 0, 3);
        write_full(out_fd, &s, sizeof s);
        _exit(0);
    }
    return pid;
}

static span_t client_span(int fd, pid_t pid, const char *what)
{
    span_t s = {0, 0};
    if (!read_full(fd, &s, sizeof s, 20000)) bail("%s: no result", what);
    is_int(wait_code(pid), 0, "%s exits normally", what);
    return s;
}

static double span_ms(span_t s)
{
    return (double)(s.end - s.start) / 1e6;
}

static bool lanes_running(simnode_dev_t *d)
{
    for (int l = 0; l < SIMNODE_MAX_LANES; l++)
        if (d->lane[l].holder != SIMNODE_NONE) return true;
    return false;
}

/* B (30 % share) runs a long kernel; A (100 %, a kernel a_sms wide) comes while it runs. On node n with
 * SIMCUDA_MPS=mps. */
static void mps_pair(const char *n, const char *mps, uint32_t a_sms, span_t *a, span_t *b)
{
    int out[2];
    need_pipe(out);
    pid_t pb = spawn_client(n, mps, "30", 60 * MS, out[1]);
    simnode_shm_t *shm;
    int fd;
    for (int i = 0; i < 5000 && simnode_open_existing(n, &shm, &fd) != 0; i++) sleep_ms(1);
    if (!poll_node(shm, fd, lanes_running, 5000)) bail("B's kernel never ran");
    pid_t pa = spawn_client_w(n, mps, "100", 10 * MS, a_sms, out[1]);
    span_t s1 = client_span(out[0], pa, "A"), s2 = client_span(out[0], pb, "B");
    /* A asked second, whatever the order they were read in. */
    *a = s1.start > s2.start ? s1 : s2;
    *b = s1.start > s2.start ? s2 : s1;
    munmap(shm, sizeof *shm);
    close(fd);
    close(out[0]);
    close(out[1]);
}

static void test_mps(void)
{
    const char *n = node_name("mps");
    int out[2];
    need_pipe(out);
    /* 30 % of 132 SMs is 39.6: MPS grants whole SMs, 40; a 30 ms kernel then takes 30 x 132 / 40 = 99 ms. */
    pid_t p = spawn_client(n, "1", "30", 30 * MS, out[1]);
    span_t s = client_span(out[0], p, "a 30 % client alone");
    in_range(span_ms(s), 98.9, 101.0, "  its 30 ms kernel took %.2f ms on 40 of 132 SMs (99.0 expected)", span_ms(s));
    simnode_shm_t *shm;
    int fd;
    if (simnode_open_existing(n, &shm, &fd) != 0) bail("open %s: %s", n, simnode_error());
    counts_t c0 = counts_of(shm, 0);
    p = spawn_client(n, "1", "30", 30 * MS, out[1]);
    client_span(out[0], p, "a second 30 % client");
    counts_t c1 = counts_of(shm, 0);
    in_range((double)(c1.busy - c0.busy), 30.0 * MS - 1000, 30.0 * MS + 1000,
             "  busy_ns counts SM time: its 99 ms on 30 %% of the SMs count 30 ms (%llu ns)",
             (unsigned long long)(c1.busy - c0.busy));
    munmap(shm, sizeof *shm);
    close(fd);

    span_t a, b;
    mps_pair(n, "1", 0, &a, &b);
    /* B holds 40 SMs, so A gets the other 92: 10 x 132 / 92 = 14.35 ms, from when it asked. */
    in_range(span_ms(a), 14.3, 16.0, "MPS: A's 10 ms kernel beside B's ran concurrently on 92 SMs: %.2f ms",
             span_ms(a));
    ok(a.end < b.end, "  and ended before B's kernel");
    in_range(span_ms(b), 197.9, 200.0, "  B's 60 ms kernel on its 40 SMs was not slowed by A: %.2f ms (198 expected)",
             span_ms(b));

    /* A kernel 20 SMs wide finds them free beside B's 40: full speed. */
    mps_pair(n, "1", 20, &a, &b);
    in_range(span_ms(a), 9.99, 11.0, "MPS: A's 10 ms kernel 20 SMs wide beside B's ran at full speed: %.2f ms",
             span_ms(a));
    /* One wider than its share: a 50 % client's full-width 10 ms kernel alone takes 10 x 132 / 66 = 20 ms. */
    p = spawn_client(n, "1", "50", 10 * MS, out[1]);
    s = client_span(out[0], p, "a 50 % client alone");
    in_range(span_ms(s), 19.9, 21.0, "  a 50 %% client's full-width 10 ms kernel takes %.2f ms on its 66 SMs",
             span_ms(s));
    p = spawn_client_w(n, "1", "50", 10 * MS, 60, out[1]);
    s = client_span(out[0], p, "a 50 % client alone, 60 SMs wide");
    in_range(span_ms(s), 9.99, 11.0, "  its 10 ms kernel 60 SMs wide takes %.2f ms (within its 66 SMs)", span_ms(s));

    /* The same pair time-sliced (SIMCUDA_MPS=0, 10 s slices): A waits for B's whole kernel. */
    const char *n0 = node_name("nomps");
    mps_pair(n0, "0", 0, &a, &b);
    ok(a.end > b.end, "without MPS: A's kernel waits for B's (A ends %.1f ms after B)",
       (double)(a.end - b.end) / 1e6);
    in_range(span_ms(b), 59.9, 62.0, "  B's kernel runs on the whole device: %.2f ms (60 expected)", span_ms(b));

    /* Two unrestricted clients: the first holds every SM, the second waits for them. */
    const char *n2 = node_name("mps2");
    pid_t pc = spawn_client(n2, "1", "100", 50 * MS, out[1]);
    for (int i = 0; i < 5000 && simnode_open_existing(n2, &shm, &fd) != 0; i++) sleep_ms(1);
    if (!poll_node(shm, fd, lanes_running, 5000)) bail("C's kernel never ran");
    pid_t pd = spawn_client(n2, "1", "100", 10 * MS, out[1]);
    span_t s1 = client_span(out[0], pc, "C (100 %, 50 ms)"), s2 = client_span(out[0], pd, "D (100 %, 10 ms)");
    span_t c = s1.start < s2.start ? s1 : s2, d = s1.start < s2.start ? s2 : s1;
    in_range((double)(d.end - c.end) / 1e6, 9.9, 11.0,
             "MPS, no SM free: D's 10 ms kernel starts when C's ends (%.2f ms after it)", (double)(d.end - c.end) / 1e6);
    is_int(entries_left(shm, fd), 0, "no engine entries left behind");
    munmap(shm, sizeof *shm);
    close(fd);

    /* A client whose stream has its next kernel queued does not keep every SM: when its kernel ends, the other
     * waiting client takes SMs first. */
    const char *n3 = node_name("mps3");
    pc = spawn_chain(n3, 20 * MS, out[1]);
    for (int i = 0; i < 5000 && simnode_open_existing(n3, &shm, &fd) != 0; i++) sleep_ms(1);
    if (!poll_node(shm, fd, lanes_running, 5000)) bail("the chain never ran");
    pd = spawn_client(n3, "1", "100", 10 * MS, out[1]);
    s1 = client_span(out[0], pd, "D beside a chain");
    s2 = client_span(out[0], pc, "the chain of 3 x 20 ms");
    in_range(span_ms(s1), 10.0, 31.0, "MPS: D's 10 ms kernel runs after the chain's first kernel, not its third "
             "(%.2f ms from its launch)", span_ms(s1));
    in_range(span_ms(s2), 69.9, 75.0, "  the chain takes its 60 ms and D's 10: %.2f ms", span_ms(s2));
    munmap(shm, sizeof *shm);
    close(fd);
    close(out[0]);
    close(out[1]);
}

static int fixture(void)
{
    uint32_t c;
    if (simnode_attach() || simnode_mem_reserve(0, 1u << 20) || simnode_ctx_open(0, &c) ||
        simnode_kernel_exec(0, c, 0, 20 * MS) || simnode_copy_exec(0, c, 25000000)) {
        fprintf(stderr, "node-t --fixture: %s\n", simnode_error());
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--fixture")) return fixture();
    snprintf(base, sizeof base, "test-node-%d", (int)getpid());
    clear_knobs();
    test_bad_knobs();
    test_bad_regions();

    const char *main_node = node_name("");
    setenv("SIMCUDA_NODE", main_node, 1);
    setenv("SIMCUDA_DEVICES", "2", 1);
    setenv("SIMCUDA_MEM", "1M", 1);
    test_attach(main_node);
    test_layout();
    test_memory();
    uint32_t ctx = 0;
    test_contexts(&ctx);
    test_single(ctx);
    test_timeslice(2);
    test_timeslice(3);
    test_preempt_latency(ctx);
    test_priorities();
    test_copy(ctx);
    test_kill();
    test_stream_chain();
    test_late_owner();
    test_dead_done();
    test_stress();
    test_mps();
    unlink_nodes();
    return done_testing();
}
