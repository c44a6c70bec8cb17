/* visible.h - entries of a CUDA_VISIBLE_DEVICES list, read without a driver. */
#ifndef ROTA_VISIBLE_H
#define ROTA_VISIBLE_H

#include <stddef.h>

/* Copies the idx-th comma-separated entry of list (NULL: none) into out (n bytes): 0, or -1 when the list has no
 * such entry, the entry is empty, or it does not fit. `rota run --gpu N` and librota's ROTA_GPU=N read a preset
 * list this way. */
int visible_entry(const char *list, int idx, char *out, size_t n);

#endif
