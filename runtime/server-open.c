/* server-open.c - rotad's start-up and shutdown: the socket's directory, the lock file, the listening socket,
 * the region; and undoing all of it. */
#include "runtime/server-internal.h"

#include "runtime/config.h"
#include "runtime/metrics.h"
#include "runtime/place.h"
#include "runtime/region.h"
#include "runtime/sched.h"
#include "runtime/waitq.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- startup ------------------------------------------------------------------------------------------- */

/* The socket's directory: created if missing; refused when someone else could replace the socket. */
static int server_check_dir(const char *path, char *err, size_t errlen)
{
    char copy[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(copy, sizeof copy, "%s", path);
    char *dir = dirname(copy);
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno != ENOENT)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to stat %s: %s", dir, strerror(errno));
        if (mkdir(dir, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to create %s: %s", dir, strerror(errno));
        if (stat(dir, &st) < 0)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to stat %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "%s is not a directory", dir);
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL,
                      "unsafe permissions on %s: owned by uid %u, not by this user (%u) or root", dir,
                      (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        return errmsg(err, errlen, ROTAD_EXIT_FAIL,
                      "unsafe permissions on %s (mode %04o): others could replace the socket; use a "
                      "directory only its owner can write",
                      dir, (unsigned)(st.st_mode & 07777));
    return 0;
}

static int server_write_pid(server_t *s)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, buf, (size_t)n, 0) != n) return -errno;
    return 0;
}

void server_set_metrics(server_t *s, struct metrics *m)
{
    s->o.metrics = m;
}

rota_region_t *server_region(server_t *s)
{
    return s->rg.r;
}

void server_set_pid(server_t *s)
{
    server_write_pid(s);
    s->rg.r->rotad_pid = (int32_t)getpid();
}

/* Only while holding the lock: the file is ours then. */
static void server_unlink_lock(const server_t *s)
{
    char lp[sizeof s->path + 8];
    snprintf(lp, sizeof lp, "%s.lock", s->path);
    unlink(lp);
}

/* The lock file lives only while its rotad does: a stopping rotad unlinks it while still holding the lock. A
 * rotad that opened the old file just before that unlink would then lock a file nobody else can find, so after
 * locking each rotad checks that the path still names the file it locked, and starts over if not. */
static int server_lock(server_t *s, char *err, size_t errlen)
{
    char lp[sizeof s->path + 8];
    snprintf(lp, sizeof lp, "%s.lock", s->path);
    for (int tries = 0;; tries++) {
        s->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (s->lock_fd < 0)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to open lock file %s: %s", lp,
                          strerror(errno));
        /* An OFD lock: released by the kernel when the last descriptor of this open file goes, whatever kills
         * us. */
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(s->lock_fd, F_OFD_SETLK, &fl) < 0) {
            if (errno != EAGAIN && errno != EACCES)
                return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to lock %s: %s", lp, strerror(errno));
            char buf[32] = {0};
            ssize_t n = pread(s->lock_fd, buf, sizeof buf - 1, 0);
            long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
            return errmsg(err, errlen, ROTAD_EXIT_BUSY, "another rotad (pid %ld) is already serving %s", pid,
                          s->path);
        }
        struct stat held, named;
        if (fstat(s->lock_fd, &held) < 0)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to stat lock file %s: %s", lp,
                          strerror(errno));
        if (stat(lp, &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) break;
        close(s->lock_fd);
        s->lock_fd = -1;
        if (tries == 100)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "lock file %s keeps being replaced", lp);
    }
    if (server_write_pid(s))
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to write lock file %s: %s", lp, strerror(errno));
    return 0;
}

static int server_bind(server_t *s, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "%s exists and is not a socket", s->path);
        /* We hold the lock, so whoever made it is gone: a stale socket. */
        if (unlink(s->path) < 0)
            return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to remove stale socket %s: %s", s->path,
                          strerror(errno));
        server_log(s, 1, "removed stale socket %s", s->path);
        s->stale = true;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to create a socket: %s", strerror(errno));
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    memcpy(sun.sun_path, s->path, strlen(s->path) + 1);
    mode_t old = umask(0077);
    int rc = bind(s->listen_fd, (struct sockaddr *)&sun, sizeof sun);
    umask(old);
    if (rc < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to bind %s: %s", s->path, strerror(errno));
    /* Root serves every user of the node (each identified by SO_PEERCRED); a user's rotad only that user. */
    if (chmod(s->path, geteuid() == 0 ? 0666 : 0600) < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to chmod %s: %s", s->path, strerror(errno));
    if (listen(s->listen_fd, 512) < 0)
        return errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to listen on %s: %s", s->path, strerror(errno));
    return 0;
}

int server_open(const server_opts_t *o, server_t **out, char *err, size_t errlen)
{
    server_t *s = calloc(1, sizeof *s);
    if (!s) return errmsg(err, errlen, ROTAD_EXIT_FAIL, "out of memory");
    s->o = *o;
    if (!s->o.cfg) {
        config_init(&s->defcfg);
        s->o.cfg = &s->defcfg;
    }
    s->lock_fd = s->listen_fd = s->epoll_fd = s->signal_fd = -1;
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int rc;
    if (snprintf(s->path, sizeof s->path, "%s", o->socket_path) >= (int)sizeof s->path) {
        rc = errmsg(err, errlen, ROTAD_EXIT_USAGE, "socket path %s is too long", o->socket_path);
        goto out_free;
    }
    rc = server_check_dir(s->path, err, errlen);
    if (rc) goto out_free;
    /* PATH itself before PATH.lock is created beside it (server_bind checks again under the lock). */
    struct stat pst;
    if (lstat(s->path, &pst) == 0 && !S_ISSOCK(pst.st_mode)) {
        rc = errmsg(err, errlen, ROTAD_EXIT_FAIL, "%s exists and is not a socket", s->path);
        goto out_free;
    }
    rc = server_lock(s, err, errlen);
    if (rc) goto out_close;
    rc = server_bind(s, err, errlen);
    if (rc) goto out_unlock;
    int e = region_create(&s->rg, o->cfg);
    if (e) {
        rc = errmsg(err, errlen, ROTAD_EXIT_FAIL, "unable to create the shared region: %s", strerror(-e));
        goto out_unlink;
    }
    waitq_init(&s->q, s->rg.r, s->rg.t);
    s->pl.t = s->rg.t;
    /* One descriptor per client: make room for a full client table, and connections besides. */
    struct rlimit rl;
    const rlim_t want = ROTA_MAX_CLIENTS + 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    server_grant_load(s); /* what schedulers granted the rotad before (a restart keeps their jobs' limits) */
    *out = s;
    return ROTAD_EXIT_OK;

out_unlink:
    unlink(s->path);
out_unlock:
    server_unlink_lock(s);
out_close:
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->lock_fd >= 0) close(s->lock_fd);
out_free:
    if (s->reserve_fd >= 0) close(s->reserve_fd);
    free(s);
    return rc;
}

int server_add_gpus(server_t *s, const rota_place_cand_t *gpus, int n)
{
    return place_add_known(&s->pl, s->rg.r, gpus, n);
}

void server_close(server_t *s)
{
    if (!s) return;
    metrics_stop(s->o.metrics); /* its thread reads the region */
    while (s->clients) server_drop(s, s->clients);
    /* We still hold the lock, so the socket and the lock file at the path are ours; the lock file goes last,
     * while still locked (server_lock explains why that is safe). */
    if (s->listen_fd >= 0) {
        unlink(s->path);
        close(s->listen_fd);
    }
    if (s->lock_fd >= 0) server_unlink_lock(s);
    if (s->epoll_fd >= 0) close(s->epoll_fd);
    if (s->signal_fd >= 0) close(s->signal_fd);
    sched_stop(s->sched);
    region_destroy(&s->rg);
    if (s->lock_fd >= 0) close(s->lock_fd);
    if (s->reserve_fd >= 0) close(s->reserve_fd);
    free(s->users);
    free(s->adopts);
    free(s->grants);
    free(s);
}
