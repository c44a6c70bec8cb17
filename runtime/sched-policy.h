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
 * A share group is the normal or low clients of one GPU (GPU key 0: clients whose GPU rotad does not know); with
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
    const sched_opts_t *o; /* rotad's scheduling options (tick_ns, ...; the policy's own in popt) */
    unsigned gpu;          /* 1 + the GPU's index in the region; 0: GPUs rotad does not know */
    enum rota_prio cls;    /* ROTA_PRIO_NORMAL or ROTA_PRIO_LOW */
    uint64_t now;          /* this tick, CLOCK_MONOTONIC ns */
    unsigned n;            /* active members: the ones that compete */
    uint64_t vmin;         /* least virtual time among the active members (UINT64_MAX with none) */
    unsigned nm;           /* members, in slot order */
    const sched_member_t *m;
} sched_group_t;

#define SCHED_POLICY_STATE_MAX 64 /* bytes of state a policy may keep per share group */

/* An option a policy owns: rotad FLAG VALUE, VALUE in lo..hi, kept in sched_opts_t.popt[row] as VALUE x scale
 * (rounded). 0 (or not given) is the default. Giving one without --policy chooses its policy. */
typedef struct sched_policy_opt {
    const char *flag;  /* "--quantum-ms" */
    const char *arg;   /* what VALUE is called in the synopsis: "MS" */
    const char *what;  /* what VALUE must be, for the error: "a number of milliseconds" */
    double lo, hi;     /* bounds of VALUE */
    double scale;      /* kept = VALUE x scale: ms -> ns is 1e6 */
    uint64_t def;      /* the kept value when not given */
    const char *help;  /* rotad --help's line for it ("(default D); alone, it chooses --policy NAME" follows) */
} sched_policy_opt_t;

typedef struct sched_policy {
    const char *name;  /* rotad --policy NAME */
    const char *help;  /* what it does, for rotad --help's list of policies ("\n" breaks a line) */
    const sched_policy_opt_t *opts; /* its own options (nopts rows, at most SCHED_POLICY_OPTS_MAX); decide reads
                                     * their values, defaults applied, in g->o->popt[row] */
    unsigned nopts;
    /* Called every tick for every share group of every GPU, members or not. hold[j] (zeroed) is member m[j]'s
     * hold to publish: 0 or ROTA_HOLD_SHARE / ROTA_HOLD_QUANTUM. state: SCHED_POLICY_STATE_MAX bytes of its own
     * per group, zeroed when rotad starts. */
    void (*decide)(const sched_group_t *g, void *state, uint32_t *hold);
} sched_policy_t;

/* The table (sched-policy.c), one row per policy file; the first row is the default. */
/* The i-th policy, or NULL past the last (for rotad --help). */
const sched_policy_t *sched_policy_at(unsigned i);
/* The policy named name, or NULL. */
const sched_policy_t *sched_policy_find(const char *name);
/* The names, "|"-separated in table order (rotad --help, and its error for an unknown one). */
const char *sched_policy_names(void);
/* The policy owning option flag (and its row in *row), or NULL: not a policy's option. */
const sched_policy_t *sched_policy_opt_find(const char *flag, unsigned *row);
/* rotad FLAG VALUE for a policy's option: 0, or -EINVAL with one message in err (a bad value, or an option of a
 * second policy). */
int sched_policy_opt_set(sched_opts_t *o, const char *flag, const char *value, char *err, size_t errlen);
/* Chooses o->policy where none was named (the policy whose options were given, else the table's first) and
 * fills its options' defaults. -EINVAL with one message in err when options of another policy than the one
 * named were given. */
int sched_policy_resolve(sched_opts_t *o, char *err, size_t errlen);

/* Stage 1, the class rule (sched-prio.c): the hold of a client of class prio whose GPU has (high_active) or has not
 * an active high client, given the hold published for it last tick. */
uint32_t sched_prio_hold(enum rota_prio prio, bool high_active, uint32_t hold_was);

#endif
