/* sched.c - rotad's launch scheduler thread: activity, device time, the two stages of holds, publishing (sched.h). */
#include "runtime/sched.h"
#include "runtime/devmem.h"
#include "runtime/stats.h"

#include "runtime/sched-policy.h"

#include "runtime/lib/idlewin.h"
#include "runtime/lib/slice.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

#define SCHED_GPU_KEYS (ROTA_MAX_DEVICES + 1) /* GPU key 0: clients whose GPU rotad does not know */
#define SCHED_BUSY_WINDOW_NS 100000000ull
/* The most device time an uncontended client's report adds to its GPU in one tick (a client's number is bounded). */
#define SCHED_REPORT_MAX_NS 1000000000ull
#define SCHED_MAX_LAT_NS 1000000000ull     /* an activation stamp older than this is not a measurement */
/* slot.contended stays 1 this long after contention was last seen: an untracked client shows nothing in flight, so
 * it looks idle while it syncs, and two sharing clients must not both look alone between their syncs. */
#define SCHED_CONTENDED_CALM_NS 200000000ull

typedef struct sched_client {
    bool live;
    bool active;          /* rotad's view of channel.active after the idle check */
    rota_channel_t *ch;
    enum rota_prio prio;
    unsigned weight;      /* thousandths, >= 1 */
    unsigned gpu;          /* the GPU key: 1 + its index in the region; 0: a GPU rotad does not know */
    uint64_t vtime;       /* device time * 1000 / weight, ns */
    uint64_t contended_ns; /* last tick that found it contended (slot.contended) */
    uint64_t contended_on_ns;  /* when slot.contended last went to 1: its in-flight count is live after its next launch */
    /* progress of a high client (issue 21): the counters last seen and when they last moved */
    uint64_t seen_launches, seen_busy;
    uint64_t unproved_ns;  /* time it claimed work (active, or its GPU's board marked) since its last completion */
    uint64_t sm_seen_ns;   /* NVML last saw its process on the GPU's SMs then (devmem_proc_sm) */
    uint64_t busy_seen;    /* channel.busy_ns as last seen by the tick */
    bool stalled;          /* active without progress for high_stall_ns: holds nobody until it moves again */
    /* doorbell rate limit: the value last heard, wake-ups in the current one-second window */
    uint32_t bell_seen, bell_count;
    uint64_t bell_window_ns;
    /* the channel's hold statistics as last added to its GPU (high clients) */
    uint64_t hold_events, hold_sum;
    uint32_t hold_hist[ROTA_LAT_BUCKETS];
} sched_client_t;

/* Users whose doorbell wake-ups are counted apart (more share the node-wide budget only). */
#define SCHED_BELL_USERS 64
#define SCHED_KICK_MIN_NS 2000000u
typedef struct sched_bell_user {
    uint32_t uid, count; /* doorbell wake-ups of its normal and low clients in their current windows */
} sched_bell_user_t;

struct sched {
    rota_region_t *r;
    rota_table_t *t;   /* the clients' details: statistics and the idle window rota status shows */
    rota_board_t *b;
    sched_opts_t o;
    pthread_t th;
    pthread_mutex_t mu;
    _Atomic uint32_t ctl; /* private futex word: bumped on add/remove/stop */
    /* A registration needs the thread to watch one more doorbell, not at once: kicks for normal and low clients
     * come at most every SCHED_KICK_MIN_NS (4,000 registrations at once woke it 4,000 times, each a pass over
     * every client: more than a core), and a pending one shortens the thread's wait to that. */
    _Atomic uint64_t kick_ns;
    _Atomic bool kick_pending;
    /* When the thread's current wait ends (CLOCK_MONOTONIC): a kick held back by SCHED_KICK_MIN_NS wakes it all the
     * same when it sleeps longer than that, else a client that left stays counted for up to the idle second. */
    _Atomic uint64_t sleep_until_ns;
    _Atomic bool stop;
    bool waitv_ok;
    uint64_t last_tick;
    uint64_t log_window_ns;  /* sched_log_ok's one-second window and its lines */
    unsigned log_lines;
    uint64_t next_idle;   /* earliest time an active client with nothing in flight turns idle (0: none) */
    uint64_t mark_ns;     /* a tick last found a board mark (high_pending) set */
    bool hi[SCHED_GPU_KEYS];
    uint64_t win_start[SCHED_GPU_KEYS], win_busy[SCHED_GPU_KEYS];
    uint64_t vfloor[SCHED_GPU_KEYS][ROTA_PRIO_COUNT]; /* per share group: the least-served virtual time seen, rising */
    const sched_policy_t *policy;                  /* stage 2 (sched-policy.h) */
    uint64_t pstate[SCHED_GPU_KEYS][ROTA_PRIO_COUNT][SCHED_POLICY_STATE_MAX / 8]; /* its state per share group */
    sched_client_t c[ROTA_MAX_CLIENTS];
    unsigned hwm;         /* no live client at or above this slot: every pass over the clients stops there (4096
                           * slots, a few hundred used: a tick costs what the node runs, not the table's size) */
};

static uint64_t sched_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sched_wake_shared(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* When a high client whose last launch was at last turns idle with nothing in flight (idlewin_due: the rule its
 * own tracker applies too), at now. The window applied is shown in the slot for rota status. A completion time
 * past now is taken as now: what the client writes there can hold the others no longer than launching would. */
static uint64_t sched_high_due(const sched_t *s, const rota_channel_t *ch, rota_slot_t *sl, uint64_t last,
                               uint64_t now)
{
    uint64_t win = s->o.idle_ns;
    /* acquire: the client stores the window, then the time (client-launch.c); this window is that time's */
    uint64_t from = atomic_load_explicit(&ch->idle_from_ns, memory_order_acquire);
    if (from > now) from = now;
    if (!s->o.idle_fixed) {
        uint64_t w = LD(&ch->idle_win_ns);
        if (w < win) win = w;
    }
    if (LD(&sl->idle_win_ns) != win) ST(&sl->idle_win_ns, win);
    return idlewin_due(last, s->o.idle_ns, from, win);
}

/* Hold changes on GPU d are out: wake the lower clients that wait on the board's high_idle word for a priority
 * hold (abi.h, direct release). Adding 2 keeps the word's idle bit and makes a waiter that read it before this
 * store return at once instead of sleeping through the release. */
static void sched_wake_idle_word(sched_t *s, unsigned d)
{
    atomic_fetch_add(&s->b->devices[d].high_idle, 2);
    sched_wake_shared(&s->b->devices[d].high_idle);
}

static void sched_set_hold(sched_t *s, unsigned slot, uint32_t hold)
{
    rota_slot_sched_t *w = &s->r->sched[slot];
    if (LD(&w->hold) == hold) return;
    atomic_store_explicit(&w->hold, hold, memory_order_seq_cst);
    sched_wake_shared(&w->hold);
    stats_hold(s->t, slot, hold, sched_now_ns()); /* time held by reason (rota metrics) */
    if (s->o.log_level >= 2)
        fprintf(stderr, "rotad: debug: slot %u (pid %d) %s%s%s%s\n", slot, (int)LD(&s->t->slots[slot].pid),
                hold ? "held:" : "released", hold & ROTA_HOLD_PRIO ? " priority" : "",
                hold & ROTA_HOLD_SHARE ? " share" : "", hold & ROTA_HOLD_QUANTUM ? " quantum" : "");
}

/* Adds what one high client measured of its board marks (channel.hold_*) to its GPU, validated: only growth
 * counts, a single latency above SCHED_MAX_LAT_NS is not a measurement, and a client's figures never move its
 * GPU's by more than they grew. The client bumps the histogram before hold_events (launch_mark_high), so a read
 * can catch a histogram one activation ahead of the count: such a snapshot is left for the next tick, so that the
 * GPU's histogram always adds up to its hold_events. */
static void sched_client_hold_stats(sched_t *s, sched_client_t *c, unsigned ndev)
{
    rota_channel_t *ch = c->ch;
    uint64_t ev = atomic_load(&ch->hold_events), sum = LD(&ch->hold_lat_sum_ns), mx = LD(&ch->hold_lat_max_ns);
    if (ev <= c->hold_events || sum < c->hold_sum) return;
    uint64_t dev_n = ev - c->hold_events, dsum = sum - c->hold_sum;
    uint32_t h[ROTA_LAT_BUCKETS];
    uint64_t hist_n = 0;
    bool sane = c->gpu != 0 && c->gpu <= ndev && dev_n <= 1000000 && dsum <= dev_n * SCHED_MAX_LAT_NS;
    for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) {
        h[k] = LD(&ch->hold_lat_hist[k]);
        if (h[k] < c->hold_hist[k]) sane = false;
        else hist_n += h[k] - c->hold_hist[k];
    }
    if (sane && hist_n > dev_n) return; /* caught between the histogram and the count: next tick */
    uint32_t was[ROTA_LAT_BUCKETS];
    memcpy(was, c->hold_hist, sizeof was);
    c->hold_events = ev;
    c->hold_sum = sum;
    memcpy(c->hold_hist, h, sizeof h);
    if (!sane || hist_n != dev_n) return; /* not a client's honest figures: skipped, and not retried */
    rota_dev_t *d = &s->r->devices[c->gpu - 1];
    for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++)
        if (h[k] != was[k]) ST(&d->hold_lat_hist[k], LD(&d->hold_lat_hist[k]) + (h[k] - was[k]));
    ST(&d->hold_lat_sum_ns, LD(&d->hold_lat_sum_ns) + dsum);
    if (mx <= SCHED_MAX_LAT_NS && mx > LD(&d->hold_lat_max_ns)) ST(&d->hold_lat_max_ns, mx);
    atomic_fetch_add(&d->hold_events, dev_n);
}

static void sched_add_hold_stats(sched_t *s, unsigned ndev)
{
    for (unsigned i = 0; i < s->hwm; i++)
        if (s->c[i].live && s->c[i].prio == ROTA_PRIO_HIGH) sched_client_hold_stats(s, &s->c[i], ndev);
}

/* The share group of a lower-class client: its class, except that with low_factor > 1 low clients share with
 * normal ones (one virtual time, in which a low client's device time counts low_factor times). */
static enum rota_prio sched_group(const sched_t *s, const sched_client_t *c)
{
    return c->prio == ROTA_PRIO_LOW && s->o.low_factor > 1 ? ROTA_PRIO_NORMAL : c->prio;
}

/* Whether client c belongs to share group k on GPU key p. */
static bool sched_in_group(const sched_t *s, const sched_client_t *c, unsigned p, enum rota_prio k)
{
    return c->live && c->gpu == p && sched_group(s, c) == k;
}

/* Client-caused lines from the scheduler thread: at most 10 a second. */
static bool sched_log_ok(sched_t *s, uint64_t now)
{
    if (now - s->log_window_ns >= 1000000000u) {
        s->log_window_ns = now;
        s->log_lines = 0;
    }
    return s->log_lines++ < 10;
}

/* What one tick learns and decides, stage by stage (sched_tick). */
typedef struct sched_tick_state {
    uint64_t now;
    uint64_t dt;                          /* since the last tick, at most 10 ticks (we slept: nothing was active) */
    unsigned ndev;                        /* GPUs rotad knows */
    uint32_t pending[ROTA_MAX_DEVICES];   /* the board's high_pending words, read before the channels */
    bool hi[SCHED_GPU_KEYS];                 /* an active high client that makes progress is on the GPU */
    unsigned nbusy[SCHED_GPU_KEYS];          /* clients with work in flight */
    bool devbusy[SCHED_GPU_KEYS]; /* the GPU had work: tracked launches in flight, or an untracked client active */
    uint64_t reported[SCHED_GPU_KEYS];       /* device time uncontended clients reported this tick */
    unsigned nhigh[SCHED_GPU_KEYS], nbusylow[SCHED_GPU_KEYS]; /* for slot.contended */
    unsigned nhigh_ok[SCHED_GPU_KEYS];       /* high clients not stalled: dev.high_clients, the board's trust */
    unsigned nnormal[SCHED_GPU_KEYS];        /* for the gates' in-flight bound */
    bool fresh[ROTA_MAX_CLIENTS];         /* active since this tick */
    uint32_t inflight[ROTA_MAX_CLIENTS];
    uint32_t hold[ROTA_MAX_CLIENTS];      /* decided: what is published */
    bool any_active;
    uint64_t next_idle;                   /* earliest time an active client turns idle (0: none) */
} sched_tick_t;

/* Stage 0: the time since the last tick, the GPUs, and the board's marks. The board before the channels: an
 * activation that marked it after this read also set channel.active before marking it, so it is either seen by
 * the refresh or left marked for the next tick (see sched_publish_gpus). */
static void sched_tick_begin(sched_t *s, sched_tick_t *tk)
{
    uint64_t now = tk->now;
    tk->dt = s->last_tick && now > s->last_tick ? now - s->last_tick : 0;
    if (tk->dt > 10 * s->o.tick_ns) tk->dt = 10 * s->o.tick_ns; /* we slept: nothing was active meanwhile */
    s->last_tick = now;
    tk->ndev = atomic_load_explicit(&s->r->ndevices, memory_order_acquire);
    if (tk->ndev > ROTA_MAX_DEVICES) tk->ndev = ROTA_MAX_DEVICES;
    for (unsigned d = 0; d < tk->ndev; d++) {
        tk->pending[d] = atomic_load(&s->b->devices[d].high_pending);
        if (tk->pending[d]) s->mark_ns = now;
    }
    /* Ticks go on for high_stall_ns after a mark: a client that marks the board between ticks (each clears it)
     * and rings nothing must not find rotad asleep, neither its claims unseen nor the gates it holds unanswered. */
    tk->any_active = s->mark_ns && now - s->mark_ns < s->o.high_stall_ns;
}

/* Whether client i is still active (channel.active), after the idle check: an active client with nothing in
 * flight, no thread waiting and no launch for its idle window turns idle here. */
static uint32_t sched_client_activity(sched_t *s, sched_tick_t *tk, unsigned i, uint32_t infl)
{
    sched_client_t *c = &s->c[i];
    rota_channel_t *ch = c->ch;
    uint64_t now = tk->now;
    uint32_t act = atomic_load(&ch->active);
    if (!act) return 0;
    uint64_t last = atomic_load(&ch->last_launch_ns);
    /* A thread waiting in the gate (held, or for a completion) keeps its client active. */
    bool waiting = LD(&ch->held_waiting) || LD(&ch->inflight_waiting);
    /* A lower client is idle once nothing is in flight (idle_low_ns, default at once): whom it holds fills its
     * host gaps. Not an untracked one (slot.contended 0), nor one that has not launched since it was told to track
     * (its first tracked launch counts the untracked backlog): it shows nothing in flight while its work runs,
     * so only its launches tell, over idle_ns, as for a high client. */
    bool counted = c->prio != ROTA_PRIO_HIGH && LD(&s->r->sched[i].contended) && last > c->contended_on_ns;
    uint64_t idle_ns = counted ? s->o.idle_low_ns : s->o.idle_ns;
    uint64_t due = last + idle_ns;
    if (c->prio == ROTA_PRIO_HIGH) due = sched_high_due(s, ch, &s->t->slots[i], last, now);
    if (!infl && !waiting && now > last && now < due && (!tk->next_idle || due < tk->next_idle))
        tk->next_idle = due; /* wake up then, not a tick later: whom it holds waits */
    if (!infl && !waiting && now > last && now >= due && atomic_compare_exchange_strong(&ch->active, &act, 0)) {
        /* Dekker with the launch gate (store last_launch_ns, then load active): a launch we raced with either
         * saw active == 0 (and rang) or shows here. */
        act = 0;
        if (atomic_load(&ch->last_launch_ns) != last || atomic_load(&ch->inflight)) {
            uint32_t z = 0;
            atomic_compare_exchange_strong(&ch->active, &z, 1);
            act = 1;
        }
    }
    return act;
}

/* Progress of high client i: a completion. A high client that claims work (active, work in flight, or its GPU's
 * board marked) but completes nothing for high_stall_ns (stopped, hung, or lying) holds nobody until it does.
 * Launches alone are no progress (issue 32, item 7: a client that only bumped channel.launches every 5 ms held a
 * low client 3.7 s): the launch counter costs a liar nothing. A board mark (high_pending) says "a high client of
 * this GPU activated": one that bumps it without completing anything is judged like an active one, and a GPU whose
 * high clients are all stalled has its marks ignored by the lower clients' gates (dev.high_clients counts only the
 * others, sched_sample). The mark cannot name who wrote it, so every high client of that GPU answers for it; only
 * one that completes work is trusted again. A completion is what the device did where rotad can know it: on a GPU
 * of the node's own driver (probed) whose NVML answers, the process was seen on the SMs (sched_moved); elsewhere
 * the device time the client reports (channel.busy_ns, its own word) grew. */
static bool sched_moved(sched_t *s, sched_client_t *c, unsigned i, bool claims, uint64_t bu)
{
    bool reported = bu > c->seen_busy;
    if (!c->gpu || !(LD(&s->r->devices[c->gpu - 1].flags) & ROTA_DEV_PROBED)) return reported;
    if (!claims) return false; /* nothing to prove: NVML is asked while it claims work */
    char why[192];
    uint64_t seen = 0;
    if (devmem_proc_sm(s->r->devices[c->gpu - 1].uuid, (pid_t)LD(&s->t->slots[i].pid), &seen, why, sizeof why)) {
        if (why[0] && s->o.log_level >= 1)
            fprintf(stderr, "rotad: info: cannot judge high clients' progress by the driver (%s): by the device time "
                            "they report\n", why);
        return reported;
    }
    bool moved = seen > c->sm_seen_ns;
    c->sm_seen_ns = seen;
    return moved;
}

static void sched_high_progress(sched_t *s, sched_tick_t *tk, unsigned i, uint64_t la, uint64_t bu)
{
    sched_client_t *c = &s->c[i];
    uint64_t now = tk->now;
    bool marked = false;
    for (unsigned d = 0; d < tk->ndev && !marked; d++)
        marked = tk->pending[d] && (c->gpu == 0 || c->gpu == d + 1); /* GPU key 0: any GPU may be its own */
    /* The time it claimed work adds up until a completion, over its idle gaps: a liar that pauses between its
     * marks (or that marks between rotad's ticks, as the ticks clear the board) still reaches the bound, and once
     * stalled only a completion counts. Only ticks count: rotad asleep (nothing active, no mark) is no claim. */
    bool claims = c->active || marked;
    if (sched_moved(s, c, i, claims, bu)) c->unproved_ns = 0;
    else if (claims) c->unproved_ns += tk->dt;
    c->seen_launches = la;
    c->seen_busy = bu;
    bool stalled = c->unproved_ns >= s->o.high_stall_ns;
    if (stalled != c->stalled && s->o.log_level >= 1 && sched_log_ok(s, now))
        fprintf(stderr, "rotad: info: high client in slot %u %s\n", i,
                stalled ? "made no progress: lower classes are not held for it" : "makes progress again");
    c->stalled = stalled;
    if (!stalled) tk->nhigh_ok[c->gpu]++;
    if (c->active && !stalled) tk->hi[c->gpu] = true;
}

/* Stage 1, per client: refresh what it published in its channel (GPU, activity, counters), counted per GPU. */
static void sched_refresh_client(sched_t *s, sched_tick_t *tk, unsigned i)
{
    sched_client_t *c = &s->c[i];
    rota_channel_t *ch = c->ch;
    uint32_t dv = LD(&ch->sched_dev);
    c->gpu = dv <= tk->ndev ? dv : 0;
    uint32_t infl = LD(&ch->inflight);
    uint32_t act = sched_client_activity(s, tk, i, infl);
    /* Statistics for rota status/top, validated: counters only grow, in-flight is capped. */
    rota_slot_t *sl = &s->t->slots[i];
    uint64_t la = LD(&ch->launches), bu = LD(&ch->busy_ns);
    if (la > LD(&sl->launches)) ST(&sl->launches, la);
    if (bu > LD(&sl->busy_ns)) ST(&sl->busy_ns, bu);
    /* An uncontended client (alone on its GPU) shows nothing in flight while its work runs, so the sampling
     * misses most of it: what it measured its launches ran (its sampled windows) counts for its GPU. A tracked
     * client's work is sampled; its measure overlaps others' and would count time twice. */
    if (bu > c->busy_seen && !LD(&s->r->sched[i].contended)) {
        uint64_t add = bu - c->busy_seen;
        tk->reported[c->gpu] += add < SCHED_REPORT_MAX_NS ? add : SCHED_REPORT_MAX_NS;
    }
    c->busy_seen = bu;
    ST(&sl->inflight, infl > 65535 ? 65535 : infl);
    tk->fresh[i] = act && !c->active;
    c->active = act != 0;
    tk->inflight[i] = infl;
    tk->any_active |= c->active || infl;
    if (c->prio == ROTA_PRIO_HIGH) sched_high_progress(s, tk, i, la, bu);
    if (infl) tk->nbusy[c->gpu]++;
    /* An uncontended client is not tracked (slot.contended 0): nothing in flight shows, but while it launches
     * (active) its GPU is as good as busy; placement and rota top read this. */
    if (infl || (c->active && !LD(&s->r->sched[i].contended))) tk->devbusy[c->gpu] = true;
    if (c->prio == ROTA_PRIO_HIGH) tk->nhigh[c->gpu]++; /* registered, active or not */
    else if (c->active || infl) tk->nbusylow[c->gpu]++;
    if (c->prio == ROTA_PRIO_NORMAL) tk->nnormal[c->gpu]++; /* registered, active or not */
}

/* Stage 2: device time, sampled: every client with work in flight had dt / n of its GPU; and the classes
 * registered per GPU, for the gates' in-flight bound and the direct release (abi.h), out before the slot words
 * of sched_publish, so that a gate that reads this tick's contended or hold reads these counts too. */
static void sched_sample(sched_t *s, const sched_tick_t *tk)
{
    rota_region_t *r = s->r;
    uint64_t now = tk->now, dt = tk->dt;
    /* Device time, sampled: every client with work in flight had dt / n of its GPU; or, where more, what its
     * uncontended clients reported since the last tick (the scheduler may have slept through their work). */
    for (unsigned p = 0; p < SCHED_GPU_KEYS; p++) {
        uint64_t busy = tk->devbusy[p] ? dt : 0;
        if (tk->reported[p] > busy) busy = tk->reported[p];
        if (busy) {
            s->win_busy[p] += busy;
            if (p >= 1) ST(&r->devices[p - 1].busy_ns, LD(&r->devices[p - 1].busy_ns) + busy);
        }
        if (now - s->win_start[p] >= SCHED_BUSY_WINDOW_NS) {
            uint64_t len = now - s->win_start[p];
            if (p >= 1 && s->win_start[p])
                ST(&r->devices[p - 1].busy_permille,
                   (uint32_t)(s->win_busy[p] >= len ? 1000 : s->win_busy[p] * 1000 / (len ? len : 1)));
            s->win_start[p] = now;
            s->win_busy[p] = 0;
        }
    }
    for (unsigned i = 0; i < s->hwm; i++) {
        sched_client_t *c = &s->c[i];
        if (c->live && tk->inflight[i] && tk->nbusy[c->gpu])
            c->vtime += dt * 1000 * (c->prio == ROTA_PRIO_LOW ? s->o.low_factor : 1) / tk->nbusy[c->gpu] / c->weight;
    }
    for (unsigned p = 1; p < SCHED_GPU_KEYS && p <= tk->ndev; p++) {
        rota_dev_t *d = &r->devices[p - 1];
        /* unknown GPUs' clients: everywhere */
        uint32_t nh = tk->nhigh_ok[p] + tk->nhigh_ok[0], nn = tk->nnormal[p] + tk->nnormal[0];
        if (LD(&d->high_clients) != nh) atomic_store(&d->high_clients, nh);
        if (LD(&d->normal_clients) != nn) atomic_store(&d->normal_clients, nn);
    }
}

/* A client back from idle joins no further back than the least-served client's virtual time (with none, the
 * group's floor: where the least-served client stood when last seen) less a credit of two slacks: idle time is
 * not banked beyond that, and a bursty client (training with host gaps) runs its burst ahead of the ones that
 * filled its gap, as a waking task does in CFS. A client ahead of that keeps its debt: going idle for a moment
 * does not clear it. The floor only moves forward, so time a client had while nobody else wanted the GPU is no
 * debt either. Returns the least virtual time among the active members. */
static uint64_t sched_group_floor(sched_t *s, const sched_tick_t *tk, unsigned p, enum rota_prio k, const unsigned *idx,
                                  unsigned nm, uint64_t vmin_old)
{
    uint64_t vmin = UINT64_MAX, credit = 2 * 8 * s->o.tick_ns; /* two slacks of 8 ticks */
    uint64_t base = vmin_old != UINT64_MAX ? vmin_old : s->vfloor[p][k];
    uint64_t floor = base > credit ? base - credit : 0;
    for (unsigned j = 0; j < nm; j++) {
        sched_client_t *c = &s->c[idx[j]];
        if (!c->active) continue;
        if (tk->fresh[idx[j]] && c->vtime < floor) c->vtime = floor;
        if (c->vtime < vmin) vmin = c->vtime;
    }
    if (vmin > s->vfloor[p][k]) s->vfloor[p][k] = vmin;
    return vmin;
}

/* The launch policy among equals (sched-policy.h) for share group k of GPU key p; the clients the class rule held
 * take no part. */
static void sched_decide_group(sched_t *s, sched_tick_t *tk, unsigned p, enum rota_prio k)
{
    sched_member_t m[ROTA_MAX_CLIENTS];
    unsigned idx[ROTA_MAX_CLIENTS], nm = 0, n = 0;
    uint64_t vmin = UINT64_MAX, vmin_old = UINT64_MAX;
    for (unsigned i = 0; i < s->hwm; i++) {
        sched_client_t *c = &s->c[i];
        if (!sched_in_group(s, c, p, k) || tk->hold[i]) continue;
        idx[nm++] = i;
        if (!c->active) continue;
        n++;
        if (!tk->fresh[i] && c->vtime < vmin_old) vmin_old = c->vtime;
    }
    if (n) vmin = sched_group_floor(s, tk, p, k, idx, nm, vmin_old);
    for (unsigned j = 0; j < nm; j++) {
        const sched_client_t *c = &s->c[idx[j]];
        m[j] = (sched_member_t){.slot = idx[j], .active = c->active, .vtime = c->vtime,
                                .hold_was = LD(&s->r->sched[idx[j]].hold)};
    }
    sched_group_t g = {.o = &s->o, .gpu = p, .cls = k, .now = tk->now, .n = n, .vmin = vmin, .nm = nm, .m = m};
    uint32_t ph[ROTA_MAX_CLIENTS];
    memset(ph, 0, nm * sizeof ph[0]);
    s->policy->decide(&g, s->pstate[p][k], ph);
    for (unsigned j = 0; j < nm; j++) tk->hold[idx[j]] = ph[j] & (ROTA_HOLD_SHARE | ROTA_HOLD_QUANTUM);
}

/* Stage 3, per GPU (GPU key p): the class rule (sched-prio.c), then the launch policy per share group (sched_group:
 * with low_factor > 1 the low group is empty). */
static void sched_decide_gpu(sched_t *s, sched_tick_t *tk, unsigned p)
{
    for (unsigned i = 0; i < s->hwm; i++) {
        sched_client_t *c = &s->c[i];
        if (c->live && c->gpu == p) tk->hold[i] = sched_prio_hold(c->prio, tk->hi[p], LD(&s->r->sched[i].hold));
    }
    for (enum rota_prio k = ROTA_PRIO_NORMAL; k < ROTA_PRIO_COUNT; k++) sched_decide_group(s, tk, p, k);
}

/* Publishes client i's words: slot.contended, then its hold (futex-woken), then its state for rota status. Counts
 * the held clients per GPU and whether a hold changed there. */
static void sched_publish_client(sched_t *s, const sched_tick_t *tk, unsigned i, unsigned nlive, unsigned *held,
                                 bool *changed)
{
    sched_client_t *c = &s->c[i];
    uint64_t now = tk->now;
    uint32_t hold = tk->hold[i];
    rota_slot_t *sl = &s->t->slots[i];
    rota_slot_sched_t *w = &s->r->sched[i];
    /* Uncontended (abi.h, slot.contended): alone on a known GPU; clients of unknown GPUs contend everywhere. The only
     * client rotad has is uncontended whatever its GPU, at once: tracked, its launches would wait in the gate's
     * in-flight bound on the host, one after another, and its kernels on high-priority streams would lose the
     * order the device gives them over those on its low-priority ones (issue 22). */
    unsigned p = c->gpu, self = c->prio != ROTA_PRIO_HIGH && (c->active || tk->inflight[i]);
    unsigned others = tk->nhigh[p] + tk->nbusylow[p] + (p ? tk->nhigh[0] + tk->nbusylow[0] : 0) - self;
    if (nlive == 1 && !hold && c->prio != ROTA_PRIO_HIGH) c->contended_ns = 0;
    else if (p == 0 || others || hold || c->prio == ROTA_PRIO_HIGH) c->contended_ns = now;
    uint32_t contended = now - c->contended_ns < SCHED_CONTENDED_CALM_NS;
    if (contended && !LD(&w->contended)) c->contended_on_ns = now;
    if (LD(&w->contended) != contended) atomic_store(&w->contended, contended); /* before the hold: a held client tracks */
    if (LD(&w->hold) != hold) changed[p] = true;
    sched_set_hold(s, i, hold);
    if (hold) held[p]++;
    uint32_t st = LD(&sl->waiting) ? ROTA_SCHED_MEMWAIT
                  : hold           ? ROTA_SCHED_HELD
                  : c->active      ? ROTA_SCHED_RUNNING
                                   : ROTA_SCHED_IDLE;
    ST(&sl->sched_state, st);
}

/* Publishes each known GPU's words (held, high_active), wakes the direct-release waiters where a hold changed,
 * and clears the board marks this tick read. */
static void sched_publish_gpus(sched_t *s, const sched_tick_t *tk, const unsigned *held, const bool *changed)
{
    for (unsigned p = 1; p < SCHED_GPU_KEYS && p <= tk->ndev; p++) {
        rota_dev_t *d = &s->r->devices[p - 1];
        ST(&d->held, held[p]);
        if (changed[p]) sched_wake_idle_word(s, p - 1);
        ST(&d->high_active, tk->hi[p] ? 1u : 0u);
        /* The slot holds are out: the board's mark has done its job. A new mark since our read stays, unless no
         * high client of this GPU is trusted (all stalled, or none: a mark written by a client for a GPU it does
         * not run on): the gates ignore such a mark (dev.high_clients 0), and those waiting on it are woken. */
        uint32_t seen = tk->pending[p - 1];
        _Atomic uint32_t *mark = &s->b->devices[p - 1].high_pending;
        bool cleared = tk->nhigh_ok[p] + tk->nhigh_ok[0] ? seen && atomic_compare_exchange_strong(mark, &seen, 0)
                                                          : atomic_exchange(mark, 0) != 0;
        if (cleared) sched_wake_shared(mark);
    }
}

/* Latency of priority holds: from the high client's activating launch to the holds being published (done). */
static void sched_confirm_latency(sched_t *s, const sched_tick_t *tk, uint64_t done)
{
    for (unsigned i = 0; i < s->hwm; i++) {
        sched_client_t *c = &s->c[i];
        if (!c->live || !tk->fresh[i] || c->prio != ROTA_PRIO_HIGH || s->hi[c->gpu] || c->gpu == 0) continue;
        uint64_t t0 = LD(&c->ch->active_since_ns);
        if (t0 > done || done - t0 > SCHED_MAX_LAT_NS) continue;
        uint64_t lat = done - t0;
        rota_dev_t *d = &s->r->devices[c->gpu - 1];
        ST(&d->confirm_lat_sum_ns, LD(&d->confirm_lat_sum_ns) + lat);
        if (lat > LD(&d->confirm_lat_max_ns)) ST(&d->confirm_lat_max_ns, lat);
        atomic_fetch_add(&d->confirm_events, 1);
        s->hi[c->gpu] = true; /* one measurement per activation of the GPU */
    }
    memcpy(s->hi, tk->hi, sizeof s->hi);
}

/* Stage 4: everything decided goes out: the clients' words, the GPUs' words and the board, the high clients'
 * hold statistics, the latency of the holds. */
static void sched_publish(sched_t *s, const sched_tick_t *tk)
{
    unsigned held[SCHED_GPU_KEYS] = {0}, nlive = 0;
    bool changed[SCHED_GPU_KEYS] = {0};
    for (unsigned i = 0; i < s->hwm; i++) nlive += s->c[i].live;
    for (unsigned i = 0; i < s->hwm; i++)
        if (s->c[i].live) sched_publish_client(s, tk, i, nlive, held, changed);
    uint64_t done = sched_now_ns();
    sched_publish_gpus(s, tk, held, changed);
    sched_add_hold_stats(s, tk->ndev);
    sched_confirm_latency(s, tk, done);
}

/* One decision, in stages: refresh what the clients published, sample device time, decide per GPU (the class
 * rule, then the launch policy), publish. With s->mu held. Returns whether anything was active. */
static bool sched_tick(sched_t *s, uint64_t now)
{
    sched_tick_t tk = {.now = now};
    sched_tick_begin(s, &tk);
    for (unsigned i = 0; i < s->hwm; i++)
        if (s->c[i].live) sched_refresh_client(s, &tk, i);
    sched_sample(s, &tk);
    for (unsigned p = 0; p < SCHED_GPU_KEYS; p++) sched_decide_gpu(s, &tk, p);
    sched_publish(s, &tk);
    s->next_idle = tk.next_idle;
    return tk.any_active;
}

static void *sched_main(void *arg)
{
    sched_t *s = arg;
    struct futex_waitv wv[SCHED_WAITV_MAX + 1];
    slice_request(SLICE_SHORT_NS); /* its decisions release held clients (slice.h) */
    while (!atomic_load(&s->stop)) {
        pthread_mutex_lock(&s->mu);
        unsigned n = 0;
        wv[n++] = (struct futex_waitv){.val = atomic_load(&s->ctl), .uaddr = (uintptr_t)&s->ctl,
                                       .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};
        /* High clients' doorbells first: they are what must be heard at once. A client whose doorbell woke us
         * more than doorbell_max_hz times this second is not listened to until the next: it is heard at the
         * tick, and ringing in a loop costs rotad no more than that. The same budget holds for all the normal and
         * low clients of one user together, and four times it for those of the whole node (issue 32, item 8:
         * 60 clients of one user ringing cost a quarter of a core); high clients are only held to their own. */
        uint64_t t0 = sched_now_ns();
        sched_bell_user_t users[SCHED_BELL_USERS];
        unsigned nusers = 0;
        uint64_t node = 0;
        for (unsigned i = 0; i < s->hwm; i++) {
            sched_client_t *c = &s->c[i];
            if (!c->live) continue;
            uint32_t bell = atomic_load(&c->ch->doorbell);
            if (t0 - c->bell_window_ns >= 1000000000u) {
                c->bell_window_ns = t0;
                c->bell_count = 0;
            }
            if (bell != c->bell_seen && c->bell_count < UINT32_MAX) c->bell_count++;
            c->bell_seen = bell;
            if (c->prio == ROTA_PRIO_HIGH || !c->bell_count) continue;
            node += c->bell_count;
            uint32_t uid = LD(&s->t->slots[i].uid);
            unsigned k = 0;
            while (k < nusers && users[k].uid != uid) k++;
            if (k == nusers && nusers < SCHED_BELL_USERS) users[nusers++] = (sched_bell_user_t){uid, 0};
            if (k < nusers) users[k].count += c->bell_count;
        }
        bool node_over = node > 4ull * s->o.doorbell_max_hz;
        for (int pass = 0; pass < 2; pass++)
            for (unsigned i = 0; i < s->hwm && n <= SCHED_WAITV_MAX; i++) {
                sched_client_t *c = &s->c[i];
                if (!c->live || (pass == 0) != (c->prio == ROTA_PRIO_HIGH)) continue;
                if (c->bell_count > s->o.doorbell_max_hz) continue;
                if (pass == 1) {
                    if (node_over) break;
                    uint32_t uid = LD(&s->t->slots[i].uid);
                    unsigned k = 0;
                    while (k < nusers && users[k].uid != uid) k++;
                    if (k < nusers && users[k].count > s->o.doorbell_max_hz) continue;
                }
                wv[n++] = (struct futex_waitv){.val = atomic_load(&c->ch->doorbell), .uaddr = (uintptr_t)&c->ch->doorbell,
                                               .flags = FUTEX_32};
            }
        uint64_t now = sched_now_ns();
        bool active = sched_tick(s, now);
        uint64_t next_idle = s->next_idle;
        pthread_mutex_unlock(&s->mu);
        if (atomic_load(&s->stop)) break;
        uint64_t wait = active ? s->o.tick_ns : 1000000000ull;
        /* Dekker with sched_kick_soon (store kick_pending, then load sleep_until_ns): a held-back kick either
         * shows here or sees this long wait and wakes us. */
        atomic_store(&s->sleep_until_ns, sched_now_ns() + wait);
        if (atomic_exchange(&s->kick_pending, false) && wait > SCHED_KICK_MIN_NS) wait = SCHED_KICK_MIN_NS;
        uint64_t after = sched_now_ns();
        if (next_idle && next_idle > after && next_idle - after < wait) wait = next_idle - after + 1000;
        if (!s->waitv_ok && n > 1 && wait > 200000) wait = 200000; /* no futex_waitv: poll the doorbells */
        atomic_store(&s->sleep_until_ns, after + wait);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t dl = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + wait;
        ts.tv_sec = (time_t)(dl / 1000000000u);
        ts.tv_nsec = (long)(dl % 1000000000u);
        if (s->waitv_ok) {
            long rc = syscall(SYS_futex_waitv, wv, n, 0, &ts, CLOCK_MONOTONIC);
            if (rc < 0 && errno == ENOSYS) s->waitv_ok = false;
        } else {
            syscall(SYS_futex, &s->ctl, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, (uint32_t)wv[0].val, &ts, NULL,
                    FUTEX_BITSET_MATCH_ANY);
        }
    }
    return NULL;
}

static void sched_kick(sched_t *s)
{
    atomic_store(&s->kick_ns, sched_now_ns());
    atomic_fetch_add(&s->ctl, 1);
    syscall(SYS_futex, &s->ctl, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

/* A kick unless one came within SCHED_KICK_MIN_NS and the thread sleeps no longer than that (then its next wait is
 * at most that long). */
static void sched_kick_soon(sched_t *s, bool urgent)
{
    uint64_t now = sched_now_ns();
    if (urgent || now - atomic_load(&s->kick_ns) >= SCHED_KICK_MIN_NS) {
        sched_kick(s);
        return;
    }
    atomic_store(&s->kick_pending, true);
    /* Held back, the thread sees it when it next chooses how long to wait; if it already waits longer than
     * SCHED_KICK_MIN_NS, wake it now. */
    if (atomic_load(&s->sleep_until_ns) > now + SCHED_KICK_MIN_NS) sched_kick(s);
}

int sched_start(rota_region_t *r, rota_table_t *t, rota_board_t *b, const sched_opts_t *o, sched_t **out)
{
    sched_t *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->r = r;
    s->t = t;
    s->b = b;
    s->o = *o;
    if (!s->o.idle_ns) s->o.idle_ns = SCHED_IDLE_NS_DEFAULT;
    if (!s->o.tick_ns) s->o.tick_ns = SCHED_TICK_NS_DEFAULT;
    if (!s->o.high_stall_ns) s->o.high_stall_ns = SCHED_HIGH_STALL_NS_DEFAULT;
    if (!s->o.doorbell_max_hz) s->o.doorbell_max_hz = SCHED_DOORBELL_HZ_DEFAULT;
    if (!s->o.low_factor) s->o.low_factor = SCHED_LOW_FACTOR_DEFAULT;
    /* A high client applies the same idle rule when it releases its GPU's lower classes itself (abi.h). */
    atomic_store(&r->high_idle_ns, s->o.idle_ns);
    atomic_store(&r->high_idle_learn, s->o.idle_fixed ? 0u : 1u);
    s->waitv_ok = true;
    char perr[128];
    if (sched_policy_resolve(&s->o, perr, sizeof perr)) { /* rotad-main.c refused these options already */
        free(s);
        return -EINVAL;
    }
    s->policy = s->o.policy;
    pthread_mutex_init(&s->mu, NULL);
    int rc = pthread_create(&s->th, NULL, sched_main, s);
    if (rc) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return -rc;
    }
    *out = s;
    return 0;
}

void sched_stop(sched_t *s)
{
    if (!s) return;
    atomic_store(&s->stop, true);
    sched_kick(s);
    pthread_join(s->th, NULL);
    for (unsigned i = 0; i < s->hwm; i++)
        if (s->c[i].live) sched_set_hold(s, i, 0);
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) {
        if (atomic_exchange(&s->b->devices[d].high_pending, 0)) sched_wake_shared(&s->b->devices[d].high_pending);
        sched_wake_idle_word(s, d);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void sched_client_add(sched_t *s, unsigned slot, rota_channel_t *ch, enum rota_prio prio, unsigned weight)
{
    if (!s || slot >= ROTA_MAX_CLIENTS || !ch) return;
    pthread_mutex_lock(&s->mu);
    s->c[slot] = (sched_client_t){.live = true, .ch = ch,
                                  .prio = (unsigned)prio < ROTA_PRIO_COUNT ? prio : ROTA_PRIO_NORMAL,
                                  .weight = weight ? weight : 1000, .contended_on_ns = sched_now_ns(),
                                  .busy_seen = LD(&ch->busy_ns)};
    if (slot >= s->hwm) s->hwm = slot + 1;
    ST(&s->r->sched[slot].hold, 0);
    atomic_store(&s->r->sched[slot].contended, 1); /* until the next tick knows better */
    ST(&s->t->slots[slot].sched_state, ROTA_SCHED_IDLE);
    ST(&s->t->slots[slot].idle_win_ns, UINT64_MAX); /* not known until its first idle check (abi.h) */
    pthread_mutex_unlock(&s->mu);
    sched_kick_soon(s, prio == ROTA_PRIO_HIGH);
}

void sched_client_remove(sched_t *s, unsigned slot)
{
    if (!s || slot >= ROTA_MAX_CLIENTS) return;
    pthread_mutex_lock(&s->mu);
    bool urgent = false;
    if (s->c[slot].live) {
        /* Only a client that may hold someone (high, or active) needs a tick now; others leave at the next. */
        urgent = s->c[slot].prio == ROTA_PRIO_HIGH || s->c[slot].active;
        unsigned ndev = LD(&s->r->ndevices);
        if (ndev > ROTA_MAX_DEVICES) ndev = ROTA_MAX_DEVICES;
        if (s->c[slot].prio == ROTA_PRIO_HIGH) sched_client_hold_stats(s, &s->c[slot], ndev); /* its last ones */
        s->c[slot].live = false;
        s->c[slot].ch = NULL;
        sched_set_hold(s, slot, 0);
        while (s->hwm && !s->c[s->hwm - 1].live) s->hwm--;
        if (urgent) sched_tick(s, sched_now_ns()); /* whom it held goes free now, not at the next tick */
    }
    pthread_mutex_unlock(&s->mu);
    sched_kick_soon(s, urgent);
}
