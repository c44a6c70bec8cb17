/* ledger.h - the node-wide memory ledger: per GPU (keyed by UUID) in the region, per client and per group in rotad's
 * private table. */
#ifndef ROTA_LEDGER_H
#define ROTA_LEDGER_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * rotad is the only writer, from one thread; the counters are atomics so that clients and `rota status` read
 * them consistently field by field. Counters never underflow: a release is
 * clamped to what that client holds, so a confused or hostile client can only ever give back its own bytes.
 */

/* The index of the GPU with this UUID, added (capacity = total_mem) on first sight. -ENOSPC when the table
 * is full. A later client reporting another total for the same UUID does not change the capacity. */
int ledger_device(rota_region_t *r, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem);
/* Lookup only: index or -1. */
int ledger_find(const rota_region_t *r, const uint8_t uuid[ROTA_UUID_LEN]);

/* The client's effective limit on dev: the smaller of its own and its group's; 0 = none. */
uint64_t ledger_limit(const rota_table_t *t, unsigned slot, unsigned dev);
/* Whether bytes could fit now: 0, -ENOMEM (the GPU is full) or -EDQUOT (the client's or group's limit). */
int ledger_check(const rota_region_t *r, const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes);
/* Whether bytes can ever fit (not larger than the capacity or the limits): waiting is pointless otherwise.
 * Returns 0, -ENOMEM or -EDQUOT like ledger_check. */
int ledger_check_ever(const rota_region_t *r, const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes);
/* Whether bytes could fit the client's limits once every other client freed everything: its own holdings plus
 * bytes exceed its limit or its group's, so only its own frees can make room. Returns 0 or -EDQUOT. (The GPU's
 * capacity is not checked: another thread of the client may free, and a client may wait for that.) */
int ledger_check_own(const rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes);
/* Charges bytes to the client (unconditionally: callers check first, ADOPT included). Saturating: no counter
 * ever wraps, whatever the caller passes. */
void ledger_charge(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes);
/* Gives back up to bytes of what the client holds on dev; returns what was given back. */
uint64_t ledger_uncharge(rota_region_t *r, rota_table_t *t, unsigned slot, unsigned dev, uint64_t bytes);
/* Gives back everything the client holds; returns a mask of the GPUs that got memory back. */
uint32_t ledger_reclaim(rota_region_t *r, rota_table_t *t, unsigned slot);

#endif
