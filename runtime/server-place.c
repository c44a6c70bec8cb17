/* server-place.c - PLACE: rotad chooses a GPU among the asker's candidates (runtime/place.c), at once or when
 * room appears. */
#include "runtime/server-internal.h"

#include "runtime/lib/proto.h"
#include "runtime/place.h"
#include "runtime/stats.h"

#include <errno.h>

/* Sends the RESULT of a PLACE: the candidate index (or region device with ROTA_PLACE_KNOWN), or the error. */
static void server_place_result(server_t *s, client_t *c, const rota_msg_place_t *m, int i, uint64_t waited_ns)
{
    if (i >= 0 && waited_ns)
        server_log(s, 1, "pid %d: placed on candidate %d of %u after waiting %llu ms for room", (int)c->pid, i,
                   (unsigned)m->ncand, (unsigned long long)(waited_ns / 1000000u));
    else if (i >= 0 && (m->flags & ROTA_PLACE_KNOWN))
        server_log(s, 2, "pid %d: placed on GPU %d (remap)", (int)c->pid, i);
    else if (i >= 0)
        server_log(s, 2, "pid %d: placed on candidate %d of %u", (int)c->pid, i, (unsigned)m->ncand);
    rota_msg_result_t res = {0};
    proto_hdr_init(&res.h, ROTA_MSG_RESULT, sizeof res, m->h.seq);
    res.status = i < 0 ? i : 0;
    res.dev = i < 0 ? -1 : i;
    server_send(s, c, &res, sizeof res, NULL, 0);
}

void server_place_answer(void *ctx, const place_waiter_t *w, int i)
{
    server_t *s = ctx;
    uint64_t now = server_now_ns();
    if (i >= 0) stats_place_wait(s->rg.r, now > w->since_ns ? now - w->since_ns : 0);
    server_place_result(s, w->who, &w->m, i, now > w->since_ns ? now - w->since_ns : 1);
}

/* Whether c may queue another waiting PLACE: at most PLACE_MAX_WAITS_PER_CONN of its connection and
 * max-waits-per-user of its user wait (issue 32, item 2: one connection queued 42,944 of them in 5 s). */
static bool server_place_may_wait(server_t *s, const client_t *c)
{
    unsigned conn = 0, user = 0;
    for (const place_waiter_t *w = s->pl.waiters; w; w = w->next) {
        conn += w->who == c;
        user += w->uid == c->uid;
    }
    return conn < PLACE_MAX_WAITS_PER_CONN && user < s->o.cfg->max_waits_per_user;
}

void server_on_place(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_place_t *m = msg;
    uint64_t now = server_now_ns();
    int i = place_choose_as(&s->pl, s->rg.r, c->pid, c->uid, m, now);
    if (i == -EAGAIN && !server_place_may_wait(s, c)) {
        server_log_client(s, c, "has too many placements waiting: answered at once");
        i = place_choose_now(&s->pl, s->rg.r, c->pid, c->uid, m, now);
    }
    if (i == -EAGAIN) {
        if (!place_wait_add(&s->pl, c, c->pid, c->uid, m, now)) {
            server_log(s, 1, "pid %d: %llu MiB fits on no GPU now: waiting up to %u ms for room", (int)c->pid,
                       (unsigned long long)(m->mem >> 20), m->wait_ms);
            return;
        }
        i = place_choose_now(&s->pl, s->rg.r, c->pid, c->uid, m, now); /* no memory to queue it: as without a wait */
    }
    server_place_result(s, c, m, i, 0);
}
