/* mps.c - rotad --mps: starts or attaches to the MPS control daemon, publishes each class's SM share, watches it. */
#include "runtime/mps.h"

#include "runtime/lib/errmsg.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/prio.h"
#include "runtime/logdest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MPS_RUN_TIMEOUT_MS 5000 /* a control command that takes longer is killed and counts as failed */
#define MPS_QUERY "get_default_active_thread_percentage\n"

struct mps {
    mps_opts_t o;
    rota_region_t *r;
    int log_level;
    bool started;                /* rotad started the daemon it uses (so it quits it at the end) */
    bool up;                     /* the last check found it answering */
    bool warned;                 /* a failed start was logged in this outage */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

void mps_opts_init(mps_opts_t *o)
{
    *o = (mps_opts_t){.on = false, .control = MPS_CONTROL_DEFAULT, .check_ms = MPS_CHECK_MS_DEFAULT};
    o->pct[ROTA_PRIO_HIGH] = 100;
    o->pct[ROTA_PRIO_NORMAL] = 60;
    o->pct[ROTA_PRIO_LOW] = 50;
}

int mps_share_parse(mps_opts_t *o, const char *val, char *err, size_t errlen)
{
    char buf[64];
    if (strlen(val) >= sizeof buf || !val[0])
        return errmsg(err, errlen, -EINVAL, "--mps-share: '%.64s' is not CLASS=PCT[,CLASS=PCT]", val);
    memcpy(buf, val, strlen(val) + 1);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        enum rota_prio p;
        uint64_t v;
        if (!eq) return errmsg(err, errlen, -EINVAL, "--mps-share: '%s' is not CLASS=PCT", item);
        *eq = '\0';
        if (prio_parse(item, &p) || p == ROTA_PRIO_HIGH)
            return errmsg(err, errlen, -EINVAL, "--mps-share: '%s' is not normal or low (high is unrestricted)", item);
        if (parse_u64(eq + 1, 1, 100, &v))
            return errmsg(err, errlen, -EINVAL, "--mps-share: %s=%s: not a whole percentage in 1..100", item, eq + 1);
        o->pct[p] = (unsigned)v;
    }
    return 0;
}

int mps_opts_check(const mps_opts_t *o, char *err, size_t errlen)
{
    if (o->pct[ROTA_PRIO_LOW] > o->pct[ROTA_PRIO_NORMAL])
        return errmsg(err, errlen, -EINVAL, "--mps-share: low's %u %% is above normal's %u %%", o->pct[ROTA_PRIO_LOW],
                      o->pct[ROTA_PRIO_NORMAL]);
    return 0;
}

static void mps_log(const mps_t *m, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mps_log(const mps_t *m, int level, const char *fmt, ...)
{
    if (level > m->log_level) return;
    va_list ap;
    va_start(ap, fmt);
    logdest_vline(level, "MPS: ", fmt, ap);
    va_end(ap);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Runs CONTROL [arg] with input on its stdin (NULL: /dev/null); its stdout and stderr into out (NUL-terminated,
 * truncated). Its exit status (0..255), or -errno: -ETIMEDOUT when it ran past MPS_RUN_TIMEOUT_MS (killed). */
static int mps_run(const char *control, const char *arg, const char *input, char *out, size_t outlen)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1};
    int rc;
    out[0] = '\0';
    if (pipe2(in, O_CLOEXEC) || pipe2(o, O_CLOEXEC)) {
        rc = -errno;
        goto out_close;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    posix_spawn_file_actions_adddup2(&fa, o[1], 2);
    /* Nothing else of rotad's: a daemon it starts lives on, and must not hold a readiness descriptor (--notify-fd,
     * the detaching parent's pipe) or anything else open after rotad closed it. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    char *argv[] = {(char *)control, (char *)arg, NULL};
    pid_t pid;
    rc = -posix_spawnp(&pid, control, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) goto out_close;
    close(in[0]);
    close(o[1]);
    in[0] = o[1] = -1;
    if (input) {
        /* A few bytes into an empty pipe: never blocks. A daemon that died makes it EPIPE (SIGPIPE is ignored). */
        ssize_t w = write(in[1], input, strlen(input));
        (void)w;
    }
    close(in[1]);
    in[1] = -1;
    size_t got = 0;
    uint64_t deadline = mono_ms() + MPS_RUN_TIMEOUT_MS;
    bool timed_out = false;
    for (;;) {
        uint64_t now = mono_ms();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = o[0], .events = POLLIN};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            timed_out = n == 0;
            break;
        }
        char tmp[256];
        ssize_t r = read(o[0], tmp, sizeof tmp);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* EOF: it (and whatever it started) closed the pipe */
        size_t keep = (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
        memcpy(out + got, tmp, keep);
        got += keep;
        out[got] = '\0';
    }
    if (timed_out) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    rc = timed_out ? -ETIMEDOUT : WIFEXITED(st) ? WEXITSTATUS(st) : -ECHILD;
out_close:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) close(in[i]);
        if (o[i] >= 0) close(o[i]);
    }
    return rc;
}

/* Strips the trailing newlines and spaces of s (for log lines). */
static char *mps_chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* Whether a daemon answers the query (a number). */
static bool mps_answers(const mps_t *m)
{
    char out[256];
    int rc = mps_run(m->o.control, NULL, MPS_QUERY, out, sizeof out);
    double v;
    char *nl = strchr(out, '\n');
    if (nl) *nl = '\0';
    bool ok = rc == 0 && parse_double(out, 0, 100, &v) == 0;
    if (!ok) mps_log(m, 2, "%s: %s", m->o.control, rc < 0 ? strerror(-rc) : out[0] ? out : "no answer");
    return ok;
}

/* Starts a daemon (CONTROL -d) and waits until it answers: 0, or -errno with err. */
static int mps_launch(mps_t *m, char *err, size_t errlen)
{
    char out[256];
    int rc = mps_run(m->o.control, "-d", NULL, out, sizeof out);
    if (rc != 0) {
        snprintf(err, errlen, "'%s -d' %s%s%s", m->o.control,
                 rc < 0 ? strerror(-rc) : "failed", out[0] ? ": " : "", mps_chomp(out));
        return rc < 0 ? rc : -EIO;
    }
    for (int i = 0; i < 50; i++) { /* -d returns once it forked; its socket may come a moment later */
        if (mps_answers(m)) return 0;
        usleep(20000);
    }
    snprintf(err, errlen, "'%s -d' succeeded, but no daemon answers", m->o.control);
    return -EIO;
}

static void mps_publish(mps_t *m, bool on)
{
    for (int p = 0; p < ROTA_PRIO_COUNT; p++) atomic_store(&m->r->mps_pct[p], on ? m->o.pct[p] : 0u);
}

static void *mps_thread(void *arg)
{
    mps_t *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)m->o.check_ms * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        while (!m->stop && pthread_cond_timedwait(&m->cv, &m->mu, &ts) != ETIMEDOUT) {
        }
        if (m->stop) break;
        pthread_mutex_unlock(&m->mu);
        bool up = mps_answers(m);
        char err[512] = "";
        if (!up) {
            if (m->up) {
                mps_log(m, 0, "the control daemon ('%s') does not answer: new processes run time-sliced, with "
                              "rota's holds, until one does; starting one", m->o.control);
                mps_publish(m, false);
                m->up = false;
            }
            up = mps_launch(m, err, sizeof err) == 0;
            if (up) {
                m->started = true;
            } else if (!m->warned) { /* once per outage: the check runs every --mps-check-ms */
                mps_log(m, 0, "unable to start the control daemon: %s; trying again every %u ms", err, m->o.check_ms);
                m->warned = true;
            }
        }
        if (up && !m->up) {
            mps_log(m, 1, "the control daemon answers again: the classes' SM shares apply to new processes");
            mps_publish(m, true);
            m->warned = false;
        }
        m->up = up;
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int mps_start(const mps_opts_t *o, rota_region_t *r, int log_level, mps_t **out, char *err, size_t errlen)
{
    *out = NULL;
    mps_t *m = calloc(1, sizeof *m);
    if (!m) return errmsg(err, errlen, -EINVAL, "out of memory"), -ENOMEM;
    m->o = *o;
    m->r = r;
    m->log_level = log_level;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    if (mps_answers(m)) {
        mps_log(m, 1, "attached to the running control daemon ('%s')", o->control);
    } else {
        char why[400];
        rc = mps_launch(m, why, sizeof why);
        if (rc) {
            snprintf(err, errlen, "--mps: unable to start the MPS control daemon: %s", why);
            goto out_free;
        }
        m->started = true;
        mps_log(m, 1, "started the control daemon ('%s -d')", o->control);
    }
    m->up = true;
    mps_publish(m, true);
    mps_log(m, 1, "SM shares: high %u %%, normal %u %%, low %u %%", o->pct[ROTA_PRIO_HIGH], o->pct[ROTA_PRIO_NORMAL],
            o->pct[ROTA_PRIO_LOW]);
    rc = -pthread_create(&m->thread, NULL, mps_thread, m);
    if (rc) {
        snprintf(err, errlen, "--mps: unable to start its thread: %s", strerror(-rc));
        mps_publish(m, false);
        goto out_quit;
    }
    *out = m;
    return 0;
out_quit:
    if (m->started) {
        char o2[64];
        mps_run(m->o.control, NULL, "quit\n", o2, sizeof o2);
    }
out_free:
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
    return rc;
}

void mps_stop(mps_t *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    mps_publish(m, false);
    if (m->started) {
        char out[256];
        int rc = mps_run(m->o.control, NULL, "quit\n", out, sizeof out);
        if (rc) mps_log(m, 0, "unable to stop the control daemon it started: %s", rc < 0 ? strerror(-rc) : mps_chomp(out));
        else mps_log(m, 1, "stopped the control daemon it started");
    }
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
