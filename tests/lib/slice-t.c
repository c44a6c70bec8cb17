/* slice-t.c - TAP tests for runtime/lib/slice.c: the calling thread's slice, its nice value and policy kept. */
#include "runtime/lib/slice.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int get_attr(slice_attr_t *a)
{
    memset(a, 0, sizeof *a);
    return (int)syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof *a, 0u);
}

int main(void)
{
    slice_attr_t a;
    if (get_attr(&a)) skip_all("no sched_getattr: %s", strerror(errno));
    uint64_t before = a.runtime;

    /* a SCHED_IDLE thread is left as it is (in a child: going back needs privilege) */
    pid_t pid = fork();
    if (pid == 0) {
        struct sched_param p = {0};
        if (sched_setscheduler(0, SCHED_IDLE, &p)) _exit(3);
        if (slice_request(SLICE_SHORT_NS)) _exit(4);
        slice_attr_t c;
        _exit(get_attr(&c) ? 5 : c.policy != SCHED_IDLE ? 6 : c.runtime != before ? 7 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "a SCHED_IDLE thread keeps its policy and its slice (%llu ns)", (unsigned long long)before);

    int nice0 = getpriority(PRIO_PROCESS, 0);
    ok(setpriority(PRIO_PROCESS, 0, nice0 < 19 ? nice0 + 1 : nice0) == 0, "a nice value of our own to keep");
    int nice1 = getpriority(PRIO_PROCESS, 0);
    is_int(slice_request(SLICE_SHORT_NS), 0, "a short slice is granted without privilege");
    ok(get_attr(&a) == 0, "sched_getattr after it");
    is_int(getpriority(PRIO_PROCESS, 0), nice1, "the nice value stays");
    is_int((int)a.policy, SCHED_OTHER, "the policy stays SCHED_OTHER");
    /* Linux 6.12 and later keep a fair thread's requested slice and report it; older ones report 0 */
    ok(a.runtime == SLICE_SHORT_NS || a.runtime == 0, "the slice is the one asked for (%llu ns; 0: a kernel "
       "before 6.12, which ignores it)", (unsigned long long)a.runtime);
    is_int(slice_request(SLICE_SHORT_NS), 0, "asking again changes nothing and succeeds");

    return done_testing();
}
