/* metrics.c - rotad's Prometheus endpoint: GET /metrics served by GNU libmicrohttpd in a thread of its own,
 * rendering the region (runtime/lib/prom.c), at most once per METRICS_CACHE_MS. */
#include "runtime/metrics.h"

#include "runtime/lib/errmsg.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/prom.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef ROTA_HAVE_MICROHTTPD
#include <microhttpd.h>
#endif

/*
 * A root daemon's HTTP port is an attack surface: the request parsing, the connection limits (in all and per
 * address), the idle timeout and the memory a connection may use are libmicrohttpd's, a library Debian and the
 * Prometheus C client (promhttp) keep, not a hand-written parser. What rotad adds: it answers GET and HEAD of
 * /metrics only, and renders at most once per METRICS_CACHE_MS (a scrape loop costs one rendering per window, not
 * one per request). Without libmicrohttpd at build time rotad still builds and --metrics-listen is refused with
 * the reason (metrics_open).
 */

struct metrics {
    int lfd;
    const rota_region_t *r;
    const rota_table_t *t; /* NULL: no per-client and per-group series (rotad --metrics-clients) */
    char addr[64];
#ifdef ROTA_HAVE_MICROHTTPD
    struct MHD_Daemon *d;
#endif
    char *cache;           /* the last rendering, METRICS_CACHE_MS at most old; only the serving thread uses it */
    size_t cache_len;
    uint64_t cache_ns;
    bool niced;
};

static uint64_t metrics_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
        return errmsg(err, errlen, -EINVAL,
                      "--metrics-listen: '%s' is not PORT, ADDR:PORT or [ADDR6]:PORT (numeric address, port "
                      "0..65535)",
                      spec);
#ifndef ROTA_HAVE_MICROHTTPD
    return errmsg(err, errlen, -ENOTSUP,
                  "--metrics-listen: this rotad was built without GNU libmicrohttpd (install libmicrohttpd-dev, "
                  "rebuild; docs/building.md)");
#endif
    metrics_t *m = calloc(1, sizeof *m);
    if (!m) return errmsg(err, errlen, -ENOMEM, "out of memory");
    int rc;
    m->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (m->lfd < 0) {
        rc = errmsg(err, errlen, -errno, "unable to create a socket: %s", strerror(errno));
        goto out_free;
    }
    int one = 1;
    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(m->lfd, (struct sockaddr *)&ss, len) < 0 || listen(m->lfd, 64) < 0) {
        rc = errmsg(err, errlen, -errno, "unable to listen on %s: %s", spec, strerror(errno));
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
    *out = m;
    return 0;

out_close_listen:
    close(m->lfd);
out_free:
    free(m);
    return rc;
}


const char *metrics_address(const metrics_t *m)
{
    return m->addr;
}

#ifdef ROTA_HAVE_MICROHTTPD
/* The rendering of now, from the cache while it is younger than METRICS_CACHE_MS. NULL when out of memory. */
static const char *metrics_render(metrics_t *m, size_t *len)
{
    uint64_t now = metrics_now_ns();
    if (m->cache && now - m->cache_ns < (uint64_t)METRICS_CACHE_MS * 1000000u) {
        *len = m->cache_len;
        return m->cache;
    }
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f) return NULL;
    prom_render(f, m->r, m->t, now);
    if (fclose(f)) {
        free(body);
        return NULL;
    }
    free(m->cache);
    m->cache = body;
    m->cache_len = blen;
    m->cache_ns = now;
    *len = blen;
    return body;
}

static enum MHD_Result metrics_reply(struct MHD_Connection *conn, unsigned status, const char *ctype, const char *body,
                                     size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                       const char *version, const char *upload, size_t *upload_len, void **state)
{
    metrics_t *m = cls;
    if (!m->niced) {
        /* A scrape is worth less than a launch: this thread alone (Linux: a thread id) yields the CPU to rotad's
         * scheduler thread and to the clients on a busy node. Best effort: a failure only keeps nice 0. */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), METRICS_NICE);
        m->niced = true;
    }
    static const char *const text = "text/plain; charset=utf-8";
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return metrics_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, "GET /metrics\n", 13);
    if (strcmp(url, "/metrics")) return metrics_reply(conn, MHD_HTTP_NOT_FOUND, text, "rotad serves /metrics only\n", 27);
    size_t len;
    const char *body = metrics_render(m, &len);
    if (!body) return metrics_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, text, "out of memory\n", 14);
    return metrics_reply(conn, MHD_HTTP_OK, PROM_CONTENT_TYPE, body, len);
}
#endif

int metrics_start(metrics_t *m, const rota_region_t *r, const rota_table_t *t)
{
    m->r = r;
    m->t = t;
#ifdef ROTA_HAVE_MICROHTTPD
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with rotad's loop (its signalfd) */
    m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, metrics_handler, m,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)m->lfd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNS_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_REQ_MAX,
                            MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!m->d) return -EIO;
    m->lfd = -1; /* libmicrohttpd's now: MHD_stop_daemon closes it */
    return 0;
#else
    return -ENOTSUP;
#endif
}

void metrics_stop(metrics_t *m)
{
#ifdef ROTA_HAVE_MICROHTTPD
    if (!m || !m->d) return;
    MHD_stop_daemon(m->d);
    m->d = NULL;
#else
    (void)m;
#endif
}

void metrics_close(metrics_t *m)
{
    if (!m) return;
    metrics_stop(m);
    if (m->lfd >= 0) close(m->lfd);
    free(m->cache);
    free(m);
}
