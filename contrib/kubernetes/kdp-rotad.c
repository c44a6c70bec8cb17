/* kdp-rotad.c - rota-device-plugin's link to rotad: the node's GPUs, whether rotad serves, placement (plain C). */
#include "contrib/kubernetes/kdp-rotad.h"

#include "runtime/abi.h"
#include "runtime/lib/conn.h"
#include "runtime/lib/grant.h"
#include "runtime/lib/prio.h"
#include "runtime/lib/proto.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

_Static_assert(KDP_MAX_GPUS == ROTA_MAX_DEVICES, "one GPU table size");
_Static_assert(KDP_UUID_STR == PROTO_UUID_STR, "one UUID string size");
_Static_assert(sizeof(((kdp_gpu_t *)0)->raw) == ROTA_UUID_LEN, "one UUID size");
_Static_assert(KDP_PRIO_COUNT == ROTA_PRIO_COUNT, "one set of classes");
_Static_assert(KDP_TOKEN_HEX == GRANT_TOKEN_HEX, "one token size");

#define KDP_CONNECT_MS 3000u
#define KDP_PLACE_ANSWER_MS 3000u /* GetPreferredAllocation is on the kubelet's admission path: answer soon */

struct kdp_rotad {
    conn_t *c;
};

int kdp_rotad_open(const char *socket, kdp_rotad_t **out, char *err, size_t errlen)
{
    kdp_rotad_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    conn_opts_t o = {.socket = socket, .role = ROTA_ROLE_OBSERVER, .priority = ROTA_PRIO_NORMAL, .weight = 1000,
                     .timeout_ms = KDP_CONNECT_MS};
    int rc = conn_open(&o, &r->c, err, errlen);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int kdp_rotad_gpus(kdp_rotad_t *r, kdp_gpu_t out[KDP_MAX_GPUS])
{
    const rota_region_t *reg = conn_region(r->c);
    uint32_t nd = atomic_load_explicit(&reg->ndevices, memory_order_acquire);
    if (nd > ROTA_MAX_DEVICES) nd = ROTA_MAX_DEVICES; /* rotad's word, bounded */
    int n = 0;
    for (uint32_t i = 0; i < nd; i++) {
        const rota_dev_t *d = &reg->devices[i];
        /* Only the GPUs rotad found itself are the node's: a client's report of another UUID is not a device */
        if (!(atomic_load_explicit(&d->flags, memory_order_relaxed) & ROTA_DEV_PROBED)) continue;
        uint64_t cap = atomic_load_explicit(&d->capacity, memory_order_relaxed);
        if (cap == 0 || cap > ROTA_MAX_BYTES) continue;
        proto_uuid_str(d->uuid, out[n].uuid);
        memcpy(out[n].raw, d->uuid, ROTA_UUID_LEN);
        out[n].total_mem = cap;
        n++;
    }
    return n;
}

bool kdp_rotad_wait_alive(kdp_rotad_t *r, int timeout_ms)
{
    /* An observer is sent nothing unasked: the socket turns readable or hung up when rotad's end closes. A
     * packet that comes anyway (a later rotad's notice) is read and dropped: only EOF or an error is death. */
    struct pollfd p = {.fd = conn_fd(r->c), .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0) return errno == EINTR && conn_alive(r->c);
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return false;
    if (p.revents & POLLIN) {
        char buf[ROTA_MSG_MAX];
        if (proto_recv(conn_fd(r->c), buf, sizeof buf, NULL, NULL, MSG_DONTWAIT) <= 0) return false;
    }
    return conn_alive(r->c);
}

void kdp_rotad_close(kdp_rotad_t *r)
{
    if (!r) return;
    conn_close(r->c);
    free(r);
}

int kdp_rotad_place(const char *socket, unsigned prio, const kdp_gpu_t *cand, unsigned ncand, uint64_t mem,
                    int *pick, char *err, size_t errlen)
{
    if (ncand == 0 || ncand > ROTA_MAX_DEVICES || prio >= ROTA_PRIO_COUNT) {
        snprintf(err, errlen, "bad placement request");
        return -EINVAL;
    }
    rota_place_cand_t pc[ROTA_MAX_DEVICES];
    memset(pc, 0, sizeof pc);
    for (unsigned i = 0; i < ncand; i++) {
        memcpy(pc[i].uuid, cand[i].raw, ROTA_UUID_LEN);
        pc[i].total_mem = cand[i].total_mem;
    }
    kdp_rotad_t *r;
    int rc = kdp_rotad_open(socket, &r, err, errlen);
    if (rc) return rc;
    conn_place_t p = {.prio = prio, .cand = pc, .ncand = ncand, .mem = mem > ROTA_MAX_BYTES ? ROTA_MAX_BYTES : mem,
                      .answer_ms = KDP_PLACE_ANSWER_MS};
    int dev = -1;
    rc = conn_place(r->c, &p, &dev, NULL);
    if (rc == -ETIMEDOUT) snprintf(err, errlen, "rotad did not answer the placement request");
    else if (rc == -EBADMSG) snprintf(err, errlen, "rotad sent no valid placement");
    else if (rc) snprintf(err, errlen, "rotad could not place the container (%s)", strerror(-rc));
    else if (dev < 0 || (unsigned)dev >= ncand) {
        snprintf(err, errlen, "rotad answered a GPU that was no candidate");
        rc = -EBADMSG;
    }
    kdp_rotad_close(r);
    if (rc == 0) *pick = dev;
    return rc;
}

int kdp_prio_parse(const char *s, unsigned *prio) { return prio_parse(s, prio); }
const char *kdp_prio_name(unsigned prio) { return prio_name(prio); }

int kdp_rotad_grant(const char *socket, unsigned prio, uint64_t limit, char token_hex[KDP_TOKEN_HEX], char *err,
                    size_t errlen)
{
    uint8_t token[GRANT_TOKEN_LEN];
    int rc = grant_token_new(token, token_hex);
    if (rc) {
        snprintf(err, errlen, "unable to draw a grant token: %s", strerror(-rc));
        return rc;
    }
    /* Any cgroup: the container's is not known yet, and the kubelet's cgroup driver decides its path. */
    grant_t g = {.cgroup = NULL, .uid = GRANT_ANY_UID, .mem_limit = limit, .max_prio = prio, .token = token};
    return grant_set(socket, &g, err, errlen);
}
