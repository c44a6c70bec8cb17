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
 *
 * Admission and policy (issue 21; docs/design/security.md). Numbers, one per line (config_nums in config.c has
 * every name, default and bound):
 *
 *   max-connections-per-user N  connections one user (not root) may hold open at once (default 64)
 *   max-clients N               registered clients (slots) in all (default and at most ROTA_MAX_CLIENTS, 4096)
 *   max-clients-per-user N      registered clients (slots) of one user (default 64)
 *   hello-timeout-ms N          a connection that has not sent HELLO within N ms is dropped (default 2000)
 *   max-weight N                the largest ROTA_WEIGHT a client may claim; more is lowered (default 1000)
 *   high-stall-ms N             a high client holds lower classes at most N ms without a completion (default 1000)
 *   doorbell-max-hz N           doorbell rings rotad acts on, per client, per user and second (default 2000)
 *   grace-ms N                  after a restart over a stale socket, RESERVEs queue this long (default 2000)
 *   max-waits-per-user N        queued RESERVEs and waiting PLACEs of one user, each (default 256; root too)
 *   grant-token-ms N            a token-keyed grant (abi.h GRANT) no client presented expires after N ms
 *                               (default 3600000, 100..86400000)
 *
 *   high-user USER              USER (name or uid) may run high priority; repeatable
 *   high-group GROUP            members of GROUP (name or gid) may; repeatable
 *   high-cgroup CGROUP-PATH     processes whose cgroup v2 path is CGROUP-PATH or below it may; repeatable
 *   user USER limit SIZE        the processes of USER together hold at most SIZE per GPU (like a group)
 *   grant-required CGROUP-PATH  processes whose cgroup v2 path is CGROUP-PATH or below it and that no grant covers
 *                               (abi.h GRANT: e.g. /kubepods, where the device plugin grants every container)
 *                               run at best normal, whoever their user, and may hold no GPU memory; repeatable
 *
 * Who may run high: root, rotad's own user, and the users, groups and cgroups named. Anyone else asking for high priority
 * runs as normal (rotad logs it once, and rota status shows the class rotad applied).
 */
#define CONFIG_CREDIT_DEFAULT (UINT64_C(64) << 20)
#define CONFIG_MAX_IDS 32
typedef struct config_group {
    char path[ROTA_GROUP_NAME];
    uint64_t limit;
    unsigned line;
} config_group_t;

typedef struct config_user {
    uint32_t uid;
    uint64_t limit;
    unsigned line;
} config_user_t;

typedef struct config {
    uint64_t credit;
    unsigned ngroups;
    config_group_t groups[ROTA_MAX_GROUPS];
    /* admission and policy (above) */
    uint32_t max_conns_per_user, max_clients_per_user, hello_timeout_ms, max_weight, high_stall_ms,
        doorbell_max_hz, grace_ms, max_waits_per_user, max_clients;
    unsigned nhigh_uids, nhigh_gids, nusers;
    uint32_t high_uids[CONFIG_MAX_IDS];
    uint32_t high_gids[CONFIG_MAX_IDS];
    config_user_t users[CONFIG_MAX_IDS]; /* their region groups follow the cgroup ones (region.c) */
    unsigned nhigh_cgroups;
    char high_cgroups[CONFIG_MAX_IDS][ROTA_GROUP_NAME];
    uint32_t grant_token_ms;
    unsigned ngrant_required;
    char grant_required[CONFIG_MAX_IDS][ROTA_GROUP_NAME];
} config_t;

/* Sets the defaults. */
void config_init(config_t *cfg);
/* Loads path into *cfg (defaults first). Returns 0, or -errno with one message "FILE:LINE: what" in err. */
int config_load(const char *path, config_t *cfg, char *err, size_t errlen);
/* Index of the group a cgroup path belongs to (longest matching prefix), or -1. */
int config_match(const config_t *cfg, const char *cgroup);
/* Whether a client of uid (primary gid and supplementary gids[0..n), cgroup v2 path cgroup or NULL) may run high
 * priority. */
bool config_may_high(const config_t *cfg, uint32_t uid, uint32_t gid, const uint32_t *gids, unsigned n,
                     const char *cgroup);
/* Index of uid's entry in users[], or -1. */
int config_user_of(const config_t *cfg, uint32_t uid);
/* Whether cgroup (NULL: unknown) lies under a grant-required line. */
bool config_grant_required(const config_t *cfg, const char *cgroup);

#endif
