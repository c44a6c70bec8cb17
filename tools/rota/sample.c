/* sample.c - samples of rotad's region and client table counters and the rates between two of them (rota top, rota status). */
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

void rota_sample_take(const rota_region_t *r, const rota_table_t *t, rota_sample_t *s)
{
    s->t_ns = rota_sample_now_ns();
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *sl = &t->slots[i];
        bool live = atomic_load_explicit(&sl->state, memory_order_acquire) == ROTA_SLOT_LIVE;
        s->gen[i] = live ? LD(&sl->gen) : 0;
        s->launches[i] = live ? LD(&sl->launches) : 0;
        s->busy_ns[i] = live ? LD(&sl->busy_ns) : 0;
        int d = live ? LD(&sl->device) : -1;
        s->dev[i] = d >= 0 && d < ROTA_MAX_DEVICES ? d : -1;
    }
    /* A GPU's device time: rotad's own sum when it keeps one, else the sum over its live clients (each counted
     * on its first GPU: a multi-GPU client's time is not split). */
    uint64_t sum[ROTA_MAX_DEVICES] = {0};
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        int d = s->dev[i];
        if (d >= 0) sum[d] += s->busy_ns[i];
    }
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) {
        uint64_t own = LD(&r->devices[d].busy_ns);
        s->dev_busy_ns[d] = own ? own : sum[d];
        s->dev_own[d] = own != 0;
    }
}

int rota_sample_pair(conn_t *c, rota_sample_t s[2], double seconds, const rota_table_t **last)
{
    const rota_region_t *r = conn_region(c);
    const rota_table_t *t;
    int rc = conn_table(c, &t);
    if (rc) return rc;
    rota_sample_take(r, t, &s[0]);
    conn_table_free(t);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    rc = conn_table(c, &t);
    if (rc) return rc;
    rota_sample_take(r, t, &s[1]);
    *last = t;
    return 0;
}

static bool sample_same(const rota_sample_t *a, const rota_sample_t *b, unsigned i)
{
    return a->gen[i] && a->gen[i] == b->gen[i];
}

static uint64_t sample_client_busy(const rota_sample_t *a, const rota_sample_t *b, unsigned i)
{
    return b->busy_ns[i] >= a->busy_ns[i] ? b->busy_ns[i] - a->busy_ns[i] : 0;
}

/* The factor (<= 1) that brings the clients of GPU d within the GPU's own busy time in the window. */
static double sample_dev_scale(const rota_sample_t *a, const rota_sample_t *b, int d)
{
    if (d < 0 || !b->dev_own[d]) return 1.0; /* the GPU's time is the clients' sum: nothing to bring within */
    uint64_t sum = 0;
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++)
        if (b->dev[i] == d && sample_same(a, b, i)) sum += sample_client_busy(a, b, i);
    uint64_t gpu = b->dev_busy_ns[d] >= a->dev_busy_ns[d] ? b->dev_busy_ns[d] - a->dev_busy_ns[d] : 0;
    return sum > gpu ? (double)gpu / (double)sum : 1.0;
}

bool rota_sample_rates(const rota_sample_t *a, const rota_sample_t *b, unsigned i, double *launches_per_s,
                       double *busy_frac)
{
    if (!a || !b || i >= ROTA_MAX_CLIENTS || !sample_same(a, b, i) || b->t_ns <= a->t_ns) return false;
    double dt = (double)(b->t_ns - a->t_ns) / 1e9;
    uint64_t dl = b->launches[i] >= a->launches[i] ? b->launches[i] - a->launches[i] : 0;
    *launches_per_s = (double)dl / dt;
    *busy_frac = (double)sample_client_busy(a, b, i) * sample_dev_scale(a, b, b->dev[i]) / 1e9 / dt;
    return true;
}

bool rota_sample_dev_clients(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac)
{
    if (!a || !b || d >= ROTA_MAX_DEVICES || b->t_ns <= a->t_ns) return false;
    uint64_t sum = 0;
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++)
        if (b->dev[i] == (int)d && sample_same(a, b, i)) sum += sample_client_busy(a, b, i);
    *busy_frac = (double)sum * sample_dev_scale(a, b, (int)d) / (double)(b->t_ns - a->t_ns);
    return true;
}

bool rota_sample_dev_busy(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac)
{
    if (!a || !b || d >= ROTA_MAX_DEVICES || b->t_ns <= a->t_ns) return false;
    uint64_t db = b->dev_busy_ns[d] >= a->dev_busy_ns[d] ? b->dev_busy_ns[d] - a->dev_busy_ns[d] : 0;
    *busy_frac = (double)db / (double)(b->t_ns - a->t_ns);
    return true;
}
