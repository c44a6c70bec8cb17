/* reload.h - SIGHUP: rotad reads its config file again and applies it to new decisions, keeping its clients. */
#ifndef ROTA_RELOAD_H
#define ROTA_RELOAD_H

#include "runtime/abi.h"
#include "runtime/config.h"

#include <stddef.h>

/* Loads path with config_load and, when it parses and names the same groups and users (same paths and uids, in
 * the same order: a group's index in the table is fixed while clients are counted in it), makes it *cfg and
 * writes the new group and user limits into rotad's table. Everything rotad reads from *cfg per decision applies
 * from then on (credit, limits, per-user caps, hello timeout, max weight, who may run high); what it took at
 * start stays (high-stall-ms and doorbell-max-hz, given to the scheduler thread; grace-ms). On error *cfg and the
 * table are untouched and err holds "FILE:LINE: what" or why the file cannot apply (-errno). Returns 0 with a
 * summary in err. */
int reload_config(const char *path, config_t *cfg, rota_table_t *t, char *err, size_t errlen);

#endif
