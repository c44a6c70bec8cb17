/* rota.h - the rota tool's subcommands: each is a main-like function registered in rota.c's table. */
#ifndef ROTA_TOOL_H
#define ROTA_TOOL_H

/* Exit codes shared by every subcommand (documented in the usage). */
enum rota_exit {
    ROTA_EXIT_OK = 0,
    ROTA_EXIT_FAIL = 1,    /* the command ran and failed (e.g. rotad unreachable) */
    ROTA_EXIT_USAGE = 2,   /* bad arguments */
};

/* argv[0] is the subcommand's name. */
int rota_status_main(int argc, char **argv);

#endif
