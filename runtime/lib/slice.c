/* slice.c - a short CPU time slice for the calling thread (runtime/lib/slice.h). */
#include "runtime/lib/slice.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int slice_request(uint64_t ns)
{
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    slice_attr_t a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u)) return -errno;
    if (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH) return 0;
    if (a.runtime == ns) return 0;
    a.size = sizeof a;
    a.flags = 0; /* no reset-on-fork or utilisation clamps of its own: the nice value read above stays */
    a.runtime = ns;
    return syscall(SYS_sched_setattr, 0, &a, 0u) ? -errno : 0;
#else
    (void)ns;
    return -ENOSYS;
#endif
}
