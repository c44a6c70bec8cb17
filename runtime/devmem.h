/* devmem.h - what the driver says a process holds and does on a GPU (NVML), where the node can tell. */
#ifndef ROTA_DEVMEM_H
#define ROTA_DEVMEM_H

#include "runtime/abi.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * rotad trusts no number a client sends, but an ADOPT ("I already hold N bytes") has no allocation of rotad's
 * behind it. Where the node's NVML (libnvidia-ml.so.1; ROTA_REAL_NVML names another path, or "none") answers,
 * the driver's per-process figure bounds it (issue 32, item 1). NVML is loaded at the first question, never at
 * start, and never required: a node without it, or one whose NVML does not answer, keeps rotad's other rules.
 * The pids are rotad's (SO_PEERCRED): rotad must share the node's pid namespace, as NVML's pids are the host's.
 *
 * The per-GPU process list is kept DEVMEM_FRESH_NS and asked again at most once a millisecond, so a client's
 * flood of ADOPTs costs rotad at most 1,000 NVML queries a second per GPU. Thread-safe: rotad's event loop asks
 * about memory, its scheduler thread about device work.
 */
#define DEVMEM_FRESH_NS 5000000ull

/*
 * What NVML says process pid holds on the GPU with this UUID, into *bytes (0 if NVML lists no such process
 * there). want: the figure the caller needs; a cached figure below it is asked again if the cache is older than
 * a millisecond. Returns 0, or -ENODATA when NVML cannot tell (absent, not answering, the GPU unknown to it, no
 * per-process figure); then, the first time only, why says why (else why[0] is 0).
 */
int devmem_proc_bytes(const uint8_t uuid[ROTA_UUID_LEN], pid_t pid, uint64_t want, uint64_t *bytes, char *why,
                      size_t whylen);

/*
 * Device work (issue 32, item 7: a high client's progress judged by what the device did, not by the device time
 * it writes itself): the CLOCK_MONOTONIC time of the latest NVML answer (nvmlDeviceGetProcessUtilization) in
 * which process pid used the GPU's SMs, into *seen_ns (0: never seen). The GPU's samples are asked for at most
 * every DEVMEM_UTIL_NS, so progress shows up to that much late (and NVML's own sampling period, about 1/6 s on
 * real GPUs, adds to it). Returns 0, or -ENODATA when NVML cannot tell (why as for devmem_proc_bytes, said once).
 */
#define DEVMEM_UTIL_NS 50000000ull
int devmem_proc_sm(const uint8_t uuid[ROTA_UUID_LEN], pid_t pid, uint64_t *seen_ns, char *why, size_t whylen);

/* Unloads NVML (rotad's exit; the tests' restarts). */
void devmem_close(void);

#endif
