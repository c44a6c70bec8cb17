/* cgroup.c - cgroup v2 paths (runtime/lib/cgroup.h). */
#include "runtime/lib/cgroup.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int cgroup_of(pid_t pid, char *out, size_t cap)
{
    char path[64], line[4096];
    if (pid) snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    else snprintf(path, sizeof path, "/proc/self/cgroup");
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    int rc = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3)) continue;
        line[strcspn(line, "\n")] = 0;
        size_t n = strlen(line + 3);
        if (n >= cap) {
            rc = -ENAMETOOLONG;
            break;
        }
        memcpy(out, line + 3, n + 1);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

static char cgroup_root_path[256];
static pthread_once_t cgroup_root_once = PTHREAD_ONCE_INIT;

/* A hybrid host mounts the v2 hierarchy at /sys/fs/cgroup/unified, beside the v1 controllers. */
static void cgroup_root_find(void)
{
    snprintf(cgroup_root_path, sizeof cgroup_root_path, "/sys/fs/cgroup");
    FILE *f = fopen("/proc/self/mounts", "re");
    char dev[128], dir[256], type[32];
    while (f && fscanf(f, "%127s %255s %31s %*[^\n]", dev, dir, type) == 3)
        if (!strcmp(type, "cgroup2")) {
            snprintf(cgroup_root_path, sizeof cgroup_root_path, "%s", dir);
            break;
        }
    if (f) fclose(f);
}

const char *cgroup_root(void)
{
    pthread_once(&cgroup_root_once, cgroup_root_find);
    return cgroup_root_path;
}
