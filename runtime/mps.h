/* mps.h - rotad --mps: an MPS control daemon for the node's GPUs, each class's share of their SMs, and what rotad
 * does when the daemon goes. */
#ifndef ROTA_MPS_H
#define ROTA_MPS_H

#include "runtime/abi.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * With --mps rotad starts NVIDIA's MPS control daemon (`CONTROL -d`; CONTROL is --mps-control, default
 * nvidia-cuda-mps-control, searched in PATH), or attaches to one that already answers, and publishes each class's
 * share of the SMs in region.mps_pct (high 100, normal and low --mps-share, default 60 and 50): librota sets
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from it before the process's first context (shim/client-mps.c). The daemon
 * is found by CUDA_MPS_PIPE_DIRECTORY, as NVIDIA's clients find it: rotad's environment is the daemon's.
 *
 * Every --mps-check-ms rotad asks the daemon a question (get_default_active_thread_percentage). When it does not
 * answer, rotad logs it, zeroes the shares (processes that start meanwhile run time-sliced, with rota's holds,
 * which never stop) and starts a daemon again; once one answers, the shares come back. Work of the clients of a
 * server that died fails as the driver makes it fail; rotad does not touch it. A daemon rotad started, it stops
 * (`quit`) when it stops; one it attached to, it leaves.
 */
#define MPS_CONTROL_DEFAULT "nvidia-cuda-mps-control"
#define MPS_CHECK_MS_DEFAULT 1000u

typedef struct mps_opts {
    bool on;                            /* --mps */
    const char *control;                /* --mps-control PATH */
    unsigned pct[ROTA_PRIO_COUNT];      /* share of the SMs per class (rota_prio), 1..100; high's is 100 */
    unsigned check_ms;                  /* --mps-check-ms */
} mps_opts_t;

void mps_opts_init(mps_opts_t *o);
/* --mps-share CLASS=PCT[,CLASS=PCT]: normal and low only (high is unrestricted), PCT 1..100, a lower class not
 * above a higher one once all are parsed (mps_opts_check). 0, or -EINVAL with one message in err. */
int mps_share_parse(mps_opts_t *o, const char *val, char *err, size_t errlen);
int mps_opts_check(const mps_opts_t *o, char *err, size_t errlen);

typedef struct mps mps_t;
/* Starts or attaches to the daemon, publishes the shares in r and starts the check thread. 0, or -errno with one
 * message in err (nothing left running). log_level as rotad's (0 warnings, 1 info, 2 debug). */
int mps_start(const mps_opts_t *o, rota_region_t *r, int log_level, mps_t **out, char *err, size_t errlen);
/* Stops the check thread, zeroes the shares, and quits the daemon if mps_start started it. NULL: nothing. */
void mps_stop(mps_t *m);

#endif
