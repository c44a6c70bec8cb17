/* node-internal.h - the simulated node's shared-memory layout and the internals its files (proc, config, timeline,
 * engine, node, kernel) share. */
#ifndef SIMCUDA_NODE_INTERNAL_H
#define SIMCUDA_NODE_INTERNAL_H

/*
 * One POSIX shm object per node ("/dev/shm/<SIMCUDA_NODE>"), mapped MAP_SHARED by every process of the node.
 * Its size is fixed (always SIMNODE_MAX_DEVICES devices), so validation is magic + ABI + size.
 *
 * Liveness: each attached process owns a slot in procs[] and holds an OFD write lock on the byte
 * SIMNODE_LOCK_BASE + slot of the same shm object (past its end, which locks allow). The kernel drops that
 * lock when the process dies (kill -9 included), and PID reuse cannot fool it. A slot marked used whose byte
 * is unlocked belongs to a dead process: whoever finds it reclaims its memory charge, contexts, engine
 * waiters and, if it held it, the compute engine. The byte SIMNODE_LOCK_INIT serialises creation/attach.
 *
 * Locking: node->lock (procs[]) before any dev->lock. Both are robust process-shared mutexes; EOWNERDEAD is
 * repaired by sweeping dead processes and recomputing derived state. Every cross-process wait is a futex on
 * dev->seq with a bounded timeout, after which the waiter re-checks the holder's liveness.
 */
#include "tools/simcuda/node.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SIMNODE_MAGIC 0x31454430444d4953ull /* "SIMD0DE1" little-endian */
#define SIMNODE_ABI 6u /* 5: procs[].busy_ns; 6: MPS lanes, proc.mps_share_ppm */
#define SIMNODE_MAX_PROCS 256
#define SIMNODE_MAX_CTX 256     /* per device */
#define SIMNODE_MAX_WAITERS 512 /* threads inside simnode_kernel_exec, per device */
#define SIMNODE_LOCK_INIT ((off_t)1 << 30)
#define SIMNODE_LOCK_BASE (SIMNODE_LOCK_INIT + 1)
/* A waiter re-checks the holder's liveness at least this often (bounds kill -9 detection). */
#define SIMNODE_WAIT_TIMEOUT_NS 10000000ull
/* How long after the running segment's end a waiting thread lets its owner retire it before doing so itself:
 * long enough that the owner, whose sleep ends at that time, usually does (no second wake-up), short against
 * a kernel. */
#define SIMNODE_STEP_IN_NS 100000ull
/* A finished kernel not collected for this long may be a dead process's: the idle engine checks (engine.c). */
#define SIMNODE_DONE_STALE_NS 1000000ull

#define SIMNODE_NONE UINT32_MAX
#define SIMNODE_SM_COUNT 132    /* SMs per device (an H100 SXM's), cuDeviceGetAttribute and MPS grants */

enum { SIMNODE_SLOT_FREE = 0, SIMNODE_SLOT_USED = 1 };
/* DONE: served in full, retired by another thread (seg_end_ns: its end); its owner collects and frees it. */
enum { SIMNODE_W_FREE = 0, SIMNODE_W_WAITING = 1, SIMNODE_W_RUNNING = 2, SIMNODE_W_DONE = 3 };

/* The knobs that define the node's device model, fixed by its creator. */
typedef struct simnode_shared_config {
    uint32_t devices;
    uint32_t mps;            /* SIMCUDA_MPS: 1 = an MPS server per device (engine.c's lanes), 0 = time slicing */
    uint64_t mem_bytes;
    uint64_t timeslice_ns;
    uint64_t switch_ns;
    uint64_t launch_ns;
    uint64_t copy_latency_ns;
    double mem_gbps;
    double copy_gbps;
} simnode_shared_config_t;

typedef struct simnode_proc {
    _Atomic uint32_t state;  /* SIMNODE_SLOT_* */
    uint32_t gen;            /* bumped on every registration */
    int32_t pid;             /* informative only: liveness is the OFD lock */
    uint32_t mps_share_ppm;  /* CUDA_MPS_ACTIVE_THREAD_PERCENTAGE at attach, in millionths of the SMs */
    uint64_t attach_ns;
    uint64_t charge[SIMNODE_MAX_DEVICES]; /* bytes reserved per device, under that device's lock */
    /* compute-engine time its kernels were served per device (never reset: NVML's per-process utilisation reads
     * its growth), added under that device's lock, atomic so readers need no lock */
    _Atomic uint64_t busy_ns[SIMNODE_MAX_DEVICES];
} simnode_proc_t;

typedef struct simnode_ctx {
    uint32_t state;          /* SIMNODE_SLOT_* */
    uint32_t id;             /* (gen << 8) | index, never 0 */
    uint32_t proc;           /* owning process slot */
    uint32_t gen;
    _Atomic int32_t fault;   /* MPS: the CUresult of a fatal fault of a client of this device's server, which
                              * every context of the server gets (node.c); 0 none */
    uint32_t pad0;
} simnode_ctx_t;

typedef struct simnode_waiter {
    uint32_t state;          /* SIMNODE_W_* */
    uint32_t proc;           /* caller's process slot */
    uint32_t ctx;            /* context index */
    int32_t prio;
    uint64_t ticket;         /* arrival order (ties) */
    uint64_t submit_ns;      /* order within a context at equal prio */
    uint64_t arrival_ns;     /* when it reached the engine (earliest start) */
    uint64_t remaining_ns;   /* device time still to serve */
    uint64_t seg_start_ns;   /* current segment, while RUNNING (virtual engine time) */
    uint64_t seg_end_ns;
    uint64_t after;          /* 0, or the token of the same stream's previous kernel: runnable once that one was
                              * served (a stream's queued kernels on the engine, as a GPU's channel holds them) */
    uint32_t sms;            /* SMs its blocks occupy at once (its width, 1..SIMNODE_SM_COUNT): what it needs of an
                              * MPS server's SMs to run at full speed (engine.c) */
    uint32_t pad0;
} simnode_waiter_t;

/* One compute lane of a device. Without MPS a device has one (lane 0), time-sliced between every context. With
 * MPS each client process (slot s) has lane s: lanes run concurrently, each on a share of the SMs (engine.c). */
typedef struct simnode_lane {
    uint32_t holder;         /* waiter index running on this lane, or SIMNODE_NONE */
    uint32_t cur_ctx;        /* context owning the lane (last to run), or SIMNODE_NONE */
    uint32_t alloc_sms;      /* SMs the running segment holds (all without MPS) */
    uint32_t rate_ppm;       /* its speed, in millionths of its full speed: alloc_sms of its width (1000000 without
                              * MPS) */
    uint64_t slice_end_ns;   /* end of cur_ctx's timeslice (virtual engine time) */
    uint64_t vtime_ns;       /* virtual engine time at which the lane last became free */
} simnode_lane_t;

#define SIMNODE_MAX_LANES SIMNODE_MAX_PROCS
#define SIMNODE_FULL_PPM 1000000u

/* Counters since reset; written under dev->lock, atomic so readers need no lock. */
typedef struct simnode_counters {
    _Atomic uint64_t reset_ns;     /* CLOCK_MONOTONIC time of the last reset (or creation) */
    _Atomic uint64_t busy_ns;      /* compute engine executing kernels (switch time excluded) */
    _Atomic uint64_t switch_ns;    /* compute engine switching contexts (not busy) */
    _Atomic uint64_t kernels;      /* kernels completed */
    _Atomic uint64_t switches;     /* context switches */
    _Atomic uint64_t preemptions;  /* kernels preempted at a timeslice boundary */
    _Atomic uint64_t copies;
    _Atomic uint64_t copy_bytes;
    _Atomic uint64_t copy_busy_ns;
    _Atomic uint64_t reclaims;     /* dead processes reclaimed on this device */
} simnode_counters_t;

typedef struct simnode_dev {
    pthread_mutex_t lock;
    alignas(64) _Atomic uint32_t seq; /* futex word, bumped on every engine state change */
    uint32_t live_ctx;
    uint32_t pad1;
    uint64_t next_ticket;
    uint64_t copy_free_ns;            /* copy engine: virtual time it is next free (FIFO) */
    uint64_t mem_used;
    uint64_t mem_total;
    simnode_counters_t c;
    simnode_ctx_t ctx[SIMNODE_MAX_CTX];
    simnode_waiter_t w[SIMNODE_MAX_WAITERS];
    simnode_lane_t lane[SIMNODE_MAX_LANES];
} simnode_dev_t;

typedef struct simnode_shm {
    _Atomic uint64_t magic;      /* published last, with release ordering */
    uint32_t abi;
    uint32_t pad0;
    uint64_t size;               /* sizeof(simnode_shm_t) */
    uint64_t create_ns;
    simnode_shared_config_t cfg;
    alignas(64) pthread_mutex_t lock; /* procs[] */
    simnode_proc_t procs[SIMNODE_MAX_PROCS];
    alignas(64) simnode_dev_t dev[SIMNODE_MAX_DEVICES];
} simnode_shm_t;

_Static_assert(offsetof(simnode_shm_t, magic) == 0, "magic first");
_Static_assert(offsetof(simnode_shm_t, abi) == 8, "abi at 8");
_Static_assert(offsetof(simnode_shm_t, size) == 16, "size at 16");
_Static_assert(offsetof(simnode_shm_t, create_ns) == 24, "create_ns at 24");
_Static_assert(offsetof(simnode_shm_t, cfg) == 32, "cfg at 32");
_Static_assert(sizeof(simnode_shared_config_t) == 64, "config is 64 bytes");
_Static_assert(sizeof(simnode_waiter_t) == 80, "waiter is 80 bytes");
_Static_assert(sizeof(simnode_ctx_t) == 24, "ctx is 24 bytes");
_Static_assert(sizeof(simnode_lane_t) == 32, "lane is 32 bytes");
_Static_assert(sizeof(simnode_proc_t) == 24 + 16 * SIMNODE_MAX_DEVICES, "proc slot layout");
_Static_assert(offsetof(simnode_dev_t, seq) % 64 == 0, "futex word on its own line");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomics are plain width");
_Static_assert(SIMNODE_MAX_CTX <= 256, "ctx ids keep the index in 8 bits");

/* ---- process-local state (proc.c; node.c fills it in at attach) ---- */
typedef struct simnode_local {
    simnode_shm_t *shm;
    int fd;                  /* this process's own open file description of the shm (holds its OFD lock) */
    int pid;                 /* getpid() at attach: a change means we are a forked child */
    uint32_t slot;
    simnode_config_t cfg;
    simnode_devinfo_t info[SIMNODE_MAX_DEVICES];
} simnode_local_t;

/* proc.c: this process's attachment (node.c fills it in at attach) and whether it is attached: 1 once this
 * process (not a forked copy of it) is attached. */
extern simnode_local_t simnode_g;
extern _Atomic int simnode_ready;

/* config.c: parse every SIMCUDA_ knob; -EINVAL with simnode_set_error() on a bad value. is_set[i] says
 * whether knob i came from the environment (for the node-mismatch rule, which SIMCUDA_DRIVER_VERSION and
 * SIMCUDA_TIMELINE, per-process knobs, take no part in). */
enum {
    SIMNODE_K_NODE, SIMNODE_K_DEVICES, SIMNODE_K_MEM, SIMNODE_K_TIMESLICE, SIMNODE_K_SWITCH, SIMNODE_K_LAUNCH,
    SIMNODE_K_MEM_GBPS, SIMNODE_K_COPY_GBPS, SIMNODE_K_COPY_LATENCY, SIMNODE_K_DRIVER, SIMNODE_K_TIMELINE,
    SIMNODE_K_WAVE, SIMNODE_K_MPS, SIMNODE_K_MPS_PCT, SIMNODE_K_MPS_MEM,
    SIMNODE_K_COUNT
};
int simnode_config_parse(simnode_config_t *cfg, bool is_set[SIMNODE_K_COUNT]);
const char *simnode_knob_name(int k);
/* Only SIMCUDA_NODE (or name, when not NULL), validated; for tools that read a node without using it. */
int simnode_config_node(const char *name, char out[64]);
/* Print the knob table (name, default, bounds, meaning) to f, for simcuda-stat --help. */
void simnode_config_describe(FILE *f);
/* With ROTA_LOG=debug, print the effective knobs (the node's) to stderr. */
void simnode_config_log(const simnode_config_t *c);
void simnode_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* proc.c */
uint64_t simnode_now_ns(void);
/* Lock a robust mutex; on EOWNERDEAD make it consistent and set *repair. */
void simnode_mutex_lock(pthread_mutex_t *m, bool *repair);
/* Whether process slot s is alive (its OFD lock is held by someone else, or it is ours). */
bool simnode_proc_alive(simnode_shm_t *shm, int fd, uint32_t s);

/* node.c */

/* The identity of device d of node (name, UUID, PCI location, memory, SMs), as cuDeviceGet* reports it. */
void simnode_devinfo_of(const char *node, const simnode_shm_t *shm, int d, simnode_devinfo_t *out);
/* Attach read-only for tools (simcuda-stat): map an existing node without registering a process slot.
 * Returns 0, -ENOENT when the node does not exist, or -errno / -EPROTO (bad region) with simnode_error(). */
int simnode_open_existing(const char *name, simnode_shm_t **shm, int *fd);
/* Initialise the node's counters' reset point for device d (under dev->lock). */
void simnode_dev_reset_counters(simnode_dev_t *dev, uint64_t now);

/* engine.c */
/* Under dev->lock: drop everything process slot s holds on device d (charge, contexts, waiters, engine). */
void simnode_dev_reclaim_proc(simnode_shm_t *shm, int fd, uint32_t d, uint32_t s);
/* Under dev->lock: reclaim every dead process's state on device d; returns how many were reclaimed. */
int simnode_dev_sweep(simnode_shm_t *shm, int fd, uint32_t d);
/* Lock device d (repairing after a dead owner). */
void simnode_dev_lock(simnode_shm_t *shm, int fd, uint32_t d);
void simnode_dev_unlock(simnode_shm_t *shm, uint32_t d);
void simnode_engine_init(simnode_dev_t *dev);
/* Under dev->lock, after reclaiming: if the engine is free (or its holder vanished), hand it on. */
void simnode_engine_kick(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now);
/* Under dev->lock: whether waiter me runs on its lane now; the earliest end of a running segment (*any: whether
 * one runs); whether a running segment's owner is dead. */
bool simnode_engine_holds(const simnode_shm_t *shm, const simnode_dev_t *dev, uint32_t me);
uint64_t simnode_engine_next_end(const simnode_shm_t *shm, const simnode_dev_t *dev, bool *any);
bool simnode_engine_holder_dead(simnode_shm_t *shm, int fd, const simnode_dev_t *dev);
/* Under dev->lock: the in-progress busy time of the current segment, for snapshots. */
uint64_t simnode_engine_inflight_busy(simnode_dev_t *dev, uint64_t now);
void simnode_futex_wake(_Atomic uint32_t *word);
/* Wait while *word == val, at most timeout_ns; true when it timed out. */
bool simnode_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t timeout_ns);
void simnode_sleep_until(uint64_t t);   /* an absolute CLOCK_MONOTONIC time */
/* Under dev->lock: retires every segment of device d's engine timeline ended by now (kernel.c's waiters and
 * arrivals do it for a late owner); *tl_flush as in simnode_timeline_record. Whether it retired anything. */
bool simnode_engine_advance(simnode_shm_t *shm, int fd, uint32_t d, uint64_t now, bool *tl_flush);

/* timeline.c: with SIMCUDA_TIMELINE set (simnode_g.cfg.timeline[0], the one test callers make), the busy
 * segments this process retired, one line "<dev> <ctx> <start_ns> <end_ns> <pid>" each, pid the kernel's owner
 * (mostly this process; another's whose thread was late: engine.c), in SIMCUDA_TIMELINE/timeline-<pid>.txt. record appends to a process-local buffer and makes no syscall, so it is
 * called under dev->lock, in engine order; it returns true when the caller must call
 * simnode_timeline_flush() once it holds no dev->lock (the file is still to be created, or the buffer is
 * filling up). flush does the file I/O; the rest is written at exit. */
bool simnode_timeline_record(uint32_t dev, uint32_t ctx, uint64_t start_ns, uint64_t end_ns, int32_t pid);
void simnode_timeline_flush(void);

#endif
