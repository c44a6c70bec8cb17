/* place-t.c - TAP tests of GPU placement: runtime/place.c's choice (unit), and `rota run --gpu` over rotad and
 * four simulated GPUs: four `device 0` jobs started at once spread over the four, --gpu N and
 * CUDA_VISIBLE_DEVICES are honoured, no rotad means no placement; rota top --once / status --json show the jobs;
 * a job that fits on no GPU waits for one with room (--place-wait), and its wait's unit tests.
 * Jobs are this program re-executed (ROTA_PLACE_T_JOB=1) under rota run, so under librota.so. */
#include "runtime/ledger.h"
#include "runtime/place.h"
#include "runtime/lib/proto.h"
#include "tests/runtime/rotad-helpers.h"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>

#define GIB (UINT64_C(1) << 30)

/* ---- the job: report device 0's UUID and the device count, hold 64 MiB until stdin closes ---------------- */

static int job_main(void)
{
    if (!th_cuda_load()) return 2;
    int n = 0;
    char s[PROTO_UUID_STR] = "none";
    CUresult rc = th_job_calls(th_sym("cuInit"), &n, s);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    return th_job_say(rc, n, s, vis ? vis : "-");
}

/* ---- the parent ---------------------------------------------------------------------------------------------- */

static char node[64], rota_bin[512], self[512];

typedef th_job_t job_t;

/* Starts `rota run ARGS... -- self` with stdin/stdout on pipes; extra env "K=V" strings (NULL-terminated). */
static void job_start(job_t *j, const char *const *args, const char *const *env)
{
    if (th_job_fork(j, false)) {
        setenv("ROTA_PLACE_T_JOB", "1", 1);
        setenv("SIMCUDA_NODE", node, 1);
        setenv("SIMCUDA_DEVICES", "4", 1);
        setenv("SIMCUDA_MEM", "4G", 1);
        setenv("ROTA_LOG", "error", 1);
        unsetenv("CUDA_VISIBLE_DEVICES");
        /* Under a sanitizer its runtime must come first in the job, before librota.so (rota run keeps it first). */
        const char *rt = th_sanitizer_so();
        if (rt) setenv("LD_PRELOAD", rt, 1);
        for (; env && *env; env++) putenv((char *)*env);
        const char *argv[24] = {"rota", "run", "--quiet"};
        int n = 3;
        for (; args && *args && n < 20; args++) argv[n++] = *args;
        argv[n++] = "--";
        argv[n++] = self;
        argv[n] = NULL;
        execv(rota_bin, (char **)argv);
        _exit(127);
    }
}

/* ---- unit tests of place_choose -------------------------------------------------------------------------- */

static pid_t sleeper(void)
{
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pause();
        _exit(0);
    }
    return p;
}

static void cands(rota_msg_place_t *m, unsigned n, uint64_t cap)
{
    memset(m, 0, sizeof *m);
    proto_hdr_init(&m->h, ROTA_MSG_PLACE, sizeof *m, 1);
    m->ncand = n;
    for (unsigned i = 0; i < n && i < ROTA_MAX_DEVICES; i++) {
        memset(m->cand[i].uuid, 0x10 + (int)i, ROTA_UUID_LEN);
        m->cand[i].total_mem = cap;
    }
}

static void unit_tests(void)
{
    rota_region_t *r = calloc(1, sizeof *r);
    rota_table_t *t = calloc(1, sizeof *t);
    place_t *pl = calloc(1, sizeof *pl);
    if (!r || !t || !pl) bail("calloc");
    pl->t = t;
    pid_t kids[6];
    for (int i = 0; i < 6; i++) kids[i] = sleeper();
    rota_msg_place_t m;
    cands(&m, 4, 16 * GIB);
    const char *why = "";
    is_int(proto_check(&m, sizeof m, NULL, &why), ROTA_MSG_PLACE, "a PLACE message passes proto_check (%s)", why);
    uint64_t now = 1000000000u;
    int pick[5];
    for (int i = 0; i < 5; i++) pick[i] = place_choose(pl, r, kids[i], &m, now);
    is_int(pick[0], 0, "empty node: the first job goes to candidate 0");
    ok(pick[1] == 1 && pick[2] == 2 && pick[3] == 3, "jobs placed at once spread: 1, 2, 3 (%d %d %d)", pick[1],
       pick[2], pick[3]);
    is_int(pick[4], 0, "a fifth job: every GPU has one pending, lowest index wins");
    is_uint(atomic_load(&r->ndevices), 4, "every candidate is entered in the ledger");
    is_uint(place_pending_count(pl, 0, NULL), 2, "two placements pending on GPU 0");
    place_settle(pl, kids[0]);
    is_uint(place_pending_count(pl, 0, NULL), 1, "settling a pid drops its pending placement");
    is_int(place_choose(pl, r, kids[4], &m, now), 0, "a pid asking again replaces its placement (still GPU 0)");
    is_uint(place_pending_count(pl, 0, NULL), 1, "not counted twice");

    /* where the job fits first, then load, then free memory */
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[0].reserved, 8 * GIB);
    atomic_store(&r->devices[1].clients, 3);
    rota_msg_place_t m2;
    cands(&m2, 2, 16 * GIB);
    is_int(place_choose(pl, r, kids[0], &m2, now), 0,
           "a job of unknown memory fits anywhere: the fewest clients (GPU 0 half full, GPU 1 three clients)");
    m2.mem = 10 * GIB;
    is_int(place_choose(pl, r, kids[0], &m2, now), 1, "a 10G job goes where it fits (GPU 1), whatever its load");
    m2.mem = 20 * GIB;
    is_int(place_choose(pl, r, kids[0], &m2, now), 1, "a job that fits nowhere: the most free memory (GPU 1)");
    m2.mem = 0;
    *pl = (place_t){.t = t};
    is_int(place_choose(pl, r, kids[1], &m, now), 2,
           "a job of unknown memory, among equal load: the most free memory, then the lowest index");
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[2].reserved, 10 * GIB);
    atomic_store(&r->devices[3].reserved, 4 * GIB);
    m.mem = 3 * GIB;
    is_int(place_choose(pl, r, kids[1], &m, now), 2,
           "a 3G job among equal load: the tightest fit (GPU 2, 6G free; not GPU 0, 8G, nor GPU 3, 12G)");
    m.mem = 11 * GIB;
    *pl = (place_t){.t = t};
    is_int(place_choose(pl, r, kids[1], &m, now), 3,
           "an 11G job fits GPU 1 (16G free, 3 clients) and GPU 3 (12G free, none): the lower load (GPU 3)");
    m.mem = 0;
    atomic_store(&r->devices[2].reserved, 0);
    atomic_store(&r->devices[3].reserved, 0);
    /* within the slack, load decides */
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[0].reserved, GIB / 8); /* < 2% of 16G */
    atomic_store(&r->devices[1].clients, 0);
    atomic_store(&r->devices[2].clients, 1);
    atomic_store(&r->devices[3].clients, 1);
    atomic_store(&r->devices[0].clients, 0);
    is_int(place_choose(pl, r, kids[0], &m, now), 0, "free memory within %d%%: the fewest clients (index 0 wins)",
           PLACE_MEM_SLACK_PCT);
    atomic_store(&r->devices[0].clients, 1);
    is_int(place_choose(pl, r, kids[1], &m, now), 1, "then GPU 1 (no client, no pending)");
    /* pending memory counts */
    *pl = (place_t){.t = t};
    for (int i = 0; i < 4; i++) {
        atomic_store(&r->devices[i].reserved, 0);
        atomic_store(&r->devices[i].clients, 0);
    }
    cands(&m, 2, 16 * GIB);
    m.mem = 10 * GIB;
    is_int(place_choose(pl, r, kids[0], &m, now), 0, "a 10G job on an empty node: GPU 0");
    m.mem = 8 * GIB;
    atomic_store(&r->devices[1].clients, 2);
    is_int(place_choose(pl, r, kids[1], &m, now), 1, "the pending 10G leaves GPU 0 too little for an 8G job");
    uint64_t pm = 0;
    is_uint(place_pending_count(pl, 0, &pm), 1, "one pending on GPU 0");
    is_uint(pm, 10 * GIB, "with its 10G");
    /* declared limits and queued requests count as the memory they will take */
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[1].clients, 0);
    atomic_store(&t->slots[0].state, ROTA_SLOT_LIVE);
    atomic_store(&t->slots[0].device, 0);
    atomic_store(&t->slots[0].wait_dev, -1);
    atomic_store(&t->slots[0].limit, 12 * GIB);
    atomic_store(&t->slots[0].used[0], GIB);
    atomic_store(&r->devices[0].reserved, GIB);
    atomic_store(&r->devices[0].clients, 1);
    m.mem = 6 * GIB;
    is_int(place_choose(pl, r, kids[0], &m, now), 1, "a client's 12G limit counts in full on its GPU, not the 1G it holds");
    atomic_store(&t->slots[1].state, ROTA_SLOT_LIVE);
    atomic_store(&t->slots[1].device, -1);
    atomic_store(&t->slots[1].wait_dev, 1);
    atomic_store(&t->slots[1].waiting, 9 * GIB);
    m.mem = 3 * GIB;
    is_int(place_choose(pl, r, kids[1], &m, now), 0,
           "a queued 9G request counts on its GPU: GPU 1 (6G pending + 9G queued) has no room for 3G, GPU 0 has 4G");
    memset(&t->slots[0], 0, sizeof t->slots[0]);
    memset(&t->slots[1], 0, sizeof t->slots[1]);
    atomic_store(&r->devices[0].reserved, 0);
    /* A job goes where the fewest clients of its class or above are (rivals); then the load; equal load: the
     * idler GPU. GPU 0: one high client; GPU 1: two normal ones. */
    *pl = (place_t){.t = t};
    for (int i = 0; i < 4; i++) atomic_store(&r->devices[i].clients, 0);
    for (int i = 0; i < 3; i++) {
        atomic_store(&t->slots[i].state, ROTA_SLOT_LIVE);
        atomic_store(&t->slots[i].device, i ? 1 : 0);
        atomic_store(&t->slots[i].wait_dev, -1);
        atomic_store(&t->slots[i].priority, i ? ROTA_PRIO_NORMAL : ROTA_PRIO_HIGH);
    }
    atomic_store(&r->devices[0].clients, 1);
    atomic_store(&r->devices[1].clients, 2);
    cands(&m, 2, 16 * GIB);
    is_int(place_choose(pl, r, kids[0], &m, now), 0,
           "a normal job: the fewest rivals (GPU 0's high client, not GPU 1's two normal ones)");
    *pl = (place_t){.t = t};
    m.flags = ROTA_PLACE_LOW;
    is_int(place_choose(pl, r, kids[0], &m, now), 0, "a low job: every client is a rival (1 against 2)");
    *pl = (place_t){.t = t};
    atomic_store(&t->slots[2].device, 0); /* GPU 0: high + normal; GPU 1: normal */
    atomic_store(&r->devices[0].clients, 2);
    atomic_store(&r->devices[1].clients, 1);
    atomic_store(&t->slots[1].priority, ROTA_PRIO_LOW); /* GPU 1: low */
    m.flags = 0;
    is_int(place_choose(pl, r, kids[0], &m, now), 1,
           "a normal job beside a low client rather than beside a high and a normal one");
    atomic_store(&t->slots[2].device, 1); /* GPU 0: high; GPU 1: low + normal */
    atomic_store(&r->devices[0].clients, 1);
    atomic_store(&r->devices[1].clients, 2);
    *pl = (place_t){.t = t};
    is_int(place_choose(pl, r, kids[0], &m, now), 0, "equal rivals (a high client, a normal one): the lower load");
    atomic_store(&t->slots[2].priority, ROTA_PRIO_LOW); /* GPU 0: high; GPU 1: two low */
    *pl = (place_t){.t = t};
    is_int(place_choose(pl, r, kids[0], &m, now), 1,
           "a normal job beside two low clients rather than beside a high one");
    is_int(place_choose(pl, r, kids[1], &m, now), 0,
           "a second normal job: the first one's pending placement is its rival on GPU 1");
    /* Fitting nowhere, the most free memory decides, not rivals: GPU 0 has the high client but 16G free, GPU 1
     * none but 2G free. */
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[1].reserved, 14 * GIB);
    m.mem = 20 * GIB;
    is_int(place_choose(pl, r, kids[0], &m, now), 0, "a 20G job that fits nowhere: the most free memory, not rivals");
    m.mem = 0;
    atomic_store(&r->devices[1].reserved, 0);
    *pl = (place_t){.t = t};
    atomic_store(&t->slots[1].state, ROTA_SLOT_FREE);
    atomic_store(&t->slots[2].state, ROTA_SLOT_FREE);
    atomic_store(&r->devices[1].clients, 2); /* two clients whose class rotad does not know (no slot here) */
    m.flags = ROTA_PLACE_HIGH;
    is_int(place_choose(pl, r, kids[1], &m, now), 1,
           "a high job: the GPU without a high client (GPU 1, though it has two clients)");
    is_int(place_choose(pl, r, kids[2], &m, now), 0,
           "a second high job: GPU 1's pending high placement counts as much as GPU 0's high client (load decides)");
    m.flags = 0;
    *pl = (place_t){.t = t};
    memset(&t->slots[0], 0, sizeof t->slots[0]);
    atomic_store(&r->devices[0].clients, 1);
    atomic_store(&r->devices[1].clients, 1);
    atomic_store(&r->devices[0].busy_permille, 950);
    atomic_store(&r->devices[1].busy_permille, 300);
    is_int(place_choose(pl, r, kids[0], &m, now), 1, "equal load: the idler GPU (busy 0.30 against 0.95)");
    *pl = (place_t){.t = t};
    atomic_store(&r->devices[1].busy_permille, 900);
    is_int(place_choose(pl, r, kids[1], &m, now), 0,
           "busy fractions %d permille apart or less count as equal (then the lowest index)", PLACE_BUSY_SLACK_PERMILLE);
    for (int i = 0; i < 4; i++) {
        atomic_store(&r->devices[i].clients, 0);
        atomic_store(&r->devices[i].busy_permille, 0);
    }
    atomic_store(&r->devices[0].clients, 0);
    m.mem = 0;
    /* expiry: by time, and by the process being gone */
    place_choose(pl, r, kids[2], &m, now + (uint64_t)ROTA_PLACE_PENDING_MS * 1000000u + 1);
    is_uint(place_pending_count(pl, 0, NULL) + place_pending_count(pl, 1, NULL), 1,
            "after %u ms only the newest placement is pending", ROTA_PLACE_PENDING_MS);
    kill(kids[2], SIGKILL);
    waitpid(kids[2], NULL, 0);
    place_choose(pl, r, kids[3], &m, now + (uint64_t)ROTA_PLACE_PENDING_MS * 1000000u + 2);
    is_uint(place_pending_count(pl, 0, NULL) + place_pending_count(pl, 1, NULL), 1,
            "a dead process's placement is dropped");
    /* bad messages */
    cands(&m, 0, GIB);
    ok(proto_check(&m, sizeof m, NULL, &why) == -EBADMSG, "PLACE with no candidate is refused");
    cands(&m, 2, GIB);
    m.cand[3].total_mem = 5;
    ok(proto_check(&m, sizeof m, NULL, &why) == -EBADMSG, "PLACE with junk past ncand is refused");
    cands(&m, 2, 0);
    ok(proto_check(&m, sizeof m, NULL, &why) == -EBADMSG, "PLACE with a 0-byte GPU is refused");
    cands(&m, 17, GIB);
    ok(proto_check(&m, sizeof m, NULL, &why) == -EBADMSG, "PLACE with 17 candidates is refused");
    ok(proto_check(&m, sizeof m - 8, NULL, &why) == -EBADMSG, "a truncated PLACE is refused");

    /* ROTA_PLACE_KNOWN (librota's remap): among the GPUs rotad probed itself, answered by region index */
    cands(&m, 0, GIB);
    m.flags = ROTA_PLACE_KNOWN;
    is_int(proto_check(&m, sizeof m, NULL, &why), ROTA_MSG_PLACE, "PLACE KNOWN with no candidate passes (%s)", why);
    *pl = (place_t){.t = t};
    is_int(place_choose(pl, r, kids[0], &m, now), -ENODEV, "KNOWN before any probed GPU: -ENODEV (nothing placed)");
    is_uint(place_pending_count(pl, 0, NULL), 0, "and nothing pending");
    cands(&m2, 1, GIB);
    m2.flags = ROTA_PLACE_KNOWN;
    ok(proto_check(&m2, sizeof m2, NULL, &why) == -EBADMSG, "PLACE KNOWN with candidates is refused");
    cands(&m2, 1, GIB);
    m2.flags = 8;
    ok(proto_check(&m2, sizeof m2, NULL, &why) == -EBADMSG, "PLACE with an unknown flag is refused");
    m2.flags = ROTA_PLACE_HIGH | ROTA_PLACE_LOW;
    ok(proto_check(&m2, sizeof m2, NULL, &why) == -EBADMSG, "PLACE naming two classes (high and low) is refused");
    m2.flags = ROTA_PLACE_LOW;
    is_int(proto_check(&m2, sizeof m2, NULL, &why), ROTA_MSG_PLACE, "PLACE LOW with candidates passes (%s)", why);
    m2.flags = ROTA_PLACE_HIGH;
    is_int(proto_check(&m2, sizeof m2, NULL, &why), ROTA_MSG_PLACE, "PLACE HIGH with candidates passes (%s)", why);
    rota_place_cand_t probed[3];
    for (int i = 0; i < 3; i++) {
        memset(probed[i].uuid, 0x20 + i, ROTA_UUID_LEN);
        probed[i].total_mem = 16 * GIB;
    }
    probed[2].total_mem = 4 * GIB; /* a smaller GPU */
    is_int(place_add_known(pl, r, probed, 3), 3, "three probed GPUs entered");
    is_uint(atomic_load(&r->ndevices), 7, "after the four a client reported (indexes 4, 5, 6)");
    ok(pl->known == 0x70, "known mask %#x", pl->known);
    int k0 = place_choose(pl, r, kids[0], &m, now), k1 = place_choose(pl, r, kids[1], &m, now);
    ok(k0 == 4 && k1 == 5, "KNOWN answers region indexes of probed GPUs only: 4, then 5 (%d %d)", k0, k1);
    int k2 = place_choose(pl, r, kids[5], &m, now); /* kids[2] is dead by now */
    is_int(k2, 6, "a third job of unknown memory: the idle 4G GPU 6 (load before free memory)");
    m.mem = 8 * GIB;
    is_int(place_choose(pl, r, kids[3], &m, now), 4, "an 8G job: GPU 4 (16G, one pending), not the 4G GPU 6");
    m.mem = 0;
    is_int(place_add_known(pl, r, probed, 1), 1, "a GPU probed twice keeps its entry");
    is_uint(atomic_load(&r->ndevices), 7, "(no new device)");
    for (int i = 0; i < 6; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    free(pl);
    free(r);
    free(t);
}


/* ---- unit tests of the requests that wait for room (place_wait_*) ------------------------------------------- */

typedef struct answers {
    int n;
    pid_t pid[8];
    int idx[8];
} answers_t;

static void answer(void *ctx, const place_waiter_t *w, int idx)
{
    answers_t *a = ctx;
    if (a->n < 8) {
        a->pid[a->n] = w->pid;
        a->idx[a->n] = idx;
    }
    a->n++;
}

static void wait_unit_tests(void)
{
    rota_region_t *r = calloc(1, sizeof *r);
    rota_table_t *t = calloc(1, sizeof *t);
    place_t *pl = calloc(1, sizeof *pl);
    if (!r || !t || !pl) bail("calloc");
    pl->t = t;
    pid_t k[4];
    for (int i = 0; i < 4; i++) k[i] = sleeper();
    rota_msg_place_t m;
    cands(&m, 2, 16 * GIB);
    uint64_t now = 1000000000u, sec = 1000000000u;
    is_int(place_choose(pl, r, k[0], &m, now), 0, "two empty GPUs entered");
    place_settle(pl, k[0]);
    atomic_store(&r->devices[0].reserved, 12 * GIB);
    atomic_store(&r->devices[1].reserved, 10 * GIB);
    m.mem = 8 * GIB;
    m.wait_ms = 1000;
    is_int(place_choose(pl, r, k[0], &m, now), -EAGAIN, "an 8G job with a wait, 4G and 6G free: -EAGAIN");
    ok(!place_pending_count(pl, 0, NULL) && !place_pending_count(pl, 1, NULL), "and nothing is pending");
    m.wait_ms = 0;
    is_int(place_choose(pl, r, k[0], &m, now), 1, "without a wait: at once, the most free memory (GPU 1)");
    place_settle(pl, k[0]);

    /* class first, then arrival */
    rota_msg_place_t a = m, b = m, h = m;
    a.wait_ms = 1000;          /* k[0]: normal 8G, deadline now + 1 s */
    b.wait_ms = 5000;          /* k[1]: normal 2G, arrives after a, deadline now + 5 s */
    b.mem = 2 * GIB;
    h.wait_ms = 5000;          /* k[2]: high 8G, arrives last */
    h.flags = ROTA_PLACE_HIGH;
    ok(!place_wait_add(pl, (void *)1, k[0], 0, &a, now) && !place_wait_add(pl, (void *)2, k[1], 0, &b, now) &&
           !place_wait_add(pl, (void *)3, k[2], 0, &h, now + 1),
       "three requests wait");
    is_uint(place_wait_count(pl), 3, "three waiters");
    ok(pl->waiters->pid == k[2] && pl->waiters->next->pid == k[0] && pl->waiters->next->next->pid == k[1],
       "served high first, then the normal ones by arrival");
    is_int((int)(place_wait_next(pl) - now), (int)(1000 * 1000000u), "the next deadline is the first normal one's");
    answers_t ans = {0};
    is_uint(place_wait_serve(pl, r, now + 2, answer, &ans), 0,
            "nothing fits the high job at its head: nobody is answered, the 2G job behind it neither");
    atomic_store(&r->devices[0].reserved, 4 * GIB); /* 12G free on GPU 0 */
    is_uint(place_wait_serve(pl, r, now + 3, answer, &ans), 1, "GPU 0 frees 8G: one answer");
    ok(ans.pid[0] == k[2] && ans.idx[0] == 0, "the high job, on GPU 0 (%d)", ans.idx[0]);
    is_uint(place_pending_count(pl, 0, NULL), 1, "pending there from now on");
    is_uint(place_wait_count(pl), 2, "the normal 8G job (GPU 0 now 4G free, GPU 1 6G) still waits, and the 2G one");
    ans.n = 0;
    is_uint(place_wait_serve(pl, r, now + sec, answer, &ans), 2, "at its deadline the 8G job is answered, and "
            "the 2G job behind it then fits");
    ok(ans.pid[0] == k[0] && ans.idx[0] == 1, "the 8G job where the most memory is free (GPU 1: %d)", ans.idx[0]);
    ok(ans.pid[1] == k[1] && ans.idx[1] == 0, "the 2G job in the tightest fit (GPU 0, 4G free: %d)", ans.idx[1]);
    is_uint(place_wait_count(pl), 0, "nobody waits");
    is_int((int)(place_wait_next(pl) == UINT64_MAX), 1, "no deadline");

    /* a connection that goes, and rotad stopping */
    memset(pl->p, 0, sizeof pl->p);
    atomic_store(&r->devices[0].reserved, 15 * GIB);
    atomic_store(&r->devices[1].reserved, 14 * GIB);
    a.wait_ms = 9000;
    ok(!place_wait_add(pl, (void *)1, k[0], 0, &a, now) && !place_wait_add(pl, (void *)2, k[1], 0, &a, now) &&
           !place_wait_add(pl, (void *)1, k[2], 0, &a, now),
       "three waiters, two of one connection");
    place_wait_drop(pl, (void *)1);
    is_uint(place_wait_count(pl), 1, "that connection's are forgotten");
    ans.n = 0;
    is_uint(place_wait_flush(pl, r, now, answer, &ans), 1, "stopping answers the one left");
    ok(ans.pid[0] == k[1] && ans.idx[0] == 1, "by the fits-nowhere rule (GPU 1, 2G free: %d)", ans.idx[0]);
    ok(!pl->waiters, "and empties the queue");
    for (int i = 0; i < 4; i++) {
        kill(k[i], SIGKILL);
        waitpid(k[i], NULL, 0);
    }
    free(pl);
    free(r);
    free(t);
}

/* Whether the job stays silent (no report line: rota run has not started it) for ms. */
static bool job_quiet(job_t *j, int ms)
{
    struct pollfd p = {.fd = j->out, .events = POLLIN};
    return poll(&p, 1, ms) == 0;
}

int main(void)
{
    if (getenv("ROTA_PLACE_T_JOB")) return job_main();
    const char *b = getenv("ROTA_BUILD");
    if (!b) bail("ROTA_BUILD is not set (run through make test, or export it)");
    snprintf(rota_bin, sizeof rota_bin, "%s/bin/rota", b);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) bail("readlink /proc/self/exe");
    self[n] = 0;

    unit_tests();
    wait_unit_tests();

    th_node4_setup("place-t", node, sizeof node);
    char u[4][PROTO_UUID_STR];
    if (th_sim_uuids(u)) bail("unable to read the simulated GPUs' UUIDs");
    pid_t rotad = th_rotad_start();

    /* four device-0 jobs at once */
    job_t j[4];
    for (int i = 0; i < 4; i++) job_start(&j[i], NULL, NULL);
    int seen = 0, bad = 0;
    for (int i = 0; i < 4; i++) {
        if (!th_job_report(&j[i]) || j[i].rc) {
            bad++;
            continue;
        }
        int x = th_uuid_index(u, j[i].uuid);
        if (x < 0 || j[i].count != 1 || strcmp(j[i].vis, j[i].uuid)) bad++;
        else seen |= 1 << x;
    }
    is_int(bad, 0, "four jobs ran, each sees one GPU as device 0, named by CUDA_VISIBLE_DEVICES=GPU-<uuid>");
    is_int(seen, 0xf, "four device-0 jobs started at once spread over the four GPUs (mask %#x)", seen);

    /* rota top --once and rota status --json show them */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s top --once --socket %s", rota_bin, th_sock);
    char *top = th_run_out(cmd);
    int shown = 0;
    for (int i = 0; i < 4; i++) {
        char pid[32];
        snprintf(pid, sizeof pid, "\n%-8d ", (int)j[i].pid);
        shown += strstr(top, pid) != NULL;
    }
    is_int(shown, 4, "rota top --once lists the four jobs by pid");
    ok(strstr(top, "BUSY%") && strstr(top, "LAUNCH/S") && strstr(top, "STATE"), "with busy, launches/s, state");
    ok(strstr(top, u[0]) && strstr(top, u[3]), "and every GPU by UUID");
    snprintf(cmd, sizeof cmd, "%s status --json --socket %s", rota_bin, th_sock);
    char *js = th_run_out(cmd);
    int nclients = 0;
    for (char *p = js; (p = strstr(p, "\"launches_per_s\":")); p++) nclients++;
    is_int(nclients, 4, "rota status --json: four clients with launches_per_s");
    ok(strstr(js, "\"busy_permille\":") && strstr(js, "\"high_clients\":") && strstr(js, "\"normal_clients\":") &&
           strstr(js, "\"state\":\"") && strstr(js, "\"devtime_per_s\":"),
       "and per-GPU busy_permille, high_clients and normal_clients, per-client state and devtime_per_s");
    snprintf(cmd, sizeof cmd,
             "command -v python3 >/dev/null || { echo nopython; exit; }; %s status --json --socket %s | python3 -c '"
             "import json,sys; d=json.load(sys.stdin); c=d[\"clients\"]; g=d[\"devices\"]; "
             "assert len(c)==4 and len(g)==4; "
             "assert all(k in x for x in c for k in (\"state\",\"hold\",\"launches\",\"launches_per_s\",\"busy_ns\",\"devtime_per_s\")); "
             "assert all(k in x for x in g for k in (\"busy_permille\",\"held\",\"busy_ns\",\"devtime_per_s\")); "
             "assert sorted(x[\"device\"] for x in c)==[0,1,2,3]; print(\"parsed\")'",
             rota_bin, th_sock);
    char *py = th_run_out(cmd);
    if (!strncmp(py, "nopython", 8)) skip("python3 is not installed: JSON not parsed");
    else is_str(py, "parsed\n", "rota status --json parses: 4 clients on devices 0..3, every new field present");
    for (int i = 0; i < 4; i++) th_job_finish(&j[i]);

    /* --place-wait: a job whose --mem fits on no GPU waits for one with room */
    const char *m3[] = {"--mem", "3G", NULL};
    for (int i = 0; i < 4; i++) job_start(&j[i], m3, NULL);
    seen = 0;
    int on2 = -1;
    for (int i = 0; i < 4; i++) {
        int x = th_job_report(&j[i]) ? th_uuid_index(u, j[i].uuid) : -1;
        if (x >= 0) seen |= 1 << x;
        if (x == 2) on2 = i;
    }
    is_int(seen, 0xf, "four 3G jobs on the four 4G GPUs, one each (mask %#x)", seen);
    job_t w;
    const char *m2w[] = {"--mem", "2G", "--place-wait", "20", NULL};
    job_start(&w, m2w, NULL);
    ok(job_quiet(&w, 1500), "a 2G job fits on no GPU (1G free on each): rota run keeps it waiting");
    snprintf(cmd, sizeof cmd, "%s status --json --socket %s", rota_bin, th_sock);
    js = th_run_out(cmd);
    ok(strstr(js, "\"place_waiting\":{\"jobs\":1,\"bytes\":2147483648,\"oldest_s\":") != NULL,
       "rota status --json: one job of 2G waiting for a GPU with room");
    snprintf(cmd, sizeof cmd, "%s status --socket %s", rota_bin, th_sock);
    ok(strstr(th_run_out(cmd), "1 job waiting for a GPU with room (2.0G in all; the first for ") != NULL,
       "rota status says so");
    snprintf(cmd, sizeof cmd, "%s top --once --socket %s", rota_bin, th_sock);
    ok(strstr(th_run_out(cmd), "1 job waiting for a GPU with room") != NULL, "and rota top");
    job_t gone;
    job_start(&gone, m2w, NULL);
    ok(job_quiet(&gone, 300), "a second one waits behind it");
    kill(gone.pid, SIGKILL); /* rota run killed while it waits: rotad forgets its request (ASan: no use after free) */
    is_int(th_job_finish(&gone), 128 + SIGKILL, "and is killed while it waits");
    double t0 = th_now_ms();
    if (on2 >= 0) th_job_finish(&j[on2]);
    ok(th_job_report(&w) && w.rc == 0 && !strcmp(w.uuid, u[2]),
       "the job on GPU 2 ends: the waiting job starts there (%s, %.0f ms later)", w.uuid, th_now_ms() - t0);
    snprintf(cmd, sizeof cmd, "%s status --json --socket %s", rota_bin, th_sock);
    ok(strstr(th_run_out(cmd), "\"place_waiting\":{\"jobs\":0,\"bytes\":0,\"oldest_s\":0.000}") != NULL,
       "rota status --json: nobody waits any more");
    job_t z;
    const char *m3n[] = {"--mem", "3G", "--place-wait", "0", NULL};
    job_start(&z, m3n, NULL);
    ok(th_job_report(&z) && z.rc == 0 && !strcmp(z.uuid, u[2]),
       "--place-wait 0: a 3G job that fits nowhere starts at once, where the most memory is free (GPU 2, 2G)");
    th_job_finish(&z);
    const char *m3s[] = {"--mem", "3G", "--place-wait", "0.5", NULL};
    t0 = th_now_ms();
    job_start(&z, m3s, NULL);
    bool rep = th_job_report(&z);
    double took = th_now_ms() - t0;
    ok(rep && z.rc == 0 && !strcmp(z.uuid, u[2]) && took >= 450,
       "--place-wait 0.5: after %.0f ms (>= 450) the job starts where the most memory is free (GPU 2)", took);
    th_job_finish(&z);
    th_job_finish(&w);
    for (int i = 0; i < 4; i++)
        if (i != on2) th_job_finish(&j[i]);
    const char *pw1[] = {"--place-wait", "-1", NULL}, *pw2[] = {"--place-wait", "3601", NULL};
    job_start(&z, pw1, NULL);
    is_int(th_job_finish(&z), 125, "--place-wait -1: usage error (125)");
    job_start(&z, pw2, NULL);
    is_int(th_job_finish(&z), 125, "--place-wait 3601: usage error (125)");

    /* --place-wait where CMD can see one GPU only: it waits for room there too, rather than starting at once and
     * waiting for memory while holding what it allocated first */
    const char *m3g1[] = {"--mem", "3G", "--gpu", "1", NULL};
    job_start(&j[0], m3g1, NULL);
    ok(th_job_report(&j[0]) && !strcmp(j[0].uuid, u[1]), "a 3G job holds GPU 1");
    char vis1[160];
    snprintf(vis1, sizeof vis1, "CUDA_VISIBLE_DEVICES=%s", u[1]);
    const char *v1env[] = {vis1, NULL};
    job_start(&w, m2w, v1env);
    ok(job_quiet(&w, 1500), "a 2G job that sees only GPU 1 (1G free) waits in rota run (--place-wait 20)");
    t0 = th_now_ms();
    th_job_finish(&j[0]);
    ok(th_job_report(&w) && w.rc == 0 && !strcmp(w.uuid, u[1]),
       "the 3G job ends: the one-GPU job starts on GPU 1 (%.0f ms later)", th_now_ms() - t0);
    th_job_finish(&w);

    /* --gpu N, and CUDA_VISIBLE_DEVICES */
    const char *g2[] = {"--gpu", "2", NULL};
    job_start(&j[0], g2, NULL);
    ok(th_job_report(&j[0]) && !strcmp(j[0].uuid, u[2]) && j[0].count == 1, "--gpu 2: device 0 is GPU 2 (%s)",
       j[0].uuid);
    is_int(th_job_finish(&j[0]), 0, "the job's exit status is rota run's");
    char vis[160];
    snprintf(vis, sizeof vis, "CUDA_VISIBLE_DEVICES=%s,%s", u[3], u[1]);
    const char *venv[] = {vis, NULL};
    const char *g1[] = {"--gpu", "1", NULL};
    job_start(&j[0], g1, venv);
    ok(th_job_report(&j[0]) && !strcmp(j[0].uuid, u[1]), "--gpu 1 indexes CUDA_VISIBLE_DEVICES (GPU-3,GPU-1 -> GPU-1)");
    th_job_finish(&j[0]);
    /* auto among the visible ones: GPUs 1 and 3 only, whatever the others hold */
    for (int i = 0; i < 2; i++) job_start(&j[i], NULL, venv);
    int vm = 0;
    for (int i = 0; i < 2; i++)
        if (th_job_report(&j[i])) vm |= 1 << th_uuid_index(u, j[i].uuid);
    is_int(vm, (1 << 1) | (1 << 3), "auto with CUDA_VISIBLE_DEVICES set: two jobs take the two visible GPUs");
    for (int i = 0; i < 2; i++) th_job_finish(&j[i]);
    const char *g9[] = {"--gpu", "9", NULL};
    job_start(&j[0], g9, NULL);
    is_int(th_job_finish(&j[0]), 125, "--gpu 9 with four GPUs: rota run fails with 125");
    const char *gall[] = {"--gpu", "all", NULL};
    job_start(&j[0], gall, NULL);
    ok(th_job_report(&j[0]) && j[0].count == 4 && !strcmp(j[0].vis, "-"), "--gpu all: all four GPUs, no remap");
    th_job_finish(&j[0]);

    /* no rotad: no placement (fail-open), the job still runs */
    is_int(th_rotad_stop(rotad), 0, "rotad stops");
    job_start(&j[0], NULL, NULL);
    ok(th_job_report(&j[0]) && j[0].rc == 0 && j[0].count == 4 && !strcmp(j[0].uuid, u[0]),
       "without rotad: not placed, the job sees four GPUs and uses GPU 0");
    is_int(th_job_finish(&j[0]), 0, "and exits 0");

    th_node_remove(node);
    th_cleanup();
    return done_testing();
}
