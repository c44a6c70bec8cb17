/* share-t.c - two processes with host gaps share one device: busy fraction (simcuda-stat) and progress of both. */
#include "tests/clients/client.h"

/*
 * Each sharer loops: spin_ns(2 ms), synchronize, sleep 2 ms. Alone, one keeps the device busy for its duty
 * cycle f (a little under 0.5: the sleep and the wake-ups stretch the gap). Two of them time-slice one engine
 * that is work conserving: a kernel waiting while the other process sleeps runs at once, so the busy fraction
 * of the pair is min(1, fA + fB) less the context switches, never the max(fA, fB) of a device that idles.
 * The solo fractions are measured on this machine, before and after the pair, so the expectation follows the
 * load; the tolerance covers load that changes between the phases.
 */
#define KERNEL_NS 2000000ull
#define GAP_NS 2000000ull
#define SOLO_MS 600
#define PAIR_MS 2000
#define TOL 0.12

/* Child: report "ready", then for each "go MS" run the loop for MS ms and report "done <iterations>". */
static int role_sharer(const char *arg)
{
    client_deadline(60);
    client_t c;
    client_init(&c);
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 2;
    /* warm up: the first launch may carry one-time costs */
    client_spin(&c, s, 1000);
    cuStreamSynchronize(s);
    client_report("ready");
    char cmd[64];
    unsigned ms;
    while (client_command(cmd, sizeof(cmd), 30000)) {
        if (strcmp(cmd, "exit") == 0) break;
        if (sscanf(cmd, "go %u", &ms) != 1) return 3;
        uint64_t end = tap_now_ns() + (uint64_t)ms * 1000000ull;
        unsigned long n = 0;
        while (tap_now_ns() < end) {
            if (client_spin(&c, s, KERNEL_NS) != CUDA_SUCCESS || cuStreamSynchronize(s) != CUDA_SUCCESS) return 4;
            n++;
            client_sleep_ns(GAP_NS);
        }
        client_report("done %lu", n);
    }
    cuStreamDestroy(s);
    client_fini(&c);
    return 0;
}

static const client_role_t roles[] = {{"sharer", role_sharer}, {NULL, NULL}};

static client_t c;

/* Runs one phase: resets the counters, tells the given children to go, collects their iteration counts. */
static void phase(client_child_t *kids, int nkids, unsigned ms, unsigned long *iters, client_stat_t *st)
{
    if (c.simcuda) client_stat_reset();
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "go %u", ms);
    for (int i = 0; i < nkids; i++)
        if (!client_send(kids[i].cmd, cmd)) bail("could not command child %d", i);
    for (int i = 0; i < nkids; i++) {
        char line[64];
        bool got = client_read_line(kids[i].rep, line, sizeof(line), (int)ms + 20000);
        if (!got || sscanf(line, "done %lu", &iters[i]) != 1)
            bail("child %d reported '%s'", i, line);
    }
    if (c.simcuda) client_stat(0, st);
}

static double frac(const client_stat_t *st)
{
    return st->wall_ns ? (double)st->busy_ns / (double)st->wall_ns : 0.0;
}

int main(int argc, char **argv)
{
    int status;
    if (client_main(argc, argv, roles, &status)) return status;
    client_deadline(60);
    client_node("share", NULL);
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");

    client_child_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = client_spawn("sharer", "");
        char line[64];
        if (!client_read_line(kids[i].rep, line, sizeof(line), 20000) || strcmp(line, "ready") != 0)
            bail("sharer %d did not start: '%s'", i, line);
    }

    /* solo phases before and after the pair phase, so a load that drifts over the run averages out */
    unsigned long solo[2] = {0, 0}, pair[2], n;
    client_stat_t st_solo[2][2], st_pair;
    for (int i = 0; i < 2; i++) {
        phase(&kids[i], 1, SOLO_MS, &n, &st_solo[i][0]);
        solo[i] += n;
    }
    phase(kids, 2, PAIR_MS, pair, &st_pair);
    for (int i = 0; i < 2; i++) {
        phase(&kids[i], 1, SOLO_MS, &n, &st_solo[i][1]);
        solo[i] += n;
    }
    diag("iterations: solo %lu / %lu in 2 x %d ms, together %lu + %lu in %d ms", solo[0], solo[1], SOLO_MS,
         pair[0], pair[1], PAIR_MS);

    /* both make progress: each keeps at least 40% of its solo rate (ideal: close to 100%) */
    for (int i = 0; i < 2; i++) {
        double rate_solo = (double)solo[i] / (2 * SOLO_MS), rate_pair = (double)pair[i] / PAIR_MS;
        ok(solo[i] > 0 && rate_pair >= 0.4 * rate_solo,
           "sharer %d progresses: %.3f iterations/ms together vs %.3f alone (>= 40%%)", i, rate_pair, rate_solo);
    }

    if (c.simcuda) {
        double fa = (frac(&st_solo[0][0]) + frac(&st_solo[0][1])) / 2;
        double fb = (frac(&st_solo[1][0]) + frac(&st_solo[1][1])) / 2, fp = frac(&st_pair);
        double switch_cost = st_pair.wall_ns ? (double)st_pair.switch_ns / (double)st_pair.wall_ns : 0;
        double expect = (fa + fb < 1.0 ? fa + fb : 1.0) - switch_cost;
        diag("busy fraction: solo %.3f / %.3f, together %.3f (expected %.3f; %llu switches, %llu preemptions)", fa,
             fb, fp, expect, (unsigned long long)st_pair.switches, (unsigned long long)st_pair.preemptions);
        in_range(fa, 0.1, 0.505, "a lone sharer keeps the device busy %.3f of the time (0.1..0.505: 2 ms on, 2+ off)",
                 fa);
        in_range(fp, expect - TOL, expect + TOL,
                 "two sharers: busy fraction %.3f within %.2f of min(1, fA + fB) - switches = %.3f (loaded host)", fp,
                 TOL, expect);
        ok(fp > (fa > fb ? fa : fb) + 0.1, "the pair fills each other's gaps (%.3f > max solo %.3f + 0.1)", fp,
           fa > fb ? fa : fb);
        /* ground truth is consistent: every kernel of the phase is counted, each for its 2 ms */
        is_uint(st_pair.kernels, pair[0] + pair[1], "simcuda-stat counted every kernel of the pair phase");
        double per_kernel = st_pair.kernels ? (double)st_pair.busy_ns / (double)st_pair.kernels : 0;
        in_range(per_kernel, 0.99 * KERNEL_NS, 1.03 * KERNEL_NS,
                 "busy_ns per kernel is %.0f ns, the 2 ms spin (-1%%/+3%%: launch cost)", per_kernel);
        ok(st_pair.switches > 0, "the engine switched between the two contexts (%llu times)",
           (unsigned long long)st_pair.switches);
    } else {
        skip("busy fraction from simcuda-stat: not on simcuda (the device is '%s'), no ground truth to read", c.name);
    }

    for (int i = 0; i < 2; i++) {
        client_send(kids[i].cmd, "exit");
        is_int(client_exit_code(client_wait(&kids[i], 20000)), 0, "sharer %d exited cleanly", i);
    }
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
