/* server.c - rotad's event loop: accepts clients, registers them (SO_PEERCRED, memfds), runs the ledger. */
#include "runtime/server.h"

#include "runtime/ledger.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"
#include "runtime/metrics.h"
#include "runtime/notify.h"
#include "runtime/place.h"
#include "runtime/region.h"
#include "runtime/reload.h"
#include "runtime/sched.h"
#include "runtime/stats.h"
#include "runtime/waitq.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

typedef struct client {
    int fd;
    int slot;              /* -1 until a client registered (always -1 for observers) */
    uint32_t gen;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t accepted_ns;  /* CLOCK_MONOTONIC of accept: HELLO is due within hello-timeout-ms */
    bool capped;           /* counted in its user's connections (not root, not rotad's user) */
    bool slot_counted;     /* counted in its user's clients */
    unsigned role;         /* 0 until HELLO */
    unsigned prio;
    rota_channel_t *ch;
    uint32_t devmask;      /* GPUs this client asked for */
    bool doomed;           /* to be dropped at the end of this batch of events */
    bool channel_warned;
    bool reserved;         /* sent a RESERVE */
    uint64_t list_ns;      /* CLOCK_MONOTONIC of its last LIST copy (ROTA_LIST_MIN_MS apart) */
    struct client *prev, *next;
} client_t;

struct server {
    server_opts_t o;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int lock_fd, listen_fd, epoll_fd, signal_fd;
    region_t rg;
    waitq_t q;
    sched_t *sched;    /* launch scheduling thread (runtime/sched.c) */
    place_t pl;            /* pending GPU placements (issue 5) */
    client_t *clients;
    client_t *by_slot[ROTA_MAX_CLIENTS];
    uint32_t next_gen;
    bool stopping;
    int listen_tag, signal_tag; /* their addresses are the epoll tags */
    uint32_t uid_n, uid_cap;    /* per-user connections and clients (server_user), for the caps in config.h */
    struct server_user {
        uint32_t uid;
        uint32_t conns, slots;
    } *users;
    unsigned nfresh;            /* connections that have not sent HELLO yet */
    bool stale;                 /* the socket was left by a rotad that did not stop cleanly: its clients return */
    uint64_t grace_end_ns;      /* until then, a RESERVE that fits waits (its clients re-register first) */
    int reserve_fd;             /* spare descriptor: given up to accept-and-close when out of descriptors */
    config_t defcfg;            /* when the caller passed none */
    uint64_t log_window_ns;     /* server_log_limited: the current one-second window, its lines, those left out */
    unsigned log_lines;
    unsigned long log_dropped;
};

static void server_log(const server_t *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void server_log(const server_t *s, int level, const char *fmt, ...)
{
    static const char *const names[] = {"warning", "info", "debug"};
    if (level > s->o.log_level) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rotad: %s: %s\n", names[level], line);
}

#define ROTA_STR1(x) #x
#define ROTA_STR(x) ROTA_STR1(x)

/* Warnings caused by clients: at most SERVER_LOG_BURST a second, then one line saying how many were left out, so a
 * client (or thousands of connections) cannot flood the log or spend rotad's time on it. */
#define SERVER_LOG_BURST 20
static void server_log_client(server_t *s, const client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int server_fail(char *err, size_t n, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int server_fail(char *err, size_t n, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return code;
}

static uint64_t server_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A warning some client caused, within the rate limit (SERVER_LOG_BURST a second). */
static void server_log_limited(server_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void server_log_limited(server_t *s, const char *fmt, ...)
{
    if (s->o.log_level < 0) return;
    uint64_t now = server_now_ns();
    if (now - s->log_window_ns >= 1000000000u) {
        if (s->log_dropped)
            server_log(s, 0, "%lu more warnings about clients in the last second left out", s->log_dropped);
        s->log_window_ns = now;
        s->log_lines = 0;
        s->log_dropped = 0;
    }
    if (s->log_lines >= SERVER_LOG_BURST) {
        s->log_dropped++;
        return;
    }
    s->log_lines++;
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    server_log(s, 0, "%s", line);
}

static void server_log_client(server_t *s, const client_t *c, const char *fmt, ...)
{
    char line[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c->slot >= 0) server_log_limited(s, "client pid %d uid %u (slot %d): %s", (int)c->pid, (unsigned)c->uid,
                                         c->slot, line);
    else server_log_limited(s, "connection from pid %d uid %u: %s", (int)c->pid, (unsigned)c->uid, line);
}

/* The accounting entry of uid (created on first use), or NULL when out of memory. */
static struct server_user *server_user(server_t *s, uint32_t uid)
{
    for (uint32_t i = 0; i < s->uid_n; i++)
        if (s->users[i].uid == uid) return &s->users[i];
    for (uint32_t i = 0; i < s->uid_n; i++) /* reuse an entry nobody counts on any more */
        if (!s->users[i].conns && !s->users[i].slots) {
            s->users[i].uid = uid;
            return &s->users[i];
        }
    if (s->uid_n == s->uid_cap) {
        uint32_t cap = s->uid_cap ? s->uid_cap * 2 : 16;
        void *p = realloc(s->users, cap * sizeof *s->users);
        if (!p) return NULL;
        s->users = p;
        s->uid_cap = cap;
    }
    s->users[s->uid_n] = (struct server_user){.uid = uid};
    return &s->users[s->uid_n++];
}

/* Root and rotad's own user are not capped: they own the node (or this rotad). */
static bool server_privileged(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

/* ---- startup ------------------------------------------------------------------------------------------- */

/* The socket's directory: created if missing; refused when someone else could replace the socket. */
static int server_check_dir(const char *path, char *err, size_t errlen)
{
    char copy[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(copy, sizeof copy, "%s", path);
    char *dir = dirname(copy);
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno != ENOENT)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to stat %s: %s", dir, strerror(errno));
        if (mkdir(dir, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to create %s: %s", dir, strerror(errno));
        if (stat(dir, &st) < 0)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to stat %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "%s is not a directory", dir);
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL,
                           "unsafe permissions on %s: owned by uid %u, not by this user (%u) or root", dir,
                           (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        return server_fail(err, errlen, ROTAD_EXIT_FAIL,
                           "unsafe permissions on %s (mode %04o): others could replace the socket; use a "
                           "directory only its owner can write",
                           dir, (unsigned)(st.st_mode & 07777));
    return 0;
}

static int server_write_pid(server_t *s)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, buf, (size_t)n, 0) != n) return -errno;
    return 0;
}

void server_set_metrics(server_t *s, struct metrics *m)
{
    s->o.metrics = m;
}

void server_set_pid(server_t *s)
{
    server_write_pid(s);
    s->rg.r->rotad_pid = (int32_t)getpid();
}

/* Only while holding the lock: the file is ours then. */
static void server_unlink_lock(const server_t *s)
{
    char lp[sizeof s->path + 8];
    snprintf(lp, sizeof lp, "%s.lock", s->path);
    unlink(lp);
}

/* The lock file lives only while its rotad does: a stopping rotad unlinks it while still holding the lock. A
 * rotad that opened the old file just before that unlink would then lock a file nobody else can find, so after
 * locking each rotad checks that the path still names the file it locked, and starts over if not. */
static int server_lock(server_t *s, char *err, size_t errlen)
{
    char lp[sizeof s->path + 8];
    snprintf(lp, sizeof lp, "%s.lock", s->path);
    for (int tries = 0;; tries++) {
        s->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (s->lock_fd < 0)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to open lock file %s: %s", lp,
                               strerror(errno));
        /* An OFD lock: released by the kernel when the last descriptor of this open file goes, whatever kills
         * us. */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(s->lock_fd, F_OFD_SETLK, &fl) < 0) {
            if (errno != EAGAIN && errno != EACCES)
                return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to lock %s: %s", lp, strerror(errno));
            char buf[32] = {0};
            ssize_t n = pread(s->lock_fd, buf, sizeof buf - 1, 0);
            long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
            return server_fail(err, errlen, ROTAD_EXIT_BUSY, "another rotad (pid %ld) is already serving %s", pid,
                               s->path);
        }
        struct stat held, named;
        if (fstat(s->lock_fd, &held) < 0)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to stat lock file %s: %s", lp,
                               strerror(errno));
        if (stat(lp, &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) break;
        close(s->lock_fd);
        s->lock_fd = -1;
        if (tries == 100)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "lock file %s keeps being replaced", lp);
    }
    if (server_write_pid(s))
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to write lock file %s: %s", lp, strerror(errno));
    return 0;
}

static int server_bind(server_t *s, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "%s exists and is not a socket", s->path);
        /* We hold the lock, so whoever made it is gone: a stale socket. */
        if (unlink(s->path) < 0)
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to remove stale socket %s: %s", s->path,
                               strerror(errno));
        server_log(s, 1, "removed stale socket %s", s->path);
        s->stale = true;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to create a socket: %s", strerror(errno));
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, s->path, strlen(s->path) + 1);
    mode_t old = umask(0077);
    int rc = bind(s->listen_fd, (struct sockaddr *)&sun, sizeof sun);
    umask(old);
    if (rc < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to bind %s: %s", s->path, strerror(errno));
    /* Root serves every user of the node (each identified by SO_PEERCRED); a user's rotad only that user. */
    if (chmod(s->path, geteuid() == 0 ? 0666 : 0600) < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to chmod %s: %s", s->path, strerror(errno));
    if (listen(s->listen_fd, 512) < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to listen on %s: %s", s->path, strerror(errno));
    return 0;
}

int server_open(const server_opts_t *o, server_t **out, char *err, size_t errlen)
{
    server_t *s = calloc(1, sizeof *s);
    if (!s) return server_fail(err, errlen, ROTAD_EXIT_FAIL, "out of memory");
    s->o = *o;
    if (!s->o.cfg) {
        config_init(&s->defcfg);
        s->o.cfg = &s->defcfg;
    }
    s->lock_fd = s->listen_fd = s->epoll_fd = s->signal_fd = -1;
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int rc;
    if (snprintf(s->path, sizeof s->path, "%s", o->socket_path) >= (int)sizeof s->path) {
        rc = server_fail(err, errlen, ROTAD_EXIT_USAGE, "socket path %s is too long", o->socket_path);
        goto out_free;
    }
    rc = server_check_dir(s->path, err, errlen);
    if (rc) goto out_free;
    /* PATH itself before PATH.lock is created beside it (server_bind checks again under the lock). */
    struct stat pst;
    if (lstat(s->path, &pst) == 0 && !S_ISSOCK(pst.st_mode)) {
        rc = server_fail(err, errlen, ROTAD_EXIT_FAIL, "%s exists and is not a socket", s->path);
        goto out_free;
    }
    rc = server_lock(s, err, errlen);
    if (rc) goto out_close;
    rc = server_bind(s, err, errlen);
    if (rc) goto out_unlock;
    int e = region_create(&s->rg, o->cfg);
    if (e) {
        rc = server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to create the shared region: %s", strerror(-e));
        goto out_unlink;
    }
    waitq_init(&s->q, s->rg.r, s->rg.t);
    s->pl.t = s->rg.t;
    /* One descriptor per client: make room for a full client table. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    *out = s;
    return ROTAD_EXIT_OK;

out_unlink:
    unlink(s->path);
out_unlock:
    server_unlink_lock(s);
out_close:
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->lock_fd >= 0) close(s->lock_fd);
out_free:
    if (s->reserve_fd >= 0) close(s->reserve_fd);
    free(s);
    return rc;
}

int server_add_gpus(server_t *s, const rota_place_cand_t *gpus, int n)
{
    return place_add_known(&s->pl, s->rg.r, gpus, n);
}

/* ---- clients -------------------------------------------------------------------------------------------- */

static void server_doom(server_t *s, client_t *c, const char *why)
{
    if (c->doomed) return;
    c->doomed = true;
    if (why) server_log_client(s, c, "%s; disconnecting it", why);
}

static void server_send(server_t *s, client_t *c, const void *m, size_t n, const int *fds, int nfds)
{
    if (c->doomed) return;
    int rc = proto_send(c->fd, m, n, fds, nfds);
    if (rc == -EPIPE || rc == -ECONNRESET) server_doom(s, c, NULL); /* it is gone: EOF follows */
    else if (rc) server_doom(s, c, rc == -EAGAIN ? "does not read its answers" : strerror(-rc));
}

static void server_result_credit(server_t *s, client_t *c, uint32_t seq, int status, int dev, uint64_t credit)
{
    rota_msg_result_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_RESULT, sizeof m, seq);
    m.status = status;
    m.dev = dev;
    m.credit = credit;
    m.limit = (c->slot >= 0 && dev >= 0) ? ledger_limit(s->rg.t, (unsigned)c->slot, (unsigned)dev) : 0;
    server_send(s, c, &m, sizeof m, NULL, 0);
}

static void server_result(server_t *s, client_t *c, uint32_t seq, int status, int dev)
{
    server_result_credit(s, c, seq, status, dev, 0);
}

/* Takes back every client's unused credit on dev (an exchange with 0 races exactly with a client's
 * compare-exchange: each byte ends up either used or returned). A client that inflated its credit word only
 * gives back its own bytes: the uncharge is clamped to what it holds. */
static void server_revoke(server_t *s, unsigned dev)
{
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->slot < 0 || !c->ch || !(c->devmask & (1u << dev))) continue;
        uint64_t x = atomic_exchange(&c->ch->credit[dev], 0);
        if (x) ledger_uncharge(s->rg.r, s->rg.t, (unsigned)c->slot, dev, x);
    }
}

/* Tops the client's credit on dev up to the configured amount when the GPU has room for that and as much
 * again, nobody waits, and the client's limits allow it. Returns the bytes added. */
static uint64_t server_grant_credit(server_t *s, client_t *c, unsigned dev)
{
    uint64_t chunk = s->o.cfg ? s->o.cfg->credit : 0;
    if (!chunk || !c->ch || waitq_count_dev(&s->q, dev)) return 0;
    uint64_t cur = atomic_load(&c->ch->credit[dev]);
    if (cur >= chunk) return 0;
    uint64_t top = chunk - cur;
    if (ledger_check(s->rg.r, s->rg.t, (unsigned)c->slot, dev, top + chunk)) return 0;
    ledger_charge(s->rg.r, s->rg.t, (unsigned)c->slot, dev, top);
    atomic_fetch_add(&c->ch->credit[dev], top);
    return top;
}

static void server_answer(void *ctx, const waiter_t *w, int status)
{
    server_t *s = ctx;
    client_t *c = s->by_slot[w->slot];
    if (!c || c->gen != w->gen) return;
    if (status == 0 || status == -ENOMEM) {
        uint64_t now = server_now_ns();
        stats_mem_wait(s->rg.r, s->rg.t, w->slot, w->dev, now > w->since_ns ? now - w->since_ns : 0, status == 0);
    }
    server_log(s, 2, "pid %d: %s %llu bytes on GPU %u", (int)c->pid, status ? "refused" : "granted (queued)",
               (unsigned long long)w->bytes, w->dev);
    server_result(s, c, w->seq, status, (int)w->dev);
}

/* Serves dev's queue, except during the restart grace (server_grace serves it when that ends). */
static void server_serve(server_t *s, unsigned dev)
{
    if (!s->grace_end_ns) waitq_serve(&s->q, dev, server_answer, s);
}

static void server_welcome(server_t *s, client_t *c, int status, const char *reason, const int *fds, int nfds)
{
    rota_msg_welcome_t w = {0};
    proto_hdr_init(&w.h, ROTA_MSG_WELCOME, sizeof w, 0);
    w.status = status;
    w.abi = ROTA_ABI_VERSION;
    if (!status) {
        w.slot = c->slot >= 0 ? (uint32_t)c->slot : 0;
        w.gen = c->gen;
        w.region_size = ROTA_REGION_MAP_SIZE;
        w.channel_size = c->ch ? ROTA_CHANNEL_MAP_SIZE : 0;
    }
    snprintf(w.reason, sizeof w.reason, "%s", reason ? reason : "");
    server_send(s, c, &w, sizeof w, fds, nfds);
}

/* Copies the validated statistics of every client's channel into the region (for rota status/top). */
static void server_refresh(server_t *s)
{
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->slot < 0 || !c->ch || c->doomed) continue;
        const char *why;
        rota_channel_t *ch = c->ch;
        bool bad = proto_channel_check(ch, ROTA_CHANNEL_MAP_SIZE, &why) != 0;
        if (!bad && (ch->slot != (uint32_t)c->slot || ch->gen != c->gen)) {
            bad = true;
            why = "channel names another slot";
        }
        rota_slot_t *sl = &s->rg.t->slots[c->slot];
        if (bad) {
            if (!c->channel_warned)
                server_log_client(s, c, "%s; ignoring its channel", why);
            c->channel_warned = true;
            continue;
        }
        uint32_t inflight = LD(&ch->inflight);
        ST(&sl->inflight, inflight > 65535 ? 65535 : inflight);
        ST(&sl->launches, LD(&ch->launches));
        uint64_t credit = 0;
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) {
            uint64_t x = LD(&ch->credit[d]), u = LD(&sl->used[d]);
            credit += x < u ? x : u;
        }
        ST(&sl->credit, credit);
        ST(&sl->busy_ns, LD(&ch->busy_ns));
    }
}

/* Whether the client's user may run high priority (config.h: root, rotad's user, high-user and high-group lines). */
static bool server_may_high(server_t *s, client_t *c)
{
    uint32_t gids[64];
    socklen_t len = sizeof gids;
    unsigned n = 0;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, gids, &len) == 0) n = len / sizeof gids[0];
    char cg[512];
    bool have_cg = s->o.cfg->nhigh_cgroups && config_cgroup_of(c->pid, cg, sizeof cg) == 0;
    return config_may_high(s->o.cfg, (uint32_t)c->uid, (uint32_t)c->gid, gids, n, have_cg ? cg : NULL);
}

static void server_on_hello(server_t *s, client_t *c, const rota_msg_hello_t *h)
{
    c->role = h->role;
    if (s->nfresh) s->nfresh--;
    if (h->role == ROTA_ROLE_OBSERVER) {
        server_refresh(s);
        server_welcome(s, c, 0, NULL, &s->rg.ro_fd, 1);
        return;
    }
    rota_region_t *r = s->rg.r;
    int slot = -1;
    for (int i = 0; i < ROTA_MAX_CLIENTS; i++)
        if (!s->by_slot[i]) {
            slot = i;
            break;
        }
    if (slot < 0) {
        server_welcome(s, c, -EUSERS, "rotad's client table is full", NULL, 0);
        server_doom(s, c, "client table full");
        return;
    }
    const config_t *cfg = s->o.cfg;
    struct server_user *u = NULL;
    if (!server_privileged(c->uid)) {
        u = server_user(s, (uint32_t)c->uid);
        if (!u || u->slots >= cfg->max_clients_per_user) {
            char why[64];
            snprintf(why, sizeof why, "this user has %u clients registered already (rotad's limit)",
                     u ? u->slots : 0);
            server_welcome(s, c, -EUSERS, why, NULL, 0);
            server_doom(s, c, "over its user's client limit");
            return;
        }
    }
    unsigned prio = h->priority;
    if (prio == ROTA_PRIO_HIGH && !server_may_high(s, c)) {
        prio = ROTA_PRIO_NORMAL; /* its board is read-only: librota sees it and says so once */
        server_log_client(s, c, "asked for high priority, which rotad's policy does not allow this user: runs as "
                          "normal");
    }
    uint32_t weight = h->weight, wmax = cfg->max_weight * 1000u;
    if (weight > wmax) weight = wmax;
    uint32_t gen = ++s->next_gen;
    int chfd;
    int rc = region_channel_create((uint32_t)slot, gen, &c->ch, &chfd);
    if (rc) {
        server_welcome(s, c, rc, "rotad could not create a channel", NULL, 0);
        server_doom(s, c, "no channel");
        return;
    }
    c->slot = slot;
    c->gen = gen;
    c->prio = prio;
    if (u) {
        u->slots++;
        c->slot_counted = true;
    }
    s->by_slot[slot] = c;
    rota_slot_t *sl = &s->rg.t->slots[slot];
    int group = -1;
    char cg[512];
    if (cfg->ngroups && config_cgroup_of(c->pid, cg, sizeof cg) == 0) group = config_match(cfg, cg);
    int ug = group < 0 ? config_user_of(cfg, (uint32_t)c->uid) : -1;
    if (ug >= 0 && cfg->ngroups + (unsigned)ug < ROTA_MAX_GROUPS) group = (int)cfg->ngroups + ug;
    ST(&sl->gen, gen);
    ST(&sl->pid, (int32_t)c->pid);
    ST(&sl->uid, (uint32_t)c->uid);
    ST(&sl->priority, prio);
    ST(&sl->weight, weight);
    ST(&sl->max_inflight, h->max_inflight);
    ST(&sl->group, group);
    ST(&sl->device, -1);
    ST(&sl->wait_dev, -1);
    ST(&sl->limit, h->mem_limit);
    ST(&sl->waiting, 0);
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) ST(&sl->used[d], 0);
    ST(&sl->sched_state, 0);
    ST(&sl->launches, 0);
    ST(&sl->busy_ns, 0);
    ST(&sl->inflight, 0);
    ST(&sl->credit, 0);
    stats_slot_reset(s->rg.t, (unsigned)slot);
    proto_sanitize(sl->comm, h->comm, sizeof sl->comm);
    atomic_store_explicit(&sl->state, ROTA_SLOT_LIVE, memory_order_release);
    ST(&r->nclients, LD(&r->nclients) + 1);
    sched_client_add(s->sched, (unsigned)slot, c->ch, prio, weight);
    int fds[3] = {s->rg.ro_fd, chfd, c->prio == ROTA_PRIO_HIGH ? s->rg.board_fd : s->rg.board_ro_fd};
    server_welcome(s, c, 0, NULL, fds, 3);
    close(chfd);
    server_log(s, 2, "client pid %d uid %u registered in slot %d (gen %u, %s)", (int)c->pid, (unsigned)c->uid,
               slot, gen, prio_name(prio));
}

static void server_use_dev(server_t *s, client_t *c, int dev)
{
    if (c->devmask & (1u << dev)) return;
    if (!c->devmask) place_settle(&s->pl, c->pid); /* counted in devices[].clients from now on */
    c->devmask |= 1u << dev;
    rota_dev_t *d = &s->rg.r->devices[dev];
    ST(&d->clients, LD(&d->clients) + 1);
}

/* The region index of the GPU a RESERVE or ADOPT names. When rotad enumerated the node's GPUs itself (probe), those
 * are the only ones: an unknown UUID is -ENODEV, so no client can add a device or choose its capacity. Only a
 * rotad that knows no GPU of its own (--no-probe, or a driver without GPUs) learns them from its clients. */
static int server_device(server_t *s, client_t *c, const rota_msg_mem_t *m)
{
    if (s->pl.known) {
        int dev = ledger_find(s->rg.r, m->uuid);
        if (dev < 0) server_log_client(s, c, "names a GPU this node does not have; refused");
        return dev < 0 ? -ENODEV : dev;
    }
    int dev = ledger_device(s->rg.r, m->uuid, m->total_mem);
    if (dev < 0) server_log_client(s, c, "more than " ROTA_STR(ROTA_MAX_DEVICES) " GPUs: not tracking another one");
    return dev;
}

static void server_on_reserve(server_t *s, client_t *c, const rota_msg_mem_t *m)
{
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    int dev = server_device(s, c, m);
    c->reserved = true;
    if (dev < 0) {
        server_result(s, c, m->h.seq, dev, -1);
        return;
    }
    unsigned slot = (unsigned)c->slot, d = (unsigned)dev;
    server_use_dev(s, c, dev);
    int rc = ledger_check_ever(r, t, slot, d, m->bytes);
    if (rc) {
        server_result(s, c, m->h.seq, rc, dev);
        return;
    }
    uint64_t now = server_now_ns();
    bool grace = now < s->grace_end_ns && !ledger_check(r, t, slot, d, m->bytes);
    if (!grace && !waitq_count_dev(&s->q, d)) {
        rc = ledger_check(r, t, slot, d, m->bytes);
        if (rc) {
            server_revoke(s, d); /* pressure: unused credit first */
            rc = ledger_check(r, t, slot, d, m->bytes);
        }
        if (!rc) {
            ledger_charge(r, t, slot, d, m->bytes);
            uint64_t credit = server_grant_credit(s, c, d);
            server_result_credit(s, c, m->h.seq, 0, dev, credit);
            return;
        }
        if (!m->wait_ms) {
            server_result(s, c, m->h.seq, rc, dev);
            return;
        }
    }
    /* Past what this client's own frees could make room for (its holdings plus the request exceed its limit or its
     * group's): no other client can help, so it never waits on itself. A framework that caches memory
     * (PyTorch) learns at once that it must release some (docs/design/memory.md). Its unused credit is its own
     * holding too: taken back first. */
    if (ledger_check_own(t, slot, d, m->bytes)) {
        uint64_t x = c->ch ? atomic_exchange(&c->ch->credit[d], 0) : 0;
        if (x) ledger_uncharge(r, t, slot, d, x);
        rc = ledger_check_own(t, slot, d, m->bytes);
        if (rc) {
            server_result(s, c, m->h.seq, rc, dev);
            if (x) waitq_serve(&s->q, d, server_answer, s);
            return;
        }
    }
    /* Queue behind earlier requests of the same or a better class, then serve: this request may be the one
     * that fits now. */
    uint64_t deadline = now + (uint64_t)m->wait_ms * 1000000u;
    if (grace && deadline < s->grace_end_ns) deadline = s->grace_end_ns; /* answered when the grace ends */
    waiter_t *w = waitq_add(&s->q, slot, c->gen, m->h.seq, d, m->bytes, c->prio, deadline);
    if (!w) {
        server_result(s, c, m->h.seq, -ENOMEM, dev);
        return;
    }
    w->since_ns = now;
    server_log(s, 2, "pid %d: queued %llu bytes on GPU %d for %u ms", (int)c->pid,
               (unsigned long long)m->bytes, dev, m->wait_ms);
    if (grace) return;
    server_serve(s, d);
    if (!m->wait_ms && waitq_contains(&s->q, w)) {
        waitq_remove(&s->q, w);
        server_result(s, c, m->h.seq, -ENOMEM, dev);
    }
}

static void server_on_release(server_t *s, client_t *c, const rota_msg_mem_t *m)
{
    int dev = ledger_find(s->rg.r, m->uuid);
    if (dev < 0) return; /* never reserved there: nothing to give back */
    /* At most what the client holds outside its unused credit: bytes still in its credit word stay charged until
     * it takes them or rotad revokes them, whatever it claims to have freed (abi.h: every byte is in a credit
     * word or in use). Only the client takes from its credit, and only before it allocates, frees and then
     * sends this, so the credit read now is at most what it was then: a real release is never cut short. */
    uint64_t held = LD(&s->rg.t->slots[c->slot].used[dev]), credit = c->ch ? LD(&c->ch->credit[dev]) : 0;
    uint64_t in_use = held > credit ? held - credit : 0;
    uint64_t back = ledger_uncharge(s->rg.r, s->rg.t, (unsigned)c->slot, (unsigned)dev,
                                    m->bytes < in_use ? m->bytes : in_use);
    if (back < m->bytes)
        server_log(s, 2, "pid %d released %llu bytes but held only %llu", (int)c->pid,
                   (unsigned long long)m->bytes, (unsigned long long)back);
    if (!back) return;
    if (waitq_count_dev(&s->q, (unsigned)dev)) server_serve(s, (unsigned)dev);
    else server_grant_credit(s, c, (unsigned)dev); /* refill: an alloc/free loop stays on the fast path */
}

/* ADOPT: memory the client already holds (re-registration after a reconnect, or a driver-chosen pitch above what
 * it reserved). It is bounded by the same rules as a RESERVE (capacity, process and group limits), after taking
 * back unused credit: what does not fit is not charged (the client only loses its own accounting: a later
 * RELEASE is clamped to what it holds), and cannot push the ledger past the GPU or a limit. */
static void server_on_adopt(server_t *s, client_t *c, const rota_msg_mem_t *m)
{
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    int dev = server_device(s, c, m);
    if (dev < 0) return;
    unsigned slot = (unsigned)c->slot, d = (unsigned)dev;
    server_use_dev(s, c, dev);
    int rc = ledger_check(r, t, slot, d, m->bytes);
    if (rc) {
        server_revoke(s, d);
        rc = ledger_check(r, t, slot, d, m->bytes);
    }
    if (rc) {
        server_log_client(s, c, "re-registered more memory than its GPU or limits allow; not charged");
        return;
    }
    ledger_charge(r, t, slot, d, m->bytes);
    server_log(s, 2, "pid %d re-registered %llu bytes on GPU %d", (int)c->pid, (unsigned long long)m->bytes, dev);
}

/* Sends the RESULT of a PLACE: the candidate index (or region device with ROTA_PLACE_KNOWN), or the error. */
static void server_place_result(server_t *s, client_t *c, const rota_msg_place_t *m, int i, uint64_t waited_ns)
{
    if (i >= 0 && waited_ns)
        server_log(s, 1, "pid %d: placed on candidate %d of %u after waiting %llu ms for room", (int)c->pid, i,
                   (unsigned)m->ncand, (unsigned long long)(waited_ns / 1000000u));
    else if (i >= 0 && (m->flags & ROTA_PLACE_KNOWN))
        server_log(s, 2, "pid %d: placed on GPU %d (remap)", (int)c->pid, i);
    else if (i >= 0)
        server_log(s, 2, "pid %d: placed on candidate %d of %u", (int)c->pid, i, (unsigned)m->ncand);
    rota_msg_result_t res = {0};
    proto_hdr_init(&res.h, ROTA_MSG_RESULT, sizeof res, m->h.seq);
    res.status = i < 0 ? i : 0;
    res.dev = i < 0 ? -1 : i;
    server_send(s, c, &res, sizeof res, NULL, 0);
}

/* place_answer_fn: a waiting PLACE is answered (room appeared, its wait ran out, or rotad stops). */
static void server_place_answer(void *ctx, const place_waiter_t *w, int i)
{
    server_t *s = ctx;
    uint64_t now = server_now_ns();
    if (i >= 0) stats_place_wait(s->rg.r, now > w->since_ns ? now - w->since_ns : 0);
    server_place_result(s, w->who, &w->m, i, now > w->since_ns ? now - w->since_ns : 1);
}

static void server_on_place(server_t *s, client_t *c, const rota_msg_place_t *m)
{
    uint64_t now = server_now_ns();
    int i = place_choose(&s->pl, s->rg.r, c->pid, m, now);
    if (i == -EAGAIN) {
        if (!place_wait_add(&s->pl, c, c->pid, m, now)) {
            server_log(s, 1, "pid %d: %llu MiB fits on no GPU now: waiting up to %u ms for room", (int)c->pid,
                       (unsigned long long)(m->mem >> 20), m->wait_ms);
            return;
        }
        i = place_choose_now(&s->pl, s->rg.r, c->pid, m, now); /* no memory to queue it: as without a wait */
    }
    server_place_result(s, c, m, i, 0);
}

/* LIST (abi.h): a copy of the table made for the asker's uid (SO_PEERCRED, not its word). Root and rotad's own user
 * see every client; any other user its own processes and the node's totals (issue 21: a process must not learn
 * another user's pids, commands or memory from rotad). A copy costs rotad a memfd and a pass over the table, so one
 * connection gets one per ROTA_LIST_MIN_MS; connections are capped per user (max-connections-per-user). */
static void server_on_list(server_t *s, client_t *c, const rota_msg_list_t *m)
{
    uint64_t now = server_now_ns();
    if (c->list_ns && now - c->list_ns < (uint64_t)ROTA_LIST_MIN_MS * 1000000u) {
        server_result(s, c, m->h.seq, -EAGAIN, -1);
        return;
    }
    c->list_ns = now;
    server_refresh(s); /* the clients' counters as of now, as an observer's HELLO gets them */
    int fd = region_table_copy(&s->rg, (uint32_t)c->uid, server_privileged(c->uid));
    if (fd < 0) {
        server_log(s, 0, "cannot copy the client table: %s", strerror(-fd));
        server_result(s, c, m->h.seq, fd, -1);
        return;
    }
    rota_msg_result_t r = {0};
    proto_hdr_init(&r.h, ROTA_MSG_RESULT, sizeof r, m->h.seq);
    r.dev = -1;
    server_send(s, c, &r, sizeof r, &fd, 1);
    close(fd);
}

static void server_on_message(server_t *s, client_t *c, const void *buf, size_t n)
{
    uint32_t abi = 0;
    const char *why;
    int type = proto_check(buf, n, &abi, &why);
    if (type == -EPROTO) {
        char reason[64];
        snprintf(reason, sizeof reason, "rotad speaks rota ABI version %u, not %u", ROTA_ABI_VERSION, abi);
        server_welcome(s, c, -EPROTO, reason, NULL, 0);
        server_log_client(s, c, "speaks rota ABI version %u, rotad version %u: refused (it runs uncoordinated)", abi,
                          ROTA_ABI_VERSION);
        server_doom(s, c, NULL);
        return;
    }
    if (type < 0) {
        server_doom(s, c, why);
        return;
    }
    if (!c->role) {
        if (type != ROTA_MSG_HELLO) {
            server_doom(s, c, "first message is not a hello");
            return;
        }
        server_on_hello(s, c, buf);
        return;
    }
    if (type == ROTA_MSG_PLACE) { /* observers (rota run) ask too */
        server_on_place(s, c, buf);
        return;
    }
    if (type == ROTA_MSG_LIST) {
        server_on_list(s, c, buf);
        return;
    }
    if (c->role != ROTA_ROLE_CLIENT) {
        server_doom(s, c, "an observer sent a request");
        return;
    }
    switch (type) {
    case ROTA_MSG_RESERVE: server_on_reserve(s, c, buf); break;
    case ROTA_MSG_RELEASE: server_on_release(s, c, buf); break;
    case ROTA_MSG_ADOPT: server_on_adopt(s, c, buf); break;
    default: server_doom(s, c, "unexpected message type"); break;
    }
}

static void server_on_readable(server_t *s, client_t *c)
{
    for (int i = 0; i < 64 && !c->doomed; i++) {
        char buf[ROTA_MSG_MAX];
        ssize_t n = proto_recv(c->fd, buf, sizeof buf, NULL, NULL, MSG_DONTWAIT);
        if (n == -EAGAIN) return;
        if (n == 0 || n == -ECONNRESET) {
            server_doom(s, c, NULL);
            return;
        }
        if (n == -EMSGSIZE) {
            server_doom(s, c, "message longer than any rota message");
            return;
        }
        if (n < 0) {
            server_doom(s, c, strerror((int)-n));
            return;
        }
        server_on_message(s, c, buf, (size_t)n);
    }
}

/* The client is gone (or dropped): everything it held goes back at once and its slot is free. */
static void server_drop(server_t *s, client_t *c)
{
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    uint32_t mask = 0;
    if (c->slot >= 0) {
        rota_slot_t *sl = &t->slots[c->slot];
        sched_client_remove(s->sched, (unsigned)c->slot); /* before its channel goes; releases whom it held */
        waitq_drop_slot(&s->q, (unsigned)c->slot);
        mask = ledger_reclaim(r, t, (unsigned)c->slot);
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
            if (c->devmask & (1u << d)) {
                uint32_t n = LD(&r->devices[d].clients);
                ST(&r->devices[d].clients, n ? n - 1 : 0);
            }
        atomic_store_explicit(&sl->state, ROTA_SLOT_FREE, memory_order_release);
        ST(&sl->pid, 0);
        s->by_slot[c->slot] = NULL;
        ST(&r->nclients, LD(&r->nclients) - 1);
        server_log(s, 2, "client pid %d left slot %d", (int)c->pid, c->slot);
    }
    if (c->capped || c->slot_counted) {
        struct server_user *u = server_user(s, (uint32_t)c->uid);
        if (u && c->capped && u->conns) u->conns--;
        if (u && c->slot_counted && u->slots) u->slots--;
    }
    if (!c->role && s->nfresh) s->nfresh--;
    place_wait_drop(&s->pl, c); /* a rota run that gave up waiting */
    region_channel_destroy(c->ch);
    close(c->fd);
    if (c->prev) c->prev->next = c->next;
    else s->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
        if (mask & (1u << d)) server_serve(s, d);
}

static void server_sweep(server_t *s)
{
    bool again = true;
    while (again) {
        again = false;
        for (client_t *c = s->clients; c; c = c->next)
            if (c->doomed) {
                server_drop(s, c);
                again = true;
                break;
            }
    }
}

/* Out of descriptors: accept the next connection on the spare one and close it at once, so the listening socket
 * does not stay readable (a busy loop) while nothing can be accepted. Returns whether one was taken. */
static bool server_accept_shed(server_t *s, int err)
{
    if (s->reserve_fd < 0) return false;
    close(s->reserve_fd);
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    server_log_limited(s, "unable to accept a client: %s; connections are refused until some close", strerror(err));
    return fd >= 0;
}

static void server_accept(server_t *s)
{
    for (int n = 0; n < 64; n++) { /* a bounded batch: other events get their turn in a storm */
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if ((errno == EMFILE || errno == ENFILE) && server_accept_shed(s, errno)) continue;
            if (errno != EAGAIN) server_log_limited(s, "unable to accept a client: %s", strerror(errno));
            return;
        }
        struct ucred cr;
        socklen_t len = sizeof cr;
        client_t *c = calloc(1, sizeof *c);
        if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
            server_log_limited(s, "unable to take a client: %s", c ? strerror(errno) : "out of memory");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->slot = -1;
        c->pid = cr.pid;
        c->uid = cr.uid;
        c->gid = cr.gid;
        c->accepted_ns = server_now_ns();
        struct server_user *u = NULL;
        if (!server_privileged(cr.uid)) {
            u = server_user(s, (uint32_t)cr.uid);
            if (!u || u->conns >= s->o.cfg->max_conns_per_user) {
                server_log_limited(s, "connection from pid %d uid %u: over its user's %u connections; closed",
                                   (int)cr.pid, (unsigned)cr.uid, s->o.cfg->max_conns_per_user);
                free(c);
                close(fd);
                continue;
            }
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            server_log_limited(s, "unable to watch a client: %s", strerror(errno));
            free(c);
            close(fd);
            continue;
        }
        if (u) {
            u->conns++;
            c->capped = true;
        }
        s->nfresh++;
        c->next = s->clients;
        if (s->clients) s->clients->prev = c;
        s->clients = c;
    }
}

/* Drops connections that sent no HELLO within hello-timeout-ms; returns the next such deadline (UINT64_MAX:
 * none). */
static uint64_t server_expire_fresh(server_t *s, uint64_t now)
{
    if (!s->nfresh) return UINT64_MAX;
    uint64_t lim = (uint64_t)s->o.cfg->hello_timeout_ms * 1000000u, next = UINT64_MAX;
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->role || c->doomed) continue;
        uint64_t due = c->accepted_ns + lim;
        if (now >= due) server_doom(s, c, "sent no hello in time");
        else if (due < next) next = due;
    }
    return next;
}

/* Once the restart grace is over, serves what waited for it, in order. */
static void server_grace(server_t *s)
{
    if (!s->grace_end_ns || server_now_ns() < s->grace_end_ns) return;
    s->grace_end_ns = 0;
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
        if (waitq_count_dev(&s->q, d)) waitq_serve(&s->q, d, server_answer, s);
}

/* SIGHUP: the config file again, for decisions from now on; a bad file keeps the current one. */
static void server_reload(server_t *s)
{
    if (!s->o.config_path || !s->o.cfg) {
        server_log(s, 0, "SIGHUP: no --config file to reload");
        return;
    }
    notify_send("RELOADING=1");
    char msg[512];
    if (reload_config(s->o.config_path, s->o.cfg, s->rg.t, msg, sizeof msg))
        server_log(s, 0, "SIGHUP: config not reloaded, keeping the current one: %s", msg);
    else
        server_log(s, 1, "SIGHUP: reloaded %s: %s", s->o.config_path, msg);
    notify_send("READY=1");
}

int server_loop(server_t *s, const int *notify, int nnotify, char *err, size_t errlen)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    s->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (s->signal_fd < 0 || s->epoll_fd < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to set up the event loop: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_tag};
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &s->signal_tag};
    if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) < 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->signal_fd, &sev) < 0)
        return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to set up the event loop: %s", strerror(errno));
    /* The scheduler thread starts here, in the process that serves (rotad detaches between open and loop). */
    /* Bounds from the config file (issue 21) join the scheduling options. */
    s->o.sched.high_stall_ns = (uint64_t)s->o.cfg->high_stall_ms * 1000000u;
    s->o.sched.doorbell_max_hz = s->o.cfg->doorbell_max_hz;
    int se = sched_start(s->rg.r, s->rg.t, s->rg.b, &s->o.sched, &s->sched);
    if (se) return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to start the scheduler: %s", strerror(-se));
    se = s->o.metrics ? metrics_start(s->o.metrics, s->rg.r, s->o.metrics_clients ? s->rg.t : NULL) : 0;
    if (se) return server_fail(err, errlen, ROTAD_EXIT_FAIL, "unable to start serving metrics: %s", strerror(-se));
    server_log(s, 1, "listening on %s (pid %d, rota ABI %u)", s->path, (int)getpid(), ROTA_ABI_VERSION);
    /* After a crash, the clients of the rotad before re-register what they hold (their trackers reconnect within
     * about a second): until they had grace-ms to, a RESERVE that fits is not granted, or it might be granted
     * memory those clients hold. */
    if (s->stale && s->o.cfg->grace_ms) {
        s->grace_end_ns = server_now_ns() + (uint64_t)s->o.cfg->grace_ms * 1000000u;
        server_log(s, 1, "restarted over a stale socket: granting memory in %u ms", s->o.cfg->grace_ms);
    }
    for (int i = 0; i < nnotify; i++) {
        ssize_t w;
        do {
            w = write(notify[i], "\n", 1);
        } while (w < 0 && errno == EINTR);
        close(notify[i]);
    }
    notify_send("READY=1\nSTATUS=serving");
    while (!s->stopping) {
        uint64_t next = waitq_next_deadline(&s->q), pnext = place_wait_next(&s->pl);
        if (pnext != UINT64_MAX) {
            /* Room for a waiting job appears through events (releases, exits), except when a placement still
             * pending for a process that died lapses: look again at least every PLACE_RECHECK_MS. */
            uint64_t recheck = server_now_ns() + PLACE_RECHECK_MS * 1000000u;
            if (pnext > recheck) pnext = recheck;
            if (pnext < next) next = pnext;
        }
        uint64_t fnext = server_expire_fresh(s, server_now_ns());
        if (fnext < next) next = fnext;
        server_grace(s);
        if (s->grace_end_ns && s->grace_end_ns < next) next = s->grace_end_ns;
        server_sweep(s);
        int timeout = -1;
        if (next != UINT64_MAX) {
            uint64_t now = server_now_ns();
            timeout = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
        }
        struct epoll_event evs[64];
        int n = epoll_wait(s->epoll_fd, evs, 64, timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            return server_fail(err, errlen, ROTAD_EXIT_FAIL, "epoll_wait: %s", strerror(errno));
        }
        bool accept = false;
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &s->listen_tag) {
                accept = true; /* after the clients' events: a storm of connections does not delay them */
            } else if (tag == &s->signal_tag) {
                struct signalfd_siginfo si;
                while (read(s->signal_fd, &si, sizeof si) == sizeof si) {
                    if (si.ssi_signo == SIGHUP) {
                        server_reload(s);
                        continue;
                    }
                    server_log(s, 1, "signal %u: draining and stopping", si.ssi_signo);
                    notify_send("STOPPING=1");
                    s->stopping = true;
                }
            } else {
                client_t *c = tag;
                if (c->doomed) continue;
                if (evs[i].events & EPOLLIN) server_on_readable(s, c);
                else if (evs[i].events & (EPOLLHUP | EPOLLERR)) server_doom(s, c, NULL);
            }
        }
        if (accept) server_accept(s);
        server_grace(s); /* before expiring: what waited for the grace's end is served first */
        waitq_expire(&s->q, server_now_ns(), server_answer, s);
        server_sweep(s);
        if (s->pl.waiters) place_wait_serve(&s->pl, s->rg.r, server_now_ns(), server_place_answer, s);
        if (s->pl.waiters || LD(&s->rg.r->place_waiting)) place_wait_publish(&s->pl, s->rg.r);
    }
    /* Drain: every queued thread gets an answer (it passes through), every waiting job a GPU, then every client
     * is let go. */
    waitq_flush(&s->q, -ESHUTDOWN, server_answer, s);
    place_wait_flush(&s->pl, s->rg.r, server_now_ns(), server_place_answer, s);
    place_wait_publish(&s->pl, s->rg.r);
    while (s->clients) server_drop(s, s->clients);
    return ROTAD_EXIT_OK;
}

void server_close(server_t *s)
{
    if (!s) return;
    metrics_stop(s->o.metrics); /* its thread reads the region */
    while (s->clients) server_drop(s, s->clients);
    /* We still hold the lock, so the socket and the lock file at the path are ours; the lock file goes last,
     * while still locked (server_lock explains why that is safe). */
    if (s->listen_fd >= 0) {
        unlink(s->path);
        close(s->listen_fd);
    }
    if (s->lock_fd >= 0) server_unlink_lock(s);
    if (s->epoll_fd >= 0) close(s->epoll_fd);
    if (s->signal_fd >= 0) close(s->signal_fd);
    sched_stop(s->sched);
    region_destroy(&s->rg);
    if (s->lock_fd >= 0) close(s->lock_fd);
    if (s->reserve_fd >= 0) close(s->reserve_fd);
    free(s->users);
    free(s);
}
