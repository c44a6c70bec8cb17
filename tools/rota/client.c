/* client.c - what rota status and rota top show of a client's slot: its state and the memory it holds. */
#include "tools/rota/client.h"

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

const char *rota_client_state(const rota_slot_t *s, uint32_t hold)
{
    if (LD(&s->waiting)) return "memwait";
    if (hold) return "held";
    switch (LD(&s->sched_state)) {
    case ROTA_SCHED_RUNNING: return "running";
    case ROTA_SCHED_HELD: return "held";
    case ROTA_SCHED_MEMWAIT: return "memwait";
    default: return "idle";
    }
}

uint64_t rota_client_used(const rota_slot_t *s)
{
    uint64_t t = 0;
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) t += LD(&s->used[d]);
    return t;
}
