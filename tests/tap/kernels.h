/* kernels.h - the PTX of tools/kernels/kernels.cu, embedded at build time (see Makefile). */
#ifndef ROTA_TAP_KERNELS_H
#define ROTA_TAP_KERNELS_H
#include <stddef.h>
extern const char rota_kernels_ptx[];
extern const size_t rota_kernels_ptx_size;
#endif
