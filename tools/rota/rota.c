/* rota.c - the rota tool: dispatches to subcommands through one table (status; run and top come next). */
#include "tools/rota/rota.h"

#include <stdio.h>
#include <string.h>

typedef struct rota_cmd {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} rota_cmd_t;

static const rota_cmd_t rota_cmds[] = {
    {"status", rota_status_main, "show GPUs, memory ledger and clients of this node's rotad [--json]"},
};

static void rota_usage(FILE *f)
{
    fprintf(f, "usage: rota COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof rota_cmds / sizeof rota_cmds[0]; i++)
        fprintf(f, "  %-8s %s\n", rota_cmds[i].name, rota_cmds[i].summary);
    fprintf(f, "\n'rota COMMAND --help' describes a command.\n"
               "Exit codes: 0 success; 1 the command failed (e.g. rotad is not running); 2 usage error.\n");
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
    for (size_t i = 0; i < sizeof rota_cmds / sizeof rota_cmds[0]; i++)
        if (!strcmp(argv[1], rota_cmds[i].name)) return rota_cmds[i].main(argc - 1, argv + 1);
    fprintf(stderr, "rota: fatal: unknown command '%s'\n", argv[1]);
    rota_usage(stderr);
    return ROTA_EXIT_USAGE;
}
