/* slice.h - a short CPU time slice for a thread that wakes often and runs briefly, so that it runs soon after it
 * wakes on a busy host. */
#ifndef ROTA_SLICE_H
#define ROTA_SLICE_H

#include <stdint.h>

/*
 * rota and simcuda hand work over through thread wake-ups: a completion wakes librota's tracker, which releases
 * the held lower classes; rotad's scheduler wakes to decide shares; simcuda's stream threads wake at a kernel's
 * end. On a host whose CPUs are busy, Linux's EEVDF scheduler (6.12 and later) runs a woken thread before the
 * one on the CPU only if its virtual deadline is sooner, and a thread's deadline is its eligible time plus its
 * slice (3 ms by default, sched_attr.sched_runtime when the thread asked for one: 0.1 to 100 ms, no privilege
 * needed). These threads run for microseconds per wake-up, so they ask for the shortest slice: on a CPU shared
 * with a busy loop, mix (a) then lost half as much of its busy fraction (docs/benchmarks.md, How much the host
 * matters). Older kernels accept the call and ignore the slice.
 */
#define SLICE_SHORT_NS 100000u

/* The kernel's struct sched_attr (include/uapi/linux/sched/types.h), version 1 (SCHED_ATTR_SIZE_VER1), for
 * sched_getattr/sched_setattr: glibc declares neither it nor the calls; <linux/sched/types.h> clashes with
 * <sched.h>. */
typedef struct slice_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
} slice_attr_t;

_Static_assert(sizeof(slice_attr_t) == 56, "struct sched_attr, version 1");

/* Asks for a slice of ns for the calling thread, keeping its policy and nice value; a thread that is not
 * SCHED_OTHER or SCHED_BATCH (real-time, SCHED_IDLE) is left as it is. 0 or -errno (-ENOSYS: no sched_setattr). */
int slice_request(uint64_t ns);

#endif
