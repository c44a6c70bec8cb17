/* client-idleprobe.c - whether a high client's launching thread sleeps waiting for input (its idle window may end). */
#include "shim/client-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * A high client's idle window (client-launch.c) holds the lower classes after the completion that left it nothing
 * in flight, because a next request may already be queued: the server then launches within a few hundred
 * microseconds, and lower work let in meanwhile would run in front of it. A server whose launching thread sleeps
 * waiting for input (a timer, a socket, readiness of a descriptor, a connection) has no request queued: nothing
 * launches before input arrives, and holding the others meanwhile only leaves the GPU idle. So while the window
 * lasts, the tracker asks the kernel which system call the thread that made the client's last launch is blocked
 * in (/proc/self/task/TID/syscall: the call's number, or "running"), every LAUNCH_PROBE_NS (client-launch.c).
 *
 * Only sleeps and waits for input count. A futex says nothing: a lock, a condition variable, a queue between
 * threads, Python's GIL, the driver's own blocking sync; the thread may be a moment from launching. Neither does
 * a read, which may be a file the next request needs. A running thread is preparing work. An unknown answer
 * (no /proc, a kernel without that file, a thread gone) keeps the window: the probe only ever ends a hold
 * sooner, so whatever it cannot tell costs what the window costs.
 *
 * The launching thread's id is cached per thread (one gettid per thread, never per launch), and the descriptor
 * of its syscall file stays open while the same thread launches: one pread per probe, on the tracker thread.
 */

static _Atomic int idleprobe_tid;               /* the thread of the client's last high launch (0: none yet) */
static __thread int idleprobe_self;             /* this thread's id, once known */
static int idleprobe_fd = -1, idleprobe_fd_tid; /* tracker thread only: the open syscall file and whose it is */
static pthread_once_t idleprobe_once = PTHREAD_ONCE_INIT;

static void idleprobe_atfork_child(void)
{
    /* The forking thread is the child's only one, under a new id; the parent's descriptor is not the child's. */
    idleprobe_self = 0;
    atomic_store(&idleprobe_tid, 0);
    if (idleprobe_fd >= 0) close(idleprobe_fd);
    idleprobe_fd = -1;
    idleprobe_fd_tid = 0;
}

static void idleprobe_setup(void)
{
    pthread_atfork(NULL, NULL, idleprobe_atfork_child);
}

void idleprobe_note_launch(void)
{
    if (!idleprobe_self) {
        pthread_once(&idleprobe_once, idleprobe_setup);
        idleprobe_self = (int)syscall(SYS_gettid);
    }
    if (atomic_load_explicit(&idleprobe_tid, memory_order_relaxed) != idleprobe_self)
        atomic_store_explicit(&idleprobe_tid, idleprobe_self, memory_order_relaxed);
}

/* Whether system call nr waits for input: a sleep, or readiness, a message or a connection on a descriptor. */
static bool idleprobe_input_call(long nr)
{
    static const long calls[] = {
#ifdef SYS_nanosleep
        SYS_nanosleep,
#endif
#ifdef SYS_clock_nanosleep
        SYS_clock_nanosleep,
#endif
#ifdef SYS_pause
        SYS_pause,
#endif
#ifdef SYS_poll
        SYS_poll,
#endif
#ifdef SYS_ppoll
        SYS_ppoll,
#endif
#ifdef SYS_select
        SYS_select,
#endif
#ifdef SYS_pselect6
        SYS_pselect6,
#endif
#ifdef SYS_epoll_wait
        SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait
        SYS_epoll_pwait,
#endif
#ifdef SYS_epoll_pwait2
        SYS_epoll_pwait2,
#endif
#ifdef SYS_recvfrom
        SYS_recvfrom,
#endif
#ifdef SYS_recvmsg
        SYS_recvmsg,
#endif
#ifdef SYS_recvmmsg
        SYS_recvmmsg,
#endif
#ifdef SYS_accept
        SYS_accept,
#endif
#ifdef SYS_accept4
        SYS_accept4,
#endif
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (calls[i] == nr) return true;
    return false;
}

static bool idleprobe_parse(const char *s, long *nr)
{
    /* "running", or the call's number then its arguments in hex ("230 0x1 0x1 ..."); "-1 0x..." is blocked
     * outside a system call. Anything else is not this file (a descriptor the application closed and reused). */
    char *end;
    errno = 0;
    *nr = strtol(s, &end, 10);
    if (end == s || errno || strncmp(end, " 0x", 3)) return false;
    return idleprobe_input_call(*nr);
}

bool idleprobe_input_wait(long *nr)
{
    int tid = atomic_load_explicit(&idleprobe_tid, memory_order_relaxed);
    if (!tid) return false;
    if (tid != idleprobe_fd_tid) {
        if (idleprobe_fd >= 0) close(idleprobe_fd);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
        idleprobe_fd = open(path, O_RDONLY | O_CLOEXEC);
        idleprobe_fd_tid = tid; /* tried: a thread without the file is not tried again at every probe */
    }
    if (idleprobe_fd < 0) return false;
    char buf[96];
    ssize_t n = pread(idleprobe_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) {
        /* The thread is gone (or the descriptor with it): open again at the next probe, in case its id now
         * names another thread of ours that launches; one that has no file is not retried. */
        close(idleprobe_fd);
        idleprobe_fd = -1;
        idleprobe_fd_tid = 0;
        return false;
    }
    buf[n] = 0;
    return idleprobe_parse(buf, nr);
}
