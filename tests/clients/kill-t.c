/* kill-t.c - a process killed (kill -9) mid-kernel: the survivor's work finishes, its data is right, memory returns. */
#include "tests/clients/client.h"

#define MS 1000000ull
#define N (1u << 16)
#define VICTIM_BYTES (256 * CLIENT_MIB)
#define VICTIM_SPIN_MS 5000
/* How long the driver may take to hand back a dead process's memory. */
#define RECLAIM_MS 2000

static client_t c;

/* Child: hold VICTIM_BYTES, start a 5 s kernel, report "running", then wait to be killed. */
static int role_victim(const char *arg)
{
    client_deadline(60);
    client_t v;
    client_init(&v);
    CUdeviceptr d;
    if (cuMemAlloc(&d, VICTIM_BYTES) != CUDA_SUCCESS) {
        client_report("fail alloc");
        return 2;
    }
    cuMemsetD8(d, 0x55, 1 << 20);
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 3;
    if (client_spin(&v, s, VICTIM_SPIN_MS * MS) != CUDA_SUCCESS) {
        client_report("fail launch");
        return 4;
    }
    /* the kernel is running (or about to) once the stream is not idle */
    client_report("running %d", cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
    char cmd[16];
    client_command(cmd, sizeof(cmd), 50000);
    return 5; /* never reached in the test: the parent kills first */
}

static const client_role_t roles[] = {{"victim", role_victim}, {NULL, NULL}};

static client_child_t start_victim(void)
{
    client_child_t ch = client_spawn("victim", "");
    char line[64];
    int running = 0;
    if (!client_read_line(ch.rep, line, sizeof(line), 20000) || sscanf(line, "running %d", &running) != 1)
        bail("victim child reported '%s'", line);
    ok(running == 1, "victim's 5 s kernel is in flight");
    client_sleep_ns(30 * MS); /* let it get onto the engine */
    return ch;
}

static void kill_victim(client_child_t *ch)
{
    ok(kill(ch->pid, SIGKILL) == 0, "kill -9 the victim mid-kernel");
    int st = client_wait(ch, 20000);
    ok(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim died of SIGKILL");
}

/* Polls cuMemGetInfo until free is back to want (within slack) or RECLAIM_MS pass; returns free. */
static size_t wait_free(size_t want, size_t slack, double *ms)
{
    uint64_t t0 = tap_now_ns();
    size_t fr = 0, total = 0;
    do {
        if (cuMemGetInfo(&fr, &total) != CUDA_SUCCESS) break;
        if (fr + slack >= want) break;
        client_sleep_ns(10 * MS);
    } while (client_ms_since(t0) < RECLAIM_MS);
    *ms = client_ms_since(t0);
    return fr;
}

int main(int argc, char **argv)
{
    int status;
    if (client_main(argc, argv, roles, &status)) return status;
    client_deadline(90);
    client_node("kill", "4G");
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");

    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, out;
    need_cu(cuMemAlloc(&a, N * 4));
    need_cu(cuMemAlloc(&b, N * 4));
    need_cu(cuMemAlloc(&out, N * 4));
    float *h;
    need_cu(cuMemAllocHost((void **)&h, N * 4));
    size_t free0 = 0, total = 0;
    need_cu(cuMemGetInfo(&free0, &total));

    /* 1: the victim dies while the survivor has work queued behind and beside its kernel */
    client_child_t v = start_victim();
    size_t free1 = 0;
    ok_cu(cuMemGetInfo(&free1, &total));
    ok(free1 + VICTIM_BYTES <= free0, "the victim's 256M shows in the survivor's cuMemGetInfo (%zu -> %zu)", free0,
       free1);
    for (size_t i = 0; i < N; i++) h[i] = -1.0f;
    uint64_t t0 = tap_now_ns();
    bool q = client_fill(&c, s, a, client_f32_bits(40.0f), N) == CUDA_SUCCESS;
    q &= client_fill(&c, s, b, client_f32_bits(2.0f), N) == CUDA_SUCCESS;
    for (int i = 0; i < 10; i++) q &= client_spin(&c, s, 5 * MS) == CUDA_SUCCESS;
    q &= client_add(&c, s, a, b, out, N) == CUDA_SUCCESS;
    q &= cuMemcpyDtoHAsync(h, out, N * 4, s) == CUDA_SUCCESS;
    ok(q, "survivor queued 2 fills, 10 x 5 ms spins, an add and a copy");
    client_sleep_ns(20 * MS);
    kill_victim(&v);
    ok_cu(cuStreamSynchronize(s));
    double ms = client_ms_since(t0);
    in_range(ms, 50.0, 2000.0, "survivor's 50 ms of work finished %.0f ms after queueing (bound 2 s, victim had 5 s)",
             ms);
    bool good = true;
    for (size_t i = 0; i < N && good; i++) good = h[i] == 42.0f;
    ok(good, "survivor's data is right (42 everywhere)");
    /* simcuda's accounting is exact; a real GPU's free memory also moves with the driver's own allocations */
    size_t slack = c.simcuda ? 0 : 64 * CLIENT_MIB;
    double rms = 0;
    size_t free2 = wait_free(free0, slack, &rms);
    ok(free2 + slack >= free0, "the victim's memory came back within %d ms (free %zu of %zu, slack %zu, %.0f ms)",
       RECLAIM_MS, free2, free0, slack, rms);

    /* 2: the victim dies holding the device while the survivor is idle; afterwards the device is all ours */
    v = start_victim();
    kill_victim(&v);
    CUevent e0, e1;
    need_cu(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    need_cu(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    t0 = tap_now_ns();
    ok_cu(cuEventRecord(e0, s));
    ok_cu(client_spin(&c, s, 100 * MS));
    ok_cu(cuEventRecord(e1, s));
    ok_cu(cuStreamSynchronize(s));
    ms = client_ms_since(t0);
    in_range(ms, 99.0, 2000.0, "a 100 ms kernel after the kill is done in %.0f ms (nobody hangs: bound 2 s)", ms);
    float ems = 0;
    ok_cu(cuEventElapsedTime(&ems, e0, e1));
    /* a ghost of the victim's 5 s kernel would share the engine and stretch this to ~200 ms */
    in_range(ems, 99.0, 160.0, "its events span %.1f ms: the device is all ours (99..160 ms; a ghost doubles it)",
             (double)ems);
    cuEventDestroy(e0);
    cuEventDestroy(e1);
    size_t free3 = wait_free(free0, slack, &rms);
    ok(free3 + slack >= free0, "the second victim's memory came back within %d ms (%.0f ms)", RECLAIM_MS, rms);
    CUdeviceptr big;
    size_t ask = free0 > VICTIM_BYTES * 2 ? VICTIM_BYTES * 2 : free0 / 2;
    CUresult rc = cuMemAlloc(&big, ask);
    is_int(rc, CUDA_SUCCESS, "and can be allocated again (%zu bytes)", ask);
    if (rc == CUDA_SUCCESS) cuMemFree(big);

    if (c.simcuda) {
        client_stat_t st;
        client_stat(0, &st);
        is_uint(st.contexts, 1, "simcuda: only the survivor's context is live");
        ok(st.reclaims >= 2, "simcuda: both dead processes were reclaimed (%llu)", (unsigned long long)st.reclaims);
        ok(st.have_mem && st.mem_used == total - free3, "simcuda: mem_used %llu is the survivor's own",
           (unsigned long long)st.mem_used);
    } else {
        skip("simcuda-stat context and reclaim counts: not on simcuda");
    }

    cuMemFreeHost(h);
    cuMemFree(a);
    cuMemFree(b);
    cuMemFree(out);
    cuStreamDestroy(s);
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
