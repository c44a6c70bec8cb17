/* place.h - GPU placement: which GPU a new process should run on (rota run --gpu auto, librota's remap). */
#ifndef ROTA_PLACE_H
#define ROTA_PLACE_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * rotad sees the whole node, so it decides. A PLACE request carries the GPUs the asker can see (uuid, total
 * memory), or with ROTA_PLACE_KNOWN none (librota's remap: the GPUs rotad probed); every candidate is entered in
 * the ledger (so rota status/top list it). Each GPU's expected memory is what is reserved there, plus requests
 * queued there, plus the rest of the declared limit (ROTA_MEM_LIMIT, rota run --mem) of every job at home there
 * (a job grows to its limit: counting only what it holds so far sends the next job where the memory is about to
 * go), plus the memory of pending placements; free = capacity - expected. The answer is the candidate
 *   1. where the job's memory (PLACE mem; 0 = unknown, fits anywhere) fits in the free memory: a job sent where it
 *      does not fit waits for memory while another GPU could run it, then
 *   1b. with the fewest rivals: clients at home there + pending placements of the job's class or a higher one
 *      (ROTA_PLACE_HIGH / ROTA_PLACE_LOW; neither: normal). rota protects a job from lower classes (held for a
 *      high one; below normal, low runs in what normal leaves), not from its own class: a high job goes where
 *      there is no other high one, a normal job beside low ones rather than normal ones. For a low job every
 *      client is a rival, which is rule 2's load. Then
 *   2. among those, with the fewest clients + pending placements (load decides the job's own speed and that of
 *      its neighbours; memory only has to fit), then the lowest busy fraction (rota_dev_t.busy_permille, more
 *      than PLACE_BUSY_SLACK_PERMILLE apart), then
 *   3. for a job of known memory, with the least free memory left (the tightest fit keeps the larger holes for
 *      larger jobs to come: bin packing's best fit); for one of unknown memory, with the most; two amounts
 *      within PLACE_MEM_SLACK_PCT percent of the larger capacity count as equal (a few MiB of difference must
 *      not outweigh a whole job), then the fewest clients, then
 *   4. the lowest candidate index (deterministic).
 * Where the job fits nowhere, the most free memory decides (it is the closest to fitting), then the load, then
 * the busy fraction. A request with wait_ms (rota run --place-wait) that fits nowhere is not answered then: it
 * waits (place_wait_add) until a candidate has room, and is placed by the rules above at that moment
 * (place_wait_serve, which rotad runs after every batch of events while anyone waits), or until wait_ms pass,
 * when the fits-nowhere rule places it. Committing such a job early sends it to wait for memory on one GPU while
 * another may free room first, and it then shares with whatever took the room meanwhile. Waiters are served by
 * class, then arrival; the first that still fits nowhere stops the walk, so a large job is not starved by smaller
 * waiters behind it. A new request that fits is placed at once: it was never a waiter.
 * The chosen GPU then carries a pending placement for the asking pid until that pid reserves memory on some
 * GPU (place_settle: from then on the ledger and its limit count it), the pid no longer exists, or
 * ROTA_PLACE_PENDING_MS pass. So jobs that start at once spread instead of all seeing the same empty GPU. A pid
 * that asks again replaces its earlier placement.
 */

#define PLACE_MAX_PENDING 256
/* Pending placements one user holds at most: its next one replaces its own oldest (issue 32, item 5). */
#define PLACE_MAX_PENDING_PER_USER 32
/* Waiting PLACEs per connection (a rota run or librota's remap sends one at a time); per user: config.h. */
#define PLACE_MAX_WAITS_PER_CONN 4
#define PLACE_MEM_SLACK_PCT 2
#define PLACE_BUSY_SLACK_PERMILLE 100
#define PLACE_RECHECK_MS 100u /* rotad looks at waiting jobs at least this often (place_wait_serve) */

typedef struct place_pending {
    pid_t pid;             /* 0 = free entry */
    uid_t uid;             /* the asker's user (SO_PEERCRED): its claim never makes another user's job wait */
    int dev;               /* index in region->devices */
    uint64_t mem;          /* the job's expected memory (PLACE mem), counted against the GPU's free memory */
    enum rota_prio prio;   /* the job's class (from ROTA_PLACE_HIGH / ROTA_PLACE_LOW) */
    uint64_t deadline_ns;  /* CLOCK_MONOTONIC */
} place_pending_t;

/* A request that fits nowhere yet (wait_ms), in the order it is served. */
typedef struct place_waiter {
    void *who;             /* the asker (rotad's connection); opaque here */
    pid_t pid;
    uid_t uid;
    enum rota_prio prio;
    uint64_t since_ns, deadline_ns; /* CLOCK_MONOTONIC */
    rota_msg_place_t m;
    struct place_waiter *next;
} place_waiter_t;

typedef struct place {
    place_pending_t p[PLACE_MAX_PENDING];
    uint32_t known;        /* region devices rotad enumerated itself (probe.c): ROTA_PLACE_KNOWN chooses here */
    place_waiter_t *waiters; /* by class, then arrival: each is linked in behind its class (place_wait_add) */
    const rota_table_t *t; /* rotad's table: the clients' declared limits and queued requests; NULL: none */
} place_t;

/* Called for a waiter that leaves the queue with its answer, idx as place_choose gives it (never -EAGAIN); the
 * waiter is freed after the call returns. */
typedef void place_answer_fn(void *ctx, const place_waiter_t *w, int idx);

/* Chooses among m's candidates for pid at time now_ns (CLOCK_MONOTONIC) and records the pending placement. Returns the
 * candidate index (0..m->ncand-1), or -ENOSPC when no candidate could be entered in the ledger (device table full), or
 * -ENODEV when rotad enumerated the node's GPUs (pl->known) and no candidate is one of them (candidates are entered
 * in the ledger only when pl->known is empty: a client never adds a GPU to a probing rotad), or -EAGAIN, recording nothing, when m->wait_ms is set and m->mem fits on no candidate. With ROTA_PLACE_KNOWN in m->flags
 * the candidates are the devices in pl->known (only GPUs of the node's own driver, never ones a client reported: those
 * may be another driver's or container's) and the answer is the region device index, or -ENODEV when pl->known is
 * empty. m must have passed proto_check. */
int place_choose(place_t *pl, rota_region_t *r, pid_t pid, const rota_msg_place_t *m, uint64_t now_ns);
/* place_choose for a job of user uid (issue 32, item 5): pending placements of other users (claims a process
 * made, not memory anyone holds) count for where the job goes but never make it wait: it waits only when it fits
 * nowhere without them. A job larger than every candidate never waits (it could not fit). A pending placement
 * counts at most its GPU's capacity; one user holds at most PLACE_MAX_PENDING_PER_USER of them. place_choose is
 * place_choose_as for uid 0. */
int place_choose_as(place_t *pl, rota_region_t *r, pid_t pid, uid_t uid, const rota_msg_place_t *m, uint64_t now_ns);
/* place_choose_as without waiting, whatever m->wait_ms says: the fits-nowhere rule for a job that fits nowhere. */
int place_choose_now(place_t *pl, rota_region_t *r, pid_t pid, uid_t uid, const rota_msg_place_t *m,
                     uint64_t now_ns);
/* Enters the node's GPUs (rotad's probe) in the ledger and marks them known. Returns how many were entered. */
int place_add_known(place_t *pl, rota_region_t *r, const rota_place_cand_t *gpus, int n);
/* pid reserved memory: its placement is no longer pending (the ledger counts it now). */
void place_settle(place_t *pl, pid_t pid);
/* Pending placements on dev, and their memory (after expiring old ones). */
unsigned place_pending_count(const place_t *pl, int dev, uint64_t *mem);

/* Queues a request that place_choose answered -EAGAIN, until now_ns + m->wait_ms. 0, or -ENOMEM. */
int place_wait_add(place_t *pl, void *who, pid_t pid, uid_t uid, const rota_msg_place_t *m, uint64_t now_ns);
/* Answers every waiter whose time is up (the fits-nowhere rule), then, in order, every waiter that fits now,
 * stopping at the first that does not. Returns how many were answered. */
unsigned place_wait_serve(place_t *pl, rota_region_t *r, uint64_t now_ns, place_answer_fn *fn, void *ctx);
/* Answers every waiter at once by the fits-nowhere rule (rotad is stopping); returns how many. */
unsigned place_wait_flush(place_t *pl, rota_region_t *r, uint64_t now_ns, place_answer_fn *fn, void *ctx);
/* Forgets who's requests without answering (its connection is gone). */
void place_wait_drop(place_t *pl, const void *who);
/* The earliest waiter's deadline, or UINT64_MAX when nobody waits. */
uint64_t place_wait_next(const place_t *pl);
/* Waiters queued. */
unsigned place_wait_count(const place_t *pl);
/* Writes who waits to the region (place_waiting, place_wait_bytes, place_wait_since_ns) for rota status/top. */
void place_wait_publish(const place_t *pl, rota_region_t *r);

#endif
