/* timeline.c - SIMCUDA_TIMELINE: the busy compute-engine segments this process retires, buffered, in
 * DIR/timeline-PID.txt, each naming its kernel's owner. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * The engine calls simnode_timeline_record() under dev->lock, right where it adds a segment to busy_ns, so the
 * lines of one device are in engine order. That call only formats and copies into memory (tl.mu guards no
 * syscall, so a dev->lock holder never waits on file I/O); the file is opened and written by
 * simnode_timeline_flush(), which the engine calls after dropping dev->lock when record asks for it, and by
 * the destructor at exit. Two buffers: record appends to one while a flush writes the other, so the engine
 * never waits for the disk either. A line finding its buffer full (only while a slow write of the other is in
 * flight) is counted as lost and reported at exit.
 *
 * Lock order: dev->lock, then tl.mu. tl.wmu (one writer at a time, held across the write) is never taken
 * under dev->lock, and tl.mu is never held across a syscall other than getpid at open.
 */

#define TL_CAP (64 * 1024)
#define TL_HIGH (TL_CAP / 2) /* flush from here, leaving half a buffer of room for what comes meanwhile */
#define TL_LINE_MAX 80       /* "15 255 18446744073709551615 18446744073709551615 4194304\n" is 58 */

static struct {
    pthread_mutex_t mu;      /* the buffers and the state below */
    pthread_mutex_t wmu;     /* the one thread that opens or writes the file */
    char buf[2][TL_CAP];
    size_t len[2];
    int cur;                 /* the buffer record appends to; the other is empty or being written */
    int fd;                  /* -1: not created yet (or forgotten in a forked child) */
    bool dead;               /* could not create or write the file: lines are dropped from then on */
    bool exiting;            /* the exit flush ran: write each later line at once */
    uint64_t lost;
    char path[320];
} tl = {.mu = PTHREAD_MUTEX_INITIALIZER, .wmu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

bool simnode_timeline_record(uint32_t dev, uint32_t ctx, uint64_t start_ns, uint64_t end_ns, int32_t pid)
{
    char line[TL_LINE_MAX];
    char *p = put_u64(line, dev);
    *p++ = ' ';
    p = put_u64(p, ctx);
    *p++ = ' ';
    p = put_u64(p, start_ns);
    *p++ = ' ';
    p = put_u64(p, end_ns);
    *p++ = ' ';
    p = put_u64(p, pid > 0 ? (uint64_t)pid : 0);
    *p++ = '\n';
    size_t n = (size_t)(p - line);

    pthread_mutex_lock(&tl.mu);
    bool flush = false;
    if (!tl.dead) {
        size_t *len = &tl.len[tl.cur];
        if (*len + n <= TL_CAP) {
            memcpy(tl.buf[tl.cur] + *len, line, n);
            *len += n;
        } else {
            tl.lost++;
        }
        flush = tl.fd < 0 || tl.exiting || *len >= TL_HIGH;
    }
    pthread_mutex_unlock(&tl.mu);
    return flush;
}

/* Under tl.wmu, not tl.mu: the whole of buf[0..n) or -errno. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Creates the file if needed and writes the buffers while they hold at least min bytes (min 1: everything). */
static void flush_from(size_t min)
{
    pthread_mutex_lock(&tl.wmu);
    pthread_mutex_lock(&tl.mu);
    if (tl.exiting) min = 1; /* after the exit flush nothing else will write what is left: write it now */
    while (!tl.dead && tl.len[tl.cur] > 0 && (tl.fd < 0 || tl.len[tl.cur] >= min)) {
        int w = tl.cur;
        size_t n = tl.len[w];
        tl.cur ^= 1; /* the other one is empty: only this loop (under wmu) swaps, and it empties w before the next */
        int fd = tl.fd;
        if (fd < 0) snprintf(tl.path, sizeof tl.path, "%s/timeline-%d.txt", simnode_g.cfg.timeline, (int)getpid());
        pthread_mutex_unlock(&tl.mu);

        const char *what = "write";
        int rc = 0;
        if (fd < 0) {
            what = "create";
            fd = open(tl.path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0) rc = -errno;
        }
        if (!rc) rc = write_all(fd, tl.buf[w], n);
        if (rc) {
            /* Once, then never again in this process: the benchmark must not die of a full disk. */
            fprintf(stderr, "simcuda: SIMCUDA_TIMELINE: cannot %s %s: %s\n", what, tl.path, strerror(-rc));
            if (fd >= 0) close(fd);
            fd = -1;
        }

        pthread_mutex_lock(&tl.mu);
        tl.fd = fd;
        tl.len[w] = 0;
        if (rc) {
            tl.dead = true;
            tl.len[tl.cur] = 0;
        }
    }
    pthread_mutex_unlock(&tl.mu);
    pthread_mutex_unlock(&tl.wmu);
}

void simnode_timeline_flush(void)
{
    flush_from(TL_HIGH);
}

/* At exit: what is buffered (a process killed by a signal, or leaving by _exit, loses it). */
__attribute__((destructor)) static void timeline_exit(void)
{
    pthread_mutex_lock(&tl.mu);
    tl.exiting = true; /* kernels that still end (other threads) are written line by line */
    pthread_mutex_unlock(&tl.mu);
    flush_from(1);
    pthread_mutex_lock(&tl.mu);
    if (tl.lost && !tl.dead)
        fprintf(stderr, "simcuda: SIMCUDA_TIMELINE: %llu segments lost in %s (its writes could not keep up)\n",
                (unsigned long long)tl.lost, tl.path);
    pthread_mutex_unlock(&tl.mu);
}

/* Fork: the child starts a timeline of its own (timeline-<childpid>.txt, created at its first segment), without
 * the parent's buffered lines or file. Both locks are held across fork, so no copy is half written. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&tl.wmu);
    pthread_mutex_lock(&tl.mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&tl.mu);
    pthread_mutex_unlock(&tl.wmu);
}

static void atfork_child(void)
{
    if (tl.fd >= 0) close(tl.fd);
    tl.fd = -1;
    tl.len[0] = tl.len[1] = 0;
    tl.cur = 0;
    tl.dead = tl.exiting = false;
    tl.lost = 0;
    tl.path[0] = '\0';
    pthread_mutex_unlock(&tl.mu);
    pthread_mutex_unlock(&tl.wmu);
}

/* Registered at load, before any line can be buffered (costs a lock pair per fork, nothing else). */
__attribute__((constructor)) static void timeline_init(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
