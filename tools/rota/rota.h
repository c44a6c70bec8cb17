/* rota.h - the rota tool's subcommands: each is a main-like function registered in rota.c's table. */
#ifndef ROTA_TOOL_H
#define ROTA_TOOL_H

/* Exit codes shared by every subcommand (documented in the usage). */
enum rota_exit {
    ROTA_EXIT_OK = 0,
    ROTA_EXIT_FAIL = 1,    /* the command ran and failed (e.g. rotad unreachable) */
    ROTA_EXIT_USAGE = 2,   /* bad arguments */
    /* rota run returns CMD's own status, so its own failures use the codes of env(1)/timeout(1) instead: */
    ROTA_EXIT_RUN_FAIL = 125,     /* rota run itself failed (usage error included) */
    ROTA_EXIT_RUN_NOEXEC = 126,   /* CMD was found but could not be executed */
    ROTA_EXIT_RUN_NOTFOUND = 127, /* CMD was not found */
};

#include "runtime/abi.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Two samples of the region's counters give rates (launches/s, device time per second); rota top and
 * rota status --json compute them the same way (top.c). */
typedef struct rota_sample {
    uint64_t t_ns;                          /* CLOCK_MONOTONIC */
    uint32_t gen[ROTA_MAX_CLIENTS];         /* 0 = slot not live */
    uint64_t launches[ROTA_MAX_CLIENTS];
    uint64_t busy_ns[ROTA_MAX_CLIENTS];
    uint64_t dev_busy_ns[ROTA_MAX_DEVICES];
} rota_sample_t;

void rota_sample_take(const rota_region_t *r, rota_sample_t *s);
/* Rates of slot i between a and b (b later); false when the slot changed owner or a sample is missing. */
bool rota_sample_rates(const rota_sample_t *a, const rota_sample_t *b, unsigned i, double *launches_per_s,
                       double *busy_frac);
/* Device time per second on GPU d between a and b (0..1 per GPU: rota_dev.busy_ns, or while rotad keeps none the
 * sum of the device time of the clients on d); false without both samples. */
bool rota_sample_dev_busy(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac);
/* "idle", "running", "held", "memwait" (waiting for memory wins, then a hold, then the scheduler's word). */
const char *rota_client_state(const rota_slot_t *s);

/* argv[0] is the subcommand's name. */
int rota_status_main(int argc, char **argv);
int rota_run_main(int argc, char **argv);
int rota_top_main(int argc, char **argv);

#endif
