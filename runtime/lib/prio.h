/* prio.h - the priority class: its one name table and parser, and its encoding in PLACE flags. */
#ifndef ROTA_PRIO_H
#define ROTA_PRIO_H

#include "runtime/abi.h"

#include <stdint.h>

/*
 * The class itself is enum rota_prio (abi.h: the value a client sends in HELLO and rotad writes in slot.priority;
 * lower = more urgent). Everything that names or parses a class goes through here: librota's ROTA_PRIORITY,
 * `rota run --priority`, rotad's logs, `rota status`/`rota top`, and (by the same table) scripts/bench.
 */

/* "high", "normal", "low"; "?" for a value that is no class. */
const char *prio_name(enum rota_prio prio);
/* One of the names, in any case ("HIGH" = "high", as ROTA_PRIORITY always accepted): 0 and *prio, or -EINVAL
 * (*prio untouched). */
int prio_parse(const char *s, enum rota_prio *prio);

/* The class in a PLACE request's flags (ROTA_PLACE_HIGH / ROTA_PLACE_LOW, neither: normal), both ways. */
uint32_t prio_place_flags(enum rota_prio prio);
enum rota_prio prio_from_place_flags(uint32_t flags);

#endif
