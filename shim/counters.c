/* counters.c - test-only hit counters of every wrapper and hook, enabled by ROTA_TEST_COUNTERS=path. */
#include "shim/counters.h"

#include "shim/log.h"
#include "shim/options.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * Nothing here is an exported symbol. With ROTA_TEST_COUNTERS=path set:
 *   - every wrapper counts its hooked calls (not its pass-through ones: nested, ROTA_DISABLE), and every hook
 *     call is counted under an event name below;
 *   - cuGetProcAddress("rota_test_counters", ...) (either version, any flags) returns rota_test_counter,
 *     a uint64_t (*)(const char *name) giving the count of a wrapper (exact name) or event, UINT64_MAX for
 *     a name it does not know; without the variable that symbol is CUDA_ERROR_NOT_FOUND as for the driver;
 *   - at exit, each process appends "<pid> <name> <count>" lines for every non-zero counter, then
 *     "<pid> end", to path (O_APPEND, so a parent and its children can share one file).
 * Without the variable, the cost on every call is one predictable branch.
 */

bool rota_counting;
_Atomic uint64_t rota_hits[ROTA_COUNTER_COUNT];
static char counters_path[ROTA_OPT_PATH_MAX];

static const char *const event_names[ROTA_COUNTER_COUNT - ROTA_FN_COUNT] = {
    [ROTA_EV_PROCESS_INIT - ROTA_FN_COUNT] = "rota.process_init",
    [ROTA_EV_LAUNCH_GATE - ROTA_FN_COUNT] = "rota.launch_gate",
    [ROTA_EV_LAUNCH_AFTER - ROTA_FN_COUNT] = "rota.launch_after",
    [ROTA_EV_LAUNCH_CAPTURING - ROTA_FN_COUNT] = "rota.launch_capturing",
    [ROTA_EV_MEM_RESERVE - ROTA_FN_COUNT] = "rota.mem_reserve",
    [ROTA_EV_MEM_NOWAIT - ROTA_FN_COUNT] = "rota.mem_reserve_nowait",
    [ROTA_EV_MEM_COMMIT - ROTA_FN_COUNT] = "rota.mem_commit",
    [ROTA_EV_MEM_ABORT - ROTA_FN_COUNT] = "rota.mem_abort",
    [ROTA_EV_MEM_RELEASE - ROTA_FN_COUNT] = "rota.mem_release",
    [ROTA_EV_MEM_VIEW - ROTA_FN_COUNT] = "rota.mem_view",
    [ROTA_EV_CAPTURE_BEGIN - ROTA_FN_COUNT] = "rota.capture_begin",
    [ROTA_EV_CAPTURE_END - ROTA_FN_COUNT] = "rota.capture_end",
};

static const char *counter_name(unsigned i)
{
    return i < ROTA_FN_COUNT ? rota_fn_info[i].name : event_names[i - ROTA_FN_COUNT];
}

void rota_counters_init(const char *path)
{
    if (path == NULL || path[0] == '\0') return;
    snprintf(counters_path, sizeof(counters_path), "%s", path);
    rota_counting = true;
}

uint64_t rota_test_counter(const char *name)
{
    if (name == NULL) return UINT64_MAX;
    for (unsigned i = 0; i < ROTA_COUNTER_COUNT; i++) {
        if (strcmp(counter_name(i), name) == 0)
            return atomic_load_explicit(&rota_hits[i], memory_order_relaxed);
    }
    return UINT64_MAX;
}

__attribute__((destructor)) static void rota_counters_dump(void)
{
    if (!rota_counting) return;
    /* Appended to a file the test made: never created here, so a test that removed its file before this dump at
     * exit (the library's destructors run after the program's own clean-up) leaves nothing behind. */
    int fd = open(counters_path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) rota_log(ROTA_LOG_WARN, "ROTA_TEST_COUNTERS: cannot open %s", counters_path);
        return;
    }
    char buf[16384];
    size_t n = 0;
    long pid = (long)getpid();
    for (unsigned i = 0; i < ROTA_COUNTER_COUNT; i++) {
        uint64_t c = atomic_load_explicit(&rota_hits[i], memory_order_relaxed);
        if (c == 0) continue;
        if (n + 128 > sizeof(buf)) {
            if (write(fd, buf, n) < 0) break;
            n = 0;
        }
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%ld %s %llu\n", pid, counter_name(i), (unsigned long long)c);
    }
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%ld end\n", pid);
    if (write(fd, buf, n) < 0) rota_log(ROTA_LOG_WARN, "ROTA_TEST_COUNTERS: cannot write %s", counters_path);
    close(fd);
}
