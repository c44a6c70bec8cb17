/* sched-policy.c - the table of launch policies among equals (rotad --policy), and the options they own. */
#include "runtime/sched-policy.h"

#include "runtime/lib/parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The table: one row per policy, sched-NAME.c defining sched_policy_NAME; the first row is the default. Adding a
 * policy is its file and its row here. */
#define SCHED_POLICY_ROWS(X) \
    X(share)                 \
    X(quantum)

#define SCHED_POLICY_DECLARE(n) extern const sched_policy_t sched_policy_##n;
SCHED_POLICY_ROWS(SCHED_POLICY_DECLARE)
#define SCHED_POLICY_ROW(n) &sched_policy_##n,
static const sched_policy_t *const sched_policies[] = {SCHED_POLICY_ROWS(SCHED_POLICY_ROW)};
#define SCHED_NPOLICIES (sizeof sched_policies / sizeof sched_policies[0])

const sched_policy_t *sched_policy_at(unsigned i)
{
    return i < SCHED_NPOLICIES ? sched_policies[i] : NULL;
}

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

const sched_policy_t *sched_policy_opt_find(const char *flag, unsigned *row)
{
    for (size_t i = 0; flag && i < SCHED_NPOLICIES; i++)
        for (unsigned j = 0; j < sched_policies[i]->nopts && j < SCHED_POLICY_OPTS_MAX; j++)
            if (!strcmp(flag, sched_policies[i]->opts[j].flag)) {
                if (row) *row = j;
                return sched_policies[i];
            }
    return NULL;
}

int sched_policy_opt_set(sched_opts_t *o, const char *flag, const char *value, char *err, size_t errlen)
{
    unsigned j;
    const sched_policy_t *p = sched_policy_opt_find(flag, &j);
    if (!p) {
        snprintf(err, errlen, "%s: not an option of any policy", flag);
        return -EINVAL;
    }
    const sched_policy_opt_t *po = &p->opts[j];
    double v;
    if (parse_double(value, po->lo, po->hi, &v)) {
        snprintf(err, errlen, "%s: '%s' is not %s in %g..%g", flag, value, po->what, po->lo, po->hi);
        return -EINVAL;
    }
    if (o->popt_of && o->popt_of != p) {
        snprintf(err, errlen, "%s: only with --policy %s", flag, p->name);
        return -EINVAL;
    }
    o->popt_of = p;
    o->popt[j] = (uint64_t)(v * po->scale + 0.5);
    return 0;
}

/* The first option given (not 0) of o->popt_of, or -1: none. */
static int sched_policy_given(const sched_opts_t *o)
{
    for (unsigned j = 0; o->popt_of && j < o->popt_of->nopts && j < SCHED_POLICY_OPTS_MAX; j++)
        if (o->popt[j]) return (int)j;
    return -1;
}

int sched_policy_resolve(sched_opts_t *o, char *err, size_t errlen)
{
    int given = sched_policy_given(o);
    if (given >= 0 && o->policy && o->policy != o->popt_of) {
        snprintf(err, errlen, "%s: only with --policy %s", o->popt_of->opts[given].flag, o->popt_of->name);
        return -EINVAL;
    }
    if (!o->policy) o->policy = given >= 0 ? o->popt_of : sched_policies[0];
    if (o->popt_of != o->policy) memset(o->popt, 0, sizeof o->popt);
    o->popt_of = o->policy;
    for (unsigned j = 0; j < o->policy->nopts && j < SCHED_POLICY_OPTS_MAX; j++)
        if (!o->popt[j]) o->popt[j] = o->policy->opts[j].def;
    return 0;
}
