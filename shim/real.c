/* real.c - all real-symbol resolution: libc's dlsym/dlvsym, the real driver, every row of wrappers.def. */
#include "shim/real.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Resolution order for the driver: ROTA_REAL_LIBCUDA if set, else dlopen("libcuda.so.1") - which returns the
 * library already loaded under that soname (an application linked with -lcuda, or one that dlopened it first)
 * or loads it from the search path. librota has no soname and is never "libcuda.so.1", but a setup that
 * installs it under that name is caught: the handle must not be librota's own link map.
 *
 * Every row is then looked up in that handle (not with RTLD_NEXT), so the addresses rota wraps are exactly the
 * ones the driver's own cuGetProcAddress and dlsym(handle, ...) hand out.
 */

rota_real_fns_t rota_real;
/* The thread guard (real.h): the lowest layer's, so that every layer above may set it. */
__thread int rota_in_shim __attribute__((tls_model("initial-exec")));
bool rota_real_present[ROTA_FN_COUNT];
static _Atomic bool real_resolved;
static void *real_handle;

const rota_fn_info_t rota_fn_info[ROTA_FN_COUNT] = {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) \
    [ROTA_FN_##name] = {#name, #base, ver, pt, ROTA_EXPORTED_##fam(true) + 0},
#include "shim/wrappers.def"
#undef ROTA_FN
};

/* A typed stand-in for each name the driver lacks, so that every pointer in rota_real is callable. */
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) \
    static CUresult CUDAAPI missing_##name params { return CUDA_ERROR_NOT_SUPPORTED; }
#include "shim/wrappers.def"
#undef ROTA_FN

/* ---- libc's dlsym and dlvsym -------------------------------------------------------------------------- */
/*
 * librota exports dlsym and dlvsym, so calling either from here would call ourselves. The real ones are found
 * by reading the loaded objects' dynamic symbol tables directly (the link map of _r_debug, no function call at
 * all): libasan calls our dlsym from its own start-up, before its interceptors and shadow memory exist, so this
 * path may use neither libc nor instrumented code. The first object after librota in load order that defines
 * the default version of the name wins (what dlsym(RTLD_NEXT) would give), else the first before it.
 */
extern ElfW(Dyn) _DYNAMIC[];

ROTA_NO_SANITIZE static bool elf_streq(const char *a, const char *b)
{
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

ROTA_NO_SANITIZE static uintptr_t elf_ptr(uintptr_t base, uintptr_t p)
{
    /* ld.so relocates most DT_ pointers in place; the vDSO's and some architectures' stay relative. */
    return p < base ? p + base : p;
}

ROTA_NO_SANITIZE static bool elf_sym_ok(const ElfW(Sym) *s, const ElfW(Half) *versym, uint32_t i)
{
    int type = s->st_info & 0xf, bind = s->st_info >> 4; /* ELF{32,64}_ST_TYPE, _ST_BIND */
    if (s->st_shndx == SHN_UNDEF || s->st_value == 0 || type != STT_FUNC) return false;
    if (bind != STB_GLOBAL && bind != STB_WEAK) return false;
    if (versym != NULL && ((versym[i] & 0x8000) || (versym[i] & 0x7fff) == 0)) return false; /* hidden/local */
    return true;
}

ROTA_NO_SANITIZE static uintptr_t elf_lookup(const struct link_map *m, const char *name)
{
    uintptr_t base = m->l_addr;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnuhash = NULL, *hash = NULL;
    const ElfW(Half) *versym = NULL;

    if (m->l_ld == NULL) return 0;
    for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)elf_ptr(base, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)elf_ptr(base, d->d_un.d_ptr); break;
        case DT_GNU_HASH: gnuhash = (const uint32_t *)elf_ptr(base, d->d_un.d_ptr); break;
        case DT_HASH: hash = (const uint32_t *)elf_ptr(base, d->d_un.d_ptr); break;
        case DT_VERSYM: versym = (const ElfW(Half) *)elf_ptr(base, d->d_un.d_ptr); break;
        default: break;
        }
    }
    if (symtab == NULL || strtab == NULL) return 0;

    if (gnuhash != NULL) {
        uint32_t nbuckets = gnuhash[0], symoffset = gnuhash[1], bloom_size = gnuhash[2], shift = gnuhash[3];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gnuhash + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        const unsigned bits = sizeof(ElfW(Addr)) * 8;
        uint32_t h = 5381;
        for (const char *c = name; *c; c++) h = h * 33 + (unsigned char)*c;
        if (nbuckets == 0 || bloom_size == 0) return 0;
        ElfW(Addr) word = bloom[(h / bits) % bloom_size];
        ElfW(Addr) mask = ((ElfW(Addr))1 << (h % bits)) | ((ElfW(Addr))1 << ((h >> shift) % bits));
        if ((word & mask) != mask) return 0;
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset) return 0;
        for (;; i++) {
            uint32_t h2 = chain[i - symoffset];
            if ((h | 1) == (h2 | 1) && elf_sym_ok(&symtab[i], versym, i) &&
                elf_streq(name, strtab + symtab[i].st_name))
                return base + symtab[i].st_value;
            if (h2 & 1) break;
        }
        return 0;
    }
    if (hash != NULL) {
        uint32_t nbucket = hash[0];
        const uint32_t *bucket = hash + 2, *chain = bucket + nbucket;
        uint32_t h = 0, g;
        for (const char *c = name; *c; c++) {
            h = (h << 4) + (unsigned char)*c;
            if ((g = h & 0xf0000000u)) h ^= g >> 24;
            h &= ~g;
        }
        if (nbucket == 0) return 0;
        for (uint32_t i = bucket[h % nbucket]; i != STN_UNDEF; i = chain[i]) {
            if (elf_sym_ok(&symtab[i], versym, i) && elf_streq(name, strtab + symtab[i].st_name))
                return base + symtab[i].st_value;
        }
    }
    return 0;
}

ROTA_NO_SANITIZE static uintptr_t elf_find_next(const char *name)
{
    const struct link_map *self = NULL, *m;
    uintptr_t first_before = 0;
    for (m = _r_debug.r_map; m != NULL; m = m->l_next) {
        if (m->l_ld == _DYNAMIC) {
            self = m;
            continue;
        }
        uintptr_t a = elf_lookup(m, name);
        if (a == 0) continue;
        if (self != NULL) return a;
        if (first_before == 0) first_before = a;
    }
    return first_before;
}

static _Atomic(rota_dlsym_fn) real_dlsym_p;
static _Atomic(rota_dlvsym_fn) real_dlvsym_p;

ROTA_NO_SANITIZE rota_dlsym_fn rota_real_dlsym(void)
{
    rota_dlsym_fn f = atomic_load_explicit(&real_dlsym_p, memory_order_acquire);
    if (ROTA_UNLIKELY(f == NULL)) {
        /* Idempotent: racing threads compute the same address. */
        f = (rota_dlsym_fn)elf_find_next("dlsym");
        atomic_store_explicit(&real_dlsym_p, f, memory_order_release);
    }
    return f;
}

ROTA_NO_SANITIZE rota_dlvsym_fn rota_real_dlvsym(void)
{
    rota_dlvsym_fn f = atomic_load_explicit(&real_dlvsym_p, memory_order_acquire);
    if (ROTA_UNLIKELY(f == NULL)) {
        f = (rota_dlvsym_fn)elf_find_next("dlvsym");
        atomic_store_explicit(&real_dlvsym_p, f, memory_order_release);
    }
    return f;
}

/* ---- the driver ---------------------------------------------------------------------------------------- */
typedef struct addr_entry {
    uintptr_t addr;
    int idx;
} addr_entry_t;
static addr_entry_t addr_map[ROTA_FN_COUNT];
static int addr_count;

static int addr_cmp(const void *a, const void *b)
{
    const addr_entry_t *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return x->idx - y->idx;
}

static bool is_self_map(void *h)
{
    struct link_map *lm = NULL;
    return dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_ld == _DYNAMIC;
}

int rota_real_resolve(const char *path, char *why, size_t why_len)
{
    bool by_search = path[0] == '\0';
    rota_dlsym_fn sym = rota_real_dlsym();
    int rc = 0;

    if (sym == NULL || rota_real_dlvsym() == NULL) {
        snprintf(why, why_len, "cannot find libc's dlsym/dlvsym in the loaded objects");
        rc = -ENOENT;
        goto out_stub;
    }
    if (by_search) path = "libcuda.so.1";
    real_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (real_handle == NULL) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load the real driver %s: %s%s", path, e ? e : "unknown error",
                 by_search ? " (set ROTA_REAL_LIBCUDA to its path)" : "");
        rc = -ENOENT;
        goto out_stub;
    }
    if (is_self_map(real_handle)) {
        snprintf(why, why_len, "%s is librota itself, not the real driver: set ROTA_REAL_LIBCUDA", path);
        real_handle = NULL;
        rc = -ELOOP;
        goto out_stub;
    }
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream)                                 \
    do {                                                                                        \
        void *p_ = sym(real_handle, #name);                                                     \
        rota_real_present[ROTA_FN_##name] = p_ != NULL;                                         \
        rota_real.fn_##name = p_ ? (__typeof__(rota_real.fn_##name))p_ : missing_##name;        \
    } while (0);
#include "shim/wrappers.def"
#undef ROTA_FN
    dlerror(); /* the lookups of names this driver lacks must not leave an error for the application */

    for (int i = 0; i < ROTA_FN_COUNT; i++) {
        if (!rota_fn_info[i].exported || !rota_real_present[i]) continue;
        addr_map[addr_count].addr = (uintptr_t)sym(real_handle, rota_fn_info[i].name);
        addr_map[addr_count].idx = i;
        addr_count++;
    }
    qsort(addr_map, (size_t)addr_count, sizeof(addr_map[0]), addr_cmp);
    atomic_store_explicit(&real_resolved, true, memory_order_release);
    return 0;

out_stub:
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) rota_real.fn_##name = missing_##name;
#include "shim/wrappers.def"
#undef ROTA_FN
    atomic_store_explicit(&real_resolved, true, memory_order_release);
    return rc;
}

bool rota_real_resolved(void)
{
    return atomic_load_explicit(&real_resolved, memory_order_acquire);
}

int rota_real_find_addr(const void *addr, const char *name, int pt)
{
    uintptr_t a = (uintptr_t)addr;
    int lo = 0, hi = addr_count;
    if (a == 0 || !rota_real_resolved()) return -1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (addr_map[mid].addr < a) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= addr_count || addr_map[lo].addr != a) return -1;
    /* Several rows share an address only when the driver aliases variants; pick the one asked for. */
    int best = addr_map[lo].idx, best_score = -1;
    for (int j = lo; j < addr_count && addr_map[j].addr == a; j++) {
        const rota_fn_info_t *f = &rota_fn_info[addr_map[j].idx];
        int score = 0;
        if (name && strcmp(name, f->name) == 0) score = 4;
        else if (name && strcmp(name, f->base) == 0) score = 2;
        if (pt >= 0 && f->pt == (pt != 0)) score += 1;
        if (score > best_score) best = addr_map[j].idx, best_score = score;
    }
    return best;
}

int rota_fn_find(const char *name)
{
    if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
    for (int i = 0; i < ROTA_FN_COUNT; i++) {
        if (rota_fn_info[i].exported && strcmp(rota_fn_info[i].name, name) == 0) return i;
    }
    return -1;
}
