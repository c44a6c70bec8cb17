/* sched-opts.h - the launch scheduler's options (rotad's command line), shared by the scheduler (sched.h) and its
 * policies (sched-policy.h) without either including the other. */
#ifndef ROTA_SCHED_OPTS_H
#define ROTA_SCHED_OPTS_H

#include <stdbool.h>
#include <stdint.h>

struct sched_policy;

typedef struct sched_opts {
    uint64_t idle_ns;        /* a client is idle after this long without launches and nothing in flight */
    uint64_t idle_low_ns;    /* the same for normal and low clients (0: at once; not defaulted) */
    bool idle_fixed;         /* high clients' idle window is idle_ns, not learned (abi.h, learned idle window) */
    uint64_t tick_ns;        /* decision period while something is contended */
    const struct sched_policy *policy; /* the launch policy among equals (sched-policy.h, rotad --policy); NULL:
                                        * "quantum" if quantum_ns > 0, else "share" */
    uint64_t quantum_ns;     /* the "quantum" policy's quantum (0: SCHED_QUANTUM_NS_DEFAULT with it) */
    unsigned low_factor;     /* a low client's device time counts this many times in the share (0: default) */
    int log_level;           /* 0 warnings, 1 info, 2 debug */
    uint64_t high_stall_ns;  /* an active high client without progress this long holds nobody (0: default 1 s) */
    unsigned doorbell_max_hz; /* doorbell wake-ups heard per client and second; beyond, it waits for the tick */
} sched_opts_t;

#define SCHED_IDLE_NS_DEFAULT 2000000ull
#define SCHED_HIGH_STALL_NS_DEFAULT 1000000000ull
#define SCHED_DOORBELL_HZ_DEFAULT 2000u
#define SCHED_TICK_NS_DEFAULT 1000000ull
#define SCHED_LOW_FACTOR_DEFAULT 2u
#define SCHED_QUANTUM_NS_DEFAULT 20000000ull
#define SCHED_LOW_FACTOR_MAX 1000u

#endif
