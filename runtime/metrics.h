/* metrics.h - rotad --metrics-listen: GET /metrics over HTTP/1.x (GNU libmicrohttpd), served by a thread of its own
 * that only reads. */
#ifndef ROTA_METRICS_H
#define ROTA_METRICS_H

#include "runtime/abi.h"

#include <stddef.h>

/* Connections served at once, in all and from one address (more are closed at once), and the seconds one may stay
 * idle (a half-sent request included) before it is closed: libmicrohttpd's limits. */
#define METRICS_MAX_CONNS 64
#define METRICS_MAX_CONNS_PER_IP 8
#define METRICS_TIMEOUT_S 5
/* A rendering serves every scrape for this long (a scrape loop costs one rendering per window). */
#define METRICS_CACHE_MS 500
/* The serving thread's nice value: on a node short of CPU, scrapes wait, not launches. */
#define METRICS_NICE 10
/* Memory for one connection's request (line and headers): a longer one is answered 414 or 431 and closed. */
#define METRICS_REQ_MAX 8192

typedef struct metrics metrics_t;

/* Parses "PORT", "ADDR:PORT" or "[ADDR6]:PORT" (no ADDR: 127.0.0.1) and listens there, non-blocking. 0 or -errno,
 * with one message in err (a bad address is -EINVAL; a rotad built without libmicrohttpd: -ENOTSUP). */
int metrics_open(const char *listen_spec, metrics_t **out, char *err, size_t errlen);
/* Starts the thread that serves (libmicrohttpd's): it renders r and t (prom_render) at most once per
 * METRICS_CACHE_MS. t: rotad's table, for the per-client and per-group series; NULL leaves them out (the
 * endpoint has no notion of who asks: anyone who reaches the port reads what it serves). It only reads (atomics
 * and seqlocks), so neither rotad's event loop nor its scheduler thread ever waits for a scrape. After detaching
 * (a fork keeps no thread). 0 or -errno. */
int metrics_start(metrics_t *m, const rota_region_t *r, const rota_table_t *t);
/* Stops and joins the thread (before the region goes); idempotent. */
void metrics_stop(metrics_t *m);
/* The address actually bound ("127.0.0.1:PORT"), for the log. */
const char *metrics_address(const metrics_t *m);
/* Stops the thread, closes every connection and the listening socket, frees m (NULL: nothing). */
void metrics_close(metrics_t *m);

#endif
