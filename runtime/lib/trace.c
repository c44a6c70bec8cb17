/* trace.c - ROTA_TRACE's JSON-lines writer: formats into a stack buffer, one write() per line. */
#include "runtime/lib/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int trace_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return fd >= 0 ? fd : -errno;
}

typedef struct trace_buf {
    char b[TRACE_LINE_MAX];
    size_t n;
    bool full;
} trace_buf_t;

static void trace_str(trace_buf_t *t, const char *s)
{
    size_t l = strlen(s);
    if (t->full || l > sizeof t->b - t->n) {
        t->full = true;
        return;
    }
    memcpy(t->b + t->n, s, l);
    t->n += l;
}

/* Decimal without snprintf (not async-signal-safe). */
static void trace_u64(trace_buf_t *t, uint64_t v)
{
    char d[24];
    size_t i = sizeof d;
    d[--i] = 0;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    trace_str(t, d + i);
}

static void trace_i64(trace_buf_t *t, int64_t v)
{
    if (v < 0) {
        trace_str(t, "-");
        trace_u64(t, (uint64_t)0 - (uint64_t)v);
    } else {
        trace_u64(t, (uint64_t)v);
    }
}

int trace_write(int fd, const char *ev, int gpu, uint64_t bytes, const char *extra)
{
    if (fd < 0) return -EBADF;
    int saved = errno; /* callers (signal handlers, wrappers) keep their errno */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    trace_buf_t t = {.n = 0};
    trace_str(&t, "{\"ts_us\":");
    trace_u64(&t, (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
    trace_str(&t, ",\"pid\":");
    trace_i64(&t, (int64_t)getpid());
    trace_str(&t, ",\"ev\":\"");
    trace_str(&t, ev);
    trace_str(&t, "\",\"gpu\":");
    trace_i64(&t, gpu);
    trace_str(&t, ",\"bytes\":");
    trace_u64(&t, bytes);
    size_t base = t.n;
    if (extra && extra[0]) {
        trace_str(&t, ",");
        trace_str(&t, extra);
    }
    trace_str(&t, "}\n");
    if (t.full) { /* extra did not fit: drop it, the line stays well-formed */
        t.n = base;
        t.full = false;
        trace_str(&t, "}\n");
        if (t.full) return -ENAMETOOLONG; /* ev itself too long */
    }
    ssize_t w;
    do {
        w = write(fd, t.b, t.n);
    } while (w < 0 && errno == EINTR);
    int rc = w < 0 ? -errno : (size_t)w == t.n ? 0 : -EIO;
    errno = saved;
    return rc;
}
