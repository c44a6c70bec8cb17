/* ledger-t.c - TAP tests for runtime/ledger.c: devices by UUID, limits, charges that never underflow. */
#include "runtime/ledger.h"
#include "runtime/region.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define G (UINT64_C(1) << 30)

int main(void)
{
    region_t rg;
    config_t cfg = {.ngroups = 1};
    snprintf(cfg.groups[0].path, sizeof cfg.groups[0].path, "/job");
    cfg.groups[0].limit = 6 * G;
    if (region_create(&rg, &cfg)) bail("region_create failed");
    rota_region_t *r = rg.r;
    rota_table_t *t = rg.t;
    uint8_t a[16] = {1}, b[16] = {2};

    is_int(ledger_find(r, a), -1, "an unknown UUID is not found");
    is_int(ledger_device(r, a, 10 * G), 0, "first GPU gets index 0");
    is_int(ledger_device(r, b, 4 * G), 1, "second GPU gets index 1");
    is_int(ledger_device(r, a, 99 * G), 0, "the same UUID maps to the same entry (not the ordinal)");
    is_uint(atomic_load(&r->devices[0].capacity), 10 * G, "a later report does not change the capacity");
    is_uint(atomic_load(&r->ndevices), 2, "two devices");

    /* slot 0: no limit; slot 1: 3G limit; slot 2: group /job (6G) */
    atomic_store(&t->slots[1].limit, 3 * G);
    atomic_store(&t->slots[2].group, 0);
    atomic_store(&t->slots[3].group, 0);

    is_int(ledger_check(r, t, 0, 0, 10 * G), 0, "the whole GPU fits an unlimited client");
    is_int(ledger_check(r, t, 0, 0, 10 * G + 1), -ENOMEM, "one byte more does not");
    is_int(ledger_check_ever(r, t, 0, 0, 10 * G + 1), -ENOMEM, "... and never will");
    is_int(ledger_check_ever(r, t, 1, 0, 3 * G + 1), -EDQUOT, "over the process limit never fits");
    is_int(ledger_check_ever(r, t, 2, 0, 6 * G + 1), -EDQUOT, "over the group limit never fits");
    is_uint(ledger_limit(t, 1, 0), 3 * G, "effective limit of a limited process");
    is_uint(ledger_limit(t, 2, 0), 6 * G, "effective limit of a group member");
    is_uint(ledger_limit(t, 0, 0), 0, "no limit");

    ledger_charge(r, t, 1, 0, 2 * G);
    is_int(ledger_check(r, t, 1, 0, G), 0, "2G + 1G fits the 3G limit");
    is_int(ledger_check(r, t, 1, 0, G + 1), -EDQUOT, "2G + 1G + 1 does not");
    is_uint(atomic_load(&r->devices[0].reserved), 2 * G, "device reserved counts the charge");

    ledger_charge(r, t, 2, 0, 4 * G);
    is_int(ledger_check(r, t, 3, 0, 2 * G), 0, "group member: 4G + 2G fits the 6G group");
    is_int(ledger_check(r, t, 3, 0, 2 * G + 1), -EDQUOT, "group member: the group limit binds the whole group");
    is_uint(atomic_load(&t->groups[0].used[0]), 4 * G, "group usage");
    is_int(ledger_check_own(t, 1, 0, G), 0, "own check: 2G + 1G is within the 3G limit");
    is_int(ledger_check_own(t, 1, 0, G + 1), -EDQUOT, "own check: 2G + 1G + 1 only its own frees can make room for");
    is_int(ledger_check_own(t, 3, 0, 6 * G), 0, "own check: a group member's 6G fits once the others free");
    is_int(ledger_check_own(t, 2, 0, 2 * G + 1), -EDQUOT, "own check: 4G held + 2G + 1 exceeds the 6G group");
    is_int(ledger_check_own(t, 0, 0, 20 * G), 0, "own check: the capacity is not the client's limit");
    is_int(ledger_check_own(t, 1, 0, UINT64_MAX), -EDQUOT, "own check: no overflow");
    is_int(ledger_check(r, t, 0, 0, 4 * G), 0, "4G left on the GPU for the unlimited client");
    is_int(ledger_check(r, t, 0, 0, 4 * G + 1), -ENOMEM, "and not more");

    is_uint(ledger_uncharge(r, t, 1, 0, 5 * G), 2 * G, "releasing more than held gives back only what is held");
    is_uint(atomic_load(&t->slots[1].used[0]), 0, "client counter at zero, not wrapped");
    is_uint(atomic_load(&r->devices[0].reserved), 4 * G, "device counter only lost that client's bytes");
    is_uint(ledger_uncharge(r, t, 1, 0, 1), 0, "releasing from nothing gives nothing");
    is_uint(ledger_uncharge(r, t, 0, 1, G), 0, "releasing on another GPU gives nothing");

    ledger_charge(r, t, 2, 1, G);
    uint32_t mask = ledger_reclaim(r, t, 2);
    is_uint(mask, 3, "reclaim reports both GPUs");
    is_uint(atomic_load(&r->devices[0].reserved), 0, "reclaim returns everything on GPU 0");
    is_uint(atomic_load(&r->devices[1].reserved), 0, "and on GPU 1");
    is_uint(atomic_load(&t->groups[0].used[0]), 0, "and the group's share");
    is_int(atomic_load(&t->slots[2].device), 0, "a slot remembers its first GPU");

    /* full device table */
    for (int i = 2; i < ROTA_MAX_DEVICES; i++) {
        uint8_t u[16] = {(uint8_t)(10 + i)};
        ledger_device(r, u, G);
    }
    uint8_t extra[16] = {0xff};
    is_int(ledger_device(r, extra, G), -ENOSPC, "a 17th GPU is refused, not overflowing the table");
    region_destroy(&rg);
    return done_testing();
}
