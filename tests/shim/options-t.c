/* options-t.c - the ROTA_* options: strict values, one clear message, cuInit refused; debug shows the table. */
#include "tests/shim/shim-test.h"

/*
 * Each case runs this program again (role "init") under librota with one variable set; the child calls
 * cuInit and prints its result. A bad value must give exactly one "rota: error: bad value NAME=..." line and
 * cuInit = CUDA_ERROR_INVALID_VALUE (never a silent default); a good one, cuInit = 0 and no error.
 */
typedef struct option_case {
    const char *name, *value;
    bool good;
} option_case_t;

static const option_case_t cases[] = {
    {"ROTA_LOG", "loud", false},           {"ROTA_LOG", "", false},
    {"ROTA_LOG", "ERROR", true},           {"ROTA_LOG", "info", true},
    {"ROTA_DISABLE", "maybe", false},      {"ROTA_DISABLE", "0", true},
    {"ROTA_REQUIRE", "2", false},          {"ROTA_REQUIRE", "no", true},
    {"ROTA_MEM_LIMIT", "1.5G", false},     {"ROTA_MEM_LIMIT", "12Q", false},
    {"ROTA_MEM_LIMIT", "-1", false},       {"ROTA_MEM_LIMIT", "8G", true},
    {"ROTA_MEM_WAIT", "abc", false},       {"ROTA_MEM_WAIT", "-1", false},
    {"ROTA_MEM_WAIT", "nan", false},       {"ROTA_MEM_WAIT", "0", true},
    {"ROTA_MEM_WAIT", "2.5", true},        {"ROTA_PRIORITY", "urgent", false},
    {"ROTA_PRIORITY", "HIGH", true},       {"ROTA_PRIORITY", "low", true},
    {"ROTA_WEIGHT", "0", false},           {"ROTA_WEIGHT", "-2", false},
    {"ROTA_WEIGHT", "1e7", false},         {"ROTA_WEIGHT", "0.25", true},
    {"ROTA_MAX_INFLIGHT", "0", false},     {"ROTA_MAX_INFLIGHT", "1025", false},
    {"ROTA_MAX_INFLIGHT", "2x", false},    {"ROTA_MAX_INFLIGHT", "1024", true},
    {"ROTA_INFLIGHT_US", "1000001", false}, {"ROTA_INFLIGHT_US", "0.5", false},
    {"ROTA_INFLIGHT_US", "0", true},        {"ROTA_INFLIGHT_US", "250", true},
    {"ROTA_REFILL_US", "100001", false},   {"ROTA_REFILL_US", "-1", false},
    {"ROTA_REFILL_US", "0", true},         {"ROTA_REFILL_US", "100000", true},
    {"ROTA_IDLE_PROBE", "2", false},       {"ROTA_IDLE_PROBE", "off", true},
    {"ROTA_ADMIT", "maybe", false},        {"ROTA_ADMIT", "0", true},
    {"ROTA_ADMIT_WAIT_US", "0", false},    {"ROTA_ADMIT_WAIT_US", "1000001", false},
    {"ROTA_ADMIT_WAIT_US", "5ms", false},  {"ROTA_ADMIT_WAIT_US", "1000000", true},
    {"ROTA_GPU", "first", false},          {"ROTA_GPU", "-1", false},
    {"ROTA_GPU", "auto", true},            {"ROTA_GPU", "all", true},
    {"ROTA_SOCKET", "", false},
    /* issue 21, item 10: strtod's hexadecimal, and a socket path no sockaddr_un can hold (107 bytes at most) */
    {"ROTA_WEIGHT", "0x10", false},        {"ROTA_WEIGHT", "1e3", true},
    {"ROTA_SOCKET", "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
    {"ROTA_SOCKET", "/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true},
    {"ROTA_REAL_LIBCUDA", "", false},      {"ROTA_TEST_COUNTERS", "", false},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int role_init(void)
{
    printf("cuInit=%d\n", (int)cuInit(0));
    return 0;
}

static unsigned count_lines(const char *out, const char *needle)
{
    unsigned n = 0;
    for (const char *p = out; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

/* Runs role "init" under librota with name=value (name NULL: nothing extra) and a second pair. */
static void run_init(shim_child_t *c, const char *name, const char *value, const char *name2, const char *value2)
{
    static const char *const drop[] = {"LD_PRELOAD", "ROTA_DISABLE", "ROTA_LOG", "ROTA_REAL_LIBCUDA",
                                       "ROTA_TEST_COUNTERS", NULL};
    static shim_env_t e;
    shim_env_init(&e, drop);
    shim_env_set(&e, "LD_PRELOAD", shim_preload());
    shim_env_set(&e, "ROTA_LOG", "warn");
    if (name) shim_env_set(&e, name, value);
    if (name2) shim_env_set(&e, name2, value2);
    if (!shim_run("init", e.v, 20, c)) bail("posix_spawn failed");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "init")) return role_init();
    alarm(120);
    /* A node of its own: a stale default node (another simcuda's, say) must not fail the children's cuInit. */
    char nodename[64];
    snprintf(nodename, sizeof(nodename), "rota-shim-options-%ld", (long)getpid());
    setenv("SIMCUDA_NODE", nodename, 1);
    static shim_child_t c;
    char want[256], msg[256];

    for (size_t i = 0; i < NCASES; i++) {
        const option_case_t *oc = &cases[i];
        run_init(&c, oc->name, oc->value, NULL, NULL);
        snprintf(msg, sizeof(msg), "rota: error: bad value %s=\"%s\"", oc->name, oc->value);
        bool passed;
        if (oc->good) {
            passed = ok(shim_exit_code(c.status) == 0 && strstr(c.out, "cuInit=0") && !strstr(c.out, "rota: error"),
               "%s=\"%s\" is accepted: cuInit succeeds, no error", oc->name, oc->value);
        } else {
            snprintf(want, sizeof(want), "cuInit=%d", (int)CUDA_ERROR_INVALID_VALUE);
            passed = ok(shim_exit_code(c.status) == 0 && strstr(c.out, want) && count_lines(c.out, msg) == 1,
               "%s=\"%s\" is refused: one message, cuInit = CUDA_ERROR_INVALID_VALUE", oc->name, oc->value);
        }
        if (!passed) diag("%s", c.out);
    }

    run_init(&c, "ROTA_MEM_WAIT", "abc", "ROTA_DISABLE", "1");
    ok(strstr(c.out, "cuInit=0") && strstr(c.out, "rota: error: bad value ROTA_MEM_WAIT") &&
           strstr(c.out, "ROTA_DISABLE=1: ignoring"),
       "ROTA_DISABLE=1 wins over a bad value (reported, then ignored): cuInit succeeds");

    run_init(&c, "ROTA_LOG", "debug", "ROTA_WEIGHT", "3");
    ok(strstr(c.out, "cuInit=0") && strstr(c.out, "rota: debug: option ROTA_LOG=debug\n") &&
           strstr(c.out, "rota: debug: option ROTA_WEIGHT=3\n") &&
           strstr(c.out, "rota: debug: option ROTA_MEM_WAIT=30 (default)") &&
           strstr(c.out, "rota: debug: option ROTA_MAX_INFLIGHT=8 (default)") &&
           strstr(c.out, "rota: debug: option ROTA_INFLIGHT_US=500 (default)") &&
           strstr(c.out, "rota: debug: option ROTA_REFILL_US=300 (default)") &&
           strstr(c.out, "rota: debug: option ROTA_IDLE_PROBE=1 (default)") &&
           strstr(c.out, "rota: debug: option ROTA_PRIORITY=normal (default)") &&
           strstr(c.out, "rota: debug: option ROTA_GPU=auto (default)") && strstr(c.out, "rota: debug: real driver "),
       "ROTA_LOG=debug prints every effective option (defaults marked) and the driver it found");
    if (!strstr(c.out, "option ROTA_LOG=debug")) diag("%s", c.out);

    run_init(&c, "ROTA_REAL_LIBCUDA", "/nonexistent/libcuda.so.1", NULL, NULL);
    snprintf(want, sizeof(want), "cuInit=%d", (int)CUDA_ERROR_SHARED_OBJECT_INIT_FAILED);
    ok(strstr(c.out, want) && strstr(c.out, "rota: error: cannot load the real driver /nonexistent/libcuda.so.1"),
       "ROTA_REAL_LIBCUDA naming no library: one message, cuInit = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED");

    run_init(&c, "ROTA_REAL_LIBCUDA", shim_librota(), NULL, NULL);
    ok(strstr(c.out, want) && strstr(c.out, "is librota itself"),
       "ROTA_REAL_LIBCUDA naming librota itself is refused, no recursion");

    char real[4096];
    snprintf(real, sizeof(real), "%s/lib/libcuda.so.1", shim_build());
    run_init(&c, "ROTA_REAL_LIBCUDA", real, "ROTA_LOG", "debug");
    ok(strstr(c.out, "cuInit=0") && strstr(c.out, "real driver ") && strstr(c.out, real),
       "ROTA_REAL_LIBCUDA naming the driver by path works");
    shim_cleanup();
    return done_testing();
}
