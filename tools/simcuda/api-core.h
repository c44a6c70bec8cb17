/* api-core.h - simcuda's core: the handle registry, host allocation, the clock, process state across fork. */
#ifndef SIMCUDA_API_CORE_H
#define SIMCUDA_API_CORE_H

/*
 * The API files are compiled the way NVIDIA builds its own driver: with __CUDA_API_VERSION_INTERNAL, cuda.h
 * declares every exported name literally (cuMemAlloc and cuMemAlloc_v2, cuLaunchKernel and
 * cuLaunchKernel_ptsz, ...) and #undefs its renaming macros at the end, so each definition defines exactly
 * the symbol it names. CUDA_API_PER_THREAD_DEFAULT_STREAM is never defined here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The core is the floor of simcuda's API layer: every api-*.c file uses it, and it uses none of them (nor the
 * node model), so that what a fork must reset and what every call checks first has one home.
 */

/* ---- handle registry: every live handle, so a stale or foreign one gives CUDA_ERROR_INVALID_HANDLE ---- */
enum api_kind {
    API_KIND_CTX = 1, API_KIND_STREAM, API_KIND_EVENT, API_KIND_MODULE, API_KIND_FUNC, API_KIND_LIBRARY,
    API_KIND_POOL, API_KIND_GRAPH, API_KIND_GRAPHEXEC, API_KIND_MEMHANDLE, API_KIND_LINK,
};
int api_handle_add(const void *h, int kind);    /* 0 or -ENOMEM */
void api_handle_del(const void *h);
bool api_handle_is(const void *h, int kind);

/* calloc (never of 0 bytes). NULL on host-memory exhaustion: every caller fails its API call with
 * CUDA_ERROR_OUT_OF_MEMORY and undoes what it did; simcuda never aborts or exits a host process. */
void *api_calloc(size_t n, size_t size);
uint64_t api_now_ns(void);         /* CLOCK_MONOTONIC */

/* ---- process state ---- */
/* CUDA_SUCCESS once cuInit succeeded in this process (a forked child must call cuInit again). */
CUresult api_ready(void);
uint64_t api_gen(void);            /* bumped by every (re)initialisation after fork */
/* cuInit's steps (api-init.c), between api_core_init_lock and api_core_init_unlock. The lock installs, once,
 * the fork handler that marks a child uninitialised and re-creates the core's locks. */
void api_core_init_lock(void);
void api_core_init_unlock(void);
bool api_core_forked(void);        /* this process inherited a parent's initialisation: a forked child */
int api_core_registry_renew(void); /* the child forgets the parent's handles: 0 or -ENOMEM */
void api_core_set_ready(void);     /* this process is initialised: a new generation, api_ready succeeds */

/* Guards the capture state of streams, events and graphs (api-capture.c). */
extern pthread_mutex_t api_capture_lock;

#endif
