/* server-observe.c - what observers (rota status, rota top) read: the clients' published counters copied into
 * the region, and LIST's per-user copies of the client table. */
#include "runtime/server-internal.h"

#include "runtime/lib/proto.h"
#include "runtime/region.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void server_refresh(server_t *s)
{
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->slot < 0 || !c->ch || c->doomed) continue;
        const char *why;
        rota_channel_t *ch = c->ch;
        bool bad = proto_channel_check(ch, ROTA_CHANNEL_MAP_SIZE, &why) != 0;
        if (!bad && (ch->slot != (uint32_t)c->slot || ch->gen != c->gen)) {
            bad = true;
            why = "channel names another slot";
        }
        rota_slot_t *sl = &s->rg.t->slots[c->slot];
        if (bad) {
            if (!c->channel_warned)
                server_log_client(s, c, "%s; ignoring its channel", why);
            c->channel_warned = true;
            continue;
        }
        uint32_t inflight = LD(&ch->inflight);
        ST(&sl->inflight, inflight > 65535 ? 65535 : inflight);
        ST(&sl->launches, LD(&ch->launches));
        uint64_t credit = 0;
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) {
            uint64_t x = LD(&ch->credit[d]), u = LD(&sl->used[d]);
            credit += x < u ? x : u;
        }
        ST(&sl->credit, credit);
        ST(&sl->busy_ns, LD(&ch->busy_ns));
    }
}

/* LIST (abi.h): a copy of the table made for the asker's uid (SO_PEERCRED, not its word). Root and rotad's own user
 * see every client; any other user its own processes and the node's totals (issue 21: a process must not learn
 * another user's pids, commands or memory from rotad). A copy costs rotad a memfd and a pass over the table, so one
 * connection gets one per ROTA_LIST_MIN_MS (server-dispatch.c's table); connections are capped per user
 * (max-connections-per-user). */
/* Whether c's user may have another table copy now: SERVER_LIST_USER_HZ a second with a burst of
 * SERVER_LIST_USER_BURST, per user (the per-connection limit alone let 60 connections of one user take about a
 * core: issue 32, item 9). Root and rotad's user are not limited. */
static bool server_list_allowed(server_t *s, const client_t *c)
{
    if (server_privileged(c->uid)) return true;
    struct server_user *u = server_user(s, (uint32_t)c->uid);
    if (!u) return false;
    uint64_t now = server_now_ns(), full = (uint64_t)SERVER_LIST_USER_BURST * 1000u;
    uint64_t add = u->list_ns ? (now - u->list_ns) * SERVER_LIST_USER_HZ / 1000000u : full; /* milli-copies */
    u->list_ns = now;
    u->list_milli = u->list_milli + add > full ? full : u->list_milli + add;
    if (u->list_milli < 1000u) return false;
    u->list_milli -= 1000u;
    return true;
}

void server_on_list(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_list_t *m = msg;
    if (!server_list_allowed(s, c)) {
        server_result(s, c, m->h.seq, -EAGAIN, -1);
        return;
    }
    server_refresh(s); /* the clients' counters as of now, as an observer's HELLO gets them */
    int fd = region_table_copy(&s->rg, (uint32_t)c->uid, server_privileged(c->uid));
    if (fd < 0) {
        server_log(s, 0, "cannot copy the client table: %s", strerror(-fd));
        server_result(s, c, m->h.seq, fd, -1);
        return;
    }
    rota_msg_result_t r = {0};
    proto_hdr_init(&r.h, ROTA_MSG_RESULT, sizeof r, m->h.seq);
    r.dev = -1;
    server_send(s, c, &r, sizeof r, &fd, 1);
    close(fd);
}
