/* rotad-helpers.h - starting and stopping a private rotad for the runtime tests (header-only helpers). */
#ifndef ROTA_TESTS_ROTAD_HELPERS_H
#define ROTA_TESTS_ROTAD_HELPERS_H

#include "tests/tap/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* A unique temp dir per test program; rotad's socket in it. */
static char th_dir[64], th_sock[96];

static void th_setup(const char *name)
{
    snprintf(th_dir, sizeof th_dir, "/tmp/rota-%s.XXXXXX", name);
    if (!mkdtemp(th_dir)) bail("mkdtemp: %s", strerror(errno));
    snprintf(th_sock, sizeof th_sock, "%s/rotad.sock", th_dir);
}

static const char *th_rotad_path(void)
{
    static char p[512];
    const char *b = getenv("ROTA_BUILD");
    if (!b) bail("ROTA_BUILD is not set (run through make test, or export it)");
    snprintf(p, sizeof p, "%s/bin/rotad", b);
    return p;
}

/* Starts rotad --foreground on th_sock (plus extra args, NULL-terminated), waiting for its readiness line. */
static pid_t th_rotad_start_args(const char *const *extra)
{
    int p[2];
    if (pipe(p) < 0) bail("pipe");
    pid_t pid = fork();
    if (pid < 0) bail("fork");
    if (pid == 0) {
        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test, whatever kills it */
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[1]);
        const char *argv[16] = {"rotad", "--foreground", "--socket", th_sock, "--notify-fd", fd};
        int n = 6;
        for (; extra && *extra && n < 15; extra++) argv[n++] = *extra;
        argv[n] = NULL;
        setenv("ROTA_LOG", getenv("ROTA_TEST_DEBUG") ? "debug" : "quiet", 1);
        execv(th_rotad_path(), (char **)argv);
        _exit(127);
    }
    close(p[1]);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    char c = 0;
    if (poll(&pf, 1, 10000) != 1 || read(p[0], &c, 1) != 1 || c != '\n') bail("rotad did not become ready");
    close(p[0]);
    return pid;
}

static pid_t th_rotad_start(void)
{
    return th_rotad_start_args(NULL);
}

/* SIGTERM and reap; returns the exit status (or 128+signal). */
static int th_rotad_stop(pid_t pid)
{
    int st = 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void th_cleanup(void)
{
    char p[192];
    snprintf(p, sizeof p, "%s.lock", th_sock);
    unlink(p);
    unlink(th_sock);
    rmdir(th_dir);
}

#endif
