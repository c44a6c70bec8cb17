/* simdriver.h - where no CUDA driver loads, rota's programs use simcuda from their own build or install. */
#ifndef ROTA_SIMDRIVER_H
#define ROTA_SIMDRIVER_H

#include <stdbool.h>
#include <stddef.h>

/* True when rota should fall back to simcuda: ROTA_REAL_LIBCUDA is unset and dlopen("libcuda.so.1") fails. A
 * driver that loads stays loaded (the callers exec or exit soon after), so a real driver is never shadowed. */
bool simdriver_needed(void);

/*
 * The folder that holds simcuda's libcuda.so.1 beside this program: ../lib (the build tree: build/bin and
 * build/lib), ../lib/rota (an install: PREFIX/bin and PREFIX/lib/rota) or ../../lib/rota (PREFIX/libexec/rota).
 * 0 with the absolute folder in dir, -ENOENT where there is none, -ENAMETOOLONG.
 */
int simdriver_dir(char *dir, size_t n);

#endif
