/* node.h - the simulated node: devices, their engines and memory, shared by every process through shm. */
#ifndef SIMCUDA_NODE_H
#define SIMCUDA_NODE_H

/*
 * Contract between the device model (proc.c, config.c, timeline.c, engine.c, node.c, kernel.c) and the Driver
 * API layer (api-*.c).
 * The API layer never touches shared memory itself; everything cross-process goes through these calls.
 * All calls are thread-safe. Integer returns are 0 or -errno.
 */
#include <stdbool.h>
#include <stdint.h>

#define SIMNODE_MAX_DEVICES 16

/* Effective knobs, parsed once from SIMCUDA_* by simnode_attach(). */
typedef struct simnode_config {
    char node[64];           /* SIMCUDA_NODE: which simulated node (default: one per user) */
    int devices;             /* SIMCUDA_DEVICES, 1..16, default 1 */
    uint64_t mem_bytes;      /* SIMCUDA_MEM, per device, default 80G */
    uint64_t timeslice_ns;   /* SIMCUDA_TIMESLICE_US, default 2000 us */
    uint64_t switch_ns;      /* SIMCUDA_SWITCH_US, default 25 us */
    uint64_t launch_ns;      /* SIMCUDA_LAUNCH_NS: fixed device time of every kernel, default 3000 ns */
    double mem_gbps;         /* SIMCUDA_MEM_GBPS: device memory bandwidth for fill/add kernels, default 2000 */
    double copy_gbps;        /* SIMCUDA_COPY_GBPS: copy-engine bandwidth, default 25 */
    uint64_t copy_latency_ns;/* SIMCUDA_COPY_LATENCY_NS: fixed cost of every copy, default 2000 */
    uint64_t driver_version; /* SIMCUDA_DRIVER_VERSION: the CUDA version this driver reports and whose PTX ISA
                              * it loads, default 13000 (per process, not a node knob) */
    uint64_t wave_ns;        /* SIMCUDA_WAVE_NS: device time of one wave of a kernel simcuda does not model (any
                              * name but spin_ns/fill_u32/add_f32), default 10000 ns (per process) */
    uint64_t mps;            /* SIMCUDA_MPS: 1 = an MPS server per device (clients run concurrently on shares of the
                              * SMs), 0 = contexts time-sliced, default 0 */
    double mps_pct;          /* CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: this process's share of the SMs as an MPS client,
                              * 1 to 100, default 100 (per process, read at attach: before any context) */
    uint64_t mps_mem_limit[SIMNODE_MAX_DEVICES]; /* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1G,1=512M"): an MPS
                              * client's device memory limit per device, 0 = none (per process) */
    char timeline[256];      /* SIMCUDA_TIMELINE: absolute directory for timeline-PID.txt, "" = off (per process,
                              * not a node knob) */
} simnode_config_t;

typedef struct simnode_devinfo {
    char name[64];           /* "simcuda device N" */
    uint8_t uuid[16];        /* stable per node and ordinal */
    uint64_t total_mem;
    int pci_domain, pci_bus, pci_device;
    int sm_count;
    int cc_major, cc_minor;  /* reported compute capability, 9.0 */
} simnode_devinfo_t;

/* Attach this process to its node (created on first use, shared with every process of the same
 * SIMCUDA_NODE). Parses and validates every SIMCUDA_ knob: a bad value gives -EINVAL and simnode_error()
 * says which and why (cuInit prints it once and returns CUDA_ERROR_INVALID_VALUE). Idempotent; in a forked
 * child the first call after fork attaches the child as a process of its own. */
int simnode_attach(void);
const char *simnode_error(void);
const simnode_config_t *simnode_config(void);       /* valid after a successful attach */
/* SIMCUDA_DRIVER_VERSION alone, attached or not (cuDriverGetVersion may come before cuInit): 0, or -EINVAL for a
 * bad value, which cuInit reports. */
int simnode_config_driver(int *version);
int simnode_device_count(void);
const simnode_devinfo_t *simnode_device(int dev);   /* NULL if dev is out of range */

/* Node-wide memory accounting, charged to the calling process; a process that dies has its charge reclaimed.
 * reserve returns -ENOMEM when used + bytes would exceed the device's capacity. */
int simnode_mem_reserve(int dev, uint64_t bytes);
void simnode_mem_unreserve(int dev, uint64_t bytes);
void simnode_mem_info(int dev, uint64_t *used, uint64_t *total);

/* A context is the unit the engine time-slices between (like a GPU without MPS). */
int simnode_ctx_open(int dev, uint32_t *ctx_id);
void simnode_ctx_close(int dev, uint32_t ctx_id);
/* MPS (SIMCUDA_MPS=1): a fatal fault (err, a CUresult) in a kernel of context ctx_id reaches every client of the
 * device's server, as on a Volta-or-later MPS server: every live context of the device is marked with err
 * (simnode_ctx_fault_of), and the server takes no new context (simnode_ctx_open: -EAGAIN, i.e.
 * CUDA_ERROR_MPS_SERVER_NOT_READY) until every context so marked has been destroyed or its process has exited.
 * Without MPS the fault stays in its context (the API layer's sticky error): a no-op. */
void simnode_ctx_fault(int dev, uint32_t ctx_id, int err);
/* The fault a context was marked with, or 0: a lock-free read, for the launch path. */
int simnode_ctx_fault_of(int dev, uint32_t ctx_id);
bool simnode_mps(void);   /* whether this node's devices have an MPS server (SIMCUDA_MPS=1) */

/* Occupies dev's single compute engine for ns of device time on behalf of ctx_id, blocking the calling
 * thread until that time has been served. Contexts time-slice: the holder keeps the engine while it has
 * work, until its slice expires with others waiting; then the engine goes round-robin to the next context,
 * charging the switch time, and a longer kernel is preempted and resumed later. Between waiters of the
 * same context, the lower prio value (CUDA stream priority: lower is more urgent) goes first.
 * Deadlines are absolute CLOCK_MONOTONIC times. */
int simnode_kernel_exec(int dev, uint32_t ctx_id, int prio, uint64_t ns);
/* The same, for a kernel submitted (queued by the application, e.g. at cuLaunchKernel) at submit_ns
 * (CLOCK_MONOTONIC ns): waiters of one context with equal prio are served in submission order, whichever
 * thread reaches the engine first. simnode_kernel_exec() uses the time of the call. */
int simnode_kernel_exec_submitted(int dev, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns);
/* The same for a kernel that was runnable since ready_ns (0: now), before the calling thread got here: its
 * stream's previous operation ended then. It starts from then if the engine was free (a GPU's stream queue has
 * no thread to wake), never before the engine was. *end_ns (if not NULL): when it ended on the engine's
 * timeline, the ready_ns of the stream's next kernel. sms: its width, the SMs its blocks occupy at once (0: all),
 * which only an MPS server heeds (engine.c); the other calls' kernels fill the device. */
int simnode_kernel_exec_after(int dev, uint32_t ctx_id, int prio, uint64_t ns, uint32_t sms, uint64_t submit_ns,
                              uint64_t ready_ns, uint64_t *end_ns);
/* The same in two steps, so that a kernel reaches the engine in launch order even though another thread
 * serves it: enqueue (from the launching thread, for a kernel that is runnable at once) makes it a waiter
 * now, without blocking, and gives a token; simnode_kernel_wait(token) later blocks until it has been
 * served. The engine may start the kernel before anybody waits: its device time runs on the engine's
 * timeline all the same. ns == 0 gives token 0, which simnode_kernel_wait returns at once for. -EAGAIN
 * when every waiter slot is taken (use simnode_kernel_exec_submitted then). Every token must be waited on. */
int simnode_kernel_enqueue(int dev, uint32_t ctx_id, int prio, uint64_t ns, uint64_t submit_ns, uint64_t *token);
/* The same for a stream's next kernel while its previous one (token after; 0: none) is still queued or running:
 * it waits on the engine behind that one, so that the engine sees the context's queued work when that kernel
 * ends, as a GPU's channel does, and the context keeps the engine for it within its timeslice. ready_ns as
 * simnode_kernel_exec_after's (0: now), sms as its. */
int simnode_kernel_enqueue_after(int dev, uint32_t ctx_id, int prio, uint64_t ns, uint32_t sms, uint64_t submit_ns,
                                 uint64_t ready_ns, uint64_t after, uint64_t *token);
int simnode_kernel_wait(int dev, uint64_t token, uint64_t *end_ns); /* *end_ns as simnode_kernel_exec_after's */
/* Occupies dev's copy engine for a transfer of bytes (latency + bytes / bandwidth). */
int simnode_copy_exec(int dev, uint32_t ctx_id, uint64_t bytes);

/* Device time of the built-in kernels under the current knobs. */
uint64_t simnode_mem_kernel_ns(uint64_t bytes_touched);

#endif
