/* api-test.h - what the simcuda API tests share: a private node per test program (SIMCUDA_NODE, removed at
 * the end) and gates, host functions that hold their stream until the test opens them. */
#ifndef ROTA_TESTS_SIMCUDA_API_TEST_H
#define ROTA_TESTS_SIMCUDA_API_TEST_H

#include <cuda.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char node[64];

/* Names this program's node "api-<tag>-<pid>" and sizes its device memory (SIMCUDA_MEM, e.g. "1G"). */
static inline void node_setup(const char *tag, const char *mem)
{
    snprintf(node, sizeof node, "api-%s-%ld", tag, (long)getpid());
    setenv("SIMCUDA_NODE", node, 1);
    setenv("SIMCUDA_MEM", mem, 1);
}

static inline void node_remove(void)
{
    char p[80];
    snprintf(p, sizeof p, "/%s", node);
    shm_unlink(p);
}

/* A gate: a host function (gate_fn, with the gate as its data) that blocks its stream until gate_open. */
typedef struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int open;
} gate_t;

static inline void gate_init(gate_t *g)
{
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->open = 0;
}

static inline void CUDA_CB gate_fn(void *p)
{
    gate_t *g = p;
    pthread_mutex_lock(&g->m);
    while (!g->open)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static inline void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}

#endif
