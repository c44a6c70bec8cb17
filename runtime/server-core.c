/* server-core.c - what every part of rotad's service uses: logging (rate-limited for what clients cause), the
 * clock, sending to a client, per-user accounting. Uses no other server-*.c file. */
#include "runtime/server-internal.h"

#include "runtime/ledger.h"
#include "runtime/lib/proto.h"
#include "runtime/logdest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void server_log(const server_t *s, int level, const char *fmt, ...)
{
    if (level > s->o.log_level) return;
    va_list ap;
    va_start(ap, fmt);
    logdest_vline(level, "", fmt, ap);
    va_end(ap);
}

uint64_t server_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Warnings caused by clients: at most SERVER_LOG_BURST a second, then one line saying how many were left out, so a
 * client (or thousands of connections) cannot flood the log or spend rotad's time on it. */
#define SERVER_LOG_BURST 20

uint64_t server_log_flush(server_t *s, uint64_t now)
{
    if (now - s->log_window_ns < 1000000000u) return s->log_dropped ? s->log_window_ns + 1000000000u : UINT64_MAX;
    if (s->log_dropped)
        server_log(s, 0, "%lu more warnings about clients in the last second left out", s->log_dropped);
    s->log_window_ns = now;
    s->log_lines = 0;
    s->log_dropped = 0;
    return UINT64_MAX;
}

void server_log_limited(server_t *s, const char *fmt, ...)
{
    if (s->o.log_level < 0) return;
    server_log_flush(s, server_now_ns());
    if (s->log_lines >= SERVER_LOG_BURST) {
        s->log_dropped++;
        return;
    }
    s->log_lines++;
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    server_log(s, 0, "%s", line);
}

void server_log_client(server_t *s, const client_t *c, const char *fmt, ...)
{
    char line[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c->slot >= 0) server_log_limited(s, "client pid %d uid %u (slot %d): %s", (int)c->pid, (unsigned)c->uid,
                                         c->slot, line);
    else server_log_limited(s, "connection from pid %d uid %u: %s", (int)c->pid, (unsigned)c->uid, line);
}

struct server_user *server_user(server_t *s, uint32_t uid)
{
    for (uint32_t i = 0; i < s->uid_n; i++)
        if (s->users[i].uid == uid) return &s->users[i];
    for (uint32_t i = 0; i < s->uid_n; i++) /* reuse an entry nobody counts on any more */
        if (!s->users[i].conns && !s->users[i].slots) {
            s->users[i] = (struct server_user){.uid = uid};
            return &s->users[i];
        }
    if (s->uid_n == s->uid_cap) {
        uint32_t cap = s->uid_cap ? s->uid_cap * 2 : 16;
        void *p = realloc(s->users, cap * sizeof *s->users);
        if (!p) return NULL;
        s->users = p;
        s->uid_cap = cap;
    }
    s->users[s->uid_n] = (struct server_user){.uid = uid};
    return &s->users[s->uid_n++];
}

bool server_privileged(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

void server_doom(server_t *s, client_t *c, const char *why)
{
    if (c->doomed) return;
    c->doomed = true;
    if (why) server_log_client(s, c, "%s; disconnecting it", why);
}

void server_send(server_t *s, client_t *c, const void *m, size_t n, const int *fds, int nfds)
{
    if (c->doomed) return;
    int rc = proto_send(c->fd, m, n, fds, nfds);
    if (rc == -EPIPE || rc == -ECONNRESET) server_doom(s, c, NULL); /* it is gone: EOF follows */
    else if (rc) server_doom(s, c, rc == -EAGAIN ? "does not read its answers" : strerror(-rc));
}

void server_result_credit(server_t *s, client_t *c, uint32_t seq, int status, int dev, uint64_t credit)
{
    rota_msg_result_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_RESULT, sizeof m, seq);
    m.status = status;
    m.dev = dev;
    m.credit = credit;
    m.limit = (c->slot >= 0 && dev >= 0) ? ledger_limit(s->rg.t, (unsigned)c->slot, (unsigned)dev) : 0;
    server_send(s, c, &m, sizeof m, NULL, 0);
}

void server_result(server_t *s, client_t *c, uint32_t seq, int status, int dev)
{
    server_result_credit(s, c, seq, status, dev, 0);
}

