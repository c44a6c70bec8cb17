/* client-process.c - the client's start in a process: wires its files together, connects, places the process. */
#include "shim/client-internal.h"

/*
 * The top of the client of rotad: client.c (the connection, the devices, the memory ledger) calls none of the
 * files above it by name, and the tracker thread does not name the launch gate; what they must have done at
 * their points (a connection made, a fork child, memory held, a launch completed) is set here, once per process
 * image, before any hook runs. A fork child keeps it.
 */
void client_init(void)
{
    client_set_hooks(&(client_hooks_t){
        .connected = launch_warm,
        .fork_child = client_mempool_reset_child,
        .holds_memory = tracker_start,
    });
    tracker_set_handler(&(tracker_handler_t){.complete = launch_complete, .idle_due = launch_idle_due,
                                            .sample = launch_sample_own});
}

CUresult client_process_init(void)
{
    if (!client_process_connect()) return CUDA_SUCCESS; /* rota is off */
    client_mps();   /* before any real driver call: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE */
    client_place(); /* before any real driver call: CUDA_VISIBLE_DEVICES */
    return client_process_status();
}
