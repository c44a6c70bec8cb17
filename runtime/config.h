/* config.h - rotad's configuration file: per-group memory limits. */
#ifndef ROTA_CONFIG_H
#define ROTA_CONFIG_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Format: one directive per line; '#' starts a comment; blank lines are ignored.
 *
 *   group CGROUP-PATH limit SIZE
 *   credit SIZE
 *
 * A group is every process whose cgroup v2 path (the "0::" line of /proc/PID/cgroup, read by rotad, so a client
 * cannot choose it) equals CGROUP-PATH or lies below it, e.g. a Kubernetes pod or a systemd scope. SIZE is
 * per GPU (80G, 512M, 1073741824); the processes of the group together may hold at most SIZE on each GPU. When
 * several groups match, the longest path wins. At most ROTA_MAX_GROUPS groups.
 *
 * credit (default 64M, 0 = off) is the memory credit rotad hands a client with a granted reservation while the
 * GPU has room: the client then allocates up to that much without a round trip to rotad. Credit is charged to
 * the client (it shows in "reserved") and taken back as soon as any request on that GPU does not fit.
 */
#define CONFIG_CREDIT_DEFAULT (UINT64_C(64) << 20)
typedef struct config_group {
    char path[ROTA_GROUP_NAME];
    uint64_t limit;
    unsigned line;
} config_group_t;

typedef struct config {
    uint64_t credit;
    unsigned ngroups;
    config_group_t groups[ROTA_MAX_GROUPS];
} config_t;

/* Sets the defaults. */
void config_init(config_t *cfg);
/* Loads path into *cfg (defaults first). Returns 0, or -errno with one message "FILE:LINE: what" in err. */
int config_load(const char *path, config_t *cfg, char *err, size_t errlen);
/* Index of the group a cgroup path belongs to (longest matching prefix), or -1. */
int config_match(const config_t *cfg, const char *cgroup);
/* The cgroup v2 path of a process into out; 0 or -errno (-ENOENT: no such process or no v2 line). */
int config_cgroup_of(pid_t pid, char *out, size_t cap);

#endif
