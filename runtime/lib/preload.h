/* preload.h - the LD_PRELOAD that rota gives a job: librota.so once, after any sanitizer runtime. */
#ifndef ROTA_PRELOAD_H
#define ROTA_PRELOAD_H

#include <stddef.h>

/*
 * Writes into out (n bytes) the LD_PRELOAD made from old (':' or ' ' separated; NULL: empty): its sanitizer
 * runtimes first (they must lead the initial library list), then lib (NULL: none), then the rest of old. Every
 * librota.so already in old is dropped, so nested launchers (a batch step's srun, rota run inside rota run)
 * preload it once. 0, or -ENAMETOOLONG when it does not fit.
 */
int preload_compose(const char *lib, const char *old, char *out, size_t n);

#endif
