/* cgroup-t.c - TAP tests for the cgroup v2 path readers in runtime/lib/cgroup.c. */
#include "runtime/lib/cgroup.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
    char cg[512], self[512], tiny[2];
    struct stat st;
    if (cgroup_of(0, self, sizeof self) == -ENOENT) skip_all("no cgroup v2 line in /proc/self/cgroup");
    is_int(cgroup_of(getpid(), cg, sizeof cg), 0, "own cgroup v2 path is readable by pid");
    ok(cg[0] == '/', "it is absolute (%s)", cg);
    is_int(cgroup_of(0, self, sizeof self), 0, "pid 0 reads the caller's");
    ok(!strcmp(cg, self), "the same path (%s)", self);
    is_int(cgroup_of(999999999, cg, sizeof cg), -ENOENT, "no such process");
    is_int(cgroup_of(0, tiny, sizeof tiny), strlen(self) >= sizeof tiny ? -ENAMETOOLONG : 0,
           "a path longer than the buffer is refused, not cut");
    const char *root = cgroup_root();
    ok(root[0] == '/', "the hierarchy's mount point is absolute (%s)", root);
    ok(root == cgroup_root(), "read once: the same string every time");
    char path[1024];
    snprintf(path, sizeof path, "%s%s/cgroup.procs", root, strcmp(self, "/") ? self : "");
    ok(stat(path, &st) == 0, "root + own path is this process's cgroup directory (%s)", path);
    return done_testing();
}
