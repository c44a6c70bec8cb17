/* sched-policy-t.c - TAP tests for the launch-policy seam: the table, the class rule, and each policy's decisions
 * on hand-made share groups (no rotad, no clients: a policy is a function of what it is told). */
#include "runtime/sched-policy.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

/* The policies under test, defined in their files (the table in sched-policy.c declares them for rotad). */
extern const sched_policy_t sched_policy_share, sched_policy_quantum;

/* share slack: 8 ticks = 8 ms; the quantum policy's one option (--quantum-ms) is its quantum: 20 ms */
static sched_opts_t opts = {.tick_ns = 1 * MS, .popt = {20 * MS}};

/* The policy names rotad's page documents: docs/rotad.md's synopsis, "[--policy A|B|...]". */
static const char *doc_policies(void)
{
    static char names[256];
    const char *src = getenv("ROTA_SRCDIR");
    if (!src) bail("ROTA_SRCDIR must name the source folder (the Makefile's test target exports it)");
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s/docs/rotad.md", src);
    FILE *f = fopen(path, "r");
    if (!f) bail("cannot read %s", path);
    while (!names[0] && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "[--policy "), *e = p ? strchr(p, ']') : NULL;
        if (e) snprintf(names, sizeof names, "%.*s", (int)(e - p - 10), p + 10);
    }
    fclose(f);
    if (!names[0]) bail("no [--policy ...] in %s's synopsis", path);
    return names;
}

/* Runs policy p on members m[0..nm) at now with state st; hold gets the decisions. */
static void decide(const sched_policy_t *p, const sched_member_t *m, unsigned nm, uint64_t now, void *st,
                   uint32_t *hold)
{
    sched_group_t g = {.o = &opts, .gpu = 1, .cls = ROTA_PRIO_NORMAL, .now = now, .m = m, .nm = nm,
                       .vmin = UINT64_MAX};
    for (unsigned j = 0; j < nm; j++)
        if (m[j].active) {
            g.n++;
            if (m[j].vtime < g.vmin) g.vmin = m[j].vtime;
        }
    memset(hold, 0, nm * sizeof *hold);
    p->decide(&g, st, hold);
}

int main(void)
{
    uint64_t st[SCHED_POLICY_STATE_MAX / 8];
    uint32_t h[4];

    /* the table: a policy is a row */
    ok(sched_policy_find("share") == &sched_policy_share, "share is in the table");
    ok(sched_policy_find("quantum") == &sched_policy_quantum, "quantum is in the table");
    ok(sched_policy_find("fair") == NULL && sched_policy_find(NULL) == NULL, "an unknown name is no policy");
    is_str(sched_policy_names(), doc_policies(), "names for usage, the default first, as docs/rotad.md lists them");
    ok(sched_policy_at(0) == &sched_policy_share, "share is the default: the table's first row");
    unsigned rows = 0;
    while (sched_policy_at(rows)) rows++;
    unsigned documented = 1;
    for (const char *c = doc_policies(); *c; c++) documented += *c == '|';
    is_uint(rows, documented, "the table has a row for each policy docs/rotad.md lists");
    for (unsigned i = 0; i < rows; i++)
        ok(sched_policy_find(sched_policy_at(i)->name) == sched_policy_at(i) && sched_policy_at(i)->help &&
               sched_policy_at(i)->help[0] && sched_policy_at(i)->nopts <= SCHED_POLICY_OPTS_MAX,
           "row %u (%s): found by its name, has help for rotad --help, options fit", i, sched_policy_at(i)->name);

    /* the options a policy owns: --quantum-ms is the quantum policy's */
    unsigned row = 9;
    ok(sched_policy_opt_find("--quantum-ms", &row) == &sched_policy_quantum && row == 0,
       "--quantum-ms belongs to the quantum policy (its row 0)");
    ok(sched_policy_opt_find("--tick-ms", NULL) == NULL, "--tick-ms is rotad's, not a policy's");
    char err[256];
    sched_opts_t o = {0};
    ok(sched_policy_opt_set(&o, "--quantum-ms", "abc", err, sizeof err) == -EINVAL, "--quantum-ms abc refused");
    is_str(err, "--quantum-ms: 'abc' is not a number of milliseconds in 0..10000", "with its message");
    ok(sched_policy_opt_set(&o, "--quantum-ms", "10001", err, sizeof err) == -EINVAL, "--quantum-ms 10001 refused");
    ok(sched_policy_opt_set(&o, "--quantum-ms", "7.5", err, sizeof err) == 0 && o.popt[0] == 7500000u &&
           o.popt_of == &sched_policy_quantum,
       "--quantum-ms 7.5 is kept in ns, for the quantum policy");
    ok(sched_policy_resolve(&o, err, sizeof err) == 0 && o.policy == &sched_policy_quantum && o.popt[0] == 7500000u,
       "given alone, it chooses the quantum policy");
    o = (sched_opts_t){.policy = &sched_policy_quantum};
    ok(sched_policy_resolve(&o, err, sizeof err) == 0 && o.popt[0] == 20 * MS, "not given: the default, 20 ms");
    o = (sched_opts_t){0};
    ok(sched_policy_opt_set(&o, "--quantum-ms", "0", err, sizeof err) == 0 &&
           sched_policy_resolve(&o, err, sizeof err) == 0 && o.policy == &sched_policy_share,
       "--quantum-ms 0 counts as not given: the default policy");
    o = (sched_opts_t){.policy = &sched_policy_share};
    sched_policy_opt_set(&o, "--quantum-ms", "5", err, sizeof err);
    ok(sched_policy_resolve(&o, err, sizeof err) == -EINVAL, "--quantum-ms with --policy share refused");
    is_str(err, "--quantum-ms: only with --policy quantum", "with its message");

    /* stage 1: the class rule */
    is_uint(sched_prio_hold(ROTA_PRIO_NORMAL, true, 0), ROTA_HOLD_PRIO, "a high client active: normal held");
    is_uint(sched_prio_hold(ROTA_PRIO_LOW, true, ROTA_HOLD_SHARE), ROTA_HOLD_PRIO | ROTA_HOLD_SHARE,
            "a share hold it had stays beside the priority bit");
    is_uint(sched_prio_hold(ROTA_PRIO_HIGH, true, 0), 0, "a high client is never held by the class rule");
    is_uint(sched_prio_hold(ROTA_PRIO_NORMAL, false, ROTA_HOLD_PRIO | ROTA_HOLD_SHARE), 0,
            "no high client active: no class hold (the policy decides again)");

    /* share: more than 8 ms of virtual time ahead of the least served is held; once held, until caught up */
    memset(st, 0, sizeof st);
    sched_member_t s1[] = {{.slot = 3, .active = true, .vtime = 0}, {.slot = 5, .active = true, .vtime = 9 * MS},
                           {.slot = 7, .active = true, .vtime = 8 * MS}};
    decide(&sched_policy_share, s1, 3, 0, st, h);
    ok(h[0] == 0 && h[1] == ROTA_HOLD_SHARE && h[2] == 0, "share: 9 ms ahead held, 8 ms ahead not (slack 8 ms)");
    s1[1].vtime = 1 * MS;
    s1[1].hold_was = ROTA_HOLD_SHARE;
    decide(&sched_policy_share, s1, 3, 0, st, h);
    is_uint(h[1], ROTA_HOLD_SHARE, "share: a held client stays held while still ahead (hysteresis)");
    s1[1].vtime = 0;
    decide(&sched_policy_share, s1, 3, 0, st, h);
    is_uint(h[1], 0, "share: released once caught up");
    sched_member_t s2[] = {{.slot = 1, .active = true, .vtime = 2 * MS},
                           {.slot = 2, .active = false, .vtime = 5 * MS, .hold_was = ROTA_HOLD_SHARE},
                           {.slot = 4, .active = false, .vtime = 5 * MS}};
    decide(&sched_policy_share, s2, 3, 0, st, h);
    ok(h[0] == 0 && h[1] == ROTA_HOLD_SHARE && h[2] == 0,
       "share: one active client runs; an idle one held for its share stays held while ahead, others not");
    s2[0].active = false;
    decide(&sched_policy_share, s2, 3, 0, st, h);
    ok(!h[0] && !h[1] && !h[2], "share: nobody active, nobody held");

    /* quantum: one active member at a time, quantum_ns each, the least served first */
    memset(st, 0, sizeof st);
    sched_member_t q[] = {{.slot = 2, .active = true, .vtime = 5 * MS}, {.slot = 6, .active = true, .vtime = 3 * MS},
                          {.slot = 9, .active = true, .vtime = 9 * MS}};
    decide(&sched_policy_quantum, q, 3, 100 * MS, st, h);
    ok(h[0] == ROTA_HOLD_QUANTUM && h[1] == 0 && h[2] == ROTA_HOLD_QUANTUM, "quantum: the least served runs");
    q[1].vtime = 50 * MS; /* it ran: its virtual time grew */
    decide(&sched_policy_quantum, q, 3, 119 * MS, st, h);
    is_uint(h[1], 0, "quantum: it keeps the GPU for its quantum, however far ahead");
    decide(&sched_policy_quantum, q, 3, 120 * MS, st, h);
    ok(h[0] == 0 && h[1] == ROTA_HOLD_QUANTUM && h[2] == ROTA_HOLD_QUANTUM,
       "quantum: after 20 ms the next least served (slot 2) runs");
    q[0].active = false;
    decide(&sched_policy_quantum, q, 3, 121 * MS, st, h);
    ok(h[0] == 0 && (h[1] == 0) != (h[2] == 0), "quantum: its runner went idle: another takes the GPU at once");
    q[2].active = false;
    decide(&sched_policy_quantum, q, 3, 122 * MS, st, h);
    ok(!h[0] && !h[1] && !h[2], "quantum: one active member alone runs");
    return done_testing();
}
