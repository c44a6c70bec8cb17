/* server.h - rotad's service: the UNIX socket, registration with fd passing, the event loop. */
#ifndef ROTA_SERVER_H
#define ROTA_SERVER_H

#include "runtime/abi.h"
#include "runtime/config.h"
#include "runtime/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* rotad's exit codes (documented in its USAGE). */
enum rotad_exit {
    ROTAD_EXIT_OK = 0,     /* stopped by SIGTERM/SIGINT after draining */
    ROTAD_EXIT_FAIL = 1,   /* a runtime failure (socket, memory, region) */
    ROTAD_EXIT_USAGE = 2,  /* bad command line or environment */
    ROTAD_EXIT_CONFIG = 3, /* the config file is unreadable or invalid */
    ROTAD_EXIT_BUSY = 4,   /* another rotad already serves this socket */
};

typedef struct server server_t;

typedef struct server_opts {
    const char *socket_path;  /* resolved path */
    config_t *cfg;            /* may be NULL; SIGHUP replaces it in place (runtime/reload.h) */
    const char *config_path;  /* the file SIGHUP reloads into *cfg; NULL: SIGHUP has nothing to reload */
    struct metrics *metrics;  /* rotad --metrics-listen (runtime/metrics.h), its thread started by the loop; or NULL */
    bool metrics_clients;     /* rotad --metrics-clients: the endpoint serves per-client and per-group series too */
    int log_level;            /* 0 warnings, 1 info, 2 debug */
    sched_opts_t sched;       /* launch scheduling (runtime/sched.h), handed to the scheduler as it is */
} server_opts_t;

/* Takes the lock file (PATH.lock), removes a stale socket, binds and listens, creates the region. Returns an
 * exit code (ROTAD_EXIT_OK on success, *out set) and one message in err. */
int server_open(const server_opts_t *o, server_t **out, char *err, size_t errlen);
/* Enters the node's GPUs (runtime/probe.h) in the ledger: the ones librota's remap chooses among. Returns how
 * many were entered. Before server_loop. */
int server_add_gpus(server_t *s, const rota_place_cand_t *gpus, int n);
/* Serves m (rotad --metrics-listen) while the loop runs (a thread reading the region); before server_loop. */
void server_set_metrics(server_t *s, struct metrics *m);
/* The region rotad writes (for rotad --mps's shares, runtime/mps.h); valid until server_close. */
rota_region_t *server_region(server_t *s);
/* After a fork (detaching): records the new pid in the lock file and the region. */
void server_set_pid(server_t *s);
/* Serves until SIGTERM or SIGINT (which the caller has blocked, with SIGHUP: they are read from a signalfd; SIGHUP
 * reloads o.config_path). Readiness also goes to systemd (runtime/notify.h). Each of the
 * nnotify descriptors gets "\n" and is closed once the loop runs. Drains (waiters are answered, clients released) and returns
 * an exit code. */
int server_loop(server_t *s, const int *notify, int nnotify, char *err, size_t errlen);
/* Unlinks the socket (when this server still owns it) and frees everything. */
void server_close(server_t *s);

#endif
