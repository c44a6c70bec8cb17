/* probe.h - rotad learns the node's GPUs at start, from the driver, in a short-lived child process. */
#ifndef ROTA_PROBE_H
#define ROTA_PROBE_H

#include "runtime/abi.h"

#include <stddef.h>

/* How long the child may take (a real driver's cuInit can take seconds on a node with many GPUs). */
#define PROBE_TIMEOUT_MS 30000

/*
 * Enumerates the GPUs of the driver rotad would load itself (ROTA_REAL_LIBCUDA, else libcuda.so.1 by the usual
 * search): UUID and total memory of each, at most ROTA_MAX_DEVICES, into gpus[]. No context is created.
 *
 * The driver is loaded in a forked child that writes the answer to a pipe and _exits, never in rotad itself:
 * rotad holds no driver state (on simcuda, no process slot: a node's knobs stay changeable while no job is
 * attached, and simcuda-stat sees nothing of rotad), and a driver that hangs or crashes costs one log line.
 * Call it before any thread exists (the child calls dlopen).
 *
 * Returns the number of GPUs (0 included), or -1 with one sentence in why.
 */
int probe_gpus(rota_place_cand_t gpus[ROTA_MAX_DEVICES], char *why, size_t whylen);

#endif
