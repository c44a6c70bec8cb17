/* server-grant.c - GRANT: the limits an admin's scheduler (the Slurm plugin, the Kubernetes device plugin) grants
 * the processes of a cgroup, taken only from root or rotad's user, applied at those processes' HELLO (abi.h). */
#include "runtime/server-internal.h"

#include "runtime/lib/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Whether cgroup is path or lies below it. */
static bool server_grant_covers(const char *path, const char *cgroup)
{
    size_t n = strlen(path);
    if (n == 1) return true; /* "/" */
    return !strncmp(cgroup, path, n) && (cgroup[n] == 0 || cgroup[n] == '/');
}

const server_grant_t *server_grant_find(const server_t *s, const char *cgroup, uint32_t uid)
{
    const server_grant_t *best = NULL;
    size_t best_len = 0;
    for (uint32_t i = 0; i < s->ngrants; i++) {
        const server_grant_t *g = &s->grants[i];
        size_t n = strlen(g->cgroup);
        if ((g->uid == ROTA_GRANT_ANY_UID || g->uid == uid) && server_grant_covers(g->cgroup, cgroup) &&
            (!best || n > best_len)) {
            best = g;
            best_len = n;
        }
    }
    return best;
}

/* Forgets the grants whose cgroup is gone (the job ended without revoking them); returns how many. */
static uint32_t server_grant_prune(server_t *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->ngrants; i++) {
        char p[ROTA_GRANT_CGROUP_LEN + 32];
        struct stat st;
        snprintf(p, sizeof p, "/sys/fs/cgroup%s", s->grants[i].cgroup);
        if (stat(p, &st) == 0 || errno != ENOENT) s->grants[k++] = s->grants[i];
    }
    uint32_t gone = s->ngrants - k;
    s->ngrants = k;
    return gone;
}

void server_on_grant(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_grant_t *m = msg;
    if (!server_privileged(c->uid)) {
        server_doom(s, c, "sent a GRANT, which only root or rotad's user may");
        return;
    }
    int status = 0;
    server_grant_t *g = NULL;
    for (uint32_t i = 0; i < s->ngrants && !g; i++)
        if (!strcmp(s->grants[i].cgroup, m->cgroup)) g = &s->grants[i];
    if (m->flags & ROTA_GRANT_REVOKE) {
        if (g) *g = s->grants[--s->ngrants];
        else status = -ENOENT;
        server_log(s, 1, "grant for %s revoked%s", m->cgroup, g ? "" : ": there was none");
        server_result(s, c, m->h.seq, status, -1);
        return;
    }
    if (!g && s->ngrants == ROTA_MAX_GRANTS) server_grant_prune(s);
    if (!g && s->ngrants == ROTA_MAX_GRANTS) {
        server_log_limited(s, "grant for %s refused: %d grants held already", m->cgroup, ROTA_MAX_GRANTS);
        server_result(s, c, m->h.seq, -ENOSPC, -1);
        return;
    }
    if (!g) {
        if (!s->grants && !(s->grants = calloc(ROTA_MAX_GRANTS, sizeof *s->grants))) {
            server_result(s, c, m->h.seq, -ENOMEM, -1);
            return;
        }
        g = &s->grants[s->ngrants++];
    }
    memcpy(g->cgroup, m->cgroup, sizeof g->cgroup);
    size_t n = strlen(g->cgroup);
    while (n > 1 && g->cgroup[n - 1] == '/') g->cgroup[--n] = 0;
    g->uid = m->uid;
    g->mem_limit = m->mem_limit;
    g->max_prio = m->max_prio;
    server_log(s, 1, "grant for %s (uid %d): memory %llu bytes per GPU, class %u at best", g->cgroup,
               g->uid == ROTA_GRANT_ANY_UID ? -1 : (int)g->uid, (unsigned long long)g->mem_limit, g->max_prio);
    server_result(s, c, m->h.seq, 0, -1);
}
