/* cudart-t.c - the real libcudart 13 starts through librota on the driver: its lookups match the facts. */
#include "tests/shim/shim-test.h"

/*
 * A child process, librota preloaded with ROTA_LOG=debug (which logs every cuGetProcAddress lookup: name,
 * version, flags, answer), dlopens the toolkit's libcudart.so.13 and calls cudaGetDeviceCount. cudart reaches
 * the driver by dlopen("libcuda.so.1") and dlsym of cuGetProcAddress_v2 (librota's, through rota's dlsym),
 * then looks up its whole entry-point table. Checked against tests/facts/cudart13-lookups.txt: the same
 * lookups (name, version, flags; the empty-name probe cudart makes first aside), every one found, and the
 * wrapped names answered with librota's wrappers.
 *
 * The boundary (docs/simcuda-conformance.md): cudart then asks cuGetExportTable for NVIDIA's private export
 * tables, which simcuda does not implement (its cuGetExportTable answers CUDA_ERROR_NOT_SUPPORTED), so on
 * simcuda cudaGetDeviceCount fails with cudaErrorNotSupported (801) right there; on a real driver it succeeds.
 * Skipped without libcudart.so.13 (the CUDA toolkit's runtime).
 */
static const char *cudart_path(void)
{
    static char p[4096];
    const char *home = getenv("CUDA_HOME");
    snprintf(p, sizeof(p), "%s/lib64/libcudart.so.13", home && home[0] ? home : "/usr/local/cuda");
    return p;
}

static int child(void)
{
    void *h = dlopen(cudart_path(), RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("dlopen %s: %s\n", cudart_path(), dlerror());
        return 2;
    }
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cudaGetDeviceCount");
    if (count == NULL) return 3;
    int n = -1, rc = count(&n);
    printf("cudaGetDeviceCount %d %d\n", rc, n);
    return 0;
}

typedef struct fact {
    char name[96];
    int ver;
    unsigned long long flags;
    int seen;
} fact_t;

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "cudart-child") == 0) return child();
    const char *src = getenv("ROTA_SRCDIR");
    char path[4096];
    if (access(cudart_path(), R_OK) != 0) skip_all("no %s", cudart_path());
    if (src == NULL) bail("ROTA_SRCDIR is not set (make test exports it)");
    snprintf(path, sizeof(path), "%s/tests/facts/cudart13-lookups.txt", src);
    FILE *ff = fopen(path, "r");
    if (ff == NULL) bail("%s: %s", path, strerror(errno));
    static fact_t facts[1024];
    int nf = 0;
    char line[1024];
    while (nf < 1024 && fgets(line, sizeof(line), ff))
        if (sscanf(line, "%95s ver=%d flags=%llu", facts[nf].name, &facts[nf].ver, &facts[nf].flags) == 3) nf++;
    fclose(ff);
    plan(7);
    ok(nf == 439, "%d lookups in the facts", nf);

    char dir[] = "/tmp/rota-cudart-XXXXXX", log[4200], node[96];
    if (mkdtemp(dir) == NULL) bail("mkdtemp: %s", strerror(errno));
    snprintf(log, sizeof(log), "%s/log", dir);
    snprintf(node, sizeof(node), "rota-shim-cudart-%ld", (long)getpid());
    setenv("SIMCUDA_NODE", node, 1); /* this process's own simulated node, removed at the end */
    static const char *const drop[] = {"LD_PRELOAD", "ROTA_DISABLE", "ROTA_LOG", "ROTA_REAL_LIBCUDA", NULL};
    static shim_env_t e;
    shim_env_init(&e, drop);
    shim_env_set(&e, "LD_PRELOAD", shim_preload());
    shim_env_set(&e, "ROTA_LOG", "debug");
    shim_env_set(&e, "SIMCUDA_NODE", node);
    shim_env_set(&e, SHIM_TEST_MARK, "1");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *cargv[] = {argv[0], (char *)"cudart-child", NULL};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, cargv, e.v) != 0) bail("posix_spawn: %s", strerror(errno));
    posix_spawn_file_actions_destroy(&fa);
    int st;
    alarm(60);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    is_int(shim_exit_code(st), 0, "the child loaded libcudart.so.13 and called cudaGetDeviceCount");

    FILE *lf = fopen(log, "r");
    if (lf == NULL) bail("%s: %s", log, strerror(errno));
    int lookups = 0, unknown = 0, failed = 0, rota = 0, rc = -1, count = -1;
    bool export_table = false;
    while (fgets(line, sizeof(line), lf)) {
        char name[96], who[16];
        int ver, res;
        unsigned long long flags;
        const char *p = strstr(line, "cuGetProcAddress_v2: ");
        if (sscanf(line, "cudaGetDeviceCount %d %d", &rc, &count) == 2) continue;
        if (p == NULL || sscanf(p + 21, "%95s ver=%d flags=%llu -> %d %15s", name, &ver, &flags, &res, who) != 5)
            continue; /* the empty-name probe has no name to read */
        lookups++;
        int i;
        for (i = 0; i < nf; i++)
            if (!facts[i].seen && facts[i].ver == ver && facts[i].flags == flags && strcmp(facts[i].name, name) == 0)
                break;
        if (i == nf) {
            unknown++;
            diag("a lookup the facts do not have: %s ver=%d flags=%llu", name, ver, flags);
        } else {
            facts[i].seen = 1;
        }
        if (res != 0) {
            failed++;
            diag("not found: %s ver=%d flags=%llu -> %d", name, ver, flags, res);
        }
        rota += strcmp(who, "rota") == 0;
        export_table |= strcmp(name, "cuGetExportTable") == 0 && res == 0;
    }
    fclose(lf);
    int missing = 0;
    for (int i = 0; i < nf; i++) missing += !facts[i].seen;
    shim_dev_t d;
    shim_dev_init(&d);
    if (d.simcuda) {
        is_int(lookups, nf, "cudart made %d lookups through librota", lookups);
        ok(unknown == 0 && missing == 0, "exactly the recorded ones (%d unknown, %d not made)", unknown, missing);
        is_int(failed, 0, "every one was found");
    } else { /* what cudart asks depends on the driver it finds */
        ok(lookups > 0, "cudart made %d lookups through librota", lookups);
        skip("the recorded set is CUDA 13.0's on simcuda");
        skip("a real driver may lack names");
    }
    ok(rota >= 40, "%d answered with librota's wrappers", rota);
    if (d.simcuda)
        ok(export_table && rc == 801, "on simcuda it stops at cuGetExportTable's private tables: cudaGetDeviceCount %d",
           rc);
    else
        ok(rc == 0 && count >= 1, "on a real driver cudaGetDeviceCount succeeds: %d devices", count);
    shim_dev_fini(&d);
    unlink(log);
    rmdir(dir);
    char shm[128];
    snprintf(shm, sizeof(shm), "/dev/shm/%s", node);
    unlink(shm);
    return done_testing();
}
