/* prom.c - renders rotad's region as Prometheus text: one function, so rota metrics and rotad serve the same. */
#include "runtime/lib/prom.h"

#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define LDA(p) atomic_load_explicit((p), memory_order_acquire)

void prom_slot_hold_read(const rota_slot_stats_t *st, uint64_t held_ns[3], uint64_t *since_ns, uint32_t *bits)
{
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t q = atomic_load_explicit(&st->hold_seq, memory_order_acquire);
        if (q & 1) continue;
        /* acquire loads: the check of hold_seq below stays after them (no fence: see stats.c) */
        for (unsigned k = 0; k < 3; k++) held_ns[k] = LDA(&st->held_ns[k]);
        *since_ns = LDA(&st->hold_since_ns);
        *bits = LDA(&st->hold_bits);
        if (LD(&st->hold_seq) == q) return;
    }
    /* rotad stopped inside an update (it cannot: the writer does not block); report what the ended holds give. */
    for (unsigned k = 0; k < 3; k++) held_ns[k] = LD(&st->held_ns[k]);
    *since_ns = 0;
    *bits = 0;
}

void prom_slot_held_ns(const rota_slot_stats_t *st, uint64_t now_ns, uint64_t held_ns[3])
{
    uint64_t since;
    uint32_t bits;
    prom_slot_hold_read(st, held_ns, &since, &bits);
    for (unsigned k = 0; k < 3; k++)
        if ((bits & (1u << k)) && now_ns > since) held_ns[k] += now_ns - since;
}

/* A label value: backslash, double quote and newline escaped (format 0.0.4). */
static void prom_label(FILE *f, const char *name, const char *v, bool comma)
{
    fprintf(f, "%s%s=\"", comma ? "," : "", name);
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') fprintf(f, "\\%c", *v);
        else if (*v == '\n') fputs("\\n", f);
        else fputc(*v, f);
    }
    fputc('"', f);
}

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static double prom_s(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* ---- per GPU ------------------------------------------------------------------------------------------------ */

typedef struct prom_gpu {
    char uuid[PROTO_UUID_STR];
    char index[12];
} prom_gpu_t;

static void prom_gpu_labels(FILE *f, const prom_gpu_t *g)
{
    prom_label(f, "gpu", g->uuid, false);
    prom_label(f, "gpu_index", g->index, true);
}

/* One family of per-GPU samples of TYPE (gauge or counter); expr may use d (the GPU) and ds (its stats). */
#define PROM_GPU_FAMILY(type, name, help, fmt, expr)                                                           \
    do {                                                                                                       \
        prom_head(f, name, type, help);                                                                        \
        for (unsigned i = 0; i < nd; i++) {                                                                    \
            const rota_dev_t *d = &r->devices[i];                                                              \
            const rota_dev_stats_t *ds = &r->stats.devices[i];                                                 \
            (void)d;                                                                                           \
            (void)ds;                                                                                          \
            fputs(name "{", f);                                                                                \
            prom_gpu_labels(f, &g[i]);                                                                         \
            fprintf(f, "} " fmt "\n", expr);                                                                   \
        }                                                                                                      \
    } while (0)
#define PROM_GPU_GAUGE(name, help, fmt, expr) PROM_GPU_FAMILY("gauge", name, help, fmt, expr)
#define PROM_GPU_COUNTER(name, help, fmt, expr) PROM_GPU_FAMILY("counter", name, help, fmt, expr)

static void prom_gpus(FILE *f, const rota_region_t *r, unsigned nd, const prom_gpu_t *g)
{
    PROM_GPU_GAUGE("rota_gpu_memory_capacity_bytes", "GPU memory as its first client's driver reported it.",
                   "%" PRIu64, LD(&d->capacity));
    PROM_GPU_GAUGE("rota_gpu_memory_reserved_bytes", "GPU memory reserved by rota's clients (fast-path credit included).",
                   "%" PRIu64, LD(&d->reserved));
    PROM_GPU_GAUGE("rota_gpu_memory_waiters", "Memory requests queued on this GPU (queue instead of OOM).", "%u",
                   LD(&d->waiters));
    PROM_GPU_GAUGE("rota_gpu_clients", "Live clients that reserved memory on this GPU.", "%u", LD(&d->clients));
    PROM_GPU_GAUGE("rota_gpu_held_clients", "Clients rotad holds on this GPU now.", "%u", LD(&d->held));
    PROM_GPU_GAUGE("rota_gpu_busy_ratio", "Fraction of the last scheduling window (>= 100 ms) the GPU had work in flight.",
                   "%.3f", LD(&d->busy_permille) / 1000.0);
    PROM_GPU_COUNTER("rota_gpu_busy_seconds_total", "Time this GPU had tracked work in flight.", "%.9f",
                     prom_s(LD(&d->busy_ns)));
    PROM_GPU_COUNTER("rota_gpu_holds_total", "Activating launches of high-priority clients (lower classes held).",
                     "%" PRIu64, LD(&d->hold_events));
    PROM_GPU_COUNTER("rota_gpu_memory_wait_seconds_total", "Time answered memory requests on this GPU spent queued.",
                     "%.9f", prom_s(LD(&ds->mem_wait_ns)));

    /* queue-instead-of-OOM outcomes */
    prom_head(f, "rota_gpu_memory_waits_total", "counter",
              "Queued memory requests by outcome: granted after a wait, or timed out (the allocation failed).");
    for (unsigned i = 0; i < nd; i++) {
        const rota_dev_stats_t *ds = &r->stats.devices[i];
        fputs("rota_gpu_memory_waits_total{", f);
        prom_gpu_labels(f, &g[i]);
        fprintf(f, ",outcome=\"granted\"} %" PRIu64 "\n", LD(&ds->mem_waits_granted));
        fputs("rota_gpu_memory_waits_total{", f);
        prom_gpu_labels(f, &g[i]);
        fprintf(f, ",outcome=\"timed_out\"} %" PRIu64 "\n", LD(&ds->mem_waits_timed_out));
    }

    /* hold latency: the high launch to lower classes held, as the high clients measured it */
    static const char *const le[ROTA_LAT_BUCKETS] = {"1e-06", "2e-06", "5e-06", "1e-05", "2e-05", "5e-05", "0.0002",
                                                     "+Inf"};
    prom_head(f, "rota_gpu_hold_latency_seconds", "histogram",
              "Time from a high-priority client's activating launch to the lower classes being held.");
    for (unsigned i = 0; i < nd; i++) {
        const rota_dev_t *d = &r->devices[i];
        uint64_t cum = 0;
        for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) {
            cum += LD(&d->hold_lat_hist[k]);
            fputs("rota_gpu_hold_latency_seconds_bucket{", f);
            prom_gpu_labels(f, &g[i]);
            fprintf(f, ",le=\"%s\"} %" PRIu64 "\n", le[k], cum);
        }
        /* _count is the +Inf bucket: the histogram and hold_events are bumped one after the other */
        fputs("rota_gpu_hold_latency_seconds_sum{", f);
        prom_gpu_labels(f, &g[i]);
        fprintf(f, "} %.9f\n", prom_s(LD(&d->hold_lat_sum_ns)));
        fputs("rota_gpu_hold_latency_seconds_count{", f);
        prom_gpu_labels(f, &g[i]);
        fprintf(f, "} %" PRIu64 "\n", cum);
    }
}

/* ---- per client --------------------------------------------------------------------------------------------- */

typedef struct prom_client {
    unsigned slot;
    char pid[16];
    char job[ROTA_COMM_LEN];
    const char *cls;
    int dev; /* index in g[], or -1 */
} prom_client_t;

static void prom_client_labels(FILE *f, const prom_client_t *c, const prom_gpu_t *g)
{
    prom_label(f, "pid", c->pid, false);
    prom_label(f, "rota_job", c->job, true); /* "job" is the scrape target's label */
    prom_label(f, "class", c->cls, true);
    prom_label(f, "gpu", c->dev >= 0 ? g[c->dev].uuid : "", true);
    prom_label(f, "gpu_index", c->dev >= 0 ? g[c->dev].index : "", true);
}

#define PROM_CLIENTS(name, type, help, fmt, expr)                                                              \
    do {                                                                                                       \
        prom_head(f, name, type, help);                                                                        \
        for (unsigned j = 0; j < nc; j++) {                                                                    \
            const rota_slot_t *s = &t->slots[c[j].slot];                                                       \
            const rota_slot_stats_t *ss = &t->stats[c[j].slot];                                                \
            (void)s;                                                                                           \
            (void)ss;                                                                                          \
            fputs(name "{", f);                                                                                \
            prom_client_labels(f, &c[j], g);                                                                   \
            fprintf(f, "} " fmt "\n", expr);                                                                   \
        }                                                                                                      \
    } while (0)

static uint64_t prom_used(const rota_slot_t *s)
{
    uint64_t t = 0;
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) t += LD(&s->used[d]);
    return t;
}

static void prom_clients(FILE *f, const rota_table_t *t, const prom_client_t *c, unsigned nc, const prom_gpu_t *g,
                         uint64_t now_ns)
{
    PROM_CLIENTS("rota_client_memory_used_bytes", "gauge",
                 "GPU memory the client holds over every GPU (its unused fast-path credit included).", "%" PRIu64,
                 prom_used(s));
    prom_head(f, "rota_client_memory_limit_bytes", "gauge",
              "The client's own memory limit per GPU (rota run --mem); absent when it has none.");
    for (unsigned j = 0; j < nc; j++) {
        uint64_t lim = LD(&t->slots[c[j].slot].limit);
        if (!lim) continue;
        fputs("rota_client_memory_limit_bytes{", f);
        prom_client_labels(f, &c[j], g);
        fprintf(f, "} %" PRIu64 "\n", lim);
    }
    PROM_CLIENTS("rota_client_memory_waiting_bytes", "gauge", "Bytes of the client's memory requests queued now.",
                 "%" PRIu64, LD(&s->waiting));
    PROM_CLIENTS("rota_client_inflight_launches", "gauge", "The client's launches in flight.", "%u",
                 LD(&s->inflight));
    PROM_CLIENTS("rota_client_device_seconds_total", "counter",
                 "Device time of the client's completed launches, as the client measured it.", "%.9f",
                 prom_s(LD(&s->busy_ns)));
    PROM_CLIENTS("rota_client_launches_total", "counter", "Kernel launches of the client.", "%" PRIu64,
                 LD(&s->launches));
    PROM_CLIENTS("rota_client_memory_wait_seconds_total", "counter",
                 "Time the client's answered memory requests spent queued.", "%.9f", prom_s(LD(&ss->mem_wait_ns)));
    prom_head(f, "rota_client_memory_waits_total", "counter", "The client's queued memory requests by outcome.");
    for (unsigned j = 0; j < nc; j++) {
        const rota_slot_stats_t *ss = &t->stats[c[j].slot];
        fputs("rota_client_memory_waits_total{", f);
        prom_client_labels(f, &c[j], g);
        fprintf(f, ",outcome=\"granted\"} %" PRIu64 "\n", LD(&ss->mem_waits_granted));
        fputs("rota_client_memory_waits_total{", f);
        prom_client_labels(f, &c[j], g);
        fprintf(f, ",outcome=\"timed_out\"} %" PRIu64 "\n", LD(&ss->mem_waits_timed_out));
    }
    static const char *const reason[3] = {"priority", "share", "quantum"};
    prom_head(f, "rota_client_held_seconds_total", "counter",
              "Time rotad held the client's launches, by reason (a hold with two reasons counts for both).");
    for (unsigned j = 0; j < nc; j++) {
        uint64_t h[3];
        prom_slot_held_ns(&t->stats[c[j].slot], now_ns, h);
        for (unsigned k = 0; k < 3; k++) {
            fputs("rota_client_held_seconds_total{", f);
            prom_client_labels(f, &c[j], g);
            fprintf(f, ",reason=\"%s\"} %.9f\n", reason[k], prom_s(h[k]));
        }
    }
}

/* ---- node --------------------------------------------------------------------------------------------------- */

int prom_render(FILE *f, const rota_region_t *r, const rota_table_t *t, uint64_t now_ns)
{
    unsigned nd = atomic_load_explicit(&r->ndevices, memory_order_acquire); /* entries written before */
    if (nd > ROTA_MAX_DEVICES) nd = ROTA_MAX_DEVICES;
    prom_gpu_t g[ROTA_MAX_DEVICES];
    for (unsigned i = 0; i < nd; i++) {
        proto_uuid_str(r->devices[i].uuid, g[i].uuid);
        snprintf(g[i].index, sizeof g[i].index, "%u", i);
    }
    prom_client_t *c = calloc(ROTA_MAX_CLIENTS, sizeof *c); /* 40 KB: off the stack */
    if (!c) return -ENOMEM;
    unsigned nc = 0;
    for (unsigned i = 0; t && i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &t->slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != ROTA_SLOT_LIVE) continue;
        prom_client_t *x = &c[nc++];
        x->slot = i;
        snprintf(x->pid, sizeof x->pid, "%d", (int)LD(&s->pid));
        proto_sanitize(x->job, s->comm, sizeof x->job);
        x->cls = prio_name(LD(&s->priority));
        int d = LD(&s->device);
        x->dev = d >= 0 && (unsigned)d < nd ? d : -1;
    }

    prom_head(f, "rota_up", "gauge", "1: rotad serves this node (rota metrics prints nothing when it is down).");
    fprintf(f, "rota_up 1\n");
    prom_head(f, "rota_start_time_seconds", "gauge", "When rotad started, in seconds since the epoch.");
    fprintf(f, "rota_start_time_seconds %.3f\n", (double)r->start_ns / 1e9);
    prom_head(f, "rota_clients", "gauge", "Processes registered with rotad.");
    fprintf(f, "rota_clients %u\n", LD(&r->nclients));
    prom_head(f, "rota_place_waiting_jobs", "gauge", "Jobs rota run keeps waiting for a GPU with room.");
    fprintf(f, "rota_place_waiting_jobs %u\n", LD(&r->place_waiting));
    prom_head(f, "rota_place_waiting_bytes", "gauge", "The memory (rota run --mem) of the jobs waiting for a GPU.");
    fprintf(f, "rota_place_waiting_bytes %" PRIu64 "\n", LD(&r->place_wait_bytes));
    prom_head(f, "rota_place_waits_total", "counter", "Jobs placed after waiting for a GPU with room.");
    fprintf(f, "rota_place_waits_total %" PRIu64 "\n", LD(&r->stats.place_waits));
    prom_head(f, "rota_place_wait_seconds_total", "counter", "Time jobs placed after a wait spent waiting.");
    fprintf(f, "rota_place_wait_seconds_total %.9f\n", prom_s(LD(&r->stats.place_wait_ns)));

    unsigned ng = t ? atomic_load_explicit(&r->ngroups, memory_order_acquire) : 0;
    if (ng > ROTA_MAX_GROUPS) ng = ROTA_MAX_GROUPS;
    prom_head(f, "rota_group_memory_limit_bytes", "gauge", "A configured group's memory limit per GPU.");
    for (unsigned i = 0; i < ng; i++) {
        char name[ROTA_GROUP_NAME];
        proto_sanitize(name, t->groups[i].name, sizeof name);
        if (!name[0]) continue; /* left out of this viewer's copy */
        fputs("rota_group_memory_limit_bytes{", f);
        prom_label(f, "group", name, false);
        fprintf(f, "} %" PRIu64 "\n", t->groups[i].limit);
    }
    prom_head(f, "rota_group_memory_used_bytes", "gauge", "Memory a configured group's processes hold, all GPUs.");
    for (unsigned i = 0; i < ng; i++) {
        char name[ROTA_GROUP_NAME];
        proto_sanitize(name, t->groups[i].name, sizeof name);
        if (!name[0]) continue;
        uint64_t used = 0;
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) used += LD(&t->groups[i].used[d]);
        fputs("rota_group_memory_used_bytes{", f);
        prom_label(f, "group", name, false);
        fprintf(f, "} %" PRIu64 "\n", used);
    }
    prom_gpus(f, r, nd, g);
    prom_clients(f, t, c, nc, g, now_ns);
    free(c);
    return ferror(f) ? -EIO : 0;
}
