/* metrics.c - rotad's Prometheus endpoint: a tiny non-blocking HTTP server in a thread of its own, reading the region. */
#include "runtime/metrics.h"

#include "runtime/lib/parse.h"
#include "runtime/lib/prom.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct metrics_conn {
    int fd;
    uint64_t since_ns;
    size_t inlen;
    char *out;        /* the whole answer, once the request is read */
    size_t outlen, outoff;
    char in[METRICS_REQ_MAX];
} metrics_conn_t;

struct metrics {
    int ep, lfd, stop_fd;
    int listen_tag, stop_tag;
    const rota_region_t *r;
    const rota_table_t *t; /* NULL: no per-client and per-group series (rotad --metrics-clients) */
    pthread_t th;
    bool running;
    char addr[64];
    metrics_conn_t *conns[METRICS_MAX_CONNS];
};

static uint64_t metrics_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int metrics_fail(char *err, size_t n, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int metrics_fail(char *err, size_t n, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return rc;
}

/* "PORT", "ADDR:PORT", "[ADDR6]:PORT" into a socket address. */
static int metrics_parse(const char *spec, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[64] = "127.0.0.1";
    const char *port = spec;
    const char *colon = strrchr(spec, ':');
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host) return -EINVAL;
        memcpy(host, spec + 1, (size_t)(close - spec - 1));
        host[close - spec - 1] = 0;
        port = close + 2;
    } else if (colon) {
        if ((size_t)(colon - spec) >= sizeof host || colon == spec) return -EINVAL;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = 0;
        port = colon + 1;
    }
    uint64_t p;
    if (parse_u64(port, 0, 65535, &p)) return -EINVAL;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p);
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p);
        *len = sizeof *a6;
    } else {
        return -EINVAL;
    }
    return 0;
}

int metrics_open(const char *spec, metrics_t **out, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (metrics_parse(spec, &ss, &len))
        return metrics_fail(err, errlen, -EINVAL,
                            "--metrics-listen: '%s' is not PORT, ADDR:PORT or [ADDR6]:PORT (numeric address, port "
                            "0..65535)",
                            spec);
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) return metrics_fail(err, errlen, -ENOMEM, "out of memory");
    int rc;
    m->stop_fd = -1;
    m->ep = epoll_create1(EPOLL_CLOEXEC);
    if (m->ep < 0) {
        rc = metrics_fail(err, errlen, -errno, "epoll_create1: %s", strerror(errno));
        goto out_free;
    }
    m->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (m->lfd < 0) {
        rc = metrics_fail(err, errlen, -errno, "unable to create a socket: %s", strerror(errno));
        goto out_close_ep;
    }
    int one = 1;
    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(m->lfd, (struct sockaddr *)&ss, len) < 0 || listen(m->lfd, 64) < 0) {
        rc = metrics_fail(err, errlen, -errno, "unable to listen on %s: %s", spec, strerror(errno));
        goto out_close_listen;
    }
    struct sockaddr_storage got;
    socklen_t glen = sizeof got;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(m->lfd, (struct sockaddr *)&got, &glen) == 0) {
        if (got.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&got)->sin_port);
        } else {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
        }
    }
    snprintf(m->addr, sizeof m->addr, got.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &m->listen_tag};
    if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->lfd, &ev) < 0) {
        rc = metrics_fail(err, errlen, -errno, "epoll_ctl: %s", strerror(errno));
        goto out_close_listen;
    }
    *out = m;
    return 0;

out_close_listen:
    close(m->lfd);
out_close_ep:
    close(m->ep);
out_free:
    free(m);
    return rc;
}


const char *metrics_address(const metrics_t *m)
{
    return m->addr;
}

static void metrics_drop(metrics_t *m, unsigned i)
{
    metrics_conn_t *c = m->conns[i];
    if (!c) return;
    close(c->fd); /* leaves the epoll set with it */
    free(c->out);
    free(c);
    m->conns[i] = NULL;
}

static void metrics_accept(metrics_t *m)
{
    for (int n = 0; n < 64; n++) {
        int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or a connection that went away: nothing to do either way */
        uint64_t now = metrics_now_ns();
        int slot = -1, oldest = -1;
        for (int i = 0; i < METRICS_MAX_CONNS; i++) {
            if (!m->conns[i]) {
                slot = i;
                break;
            }
            if (oldest < 0 || m->conns[i]->since_ns < m->conns[oldest]->since_ns) oldest = i;
        }
        if (slot < 0 && now - m->conns[oldest]->since_ns >= (uint64_t)METRICS_IDLE_MS * 1000000u) {
            metrics_drop(m, (unsigned)oldest);
            slot = oldest;
        }
        metrics_conn_t *c = slot >= 0 ? malloc(sizeof *c) : NULL;
        if (!c) {
            close(fd); /* full of live scrapes: this scraper sees a reset and tries again */
            continue;
        }
        c->fd = fd;
        c->since_ns = now;
        c->inlen = 0;
        c->out = NULL;
        c->outlen = c->outoff = 0;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        m->conns[slot] = c;
    }
}

/* The answer to the request in c->in (complete: it ends with an empty line). */
static int metrics_answer(metrics_conn_t *c, const rota_region_t *r, const rota_table_t *t)
{
    const char *status = "200 OK", *ctype = PROM_CONTENT_TYPE;
    char *body = NULL;
    size_t blen = 0;
    bool head = false;
    FILE *f = open_memstream(&body, &blen);
    if (!f) return -ENOMEM;
    if (!strncmp(c->in, "GET ", 4) || (head = !strncmp(c->in, "HEAD ", 5))) {
        const char *path = c->in + (head ? 5 : 4);
        size_t plen = strcspn(path, " ?\r\n");
        if (plen == 8 && !strncmp(path, "/metrics", 8)) {
            prom_render(f, r, t, metrics_now_ns());
        } else {
            status = "404 Not Found";
            ctype = "text/plain; charset=utf-8";
            fputs("rotad serves /metrics only\n", f);
        }
    } else {
        status = "405 Method Not Allowed";
        ctype = "text/plain; charset=utf-8";
        fputs("GET /metrics\n", f);
    }
    if (fclose(f)) {
        free(body);
        return -ENOMEM;
    }
    char hdr[256];
    int hn = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                      status, ctype, blen, status[0] == '4' && status[1] == '0' && status[2] == '5' ? "Allow: GET, HEAD\r\n" : "");
    size_t total = (size_t)hn + (head ? 0 : blen);
    c->out = malloc(total);
    if (!c->out) {
        free(body);
        return -ENOMEM;
    }
    memcpy(c->out, hdr, (size_t)hn);
    if (!head) memcpy(c->out + hn, body, blen);
    free(body);
    c->outlen = total;
    c->outoff = 0;
    return 0;
}

/* Writes what the socket takes; true once the answer is out (or the peer is gone). */
static bool metrics_flush(metrics_conn_t *c)
{
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) return errno != EAGAIN && errno != EINTR;
        c->outoff += (size_t)n;
    }
    return true;
}

static void metrics_static_answer(metrics_conn_t *c, const char *status)
{
    char buf[160];
    int n = snprintf(buf, sizeof buf, "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);
    c->out = malloc((size_t)n);
    if (!c->out) return;
    memcpy(c->out, buf, (size_t)n);
    c->outlen = (size_t)n;
}

/* Returns true when the connection is done (to be dropped). */
static bool metrics_on_conn(metrics_t *m, metrics_conn_t *c, uint32_t events, const rota_region_t *r,
                            const rota_table_t *t)
{
    if (c->out) return metrics_flush(c) || (events & (EPOLLERR | EPOLLHUP));
    for (;;) {
        if (c->inlen >= sizeof c->in - 1) {
            metrics_static_answer(c, "431 Request Header Fields Too Large");
            break;
        }
        ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - 1 - c->inlen, MSG_DONTWAIT);
        if (n == 0) return true;
        if (n < 0) return errno != EAGAIN && errno != EINTR;
        c->inlen += (size_t)n;
        c->in[c->inlen] = 0;
        if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n")) {
            if (metrics_answer(c, r, t)) metrics_static_answer(c, "503 Service Unavailable");
            break;
        }
    }
    if (!c->out) return true;
    if (metrics_flush(c)) return true;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    return epoll_ctl(m->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0;
}

static void metrics_serve_events(metrics_t *m, const struct epoll_event *evs, int n);

static void *metrics_main(void *arg)
{
    metrics_t *m = arg;
    /* A scrape is worth less than a launch: this thread alone (Linux: a thread id) yields the CPU to rotad's
     * scheduler thread and to the clients on a busy node. Best effort: a failure only keeps nice 0. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), METRICS_NICE);
    for (;;) {
        struct epoll_event evs[METRICS_MAX_CONNS + 2];
        int n = epoll_wait(m->ep, evs, METRICS_MAX_CONNS + 2, -1);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++)
            if (evs[i].data.ptr == &m->stop_tag) return NULL;
        metrics_serve_events(m, evs, n);
    }
    return NULL;
}

int metrics_start(metrics_t *m, const rota_region_t *r, const rota_table_t *t)
{
    m->r = r;
    m->t = t;
    m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->stop_fd < 0) return -errno;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &m->stop_tag};
    if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->stop_fd, &ev) < 0) return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with rotad's loop (its signalfd) */
    int e = pthread_create(&m->th, NULL, metrics_main, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) return -e;
    m->running = true;
    return 0;
}

void metrics_stop(metrics_t *m)
{
    if (!m || !m->running) return;
    uint64_t one = 1;
    if (write(m->stop_fd, &one, sizeof one) < 0) {
        /* an eventfd write of 1 cannot fail short of a bad descriptor: the join below would hang, so cancel */
        pthread_cancel(m->th);
    }
    pthread_join(m->th, NULL);
    m->running = false;
}

static void metrics_serve_events(metrics_t *m, const struct epoll_event *evs, int n)
{
    const rota_region_t *r = m->r;
    const rota_table_t *t = m->t;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == &m->listen_tag) {
            metrics_accept(m);
            continue;
        }
        metrics_conn_t *c = evs[i].data.ptr;
        unsigned k;
        for (k = 0; k < METRICS_MAX_CONNS && m->conns[k] != c; k++) {
        }
        if (k == METRICS_MAX_CONNS) continue; /* dropped by an accept earlier in this batch */
        if (metrics_on_conn(m, c, evs[i].events, r, t)) metrics_drop(m, k);
    }
}

void metrics_close(metrics_t *m)
{
    if (!m) return;
    metrics_stop(m);
    if (m->stop_fd >= 0) close(m->stop_fd);
    for (unsigned i = 0; i < METRICS_MAX_CONNS; i++) metrics_drop(m, i);
    close(m->lfd);
    close(m->ep);
    free(m);
}
