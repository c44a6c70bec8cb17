/* prio.c - the priority class's one name table and parser, and its PLACE flag bits. */
#include "runtime/lib/prio.h"

#include <errno.h>
#include <strings.h>

static const char *const prio_names[ROTA_PRIO_COUNT] = {
    [ROTA_PRIO_HIGH] = "high",
    [ROTA_PRIO_NORMAL] = "normal",
    [ROTA_PRIO_LOW] = "low",
};

const char *prio_name(enum rota_prio prio)
{
    return (unsigned)prio < ROTA_PRIO_COUNT ? prio_names[prio] : "?";
}

int prio_parse(const char *s, enum rota_prio *prio)
{
    for (enum rota_prio i = 0; s && i < ROTA_PRIO_COUNT; i++)
        if (!strcasecmp(s, prio_names[i])) {
            *prio = i;
            return 0;
        }
    return -EINVAL;
}

uint32_t prio_place_flags(enum rota_prio prio)
{
    return prio == ROTA_PRIO_HIGH ? ROTA_PLACE_HIGH : prio == ROTA_PRIO_LOW ? ROTA_PLACE_LOW : 0;
}

enum rota_prio prio_from_place_flags(uint32_t flags)
{
    return flags & ROTA_PLACE_HIGH ? ROTA_PRIO_HIGH : flags & ROTA_PLACE_LOW ? ROTA_PRIO_LOW : ROTA_PRIO_NORMAL;
}
