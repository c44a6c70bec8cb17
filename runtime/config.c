/* config.c - parses rotad's config file (group limits) and finds the group of a process by its cgroup. */
#include "runtime/config.h"

#include "runtime/lib/parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int config_fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int config_fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

void config_init(config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->credit = CONFIG_CREDIT_DEFAULT;
}

int config_load(const char *path, config_t *cfg, char *err, size_t errlen)
{
    config_init(cfg);
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        if (err && errlen) snprintf(err, errlen, "%s: unable to open: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
        fclose(f);
        return config_fail(err, errlen, "%s: not a regular file%s", path, S_ISDIR(st.st_mode) ? " (a directory)" : "");
    }
    char line[1024];
    unsigned lineno = 0;
    int rc = 0;
    long at = ftell(f);
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        /* fgets reads past a NUL byte, and strlen would stop there, dropping the rest of the line unseen. */
        long next = ftell(f);
        if (at >= 0 && next >= 0 && (size_t)(next - at) != len) {
            rc = config_fail(err, errlen, "%s:%u: NUL byte in the line", path, lineno);
            break;
        }
        at = next;
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = config_fail(err, errlen, "%s:%u: line too long (at most %zu characters)", path, lineno,
                             sizeof line - 2);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *save = NULL, *word[5];
        int nw = 0;
        for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (nw == 5) {
                nw++;
                break;
            }
            word[nw++] = t;
        }
        if (nw == 0) continue;
        if (!strcmp(word[0], "credit")) {
            uint64_t v;
            int prc = nw == 2 ? parse_size(word[1], 0, ROTA_MAX_BYTES, &v) : -EINVAL;
            if (nw != 2) {
                rc = config_fail(err, errlen, "%s:%u: expected 'credit SIZE'", path, lineno);
                break;
            }
            if (prc) {
                rc = config_fail(err, errlen, "%s:%u: bad credit '%s': %s", path, lineno, word[1],
                                 prc == -ERANGE ? "out of range 0..2^56 bytes" : "not a size (use e.g. 64M)");
                break;
            }
            cfg->credit = v;
            continue;
        }
        if (strcmp(word[0], "group")) {
            rc = config_fail(err, errlen, "%s:%u: unknown directive '%s' (expected 'group' or 'credit')", path,
                             lineno, word[0]);
            break;
        }
        if (nw != 4 || strcmp(word[2], "limit")) {
            rc = config_fail(err, errlen, "%s:%u: expected 'group CGROUP-PATH limit SIZE'", path, lineno);
            break;
        }
        const char *gp = word[1];
        if (gp[0] != '/') {
            rc = config_fail(err, errlen, "%s:%u: group path '%s' must be an absolute cgroup path", path,
                             lineno, gp);
            break;
        }
        if (strlen(gp) >= ROTA_GROUP_NAME) {
            rc = config_fail(err, errlen, "%s:%u: group path is longer than %d characters", path, lineno,
                             ROTA_GROUP_NAME - 1);
            break;
        }
        uint64_t limit;
        int prc = parse_size(word[3], 1, ROTA_MAX_BYTES, &limit);
        if (prc) {
            rc = config_fail(err, errlen, "%s:%u: bad limit '%s': %s", path, lineno, word[3],
                             prc == -ERANGE ? "out of range 1..2^56 bytes" : "not a size (use e.g. 40G)");
            break;
        }
        char norm[ROTA_GROUP_NAME];
        snprintf(norm, sizeof norm, "%s", gp);
        size_t nl = strlen(norm);
        while (nl > 1 && norm[nl - 1] == '/') norm[--nl] = 0;
        for (unsigned i = 0; i < cfg->ngroups; i++)
            if (!strcmp(cfg->groups[i].path, norm)) {
                rc = config_fail(err, errlen, "%s:%u: group '%s' already defined on line %u", path, lineno,
                                 norm, cfg->groups[i].line);
                goto out_close;
            }
        if (cfg->ngroups == ROTA_MAX_GROUPS) {
            rc = config_fail(err, errlen, "%s:%u: too many groups (at most %d)", path, lineno, ROTA_MAX_GROUPS);
            break;
        }
        config_group_t *g = &cfg->groups[cfg->ngroups++];
        memcpy(g->path, norm, nl + 1);
        g->limit = limit;
        g->line = lineno;
    }
    if (!rc && ferror(f)) rc = config_fail(err, errlen, "%s: read error", path);
out_close:
    fclose(f);
    return rc;
}

int config_match(const config_t *cfg, const char *cgroup)
{
    int best = -1;
    size_t best_len = 0;
    for (unsigned i = 0; i < cfg->ngroups; i++) {
        const char *p = cfg->groups[i].path;
        size_t n = strlen(p);
        bool under = !strcmp(p, "/") || (!strncmp(cgroup, p, n) && (cgroup[n] == 0 || cgroup[n] == '/'));
        if (under && (best < 0 || n > best_len)) {
            best = (int)i;
            best_len = n;
        }
    }
    return best;
}

int config_cgroup_of(pid_t pid, char *out, size_t cap)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    int rc = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3)) continue;
        line[strcspn(line, "\n")] = 0;
        if (strlen(line + 3) >= cap) {
            rc = -ENAMETOOLONG;
            break;
        }
        memcpy(out, line + 3, strlen(line + 3) + 1);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}
