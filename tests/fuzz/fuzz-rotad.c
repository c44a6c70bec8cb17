/* fuzz-rotad.c - libFuzzer harness: rotad's socket protocol, against a live rotad run by a thread of this process. */
#include "runtime/abi.h"
#include "runtime/config.h"
#include "runtime/lib/proto.h"
#include "runtime/server.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/*
 * rotad runs in this process (server_open, server_add_gpus, server_loop in a thread: runtime/server.h), so its own
 * code is instrumented and the fuzzer is guided by what rotad does with each packet; ASan and UBSan watch it.
 *
 * An input is a script of at most FZ_MAX_OPS operations on FZ_NCONN connections. Each operation is one byte:
 * the low 4 bits say what (fz_op below), bits 4-5 which connection, bit 6 "raw" (fields are sent as the input
 * has them; without it they are patched into range, so that most messages get past proto_check and reach the
 * ledger), bit 7 "with descriptors" (SCM_RIGHTS: /dev/null, the connection's own socket, its region). The bytes
 * an operation needs follow it (missing bytes read as 0). Memory amounts come from fz_size, which favours the
 * fake GPUs' capacities, the credit and ROTA_MAX_BYTES. rotad's answers are read without blocking, or with short
 * bounded waits (FZ_WAIT_BUDGET_MS deliberate waiting per input at most), so an input takes a few milliseconds.
 *
 * After every input each connection is shut down and its EOF awaited (rotad closes it once it read the EOF),
 * then the invariants are checked; a violation aborts, which libFuzzer reports with the input:
 *   - every packet rotad sends passes proto_check and is no client request; a WELCOME comes with 3 descriptors
 *     for a client, 1 for an observer, none when refused, a RESULT with none, or (status 0, a LIST's answer) one:
 *     a sealed client-table copy in which a viewer other than root and rotad's user sees no process of another
 *     uid;
 *   - rotad closes every connection within FZ_BOUND_MS of its EOF;
 *   - a fresh client registers, reserves 4 KiB on GPU 0 (granted, the ledger exact: those 4 KiB plus the credit
 *     in the RESULT) and releases it (the ledger exact again: its channel's credit), each answer within
 *     FZ_BOUND_MS;
 *   - once it is gone too: no client in the region, every device's reserved, clients, waiters, held and class
 *     counts back at 0, no group usage, no job waiting for placement.
 * The configuration (fz_conf_text) sets small caps so the fuzzer reaches them. Run as root, connections opened
 * with the "other user" bit connect with the effective uid FZ_OTHER_UID (this thread only), which rotad counts
 * against the per-user caps and the high-priority policy; otherwise they connect as this user.
 */

#define FZ_NCONN 4
#define FZ_MAX_OPS 512
#define FZ_WAIT_BUDGET_MS 8
#define FZ_BOUND_MS 5000
#define FZ_TABLE_EVERY_MS 200
#define FZ_OTHER_UID 65534
#define FZ_BARRIER_SEQ 0xfeedf00du
#define FZ_NGPU 2

enum fz_op {
    FZ_OPEN = 0,     /* (re)connect; bit 6: as FZ_OTHER_UID */
    FZ_HELLO = 1,    /* role, priority, weight, max_inflight, mem_limit, flags, comm */
    FZ_RESERVE = 2,  /* uuid, total_mem, bytes, wait_ms, flags */
    FZ_RELEASE = 3,
    FZ_ADOPT = 4,
    FZ_PLACE = 5,    /* flags, ncand, mem, wait_ms, reserved, candidates */
    FZ_RAW = 6,      /* length, patch (magic, ABI, type, size), bytes */
    FZ_SYNC = 7,     /* a PLACE among rotad's GPUs, then read until its RESULT: rotad handled what came before;
                      * bit 6: a LIST instead (a copy of the client table, answered later like any RESULT) */
    FZ_DRAIN = 8,    /* read what is there */
    FZ_WAIT = 9,     /* wait up to 0..3 ms for one packet */
    FZ_CLOSE = 10,
    FZ_SHUT = 11,    /* shutdown(); bit 6: SHUT_RD (rotad's next answer fails), else SHUT_WR */
    FZ_CHANNEL = 12, /* write a word of the client's channel; bit 7: and ring the doorbell */
    FZ_BOARD = 13,   /* write a word of the board (high clients map it read-write) and wake it */
    FZ_HUP = 14,     /* SIGHUP to rotad's thread: reload the config file */
    FZ_REGISTER = 15, /* connect if needed (bit 6: as FZ_OTHER_UID), a valid client HELLO, its WELCOME */
};

static const uint8_t fz_uuids[FZ_NGPU + 1][ROTA_UUID_LEN] = {{0xf2, 0x22, 0, 1}, {0xf2, 0x22, 0, 2},
                                                             {0xf2, 0x22, 0xee, 0xee}}; /* two GPUs, a phantom */
static const uint64_t fz_caps[FZ_NGPU] = {UINT64_C(1) << 20, UINT64_C(1) << 30};

/* Small caps and limits, so that the fuzzer reaches them in a few operations; hello-timeout-ms at its minimum
 * so that dropping a silent connection is reachable too (fz_fresh retries for it). */
static const char fz_conf_text[] = "# fuzz-rotad\n"
                                   "credit 64K\n"
                                   "max-connections-per-user 3\n"
                                   "max-clients-per-user 2\n"
                                   "hello-timeout-ms 10\n"
                                   "max-weight 10\n"
                                   "high-stall-ms 10\n"
                                   "doorbell-max-hz 100\n"
                                   "grace-ms 0\n"
                                   "group /rota-fuzz-nowhere limit 512K\n"
                                   "user 0 limit 768K\n"
                                   "user 65534 limit 256K\n"
                                   "high-cgroup /rota-fuzz-nowhere\n";

typedef struct fz_conn {
    int fd;              /* -1: not connected */
    int fds[3], nfds;    /* from its WELCOME: region, channel, board */
    rota_channel_t *ch;  /* the channel, mapped read-write as librota does */
    void *board;
    bool board_rw;
    uint32_t seq;
    rota_msg_result_t res; /* the last RESULT */
} fz_conn_t;

static char fz_dir[80], fz_sock[108], fz_conf[108];
static config_t fz_cfg;
static server_t *fz_srv;
static pthread_t fz_thread;
static bool fz_thread_started;
static atomic_bool fz_stopping, fz_loop_done;
static const rota_region_t *fz_region; /* read-only, as every client maps it */
static int fz_obs = -1;                /* an observer connection that lives as long as the harness: barriers */
static int fz_null = -1;
static bool fz_other;                  /* connections as FZ_OTHER_UID work */
static fz_conn_t fz_conns[FZ_NCONN];
static unsigned fz_wait_left_ms;
static bool fz_hupped;

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in_t;

static uint8_t fz_u8(fz_in_t *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static uint64_t fz_un(fz_in_t *in, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}

static void fz_take(fz_in_t *in, void *out, size_t n)
{
    size_t k = n < in->n ? n : in->n;
    memcpy(out, in->p, k);
    memset((char *)out + k, 0, n - k);
    in->p += k;
    in->n -= k;
}

static uint64_t fz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The files rotad and the harness made, and the directory: also on the way to abort(), so a failing run leaves
 * nothing behind (rotad's thread still runs, but no longer needs the path). */
static void fz_remove_files(void)
{
    char lock[sizeof fz_sock + 8];
    if (!fz_dir[0]) return;
    snprintf(lock, sizeof lock, "%s.lock", fz_sock);
    unlink(fz_sock);
    unlink(lock);
    unlink(fz_conf);
    rmdir(fz_dir);
}

/* SIGUSR2 in rotad's thread: where it is, for a report that says rotad did not answer in time. */
static void fz_where(int sig)
{
    (void)sig;
    static const char msg[] = "fuzz-rotad: rotad's thread is here:\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    __sanitizer_print_stack_trace();
}

static void fz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fz_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz-rotad: invariant violated: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (fz_thread_started && !atomic_load(&fz_loop_done)) {
        pthread_kill(fz_thread, SIGUSR2);
        usleep(200000);
    }
    fz_remove_files();
    abort();
}

static void fz_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fz_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz-rotad: fatal: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fz_remove_files();
    exit(1);
}

/* ---- connections ----------------------------------------------------------------------------------------- */

/* A non-blocking connection to rotad, or -1. As FZ_OTHER_UID, only this thread's effective uid changes (the raw
 * system call, not glibc's setresuid, which would change rotad's threads too); SO_PEERCRED records it at connect. */
static int fz_connect(bool other)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, fz_sock, strlen(fz_sock) + 1);
    other = other && fz_other;
    if (other && syscall(SYS_setresuid, -1, FZ_OTHER_UID, -1) < 0) other = false;
    int rc = connect(fd, (struct sockaddr *)&sun, sizeof sun);
    if (other) {
        if (syscall(SYS_setresuid, -1, 0, -1) < 0) fz_fatal("unable to return to uid 0: %s", strerror(errno));
        prctl(PR_SET_DUMPABLE, 1); /* changing the euid cleared it; the sanitizers' leak check needs it */
    }
    if (rc < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void fz_forget(fz_conn_t *c)
{
    if (c->ch) munmap(c->ch, ROTA_CHANNEL_MAP_SIZE);
    if (c->board) munmap(c->board, ROTA_BOARD_MAP_SIZE);
    for (int i = 0; i < c->nfds; i++) close(c->fds[i]);
    c->ch = NULL;
    c->board = NULL;
    c->board_rw = false;
    c->nfds = 0;
}

static void fz_close(fz_conn_t *c)
{
    fz_forget(c);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

/* A packet from rotad: it must pass proto_check, not be one of the requests only clients send, and carry the
 * descriptors the protocol says. (A type added later passes: the harness need not know every answer.) */
static void fz_check_reply(const char *buf, ssize_t n, int nfds)
{
    const char *why = NULL;
    int type = proto_check(buf, (size_t)n, NULL, &why);
    if (type < 0) fz_die("rotad sent a packet of %zd bytes that fails proto_check: %s", n, why ? why : "?");
    if (type == ROTA_MSG_HELLO || type == ROTA_MSG_RESERVE || type == ROTA_MSG_RELEASE || type == ROTA_MSG_ADOPT ||
        type == ROTA_MSG_PLACE)
        fz_die("rotad sent a packet of type %d, which only clients send", type);
    if (type == ROTA_MSG_RESULT) {
        const rota_msg_result_t *r = (const void *)buf;
        if (nfds && (nfds != 1 || r->status)) fz_die("rotad sent %d descriptors with a RESULT (status %d)", nfds,
                                                     r->status);
        return;
    }
    if (type != ROTA_MSG_WELCOME) return;
    const rota_msg_welcome_t *w = (const void *)buf;
    int want = w->status ? 0 : w->channel_size ? 3 : 1;
    if (nfds != want) fz_die("rotad sent %d descriptors with a WELCOME (status %d), not %d", nfds, w->status, want);
}

/* A LIST's answer: a memfd sealed against writes and resizing, holding a valid table copy. One made for a user
 * other than root and rotad's (this process's) shows only that user's processes. */
static void fz_check_table(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW))
        fz_die("a table copy that is not sealed (seals %#x)", seals);
    const rota_table_t *t = mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (t == MAP_FAILED) fz_die("a table copy that cannot be mapped: %s", strerror(errno));
    const char *why = NULL;
    if (proto_table_check(t, ROTA_TABLE_MAP_SIZE, &why)) fz_die("a table copy that fails its check: %s", why);
    bool mine = t->viewer_uid == 0 || t->viewer_uid == (uint32_t)getuid();
    if (!!(t->flags & ROTA_TABLE_ALL) != mine)
        fz_die("a table copy for uid %u with flags %#x", (unsigned)t->viewer_uid, (unsigned)t->flags);
    for (unsigned i = 0; !mine && i < ROTA_MAX_CLIENTS; i++)
        if (atomic_load(&t->slots[i].state) == ROTA_SLOT_LIVE && atomic_load(&t->slots[i].uid) != t->viewer_uid)
            fz_die("uid %u's table copy shows slot %u of uid %u", (unsigned)t->viewer_uid, i,
                   (unsigned)atomic_load(&t->slots[i].uid));
    munmap((void *)t, ROTA_TABLE_MAP_SIZE);
}

/* Keeps what a successful WELCOME brought: the channel mapped read-write, the board as its descriptor allows. */
static void fz_welcome(fz_conn_t *c, const rota_msg_welcome_t *w, const int *fds, int nfds)
{
    fz_forget(c);
    memcpy(c->fds, fds, sizeof(int) * (size_t)nfds);
    c->nfds = nfds;
    if (w->status || nfds != 3) return;
    void *p = mmap(NULL, ROTA_CHANNEL_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
    c->ch = p == MAP_FAILED ? NULL : p;
    int fl = fcntl(fds[2], F_GETFL);
    c->board_rw = fl >= 0 && (fl & O_ACCMODE) == O_RDWR;
    p = mmap(NULL, ROTA_BOARD_MAP_SIZE, PROT_READ | (c->board_rw ? PROT_WRITE : 0), MAP_SHARED, fds[2], 0);
    c->board = p == MAP_FAILED ? NULL : p;
}

/* Reads one packet, waiting up to ms. Returns its type (a RESULT is kept in c->res), 0 at EOF
 * (the connection is then closed), -EAGAIN when nothing came (also when a signal cut the wait short: libFuzzer's
 * timeout alarm lands in this thread). */
static int fz_recv(fz_conn_t *c, int ms)
{
    if (c->fd < 0) return 0;
    if (ms > 0) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, ms) == 0) return -EAGAIN;
    }
    char buf[ROTA_MSG_MAX];
    int fds[3], nfds = 3;
    ssize_t n = proto_recv(c->fd, buf, sizeof buf, fds, &nfds, MSG_DONTWAIT);
    if (n == -EAGAIN || n == -EINTR) return -EAGAIN;
    if (n == -EMSGSIZE) fz_die("rotad sent a packet longer than ROTA_MSG_MAX, or too many descriptors");
    if (n <= 0) { /* EOF, or a reset: rotad dropped the connection */
        fz_close(c);
        return 0;
    }
    fz_check_reply(buf, n, nfds);
    const rota_msg_hdr_t *h = (const void *)buf;
    if (h->type == ROTA_MSG_RESULT && nfds == 1) fz_check_table(fds[0]);
    if (h->type == ROTA_MSG_WELCOME) {
        fz_welcome(c, (const void *)buf, fds, nfds);
        return h->type;
    }
    if (h->type == ROTA_MSG_RESULT) memcpy(&c->res, buf, sizeof c->res);
    for (int i = 0; i < nfds; i++) close(fds[i]);
    return h->type;
}

/* Reads until a packet of this type (a RESULT: with this seq) comes. Returns whether it did; false at EOF (the
 * connection is then closed). Dies when rotad takes longer than FZ_BOUND_MS, saying what it did not answer. */
static bool fz_await(fz_conn_t *c, int type, uint32_t seq, const char *what)
{
    uint64_t end = fz_now_ms() + FZ_BOUND_MS;
    while (c->fd >= 0) {
        uint64_t now = fz_now_ms();
        if (now >= end) fz_die("rotad did not answer %s within %d ms", what, FZ_BOUND_MS);
        int t = fz_recv(c, (int)(end - now));
        if (t == type && (type != ROTA_MSG_RESULT || c->res.h.seq == seq)) return true;
    }
    return false;
}

/* Sends n bytes, with descriptors when asked; a full socket or a dropped connection is not an error here. */
static void fz_send(fz_conn_t *c, const void *m, size_t n, bool with_fds, fz_in_t *in)
{
    if (c->fd < 0) return;
    int fds[3], nfds = 0;
    if (with_fds) {
        unsigned k = 1 + fz_u8(in) % 3;
        int pool[3] = {fz_null, c->fd, c->nfds ? c->fds[0] : fz_null};
        for (unsigned i = 0; i < k; i++) fds[nfds++] = pool[i];
    }
    struct iovec iov = {.iov_base = (void *)m, .iov_len = n};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 3)];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    /* proto_send would do, but it cannot send an empty packet or an oversized one without descriptors: raw
     * sendmsg sends exactly what the input says. */
    (void)sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- field pickers ----------------------------------------------------------------------------------------- */

/* A memory amount: mostly near the values rotad compares against (capacities, credit, limits, 2^56). */
static uint64_t fz_size(fz_in_t *in)
{
    uint8_t k = fz_u8(in);
    switch (k % 8) {
    case 0: return 1 + fz_un(in, 2);
    case 1: return 4096 * (1 + (uint64_t)fz_u8(in));
    case 2: return fz_caps[0] + (uint64_t)(int64_t)(int8_t)fz_u8(in) * 4096;
    case 3: return fz_caps[1] + (uint64_t)(int64_t)(int8_t)fz_u8(in) * 65536;
    case 4: return ROTA_MAX_BYTES - fz_u8(in);
    case 5: return fz_un(in, 8);
    case 6: return (uint64_t)fz_u8(in) << (k >> 3); /* up to 255 << 31: amounts far past any capacity */
    default: return 1 + fz_un(in, 8) % ROTA_MAX_BYTES;
    }
}

static uint64_t fz_fix_size(uint64_t v, bool zero_ok)
{
    if (v > ROTA_MAX_BYTES) v = ROTA_MAX_BYTES;
    if (!v && !zero_ok) v = 1;
    return v;
}

static void fz_uuid(fz_in_t *in, uint8_t out[ROTA_UUID_LEN])
{
    uint8_t k = fz_u8(in);
    if (k < 0xf0) memcpy(out, fz_uuids[k % (FZ_NGPU + 1)], ROTA_UUID_LEN);
    else fz_take(in, out, ROTA_UUID_LEN);
}

/* A wait in milliseconds: mostly 0..7 (nothing waits long: the connection closes at the end of the input). */
static uint32_t fz_wait_ms(fz_in_t *in, bool raw)
{
    uint8_t k = fz_u8(in);
    if (raw || k >= 0xf8) return (uint32_t)fz_un(in, 4);
    return k % 8;
}

/* ---- operations ------------------------------------------------------------------------------------------ */

static void fz_hello(fz_conn_t *c, fz_in_t *in, bool raw, bool with_fds)
{
    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, c->seq++);
    uint8_t role = fz_u8(in), prio = fz_u8(in);
    h.weight = (uint32_t)fz_un(in, 4);
    h.max_inflight = (uint32_t)fz_un(in, 4);
    h.mem_limit = fz_size(in);
    uint8_t extra = fz_u8(in);
    fz_take(in, h.comm, sizeof h.comm);
    if (raw) {
        h.role = role;
        h.priority = prio;
        h.flags = extra & 0x0f;
        h.pad0 = extra >> 4;
    } else {
        h.role = role & 1 ? ROTA_ROLE_OBSERVER : ROTA_ROLE_CLIENT;
        h.priority = prio % ROTA_PRIO_COUNT;
        h.weight = 1 + h.weight % 1000000u;
        h.max_inflight %= 65536u;
        h.mem_limit = fz_fix_size(h.mem_limit, true);
        h.comm[sizeof h.comm - 1] = 0;
    }
    fz_send(c, &h, sizeof h, with_fds, in);
}

static void fz_mem(fz_conn_t *c, fz_in_t *in, unsigned type, bool raw, bool with_fds)
{
    rota_msg_mem_t m = {0};
    proto_hdr_init(&m.h, type, sizeof m, c->seq++);
    fz_uuid(in, m.uuid);
    m.total_mem = fz_size(in);
    m.bytes = fz_size(in);
    m.wait_ms = fz_wait_ms(in, raw);
    if (raw) {
        m.flags = fz_u8(in);
    } else {
        m.total_mem = fz_fix_size(m.total_mem, false);
        m.bytes = fz_fix_size(m.bytes, false);
        if (type != ROTA_MSG_RESERVE) m.wait_ms = 0;
    }
    fz_send(c, &m, sizeof m, with_fds, in);
}

static void fz_place(fz_conn_t *c, fz_in_t *in, bool raw, bool with_fds)
{
    rota_msg_place_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_PLACE, sizeof m, c->seq++);
    m.flags = fz_u8(in);
    m.ncand = fz_u8(in);
    m.mem = fz_size(in);
    m.wait_ms = fz_wait_ms(in, raw);
    if (raw) m.reserved = fz_u8(in);
    if (!raw) {
        m.flags &= ROTA_PLACE_KNOWN | ROTA_PLACE_HIGH | ROTA_PLACE_LOW;
        if ((m.flags & ROTA_PLACE_HIGH) && (m.flags & ROTA_PLACE_LOW)) m.flags &= ~ROTA_PLACE_LOW;
        m.ncand = m.flags & ROTA_PLACE_KNOWN ? 0 : 1 + m.ncand % ROTA_MAX_DEVICES;
        m.mem = fz_fix_size(m.mem, true);
    }
    unsigned n = m.ncand < ROTA_MAX_DEVICES ? m.ncand : ROTA_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        fz_uuid(in, m.cand[i].uuid);
        m.cand[i].total_mem = raw ? fz_size(in) : fz_fix_size(fz_size(in), false);
    }
    fz_send(c, &m, sizeof m, with_fds, in);
}

/* Any bytes, the header patched where the patch byte says, so the fuzzer reaches every type's checks. */
static void fz_raw(fz_conn_t *c, fz_in_t *in, bool with_fds)
{
    size_t len = (size_t)(fz_un(in, 2) % (ROTA_MSG_MAX + 65));
    uint8_t patch = fz_u8(in);
    char buf[ROTA_MSG_MAX + 64];
    fz_take(in, buf, len);
    rota_msg_hdr_t h;
    if (len >= sizeof h) {
        memcpy(&h, buf, sizeof h);
        if (patch & 1) h.magic = ROTA_MSG_MAGIC;
        if (patch & 2) h.abi = ROTA_ABI_VERSION;
        if (patch & 4) h.type = (uint16_t)((patch >> 4) % (ROTA_MSG_TYPE_MAX + 2));
        if (patch & 8) h.size = (uint32_t)len;
        memcpy(buf, &h, sizeof h);
    }
    fz_send(c, buf, len, with_fds, in);
}

/* Sends a PLACE among rotad's own GPUs (a round trip that touches no ledger) and reads until its RESULT, EOF or
 * FZ_BOUND_MS: rotad has then handled everything this connection sent before. Returns whether the RESULT came. */
static bool fz_barrier(fz_conn_t *c)
{
    if (c->fd < 0) return false;
    rota_msg_place_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_PLACE, sizeof m, FZ_BARRIER_SEQ);
    m.flags = ROTA_PLACE_KNOWN;
    if (send(c->fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof m) return false;
    return fz_await(c, ROTA_MSG_RESULT, FZ_BARRIER_SEQ, "a PLACE among its own GPUs");
}

/* A LIST: its answer (a RESULT with a table copy, or -EAGAIN within 10 ms of the last) is read like any other. */
static void fz_list(fz_conn_t *c)
{
    if (c->fd < 0) return;
    rota_msg_list_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_LIST, sizeof m, c->seq++);
    send(c->fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void fz_wait(fz_conn_t *c, fz_in_t *in)
{
    unsigned ms = fz_u8(in) % 4;
    if (ms > fz_wait_left_ms) ms = fz_wait_left_ms;
    fz_wait_left_ms -= ms;
    fz_recv(c, (int)ms);
}

static void fz_futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Scribbles over the client's own channel, as a hostile or broken client may: rotad must only ever hurt it. */
static void fz_channel(fz_conn_t *c, fz_in_t *in, bool raw, bool ring)
{
    size_t words = sizeof(rota_channel_t) / 4;
    size_t off = (size_t)(fz_un(in, 2) % words) * 4;
    uint64_t v = raw ? fz_un(in, 8) : fz_size(in);
    if (!c->ch) return;
    char *p = (char *)c->ch + off;
    if (raw && off % 8 == 0 && off + 8 <= sizeof(rota_channel_t)) __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE);
    else __atomic_store_n((uint32_t *)p, (uint32_t)v, __ATOMIC_RELEASE);
    if (ring) {
        atomic_fetch_add(&c->ch->doorbell, 1);
        fz_futex_wake(&c->ch->doorbell);
    }
}

static void fz_board(fz_conn_t *c, fz_in_t *in)
{
    size_t words = sizeof(rota_board_t) / 4;
    size_t off = (size_t)(fz_un(in, 2) % words) * 4;
    uint32_t v = (uint32_t)fz_un(in, 4);
    if (!c->board || !c->board_rw) return;
    _Atomic uint32_t *w = (_Atomic uint32_t *)((char *)c->board + off);
    atomic_store(w, v);
    fz_futex_wake(w);
}

/* A valid client HELLO, then its WELCOME (or EOF) within FZ_BOUND_MS: a client with a channel in few bytes. */
static void fz_register(fz_conn_t *c, fz_in_t *in, bool other)
{
    uint8_t prio = fz_u8(in);
    if (c->fd < 0) c->fd = fz_connect(other);
    if (c->fd < 0) return;
    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, c->seq++);
    h.role = ROTA_ROLE_CLIENT;
    h.priority = prio % ROTA_PRIO_COUNT;
    h.weight = 1000;
    h.mem_limit = prio & 0x80 ? fz_size(in) % (ROTA_MAX_BYTES + 1) : 0;
    snprintf(h.comm, sizeof h.comm, "fuzz-rotad");
    if (send(c->fd, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof h)
        fz_await(c, ROTA_MSG_WELCOME, 0, "a client's HELLO");
}

static void fz_op(fz_in_t *in)
{
    uint8_t op = fz_u8(in);
    fz_conn_t *c = &fz_conns[(op >> 4) & 3];
    bool raw = op & 0x40, with_fds = op & 0x80;
    switch ((enum fz_op)(op & 0x0f)) {
    case FZ_OPEN:
        fz_close(c);
        c->fd = fz_connect(raw);
        break;
    case FZ_HELLO: fz_hello(c, in, raw, with_fds); break;
    case FZ_RESERVE: fz_mem(c, in, ROTA_MSG_RESERVE, raw, with_fds); break;
    case FZ_RELEASE: fz_mem(c, in, ROTA_MSG_RELEASE, raw, with_fds); break;
    case FZ_ADOPT: fz_mem(c, in, ROTA_MSG_ADOPT, raw, with_fds); break;
    case FZ_PLACE: fz_place(c, in, raw, with_fds); break;
    case FZ_RAW: fz_raw(c, in, with_fds); break;
    case FZ_SYNC:
        if (raw) fz_list(c);
        else fz_barrier(c);
        break;
    case FZ_DRAIN:
        while (fz_recv(c, 0) > 0) {
        }
        break;
    case FZ_WAIT: fz_wait(c, in); break;
    case FZ_CLOSE: fz_close(c); break;
    case FZ_SHUT:
        if (c->fd >= 0) shutdown(c->fd, raw ? SHUT_RD : SHUT_WR);
        break;
    case FZ_CHANNEL: fz_channel(c, in, raw, with_fds); break;
    case FZ_BOARD: fz_board(c, in); break;
    case FZ_HUP:
        pthread_kill(fz_thread, SIGHUP);
        fz_hupped = true;
        break;
    case FZ_REGISTER: fz_register(c, in, raw); break;
    }
}

/* ---- invariants ---------------------------------------------------------------------------------------- */

/* Shuts the connection down and reads until rotad closes its end, within the deadline. */
static void fz_finish(fz_conn_t *c, uint64_t end)
{
    if (c->fd < 0) return;
    shutdown(c->fd, SHUT_WR);
    while (c->fd >= 0) {
        uint64_t now = fz_now_ms();
        if (now >= end) fz_die("rotad did not close a connection within %d ms of its EOF", FZ_BOUND_MS);
        fz_recv(c, (int)(end - now));
    }
}

/* A well-formed client, as librota would be: registers, reserves 4 KiB on GPU 0, releases it, leaves. */
static void fz_fresh(void)
{
    fz_conn_t c = {.fd = -1};
    /* hello-timeout-ms is 10: a rotad thread kept off the CPU that long may drop even a prompt HELLO. Retried,
     * so only a rotad that drops them all fails. */
    for (int tries = 0; tries < 5 && !c.nfds; tries++) {
        c.fd = fz_connect(false);
        if (c.fd < 0) fz_die("a fresh client cannot connect: %s", strerror(errno));
        rota_msg_hello_t h = {0};
        proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, 1);
        h.role = ROTA_ROLE_CLIENT;
        h.priority = ROTA_PRIO_NORMAL;
        h.weight = 1000;
        snprintf(h.comm, sizeof h.comm, "fuzz-fresh");
        if (proto_send(c.fd, &h, sizeof h, NULL, 0)) fz_die("a fresh client cannot send its HELLO");
        if (fz_await(&c, ROTA_MSG_WELCOME, 0, "a fresh client's HELLO") && !c.ch)
            fz_die("rotad refused a fresh client, or sent it no channel");
    }
    if (!c.ch) fz_die("rotad dropped a fresh client's HELLO five times");
    rota_msg_mem_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_RESERVE, sizeof m, 2);
    memcpy(m.uuid, fz_uuids[0], ROTA_UUID_LEN);
    m.total_mem = fz_caps[0];
    m.bytes = 4096;
    if (proto_send(c.fd, &m, sizeof m, NULL, 0)) fz_die("a fresh client cannot send a RESERVE");
    if (!fz_await(&c, ROTA_MSG_RESULT, 2, "a fresh client's RESERVE"))
        fz_die("rotad dropped a fresh client that reserved 4 KiB");
    if (c.res.status || c.res.dev != 0)
        fz_die("a fresh client's RESERVE of 4 KiB on GPU 0: status %d, device %d", c.res.status, c.res.dev);
    uint64_t want = 4096 + c.res.credit, got = atomic_load(&fz_region->devices[0].reserved);
    if (got != want)
        fz_die("GPU 0 has %llu bytes reserved with only a fresh client holding 4096 + %llu of credit",
               (unsigned long long)got, (unsigned long long)c.res.credit);
    proto_hdr_init(&m.h, ROTA_MSG_RELEASE, sizeof m, 3);
    if (proto_send(c.fd, &m, sizeof m, NULL, 0)) fz_die("a fresh client cannot send a RELEASE");
    if (!fz_barrier(&c)) fz_die("rotad dropped a fresh client that released what it reserved");
    got = atomic_load(&fz_region->devices[0].reserved);
    want = atomic_load(&c.ch->credit[0]); /* all it holds now: rotad's credit, which it keeps topped up */
    if (got != want)
        fz_die("GPU 0 has %llu bytes reserved once a fresh client released its 4 KiB, holding %llu of credit",
               (unsigned long long)got, (unsigned long long)want);
    fz_finish(&c, fz_now_ms() + FZ_BOUND_MS);
}

/* What must hold once every client is gone: false, with what does not in why. */
/* A copy of rotad's client table through the harness's observer (LIST; -EAGAIN within 10 ms of the last one is
 * asked again), checked by fz_check_table. Dies when rotad does not answer within FZ_BOUND_MS. */
static const rota_table_t *fz_table(void)
{
    uint64_t end = fz_now_ms() + FZ_BOUND_MS;
    while (fz_now_ms() < end) {
        rota_msg_list_t m = {0};
        proto_hdr_init(&m.h, ROTA_MSG_LIST, sizeof m, FZ_BARRIER_SEQ + 1);
        if (send(fz_obs, &m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m) fz_die("LIST on the observer: %s",
                                                                                 strerror(errno));
        struct pollfd p = {.fd = fz_obs, .events = POLLIN};
        int pr;
        do {
            pr = poll(&p, 1, FZ_BOUND_MS);
        } while (pr < 0 && errno == EINTR);
        if (pr != 1) break;
        char buf[ROTA_MSG_MAX];
        int fds[3], nfds = 3;
        ssize_t got = proto_recv(fz_obs, buf, sizeof buf, fds, &nfds, 0);
        if (got <= 0) fz_die("rotad dropped the harness's observer");
        fz_check_reply(buf, got, nfds);
        const rota_msg_result_t *r = (const void *)buf;
        if (r->h.type != ROTA_MSG_RESULT || r->h.seq != FZ_BARRIER_SEQ + 1) {
            for (int i = 0; i < nfds; i++) close(fds[i]);
            continue;
        }
        if (r->status == -EAGAIN) {
            usleep(ROTA_LIST_MIN_MS * 1000 + 1000);
            continue;
        }
        if (r->status || nfds != 1) fz_die("LIST answered %d with %d descriptors", r->status, nfds);
        fz_check_table(fds[0]);
        const rota_table_t *t = mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ, MAP_SHARED, fds[0], 0);
        close(fds[0]);
        if (t == MAP_FAILED) fz_die("map the table copy: %s", strerror(errno));
        return t;
    }
    fz_die("rotad did not send its client table within %d ms", FZ_BOUND_MS);
}

static bool fz_idle(char *why, size_t n)
{
    const rota_region_t *r = fz_region;
    if (atomic_load(&r->nclients)) {
        snprintf(why, n, "%u clients registered", atomic_load(&r->nclients));
        return false;
    }
    if (atomic_load(&r->place_waiting) || atomic_load(&r->place_wait_bytes)) {
        snprintf(why, n, "%u jobs wait for placement", atomic_load(&r->place_waiting));
        return false;
    }
    unsigned nd = atomic_load(&r->ndevices);
    for (unsigned d = 0; d < nd && d < ROTA_MAX_DEVICES; d++) {
        const rota_dev_t *v = &r->devices[d];
        uint64_t res = atomic_load(&v->reserved);
        uint32_t cl = atomic_load(&v->clients), wa = atomic_load(&v->waiters), he = atomic_load(&v->held),
                 ha = atomic_load(&v->high_active), hc = atomic_load(&v->high_clients),
                 nc = atomic_load(&v->normal_clients);
        if (res || cl || wa || he || ha || hc || nc) {
            snprintf(why, n,
                     "device %u: reserved %llu, clients %u, waiters %u, held %u, high_active %u, high_clients %u, "
                     "normal_clients %u",
                     d, (unsigned long long)res, cl, wa, he, ha, hc, nc);
            return false;
        }
    }
    /* The groups and slots are in rotad's table: a copy through the harness's observer (it sees everything). One
     * connection gets one copy per ROTA_LIST_MIN_MS, so this part runs every FZ_TABLE_EVERY_MS: per input it would
     * cap the fuzzer at 100 inputs a second (the region's counts above are checked after every input). */
    static uint64_t last_ms;
    if (fz_now_ms() - last_ms < FZ_TABLE_EVERY_MS) return true;
    last_ms = fz_now_ms();
    const rota_table_t *t = fz_table();
    unsigned ng = atomic_load(&r->ngroups);
    bool idle = true;
    for (unsigned g = 0; idle && g < ng && g < ROTA_MAX_GROUPS; g++)
        for (unsigned d = 0; idle && d < ROTA_MAX_DEVICES; d++) {
            uint64_t u = atomic_load(&t->groups[g].used[d]);
            if (u) {
                snprintf(why, n, "group %u uses %llu bytes on device %u", g, (unsigned long long)u, d);
                idle = false;
            }
        }
    for (unsigned s = 0; idle && s < ROTA_MAX_CLIENTS; s++)
        if (atomic_load(&t->slots[s].state) != ROTA_SLOT_FREE) {
            snprintf(why, n, "slot %u is live", s);
            idle = false;
        }
    munmap((void *)t, ROTA_TABLE_MAP_SIZE);
    if (!idle) return false;
    return true;
}

static void fz_check(void)
{
    uint64_t end = fz_now_ms() + FZ_BOUND_MS;
    for (int i = 0; i < FZ_NCONN; i++) fz_finish(&fz_conns[i], end);
    fz_fresh();
    /* Everything rotad does for a connection's EOF (and a SIGHUP) ends before it answers a later round trip. */
    fz_conn_t obs = {.fd = fz_obs};
    for (int i = 0; i < (fz_hupped ? 2 : 1); i++)
        if (!fz_barrier(&obs)) fz_die("rotad dropped the harness's observer");
    fz_forget(&obs);
    char why[256];
    bool idle;
    end = fz_now_ms() + FZ_BOUND_MS;
    while (!(idle = fz_idle(why, sizeof why)) && fz_now_ms() < end) usleep(100);
    if (!idle) fz_die("every client is gone, yet %s", why);
    if (atomic_load(&fz_loop_done)) fz_die("rotad's loop returned");
}

/* ---- setup and teardown ---------------------------------------------------------------------------------- */

static void *fz_serve(void *arg)
{
    int *notify = arg;
    char err[512];
    int rc = server_loop(fz_srv, notify, 1, err, sizeof err);
    if (rc) fprintf(stderr, "fuzz-rotad: rotad's loop failed: %s\n", err);
    else if (!atomic_load(&fz_stopping)) fprintf(stderr, "fuzz-rotad: rotad's loop returned unasked\n");
    atomic_store(&fz_loop_done, true);
    return NULL;
}

/* At exit: rotad drains and stops (SIGTERM to its thread, as rotad-main.c's signalfd reads it), then everything
 * it and the harness made goes. */
static void fz_teardown(void)
{
    for (int i = 0; i < FZ_NCONN; i++) fz_close(&fz_conns[i]);
    if (fz_obs >= 0) close(fz_obs);
    if (fz_region) munmap((void *)fz_region, ROTA_REGION_MAP_SIZE);
    bool joined = false;
    if (fz_thread_started) {
        atomic_store(&fz_stopping, true);
        pthread_kill(fz_thread, SIGTERM);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += FZ_BOUND_MS / 1000;
        joined = pthread_timedjoin_np(fz_thread, NULL, &ts) == 0;
        if (!joined) fprintf(stderr, "fuzz-rotad: rotad did not stop within %d ms of SIGTERM\n", FZ_BOUND_MS);
    }
    if (joined || !fz_thread_started) server_close(fz_srv);
    if (fz_null >= 0) close(fz_null);
    fz_remove_files();
}

/* An observer connection: the region's read-only descriptor comes with its WELCOME. */
static int fz_observe(bool other, const rota_region_t **region)
{
    fz_conn_t c = {.fd = fz_connect(other)};
    if (c.fd < 0) return -1;
    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, 0);
    h.role = ROTA_ROLE_OBSERVER;
    h.priority = ROTA_PRIO_NORMAL;
    h.weight = 1000;
    if (proto_send(c.fd, &h, sizeof h, NULL, 0) || !fz_await(&c, ROTA_MSG_WELCOME, 0, "an observer's HELLO") ||
        c.nfds != 1) {
        fz_close(&c);
        return -1;
    }
    if (region) {
        void *p = mmap(NULL, ROTA_REGION_MAP_SIZE, PROT_READ, MAP_SHARED, c.fds[0], 0);
        *region = p == MAP_FAILED ? NULL : p;
    }
    fz_forget(&c);
    return c.fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGUSR2, fz_where);
    for (int i = 0; i < FZ_NCONN; i++) fz_conns[i].fd = -1;
    /* Under TMPDIR when set (tests/fuzz/fuzz.t points it at its own folder, which it removes whatever happens). */
    const char *tmp = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/rota-fuzz-rotad.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(fz_dir)) {
        fz_dir[0] = 0;
        fz_fatal("mkdtemp: %s", strerror(errno));
    }
    atexit(fz_teardown);
    if (snprintf(fz_sock, sizeof fz_sock, "%s/rotad.sock", fz_dir) >= (int)sizeof fz_sock)
        fz_fatal("socket path %s/rotad.sock is too long", fz_dir);
    snprintf(fz_conf, sizeof fz_conf, "%s/rotad.conf", fz_dir);
    /* The other user must reach the socket (rotad running as root makes it 0666). */
    if (geteuid() == 0) chmod(fz_dir, 0711);
    FILE *f = fopen(fz_conf, "w");
    if (!f || fputs(fz_conf_text, f) < 0 || fclose(f)) fz_fatal("unable to write %s", fz_conf);
    char err[512];
    if (config_load(fz_conf, &fz_cfg, err, sizeof err)) fz_fatal("config: %s", err);
    fz_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const char *lv = getenv("FUZZ_ROTAD_LOG"); /* rotad's log level (0..2); quiet by default */
    server_opts_t o = {.socket_path = fz_sock, .cfg = &fz_cfg, .config_path = fz_conf,
                       .log_level = lv ? atoi(lv) : -1};
    int rc = server_open(&o, &fz_srv, err, sizeof err);
    if (rc) fz_fatal("server_open: %s", err);
    rota_place_cand_t gpus[FZ_NGPU];
    for (int i = 0; i < FZ_NGPU; i++) {
        memcpy(gpus[i].uuid, fz_uuids[i], ROTA_UUID_LEN);
        gpus[i].total_mem = fz_caps[i];
    }
    if (server_add_gpus(fz_srv, gpus, FZ_NGPU) != FZ_NGPU) fz_fatal("server_add_gpus did not take both GPUs");
    /* rotad reads SIGTERM, SIGINT and SIGHUP from a signalfd: blocked in its thread (and the scheduler thread it
     * starts), which inherits this mask. Not in the others: libFuzzer's own SIGINT and SIGTERM handlers keep
     * working (^C), and the harness sends rotad its signals with pthread_kill. SIGALRM (libFuzzer's -timeout
     * check) is for the other threads too: rotad never gets one. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    static int ready[2];
    if (pipe2(ready, O_CLOEXEC)) fz_fatal("pipe: %s", strerror(errno));
    rc = pthread_create(&fz_thread, NULL, fz_serve, &ready[1]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) fz_fatal("pthread_create: %s", strerror(rc));
    fz_thread_started = true;
    char ch = 0;
    struct pollfd p = {.fd = ready[0], .events = POLLIN};
    int pr;
    do {
        pr = poll(&p, 1, FZ_BOUND_MS);
    } while (pr < 0 && errno == EINTR);
    if (pr != 1 || read(ready[0], &ch, 1) != 1 || ch != '\n') fz_fatal("rotad did not become ready");
    close(ready[0]);
    fz_obs = fz_observe(false, &fz_region);
    if (fz_obs < 0 || !fz_region) fz_fatal("rotad did not register the harness's observer");
    if (geteuid() == 0) {
        fz_other = true;
        fz_conn_t c = {.fd = fz_observe(true, NULL)};
        fz_other = c.fd >= 0;
        if (fz_other) fz_finish(&c, fz_now_ms() + FZ_BOUND_MS);
    }
    fprintf(stderr, "fuzz-rotad: rotad serves %s; connections as uid %d: %s\n", fz_sock, FZ_OTHER_UID,
            fz_other ? "yes" : "no (not root, or the socket's folder is not reachable)");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in_t in = {data, size};
    fz_wait_left_ms = FZ_WAIT_BUDGET_MS;
    fz_hupped = false;
    for (int i = 0; i < FZ_MAX_OPS && in.n; i++) fz_op(&in);
    fz_check();
    return 0;
}
