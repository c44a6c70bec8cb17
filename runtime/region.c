/* region.c - creates the node-wide region, the board and the client channels as sealed memfds. */
#include "runtime/region.h"

#include "runtime/lib/prom.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A sealed memfd of size bytes, mapped writable at *map. seals: more seals, added once it is mapped (so
 * F_SEAL_FUTURE_WRITE leaves this mapping the only writable one there will ever be). mode: the inode's, which
 * decides who may re-open it through /proc/PID/fd (memfds are created 0777). */
static int region_memfd(const char *name, uint64_t size, int seals, mode_t mode, void **map)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int rc;
    if (ftruncate(fd, (off_t)size) < 0 || fchmod(fd, mode) < 0) goto out_errno;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) goto out_errno;
    /* Nobody may shrink it under a mapping (SIGBUS) or grow it. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | seals | F_SEAL_SEAL) < 0) {
        rc = -errno;
        munmap(p, size);
        close(fd);
        return rc;
    }
    *map = p;
    return fd;
out_errno:
    rc = -errno;
    close(fd);
    return rc;
}

/* Another open file description of fd, read-only: it cannot be mapped writable nor written. */
static int region_reopen_ro(int fd)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    return ro < 0 ? -errno : ro;
}

/* A slot nobody owns names no group, no GPU and no queued request (0 would name the first of each). */
static void region_slot_unowned(rota_slot_t *s)
{
    atomic_store_explicit(&s->group, -1, memory_order_relaxed);
    atomic_store_explicit(&s->device, -1, memory_order_relaxed);
    atomic_store_explicit(&s->wait_dev, -1, memory_order_relaxed);
}

int region_create(region_t *rg, const config_t *cfg)
{
    void *p, *bp;
    int rc;
    /* The region is rotad's ledger: sealed against every future write (F_SEAL_FUTURE_WRITE), so no process can
     * map it writable or write(2) it, not even through a read-write re-open of /proc/PID/fd/N. rotad's own
     * mapping, made before the seal, is the only writable one. */
    int fd = region_memfd("rota-region", ROTA_REGION_MAP_SIZE, F_SEAL_FUTURE_WRITE, 0400, &p);
    if (fd < 0) return fd;
    int ro = region_reopen_ro(fd);
    if (ro < 0) {
        rc = ro;
        goto out_unmap_region;
    }
    /* The board is written by high clients (read-write descriptor) and only read by the others (read-only
     * descriptor). Mode 0600: a client of another user cannot re-open its read-only descriptor read-write. */
    int bfd = region_memfd("rota-board", ROTA_BOARD_MAP_SIZE, 0, 0600, &bp);
    if (bfd < 0) {
        rc = bfd;
        goto out_close_ro;
    }
    int bro = region_reopen_ro(bfd);
    if (bro < 0) {
        rc = bro;
        munmap(bp, ROTA_BOARD_MAP_SIZE);
        close(bfd);
        goto out_close_ro;
    }
    rota_board_t *b = bp;
    b->magic = ROTA_BOARD_MAGIC;
    b->abi = ROTA_ABI_VERSION;
    b->size = sizeof *b;
    rota_region_t *r = p;
    r->magic = ROTA_REGION_MAGIC;
    r->abi = ROTA_ABI_VERSION;
    r->size = sizeof *r;
    r->rotad_pid = (int32_t)getpid();
    r->max_devices = ROTA_MAX_DEVICES;
    r->max_clients = ROTA_MAX_CLIENTS;
    r->max_groups = ROTA_MAX_GROUPS;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->start_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /* The table is private memory: no descriptor of it exists, so no client can map it. */
    rota_table_t *t = mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED) {
        rc = -errno;
        munmap(bp, ROTA_BOARD_MAP_SIZE);
        close(bfd);
        close(bro);
        goto out_close_ro;
    }
    t->magic = ROTA_TABLE_MAGIC;
    t->abi = ROTA_ABI_VERSION;
    t->size = sizeof *t;
    t->flags = ROTA_TABLE_ALL;
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        region_slot_unowned(&t->slots[i]);
    }
    if (cfg) {
        for (unsigned i = 0; i < cfg->ngroups; i++) {
            memcpy(t->groups[i].name, cfg->groups[i].path, sizeof t->groups[i].name);
            t->groups[i].limit = cfg->groups[i].limit;
        }
        /* Per-user limits (config "user NAME limit SIZE") are groups too, after the cgroup ones: the ledger adds
         * up each user's processes there. */
        for (unsigned i = 0; i < cfg->nusers && cfg->ngroups + i < ROTA_MAX_GROUPS; i++) {
            rota_group_t *g = &t->groups[cfg->ngroups + i];
            snprintf(g->name, sizeof g->name, "user %u", (unsigned)cfg->users[i].uid);
            g->limit = cfg->users[i].limit;
        }
        unsigned n = cfg->ngroups + cfg->nusers;
        atomic_store(&r->ngroups, n < ROTA_MAX_GROUPS ? n : ROTA_MAX_GROUPS);
    }
    rg->r = r;
    rg->fd = fd;
    rg->ro_fd = ro;
    rg->b = b;
    rg->board_fd = bfd;
    rg->board_ro_fd = bro;
    rg->t = t;
    return 0;

out_close_ro:
    close(ro);
out_unmap_region:
    munmap(p, ROTA_REGION_MAP_SIZE);
    close(fd);
    return rc;
}

void region_destroy(region_t *rg)
{
    if (!rg->r) return;
    munmap(rg->r, ROTA_REGION_MAP_SIZE);
    munmap(rg->b, ROTA_BOARD_MAP_SIZE);
    close(rg->fd);
    close(rg->ro_fd);
    close(rg->board_fd);
    close(rg->board_ro_fd);
    munmap(rg->t, ROTA_TABLE_MAP_SIZE);
    rg->r = NULL;
    rg->t = NULL;
    rg->b = NULL;
}

int region_channel_create(uint32_t slot, uint32_t gen, rota_channel_t **map, int *fd)
{
    void *p;
    int f = region_memfd("rota-channel", ROTA_CHANNEL_MAP_SIZE, 0, 0600, &p);
    if (f < 0) return f;
    rota_channel_t *c = p;
    c->magic = ROTA_CHANNEL_MAGIC;
    c->abi = ROTA_ABI_VERSION;
    c->size = sizeof *c;
    c->slot = slot;
    c->gen = gen;
    *map = c;
    *fd = f;
    return 0;
}

void region_channel_destroy(rota_channel_t *map)
{
    if (map) munmap(map, ROTA_CHANNEL_MAP_SIZE);
}

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define CP(dst, src, f) atomic_store_explicit(&(dst)->f, LD(&(src)->f), memory_order_relaxed)

static void region_copy_slot(rota_slot_t *d, const rota_slot_t *s)
{
    CP(d, s, state);
    CP(d, s, gen);
    CP(d, s, pid);
    CP(d, s, uid);
    CP(d, s, priority);
    CP(d, s, weight);
    CP(d, s, max_inflight);
    CP(d, s, group);
    CP(d, s, device);
    CP(d, s, wait_dev);
    CP(d, s, limit);
    CP(d, s, waiting);
    for (unsigned i = 0; i < ROTA_MAX_DEVICES; i++) CP(d, s, used[i]);
    CP(d, s, sched_state);
    CP(d, s, launches);
    CP(d, s, busy_ns);
    CP(d, s, inflight);
    memcpy(d->comm, s->comm, sizeof d->comm); /* written by this thread only, before the slot went live */
    CP(d, s, credit);
    CP(d, s, idle_win_ns);
}

/* The hold statistics as one consistent read (the scheduler thread updates them under hold_seq). */
static void region_copy_stats(rota_slot_stats_t *d, const rota_slot_stats_t *s)
{
    CP(d, s, mem_wait_ns);
    CP(d, s, mem_waits_granted);
    CP(d, s, mem_waits_timed_out);
    uint64_t held[3], since;
    uint32_t bits;
    prom_slot_hold_read(s, held, &since, &bits);
    for (unsigned k = 0; k < 3; k++) atomic_store_explicit(&d->held_ns[k], held[k], memory_order_relaxed);
    atomic_store_explicit(&d->hold_since_ns, since, memory_order_relaxed);
    atomic_store_explicit(&d->hold_bits, bits, memory_order_relaxed);
}

int region_table_copy(const region_t *rg, uint32_t uid, bool all)
{
    const rota_table_t *t = rg->t;
    int fd = memfd_create("rota-table", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int rc;
    if (ftruncate(fd, ROTA_TABLE_MAP_SIZE) < 0) goto out_errno;
    rota_table_t *c = mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c == MAP_FAILED) goto out_errno;
    c->magic = ROTA_TABLE_MAGIC;
    c->abi = ROTA_ABI_VERSION;
    c->size = sizeof *c;
    c->viewer_uid = uid;
    c->flags = all ? ROTA_TABLE_ALL : 0;
    uint32_t show_groups = 0; /* bit g: group g has one of the viewer's processes */
    _Static_assert(ROTA_MAX_GROUPS <= 32, "a group mask is 32 bits");
    for (unsigned i = 0; i < ROTA_MAX_CLIENTS; i++) {
        const rota_slot_t *s = &t->slots[i];
        if (LD(&s->state) != ROTA_SLOT_LIVE) {
            region_slot_unowned(&c->slots[i]);
            continue;
        }
        int g = LD(&s->group);
        if (!all && LD(&s->uid) != uid) {
            c->hidden_clients++;
            region_slot_unowned(&c->slots[i]);
            continue;
        }
        region_copy_slot(&c->slots[i], s);
        region_copy_stats(&c->stats[i], &t->stats[i]);
        if (g >= 0 && g < ROTA_MAX_GROUPS) show_groups |= 1u << g;
    }
    char mine[ROTA_GROUP_NAME];
    snprintf(mine, sizeof mine, "user %u", (unsigned)uid); /* the viewer's own "user NAME limit" line */
    unsigned ng = LD(&rg->r->ngroups);
    for (unsigned g = 0; g < ng && g < ROTA_MAX_GROUPS; g++) {
        const rota_group_t *s = &t->groups[g];
        if (!all && !(show_groups & (1u << g)) && strcmp(s->name, mine)) {
            c->hidden_groups++;
            continue;
        }
        memcpy(c->groups[g].name, s->name, sizeof s->name);
        c->groups[g].limit = s->limit;
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) CP(&c->groups[g], s, used[d]);
    }
    munmap(c, ROTA_TABLE_MAP_SIZE);
    /* F_SEAL_WRITE once the only writable mapping is gone: the viewer can neither write it nor resize it. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) goto out_errno;
    return fd;
out_errno:
    rc = -errno;
    close(fd);
    return rc;
}
