/* abi.h - the rotad ABI: node-wide region, per-client channel and socket messages, in one header. */
#ifndef ROTA_ABI_H
#define ROTA_ABI_H

/*
 * Four shared objects make up the protocol between rotad and its clients (librota.so, the rota tool):
 *
 *   socket   a UNIX SOCK_SEQPACKET socket (one message per packet; EOF = the peer is gone, kill -9 included).
 *            Every message starts with rota_msg_hdr_t; rotad checks magic, ABI version, type and exact size
 *            of every packet and drops a client that sends anything else.
 *   region   one memfd, written by rotad only, sealed with F_SEAL_FUTURE_WRITE once rotad mapped it (ABI 8):
 *            no process can map it writable or write(2) it, whatever descriptor it opens, /proc/PID/fd
 *            re-opens included. Clients get a read-only file description of it in the WELCOME reply and map it
 *            PROT_READ: devices and node totals, and (issue 5) each slot's scheduling words. Nothing in it says
 *            who a client is or what it holds (ABI 10): every user's processes map it.
 *   table    the clients' details (pid, uid, command, memory, limits, counters) and the groups' use: rotad's
 *            own memory, mapped by no one else (ABI 10). An observer asks with LIST and gets a sealed copy
 *            filtered for its uid (SO_PEERCRED): root and rotad's own user see every client, any other user
 *            only its own processes, and how many others were left out.
 *   channel  one memfd per client, written by that client only (rotad maps it too and validates every
 *            value it reads: a client scribbling over its channel only ever hurts itself).
 *   board    one memfd, writable by rotad and by the clients rotad registered as high priority: the only words
 *            clients write for each other (issue 5, priority holds without a round trip through rotad). Since
 *            ABI 8 only high clients get a read-write descriptor; normal and low clients get a read-only one
 *            (the memfd is mode 0600, so a client of another user cannot re-open it read-write) and map it
 *            PROT_READ. It carries no ledger state and no pointer or index anyone trusts; rotad rewrites it at
 *            every scheduling tick. A high client scribbling over it can only delay other clients' lower-class
 *            launches until rotad's next tick, which its class allows anyway, or let lower-class launches
 *            through a priority hold until its next launch (high_idle).
 *
 * Every shared structure starts with magic, ABI version and size; fields are fixed-width; fields that change
 * while others read them are _Atomic (lock-free on every supported target, checked below). A reader that finds
 * another magic, version or size refuses the object with a clear message and runs in pass-through.
 * tests/runtime/abi-t.c re-checks the layout.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ROTA_ABI_VERSION 12u /* 2: slot.track (uncontended launches go untracked); 3: the board; 4: dev.high_clients,
                             * dev.normal_clients; 5: board.high_idle, region.high_idle_ns (direct release);
                             * 6: region.high_idle_learn, channel.idle_from_ns, channel.idle_win_ns, slot.idle_win_ns
                             * (the learned idle window); 7: place.wait_ms (a job that fits nowhere waits),
                             * region.place_waiting..., the idle window counted from channel.idle_from_ns always;
                             * 8: the region sealed against writes, the board read-only for normal and low
                             * clients (issue 21); 9: region.stats (operating statistics for rota metrics,
                             * appended); 10: the clients' details and the groups leave the region for rotad's
                             * private table, served filtered per uid by LIST (issue 21, item 9); 11: 4096 slots
                             * (was 512), region.client_limit, the GRANT message (by cgroup or token),
                             * hello.grant_token, region.credit_keep; 12: board.high_due_ns,
                             * board.high_due_span_ns (kernel-length-aware admission) */
#define ROTA_MSG_MAGIC 0x524f5441u     /* "ROTA" */
#define ROTA_REGION_MAGIC 0x52545247u  /* "ROTR"+ */
#define ROTA_CHANNEL_MAGIC 0x52544348u /* "ROTC"+ */
#define ROTA_BOARD_MAGIC 0x52544244u   /* "ROTB"+ */
#define ROTA_TABLE_MAGIC 0x52545442u   /* "ROTT"+ */

#define ROTA_MAX_DEVICES 16
/* Slots in the region's launch-gate words and rotad's table: a node with many small processes (dataloader workers
 * that touch CUDA, MPI ranks, test farms) registers thousands. rotad's max-clients (config.h) may use fewer;
 * region.client_limit says how many it does. */
#define ROTA_MAX_CLIENTS 4096
#define ROTA_MAX_GROUPS 32
#define ROTA_GROUP_NAME 128
#define ROTA_UUID_LEN 16
#define ROTA_COMM_LEN 16
#define ROTA_GRANT_TOKEN_LEN 16 /* 128 random bits (GRANT, HELLO) */
/* Largest allocation request accepted (2^56 bytes): more is a malformed message, not a request. */
#define ROTA_MAX_BYTES (UINT64_C(1) << 56)
/* Longest wait a client may ask for, in milliseconds (one hour). */
#define ROTA_MAX_WAIT_MS 3600000u

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free for shared memory");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free for shared memory");

/* Latency histograms: bucket i counts values <= ROTA_LAT_BOUNDS_US[i] microseconds (and above the one before);
 * the last bucket counts everything above 200 us. */
#define ROTA_LAT_BUCKETS 8
#define ROTA_LAT_BOUNDS_US {1, 2, 5, 10, 20, 50, 200, UINT32_MAX}

/* Priority classes (ROTA_PRIORITY). Lower value = more urgent; memory waiters are served in this order. */
enum rota_prio {
    ROTA_PRIO_HIGH = 0,
    ROTA_PRIO_NORMAL = 1,
    ROTA_PRIO_LOW = 2,
    ROTA_PRIO_COUNT = 3,
};

/*
 * Launch scheduling (issue 5; runtime/sched.c decides, shim/client-launch.c obeys). A client's first launch after
 * being idle sets channel.active, stamps channel.active_since_ns and bumps + wakes channel.doorbell (a shared futex
 * rotad's scheduler thread waits on with futex_waitv). rotad validates what it reads, decides, and writes the
 * client's sched.hold (a shared futex word the held client waits on, with a bounded timeout: fail-open). rotad
 * clears channel.active (compare-exchange) once the client is idle: nothing in flight and no launch for the idle
 * window (rotad --idle-ms, default 2; for tracked normal and low clients --idle-low-us, default 0).
 *
 * Priority holds take effect without waiting for rotad: a high client's activating launch (after setting
 * channel.active) bumps board.devices[d].high_pending (d: its GPU's region index) before ringing its doorbell.
 * A normal/low launch on GPU d that reads high_pending != 0, while region.devices[d].high_clients != 0 (a high
 * client there that rotad has not judged stalled: a client's mark is trusted no further), is held as if sched.hold
 * had ROTA_HOLD_PRIO, waiting on
 * that futex word, until rotad has read the activation, published the slot holds it implies (or none), and
 * zeroed the word (compare-exchange with the value it read at the start of its tick, then FUTEX_WAKE). So "lower
 * classes held" is one store after the high launch enters the gate; the high client measures that time itself
 * (channel.hold_*), and rotad adds it up per GPU (rota_dev_t.hold_*), next to its own confirmation time
 * (rota_dev_t.confirm_*: the activating launch to the slot holds published).
 *
 * Priority holds also end without waiting for rotad (direct release, ABI 5). board.devices[d].high_idle is a futex word
 * whose low bit says "the only high client of GPU d is idle". That client (region.devices[d].high_clients == 1) sets
 * the bit once rotad's own idle rule holds after its last launch in flight completes (the idle window below;
 * region.high_idle_ns is rotad --idle-ms, which rotad publishes at start), and wakes the word; it clears the bit
 * (adding 1) at every launch, before launching, and if a launch it raced with is in flight once the bit is set (its
 * gate counts a launch in flight before that check, the tracker checks after setting the bit). A lower client whose
 * sched.hold is exactly ROTA_HOLD_PRIO on GPU d, with high_clients == 1 and no board mark, launches while the bit is set
 * and otherwise waits on that word rather than on sched.hold. rotad adds 2 to the word (keeping the bit) and wakes it
 * after any hold change on GPU d, after the slot holds are out, so such a waiter never sleeps through rotad's release.
 * rotad's own release follows at its tick as before: the direct release only saves the scheduler's wake-up from the
 * hand-over, and the lower classes' share is computed again then.
 *
 * The idle window of a high client is learned (ABI 6; unless rotad --idle-fixed, region.high_idle_learn == 0). The
 * client keeps a histogram of its own gaps, from the completion that left nothing in flight to its next launch
 * (runtime/lib/idlewin.h), and at every such completion writes channel.idle_win_ns (the window that gap
 * distribution makes cheapest, at most high_idle_ns) and then channel.idle_from_ns (that completion's time, as
 * its tracker saw it; written learned or not). It is idle, for rotad as for its own direct release, once
 * nothing is in flight and, where idle_from_ns is later than last_launch_ns, the window (idle_win_ns when
 * learned, else high_idle_ns; at most high_idle_ns) has passed since idle_from_ns; where no completion since the
 * last launch is known, once no launch came for high_idle_ns. A launch after that completion stamps a later
 * last_launch_ns, which voids it. Counted from the completion, not the launch: a request whose work outlasts
 * high_idle_ns would otherwise release the lower classes the moment it completes, into the gap before a next
 * request already queued. rotad takes an idle_from_ns later than its own clock as now, so what a client writes
 * there holds the others no longer than launching would. rotad shows the window it applied in slot.idle_win_ns.
 * A client may end one gap's window sooner (its launching thread asleep waiting for input, shim/client-idleprobe.c):
 * it then writes idle_win_ns = the time since idle_from_ns, then idle_from_ns again (the same value, release).
 *
 * sched.contended (rotad writes it before sched.hold, at every tick): 0 while the client is uncontended on its GPU (no
 * high client registered there or on an unknown GPU, no other client active there or on an unknown GPU, not
 * held; and none of this for the last 200 ms): its normal/low launches are then not tracked (no event, no
 * tracker wake-up, no in-flight bound; busy_ns does not grow). Once it reads 1 the client tracks again: its
 * first tracked launch records one event for the untracked backlog on its stream and counts it as one unit in
 * flight, so the first high request after an uncontended period may wait for that backlog, like for kernels
 * already running.
 */
enum rota_hold {
    ROTA_HOLD_PRIO = 1u,     /* a higher class is active on the client's GPU */
    ROTA_HOLD_SHARE = 2u,    /* over its weighted share of its class on this GPU */
    ROTA_HOLD_QUANTUM = 4u,  /* exclusive-quantum mode: another client of the class holds the quantum */
};

enum rota_dev_flags {
    ROTA_DEV_PROBED = 1u, /* rotad enumerated this GPU itself at start (runtime/probe.c): it is this node's */
};

enum rota_sched_state {
    ROTA_SCHED_IDLE = 0,     /* no launch for the idle window and nothing in flight */
    ROTA_SCHED_RUNNING = 1,  /* launching */
    ROTA_SCHED_HELD = 2,     /* held by rotad (sched.hold != 0) */
    ROTA_SCHED_MEMWAIT = 3,  /* a memory request is queued (slot.waiting != 0) */
};

/* ---- region (rotad writes, everyone reads) ---------------------------------------------------------------- */

/* One physical GPU, keyed by UUID. Entries are appended (ndevices grows) and never move. */
typedef struct rota_dev {
    uint8_t uuid[ROTA_UUID_LEN];
    _Atomic uint64_t capacity;     /* bytes, as the first client on this GPU reported cuDeviceTotalMem */
    _Atomic uint64_t reserved;     /* node-wide: reserved + committed bytes of every live client */
    _Atomic uint32_t waiters;      /* memory requests queued on this GPU */
    _Atomic uint32_t clients;      /* live clients that reserved on this GPU */
    /* scheduling (issue 5): written by rotad, read by the launch gate */
    uint32_t unused0;              /* was hold_epoch (bumped and woken, never waited on): zero */
    _Atomic uint32_t high_active;  /* high-priority clients active on this GPU */
    _Atomic uint64_t busy_ns;      /* time this GPU had tracked work in flight, sampled by rotad (sched.c) */
    _Atomic uint32_t busy_permille; /* busy fraction of the last >= 100 ms, 0..1000 (sched.c) */
    _Atomic uint32_t held;         /* clients held on this GPU now */
    _Atomic uint64_t hold_events;  /* activating launches of high clients on this GPU (board.high_pending bumped) */
    _Atomic uint64_t hold_lat_sum_ns; /* sum and max of high launch -> lower classes held (the board store), as */
    _Atomic uint64_t hold_lat_max_ns; /*   the high clients measured it, over hold_events */
    _Atomic uint64_t confirm_events;  /* activations rotad confirmed with slot holds */
    _Atomic uint64_t confirm_lat_sum_ns; /* sum and max of high launch -> rotad published the slot holds */
    _Atomic uint64_t confirm_lat_max_ns;
    _Atomic uint64_t hold_lat_hist[ROTA_LAT_BUCKETS]; /* hold_events by latency: <= ROTA_LAT_BOUNDS_US[i] us */
    _Atomic uint32_t flags;        /* rota_dev_flags */
    _Atomic uint32_t high_clients; /* high-priority clients registered on this GPU, active or not, less those
                                    * rotad judged stalled (sched.c); 0: the board's mark is ignored here */
    _Atomic uint32_t normal_clients; /* normal-priority clients registered on this GPU, active or not */
    uint32_t pad1;
} rota_dev_t;

/* A per-group limit from rotad's config file (group = the client's cgroup v2 path, see config.c). */
typedef struct rota_group {
    char name[ROTA_GROUP_NAME];        /* cgroup path prefix, NUL-terminated */
    uint64_t limit;                    /* per GPU, bytes */
    _Atomic uint64_t used[ROTA_MAX_DEVICES];
} rota_group_t;

enum rota_slot_state {
    ROTA_SLOT_FREE = 0,
    ROTA_SLOT_LIVE = 1,
};

/* One client's details, in rotad's table (never in the region). A slot is reused after its client died; gen is bumped each time, so (slot, gen) names exactly one
 * client for rotad's lifetime, whatever PIDs the kernel hands out meanwhile. */
typedef struct rota_slot {
    _Atomic uint32_t state;            /* rota_slot_state */
    _Atomic uint32_t gen;
    _Atomic int32_t pid;               /* from SO_PEERCRED, never from the client's word */
    _Atomic uint32_t uid;
    _Atomic uint32_t priority;         /* rota_prio */
    _Atomic uint32_t weight;           /* issue 5: share among one class, in thousandths (ROTA_WEIGHT=1 -> 1000) */
    _Atomic uint32_t max_inflight;     /* issue 5: lower-class launches in flight */
    _Atomic int32_t group;             /* index in groups[], -1 for none */
    _Atomic int32_t device;            /* first GPU this client reserved on, -1 before */
    _Atomic int32_t wait_dev;          /* GPU of the queued request, -1 when not waiting */
    _Atomic uint64_t limit;            /* per GPU, bytes; 0 = none */
    _Atomic uint64_t waiting;          /* bytes of the queued request (0 = not waiting) */
    _Atomic uint64_t used[ROTA_MAX_DEVICES]; /* in use + unused credit */
    /* scheduling (issue 5); the words the client's launch gate reads are region.sched[slot] */
    uint32_t unused0;                  /* was hold (ABI 9; now rota_slot_sched_t.hold): zero */
    _Atomic uint32_t sched_state;      /* rota_sched_state, for rota top */
    _Atomic uint64_t launches;         /* copied from the channel (validated: never decreases) */
    _Atomic uint64_t busy_ns;          /* device time as the client measures it (client-tracker.c), validated */
    _Atomic uint32_t inflight;
    uint32_t unused1;                  /* was track (ABI 9; now rota_slot_sched_t.contended): zero */
    char comm[ROTA_COMM_LEN];          /* NUL-terminated, sanitised */
    _Atomic uint64_t credit;           /* unused credit (all GPUs) as last read from the channel; part of used[] */
    _Atomic uint64_t idle_win_ns;      /* a high client's idle window as rotad applies it; UINT64_MAX: not yet */
    uint64_t reserved_abi[1];
} rota_slot_t;

/* Operating statistics (ABI 9): counters rotad keeps for `rota metrics` and rotad --metrics-listen (docs/operating.md),
 * appended to the region so that every reader renders the same numbers. Counters only grow while their slot keeps
 * its owner (rotad zeroes a slot's entry when it registers a new client there). */
typedef struct rota_slot_stats {
    _Atomic uint64_t mem_wait_ns;      /* time its queued memory requests waited (answered ones) */
    _Atomic uint64_t mem_waits_granted; /* requests granted after queueing */
    _Atomic uint64_t mem_waits_timed_out; /* requests refused once their wait ran out */
    _Atomic uint64_t held_ns[3];       /* time held per reason (ROTA_HOLD_PRIO, _SHARE, _QUANTUM), ended holds */
    _Atomic uint64_t hold_since_ns;    /* CLOCK_MONOTONIC start of the current hold (hold_bits != 0) */
    _Atomic uint32_t hold_bits;        /* the current hold's reasons (sched.hold as last counted) */
    _Atomic uint32_t hold_seq;         /* seqlock: odd while rotad updates held_ns, hold_since_ns, hold_bits */
} rota_slot_stats_t;

typedef struct rota_dev_stats {
    _Atomic uint64_t mem_waits_granted; /* memory requests on this GPU granted after queueing */
    _Atomic uint64_t mem_waits_timed_out; /* ... refused once their wait ran out */
    _Atomic uint64_t mem_wait_ns;      /* time those requests waited */
    uint64_t reserved_abi[5];
} rota_dev_stats_t;

typedef struct rota_stats {
    _Atomic uint64_t place_waits;      /* jobs (rota run --place-wait) answered after waiting for a GPU with room */
    _Atomic uint64_t place_wait_ns;    /* time those jobs waited */
    uint64_t reserved_abi[6];
    rota_dev_stats_t devices[ROTA_MAX_DEVICES];
} rota_stats_t;

/* The words of a slot its client's launch gate reads (region.sched[slot]); the slot's owner is not named here.
 * One cache line each: rotad stores into one client's word while others spin on theirs. */
typedef struct rota_slot_sched {
    _Atomic uint32_t hold;             /* futex word: rota_hold bits; nonzero = hold this client at its next launch */
    _Atomic uint32_t contended;        /* 1 = contention may begin here: track launches (see below; ABI 2-11: track) */
    uint64_t reserved_abi[7];
} rota_slot_sched_t;

typedef struct rota_region {
    uint32_t magic;                    /* ROTA_REGION_MAGIC */
    uint32_t abi;                      /* ROTA_ABI_VERSION */
    uint64_t size;                     /* sizeof(rota_region_t) */
    int32_t rotad_pid;
    uint32_t max_devices, max_clients, max_groups;
    uint64_t start_ns;                 /* CLOCK_REALTIME of rotad's start */
    _Atomic uint32_t ndevices;
    _Atomic uint32_t ngroups;
    _Atomic uint32_t nclients;
    uint32_t unused0;                  /* was sched_epoch (bumped, never read): zero */
    uint64_t unused1;                  /* was seq (bumped on every ledger change, never read): zero */
    _Atomic uint64_t high_idle_ns;     /* rotad's idle window for high clients (--idle-ms): see direct release */
    _Atomic uint32_t high_idle_learn;  /* 1: high clients learn their window (ABI 6, "learned idle window") */
    /* Jobs `rota run` keeps waiting for a GPU with room (ABI 7, PLACE wait_ms): how many, their memory summed, and
     * since when the oldest waits (CLOCK_MONOTONIC; 0 = nobody). rotad rewrites them after every change. */
    _Atomic uint32_t place_waiting;
    _Atomic uint64_t place_wait_bytes;
    _Atomic uint64_t place_wait_since_ns;
    /* What a client keeps in its credit word on one GPU from its own frees: up to 1.5 times this (rotad's
     * `credit SIZE`; 0, as a rotad before this field wrote it: every free goes back with a RELEASE). See
     * channel.credit. */
    _Atomic uint64_t credit_keep;
    _Atomic uint32_t client_limit;     /* ABI 11: slots rotad registers clients in (config max-clients) */
    uint32_t pad0;
    /* rotad --mps (runtime/mps.h): each class's share of an MPS server's SMs, a percentage (1..100) that librota
     * applies as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE before the process's first context, never raising one the
     * process set lower; 0: no MPS share (rotad without --mps, or its MPS control daemon is gone). By class
     * (rota_prio); the fourth is zero. */
    _Atomic uint32_t mps_pct[4];
    rota_dev_t devices[ROTA_MAX_DEVICES];
    rota_slot_sched_t sched[ROTA_MAX_CLIENTS]; /* ABI 10: a slot's launch-gate words, by slot index */
    rota_stats_t stats;                /* ABI 9: operating statistics (above), node and GPU totals */
} rota_region_t;

/* ---- table (rotad's own memory; observers get filtered copies through LIST) ------------------------------------ */

enum rota_table_flags {
    ROTA_TABLE_ALL = 1u, /* a copy with every client (the viewer is root or rotad's own user) */
};

typedef struct rota_table {
    uint32_t magic;                    /* ROTA_TABLE_MAGIC */
    uint32_t abi;                      /* ROTA_ABI_VERSION */
    uint64_t size;                     /* sizeof(rota_table_t) */
    uint32_t viewer_uid;               /* a copy: the uid it was made for (SO_PEERCRED of the LIST) */
    uint32_t flags;                    /* rota_table_flags */
    uint32_t hidden_clients;           /* a copy: live clients of other users, left out (their slots read FREE) */
    uint32_t hidden_groups;            /* a copy: configured groups left out (their entries zeroed) */
    uint64_t reserved_abi[4];
    /* Per-group limits and use: index as the config lists them (region.ngroups of them). A copy for a user who
     * does not see every client keeps only the groups one of its own processes is charged to. */
    rota_group_t groups[ROTA_MAX_GROUPS];
    rota_slot_t slots[ROTA_MAX_CLIENTS];
    rota_slot_stats_t stats[ROTA_MAX_CLIENTS]; /* ABI 9: each slot's operating statistics */
} rota_table_t;

/* ---- channel (one client writes, rotad validates) ----------------------------------------------------------- */

typedef struct rota_channel {
    uint32_t magic;                    /* ROTA_CHANNEL_MAGIC, set by rotad; a client that changes it is dropped */
    uint32_t abi;
    uint64_t size;
    uint32_t slot, gen;                /* set by rotad */
    /* client-written statistics and scheduling state (issue 5) */
    _Atomic uint32_t inflight;         /* gated launches not yet completed */
    _Atomic uint32_t active;           /* 1 while the client has launched recently */
    _Atomic uint64_t launches;
    _Atomic uint64_t busy_ns;          /* device time of completed launches */
    _Atomic uint64_t last_launch_ns;   /* CLOCK_MONOTONIC */
    _Atomic uint32_t doorbell;         /* futex word the client bumps to ask rotad's attention (issue 5) */
    _Atomic uint32_t sched_dev;        /* region device index + 1 of the client's launches; 0 = not known */
    _Atomic uint32_t held_waiting;     /* threads of the client waiting in the launch gate for a hold */
    _Atomic uint32_t inflight_waiting; /* threads waiting for one of their in-flight launches to complete */
    _Atomic uint64_t active_since_ns;  /* CLOCK_MONOTONIC of the launch that set active (idle -> active) */
    _Atomic uint64_t idle_from_ns;     /* high client: when its last launch in flight completed (idle window) */
    _Atomic uint64_t idle_win_ns;      /* high client: its learned idle window, counted from idle_from_ns */
    uint64_t reserved_abi[4];
    /* Memory credit per GPU (index in region->devices): bytes rotad has already charged to this client and not
     * yet seen used. rotad adds to it when it grants a RESERVE (fetch_add) and takes it all back under pressure
     * (exchange with 0, after a seq_cst fence, whenever a request queues or is served on that GPU); the client
     * takes from it with compare-exchange to allocate without a round trip, and adds to it the bytes it frees
     * (still charged to it: they were in use) while the word stays within 1.5 x region.credit_keep (past it,
     * one RELEASE takes it down to half of credit_keep) and nobody waits
     * for memory on that GPU (region.devices[].waiters, read after the add: a waiter that appeared meanwhile
     * gets them back through rotad's exchange or the client's RELEASE). So every byte is either in a credit word
     * or in use, and the ledger stays exact; a client that writes more into its word only keeps its own bytes
     * charged (rotad's uncharges are clamped to what the client holds). */
    _Atomic uint64_t credit[ROTA_MAX_DEVICES];
    /* Priority holds through the board (high clients only): activating launches, and the time from entering the
     * launch gate to the board store, as sum, max and histogram (ROTA_LAT_BUCKETS). rotad adds the growth to
     * the GPU of channel.sched_dev. */
    _Atomic uint64_t hold_events;
    _Atomic uint64_t hold_lat_sum_ns;
    _Atomic uint64_t hold_lat_max_ns;
    _Atomic uint32_t hold_lat_hist[ROTA_LAT_BUCKETS];
    uint64_t reserved_abi2[3];
} rota_channel_t;

/* ---- board (every client and rotad write it; see "Launch scheduling" and the header comment) ------------------ */

typedef struct rota_board_dev {
    _Atomic uint32_t high_pending;     /* futex word: nonzero = a high client activated here, rotad not yet done */
    _Atomic uint32_t high_idle;        /* futex word: low bit = the GPU's only high client is idle (direct release) */
    uint64_t unused0;                  /* was high_pending_ns (never written or read): zero */
    /* ABI 12, kernel-length-aware admission (runtime/lib/admit.h): when the GPU's only high client predicts its
     * next request (CLOCK_MONOTONIC ns; 0: it does not), and how late it may come. That client writes them at the
     * completion that leaves it nothing in flight (the span, then the due time with release), before it releases
     * the lower classes. A lower launch that would still run then waits, once, until the request came (then it
     * is held as usual) or the span passed: only where region.devices[d].high_clients == 1 (a stalled client's
     * words count for nothing), and never longer than its own kernel time twice plus what it has in flight and
     * ROTA_ADMIT_WAIT_US: a lying due time delays the lower classes less than a busy high client holds them. */
    _Atomic uint64_t high_due_ns;
    _Atomic uint64_t high_due_span_ns;
    uint64_t reserved_abi[4];
} rota_board_dev_t;

typedef struct rota_board {
    uint32_t magic;                    /* ROTA_BOARD_MAGIC, set by rotad */
    uint32_t abi;
    uint64_t size;
    uint64_t reserved_abi[6];
    rota_board_dev_t devices[ROTA_MAX_DEVICES]; /* same index as region->devices */
} rota_board_t;

/* Both objects are mapped in page multiples. */
#define ROTA_PAGE 4096u
#define ROTA_ROUND_PAGE(n) ((((uint64_t)(n)) + ROTA_PAGE - 1) / ROTA_PAGE * ROTA_PAGE)
#define ROTA_REGION_MAP_SIZE ROTA_ROUND_PAGE(sizeof(rota_region_t))
#define ROTA_CHANNEL_MAP_SIZE ROTA_ROUND_PAGE(sizeof(rota_channel_t))
#define ROTA_BOARD_MAP_SIZE ROTA_ROUND_PAGE(sizeof(rota_board_t))
#define ROTA_TABLE_MAP_SIZE ROTA_ROUND_PAGE(sizeof(rota_table_t))

/* ---- socket messages --------------------------------------------------------------------------------------- */

enum rota_msg_type {
    ROTA_MSG_HELLO = 1,    /* client -> rotad: register (or observe); first message of every connection */
    ROTA_MSG_WELCOME = 2,  /* rotad -> client: slot, region fd [, channel fd] via SCM_RIGHTS */
    ROTA_MSG_RESERVE = 3,  /* client -> rotad: reserve bytes on a GPU, maybe waiting; answered by RESULT */
    ROTA_MSG_RESULT = 4,   /* rotad -> client: outcome of RESERVE (same seq) */
    ROTA_MSG_RELEASE = 5,  /* client -> rotad: give bytes back (free, or a failed allocation); no answer */
    ROTA_MSG_ADOPT = 6,    /* client -> rotad: after a reconnect, bytes already allocated; no answer */
    ROTA_MSG_PLACE = 7,    /* client or observer -> rotad: choose a GPU among candidates; answered by RESULT */
    ROTA_MSG_LIST = 8,     /* client or observer -> rotad: a copy of the table for the asker's uid; answered by
                            * RESULT (status 0: the copy's descriptor comes with it) */
    ROTA_MSG_GRANT = 9,    /* root or rotad's user -> rotad: the limits an admin's scheduler grants the processes of
                            * a cgroup; answered by RESULT (see rota_msg_grant_t) */
    ROTA_MSG_TYPE_MAX = 9,
};

enum rota_role {
    ROTA_ROLE_CLIENT = 1,   /* a process using the GPU: gets a slot and a channel */
    ROTA_ROLE_OBSERVER = 2, /* rota status/top: region only, no slot */
};

typedef struct rota_msg_hdr {
    uint32_t magic;        /* ROTA_MSG_MAGIC */
    uint16_t abi;          /* ROTA_ABI_VERSION */
    uint16_t type;         /* rota_msg_type */
    uint32_t size;         /* whole message, header included: exactly the size of the type's struct */
    uint32_t seq;          /* chosen by the client; RESULT echoes it */
} rota_msg_hdr_t;

typedef struct rota_msg_hello {
    rota_msg_hdr_t h;
    uint32_t role;         /* rota_role */
    uint32_t priority;     /* rota_prio */
    uint32_t weight;       /* thousandths: 1..1000000 (ROTA_WEIGHT 0.001..1000) */
    uint32_t max_inflight; /* 0..65535 (0 = rotad's default) */
    uint64_t mem_limit;    /* per GPU; 0 = none */
    uint32_t flags;        /* none defined: must be 0 */
    uint32_t pad0;
    char comm[ROTA_COMM_LEN];
    uint8_t grant_token[ROTA_GRANT_TOKEN_LEN]; /* ROTA_GRANT (a token-keyed GRANT's); all zero: none */
} rota_msg_hello_t;

typedef struct rota_msg_welcome {
    rota_msg_hdr_t h;
    int32_t status;        /* 0, or -errno: -EPROTO (ABI mismatch), -EUSERS (table full), -EINVAL */
    uint32_t abi;          /* rotad's ABI version, meaningful even when status is -EPROTO */
    uint32_t slot, gen;
    uint64_t region_size;
    uint64_t channel_size; /* clients: the channel (second descriptor) and the board (third) follow */
    char reason[64];       /* why status != 0, NUL-terminated */
} rota_msg_welcome_t;

/* RESERVE, RELEASE and ADOPT share one body. */
typedef struct rota_msg_mem {
    rota_msg_hdr_t h;
    uint8_t uuid[ROTA_UUID_LEN];
    uint64_t total_mem;    /* the GPU's memory as the client's driver reports it */
    uint64_t bytes;        /* 1..ROTA_MAX_BYTES */
    uint32_t wait_ms;      /* RESERVE: how long to queue when it does not fit (0 = fail at once) */
    uint32_t flags;        /* none defined: must be 0 */
} rota_msg_mem_t;

typedef struct rota_msg_result {
    rota_msg_hdr_t h;
    int32_t status;        /* 0; -ENOMEM (GPU full, no wait or timed out); -EDQUOT (over the process or group
                            * limit); -ESHUTDOWN (rotad is draining: pass through) */
    int32_t dev;           /* index in region->devices, -1 when unknown */
    uint64_t limit;        /* the client's effective limit on this GPU (min of process and group; 0 = none) */
    uint64_t credit;       /* bytes added to the channel's credit[dev] with this answer */
} rota_msg_result_t;

/* PLACE (issue 5): `rota run` asks which of the GPUs it can see a new process should use. rotad answers with a
 * RESULT whose dev is the chosen index in cand[] (status 0), and counts the placement as pending for the asking
 * pid (SO_PEERCRED; rota run execs, so it is the job's pid) until that pid reserves memory on a GPU, dies, or
 * ROTA_PLACE_PENDING_MS pass. See runtime/place.h.
 * flags ROTA_PLACE_KNOWN (librota's remap, before the process's cuInit: it has no driver to list GPUs with yet):
 * ncand is 0 and cand[] all zero; rotad chooses among the GPUs it enumerated itself at start (rotad --no-probe:
 * none), by the same rule, and the RESULT's dev is the region device index (status -ENODEV: none known). */
#define ROTA_PLACE_PENDING_MS 30000u
#define ROTA_PLACE_KNOWN 1u
/* flags ROTA_PLACE_HIGH / ROTA_PLACE_LOW (at most one; neither: normal): the job's class. A job is slowed by the
 * clients of its class and above on its GPU, hardly by lower ones (they are held for it or yield to it), so
 * rotad places it where it has the fewest of those first: a high job away from other high jobs, a normal job
 * beside low ones rather than beside normal ones (runtime/place.h). */
#define ROTA_PLACE_HIGH 2u
#define ROTA_PLACE_LOW 4u
/* wait_ms (rota run --place-wait): a job whose mem fits on no candidate now is not answered at once. rotad keeps
 * the request and answers when a candidate has room (served by class, then arrival, each waiter in turn; the first
 * that still fits nowhere stops the walk, so a large job is not starved by smaller ones behind it), or when wait_ms
 * pass, then by the fits-nowhere rule (the most free memory). A job committed to a GPU where it does not fit waits
 * for memory there, while another GPU may free room first; deciding when room appears picks that GPU. 0: answer at
 * once. At most ROTA_MAX_WAIT_MS. */
typedef struct rota_place_cand {
    uint8_t uuid[ROTA_UUID_LEN];
    uint64_t total_mem;    /* 1..ROTA_MAX_BYTES, as the asker's driver reports it */
} rota_place_cand_t;

typedef struct rota_msg_place {
    rota_msg_hdr_t h;
    uint32_t ncand;        /* 1..ROTA_MAX_DEVICES; 0 with ROTA_PLACE_KNOWN */
    uint32_t flags;        /* ROTA_PLACE_KNOWN, ROTA_PLACE_HIGH or ROTA_PLACE_LOW, or 0 */
    uint64_t mem;          /* the job's expected memory (its --mem limit), counted while pending; 0 = unknown */
    uint32_t wait_ms;      /* how long a job that fits nowhere may wait for room (above); 0 = answer at once */
    uint32_t reserved;     /* zero */
    rota_place_cand_t cand[ROTA_MAX_DEVICES]; /* entries past ncand must be zero */
} rota_msg_place_t;

/* LIST (ABI 10): the answer is a RESULT (dev -1, limit and credit 0) carrying one descriptor: a memfd of
 * ROTA_TABLE_MAP_SIZE bytes, sealed against every write (F_SEAL_WRITE), holding a rota_table_t made for the
 * asker's uid at that moment. status: 0; -EAGAIN (asked again within ROTA_LIST_MIN_MS on this connection: ask
 * later); -ENOMEM. Each copy is rotad's work, so one connection gets at most one per ROTA_LIST_MIN_MS. */
#define ROTA_LIST_MIN_MS 10u
typedef struct rota_msg_list {
    rota_msg_hdr_t h;
    uint32_t flags;        /* none defined: must be 0 */
    uint32_t pad0;         /* zero */
} rota_msg_list_t;

/* GRANT (issue 32, item 4): a limit an admin's scheduler grants reaches rotad from a trusted party, never from
 * the job's own environment. The Slurm plugin (in slurmstepd, as root) and the Kubernetes device plugin send it
 * (runtime/lib/grant.h); rotad takes it only from a peer (SO_PEERCRED) that is root or rotad's own user, as the
 * first message of a connection or from an observer; anyone else is disconnected. It binds to a cgroup v2 path:
 * every process whose cgroup (the 0:: line of /proc/PID/cgroup, read by rotad) is that path or below it, and whose
 * uid is uid (ROTA_GRANT_ANY_UID: any), gets at its HELLO
 *   - memory: at most mem_limit per GPU (0: the grant sets none); the HELLO's mem_limit (ROTA_MEM_LIMIT) may only
 *     lower it: 0 or more in the HELLO is the grant's;
 *   - class: at best max_prio: a HELLO asking for a better class runs at max_prio; max_prio ROTA_PRIO_HIGH lets
 *     the processes run high as a high-cgroup line would.
 * The longest matching path wins. A grant for a path replaces the one before; ROTA_GRANT_REVOKE removes it
 * (clients registered already keep what they got). rotad keeps at most ROTA_MAX_GRANTS; when full it forgets those
 * whose cgroup no longer exists (/sys/fs/cgroup/PATH). RESULT status: 0; -EINVAL (a path that is not absolute);
 * -ENOENT (REVOKE of no grant); -ENOSPC (full).
 * flags ROTA_GRANT_TOKEN (the Kubernetes device plugin, whose container has no cgroup yet when it grants): the grant
 * is keyed by token, 128 random bits the plugin hands the container as ROTA_GRANT; cgroup is "" (any) or a path
 * the container's cgroup must lie in. The first HELLO that presents the token (hello.grant_token) binds the grant
 * to that client's cgroup (read by rotad from /proc): from then on it covers every process of that cgroup, with or
 * without the token, and the token is refused from any other cgroup (the client registers as one without a grant).
 * A token never presented expires grant-token-ms after the GRANT (rotad's config); when its bound cgroup is gone
 * (a container that ended or restarted), the token may bind once more, within grant-token-ms, to a cgroup beside
 * it (the same parent: a restarted container of the same pod), then lapses. REVOKE with ROTA_GRANT_TOKEN removes
 * the grant of token. */
#define ROTA_GRANT_CGROUP_LEN 256
#define ROTA_GRANT_ANY_UID UINT32_MAX
#define ROTA_GRANT_REVOKE 1u
#define ROTA_GRANT_TOKEN 2u
#define ROTA_MAX_GRANTS 4096
typedef struct rota_msg_grant {
    rota_msg_hdr_t h;
    uint32_t flags;        /* ROTA_GRANT_REVOKE or 0 */
    uint32_t max_prio;     /* rota_prio: the best class granted */
    uint64_t mem_limit;    /* per process and GPU, bytes, 0..ROTA_MAX_BYTES (0: none) */
    uint32_t uid;          /* the job's user, or ROTA_GRANT_ANY_UID */
    uint32_t pad0;         /* zero */
    char cgroup[ROTA_GRANT_CGROUP_LEN]; /* absolute cgroup v2 path, NUL-terminated ("" with ROTA_GRANT_TOKEN) */
    uint8_t token[ROTA_GRANT_TOKEN_LEN]; /* with ROTA_GRANT_TOKEN: not all zero; else all zero */
} rota_msg_grant_t;

/* Largest message (PLACE); receive buffers have this size. 128 before PLACE existed: only rotad receives PLACE,
 * so a peer built with the smaller buffer never sees a longer packet. */
#define ROTA_MSG_MAX 512

_Static_assert(sizeof(rota_msg_hdr_t) == 16, "message header");
_Static_assert(sizeof(rota_msg_hello_t) == 80, "hello");
_Static_assert(sizeof(rota_msg_welcome_t) == 112, "welcome");
_Static_assert(sizeof(rota_msg_mem_t) == 56, "mem message");
_Static_assert(sizeof(rota_msg_result_t) == 40, "result");
_Static_assert(sizeof(rota_msg_list_t) == 24, "list");
_Static_assert(sizeof(rota_msg_grant_t) == 312 && sizeof(rota_msg_grant_t) <= ROTA_MSG_MAX, "grant");
_Static_assert(offsetof(rota_msg_hello_t, grant_token) == 64, "hello layout");
_Static_assert(offsetof(rota_msg_grant_t, cgroup) == 40 && offsetof(rota_msg_grant_t, token) == 296, "grant layout");
_Static_assert(sizeof(rota_msg_welcome_t) <= ROTA_MSG_MAX, "messages fit ROTA_MSG_MAX");
_Static_assert(sizeof(rota_place_cand_t) == 24, "place candidate");
_Static_assert(sizeof(rota_msg_place_t) == 40 + 24 * ROTA_MAX_DEVICES, "place");
_Static_assert(offsetof(rota_msg_place_t, wait_ms) == 32 && offsetof(rota_msg_place_t, cand) == 40, "place layout");
_Static_assert(sizeof(rota_msg_place_t) <= ROTA_MSG_MAX, "place fits ROTA_MSG_MAX");
_Static_assert(offsetof(rota_msg_hdr_t, type) == 6 && offsetof(rota_msg_hdr_t, seq) == 12, "header layout");
_Static_assert(offsetof(rota_msg_mem_t, bytes) == 40, "mem layout");

_Static_assert(sizeof(rota_dev_t) == 192, "device entry");
_Static_assert(sizeof(rota_group_t) == ROTA_GROUP_NAME + 8 + 8 * ROTA_MAX_DEVICES, "group entry");
_Static_assert(offsetof(rota_slot_t, used) == 56, "slot layout");
_Static_assert(sizeof(rota_slot_t) == 256, "slot entry");
_Static_assert(offsetof(rota_region_t, size) == 8, "region header");
_Static_assert(offsetof(rota_region_t, devices) == 128, "region devices");
_Static_assert(sizeof(rota_slot_sched_t) == 64, "a slot's launch-gate words: one cache line");
_Static_assert(offsetof(rota_table_t, groups) == 64 && offsetof(rota_table_t, slots) % 64 == 0 &&
                   offsetof(rota_table_t, stats) == offsetof(rota_table_t, slots) + 256 * ROTA_MAX_CLIENTS,
               "table layout");
_Static_assert(offsetof(rota_region_t, place_waiting) == 76 && offsetof(rota_region_t, place_wait_bytes) == 80 &&
                   offsetof(rota_region_t, place_wait_since_ns) == 88,
               "region place waiters");
_Static_assert(offsetof(rota_region_t, high_idle_ns) == 64 && offsetof(rota_board_dev_t, high_idle) == 4,
               "direct release words");
_Static_assert(offsetof(rota_board_dev_t, high_due_ns) == 16 && offsetof(rota_board_dev_t, high_due_span_ns) == 24,
               "admission words");
_Static_assert(offsetof(rota_region_t, sched) % 64 == 0, "launch-gate words are cache-line aligned");
_Static_assert(sizeof(rota_slot_stats_t) == 64 && sizeof(rota_dev_stats_t) == 64 &&
                   sizeof(rota_stats_t) == 64 + 64 * ROTA_MAX_DEVICES,
               "statistics entries are one cache line each");
_Static_assert(offsetof(rota_region_t, stats) == offsetof(rota_region_t, sched) + 64 * ROTA_MAX_CLIENTS,
               "statistics follow the launch-gate words");
_Static_assert(offsetof(rota_channel_t, inflight) == 24, "channel layout");
_Static_assert(offsetof(rota_channel_t, credit) == 128, "channel credit");
_Static_assert(offsetof(rota_channel_t, hold_events) == 128 + 8 * ROTA_MAX_DEVICES, "channel hold statistics");
_Static_assert(sizeof(rota_channel_t) == 128 + 8 * ROTA_MAX_DEVICES + 80, "channel");
_Static_assert(sizeof(rota_board_dev_t) == 64, "board entries are one cache line each");
_Static_assert(offsetof(rota_board_t, devices) == 64 && sizeof(rota_board_t) == 64 + 64 * ROTA_MAX_DEVICES, "board");
/* scheduling (issue 5) */
_Static_assert(offsetof(rota_channel_t, sched_dev) == 60 && offsetof(rota_channel_t, active_since_ns) == 72,
               "channel scheduling layout");
_Static_assert(offsetof(rota_channel_t, idle_from_ns) == 80 && offsetof(rota_channel_t, idle_win_ns) == 88 &&
                   offsetof(rota_region_t, high_idle_learn) == 72 && offsetof(rota_slot_t, idle_win_ns) == 240,
               "learned idle window layout");
_Static_assert(offsetof(rota_dev_t, busy_permille) == 56 && offsetof(rota_dev_t, hold_lat_max_ns) == 80 &&
                   offsetof(rota_dev_t, hold_lat_hist) == 112,
               "device scheduling layout");

#endif
