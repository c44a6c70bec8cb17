/* config.c - parses rotad's config file (group limits) and finds the group of a process by its cgroup. */
#include "runtime/config.h"

#include "runtime/lib/errmsg.h"
#include "runtime/lib/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A word of the file as a message may quote it: only a plausible directive or value (letters, digits, ._/+-, at most
 * 40 characters). rotad runs as root and logs what it refuses: a file that is not a config (a hard link to
 * /etc/shadow) must not get its contents into the log. */
static const char *config_shown(const char *w)
{
    size_t n = strlen(w);
    if (n > 40) return "(not shown)";
    for (size_t i = 0; i < n; i++) {
        char c = w[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._/+-", c)))
            return "(not shown)";
    }
    return w;
}

/* The numeric directives: name, field, default, bounds. */
typedef struct config_num {
    const char *name;
    size_t off;
    uint32_t def, min, max;
} config_num_t;

static const config_num_t config_nums[] = {
    {"max-connections-per-user", offsetof(config_t, max_conns_per_user), 64, 1, 4096},
    {"max-clients-per-user", offsetof(config_t, max_clients_per_user), 64, 1, ROTA_MAX_CLIENTS},
    {"hello-timeout-ms", offsetof(config_t, hello_timeout_ms), 2000, 10, 60000},
    {"max-weight", offsetof(config_t, max_weight), 1000, 1, 1000},
    {"high-stall-ms", offsetof(config_t, high_stall_ms), 1000, 10, 3600000},
    {"doorbell-max-hz", offsetof(config_t, doorbell_max_hz), 2000, 10, 1000000},
    {"grace-ms", offsetof(config_t, grace_ms), 2000, 0, 60000},
    {"max-waits-per-user", offsetof(config_t, max_waits_per_user), 256, 1, 65536},
    {"max-clients", offsetof(config_t, max_clients), ROTA_MAX_CLIENTS, 1, ROTA_MAX_CLIENTS},
    /* a day at most: an unused grant token is a grant nobody holds, and the table of them is capped */
    {"grant-token-ms", offsetof(config_t, grant_token_ms), 3600000, 100, 86400000},
};

/* The directives that name cgroup paths (config.h), repeatable up to CONFIG_MAX_IDS each. */
typedef struct config_path {
    const char *name;
    size_t count_off, paths_off;
} config_path_t;
static const config_path_t config_paths[] = {
    {"high-cgroup", offsetof(config_t, nhigh_cgroups), offsetof(config_t, high_cgroups)},
    {"grant-required", offsetof(config_t, ngrant_required), offsetof(config_t, grant_required)},
};

void config_init(config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->credit = CONFIG_CREDIT_DEFAULT;
    for (size_t i = 0; i < sizeof config_nums / sizeof config_nums[0]; i++)
        *(uint32_t *)((char *)cfg + config_nums[i].off) = config_nums[i].def;
}

/* A user or group: a name (getpwnam/getgrnam) or a decimal id. 0 or -EINVAL. */
static int config_id(const char *word, bool group, uint32_t *out)
{
    uint64_t v;
    if (!parse_u64(word, 0, UINT32_MAX - 1, &v)) {
        *out = (uint32_t)v;
        return 0;
    }
    if (group) {
        struct group *g = getgrnam(word);
        if (!g) return -EINVAL;
        *out = (uint32_t)g->gr_gid;
    } else {
        struct passwd *pw = getpwnam(word);
        if (!pw) return -EINVAL;
        *out = (uint32_t)pw->pw_uid;
    }
    return 0;
}

/* The admission and policy directives (config.h); 1 when word[0] is none of them, else 0 or -EINVAL. */
static int config_policy(config_t *cfg, char **word, int nw, const char *path, unsigned lineno, char *err,
                         size_t errlen)
{
    for (size_t i = 0; i < sizeof config_nums / sizeof config_nums[0]; i++) {
        const config_num_t *n = &config_nums[i];
        if (strcmp(word[0], n->name)) continue;
        uint64_t v;
        if (nw != 2) return errmsg(err, errlen, -EINVAL, "%s:%u: expected '%s N'", path, lineno, n->name);
        int prc = parse_u64(word[1], n->min, n->max, &v);
        if (prc)
            return errmsg(err, errlen, -EINVAL, "%s:%u: bad %s '%s': %s %u..%u", path, lineno, n->name,
                          config_shown(word[1]), prc == -ERANGE ? "out of range" : "not a number in", n->min, n->max);
        *(uint32_t *)((char *)cfg + n->off) = (uint32_t)v;
        return 0;
    }
    bool hu = !strcmp(word[0], "high-user");
    bool hg = !strcmp(word[0], "high-group");
    if (hu || hg) {
        uint32_t id;
        unsigned *cnt = hu ? &cfg->nhigh_uids : &cfg->nhigh_gids;
        if (nw != 2) return errmsg(err, errlen, -EINVAL, "%s:%u: expected '%s NAME'", path, lineno, word[0]);
        if (config_id(word[1], hg, &id))
            return errmsg(err, errlen, -EINVAL, "%s:%u: no such %s '%s'", path, lineno, hu ? "user" : "group",
                          config_shown(word[1]));
        if (*cnt == CONFIG_MAX_IDS)
            return errmsg(err, errlen, -EINVAL, "%s:%u: too many %s lines (at most %d)", path, lineno, word[0],
                          CONFIG_MAX_IDS);
        (hu ? cfg->high_uids : cfg->high_gids)[(*cnt)++] = id;
        return 0;
    }
    for (size_t i = 0; i < sizeof config_paths / sizeof config_paths[0]; i++) {
        const config_path_t *p = &config_paths[i];
        if (strcmp(word[0], p->name)) continue;
        unsigned *cnt = (unsigned *)((char *)cfg + p->count_off);
        char(*paths)[ROTA_GROUP_NAME] = (char(*)[ROTA_GROUP_NAME])((char *)cfg + p->paths_off);
        if (nw != 2) return errmsg(err, errlen, -EINVAL, "%s:%u: expected '%s CGROUP-PATH'", path, lineno, p->name);
        if (word[1][0] != '/' || strlen(word[1]) >= ROTA_GROUP_NAME)
            return errmsg(err, errlen, -EINVAL, "%s:%u: a cgroup path must be absolute, at most %d characters", path,
                          lineno, ROTA_GROUP_NAME - 1);
        if (*cnt == CONFIG_MAX_IDS)
            return errmsg(err, errlen, -EINVAL, "%s:%u: too many %s lines (at most %d)", path, lineno, p->name,
                          CONFIG_MAX_IDS);
        char *dst = paths[(*cnt)++];
        snprintf(dst, ROTA_GROUP_NAME, "%s", word[1]);
        size_t nl = strlen(dst);
        while (nl > 1 && dst[nl - 1] == '/') dst[--nl] = 0;
        return 0;
    }
    if (!strcmp(word[0], "user")) {
        uint32_t uid;
        uint64_t limit;
        if (nw != 4 || strcmp(word[2], "limit"))
            return errmsg(err, errlen, -EINVAL, "%s:%u: expected 'user NAME limit SIZE'", path, lineno);
        if (config_id(word[1], false, &uid))
            return errmsg(err, errlen, -EINVAL, "%s:%u: no such user '%s'", path, lineno, config_shown(word[1]));
        int prc = parse_size(word[3], 1, ROTA_MAX_BYTES, &limit);
        if (prc)
            return errmsg(err, errlen, -EINVAL, "%s:%u: bad limit '%s': %s", path, lineno, config_shown(word[3]),
                          prc == -ERANGE ? "out of range 1..2^56 bytes" : "not a size (use e.g. 40G)");
        int k = config_user_of(cfg, uid);
        if (k >= 0)
            return errmsg(err, errlen, -EINVAL, "%s:%u: user '%s' already limited on line %u", path, lineno,
                          config_shown(word[1]), cfg->users[k].line);
        if (cfg->nusers == CONFIG_MAX_IDS)
            return errmsg(err, errlen, -EINVAL, "%s:%u: too many user lines (at most %d)", path, lineno,
                          CONFIG_MAX_IDS);
        cfg->users[cfg->nusers++] = (config_user_t){.uid = uid, .limit = limit, .line = lineno};
        return 0;
    }
    return 1;
}

int config_user_of(const config_t *cfg, uint32_t uid)
{
    for (unsigned i = 0; i < cfg->nusers; i++)
        if (cfg->users[i].uid == uid) return (int)i;
    return -1;
}

/* Whether cgroup is prefix or lies below it. */
static bool config_under(const char *prefix, const char *cgroup)
{
    size_t n = strlen(prefix);
    return !strcmp(prefix, "/") || (!strncmp(cgroup, prefix, n) && (cgroup[n] == 0 || cgroup[n] == '/'));
}

bool config_grant_required(const config_t *cfg, const char *cgroup)
{
    for (unsigned i = 0; cfg && cgroup && i < cfg->ngrant_required; i++)
        if (config_under(cfg->grant_required[i], cgroup)) return true;
    return false;
}

bool config_may_high(const config_t *cfg, uint32_t uid, uint32_t gid, const uint32_t *gids, unsigned n,
                     const char *cgroup)
{
    if (uid == 0 || uid == (uint32_t)geteuid()) return true;
    if (!cfg) return false;
    for (unsigned i = 0; i < cfg->nhigh_uids; i++)
        if (cfg->high_uids[i] == uid) return true;
    for (unsigned i = 0; i < cfg->nhigh_gids; i++) {
        if (cfg->high_gids[i] == gid) return true;
        for (unsigned k = 0; k < n; k++)
            if (cfg->high_gids[i] == gids[k]) return true;
    }
    for (unsigned i = 0; cgroup && i < cfg->nhigh_cgroups; i++)
        if (config_under(cfg->high_cgroups[i], cgroup)) return true;
    return false;
}

/* 'credit SIZE'. 0, or -EINVAL with the reason in err. */
static int config_credit(config_t *cfg, char **word, int nw, const char *path, unsigned lineno, char *err,
                         size_t errlen)
{
    uint64_t v;
    int prc = nw == 2 ? parse_size(word[1], 0, ROTA_MAX_BYTES, &v) : -EINVAL;
    if (nw != 2) return errmsg(err, errlen, -EINVAL, "%s:%u: expected 'credit SIZE'", path, lineno);
    if (prc)
        return errmsg(err, errlen, -EINVAL, "%s:%u: bad credit '%s': %s", path, lineno, config_shown(word[1]),
                      prc == -ERANGE ? "out of range 0..2^56 bytes" : "not a size (use e.g. 64M)");
    cfg->credit = v;
    return 0;
}

/* 'group CGROUP-PATH limit SIZE': a group's limit, its path normalised (no trailing '/'). 0, or an error. */
static int config_group(config_t *cfg, char **word, int nw, const char *path, unsigned lineno, char *err,
                        size_t errlen)
{
    if (nw != 4 || strcmp(word[2], "limit"))
        return errmsg(err, errlen, -EINVAL, "%s:%u: expected 'group CGROUP-PATH limit SIZE'", path, lineno);
    const char *gp = word[1];
    if (gp[0] != '/')
        return errmsg(err, errlen, -EINVAL, "%s:%u: group path '%s' must be an absolute cgroup path", path, lineno,
                      config_shown(gp));
    if (strlen(gp) >= ROTA_GROUP_NAME)
        return errmsg(err, errlen, -EINVAL, "%s:%u: group path is longer than %d characters", path, lineno,
                      ROTA_GROUP_NAME - 1);
    uint64_t limit;
    int prc = parse_size(word[3], 1, ROTA_MAX_BYTES, &limit);
    if (prc)
        return errmsg(err, errlen, -EINVAL, "%s:%u: bad limit '%s': %s", path, lineno, config_shown(word[3]),
                      prc == -ERANGE ? "out of range 1..2^56 bytes" : "not a size (use e.g. 40G)");
    char norm[ROTA_GROUP_NAME];
    snprintf(norm, sizeof norm, "%s", gp);
    size_t nl = strlen(norm);
    while (nl > 1 && norm[nl - 1] == '/') norm[--nl] = 0;
    for (unsigned i = 0; i < cfg->ngroups; i++)
        if (!strcmp(cfg->groups[i].path, norm))
            return errmsg(err, errlen, -EINVAL, "%s:%u: group '%s' already defined on line %u", path, lineno,
                          config_shown(norm),
                          cfg->groups[i].line);
    if (cfg->ngroups == ROTA_MAX_GROUPS)
        return errmsg(err, errlen, -EINVAL, "%s:%u: too many groups (at most %d)", path, lineno, ROTA_MAX_GROUPS);
    config_group_t *g = &cfg->groups[cfg->ngroups++];
    memcpy(g->path, norm, nl + 1);
    g->limit = limit;
    g->line = lineno;
    return 0;
}

/* One line's words (nw of them, 6 meaning more than 5): 0, or an error. */
static int config_line(config_t *cfg, char **word, int nw, const char *path, unsigned lineno, char *err,
                       size_t errlen)
{
    if (!strcmp(word[0], "credit")) return config_credit(cfg, word, nw, path, lineno, err, errlen);
    int pol = config_policy(cfg, word, nw, path, lineno, err, errlen);
    if (pol <= 0) return pol;
    if (strcmp(word[0], "group"))
        return errmsg(err, errlen, -EINVAL, "%s:%u: unknown directive '%s' (expected 'group', 'credit' or a policy "
                      "line, see rotad --help)", path, lineno, config_shown(word[0]));
    return config_group(cfg, word, nw, path, lineno, err, errlen);
}

/* Splits line (its comment cut off) into at most 5 words; returns how many, 6 when there are more. */
static int config_words(char *line, char **word)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *save = NULL;
    int nw = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (nw == 5) {
            nw++;
            break;
        }
        word[nw++] = t;
    }
    return nw;
}

/* Whether st (a config file or its directory) is safe to trust: owned by root or rotad's user, writable by nobody
 * else (a directory with the sticky bit, like /tmp, keeps others from replacing a file they do not own). 0 or a
 * message in err and -EPERM. */
static int config_trusted(const char *path, const char *what, const struct stat *st, bool dir, char *err,
                          size_t errlen)
{
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me) {
        if (err && errlen)
            snprintf(err, errlen, "%s: refusing the config: %s is owned by uid %u, neither root nor rotad's user",
                     path, what, (unsigned)st->st_uid);
        return -EPERM;
    }
    if ((st->st_mode & 0022) && !(dir && (st->st_mode & S_ISVTX))) {
        if (err && errlen)
            snprintf(err, errlen, "%s: refusing the config: %s is writable by %s (mode %04o)", path, what,
                     st->st_mode & 0002 ? "every user" : "its group", (unsigned)(st->st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

int config_load(const char *path, config_t *cfg, char *err, size_t errlen)
{
    config_init(cfg);
    /* O_NOFOLLOW: a symlink is refused (it could name any file root can read); O_NONBLOCK: a FIFO does not
     * freeze rotad's event loop in open(2) (it is refused below, as not a regular file). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (err && errlen)
            snprintf(err, errlen, "%s: unable to open: %s", path,
                     e == ELOOP ? "it is a symbolic link (name the file itself)" : strerror(e));
        return -e;
    }
    struct stat st, dst;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        if (err && errlen) snprintf(err, errlen, "%s: unable to stat: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return errmsg(err, errlen, -EINVAL, "%s: not a regular file%s", path,
                      S_ISDIR(st.st_mode) ? " (a directory)" : "");
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int rc = config_trusted(path, "the file", &st, false, err, errlen);
    if (!rc && stat(dir, &dst) < 0) rc = errmsg(err, errlen, -EINVAL, "%s: unable to stat its directory", path);
    if (!rc) rc = config_trusted(path, "its directory", &dst, true, err, errlen);
    if (rc) {
        close(fd);
        return rc;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        if (err && errlen) snprintf(err, errlen, "%s: unable to read: %s", path, strerror(e));
        return -e;
    }
    char line[1024];
    unsigned lineno = 0;
    long at = ftell(f);
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        /* fgets reads past a NUL byte, and strlen would stop there, dropping the rest of the line unseen. */
        long next = ftell(f);
        if (at >= 0 && next >= 0 && (size_t)(next - at) != len) {
            rc = errmsg(err, errlen, -EINVAL, "%s:%u: NUL byte in the line", path, lineno);
            break;
        }
        at = next;
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = errmsg(err, errlen, -EINVAL, "%s:%u: line too long (at most %zu characters)", path, lineno,
                        sizeof line - 2);
            break;
        }
        char *word[5];
        int nw = config_words(line, word);
        if (nw) rc = config_line(cfg, word, nw, path, lineno, err, errlen);
    }
    if (!rc && ferror(f)) rc = errmsg(err, errlen, -EINVAL, "%s: read error", path);
    if (!rc && cfg->ngroups + cfg->nusers > ROTA_MAX_GROUPS)
        rc = errmsg(err, errlen, -EINVAL, "%s: %u groups and %u user limits: at most %d in all", path, cfg->ngroups,
                    cfg->nusers, ROTA_MAX_GROUPS);
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
