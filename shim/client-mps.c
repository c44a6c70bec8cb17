/* client-mps.c - rotad --mps: this process's share of an MPS server's SMs, applied before its first context. */
#include "shim/client-internal.h"

#include "runtime/lib/parse.h"
#include "shim/log.h"
#include "shim/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * An MPS client's share of the SMs is CUDA_MPS_ACTIVE_THREAD_PERCENTAGE in its environment when the driver
 * creates its context. rotad --mps publishes each class's share in the region (region.mps_pct, 0: none); this
 * sets the variable from the share of the class rotad registered the process in (a high request rotad's policy
 * demoted gets normal's), before the process's first real driver call. The process may only lower it: a value
 * it set itself below the class's share stays. The region is rotad's, read-only here: nothing the process
 * writes changes the share it is given. (A process that bypasses librota sets its own environment, as it could
 * without rota: docs/design/scheduling.md, MPS mode, says what that means.)
 */
void client_mps(void)
{
    conn_t *c = client_conn_lock();
    if (!c) return;
    int prio = (int)rota_options()->priority;
    if (prio == ROTA_PRIO_HIGH && !conn_high(c)) prio = ROTA_PRIO_NORMAL;
    unsigned pct = prio >= 0 && prio < ROTA_PRIO_COUNT ? atomic_load(&conn_region(c)->mps_pct[prio]) : 0;
    client_conn_unlock();
    if (pct == 0 || pct > 100) return; /* no MPS mode (or a value no rotad writes) */
    const char *cur = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    double have;
    if (cur && parse_double(cur, 0.0, 100.0, &have) == 0 && have > 0 && have <= pct) {
        rota_log(ROTA_LOG_DEBUG, "MPS: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is within this class's %u %%: kept", cur,
                 pct);
        return;
    }
    char v[8];
    snprintf(v, sizeof v, "%u", pct);
    if (setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v, 1)) {
        rota_log(ROTA_LOG_WARN, "MPS: unable to set CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s: %s", v, strerror(errno));
        return;
    }
    rota_log(ROTA_LOG_DEBUG, "MPS: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s (this class's share of the SMs)%s%s", v,
             cur ? ", lowered from " : "", cur ? cur : "");
}
