/* notify.c - sd_notify(3)'s datagram protocol, written out: READY=1 once rotad serves, RELOADING=1, STOPPING=1. */
#include "runtime/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un notify_addr;
static socklen_t notify_len; /* 0: no socket */

int notify_init(void)
{
    const char *e = getenv("NOTIFY_SOCKET");
    if (!e) return 0;
    size_t n = strlen(e);
    int rc = 0;
    if ((e[0] != '/' && e[0] != '@') || n < 2 || n >= sizeof notify_addr.sun_path) {
        rc = -EINVAL;
    } else {
        notify_addr.sun_family = AF_UNIX;
        memcpy(notify_addr.sun_path, e, n);
        if (e[0] == '@') notify_addr.sun_path[0] = 0; /* abstract: no terminating NUL counted */
        notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (e[0] == '/'));
    }
    unsetenv("NOTIFY_SOCKET");
    return rc;
}

int notify_send(const char *state)
{
    if (!notify_len) return 0;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s\nMAINPID=%ld\n", state, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof msg) return -EMSGSIZE;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    int rc = 0;
    if (sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&notify_addr, notify_len) < 0) rc = -errno;
    close(fd);
    return rc;
}
