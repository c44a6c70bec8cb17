/* sched.h - rotad's launch scheduler: priority holds, bounded lower-class work, weighted fair share. */
#ifndef ROTA_SCHED_H
#define ROTA_SCHED_H

#include "runtime/abi.h"
#include "runtime/sched-opts.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * One scheduler thread per rotad. It sleeps in futex_waitv on the doorbells of every registered client's channel
 * (up to SCHED_WAITV_MAX; more clients are seen at the next tick) and on a private control word, so a high
 * client's first launch after idling reaches it in microseconds with no socket round trip. Per GPU (the channel's
 * sched_dev; clients whose GPU rotad does not know share GPU key 0) it then decides:
 *
 *   priority   while a high client is active there, every normal and low client is held (ROTA_HOLD_PRIO);
 *              released at once when the last high client is idle (nothing in flight, no launch for idle_ns,
 *              or sooner by the window it learned: abi.h) or gone. The hold starts before this thread runs:
 *              the high client's activating launch marks the board (abi.h), which the lower clients' gates
 *              obey; each tick reads the board first, publishes
 *              the slot holds, then clears what it read (and adds up the high clients' latency figures).
 *   share      among the active normal and low clients that are not priority-held, device time is sampled every
 *              tick: each client with launches in flight gets tick/n of the device (n = clients with work in
 *              flight on that GPU), which holds on a real GPU as on simcuda because it only uses the in-flight
 *              counts the clients' completion trackers keep. A client's virtual time grows by its device time
 *              divided by its weight, and a low client's also times low_factor: normal and low share one
 *              virtual time, so low is a soft priority (low_factor 1: each class shares on its own). A client
 *              more than 8 ticks ahead of the least-served active client it shares with is held
 *              (ROTA_HOLD_SHARE) until the others catch up. Idle clients take no part (work-conserving: a
 *              tracked lower client is idle once nothing is in flight and no thread waits to launch, after
 *              idle_low_ns), and a client that becomes active starts no further back than the least-served
 *              one's virtual time (or the group's rising floor) less 16 ticks (no banking beyond that).
 *   quantum    with rotad --policy quantum (or --quantum-ms), exclusive mode: one active client of those that share
 *              runs at a time, for a quantum, the least-served first; the others are held (ROTA_HOLD_QUANTUM).
 *
 * Writes slot.hold (futex-woken on every change), slot.sched_state, dev.held, dev.busy_permille,
 * the hold-latency counters of the devices and the board's high_pending words.
 */
typedef struct sched sched_t;

#define SCHED_WAITV_MAX 127

/* Starts the thread. 0 or -errno. */
int sched_start(rota_region_t *r, rota_table_t *t, rota_board_t *b, const sched_opts_t *o, sched_t **out);
/* Releases every hold and stops the thread. NULL is fine. */
void sched_stop(sched_t *s);
/* A registered client (the channel stays mapped until sched_client_remove returned). */
void sched_client_add(sched_t *s, unsigned slot, rota_channel_t *ch, enum rota_prio prio, unsigned weight);
/* The client is gone: its holds go, and whom it held is released before this returns. */
void sched_client_remove(sched_t *s, unsigned slot);

#endif
