/* sched-quantum.c - launch policy "quantum": exclusive quanta among equals, the least served first. */
#include "runtime/sched-policy.h"

#include <string.h>

/*
 * One active member of a share group runs at a time, for its quantum (rotad --quantum-ms), the least served
 * (least virtual time) first; the others are held (ROTA_HOLD_QUANTUM). For jobs that thrash when interleaved.
 */
enum quantum_opt { QUANTUM_NS }; /* its options' rows (quantum_opts), where g->o->popt keeps their values */
static const sched_policy_opt_t quantum_opts[] = {
    [QUANTUM_NS] = {"--quantum-ms", "MS", "a number of milliseconds", 0, 10000, 1e6, 20000000u,
                    "the quantum policy's turn"},
};
typedef struct quantum_state {
    int runner;         /* slot of the member holding the quantum, or -1 (its state is zeroed: stored + 1) */
    uint64_t run_since; /* when it got it */
} quantum_state_t;
_Static_assert(sizeof(quantum_state_t) <= SCHED_POLICY_STATE_MAX, "quantum state fits");

static int quantum_find(const sched_group_t *g, int slot)
{
    for (unsigned j = 0; j < g->nm; j++)
        if ((int)g->m[j].slot == slot) return (int)j;
    return -1;
}

static void quantum_decide(const sched_group_t *g, void *state, uint32_t *hold)
{
    quantum_state_t *q = state;
    int run = q->runner - 1; /* zeroed state: no runner */
    if (g->n < 2) {
        q->runner = 0;
        return;
    }
    int rj = run >= 0 ? quantum_find(g, run) : -1;
    bool keep = rj >= 0 && g->m[rj].active && g->now - q->run_since < g->o->popt[QUANTUM_NS];
    if (!keep) {
        int best = -1;
        for (unsigned j = 0; j < g->nm; j++) {
            if (!g->m[j].active || (int)g->m[j].slot == run) continue;
            if (best < 0 || g->m[j].vtime < g->m[best].vtime) best = (int)j;
        }
        if (best >= 0) {
            q->runner = (int)g->m[best].slot + 1;
            q->run_since = g->now;
        }
    }
    run = q->runner - 1;
    for (unsigned j = 0; j < g->nm; j++)
        if (g->m[j].active && (int)g->m[j].slot != run) hold[j] = ROTA_HOLD_QUANTUM;
}

const sched_policy_t sched_policy_quantum = {
    .name = "quantum",
    .help = "one normal or low client of a GPU runs at a time (one per class\n"
            "with --low-factor 1), --quantum-ms each, the least served first",
    .opts = quantum_opts,
    .nopts = sizeof quantum_opts / sizeof quantum_opts[0],
    .decide = quantum_decide,
};
