/* status.c - `rota status [--json]`: a snapshot of rotad's region (devices, ledger) and client table. */
#include "tools/rota/rota.h"

#include "tools/rota/client.h"
#include "tools/rota/fmt.h"
#include "tools/rota/observe.h"
#include "tools/rota/sample.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

static const char status_usage[] =
    "usage: rota status [--json] [--sample SECONDS] [--socket PATH]\n"
    "\n"
    "Prints every GPU rotad tracks (uuid, capacity, reserved, waiters) and every client (pid, uid, priority,\n"
    "device, used, limit, waiting) this user may see: all of them for root and rotad's own user, else only\n"
    "this user's processes, with a count of the others (JSON: hidden_clients). --socket (default $ROTA_SOCKET, else rotad's default path) names rotad.\n"
    "used counts a client's unused fast-path credit too (JSON: credit). Sizes are in bytes in --json output.\n"
    "--json also carries what rota top shows: per GPU busy_permille (rotad's measure), held clients, device\n"
    "time (busy_ns) and devtime_per_s; per client state (idle|running|held|memwait), hold bits, launches,\n"
    "launches_per_s, busy_ns and devtime_per_s; for a high client idle_win_us, its idle window as rotad\n"
    "applies it (learned, at most rotad --idle-ms); place_waiting: the jobs rota run keeps waiting for a GPU\n"
    "with room (jobs, bytes of their --mem, oldest_s: how long the first has waited), also a line in the text.\n"
    "Rates come from two samples --sample seconds apart (default 0.2, 0..10; 0 = no rates: null), all from\n"
    "that one window: a GPU's devtime_per_s is its busy time, clients_devtime_per_s the sum of its clients'\n"
    "devtime_per_s, never more (clients whose launches overlap are scaled down together).\n"
    "Exit codes: 0 ok; 1 rotad unreachable; 2 usage error.\n";

static void status_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void status_json_rate(FILE *f, const char *name, bool known, double v)
{
    if (known) fprintf(f, ",\"%s\":%.3f", name, v);
    else fprintf(f, ",\"%s\":null", name);
}

static void status_print_json(FILE *f, const rota_region_t *r, const rota_table_t *t, const rota_sample_t *a,
                              const rota_sample_t *b)
{
    unsigned nd = LD(&r->ndevices);
    if (nd > ROTA_MAX_DEVICES) nd = ROTA_MAX_DEVICES;
    fprintf(f, "{\"abi\":%u,\"rotad_pid\":%d,\"client_limit\":%u,\"devices\":[", r->abi, r->rotad_pid,
            LD(&r->client_limit));
    for (unsigned i = 0; i < nd; i++) {
        const rota_dev_t *d = &r->devices[i];
        char u[PROTO_UUID_STR];
        proto_uuid_str(d->uuid, u);
        fprintf(f,
                "%s{\"index\":%u,\"uuid\":\"%s\",\"capacity\":%" PRIu64 ",\"reserved\":%" PRIu64
                ",\"waiters\":%u,\"clients\":%u,\"busy_permille\":%u,\"held\":%u,\"high_active\":%u"
                ",\"high_clients\":%u,\"normal_clients\":%u,\"busy_ns\":%" PRIu64
                ",\"hold_events\":%" PRIu64 ",\"hold_lat_sum_ns\":%" PRIu64 ",\"hold_lat_max_ns\":%" PRIu64,
                i ? "," : "", i, u, LD(&d->capacity), LD(&d->reserved), LD(&d->waiters), LD(&d->clients),
                LD(&d->busy_permille), LD(&d->held), LD(&d->high_active), LD(&d->high_clients),
                LD(&d->normal_clients), LD(&d->busy_ns),
                LD(&d->hold_events),
                LD(&d->hold_lat_sum_ns), LD(&d->hold_lat_max_ns));
        fprintf(f, ",\"hold_lat_hist\":[");
        for (unsigned k = 0; k < ROTA_LAT_BUCKETS; k++) fprintf(f, "%s%" PRIu64, k ? "," : "", LD(&d->hold_lat_hist[k]));
        fprintf(f, "],\"confirm_events\":%" PRIu64 ",\"confirm_lat_sum_ns\":%" PRIu64 ",\"confirm_lat_max_ns\":%" PRIu64,
                LD(&d->confirm_events), LD(&d->confirm_lat_sum_ns), LD(&d->confirm_lat_max_ns));
        double db = 0, dc = 0;
        bool known = rota_sample_dev_busy(a, b, i, &db);
        status_json_rate(f, "devtime_per_s", known, db);
        known = rota_sample_dev_clients(a, b, i, &dc);
        status_json_rate(f, "clients_devtime_per_s", known, dc);
        fputc('}', f);
    }
    fprintf(f, "],\"place_waiting\":{\"jobs\":%u,\"bytes\":%" PRIu64 ",\"oldest_s\":%.3f}", LD(&r->place_waiting),
            LD(&r->place_wait_bytes), rota_place_wait_oldest_s(r, rota_sample_now_ns()));
    /* What this user may see (abi.h, LIST): everything, or its own processes and the node's totals. */
    fprintf(f, ",\"viewer_uid\":%u,\"all_clients\":%s,\"hidden_clients\":%u,\"hidden_groups\":%u", t->viewer_uid,
            t->flags & ROTA_TABLE_ALL ? "true" : "false", t->hidden_clients, t->hidden_groups);
    fprintf(f, ",\"groups\":[");
    unsigned ng = LD(&r->ngroups);
    if (ng > ROTA_MAX_GROUPS) ng = ROTA_MAX_GROUPS;
    bool gfirst = true;
    for (unsigned i = 0; i < ng; i++) {
        const rota_group_t *g = &t->groups[i];
        char name[ROTA_GROUP_NAME];
        proto_sanitize(name, g->name, sizeof name);
        if (!name[0]) continue; /* left out of this user's copy */
        uint64_t used = 0;
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) used += LD(&g->used[d]);
        fprintf(f, "%s{\"index\":%u,\"path\":", gfirst ? "" : ",", i);
        gfirst = false;
        status_json_str(f, name);
        fprintf(f, ",\"limit\":%" PRIu64 ",\"used\":%" PRIu64 "}", g->limit, used);
    }
    fprintf(f, "],\"clients\":[");
    bool first = true;
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &t->slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != ROTA_SLOT_LIVE) continue;
        uint32_t hold = LD(&r->sched[i].hold);
        char comm[ROTA_COMM_LEN];
        proto_sanitize(comm, s->comm, sizeof comm);
        int dev = LD(&s->device), wdev = LD(&s->wait_dev);
        fprintf(f,
                "%s{\"slot\":%u,\"gen\":%u,\"pid\":%d,\"uid\":%u,\"comm\":", first ? "" : ",", i, LD(&s->gen),
                LD(&s->pid), LD(&s->uid));
        status_json_str(f, comm);
        fprintf(f, ",\"priority\":\"%s\",\"weight\":%.3f,\"device\":", prio_name(LD(&s->priority)),
                LD(&s->weight) / 1000.0);
        if (dev >= 0 && dev < ROTA_MAX_DEVICES) fprintf(f, "%d", dev);
        else fprintf(f, "null");
        fprintf(f, ",\"used\":%" PRIu64 ",\"credit\":%" PRIu64 ",\"limit\":", rota_client_used(s), LD(&s->credit));
        if (LD(&s->limit)) fprintf(f, "%" PRIu64, LD(&s->limit));
        else fprintf(f, "null");
        fprintf(f, ",\"group\":%d,\"waiting\":%" PRIu64 ",\"wait_device\":", LD(&s->group), LD(&s->waiting));
        if (wdev >= 0 && wdev < ROTA_MAX_DEVICES) fprintf(f, "%d", wdev);
        else fprintf(f, "null");
        fprintf(f, ",\"state\":\"%s\",\"hold\":%u,\"launches\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"inflight\":%u",
                rota_client_state(s, hold), hold, LD(&s->launches), LD(&s->busy_ns), LD(&s->inflight));
        double lps = 0, bf = 0;
        bool known = rota_sample_rates(a, b, i, &lps, &bf);
        status_json_rate(f, "launches_per_s", known, lps);
        status_json_rate(f, "devtime_per_s", known, bf);
        /* A high client's idle window as rotad last applied it (abi.h, learned idle window); null before its first. */
        uint64_t iw = LD(&s->idle_win_ns);
        if (LD(&s->priority) == ROTA_PRIO_HIGH && iw != UINT64_MAX) fprintf(f, ",\"idle_win_us\":%.1f", iw / 1e3);
        else if (LD(&s->priority) == ROTA_PRIO_HIGH) fprintf(f, ",\"idle_win_us\":null");
        fputc('}', f);
        first = false;
    }
    fprintf(f, "]}\n");
}

static void status_print_text(FILE *f, const rota_region_t *r, const rota_table_t *t)
{
    unsigned nd = LD(&r->ndevices);
    if (nd > ROTA_MAX_DEVICES) nd = ROTA_MAX_DEVICES;
    fprintf(f, "rotad pid %d, %u client(s) of at most %u\n\n", r->rotad_pid, LD(&r->nclients),
            LD(&r->client_limit));
    fprintf(f, "%-3s %-40s %10s %10s %7s\n", "DEV", "UUID", "CAPACITY", "RESERVED", "WAITERS");
    if (!nd) fprintf(f, "    (no GPU has been used yet)\n");
    for (unsigned i = 0; i < nd; i++) {
        const rota_dev_t *d = &r->devices[i];
        char u[PROTO_UUID_STR], cap[16], res[16];
        proto_uuid_str(d->uuid, u);
        rota_fmt_size(cap, sizeof cap, LD(&d->capacity));
        rota_fmt_size(res, sizeof res, LD(&d->reserved));
        fprintf(f, "%-3u %-40s %10s %10s %7u\n", i, u, cap, res, LD(&d->waiters));
    }
    char pw[160];
    if (rota_fmt_place_waiting(pw, sizeof pw, r, rota_sample_now_ns())) fprintf(f, "\n%s\n", pw);
    fprintf(f, "\n%-8s %-6s %-16s %-8s %3s %10s %10s %10s %-8s\n", "PID", "UID", "COMMAND", "CLASS", "DEV", "USED",
            "LIMIT", "WAITING", "STATE");
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &t->slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != ROTA_SLOT_LIVE) continue;
        char comm[ROTA_COMM_LEN], used[16], lim[16], wait[16], dev[12];
        proto_sanitize(comm, s->comm, sizeof comm);
        rota_fmt_size(used, sizeof used, rota_client_used(s));
        if (LD(&s->limit)) rota_fmt_size(lim, sizeof lim, LD(&s->limit));
        else snprintf(lim, sizeof lim, "-");
        if (LD(&s->waiting)) rota_fmt_size(wait, sizeof wait, LD(&s->waiting));
        else snprintf(wait, sizeof wait, "-");
        int d = LD(&s->device);
        if (d >= 0) snprintf(dev, sizeof dev, "%d", d);
        else snprintf(dev, sizeof dev, "-");
        fprintf(f, "%-8d %-6u %-16s %-8s %3s %10s %10s %10s %-8s\n", LD(&s->pid), LD(&s->uid), comm,
                prio_name(LD(&s->priority)), dev, used, lim, wait, rota_client_state(s, LD(&r->sched[i].hold)));
    }
    if (t->hidden_clients)
        fprintf(f, "(%u client(s) of other users not shown: only root and rotad's user see every process)\n",
                t->hidden_clients);
}

int rota_status_main(int argc, char **argv)
{
    bool json = false;
    double sample = 0.2;
    const char *sock = getenv("ROTA_SOCKET");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--sample") && i + 1 < argc) {
            if (parse_double(argv[++i], 0, 10, &sample)) {
                fprintf(stderr, "rota status: fatal: --sample '%s': expected seconds from 0 to 10\n%s", argv[i],
                        status_usage);
                return ROTA_EXIT_USAGE;
            }
        } else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
            sock = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(status_usage, stdout);
            return ROTA_EXIT_OK;
        } else {
            fprintf(stderr, "rota status: fatal: unknown argument '%s'\n%s", argv[i], status_usage);
            return ROTA_EXIT_USAGE;
        }
    }
    conn_t *c;
    int rc;
    if (rota_observe_open("rota status", sock, &c)) return ROTA_EXIT_FAIL;
    const rota_table_t *t = NULL;
    rota_sample_t *sa = json && sample > 0 ? calloc(2, sizeof *sa) : NULL;
    rc = sa ? rota_sample_pair(c, sa, sample, &t) : conn_table(c, &t);
    if (rc) {
        fprintf(stderr, "rota status: fatal: rotad did not send its client table: %s\n", strerror(-rc));
        free(sa);
        conn_close(c);
        return ROTA_EXIT_FAIL;
    }
    if (json) status_print_json(stdout, conn_region(c), t, sa, sa ? &sa[1] : NULL);
    else status_print_text(stdout, conn_region(c), t);
    free(sa);
    conn_table_free(t);
    conn_close(c);
    return fflush(stdout) ? ROTA_EXIT_FAIL : ROTA_EXIT_OK;
}
