/* client.c - the coordinator client: registers with rotad, reserves memory through its ledger, fails open. */
#include "shim/real.h"

#include "shim/client.h"
#include "shim/client-internal.h"
#include "shim/log.h"
#include "shim/options.h"
#include "shim/trace.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/sockpath.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * State and locking.
 *
 *   coord.rw     guards the connection pointer. Every use of the connection, and every change of the local
 *                byte counts that rotad must mirror, happens under the read lock; replacing the connection
 *                (reconnect: open, then ADOPT of every live byte) under the write lock, taken with trywrlock
 *                so that no caller ever blocks on a reconnect. So rotad's ledger for this process is always
 *                "what the last ADOPT said + every delta sent after it", and never counts a byte twice.
 *   coord.mu     guards the device table and the allocation table (short critical sections only).
 *
 * Fail-open: with no rotad (or after it died) the hooks keep local books and let every call through; a
 * reconnect is attempted at most once a second, only from the memory hooks (never from launches). ROTA_REQUIRE=1
 * turns "no rotad" into an error instead (see coord_require_error).
 *
 * fork: the child drops the inherited connection (pthread_atfork, with a pid check as a fallback) without a
 * word to rotad, forgets the parent's allocations (its CUDA state is not the parent's) and registers itself on
 * its next memory call.
 */

#define COORD_MAX_DEVS 64          /* CUdevice ordinals cached */
#define COORD_RECONNECT_NS 1000000000ull
#define COORD_PROBE_NS 100000000ull  /* how often a live connection is checked for a silent rotad death */
#define COORD_EPISODE_NS 1000000000ull /* a retry episode ends this long after its last event */
#define COORD_RETRY_WINDOW_NS 30000000000ull /* a refused request's retry comes within this */
#define COORD_PAGES_QUIET_NS 5000000000ull   /* after a refused page (cuMemCreate), pages queue this long */

typedef struct coord_dev {
    bool known;                    /* uuid/total were queried */
    bool usable;                   /* the queries succeeded */
    uint8_t uuid[ROTA_UUID_LEN];
    uint64_t total;                /* what the driver reports */
    uint64_t used;                 /* this process: reserved + committed bytes on it */
    uint64_t limit;                /* effective limit rotad reported last (0 = none known) */
    int rdev;                      /* rotad's index of this GPU on the current connection, -1 unknown */
    uint64_t held;                 /* freed during a retry episode, still charged (in used): the retry's first */
    uint64_t episode_ns;           /* a retry episode lasts until then (0 = none); docs/design/memory.md */
    uint64_t failfast_ns;          /* when a request was last refused at once to make the process release */
    uint64_t failfast_bytes;       /* ... and its size: the framework's retry asks for the same */
    bool retry_pending;            /* that retry has not been granted yet */
    bool retry_pages;              /* the refused request was a page (cuMemCreate) */
} coord_dev_t;

typedef struct coord_alloc {
    uint64_t key;
    uint64_t bytes;
    int dev;                       /* index in coord.devs */
    bool used;                     /* slot in use (open addressing; deleted entries are re-inserted) */
} coord_alloc_t;

static struct {
    pthread_rwlock_t rw;
    pthread_mutex_t mu;
    conn_t *conn;                  /* changed under the write lock only */
    uint32_t conn_gen;             /* bumped with each connection published (never 0 then): names it for good */
    pid_t pid;                     /* the process this state belongs to */
    _Atomic bool tried;            /* a first connection attempt was made in this process */
    _Atomic bool abi_mismatch;     /* rotad speaks another ABI: stay in pass-through */
    _Atomic bool warned_absent, warned_lost;
    bool warned_demoted;           /* said once that rotad runs this high client as normal */
    _Atomic bool require_failed;
    _Atomic bool episodes;         /* a retry episode was ever opened in this process */
    _Atomic uint64_t last_attempt_ns;
    _Atomic uint64_t next_probe_ns;
    uint64_t next_token;
    coord_dev_t devs[COORD_MAX_DEVS];
    coord_alloc_t *tab;
    size_t tab_cap, tab_len;
    pthread_cond_t reap_cv;        /* the episode reaper's (CLOCK_MONOTONIC), under mu */
    bool reap_started;
} coord = {
    .rw = PTHREAD_RWLOCK_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_once_t coord_once = PTHREAD_ONCE_INIT;

/* One line on stderr through the shim's logger (one write, fork-safe, filtered by ROTA_LOG). */
#define coord_log rota_log

uint64_t coord_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool coord_off(void)
{
    const rota_options_t *o = rota_options();
    return o->disable || rota_options_errors();
}

/* ---- fork ----------------------------------------------------------------------------------------------- */

static void coord_reap_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&coord.reap_cv, &a);
    pthread_condattr_destroy(&a);
}

static void coord_reset_child(void)
{
    /* Locks may be held by threads that do not exist here: start from fresh ones. */
    pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&coord.rw, &rw, sizeof rw);
    memcpy(&coord.mu, &mu, sizeof mu);
    coord_reap_cv_init();
    if (coord.conn) conn_abandon(coord.conn); /* closes our copy of the socket: the parent's stays up */
    __atomic_store_n(&coord.conn, NULL, __ATOMIC_RELEASE); /* peeked at by coord_conn_peek */
    coord.pid = getpid();
    coord.tried = false;
    coord.warned_lost = false;
    coord.last_attempt_ns = 0;
    coord.next_probe_ns = 0;
    for (int i = 0; i < COORD_MAX_DEVS; i++) {
        coord.devs[i].used = 0;
        coord.devs[i].limit = 0;
        coord.devs[i].rdev = -1;
        coord.devs[i].held = 0;
        coord.devs[i].episode_ns = 0;
        coord.devs[i].failfast_ns = 0;
        coord.devs[i].failfast_bytes = 0;
        coord.devs[i].retry_pending = false;
    }
    coord.reap_started = false; /* the reaper thread is the parent's */
    coord_pool_reset_child();
    free(coord.tab);
    coord.tab = NULL;
    coord.tab_cap = coord.tab_len = 0;
}

static void coord_setup(void)
{
    coord.pid = getpid();
    coord_reap_cv_init();
    pthread_atfork(NULL, NULL, coord_reset_child);
}

/* Entry check of every hook: one-time setup, and a fork that bypassed pthread_atfork (raw clone). */
static void coord_enter(void)
{
    pthread_once(&coord_once, coord_setup);
    if (coord.pid != getpid()) coord_reset_child();
}

/* ---- connection ----------------------------------------------------------------------------------------- */

/* Opens a connection and re-registers every live byte. Called with the write lock held. */
static void coord_connect_locked(bool first)
{
    const rota_options_t *o = rota_options();
    double w = o->weight * 1000.0;
    conn_opts_t co = {
        .socket = o->socket[0] ? o->socket : NULL,
        .role = ROTA_ROLE_CLIENT,
        .priority = o->priority,
        .weight = w < 1 ? 1 : w > 1000000 ? 1000000 : (unsigned)w,
        .max_inflight = o->max_inflight > 65535 ? 65535 : o->max_inflight,
        .mem_limit = o->mem_limit > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : o->mem_limit,
        .timeout_ms = 5000,
    };
    char err[256];
    conn_t *c = NULL;
    coord.last_attempt_ns = coord_now_ns();
    int rc = conn_open(&co, &c, err, sizeof err);
    if (rc) {
        if (rc == -EPROTO) {
            coord.abi_mismatch = true;
            coord_log(ROTA_LOG_ERROR, "%s; running uncoordinated", err);
        } else if (o->require) {
            coord.require_failed = true;
            if (!coord.warned_absent)
                coord_log(ROTA_LOG_ERROR, "ROTA_REQUIRE=1 and %s; CUDA calls fail (cuInit: CUDA_ERROR_NOT_INITIALIZED) until rotad is reachable", err);
        } else if (!coord.warned_absent) {
            coord_log(ROTA_LOG_WARN, "%s; running uncoordinated (memory is not shared fairly)", err);
        }
        coord.warned_absent = true;
        return;
    }
    coord.require_failed = false;
    if (co.priority == ROTA_PRIO_HIGH && !conn_high(c) && !coord.warned_demoted) {
        coord_log(ROTA_LOG_WARN, "rotad's policy does not let this user run high priority: running as normal");
        coord.warned_demoted = true;
    }
    pthread_mutex_lock(&coord.mu);
    for (int i = 0; i < COORD_MAX_DEVS; i++) {
        coord_dev_t *d = &coord.devs[i];
        d->rdev = -1;
        if (d->usable && d->used) conn_adopt(c, d->uuid, d->total, d->used);
    }
    pthread_mutex_unlock(&coord.mu);
    launch_warm();
    coord.conn_gen = coord.conn_gen + 1 ? coord.conn_gen + 1 : 1;
    __atomic_store_n(&coord.conn, c, __ATOMIC_RELEASE);
    coord.warned_lost = false;
    if (!first || coord.warned_absent)
        coord_log(ROTA_LOG_INFO, "connected to rotad (slot %u)%s", conn_slot(c),
                  first ? "" : "; live allocations re-registered");
    coord.warned_absent = false;
}

/* Makes sure a usable connection exists if one can be had; rate-limited, never blocking on other threads. */
static void coord_maybe_connect(void)
{
    if (coord.abi_mismatch) return;
    if (coord.tried) {
        /* The common case costs a clock read: no lock, no syscall. */
        uint64_t now = coord_now_ns();
        if (now - coord.last_attempt_ns < COORD_RECONNECT_NS || now < coord.next_probe_ns) return;
        coord.next_probe_ns = now + COORD_PROBE_NS;
    }
    pthread_rwlock_rdlock(&coord.rw);
    conn_t *c = coord.conn;
    bool alive = c && conn_alive(c);
    pthread_rwlock_unlock(&coord.rw);
    if (alive) return;
    if (pthread_rwlock_trywrlock(&coord.rw)) return;
    c = coord.conn;
    bool first = !coord.tried;
    if (!(c && conn_alive(c)) && (first || coord_now_ns() - coord.last_attempt_ns >= COORD_RECONNECT_NS)) {
        if (c) {
            if (!coord.warned_lost) coord_log(ROTA_LOG_WARN, "lost rotad; running uncoordinated until it returns");
            coord.warned_lost = true;
            conn_close(c); /* no thread is inside: we hold the write lock */
            __atomic_store_n(&coord.conn, NULL, __ATOMIC_RELEASE);
        }
        coord.tried = true;
        coord_connect_locked(first);
    }
    pthread_rwlock_unlock(&coord.rw);
}

bool coord_watch(void)
{
    if (coord_off() || coord.abi_mismatch) return false;
    bool holds = false;
    pthread_mutex_lock(&coord.mu);
    for (int i = 0; i < COORD_MAX_DEVS && !holds; i++) holds = coord.devs[i].usable && coord.devs[i].used;
    pthread_mutex_unlock(&coord.mu);
    if (holds) coord_maybe_connect(); /* rate-limited; re-registers everything it holds (ADOPT) */
    return true;
}

/* ROTA_REQUIRE=1 without rotad: the error cuInit and every memory hook return. */
static CUresult coord_require_error(void)
{
    return CUDA_ERROR_NOT_INITIALIZED;
}

CUresult coord_process_init(void)
{
    if (coord_off()) return CUDA_SUCCESS;
    coord_enter();
    if (!coord.tried || coord.require_failed) coord_maybe_connect();
    coord_place(); /* before any real driver call: CUDA_VISIBLE_DEVICES */
    return coord.require_failed ? coord_require_error() : CUDA_SUCCESS;
}

/* ---- devices and allocations ------------------------------------------------------------------------------ */

int coord_dev_index(CUdevice dev)
{
    if (dev < 0 || dev >= COORD_MAX_DEVS) return -1;
    pthread_mutex_lock(&coord.mu);
    coord_dev_t *d = &coord.devs[dev];
    bool known = d->known, usable = d->usable;
    pthread_mutex_unlock(&coord.mu);
    if (!known) {
        CUuuid u;
        size_t total = 0;
        usable = ROTA_REAL(cuDeviceGetUuid)(&u, dev) == CUDA_SUCCESS &&
                      ROTA_REAL(cuDeviceTotalMem_v2)(&total, dev) == CUDA_SUCCESS && total > 0;
        pthread_mutex_lock(&coord.mu);
        if (!d->known) {
            memcpy(d->uuid, u.bytes, ROTA_UUID_LEN);
            d->total = total > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : total;
            d->usable = usable;
            d->rdev = -1;
            d->known = true;
        }
        usable = d->usable;
        pthread_mutex_unlock(&coord.mu);
    }
    return usable ? dev : -1;
}

static uint64_t coord_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* With coord.mu held. */
static bool coord_tab_grow(void)
{
    size_t cap = coord.tab_cap ? coord.tab_cap * 2 : 256;
    coord_alloc_t *n = calloc(cap, sizeof *n);
    if (!n) return false;
    for (size_t i = 0; i < coord.tab_cap; i++) {
        if (!coord.tab[i].used) continue;
        size_t j = coord_hash(coord.tab[i].key) & (cap - 1);
        while (n[j].used) j = (j + 1) & (cap - 1);
        n[j] = coord.tab[i];
    }
    free(coord.tab);
    coord.tab = n;
    coord.tab_cap = cap;
    return true;
}

/* Inserts key; returns the bytes of an entry it replaced (0 if none), or UINT64_MAX when out of memory. */
static uint64_t coord_tab_put(uint64_t key, uint64_t bytes, int dev, int *old_dev)
{
    if ((coord.tab_len + 1) * 2 > coord.tab_cap && !coord_tab_grow()) return UINT64_MAX;
    size_t m = coord.tab_cap - 1, j = coord_hash(key) & m;
    while (coord.tab[j].used && coord.tab[j].key != key) j = (j + 1) & m;
    uint64_t old = 0;
    if (coord.tab[j].used) {
        old = coord.tab[j].bytes;
        *old_dev = coord.tab[j].dev;
    } else {
        coord.tab_len++;
    }
    coord.tab[j] = (coord_alloc_t){.key = key, .bytes = bytes, .dev = dev, .used = true};
    return old;
}

static bool coord_tab_take(uint64_t key, coord_alloc_t *out)
{
    if (!coord.tab_cap) return false;
    size_t m = coord.tab_cap - 1, j = coord_hash(key) & m;
    while (coord.tab[j].used && coord.tab[j].key != key) j = (j + 1) & m;
    if (!coord.tab[j].used) return false;
    *out = coord.tab[j];
    coord.tab[j].used = false;
    coord.tab_len--;
    /* Re-insert the rest of the cluster so that lookups never stop at the hole. */
    for (size_t k = (j + 1) & m; coord.tab[k].used; k = (k + 1) & m) {
        coord_alloc_t e = coord.tab[k];
        coord.tab[k].used = false;
        size_t h = coord_hash(e.key) & m;
        while (coord.tab[h].used) h = (h + 1) & m;
        coord.tab[h] = e;
    }
    return true;
}

/* Gives bytes back, locally and to rotad. With the read lock held. */
static void coord_give_back_locked(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&coord.mu);
    coord_dev_t *d = &coord.devs[dev];
    if (bytes > d->used) bytes = d->used;
    d->used -= bytes;
    pthread_mutex_unlock(&coord.mu);
    if (bytes && coord.conn) conn_release(coord.conn, d->uuid, d->total, bytes);
}

/* ---- retry episodes (docs/design/memory.md) ----------------------------------------------------------------
 * With ROTA_MEM_RETRY on, a request that does not fit now, from a process holding memory on that GPU, is refused
 * at once instead of queueing: a caching allocator (PyTorch's) then frees cached blocks and asks again. That
 * opens an episode on the GPU: its frees are held (still charged at rotad, so no waiter takes them) and the
 * retries draw on them first, without a round trip; a retry that the held bytes cannot cover gives them back and
 * queues as usual. The episode ends COORD_EPISODE_NS after its last event, and what is still held goes back to
 * rotad (from the reaper thread, so a process that goes quiet does not keep it). */

/* Whether PyTorch's caching allocator (libc10_cuda.so) is on the calling stack: a PyTorch process also allocates
 * outside it (NCCL's buffers, for one), and those callers do not retry. Only on the slow path. */
static bool coord_caller_is_torch(void)
{
    void *frames[48];
    int n = backtrace(frames, 48);
    for (int i = 1; i < n; i++) {
        Dl_info info;
        if (!dladdr(frames[i], &info) || !info.dli_fname) continue;
        const char *base = strrchr(info.dli_fname, '/');
        if (!strncmp(base ? base + 1 : info.dli_fname, "libc10_cuda", 11)) return true;
    }
    return false;
}

static bool coord_retry_on(void)
{
    static _Atomic int torch;          /* 1: seen (a library once loaded stays loaded) */
    static _Atomic uint64_t next_look; /* absent: looked again at most once a second */
    switch (rota_options()->mem_retry) {
    case ROTA_MEM_RETRY_ON: return true;
    case ROTA_MEM_RETRY_OFF: return false;
    default: break;
    }
    if (torch) return coord_caller_is_torch();
    uint64_t now = coord_now_ns();
    if (now < next_look) return false;
    next_look = now + COORD_RECONNECT_NS;
    /* PyTorch's caching allocator lives in libc10_cuda.so, loaded before its first cudaMalloc. */
    void *h = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return false;
    dlclose(h);
    torch = 1;
    return coord_caller_is_torch();
}

/* With coord.mu held: ends the episodes that are over; returns their held bytes per device in back[]. */
static bool coord_episode_expire_locked(uint64_t now, uint64_t back[COORD_MAX_DEVS])
{
    bool any = false;
    for (int i = 0; i < COORD_MAX_DEVS; i++) {
        coord_dev_t *d = &coord.devs[i];
        back[i] = 0;
        if (!d->episode_ns || d->episode_ns > now) continue;
        d->episode_ns = 0;
        back[i] = d->held;
        d->held = 0;
        any |= back[i] != 0;
    }
    return any;
}

/* Gives the bytes coord_episode_expire_locked collected back to rotad. With no lock held. */
static void coord_episode_give_back(const uint64_t back[COORD_MAX_DEVS])
{
    pthread_rwlock_rdlock(&coord.rw);
    for (int i = 0; i < COORD_MAX_DEVS; i++)
        if (back[i]) coord_give_back_locked(i, back[i]);
    pthread_rwlock_unlock(&coord.rw);
}

static void *coord_reap_main(void *arg)
{
    (void)arg;
    rota_in_shim = 1;
    uint64_t back[COORD_MAX_DEVS];
    pthread_mutex_lock(&coord.mu);
    for (;;) {
        uint64_t next = 0;
        for (int i = 0; i < COORD_MAX_DEVS; i++) {
            uint64_t e = coord.devs[i].episode_ns;
            if (e && (!next || e < next)) next = e;
        }
        if (!next) {
            pthread_cond_wait(&coord.reap_cv, &coord.mu);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000u), .tv_nsec = (long)(next % 1000000000u)};
        pthread_cond_timedwait(&coord.reap_cv, &coord.mu, &ts);
        if (!coord_episode_expire_locked(coord_now_ns(), back)) continue;
        pthread_mutex_unlock(&coord.mu);
        coord_episode_give_back(back);
        pthread_mutex_lock(&coord.mu);
    }
    return NULL;
}

/* With coord.mu held: opens or extends the episode on d and makes sure the reaper will end it. */
int coord_thread_start(void *(*fn)(void *))
{
    pthread_t th;
    pthread_attr_t at;
    int e = pthread_attr_init(&at);
    if (e) return -e;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    /* The thread blocks every signal, so that the application's signals go to its own threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&th, &at, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    return -e;
}

static void coord_episode_touch_locked(coord_dev_t *d, uint64_t now)
{
    d->episode_ns = now + COORD_EPISODE_NS;
    coord.episodes = true;
    if (!coord.reap_started) {
        coord.reap_started = coord_thread_start(coord_reap_main) == 0;
        /* Without the thread, episodes still end at the process's next memory call. */
    }
    pthread_cond_signal(&coord.reap_cv);
}

/* Ends the episodes that are over (at every memory hook: the reaper may be missing). */
static void coord_episode_tick(void)
{
    uint64_t back[COORD_MAX_DEVS];
    pthread_mutex_lock(&coord.mu);
    bool any = coord_episode_expire_locked(coord_now_ns(), back);
    pthread_mutex_unlock(&coord.mu);
    if (any) coord_episode_give_back(back);
}

/* A free of bytes on dev: held while an episode is open on it, else given back. With the read lock held. */
static void coord_free_locked(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&coord.mu);
    coord_dev_t *d = &coord.devs[dev];
    uint64_t now = coord_now_ns();
    if (d->episode_ns > now) {
        d->held += bytes;
        coord_episode_touch_locked(d, now);
        pthread_mutex_unlock(&coord.mu);
        return;
    }
    pthread_mutex_unlock(&coord.mu);
    coord_give_back_locked(dev, bytes);
}

/* A request during an episode: served from the held bytes when they cover it (true). When they do not, they go
 * back to rotad and the request takes the usual way (false). */
static bool coord_episode_take(int dev, uint64_t bytes, coord_resv_t *r)
{
    pthread_rwlock_rdlock(&coord.rw);
    pthread_mutex_lock(&coord.mu);
    coord_dev_t *d = &coord.devs[dev];
    uint64_t now = coord_now_ns(), back = 0;
    bool served = false;
    if (d->episode_ns > now && d->held) {
        if (d->held >= bytes) {
            d->held -= bytes;
            r->token = ++coord.next_token;
            if (d->retry_pending && !d->retry_pages && d->failfast_bytes == bytes) {
                /* the retry, from what the process freed: the episode is over, the rest goes back */
                d->retry_pending = false;
                back = d->held;
                d->held = 0;
                d->episode_ns = 0;
            } else {
                coord_episode_touch_locked(d, now);
            }
            served = true;
        } else {
            back = d->held;
            d->held = 0;
        }
    }
    pthread_mutex_unlock(&coord.mu);
    if (back) coord_give_back_locked(dev, back);
    pthread_rwlock_unlock(&coord.rw);
    return served;
}

/* ---- for the pool accounting (shim/client-mempool.c) ------------------------------------------------------- */

void coord_dev_charge(int dev, uint64_t bytes)
{
    if (!bytes) return;
    pthread_rwlock_rdlock(&coord.rw);
    coord_dev_t *d = &coord.devs[dev];
    pthread_mutex_lock(&coord.mu);
    d->used += bytes;
    pthread_mutex_unlock(&coord.mu);
    if (coord.conn) conn_adopt(coord.conn, d->uuid, d->total, bytes);
    pthread_rwlock_unlock(&coord.rw);
}

bool coord_dev_contended(int dev)
{
    bool busy = false;
    pthread_rwlock_rdlock(&coord.rw);
    conn_t *c = coord.conn;
    if (c) {
        int x = conn_region_device(c, coord.devs[dev].uuid);
        busy = x >= 0 && atomic_load(&conn_region(c)->devices[x].waiters) > 0;
    }
    pthread_rwlock_unlock(&coord.rw);
    return busy;
}

void coord_dev_uncharge(int dev, uint64_t bytes)
{
    if (!bytes) return;
    coord_maybe_connect();
    pthread_rwlock_rdlock(&coord.rw);
    coord_free_locked(dev, bytes);
    pthread_rwlock_unlock(&coord.rw);
}

/* ---- hooks ------------------------------------------------------------------------------------------------ */

CUresult coord_mem_reserve(CUdevice dev, uint64_t bytes, bool may_wait, coord_resv_t *r)
{
    return coord_reserve(dev, bytes, may_wait, COORD_RETRY_ALLOC, r);
}

CUresult coord_mem_reserve_page(CUdevice dev, uint64_t bytes, bool may_wait, coord_resv_t *r)
{
    return coord_reserve(dev, bytes, may_wait, COORD_RETRY_PAGES, r);
}

/* With coord.mu held: whether this request is the framework's retry of the one refused at once (which must never
 * be refused again). An allocation's retry asks for the same size, and it is over once granted; pages all have
 * one size, so after a refused page every page queues for COORD_PAGES_QUIET_NS. */
static bool coord_is_retry_locked(coord_dev_t *d, uint64_t bytes, int kind, uint64_t now)
{
    if (!d->retry_pending) return false;
    if (now - d->failfast_ns >= (d->retry_pages ? COORD_PAGES_QUIET_NS : COORD_RETRY_WINDOW_NS)) {
        d->retry_pending = false;
        return false;
    }
    return d->retry_pages ? kind == COORD_RETRY_PAGES : bytes == d->failfast_bytes;
}

CUresult coord_reserve(CUdevice dev, uint64_t bytes, bool may_wait, int retry_kind, coord_resv_t *r)
{
    bool retry_ok = retry_kind != COORD_RETRY_NONE;
    r->dev = dev;
    r->bytes = bytes;
    r->token = 0;
    if (coord_off() || !bytes) return CUDA_SUCCESS;
    coord_enter();
    int di = coord_dev_index(dev);
    if (di < 0) return CUDA_SUCCESS; /* a device rota cannot identify: not tracked */
    if (bytes > ROTA_MAX_BYTES) return CUDA_ERROR_OUT_OF_MEMORY;
    coord_maybe_connect();
    if (coord.require_failed) return coord_require_error();

    const rota_options_t *o = rota_options();
    double wait_ms = may_wait ? o->mem_wait_s * 1000.0 : 0;
    unsigned wms = wait_ms <= 0 ? 0 : wait_ms >= ROTA_MAX_WAIT_MS ? ROTA_MAX_WAIT_MS : (unsigned)(wait_ms + 0.5);
    coord_dev_t *d = &coord.devs[di];
    CUresult res = CUDA_SUCCESS;
    uint64_t back = 0;
    if (coord.episodes) {
        coord_episode_tick();
        if (coord_episode_take(di, bytes, r)) return CUDA_SUCCESS; /* from what the process just freed */
    }

    pthread_rwlock_rdlock(&coord.rw);
    conn_t *c = coord.conn;
    int rc = -EPIPE;
    pthread_mutex_lock(&coord.mu);
    int rdev = d->rdev;
    /* The framework's retry (after it synchronised and freed, however long that took) must queue, never be
     * refused again. */
    uint64_t now = coord_now_ns();
    bool is_retry = coord_is_retry_locked(d, bytes, retry_kind, now);
    bool may_fail_fast = retry_ok && wms && d->used > d->held && d->episode_ns <= now && !is_retry;
    pthread_mutex_unlock(&coord.mu);
    if (c && conn_credit_take(c, rdev, bytes)) {
        rc = 0; /* fast path: from the credit rotad already charged to us, no round trip */
    } else if (c && may_fail_fast && coord_retry_on()) {
        /* Holding memory and no episode open: ask without waiting; if it does not fit, refuse at once so that
         * the framework releases its cache and asks again (that opens the episode). */
        uint64_t lim = 0;
        rc = conn_reserve(c, d->uuid, d->total, bytes, 0, &rdev, &lim);
        if (rc == 0 || rc == -ENOMEM || rc == -EDQUOT) {
            pthread_mutex_lock(&coord.mu);
            d->limit = lim;
            d->rdev = rdev;
            if (rc == -ENOMEM || rc == -EDQUOT) { /* the GPU is full, or the process's limit: release first */
                d->failfast_ns = coord_now_ns();
                d->failfast_bytes = bytes;
                d->retry_pending = true;
                d->retry_pages = retry_kind == COORD_RETRY_PAGES;
                coord_episode_touch_locked(d, d->failfast_ns);
            }
            pthread_mutex_unlock(&coord.mu);
        }
        if (rc == -ENOMEM) {
            if (rota_trace_on()) rota_trace_event("mem_deny", (int)dev, bytes, "\"reason\":\"retry\"");
        }
    } else if (c) {
        uint64_t lim = 0;
        /* ROTA_TRACE: a memory-wait span when this request will queue at rotad (the node cannot fit it now, or
         * others already wait); a request that fits is a plain round trip and is not traced. */
        bool traced = false;
        if (wms && rota_trace_on()) {
            const rota_region_t *rg = conn_region(c);
            int x = conn_region_device(c, d->uuid);
            if (x >= 0) {
                uint64_t cap = atomic_load(&rg->devices[x].capacity), taken = atomic_load(&rg->devices[x].reserved);
                traced = atomic_load(&rg->devices[x].waiters) || taken > cap || bytes > cap - taken;
            }
            if (traced) rota_trace_event("mem_wait", (int)dev, bytes, NULL);
        }
        unsigned w = wms;
        if (w && retry_ok && coord_retry_on()) {
            /* A caching allocator's retry that the GPU cannot hold beside the process's own memory waits on
             * nobody but itself: refused at once (its framework then raises OOM instead of stalling). */
            const rota_region_t *rg = conn_region(c);
            int x = conn_region_device(c, d->uuid);
            pthread_mutex_lock(&coord.mu);
            uint64_t own = d->used - d->held;
            pthread_mutex_unlock(&coord.mu);
            if (x >= 0 && own + bytes > atomic_load(&rg->devices[x].capacity)) w = 0;
        }
        rc = conn_reserve(c, d->uuid, d->total, bytes, w, &rdev, &lim);
        if (traced)
            rota_trace_event(rc == -ENOMEM || rc == -EDQUOT ? "mem_deny" : "mem_grant", (int)dev, bytes,
                             rc == 0 ? NULL : rc == -ENOMEM ? "\"reason\":\"timeout\""
                                          : rc == -EDQUOT ? "\"reason\":\"limit\""
                                                          : "\"reason\":\"rotad_gone\"");
        if (rc == 0 || rc == -ENOMEM || rc == -EDQUOT) {
            pthread_mutex_lock(&coord.mu);
            d->limit = lim;
            d->rdev = rdev;
            pthread_mutex_unlock(&coord.mu);
        }
    }
    if (rc == -ENOMEM || rc == -EDQUOT) {
        coord_log(ROTA_LOG_DEBUG, "allocation of %llu bytes on device %d refused: %s", (unsigned long long)bytes,
                  (int)dev, rc == -EDQUOT ? "over the memory limit" : may_fail_fast ? "GPU full, release first"
                                                                    : wms ? "timed out waiting" : "GPU full");
        res = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        if (rc && c && !coord.warned_lost) {
            coord.warned_lost = true;
            coord_log(ROTA_LOG_WARN, "rotad %s; running uncoordinated until it returns",
                      rc == -ESHUTDOWN ? "is shutting down" : rc == -ENOSPC ? "tracks no more GPUs" : "went away");
        }
        pthread_mutex_lock(&coord.mu);
        /* Without rotad, ROTA_MEM_LIMIT still holds for this process (no waiting: nobody would wake us). */
        if (rc && o->mem_limit && (d->used > o->mem_limit || bytes > o->mem_limit - d->used)) {
            res = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            d->used += bytes;
            r->token = ++coord.next_token;
            if (is_retry && !d->retry_pages) {
                /* The retry is served: the episode is over, a new miss may be refused again. */
                d->retry_pending = false;
                back = d->held;
                d->held = 0;
                d->episode_ns = 0;
            }
        }
        pthread_mutex_unlock(&coord.mu);
        if (back) coord_give_back_locked(di, back);
    }
    pthread_rwlock_unlock(&coord.rw);
    return res;
}

void coord_mem_commit(coord_resv_t *r, uint64_t key, uint64_t actual_bytes)
{
    if (!r->token) return;
    int di = coord_dev_index(r->dev);
    if (di < 0) return;
    track_start(); /* it re-registers this memory with a restarted rotad, allocations or not (coord_watch) */
    if (actual_bytes && actual_bytes != r->bytes && actual_bytes <= ROTA_MAX_BYTES) {
        /* The driver chose the size (pitch): give back the excess, or charge the shortfall (ADOPT: the memory
         * is already allocated, rotad cannot refuse it). */
        pthread_rwlock_rdlock(&coord.rw);
        if (actual_bytes < r->bytes) {
            coord_give_back_locked(di, r->bytes - actual_bytes);
        } else {
            coord_dev_t *d = &coord.devs[di];
            pthread_mutex_lock(&coord.mu);
            d->used += actual_bytes - r->bytes;
            pthread_mutex_unlock(&coord.mu);
            if (coord.conn) conn_adopt(coord.conn, d->uuid, d->total, actual_bytes - r->bytes);
        }
        pthread_rwlock_unlock(&coord.rw);
        r->bytes = actual_bytes;
    }
    int old_dev = -1;
    pthread_mutex_lock(&coord.mu);
    uint64_t old = coord_tab_put(key, r->bytes, di, &old_dev);
    pthread_mutex_unlock(&coord.mu);
    if (old == UINT64_MAX) {
        /* Out of memory for the table: forget this allocation rather than lose track of the books. */
        pthread_rwlock_rdlock(&coord.rw);
        coord_give_back_locked(di, r->bytes);
        pthread_rwlock_unlock(&coord.rw);
    } else if (old) {
        /* The driver handed out a key we still held: its free went by untracked. */
        pthread_rwlock_rdlock(&coord.rw);
        coord_give_back_locked(old_dev, old);
        pthread_rwlock_unlock(&coord.rw);
    }
    r->token = 0;
}

void coord_mem_abort(coord_resv_t *r)
{
    if (!r->token) return;
    int di = coord_dev_index(r->dev);
    if (di < 0) return;
    pthread_rwlock_rdlock(&coord.rw);
    coord_give_back_locked(di, r->bytes);
    pthread_rwlock_unlock(&coord.rw);
    r->token = 0;
}

void coord_mem_release(uint64_t key)
{
    if (coord_off()) return;
    coord_enter();
    coord_alloc_t e;
    pthread_mutex_lock(&coord.mu);
    bool found = coord_tab_take(key, &e);
    pthread_mutex_unlock(&coord.mu);
    if (!found) return; /* never seen: passes through, counters untouched */
    coord_maybe_connect();
    pthread_rwlock_rdlock(&coord.rw);
    coord_free_locked(e.dev, e.bytes);
    pthread_rwlock_unlock(&coord.rw);
    if (coord.episodes) coord_episode_tick();
}

void coord_mem_view(CUdevice dev, size_t *free_bytes, size_t *total_bytes)
{
    if (coord_off()) return;
    coord_enter();
    int di = coord_dev_index(dev);
    if (di < 0) return;
    const rota_options_t *o = rota_options();
    pthread_rwlock_rdlock(&coord.rw);
    pthread_mutex_lock(&coord.mu);
    coord_dev_t *d = &coord.devs[di];
    uint64_t lim = d->limit ? d->limit : o->mem_limit;
    if (o->mem_limit && o->mem_limit < lim) lim = o->mem_limit;
    uint64_t used = d->used - d->held; /* held bytes are this process's to use again */
    pthread_mutex_unlock(&coord.mu);
    uint64_t node_free = UINT64_MAX;
    if (coord.conn && conn_alive(coord.conn)) {
        const rota_region_t *rg = conn_region(coord.conn);
        int x = conn_region_device(coord.conn, d->uuid);
        if (x >= 0) {
            uint64_t cap = atomic_load(&rg->devices[x].capacity), res = atomic_load(&rg->devices[x].reserved);
            const rota_channel_t *ch = conn_channel(coord.conn);
            uint64_t mine = ch ? atomic_load(&ch->credit[x]) : 0; /* charged to us, still ours to use */
            node_free = res < cap ? cap - res : 0;
            node_free += mine;
        }
    }
    pthread_rwlock_unlock(&coord.rw);
    if (total_bytes && lim && lim < *total_bytes) *total_bytes = (size_t)lim;
    if (free_bytes) {
        uint64_t f = *free_bytes;
        if (lim) {
            uint64_t left = used < lim ? lim - used : 0;
            if (left < f) f = left;
        }
        if (node_free < f) f = node_free;
        if (total_bytes && f > *total_bytes) f = *total_bytes;
        *free_bytes = (size_t)f;
    }
}

/* ---- for the launch hooks (shim/client-launch.c) ----------------------------------------------------------- */

bool coord_conn_peek(void)
{
    return __atomic_load_n(&coord.conn, __ATOMIC_RELAXED) != NULL;
}

conn_t *coord_conn_lock(void)
{
    /* A reconnect holds the write lock while it connects (up to its timeout): launches then go by
     * uncoordinated rather than wait for it. */
    if (pthread_rwlock_tryrdlock(&coord.rw)) return NULL;
    conn_t *c = coord.conn;
    if (!c) pthread_rwlock_unlock(&coord.rw);
    return c;
}

uint32_t coord_conn_gen(void)
{
    return coord.conn_gen;
}

void coord_conn_unlock(void)
{
    pthread_rwlock_unlock(&coord.rw);
}

int coord_region_dev(conn_t *c, CUdevice dev)
{
    int di = coord_dev_index(dev);
    if (di < 0) return -1;
    pthread_mutex_lock(&coord.mu);
    uint8_t uuid[ROTA_UUID_LEN];
    memcpy(uuid, coord.devs[di].uuid, ROTA_UUID_LEN);
    pthread_mutex_unlock(&coord.mu);
    return conn_region_device(c, uuid);
}
