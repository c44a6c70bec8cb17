/* conn.c - rotad client connection: HELLO/WELCOME with fd passing, and requests shared by many threads. */
#include "runtime/lib/conn.h"

#include "runtime/lib/errmsg.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/sockpath.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/*
 * Many threads of one process share the connection. Requests carry a sequence number; whichever waiting
 * thread holds the reader role receives answers and hands each to its owner (leader/follower), so one thread
 * queued for memory never delays another's answer. A thread blocks in poll() or on a condition variable,
 * never spins. EOF on the socket marks the connection dead and wakes everyone.
 */

struct conn_pending {
    uint32_t seq;
    bool done;
    rota_msg_result_t res;
    struct conn_pending *next;
};

struct conn {
    int fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool reading;
    _Atomic bool dead;
    uint32_t next_seq;
    struct conn_pending *pending;
    const rota_region_t *region;
    rota_channel_t *channel;
    rota_board_t *board;
    bool high;             /* the board came read-write: rotad registered this client as high priority */
    uint32_t slot, gen;
};

static uint64_t conn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits for one packet within timeout_ms; returns proto_recv's result or -ETIMEDOUT. */
static ssize_t conn_recv_timed(int fd, void *buf, size_t cap, int *fds, int *nfds, uint64_t timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do {
        r = poll(&p, 1, timeout_ms > 0x7fffffff ? 0x7fffffff : (int)timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    if (r == 0) return -ETIMEDOUT;
    return proto_recv(fd, buf, cap, fds, nfds, MSG_DONTWAIT);
}

static int conn_map(int fd, size_t size, int prot, void **out)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    if ((uint64_t)st.st_size < size) return -EBADMSG;
    /* Populated now: a page fault inside the launch gate (the first board mark of a high client, say) would
     * cost more than everything else the gate does. */
    void *p = mmap(NULL, size, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return -errno;
    *out = p;
    return 0;
}

bool conn_peer_trusted(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

/* Connects to path and checks who listens there (SO_PEERCRED: root or this user). 0 or -errno with err set. */
static int conn_connect(int fd, const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        int rc = -errno;
        if (rc == -ENOENT || rc == -ECONNREFUSED)
            errmsg(err, errlen, 0, "rotad is not running (nothing listens on %s)", path);
        else
            errmsg(err, errlen, 0, "unable to connect to rotad at %s: %s", path, strerror(errno));
        return rc;
    }
    /* Anyone may create a socket where a per-user rotad would be (/tmp/rota-UID when XDG_RUNTIME_DIR is unset,
     * before that user's rotad): only a rotad of root or of this user is believed. */
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
        int rc = -errno;
        errmsg(err, errlen, 0, "unable to check who listens on %s: %s", path, strerror(errno));
        return rc;
    }
    if (!conn_peer_trusted(cr.uid)) {
        errmsg(err, errlen, 0, "refusing the rotad at %s: it runs as uid %u, neither root nor this user (uid %u)",
               path, (unsigned)cr.uid, (unsigned)geteuid());
        return -EPERM;
    }
    return 0;
}

/* Connects c->fd to the first of paths[0..npaths) that answers: the node-wide socket first; not there (or refused)
 * means the next candidate, and the last one's error is the one reported. *path: the one tried last. */
static int conn_dial(conn_t *c, char (*paths)[SOCKPATH_MAX], int npaths, const char **path, char *err,
                     size_t errlen)
{
    int rc = 0;
    for (int i = 0; i < npaths; i++) {
        *path = paths[i];
        c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            rc = -errno;
            errmsg(err, errlen, 0, "unable to create a socket: %s", strerror(errno));
            return rc;
        }
        rc = conn_connect(c->fd, *path, err, errlen);
        if (!rc) return 0;
        close(c->fd);
        c->fd = -1;
        if (i + 1 < npaths && (rc == -ENOENT || rc == -ECONNREFUSED || rc == -EACCES || rc == -EPERM)) continue;
        return rc;
    }
    return rc;
}

/* Sends the HELLO o describes. 0 or -errno. */
static int conn_hello(const conn_t *c, const conn_opts_t *o, const char *path, char *err, size_t errlen)
{
    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, 0);
    h.role = o->role;
    h.priority = o->priority;
    h.weight = o->weight ? o->weight : 1000;
    h.max_inflight = o->max_inflight;
    h.mem_limit = o->mem_limit;
    if (o->grant_token) memcpy(h.grant_token, o->grant_token, sizeof h.grant_token);
    FILE *f = fopen("/proc/self/comm", "re");
    if (f) {
        if (fgets(h.comm, sizeof h.comm, f)) h.comm[strcspn(h.comm, "\n")] = 0;
        fclose(f);
    }
    int rc = proto_send(c->fd, &h, sizeof h, NULL, 0);
    if (rc) errmsg(err, errlen, 0, "unable to register with rotad at %s: %s", path, strerror(-rc));
    return rc;
}

/* Receives rotad's WELCOME into *w with its descriptors (fds[0..*nfds), which the caller closes, whatever the
 * outcome) and checks it: a welcome of our ABI, accepting us, with the descriptors our role gets. 0 or -errno. */
static int conn_welcome(const conn_t *c, const conn_opts_t *o, const char *path, unsigned timeout,
                        rota_msg_welcome_t *w, int *fds, int *nfds, char *err, size_t errlen)
{
    union {
        rota_msg_welcome_t w;
        char raw[ROTA_MSG_MAX];
    } u;
    ssize_t n = conn_recv_timed(c->fd, &u, sizeof u, fds, nfds, timeout);
    if (n <= 0) {
        errmsg(err, errlen, 0, "rotad at %s did not answer the registration: %s", path,
               n == 0 ? "connection closed" : strerror((int)-n));
        return n == 0 ? -EPIPE : (int)n;
    }
    uint32_t abi = 0;
    const char *why;
    int type = proto_check(&u, (size_t)n, &abi, &why);
    if (type == -EPROTO || (type == ROTA_MSG_WELCOME && u.w.status == -EPROTO)) {
        errmsg(err, errlen, 0, "rotad at %s speaks rota ABI version %u, this program speaks version %u",
               path, type == -EPROTO ? abi : u.w.abi, ROTA_ABI_VERSION);
        return -EPROTO;
    }
    if (type != ROTA_MSG_WELCOME) {
        errmsg(err, errlen, 0, "rotad at %s sent an invalid registration answer: %s", path,
               type < 0 ? why : "not a welcome");
        return -EBADMSG;
    }
    if (u.w.status) {
        errmsg(err, errlen, 0, "rotad at %s refused the registration: %s", path, u.w.reason);
        return u.w.status;
    }
    bool client = o->role == ROTA_ROLE_CLIENT;
    if (*nfds != (client ? 3 : 1) || (client && !u.w.channel_size)) {
        errmsg(err, errlen, 0, "rotad at %s sent %d descriptors with its answer", path, *nfds);
        return -EBADMSG;
    }
    *w = u.w;
    return 0;
}

/* Maps what the WELCOME passed: the region (read-only), and for a client its channel and the board (read-write
 * only for a high client: rotad hands the others a read-only descriptor), each checked. 0 or -errno, nothing
 * left mapped. */
static int conn_map_all(conn_t *c, bool client, const int *fds, char *err, size_t errlen)
{
    void *region = NULL, *channel = NULL, *board = NULL;
    const char *why;
    int rc = conn_map(fds[0], ROTA_REGION_MAP_SIZE, PROT_READ, &region);
    if (rc) {
        errmsg(err, errlen, 0, "unable to map rotad's region: %s", strerror(-rc));
        return rc;
    }
    rc = proto_region_check(region, ROTA_REGION_MAP_SIZE, &why);
    if (rc) {
        errmsg(err, errlen, 0, "rotad's region is unusable: %s", why);
        goto out_unmap_region;
    }
    if (client) {
        rc = conn_map(fds[1], ROTA_CHANNEL_MAP_SIZE, PROT_READ | PROT_WRITE, &channel);
        if (rc) {
            errmsg(err, errlen, 0, "unable to map the client channel: %s", strerror(-rc));
            goto out_unmap_region;
        }
        rc = proto_channel_check(channel, ROTA_CHANNEL_MAP_SIZE, &why);
        if (rc) {
            errmsg(err, errlen, 0, "rotad's channel is unusable: %s", why);
            goto out_unmap_channel;
        }
        int fl = fcntl(fds[2], F_GETFL);
        c->high = fl >= 0 && (fl & O_ACCMODE) == O_RDWR;
        rc = conn_map(fds[2], ROTA_BOARD_MAP_SIZE, c->high ? PROT_READ | PROT_WRITE : PROT_READ, &board);
        if (rc) {
            errmsg(err, errlen, 0, "unable to map rotad's board: %s", strerror(-rc));
            goto out_unmap_channel;
        }
        rc = proto_board_check(board, ROTA_BOARD_MAP_SIZE, &why);
        if (rc) {
            errmsg(err, errlen, 0, "rotad's board is unusable: %s", why);
            munmap(board, ROTA_BOARD_MAP_SIZE);
            goto out_unmap_channel;
        }
    }
    c->region = region;
    c->channel = channel;
    c->board = board;
    return 0;

out_unmap_channel:
    munmap(channel, ROTA_CHANNEL_MAP_SIZE);
out_unmap_region:
    munmap(region, ROTA_REGION_MAP_SIZE);
    c->high = false;
    return rc;
}

int conn_open(const conn_opts_t *o, conn_t **out, char *err, size_t errlen)
{
    char paths[2][SOCKPATH_MAX];
    int npaths = 1, rc;
    if (o->socket && o->socket[0]) rc = sockpath_resolve(o->socket, paths[0], sizeof paths[0]);
    else rc = npaths = sockpath_candidates(paths, 2);
    if (rc < 0) {
        errmsg(err, errlen, 0, "socket path is too long");
        return rc;
    }
    unsigned timeout = o->timeout_ms ? o->timeout_ms : 5000;
    conn_t *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    const char *path = NULL;
    rc = conn_dial(c, paths, npaths, &path, err, errlen);
    if (rc) goto out_free;
    rc = conn_hello(c, o, path, err, errlen);
    if (rc) goto out_close;
    rota_msg_welcome_t w = {0};
    int fds[3] = {-1, -1, -1}, nfds = 3;
    rc = conn_welcome(c, o, path, timeout, &w, fds, &nfds, err, errlen);
    if (!rc) rc = conn_map_all(c, o->role == ROTA_ROLE_CLIENT, fds, err, errlen);
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (rc) goto out_close;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->slot = w.slot;
    c->gen = w.gen;
    *out = c;
    return 0;

out_close:
    close(c->fd);
out_free:
    free(c);
    return rc;
}

/* Called with mu held by the reader after one receive attempt. */
static void conn_dispatch_locked(conn_t *c, const void *buf, ssize_t n)
{
    if (n == -EAGAIN || n == -ETIMEDOUT) return;
    if (n <= 0) {
        c->dead = true;
        return;
    }
    const char *why;
    if (proto_check(buf, (size_t)n, NULL, &why) != ROTA_MSG_RESULT) {
        c->dead = true; /* rotad never sends anything else: the stream cannot be trusted any more */
        return;
    }
    const rota_msg_result_t *r = buf;
    for (struct conn_pending *p = c->pending; p; p = p->next)
        if (p->seq == r->h.seq && !p->done) {
            p->res = *r;
            p->done = true;
            return;
        }
}

static void conn_unlink_locked(conn_t *c, struct conn_pending *me)
{
    for (struct conn_pending **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == me) {
            *pp = me->next;
            return;
        }
}

int conn_reserve(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes,
                 unsigned wait_ms, int *dev, uint64_t *limit)
{
    if (dev) *dev = -1;
    if (limit) *limit = 0;
    if (c->dead) return -EPIPE;
    struct conn_pending me = {0};
    rota_msg_mem_t m = {0};
    pthread_mutex_lock(&c->mu);
    me.seq = ++c->next_seq;
    me.next = c->pending;
    c->pending = &me;
    pthread_mutex_unlock(&c->mu);

    proto_hdr_init(&m.h, ROTA_MSG_RESERVE, sizeof m, me.seq);
    memcpy(m.uuid, uuid, ROTA_UUID_LEN);
    m.total_mem = total_mem;
    m.bytes = bytes;
    m.wait_ms = wait_ms;
    int rc = proto_send(c->fd, &m, sizeof m, NULL, 0);

    pthread_mutex_lock(&c->mu);
    if (rc) c->dead = true;
    uint64_t deadline = conn_now_ms() + wait_ms + 5000;
    while (!me.done && !c->dead) {
        uint64_t now = conn_now_ms();
        if (now >= deadline) {
            c->dead = true; /* rotad stopped answering: fail open from now on */
            shutdown(c->fd, SHUT_RDWR);
            break;
        }
        if (!c->reading) {
            c->reading = true;
            pthread_mutex_unlock(&c->mu);
            char buf[ROTA_MSG_MAX];
            ssize_t n = conn_recv_timed(c->fd, buf, sizeof buf, NULL, NULL, deadline - now);
            pthread_mutex_lock(&c->mu);
            c->reading = false;
            conn_dispatch_locked(c, buf, n);
            pthread_cond_broadcast(&c->cv);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(deadline / 1000), .tv_nsec = (long)(deadline % 1000) * 1000000};
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
    }
    conn_unlink_locked(c, &me);
    pthread_cond_broadcast(&c->cv); /* hand the reader role on */
    pthread_mutex_unlock(&c->mu);
    if (!me.done) return -EPIPE;
    if (dev) *dev = me.res.dev;
    if (limit) *limit = me.res.limit;
    return me.res.status;
}

static int conn_oneway(conn_t *c, unsigned type, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem,
                       uint64_t bytes)
{
    if (c->dead) return -EPIPE;
    rota_msg_mem_t m = {0};
    proto_hdr_init(&m.h, type, sizeof m, 0);
    memcpy(m.uuid, uuid, ROTA_UUID_LEN);
    m.total_mem = total_mem;
    m.bytes = bytes;
    int rc = proto_send(c->fd, &m, sizeof m, NULL, 0);
    if (rc) {
        c->dead = true;
        return -EPIPE;
    }
    return 0;
}

int conn_release(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes)
{
    return conn_oneway(c, ROTA_MSG_RELEASE, uuid, total_mem, bytes);
}

int conn_adopt(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes)
{
    return conn_oneway(c, ROTA_MSG_ADOPT, uuid, total_mem, bytes);
}

#define CONN_PLACE_SEQ 0x7fff0001u /* not one conn_reserve hands out soon: its RESULT is never taken for another */

/* poll() for input until ms after t0 (conn_now_ms) have passed, across signals: poll's result. */
static int conn_poll_until(int fd, uint64_t t0, uint64_t ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        uint64_t now = conn_now_ms(), end = t0 + ms;
        int pr = poll(&p, 1, now >= end ? 0 : end - now > 0x7fffffff ? 0x7fffffff : (int)(end - now));
        if (pr >= 0 || errno != EINTR) return pr < 0 ? -errno : pr;
    }
}

int conn_place(conn_t *c, const conn_place_t *p, int *dev, uint64_t *waited_ms)
{
    if (p->ncand > ROTA_MAX_DEVICES) return -EINVAL;
    rota_msg_place_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_PLACE, sizeof m, CONN_PLACE_SEQ);
    m.ncand = p->ncand;
    m.flags = (p->ncand ? 0 : ROTA_PLACE_KNOWN) | prio_place_flags(p->prio);
    m.mem = p->mem > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : p->mem;
    m.wait_ms = p->wait_ms;
    if (p->ncand) memcpy(m.cand, p->cand, sizeof m.cand[0] * p->ncand);
    int rc = proto_send(c->fd, &m, sizeof m, NULL, 0);
    if (rc) return rc;
    /* rotad answers at once, unless the job fits nowhere yet: then when a GPU has room, or wait_ms later. */
    uint64_t t0 = conn_now_ms(), limit = (uint64_t)p->wait_ms + p->answer_ms;
    int pr = 0;
    if (p->note && p->note_ms && p->note_ms < limit) {
        pr = conn_poll_until(c->fd, t0, p->note_ms);
        if (pr == 0) p->note(p->arg);
    }
    if (pr == 0) pr = conn_poll_until(c->fd, t0, limit);
    if (pr < 0) return pr;
    if (pr == 0) return -ETIMEDOUT;
    if (waited_ms) *waited_ms = conn_now_ms() - t0;
    char buf[ROTA_MSG_MAX];
    ssize_t got = proto_recv(c->fd, buf, sizeof buf, NULL, NULL, 0);
    const char *why;
    if (got <= 0 || proto_check(buf, (size_t)got, NULL, &why) != ROTA_MSG_RESULT) return -EBADMSG;
    rota_msg_result_t res;
    memcpy(&res, buf, sizeof res);
    if (res.h.seq != CONN_PLACE_SEQ) return -EBADMSG;
    if (res.status) return res.status < 0 ? res.status : -EBADMSG;
    *dev = res.dev;
    return 0;
}

#define CONN_LIST_SEQ 0x7fff0002u /* as CONN_PLACE_SEQ */

/* One LIST round trip: the sealed copy's descriptor in *fd, or -errno (rotad's -EAGAIN included). */
static int conn_list_once(conn_t *c, int *fd)
{
    rota_msg_list_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_LIST, sizeof m, CONN_LIST_SEQ);
    int rc = proto_send(c->fd, &m, sizeof m, NULL, 0);
    if (rc) return rc;
    int pr = conn_poll_until(c->fd, conn_now_ms(), 5000);
    if (pr < 0) return pr;
    if (pr == 0) return -ETIMEDOUT;
    char buf[ROTA_MSG_MAX];
    int fds[1] = {-1}, nfds = 1;
    ssize_t got = proto_recv(c->fd, buf, sizeof buf, fds, &nfds, 0);
    const char *why;
    rc = -EBADMSG;
    if (got <= 0 || proto_check(buf, (size_t)got, NULL, &why) != ROTA_MSG_RESULT) goto out;
    rota_msg_result_t res;
    memcpy(&res, buf, sizeof res);
    if (res.h.seq != CONN_LIST_SEQ) goto out;
    if (res.status) {
        rc = res.status;
        goto out;
    }
    if (nfds != 1 || fds[0] < 0) goto out;
    *fd = fds[0];
    return 0;
out:
    if (nfds == 1 && fds[0] >= 0) close(fds[0]);
    return rc;
}

int conn_table(conn_t *c, const rota_table_t **out)
{
    int fd = -1, rc = -EAGAIN;
    for (int tries = 0; tries < 20 && rc == -EAGAIN; tries++) {
        if (tries) nanosleep(&(struct timespec){0, (ROTA_LIST_MIN_MS + 1) * 1000000L}, NULL);
        rc = conn_list_once(c, &fd);
    }
    if (rc) return rc;
    /* Mapped only once it cannot shrink under the mapping (SIGBUS) nor change: rotad seals its copies. */
    int seals = fcntl(fd, F_GET_SEALS);
    void *p = NULL;
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_WRITE)) != (F_SEAL_SHRINK | F_SEAL_WRITE)) {
        rc = -EBADMSG;
        goto out;
    }
    rc = conn_map(fd, ROTA_TABLE_MAP_SIZE, PROT_READ, &p);
    if (rc) goto out;
    const char *why;
    rc = proto_table_check(p, ROTA_TABLE_MAP_SIZE, &why);
    if (rc) {
        munmap(p, ROTA_TABLE_MAP_SIZE);
        goto out;
    }
    *out = p;
out:
    close(fd);
    return rc;
}

void conn_table_free(const rota_table_t *t)
{
    if (t) munmap((void *)t, ROTA_TABLE_MAP_SIZE);
}

bool conn_credit_take(conn_t *c, int dev, uint64_t bytes)
{
    if (!c->channel || dev < 0 || dev >= ROTA_MAX_DEVICES || c->dead) return false;
    _Atomic uint64_t *w = &c->channel->credit[dev];
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
    while (cur >= bytes)
        if (atomic_compare_exchange_weak_explicit(w, &cur, cur - bytes, memory_order_acq_rel, memory_order_relaxed))
            return true;
    return false;
}

uint64_t conn_credit_put(conn_t *c, int dev, uint64_t bytes)
{
    if (!c->channel || dev < 0 || dev >= ROTA_MAX_DEVICES || c->dead) return bytes;
    uint64_t keep = atomic_load_explicit(&c->region->credit_keep, memory_order_relaxed);
    const _Atomic uint32_t *waiters = &c->region->devices[dev].waiters;
    if (!keep || atomic_load_explicit(waiters, memory_order_relaxed)) return bytes;
    _Atomic uint64_t *w = &c->channel->credit[dev];
    /* seq_cst, and so is the load of waiters after it: rotad publishes a waiter, then (fence) exchanges the word
     * with 0. Either rotad's exchange sees these bytes, or this load sees its waiter: never neither. */
    uint64_t now = atomic_fetch_add(w, bytes) + bytes;
    uint64_t target = 0; /* a waiter: everything goes back */
    if (!atomic_load(waiters)) {
        /* Past 1.5 x keep, down to half of keep at once: one RELEASE for many frees. Not at keep itself: rotad
         * tops the credit up to keep after a RELEASE, whatever the client has in use at that moment, and the
         * free of that would go past keep again and again. */
        if (now <= keep + keep / 2) return 0;
        target = keep / 2;
    }
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
    while (cur > target)
        if (atomic_compare_exchange_weak_explicit(w, &cur, target, memory_order_acq_rel, memory_order_relaxed))
            return cur - target;
    return 0; /* what is missing went to a concurrent allocation or back to rotad (its exchange): counted there */
}

bool conn_alive(conn_t *c)
{
    if (c->dead) return false;
    /* A dead peer shows as POLLHUP even when no thread is reading. */
    struct pollfd p = {.fd = c->fd, .events = 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) c->dead = true;
    return !c->dead;
}

const rota_region_t *conn_region(const conn_t *c) { return c->region; }
rota_channel_t *conn_channel(const conn_t *c) { return c->channel; }
rota_board_t *conn_board(const conn_t *c) { return c->board; }
bool conn_high(const conn_t *c) { return c->high; }
uint32_t conn_slot(const conn_t *c) { return c->slot; }
uint32_t conn_gen(const conn_t *c) { return c->gen; }
int conn_fd(const conn_t *c) { return c->fd; }

int conn_region_device(const conn_t *c, const uint8_t uuid[ROTA_UUID_LEN])
{
    unsigned n = atomic_load_explicit(&c->region->ndevices, memory_order_acquire);
    if (n > ROTA_MAX_DEVICES) n = ROTA_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++)
        if (!memcmp(c->region->devices[i].uuid, uuid, ROTA_UUID_LEN)) return (int)i;
    return -1;
}

static void conn_unmap(conn_t *c)
{
    if (c->region) munmap((void *)c->region, ROTA_REGION_MAP_SIZE);
    if (c->channel) munmap(c->channel, ROTA_CHANNEL_MAP_SIZE);
    if (c->board) munmap(c->board, ROTA_BOARD_MAP_SIZE);
    c->region = NULL;
    c->channel = NULL;
    c->board = NULL;
}

void conn_close(conn_t *c)
{
    if (!c) return;
    close(c->fd);
    conn_unmap(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void conn_abandon(conn_t *c)
{
    if (!c) return;
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    conn_unmap(c);
}
