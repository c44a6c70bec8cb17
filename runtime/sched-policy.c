/* sched-policy.c - the table of launch policies among equals (rotad --policy): one row per policy file. */
#include "runtime/sched-policy.h"

#include <string.h>

static const sched_policy_t *const sched_policies[] = {
    &sched_policy_share, /* the default: first */
    &sched_policy_quantum,
};
#define SCHED_NPOLICIES (sizeof sched_policies / sizeof sched_policies[0])

const sched_policy_t *sched_policy_find(const char *name)
{
    for (size_t i = 0; name && i < SCHED_NPOLICIES; i++)
        if (!strcmp(name, sched_policies[i]->name)) return sched_policies[i];
    return NULL;
}

const char *sched_policy_names(void)
{
    static char names[128];
    if (!names[0]) {
        for (size_t i = 0; i < SCHED_NPOLICIES; i++) {
            if (i) strncat(names, "|", sizeof names - strlen(names) - 1);
            strncat(names, sched_policies[i]->name, sizeof names - strlen(names) - 1);
        }
    }
    return names;
}
