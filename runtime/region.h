/* region.h - rotad's node-wide shared region, the board and the per-client channels (memfds handed out by fd
 * passing). */
#ifndef ROTA_REGION_H
#define ROTA_REGION_H

#include "runtime/abi.h"
#include "runtime/config.h"

#include <stdint.h>

typedef struct region {
    rota_region_t *r;  /* rotad's writable mapping */
    int fd;            /* the memfd (sealed against resizing and F_SEAL_FUTURE_WRITE: rotad's map is the only writable one) */
    int ro_fd;         /* a read-only file description of it: what clients get */
    rota_board_t *b;   /* the board (abi.h): rotad's mapping */
    int board_fd;      /* read-write: what high clients get (they write it too) */
    int board_ro_fd;   /* read-only: what normal and low clients get */
} region_t;

/* Creates the region (groups from cfg, which may be NULL) and the board. Returns 0 or -errno. */
int region_create(region_t *rg, const config_t *cfg);
void region_destroy(region_t *rg);

/* A new channel for a client: *fd (to send, then close) and rotad's own mapping *map. 0 or -errno. */
int region_channel_create(uint32_t slot, uint32_t gen, rota_channel_t **map, int *fd);
void region_channel_destroy(rota_channel_t *map);

#endif
