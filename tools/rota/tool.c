/* tool.c - rota workload, rota sim-stat: run the helper programs rota ships, wherever rota itself lies. */
#include "tools/rota/rota.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * The helpers (the benchmark job player, simcuda's counters) are no commands of their own on PATH once installed:
 * generic names like "workload" do not belong in /usr/local/bin. They lie beside rota in a build tree
 * (build/bin) and in PREFIX/libexec/rota after make install; rota finds them relative to its own executable, so
 * the same quick start works from both.
 */
typedef struct rota_tool {
    const char *cmd;  /* rota's subcommand */
    const char *prog; /* the program it runs */
} rota_tool_t;

static const rota_tool_t rota_tools[] = {
    {"workload", "workload"},
    {"sim-stat", "simcuda-stat"},
};

/* Writes dir/rel/prog into out; returns 0 or -ENAMETOOLONG. */
static int rota_tool_path(char *out, size_t len, const char *dir, const char *rel, const char *prog)
{
    int n = snprintf(out, len, "%s%s/%s", dir, rel, prog);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int rota_tool_main(int argc, char **argv)
{
    (void)argc;
    const rota_tool_t *t = NULL;
    for (size_t i = 0; i < sizeof rota_tools / sizeof rota_tools[0]; i++)
        if (!strcmp(argv[0], rota_tools[i].cmd)) t = &rota_tools[i];
    if (t == NULL) return ROTA_EXIT_USAGE;

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) {
        fprintf(stderr, "rota %s: fatal: unable to find rota's own executable: %s\n", t->cmd, strerror(errno));
        return ROTA_EXIT_FAIL;
    }
    self[n] = '\0';
    const char *dir = dirname(self);
    /* the build tree first (beside rota), then the installed layout (BINDIR/../libexec/rota) */
    static const char *const rels[] = {"", "/../libexec/rota"};
    char tried[2][PATH_MAX];
    for (size_t i = 0; i < 2; i++) {
        if (rota_tool_path(tried[i], sizeof tried[i], dir, rels[i], t->prog) != 0) {
            tried[i][0] = '\0';
            continue;
        }
        if (access(tried[i], X_OK) != 0) continue;
        argv[0] = tried[i];
        execv(tried[i], argv);
        fprintf(stderr, "rota %s: fatal: unable to run %s: %s\n", t->cmd, tried[i], strerror(errno));
        return ROTA_EXIT_FAIL;
    }
    fprintf(stderr, "rota %s: fatal: unable to find %s (looked for %s and %s)\n", t->cmd, t->prog, tried[0],
            tried[1]);
    return ROTA_EXIT_FAIL;
}
