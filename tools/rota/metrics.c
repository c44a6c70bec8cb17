/* metrics.c - `rota metrics`: rotad's region once as Prometheus text (node_exporter's textfile collector). */
#include "tools/rota/rota.h"

#include "tools/rota/observe.h"

#include "tools/rota/sample.h"

#include "runtime/lib/conn.h"
#include "runtime/lib/prom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char metrics_usage[] =
    "usage: rota metrics [--socket PATH]\n"
    "\n"
    "Prints rotad's metrics once in the Prometheus text format (0.0.4): the same text rotad --metrics-listen\n"
    "serves at /metrics, for node_exporter's textfile collector (write to a temporary file in its directory,\n"
    "then rename). Names and labels: docs/operating.md. --socket (default $ROTA_SOCKET, else rotad's default\n"
    "path) names rotad. Exit codes: 0 ok; 1 rotad unreachable (nothing printed); 2 usage error.\n";

int rota_metrics_main(int argc, char **argv)
{
    const char *sock = getenv("ROTA_SOCKET");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
            sock = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(metrics_usage, stdout);
            return ROTA_EXIT_OK;
        } else {
            fprintf(stderr, "rota metrics: fatal: unknown or incomplete argument '%s'\n%s", argv[i], metrics_usage);
            return ROTA_EXIT_USAGE;
        }
    }
    conn_t *c;
    if (rota_observe_open("rota metrics", sock, &c)) return ROTA_EXIT_FAIL;
    const rota_table_t *t;
    int rc = conn_table(c, &t);
    if (rc) {
        fprintf(stderr, "rota metrics: fatal: rotad did not send its client table: %s\n", strerror(-rc));
        conn_close(c);
        return ROTA_EXIT_FAIL;
    }
    rc = prom_render(stdout, conn_region(c), t, rota_sample_now_ns());
    conn_table_free(t);
    conn_close(c);
    if (rc || fflush(stdout)) {
        fprintf(stderr, "rota metrics: fatal: unable to write the metrics\n");
        return ROTA_EXIT_FAIL;
    }
    return ROTA_EXIT_OK;
}
