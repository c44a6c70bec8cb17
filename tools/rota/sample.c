/* sample.c - samples of rotad's region counters and the rates between two of them (rota top, rota status). */
#include "tools/rota/sample.h"

#include <errno.h>
#include <time.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

uint64_t rota_sample_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rota_sample_take(const rota_region_t *r, rota_sample_t *s)
{
    s->t_ns = rota_sample_now_ns();
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *sl = &r->slots[i];
        bool live = atomic_load_explicit(&sl->state, memory_order_acquire) == ROTA_SLOT_LIVE;
        s->gen[i] = live ? LD(&sl->gen) : 0;
        s->launches[i] = live ? LD(&sl->launches) : 0;
        s->busy_ns[i] = live ? LD(&sl->busy_ns) : 0;
    }
    /* A GPU's device time: rotad's own sum when it keeps one, else the sum over its live clients (each counted
     * on its first GPU: a multi-GPU client's time is not split). */
    uint64_t sum[ROTA_MAX_DEVICES] = {0};
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        int d = s->gen[i] ? LD(&r->slots[i].device) : -1;
        if (d >= 0 && d < ROTA_MAX_DEVICES) sum[d] += s->busy_ns[i];
    }
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) {
        uint64_t own = LD(&r->devices[d].busy_ns);
        s->dev_busy_ns[d] = own ? own : sum[d];
    }
}

void rota_sample_pair(const rota_region_t *r, rota_sample_t s[2], double seconds)
{
    rota_sample_take(r, &s[0]);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    rota_sample_take(r, &s[1]);
}

bool rota_sample_rates(const rota_sample_t *a, const rota_sample_t *b, unsigned i, double *launches_per_s,
                       double *busy_frac)
{
    if (!a || !b || i >= ROTA_MAX_CLIENTS || !a->gen[i] || a->gen[i] != b->gen[i] || b->t_ns <= a->t_ns)
        return false;
    double dt = (double)(b->t_ns - a->t_ns) / 1e9;
    uint64_t dl = b->launches[i] >= a->launches[i] ? b->launches[i] - a->launches[i] : 0;
    uint64_t db = b->busy_ns[i] >= a->busy_ns[i] ? b->busy_ns[i] - a->busy_ns[i] : 0;
    *launches_per_s = (double)dl / dt;
    *busy_frac = (double)db / 1e9 / dt;
    return true;
}

bool rota_sample_dev_busy(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac)
{
    if (!a || !b || d >= ROTA_MAX_DEVICES || b->t_ns <= a->t_ns) return false;
    uint64_t db = b->dev_busy_ns[d] >= a->dev_busy_ns[d] ? b->dev_busy_ns[d] - a->dev_busy_ns[d] : 0;
    *busy_frac = (double)db / (double)(b->t_ns - a->t_ns);
    return true;
}
