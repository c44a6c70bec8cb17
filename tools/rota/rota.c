/* rota.c - the rota tool: dispatches to subcommands through one table (status, run, top, metrics, trace, and the helper programs). */
#include "tools/rota/rota.h"

#include "runtime/lib/version.h"

#include <stdio.h>
#include <string.h>

typedef struct rota_cmd {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} rota_cmd_t;

static const rota_cmd_t rota_cmds[] = {
    {"status", rota_status_main, "show GPUs, memory ledger and clients of this node's rotad [--json]"},
    {"run", rota_run_main, "run a command under rota: GPU placement, priority, weight, memory limit"},
    {"top", rota_top_main, "live per-GPU busy fraction and memory, per-client state, launches/s, device time"},
    {"metrics", rota_metrics_main, "print rotad's metrics once in the Prometheus text format"},
    {"trace", rota_trace_main, "turn ROTA_TRACE files into a Perfetto/Chrome trace (JSON)"},
    {"workload", rota_tool_main, "the benchmark job player (rota workload --help; docs/workload.md)"},
    {"sim-stat", rota_tool_main, "simcuda's counters of the simulated GPUs (rota sim-stat --help)"},
};

static void rota_usage(FILE *f)
{
    fprintf(f, "usage: rota COMMAND [ARGS...]\n       rota --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof rota_cmds / sizeof rota_cmds[0]; i++)
        fprintf(f, "  %-8s %s\n", rota_cmds[i].name, rota_cmds[i].summary);
    fprintf(f, "\n'rota COMMAND --help' describes a command.\n"
               "Exit codes: 0 success; 1 the command failed (e.g. rotad is not running); 2 usage error.\n"
               "rota run returns its command's status instead (125 its own error, 126/127 cannot execute/no such command).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        rota_usage(stderr);
        return ROTA_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        rota_usage(stdout);
        return ROTA_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("rota %s\n", ROTA_VERSION);
        return ROTA_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof rota_cmds / sizeof rota_cmds[0]; i++)
        if (!strcmp(argv[1], rota_cmds[i].name)) return rota_cmds[i].main(argc - 1, argv + 1);
    fprintf(stderr, "rota: fatal: unknown command '%s'\n", argv[1]);
    rota_usage(stderr);
    return ROTA_EXIT_USAGE;
}
