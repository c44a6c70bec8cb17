/* top.c - `rota top`: a live view of rotad's region (per-GPU busy and memory, per-client state and rates). */
#include "tools/rota/rota.h"

#include "tools/rota/client.h"
#include "tools/rota/fmt.h"
#include "tools/rota/observe.h"
#include "tools/rota/sample.h"

#include "runtime/lib/conn.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

static const char top_usage[] =
    "usage: rota top [--interval SECONDS] [--once] [--socket PATH]\n"
    "\n"
    "Shows, refreshed every --interval seconds (default 1, 0.1..3600), each GPU rotad tracks (BUSY%: the time\n"
    "it had work in flight, as rotad measures it; DEVT/S: its clients' device time per second, the sum of\n"
    "their rows; capacity, reserved, waiters, held clients) and each client (pid, command, class, weight,\n"
    "state: running, held, memwait or idle, GPU, memory used, launches/s, device time per second and in\n"
    "total, launches in flight). Every rate of a frame comes from the same two samples, one interval apart;\n"
    "clients whose launches overlap (time-sliced) are scaled down together so that a GPU's clients never\n"
    "show more device time than the GPU was busy.\n"
    "q or Ctrl-C quits (the terminal is restored). --once prints one frame (rates over 0.2 s) and exits,\n"
    "for scripts. Where stdout is not a terminal, frames follow one another as plain text (as top -b\n"
    "prints them), until rotad goes or a signal ends it.\n"
    "A '-' is a number not known yet (no earlier sample). Exit codes: 0 ok; 1 rotad\n"
    "unreachable or lost; 2 usage error.\n";

/* ---- one frame ---------------------------------------------------------------------------------------------- */

static void top_frame(FILE *f, const rota_region_t *r, const rota_table_t *t, const rota_sample_t *a,
                      const rota_sample_t *b, bool tty)
{
    const char *eol = tty ? "\033[K\n" : "\n"; /* erase what a longer line of the last frame left */
    unsigned nd = LD(&r->ndevices);
    if (nd > ROTA_MAX_DEVICES) nd = ROTA_MAX_DEVICES;
    fprintf(f, "rota top - rotad pid %d, %u client(s), %u GPU(s)%s%s", r->rotad_pid, LD(&r->nclients), nd, eol, eol);
    fprintf(f, "%-3s %-40s %6s %7s %10s %10s %7s %4s%s", "DEV", "UUID", "BUSY%", "DEVT/S", "CAPACITY", "RESERVED",
            "WAITERS", "HELD", eol);
    if (!nd) fprintf(f, "    (no GPU has been used yet)%s", eol);
    for (unsigned i = 0; i < nd; i++) {
        const rota_dev_t *d = &r->devices[i];
        char u[PROTO_UUID_STR], cap[16], res[16], dts[16], busy[16];
        double db, dc;
        proto_uuid_str(d->uuid, u);
        rota_fmt_size(cap, sizeof cap, LD(&d->capacity));
        rota_fmt_size(res, sizeof res, LD(&d->reserved));
        /* one window for every rate of the frame: the GPU's busy time and its clients' device time (which the
         * clients' rows add up to, never more than the GPU's) */
        if (rota_sample_dev_busy(a, b, i, &db) && rota_sample_dev_clients(a, b, i, &dc)) {
            snprintf(busy, sizeof busy, "%.1f", db * 100);
            snprintf(dts, sizeof dts, "%.2f", dc);
        } else {
            snprintf(busy, sizeof busy, "-");
            snprintf(dts, sizeof dts, "-");
        }
        fprintf(f, "%-3u %-40s %6s %7s %10s %10s %7u %4u%s", i, u, busy, dts, cap, res, LD(&d->waiters),
                LD(&d->held), eol);
    }
    char pw[160];
    if (rota_fmt_place_waiting(pw, sizeof pw, r, rota_sample_now_ns())) fprintf(f, "%s%s%s", eol, pw, eol);
    fprintf(f, "%s%-8s %-16s %-6s %6s %-8s %3s %10s %10s %7s %10s %5s%s", eol, "PID", "COMMAND", "CLASS", "WEIGHT",
            "STATE", "DEV", "USED", "LAUNCH/S", "DEVT/S", "DEVTIME", "INFL", eol);
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &t->slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != ROTA_SLOT_LIVE) continue;
        char comm[ROTA_COMM_LEN], used[16], dev[12], lps[16], dts[16];
        proto_sanitize(comm, s->comm, sizeof comm);
        rota_fmt_size(used, sizeof used, rota_client_used(s));
        int d = LD(&s->device);
        if (d >= 0) snprintf(dev, sizeof dev, "%d", d);
        else snprintf(dev, sizeof dev, "-");
        double l, bf;
        if (rota_sample_rates(a, b, i, &l, &bf)) {
            snprintf(lps, sizeof lps, "%.0f", l);
            snprintf(dts, sizeof dts, "%.2f", bf);
        } else {
            snprintf(lps, sizeof lps, "-");
            snprintf(dts, sizeof dts, "-");
        }
        fprintf(f, "%-8d %-16s %-6s %6.2f %-8s %3s %10s %10s %7s %9.3fs %5u%s", LD(&s->pid), comm,
                prio_name(LD(&s->priority)), LD(&s->weight) / 1000.0, rota_client_state(s, LD(&r->sched[i].hold)), dev, used, lps,
                dts, LD(&s->busy_ns) / 1e9, LD(&s->inflight), eol);
    }
    if (t->hidden_clients)
        fprintf(f, "(%u client(s) of other users not shown)%s", t->hidden_clients, eol);
}

/* ---- the terminal ------------------------------------------------------------------------------------------- */

static volatile sig_atomic_t top_stop;
static struct termios top_saved;
static bool top_raw;

static void top_on_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

static bool top_tty; /* stdout is a terminal: frames redraw in place; otherwise plain frames follow each other */

static void top_restore(void)
{
    if (top_raw) tcsetattr(STDIN_FILENO, TCSAFLUSH, &top_saved);
    top_raw = false;
    if (top_tty) fputs("\033[?25h", stdout); /* cursor back */
    fflush(stdout);
}

static void top_enter_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &top_saved)) return;
    struct termios t = top_saved;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) top_raw = true;
}

int rota_top_main(int argc, char **argv)
{
    double interval = 1.0;
    bool once = false;
    const char *sock = getenv("ROTA_SOCKET");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--once")) {
            once = true;
        } else if (!strcmp(a, "--interval") && i + 1 < argc) {
            if (parse_double(argv[++i], 0.1, 3600, &interval)) {
                fprintf(stderr, "rota top: fatal: --interval '%s': expected seconds from 0.1 to 3600\n%s", argv[i],
                        top_usage);
                return ROTA_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--socket") && i + 1 < argc) {
            sock = argv[++i];
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(top_usage, stdout);
            return ROTA_EXIT_OK;
        } else {
            fprintf(stderr, "rota top: fatal: unknown or incomplete argument '%s'\n%s", a, top_usage);
            return ROTA_EXIT_USAGE;
        }
    }
    conn_t *c;
    if (rota_observe_open("rota top", sock, &c)) return ROTA_EXIT_FAIL;
    const rota_region_t *r = conn_region(c);
    rota_sample_t *sa = calloc(2, sizeof *sa);
    if (!sa) {
        conn_close(c);
        fprintf(stderr, "rota top: fatal: out of memory\n");
        return ROTA_EXIT_FAIL;
    }
    int rc = ROTA_EXIT_OK;
    const rota_table_t *t = NULL;
    if (once) {
        int e = rota_sample_pair(c, sa, 0.2, &t);
        if (e) {
            fprintf(stderr, "rota top: fatal: rotad did not send its client table: %s\n", strerror(-e));
            rc = ROTA_EXIT_FAIL;
            goto out;
        }
        top_frame(stdout, r, t, &sa[0], &sa[1], false);
        conn_table_free(t);
        if (fflush(stdout)) rc = ROTA_EXIT_FAIL;
        goto out;
    }
    struct sigaction sa_int = {.sa_handler = top_on_signal};
    sigemptyset(&sa_int.sa_mask);
    sigaction(SIGINT, &sa_int, NULL);
    sigaction(SIGTERM, &sa_int, NULL);
    sigaction(SIGHUP, &sa_int, NULL);
    /* Not a terminal (a pipe, a file, watch's capture): plain frames one after another, as top -b prints them. */
    top_tty = isatty(STDOUT_FILENO);
    if (top_tty) {
        top_enter_raw();
        fputs("\033[?25l\033[2J", stdout); /* hide the cursor, clear the screen once */
    }
    rota_sample_t *prev = NULL, *cur = &sa[0];
    while (!top_stop) {
        if (!conn_alive(c)) {
            top_restore();
            fprintf(stderr, "rota top: fatal: lost rotad\n");
            rc = ROTA_EXIT_FAIL;
            goto out;
        }
        int e = conn_table(c, &t);
        if (e) {
            top_restore();
            fprintf(stderr, "rota top: fatal: rotad did not send its client table: %s\n", strerror(-e));
            rc = ROTA_EXIT_FAIL;
            goto out;
        }
        rota_sample_take(r, t, cur);
        if (top_tty) fputs("\033[H", stdout);
        else if (prev) fputc('\n', stdout); /* a blank line between plain frames */
        top_frame(stdout, r, t, prev, cur, top_tty);
        conn_table_free(t);
        if (top_tty) fputs("\033[J(q quits)", stdout); /* clear what the previous, longer frame left below */
        if (fflush(stdout)) break; /* the reader went away (head -n): nothing more to say */
        prev = cur;
        cur = cur == &sa[0] ? &sa[1] : &sa[0];
        /* Wait for the interval, a key, or a signal; rotad's EOF shows as readable on the connection. */
        struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = conn_fd(c), .events = POLLIN}};
        if (!top_raw) p[0].fd = -1; /* not a terminal: no keys to read */
        uint64_t end = rota_sample_now_ns() + (uint64_t)(interval * 1e9);
        while (!top_stop) {
            uint64_t now = rota_sample_now_ns();
            if (now >= end) break;
            int n = poll(p, 2, (int)((end - now) / 1000000) + 1);
            if (n < 0 && errno != EINTR) break;
            if (n > 0 && top_raw && (p[0].revents & POLLIN)) {
                char ch;
                if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q' || ch == 3)) top_stop = 1;
            }
            if (n > 0 && (p[1].revents & (POLLIN | POLLHUP))) {
                char buf[ROTA_MSG_MAX];
                if (proto_recv(conn_fd(c), buf, sizeof buf, NULL, NULL, MSG_DONTWAIT) <= 0) {
                    top_restore();
                    fprintf(stderr, "\nrota top: fatal: lost rotad\n");
                    rc = ROTA_EXIT_FAIL;
                    goto out;
                }
            }
        }
    }
    top_restore();
    if (top_tty) fputc('\n', stdout);
out:
    free(sa);
    conn_close(c);
    return rc;
}
