/* sched-share.c - launch policy "share" (the default): weighted fair share of device time among equals. */
#include "runtime/sched-policy.h"

/*
 * A member more than 8 ticks (the slack) of virtual time ahead of the least-served active member is held
 * (ROTA_HOLD_SHARE) until the others catch up; hysteresis: once held, until it is no longer ahead at all (fewer
 * switches, less overlap of the two clients' work, whose split the sampling can only estimate). A member held
 * for its share that went idle (between a launch and its sync, say) stays held while it is still ahead of the
 * least-served active one: else each sync would clear the hold, and a client that launches and syncs in turn
 * would never be held back. Its thread waits in the gate, and its launch after the release marks it active again.
 */
static void share_decide(const sched_group_t *g, void *state, uint32_t *hold)
{
    (void)state;
    if (!g->n) return;
    for (unsigned j = 0; j < g->nm; j++) {
        const sched_member_t *c = &g->m[j];
        if (!c->active && (c->hold_was & ROTA_HOLD_SHARE) && c->vtime > g->vmin) hold[j] = ROTA_HOLD_SHARE;
    }
    if (g->n < 2) return;
    uint64_t slack = 8 * g->o->tick_ns;
    for (unsigned j = 0; j < g->nm; j++) {
        const sched_member_t *c = &g->m[j];
        if (!c->active) continue;
        bool was = c->hold_was & ROTA_HOLD_SHARE;
        if (c->vtime > g->vmin + (was ? 0 : slack)) hold[j] = ROTA_HOLD_SHARE;
    }
}

const sched_policy_t sched_policy_share = {
    .name = "share",
    .help = "weighted fair share of device time by ROTA_WEIGHT",
    .decide = share_decide,
};
