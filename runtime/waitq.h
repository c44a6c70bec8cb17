/* waitq.h - memory requests that did not fit: queued per GPU, served by priority then arrival. */
#ifndef ROTA_WAITQ_H
#define ROTA_WAITQ_H

#include "runtime/abi.h"

#include <stdbool.h>

#include <stdint.h>

/* Memory requests one client may have queued at once (librota queues one per allocating thread); per user:
 * config.h max-waits-per-user. */
#define WAITQ_MAX_PER_CLIENT 64

typedef struct waiter {
    unsigned slot, gen;   /* who asked (gen guards against a reused slot) */
    uint32_t seq;         /* the client's request number, echoed in the answer */
    unsigned dev;
    uint64_t bytes;
    enum rota_prio prio;
    uint64_t arrival;     /* order of arrival, node-wide */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC */
    uint64_t since_ns;    /* CLOCK_MONOTONIC when it was queued (set by the caller: statistics) */
    struct waiter *next;
} waiter_t;

typedef struct waitq {
    rota_region_t *r;     /* keeps region devices[].waiters and table slots[].waiting in step */
    rota_table_t *t;
    waiter_t *head;       /* sorted by (prio, arrival) */
    uint64_t arrivals;
    unsigned count;
} waitq_t;

/* Called for every request that leaves the queue: status 0 (granted, already charged), -ENOMEM (timed out)
 * or whatever waitq_flush was given. The waiter is freed after the call returns. */
typedef void waitq_answer_fn(void *ctx, const waiter_t *w, int status);

void waitq_init(waitq_t *q, rota_region_t *r, rota_table_t *t);
/* Queues a request; NULL when out of memory. */
waiter_t *waitq_add(waitq_t *q, unsigned slot, unsigned gen, uint32_t seq, unsigned dev, uint64_t bytes,
                    enum rota_prio prio, uint64_t deadline_ns);
/* Removes w without answering (and frees it). */
void waitq_remove(waitq_t *q, waiter_t *w);
/* Whether w is still queued. */
bool waitq_contains(const waitq_t *q, const waiter_t *w);
/* Grants, in order, every request on dev that fits now. A request blocked by its own client's (or group's)
 * limit is skipped; the first one blocked by the GPU's capacity stops the walk, so a large request is not
 * starved by smaller ones behind it, unless every client holding memory on dev is waiting there (nobody could
 * free for it: the requests of other clients behind it that fit are granted, or all would wait until they time
 * out), or it asks for more than its user's fair share of dev (capacity / users with memory or a request there):
 * the requests behind it that fit are granted then too (docs/design/memory.md, "Fairness"). A client's own
 * requests never overtake each other. Returns how many were granted. */
unsigned waitq_serve(waitq_t *q, unsigned dev, waitq_answer_fn *fn, void *ctx);
/* Answers -ENOMEM to every request whose deadline is <= now; returns how many. */
unsigned waitq_expire(waitq_t *q, uint64_t now_ns, waitq_answer_fn *fn, void *ctx);
/* The earliest deadline, or UINT64_MAX when empty. */
uint64_t waitq_next_deadline(const waitq_t *q);
/* Drops every request of a client without answering (it is gone). */
void waitq_drop_slot(waitq_t *q, unsigned slot);
/* Answers status to everything and empties the queue (shutdown). */
void waitq_flush(waitq_t *q, int status, waitq_answer_fn *fn, void *ctx);
/* Requests queued of slot, and of the slots whose uid is uid (rotad's caps on queued requests). */
void waitq_count_owner(const waitq_t *q, unsigned slot, uint32_t uid, unsigned *of_slot, unsigned *of_uid);
/* Requests queued on dev. */
unsigned waitq_count_dev(const waitq_t *q, unsigned dev);

#endif
