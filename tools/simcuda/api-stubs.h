/* api-stubs.h - CUDA 13's whole Driver API as NVIDIA's headers declare it (cuda-api.def): lookups and stubs. */
#ifndef SIMCUDA_API_STUBS_H
#define SIMCUDA_API_STUBS_H

#include <stdbool.h>

/*
 * The newest variant of base that cuGetProcAddress knows at version (per_thread: the _ptds/_ptsz row, if
 * there is one at or below version): its version in *ver and its address in *fn (a simcuda function, or a stub
 * returning CUDA_ERROR_NOT_SUPPORTED). 1 when found, 0 when base has variants but none at or below version
 * (VERSION_NOT_SUFFICIENT), -1 when base is not a driver entry point.
 */
int api_stubs_find(const char *base, int version, bool per_thread, int *ver, void **fn);

#endif
