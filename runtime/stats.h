/* stats.h - rotad's operating statistics in the region (abi.h, rota_stats_t): what rota metrics reports. */
#ifndef ROTA_STATS_H
#define ROTA_STATS_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stdint.h>

/* A new client takes the slot: its statistics start from zero. Before the slot is live. */
void stats_slot_reset(rota_table_t *t, unsigned slot);
/* A queued memory request of slot on dev left the queue after waited_ns: granted, or timed out. */
void stats_mem_wait(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t waited_ns, bool granted);
/* A job waiting for a GPU with room was placed after waited_ns. */
void stats_place_wait(rota_region_t *r, uint64_t waited_ns);
/* The slot's hold is now bits (ROTA_HOLD_*) at now_ns: the hold that ends is added to its reasons' time. Only
 * the scheduler thread calls it (readers see it through the slot's seqlock: prom_slot_held_ns). */
void stats_hold(rota_table_t *t, unsigned slot, uint32_t bits, uint64_t now_ns);

#endif
