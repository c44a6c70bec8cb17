/* abi-t.c - TAP tests re-checking runtime/abi.h's layout and runtime/lib/proto.c's message validation. */
#include "runtime/abi.h"
#include "runtime/lib/proto.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(t, f, want) is_uint(offsetof(t, f), want, #t "." #f " at offset " #want)

int main(void)
{
    /* The layout every rota build must agree on (a change here is an ABI change: bump ROTA_ABI_VERSION). */
    OFF(rota_msg_hdr_t, magic, 0);
    OFF(rota_msg_hdr_t, abi, 4);
    OFF(rota_msg_hdr_t, type, 6);
    OFF(rota_msg_hdr_t, size, 8);
    OFF(rota_msg_hdr_t, seq, 12);
    OFF(rota_msg_hello_t, role, 16);
    OFF(rota_msg_hello_t, mem_limit, 32);
    OFF(rota_msg_hello_t, comm, 48);
    OFF(rota_msg_hello_t, grant_token, 64);
    OFF(rota_msg_grant_t, cgroup, 40);
    OFF(rota_msg_grant_t, token, 296);
    OFF(rota_msg_welcome_t, status, 16);
    OFF(rota_msg_welcome_t, region_size, 32);
    OFF(rota_msg_welcome_t, reason, 48);
    OFF(rota_msg_mem_t, uuid, 16);
    OFF(rota_msg_mem_t, total_mem, 32);
    OFF(rota_msg_mem_t, bytes, 40);
    OFF(rota_msg_mem_t, wait_ms, 48);
    OFF(rota_msg_result_t, status, 16);
    OFF(rota_msg_result_t, limit, 24);
    OFF(rota_msg_result_t, credit, 32);
    OFF(rota_msg_place_t, mem, 24);
    OFF(rota_msg_place_t, wait_ms, 32);
    OFF(rota_msg_place_t, cand, 40);
    OFF(rota_channel_t, credit, 128);
    OFF(rota_region_t, magic, 0);
    OFF(rota_region_t, abi, 4);
    OFF(rota_region_t, size, 8);
    OFF(rota_region_t, ndevices, 40);
    OFF(rota_region_t, devices, 128);
    OFF(rota_region_t, sched, 128 + ROTA_MAX_DEVICES * 192);
    OFF(rota_slot_sched_t, hold, 0);
    OFF(rota_slot_sched_t, contended, 4);
    is_uint(sizeof(rota_slot_sched_t), 64, "a slot's launch-gate words are one cache line");
    OFF(rota_dev_t, capacity, 16);
    OFF(rota_dev_t, reserved, 24);
    OFF(rota_dev_t, waiters, 32);
    OFF(rota_dev_t, unused0, 40);
    OFF(rota_dev_t, high_active, 44);
    OFF(rota_dev_t, hold_events, 64);
    OFF(rota_dev_t, confirm_events, 88);
    OFF(rota_dev_t, hold_lat_hist, 112);
    OFF(rota_slot_t, state, 0);
    OFF(rota_slot_t, gen, 4);
    OFF(rota_slot_t, pid, 8);
    OFF(rota_slot_t, limit, 40);
    OFF(rota_slot_t, waiting, 48);
    OFF(rota_slot_t, used, 56);
    OFF(rota_slot_t, unused0, 56 + 8 * ROTA_MAX_DEVICES);
    OFF(rota_slot_t, comm, 232 - ROTA_COMM_LEN);
    OFF(rota_channel_t, magic, 0);
    OFF(rota_channel_t, slot, 16);
    OFF(rota_channel_t, inflight, 24);
    OFF(rota_channel_t, doorbell, 56);
    OFF(rota_channel_t, hold_events, 128 + 8 * ROTA_MAX_DEVICES);
    OFF(rota_channel_t, hold_lat_hist, 152 + 8 * ROTA_MAX_DEVICES);
    OFF(rota_board_t, magic, 0);
    OFF(rota_board_t, size, 8);
    OFF(rota_board_t, devices, 64);
    OFF(rota_board_dev_t, high_pending, 0);
    OFF(rota_board_dev_t, unused0, 8);
    OFF(rota_board_dev_t, high_idle, 4);
    OFF(rota_board_dev_t, high_due_ns, 16);
    OFF(rota_board_dev_t, high_due_span_ns, 24);
    OFF(rota_region_t, high_idle_ns, 64);
    /* the learned idle window (ABI 6) */
    OFF(rota_region_t, high_idle_learn, 72);
    OFF(rota_region_t, place_waiting, 76);
    OFF(rota_region_t, place_wait_bytes, 80);
    OFF(rota_region_t, place_wait_since_ns, 88);
    OFF(rota_region_t, credit_keep, 96);
    OFF(rota_region_t, client_limit, 104);
    OFF(rota_region_t, mps_pct, 112);
    OFF(rota_channel_t, idle_from_ns, 80);
    OFF(rota_channel_t, idle_win_ns, 88);
    OFF(rota_slot_t, idle_win_ns, 240);
    /* operating statistics (ABI 9), after the launch-gate words (ABI 10) */
    OFF(rota_region_t, stats, 128 + ROTA_MAX_DEVICES * 192 + ROTA_MAX_CLIENTS * 64);
    OFF(rota_stats_t, devices, 64);
    is_uint(sizeof(rota_stats_t), 64 + 64 * ROTA_MAX_DEVICES, "statistics: node and GPU totals only");
    /* the client table (ABI 10): rotad's own memory, copies by LIST */
    OFF(rota_table_t, magic, 0);
    OFF(rota_table_t, abi, 4);
    OFF(rota_table_t, size, 8);
    OFF(rota_table_t, viewer_uid, 16);
    OFF(rota_table_t, hidden_clients, 24);
    OFF(rota_table_t, groups, 64);
    OFF(rota_table_t, slots, 64 + ROTA_MAX_GROUPS * (ROTA_GROUP_NAME + 8 + 8 * ROTA_MAX_DEVICES));
    OFF(rota_table_t, stats, 64 + ROTA_MAX_GROUPS * (ROTA_GROUP_NAME + 8 + 8 * ROTA_MAX_DEVICES) + ROTA_MAX_CLIENTS * 256);
    ok(ROTA_TABLE_MAP_SIZE >= sizeof(rota_table_t) && ROTA_TABLE_MAP_SIZE % ROTA_PAGE == 0, "table map size");
    OFF(rota_msg_list_t, flags, 16);
    is_uint(sizeof(rota_msg_list_t), 24, "list message");
    OFF(rota_slot_stats_t, held_ns, 24);
    OFF(rota_slot_stats_t, hold_since_ns, 48);
    OFF(rota_slot_stats_t, hold_seq, 60);
    OFF(rota_dev_stats_t, mem_wait_ns, 16);
    is_uint(sizeof(rota_slot_stats_t), 64, "a slot's statistics are one cache line");
    is_uint(sizeof(rota_board_dev_t), 64, "a board entry is one cache line");
    ok(ROTA_BOARD_MAP_SIZE >= sizeof(rota_board_t) && ROTA_BOARD_MAP_SIZE % ROTA_PAGE == 0, "board map size");
    is_uint(sizeof(rota_slot_t), 256, "slot is 256 bytes");
    is_uint(sizeof(rota_region_t) % 64, 0, "region is a multiple of 64 bytes");
    ok(ROTA_REGION_MAP_SIZE >= sizeof(rota_region_t) && ROTA_REGION_MAP_SIZE % ROTA_PAGE == 0, "region map size");

    /* proto_check */
    rota_msg_mem_t m = {0};
    proto_hdr_init(&m.h, ROTA_MSG_RESERVE, sizeof m, 5);
    m.bytes = 1;
    m.total_mem = 1;
    const char *why;
    uint32_t abi = 0;
    is_int(proto_check(&m, sizeof m, &abi, &why), ROTA_MSG_RESERVE, "a valid reserve");
    is_int(proto_check(&m, sizeof m - 1, &abi, &why), -EBADMSG, "truncated: %s", why);
    is_int(proto_check(&m, 3, &abi, &why), -EBADMSG, "shorter than a header: %s", why);
    rota_msg_mem_t x = m;
    x.h.magic ^= 1;
    is_int(proto_check(&x, sizeof x, &abi, &why), -EBADMSG, "bad magic: %s", why);
    x = m;
    x.h.abi = ROTA_ABI_VERSION + 1;
    is_int(proto_check(&x, sizeof x, &abi, &why), -EPROTO, "another ABI: %s", why);
    is_uint(abi, ROTA_ABI_VERSION + 1, "the peer's ABI version is reported");
    x = m;
    x.h.type = 99;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "unknown type: %s", why);
    x = m;
    x.h.size = 12;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "header size disagrees: %s", why);
    x = m;
    x.bytes = 0;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "0 bytes: %s", why);
    x.bytes = UINT64_MAX;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "2^64-1 bytes: %s", why);
    x = m;
    x.wait_ms = ROTA_MAX_WAIT_MS + 1;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "wait over an hour: %s", why);
    x = m;
    x.flags = 1;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "reserved flags: %s", why);
    x = m;
    x.h.type = ROTA_MSG_RELEASE;
    x.wait_ms = 5;
    is_int(proto_check(&x, sizeof x, NULL, &why), -EBADMSG, "a release with a wait: %s", why);

    rota_msg_place_t pm = {0};
    proto_hdr_init(&pm.h, ROTA_MSG_PLACE, sizeof pm, 1);
    pm.flags = ROTA_PLACE_KNOWN;
    pm.wait_ms = ROTA_MAX_WAIT_MS;
    is_int(proto_check(&pm, sizeof pm, NULL, &why), ROTA_MSG_PLACE, "a place that may wait an hour");
    pm.wait_ms++;
    is_int(proto_check(&pm, sizeof pm, NULL, &why), -EBADMSG, "a place that would wait longer: %s", why);
    pm.wait_ms = 0;
    pm.reserved = 1;
    is_int(proto_check(&pm, sizeof pm, NULL, &why), -EBADMSG, "a place with its reserved word set: %s", why);

    rota_msg_list_t lm = {0};
    proto_hdr_init(&lm.h, ROTA_MSG_LIST, sizeof lm, 1);
    is_int(proto_check(&lm, sizeof lm, NULL, &why), ROTA_MSG_LIST, "a list");
    is_int(proto_check(&lm, sizeof lm - 1, NULL, &why), -EBADMSG, "a short list: %s", why);
    lm.flags = 1;
    is_int(proto_check(&lm, sizeof lm, NULL, &why), -EBADMSG, "a list with flags: %s", why);
    lm.flags = 0;
    lm.pad0 = 1;
    is_int(proto_check(&lm, sizeof lm, NULL, &why), -EBADMSG, "a list with its pad set: %s", why);

    /* GRANT (issue 32): an absolute, NUL-terminated cgroup path, a class, a bounded size, no unknown flags */
    rota_msg_grant_t gm = {0};
    proto_hdr_init(&gm.h, ROTA_MSG_GRANT, sizeof gm, 1);
    snprintf(gm.cgroup, sizeof gm.cgroup, "/system.slice/slurmstepd.scope/job_7/step_0");
    gm.mem_limit = ROTA_MAX_BYTES;
    gm.max_prio = ROTA_PRIO_LOW;
    gm.uid = ROTA_GRANT_ANY_UID;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), ROTA_MSG_GRANT, "a grant");
    gm.mem_limit++;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a grant of more than 2^56 bytes: %s", why);
    gm.mem_limit = 1;
    gm.max_prio = ROTA_PRIO_COUNT;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a grant of no class: %s", why);
    gm.max_prio = 0;
    gm.flags = 4;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a grant with an unknown flag: %s", why);
    gm.flags = ROTA_GRANT_TOKEN;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a token grant without its token: %s", why);
    gm.token[15] = 1;
    gm.cgroup[0] = 0;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), ROTA_MSG_GRANT, "a token grant for any cgroup");
    gm.flags = 0;
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a token without ROTA_GRANT_TOKEN: %s", why);
    memset(gm.token, 0, sizeof gm.token);
    gm.cgroup[0] = '/';
    gm.flags = ROTA_GRANT_REVOKE;
    gm.cgroup[0] = 's';
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a grant of a relative path: %s", why);
    memset(gm.cgroup, '/', sizeof gm.cgroup);
    is_int(proto_check(&gm, sizeof gm, NULL, &why), -EBADMSG, "a grant of a path without its NUL: %s", why);

    rota_msg_hello_t h = {0};
    proto_hdr_init(&h.h, ROTA_MSG_HELLO, sizeof h, 0);
    h.role = ROTA_ROLE_CLIENT;
    h.weight = 1000;
    is_int(proto_check(&h, sizeof h, NULL, &why), ROTA_MSG_HELLO, "a valid hello");
    rota_msg_hello_t hb = h;
    hb.role = 3;
    is_int(proto_check(&hb, sizeof hb, NULL, &why), -EBADMSG, "bad role: %s", why);
    hb = h;
    hb.mem_limit = UINT64_MAX;
    is_int(proto_check(&hb, sizeof hb, NULL, &why), -EBADMSG, "limit 2^64-1: %s", why);
    hb = h;
    hb.max_inflight = 70000;
    is_int(proto_check(&hb, sizeof hb, NULL, &why), -EBADMSG, "max_inflight 70000: %s", why);

    uint8_t u[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8};
    char s[PROTO_UUID_STR];
    proto_uuid_str(u, s);
    is_str(s, "GPU-12345678-9abc-def0-0102-030405060708", "uuid string in nvidia-smi form");
    char out[8];
    proto_sanitize(out, "ab\x01\x7f" "cdefgh", sizeof out);
    is_str(out, "ab??cde", "sanitize: printable only, truncated, terminated");

    rota_region_t *r = calloc(1, ROTA_REGION_MAP_SIZE);
    r->magic = ROTA_REGION_MAGIC;
    r->abi = ROTA_ABI_VERSION;
    r->size = sizeof *r;
    r->max_devices = ROTA_MAX_DEVICES;
    r->max_clients = ROTA_MAX_CLIENTS;
    r->max_groups = ROTA_MAX_GROUPS;
    is_int(proto_region_check(r, ROTA_REGION_MAP_SIZE, &why), 0, "a good region");
    r->size--;
    is_int(proto_region_check(r, ROTA_REGION_MAP_SIZE, &why), -EBADMSG, "corrupted size: %s", why);
    r->size++;
    r->abi = ROTA_ABI_VERSION + 1;
    is_int(proto_region_check(r, ROTA_REGION_MAP_SIZE, &why), -EPROTO, "region of another ABI: %s", why);
    r->magic = 0;
    is_int(proto_region_check(r, ROTA_REGION_MAP_SIZE, &why), -EBADMSG, "zeroed region: %s", why);
    is_int(proto_region_check(r, 100, &why), -EBADMSG, "short region: %s", why);
    free(r);

    rota_board_t *b = calloc(1, ROTA_BOARD_MAP_SIZE);
    if (!b) bail("out of memory");
    b->magic = ROTA_BOARD_MAGIC;
    b->abi = ROTA_ABI_VERSION;
    b->size = sizeof *b;
    is_int(proto_board_check(b, ROTA_BOARD_MAP_SIZE, &why), 0, "a good board");
    b->abi = ROTA_ABI_VERSION + 1;
    is_int(proto_board_check(b, ROTA_BOARD_MAP_SIZE, &why), -EPROTO, "board of another ABI: %s", why);
    b->abi = ROTA_ABI_VERSION;
    b->size++;
    is_int(proto_board_check(b, ROTA_BOARD_MAP_SIZE, &why), -EBADMSG, "board of the wrong size: %s", why);
    b->size--;
    b->magic = ROTA_CHANNEL_MAGIC;
    is_int(proto_board_check(b, ROTA_BOARD_MAP_SIZE, &why), -EBADMSG, "a channel is not a board: %s", why);
    is_int(proto_board_check(b, 64, &why), -EBADMSG, "short board: %s", why);
    free(b);
    return done_testing();
}
