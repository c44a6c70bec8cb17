/* server.h - rotad's service: the UNIX socket, registration with fd passing, the event loop. */
#ifndef ROTA_SERVER_H
#define ROTA_SERVER_H

#include "runtime/abi.h"
#include "runtime/config.h"

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
    const config_t *cfg;      /* may be NULL */
    int log_level;            /* 0 warnings, 1 info, 2 debug */
    uint64_t sched_idle_ns;   /* launch scheduling (runtime/sched.h): idle window, 0 = default 2 ms */
    uint64_t sched_idle_low_ns; /* the idle window of normal and low clients (0: at once) */
    bool sched_idle_fixed;    /* high clients' idle window is sched_idle_ns, not learned */
    uint64_t sched_tick_ns;   /* decision period, 0 = default 1 ms */
    uint64_t sched_quantum_ns; /* 0 = weighted fair share; else exclusive quanta of this length */
    unsigned sched_low_factor; /* weight of a low client's device time against normal clients' (0: default) */
} server_opts_t;

/* Takes the lock file (PATH.lock), removes a stale socket, binds and listens, creates the region. Returns an
 * exit code (ROTAD_EXIT_OK on success, *out set) and one message in err. */
int server_open(const server_opts_t *o, server_t **out, char *err, size_t errlen);
/* Enters the node's GPUs (runtime/probe.h) in the ledger: the ones librota's remap chooses among. Returns how
 * many were entered. Before server_loop. */
int server_add_gpus(server_t *s, const rota_place_cand_t *gpus, int n);
/* After a fork (detaching): records the new pid in the lock file and the region. */
void server_set_pid(server_t *s);
/* Serves until SIGTERM or SIGINT (which the caller has blocked: they are read from a signalfd). Each of the
 * nnotify descriptors gets "\n" and is closed once the loop runs. Drains (waiters are answered, clients released) and returns
 * an exit code. */
int server_loop(server_t *s, const int *notify, int nnotify, char *err, size_t errlen);
/* Unlinks the socket (when this server still owns it) and frees everything. */
void server_close(server_t *s);

#endif
