/* api-core.c - simcuda's core: the handle registry, host allocation, the clock, process state across fork. */
#include "tools/simcuda/api-core.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define REG_BUCKETS 4096
typedef struct reg_entry {
    const void *h;
    int kind;
    struct reg_entry *next;
} reg_entry_t;
typedef struct registry {
    reg_entry_t *bucket[REG_BUCKETS];
    struct registry *stale;      /* a parent's registry, kept reachable after fork */
} registry_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static registry_t *reg;

static size_t reg_hash(const void *h)
{
    uintptr_t x = (uintptr_t)h;
    x ^= x >> 17;
    x *= 0xed5ad4bbU;
    x ^= x >> 11;
    return x % REG_BUCKETS;
}

int api_handle_add(const void *h, int kind)
{
    reg_entry_t *e = api_calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->h = h;
    e->kind = kind;
    pthread_mutex_lock(&reg_lock);
    if (!reg && !(reg = api_calloc(1, sizeof(*reg)))) {
        pthread_mutex_unlock(&reg_lock);
        free(e);
        return -ENOMEM;
    }
    size_t b = reg_hash(h);
    e->next = reg->bucket[b];
    reg->bucket[b] = e;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

void api_handle_del(const void *h)
{
    pthread_mutex_lock(&reg_lock);
    if (reg) {
        for (reg_entry_t **pp = &reg->bucket[reg_hash(h)]; *pp; pp = &(*pp)->next) {
            if ((*pp)->h == h) {
                reg_entry_t *e = *pp;
                *pp = e->next;
                free(e);
                break;
            }
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

bool api_handle_is(const void *h, int kind)
{
    bool found = false;
    if (!h)
        return false;
    pthread_mutex_lock(&reg_lock);
    if (reg) {
        for (reg_entry_t *e = reg->bucket[reg_hash(h)]; e; e = e->next) {
            if (e->h == h) {
                found = e->kind == kind;
                break;
            }
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}
void *api_calloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size ? size : 1);
}

uint64_t api_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- process state ------------------------------------------------------------------------------------ */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t init_pid;           /* the process that initialised; 0 before cuInit (under init_lock) */
/* Whether cuInit succeeded in this very process: a plain load on every API call. The atfork child handler
 * clears it, so a forked child sees CUDA_ERROR_NOT_INITIALIZED without any getpid() per call. */
static _Atomic bool init_ready;
static _Atomic uint64_t init_gen;

/* Capture state is spread over streams, events and graphs (api-capture.c, api-event.c, the executor): its lock
 * lives here, below all of them, so that the fork handler can re-create it without reaching up. */
pthread_mutex_t api_capture_lock = PTHREAD_MUTEX_INITIALIZER;

static void api_atfork_child(void)
{
    atomic_store_explicit(&init_ready, false, memory_order_relaxed);
    /* Locks a parent thread may have held at fork are re-created; the parent's objects are abandoned (the
     * child must call cuInit again, as with the real driver). */
    pthread_mutex_init(&reg_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    pthread_mutex_init(&api_capture_lock, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void api_atfork_install(void)
{
    pthread_atfork(NULL, NULL, api_atfork_child);
}

void api_core_init_lock(void)
{
    pthread_once(&atfork_once, api_atfork_install);
    pthread_mutex_lock(&init_lock);
}

void api_core_init_unlock(void)
{
    pthread_mutex_unlock(&init_lock);
}

bool api_core_forked(void)
{
    return init_pid != 0;
}

int api_core_registry_renew(void)
{
    /* A forked child forgets the parent's objects (kept reachable, never used). */
    registry_t *fresh = api_calloc(1, sizeof(*fresh));
    if (!fresh)
        return -ENOMEM;
    pthread_mutex_lock(&reg_lock);
    fresh->stale = reg;
    reg = fresh;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

void api_core_set_ready(void)
{
    init_gen++;
    init_pid = getpid();
    atomic_store_explicit(&init_ready, true, memory_order_release);
}

uint64_t api_gen(void)
{
    return init_gen;
}

CUresult api_ready(void)
{
    return atomic_load_explicit(&init_ready, memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
