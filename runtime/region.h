/* region.h - rotad's node-wide shared region, the board and the per-client channels (memfds handed out by fd
 * passing), and rotad's private table with the copies of it LIST hands out. */
#ifndef ROTA_REGION_H
#define ROTA_REGION_H

#include "runtime/abi.h"
#include "runtime/config.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct region {
    rota_region_t *r;  /* rotad's writable mapping */
    int fd;            /* the memfd (sealed against resizing and F_SEAL_FUTURE_WRITE: rotad's map is the only writable one) */
    int ro_fd;         /* a read-only file description of it: what clients get */
    rota_board_t *b;   /* the board (abi.h): rotad's mapping */
    int board_fd;      /* read-write: what high clients get (they write it too) */
    int board_ro_fd;   /* read-only: what normal and low clients get */
    rota_table_t *t;   /* the clients' details and the groups: rotad's private memory, never shared */
} region_t;

/* Creates the region, the board and the table (groups from cfg, which may be NULL). Returns 0 or -errno. */
int region_create(region_t *rg, const config_t *cfg);
void region_destroy(region_t *rg);

/* A new channel for a client: *fd (to send, then close) and rotad's own mapping *map. 0 or -errno. */
int region_channel_create(uint32_t slot, uint32_t gen, rota_channel_t **map, int *fd);
void region_channel_destroy(rota_channel_t *map);

/* A copy of the table for a viewer of this uid (LIST): with every client when all, else only the slots whose uid
 * is uid (the others read FREE and are counted in hidden_clients) and the groups one of those is charged to. A
 * memfd of ROTA_TABLE_MAP_SIZE bytes sealed against every write, for the viewer to map read-only: its descriptor,
 * or -errno. Reads the live table field by field (the scheduler thread writes to it meanwhile). */
int region_table_copy(const region_t *rg, uint32_t uid, bool all);

#endif
