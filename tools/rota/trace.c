/* trace.c - `rota trace`: ROTA_TRACE's JSON lines (runtime/lib/trace.h) as a Perfetto/Chrome trace (JSON). */
#include "tools/rota/rota.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char trace_usage[] =
    "usage: rota trace [-o OUT.json] FILE...\n"
    "\n"
    "Turns ROTA_TRACE files (JSON lines librota writes: holds, memory waits, placements, idle probes) into one\n"
    "trace in the Chrome trace-event format, which ui.perfetto.dev and chrome://tracing open: one process per\n"
    "traced pid, one track per GPU in it; a hold is a slice named by its reason (held (prio|share|quantum))\n"
    "from the launch that waited to its release, a memory wait a slice from mem_wait to mem_grant or\n"
    "mem_deny, a placement that waited for room a slice of its wait; every other event an instant. Each slice\n"
    "and instant carries the line it came from as its args. Times are microseconds from the first event (or\n"
    "the start of the first wait); otherData.t0_us says when that was on ROTA_TRACE's clock (CLOCK_MONOTONIC),\n"
    "to merge the trace with others.\n"
    "Lines that are not such events (a line cut short by a crash) are skipped and counted on stderr.\n"
    "-o writes OUT.json (default: standard output; '-' reads standard input).\n"
    "Exit codes: 0 ok; 1 a file could not be read or written; 2 usage error.\n";

#define TRACE_LINE_MAX 4096
#define TRACE_EVENTS_MAX 50000000u /* lines read at most: a bound on memory, far above any real trace */

typedef struct trace_ev {
    double ts;      /* us, CLOCK_MONOTONIC */
    long pid;
    int gpu;
    char ev[16];
    char reason[16];
    double wait_us; /* place: how long it waited for room (0: none) */
    char *line;     /* the event itself, valid JSON (validated) */
    size_t order;   /* file order: ties keep it */
} trace_ev_t;

/* ---- a strict reader for the flat objects trace_write produces ----------------------------------------------- */

typedef struct trace_pos {
    const char *p;
} trace_pos_t;

static void trace_ws(trace_pos_t *t)
{
    while (*t->p == ' ' || *t->p == '\t') t->p++;
}

/* A JSON string; its contents (escapes kept, at most n-1 bytes) into out when out is not NULL. */
static bool trace_string(trace_pos_t *t, char *out, size_t n)
{
    if (*t->p != '"') return false;
    const char *s = ++t->p;
    while (*t->p != '"') {
        unsigned char c = (unsigned char)*t->p;
        if (!c || c < 0x20) return false;
        if (c == '\\') {
            t->p++;
            if (*t->p == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (!strchr("0123456789abcdefABCDEF", t->p[k]) || !t->p[k]) return false;
                t->p += 4;
            } else if (!*t->p || !strchr("\"\\/bfnrt", *t->p)) {
                return false;
            }
        }
        t->p++;
    }
    if (out && n) {
        size_t len = (size_t)(t->p - s);
        if (len >= n) len = n - 1;
        memcpy(out, s, len);
        out[len] = 0;
    }
    t->p++;
    return true;
}

/* A JSON number (strict grammar); its value into *v. */
static bool trace_number(trace_pos_t *t, double *v)
{
    const char *s = t->p;
    if (*t->p == '-') t->p++;
    if (*t->p == '0') t->p++;
    else if (*t->p >= '1' && *t->p <= '9')
        while (*t->p >= '0' && *t->p <= '9') t->p++;
    else return false;
    if (*t->p == '.') {
        t->p++;
        if (!(*t->p >= '0' && *t->p <= '9')) return false;
        while (*t->p >= '0' && *t->p <= '9') t->p++;
    }
    if (*t->p == 'e' || *t->p == 'E') {
        t->p++;
        if (*t->p == '+' || *t->p == '-') t->p++;
        if (!(*t->p >= '0' && *t->p <= '9')) return false;
        while (*t->p >= '0' && *t->p <= '9') t->p++;
    }
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end == t->p && errno != ERANGE;
}

/* One line: {"key":value,...} with string, number, true, false or null values. */
static bool trace_parse(const char *line, trace_ev_t *e)
{
    trace_pos_t t = {line};
    bool has_ts = false, has_pid = false, has_ev = false;
    e->gpu = -1;
    e->reason[0] = 0;
    e->wait_us = 0;
    trace_ws(&t);
    if (*t.p++ != '{') return false;
    trace_ws(&t);
    if (*t.p == '}') return false;
    for (;;) {
        char key[32];
        trace_ws(&t);
        if (!trace_string(&t, key, sizeof key)) return false;
        trace_ws(&t);
        if (*t.p++ != ':') return false;
        trace_ws(&t);
        if (*t.p == '"') {
            char val[16];
            if (!trace_string(&t, val, sizeof val)) return false;
            if (!strcmp(key, "ev")) {
                memcpy(e->ev, val, sizeof e->ev);
                has_ev = true;
            } else if (!strcmp(key, "reason")) {
                memcpy(e->reason, val, sizeof e->reason);
            }
        } else if (!strncmp(t.p, "true", 4) || !strncmp(t.p, "null", 4)) {
            t.p += 4;
        } else if (!strncmp(t.p, "false", 5)) {
            t.p += 5;
        } else {
            double v;
            if (!trace_number(&t, &v)) return false;
            if (!strcmp(key, "ts_us")) {
                e->ts = v;
                has_ts = v >= 0;
            } else if (!strcmp(key, "pid")) {
                e->pid = (long)v;
                has_pid = v >= 0 && v <= 4194304;
            } else if (!strcmp(key, "gpu")) {
                e->gpu = v >= 0 && v < 1024 ? (int)v : -1;
            } else if (!strcmp(key, "wait_us")) {
                e->wait_us = v > 0 ? v : 0;
            }
        }
        trace_ws(&t);
        if (*t.p == ',') {
            t.p++;
            continue;
        }
        if (*t.p++ != '}') return false;
        break;
    }
    trace_ws(&t);
    return *t.p == 0 && has_ts && has_pid && has_ev;
}

/* ---- reading ------------------------------------------------------------------------------------------------ */

typedef struct trace_set {
    trace_ev_t *ev;
    size_t n, cap;
    size_t skipped;
} trace_set_t;

static int trace_read(trace_set_t *s, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
    if (!f) {
        fprintf(stderr, "rota trace: fatal: unable to open %s: %s\n", path, strerror(errno));
        return -errno;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        trace_ev_t e;
        if (len > TRACE_LINE_MAX || !trace_parse(line, &e)) {
            s->skipped++;
            continue;
        }
        if (s->n == TRACE_EVENTS_MAX) {
            fprintf(stderr, "rota trace: fatal: more than %u events\n", TRACE_EVENTS_MAX);
            rc = -E2BIG;
            break;
        }
        if (s->n == s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 1024;
            trace_ev_t *x = realloc(s->ev, nc * sizeof *x);
            if (!x) {
                rc = -ENOMEM;
                break;
            }
            s->ev = x;
            s->cap = nc;
        }
        e.line = strdup(line);
        if (!e.line) {
            rc = -ENOMEM;
            break;
        }
        e.order = s->n;
        s->ev[s->n++] = e;
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "rota trace: fatal: unable to read %s\n", path);
        rc = -EIO;
    }
    if (rc == -ENOMEM) fprintf(stderr, "rota trace: fatal: out of memory\n");
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

static int trace_cmp(const void *a, const void *b)
{
    const trace_ev_t *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* ---- writing ------------------------------------------------------------------------------------------------ */

/* A span waiting for its end: (pid, kind) -> the opening event. */
typedef struct trace_open {
    long pid;
    int kind; /* 0 hold, 1 mem_wait */
    const trace_ev_t *start;
    struct trace_open *next;
} trace_open_t;

static int trace_tid(const trace_ev_t *e)
{
    return e->gpu >= 0 ? e->gpu + 1 : 0;
}

static void trace_sep(FILE *o, bool *first)
{
    fputs(*first ? "\n" : ",\n", o);
    *first = false;
}

/* Process and thread names: one per pid, one per (pid, GPU) track. 0 or -ENOMEM. */
static int trace_meta(FILE *o, bool *first, const trace_set_t *s)
{
    typedef struct {
        long pid;
        int tid;
    } pair_t;
    pair_t *seen = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < s->n; i++) {
        const trace_ev_t *e = &s->ev[i];
        bool pid_seen = false, tid_seen = false;
        for (size_t j = 0; j < n && !tid_seen; j++) {
            if (seen[j].pid != e->pid) continue;
            pid_seen = true;
            tid_seen = seen[j].tid == trace_tid(e);
        }
        if (tid_seen) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            pair_t *x = realloc(seen, cap * sizeof *x);
            if (!x) {
                free(seen);
                return -ENOMEM;
            }
            seen = x;
        }
        seen[n++] = (pair_t){e->pid, trace_tid(e)};
        if (!pid_seen) {
            trace_sep(o, first);
            fprintf(o, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%ld,\"args\":{\"name\":\"pid %ld\"}}", e->pid,
                    e->pid);
        }
        trace_sep(o, first);
        if (e->gpu >= 0)
            fprintf(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":%d,\"args\":{\"name\":\"gpu %d\"}}",
                    e->pid, trace_tid(e), e->gpu);
        else
            fprintf(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%ld,\"tid\":0,\"args\":{\"name\":\"rota\"}}",
                    e->pid);
    }
    free(seen);
    return 0;
}

static void trace_slice(FILE *o, bool *first, const char *name, const trace_ev_t *at, double ts, double dur,
                        const trace_ev_t *end, double t0)
{
    trace_sep(o, first);
    fprintf(o, "{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"begin\":%s", name,
            at->pid, trace_tid(at), ts - t0, dur > 0 ? dur : 0, at->line);
    if (end) fprintf(o, ",\"end\":%s", end->line);
    fputs("}}", o);
}

static void trace_instant(FILE *o, bool *first, const trace_ev_t *e, double t0)
{
    trace_sep(o, first);
    fprintf(o, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,\"args\":%s}", e->ev, e->pid,
            trace_tid(e), e->ts - t0, e->line);
}

static int trace_write_out(FILE *o, const trace_set_t *s)
{
    double t0 = s->n ? s->ev[0].ts : 0; /* the earliest time shown: a placement's wait starts before its event */
    for (size_t i = 0; i < s->n; i++)
        if (s->ev[i].ts - s->ev[i].wait_us < t0) t0 = s->ev[i].ts - s->ev[i].wait_us;
    bool first = true;
    trace_open_t *open = NULL;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", o);
    if (trace_meta(o, &first, s)) return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        const trace_ev_t *e = &s->ev[i];
        int kind = !strcmp(e->ev, "hold") ? 0 : !strcmp(e->ev, "mem_wait") ? 1 : -1;
        int ends = !strcmp(e->ev, "release")                                   ? 0
                   : !strcmp(e->ev, "mem_grant") || !strcmp(e->ev, "mem_deny") ? 1
                                                                               : -1;
        if (kind >= 0) {
            trace_open_t *x = malloc(sizeof *x);
            if (!x) return -ENOMEM;
            *x = (trace_open_t){.pid = e->pid, .kind = kind, .start = e, .next = open};
            open = x;
            continue;
        }
        if (ends >= 0) {
            trace_open_t **pp = &open;
            while (*pp && !((*pp)->pid == e->pid && (*pp)->kind == ends)) pp = &(*pp)->next;
            if (*pp) {
                trace_open_t *x = *pp;
                *pp = x->next;
                char name[48];
                const char *r = x->start->reason[0] ? x->start->reason : "";
                if (ends == 0) snprintf(name, sizeof name, r[0] ? "held (%s)" : "held", r);
                else snprintf(name, sizeof name, "memory wait (%s)", !strcmp(e->ev, "mem_grant") ? "granted" : "denied");
                trace_slice(o, &first, name, x->start, x->start->ts, e->ts - x->start->ts, e, t0);
                free(x);
                continue;
            }
        }
        if (!strcmp(e->ev, "place") && e->wait_us > 0)
            trace_slice(o, &first, "waiting for a GPU with room", e, e->ts - e->wait_us, e->wait_us, NULL, t0);
        trace_instant(o, &first, e, t0);
    }
    /* spans still open at the end of the trace (the process was killed while held): up to the last event */
    double tend = s->n ? s->ev[s->n - 1].ts : 0;
    while (open) {
        trace_open_t *x = open;
        open = x->next;
        trace_slice(o, &first, x->kind == 0 ? "held (to the end of the trace)" : "memory wait (to the end of the trace)",
                    x->start, x->start->ts, tend - x->start->ts, NULL, t0);
        free(x);
    }
    fprintf(o, "\n],\"otherData\":{\"source\":\"rota trace\",\"t0_us\":%.3f,\"events\":%zu,\"skipped_lines\":%zu}}\n",
            t0, s->n, s->skipped);
    return ferror(o) ? -EIO : 0;
}

int rota_trace_main(int argc, char **argv)
{
    const char *out = NULL;
    int i;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(trace_usage, stdout);
            return ROTA_EXIT_OK;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rota trace: fatal: unknown or incomplete argument '%s'\n%s", argv[i], trace_usage);
            return ROTA_EXIT_USAGE;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "rota trace: fatal: no ROTA_TRACE file given\n%s", trace_usage);
        return ROTA_EXIT_USAGE;
    }
    trace_set_t s = {0};
    int rc = ROTA_EXIT_OK;
    for (; i < argc && rc == ROTA_EXIT_OK; i++)
        if (trace_read(&s, argv[i])) rc = ROTA_EXIT_FAIL;
    if (rc == ROTA_EXIT_OK) {
        qsort(s.ev, s.n, sizeof *s.ev, trace_cmp);
        FILE *o = out ? fopen(out, "we") : stdout;
        if (!o) {
            fprintf(stderr, "rota trace: fatal: unable to create %s: %s\n", out, strerror(errno));
            rc = ROTA_EXIT_FAIL;
        } else {
            int w = trace_write_out(o, &s);
            if ((o == stdout ? fflush(o) : fclose(o)) || w) {
                fprintf(stderr, "rota trace: fatal: unable to write %s\n", out ? out : "the trace");
                rc = ROTA_EXIT_FAIL;
            }
        }
        if (s.skipped) fprintf(stderr, "rota trace: %zu line(s) that are not rota events skipped\n", s.skipped);
    }
    for (size_t k = 0; k < s.n; k++) free(s.ev[k].line);
    free(s.ev);
    return rc;
}
