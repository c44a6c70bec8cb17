/* reload.c - applies a re-read config file to a running rotad: limits and policy, clients kept. */
#include "runtime/reload.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int reload_config(const char *path, config_t *cfg, rota_table_t *t, char *err, size_t errlen)
{
    static config_t next; /* 12 KB: off the event loop's stack; only the loop's thread reloads */
    int rc = config_load(path, &next, err, errlen);
    if (rc) return rc;
    bool same = next.ngroups == cfg->ngroups && next.nusers == cfg->nusers;
    for (unsigned i = 0; same && i < next.ngroups; i++) same = !strcmp(next.groups[i].path, cfg->groups[i].path);
    for (unsigned i = 0; same && i < next.nusers; i++) same = next.users[i].uid == cfg->users[i].uid;
    if (!same) {
        snprintf(err, errlen,
                 "%s: its group and user lines name other groups or users than rotad runs with (their memory is "
                 "counted by index): restart rotad to change them",
                 path);
        return -EBUSY;
    }
    unsigned changed = 0;
    for (unsigned i = 0; i < next.ngroups; i++) {
        if (t->groups[i].limit != next.groups[i].limit) changed++;
        t->groups[i].limit = next.groups[i].limit;
    }
    for (unsigned i = 0; i < next.nusers && next.ngroups + i < ROTA_MAX_GROUPS; i++) { /* after the cgroup ones */
        rota_group_t *g = &t->groups[next.ngroups + i];
        if (g->limit != next.users[i].limit) changed++;
        g->limit = next.users[i].limit;
    }
    *cfg = next;
    snprintf(err, errlen, "credit %llu bytes; %u group or user limit%s changed", (unsigned long long)cfg->credit,
             changed, changed == 1 ? "" : "s");
    return 0;
}
