/* client-place.c - librota's device remap: picks the process's GPU before its first real cuInit (ROTA_GPU). */
#include "shim/client-internal.h"
#include "shim/log.h"
#include "shim/options.h"
#include "shim/trace.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/visible.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The driver reads CUDA_VISIBLE_DEVICES once, in cuInit; client_place runs in the process's init, which every
 * entry point reaches before its call goes to the driver (shim.c), so whatever comes first - cuInit,
 * cuGetProcAddress, cuDriverGetVersion - the variable is set before the driver could read it. The process has
 * no driver to list GPUs with yet, so for ROTA_GPU=auto rotad chooses among the GPUs it enumerated itself at
 * start (ROTA_PLACE_KNOWN; rotad --no-probe: none, nothing is placed) by the rule `rota run` uses, and the
 * process gets CUDA_VISIBLE_DEVICES=GPU-<chosen>,GPU-<the node's other GPUs, in rotad's order>: it sees the chosen
 * GPU as device 0, and a process that uses several GPUs still finds them all (rota run, which the user chose,
 * shows one GPU only). Ranks of a distributed launcher pick their GPU themselves (set_device(LOCAL_RANK)), and
 * two ranks on one GPU are an error for NCCL: a process with LOCAL_RANK (torchrun, DeepSpeed, Accelerate) or an
 * MPI local rank in its environment is not placed.
 *
 *   ROTA_GPU=all                        nothing placed (rota run --gpu all sets it)
 *   CUDA_VISIBLE_DEVICES set, auto      honoured as it is (rota run sets it when it placed the job)
 *   auto, a local rank in the env       nothing placed (one info line)
 *   ROTA_GPU=N                          CUDA_VISIBLE_DEVICES=N, or the N-th entry of a preset list
 *                                       (rota run --gpu N's rule; rota run's own "GPU-<uuid>" + 0 is a no-op)
 *   auto, no rotad / no GPU known       nothing placed (one debug line)
 *
 * Once per process image: a fork child inherits the decision (and the variable); exec starts afresh and finds
 * the variable set. setenv is not safe against a concurrent getenv of another thread; this runs at the first
 * driver call, under the shim's process-init lock, which is the earliest moment a preloaded library can act
 * without costing processes that never use CUDA anything.
 */

#define PLACE_ANSWER_MS 2000

static bool place_done;

/* ROTA_LOG=debug: the numbers rotad chose by, as the region shows them now. */
static void place_log_why(conn_t *c)
{
    const rota_region_t *r = conn_region(c);
    unsigned n = atomic_load_explicit(&r->ndevices, memory_order_acquire);
    for (unsigned i = 0; i < n && i < ROTA_MAX_DEVICES; i++) {
        const rota_dev_t *d = &r->devices[i];
        char id[PROTO_UUID_STR];
        proto_uuid_str(d->uuid, id);
        rota_log(ROTA_LOG_DEBUG, "placement: GPU %u %s: capacity %llu, reserved %llu, %u client%s, busy %u permille",
                 i, id, (unsigned long long)atomic_load(&d->capacity), (unsigned long long)atomic_load(&d->reserved),
                 (unsigned)atomic_load(&d->clients), atomic_load(&d->clients) == 1 ? "" : "s",
                 (unsigned)atomic_load(&d->busy_permille));
    }
}

/* Asks rotad (conn_place, which reads the answer off the socket: this runs in the process's init, before any
 * memory hook could send a request on this connection) where to place the process: 0 and *dev, rotad's region
 * index, or -errno. */
static int place_ask(conn_t *c, uint64_t mem, int *dev)
{
    conn_place_t p = {.prio = rota_options()->priority, .mem = mem, .answer_ms = PLACE_ANSWER_MS};
    int rc = conn_place(c, &p, dev, NULL);
    if (rc) return rc;
    if (*dev < 0 || (unsigned)*dev >= atomic_load(&conn_region(c)->ndevices)) return -EBADMSG;
    return 0;
}

/* Sets CUDA_VISIBLE_DEVICES to list; the trace names its first entry, the GPU chosen. */
static void place_set(const char *list, const char *how, int gpu)
{
    if (setenv("CUDA_VISIBLE_DEVICES", list, 1)) {
        rota_log(ROTA_LOG_WARN, "unable to set CUDA_VISIBLE_DEVICES=%s: %s; not placing", list, strerror(errno));
        return;
    }
    if (rota_trace_on()) {
        char extra[PROTO_UUID_STR + 64];
        size_t first = strcspn(list, ",");
        snprintf(extra, sizeof extra, "\"uuid\":\"%.*s\",\"how\":\"%s\"", (int)(first < PROTO_UUID_STR ? first : 0),
                 list, how);
        rota_trace_event("place", gpu, 0, extra);
    }
}

/* The variables distributed launchers give each rank (its GPU is its own choice: see above). */
static const char *place_local_rank(void)
{
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "MV2_COMM_WORLD_LOCAL_RANK", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return vars[i];
    return NULL;
}

/* "GPU-<dev>,GPU-<every other probed GPU>" into out (n >= ROTA_MAX_DEVICES * PROTO_UUID_STR). */
static void place_list(const rota_region_t *r, int dev, char *out, size_t n)
{
    proto_uuid_str(r->devices[dev].uuid, out);
    size_t len = strlen(out);
    unsigned nd = atomic_load_explicit(&r->ndevices, memory_order_acquire);
    for (unsigned i = 0; i < nd && i < ROTA_MAX_DEVICES; i++) {
        if ((int)i == dev || !(atomic_load(&r->devices[i].flags) & ROTA_DEV_PROBED)) continue;
        if (len + PROTO_UUID_STR + 1 > n) break;
        out[len++] = ',';
        proto_uuid_str(r->devices[i].uuid, out + len);
        len += strlen(out + len);
    }
}

void client_place(void)
{
    if (place_done) return;
    place_done = true;
    const rota_options_t *o = rota_options();
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (o->gpu == ROTA_GPU_ALL) {
        rota_log(ROTA_LOG_DEBUG, "placement: ROTA_GPU=all: the process sees every GPU it can");
        return;
    }
    if (o->gpu >= 0) {
        char id[PROTO_UUID_STR + 8];
        if (!vis) {
            snprintf(id, sizeof id, "%d", o->gpu);
        } else if (visible_entry(vis, o->gpu, id, sizeof id)) {
            rota_log(ROTA_LOG_WARN, "ROTA_GPU=%d: CUDA_VISIBLE_DEVICES='%s' has no entry %d; left as it is", o->gpu,
                     vis, o->gpu);
            return;
        } else if (!strcmp(id, vis)) {
            return; /* already the one GPU (rota run --gpu N, or a job it placed) */
        }
        place_set(id, "fixed", o->gpu);
        rota_log(ROTA_LOG_INFO, "ROTA_GPU=%d: CUDA_VISIBLE_DEVICES=%s (the process sees it as device 0)", o->gpu, id);
        return;
    }
    if (vis) {
        rota_log(ROTA_LOG_DEBUG, "placement: CUDA_VISIBLE_DEVICES='%s' is set: not placing", vis);
        return;
    }
    const char *rank = place_local_rank();
    if (rank) {
        rota_log(ROTA_LOG_INFO, "placement: %s is set (a rank of a distributed job picks its own GPU): not placing",
                 rank);
        return;
    }
    conn_t *c = client_conn_lock();
    if (!c) {
        rota_log(ROTA_LOG_DEBUG, "placement: no rotad: not placing (the process sees every GPU)");
        return;
    }
    int dev = -1;
    int rc = place_ask(c, o->mem_limit, &dev);
    if (rc == -ENODEV) {
        rota_log(ROTA_LOG_DEBUG, "placement: rotad knows none of the node's GPUs (rotad --no-probe, or its probe "
                                 "failed): not placing");
    } else if (rc) {
        rota_log(ROTA_LOG_DEBUG, "placement: rotad did not place the process (%s): not placing", strerror(-rc));
    } else {
        char list[ROTA_MAX_DEVICES * PROTO_UUID_STR];
        place_list(conn_region(c), dev, list, sizeof list);
        if (o->log_level >= ROTA_LOG_DEBUG) place_log_why(c);
        place_set(list, "remap", dev);
        rota_log(ROTA_LOG_INFO, "placed on GPU %d (rotad's numbering): CUDA_VISIBLE_DEVICES=%s, the first seen as "
                 "device 0", dev, list);
    }
    client_conn_unlock();
}
