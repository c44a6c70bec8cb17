/* server-t.c - TAP tests for rotad's service (runtime/server*.c) through real sockets and processes. */
#include "runtime/abi.h"
#include "runtime/lib/cgroup.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/proto.h"
#include "tests/runtime/rotad-helpers.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#define LD(p) atomic_load(p)

static const uint8_t U0[16] = {0xaa, 1, 2, 3};
static const uint64_t CAP = 1000;

static conn_t *open_client(unsigned prio, uint64_t limit)
{
    conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_CLIENT, .priority = prio, .weight = 1,
                     .mem_limit = limit};
    conn_t *c;
    char err[256];
    int rc = conn_open(&o, &c, err, sizeof err);
    if (rc) bail("conn_open: %s", err);
    return c;
}

static int dev0_reserved(conn_t *c)
{
    int d = conn_region_device(c, U0);
    return d < 0 ? 0 : (int)LD(&conn_region(c)->devices[d].reserved);
}

/* Polls a condition on the region for up to ms (the region is rotad's view; changes are asynchronous). */
#define WAIT_FOR(cond, ms)                                                                 \
    ({                                                                                     \
        bool wf_ok_ = false;                                                               \
        for (int wf_i_ = 0; wf_i_ < (ms) && !(wf_ok_ = (cond)); wf_i_++) usleep(1000);     \
        wf_ok_;                                                                            \
    })

static int raw_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, th_sock, strlen(th_sock) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) bail("raw connect: %s", strerror(errno));
    return fd;
}

/* Sends n bytes and reports whether rotad hung up (EOF within 2 s). */
static bool raw_send_is_dropped(const void *buf, size_t n, void *reply, ssize_t *reply_len)
{
    int fd = raw_connect();
    if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n) bail("raw send");
    bool dropped = false;
    for (int i = 0; i < 4; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) != 1) break;
        char b[256];
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r <= 0) {
            dropped = true;
            break;
        }
        if (reply) {
            memcpy(reply, b, (size_t)r < 128 ? (size_t)r : 128);
            *reply_len = r;
        }
    }
    close(fd);
    return dropped;
}

static void test_basic(void)
{
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    const rota_region_t *r = conn_region(c);
    rota_slot_t sv = th_slot(conn_slot(c));
    const rota_slot_t *s = &sv;
    is_int(LD(&s->state), ROTA_SLOT_LIVE, "registered: slot live");
    is_int(LD(&s->pid), getpid(), "slot pid comes from SO_PEERCRED");
    is_uint(LD(&s->uid), getuid(), "slot uid");
    ok(mprotect((void *)r, ROTA_PAGE, PROT_READ | PROT_WRITE) < 0 && errno == EACCES,
       "the region cannot be made writable by a client");
    rota_channel_t *ch = conn_channel(c);
    ok(ch && ch->magic == ROTA_CHANNEL_MAGIC && ch->slot == conn_slot(c), "the channel is mapped and named");
    int dev = -9;
    uint64_t lim = 1;
    is_int(conn_reserve(c, U0, CAP, 400, 0, &dev, &lim), 0, "reserve 400 of 1000");
    is_int(dev, 0, "on GPU index 0");
    is_uint(lim, 0, "no limit");
    is_int(dev0_reserved(c), 400, "ledger shows 400");
    sv = th_slot(conn_slot(c));
    is_uint(LD(&s->used[0]), 400, "slot shows 400");
    is_int(conn_reserve(c, U0, CAP, 601, 0, NULL, NULL), -ENOMEM, "601 more does not fit: -ENOMEM at once");
    is_int(conn_reserve(c, U0, CAP, 1001, 1000, NULL, NULL), -ENOMEM, "more than the GPU fails without waiting");
    is_int(conn_release(c, U0, CAP, 100), 0, "release 100");
    conn_release(c, U0, CAP, 1000000);
    ok(WAIT_FOR(dev0_reserved(c) == 0, 2000), "over-release clamps at zero (no underflow)");
    conn_close(c);

    c = open_client(ROTA_PRIO_NORMAL, 300);
    is_int(conn_reserve(c, U0, CAP, 200, 0, NULL, &lim), 0, "limited client: 200 of 300");
    is_uint(lim, 300, "the answer carries the limit");
    is_int(conn_reserve(c, U0, CAP, 200, 0, NULL, NULL), -EDQUOT, "over the process limit: -EDQUOT");
    is_int(conn_reserve(c, U0, CAP, 301, 5000, NULL, NULL), -EDQUOT, "larger than the limit: no wait");
    conn_close(c);
}

/* A child that registers, reserves, reports the result on fd, then waits to be killed or told to exit. */
static pid_t child_reserve(unsigned prio, uint64_t bytes, unsigned wait_ms, int fd, char tag)
{
    pid_t pid = fork();
    if (pid) return pid;
    conn_t *c = open_client(prio, 0);
    int rc = conn_reserve(c, U0, CAP, bytes, wait_ms, NULL, NULL);
    char msg[2] = {tag, rc == 0 ? '+' : rc == -ENOMEM ? 'T' : rc == -EPIPE ? 'P' : rc == -ESHUTDOWN ? 'S' : '?'};
    if (write(fd, msg, 2) != 2) _exit(3);
    pause();
    _exit(0);
}

static bool read_pair(int fd, char out[2], int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && read(fd, out, 2) == 2;
}

static void test_across_processes_and_priority(void)
{
    conn_t *filler = open_client(ROTA_PRIO_NORMAL, 0);
    is_int(conn_reserve(filler, U0, CAP, 1000, 0, NULL, NULL), 0, "filler takes the whole GPU");
    int p[2];
    if (pipe(p)) bail("pipe");
    const rota_region_t *r = conn_region(filler);
    pid_t kids[3];
    kids[0] = child_reserve(ROTA_PRIO_LOW, 100, 10000, p[1], 'L');
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 1, 5000), "low-priority child queued");
    kids[1] = child_reserve(ROTA_PRIO_NORMAL, 100, 10000, p[1], 'N');
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 2, 5000), "normal-priority child queued");
    kids[2] = child_reserve(ROTA_PRIO_HIGH, 100, 10000, p[1], 'H');
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 3, 5000), "high-priority child queued (arrived last)");
    bool waiting_shown = false;
    const rota_table_t *t = th_table();
    for (unsigned i = 0; t && i < ROTA_MAX_CLIENTS; i++)
        if (LD(&t->slots[i].pid) == kids[2] && LD(&t->slots[i].waiting) == 100) waiting_shown = true;
    th_table_free(t);
    ok(waiting_shown, "rotad's table shows the high child waiting for 100 bytes");
    char order[4] = {0}, m[2];
    for (int i = 0; i < 3; i++) {
        conn_release(filler, U0, CAP, 100);
        if (!read_pair(p[0], m, 5000)) break;
        order[i] = m[0];
        if (m[1] != '+') order[i] = '?';
    }
    is_str(order, "HNL", "waiters are served by priority, one release at a time");
    is_int(dev0_reserved(filler), 1000, "ledger total across four processes stays exact");
    /* kill -9 of a client holding memory: everything comes back at once */
    uint64_t t0 = tap_now_ns();
    kill(kids[0], SIGKILL);
    waitpid(kids[0], NULL, 0);
    ok(WAIT_FOR(dev0_reserved(filler) == 900, 2000), "kill -9 of a client returns its 100 bytes");
    in_range((double)(tap_now_ns() - t0) / 1e6, 0, 2000, "within 2 s of its death (ms)");
    for (int i = 1; i < 3; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    ok(WAIT_FOR(dev0_reserved(filler) == 700, 2000), "every dead client is reclaimed");
    ok(WAIT_FOR(LD(&r->nclients) == 1, 2000), "their slots are free");

    /* kill -9 mid-wait: a waiter that dies leaves the queue, and the next one gets the memory */
    conn_reserve(filler, U0, CAP, 300, 0, NULL, NULL);
    pid_t w1 = child_reserve(ROTA_PRIO_HIGH, 200, 10000, p[1], 'A');
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 1, 5000), "a waiter is queued");
    pid_t w2 = child_reserve(ROTA_PRIO_LOW, 200, 10000, p[1], 'B');
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 2, 5000), "a second waiter is queued");
    kill(w1, SIGKILL);
    waitpid(w1, NULL, 0);
    ok(WAIT_FOR(LD(&r->devices[0].waiters) == 1, 2000), "the killed waiter left the queue");
    conn_release(filler, U0, CAP, 200);
    ok(read_pair(p[0], m, 5000) && m[0] == 'B' && m[1] == '+', "the next waiter is served (%c%c)", m[0], m[1]);
    kill(w2, SIGKILL);
    waitpid(w2, NULL, 0);

    /* timeout */
    ok(WAIT_FOR(dev0_reserved(filler) == 800, 2000), "GPU at 800 of 1000");
    uint64_t t1 = tap_now_ns();
    is_int(conn_reserve(filler, U0, CAP, 300, 300, NULL, NULL), -ENOMEM, "a wait of 300 ms times out: -ENOMEM");
    in_range((double)(tap_now_ns() - t1) / 1e6, 290, 3000, "after its deadline (ms, tolerance 290..3000)");
    is_int(LD(&r->devices[0].waiters), 0, "a timed-out waiter leaves no trace");
    close(p[0]);
    close(p[1]);
    conn_close(filler);
}

struct waiter_arg {
    conn_t *c;
    int rc;
    uint64_t ns;
};

static void *waiter_thread(void *p)
{
    struct waiter_arg *a = p;
    uint64_t t0 = tap_now_ns();
    a->rc = conn_reserve(a->c, U0, CAP, 500, 20000, NULL, NULL);
    a->ns = tap_now_ns() - t0;
    return NULL;
}

static void test_threads_share_a_connection(void)
{
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    is_int(conn_reserve(c, U0, CAP, 800, 0, NULL, NULL), 0, "hold 800");
    struct waiter_arg a = {.c = c};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &a);
    ok(WAIT_FOR(LD(&conn_region(c)->devices[0].waiters) == 1, 5000), "one thread waits for 500");
    uint64_t t0 = tap_now_ns();
    is_int(conn_reserve(c, U0, CAP, 100, 0, NULL, NULL), -ENOMEM,
           "another thread's request is answered meanwhile (refused: it may not overtake the queued one)");
    in_range((double)(tap_now_ns() - t0) / 1e6, 0, 1000, "promptly (ms)");
    conn_release(c, U0, CAP, 800);
    pthread_join(t, NULL);
    is_int(a.rc, 0, "the waiting thread is granted after the free");
    conn_close(c);
}

static void test_bad_input(pid_t rotad)
{
    conn_t *good = open_client(ROTA_PRIO_NORMAL, 0);
    conn_reserve(good, U0, CAP, 123, 0, NULL, NULL);
    char junk[100];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
    ok(raw_send_is_dropped(junk, sizeof junk, NULL, NULL), "garbage: dropped");
    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, 0);
    h.role = ROTA_ROLE_CLIENT;
    h.weight = 1;
    ok(raw_send_is_dropped(&h, 10, NULL, NULL), "truncated header: dropped");
    ok(raw_send_is_dropped(&h, sizeof h - 4, NULL, NULL), "truncated hello: dropped");
    char big[300] = {0};
    memcpy(big, &h, sizeof h);
    ok(raw_send_is_dropped(big, sizeof big, NULL, NULL), "oversized packet: dropped");
    rota_msg_hello_t bad = h;
    bad.priority = 7;
    ok(raw_send_is_dropped(&bad, sizeof bad, NULL, NULL), "priority 7: dropped");
    bad = h;
    bad.weight = 0;
    ok(raw_send_is_dropped(&bad, sizeof bad, NULL, NULL), "weight 0: dropped");
    bad = h;
    bad.comm[15] = 'x';
    memset(bad.comm, 'x', sizeof bad.comm);
    ok(raw_send_is_dropped(&bad, sizeof bad, NULL, NULL), "unterminated comm: dropped");
    rota_msg_mem_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_RESERVE, sizeof m, 1);
    m.bytes = 1;
    m.total_mem = CAP;
    ok(raw_send_is_dropped(&m, sizeof m, NULL, NULL), "a request before hello: dropped");
    bad = h;
    bad.h.abi = 99;
    union {
        rota_msg_welcome_t w;
        char raw[128];
    } rep;
    ssize_t rl = 0;
    ok(raw_send_is_dropped(&bad, sizeof bad, &rep, &rl), "another ABI version: dropped");
    char want_abi[32];
    snprintf(want_abi, sizeof want_abi, "ABI version %u", ROTA_ABI_VERSION);
    ok(rl == sizeof rep.w && rep.w.status == -EPROTO && strstr(rep.w.reason, want_abi),
       "... after a clear answer (%s)", rl > 0 ? rep.w.reason : "none");
    /* After a valid hello, nonsense requests */
    int fd = raw_connect();
    send(fd, &h, sizeof h, MSG_NOSIGNAL);
    char b[256];
    int fds[2], nf = 2;
    proto_recv(fd, b, sizeof b, fds, &nf, 0);
    for (int i = 0; i < nf; i++) close(fds[i]);
    m.bytes = UINT64_C(1) << 60;
    send(fd, &m, sizeof m, MSG_NOSIGNAL);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ok(poll(&pf, 1, 2000) == 1 && recv(fd, b, sizeof b, 0) == 0, "a request for 2^60 bytes: dropped");
    close(fd);
    /* the channel: scribbling over it hurts nobody */
    conn_t *vandal = open_client(ROTA_PRIO_NORMAL, 0);
    conn_reserve(vandal, U0, CAP, 77, 0, NULL, NULL);
    memset(conn_channel(vandal), 0xff, sizeof(rota_channel_t));
    conn_opts_t ob = {.socket = th_sock, .role = ROTA_ROLE_OBSERVER, .weight = 1};
    conn_t *obs;
    char err[256];
    is_int(conn_open(&ob, &obs, err, sizeof err), 0, "an observer still connects after a channel was trashed");
    if (obs) conn_close(obs);
    ok(WAIT_FOR(dev0_reserved(good) == 200, 2000), "the ledger is intact (123 + 77)");
    is_int(conn_reserve(good, U0, CAP, 10, 0, NULL, NULL), 0, "the good client is still served");
    ok(kill(rotad, 0) == 0, "rotad survived all of it");
    conn_close(vandal);
    conn_close(good);
}

struct reg_arg {
    int fd;
};

static void test_many_clients(void)
{
    enum { N = 256 };
    int p[2], go[2];
    if (pipe(p) || pipe(go)) bail("pipe");
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(go[1]);
            char c;
            if (read(go[0], &c, 1) != 0) _exit(2); /* wait for the start: the parent closes the pipe */
            conn_opts_t o = {.socket = th_sock, .role = ROTA_ROLE_CLIENT, .weight = 1, .timeout_ms = 10000};
            conn_t *cl;
            char err[256];
            char r = conn_open(&o, &cl, err, sizeof err) == 0 ? '+' : '-';
            if (write(p[1], &r, 1) != 1) _exit(3);
            pause();
            _exit(0);
        }
    }
    close(go[0]);
    uint64_t t0 = tap_now_ns();
    close(go[1]);
    int good = 0;
    for (int i = 0; i < N; i++) {
        char c;
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 20000) != 1 || read(p[0], &c, 1) != 1) break;
        good += c == '+';
    }
    double secs = (double)(tap_now_ns() - t0) / 1e9;
    is_int(good, N, "256 clients register at once");
    diag("256 concurrent registrations took %.3f s (goal <= 1 s)", secs);
    in_range(secs, 0, 10, "all registered within 10 s (loaded-CI tolerance; goal 1 s)");
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    is_uint(LD(&conn_region(c)->nclients), N + 1, "257 live slots");
    for (int i = 0; i < N; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < N; i++) waitpid(kids[i], NULL, 0);
    ok(WAIT_FOR(LD(&conn_region(c)->nclients) == 1, 5000), "all slots freed after kill -9 of 256 clients");
    close(p[0]);
    close(p[1]);
    conn_close(c);
}

static void test_slot_generation(void)
{
    conn_t *a = open_client(ROTA_PRIO_NORMAL, 0);
    uint32_t slot = conn_slot(a), gen = conn_gen(a);
    conn_close(a);
    usleep(100000);
    conn_t *b = open_client(ROTA_PRIO_NORMAL, 0);
    ok(conn_slot(b) != slot || conn_gen(b) != gen, "a reused slot gets a new generation (%u/%u -> %u/%u)", slot,
       gen, conn_slot(b), conn_gen(b));
    conn_close(b);
}

static void test_rotad_death(pid_t *rotad)
{
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    conn_reserve(c, U0, CAP, 1000, 0, NULL, NULL);
    struct waiter_arg a = {.c = c};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &a);
    WAIT_FOR(LD(&conn_region(c)->devices[0].waiters) == 1, 5000);
    kill(*rotad, SIGKILL);
    waitpid(*rotad, NULL, 0);
    pthread_join(t, NULL);
    is_int(a.rc, -EPIPE, "kill -9 of rotad wakes a waiting thread with -EPIPE (it passes through)");
    in_range((double)a.ns / 1e9, 0, 5, "promptly (s), not after its 20 s wait");
    ok(!conn_alive(c), "the connection is dead");
    is_int(conn_reserve(c, U0, CAP, 1, 0, NULL, NULL), -EPIPE, "later requests fail fast");
    conn_close(c);
    /* reattach: a fresh rotad over the stale socket; the client re-registers its live bytes */
    *rotad = th_rotad_start();
    c = open_client(ROTA_PRIO_NORMAL, 0);
    is_int(conn_adopt(c, U0, CAP, 1000), 0, "re-register 1000 live bytes with the new rotad");
    ok(WAIT_FOR(dev0_reserved(c) == 1000, 2000), "the new ledger has them");
    is_int(conn_reserve(c, U0, CAP, 1, 0, NULL, NULL), -ENOMEM, "and enforces them");
    conn_close(c);
}

static void test_credit(void)
{
    static const uint8_t U1[16] = {0xbb, 7};
    const uint64_t M = 1 << 20, GB = UINT64_C(1) << 30;
    conn_t *a = open_client(ROTA_PRIO_NORMAL, 0);
    const rota_region_t *r = conn_region(a);
    int dev = -1;
    ok(!conn_credit_take(a, 1, 1), "no credit before the first grant");
    is_int(conn_reserve(a, U1, GB, M, 0, &dev, NULL), 0, "reserve 1M on a 1G GPU");
    ok(dev > 0, "a second GPU entry (%d)", dev);
    is_uint(LD(&r->devices[dev].reserved), 65 * M, "the grant came with 64M of credit, charged to the client");
    is_uint(LD(&conn_channel(a)->credit[dev]), 64 * M, "credit in the channel");
    int fast = 0;
    for (int i = 0; i < 100; i++) fast += conn_credit_take(a, dev, M);
    is_int(fast, 64, "64 1M allocations from credit without a round trip, and no more");
    is_uint(LD(&r->devices[dev].reserved), 65 * M, "the ledger already counted them");
    conn_release(a, U1, GB, 65 * M);
    ok(WAIT_FOR(LD(&r->devices[dev].reserved) == 64 * M, 2000),
       "releasing them all: the ledger keeps only a refilled 64M credit");
    is_uint(LD(&conn_channel(a)->credit[dev]), 64 * M, "the credit is refilled on release (no waiters)");
    is_int(conn_reserve(a, U1, GB, M, 0, NULL, NULL), 0, "another grant");
    ok(WAIT_FOR(LD(&r->devices[dev].reserved) == 65 * M, 2000), "credit is full: nothing more charged");
    conn_t *b = open_client(ROTA_PRIO_NORMAL, 0);
    is_int(conn_reserve(b, U1, GB, GB - 2 * M, 0, NULL, NULL), 0,
           "under pressure another client gets the memory: unused credit is taken back");
    is_uint(LD(&conn_channel(a)->credit[dev]), 0, "the first client's credit is gone");
    ok(!conn_credit_take(a, dev, 1), "and cannot be used any more");
    is_uint(LD(&r->devices[dev].reserved), GB - M, "ledger: 1M + (1G - 2M), exact");
    conn_close(b);
    conn_close(a);
}

/* Frees go back into the client's credit (conn_credit_put), without a message, while it stays within rotad's
 * credit_keep and nobody waits; past keep, one RELEASE takes it down to half; with a waiter, everything goes back. */
static void test_credit_put(void)
{
    static const uint8_t U3[16] = {0xbb, 9};
    const uint64_t M = 1 << 20, GB = UINT64_C(1) << 30;
    conn_t *a = open_client(ROTA_PRIO_NORMAL, 0);
    const rota_region_t *r = conn_region(a);
    _Atomic uint64_t *credit = conn_channel(a)->credit;
    int dev = -1;
    is_uint(LD(&r->credit_keep), 64 * M, "rotad publishes how much credit a client may keep (its credit SIZE)");
    is_int(conn_reserve(a, U3, GB, M, 0, &dev, NULL), 0, "reserve 1M: 64M of credit with it");
    ok(dev > 0, "a GPU entry of its own (%d)", dev);
    int fast = 0;
    for (int i = 0; i < 4; i++) fast += conn_credit_take(a, dev, M);
    is_int(fast, 4, "4 1M allocations from credit");
    is_uint(conn_credit_put(a, dev, 4 * M), 0, "their frees all go back into the credit: nothing to send");
    is_uint(LD(&credit[dev]), 64 * M, "the credit has them");
    is_uint(LD(&r->devices[dev].reserved), 65 * M, "the ledger is unchanged: they stay charged, unused");
    is_uint(conn_credit_put(a, dev, M), 0, "past 64M but within 96M (1.5 x keep): still kept");
    is_uint(LD(&credit[dev]), 65 * M, "the credit has 65M");
    is_int(conn_reserve(a, U3, GB, 40 * M, 0, NULL, NULL), 0, "40M more, asked of rotad (the credit is full)");
    is_uint(LD(&r->devices[dev].reserved), 105 * M, "charged: 40M in use, 65M of credit");
    is_uint(conn_credit_put(a, dev, 40 * M), 73 * M, "its free takes the credit past 96M: all above 32M goes back");
    is_uint(LD(&credit[dev]), 32 * M, "the credit keeps half of keep");
    conn_release(a, U3, GB, 73 * M);
    ok(WAIT_FOR(LD(&r->devices[dev].reserved) == 64 * M, 2000),
       "one RELEASE returns it (then rotad refills the credit): nothing in use, 64M of credit");
    is_uint(LD(&credit[dev]), 64 * M, "credit refilled");
    is_uint(conn_credit_put(a, -1, M), M, "a GPU rotad never named: everything goes back by message");
    conn_close(a);
}

struct big_waiter {
    conn_t *c;
    const uint8_t *uuid;
    uint64_t total, bytes;
    int rc;
};

static void *big_waiter_thread(void *p)
{
    struct big_waiter *w = p;
    w->rc = conn_reserve(w->c, w->uuid, w->total, w->bytes, 5000, NULL, NULL);
    return NULL;
}

/* While requests wait on a GPU, a client's unused credit is taken back whenever rotad serves the queue: a free
 * that went into the credit just as a waiter queued (its waiter check raced) is not stranded there. */
static void test_credit_waiters(void)
{
    static const uint8_t U4[16] = {0xbb, 10};
    const uint64_t M = 1 << 20, GB = UINT64_C(1) << 30;
    conn_t *a = open_client(ROTA_PRIO_NORMAL, 0), *b = open_client(ROTA_PRIO_NORMAL, 0);
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    const rota_region_t *r = conn_region(a);
    int dev = -1;
    is_int(conn_reserve(a, U4, GB, 100 * M, 0, &dev, NULL), 0, "A holds 100M (and 64M of credit)");
    is_int(conn_reserve(b, U4, GB, 900 * M, 0, NULL, NULL), 0, "B gets 900M: A's credit is taken back for it");
    struct big_waiter w = {.c = b, .uuid = U4, .total = GB, .bytes = 50 * M};
    pthread_t t;
    pthread_create(&t, NULL, big_waiter_thread, &w);
    ok(WAIT_FOR(LD(&r->devices[dev].waiters) == 1, 5000), "B queues for 50M more");
    is_uint(conn_credit_put(a, dev, M), M, "with a waiter, a free goes back by message, not into the credit");
    is_uint(LD(&conn_channel(a)->credit[dev]), 0, "A's credit stays empty");
    /* A free that raced the waiter: into the credit word after rotad's last revoke. */
    atomic_fetch_add(&conn_channel(a)->credit[dev], 100 * M);
    is_int(conn_reserve(c, U4, GB, 10 * M, 0, NULL, NULL), 0,
           "the next request that reaches the queue takes A's stranded credit back: C's 10M fits");
    pthread_join(t, NULL);
    is_int(w.rc, 0, "and B's queued 50M is granted");
    is_uint(LD(&conn_channel(a)->credit[dev]), 0, "A's credit is gone");
    is_uint(LD(&r->devices[dev].reserved), 960 * M, "ledger: 900M + 50M + 10M, exact");
    conn_close(c);
    conn_close(b);
    conn_close(a);
}

static void test_drain(pid_t rotad)
{
    conn_t *c = open_client(ROTA_PRIO_NORMAL, 0);
    conn_reserve(c, U0, CAP, 1000, 0, NULL, NULL);
    struct waiter_arg a = {.c = c};
    pthread_t t;
    pthread_create(&t, NULL, waiter_thread, &a);
    WAIT_FOR(LD(&conn_region(c)->devices[0].waiters) == 1, 5000);
    is_int(th_rotad_stop(rotad), 0, "SIGTERM: rotad exits 0");
    pthread_join(t, NULL);
    is_int(a.rc, -ESHUTDOWN, "the waiting thread got -ESHUTDOWN (drained, passes through)");
    ok(access(th_sock, F_OK) < 0, "the socket is removed");
    conn_close(c);
}

/* A per-group limit from the config file, the group being this process's own cgroup. */
static void test_group(void)
{
    char cg[400], conf[160];
    if (cgroup_of(getpid(), cg, sizeof cg)) {
        skip("no cgroup v2 path for this process: group limit not testable");
        return;
    }
    snprintf(conf, sizeof conf, "%s/rotad.conf", th_dir);
    FILE *f = fopen(conf, "w");
    if (!f) bail("cannot write %s", conf);
    fprintf(f, "# the test's own cgroup\ngroup %s limit 300\ncredit 0\n", cg);
    fclose(f);
    const char *args[] = {"--config", conf, NULL};
    pid_t rotad = th_rotad_start_args(args);
    conn_t *a = open_client(ROTA_PRIO_NORMAL, 0), *b = open_client(ROTA_PRIO_NORMAL, 0);
    rota_slot_t sa = th_slot(conn_slot(a));
    is_int(LD(&sa.group), 0, "a process of cgroup %s is in group 0", cg);
    uint64_t lim = 0;
    is_int(conn_reserve(a, U0, CAP, 200, 0, NULL, &lim), 0, "group member A: 200 of the group's 300");
    is_uint(lim, 300, "its effective limit is the group's");
    is_int(conn_reserve(b, U0, CAP, 200, 0, NULL, NULL), -EDQUOT, "member B: 200 more is over the group limit");
    is_int(conn_reserve(b, U0, CAP, 100, 0, NULL, NULL), 0, "but 100 fits");
    is_uint(th_group_used(0, 0), 300, "the group's usage is shared by its members");
    conn_close(a);
    ok(WAIT_FOR(th_group_used(0, 0) == 100, 2000), "A's exit returns its share of the group");
    conn_close(b);
    unlink(conf);
    is_int(th_rotad_stop(rotad), 0, "rotad with a config stops cleanly");
}

int main(void)
{
    th_setup("server");
    pid_t rotad = th_rotad_start();
    test_basic();
    test_across_processes_and_priority();
    test_threads_share_a_connection();
    test_bad_input(rotad);
    test_slot_generation();
    test_many_clients();
    test_credit();
    test_credit_put();
    test_credit_waiters();
    test_rotad_death(&rotad);
    test_drain(rotad);
    test_group();
    th_cleanup();
    return done_testing();
}
