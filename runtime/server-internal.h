/* server-internal.h - what rotad's service files share: the connection, the server, and the core helpers
 * (runtime/server-core.c) that every server-*.c uses and that use none of them. */
#ifndef ROTA_SERVER_INTERNAL_H
#define ROTA_SERVER_INTERNAL_H

#include "runtime/abi.h"
#include "runtime/lib/errmsg.h"
#include "runtime/place.h"
#include "runtime/region.h"
#include "runtime/server.h"
#include "runtime/waitq.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

#define ROTA_STR1(x) #x
#define ROTA_STR(x) ROTA_STR1(x)

typedef struct client {
    int fd;
    int slot;              /* -1 until a client registered (always -1 for observers) */
    uint32_t gen;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    uint64_t accepted_ns;  /* CLOCK_MONOTONIC of accept: HELLO is due within hello-timeout-ms */
    bool capped;           /* counted in its user's connections (not root, not rotad's user) */
    bool slot_counted;     /* counted in its user's clients */
    unsigned role;         /* 0 until HELLO */
    enum rota_prio prio;   /* its class, as admitted (server-hello.c) */
    rota_channel_t *ch;
    uint32_t devmask;      /* GPUs this client asked for */
    bool doomed;           /* to be dropped at the end of this batch of events */
    bool channel_warned;
    bool reserved;         /* sent a RESERVE */
    uint64_t last_ns[ROTA_MSG_TYPE_MAX + 1]; /* CLOCK_MONOTONIC of its last message of each rate-limited type
                                              * (server-dispatch.c: LIST, ROTA_LIST_MIN_MS apart) */
    struct client *prev, *next;
} client_t;

/* A limit an admin's scheduler granted the processes of a cgroup (server-grant.c, abi.h GRANT): keyed by the cgroup
 * (Slurm), or by a token that binds it to the cgroup of the first client presenting it (Kubernetes). */
enum server_grant_kind {
    SERVER_GRANT_CGROUP = 0, /* cgroup names the processes it covers */
    SERVER_GRANT_UNBOUND,    /* a token not yet presented: cgroup is "" or where the binding cgroup must lie */
    SERVER_GRANT_BOUND,      /* a token bound to cgroup at a HELLO: covers it like SERVER_GRANT_CGROUP */
};
typedef struct server_grant {
    char cgroup[ROTA_GRANT_CGROUP_LEN];
    uint32_t uid;          /* ROTA_GRANT_ANY_UID: any */
    unsigned max_prio;
    uint64_t mem_limit;    /* 0: none */
    uint8_t token[ROTA_GRANT_TOKEN_LEN];
    uint32_t kind;         /* server_grant_kind */
    uint32_t pad0;
    uint64_t expires_ns;   /* SERVER_GRANT_UNBOUND: CLOCK_BOOTTIME (a restarted rotad keeps counting) */
} server_grant_t;

struct server {
    server_opts_t o;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int lock_fd, listen_fd, epoll_fd, signal_fd;
    region_t rg;
    waitq_t q;
    sched_t *sched;    /* launch scheduling thread (runtime/sched.c) */
    place_t pl;            /* pending GPU placements (issue 5) */
    client_t *clients;
    client_t *by_slot[ROTA_MAX_CLIENTS];
    unsigned slot_hint;         /* no free slot below it (server_on_hello's search starts there) */
    uint32_t next_gen;
    bool stopping;
    int listen_tag, signal_tag; /* their addresses are the epoll tags */
    uint32_t uid_n, uid_cap;    /* per-user connections and clients (server_user), for the caps in config.h */
    struct server_user {
        uint32_t uid;
        uint32_t conns, slots;
        uint64_t list_ns, list_milli; /* LIST budget (server-observe.c): last refill, thousandths of copies */
    } *users;
    unsigned nfresh;            /* connections that have not sent HELLO yet */
    bool stale;                 /* the socket was left by a rotad that did not stop cleanly: its clients return */
    uint64_t grace_end_ns;      /* until then, a RESERVE that fits waits (its clients re-register first) */
    struct server_adopt {       /* ADOPTs of the grace, charged when it ends (server_adopt_settle) */
        unsigned slot, gen, dev;
        uint64_t bytes;
    } *adopts;
    uint32_t nadopts, adopt_cap;
    server_grant_t *grants;     /* ROTA_MAX_GRANTS entries once the first GRANT came */
    uint32_t ngrants;
    int reserve_fd;             /* spare descriptor: given up to accept-and-close when out of descriptors */
    config_t defcfg;            /* when the caller passed none */
    uint64_t log_window_ns;     /* server_log_limited: the current one-second window, its lines, those left out */
    unsigned log_lines;
    unsigned long log_dropped;
};


/* ---- server-core.c: logging, the clock, sending, per-user accounting ---- */
void server_log(const server_t *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A warning some client caused, within the rate limit (SERVER_LOG_BURST a second). */
void server_log_limited(server_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Once the second of rate-limited warnings is over, says how many were left out (then, not at the next warning);
 * returns when it must be called again (UINT64_MAX: nothing left out). */
uint64_t server_log_flush(server_t *s, uint64_t now);
/* A rate-limited warning that names the client (its slot once it has one). */
void server_log_client(server_t *s, const client_t *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
uint64_t server_now_ns(void);
/* Marks c to be dropped at the end of this batch of events; why (or NULL: it left) is logged once. */
void server_doom(server_t *s, client_t *c, const char *why);
/* Sends one message (and descriptors); a client that cannot take it is doomed. */
void server_send(server_t *s, client_t *c, const void *m, size_t n, const int *fds, int nfds);
/* A RESULT for seq: status, the device, credit added, and the client's limit there. */
void server_result_credit(server_t *s, client_t *c, uint32_t seq, int status, int dev, uint64_t credit);
void server_result(server_t *s, client_t *c, uint32_t seq, int status, int dev);
/* The accounting entry of uid (created on first use), or NULL when out of memory. */
struct server_user *server_user(server_t *s, uint32_t uid);
/* Root and rotad's own user are not capped: they own the node (or this rotad). */
bool server_privileged(uid_t uid);

/* ---- server-observe.c: what observers read ---- */
#define SERVER_LIST_USER_HZ 100    /* table copies a second one user gets, all its connections together */
#define SERVER_LIST_USER_BURST 20
/* Copies the validated statistics of every client's channel into the region (for rota status/top). */
void server_refresh(server_t *s);
void server_on_list(server_t *s, client_t *c, const void *msg);

/* ---- server-hello.c: admission ---- */
/* The WELCOME answering a HELLO (or refusing a connection): status, reason, and the descriptors it passes. */
void server_welcome(server_t *s, client_t *c, int status, const char *reason, const int *fds, int nfds);
void server_on_hello(server_t *s, client_t *c, const void *msg);

/* ---- server-mem.c: memory requests and credit ---- */
/* waitq_answer_fn: a queued RESERVE is answered (granted, refused, or its wait ran out). */
void server_answer(void *ctx, const waiter_t *w, int status);
/* Serves dev's queue, except during the restart grace (server_grace serves it when that ends). */
void server_serve(server_t *s, unsigned dev);
void server_on_reserve(server_t *s, client_t *c, const void *msg);
void server_on_release(server_t *s, client_t *c, const void *msg);
void server_on_adopt(server_t *s, client_t *c, const void *msg);
/* The restart grace ended: the ADOPTs it collected are charged, smallest first (docs/design/memory.md). */
void server_adopt_settle(server_t *s);

/* ---- server-place.c: GPU placement ---- */
/* place_answer_fn: a waiting PLACE is answered (room appeared, its wait ran out, or rotad stops). */
void server_place_answer(void *ctx, const place_waiter_t *w, int i);
void server_on_place(server_t *s, client_t *c, const void *msg);

/* ---- server-grant.c: limits granted by an admin's scheduler ---- */
void server_on_grant(server_t *s, client_t *c, const void *msg);
/* Loads the grants the rotad before saved beside the socket (PATH.grants, rotad's own, mode 0600). */
void server_grant_load(server_t *s);
/* The grant covering cgroup for uid (the longest path), or NULL. */
const server_grant_t *server_grant_find(const server_t *s, const char *cgroup, uint32_t uid);
/* The grant of the token client c presented at its HELLO, from cgroup cg: bound to cg when it was not yet (or when
 * its cgroup is gone and cg lies beside it); NULL, logged, when the token is unknown, expired or bound to another
 * cgroup (the client then registers as one without a grant). */
const server_grant_t *server_grant_claim(server_t *s, const client_t *c, const uint8_t *token, const char *cg);

/* ---- server-dispatch.c: the message table ---- */
/* One message a client sent (n bytes): checked, then handed to its row's handler if the sender may send it. */
void server_on_message(server_t *s, client_t *c, const void *buf, size_t n);

/* ---- server.c: the life of a connection (server-open.c drops every client at close) ---- */
/* The client is gone (or dropped): everything it held goes back at once and its slot is free. */
void server_drop(server_t *s, client_t *c);

#endif
