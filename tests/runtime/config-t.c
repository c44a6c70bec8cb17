/* config-t.c - TAP tests for runtime/config.c: the group file format, its errors, cgroup matching. */
#include "runtime/config.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/rota-config-t.XXXXXX";

static int load(const char *text, config_t *cfg, char *err, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rotad.conf", dir);
    FILE *f = fopen(path, "w");
    if (!f) bail("cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return config_load(path, cfg, err, n);
}

int main(void)
{
    if (!mkdtemp(dir)) bail("mkdtemp");
    config_t cfg;
    char err[256];
    is_int(load("# comment\n\ngroup /kubepods/a limit 40G\ngroup /b/ limit 512M # trailing\n", &cfg, err, sizeof err),
           0, "valid file loads");
    is_uint(cfg.ngroups, 2, "two groups");
    is_str(cfg.groups[0].path, "/kubepods/a", "path");
    is_uint(cfg.groups[0].limit, UINT64_C(40) << 30, "40G");
    is_str(cfg.groups[1].path, "/b", "trailing slash normalised");
    is_int(config_match(&cfg, "/kubepods/a"), 0, "exact match");
    is_int(config_match(&cfg, "/kubepods/a/c1"), 0, "below matches");
    is_int(config_match(&cfg, "/kubepods/ab"), -1, "a prefix that is not a path component does not match");
    is_int(config_match(&cfg, "/"), -1, "root matches nothing");

    /* grant-required (a Kubernetes node: /kubepods) and grant-token-ms */
    is_int(load("grant-required /kubepods/\ngrant-required /kubepods.slice\ngrant-token-ms 5000\n", &cfg, err,
                sizeof err), 0, "grant-required and grant-token-ms load (%s)", err);
    ok(config_grant_required(&cfg, "/kubepods") && config_grant_required(&cfg, "/kubepods/pod1/c1") &&
       config_grant_required(&cfg, "/kubepods.slice/x") && !config_grant_required(&cfg, "/kubepodsX") &&
       !config_grant_required(&cfg, "/system.slice") && !config_grant_required(&cfg, NULL),
       "grant-required covers its paths and below, nothing else");
    is_uint(cfg.grant_token_ms, 5000, "grant-token-ms 5000");
    is_int(load("", &cfg, err, sizeof err), 0, "an empty file loads");
    ok(!config_grant_required(&cfg, "/kubepods") && cfg.grant_token_ms == 3600000,
       "by default no grant is required and a token lives an hour");

    struct {
        const char *text, *want;
    } bad[] = {
        {"gruop /a limit 1G\n", ":1: unknown directive 'gruop'"},
        {"\ngroup /a limit\n", ":2: expected 'group CGROUP-PATH limit SIZE'"},
        {"group a limit 1G\n", ":1: group path 'a' must be an absolute cgroup path"},
        {"group /a limit 10XB\n", ":1: bad limit '10XB': not a size"},
        {"group /a limit 0\n", ":1: bad limit '0': out of range"},
        {"group /a limit -1\n", ":1: bad limit '-1': not a size"},
        {"group /a limit abc\n", ":1: bad limit 'abc': not a size"},
        {"group /a limit 18446744073709551616\n", ":1: bad limit '18446744073709551616': out of range"},
        {"group /a limit 1G\ngroup /a limit 2G\n", ":2: group '/a' already defined on line 1"},
        {"group /a limit 1G extra\n", ":1: expected"},
        {"grant-required kubepods\n", ":1: a cgroup path must be absolute"},
        {"grant-required\n", ":1: expected 'grant-required CGROUP-PATH'"},
        {"grant-token-ms 50\n", ":1: bad grant-token-ms '50': out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = load(bad[i].text, &cfg, err, sizeof err);
        ok(rc == -EINVAL && strstr(err, bad[i].want), "error '%s' (got: %s)", bad[i].want, err);
    }
    char many[8192] = "";
    for (int i = 0; i <= ROTA_MAX_GROUPS; i++) {
        char l[64];
        snprintf(l, sizeof l, "group /g%d limit 1G\n", i);
        strcat(many, l);
    }
    load(many, &cfg, err, sizeof err);
    ok(strstr(err, ":33: too many groups") != NULL, "too many groups (%s)", err);
    /* issue 21, item 10: a NUL byte hides the rest of its line from strlen; a directory reads as an error */
    {
        char path[128];
        snprintf(path, sizeof path, "%s/rotad.conf", dir);
        static const char nul[] = "group /a limit 1G\ngroup /b limit 1G\0 oops\n";
        FILE *f = fopen(path, "w");
        if (!f || fwrite(nul, 1, sizeof nul - 1, f) != sizeof nul - 1) bail("cannot write %s", path);
        fclose(f);
        is_int(config_load(path, &cfg, err, sizeof err), -EINVAL, "a NUL byte in a line is an error");
        ok(strstr(err, "rotad.conf:2: NUL byte in the line") != NULL, "with file:line: %s", err);
    }
    is_int(config_load(dir, &cfg, err, sizeof err), -EINVAL, "a directory as the config file is an error");
    ok(strstr(err, ": not a regular file (a directory)") != NULL && !strncmp(err, dir, strlen(dir)),
       "named clearly: %s", err);
    is_int(config_load("/nonexistent/rotad.conf", &cfg, err, sizeof err), -ENOENT, "missing file");
    ok(strstr(err, "/nonexistent/rotad.conf: unable to open") != NULL, "missing file message: %s", err);

    /* issue 32, item 10: a config anyone else can write, a symlink, a FIFO; nothing of the file in messages */
    {
        char path[128], sub[128], link[160];
        snprintf(path, sizeof path, "%s/rotad.conf", dir);
        load("credit 1M\n", &cfg, err, sizeof err);
        chmod(path, 0666);
        is_int(config_load(path, &cfg, err, sizeof err), -EPERM, "a config writable by every user is refused");
        ok(strstr(err, "writable by every user (mode 0666)") != NULL, "saying so: %s", err);
        chmod(path, 0620);
        is_int(config_load(path, &cfg, err, sizeof err), -EPERM, "a config writable by its group is refused");
        chmod(path, 0644);
        is_int(config_load(path, &cfg, err, sizeof err), 0, "a config only its owner writes loads");
        snprintf(sub, sizeof sub, "%s/open", dir);
        snprintf(link, sizeof link, "%s/rotad.conf", sub);
        if (mkdir(sub, 0755) || rename(path, link)) bail("cannot set up %s", sub);
        chmod(sub, 0777);
        is_int(config_load(link, &cfg, err, sizeof err), -EPERM, "a config in a directory anyone can write is refused");
        ok(strstr(err, "its directory is writable by every user") != NULL, "saying so: %s", err);
        chmod(sub, 01777);
        is_int(config_load(link, &cfg, err, sizeof err), 0, "unless the directory is sticky (like /tmp)");
        if (geteuid() == 0) {
            chown(link, 65534, 65534);
            is_int(config_load(link, &cfg, err, sizeof err), -EPERM, "a config owned by another user is refused");
        } else {
            skip("not root: cannot give the file to another user");
        }
        if (rename(link, path)) bail("rename back");
        rmdir(sub);
        chown(path, geteuid(), getegid());
        snprintf(link, sizeof link, "%s/link.conf", dir);
        unlink(link);
        if (symlink(path, link)) bail("symlink");
        is_int(config_load(link, &cfg, err, sizeof err), -ELOOP, "a symbolic link is refused");
        ok(strstr(err, "symbolic link") != NULL, "saying so: %s", err);
        unlink(link);
        if (mkfifo(link, 0600)) bail("mkfifo");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = config_load(link, &cfg, err, sizeof err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        ok(rc == -EINVAL && strstr(err, "not a regular file") && ms < 500, "a FIFO is refused at once (%.1f ms): %s",
           ms, err);
        unlink(link);
        load("root:$6$SECRETHASH:19000:0:99999:7:::\n", &cfg, err, sizeof err);
        ok(!strstr(err, "SECRET") && strstr(err, "unknown directive '(not shown)'"),
           "a line that is no directive is not quoted: %s", err);
        load("credit $6$SECRETHASH\n", &cfg, err, sizeof err);
        ok(!strstr(err, "SECRET"), "nor a value that is no size: %s", err);
    }

    char path[128];
    snprintf(path, sizeof path, "%s/rotad.conf", dir);
    unlink(path);
    rmdir(dir);
    return done_testing();
}
