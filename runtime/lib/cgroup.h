/* cgroup.h - cgroup v2 paths: where the hierarchy is mounted, and which cgroup a process is in. For rotad (grants,
 * groups) and the Slurm plugin, which makes a step a cgroup of its own where Slurm does not. */
#ifndef ROTA_CGROUP_H
#define ROTA_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

/* The cgroup v2 path of process pid (0: the caller), as the 0:: line of /proc/PID/cgroup names it ("/" for the
 * root). 0, -ENOENT (no such process, or no cgroup v2 line), -ENAMETOOLONG (over cap - 1 characters) or -errno. */
int cgroup_of(pid_t pid, char *out, size_t cap);

/* Where the cgroup v2 hierarchy is mounted: the first cgroup2 entry of /proc/self/mounts, else /sys/fs/cgroup.
 * Read once; the string is static. */
const char *cgroup_root(void);

#endif
