/* server-dispatch.c - the message table: for each type a client may send, its handler, who may send it, and how
 * often; server_on_message checks a message and hands it to its row. A new request is a handler and a row. */
#include "runtime/server-internal.h"

#include "runtime/lib/proto.h"

#include <errno.h>
#include <stdio.h>

/* Who may send a message: a connection before its HELLO, an observer (rota status/top, rota run), a client. */
enum server_from {
    SERVER_FROM_FRESH = 1u << 0,
    SERVER_FROM_OBSERVER = 1u << 1,
    SERVER_FROM_CLIENT = 1u << 2,
};

typedef void server_handler_fn(server_t *s, client_t *c, const void *msg);

typedef struct server_msg {
    server_handler_fn *fn;
    unsigned from;   /* enum server_from: who may send it */
    uint32_t min_ms; /* one a connection per min_ms at most (0: no limit); sooner is answered -EAGAIN */
} server_msg_t;

/* Indexed by type: a type without a handler (WELCOME, RESULT: rotad sends those) is nobody's to send. */
static const server_msg_t server_msgs[ROTA_MSG_TYPE_MAX + 1] = {
    [ROTA_MSG_HELLO] = {server_on_hello, SERVER_FROM_FRESH, 0},
    [ROTA_MSG_RESERVE] = {server_on_reserve, SERVER_FROM_CLIENT, 0},
    [ROTA_MSG_RELEASE] = {server_on_release, SERVER_FROM_CLIENT, 0},
    [ROTA_MSG_ADOPT] = {server_on_adopt, SERVER_FROM_CLIENT, 0},
    /* rota run asks as an observer */
    [ROTA_MSG_PLACE] = {server_on_place, SERVER_FROM_OBSERVER | SERVER_FROM_CLIENT, 0},
    /* A copy costs rotad a memfd and a pass over the table (server-observe.c). */
    [ROTA_MSG_LIST] = {server_on_list, SERVER_FROM_OBSERVER | SERVER_FROM_CLIENT, ROTA_LIST_MIN_MS},
    /* An admin's scheduler, as root (its handler checks SO_PEERCRED): a connection of its own, or an observer. */
    [ROTA_MSG_GRANT] = {server_on_grant, SERVER_FROM_FRESH | SERVER_FROM_OBSERVER, 0},
};

/* What the sender is told (in the log) when it sent what it may not: by what it is. */
static const char *server_refusal(unsigned from)
{
    if (from == SERVER_FROM_FRESH) return "first message is not a hello";
    if (from == SERVER_FROM_OBSERVER) return "an observer sent a request";
    return "unexpected message type";
}

/* Whether a message of a rate-limited row came too soon; if not, it counts from now. */
static bool server_too_soon(client_t *c, int type, uint32_t min_ms)
{
    if (!min_ms) return false;
    uint64_t now = server_now_ns();
    if (c->last_ns[type] && now - c->last_ns[type] < (uint64_t)min_ms * 1000000u) return true;
    c->last_ns[type] = now;
    return false;
}

void server_on_message(server_t *s, client_t *c, const void *buf, size_t n)
{
    uint32_t abi = 0;
    const char *why;
    int type = proto_check(buf, n, &abi, &why);
    if (type == -EPROTO) {
        char reason[64];
        snprintf(reason, sizeof reason, "rotad speaks rota ABI version %u, not %u", ROTA_ABI_VERSION, abi);
        server_welcome(s, c, -EPROTO, reason, NULL, 0);
        server_log_client(s, c, "speaks rota ABI version %u, rotad version %u: refused (it runs uncoordinated)", abi,
                          ROTA_ABI_VERSION);
        server_doom(s, c, NULL);
        return;
    }
    if (type < 0) {
        server_doom(s, c, why);
        return;
    }
    unsigned from = !c->role                        ? SERVER_FROM_FRESH
                    : c->role == ROTA_ROLE_OBSERVER ? SERVER_FROM_OBSERVER
                                                    : SERVER_FROM_CLIENT;
    const server_msg_t *row = type <= ROTA_MSG_TYPE_MAX ? &server_msgs[type] : NULL;
    if (!row || !row->fn || !(row->from & from)) {
        server_doom(s, c, server_refusal(from));
        return;
    }
    if (server_too_soon(c, type, row->min_ms)) {
        const rota_msg_hdr_t *h = buf;
        server_result(s, c, h->seq, -EAGAIN, -1);
        return;
    }
    row->fn(s, c, buf);
}
