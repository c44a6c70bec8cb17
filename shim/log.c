/* log.c - librota's messages on stderr, prefixed "rota:", filtered by ROTA_LOG. */
#include "shim/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static const char *const log_names[] = {"error", "warn", "info", "debug"};

void rota_log(int level, const char *fmt, ...)
{
    if (level < ROTA_LOG_ERROR || level > ROTA_LOG_DEBUG || level > rota_options()->log_level) return;
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
