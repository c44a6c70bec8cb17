/* coord.c - the coordinator client; until rotad exists every hook lets the call through unchanged. */
#include "shim/coord.h"

void coord_process_init(void) {}

CUresult coord_mem_reserve(CUdevice dev, uint64_t bytes, bool may_wait, coord_resv_t *r)
{
    r->dev = dev;
    r->bytes = bytes;
    r->token = 0;
    (void)may_wait;
    return CUDA_SUCCESS;
}

void coord_mem_commit(coord_resv_t *r, uint64_t key) { (void)r; (void)key; }
void coord_mem_abort(coord_resv_t *r) { (void)r; }
void coord_mem_release(uint64_t key) { (void)key; }
void coord_mem_view(CUdevice dev, size_t *free_bytes, size_t *total_bytes)
{
    (void)dev; (void)free_bytes; (void)total_bytes;
}
CUresult coord_launch_gate(CUstream stream) { (void)stream; return CUDA_SUCCESS; }
void coord_launch_after(CUstream stream, CUresult rc) { (void)stream; (void)rc; }
