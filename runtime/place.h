/* place.h - GPU placement: which of the GPUs a new process can see it should run on (rota run --gpu auto). */
#ifndef ROTA_PLACE_H
#define ROTA_PLACE_H

#include "runtime/abi.h"

#include <stdint.h>
#include <sys/types.h>

/*
 * rotad sees the whole node, so it decides. A PLACE request carries the GPUs the asker can see (uuid, total
 * memory); every candidate is entered in the ledger (so rota status/top list it), and the answer is the
 * candidate with
 *   1. the most free memory: capacity - reserved - memory of pending placements on it, where two amounts
 *      within PLACE_MEM_SLACK_PCT percent of the larger capacity count as equal (a few MiB of difference
 *      must not outweigh a whole job), then
 *   2. the fewest clients + pending placements, then
 *   3. the lowest candidate index (deterministic).
 * The chosen GPU then carries a pending placement for the asking pid until that pid reserves memory on some
 * GPU (place_settle: from then on the ledger counts it), the pid no longer exists, or ROTA_PLACE_PENDING_MS
 * pass. So jobs that start at once spread instead of all seeing the same empty GPU. A pid that asks again
 * replaces its earlier placement.
 */

#define PLACE_MAX_PENDING 256
#define PLACE_MEM_SLACK_PCT 2

typedef struct place_pending {
    pid_t pid;             /* 0 = free entry */
    int dev;               /* index in region->devices */
    uint64_t mem;          /* the job's expected memory (PLACE mem), counted against the GPU's free memory */
    uint64_t deadline_ns;  /* CLOCK_MONOTONIC */
} place_pending_t;

typedef struct place {
    place_pending_t p[PLACE_MAX_PENDING];
} place_t;

/* Chooses among m's candidates for pid at time now_ns (CLOCK_MONOTONIC) and records the pending placement.
 * Returns the candidate index (0..m->ncand-1), or -ENOSPC when no candidate could be entered in the ledger
 * (device table full). m must have passed proto_check. */
int place_choose(place_t *pl, rota_region_t *r, pid_t pid, const rota_msg_place_t *m, uint64_t now_ns);
/* pid reserved memory: its placement is no longer pending (the ledger counts it now). */
void place_settle(place_t *pl, pid_t pid);
/* Pending placements on dev, and their memory (after expiring old ones). */
unsigned place_pending_count(const place_t *pl, int dev, uint64_t *mem);

#endif
