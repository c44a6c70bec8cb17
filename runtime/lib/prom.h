/* prom.h - rotad's region and client table as Prometheus text (exposition format 0.0.4): rota metrics and rotad --metrics-listen. */
#ifndef ROTA_LIB_PROM_H
#define ROTA_LIB_PROM_H

#include "runtime/abi.h"

#include <stdint.h>
#include <stdio.h>

/* The Content-Type an HTTP server gives this text. */
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes every rota_* metric family of region r to f, with the per-client and per-group ones of table t (rotad's
 * own, or a copy filtered for a viewer: the clients and groups it has; NULL: none of those families' samples), at
 * now_ns (CLOCK_MONOTONIC: the time a hold in progress counts up to). The names, types and labels are listed in
 * docs/operating.md. Only reads r and t (any thread or process). Returns 0, -ENOMEM, or -EIO when f failed. */
int prom_render(FILE *f, const rota_region_t *r, const rota_table_t *t, uint64_t now_ns);

/* One consistent read of a slot's hold statistics (a seqlock against rotad's scheduler, runtime/stats.c): the ended
 * holds' time per reason (ROTA_HOLD_PRIO, _SHARE, _QUANTUM as bits 0..2), and the hold in progress (its start and
 * reasons; 0 and 0 in the read that cannot happen, of a writer stopped inside an update). */
void prom_slot_hold_read(const rota_slot_stats_t *st, uint64_t held_ns[3], uint64_t *since_ns, uint32_t *bits);
/* The same, the hold in progress counted up to now_ns. */
void prom_slot_held_ns(const rota_slot_stats_t *st, uint64_t now_ns, uint64_t held_ns[3]);

#endif
