/* client.c - librota's client of rotad: registers with rotad, reserves memory through its ledger, fails open. */
#include "shim/real.h"

#include "shim/client.h"
#include "shim/client-internal.h"
#include "shim/counters.h"
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
 *   client.rw     guards the connection pointer. Every use of the connection, and every change of the local
 *                byte counts that rotad must mirror, happens under the read lock; replacing the connection
 *                (reconnect: open, then ADOPT of every live byte) under the write lock, taken with trywrlock
 *                so that no caller ever blocks on a reconnect. So rotad's ledger for this process is always
 *                "what the last ADOPT said + every delta sent after it", and never counts a byte twice.
 *   client.mu     guards the device table and the allocation table (short critical sections only).
 *
 * Fail-open: with no rotad (or after it died) the hooks keep local books and let every call through; a
 * reconnect is attempted at most once a second, only from the memory hooks (never from launches). ROTA_REQUIRE=1
 * turns "no rotad" into an error instead (see client_require_error).
 *
 * fork: the child drops the inherited connection (pthread_atfork, with a pid check as a fallback) without a
 * word to rotad, forgets the parent's allocations (its CUDA state is not the parent's) and registers itself on
 * its next memory call.
 */

#define CLIENT_MAX_DEVS 64          /* CUdevice ordinals cached */
#define CLIENT_RECONNECT_NS 1000000000ull
#define CLIENT_PROBE_NS 100000000ull  /* how often a live connection is checked for a silent rotad death */
#define CLIENT_EPISODE_NS 1000000000ull /* a retry episode ends this long after its last event */
#define CLIENT_RETRY_WINDOW_NS 30000000000ull /* a refused request's retry comes within this */
#define CLIENT_PAGES_QUIET_NS 5000000000ull   /* after a refused page (cuMemCreate), pages queue this long */

typedef struct client_dev {
    _Atomic bool known;            /* uuid/total/usable were queried and are set for good (release/acquire) */
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
} client_dev_t;

typedef struct client_alloc {
    uint64_t key;
    uint64_t bytes;
    int dev;                       /* index in client.devs */
    bool used;                     /* slot in use (open addressing; deleted entries are re-inserted) */
} client_alloc_t;

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
    _Atomic uint64_t next_pid_check_ns; /* client_enter's next getpid */
    uint64_t next_token;
    client_dev_t devs[CLIENT_MAX_DEVS];
    client_alloc_t *tab;
    size_t tab_cap, tab_len;
    pthread_cond_t reap_cv;        /* the episode reaper's (CLOCK_MONOTONIC), under mu */
    bool reap_started;
} client = {
    .rw = PTHREAD_RWLOCK_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_once_t client_once = PTHREAD_ONCE_INIT;

/* One line on stderr through the shim's logger (one write, fork-safe, filtered by ROTA_LOG). */
#define client_log rota_log

uint64_t client_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool client_off(void)
{
    const rota_options_t *o = rota_options();
    return o->disable || rota_options_errors();
}

/* The upper files' hooks (client_set_hooks, from client_init before any other hook). */
static client_hooks_t client_hooks;

void client_set_hooks(const client_hooks_t *h)
{
    client_hooks = *h;
}

/* ---- fork ----------------------------------------------------------------------------------------------- */

static void client_reap_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&client.reap_cv, &a);
    pthread_condattr_destroy(&a);
}

static void client_reset_child(void)
{
    /* Locks may be held by threads that do not exist here: start from fresh ones. */
    pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&client.rw, &rw, sizeof rw);
    memcpy(&client.mu, &mu, sizeof mu);
    client_reap_cv_init();
    if (client.conn) conn_abandon(client.conn); /* closes our copy of the socket: the parent's stays up */
    __atomic_store_n(&client.conn, NULL, __ATOMIC_RELEASE); /* peeked at by client_conn_peek */
    client.pid = getpid();
    client.tried = false;
    client.warned_lost = false;
    client.last_attempt_ns = 0;
    client.next_probe_ns = 0;
    client.next_pid_check_ns = 0;
    for (int i = 0; i < CLIENT_MAX_DEVS; i++) {
        client.devs[i].used = 0;
        client.devs[i].limit = 0;
        client.devs[i].rdev = -1;
        client.devs[i].held = 0;
        client.devs[i].episode_ns = 0;
        client.devs[i].failfast_ns = 0;
        client.devs[i].failfast_bytes = 0;
        client.devs[i].retry_pending = false;
    }
    client.reap_started = false; /* the reaper thread is the parent's */
    if (client_hooks.fork_child) client_hooks.fork_child();
    free(client.tab);
    client.tab = NULL;
    client.tab_cap = client.tab_len = 0;
}

static void client_setup(void)
{
    client.pid = getpid();
    client_reap_cv_init();
    pthread_atfork(NULL, NULL, client_reset_child);
}

/* Entry check of every hook: one-time setup, and a fork that bypassed pthread_atfork (raw clone). getpid is a
 * syscall: checked at most once per CLIENT_PROBE_NS (a clock read otherwise), so such a child is found out by
 * its first memory call after that; a fork through glibc resets at once (pthread_atfork). */
static void client_enter(void)
{
    pthread_once(&client_once, client_setup);
    uint64_t now = client_now_ns();
    if (now < atomic_load_explicit(&client.next_pid_check_ns, memory_order_relaxed)) return;
    atomic_store_explicit(&client.next_pid_check_ns, now + CLIENT_PROBE_NS, memory_order_relaxed);
    if (client.pid != getpid()) client_reset_child();
}

/* ---- connection ----------------------------------------------------------------------------------------- */

/* Opens a connection and re-registers every live byte. Called with the write lock held. */
static void client_connect_locked(bool first)
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
        .grant_token = o->has_grant ? o->grant : NULL,
    };
    char err[256];
    conn_t *c = NULL;
    client.last_attempt_ns = client_now_ns();
    int rc = conn_open(&co, &c, err, sizeof err);
    if (rc) {
        if (rc == -EPROTO) {
            client.abi_mismatch = true;
            client_log(ROTA_LOG_ERROR, "%s; running uncoordinated", err);
        } else if (o->require) {
            client.require_failed = true;
            if (!client.warned_absent)
                client_log(ROTA_LOG_ERROR, "ROTA_REQUIRE=1 and %s; CUDA calls fail (cuInit: CUDA_ERROR_NOT_INITIALIZED) until rotad is reachable", err);
        } else if (!client.warned_absent) {
            client_log(ROTA_LOG_WARN, "%s; running uncoordinated (memory is not shared fairly)", err);
        }
        client.warned_absent = true;
        return;
    }
    client.require_failed = false;
    if (co.priority == ROTA_PRIO_HIGH && !conn_high(c) && !client.warned_demoted) {
        client_log(ROTA_LOG_WARN, "rotad's policy does not let this user run high priority: running as normal");
        client.warned_demoted = true;
    }
    pthread_mutex_lock(&client.mu);
    for (int i = 0; i < CLIENT_MAX_DEVS; i++) {
        client_dev_t *d = &client.devs[i];
        d->rdev = -1;
        if (d->usable && d->used) conn_adopt(c, d->uuid, d->total, d->used);
    }
    pthread_mutex_unlock(&client.mu);
    if (client_hooks.connected) client_hooks.connected();
    client.conn_gen = client.conn_gen + 1 ? client.conn_gen + 1 : 1;
    __atomic_store_n(&client.conn, c, __ATOMIC_RELEASE);
    client.warned_lost = false;
    if (!first || client.warned_absent)
        client_log(ROTA_LOG_INFO, "connected to rotad (slot %u)%s", conn_slot(c),
                  first ? "" : "; live allocations re-registered");
    client.warned_absent = false;
}

/* Makes sure a usable connection exists if one can be had; rate-limited, never blocking on other threads. */
static void client_maybe_connect(void)
{
    if (client.abi_mismatch) return;
    if (client.tried) {
        /* The common case costs a clock read: no lock, no syscall. */
        uint64_t now = client_now_ns();
        if (now - client.last_attempt_ns < CLIENT_RECONNECT_NS || now < client.next_probe_ns) return;
        client.next_probe_ns = now + CLIENT_PROBE_NS;
    }
    pthread_rwlock_rdlock(&client.rw);
    conn_t *c = client.conn;
    bool alive = c && conn_alive(c);
    pthread_rwlock_unlock(&client.rw);
    if (alive) return;
    if (pthread_rwlock_trywrlock(&client.rw)) return;
    c = client.conn;
    bool first = !client.tried;
    if (!(c && conn_alive(c)) && (first || client_now_ns() - client.last_attempt_ns >= CLIENT_RECONNECT_NS)) {
        if (c) {
            if (!client.warned_lost) client_log(ROTA_LOG_WARN, "lost rotad; running uncoordinated until it returns");
            client.warned_lost = true;
            conn_close(c); /* no thread is inside: we hold the write lock */
            __atomic_store_n(&client.conn, NULL, __ATOMIC_RELEASE);
        }
        client.tried = true;
        client_connect_locked(first);
    }
    pthread_rwlock_unlock(&client.rw);
}

bool client_watch(void)
{
    if (client_off() || client.abi_mismatch) return false;
    bool holds = false;
    pthread_mutex_lock(&client.mu);
    for (int i = 0; i < CLIENT_MAX_DEVS && !holds; i++) holds = client.devs[i].usable && client.devs[i].used;
    pthread_mutex_unlock(&client.mu);
    if (holds) client_maybe_connect(); /* rate-limited; re-registers everything it holds (ADOPT) */
    return true;
}

/* ROTA_REQUIRE=1 without rotad: the error cuInit and every memory hook return. */
static CUresult client_require_error(void)
{
    return CUDA_ERROR_NOT_INITIALIZED;
}

bool client_process_connect(void)
{
    if (client_off()) return false;
    client_enter();
    if (!client.tried || client.require_failed) client_maybe_connect();
    return true;
}

CUresult client_process_status(void)
{
    return client.require_failed ? client_require_error() : CUDA_SUCCESS;
}

/* ---- devices and allocations ------------------------------------------------------------------------------ */

int client_dev_index(CUdevice dev)
{
    if (dev < 0 || dev >= CLIENT_MAX_DEVS) return -1;
    client_dev_t *d = &client.devs[dev];
    /* Every memory hook asks: once known, the answer is one load (uuid, total, usable never change after). */
    if (atomic_load_explicit(&d->known, memory_order_acquire)) return d->usable ? dev : -1;
    CUuuid u;
    size_t total = 0;
    bool usable = ROTA_REAL(cuDeviceGetUuid)(&u, dev) == CUDA_SUCCESS &&
                  ROTA_REAL(cuDeviceTotalMem_v2)(&total, dev) == CUDA_SUCCESS && total > 0;
    pthread_mutex_lock(&client.mu);
    if (!d->known) {
        memcpy(d->uuid, u.bytes, ROTA_UUID_LEN);
        d->total = total > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : total;
        d->usable = usable;
        d->rdev = -1;
        atomic_store_explicit(&d->known, true, memory_order_release);
    }
    usable = d->usable;
    pthread_mutex_unlock(&client.mu);
    return usable ? dev : -1;
}

static uint64_t client_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* With client.mu held. */
static bool client_tab_grow(void)
{
    size_t cap = client.tab_cap ? client.tab_cap * 2 : 256;
    client_alloc_t *n = calloc(cap, sizeof *n);
    if (!n) return false;
    for (size_t i = 0; i < client.tab_cap; i++) {
        if (!client.tab[i].used) continue;
        size_t j = client_hash(client.tab[i].key) & (cap - 1);
        while (n[j].used) j = (j + 1) & (cap - 1);
        n[j] = client.tab[i];
    }
    free(client.tab);
    client.tab = n;
    client.tab_cap = cap;
    return true;
}

/* Inserts key; returns the bytes of an entry it replaced (0 if none), or UINT64_MAX when out of memory. */
static uint64_t client_tab_put(uint64_t key, uint64_t bytes, int dev, int *old_dev)
{
    if ((client.tab_len + 1) * 2 > client.tab_cap && !client_tab_grow()) return UINT64_MAX;
    size_t m = client.tab_cap - 1, j = client_hash(key) & m;
    while (client.tab[j].used && client.tab[j].key != key) j = (j + 1) & m;
    uint64_t old = 0;
    if (client.tab[j].used) {
        old = client.tab[j].bytes;
        *old_dev = client.tab[j].dev;
    } else {
        client.tab_len++;
    }
    client.tab[j] = (client_alloc_t){.key = key, .bytes = bytes, .dev = dev, .used = true};
    return old;
}

static bool client_tab_take(uint64_t key, client_alloc_t *out)
{
    if (!client.tab_cap) return false;
    size_t m = client.tab_cap - 1, j = client_hash(key) & m;
    while (client.tab[j].used && client.tab[j].key != key) j = (j + 1) & m;
    if (!client.tab[j].used) return false;
    *out = client.tab[j];
    client.tab[j].used = false;
    client.tab_len--;
    /* Re-insert the rest of the cluster so that lookups never stop at the hole. */
    for (size_t k = (j + 1) & m; client.tab[k].used; k = (k + 1) & m) {
        client_alloc_t e = client.tab[k];
        client.tab[k].used = false;
        size_t h = client_hash(e.key) & m;
        while (client.tab[h].used) h = (h + 1) & m;
        client.tab[h] = e;
    }
    return true;
}

/* Gives bytes back, locally and to rotad: into this client's credit while rotad lets it keep them there
 * (conn_credit_put: no message; an alloc/free loop makes no syscall), else with a RELEASE. With the read lock
 * held; client_put_back is the part after the local count (rdev: d->rdev as read with it). */
static void client_put_back(int dev, int rdev, uint64_t bytes)
{
    conn_t *c = client.conn;
    if (!bytes || !c) return;
    uint64_t back = conn_credit_put(c, rdev, bytes);
    if (!back) return;
    rota_count(ROTA_EV_MEM_RELEASE_MSG);
    conn_release(c, client.devs[dev].uuid, client.devs[dev].total, back);
}

static void client_give_back_locked(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&client.mu);
    client_dev_t *d = &client.devs[dev];
    if (bytes > d->used) bytes = d->used;
    d->used -= bytes;
    int rdev = d->rdev;
    pthread_mutex_unlock(&client.mu);
    client_put_back(dev, rdev, bytes);
}

/* ---- retry episodes (docs/design/memory.md) ----------------------------------------------------------------
 * With ROTA_MEM_RETRY on, a request that does not fit now, from a process holding memory on that GPU, is refused
 * at once instead of queueing: a caching allocator (PyTorch's) then frees cached blocks and asks again. That
 * opens an episode on the GPU: its frees are held (still charged at rotad, so no waiter takes them) and the
 * retries draw on them first, without a round trip; a retry that the held bytes cannot cover gives them back and
 * queues as usual. The episode ends CLIENT_EPISODE_NS after its last event, and what is still held goes back to
 * rotad (from the reaper thread, so a process that goes quiet does not keep it). */

/* Whether PyTorch's caching allocator (libc10_cuda.so) is on the calling stack: a PyTorch process also allocates
 * outside it (NCCL's buffers, for one), and those callers do not retry. Only on the slow path. */
static bool client_caller_is_torch(void)
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

/* Whether PyTorch's allocator, as this process configures it, retries a refused request after releasing its
 * cache (c10/cuda/CUDACachingAllocator.cpp, CUDAMallocAsyncAllocator.cpp):
 *   PYTORCH_NO_CUDA_MEMORY_CACHING set (any value: PyTorch tests presence), or its HIP twin: every tensor is one
 *     cudaMalloc from libc10_cuda and an OOM is raised at once: no retry;
 *   backend:cudaMallocAsync in PYTORCH_ALLOC_CONF (else PYTORCH_CUDA_ALLOC_CONF, PyTorch's older name): one
 *     cudaMallocAsync per tensor, OutOfMemoryError at its first refusal: no retry;
 *   else the native caching allocator: it frees cached blocks and tries again.
 * Read once, when libc10_cuda.so is first seen (PyTorch reads them once too). */
static bool client_torch_retries(void)
{
    if (getenv("PYTORCH_NO_CUDA_MEMORY_CACHING") || getenv("PYTORCH_NO_HIP_MEMORY_CACHING")) return false;
    const char *conf = getenv("PYTORCH_ALLOC_CONF");
    if (!conf) conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    /* key:value pairs separated by commas, blanks around either ignored */
    for (const char *p = conf; p && *p;) {
        size_t n = strcspn(p, ",");
        const char *k = p, *end = p + n, *colon = memchr(p, ':', n);
        p = *end ? end + 1 : end;
        if (!colon) continue;
        const char *v = colon + 1, *kend = colon;
        while (k < kend && (*k == ' ' || *k == '\t')) k++;
        while (kend > k && (kend[-1] == ' ' || kend[-1] == '\t')) kend--;
        while (v < end && (*v == ' ' || *v == '\t')) v++;
        const char *vend = end;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
        if (kend - k == 7 && !strncmp(k, "backend", 7) && vend - v == 15 && !strncmp(v, "cudaMallocAsync", 15))
            return false;
    }
    return true;
}

static bool client_retry_on(void)
{
    static _Atomic int torch;          /* 1: seen (a library once loaded stays loaded); -1: seen, no retry */
    static _Atomic uint64_t next_look; /* absent: looked again at most once a second */
    switch (rota_options()->mem_retry) {
    case ROTA_MEM_RETRY_ON: return true;
    case ROTA_MEM_RETRY_OFF: return false;
    default: break;
    }
    if (torch) return torch > 0 && client_caller_is_torch();
    uint64_t now = client_now_ns();
    if (now < next_look) return false;
    next_look = now + CLIENT_RECONNECT_NS;
    /* PyTorch's caching allocator lives in libc10_cuda.so, loaded before its first cudaMalloc. */
    void *h = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return false;
    dlclose(h);
    bool retries = client_torch_retries();
    if (!retries) rota_log(ROTA_LOG_INFO, "ROTA_MEM_RETRY=auto: PyTorch's allocator does not retry here "
                                          "(PYTORCH_NO_CUDA_MEMORY_CACHING or backend:cudaMallocAsync): requests queue");
    torch = retries ? 1 : -1;
    return retries && client_caller_is_torch();
}

/* With client.mu held: ends the episodes that are over; returns their held bytes per device in back[]. */
static bool client_episode_expire_locked(uint64_t now, uint64_t back[CLIENT_MAX_DEVS])
{
    bool any = false;
    for (int i = 0; i < CLIENT_MAX_DEVS; i++) {
        client_dev_t *d = &client.devs[i];
        back[i] = 0;
        if (!d->episode_ns || d->episode_ns > now) continue;
        d->episode_ns = 0;
        back[i] = d->held;
        d->held = 0;
        any |= back[i] != 0;
    }
    return any;
}

/* Gives the bytes client_episode_expire_locked collected back to rotad. With no lock held. */
static void client_episode_give_back(const uint64_t back[CLIENT_MAX_DEVS])
{
    pthread_rwlock_rdlock(&client.rw);
    for (int i = 0; i < CLIENT_MAX_DEVS; i++)
        if (back[i]) client_give_back_locked(i, back[i]);
    pthread_rwlock_unlock(&client.rw);
}

static void *client_reap_main(void *arg)
{
    (void)arg;
    rota_in_shim = 1;
    uint64_t back[CLIENT_MAX_DEVS];
    pthread_mutex_lock(&client.mu);
    for (;;) {
        uint64_t next = 0;
        for (int i = 0; i < CLIENT_MAX_DEVS; i++) {
            uint64_t e = client.devs[i].episode_ns;
            if (e && (!next || e < next)) next = e;
        }
        if (!next) {
            pthread_cond_wait(&client.reap_cv, &client.mu);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000u), .tv_nsec = (long)(next % 1000000000u)};
        pthread_cond_timedwait(&client.reap_cv, &client.mu, &ts);
        if (!client_episode_expire_locked(client_now_ns(), back)) continue;
        pthread_mutex_unlock(&client.mu);
        client_episode_give_back(back);
        pthread_mutex_lock(&client.mu);
    }
    return NULL;
}

/* With client.mu held: opens or extends the episode on d and makes sure the reaper will end it. */
int client_thread_start(void *(*fn)(void *))
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

static void client_episode_touch_locked(client_dev_t *d, uint64_t now)
{
    d->episode_ns = now + CLIENT_EPISODE_NS;
    client.episodes = true;
    if (!client.reap_started) {
        client.reap_started = client_thread_start(client_reap_main) == 0;
        /* Without the thread, episodes still end at the process's next memory call. */
    }
    pthread_cond_signal(&client.reap_cv);
}

/* Ends the episodes that are over (at every memory hook: the reaper may be missing). */
static void client_episode_tick(void)
{
    uint64_t back[CLIENT_MAX_DEVS];
    pthread_mutex_lock(&client.mu);
    bool any = client_episode_expire_locked(client_now_ns(), back);
    pthread_mutex_unlock(&client.mu);
    if (any) client_episode_give_back(back);
}

/* With client.rw read-held and client.mu held: a free of bytes on dev, held while an episode is open on it (0),
 * else taken off this process's count; returns the bytes to give back to rotad (client_put_back). */
static uint64_t client_free_mu_locked(int dev, uint64_t bytes)
{
    client_dev_t *d = &client.devs[dev];
    if (client.episodes) { /* a clock read only where an episode was ever opened */
        uint64_t now = client_now_ns();
        if (d->episode_ns > now) {
            d->held += bytes;
            client_episode_touch_locked(d, now);
            return 0;
        }
    }
    if (bytes > d->used) bytes = d->used;
    d->used -= bytes;
    return bytes;
}

/* A free of bytes on dev: held while an episode is open on it, else given back. With the read lock held. */
static void client_free_locked(int dev, uint64_t bytes)
{
    pthread_mutex_lock(&client.mu);
    uint64_t back = client_free_mu_locked(dev, bytes);
    int rdev = client.devs[dev].rdev;
    pthread_mutex_unlock(&client.mu);
    client_put_back(dev, rdev, back);
}

/* A request during an episode: served from the held bytes when they cover it (true). When they do not, they go
 * back to rotad and the request takes the usual way (false). */
static bool client_episode_take(int dev, uint64_t bytes, client_resv_t *r)
{
    pthread_rwlock_rdlock(&client.rw);
    pthread_mutex_lock(&client.mu);
    client_dev_t *d = &client.devs[dev];
    uint64_t now = client_now_ns(), back = 0;
    bool served = false;
    if (d->episode_ns > now && d->held) {
        if (d->held >= bytes) {
            d->held -= bytes;
            r->token = ++client.next_token;
            if (d->retry_pending && !d->retry_pages && d->failfast_bytes == bytes) {
                /* the retry, from what the process freed: the episode is over, the rest goes back */
                d->retry_pending = false;
                back = d->held;
                d->held = 0;
                d->episode_ns = 0;
            } else {
                client_episode_touch_locked(d, now);
            }
            served = true;
        } else {
            back = d->held;
            d->held = 0;
        }
    }
    pthread_mutex_unlock(&client.mu);
    if (back) client_give_back_locked(dev, back);
    pthread_rwlock_unlock(&client.rw);
    return served;
}

/* ---- for the pool accounting (shim/client-mempool.c) ------------------------------------------------------- */

void client_dev_charge(int dev, uint64_t bytes)
{
    if (!bytes) return;
    pthread_rwlock_rdlock(&client.rw);
    client_dev_t *d = &client.devs[dev];
    pthread_mutex_lock(&client.mu);
    d->used += bytes;
    pthread_mutex_unlock(&client.mu);
    if (client.conn) conn_adopt(client.conn, d->uuid, d->total, bytes);
    pthread_rwlock_unlock(&client.rw);
}

bool client_dev_contended(int dev)
{
    bool busy = false;
    pthread_rwlock_rdlock(&client.rw);
    conn_t *c = client.conn;
    if (c) {
        int x = conn_region_device(c, client.devs[dev].uuid);
        busy = x >= 0 && atomic_load(&conn_region(c)->devices[x].waiters) > 0;
    }
    pthread_rwlock_unlock(&client.rw);
    return busy;
}

void client_dev_uncharge(int dev, uint64_t bytes)
{
    if (!bytes) return;
    client_maybe_connect();
    pthread_rwlock_rdlock(&client.rw);
    client_free_locked(dev, bytes);
    pthread_rwlock_unlock(&client.rw);
}

/* ---- hooks ------------------------------------------------------------------------------------------------ */

CUresult client_mem_reserve(CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r)
{
    return client_reserve(dev, bytes, may_wait, CLIENT_RETRY_ALLOC, r);
}

CUresult client_mem_reserve_page(CUdevice dev, uint64_t bytes, bool may_wait, client_resv_t *r)
{
    return client_reserve(dev, bytes, may_wait, CLIENT_RETRY_PAGES, r);
}

/* With client.mu held: whether this request is the framework's retry of the one refused at once (which must never
 * be refused again). An allocation's retry asks for the same size, and it is over once granted; pages all have
 * one size, so after a refused page every page queues for CLIENT_PAGES_QUIET_NS. */
static bool client_is_retry_locked(client_dev_t *d, uint64_t bytes, int kind, uint64_t now)
{
    if (!d->retry_pending) return false;
    if (now - d->failfast_ns >= (d->retry_pages ? CLIENT_PAGES_QUIET_NS : CLIENT_RETRY_WINDOW_NS)) {
        d->retry_pending = false;
        return false;
    }
    return d->retry_pages ? kind == CLIENT_RETRY_PAGES : bytes == d->failfast_bytes;
}

/* client_reserve's ask of a process that holds memory and has no episode open, with client.rw read-held: without
 * waiting; if it does not fit, refuse at once so that the framework releases its cache and asks again (that opens
 * the episode). rdev is rotad's index of d (a hint, -1 if unknown). 0 or conn_reserve's -errno. */
static int client_reserve_failfast(conn_t *c, client_dev_t *d, CUdevice dev, uint64_t bytes, int retry_kind, int rdev)
{
    uint64_t lim = 0;
    int rc = conn_reserve(c, d->uuid, d->total, bytes, 0, &rdev, &lim);
    if (rc == 0 || rc == -ENOMEM || rc == -EDQUOT) {
        pthread_mutex_lock(&client.mu);
        d->limit = lim;
        d->rdev = rdev;
        if (rc == -ENOMEM || rc == -EDQUOT) { /* the GPU is full, or the process's limit: release first */
            d->failfast_ns = client_now_ns();
            d->failfast_bytes = bytes;
            d->retry_pending = true;
            d->retry_pages = retry_kind == CLIENT_RETRY_PAGES;
            client_episode_touch_locked(d, d->failfast_ns);
        }
        pthread_mutex_unlock(&client.mu);
    }
    if (rc == -ENOMEM) {
        if (rota_trace_on()) rota_trace_event("mem_deny", (int)dev, bytes, "\"reason\":\"retry\"");
    }
    return rc;
}

/* client_reserve's ask that may queue at rotad for up to wms ms (0: fails at once if it does not fit), with
 * client.rw read-held; rdev is rotad's index of d (a hint, -1 if unknown). 0 or conn_reserve's -errno. */
static int client_reserve_wait(conn_t *c, client_dev_t *d, CUdevice dev, uint64_t bytes, unsigned wms, bool retry_ok,
                               int rdev)
{
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
    if (w && retry_ok && client_retry_on()) {
        /* A caching allocator's retry that the GPU cannot hold beside the process's own memory waits on
         * nobody but itself: refused at once (its framework then raises OOM instead of stalling). */
        const rota_region_t *rg = conn_region(c);
        int x = conn_region_device(c, d->uuid);
        pthread_mutex_lock(&client.mu);
        uint64_t own = d->used - d->held;
        pthread_mutex_unlock(&client.mu);
        if (x >= 0 && own + bytes > atomic_load(&rg->devices[x].capacity)) w = 0;
    }
    int rc = conn_reserve(c, d->uuid, d->total, bytes, w, &rdev, &lim);
    if (traced)
        rota_trace_event(rc == -ENOMEM || rc == -EDQUOT ? "mem_deny" : "mem_grant", (int)dev, bytes,
                         rc == 0 ? NULL : rc == -ENOMEM ? "\"reason\":\"timeout\""
                                      : rc == -EDQUOT ? "\"reason\":\"limit\""
                                                      : "\"reason\":\"rotad_gone\"");
    if (rc == 0 || rc == -ENOMEM || rc == -EDQUOT) {
        pthread_mutex_lock(&client.mu);
        d->limit = lim;
        d->rdev = rdev;
        pthread_mutex_unlock(&client.mu);
    }
    return rc;
}

CUresult client_reserve(CUdevice dev, uint64_t bytes, bool may_wait, int retry_kind, client_resv_t *r)
{
    bool retry_ok = retry_kind != CLIENT_RETRY_NONE;
    r->dev = dev;
    r->bytes = bytes;
    r->token = 0;
    if (client_off() || !bytes) return CUDA_SUCCESS;
    client_enter();
    int di = client_dev_index(dev);
    if (di < 0) return CUDA_SUCCESS; /* a device rota cannot identify: not tracked */
    if (bytes > ROTA_MAX_BYTES) return CUDA_ERROR_OUT_OF_MEMORY;
    client_maybe_connect();
    if (client.require_failed) return client_require_error();

    const rota_options_t *o = rota_options();
    double wait_ms = may_wait ? o->mem_wait_s * 1000.0 : 0;
    unsigned wms = wait_ms <= 0 ? 0 : wait_ms >= ROTA_MAX_WAIT_MS ? ROTA_MAX_WAIT_MS : (unsigned)(wait_ms + 0.5);
    client_dev_t *d = &client.devs[di];
    CUresult res = CUDA_SUCCESS;
    uint64_t back = 0;
    if (client.episodes) {
        client_episode_tick();
        if (client_episode_take(di, bytes, r)) return CUDA_SUCCESS; /* from what the process just freed */
    }

    pthread_rwlock_rdlock(&client.rw);
    conn_t *c = client.conn;
    int rc = -EPIPE;
    pthread_mutex_lock(&client.mu);
    int rdev = d->rdev;
    if (c && !d->retry_pending && conn_credit_take(c, rdev, bytes)) {
        /* The fast path: from the credit rotad already charged to us, no round trip, no syscall, one lock. */
        d->used += bytes;
        r->token = ++client.next_token;
        pthread_mutex_unlock(&client.mu);
        pthread_rwlock_unlock(&client.rw);
        return CUDA_SUCCESS;
    }
    /* The framework's retry (after it synchronised and freed, however long that took) must queue, never be
     * refused again. */
    uint64_t now = client_now_ns();
    bool is_retry = client_is_retry_locked(d, bytes, retry_kind, now);
    bool may_fail_fast = retry_ok && wms && d->used > d->held && d->episode_ns <= now && !is_retry;
    pthread_mutex_unlock(&client.mu);
    if (c && conn_credit_take(c, rdev, bytes)) {
        rc = 0; /* fast path: from the credit rotad already charged to us, no round trip */
    } else if (c && may_fail_fast && client_retry_on()) {
        rc = client_reserve_failfast(c, d, dev, bytes, retry_kind, rdev);
    } else if (c) {
        rc = client_reserve_wait(c, d, dev, bytes, wms, retry_ok, rdev);
    }
    if (rc == -ENOMEM || rc == -EDQUOT) {
        client_log(ROTA_LOG_DEBUG, "allocation of %llu bytes on device %d refused: %s", (unsigned long long)bytes,
                  (int)dev, rc == -EDQUOT ? "over the memory limit" : may_fail_fast ? "GPU full, release first"
                                                                    : wms ? "timed out waiting" : "GPU full");
        res = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        if (rc && c && !client.warned_lost) {
            client.warned_lost = true;
            client_log(ROTA_LOG_WARN, "rotad %s; running uncoordinated until it returns",
                      rc == -ESHUTDOWN ? "is shutting down" : rc == -ENOSPC ? "tracks no more GPUs" : "went away");
        }
        pthread_mutex_lock(&client.mu);
        /* Without rotad, ROTA_MEM_LIMIT still holds for this process (no waiting: nobody would wake us). */
        if (rc && o->mem_limit && (d->used > o->mem_limit || bytes > o->mem_limit - d->used)) {
            res = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            d->used += bytes;
            r->token = ++client.next_token;
            if (is_retry && !d->retry_pages) {
                /* The retry is served: the episode is over, a new miss may be refused again. */
                d->retry_pending = false;
                back = d->held;
                d->held = 0;
                d->episode_ns = 0;
            }
        }
        pthread_mutex_unlock(&client.mu);
        if (back) client_give_back_locked(di, back);
    }
    pthread_rwlock_unlock(&client.rw);
    return res;
}

void client_mem_commit(client_resv_t *r, uint64_t key, uint64_t actual_bytes)
{
    if (!r->token) return;
    int di = client_dev_index(r->dev);
    if (di < 0) return;
    /* The tracker: it re-registers this memory with a restarted rotad, allocations or not (client_watch). */
    if (client_hooks.holds_memory) client_hooks.holds_memory();
    if (actual_bytes && actual_bytes != r->bytes && actual_bytes <= ROTA_MAX_BYTES) {
        /* The driver chose the size (pitch): give back the excess, or charge the shortfall (ADOPT: the memory
         * is already allocated, rotad cannot refuse it). */
        pthread_rwlock_rdlock(&client.rw);
        if (actual_bytes < r->bytes) {
            client_give_back_locked(di, r->bytes - actual_bytes);
        } else {
            client_dev_t *d = &client.devs[di];
            pthread_mutex_lock(&client.mu);
            d->used += actual_bytes - r->bytes;
            pthread_mutex_unlock(&client.mu);
            if (client.conn) conn_adopt(client.conn, d->uuid, d->total, actual_bytes - r->bytes);
        }
        pthread_rwlock_unlock(&client.rw);
        r->bytes = actual_bytes;
    }
    int old_dev = -1;
    pthread_mutex_lock(&client.mu);
    uint64_t old = client_tab_put(key, r->bytes, di, &old_dev);
    pthread_mutex_unlock(&client.mu);
    if (old == UINT64_MAX) {
        /* Out of memory for the table: forget this allocation rather than lose track of the books. */
        pthread_rwlock_rdlock(&client.rw);
        client_give_back_locked(di, r->bytes);
        pthread_rwlock_unlock(&client.rw);
    } else if (old) {
        /* The driver handed out a key we still held: its free went by untracked. */
        pthread_rwlock_rdlock(&client.rw);
        client_give_back_locked(old_dev, old);
        pthread_rwlock_unlock(&client.rw);
    }
    r->token = 0;
}

void client_mem_abort(client_resv_t *r)
{
    if (!r->token) return;
    int di = client_dev_index(r->dev);
    if (di < 0) return;
    pthread_rwlock_rdlock(&client.rw);
    client_give_back_locked(di, r->bytes);
    pthread_rwlock_unlock(&client.rw);
    r->token = 0;
}

void client_mem_release(uint64_t key)
{
    if (client_off()) return;
    client_enter();
    client_maybe_connect();
    client_alloc_t e;
    pthread_rwlock_rdlock(&client.rw);
    pthread_mutex_lock(&client.mu); /* one critical section: the key, the count, rotad's index */
    bool found = client_tab_take(key, &e); /* a key never seen passes through, counters untouched */
    uint64_t back = found ? client_free_mu_locked(e.dev, e.bytes) : 0;
    int rdev = found ? client.devs[e.dev].rdev : -1;
    pthread_mutex_unlock(&client.mu);
    if (back) client_put_back(e.dev, rdev, back);
    pthread_rwlock_unlock(&client.rw);
    if (found && client.episodes) client_episode_tick();
}

void client_mem_view(CUdevice dev, size_t *free_bytes, size_t *total_bytes)
{
    if (client_off()) return;
    client_enter();
    int di = client_dev_index(dev);
    if (di < 0) return;
    const rota_options_t *o = rota_options();
    pthread_rwlock_rdlock(&client.rw);
    pthread_mutex_lock(&client.mu);
    client_dev_t *d = &client.devs[di];
    uint64_t lim = d->limit ? d->limit : o->mem_limit;
    if (o->mem_limit && o->mem_limit < lim) lim = o->mem_limit;
    uint64_t used = d->used - d->held; /* held bytes are this process's to use again */
    pthread_mutex_unlock(&client.mu);
    uint64_t node_free = UINT64_MAX;
    if (client.conn && conn_alive(client.conn)) {
        const rota_region_t *rg = conn_region(client.conn);
        int x = conn_region_device(client.conn, d->uuid);
        if (x >= 0) {
            uint64_t cap = atomic_load(&rg->devices[x].capacity), res = atomic_load(&rg->devices[x].reserved);
            const rota_channel_t *ch = conn_channel(client.conn);
            uint64_t mine = ch ? atomic_load(&ch->credit[x]) : 0; /* charged to us, still ours to use */
            node_free = res < cap ? cap - res : 0;
            node_free += mine;
        }
    }
    pthread_rwlock_unlock(&client.rw);
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

bool client_conn_peek(void)
{
    return __atomic_load_n(&client.conn, __ATOMIC_RELAXED) != NULL;
}

conn_t *client_conn_lock(void)
{
    /* A reconnect holds the write lock while it connects (up to its timeout): launches then go by
     * uncoordinated rather than wait for it. */
    if (pthread_rwlock_tryrdlock(&client.rw)) return NULL;
    conn_t *c = client.conn;
    if (!c) pthread_rwlock_unlock(&client.rw);
    return c;
}

uint32_t client_conn_gen(void)
{
    return client.conn_gen;
}

void client_conn_unlock(void)
{
    pthread_rwlock_unlock(&client.rw);
}

int client_region_dev(conn_t *c, CUdevice dev)
{
    int di = client_dev_index(dev);
    if (di < 0) return -1;
    pthread_mutex_lock(&client.mu);
    uint8_t uuid[ROTA_UUID_LEN];
    memcpy(uuid, client.devs[di].uuid, ROTA_UUID_LEN);
    pthread_mutex_unlock(&client.mu);
    return conn_region_device(c, uuid);
}
