/* server-grant.c - GRANT: the limits an admin's scheduler (the Slurm plugin, the Kubernetes device plugin) grants
 * the processes of a cgroup, taken only from root or rotad's user, applied at those processes' HELLO (abi.h). */
#include "runtime/server-internal.h"

#include "runtime/lib/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
        if (g.cgroup[0] != '/' || !memchr(g.cgroup, 0, sizeof g.cgroup) || g.max_prio >= ROTA_PRIO_COUNT ||
            g.mem_limit > ROTA_MAX_BYTES)
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
        if (g) server_grant_save(s);
        server_result(s, c, m->h.seq, status, -1);
        return;
    }
    if (!g && s->ngrants == ROTA_MAX_GRANTS && server_grant_prune(s)) server_grant_save(s);
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
    server_grant_save(s);
    server_result(s, c, m->h.seq, 0, -1);
}
