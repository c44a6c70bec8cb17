/* sched-prio.c - stage 1 of the launch scheduler, the class rule: an active high client holds its GPU's others. */
#include "runtime/sched-policy.h"

/* While a high client is active on its GPU, every normal and low client there is held (ROTA_HOLD_PRIO), released at
 * once when the last high client there is idle or gone (sched.c decides "active"). The share and quantum bits a
 * client already had stay beside the priority bit: the board's direct release (abi.h) ends only a hold that is
 * priority alone, so a client that was over its share (or out of the quantum) before the high client came waits
 * for rotad's release, which decides again. */
uint32_t sched_prio_hold(enum rota_prio prio, bool high_active, uint32_t hold_was)
{
    if (prio == ROTA_PRIO_HIGH || !high_active) return 0;
    return ROTA_HOLD_PRIO | (hold_was & (ROTA_HOLD_SHARE | ROTA_HOLD_QUANTUM));
}
