/* remap-t.c - TAP tests of librota's device remap (ROTA_GPU, shim/client-place.c) and rotad's GPU probe: four
 * processes started with LD_PRELOAD=librota.so but not through rota run, all using device 0 of a four-GPU
 * simulated node, end on four different GPUs and see theirs as device 0, whichever driver call they make first;
 * ROTA_GPU=N, ROTA_GPU=all and a preset CUDA_VISIBLE_DEVICES are honoured; rotad --no-probe or no rotad means no
 * placement; the probe leaves the simulated node as it found it (no context, no process attached).
 * Jobs are this program re-executed (ROTA_REMAP_T_JOB=1). */
#include "runtime/lib/proto.h"
#include "tests/runtime/rotad-helpers.h"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

/* ---- the job: report device 0's UUID and the device count, hold 64 MiB until stdin closes ---------------- */

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*procaddr_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static int job_main(void)
{
    if (!th_cuda_load()) return 2;
    const char *first = getenv("ROTA_REMAP_T_FIRST");
    CUresult rc = CUDA_SUCCESS;
    init_fn init = (init_fn)th_sym("cuInit");
    if (first && !strcmp(first, "version")) {
        int v = 0;
        rc = ((CUresult(*)(int *))th_sym("cuDriverGetVersion"))(&v);
    } else if (first && !strcmp(first, "procaddr")) {
        /* the PyTorch way: the entry points come from cuGetProcAddress, before cuInit */
        void *p = NULL;
        CUdriverProcAddressQueryResult st;
        rc = ((procaddr_fn)th_sym("cuGetProcAddress_v2"))("cuInit", &p, 12000, 0, &st);
        if (!rc && p) init = (init_fn)p;
    }
    int n = 0;
    char s[PROTO_UUID_STR] = "none";
    if (!rc) rc = th_job_calls(init, &n, s);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES"); /* as librota left it */
    return th_job_say(rc, n, s, vis && *vis ? vis : "-");
}

/* ---- the parent ---------------------------------------------------------------------------------------------- */

static char node[64], self[512];

typedef th_job_t job_t;

/* Starts self under LD_PRELOAD=librota.so (not through rota run) with stdin/stdout on pipes, stderr in th_dir;
 * extra env "K=V" strings (NULL-terminated) last. */
static void job_start(job_t *j, const char *const *env)
{
    if (th_job_fork(j, true)) {
        th_preload_librota();
        setenv("ROTA_REMAP_T_JOB", "1", 1);
        setenv("ROTA_GPU", "auto", 1);
        setenv("ROTA_LOG", "info", 1);
        unsetenv("CUDA_VISIBLE_DEVICES");
        unsetenv("ROTA_TRACE");
        for (; env && *env; env++) putenv((char *)*env);
        execl(self, "remap-t-job", (char *)NULL);
        _exit(127);
    }
}

/* Whether the job's stderr holds s. */
static bool job_said(const job_t *j, const char *s)
{
    static char buf[16384];
    int fd = open(j->err, O_RDONLY);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return strstr(buf, s) != NULL;
}

int main(void)
{
    if (getenv("ROTA_REMAP_T_JOB")) return job_main();
    if (!getenv("ROTA_BUILD")) bail("ROTA_BUILD is not set (run through make test, or export it)");
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) bail("readlink /proc/self/exe");
    self[n] = 0;

    /* rotad and the jobs share this environment: rotad's probe sees the jobs' node */
    th_node4_setup("remap-t", node, sizeof node);
    unsetenv("ROTA_REAL_LIBCUDA");
    th_rotad_probe = true;

    /* the probe alone, on a node of its own: it must leave no context and no process attached */
    char node2[80];
    snprintf(node2, sizeof node2, "%s-probe", node);
    setenv("SIMCUDA_NODE", node2, 1);
    pid_t rotad = th_rotad_start();
    setenv("SIMCUDA_NODE", node, 1);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s/bin/rota status --json --socket %s", getenv("ROTA_BUILD"), th_sock);
    char *js = th_run_out(cmd);
    int ndev = 0;
    for (char *p = js; (p = strstr(p, "\"uuid\":")); p++) ndev++;
    is_int(ndev, 4, "rotad's probe enters the node's four GPUs in the ledger before any client");
    ok(strstr(js, "\"capacity\":4294967296") != NULL, "with their capacity (4G)");
    long long ctxs = 0;
    for (int d = 0; d < 4; d++) ctxs += th_node_stat(node2, d, "contexts");
    is_int((int)ctxs, 0, "the probe created no context (simcuda-stat)");
    {
        /* a process with other knobs may re-create the node only when nobody is attached: rotad is not */
        char e1[96], e2[] = "SIMCUDA_MEM=2G", e3[] = "ROTA_DISABLE=1";
        snprintf(e1, sizeof e1, "SIMCUDA_NODE=%s", node2);
        const char *env[] = {e1, e2, e3, NULL};
        job_t j;
        job_start(&j, env);
        ok(th_job_report(&j) && j.rc == 0, "the probe leaves no process attached: other knobs re-create the node (rc %d)",
           j.rc);
        th_job_finish(&j);
    }
    is_int(th_rotad_stop(rotad), 0, "rotad stops");
    th_node_remove(node2);

    char u[4][PROTO_UUID_STR];
    if (th_sim_uuids(u)) bail("unable to read the simulated GPUs' UUIDs");
    rotad = th_rotad_start();

    /* four device-0 jobs at once, not through rota run; two reach the driver first by another call */
    job_t j[4];
    char dbglog[] = "ROTA_LOG=debug", fv[] = "ROTA_REMAP_T_FIRST=version", fp[] = "ROTA_REMAP_T_FIRST=procaddr";
    const char *e0[] = {dbglog, NULL}, *e1[] = {fv, NULL}, *e2[] = {fp, NULL};
    job_start(&j[0], e0);
    job_start(&j[1], e1);
    job_start(&j[2], e2);
    job_start(&j[3], NULL);
    int seen = 0, bad = 0;
    for (int i = 0; i < 4; i++) {
        if (!th_job_report(&j[i]) || j[i].rc) {
            diag("job %d: rc %d count %d uuid %s vis %s", i, j[i].rc, j[i].count, j[i].uuid, j[i].vis);
            bad++;
            continue;
        }
        int x = th_uuid_index(u, j[i].uuid);
        /* CUDA_VISIBLE_DEVICES=GPU-<chosen>,<the three others>: device 0 is the chosen one, all four visible */
        size_t ul = strlen(j[i].uuid);
        int others = 0;
        for (int k = 0; k < 4; k++) others += k != x && strstr(j[i].vis + ul, u[k]) != NULL;
        if (x < 0 || j[i].count != 4 || strncmp(j[i].vis, j[i].uuid, ul) || j[i].vis[ul] != ',' || others != 3)
            bad++;
        else seen |= 1 << x;
    }
    is_int(bad, 0, "four jobs ran, each sees its GPU as device 0 (CUDA_VISIBLE_DEVICES=GPU-<uuid>,...) and the "
                   "three others after it");
    is_int(seen, 0xf, "four device-0 jobs started at once spread over the four GPUs (mask %#x)", seen);
    int used = 0;
    for (int d = 0; d < 4; d++)
        used += th_node_stat(node, d, "mem_used") == (64 << 20) && th_node_stat(node, d, "contexts") == 1;
    is_int(used, 4, "simcuda-stat: one context and the job's 64M on each of the four GPUs");
    ok(job_said(&j[3], "rota: info: placed on GPU "), "ROTA_LOG=info names the GPU chosen");
    ok(job_said(&j[0], "rota: debug: placement: GPU 3 "), "ROTA_LOG=debug shows what rotad chose by");
    for (int i = 0; i < 4; i++) th_job_finish(&j[i]);

    /* a rank of a distributed launcher picks its own GPU: not placed */
    char lr[] = "LOCAL_RANK=1";
    const char *erank[] = {lr, NULL};
    job_start(&j[0], erank);
    ok(th_job_report(&j[0]) && j[0].rc == 0 && j[0].count == 4 && !strcmp(j[0].vis, "-"),
       "LOCAL_RANK set (torchrun): no remap, the rank sees all four GPUs");
    th_job_finish(&j[0]);

    /* explicit choices are honoured */
    char g2[] = "ROTA_GPU=2";
    const char *eg2[] = {g2, NULL};
    job_start(&j[0], eg2);
    ok(th_job_report(&j[0]) && j[0].rc == 0 && !strcmp(j[0].uuid, u[2]) && j[0].count == 1 && !strcmp(j[0].vis, "2"),
       "ROTA_GPU=2: CUDA_VISIBLE_DEVICES=2, device 0 is GPU 2 (%s, %s)", j[0].uuid, j[0].vis);
    th_job_finish(&j[0]);
    char vis[160];
    snprintf(vis, sizeof vis, "CUDA_VISIBLE_DEVICES=%s,%s", u[3], u[1]);
    const char *ev[] = {vis, NULL};
    job_start(&j[0], ev);
    ok(th_job_report(&j[0]) && j[0].count == 2 && !strcmp(j[0].uuid, u[3]),
       "auto with CUDA_VISIBLE_DEVICES preset: left as it is (two GPUs, device 0 = GPU 3)");
    th_job_finish(&j[0]);
    char g1[] = "ROTA_GPU=1";
    const char *evg[] = {vis, g1, NULL};
    job_start(&j[0], evg);
    ok(th_job_report(&j[0]) && j[0].count == 1 && !strcmp(j[0].uuid, u[1]),
       "ROTA_GPU=1 indexes a preset CUDA_VISIBLE_DEVICES (GPU-3,GPU-1 -> GPU-1), like rota run --gpu 1");
    th_job_finish(&j[0]);
    char gall[] = "ROTA_GPU=all";
    const char *ea[] = {gall, NULL};
    job_start(&j[0], ea);
    ok(th_job_report(&j[0]) && j[0].count == 4 && !strcmp(j[0].vis, "-"), "ROTA_GPU=all: all four GPUs, no remap");
    th_job_finish(&j[0]);
    is_int(th_rotad_stop(rotad), 0, "rotad stops");

    /* rotad --no-probe knows no GPU of its own: nothing placed */
    const char *np[] = {"--no-probe", NULL};
    rotad = th_rotad_start_args(np);
    job_start(&j[0], NULL);
    ok(th_job_report(&j[0]) && j[0].rc == 0 && j[0].count == 4 && !strcmp(j[0].vis, "-"),
       "rotad --no-probe: not placed, the job sees four GPUs");
    th_job_finish(&j[0]);
    is_int(th_rotad_stop(rotad), 0, "rotad stops");

    /* no rotad: no placement (fail-open), the job still runs */
    job_start(&j[0], NULL);
    ok(th_job_report(&j[0]) && j[0].rc == 0 && j[0].count == 4 && !strcmp(j[0].uuid, u[0]),
       "without rotad: not placed, the job sees four GPUs and uses GPU 0");
    is_int(th_job_finish(&j[0]), 0, "and exits 0");

    th_node_remove(node);
    th_cleanup_children();
    th_cleanup();
    return done_testing();
}
