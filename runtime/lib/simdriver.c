/* simdriver.c - where no CUDA driver loads, rota's programs use simcuda from their own build or install. */
#include "runtime/lib/simdriver.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool simdriver_needed(void)
{
    const char *env = getenv("ROTA_REAL_LIBCUDA");
    if (env && *env) return false;
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == NULL;
}

int simdriver_dir(char *dir, size_t n)
{
    /* Relative to the program's own folder, the install's private folder first. These are the places the build
     * and `make install` put simcuda; a real driver found there instead (PREFIX/lib) is a driver all the same. */
    static const char *const rel[] = {"../lib/rota", "../../lib/rota", "../lib"};
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -ENOENT;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -ENOENT;
    *slash = 0;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char folder[PATH_MAX + 16], real[PATH_MAX], lib[PATH_MAX + 16];
        if (snprintf(folder, sizeof folder, "%s/%s", exe, rel[i]) >= (int)sizeof folder) return -ENAMETOOLONG;
        if (!realpath(folder, real)) continue;
        if (snprintf(lib, sizeof lib, "%s/libcuda.so.1", real) >= (int)sizeof lib) return -ENAMETOOLONG;
        if (access(lib, R_OK) != 0) continue;
        if (snprintf(dir, n, "%s", real) >= (int)n) return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}
