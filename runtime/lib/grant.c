/* grant.c - sends GRANT to rotad (runtime/lib/grant.h) over a connection of its own. */
#include "runtime/lib/grant.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/errmsg.h"
#include "runtime/lib/proto.h"
#include "runtime/lib/sockpath.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define GRANT_TIMEOUT_MS 5000

static int grant_send(const char *socket_path, const rota_msg_grant_t *m, char *err, size_t errlen)
{
    char path[SOCKPATH_MAX];
    int rc = socket_path && socket_path[0] ? sockpath_resolve(socket_path, path, sizeof path)
                                           : sockpath_default(path, sizeof path);
    if (rc) return errmsg(err, errlen, rc, "rotad's socket path: %s", strerror(-rc));
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return errmsg(err, errlen, -errno, "unable to create a socket: %s", strerror(errno));
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        rc = errmsg(err, errlen, -errno, "unable to reach rotad at %s: %s", path, strerror(errno));
        goto out_close;
    }
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || !conn_peer_trusted(cr.uid)) {
        rc = errmsg(err, errlen, -EPERM, "refusing the rotad at %s: it runs as uid %u, neither root nor this user",
                    path, (unsigned)cr.uid);
        goto out_close;
    }
    rc = proto_send(fd, m, sizeof *m, NULL, 0);
    if (rc) {
        errmsg(err, errlen, rc, "unable to send to rotad at %s: %s", path, strerror(-rc));
        goto out_close;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int pr;
    do {
        pr = poll(&p, 1, GRANT_TIMEOUT_MS);
    } while (pr < 0 && errno == EINTR);
    if (pr != 1) {
        rc = errmsg(err, errlen, -ETIMEDOUT, "rotad at %s did not answer within %d ms", path, GRANT_TIMEOUT_MS);
        goto out_close;
    }
    char buf[ROTA_MSG_MAX];
    ssize_t n = proto_recv(fd, buf, sizeof buf, NULL, NULL, 0);
    const char *why;
    if (n <= 0 || proto_check(buf, (size_t)n, NULL, &why) != ROTA_MSG_RESULT) {
        rc = errmsg(err, errlen, -ECONNRESET,
                    "rotad at %s refused the grant (only root or rotad's user may send one, to a rotad that "
                    "knows GRANT)", path);
        goto out_close;
    }
    const rota_msg_result_t *res = (const rota_msg_result_t *)buf;
    rc = res->status;
    if (rc == -ENOSPC) errmsg(err, errlen, rc, "rotad at %s holds %d grants already", path, ROTA_MAX_GRANTS);
    else if (rc == -ENOENT) errmsg(err, errlen, rc, "rotad at %s had no grant for %s", path,
                                   m->flags & ROTA_GRANT_TOKEN ? "that token" : m->cgroup);
    else if (rc) errmsg(err, errlen, rc, "rotad at %s refused the grant: %s", path, strerror(-rc));
out_close:
    close(fd);
    return rc;
}

_Static_assert(GRANT_TOKEN_LEN == ROTA_GRANT_TOKEN_LEN, "token length");

int grant_token_new(uint8_t token[GRANT_TOKEN_LEN], char hex[GRANT_TOKEN_HEX])
{
    size_t got = 0;
    while (got < GRANT_TOKEN_LEN) {
        ssize_t n = getrandom(token + got, GRANT_TOKEN_LEN - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        got += (size_t)n;
    }
    uint8_t any = 0;
    for (unsigned i = 0; i < GRANT_TOKEN_LEN; i++) {
        snprintf(hex + 2 * i, 3, "%02x", token[i]);
        any |= token[i];
    }
    return any ? 0 : -EAGAIN; /* all zero means none on the wire: 2^-128, but never send it */
}

static int grant_init(rota_msg_grant_t *m, const char *cgroup, const uint8_t *token, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    proto_hdr_init(&m->h, ROTA_MSG_GRANT, sizeof *m, 1);
    if (token) {
        uint8_t any = 0;
        for (unsigned i = 0; i < GRANT_TOKEN_LEN; i++) any |= token[i];
        if (!any) return errmsg(err, errlen, -EINVAL, "grant: a token of all zero bits");
        memcpy(m->token, token, sizeof m->token);
        m->flags |= ROTA_GRANT_TOKEN;
        if (!cgroup || !cgroup[0]) return 0;
    }
    if (!cgroup || cgroup[0] != '/' || strlen(cgroup) >= sizeof m->cgroup)
        return errmsg(err, errlen, -EINVAL, "grant: the cgroup must be an absolute path of at most %zu characters",
                      sizeof m->cgroup - 1);
    memcpy(m->cgroup, cgroup, strlen(cgroup) + 1);
    return 0;
}

int grant_set(const char *socket_path, const grant_t *g, char *err, size_t errlen)
{
    rota_msg_grant_t m;
    int rc = grant_init(&m, g->cgroup, g->token, err, errlen);
    if (rc) return rc;
    if (g->max_prio >= ROTA_PRIO_COUNT || g->mem_limit > ROTA_MAX_BYTES)
        return errmsg(err, errlen, -EINVAL, "grant: class %u or memory %llu out of range", g->max_prio,
                      (unsigned long long)g->mem_limit);
    m.max_prio = g->max_prio;
    m.mem_limit = g->mem_limit;
    m.uid = g->uid;
    return grant_send(socket_path, &m, err, errlen);
}

int grant_revoke(const char *socket_path, const char *cgroup, char *err, size_t errlen)
{
    rota_msg_grant_t m;
    int rc = grant_init(&m, cgroup, NULL, err, errlen);
    if (rc) return rc;
    m.flags = ROTA_GRANT_REVOKE;
    m.uid = ROTA_GRANT_ANY_UID;
    return grant_send(socket_path, &m, err, errlen);
}

int grant_revoke_token(const char *socket_path, const uint8_t token[GRANT_TOKEN_LEN], char *err, size_t errlen)
{
    rota_msg_grant_t m;
    int rc = grant_init(&m, NULL, token, err, errlen);
    if (rc) return rc;
    m.flags |= ROTA_GRANT_REVOKE;
    m.uid = ROTA_GRANT_ANY_UID;
    return grant_send(socket_path, &m, err, errlen);
}
