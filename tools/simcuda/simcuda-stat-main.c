/* simcuda-stat-main.c - simcuda-stat: print (and reset) the per-device ground-truth counters of a simcuda node. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define USAGE "usage: simcuda-stat [--json] [--reset] [--remove] [--node NAME]\n"
#define EXIT_USAGE 2 /* as every rota program: 2 a usage error, 1 a failure */
#define EXIT_SYSTEM 1

static const char help_text[] =
    USAGE
    "Prints, per device of a simcuda node, the counters since the last reset:\n"
    "  busy_ns      compute-engine time spent executing kernels (context-switch time excluded)\n"
    "  wall_ns      wall time since the last reset (busy_ns / wall_ns is the busy fraction)\n"
    "  switch_ns    compute-engine time spent switching contexts\n"
    "  kernels, switches, preemptions, reclaims (dead processes cleaned up)\n"
    "  mem_used, mem_total (bytes), contexts (live), copies, copy_bytes, copy_busy_ns\n"
    "Options:\n"
    "  --json       one JSON object instead of key=value lines\n"
    "  --reset      print the counters, then reset them (atomically per device)\n"
    "  --remove     print the counters, then remove the node (/dev/shm/NAME); processes still using it\n"
    "               keep their devices, the next process to start makes a fresh node\n"
    "  --node NAME  the node to read (default: $SIMCUDA_NODE, else simcuda-UID)\n"
    "The node must exist (some process has attached to it); simcuda-stat never creates one.\n"
    "Exit codes: 0 ok; 1 failure (including: the node does not exist); 2 usage error.\n"
    "Knobs, fixed by the process that creates the node:\n";

typedef struct snap {
    uint64_t busy_ns, wall_ns, switch_ns, kernels, switches, preemptions, reclaims;
    uint64_t mem_used, mem_total, contexts, copies, copy_bytes, copy_busy_ns;
} snap_t;

static void take(simnode_shm_t *shm, int fd, uint32_t d, bool reset, snap_t *s)
{
    simnode_dev_t *dev = &shm->dev[d];
    simnode_dev_lock(shm, fd, d);
    uint64_t now = simnode_now_ns();
    simnode_dev_sweep(shm, fd, d);
    s->busy_ns = atomic_load(&dev->c.busy_ns) + simnode_engine_inflight_busy(dev, now);
    s->wall_ns = now - atomic_load(&dev->c.reset_ns);
    s->switch_ns = atomic_load(&dev->c.switch_ns);
    s->kernels = atomic_load(&dev->c.kernels);
    s->switches = atomic_load(&dev->c.switches);
    s->preemptions = atomic_load(&dev->c.preemptions);
    s->reclaims = atomic_load(&dev->c.reclaims);
    s->mem_used = dev->mem_used;
    s->mem_total = dev->mem_total;
    s->contexts = dev->live_ctx;
    s->copies = atomic_load(&dev->c.copies);
    s->copy_bytes = atomic_load(&dev->c.copy_bytes);
    s->copy_busy_ns = atomic_load(&dev->c.copy_busy_ns);
    if (reset) simnode_dev_reset_counters(dev, now);
    simnode_dev_unlock(shm, d);
}

#define FIELDS(X)                                                                                        \
    X(busy_ns) X(wall_ns) X(switch_ns) X(kernels) X(switches) X(preemptions) X(reclaims) X(mem_used)      \
    X(mem_total) X(contexts) X(copies) X(copy_bytes) X(copy_busy_ns)

static void print_text(int d, const snap_t *s)
{
    printf("device %d:", d);
#define X(f) printf(" " #f "=%llu", (unsigned long long)s->f);
    FIELDS(X)
#undef X
    printf("\n");
}

static void print_json(int d, const snap_t *s, bool first)
{
    printf("%s    {\"device\": %d", first ? "" : ",\n", d);
#define X(f) printf(", \"" #f "\": %llu", (unsigned long long)s->f);
    FIELDS(X)
#undef X
    printf("}");
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"reset", no_argument, NULL, 'r'},
        {"remove", no_argument, NULL, 'x'},
        {"node", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, reset = false, remove = false;
    const char *node_arg = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'r': reset = true; break;
        case 'x': remove = true; break;
        case 'n': node_arg = optarg; break;
        case 'h':
            fputs(help_text, stdout);
            simnode_config_describe(stdout);
            return 0;
        default: fputs(USAGE, stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fputs(USAGE, stderr);
        return EXIT_USAGE;
    }
    char name[64];
    if (simnode_config_node(node_arg, name) != 0) {
        fprintf(stderr, "simcuda-stat: fatal: unable to use node name '%s': not a node name (1 to 63 letters, digits, "
                        "'.', '_', '-')\n", node_arg ? node_arg : getenv("SIMCUDA_NODE"));
        return EXIT_USAGE;
    }
    simnode_shm_t *shm = NULL;
    int fd = -1;
    int rc = simnode_open_existing(name, &shm, &fd);
    if (rc == -ENOENT) {
        fprintf(stderr, "simcuda-stat: fatal: unable to open node '%s': it does not exist (no process has used it "
                        "since boot, or it was removed)\n", name);
        return EXIT_SYSTEM;
    }
    if (rc) {
        const char *e = simnode_error();
        if (!strncmp(e, "simcuda: ", 9)) e += 9;
        fprintf(stderr, "simcuda-stat: fatal: unable to read node '%s': %s\n", name, e);
        return EXIT_SYSTEM;
    }
    uint32_t n = shm->cfg.devices;
    if (json) {
        printf("{\"node\": ");
        json_string(name);
        printf(", \"timeslice_ns\": %llu, \"switch_ns\": %llu, \"devices\": [\n",
               (unsigned long long)shm->cfg.timeslice_ns, (unsigned long long)shm->cfg.switch_ns);
    } else {
        printf("node %s: %u device(s), timeslice %llu us, switch %llu us\n", name, n,
               (unsigned long long)(shm->cfg.timeslice_ns / 1000), (unsigned long long)(shm->cfg.switch_ns / 1000));
    }
    for (uint32_t d = 0; d < n; d++) {
        snap_t s;
        take(shm, fd, d, reset, &s);
        if (json)
            print_json((int)d, &s, d == 0);
        else
            print_text((int)d, &s);
    }
    if (json) printf("\n]}\n");
    munmap(shm, sizeof *shm);
    close(fd);
    char path[80];
    snprintf(path, sizeof path, "/%s", name);
    if (remove && shm_unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "simcuda-stat: fatal: unable to remove node '%s': %s\n", name, strerror(errno));
        return EXIT_SYSTEM;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "simcuda-stat: fatal: unable to write output: %s\n", strerror(errno));
        return EXIT_SYSTEM;
    }
    return 0;
}
