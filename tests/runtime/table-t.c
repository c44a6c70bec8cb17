/* table-t.c - TAP tests for region_table_copy: the copies of rotad's client table LIST hands out, per viewer. */
#include "runtime/ledger.h"
#include "runtime/lib/proto.h"
#include "runtime/region.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define G (UINT64_C(1) << 30)
#define LD(p) atomic_load_explicit((p), memory_order_relaxed)

/* A live slot of uid on GPU 0 holding used bytes, in group g (-1: none). */
static void live(region_t *rg, unsigned i, uint32_t uid, int32_t pid, const char *comm, uint64_t used, int g)
{
    rota_slot_t *s = &rg->t->slots[i];
    atomic_store(&s->gen, i + 1);
    atomic_store(&s->pid, pid);
    atomic_store(&s->uid, uid);
    atomic_store(&s->group, g);
    snprintf(s->comm, sizeof s->comm, "%s", comm);
    atomic_store(&s->state, ROTA_SLOT_LIVE);
    ledger_charge(rg->r, rg->t, i, 0, used);
}

static const rota_table_t *map_copy(int fd)
{
    void *p = mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

int main(void)
{
    region_t rg;
    config_t cfg = {.ngroups = 2, .nusers = 1};
    snprintf(cfg.groups[0].path, sizeof cfg.groups[0].path, "/slurm/job1");
    cfg.groups[0].limit = 8 * G;
    snprintf(cfg.groups[1].path, sizeof cfg.groups[1].path, "/slurm/job2");
    cfg.groups[1].limit = 8 * G;
    cfg.users[0].uid = 2002;
    cfg.users[0].limit = 4 * G;
    if (region_create(&rg, &cfg)) bail("region_create failed");
    uint8_t uuid[16] = {7};
    ledger_device(rg.r, uuid, 80 * G);
    live(&rg, 3, 1001, 4242, "train-alice", 2 * G, 0);
    live(&rg, 9, 2002, 5353, "infer-bob", 3 * G, 1);
    live(&rg, 11, 1001, 4343, "eval-alice", G, -1);

    /* rotad's own table is never in the region: nothing there names a client */
    const char *reg = (const char *)rg.r;
    bool named = false;
    for (size_t k = 0; k + 11 <= sizeof(rota_region_t); k++) named |= !memcmp(reg + k, "train-alice", 11);
    ok(!named, "the region clients map holds no client's command");
    is_uint(LD(&rg.r->devices[0].reserved), 6 * G, "the node's total is in the region");

    int fd = region_table_copy(&rg, 1001, false);
    ok(fd >= 0, "a copy for uid 1001");
    if (fd < 0) bail("region_table_copy: %s", strerror(-fd));
    int seals = fcntl(fd, F_GET_SEALS);
    ok(seals >= 0 && (seals & F_SEAL_WRITE) && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_SEAL),
       "the copy is sealed against writes and resizing");
    ok(mmap(NULL, ROTA_TABLE_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED,
       "and cannot be mapped writable");
    const rota_table_t *t = map_copy(fd);
    const char *why;
    ok(t && proto_table_check(t, ROTA_TABLE_MAP_SIZE, &why) == 0, "a valid table");
    is_uint(t->viewer_uid, 1001, "made for uid 1001");
    ok(!(t->flags & ROTA_TABLE_ALL), "not every client");
    is_uint(LD(&t->slots[3].state), ROTA_SLOT_LIVE, "its own process in slot 3");
    is_int(LD(&t->slots[3].pid), 4242, "with its pid");
    is_str(t->slots[3].comm, "train-alice", "and its command");
    is_uint(LD(&t->slots[3].used[0]), 2 * G, "and its memory");
    is_uint(LD(&t->slots[11].state), ROTA_SLOT_LIVE, "its other process");
    is_uint(LD(&t->slots[9].state), ROTA_SLOT_FREE, "another user's process reads as a free slot");
    is_int(LD(&t->slots[9].pid), 0, "without its pid");
    is_str(t->slots[9].comm, "", "or its command");
    is_uint(LD(&t->slots[9].used[0]), 0, "or its memory");
    is_uint(t->hidden_clients, 1, "one client hidden");
    is_str(t->groups[0].name, "/slurm/job1", "the group its process is charged to");
    is_uint(LD(&t->groups[0].used[0]), 2 * G, "with its use");
    is_str(t->groups[1].name, "", "not another user's job group");
    is_uint(LD(&t->groups[1].used[0]), 0, "nor its use");
    is_str(t->groups[2].name, "", "nor another user's per-user limit");
    is_uint(t->hidden_groups, 2, "two groups hidden");
    munmap((void *)t, ROTA_TABLE_MAP_SIZE);
    close(fd);

    fd = region_table_copy(&rg, 2002, false);
    t = fd >= 0 ? map_copy(fd) : NULL;
    ok(t && LD(&t->slots[9].state) == ROTA_SLOT_LIVE && LD(&t->slots[3].state) == ROTA_SLOT_FREE,
       "uid 2002 sees its own process only");
    ok(t && !strcmp(t->groups[2].name, "user 2002") && t->groups[2].limit == 4 * G,
       "and its own per-user limit, with no process charged there");
    ok(t && t->hidden_clients == 2, "two clients hidden from it");
    if (t) munmap((void *)t, ROTA_TABLE_MAP_SIZE);
    if (fd >= 0) close(fd);

    fd = region_table_copy(&rg, 0, true);
    t = fd >= 0 ? map_copy(fd) : NULL;
    ok(t && (t->flags & ROTA_TABLE_ALL) && t->hidden_clients == 0 && t->hidden_groups == 0, "root sees everything");
    ok(t && LD(&t->slots[9].pid) == 5353 && LD(&t->slots[3].pid) == 4242 && LD(&t->slots[11].pid) == 4343,
       "every client's pid");
    ok(t && !strcmp(t->groups[1].name, "/slurm/job2") && LD(&t->groups[1].used[0]) == 3 * G, "every group's use");
    ok(t && LD(&t->slots[0].group) == -1 && LD(&t->slots[0].device) == -1, "free slots name no group or GPU");
    if (t) munmap((void *)t, ROTA_TABLE_MAP_SIZE);
    if (fd >= 0) close(fd);

    region_destroy(&rg);
    return done_testing();
}
