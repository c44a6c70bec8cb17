/* idle-clients.c - registers N clients with rotad and keeps them registered until killed (metrics-cost.sh). */

/*
 * A benchmark helper, not a test: it gives rotad a client table as full as N real processes would (classes high,
 * normal and low in turn), without their GPU work, so that the cost of what scales with the clients (a scrape of
 * rotad --metrics-listen) can be measured alone. It prints "ready" once all N are registered, then waits.
 * usage: idle-clients N   (1..512; ROTA_SOCKET names rotad, else its default path)
 * Exit codes: 0 killed by SIGTERM/SIGINT after "ready"; 1 a registration failed; 2 usage error.
 */
#include "runtime/lib/conn.h"
#include "runtime/lib/parse.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    uint64_t n;
    if (argc != 2 || parse_u64(argv[1], 1, ROTA_MAX_CLIENTS, &n)) {
        fprintf(stderr, "usage: idle-clients N   (1..%d clients; ROTA_SOCKET names rotad)\n", ROTA_MAX_CLIENTS);
        return 2;
    }
    const char *sock = getenv("ROTA_SOCKET");
    for (uint64_t i = 0; i < n; i++) {
        conn_opts_t o = {.socket = sock, .role = ROTA_ROLE_CLIENT, .priority = (unsigned)(i % ROTA_PRIO_COUNT),
                         .weight = 1000};
        conn_t *c;
        char err[256];
        if (conn_open(&o, &c, err, sizeof err)) {
            fprintf(stderr, "idle-clients: fatal: client %llu: %s\n", (unsigned long long)i, err);
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sig;
    sigwait(&set, &sig);
    return 0;
}
