/* proto.c - rotad protocol helpers: framing and validation of packets, SCM_RIGHTS, ABI value names. */
#include "runtime/lib/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void proto_hdr_init(rota_msg_hdr_t *h, unsigned type, size_t size, uint32_t seq)
{
    h->magic = ROTA_MSG_MAGIC;
    h->abi = ROTA_ABI_VERSION;
    h->type = (uint16_t)type;
    h->size = (uint32_t)size;
    h->seq = seq;
}

static bool proto_has_nul(const char *s, size_t cap)
{
    return memchr(s, 0, cap) != NULL;
}

/* Each message type's own checks: NULL when the message is valid, else why not. */
typedef const char *proto_check_fn(const void *buf, unsigned type);

/* Whether the n bytes at p are all zero. */
static bool proto_zero(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

static const char *proto_check_hello(const void *buf, unsigned type)
{
    const rota_msg_hello_t *m = buf;
    if (m->role != ROTA_ROLE_CLIENT && m->role != ROTA_ROLE_OBSERVER) return "hello: unknown role";
    if (m->priority >= ROTA_PRIO_COUNT) return "hello: priority out of range";
    if (m->weight < 1 || m->weight > 1000000) return "hello: weight out of range 1..1000000 (thousandths)";
    if (m->max_inflight > 65535) return "hello: max_inflight out of range 0..65535";
    if (m->mem_limit > ROTA_MAX_BYTES) return "hello: mem_limit out of range";
    if (m->flags || m->pad0) return "hello: reserved fields are not zero";
    if (!proto_has_nul(m->comm, sizeof m->comm)) return "hello: comm is not NUL-terminated";
    return NULL;
}

static const char *proto_check_welcome(const void *buf, unsigned type)
{
    const rota_msg_welcome_t *m = buf;
    if (m->status > 0 || !proto_has_nul(m->reason, sizeof m->reason)) return "welcome: bad status or reason";
    if (m->status == 0 && (m->slot >= ROTA_MAX_CLIENTS || m->region_size != ROTA_REGION_MAP_SIZE ||
                           (m->channel_size && m->channel_size != ROTA_CHANNEL_MAP_SIZE)))
        return "welcome: slot or sizes out of range";
    return NULL;
}

/* RESERVE, RELEASE and ADOPT: only a RESERVE may wait. */
static const char *proto_check_mem(const void *buf, unsigned type)
{
    const rota_msg_mem_t *m = buf;
    if (m->bytes < 1 || m->bytes > ROTA_MAX_BYTES) return "memory message: bytes out of range 1..2^56";
    if (m->total_mem < 1 || m->total_mem > ROTA_MAX_BYTES) return "memory message: device memory out of range 1..2^56";
    if (m->wait_ms > ROTA_MAX_WAIT_MS || (type != ROTA_MSG_RESERVE && m->wait_ms))
        return "memory message: wait out of range";
    if (m->flags) return "memory message: reserved flags are not zero";
    return NULL;
}

static const char *proto_check_place(const void *buf, unsigned type)
{
    const rota_msg_place_t *m = buf;
    bool known = m->flags & ROTA_PLACE_KNOWN; /* ncand 0: rotad's own GPUs (abi.h) */
    if ((known ? m->ncand != 0 : m->ncand < 1 || m->ncand > ROTA_MAX_DEVICES) ||
        (m->flags & ~(ROTA_PLACE_KNOWN | ROTA_PLACE_HIGH | ROTA_PLACE_LOW)) ||
        (m->flags & (ROTA_PLACE_HIGH | ROTA_PLACE_LOW)) == (ROTA_PLACE_HIGH | ROTA_PLACE_LOW) || /* one class */
        m->mem > ROTA_MAX_BYTES || m->wait_ms > ROTA_MAX_WAIT_MS || m->reserved)
        return "place: candidate count, flags, memory or wait out of range";
    static const rota_place_cand_t zero;
    for (unsigned i = 0; i < ROTA_MAX_DEVICES; i++) {
        const rota_place_cand_t *c = &m->cand[i];
        if (i < m->ncand ? (c->total_mem < 1 || c->total_mem > ROTA_MAX_BYTES) : memcmp(c, &zero, sizeof zero) != 0)
            return "place: candidate memory out of range, or unused candidates not zero";
    }
    return NULL;
}

static const char *proto_check_list(const void *buf, unsigned type)
{
    const rota_msg_list_t *m = buf;
    return m->flags || m->pad0 ? "list: reserved fields not zero" : NULL;
}

static const char *proto_check_result(const void *buf, unsigned type)
{
    const rota_msg_result_t *m = buf;
    return m->status > 0 || m->dev < -1 || m->dev >= ROTA_MAX_DEVICES ? "result: status or device out of range" : NULL;
}

static const char *proto_check_grant(const void *buf, unsigned type)
{
    const rota_msg_grant_t *m = buf;
    bool tok = m->flags & ROTA_GRANT_TOKEN;
    if ((m->flags & ~(ROTA_GRANT_REVOKE | ROTA_GRANT_TOKEN)) || m->max_prio >= ROTA_PRIO_COUNT ||
        m->mem_limit > ROTA_MAX_BYTES || m->pad0 || !proto_has_nul(m->cgroup, sizeof m->cgroup) ||
        (m->cgroup[0] != '/' && !(tok && !m->cgroup[0])))
        return "grant: flags, class, memory or cgroup path out of range";
    if (tok == proto_zero(m->token, sizeof m->token)) return "grant: a token without ROTA_GRANT_TOKEN, or none with it";
    return NULL;
}

/* The message types: each one's size and checks, by type (0: no such type). */
static const struct proto_type {
    size_t size;
    proto_check_fn *check;
} proto_types[ROTA_MSG_TYPE_MAX + 1] = {
    [ROTA_MSG_HELLO] = {sizeof(rota_msg_hello_t), proto_check_hello},
    [ROTA_MSG_WELCOME] = {sizeof(rota_msg_welcome_t), proto_check_welcome},
    [ROTA_MSG_RESERVE] = {sizeof(rota_msg_mem_t), proto_check_mem},
    [ROTA_MSG_RESULT] = {sizeof(rota_msg_result_t), proto_check_result},
    [ROTA_MSG_RELEASE] = {sizeof(rota_msg_mem_t), proto_check_mem},
    [ROTA_MSG_ADOPT] = {sizeof(rota_msg_mem_t), proto_check_mem},
    [ROTA_MSG_PLACE] = {sizeof(rota_msg_place_t), proto_check_place},
    [ROTA_MSG_LIST] = {sizeof(rota_msg_list_t), proto_check_list},
    [ROTA_MSG_GRANT] = {sizeof(rota_msg_grant_t), proto_check_grant},
};

int proto_check(const void *buf, size_t n, uint32_t *abi, const char **why)
{
    rota_msg_hdr_t h;
    const char *dummy;
    if (!why) why = &dummy;
    if (n < sizeof h) {
        *why = "truncated message (shorter than the header)";
        return -EBADMSG;
    }
    memcpy(&h, buf, sizeof h);
    if (h.magic != ROTA_MSG_MAGIC) {
        *why = "not a rota message (bad magic)";
        return -EBADMSG;
    }
    if (abi) *abi = h.abi;
    if (h.abi != ROTA_ABI_VERSION) {
        *why = "peer speaks another rota ABI version";
        return -EPROTO;
    }
    const struct proto_type *t = h.type <= ROTA_MSG_TYPE_MAX ? &proto_types[h.type] : NULL;
    if (!t || !t->size) {
        *why = "unknown message type";
        return -EBADMSG;
    }
    if (h.size != n || n != t->size) {
        *why = n < t->size ? "truncated message" : "message of the wrong size for its type";
        return -EBADMSG;
    }
    const char *bad = t->check(buf, h.type);
    if (bad) {
        *why = bad;
        return -EBADMSG;
    }
    *why = "ok";
    return h.type;
}

int proto_send(int fd, const void *msg, size_t n, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = n};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 4) return -EINVAL;
    if (nfds > 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w == (ssize_t)n) return 0;
        if (w >= 0) return -EMSGSIZE;
        if (errno == EINTR) continue;
        return -errno;
    }
}

ssize_t proto_recv(int fd, void *buf, size_t cap, int *fds, int *nfds, int flags)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 8)];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    int want = nfds ? *nfds : 0, got = 0;
    if (nfds) *nfds = 0;
    ssize_t r;
    do {
        r = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (fds && got < want) fds[got++] = f;
            else close(f);
        }
    }
    if (nfds) *nfds = got;
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < got; i++) close(fds[i]);
        if (nfds) *nfds = 0;
        return -EMSGSIZE;
    }
    return r;
}

void proto_uuid_str(const uint8_t u[ROTA_UUID_LEN], char out[PROTO_UUID_STR])
{
    snprintf(out, PROTO_UUID_STR,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* Every shared object starts with the same header (abi.h): magic, ABI version, size. */
typedef struct proto_obj {
    uint32_t magic;
    uint64_t size, map_size;
    const char *small, *bad_magic, *other_abi, *bad_size; /* the reasons, one per check */
} proto_obj_t;

static int proto_obj_check(const volatile void *map, size_t mapped, const proto_obj_t *o, const char **why)
{
    const volatile uint32_t *w = map;
    if (mapped < o->map_size) {
        *why = o->small;
        return -EBADMSG;
    }
    if (w[0] != o->magic) {
        *why = o->bad_magic;
        return -EBADMSG;
    }
    if (w[1] != ROTA_ABI_VERSION) {
        *why = o->other_abi;
        return -EPROTO;
    }
    if (*(const volatile uint64_t *)(w + 2) != o->size) {
        *why = o->bad_size;
        return -EBADMSG;
    }
    *why = "ok";
    return 0;
}

_Static_assert(offsetof(rota_region_t, abi) == 4 && offsetof(rota_region_t, size) == 8 &&
                   offsetof(rota_channel_t, abi) == 4 && offsetof(rota_channel_t, size) == 8 &&
                   offsetof(rota_board_t, abi) == 4 && offsetof(rota_board_t, size) == 8 &&
                   offsetof(rota_table_t, abi) == 4 && offsetof(rota_table_t, size) == 8,
               "shared objects start with magic, abi, size");

int proto_region_check(const volatile void *map, size_t mapped, const char **why)
{
    static const proto_obj_t o = {ROTA_REGION_MAGIC, sizeof(rota_region_t), ROTA_REGION_MAP_SIZE,
                                  "region is smaller than this ABI's region",
                                  "region has a bad magic (not a rota region, or corrupted)",
                                  "region is of another rota ABI version",
                                  "region has the wrong size or table sizes (corrupted)"};
    int rc = proto_obj_check(map, mapped, &o, why);
    const volatile rota_region_t *r = map;
    if (!rc && (r->max_devices != ROTA_MAX_DEVICES || r->max_clients != ROTA_MAX_CLIENTS ||
                r->max_groups != ROTA_MAX_GROUPS)) {
        *why = o.bad_size;
        rc = -EBADMSG;
    }
    return rc;
}

int proto_channel_check(const volatile void *map, size_t mapped, const char **why)
{
    static const proto_obj_t o = {ROTA_CHANNEL_MAGIC, sizeof(rota_channel_t), ROTA_CHANNEL_MAP_SIZE,
                                  "channel is smaller than this ABI's channel", "channel has a bad magic",
                                  "channel is of another rota ABI version", "channel has the wrong size"};
    return proto_obj_check(map, mapped, &o, why);
}

int proto_board_check(const volatile void *map, size_t mapped, const char **why)
{
    static const proto_obj_t o = {ROTA_BOARD_MAGIC, sizeof(rota_board_t), ROTA_BOARD_MAP_SIZE,
                                  "board is smaller than this ABI's board", "board has a bad magic",
                                  "board is of another rota ABI version", "board has the wrong size"};
    return proto_obj_check(map, mapped, &o, why);
}

int proto_table_check(const volatile void *map, size_t mapped, const char **why)
{
    static const proto_obj_t o = {ROTA_TABLE_MAGIC, sizeof(rota_table_t), ROTA_TABLE_MAP_SIZE,
                                  "client table is smaller than this ABI's table", "client table has a bad magic",
                                  "client table is of another rota ABI version", "client table has the wrong size"};
    return proto_obj_check(map, mapped, &o, why);
}

void proto_sanitize(char *out, const char *in, size_t cap)
{
    size_t i = 0;
    for (; i + 1 < cap && in[i]; i++) out[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? in[i] : '?';
    out[i] = 0;
}
