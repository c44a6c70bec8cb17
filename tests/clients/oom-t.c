/* oom-t.c - device capacity and CUDA_ERROR_OUT_OF_MEMORY counted across processes, memory back after exit/kill -9. */
#include "tests/clients/client.h"

/* What the hog child leaves free, and what the parent then asks for (more than is left). */
#define LEAVE (16 * CLIENT_MIB)
#define ASK (64 * CLIENT_MIB)
/* How long a dead process's memory may take to come back (the driver tears its context down). */
#define RECLAIM_MS 2000

static client_t c;

/* Child: allocate all but LEAVE of what cuMemGetInfo says is free, report "ok <bytes>", hold it until "exit". */
static int role_hog(const char *arg)
{
    client_deadline(60);
    client_t h;
    client_init(&h);
    size_t free_b = 0, total = 0;
    if (cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS || free_b <= LEAVE) {
        client_report("fail meminfo");
        return 2;
    }
    size_t bytes = (free_b - LEAVE) & ~(size_t)(2 * CLIENT_MIB - 1);
    CUdeviceptr d;
    CUresult rc = cuMemAlloc(&d, bytes);
    if (rc != CUDA_SUCCESS) {
        client_report("fail alloc %zu: %d", bytes, (int)rc);
        return 3;
    }
    /* touch the ends so a lazily backed allocation is really usable */
    cuMemsetD8(d, 1, 4096);
    cuMemsetD8(d + bytes - 4096, 1, 4096);
    client_report("ok %zu", bytes);
    char cmd[64];
    if (!client_command(cmd, sizeof(cmd), 30000) || strcmp(cmd, "exit") != 0) return 4;
    cuMemFree(d);
    client_fini(&h);
    return 0;
}

static const client_role_t roles[] = {{"hog", role_hog}, {NULL, NULL}};

/* Starts a hog and waits for its report; returns the bytes it holds (0 on failure, already diagnosed). */
static size_t start_hog(client_child_t *ch)
{
    *ch = client_spawn("hog", "");
    char line[128];
    size_t bytes = 0;
    if (!client_read_line(ch->rep, line, sizeof(line), 20000) || sscanf(line, "ok %zu", &bytes) != 1) {
        diag("hog child reported '%s'", line);
        return 0;
    }
    return bytes;
}

/* Tries cuMemAlloc(ASK) until it succeeds or RECLAIM_MS pass; returns the result and the attempts made. */
static CUresult alloc_retry(CUdeviceptr *d, int *attempts, double *ms)
{
    uint64_t t0 = tap_now_ns();
    CUresult rc;
    *attempts = 0;
    do {
        ++*attempts;
        rc = cuMemAlloc(d, ASK);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY) break;
        client_sleep_ns(10 * 1000000ull);
    } while (client_ms_since(t0) < RECLAIM_MS);
    *ms = client_ms_since(t0);
    return rc;
}

int main(int argc, char **argv)
{
    int status;
    if (client_main(argc, argv, roles, &status)) return status;
    client_deadline(90);
    client_node("oom", "1G");
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda, SIMCUDA_MEM=1G)" : "");

    size_t free0 = 0, total = 0;
    ok_cu(cuMemGetInfo(&free0, &total));
    ok(free0 > 0 && free0 <= total, "cuMemGetInfo: free %zu <= total %zu", free0, total);
    if (c.simcuda) {
        is_uint(total, 1ull << 30, "simcuda: total is SIMCUDA_MEM (1G)");
        is_uint(free0, total, "simcuda: a fresh node has all of it free");
    }
    size_t dev_total = 0;
    ok_cu(cuDeviceTotalMem(&dev_total, c.dev));
    is_uint(dev_total, total, "cuDeviceTotalMem matches cuMemGetInfo's total");

    /* one process alone: more than the device holds fails, and fails cleanly */
    CUdeviceptr d = 0;
    is_int(cuMemAlloc(&d, total + ASK), CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(total + 64M): out of memory");
    size_t free_after = 0;
    ok_cu(cuMemGetInfo(&free_after, &total));
    ok(free_after + ASK >= free0, "a failed allocation takes nothing (free %zu, before %zu)", free_after, free0);

    /* a second process takes most of the device */
    client_child_t hog;
    size_t held = start_hog(&hog);
    if (!held) bail("the hog child could not allocate");
    ok(held + LEAVE + 2 * CLIENT_MIB >= free0 * 9 / 10, "child holds %zu bytes (most of %zu free)", held, free0);
    size_t free1 = 0;
    ok_cu(cuMemGetInfo(&free1, &total));
    ok(free1 + held <= free0, "cuMemGetInfo free in the parent dropped by the child's %zu bytes (%zu -> %zu)", held,
       free0, free1);
    if (c.simcuda) is_uint(free1, free0 - held, "simcuda: free dropped by exactly the child's allocation");
    CUresult rc = cuMemAlloc(&d, ASK);
    is_int(rc, CUDA_ERROR_OUT_OF_MEMORY, "parent cuMemAlloc(64M) while the child holds the rest: out of memory");
    if (rc == CUDA_SUCCESS) cuMemFree(d);

    /* the child frees and exits: the parent can allocate again */
    ok(client_send(hog.cmd, "exit"), "told the child to exit");
    is_int(client_exit_code(client_wait(&hog, 20000)), 0, "child exited with status 0");
    int attempts = 0;
    double ms = 0;
    rc = alloc_retry(&d, &attempts, &ms);
    is_int(rc, CUDA_SUCCESS, "after the child exited, parent cuMemAlloc(64M) succeeds (within %d ms)", RECLAIM_MS);
    if (c.simcuda) is_int(attempts, 1, "simcuda: at the first attempt");
    size_t free2 = 0;
    ok_cu(cuMemGetInfo(&free2, &total));
    ok(free2 + ASK <= free0 && free2 + ASK + 64 * CLIENT_MIB >= free0,
       "free is back to the start less the parent's 64M, within 64M (%zu of %zu)", free2, free0);
    if (rc == CUDA_SUCCESS) ok_cu(cuMemFree(d));

    /* again, but the child is killed with its memory held */
    held = start_hog(&hog);
    if (!held) bail("the second hog child could not allocate");
    size_t free3 = 0;
    ok_cu(cuMemGetInfo(&free3, &total));
    ok(free3 + held <= free0, "second child holds %zu bytes (free %zu)", held, free3);
    is_int(cuMemAlloc(&d, ASK), CUDA_ERROR_OUT_OF_MEMORY, "parent cuMemAlloc(64M) fails again");
    ok(kill(hog.pid, SIGKILL) == 0, "kill -9 the child");
    int st = client_wait(&hog, 20000);
    ok(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child died of SIGKILL");
    rc = alloc_retry(&d, &attempts, &ms);
    is_int(rc, CUDA_SUCCESS, "after kill -9, parent cuMemAlloc(64M) succeeds within %d ms (took %.0f ms, %d tries)",
           RECLAIM_MS, ms, attempts);
    if (c.simcuda) is_int(attempts, 1, "simcuda: the dead process's memory is reclaimed at the first attempt");
    if (rc == CUDA_SUCCESS) ok_cu(cuMemFree(d));
    size_t free4 = 0;
    ok_cu(cuMemGetInfo(&free4, &total));
    ok(free4 + 64 * CLIENT_MIB >= free0, "free after the kill is back to the start within 64M (%zu of %zu)", free4,
       free0);
    if (c.simcuda) is_uint(free4, free0, "simcuda: exactly back");

    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
