/* rota.h - the rota tool's subcommands: each is a main-like function registered in rota.c's table. */
#ifndef ROTA_TOOL_H
#define ROTA_TOOL_H

/* Exit codes shared by every subcommand (documented in the usage). */
enum rota_exit {
    ROTA_EXIT_OK = 0,
    ROTA_EXIT_FAIL = 1,    /* the command ran and failed (e.g. rotad unreachable) */
    ROTA_EXIT_USAGE = 2,   /* bad arguments */
    /* rota run returns CMD's own status, so its own failures use the codes of env(1)/timeout(1) instead: */
    ROTA_EXIT_RUN_FAIL = 125,     /* rota run itself failed (usage error included) */
    ROTA_EXIT_RUN_NOEXEC = 126,   /* CMD was found but could not be executed */
    ROTA_EXIT_RUN_NOTFOUND = 127, /* CMD was not found */
};

/* argv[0] is the subcommand's name. */
int rota_status_main(int argc, char **argv);
int rota_run_main(int argc, char **argv);
int rota_top_main(int argc, char **argv);
int rota_metrics_main(int argc, char **argv);
int rota_trace_main(int argc, char **argv);
/* rota workload, rota sim-stat: exec the helper program of that name (tool.c); returns only on failure. */
int rota_tool_main(int argc, char **argv);

#endif
