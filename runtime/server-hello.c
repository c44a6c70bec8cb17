/* server-hello.c - admission: a connection's HELLO makes it an observer or a client (a slot, a channel, its
 * priority, weight and group), within the per-user caps and the high-priority policy of config.h. */
#include "runtime/server-internal.h"

#include "runtime/config.h"
#include "runtime/lib/cgroup.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"
#include "runtime/region.h"
#include "runtime/sched.h"
#include "runtime/stats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void server_welcome(server_t *s, client_t *c, int status, const char *reason, const int *fds, int nfds)
{
    rota_msg_welcome_t w = {0};
    proto_hdr_init(&w.h, ROTA_MSG_WELCOME, sizeof w, 0);
    w.status = status;
    w.abi = ROTA_ABI_VERSION;
    if (!status) {
        w.slot = c->slot >= 0 ? (uint32_t)c->slot : 0;
        w.gen = c->gen;
        w.region_size = ROTA_REGION_MAP_SIZE;
        w.channel_size = c->ch ? ROTA_CHANNEL_MAP_SIZE : 0;
    }
    snprintf(w.reason, sizeof w.reason, "%s", reason ? reason : "");
    server_send(s, c, &w, sizeof w, fds, nfds);
}

/* Whether the client's user may run high priority (config.h: root, rotad's user, high-user and high-group lines);
 * cg: its cgroup v2 path, or NULL. */
static bool server_may_high(server_t *s, client_t *c, const char *cg)
{
    uint32_t gids[64];
    socklen_t len = sizeof gids;
    unsigned n = 0;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, gids, &len) == 0) n = len / sizeof gids[0];
    return config_may_high(s->o.cfg, (uint32_t)c->uid, (uint32_t)c->gid, gids, n, cg);
}

void server_on_hello(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_hello_t *h = msg;
    c->role = h->role;
    if (s->nfresh) s->nfresh--;
    if (h->role == ROTA_ROLE_OBSERVER) {
        server_refresh(s);
        server_welcome(s, c, 0, NULL, &s->rg.ro_fd, 1);
        return;
    }
    rota_region_t *r = s->rg.r;
    int slot = -1;
    unsigned lim = s->o.cfg->max_clients;
    /* Free slots are found from a hint (the lowest freed since): a burst of registrations costs a scan of the table
     * once, not once per client. */
    for (unsigned i = s->slot_hint; i < lim && i < ROTA_MAX_CLIENTS; i++)
        if (!s->by_slot[i]) {
            slot = (int)i;
            break;
        }
    if (slot < 0) {
        char why[64];
        snprintf(why, sizeof why, "rotad's client table is full (%u clients)", lim);
        server_welcome(s, c, -EUSERS, why, NULL, 0);
        server_doom(s, c, "client table full");
        return;
    }
    const config_t *cfg = s->o.cfg;
    struct server_user *u = NULL;
    if (!server_privileged(c->uid)) {
        u = server_user(s, (uint32_t)c->uid);
        if (!u || u->slots >= cfg->max_clients_per_user) {
            char why[64];
            snprintf(why, sizeof why, "this user has %u clients registered already (rotad's limit)",
                     u ? u->slots : 0);
            server_welcome(s, c, -EUSERS, why, NULL, 0);
            server_doom(s, c, "over its user's client limit");
            return;
        }
    }
    /* The client's cgroup (rotad reads it: the client cannot choose it) decides its group, a grant, high-cgroup. */
    char cg[512];
    static const uint8_t no_token[ROTA_GRANT_TOKEN_LEN];
    bool token = memcmp(h->grant_token, no_token, sizeof no_token) != 0;
    bool have_cg = (s->ngrants || cfg->ngroups || cfg->nhigh_cgroups || cfg->ngrant_required || token) &&
                   cgroup_of(c->pid, cg, sizeof cg) == 0;
    /* What an admin's scheduler granted (GRANT, by the token the client presents or by its cgroup): the client's
     * own HELLO may only ask for less. */
    const server_grant_t *gr = have_cg && token ? server_grant_claim(s, c, h->grant_token, cg) : NULL;
    if (!gr && have_cg) gr = server_grant_find(s, cg, (uint32_t)c->uid);
    enum rota_prio prio = (enum rota_prio)h->priority; /* below ROTA_PRIO_COUNT: proto_check */
    uint64_t limit = h->mem_limit;
    if (gr) {
        if (prio < gr->max_prio) prio = (enum rota_prio)gr->max_prio;
        if (gr->mem_limit && (!limit || limit > gr->mem_limit)) limit = gr->mem_limit;
    }
    /* Where an admin requires a grant (config.h grant-required: a container that dropped its token), a client
     * without one gains nothing: it is registered, so it stays visible and its allocations are refused by rotad,
     * rather than turned away, which would leave librota running it uncoordinated. */
    /* A cgroup rotad could not read might be under the prefix: it counts as under it. */
    bool bare = !gr && cfg->ngrant_required && (!have_cg || config_grant_required(cfg, cg));
    if (bare) {
        if (prio < ROTA_PRIO_NORMAL) prio = ROTA_PRIO_NORMAL;
        limit = 1; /* one byte: no allocation fits (0 would mean no limit) */
        server_log_client(s, c, "has no grant under a grant-required cgroup (%s): runs at best normal, with no GPU "
                          "memory", have_cg ? cg : "its cgroup unreadable");
    }
    if (prio == ROTA_PRIO_HIGH && !(gr && gr->max_prio == ROTA_PRIO_HIGH) &&
        !server_may_high(s, c, have_cg ? cg : NULL)) {
        prio = ROTA_PRIO_NORMAL; /* its board is read-only: librota sees it and says so once */
        server_log_client(s, c, "asked for high priority, which rotad's policy does not allow this user: runs as "
                          "normal");
    }
    uint32_t weight = h->weight, wmax = cfg->max_weight * 1000u;
    if (weight > wmax) weight = wmax;
    uint32_t gen = ++s->next_gen;
    int chfd;
    int rc = region_channel_create((uint32_t)slot, gen, &c->ch, &chfd);
    if (rc) {
        server_welcome(s, c, rc, "rotad could not create a channel", NULL, 0);
        server_doom(s, c, "no channel");
        return;
    }
    c->slot = slot;
    c->gen = gen;
    c->prio = prio;
    if (u) {
        u->slots++;
        c->slot_counted = true;
    }
    s->by_slot[slot] = c;
    s->slot_hint = (unsigned)slot + 1;
    rota_slot_t *sl = &s->rg.t->slots[slot];
    int group = -1;
    if (cfg->ngroups && have_cg) group = config_match(cfg, cg);
    int ug = group < 0 ? config_user_of(cfg, (uint32_t)c->uid) : -1;
    if (ug >= 0 && cfg->ngroups + (unsigned)ug < ROTA_MAX_GROUPS) group = (int)cfg->ngroups + ug;
    ST(&sl->gen, gen);
    ST(&sl->pid, (int32_t)c->pid);
    ST(&sl->uid, (uint32_t)c->uid);
    ST(&sl->priority, prio);
    ST(&sl->weight, weight);
    ST(&sl->max_inflight, h->max_inflight);
    ST(&sl->group, group);
    ST(&sl->device, -1);
    ST(&sl->wait_dev, -1);
    ST(&sl->limit, limit);
    ST(&sl->waiting, 0);
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++) ST(&sl->used[d], 0);
    ST(&sl->sched_state, 0);
    ST(&sl->launches, 0);
    ST(&sl->busy_ns, 0);
    ST(&sl->inflight, 0);
    ST(&sl->credit, 0);
    stats_slot_reset(s->rg.t, (unsigned)slot);
    proto_sanitize(sl->comm, h->comm, sizeof sl->comm);
    atomic_store_explicit(&sl->state, ROTA_SLOT_LIVE, memory_order_release);
    ST(&r->nclients, LD(&r->nclients) + 1);
    sched_client_add(s->sched, (unsigned)slot, c->ch, prio, weight);
    int fds[3] = {s->rg.ro_fd, chfd, c->prio == ROTA_PRIO_HIGH ? s->rg.board_fd : s->rg.board_ro_fd};
    server_welcome(s, c, 0, NULL, fds, 3);
    close(chfd);
    server_log(s, 2, "client pid %d uid %u registered in slot %d (gen %u, %s)", (int)c->pid, (unsigned)c->uid,
               slot, gen, prio_name(prio));
}
