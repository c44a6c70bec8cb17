/* logdest.c - rotad --log: descriptor 2 to a file, or through a pipe and a thread to syslog(3). */
#include "runtime/logdest.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

enum { LOGDEST_STDERR, LOGDEST_FILE, LOGDEST_SYSLOG };

static int logdest_kind = LOGDEST_STDERR;
static int logdest_file = -1;
static char logdest_path[4096] = "stderr";
static pthread_t logdest_thread;
static bool logdest_running;
static int logdest_rd = -1;

int logdest_open(const char *spec, bool foreground, char *err, size_t errlen)
{
    if (!spec) spec = foreground ? "stderr" : "syslog";
    if (!spec[0]) {
        snprintf(err, errlen, "--log: empty value (expected stderr, syslog or a file path)");
        return -EINVAL;
    }
    if (!strcmp(spec, "stderr")) {
        logdest_kind = LOGDEST_STDERR;
    } else if (!strcmp(spec, "syslog")) {
        logdest_kind = LOGDEST_SYSLOG;
    } else {
        if (strlen(spec) >= sizeof logdest_path) {
            snprintf(err, errlen, "--log: path too long");
            return -ENAMETOOLONG;
        }
        int fd = open(spec, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
        if (fd < 0) {
            int e = errno;
            snprintf(err, errlen, "--log: unable to open %s: %s", spec, strerror(e));
            return -e;
        }
        logdest_kind = LOGDEST_FILE;
        logdest_file = fd;
    }
    snprintf(logdest_path, sizeof logdest_path, "%s", spec);
    return 0;
}

const char *logdest_name(void)
{
    return logdest_path;
}

/* "rotad: LEVEL: text" -> priority and text */
static void logdest_forward(char *line)
{
    static const struct {
        const char *prefix;
        int prio;
    } lv[] = {{"fatal: ", LOG_ERR}, {"warning: ", LOG_WARNING}, {"info: ", LOG_INFO}, {"debug: ", LOG_DEBUG}};
    const char *t = line;
    int prio = LOG_NOTICE;
    if (!strncmp(t, "rotad: ", 7)) t += 7;
    for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++)
        if (!strncmp(t, lv[i].prefix, strlen(lv[i].prefix))) {
            prio = lv[i].prio;
            t += strlen(lv[i].prefix);
            break;
        }
    syslog(prio, "%s", t);
}

static void *logdest_main(void *arg)
{
    (void)arg;
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(logdest_rd, buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = 0;
        char *p = buf, *nl;
        while ((nl = strchr(p, '\n'))) {
            *nl = 0;
            if (*p) logdest_forward(p);
            p = nl + 1;
        }
        len = (size_t)(buf + len - p);
        memmove(buf, p, len);
        if (len == sizeof buf - 1) { /* a line longer than the buffer: out in pieces */
            buf[len] = 0;
            logdest_forward(buf);
            len = 0;
        }
    }
    if (len) {
        buf[len] = 0;
        logdest_forward(buf);
    }
    closelog();
    return NULL;
}

int logdest_start(void)
{
    if (logdest_kind == LOGDEST_FILE) {
        int rc = dup2(logdest_file, STDERR_FILENO) < 0 ? -errno : 0;
        close(logdest_file);
        logdest_file = -1;
        return rc;
    }
    if (logdest_kind != LOGDEST_SYSLOG) return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    /* A writer never waits: when syslog is slower than rotad logs, lines are dropped, not the scheduler held. */
    fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
    openlog("rotad", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    logdest_rd = p[0];
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signal: the loop reads them */
    int e = pthread_create(&logdest_thread, NULL, logdest_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        close(p[0]);
        close(p[1]);
        logdest_rd = -1;
        return -e;
    }
    logdest_running = true;
    fflush(stderr);
    int rc = dup2(p[1], STDERR_FILENO) < 0 ? -errno : 0;
    close(p[1]);
    return rc;
}

void logdest_stop(void)
{
    if (!logdest_running) return;
    fflush(stderr);
    /* The pipe's last write end is descriptor 2: replacing it lets the thread read EOF after the last line. */
    int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (dn >= 0) {
        dup2(dn, STDERR_FILENO);
        close(dn);
    } else {
        close(STDERR_FILENO);
    }
    pthread_join(logdest_thread, NULL);
    close(logdest_rd);
    logdest_rd = -1;
    logdest_running = false;
}

void logdest_vline(int level, const char *what, const char *fmt, va_list ap)
{
    static const char *const names[] = {"warning", "info", "debug"};
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "rotad: %s: %s%s\n", names[level], what, line);
}
