/* gpus.h - the GPUs a CUDA driver shows this process: UUID and total memory, through the Driver API. */
#ifndef ROTA_GPUS_H
#define ROTA_GPUS_H

#include "runtime/abi.h"

#include <stddef.h>

/*
 * Loads the driver (ROTA_REAL_LIBCUDA, else libcuda.so.1 by the usual search), calls cuInit and lists at most
 * ROTA_MAX_DEVICES GPUs into out[], with no context created. The driver stays loaded. Used by rotad's probe (in
 * a child process) and by `rota run` (before exec).
 *
 * Returns the number of GPUs; -ENODEV (with why) when the driver initialised to CUDA_ERROR_NO_DEVICE; or -EIO
 * with one sentence in why for everything else (no driver, missing entry points, a failing query).
 */
int gpus_list(rota_place_cand_t out[ROTA_MAX_DEVICES], char *why, size_t whylen);

#endif
