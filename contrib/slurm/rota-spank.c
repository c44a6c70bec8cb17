/* rota-spank.c - Slurm SPANK plugin: --rota-* job options, checked at submission, applied as LD_PRELOAD + ROTA_*. */
#include <slurm/spank.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/lib/cgroup.h"
#include "runtime/lib/grant.h"
#include "runtime/lib/parse.h"
#include "runtime/lib/preload.h"
#include "runtime/lib/prio.h"

/*
 * Contexts (spank(8)): srun, sbatch and salloc load the plugin in the local/allocator context, where the option
 * callbacks check each value and a bad one refuses the job with one clear message; slurmstepd loads it in the
 * remote context, where the callbacks run again (twice per step: they only store) and slurm_spank_task_init
 * writes the task's environment just before it execs:
 *
 *   LD_PRELOAD      librota.so first (after any sanitizer runtime), exactly once: every librota.so already in
 *                   the list (a batch script's srun inherits the batch step's) is taken out first
 *   ROTA_PRIORITY   --rota-priority, else an inherited ROTA_PRIORITY (checked like an option), else the node's
 *   ROTA_WEIGHT     --rota-weight, else inherited, else the node's (plugstack weight=, if any)
 *   ROTA_MEM_LIMIT  the job's shards on the node x memory per shard (SLURM_SHARDS_ON_NODE), lowered by --rota-mem
 *                   (never raised); without shards, --rota-mem, else inherited
 *   ROTA_GPU        --rota-gpu, else left alone: Slurm binds GPUs (CUDA_VISIBLE_DEVICES) and librota honours it;
 *                   with plugstack place=rotad, a shard job's binding is dropped instead (CUDA_VISIBLE_DEVICES
 *                   unset, ROTA_GPU=auto): Slurm's shards then only admit the job by memory, and rotad places it
 *                   on the GPU with room and the least load (Slurm hands out a job's shards first-fit)
 *   ROTA_SOCKET     plugstack socket=
 *
 * --rota=off (or plugstack default=off without --rota=on) takes librota.so out of LD_PRELOAD and sets nothing.
 *
 * The environment is the job's to change (ROTA_MEM_LIMIT=0 in a batch script), so what the node grants reaches
 * rotad from the plugin itself: slurm_spank_task_init_privileged (root, in the task before it drops privileges)
 * sends rotad a GRANT (runtime/lib/grant.h) for the step's cgroup (the task's cgroup v2 path up to its step_*
 * component, which the job's user cannot leave; on a node without proctrack/cgroup, one the plugin makes for the
 * step, spank_step_cgroup) and the job's uid: the memory limit above and the class as the
 * ceiling. rotad applies it at every HELLO from that cgroup, whatever the environment says (the job may only ask
 * for less); slurm_spank_exit revokes it. A job with a memory limit whose grant cannot be sent fails with the
 * reason; so does a job that asked for rota where lib= does not exist on the node: it never runs unprotected.
 */

SPANK_PLUGIN(rota, 1);

#define ROTA_SPANK_MEM_MAX (UINT64_C(1) << 50) /* 1024T: librota's ROTA_MEM_LIMIT bound */
#define ROTA_SPANK_ENV_MAX 65536 /* the longest LD_PRELOAD the plugin composes */
#define ROTA_SPANK_WEIGHT_MAX 1e6
#ifndef ROTA_SPANK_LIBROTA
#define ROTA_SPANK_LIBROTA "/usr/local/lib/librota.so"
#endif

/* The priority classes are prio.h's (names, parser: any case, as librota's ROTA_PRIORITY); bit i of an allow mask
 * is class i. */
#define SPANK_NCLASSES ROTA_PRIO_COUNT
#define SPANK_ALLOW_ALL ((1u << ROTA_PRIO_COUNT) - 1)

/* plugstack.conf arguments (the node's policy). */
typedef struct spank_conf {
    char lib[1024];
    char socket[1024];
    bool on;              /* default=on|off */
    unsigned allow;       /* allow=high,normal,low */
    int priority;         /* priority=CLASS: what a job without --rota-priority gets */
    char weight[32];      /* weight=W: what a job without --rota-weight gets ("" = librota's default) */
    uint64_t shard_mem;   /* shard_mem=SIZE, or gpu_mem=SIZE / shards=N; 0: shards set no limit */
    bool place_rotad;     /* place=slurm|rotad: who picks a shard job's GPU */
} spank_conf_t;

/* A job's options, as the callbacks stored them (-1 / "" / 0: not given). */
typedef struct spank_job {
    int priority;
    char weight[32];
    uint64_t mem;
    char gpu[16];
    int on; /* -1 not given, 0 off, 1 on */
} spank_job_t;

static spank_conf_t conf;
static spank_job_t job = {.priority = -1, .on = -1};

static int spank_class_parse(const char *s)
{
    enum rota_prio p;
    return s && prio_parse(s, &p) == 0 ? (int)p : -1;
}

/* "high,normal" -> mask; -EINVAL for an empty list or an unknown class. */
static int spank_allow_parse(const char *s, unsigned *mask)
{
    char buf[64];
    if (!*s || strlen(s) >= sizeof buf) return -EINVAL;
    strcpy(buf, s);
    unsigned m = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int c = spank_class_parse(t);
        if (c < 0) return -EINVAL;
        m |= 1u << c;
    }
    if (!m) return -EINVAL;
    *mask = m;
    return 0;
}

static void spank_allow_str(unsigned mask, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < SPANK_NCLASSES; i++)
        if (mask & (1u << i))
            len += (size_t)snprintf(out + len, n - len, "%s%s", len ? ", " : "", prio_name((unsigned)i));
}

static bool spank_weight_ok(const char *s)
{
    double w;
    return parse_double(s, 0, ROTA_SPANK_WEIGHT_MAX, &w) == 0 && w > 0 && strlen(s) < sizeof job.weight;
}

/* One plugstack.conf argument; 0 or -1 with the reason logged. */
static int spank_conf_arg(const char *a, uint64_t *gpu_mem, uint64_t *shards)
{
    const char *v = strchr(a, '=');
    if (!v) goto bad;
    size_t k = (size_t)(v++ - a);
#define KEY(s) (k == strlen(s) && !strncmp(a, s, k))
    if (KEY("lib") || KEY("socket")) {
        char *dst = KEY("lib") ? conf.lib : conf.socket;
        if (*v != '/' || strlen(v) >= sizeof conf.lib || strpbrk(v, ": ")) goto bad;
        strcpy(dst, v);
        return 0;
    }
    if (KEY("default")) {
        bool b;
        if (parse_bool(v, &b)) goto bad;
        conf.on = b;
        return 0;
    }
    if (KEY("allow")) {
        if (spank_allow_parse(v, &conf.allow)) goto bad;
        return 0;
    }
    if (KEY("priority")) {
        if ((conf.priority = spank_class_parse(v)) < 0) goto bad;
        return 0;
    }
    if (KEY("weight")) {
        if (!spank_weight_ok(v)) goto bad;
        strcpy(conf.weight, v);
        return 0;
    }
    if (KEY("shard_mem")) {
        if (parse_size(v, 1, ROTA_SPANK_MEM_MAX, &conf.shard_mem)) goto bad;
        return 0;
    }
    if (KEY("place")) {
        if (strcmp(v, "slurm") && strcmp(v, "rotad")) goto bad;
        conf.place_rotad = !strcmp(v, "rotad");
        return 0;
    }
    if (KEY("gpu_mem")) {
        if (parse_size(v, 1, ROTA_SPANK_MEM_MAX, gpu_mem)) goto bad;
        return 0;
    }
    if (KEY("shards")) {
        if (parse_u64(v, 1, 1u << 20, shards)) goto bad;
        return 0;
    }
#undef KEY
bad:
    slurm_error("rota: plugstack.conf: bad argument '%s' (expected lib=PATH, socket=PATH, default=on|off, "
                "allow=CLASS[,CLASS...], priority=CLASS, weight=W, shard_mem=SIZE, gpu_mem=SIZE, shards=N, "
                "place=slurm|rotad)", a);
    return -1;
}

static int spank_conf_parse(int ac, char **av)
{
    uint64_t gpu_mem = 0, shards = 0;
    conf = (spank_conf_t){.on = true, .allow = SPANK_ALLOW_ALL, .priority = ROTA_PRIO_NORMAL};
    snprintf(conf.lib, sizeof conf.lib, "%s", ROTA_SPANK_LIBROTA);
    for (int i = 0; i < ac; i++)
        if (spank_conf_arg(av[i], &gpu_mem, &shards)) return -1;
    if (!(conf.allow & (1u << conf.priority))) {
        slurm_error("rota: plugstack.conf: priority=%s is not among allow=", prio_name((unsigned)conf.priority));
        return -1;
    }
    if (!conf.shard_mem && gpu_mem && shards) conf.shard_mem = gpu_mem / shards;
    return 0;
}

/* ---- options: checked and stored; the same callbacks run in every context ------------------------------- */

static int spank_opt_priority(int val, const char *v, int remote)
{
    int c = spank_class_parse(v);
    if (c < 0) {
        slurm_error("rota: --rota-priority '%s': expected high, normal or low", v ? v : "");
        return -1;
    }
    if (!(conf.allow & (1u << c))) {
        char allowed[32];
        spank_allow_str(conf.allow, allowed, sizeof allowed);
        slurm_error("rota: --rota-priority %s is not allowed here (allowed: %s)", v, allowed);
        return -1;
    }
    job.priority = c;
    return 0;
}

static int spank_opt_weight(int val, const char *v, int remote)
{
    if (!v || !spank_weight_ok(v)) {
        slurm_error("rota: --rota-weight '%s': expected a number > 0 and <= 1e6", v ? v : "");
        return -1;
    }
    strcpy(job.weight, v);
    return 0;
}

static int spank_opt_mem(int val, const char *v, int remote)
{
    if (!v || parse_size(v, 1, ROTA_SPANK_MEM_MAX, &job.mem)) {
        slurm_error("rota: --rota-mem '%s': expected a size from 1 byte to 1024T (e.g. 512M, 8G)", v ? v : "");
        return -1;
    }
    return 0;
}

static int spank_opt_gpu(int val, const char *v, int remote)
{
    uint64_t n;
    if (!v || (strcmp(v, "auto") && strcmp(v, "all") && parse_u64(v, 0, 1023, &n))) {
        slurm_error("rota: --rota-gpu '%s': expected auto, all or a GPU index from 0 to 1023", v ? v : "");
        return -1;
    }
    snprintf(job.gpu, sizeof job.gpu, "%s", v);
    return 0;
}

static int spank_opt_onoff(int val, const char *v, int remote)
{
    bool b;
    if (!v || parse_bool(v, &b)) {
        slurm_error("rota: --rota '%s': expected on or off", v ? v : "");
        return -1;
    }
    job.on = b;
    return 0;
}

static struct spank_option spank_opts[] = {
    {"rota-priority", "high|normal|low", "rota: the job's priority class on its GPUs", 1, 0, spank_opt_priority},
    {"rota-weight", "W", "rota: the job's weight within its class (> 0, <= 1e6)", 1, 0, spank_opt_weight},
    {"rota-mem", "SIZE", "rota: the job's GPU memory limit (e.g. 8G; default: its shards' share)", 1, 0,
     spank_opt_mem},
    {"rota-gpu", "auto|all|N", "rota: ROTA_GPU (default: Slurm's binding, left as it is)", 1, 0, spank_opt_gpu},
    {"rota", "on|off", "rota: share the job's GPUs through rota (off: run without librota)", 1, 0, spank_opt_onoff},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (spank_conf_parse(ac, av)) return -1;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE) return 0;
    for (struct spank_option *o = spank_opts; o->name; o++) {
        spank_err_t rc = spank_option_register(sp, o);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("rota: unable to register --%s: %s", o->name, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* ---- remote: the task's environment --------------------------------------------------------------------- */

static int spank_set(spank_t sp, const char *k, const char *v)
{
    spank_err_t rc = spank_setenv(sp, k, v, 1);
    if (rc == ESPANK_SUCCESS) return 0;
    slurm_error("rota: unable to set %s: %s", k, spank_strerror(rc));
    return -1;
}

/* The job's environment value of k into buf, or NULL. */
static const char *spank_get(spank_t sp, const char *k, char *buf, int n)
{
    return spank_getenv(sp, k, buf, n) == ESPANK_SUCCESS ? buf : NULL;
}

/* The job's class: the option, else an inherited one (a batch script's srun), else the node's; -1 when the
 * inherited one is not allowed (logged). */
static int spank_job_prio(spank_t sp)
{
    char v[64];
    int prio = job.priority;
    if (prio < 0 && spank_get(sp, "ROTA_PRIORITY", v, sizeof v)) {
        if ((prio = spank_class_parse(v)) < 0 || !(conf.allow & (1u << prio))) {
            slurm_error("rota: ROTA_PRIORITY=%s in the job's environment is not an allowed class", v);
            return -1;
        }
    }
    return prio < 0 ? conf.priority : prio;
}

/* The job's memory limit per GPU: its shards on this node x memory per shard, lowered (never raised) by
 * --rota-mem; without shards, --rota-mem; 0: none. */
static uint64_t spank_job_mem(spank_t sp)
{
    char v[64];
    uint64_t shards, granted = 0;
    if (conf.shard_mem && spank_get(sp, "SLURM_SHARDS_ON_NODE", v, sizeof v) &&
        parse_u64(v, 1, 1u << 20, &shards) == 0)
        granted = shards > ROTA_SPANK_MEM_MAX / conf.shard_mem ? ROTA_SPANK_MEM_MAX : shards * conf.shard_mem;
    if (!granted) return job.mem;
    return job.mem && job.mem < granted ? job.mem : granted;
}

/* The cgroup the job's grant binds, into out. With Slurm's proctrack/cgroup, the task's cgroup v2 path up to its
 * step_* component (Slurm's task and user cgroups below it are the job's). Without it (proctrack/linuxproc) every
 * task of every job lies in slurmd's own cgroup, and a grant there would apply to all of them, each job's
 * replacing the one before: the step gets a cgroup of its own below it, rota-job<J>.<S>, which the task moves
 * itself into when make is set (root, before it drops privileges; the job's user cannot move out, the parent's
 * cgroup.procs being root's). 0 or -errno. */
static int spank_step_cgroup(spank_t sp, bool make, char *out, size_t n)
{
    char p[ROTA_GRANT_CGROUP_LEN], dir[ROTA_GRANT_CGROUP_LEN + 300];
    int rc = cgroup_of(0, p, sizeof p);
    if (rc) return rc;
    char *step = strstr(p, "/step_");
    if (step) {
        char *end = strchr(step + 1, '/');
        if (end) *end = 0;
        return snprintf(out, n, "%s", p) < (int)n ? 0 : -ENAMETOOLONG;
    }
    uint32_t jobid = 0, stepid = 0;
    if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS)
        return -ENOENT;
    if (snprintf(out, n, "%s/rota-job%u.%u", strcmp(p, "/") ? p : "", jobid, stepid) >= (int)n) return -ENAMETOOLONG;
    if (!make) return 0;
    snprintf(dir, sizeof dir, "%s%s", cgroup_root(), out);
    if (mkdir(dir, 0755) && errno != EEXIST) return -errno; /* the step's other tasks made it already */
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/cgroup.procs");
    int fd = open(dir, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    rc = write(fd, "0", 1) == 1 ? 0 : -errno; /* "0": the writing process itself */
    close(fd);
    return rc;
}

static bool spank_on(void)
{
    return job.on >= 0 ? job.on : conf.on;
}

/* Root, in each task before it drops privileges: librota must exist, and rotad learns what the job is granted. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp) || !spank_on()) return 0;
    char host[256] = "this node";
    gethostname(host, sizeof host);
    if (access(conf.lib, R_OK)) {
        slurm_error("rota: %s does not exist on %s (plugstack.conf lib=): the job asked to share its GPUs through "
                    "rota and is not run without it (ask the admin, or submit with --rota=off)",
                    conf.lib, host);
        return -1;
    }
    int prio = spank_job_prio(sp);
    if (prio < 0) return -1;
    uint64_t mem = spank_job_mem(sp);
    char cg[ROTA_GRANT_CGROUP_LEN], err[256];
    uid_t uid = 0;
    spank_get_item(sp, S_JOB_UID, &uid);
    int rc = spank_step_cgroup(sp, true, cg, sizeof cg);
    if (!rc) {
        grant_t g = {.cgroup = cg, .uid = (uint32_t)uid, .mem_limit = mem, .max_prio = (unsigned)prio};
        rc = grant_set(conf.socket[0] ? conf.socket : NULL, &g, err, sizeof err);
    } else {
        snprintf(err, sizeof err, "no cgroup v2 path for the task: %s", strerror(-rc));
    }
    if (rc && mem) {
        slurm_error("rota: unable to tell rotad the job's memory limit on %s: %s; the job is not run without it", host,
                    err);
        return -1;
    }
    if (rc) slurm_info("rota: unable to tell rotad the job's class on %s: %s", host, err);
    return 0;
}

/* slurmstepd (root) at the step's end: the grant goes, and the step's own cgroup if the plugin made it. slurmstepd
 * is in the step's cgroup tree ("slurm" beside "user" under step_*), or in slurmd's beside the one made for the
 * step. A process of the job still running keeps the cgroup (rmdir fails), and what it registered with. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp) || !spank_on()) return 0;
    char cg[ROTA_GRANT_CGROUP_LEN], dir[ROTA_GRANT_CGROUP_LEN + 300], err[256];
    if (spank_step_cgroup(sp, false, cg, sizeof cg)) return 0;
    grant_revoke(conf.socket[0] ? conf.socket : NULL, cg, err, sizeof err);
    snprintf(dir, sizeof dir, "%s%s", cgroup_root(), cg);
    if (!strstr(cg, "/step_") && rmdir(dir) && errno != ENOENT)
        slurm_info("rota: the step's cgroup %s stays: %s", cg, strerror(errno));
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp)) return 0;
    static char old[ROTA_SPANK_ENV_MAX], pre[ROTA_SPANK_ENV_MAX + 1024];
    char v[64];
    bool on = spank_on();
    spank_err_t ge = spank_getenv(sp, "LD_PRELOAD", old, sizeof old);
    if (ge == ESPANK_NOSPACE) {
        slurm_error("rota: the job's LD_PRELOAD is longer than %d characters: rota cannot compose it", ROTA_SPANK_ENV_MAX - 1);
        return -1;
    }
    const char *cur = ge == ESPANK_SUCCESS ? old : NULL;
    if (preload_compose(on ? conf.lib : NULL, cur, pre, sizeof pre)) {
        slurm_error("rota: LD_PRELOAD is too long");
        return -1;
    }
    if (!on) {
        if (!cur) return 0;
        if (!pre[0]) return spank_unsetenv(sp, "LD_PRELOAD") == ESPANK_SUCCESS ? 0 : -1;
        return spank_set(sp, "LD_PRELOAD", pre);
    }
    if (spank_set(sp, "LD_PRELOAD", pre)) return -1;
    if (conf.socket[0] && spank_set(sp, "ROTA_SOCKET", conf.socket)) return -1;

    int prio = spank_job_prio(sp);
    if (prio < 0) return -1;
    if (spank_set(sp, "ROTA_PRIORITY", prio_name((unsigned)prio))) return -1;

    const char *w = job.weight[0] ? job.weight : spank_get(sp, "ROTA_WEIGHT", v, sizeof v);
    if (!w && conf.weight[0]) w = conf.weight;
    if (w && (!spank_weight_ok(w) || spank_set(sp, "ROTA_WEIGHT", w))) {
        slurm_error("rota: ROTA_WEIGHT=%s: expected a number > 0 and <= 1e6", w);
        return -1;
    }

    /* memory: what rotad was granted (slurm_spank_task_init_privileged); the environment only says it to librota */
    uint64_t mem = spank_job_mem(sp);
    if (mem) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)mem);
        if (spank_set(sp, "ROTA_MEM_LIMIT", v)) return -1;
    }
    if (job.gpu[0]) return spank_set(sp, "ROTA_GPU", job.gpu);
    if (conf.place_rotad && spank_get(sp, "SLURM_SHARDS_ON_NODE", v, sizeof v)) {
        if (spank_unsetenv(sp, "CUDA_VISIBLE_DEVICES") != ESPANK_SUCCESS) return -1;
        return spank_set(sp, "ROTA_GPU", "auto");
    }
    return 0;
}
