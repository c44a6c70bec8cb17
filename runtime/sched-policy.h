/* sched-policy.h - the launch-policy seam: what a policy among equals is told, what it decides, the table of them. */
#ifndef ROTA_SCHED_POLICY_H
#define ROTA_SCHED_POLICY_H

#include "runtime/abi.h"
#include "runtime/sched-opts.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * rotad's scheduler (sched.c) decides in two stages each tick, per GPU:
 *
 *   1. the class rule (sched-prio.c): while a high client is active on the GPU, every normal and low client there
 *      is held (ROTA_HOLD_PRIO). Always on; not a policy.
 *   2. a launch policy among equals (one of the table in sched-policy.c, rotad --policy): among the clients of
 *      one share group that the class rule did not hold, who else is held, and why (ROTA_HOLD_SHARE,
 *      ROTA_HOLD_QUANTUM).
 *
 * A share group is the normal or low clients of one GPU (pool 0: clients whose GPU rotad does not know); with
 * low_factor > 1 low clients share with normal ones (sched.c's sched_group). Before a policy is called, sched.c has
 * refreshed every client's activity, advanced each one's virtual time by the device time it had (its share of the
 * tick while it had work in flight, over its weight, times low_factor for low clients), and moved a client back
 * from idle no further back than the least-served one less two slacks. The policy only decides; sched.c
 * publishes the holds (slot.hold, futex-woken), the GPU's counters and the board.
 */

/* One client of a share group, as a policy sees it (the class rule did not hold it this tick). */
typedef struct sched_member {
    unsigned slot;      /* the client's slot: its identity while it lives (a later client may reuse it) */
    bool active;        /* launching: rotad's view after its idle check. Active members compete this tick. */
    uint64_t vtime;     /* virtual time, ns: device time x 1000 / weight (x low_factor for low); least = least served */
    uint32_t hold_was;  /* what was published for it last tick (ROTA_HOLD_* bits) */
} sched_member_t;

typedef struct sched_group {
    const sched_opts_t *o; /* rotad's scheduling options (tick_ns, quantum_ns, ...) */
    unsigned pool;         /* 1 + the GPU's index in the region; 0: GPUs rotad does not know */
    unsigned cls;          /* ROTA_PRIO_NORMAL or ROTA_PRIO_LOW */
    uint64_t now;          /* this tick, CLOCK_MONOTONIC ns */
    unsigned n;            /* active members: the ones that compete */
    uint64_t vmin;         /* least virtual time among the active members (UINT64_MAX with none) */
    unsigned nm;           /* members, in slot order */
    const sched_member_t *m;
} sched_group_t;

#define SCHED_POLICY_STATE_MAX 64 /* bytes of state a policy may keep per share group */

typedef struct sched_policy {
    const char *name;  /* rotad --policy NAME */
    const char *desc;  /* one line for rotad --help */
    /* Called every tick for every share group of every GPU, members or not. hold[j] (zeroed) is member m[j]'s
     * hold to publish: 0 or ROTA_HOLD_SHARE / ROTA_HOLD_QUANTUM. state: SCHED_POLICY_STATE_MAX bytes of its own
     * per group, zeroed when rotad starts. */
    void (*decide)(const sched_group_t *g, void *state, uint32_t *hold);
} sched_policy_t;

/* The policies, one file each. */
extern const sched_policy_t sched_policy_share;   /* sched-share.c: weighted fair share of device time */
extern const sched_policy_t sched_policy_quantum; /* sched-quantum.c: exclusive quanta, least served first */

/* The table (sched-policy.c): the policy named name, or NULL. sched_policy_names: "share|quantum" for usage. */
const sched_policy_t *sched_policy_find(const char *name);
const char *sched_policy_names(void);

/* Stage 1, the class rule (sched-prio.c): the hold of a client of class prio whose GPU has (high_active) or has not
 * an active high client, given the hold published for it last tick. */
uint32_t sched_prio_hold(unsigned prio, bool high_active, uint32_t hold_was);

#endif
