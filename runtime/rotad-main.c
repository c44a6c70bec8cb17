/* rotad-main.c - rotad's command line: options, daemonising, readiness notification, exit codes. */
#include "runtime/config.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/sockpath.h"
#include "runtime/lib/version.h"
#include "runtime/logdest.h"
#include "runtime/metrics.h"
#include "runtime/notify.h"
#include "runtime/probe.h"
#include "runtime/sched-policy.h"
#include "runtime/sched.h"
#include "runtime/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char usage[] =
    "usage: rotad [--socket PATH] [--config FILE] [--foreground] [--notify-fd N] [--idle-ms MS]\n"
    "             [--idle-fixed] [--idle-low-us US] [--tick-ms MS] [--policy share|quantum]\n"
    "             [--quantum-ms MS] [--low-factor N] [--no-probe]\n"
    "             [--metrics-listen [ADDR:]PORT [--metrics-clients]] [--log stderr|syslog|FILE]\n"
    "\n"
    "rota's per-node coordinator: the node-wide GPU memory ledger, queue-instead-of-OOM, launch scheduling.\n"
    "\n"
    "  --socket PATH   listen on PATH (default: $ROTA_SOCKET, else /run/rota/rotad.sock as root,\n"
    "                  $XDG_RUNTIME_DIR/rota/rotad.sock, else /tmp/rota-UID/rotad.sock)\n"
    "  --config FILE   lines of 'group CGROUP-PATH limit SIZE' (per-group limits, per GPU),\n"
    "                  'credit SIZE' (fast-path memory credit per client, default 64M, 0 = off), and\n"
    "                  admission and policy lines: high-user USER, high-group GROUP, high-cgroup PATH,\n"
    "                  user USER limit SIZE,\n"
    "                  max-connections-per-user N, max-clients-per-user N, hello-timeout-ms N,\n"
    "                  max-weight N, high-stall-ms N, doorbell-max-hz N, grace-ms N\n"
    "                  (docs/design/security.md); high priority is for root and rotad's user by default\n"
    "  --foreground    do not detach (default: detach once listening)\n"
    "  --notify-fd N   write a newline to descriptor N once listening, then close it (s6 readiness)\n"
    "  --idle-ms MS    launch scheduling: a client is idle after MS without launches and with nothing\n"
    "                  in flight; a high-priority client's holds on lower classes end MS after the\n"
    "                  completion that left it nothing in flight (default 2), or sooner: each high\n"
    "                  client learns from its own gaps when ending them earlier costs less GPU idle\n"
    "                  time than it costs its next request (MS is that price)\n"
    "  --idle-fixed    a high client's holds end --idle-ms after that completion, never sooner\n"
    "  --idle-low-us US\n"
    "                  the same for normal and low clients, in microseconds: whom they hold for their\n"
    "                  share runs once they have nothing in flight, no thread waiting to launch and no\n"
    "                  launch for US (0..1000000; default 0: at once, so their host gaps are filled)\n"
    "  --tick-ms MS    scheduling decision period while GPUs are contended (default 1)\n"
    "  --policy NAME   the launch policy among clients of one class (a high client holds the lower\n"
    "                  classes under every policy): share (default) weighted fair share of device time\n"
    "                  by ROTA_WEIGHT; quantum: one normal or low client of a GPU runs at a time (one per\n"
    "                  class with --low-factor 1), --quantum-ms each\n"
    "  --quantum-ms MS the quantum policy's turn (default 20); alone, it chooses --policy quantum\n"
    "  --low-factor N  normal and low clients of a GPU share its device time, where a low client's time\n"
    "                  counts N times (1..1000; default 2: beside one normal client of equal weight low\n"
    "                  gets 1/3, and all that normal clients leave; 1: each class shares on its own)\n"
    "  --no-probe      do not list the node's GPUs at start (with the driver of ROTA_REAL_LIBCUDA, else\n"
    "                  libcuda.so.1, in a short-lived child); librota then places no process itself\n"
    "  --version       print the version and exit\n"
    "  --metrics-listen [ADDR:]PORT\n"
    "                  serve GET /metrics (Prometheus text format 0.0.4) on this TCP address (default\n"
    "                  address 127.0.0.1; [ADDR6]:PORT for IPv6; off by default), see docs/operating.md;\n"
    "                  node and GPU series only: whoever reaches the port reads them\n"
    "  --metrics-clients\n"
    "                  serve the per-client (pid, command) and per-group series there too\n"
    "  --log stderr|syslog|FILE\n"
    "                  where the log goes (default: stderr with --foreground, syslog once detached;\n"
    "                  a detached rotad never writes to the terminal that started it)\n"
    "  --help          print this and exit\n"
    "\n"
    "Environment: ROTA_SOCKET (as --socket), ROTA_LOG=error|warn|info|debug|quiet (default info),\n"
    "NOTIFY_SOCKET (systemd: READY=1 once serving, RELOADING=1 and READY=1 around a reload, STOPPING=1).\n"
    "SIGHUP: reload --config (credit and group limits, for new decisions; clients stay connected; a bad\n"
    "file keeps the current configuration and logs FILE:LINE).\n"
    "Only one rotad serves a socket (PATH.lock holds an OFD lock); a stale socket is replaced.\n"
    "SIGTERM or SIGINT: answer every queued request, release every client, remove the socket, exit 0.\n"
    "\n"
    "Exit codes: 0 stopped cleanly; 1 runtime failure; 2 usage error (bad option or environment);\n"
    "            3 config file error; 4 another rotad already serves the socket.\n";

static int rotad_fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rotad_fatal(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rotad: fatal: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

/* Forks; the parent waits until the child is listening (or failed) and exits with the child's verdict. */
static int rotad_detach(int *ready_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid > 0) {
        close(p[1]);
        char c;
        ssize_t n;
        do {
            n = read(p[0], &c, 1);
        } while (n < 0 && errno == EINTR);
        if (n == 1) _exit(ROTAD_EXIT_OK);
        int st;
        if (waitpid(pid, &st, 0) == pid && WIFEXITED(st)) _exit(WEXITSTATUS(st));
        _exit(ROTAD_EXIT_FAIL);
    }
    close(p[0]);
    setsid();
    int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (dn >= 0) {
        dup2(dn, STDIN_FILENO);
        dup2(dn, STDOUT_FILENO); /* stderr stays: it carries the log */
        if (dn > STDOUT_FILENO) close(dn);
    }
    *ready_fd = p[1];
    return 0;
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *cfgpath = NULL, *metrics_listen = NULL, *log_spec = NULL;
    bool foreground = false, probe = true, metrics_clients = false;
    int notify_fd = -1;
    sched_opts_t so = {0}; /* the scheduler's options, filled here and handed over as they are */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return ROTAD_EXIT_OK;
        } else if (!strcmp(a, "--version")) {
            printf("rotad %s (rota ABI %u)\n", ROTA_VERSION, (unsigned)ROTA_ABI_VERSION);
            return ROTAD_EXIT_OK;
        } else if (!strcmp(a, "--foreground")) {
            foreground = true;
        } else if (!strcmp(a, "--no-probe")) {
            probe = false;
        } else if (!strcmp(a, "--metrics-clients")) {
            metrics_clients = true;
        } else if (!strcmp(a, "--idle-fixed")) {
            so.idle_fixed = true;
        } else if (!strcmp(a, "--socket") && has_val) {
            sock = argv[++i];
            if (!sock[0]) return rotad_fatal(ROTAD_EXIT_USAGE, "--socket: empty path");
        } else if (!strcmp(a, "--config") && has_val) {
            cfgpath = argv[++i];
        } else if (!strcmp(a, "--metrics-listen") && has_val) {
            metrics_listen = argv[++i];
        } else if (!strcmp(a, "--log") && has_val) {
            log_spec = argv[++i];
        } else if (!strcmp(a, "--notify-fd") && has_val) {
            uint64_t v;
            const char *arg = argv[++i];
            if (parse_u64(arg, 0, 65535, &v))
                return rotad_fatal(ROTAD_EXIT_USAGE, "--notify-fd: '%s' is not a descriptor number", arg);
            if (fcntl((int)v, F_GETFD) < 0)
                return rotad_fatal(ROTAD_EXIT_USAGE, "--notify-fd: descriptor %s is not open", arg);
            notify_fd = (int)v;
        } else if ((!strcmp(a, "--idle-ms") || !strcmp(a, "--tick-ms") || !strcmp(a, "--quantum-ms")) && has_val) {
            double v;
            const char *arg = argv[++i];
            double lo = !strcmp(a, "--quantum-ms") ? 0 : 0.05;
            if (parse_double(arg, lo, 10000, &v))
                return rotad_fatal(ROTAD_EXIT_USAGE, "%s: '%s' is not a number of milliseconds in %g..10000", a, arg,
                                   lo);
            uint64_t ns = (uint64_t)(v * 1e6 + 0.5);
            if (!strcmp(a, "--idle-ms")) so.idle_ns = ns;
            else if (!strcmp(a, "--tick-ms")) so.tick_ns = ns;
            else so.quantum_ns = ns;
        } else if (!strcmp(a, "--idle-low-us") && has_val) {
            uint64_t v;
            const char *arg = argv[++i];
            if (parse_u64(arg, 0, 1000000, &v))
                return rotad_fatal(ROTAD_EXIT_USAGE,
                                   "--idle-low-us: '%s' is not a whole number of microseconds in 0..1000000", arg);
            so.idle_low_ns = v * 1000u;
        } else if (!strcmp(a, "--low-factor") && has_val) {
            uint64_t v;
            const char *arg = argv[++i];
            if (parse_u64(arg, 1, SCHED_LOW_FACTOR_MAX, &v))
                return rotad_fatal(ROTAD_EXIT_USAGE, "--low-factor: '%s' is not a whole number in 1..%u", arg,
                                   SCHED_LOW_FACTOR_MAX);
            so.low_factor = (unsigned)v;
        } else if (!strcmp(a, "--policy") && has_val) {
            const char *arg = argv[++i];
            if (!(so.policy = sched_policy_find(arg)))
                return rotad_fatal(ROTAD_EXIT_USAGE, "--policy: unknown policy '%s' (known: %s)", arg,
                                   sched_policy_names());
        } else if (!strcmp(a, "--socket") || !strcmp(a, "--config") || !strcmp(a, "--notify-fd") ||
                   !strcmp(a, "--idle-ms") || !strcmp(a, "--tick-ms") || !strcmp(a, "--quantum-ms") ||
                   !strcmp(a, "--low-factor") || !strcmp(a, "--idle-low-us") || !strcmp(a, "--policy") ||
                   !strcmp(a, "--metrics-listen") || !strcmp(a, "--log")) {
            fprintf(stderr, "rotad: fatal: %s needs a value\n%s", a, usage);
            return ROTAD_EXIT_USAGE;
        } else {
            fprintf(stderr, "rotad: fatal: unknown argument '%s'\n%s", a, usage);
            return ROTAD_EXIT_USAGE;
        }
    }
    if (metrics_clients && !metrics_listen)
        return rotad_fatal(ROTAD_EXIT_USAGE, "--metrics-clients: only with --metrics-listen");
    int log_level = 1;
    const char *lv = getenv("ROTA_LOG");
    if (lv && lv[0]) {
        /* The same names librota takes (error|warn|info|debug); rotad's warnings share the error level. */
        if (!strcmp(lv, "quiet") || !strcmp(lv, "warn") || !strcmp(lv, "warning") || !strcmp(lv, "error"))
            log_level = 0;
        else if (!strcmp(lv, "info")) log_level = 1;
        else if (!strcmp(lv, "debug")) log_level = 2;
        else return rotad_fatal(ROTAD_EXIT_USAGE, "ROTA_LOG: bad value '%s' (expected error, warn, info, debug or quiet)", lv);
    }
    if (!sock) {
        const char *env = getenv("ROTA_SOCKET");
        if (env && !env[0]) return rotad_fatal(ROTAD_EXIT_USAGE, "ROTA_SOCKET is set but empty");
        sock = env;
    }
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (sockpath_resolve(sock, path, sizeof path))
        return rotad_fatal(ROTAD_EXIT_USAGE, "socket path '%s' is too long (at most %zu bytes)", sock ? sock : "",
                           sizeof path - 1);
    if (notify_init())
        return rotad_fatal(ROTAD_EXIT_USAGE, "NOTIFY_SOCKET: '%s' is not an absolute or abstract ('@') socket path",
                           getenv("NOTIFY_SOCKET"));
    char lerr[512];
    if (logdest_open(log_spec, foreground, lerr, sizeof lerr)) return rotad_fatal(ROTAD_EXIT_USAGE, "%s", lerr);
    metrics_t *metrics = NULL;
    static config_t cfg;
    config_init(&cfg);
    if (cfgpath) {
        char err[512];
        if (config_load(cfgpath, &cfg, err, sizeof err))
            return rotad_fatal(ROTAD_EXIT_CONFIG, "config: %s", err);
    }
    /* Signals are read from a signalfd by the loop. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* --quantum-ms alone chooses the quantum policy, as before --policy existed; with another policy it is an error */
    if (so.quantum_ns && so.policy && so.policy != &sched_policy_quantum)
        return rotad_fatal(ROTAD_EXIT_USAGE, "--quantum-ms: only with --policy quantum");
    so.log_level = log_level;
    server_opts_t o = {.socket_path = path, .cfg = &cfg, .config_path = cfgpath, .log_level = log_level, .sched = so,
                       .metrics_clients = metrics_clients};
    server_t *s;
    char err[512];
    int rc = server_open(&o, &s, err, sizeof err);
    if (rc) return rotad_fatal(rc, "unable to start: %s", err);
    if (metrics_listen) { /* after the lock: a second rotad on this socket exits 4, not "address in use" */
        int me = metrics_open(metrics_listen, &metrics, lerr, sizeof lerr);
        if (me) {
            server_close(s);
            return rotad_fatal(me == -EINVAL ? ROTAD_EXIT_USAGE : ROTAD_EXIT_FAIL, "%s", lerr);
        }
        server_set_metrics(s, metrics);
    }
    /* The probe runs before any thread exists (it forks); what it found is logged once the log is where it goes,
     * never on the terminal of a rotad that detaches. */
    rota_place_cand_t gpus[ROTA_MAX_DEVICES];
    char why[256];
    int ngpus = 0;
    if (probe) {
        ngpus = probe_gpus(gpus, why, sizeof why);
        if (ngpus >= 0) ngpus = server_add_gpus(s, gpus, ngpus);
    }
    int ready_fd = -1;
    if (!foreground) {
        int e = rotad_detach(&ready_fd);
        if (e) {
            server_close(s);
            return rotad_fatal(ROTAD_EXIT_FAIL, "unable to detach: %s", strerror(-e));
        }
        server_set_pid(s);
    }
    int le = logdest_start(); /* after detaching: the syslog thread lives in the process that serves */
    if (le && log_level >= 0) fprintf(stderr, "rotad: warning: unable to log to %s: %s\n", logdest_name(), strerror(-le));
    if (probe && ngpus < 0 && log_level >= 1)
        fprintf(stderr, "rotad: info: not listing the node's GPUs: %s; librota places no process\n", why);
    if (probe && ngpus >= 0 && log_level >= 1)
        fprintf(stderr, "rotad: info: %d GPU%s on this node\n", ngpus, ngpus == 1 ? "" : "s");
    for (int i = 0; probe && i < ngpus && log_level >= 2; i++) {
        char id[PROTO_UUID_STR];
        proto_uuid_str(gpus[i].uuid, id);
        fprintf(stderr, "rotad: debug: GPU %d: %s, %llu bytes\n", i, id, (unsigned long long)gpus[i].total_mem);
    }
    if (metrics && log_level >= 1)
        fprintf(stderr, "rotad: info: serving metrics on http://%s/metrics\n", metrics_address(metrics));
    int notify[2], nnotify = 0;
    if (notify_fd >= 0) notify[nnotify++] = notify_fd;
    if (ready_fd >= 0) notify[nnotify++] = ready_fd;
    rc = server_loop(s, notify, nnotify, err, sizeof err);
    server_close(s);
    metrics_close(metrics);
    if (rc) rotad_fatal(rc, "%s", err);
    else if (log_level >= 1) fprintf(stderr, "rotad: info: stopped\n");
    logdest_stop();
    return rc ? rc : ROTAD_EXIT_OK;
}
