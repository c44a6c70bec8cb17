/* log.c - librota's messages on stderr, prefixed "rota:", filtered by ROTA_LOG. */
#include "shim/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

/* as printed: "rota: warning: ..." like rotad's and rota run's warnings (ROTA_LOG's value is "warn") */
static const char *const log_names[] = {"error", "warning", "info", "debug"};
static _Atomic int log_level = ROTA_LOG_WARN;

void rota_log_set_level(int level)
{
    atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

void rota_log(int level, const char *fmt, ...)
{
    if (level < ROTA_LOG_ERROR || level > ROTA_LOG_DEBUG || level > atomic_load_explicit(&log_level, memory_order_relaxed)) return;
    char buf[1024];
    int saved = errno;
    int n = snprintf(buf, sizeof(buf), "rota: %s: ", log_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
    buf[len++] = '\n';
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    errno = saved;
}
