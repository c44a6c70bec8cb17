/* conn.h - a connection to rotad: registration, region and channel mapping, memory requests (thread-safe). */
#ifndef ROTA_CONN_H
#define ROTA_CONN_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct conn conn_t;

typedef struct conn_opts {
    const char *socket;        /* path; NULL or "" = sockpath_default() */
    unsigned role;             /* ROTA_ROLE_CLIENT or ROTA_ROLE_OBSERVER */
    enum rota_prio priority;   /* its class (HELLO carries it as a uint32_t) */
    unsigned weight;           /* thousandths, 1..1000000; 0 = 1000 */
    unsigned max_inflight;     /* 0..65535 */
    uint64_t mem_limit;        /* per GPU, 0 = none */
    unsigned timeout_ms;       /* for connect + registration; 0 = 5000 */
    const uint8_t *grant_token; /* ROTA_GRANT_TOKEN_LEN bytes presented at HELLO (abi.h GRANT), or NULL */
} conn_opts_t;

/* Connects and registers. Returns 0 and *out, or -errno with a sentence in err:
 *   -ENOENT / -ECONNREFUSED  no rotad listening there     -EACCES    no permission on the socket
 *   -EPERM                   a rotad of another user (neither root nor this user) listens there
 * Without opts->socket it tries the node-wide socket, then (not root) the user's own (sockpath_candidates).
 *   -EPROTO                  rotad speaks another ABI      -EUSERS    rotad's client table is full
 *   -EBADMSG                 rotad sent something invalid  -ETIMEDOUT no answer in time */
int conn_open(const conn_opts_t *opts, conn_t **out, char *err, size_t errlen);

/* Whether a rotad running as uid may be believed: root's or this user's own (conn_open checks SO_PEERCRED and
 * refuses any other with -EPERM). */
bool conn_peer_trusted(uid_t uid);

/* Reserves bytes on the GPU with this UUID (total_mem: what the driver reports for it), queueing up to wait_ms.
 * Returns 0, -ENOMEM (does not fit: no wait or timed out), -EDQUOT (over this process's or its group's limit),
 * or a connection failure: -EPIPE (rotad gone; the connection is dead from now on), -ESHUTDOWN (rotad is
 * draining), -ETIMEDOUT (rotad did not answer within wait_ms + 5 s: treated as gone). *dev gets rotad's index
 * of the GPU (or -1), *limit the effective limit (0 = none); either may be NULL. */
int conn_reserve(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes,
                 unsigned wait_ms, int *dev, uint64_t *limit);
/* One-way: give bytes back / declare bytes already allocated (after a reconnect). 0 or -EPIPE. */
int conn_release(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes);
int conn_adopt(conn_t *c, const uint8_t uuid[ROTA_UUID_LEN], uint64_t total_mem, uint64_t bytes);

/* A placement request (PLACE): which GPU a job should run on. */
typedef struct conn_place {
    enum rota_prio prio;              /* the job's class */
    const rota_place_cand_t *cand;    /* the GPUs the job could see, ncand of them (1..ROTA_MAX_DEVICES); */
    unsigned ncand;                   /* ncand 0: among the GPUs rotad probed itself (ROTA_PLACE_KNOWN) */
    uint64_t mem;                     /* the job's expected memory (clamped to ROTA_MAX_BYTES); 0 = unknown */
    uint32_t wait_ms;                 /* how long rotad may keep a job that fits nowhere waiting for room */
    uint32_t answer_ms;               /* how long rotad may take to answer beyond wait_ms */
    uint32_t note_ms;                 /* with note: called once when no answer came after note_ms (0: never) */
    void (*note)(void *arg);
    void *arg;
} conn_place_t;

/* One PLACE round trip: 0 with *dev (an index into cand, or rotad's region index with ncand 0) and *waited_ms
 * (how long the answer took; may be NULL), or -errno: -ETIMEDOUT (no answer within wait_ms + answer_ms),
 * -EBADMSG (closed, or not a valid answer), a send error, or rotad's own refusal (-ENODEV: no GPU known). *dev is
 * rotad's word: the caller bounds it. It reads the answer straight off the socket, so it must be the connection's
 * only request in flight (a process's init, before any memory hook; or a connection of its own); an answer that
 * comes after a timeout carries a sequence number nobody waits for and is dropped. */
int conn_place(conn_t *c, const conn_place_t *p, int *dev, uint64_t *waited_ms);

/* A copy of rotad's client table as this process's user may see it (LIST, abi.h): every client for root and for
 * rotad's own user, else only this user's processes (table->hidden_clients counts the others). Mapped read-only
 * until conn_table_free. Like conn_place, it reads the answer straight off the socket: the connection's only
 * request in flight (an observer's). Returns 0, or -errno: -EBADMSG (not a valid answer or copy), -EPROTO
 * (another ABI), -ETIMEDOUT, a send error, or rotad's refusal (-ENOMEM; -EAGAIN only when it kept refusing
 * for 20 tries, ROTA_LIST_MIN_MS apart). */
int conn_table(conn_t *c, const rota_table_t **table);
void conn_table_free(const rota_table_t *table);

/* The fast path: takes bytes from this client's memory credit on rotad's GPU index dev (from conn_reserve's
 * *dev) without a round trip. false when the credit is short (then ask with conn_reserve). Lock-free. */
bool conn_credit_take(conn_t *c, int dev, uint64_t bytes);
/* The free's fast path: puts bytes this client freed on rotad's GPU index dev back into its credit (they stay
 * charged to it), while the credit stays within 1.5 x region.credit_keep and nobody waits for memory on that
 * GPU. Returns what the caller must give back with conn_release instead: 0 (all kept), bytes (none kept: no
 * credit there, waiters, or keep 0), or, once the credit passed 1.5 x keep, what exceeds half of keep (one
 * RELEASE for many frees), or the whole credit when a waiter appeared meanwhile. Lock-free, no syscall. */
uint64_t conn_credit_put(conn_t *c, int dev, uint64_t bytes);

/* false once rotad's end closed (EOF, error, timeout). */
bool conn_alive(conn_t *c);
const rota_region_t *conn_region(const conn_t *c);
rota_channel_t *conn_channel(const conn_t *c); /* NULL for observers */
rota_board_t *conn_board(const conn_t *c);     /* NULL for observers; read-only unless conn_high */
/* Whether rotad registered this client as high priority (it may refuse high to a client its policy does not
 * allow, abi.h): only then is the board mapped writable. */
bool conn_high(const conn_t *c);
uint32_t conn_slot(const conn_t *c);
uint32_t conn_gen(const conn_t *c);
int conn_fd(const conn_t *c);
/* The region's entry for this UUID, or -1. */
int conn_region_device(const conn_t *c, const uint8_t uuid[ROTA_UUID_LEN]);

/* Closes the socket (rotad reclaims everything of this client) and frees c. No thread may be inside c. */
void conn_close(conn_t *c);
/* In a forked child: closes the inherited descriptor and mappings without touching c's locks (which another,
 * vanished thread may hold) and without freeing c. The parent's connection is unaffected. */
void conn_abandon(conn_t *c);

#endif
