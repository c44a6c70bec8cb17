/* client.h - what rota status and rota top show of a client's slot in rotad's client table. */
#ifndef ROTA_TOOL_CLIENT_H
#define ROTA_TOOL_CLIENT_H

#include "runtime/abi.h"

#include <stdint.h>

/* "idle", "running", "held", "memwait" (waiting for memory wins, then a hold, then the scheduler's word); hold:
 * the slot's hold word in the region (region.sched[slot].hold). */
const char *rota_client_state(const rota_slot_t *s, uint32_t hold);
/* The bytes the client holds over every GPU (its unused fast-path credit included). */
uint64_t rota_client_used(const rota_slot_t *s);

#endif
