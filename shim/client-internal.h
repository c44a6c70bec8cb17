/* client-internal.h - what the files of the client of rotad share: the connection, devices, launches, tracker. */
#ifndef ROTA_SHIM_CLIENT_INTERNAL_H
#define ROTA_SHIM_CLIENT_INTERNAL_H

#include "shim/real.h"

#include "shim/client.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"

#include <stdbool.h>
#include <stdint.h>

/* client.c. The connection with its read lock held (pair with client_conn_unlock), or NULL with no lock held: no
 * connection, or a reconnect holds the write lock right now (launches never wait for one). */
conn_t *client_conn_lock(void);
/* Whether a connection may exist, without the lock (a hint: false means the launch hooks need do nothing). */
bool client_conn_peek(void);
void client_conn_unlock(void);
/* With the read lock held: the generation of the connection client_conn_lock returned, unique in this process (a
 * later connection at the same address has another one). */
uint32_t client_conn_gen(void);
/* rotad's index of the GPU of CUdevice dev on connection c (with the read lock held), or -1. */
int client_region_dev(conn_t *c, CUdevice dev);
uint64_t client_now_ns(void);
/* Starts fn on a detached librota thread that blocks every signal: 0 or -errno. */
int client_thread_start(void *(*fn)(void *));
/* client.c: the index of CUdevice dev in the device table (identified on first use), or -1 when rota cannot
 * identify it. Charging: bytes the device already gave (ADOPT: rotad cannot refuse them); uncharging: bytes it
 * took back (a free, held during a retry episode). */
int client_dev_index(CUdevice dev);
void client_dev_charge(int dev, uint64_t bytes);
void client_dev_uncharge(int dev, uint64_t bytes);
/* client.c: whether requests of other processes queue for memory on dev (rotad's region; false without rotad). */
bool client_dev_contended(int dev);
/* client.c: client_mem_reserve with the kind of caller, for the retry rule (docs/design/memory.md): ALLOC, an
 * allocation a caching allocator retries at the same size; PAGES, a page of an expandable segment (cuMemCreate);
 * NONE, a caller that never retries (PyTorch's cudaMallocAsync backend raises OutOfMemoryError at the first
 * failure): never refused at once to make the process release memory. */
enum { CLIENT_RETRY_NONE, CLIENT_RETRY_ALLOC, CLIENT_RETRY_PAGES };
CUresult client_reserve(CUdevice dev, uint64_t bytes, bool may_wait, int retry_kind, client_resv_t *r);
/* client.c: what client.c has the client's upper files do, at points it owns. client_init (client-process.c) sets
 * them before any other hook runs, so that client.c calls none of those files by name and the client's files
 * call each other one way (layers.t). */
typedef struct client_hooks {
    void (*connected)(void);    /* a connection was made, before it is published (launch_warm) */
    void (*fork_child)(void);   /* a fork child forgets its parent's state (client_mempool_reset_child) */
    void (*holds_memory)(void); /* a reservation was committed (tracker_start: client_watch must run) */
} client_hooks_t;
void client_set_hooks(const client_hooks_t *h);
/* client.c, from client_process_init: connects unless rota is off (then false: nothing else to do). */
bool client_process_connect(void);
/* client.c, from client_process_init: CUDA_SUCCESS, or (ROTA_REQUIRE=1 and no rotad) the error cuInit returns. */
CUresult client_process_status(void);
/* client-mempool.c: the child of a fork forgets the parent's pools. */
void client_mempool_reset_child(void);

/* client-mps.c: rotad --mps: sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE to the process's class's share of an MPS
 * server's SMs (never raising a lower one it set), before the process's first real driver call. From
 * client_process_init, after connecting. */
void client_mps(void);

/* client-place.c: the device remap (ROTA_GPU): sets CUDA_VISIBLE_DEVICES before the process's first real
 * driver call, asking rotad for ROTA_GPU=auto. Once per process image; from client_process_init, after connecting. */
void client_place(void);

/* client-tracker.c: the completion tracker of gated launches (one thread per process, started on first use). */
/* An event of ctx to record after a launch (from a small pool, or new); NULL when none can be had. */
CUevent tracker_event_get(CUcontext ctx, bool timed);
/* Gives an unrecorded event back to the pool. */
void tracker_event_put(CUevent ev, CUcontext ctx, bool timed);
/* Hands a recorded event to the tracker, which calls its complete handler once it completed. false: the tracker
 * could not be started or queue the event (the caller then treats the launch as complete). start != NULL: a
 * sample, ev and start timed events around one launch, whose device time is their elapsed time (the handler's
 * sample learns it). */
bool tracker_push(CUevent ev, CUcontext ctx, uint64_t launch_ns, CUevent start);
/* Starts the tracker thread if it is not running: a process holding memory needs it to reconnect to a restarted
 * rotad on its own (client_watch), launches or not. */
void tracker_start(void);
/* What the tracker thread calls (launch_complete, launch_idle_due, launch_sample_own), set by client_init before any launch: a
 * completion (busy_ns of device time, seen at now_ns) and a due idle check, each returning when the next idle
 * check is due (0: none). */
typedef struct tracker_handler {
    uint64_t (*complete)(uint64_t busy_ns, uint64_t now_ns);
    uint64_t (*idle_due)(uint64_t now_ns);
    void (*sample)(uint64_t own_ns);   /* a sampled launch's own device time (launch_sample_own) */
} tracker_handler_t;
void tracker_set_handler(const tracker_handler_t *h);
/* client.c, tracker thread, about once a second while idle: a process that holds memory and lost rotad reconnects
 * and re-registers it, without waiting for its next allocation. Returns whether it should be called again. */
bool client_watch(void);

/* client-idleprobe.c: whether a high client's launching thread sleeps waiting for input, which ends its idle window. */
/* Notes the calling thread as the one that made the client's last high launch (a relaxed store; no syscall but
 * the thread's first gettid). */
void idleprobe_note_launch(void);
/* Tracker thread only: whether that thread is blocked in a sleep or a wait for input (not a futex, not a read),
 * with the call's number in *nr; false if running, in another call, or unknown. */
bool idleprobe_input_wait(long *nr);

/* client-launch.c: one tracked launch completed, seen by the tracker at now_ns (client_now_ns); busy_ns is the
 * device time the tracker attributes to it. Returns when a high client's idle check is due (launch_idle_due; 0:
 * none), which the tracker then calls unless another completion came first. */
uint64_t launch_complete(uint64_t busy_ns, uint64_t now_ns);
/* client-launch.c: a sampled uncontended launch's own device time, from the tracker (before its launch_complete). */
void launch_sample_own(uint64_t own_ns);
/* client-launch.c: a high client's idle check (direct release) at now_ns, from the tracker; returns as above. */
uint64_t launch_idle_due(uint64_t now_ns);
/* client-launch.c: once connected, make the launch gate's first run as fast as the others (idempotent). */
void launch_warm(void);

#endif
