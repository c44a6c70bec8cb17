/* server-grant.c - GRANT: the limits an admin's scheduler (the Slurm plugin, the Kubernetes device plugin) grants
 * the processes of a cgroup, taken only from root or rotad's user, applied at those processes' HELLO (abi.h). */
#include "runtime/server-internal.h"

#include "runtime/lib/cgroup.h"
#include "runtime/lib/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Grants outlive rotad: a restart (a crash included) must not give a running job back the limits its own
 * environment names. They are saved beside the socket after every change, as a header and the entries. */
#define SERVER_GRANTS_MAGIC 0x52544752u /* "RTGR" */

typedef struct server_grants_hdr {
    uint32_t magic, abi, entry_size, n;
} server_grants_hdr_t;

static void server_grant_path(const server_t *s, char *out, size_t n, const char *suffix)
{
    snprintf(out, n, "%s.grants%s", s->path, suffix);
}

/* Writes every grant to PATH.grants (through PATH.grants.tmp and a rename: never half a file). */
static void server_grant_save(server_t *s)
{
    char path[sizeof s->path + 16], tmp[sizeof s->path + 16];
    server_grant_path(s, path, sizeof path, "");
    server_grant_path(s, tmp, sizeof tmp, ".tmp");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        server_log(s, 0, "unable to save the grants in %s: %s", tmp, strerror(errno));
        return;
    }
    server_grants_hdr_t h = {SERVER_GRANTS_MAGIC, ROTA_ABI_VERSION, sizeof(server_grant_t), s->ngrants};
    size_t len = s->ngrants * sizeof *s->grants;
    bool ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && (!len || write(fd, s->grants, len) == (ssize_t)len);
    if (close(fd) || !ok || rename(tmp, path)) {
        server_log(s, 0, "unable to save the grants in %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

void server_grant_load(server_t *s)
{
    char path[sizeof s->path + 16];
    server_grant_path(s, path, sizeof path, "");
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    server_grants_hdr_t h;
    /* Only rotad's own file, which nobody else could have written. */
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
        read(fd, &h, sizeof h) != (ssize_t)sizeof h || h.magic != SERVER_GRANTS_MAGIC || h.abi != ROTA_ABI_VERSION ||
        h.entry_size != sizeof(server_grant_t) || h.n > ROTA_MAX_GRANTS ||
        !(s->grants = calloc(ROTA_MAX_GRANTS, sizeof *s->grants))) {
        server_log(s, 0, "not loading the grants in %s: not rotad's own (mode 0600) or of another version", path);
        close(fd);
        return;
    }
    for (uint32_t i = 0; i < h.n; i++) {
        server_grant_t g;
        if (read(fd, &g, sizeof g) != (ssize_t)sizeof g) break;
        if (!memchr(g.cgroup, 0, sizeof g.cgroup) || g.max_prio >= ROTA_PRIO_COUNT || g.mem_limit > ROTA_MAX_BYTES ||
            g.kind > SERVER_GRANT_BOUND || (g.cgroup[0] != '/' && !(g.kind == SERVER_GRANT_UNBOUND && !g.cgroup[0])))
            continue;
        s->grants[s->ngrants++] = g;
    }
    close(fd);
    if (s->ngrants) server_log(s, 1, "loaded %u grants from %s", s->ngrants, path);
}

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
        if (g->kind == SERVER_GRANT_UNBOUND) continue; /* its cgroup is not yet known */
        size_t n = strlen(g->cgroup);
        if ((g->uid == ROTA_GRANT_ANY_UID || g->uid == uid) && server_grant_covers(g->cgroup, cgroup) &&
            (!best || n > best_len)) {
            best = g;
            best_len = n;
        }
    }
    return best;
}

/* Whether the cgroup at path is gone (its job or container ended). */
static bool server_grant_gone(const char *path)
{
    char p[ROTA_GRANT_CGROUP_LEN + 256];
    struct stat st;
    snprintf(p, sizeof p, "%s%s", cgroup_root(), path);
    return stat(p, &st) && errno == ENOENT;
}

static uint64_t server_grant_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A token whose bound cgroup is gone may bind once more, within grant-token-ms, to a cgroup beside it: a container
 * restarted in its pod gets a new cgroup but keeps its environment (the kubelet does not allocate again). */
static void server_grant_unbind(server_t *s, server_grant_t *g, uint64_t now)
{
    char *slash = strrchr(g->cgroup, '/');
    if (slash == g->cgroup) slash[1] = 0; /* "/x": beside it is anywhere */
    else if (slash) *slash = 0;
    g->kind = SERVER_GRANT_UNBOUND;
    g->expires_ns = now + (uint64_t)s->o.cfg->grant_token_ms * 1000000u;
}

/* Token grants: forgets the expired ones and unbinds those whose cgroup is gone; true when any changed. */
static bool server_grant_lapse(server_t *s, uint64_t now)
{
    uint32_t k = 0;
    bool changed = false;
    for (uint32_t i = 0; i < s->ngrants; i++) {
        server_grant_t *g = &s->grants[i];
        if (g->kind == SERVER_GRANT_BOUND && server_grant_gone(g->cgroup)) {
            server_grant_unbind(s, g, now);
            changed = true;
        }
        if (g->kind == SERVER_GRANT_UNBOUND && now >= g->expires_ns) {
            changed = true;
            continue;
        }
        s->grants[k++] = *g;
    }
    s->ngrants = k;
    return changed;
}

/* Forgets the grants whose cgroup is gone (the job ended without revoking them); returns how many. */
static uint32_t server_grant_prune(server_t *s)
{
    uint32_t n0 = s->ngrants, k = 0;
    server_grant_lapse(s, server_grant_now());
    for (uint32_t i = 0; i < s->ngrants; i++)
        if (s->grants[i].kind != SERVER_GRANT_CGROUP || !server_grant_gone(s->grants[i].cgroup))
            s->grants[k++] = s->grants[i];
    s->ngrants = k;
    return n0 - k;
}

/* The grant of token, or NULL; every entry is compared in full (no early exit that times a guess). */
static server_grant_t *server_grant_of_token(server_t *s, const uint8_t *token)
{
    server_grant_t *found = NULL;
    for (uint32_t i = 0; i < s->ngrants; i++) {
        server_grant_t *g = &s->grants[i];
        uint8_t d = 0;
        for (unsigned b = 0; b < ROTA_GRANT_TOKEN_LEN; b++) d |= g->token[b] ^ token[b];
        if (!d && g->kind != SERVER_GRANT_CGROUP) found = g;
    }
    return found;
}

const server_grant_t *server_grant_claim(server_t *s, const client_t *c, const uint8_t *token, const char *cg)
{
    uint64_t now = server_grant_now();
    server_grant_t *g = server_grant_of_token(s, token);
    if (!g) {
        server_log_client(s, c, "presented a grant token (ROTA_GRANT) rotad does not know: registers without it");
        return NULL;
    }
    if (g->kind == SERVER_GRANT_BOUND) {
        if (server_grant_covers(g->cgroup, cg)) return g;
        if (!server_grant_gone(g->cgroup)) {
            server_log_client(s, c, "presented a grant token bound to the cgroup %s from %s: refused, registers "
                              "without it", g->cgroup, cg);
            return NULL;
        }
        server_grant_unbind(s, g, now);
    }
    if (now >= g->expires_ns) {
        server_log_client(s, c, "presented an expired grant token: refused, registers without it");
        *g = s->grants[--s->ngrants];
        server_grant_save(s);
        return NULL;
    }
    if ((g->cgroup[0] && !server_grant_covers(g->cgroup, cg)) || strlen(cg) >= sizeof g->cgroup) {
        server_log_client(s, c, "presented a grant token from %s, outside its cgroup %s: refused, registers without "
                          "it", cg, g->cgroup);
        return NULL;
    }
    memcpy(g->cgroup, cg, strlen(cg) + 1);
    g->kind = SERVER_GRANT_BOUND;
    g->expires_ns = 0;
    server_log(s, 1, "grant token bound to the cgroup %s (pid %d): memory %llu bytes per GPU, class %u at best",
               g->cgroup, (int)c->pid, (unsigned long long)g->mem_limit, g->max_prio);
    server_grant_save(s);
    return g;
}

/* A free entry for a new grant: lapsed grants pruned first when the table is full (*pruned then says so), the
 * table allocated at first use. NULL with *err -ENOSPC (full) or -ENOMEM. */
static server_grant_t *server_grant_new(server_t *s, bool *pruned, int *err)
{
    if (s->ngrants == ROTA_MAX_GRANTS && server_grant_prune(s)) *pruned = true;
    if (s->ngrants == ROTA_MAX_GRANTS) {
        *err = -ENOSPC;
        return NULL;
    }
    if (!s->grants && !(s->grants = calloc(ROTA_MAX_GRANTS, sizeof *s->grants))) {
        *err = -ENOMEM;
        return NULL;
    }
    return &s->grants[s->ngrants++];
}

/* GRANT or REVOKE by token (abi.h ROTA_GRANT_TOKEN). */
static void server_on_grant_token(server_t *s, client_t *c, const rota_msg_grant_t *m)
{
    uint64_t now = server_grant_now();
    bool changed = s->grants && server_grant_lapse(s, now);
    server_grant_t *g = s->grants ? server_grant_of_token(s, m->token) : NULL;
    int status = 0;
    if (m->flags & ROTA_GRANT_REVOKE) {
        if (g) *g = s->grants[--s->ngrants];
        else status = -ENOENT;
        server_log(s, 1, "grant by token revoked%s", g ? "" : ": there was none");
        if (g || changed) server_grant_save(s);
        server_result(s, c, m->h.seq, status, -1);
        return;
    }
    int err = 0;
    if (!g && !(g = server_grant_new(s, &changed, &err))) {
        if (err == -ENOSPC) server_log_limited(s, "grant by token refused: %d grants held already", ROTA_MAX_GRANTS);
        if (changed) server_grant_save(s);
        server_result(s, c, m->h.seq, err, -1);
        return;
    }
    memset(g, 0, sizeof *g);
    memcpy(g->cgroup, m->cgroup, sizeof g->cgroup);
    memcpy(g->token, m->token, sizeof g->token);
    g->kind = SERVER_GRANT_UNBOUND;
    g->uid = m->uid;
    g->mem_limit = m->mem_limit;
    g->max_prio = m->max_prio;
    g->expires_ns = now + (uint64_t)s->o.cfg->grant_token_ms * 1000000u;
    /* the token itself is never logged: it is the container's key */
    server_log(s, 1, "grant by token for a container in %s: memory %llu bytes per GPU, class %u at best, unused for "
               "at most %u ms", g->cgroup[0] ? g->cgroup : "any cgroup", (unsigned long long)g->mem_limit, g->max_prio,
               s->o.cfg->grant_token_ms);
    server_grant_save(s);
    server_result(s, c, m->h.seq, 0, -1);
}

void server_on_grant(server_t *s, client_t *c, const void *msg)
{
    const rota_msg_grant_t *m = msg;
    if (!server_privileged(c->uid)) {
        server_doom(s, c, "sent a GRANT, which only root or rotad's user may");
        return;
    }
    if (m->flags & ROTA_GRANT_TOKEN) {
        server_on_grant_token(s, c, m);
        return;
    }
    int status = 0;
    server_grant_t *g = NULL;
    for (uint32_t i = 0; i < s->ngrants && !g; i++)
        if (s->grants[i].kind == SERVER_GRANT_CGROUP && !strcmp(s->grants[i].cgroup, m->cgroup)) g = &s->grants[i];
    if (m->flags & ROTA_GRANT_REVOKE) {
        if (g) *g = s->grants[--s->ngrants];
        else status = -ENOENT;
        server_log(s, 1, "grant for %s revoked%s", m->cgroup, g ? "" : ": there was none");
        if (g) server_grant_save(s);
        server_result(s, c, m->h.seq, status, -1);
        return;
    }
    bool pruned = false;
    int err = 0;
    if (!g && !(g = server_grant_new(s, &pruned, &err))) {
        if (err == -ENOSPC)
            server_log_limited(s, "grant for %s refused: %d grants held already", m->cgroup, ROTA_MAX_GRANTS);
        if (pruned) server_grant_save(s);
        server_result(s, c, m->h.seq, err, -1);
        return;
    }
    if (pruned) server_grant_save(s);
    memset(g, 0, sizeof *g);
    memcpy(g->cgroup, m->cgroup, sizeof g->cgroup);
    size_t n = strlen(g->cgroup);
    while (n > 1 && g->cgroup[n - 1] == '/') g->cgroup[--n] = 0;
    g->uid = m->uid;
    g->mem_limit = m->mem_limit;
    g->max_prio = m->max_prio;
    server_log(s, 1, "grant for %s (uid %d): memory %llu bytes per GPU, class %u at best", g->cgroup,
               g->uid == ROTA_GRANT_ANY_UID ? -1 : (int)g->uid, (unsigned long long)g->mem_limit, g->max_prio);
    server_grant_save(s);
    server_result(s, c, m->h.seq, 0, -1);
}
