/* sample.h - samples of rotad's region and client table counters, and the rates two of them give (rota top, rota status --json). */
#ifndef ROTA_TOOL_SAMPLE_H
#define ROTA_TOOL_SAMPLE_H

#include "runtime/abi.h"
#include "runtime/lib/conn.h"

#include <stdbool.h>
#include <stdint.h>

/* Two samples of the region's counters give rates (launches/s, device time per second); rota top and
 * rota status --json compute them the same way. */
typedef struct rota_sample {
    uint64_t t_ns;                          /* CLOCK_MONOTONIC */
    uint32_t gen[ROTA_MAX_CLIENTS];         /* 0 = slot not live */
    uint64_t launches[ROTA_MAX_CLIENTS];
    uint64_t busy_ns[ROTA_MAX_CLIENTS];
    int32_t dev[ROTA_MAX_CLIENTS];          /* the slot's GPU (region index), -1 when not known */
    uint64_t dev_busy_ns[ROTA_MAX_DEVICES];
    bool dev_own[ROTA_MAX_DEVICES];         /* dev_busy_ns is rotad's measure, not the clients' sum */
} rota_sample_t;

/* The clock samples are taken by (CLOCK_MONOTONIC, ns). */
uint64_t rota_sample_now_ns(void);
/* One sample of region r and client table t (a copy from conn_table: the clients this user may see). */
void rota_sample_take(const rota_region_t *r, const rota_table_t *t, rota_sample_t *s);
/* s[0], then s[1] seconds later (a signal does not cut the wait short), each from a fresh copy of the table: one
 * pair to compute rates from. The second copy is left in *last (conn_table_free it). 0 or conn_table's -errno. */
int rota_sample_pair(conn_t *c, rota_sample_t s[2], double seconds, const rota_table_t **last);
/* Rates of slot i between a and b (b later); false when the slot changed owner or a sample is missing. Every rate
 * comes from this one window. busy_frac is the client's device time per second, scaled down with every other
 * client of its GPU when together they measured more than the GPU was busy in the window (each client times its
 * launches from submission to completion, so launches time-sliced with another client's count twice): the clients
 * of a GPU never sum to more than rota_sample_dev_busy. */
bool rota_sample_rates(const rota_sample_t *a, const rota_sample_t *b, unsigned i, double *launches_per_s,
                       double *busy_frac);
/* Device time per second on GPU d between a and b (0..1 per GPU: rota_dev.busy_ns, or while rotad keeps none the
 * sum of the device time of the clients on d); false without both samples. */
bool rota_sample_dev_busy(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac);
/* The sum of rota_sample_rates' busy_frac over the clients of GPU d in the window (<= rota_sample_dev_busy). */
bool rota_sample_dev_clients(const rota_sample_t *a, const rota_sample_t *b, unsigned d, double *busy_frac);

#endif
