/* node.c - the simulated node: attach/create its shm region, register this process, memory, contexts. */
#include "tools/simcuda/node-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t simnode_local_lock = PTHREAD_MUTEX_INITIALIZER;
static bool simnode_atfork_done;

/* ---- locks ---------------------------------------------------------------------------------------------- */

static int ofd_lock(int fd, off_t at, int cmd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};
    for (;;) {
        if (fcntl(fd, cmd, &fl) == 0) return 0;
        if (errno != EINTR) return -errno;
    }
}

/* ---- reclaiming dead processes ---------------------------------------------------------------------------- */

/* Under shm->lock: reclaim a dead process everywhere and free its slot. */
static void proc_reclaim_all(simnode_shm_t *shm, int fd, uint32_t s)
{
    for (uint32_t d = 0; d < SIMNODE_MAX_DEVICES; d++) {
        simnode_dev_lock(shm, fd, d);
        simnode_dev_reclaim_proc(shm, fd, d, s);
        simnode_dev_unlock(shm, d);
    }
    atomic_store(&shm->procs[s].state, SIMNODE_SLOT_FREE);
}

/* ---- region creation and validation ----------------------------------------------------------------------- */

static void mutex_init_shared(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

void simnode_dev_reset_counters(simnode_dev_t *dev, uint64_t now)
{
    atomic_store(&dev->c.busy_ns, 0);
    atomic_store(&dev->c.switch_ns, 0);
    atomic_store(&dev->c.kernels, 0);
    atomic_store(&dev->c.switches, 0);
    atomic_store(&dev->c.preemptions, 0);
    atomic_store(&dev->c.copies, 0);
    atomic_store(&dev->c.copy_bytes, 0);
    atomic_store(&dev->c.copy_busy_ns, 0);
    atomic_store(&dev->c.reclaims, 0);
    atomic_store(&dev->c.reset_ns, now);
}

static void region_init(simnode_shm_t *shm, const simnode_config_t *cfg)
{
    atomic_store_explicit(&shm->magic, 0, memory_order_relaxed);
    memset((char *)shm + sizeof shm->magic, 0, sizeof *shm - sizeof shm->magic);
    shm->abi = SIMNODE_ABI;
    shm->size = sizeof *shm;
    uint64_t now = simnode_now_ns();
    shm->create_ns = now;
    shm->cfg.devices = (uint32_t)cfg->devices;
    shm->cfg.mem_bytes = cfg->mem_bytes;
    shm->cfg.timeslice_ns = cfg->timeslice_ns;
    shm->cfg.switch_ns = cfg->switch_ns;
    shm->cfg.launch_ns = cfg->launch_ns;
    shm->cfg.copy_latency_ns = cfg->copy_latency_ns;
    shm->cfg.mem_gbps = cfg->mem_gbps;
    shm->cfg.copy_gbps = cfg->copy_gbps;
    shm->cfg.mps = (uint32_t)cfg->mps;
    mutex_init_shared(&shm->lock);
    for (uint32_t d = 0; d < SIMNODE_MAX_DEVICES; d++) {
        simnode_dev_t *dev = &shm->dev[d];
        mutex_init_shared(&dev->lock);
        dev->mem_total = cfg->mem_bytes;
        simnode_engine_init(dev);
        simnode_dev_reset_counters(dev, now);
    }
    atomic_store_explicit(&shm->magic, SIMNODE_MAGIC, memory_order_release);
}

/* Validate a mapped region; 0 or -EPROTO with the error set. */
static int region_check(const simnode_shm_t *shm, const char *name)
{
    uint64_t magic = atomic_load_explicit(&shm->magic, memory_order_acquire);
    if (magic != SIMNODE_MAGIC) {
        simnode_set_error("simcuda: node '%s' (/dev/shm/%s) is not a simcuda node (bad magic 0x%016llx); "
                          "remove it or use another SIMCUDA_NODE", name, name, (unsigned long long)magic);
        return -EPROTO;
    }
    if (shm->abi != SIMNODE_ABI || shm->size != sizeof *shm) {
        simnode_set_error("simcuda: node '%s' was created by an incompatible simcuda (ABI %u, %llu bytes; this is "
                          "ABI %u, %zu bytes); remove /dev/shm/%s or use another SIMCUDA_NODE",
                          name, shm->abi, (unsigned long long)shm->size, SIMNODE_ABI, sizeof *shm, name);
        return -EPROTO;
    }
    if (shm->cfg.devices < 1 || shm->cfg.devices > SIMNODE_MAX_DEVICES) {
        simnode_set_error("simcuda: node '%s' is corrupt (%u devices); remove /dev/shm/%s", name, shm->cfg.devices,
                          name);
        return -EPROTO;
    }
    return 0;
}

/* Open the shm object and check its size; maps it. Returns 0, -ENOENT (only when !create), or -errno. */
static int region_open(const char *name, bool create, int *fdp, simnode_shm_t **shmp, bool *fresh)
{
    char path[80];
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !create) return -ENOENT;
        simnode_set_error("simcuda: unable to open node '%s' (/dev/shm/%s): %s", name, name, strerror(e));
        return -e;
    }
    int rc = ofd_lock(fd, SIMNODE_LOCK_INIT, F_OFD_SETLKW, F_WRLCK);
    if (rc) {
        simnode_set_error("simcuda: unable to lock node '%s': %s", name, strerror(-rc));
        goto out_close;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        simnode_set_error("simcuda: unable to stat node '%s': %s", name, strerror(errno));
        goto out_close;
    }
    *fresh = false;
    if (st.st_size == 0 && create) {
        if (ftruncate(fd, (off_t)sizeof(simnode_shm_t)) != 0) {
            rc = -errno;
            simnode_set_error("simcuda: unable to size node '%s': %s", name, strerror(errno));
            goto out_close;
        }
        *fresh = true;
    } else if ((uint64_t)st.st_size != sizeof(simnode_shm_t)) {
        uint32_t hdr[6] = {0};
        ssize_t got = pread(fd, hdr, sizeof hdr, 0);
        if (got == (ssize_t)sizeof hdr && ((uint64_t)hdr[1] << 32 | hdr[0]) == SIMNODE_MAGIC)
            simnode_set_error("simcuda: node '%s' was created by an incompatible simcuda (ABI %u, %lld bytes; this is "
                              "ABI %u, %zu bytes); remove /dev/shm/%s or use another SIMCUDA_NODE",
                              name, hdr[2], (long long)st.st_size, SIMNODE_ABI, sizeof(simnode_shm_t), name);
        else
            simnode_set_error("simcuda: node '%s' (/dev/shm/%s) is not a simcuda node (%lld bytes); remove it or "
                              "use another SIMCUDA_NODE", name, name, (long long)st.st_size);
        rc = -EPROTO;
        goto out_close;
    }
    void *p = mmap(NULL, sizeof(simnode_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rc = -errno;
        simnode_set_error("simcuda: unable to map node '%s': %s", name, strerror(errno));
        goto out_close;
    }
    *fdp = fd;
    *shmp = p;
    return 0; /* the init lock is still held: the caller releases it */
out_close:
    close(fd);
    return rc;
}

static void region_unlock_init(int fd)
{
    ofd_lock(fd, SIMNODE_LOCK_INIT, F_OFD_SETLK, F_UNLCK);
}

int simnode_open_existing(const char *name, simnode_shm_t **shmp, int *fdp)
{
    bool fresh;
    int fd = -1;
    simnode_shm_t *shm = NULL;
    int rc = region_open(name, false, &fd, &shm, &fresh);
    if (rc) return rc;
    rc = region_check(shm, name);
    region_unlock_init(fd);
    if (rc) {
        munmap(shm, sizeof *shm);
        close(fd);
        return rc;
    }
    *shmp = shm;
    *fdp = fd;
    return 0;
}

static bool node_has_live_procs(simnode_shm_t *shm, int fd)
{
    for (uint32_t s = 0; s < SIMNODE_MAX_PROCS; s++)
        if (atomic_load(&shm->procs[s].state) == SIMNODE_SLOT_USED && simnode_proc_alive(shm, fd, s)) return true;
    return false;
}

/* The first explicitly set knob whose value differs from the node's, or -1. */
static int config_mismatch(const simnode_shm_t *shm, const simnode_config_t *c, const bool *is_set)
{
    const simnode_shared_config_t *n = &shm->cfg;
    if (is_set[SIMNODE_K_DEVICES] && (uint32_t)c->devices != n->devices) return SIMNODE_K_DEVICES;
    if (is_set[SIMNODE_K_MEM] && c->mem_bytes != n->mem_bytes) return SIMNODE_K_MEM;
    if (is_set[SIMNODE_K_TIMESLICE] && c->timeslice_ns != n->timeslice_ns) return SIMNODE_K_TIMESLICE;
    if (is_set[SIMNODE_K_SWITCH] && c->switch_ns != n->switch_ns) return SIMNODE_K_SWITCH;
    if (is_set[SIMNODE_K_LAUNCH] && c->launch_ns != n->launch_ns) return SIMNODE_K_LAUNCH;
    if (is_set[SIMNODE_K_MEM_GBPS] && c->mem_gbps != n->mem_gbps) return SIMNODE_K_MEM_GBPS;
    if (is_set[SIMNODE_K_COPY_GBPS] && c->copy_gbps != n->copy_gbps) return SIMNODE_K_COPY_GBPS;
    if (is_set[SIMNODE_K_COPY_LATENCY] && c->copy_latency_ns != n->copy_latency_ns) return SIMNODE_K_COPY_LATENCY;
    if (is_set[SIMNODE_K_MPS] && c->mps != n->mps) return SIMNODE_K_MPS;
    return -1;
}

static void node_value(const simnode_shm_t *shm, int k, char *buf, size_t n)
{
    const simnode_shared_config_t *c = &shm->cfg;
    switch (k) {
    case SIMNODE_K_DEVICES: snprintf(buf, n, "%u", c->devices); break;
    case SIMNODE_K_MEM: snprintf(buf, n, "%llu bytes", (unsigned long long)c->mem_bytes); break;
    case SIMNODE_K_TIMESLICE: snprintf(buf, n, "%llu", (unsigned long long)(c->timeslice_ns / 1000)); break;
    case SIMNODE_K_SWITCH: snprintf(buf, n, "%llu", (unsigned long long)(c->switch_ns / 1000)); break;
    case SIMNODE_K_LAUNCH: snprintf(buf, n, "%llu", (unsigned long long)c->launch_ns); break;
    case SIMNODE_K_MEM_GBPS: snprintf(buf, n, "%g", c->mem_gbps); break;
    case SIMNODE_K_COPY_GBPS: snprintf(buf, n, "%g", c->copy_gbps); break;
    case SIMNODE_K_COPY_LATENCY: snprintf(buf, n, "%llu", (unsigned long long)c->copy_latency_ns); break;
    case SIMNODE_K_MPS: snprintf(buf, n, "%u", c->mps); break;
    default: snprintf(buf, n, "?"); break;
    }
}

/* Under shm->lock: take a free slot (reclaiming dead ones) and hold its OFD lock. */
static int proc_register(simnode_shm_t *shm, int fd, uint32_t *slot)
{
    for (uint32_t s = 0; s < SIMNODE_MAX_PROCS; s++) {
        if (atomic_load(&shm->procs[s].state) == SIMNODE_SLOT_USED) {
            if (simnode_proc_alive(shm, fd, s)) continue;
            proc_reclaim_all(shm, fd, s);
        }
        if (ofd_lock(fd, SIMNODE_LOCK_BASE + (off_t)s, F_OFD_SETLK, F_WRLCK) != 0) continue;
        simnode_proc_t *p = &shm->procs[s];
        memset(p->charge, 0, sizeof p->charge);
        for (unsigned d = 0; d < SIMNODE_MAX_DEVICES; d++) atomic_store(&p->busy_ns[d], 0);
        p->gen++;
        p->pid = (int32_t)getpid();
        p->attach_ns = simnode_now_ns();
        atomic_store(&p->state, SIMNODE_SLOT_USED);
        *slot = s;
        return 0;
    }
    return -EUSERS;
}

static void fill_devinfo(const char *node, const simnode_shm_t *shm)
{
    for (int d = 0; d < SIMNODE_MAX_DEVICES; d++) simnode_devinfo_of(node, shm, d, &simnode_g.info[d]);
}

void simnode_devinfo_of(const char *node, const simnode_shm_t *shm, int d, simnode_devinfo_t *i)
{
    memset(i, 0, sizeof *i);
    snprintf(i->name, sizeof i->name, "simcuda device %d", d);
    /* FNV-1a over the node name and ordinal, twice with different seeds: stable per node and ordinal. */
    uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    for (int k = 0; k < 2; k++) {
        for (const char *c = node; *c; c++) h[k] = (h[k] ^ (uint8_t)*c) * 0x100000001b3ull;
        h[k] = (h[k] ^ (uint64_t)(d + 1)) * 0x100000001b3ull;
        h[k] = (h[k] ^ (uint64_t)k) * 0x100000001b3ull;
    }
    memcpy(i->uuid, h, sizeof i->uuid);
    i->uuid[6] = (uint8_t)((i->uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 layout */
    i->uuid[8] = (uint8_t)((i->uuid[8] & 0x3f) | 0x80);
    i->total_mem = shm->cfg.mem_bytes;
    i->pci_domain = 0;
    i->pci_bus = 0x10 + d;
    i->pci_device = 0;
    i->sm_count = SIMNODE_SM_COUNT;
    i->cc_major = 9;
    i->cc_minor = 0;
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&simnode_local_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&simnode_local_lock);
}

/* The child shares the parent's open file description, hence its slot lock: drop it at once so the parent's
 * death stays visible, and forget the parent's slot (the child must not inherit its charges). */
static void atfork_child(void)
{
    if (simnode_g.fd >= 0) close(simnode_g.fd);
    simnode_g.fd = -1;
    if (simnode_g.shm) munmap(simnode_g.shm, sizeof *simnode_g.shm);
    simnode_g.shm = NULL;
    simnode_g.slot = SIMNODE_NONE;
    atomic_store(&simnode_ready, 0);
    pthread_mutex_unlock(&simnode_local_lock);
}

static int attach_locked(void)
{
    simnode_config_t cfg;
    bool is_set[SIMNODE_K_COUNT];
    int rc = simnode_config_parse(&cfg, is_set);
    if (rc) return rc;

    int fd = -1;
    simnode_shm_t *shm = NULL;
    bool fresh = false;
    rc = region_open(cfg.node, true, &fd, &shm, &fresh);
    if (rc) return rc;

    if (fresh || atomic_load_explicit(&shm->magic, memory_order_acquire) == 0) {
        /* New, or its creator died before publishing it: nobody can be using it (we hold the init lock). */
        region_init(shm, &cfg);
    } else {
        rc = region_check(shm, cfg.node);
        if (rc) goto out_unmap;
        int k = config_mismatch(shm, &cfg, is_set);
        if (k >= 0) {
            if (node_has_live_procs(shm, fd)) {
                char have[64];
                node_value(shm, k, have, sizeof have);
                simnode_set_error("simcuda: %s='%s' differs from node '%s', which has %s = %s and processes still "
                                  "attached; unset it, or use another SIMCUDA_NODE",
                                  simnode_knob_name(k), getenv(simnode_knob_name(k)), cfg.node,
                                  simnode_knob_name(k), have);
                rc = -EINVAL;
                goto out_unmap;
            }
            /* Nobody is attached: the node takes this process's knobs (its counters restart). */
            region_init(shm, &cfg);
        }
    }

    bool repair = false;
    simnode_mutex_lock(&shm->lock, &repair);
    uint32_t slot = SIMNODE_NONE;
    rc = proc_register(shm, fd, &slot);
    if (!rc) /* this process's share as an MPS client (engine.c), fixed before it can create a context */
        shm->procs[slot].mps_share_ppm = (uint32_t)(cfg.mps_pct * (SIMNODE_FULL_PPM / 100) + 0.5);
    pthread_mutex_unlock(&shm->lock);
    if (rc) {
        simnode_set_error("simcuda: node '%s' has no free process slot (%d processes attached)", cfg.node,
                          SIMNODE_MAX_PROCS);
        goto out_unmap;
    }
    region_unlock_init(fd);

    simnode_g.shm = shm;
    simnode_g.fd = fd;
    simnode_g.pid = (int)getpid();
    simnode_g.slot = slot;
    simnode_g.cfg = cfg;
    simnode_g.cfg.devices = (int)shm->cfg.devices;
    simnode_g.cfg.mem_bytes = shm->cfg.mem_bytes;
    simnode_g.cfg.timeslice_ns = shm->cfg.timeslice_ns;
    simnode_g.cfg.switch_ns = shm->cfg.switch_ns;
    simnode_g.cfg.launch_ns = shm->cfg.launch_ns;
    simnode_g.cfg.mem_gbps = shm->cfg.mem_gbps;
    simnode_g.cfg.copy_gbps = shm->cfg.copy_gbps;
    simnode_g.cfg.copy_latency_ns = shm->cfg.copy_latency_ns;
    simnode_g.cfg.mps = shm->cfg.mps;
    fill_devinfo(cfg.node, shm);
    simnode_config_log(&simnode_g.cfg);
    atomic_store(&simnode_ready, 1);
    return 0;

out_unmap:
    munmap(shm, sizeof *shm);
    close(fd); /* also drops the init lock */
    return rc;
}

int simnode_attach(void)
{
    if (atomic_load_explicit(&simnode_ready, memory_order_acquire)) return 0;
    pthread_mutex_lock(&simnode_local_lock);
    if (!simnode_atfork_done) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        simnode_atfork_done = true;
    }
    int rc = atomic_load(&simnode_ready) ? 0 : attach_locked();
    pthread_mutex_unlock(&simnode_local_lock);
    return rc;
}

/* Every entry point: attach on first use (also in a forked child). */
static int ensure(void)
{
    return atomic_load_explicit(&simnode_ready, memory_order_acquire) ? 0 : simnode_attach();
}

const simnode_config_t *simnode_config(void)
{
    return atomic_load(&simnode_ready) ? &simnode_g.cfg : NULL;
}

int simnode_device_count(void)
{
    if (ensure()) return 0;
    return simnode_g.cfg.devices;
}

const simnode_devinfo_t *simnode_device(int dev)
{
    if (ensure() || dev < 0 || dev >= simnode_g.cfg.devices) return NULL;
    return &simnode_g.info[dev];
}

static bool dev_ok(int dev)
{
    return dev >= 0 && dev < simnode_g.cfg.devices;
}

/* ---- memory ------------------------------------------------------------------------------------------------ */

int simnode_mem_reserve(int dev, uint64_t bytes)
{
    int rc = ensure();
    if (rc) return rc;
    if (!dev_ok(dev)) return -ENODEV;
    if (bytes == 0) return 0;
    simnode_shm_t *shm = simnode_g.shm;
    simnode_dev_t *d = &shm->dev[dev];
    simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
    bool fits = bytes <= d->mem_total - d->mem_used;
    uint64_t limit = shm->cfg.mps ? simnode_g.cfg.mps_mem_limit[dev] : 0;
    uint64_t mine = shm->procs[simnode_g.slot].charge[dev];
    if (limit && (mine > limit || bytes > limit - mine)) {
        /* An MPS client's CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: its own allocations, whatever the device has free. */
        simnode_dev_unlock(shm, (uint32_t)dev);
        return -ENOMEM;
    }
    if (!fits && simnode_dev_sweep(shm, simnode_g.fd, (uint32_t)dev) > 0)
        fits = bytes <= d->mem_total - d->mem_used;
    if (fits) {
        d->mem_used += bytes;
        shm->procs[simnode_g.slot].charge[dev] += bytes;
    }
    simnode_dev_unlock(shm, (uint32_t)dev);
    return fits ? 0 : -ENOMEM;
}

void simnode_mem_unreserve(int dev, uint64_t bytes)
{
    if (ensure() || !dev_ok(dev) || bytes == 0) return;
    simnode_shm_t *shm = simnode_g.shm;
    simnode_dev_t *d = &shm->dev[dev];
    simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
    uint64_t *charge = &shm->procs[simnode_g.slot].charge[dev];
    uint64_t amt = bytes < *charge ? bytes : *charge; /* never more than this process holds */
    *charge -= amt;
    d->mem_used -= amt;
    simnode_dev_unlock(shm, (uint32_t)dev);
}

void simnode_mem_info(int dev, uint64_t *used, uint64_t *total)
{
    uint64_t u = 0, t = 0;
    if (!ensure() && dev_ok(dev)) {
        simnode_shm_t *shm = simnode_g.shm;
        simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
        simnode_dev_sweep(shm, simnode_g.fd, (uint32_t)dev);
        u = shm->dev[dev].mem_used;
        t = shm->dev[dev].mem_total;
        simnode_dev_unlock(shm, (uint32_t)dev);
    }
    if (used) *used = u;
    if (total) *total = t;
}

/* ---- contexts ---------------------------------------------------------------------------------------------- */

int simnode_ctx_open(int dev, uint32_t *ctx_id)
{
    int rc = ensure();
    if (rc) return rc;
    if (!dev_ok(dev)) return -ENODEV;
    if (!ctx_id) return -EINVAL;
    simnode_shm_t *shm = simnode_g.shm;
    simnode_dev_t *d = &shm->dev[dev];
    simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
    rc = -ENOSPC;
    if (shm->cfg.mps) {
        /* An MPS server recovering from a fatal fault takes no new client until its faulted ones are gone. */
        simnode_dev_sweep(shm, simnode_g.fd, (uint32_t)dev);
        for (uint32_t i = 0; i < SIMNODE_MAX_CTX; i++)
            if (d->ctx[i].state == SIMNODE_SLOT_USED && atomic_load(&d->ctx[i].fault)) rc = -EAGAIN;
        if (rc == -EAGAIN) goto out_unlock;
    }
    for (int pass = 0; pass < 2 && rc; pass++) {
        if (pass == 1 && simnode_dev_sweep(shm, simnode_g.fd, (uint32_t)dev) == 0) break;
        for (uint32_t i = 0; i < SIMNODE_MAX_CTX; i++) {
            simnode_ctx_t *c = &d->ctx[i];
            if (c->state != SIMNODE_SLOT_FREE) continue;
            c->gen = (c->gen + 1) & 0xffffffu;
            if (c->gen == 0) c->gen = 1;
            c->id = c->gen << 8 | i;
            c->proc = simnode_g.slot;
            atomic_store(&c->fault, 0);
            c->state = SIMNODE_SLOT_USED;
            d->live_ctx++;
            *ctx_id = c->id;
            rc = 0;
            break;
        }
    }
out_unlock:
    simnode_dev_unlock(shm, (uint32_t)dev);
    return rc;
}

bool simnode_mps(void)
{
    return ensure() == 0 && simnode_g.shm->cfg.mps;
}

void simnode_ctx_fault(int dev, uint32_t ctx_id, int err)
{
    if (ensure() || !dev_ok(dev) || !simnode_g.shm->cfg.mps || err == 0) return;
    simnode_shm_t *shm = simnode_g.shm;
    simnode_dev_t *d = &shm->dev[dev];
    simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
    const simnode_ctx_t *me = &d->ctx[ctx_id & 0xffu];
    if (me->state == SIMNODE_SLOT_USED && me->id == ctx_id) {
        for (uint32_t i = 0; i < SIMNODE_MAX_CTX; i++) {
            int32_t none = 0;
            if (d->ctx[i].state == SIMNODE_SLOT_USED) atomic_compare_exchange_strong(&d->ctx[i].fault, &none, err);
        }
    }
    simnode_dev_unlock(shm, (uint32_t)dev);
}

int simnode_ctx_fault_of(int dev, uint32_t ctx_id)
{
    if (!atomic_load(&simnode_ready) || dev < 0 || dev >= simnode_g.cfg.devices) return 0;
    const simnode_ctx_t *c = &simnode_g.shm->dev[dev].ctx[ctx_id & 0xffu];
    return c->id == ctx_id ? atomic_load(&c->fault) : 0;
}

void simnode_ctx_close(int dev, uint32_t ctx_id)
{
    if (ensure() || !dev_ok(dev)) return;
    simnode_shm_t *shm = simnode_g.shm;
    simnode_dev_t *d = &shm->dev[dev];
    simnode_dev_lock(shm, simnode_g.fd, (uint32_t)dev);
    simnode_ctx_t *c = &d->ctx[ctx_id & 0xffu];
    if (c->state == SIMNODE_SLOT_USED && c->id == ctx_id) {
        c->state = SIMNODE_SLOT_FREE;
        atomic_store(&c->fault, 0);
        if (d->live_ctx) d->live_ctx--;
    }
    simnode_dev_unlock(shm, (uint32_t)dev);
}

/* The memory-traffic part of a built-in kernel's device time: bytes / SIMCUDA_MEM_GBPS. The fixed
 * SIMCUDA_LAUNCH_NS is added by the caller to every kernel (the API layer does, for all three kernels). */
uint64_t simnode_mem_kernel_ns(uint64_t bytes_touched)
{
    double gbps = atomic_load(&simnode_ready) ? simnode_g.cfg.mem_gbps : 2000;
    return (uint64_t)((double)bytes_touched / gbps); /* 1 GB/s is one byte per nanosecond */
}
