/* options.h - librota's ROTA_* environment options: one table, parsed once and strictly. */
#ifndef ROTA_SHIM_OPTIONS_H
#define ROTA_SHIM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "shim/log.h" /* enum rota_log_level */

enum rota_mem_retry { ROTA_MEM_RETRY_AUTO = 0, ROTA_MEM_RETRY_ON, ROTA_MEM_RETRY_OFF };


#define ROTA_OPT_PATH_MAX 4096
#define ROTA_GPU_AUTO (-1)
#define ROTA_GPU_ALL (-2)

/* The effective options. Every field holds its default when the variable is unset. */
typedef struct rota_options {
    bool disable;                          /* ROTA_DISABLE: kill switch, every wrapper a plain pass-through */
    int log_level;                         /* ROTA_LOG: error|warn|info|debug (default warn) */
    char real_libcuda[ROTA_OPT_PATH_MAX];  /* ROTA_REAL_LIBCUDA: the real driver ("" = libcuda.so.1 by search) */
    char socket[ROTA_OPT_PATH_MAX];        /* ROTA_SOCKET: rotad's socket ("" = the coordinator's default) */
    bool require;                          /* ROTA_REQUIRE: fail instead of running uncoordinated */
    uint64_t mem_limit;                    /* ROTA_MEM_LIMIT: bytes, K/M/G/T suffixes (0 = no limit) */
    double mem_wait_s;                     /* ROTA_MEM_WAIT: seconds an allocation may queue (0 = fail at once) */
    int mem_retry;                         /* ROTA_MEM_RETRY: auto|on|off, fail fast once so a cache is released */
    unsigned priority;                     /* ROTA_PRIORITY: a class (rota_prio, runtime/lib/prio.h; default normal) */
    double weight;                         /* ROTA_WEIGHT: share among equals, > 0 (default 1) */
    unsigned max_inflight;                 /* ROTA_MAX_INFLIGHT: 1..1024 (default 8) */
    unsigned inflight_us;                  /* ROTA_INFLIGHT_US: device time in flight, 0..1e6 us (default 500) */
    unsigned refill_us;                    /* ROTA_REFILL_US: queue the next launch this early, 0..1e5 us (300) */
    bool idle_probe;                       /* ROTA_IDLE_PROBE: a high client's window ends when it sleeps for input */
    bool admit;                            /* ROTA_ADMIT: a lower launch that would run into a high client's
                                            * predicted request waits for it (runtime/lib/admit.h) */
    unsigned admit_wait_us;                /* ROTA_ADMIT_WAIT_US: the longest such wait per launch, 0..1e6 us */
    int gpu;                               /* ROTA_GPU: auto (ROTA_GPU_AUTO), all (ROTA_GPU_ALL) or an ordinal 0..1023 */
    char test_counters[ROTA_OPT_PATH_MAX]; /* ROTA_TEST_COUNTERS: test-only hit counters, dumped here at exit */
    char trace[ROTA_OPT_PATH_MAX];         /* ROTA_TRACE: append rota's decisions here as JSON lines ("" = off) */
    bool has_grant;                        /* ROTA_GRANT was set (and valid) */
    uint8_t grant[16];                     /* ROTA_GRANT: the token of rotad's grant for this container, 32 hex
                                            * digits, presented at registration (runtime/abi.h GRANT) */
} rota_options_t;

/* Parses the environment the first time it is called (thread-safe; pure: no I/O, no allocation) and returns
 * the effective options, never NULL. A bad value leaves that field at its default and is counted below. */
const rota_options_t *rota_options(void);
/* How many ROTA_* variables held a bad value. Non-zero means rota must not run: cuInit then returns
 * CUDA_ERROR_INVALID_VALUE (unless ROTA_DISABLE=1 is valid, which wins). */
unsigned rota_options_errors(void);
/* Logs each bad value (one line each) and, with ROTA_LOG=debug, every effective option. */
void rota_options_report(void);

#endif
