/* rotad-main.c - rotad's command line: options, daemonising, readiness notification, exit codes. */
#include "runtime/config.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/sockpath.h"
#include "runtime/lib/version.h"
#include "runtime/logdest.h"
#include "runtime/metrics.h"
#include "runtime/mps.h"
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

/* rotad --help, in parts around what the policy table (sched-policy.c) supplies: the policies' names, what each
 * does, and the options each owns. */
static const char usage_head[] =
    "usage: rotad [--socket PATH] [--config FILE] [--foreground] [--notify-fd N] [--idle-ms MS]\n"
    "             [--idle-fixed] [--idle-low-us US] [--tick-ms MS] [--policy ";
static const char usage_synopsis_end[] = "[--low-factor N] [--no-probe]\n"
    "             [--mps [--mps-control PATH] [--mps-share CLASS=PCT[,...]] [--mps-check-ms MS]]\n";
static const char usage_body[] =
    "             [--metrics-listen [ADDR:]PORT [--metrics-clients]] [--log stderr|syslog|FILE]\n"
    "\n"
    "rota's per-node coordinator: the node-wide GPU memory ledger, queue-instead-of-OOM, launch scheduling.\n"
    "\n"
    "  --socket PATH   listen on PATH (default: $ROTA_SOCKET, else /run/rota/rotad.sock as root,\n"
    "                  $XDG_RUNTIME_DIR/rota/rotad.sock, else /tmp/rota-UID/rotad.sock)\n"
    "  --config FILE   lines of 'group CGROUP-PATH limit SIZE' (per-group limits, per GPU),\n"
    "                  'credit SIZE' (fast-path memory credit per client, default 64M, 0 = off), and\n"
    "                  admission and policy lines: high-user USER, high-group GROUP, high-cgroup PATH,\n"
    "                  user USER limit SIZE, grant-required PATH, grant-token-ms N,\n"
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
    "                  classes under every policy):\n";
static const char usage_tail[] =
    "  --low-factor N  normal and low clients of a GPU share its device time, where a low client's time\n"
    "                  counts N times (1..1000; default 2: beside one normal client of equal weight low\n"
    "                  gets 1/3, and all that normal clients leave; 1: each class shares on its own)\n"
    "  --mps           start NVIDIA's MPS control daemon (or attach to a running one) and give each class\n"
    "                  its share of the GPUs' SMs: high all, normal and low --mps-share; librota sets\n"
    "                  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE before the process's first context\n"
    "                  (docs/design/scheduling.md, MPS mode)\n"
    "  --mps-control PATH\n"
    "                  the control program (default nvidia-cuda-mps-control, searched in PATH)\n"
    "  --mps-share CLASS=PCT[,CLASS=PCT]\n"
    "                  normal's and low's share of the SMs, 1..100 (default normal=60,low=50)\n"
    "  --mps-check-ms MS\n"
    "                  how often rotad checks that the daemon answers, and starts one when it does not\n"
    "                  (10..3600000; default 1000)\n"
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

#define USAGE_COL 18 /* where an option's description starts */

/* Prints text, its lines after the first indented to column col. */
static void rotad_usage_text(FILE *f, const char *text, int col)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fprintf(f, "%*s", col, "");
    }
}

static void rotad_usage(FILE *f)
{
    const sched_policy_t *p;
    int w = 0;
    fprintf(f, "%s%s]\n             ", usage_head, sched_policy_names());
    for (unsigned i = 0; (p = sched_policy_at(i)); i++) {
        for (unsigned j = 0; j < p->nopts; j++) fprintf(f, "[%s %s] ", p->opts[j].flag, p->opts[j].arg);
        if ((int)strlen(p->name) > w) w = (int)strlen(p->name);
    }
    fputs(usage_synopsis_end, f);
    fputs(usage_body, f);
    for (unsigned i = 0; (p = sched_policy_at(i)); i++) { /* the table's first is the default */
        fprintf(f, "%*s%-*s  %s", USAGE_COL + 2, "", w, p->name, i ? "" : "(default) ");
        rotad_usage_text(f, p->help, USAGE_COL + 2 + w + 2);
        fputc('\n', f);
    }
    for (unsigned i = 0; (p = sched_policy_at(i)); i++)
        for (unsigned j = 0; j < p->nopts; j++) {
            const sched_policy_opt_t *o = &p->opts[j];
            char syn[64];
            int n = snprintf(syn, sizeof syn, "%s %s", o->flag, o->arg);
            if (n < USAGE_COL - 2) fprintf(f, "  %-*s", USAGE_COL - 2, syn);
            else fprintf(f, "  %s\n%*s", syn, USAGE_COL, "");
            rotad_usage_text(f, o->help, USAGE_COL);
            fprintf(f, " (default %g); alone, it chooses --policy %s\n", (double)o->def / o->scale, p->name);
        }
    fputs(usage_tail, f);
}

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

/* What rotad's command line asks for. */
typedef struct rotad_args {
    const char *sock, *cfgpath, *metrics_listen, *log_spec;
    bool foreground, probe, metrics_clients;
    int notify_fd;
    mps_opts_t mps;   /* --mps* (runtime/mps.h) */
    bool mps_set;     /* an --mps-* option was given (only with --mps) */
    sched_opts_t so; /* the scheduler's options, filled here and handed over as they are */
} rotad_args_t;

/* One option with a value (argv[i] is a, val its value): 0, or an exit code after the message. */
static int rotad_arg_value(rotad_args_t *ra, const char *a, const char *val)
{
    sched_opts_t *so = &ra->so;
    char msg[256];
    uint64_t v;
    double d;
    if (!strcmp(a, "--socket")) {
        ra->sock = val;
        if (!val[0]) return rotad_fatal(ROTAD_EXIT_USAGE, "--socket: empty path");
    } else if (!strcmp(a, "--config")) {
        ra->cfgpath = val;
    } else if (!strcmp(a, "--metrics-listen")) {
        ra->metrics_listen = val;
    } else if (!strcmp(a, "--log")) {
        ra->log_spec = val;
    } else if (!strcmp(a, "--notify-fd")) {
        if (parse_u64(val, 0, 65535, &v))
            return rotad_fatal(ROTAD_EXIT_USAGE, "--notify-fd: '%s' is not a descriptor number", val);
        if (fcntl((int)v, F_GETFD) < 0)
            return rotad_fatal(ROTAD_EXIT_USAGE, "--notify-fd: descriptor %s is not open", val);
        ra->notify_fd = (int)v;
    } else if (!strcmp(a, "--idle-ms") || !strcmp(a, "--tick-ms")) {
        if (parse_double(val, 0.05, 10000, &d))
            return rotad_fatal(ROTAD_EXIT_USAGE, "%s: '%s' is not a number of milliseconds in %g..10000", a, val,
                               0.05);
        *(!strcmp(a, "--idle-ms") ? &so->idle_ns : &so->tick_ns) = (uint64_t)(d * 1e6 + 0.5);
    } else if (!strcmp(a, "--idle-low-us")) {
        if (parse_u64(val, 0, 1000000, &v))
            return rotad_fatal(ROTAD_EXIT_USAGE,
                               "--idle-low-us: '%s' is not a whole number of microseconds in 0..1000000", val);
        so->idle_low_ns = v * 1000u;
    } else if (!strcmp(a, "--low-factor")) {
        if (parse_u64(val, 1, SCHED_LOW_FACTOR_MAX, &v))
            return rotad_fatal(ROTAD_EXIT_USAGE, "--low-factor: '%s' is not a whole number in 1..%u", val,
                               SCHED_LOW_FACTOR_MAX);
        so->low_factor = (unsigned)v;
    } else if (!strcmp(a, "--mps-control")) {
        if (!val[0]) return rotad_fatal(ROTAD_EXIT_USAGE, "--mps-control: empty path");
        ra->mps.control = val;
        ra->mps_set = true;
    } else if (!strcmp(a, "--mps-share")) {
        if (mps_share_parse(&ra->mps, val, msg, sizeof msg)) return rotad_fatal(ROTAD_EXIT_USAGE, "%s", msg);
        ra->mps_set = true;
    } else if (!strcmp(a, "--mps-check-ms")) {
        if (parse_u64(val, 10, 3600000, &v))
            return rotad_fatal(ROTAD_EXIT_USAGE, "--mps-check-ms: '%s' is not a whole number of milliseconds in "
                               "10..3600000", val);
        ra->mps.check_ms = (unsigned)v;
        ra->mps_set = true;
    } else if (!strcmp(a, "--policy")) {
        if (!(so->policy = sched_policy_find(val)))
            return rotad_fatal(ROTAD_EXIT_USAGE, "--policy: unknown policy '%s' (known: %s)", val,
                               sched_policy_names());
    } else if (sched_policy_opt_set(so, a, val, msg, sizeof msg)) { /* a policy's own (sched-policy.c) */
        return rotad_fatal(ROTAD_EXIT_USAGE, "%s", msg);
    }
    return 0;
}

/* rotad's own options that take a value (rotad_arg_value); a policy's are in its table (sched-policy.h). */
static const char *const rotad_value_opts[] = {
    "--socket", "--config", "--notify-fd", "--idle-ms", "--tick-ms", "--idle-low-us", "--low-factor", "--policy",
    "--metrics-listen", "--log", "--mps-control", "--mps-share", "--mps-check-ms",
};

/* Whether option a takes a value: rotad's own, or one a policy owns. */
static bool rotad_takes_value(const char *a)
{
    for (size_t i = 0; i < sizeof rotad_value_opts / sizeof rotad_value_opts[0]; i++)
        if (!strcmp(a, rotad_value_opts[i])) return true;
    return sched_policy_opt_find(a, NULL) != NULL;
}

/* The command line: -1 to go on, or an exit code (--help, --version, a usage error). */
static int rotad_parse_args(int argc, char **argv, rotad_args_t *ra)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            rotad_usage(stdout);
            return ROTAD_EXIT_OK;
        } else if (!strcmp(a, "--version")) {
            printf("rotad %s (rota ABI %u)\n", ROTA_VERSION, (unsigned)ROTA_ABI_VERSION);
            return ROTAD_EXIT_OK;
        } else if (!strcmp(a, "--foreground")) {
            ra->foreground = true;
        } else if (!strcmp(a, "--no-probe")) {
            ra->probe = false;
        } else if (!strcmp(a, "--metrics-clients")) {
            ra->metrics_clients = true;
        } else if (!strcmp(a, "--mps")) {
            ra->mps.on = true;
        } else if (!strcmp(a, "--idle-fixed")) {
            ra->so.idle_fixed = true;
        } else if (rotad_takes_value(a) && i + 1 < argc) {
            int rc = rotad_arg_value(ra, a, argv[++i]);
            if (rc) return rc;
        } else {
            if (rotad_takes_value(a)) fprintf(stderr, "rotad: fatal: %s needs a value\n", a);
            else fprintf(stderr, "rotad: fatal: unknown argument '%s'\n", a);
            rotad_usage(stderr);
            return ROTAD_EXIT_USAGE;
        }
    }
    if (ra->metrics_clients && !ra->metrics_listen)
        return rotad_fatal(ROTAD_EXIT_USAGE, "--metrics-clients: only with --metrics-listen");
    if (ra->mps_set && !ra->mps.on)
        return rotad_fatal(ROTAD_EXIT_USAGE, "--mps-control, --mps-share and --mps-check-ms: only with --mps");
    char msg[256];
    if (mps_opts_check(&ra->mps, msg, sizeof msg)) return rotad_fatal(ROTAD_EXIT_USAGE, "%s", msg);
    return -1;
}

/* ROTA_LOG: the log level (0 warnings, 1 info, 2 debug), or -1 for a bad value (after the message). */
static int rotad_log_level(void)
{
    const char *lv = getenv("ROTA_LOG");
    if (!lv || !lv[0]) return 1;
    /* The same names librota takes (error|warn|info|debug); rotad's warnings share the error level. */
    if (!strcmp(lv, "quiet") || !strcmp(lv, "warn") || !strcmp(lv, "warning") || !strcmp(lv, "error")) return 0;
    if (!strcmp(lv, "info")) return 1;
    if (!strcmp(lv, "debug")) return 2;
    rotad_fatal(ROTAD_EXIT_USAGE, "ROTA_LOG: bad value '%s' (expected error, warn, info, debug or quiet)", lv);
    return -1;
}

/* The socket's path: --socket, else ROTA_SOCKET, else the default (runtime/lib/sockpath.h). 0 or an exit code. */
static int rotad_socket_path(const char *sock, char *path, size_t n)
{
    if (!sock) {
        const char *env = getenv("ROTA_SOCKET");
        if (env && !env[0]) return rotad_fatal(ROTAD_EXIT_USAGE, "ROTA_SOCKET is set but empty");
        sock = env;
    }
    if (sockpath_resolve(sock, path, n))
        return rotad_fatal(ROTAD_EXIT_USAGE, "socket path '%s' is too long (at most %zu bytes)", sock ? sock : "",
                           n - 1);
    return 0;
}

/* What the probe found (ngpus < 0: why not), once the log is where it goes. */
static void rotad_log_gpus(int log_level, const rota_place_cand_t *gpus, int ngpus, const char *why)
{
    if (ngpus < 0 && log_level >= 1)
        fprintf(stderr, "rotad: info: not listing the node's GPUs: %s; librota places no process\n", why);
    if (ngpus >= 0 && log_level >= 1)
        fprintf(stderr, "rotad: info: %d GPU%s on this node\n", ngpus, ngpus == 1 ? "" : "s");
    for (int i = 0; i < ngpus && log_level >= 2; i++) {
        char id[PROTO_UUID_STR];
        proto_uuid_str(gpus[i].uuid, id);
        fprintf(stderr, "rotad: debug: GPU %d: %s, %llu bytes\n", i, id, (unsigned long long)gpus[i].total_mem);
    }
}

/* From a started server to the end: the metrics endpoint, the probe, detaching, the loop. Returns the exit code. */
static int rotad_run(server_t *s, const rotad_args_t *ra, int log_level)
{
    char err[512];
    metrics_t *metrics = NULL;
    if (ra->metrics_listen) { /* after the lock: a second rotad on this socket exits 4, not "address in use" */
        int me = metrics_open(ra->metrics_listen, &metrics, err, sizeof err);
        if (me) {
            server_close(s);
            return rotad_fatal(me == -EINVAL ? ROTAD_EXIT_USAGE : ROTAD_EXIT_FAIL, "%s", err);
        }
        server_set_metrics(s, metrics);
    }
    /* The probe runs before any thread exists (it forks); what it found is logged once the log is where it goes,
     * never on the terminal of a rotad that detaches. */
    rota_place_cand_t gpus[ROTA_MAX_DEVICES];
    char why[256];
    int ngpus = 0;
    if (ra->probe) {
        ngpus = probe_gpus(gpus, why, sizeof why);
        if (ngpus >= 0) ngpus = server_add_gpus(s, gpus, ngpus);
    }
    int ready_fd = -1;
    if (!ra->foreground) {
        int e = rotad_detach(&ready_fd);
        if (e) {
            server_close(s);
            return rotad_fatal(ROTAD_EXIT_FAIL, "unable to detach: %s", strerror(-e));
        }
        server_set_pid(s);
    }
    int le = logdest_start(); /* after detaching: the syslog thread lives in the process that serves */
    if (le && log_level >= 0) fprintf(stderr, "rotad: warning: unable to log to %s: %s\n", logdest_name(), strerror(-le));
    if (ra->probe) rotad_log_gpus(log_level, gpus, ngpus, why);
    if (metrics && log_level >= 1)
        fprintf(stderr, "rotad: info: serving metrics on http://%s/metrics\n", metrics_address(metrics));
    mps_t *mps = NULL; /* after detaching: its thread lives in the process that serves */
    if (ra->mps.on && mps_start(&ra->mps, server_region(s), log_level, &mps, err, sizeof err)) {
        server_close(s);
        metrics_close(metrics);
        if (ready_fd >= 0) close(ready_fd); /* the detaching parent then exits with our status */
        return rotad_fatal(ROTAD_EXIT_FAIL, "%s", err);
    }
    int notify[2], nnotify = 0;
    if (ra->notify_fd >= 0) notify[nnotify++] = ra->notify_fd;
    if (ready_fd >= 0) notify[nnotify++] = ready_fd;
    int rc = server_loop(s, notify, nnotify, err, sizeof err);
    mps_stop(mps);
    server_close(s);
    metrics_close(metrics);
    if (rc) rotad_fatal(rc, "%s", err);
    else if (log_level >= 1) fprintf(stderr, "rotad: info: stopped\n");
    logdest_stop();
    return rc ? rc : ROTAD_EXIT_OK;
}

int main(int argc, char **argv)
{
    rotad_args_t ra = {.probe = true, .notify_fd = -1};
    mps_opts_init(&ra.mps);
    int rc = rotad_parse_args(argc, argv, &ra);
    if (rc >= 0) return rc;
    int log_level = rotad_log_level();
    if (log_level < 0) return ROTAD_EXIT_USAGE;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if ((rc = rotad_socket_path(ra.sock, path, sizeof path))) return rc;
    if (notify_init())
        return rotad_fatal(ROTAD_EXIT_USAGE, "NOTIFY_SOCKET: '%s' is not an absolute or abstract ('@') socket path",
                           getenv("NOTIFY_SOCKET"));
    char err[512];
    if (logdest_open(ra.log_spec, ra.foreground, err, sizeof err)) return rotad_fatal(ROTAD_EXIT_USAGE, "%s", err);
    static config_t cfg;
    config_init(&cfg);
    if (ra.cfgpath && config_load(ra.cfgpath, &cfg, err, sizeof err))
        return rotad_fatal(ROTAD_EXIT_CONFIG, "config: %s", err);
    /* Signals are read from a signalfd by the loop. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A policy's option alone chooses its policy (--quantum-ms: quantum); with another policy it is an error. */
    if (sched_policy_resolve(&ra.so, err, sizeof err)) return rotad_fatal(ROTAD_EXIT_USAGE, "%s", err);
    ra.so.log_level = log_level;
    server_opts_t o = {.socket_path = path, .cfg = &cfg, .config_path = ra.cfgpath, .log_level = log_level,
                       .sched = ra.so, .metrics_clients = ra.metrics_clients};
    server_t *s;
    rc = server_open(&o, &s, err, sizeof err);
    if (rc) return rotad_fatal(rc, "unable to start: %s", err);
    return rotad_run(s, &ra, log_level);
}
