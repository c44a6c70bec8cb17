/* observe.c - how rota status, top and metrics reach rotad, and what they say when no rotad listens. */
#include "tools/rota/observe.h"

#include "runtime/lib/sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * conn_open reports the last socket it tried; a user who finds no rotad needs every path that was tried (the
 * node's, then their own) and how to start one, which differs for the two: their own rotad, or the node's
 * service run by root.
 */
int rota_observe_open(const char *prog, const char *sock, conn_t **out)
{
    conn_opts_t o = {.socket = sock, .role = ROTA_ROLE_OBSERVER, .priority = ROTA_PRIO_NORMAL, .weight = 1000};
    char err[256];
    int rc = conn_open(&o, out, err, sizeof err);
    if (rc == 0) return 0;
    if (rc != -ENOENT && rc != -ECONNREFUSED) {
        fprintf(stderr, "%s: fatal: %s\n", prog, err);
        return rc;
    }
    if (sock && sock[0]) {
        fprintf(stderr, "%s: fatal: rotad is not running: nothing listens on %s (from %s)\n"
                        "%s: start one with 'rotad --socket %s', or name another socket\n",
                prog, sock, getenv("ROTA_SOCKET") == sock ? "ROTA_SOCKET" : "--socket", prog, sock);
        return rc;
    }
    char paths[2][SOCKPATH_MAX];
    int n = sockpath_candidates(paths, 2);
    if (n == 2)
        fprintf(stderr, "%s: fatal: rotad is not running: nothing listens on %s (the node's) or %s (yours)\n"
                        "%s: start the node's with 'systemctl start rotad' (as root), or your own with 'rotad'; "
                        "--socket or ROTA_SOCKET names another socket\n",
                prog, paths[0], paths[1], prog);
    else
        fprintf(stderr, "%s: fatal: rotad is not running: nothing listens on %s\n"
                        "%s: start it with 'systemctl start rotad' or 'rotad'; --socket or ROTA_SOCKET names "
                        "another socket\n",
                prog, n == 1 ? paths[0] : SOCKPATH_NODE, prog);
    return rc;
}
