/* probe.c - rotad learns the node's GPUs at start: a forked child enumerates them with the driver. */
#include "runtime/probe.h"

#include "runtime/lib/gpus.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the child writes, in one write (the pipe's 64 KiB hold it, so the child never blocks on a parent that gave
 * up): the count, or -1 and a sentence in why, then the GPUs. */
typedef struct probe_answer {
    int32_t n;               /* >= 0: GPUs; < 0: failed, why[] says why */
    uint32_t pad;
    char why[192];
    rota_place_cand_t gpus[ROTA_MAX_DEVICES];
} probe_answer_t;

/* In the child: the driver's view, as `rota run` sees it (no context). A driver with no GPU is nothing to place
 * on, not an error. */
static void probe_child(probe_answer_t *a)
{
    int n = gpus_list(a->gpus, a->why, sizeof a->why);
    a->n = n == -ENODEV ? 0 : n < 0 ? -1 : n;
}

static uint64_t probe_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads the whole answer within the deadline: 0, -ETIMEDOUT, or -EPIPE (the child ended without one). */
static int probe_read(int fd, probe_answer_t *a, uint64_t deadline_ms)
{
    size_t got = 0;
    while (got < sizeof *a) {
        uint64_t now = probe_now_ms();
        if (now >= deadline_ms) return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)(deadline_ms - now));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return pr == 0 ? -ETIMEDOUT : -errno;
        ssize_t r = read(fd, (char *)a + got, sizeof *a - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -EPIPE;
        got += (size_t)r;
    }
    return 0;
}

int probe_gpus(rota_place_cand_t gpus[ROTA_MAX_DEVICES], char *why, size_t whylen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        static probe_answer_t a; /* static: no large stack frame in the child */
        close(p[0]);
        probe_child(&a); /* the driver's own messages, if any, go to rotad's stderr: its log */
        ssize_t w = write(p[1], &a, sizeof a);
        _exit(w == (ssize_t)sizeof a ? 0 : 1); /* _exit: no atexit handlers of rotad, no driver teardown hooks */
    }
    close(p[1]);
    static probe_answer_t a;
    memset(&a, 0, sizeof a);
    int rc = probe_read(p[0], &a, probe_now_ms() + PROBE_TIMEOUT_MS);
    close(p[0]);
    if (rc == -ETIMEDOUT) kill(pid, SIGKILL); /* a hung driver: never wait for it */
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (rc) {
        if (rc == -ETIMEDOUT) snprintf(why, whylen, "the driver did not answer within %d s", PROBE_TIMEOUT_MS / 1000);
        else if (WIFSIGNALED(st)) snprintf(why, whylen, "the probe died of signal %d", WTERMSIG(st));
        else snprintf(why, whylen, "the probe ended without an answer (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    if (a.n < 0 || a.n > ROTA_MAX_DEVICES) {
        a.why[sizeof a.why - 1] = 0;
        snprintf(why, whylen, "%s", a.n < 0 ? a.why : "bad answer from the probe");
        return -1;
    }
    memcpy(gpus, a.gpus, sizeof a.gpus[0] * (size_t)a.n);
    return a.n;
}
