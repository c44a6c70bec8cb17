/* server.c - rotad's event loop and the life of a connection: accept (within the per-user cap), read, drop;
 * the HELLO deadline, the restart grace, signals (SIGHUP reloads). Messages go to server-dispatch.c's table. */
#include "runtime/server-internal.h"

#include "runtime/ledger.h"
#include "runtime/lib/proto.h"
#include "runtime/metrics.h"
#include "runtime/notify.h"
#include "runtime/place.h"
#include "runtime/region.h"
#include "runtime/reload.h"
#include "runtime/sched.h"
#include "runtime/waitq.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

static void server_on_readable(server_t *s, client_t *c)
{
    for (int i = 0; i < 64 && !c->doomed; i++) {
        char buf[ROTA_MSG_MAX];
        ssize_t n = proto_recv(c->fd, buf, sizeof buf, NULL, NULL, MSG_DONTWAIT);
        if (n == -EAGAIN) return;
        if (n == 0 || n == -ECONNRESET) {
            server_doom(s, c, NULL);
            return;
        }
        if (n == -EMSGSIZE) {
            server_doom(s, c, "message longer than any rota message");
            return;
        }
        if (n < 0) {
            server_doom(s, c, strerror((int)-n));
            return;
        }
        server_on_message(s, c, buf, (size_t)n);
    }
}

/* The client is gone (or dropped): everything it held goes back at once and its slot is free. */
void server_drop(server_t *s, client_t *c)
{
    rota_region_t *r = s->rg.r;
    rota_table_t *t = s->rg.t;
    uint32_t mask = 0;
    if (c->slot >= 0) {
        rota_slot_t *sl = &t->slots[c->slot];
        sched_client_remove(s->sched, (unsigned)c->slot); /* before its channel goes; releases whom it held */
        waitq_drop_slot(&s->q, (unsigned)c->slot);
        mask = ledger_reclaim(r, t, (unsigned)c->slot);
        for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
            if (c->devmask & (1u << d)) {
                uint32_t n = LD(&r->devices[d].clients);
                ST(&r->devices[d].clients, n ? n - 1 : 0);
            }
        atomic_store_explicit(&sl->state, ROTA_SLOT_FREE, memory_order_release);
        ST(&sl->pid, 0);
        s->by_slot[c->slot] = NULL;
        if ((unsigned)c->slot < s->slot_hint) s->slot_hint = (unsigned)c->slot;
        ST(&r->nclients, LD(&r->nclients) - 1);
        server_log(s, 2, "client pid %d left slot %d", (int)c->pid, c->slot);
    }
    if (c->capped || c->slot_counted) {
        struct server_user *u = server_user(s, (uint32_t)c->uid);
        if (u && c->capped && u->conns) u->conns--;
        if (u && c->slot_counted && u->slots) u->slots--;
    }
    if (!c->role && s->nfresh) s->nfresh--;
    place_wait_drop(&s->pl, c); /* a rota run that gave up waiting */
    region_channel_destroy(c->ch);
    close(c->fd);
    if (c->prev) c->prev->next = c->next;
    else s->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
        if (mask & (1u << d)) server_serve(s, d);
}

static void server_sweep(server_t *s)
{
    bool again = true;
    while (again) {
        again = false;
        for (client_t *c = s->clients; c; c = c->next)
            if (c->doomed) {
                server_drop(s, c);
                again = true;
                break;
            }
    }
}

/* Out of descriptors: accept the next connection on the spare one and close it at once, so the listening socket
 * does not stay readable (a busy loop) while nothing can be accepted. Returns whether one was taken. */
static bool server_accept_shed(server_t *s, int err)
{
    if (s->reserve_fd < 0) return false;
    close(s->reserve_fd);
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    server_log_limited(s, "unable to accept a client: %s; connections are refused until some close", strerror(err));
    return fd >= 0;
}

static void server_accept(server_t *s)
{
    for (int n = 0; n < 64; n++) { /* a bounded batch: other events get their turn in a storm */
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if ((errno == EMFILE || errno == ENFILE) && server_accept_shed(s, errno)) continue;
            if (errno != EAGAIN) server_log_limited(s, "unable to accept a client: %s", strerror(errno));
            return;
        }
        struct ucred cr;
        socklen_t len = sizeof cr;
        client_t *c = calloc(1, sizeof *c);
        if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
            server_log_limited(s, "unable to take a client: %s", c ? strerror(errno) : "out of memory");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->slot = -1;
        c->pid = cr.pid;
        c->uid = cr.uid;
        c->gid = cr.gid;
        c->accepted_ns = server_now_ns();
        struct server_user *u = NULL;
        if (!server_privileged(cr.uid)) {
            u = server_user(s, (uint32_t)cr.uid);
            if (!u || u->conns >= s->o.cfg->max_conns_per_user) {
                server_log_limited(s, "connection from pid %d uid %u: over its user's %u connections; closed",
                                   (int)cr.pid, (unsigned)cr.uid, s->o.cfg->max_conns_per_user);
                free(c);
                close(fd);
                continue;
            }
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            server_log_limited(s, "unable to watch a client: %s", strerror(errno));
            free(c);
            close(fd);
            continue;
        }
        if (u) {
            u->conns++;
            c->capped = true;
        }
        s->nfresh++;
        c->next = s->clients;
        if (s->clients) s->clients->prev = c;
        s->clients = c;
    }
}

/* Drops connections that sent no HELLO within hello-timeout-ms; returns the next such deadline (UINT64_MAX:
 * none). */
static uint64_t server_expire_fresh(server_t *s, uint64_t now)
{
    if (!s->nfresh) return UINT64_MAX;
    uint64_t lim = (uint64_t)s->o.cfg->hello_timeout_ms * 1000000u, next = UINT64_MAX;
    for (client_t *c = s->clients; c; c = c->next) {
        if (c->role || c->doomed) continue;
        uint64_t due = c->accepted_ns + lim;
        if (now >= due) server_doom(s, c, "sent no hello in time");
        else if (due < next) next = due;
    }
    return next;
}

/* Once the restart grace is over, serves what waited for it, in order. */
static void server_grace(server_t *s)
{
    if (!s->grace_end_ns || server_now_ns() < s->grace_end_ns) return;
    s->grace_end_ns = 0;
    server_adopt_settle(s); /* what the clients of the rotad before hold, before anything new */
    for (unsigned d = 0; d < ROTA_MAX_DEVICES; d++)
        if (waitq_count_dev(&s->q, d)) waitq_serve(&s->q, d, server_answer, s);
}

/* SIGHUP: the config file again, for decisions from now on; a bad file keeps the current one. */
static void server_reload(server_t *s)
{
    if (!s->o.config_path || !s->o.cfg) {
        server_log(s, 0, "SIGHUP: no --config file to reload");
        return;
    }
    notify_send("RELOADING=1");
    char msg[512];
    if (reload_config(s->o.config_path, s->o.cfg, s->rg.t, msg, sizeof msg)) {
        server_log(s, 0, "SIGHUP: config not reloaded, keeping the current one: %s", msg);
    } else {
        ST(&s->rg.r->credit_keep, s->o.cfg->credit);
        server_log(s, 1, "SIGHUP: reloaded %s: %s", s->o.config_path, msg);
    }
    ST(&s->rg.r->client_limit, s->o.cfg->max_clients);
    notify_send("READY=1");
}

/* Sets up the event loop (signalfd, epoll), starts the scheduler thread and the metrics endpoint, the restart
 * grace, and tells whoever waits that rotad is ready. ROTAD_EXIT_OK or an exit code with one message. */
static int server_start(server_t *s, const int *notify, int nnotify, char *err, size_t errlen)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    s->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (s->signal_fd < 0 || s->epoll_fd < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to set up the event loop: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_tag};
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &s->signal_tag};
    if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) < 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->signal_fd, &sev) < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to set up the event loop: %s", strerror(errno));
    /* The scheduler thread starts here, in the process that serves (rotad detaches between open and loop). */
    /* Bounds from the config file (issue 21) join the scheduling options. */
    s->o.sched.high_stall_ns = (uint64_t)s->o.cfg->high_stall_ms * 1000000u;
    s->o.sched.doorbell_max_hz = s->o.cfg->doorbell_max_hz;
    ST(&s->rg.r->credit_keep, s->o.cfg->credit); /* what clients may keep of their frees (abi.h) */
    int se = sched_start(s->rg.r, s->rg.t, s->rg.b, &s->o.sched, &s->sched);
    if (se) return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to start the scheduler: %s", strerror(-se));
    ST(&s->rg.r->client_limit, s->o.cfg->max_clients);
    se = s->o.metrics ? metrics_start(s->o.metrics, s->rg.r, s->o.metrics_clients ? s->rg.t : NULL) : 0;
    if (se) return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to start serving metrics: %s", strerror(-se));
    server_log(s, 1, "listening on %s (pid %d, rota ABI %u)", s->path, (int)getpid(), ROTA_ABI_VERSION);
    /* After a crash, the clients of the rotad before re-register what they hold (their trackers reconnect within
     * about a second): until they had grace-ms to, a RESERVE that fits is not granted, or it might be granted
     * memory those clients hold. */
    if (s->stale && s->o.cfg->grace_ms) {
        s->grace_end_ns = server_now_ns() + (uint64_t)s->o.cfg->grace_ms * 1000000u;
        server_log(s, 1, "restarted over a stale socket: granting memory in %u ms", s->o.cfg->grace_ms);
    }
    for (int i = 0; i < nnotify; i++) {
        ssize_t w;
        do {
            w = write(notify[i], "\n", 1);
        } while (w < 0 && errno == EINTR);
        close(notify[i]);
    }
    notify_send("READY=1\nSTATUS=serving");
    return ROTAD_EXIT_OK;
}

/* Before waiting: drops the connections past their HELLO deadline, serves what waited for the grace's end, drops
 * the doomed; returns how long epoll may wait (ms, -1: until an event), up to the next deadline. */
static int server_timeout(server_t *s)
{
    uint64_t next = waitq_next_deadline(&s->q), pnext = place_wait_next(&s->pl);
    if (pnext != UINT64_MAX) {
        /* Room for a waiting job appears through events (releases, exits), except when a placement still
         * pending for a process that died lapses: look again at least every PLACE_RECHECK_MS. */
        uint64_t recheck = server_now_ns() + PLACE_RECHECK_MS * 1000000u;
        if (pnext > recheck) pnext = recheck;
        if (pnext < next) next = pnext;
    }
    uint64_t fnext = server_expire_fresh(s, server_now_ns());
    if (fnext < next) next = fnext;
    uint64_t lnext = server_log_flush(s, server_now_ns());
    if (lnext < next) next = lnext;
    server_grace(s);
    if (s->grace_end_ns && s->grace_end_ns < next) next = s->grace_end_ns;
    server_sweep(s);
    if (next == UINT64_MAX) return -1;
    uint64_t now = server_now_ns();
    return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* The signalfd is readable: SIGHUP reloads the config file, SIGTERM and SIGINT stop the loop. */
static void server_on_signal(server_t *s)
{
    struct signalfd_siginfo si;
    while (read(s->signal_fd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            server_reload(s);
            continue;
        }
        server_log(s, 1, "signal %u: draining and stopping", si.ssi_signo);
        notify_send("STOPPING=1");
        s->stopping = true;
    }
}

/* One batch of events: the clients' first, then the signals, new connections last (a storm of connections does
 * not delay the clients); then what the batch made due: the grace's end, expired waits, drops, placements. */
static void server_on_events(server_t *s, const struct epoll_event *evs, int n)
{
    bool accept = false;
    for (int i = 0; i < n; i++) {
        void *tag = evs[i].data.ptr;
        if (tag == &s->listen_tag) {
            accept = true; /* after the clients' events: a storm of connections does not delay them */
        } else if (tag == &s->signal_tag) {
            server_on_signal(s);
        } else {
            client_t *c = tag;
            if (c->doomed) continue;
            if (evs[i].events & EPOLLIN) server_on_readable(s, c);
            else if (evs[i].events & (EPOLLHUP | EPOLLERR)) server_doom(s, c, NULL);
        }
    }
    if (accept) server_accept(s);
    server_grace(s); /* before expiring: what waited for the grace's end is served first */
    waitq_expire(&s->q, server_now_ns(), server_answer, s);
    server_sweep(s);
    if (s->pl.waiters) place_wait_serve(&s->pl, s->rg.r, server_now_ns(), server_place_answer, s);
    if (s->pl.waiters || LD(&s->rg.r->place_waiting)) place_wait_publish(&s->pl, s->rg.r);
}

int server_loop(server_t *s, const int *notify, int nnotify, char *err, size_t errlen)
{
    int rc = server_start(s, notify, nnotify, err, errlen);
    if (rc) return rc;
    while (!s->stopping) {
        int timeout = server_timeout(s);
        struct epoll_event evs[64];
        int n = epoll_wait(s->epoll_fd, evs, 64, timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "epoll_wait: %s", strerror(errno));
        }
        server_on_events(s, evs, n);
    }
    /* Drain: every queued thread gets an answer (it passes through), every waiting job a GPU, then every client
     * is let go. */
    server_adopt_settle(s);
    waitq_flush(&s->q, -ESHUTDOWN, server_answer, s);
    place_wait_flush(&s->pl, s->rg.r, server_now_ns(), server_place_answer, s);
    place_wait_publish(&s->pl, s->rg.r);
    while (s->clients) server_drop(s, s->clients);
    return ROTAD_EXIT_OK;
}
