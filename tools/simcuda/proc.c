/* proc.c - this process's attachment to the node (simnode_g), the clock, and whether a slot's process lives. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>

simnode_local_t simnode_g = {.fd = -1, .slot = SIMNODE_NONE};
_Atomic int simnode_ready;

uint64_t simnode_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool simnode_proc_alive(simnode_shm_t *shm, int fd, uint32_t s)
{
    if (s >= SIMNODE_MAX_PROCS) return false;
    if (atomic_load(&shm->procs[s].state) != SIMNODE_SLOT_USED) return false;
    if (shm == simnode_g.shm && s == simnode_g.slot && atomic_load(&simnode_ready)) return true;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SIMNODE_LOCK_BASE + (off_t)s, .l_len = 1};
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return true; /* cannot tell: never reclaim a maybe-live process */
    return fl.l_type != F_UNLCK;
}

void simnode_mutex_lock(pthread_mutex_t *m, bool *repair)
{
    int rc = pthread_mutex_lock(m);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(m);
        *repair = true;
    }
}

