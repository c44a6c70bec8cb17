/* sockpath.c - rotad's default socket path: /run/rota for root, the user's runtime dir, or /tmp/rota-<uid>. */
#include "runtime/lib/sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

static int sockpath_put(size_t cap, int n)
{
    struct sockaddr_un sun;
    if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof sun.sun_path) return -ENAMETOOLONG;
    return 0;
}

int sockpath_default(char *out, size_t cap)
{
    if (geteuid() == 0) return sockpath_put(cap, snprintf(out, cap, SOCKPATH_NODE));
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/')
        return sockpath_put(cap, snprintf(out, cap, "%s/rota/rotad.sock", xdg));
    return sockpath_put(cap, snprintf(out, cap, "/tmp/rota-%u/rotad.sock", (unsigned)geteuid()));
}

int sockpath_resolve(const char *explicit_path, char *out, size_t cap)
{
    if (explicit_path && explicit_path[0]) return sockpath_put(cap, snprintf(out, cap, "%s", explicit_path));
    return sockpath_default(out, cap);
}

int sockpath_candidates(char (*out)[SOCKPATH_MAX], int max)
{
    if (max < 1) return 0;
    snprintf(out[0], SOCKPATH_MAX, "%s", SOCKPATH_NODE);
    if (geteuid() == 0 || max < 2) return 1;
    int rc = sockpath_default(out[1], SOCKPATH_MAX);
    return rc ? rc : 2;
}
