/* image.c - reads GPU code images as a driver does: PTX .entry names, cubin (ELF) symbols and .nv.info
 * resources, fatbin containers and nvcc's wrapper; anything else is not an image. */
#include "tools/simcuda/image.h"

#include "runtime/lib/ptxver.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* nvcc's wrapper (__fatBinC_Wrapper_t of fatbinary_section.h) starts with 0x466243B1, little-endian */
#define FATBIN_MAGIC 0xBA55ED50u           /* the container nvcc -fatbin writes */
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_LZ4 0x2000u            /* the entry's payload is LZ4-compressed (nvcc -compress-mode=speed) */
#define FATBIN_FLAG_ZSTD 0x8000u           /* ... zstd-compressed (CUDA 13's default for PTX) */
#define EM_CUDA 190
#define STO_CUDA_ENTRY 0x10                /* st_other of a kernel (an entry function), not a device function */
#define STT_FUNC 2
#define SHT_SYMTAB 2
/* .nv.info attributes (EIATTR_*): format byte, attribute byte, then a value by format */
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f
/* Bounds on what an image may claim, against corrupt headers: no real image is near them. */
#define IMAGE_MAX_BYTES (1ull << 30)
#define IMAGE_MAX_KERNELS 65536

static uint16_t rd16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* The kernel called name in img, added with unknown resources if new; NULL on -ENOMEM. */
static image_kernel_t *kernel_add(image_t *img, const char *name, size_t len)
{
    for (size_t i = 0; i < img->n; i++)
        if (strlen(img->kernels[i].name) == len && memcmp(img->kernels[i].name, name, len) == 0)
            return &img->kernels[i];
    if (img->n >= IMAGE_MAX_KERNELS)
        return NULL;
    image_kernel_t *v = realloc(img->kernels, (img->n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    img->kernels = v;
    image_kernel_t *k = &v[img->n];
    if (!(k->name = strndup(name, len)))
        return NULL;
    k->regs = k->max_threads = k->local_bytes = k->param_bytes = k->arch = -1;
    img->n++;
    return k;
}

/* ---- PTX ------------------------------------------------------------------------------------------------ */
static bool ptx_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
           c == '.';
}

/* Every ".entry NAME" of NUL-terminated PTX text. */
static int ptx_parse(const char *ptx, image_t *img)
{
    for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 6, ".entry")) {
        const char *q = p + 6;
        if (q[0] != ' ' && q[0] != '\t')
            continue;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t n = 0;
        while (ptx_name_char(q[n]))
            n++;
        if (n && !kernel_add(img, q, n))
            return -ENOMEM;
    }
    int isa = ptxver_of_image(ptx);
    if (isa > img->ptx_isa)
        img->ptx_isa = isa;
    return 0;
}

/* ---- cubin (ELF64, EM_CUDA) ----------------------------------------------------------------------------- */
typedef struct elf_view {
    const unsigned char *p;
    size_t len;
    uint64_t shoff;
    unsigned shnum, shentsize;
    const unsigned char *shstr;
    size_t shstr_len;
} elf_view_t;

static const unsigned char *elf_sh(const elf_view_t *e, unsigned i)
{
    return e->p + e->shoff + (uint64_t)i * e->shentsize;
}

/* Section i's contents, bounded by the image; NULL if it lies outside. */
static const unsigned char *elf_section(const elf_view_t *e, unsigned i, uint64_t *size)
{
    if (i >= e->shnum)
        return NULL;
    const unsigned char *sh = elf_sh(e, i);
    uint64_t off = rd64(sh + 24), sz = rd64(sh + 32);
    if (rd32(sh + 4) == 8 /* SHT_NOBITS */)
        sz = 0;
    if (off > e->len || sz > e->len - off)
        return NULL;
    *size = sz;
    return e->p + off;
}

static const char *elf_section_name(const elf_view_t *e, unsigned i)
{
    uint32_t n = rd32(elf_sh(e, i));
    if (!e->shstr || n >= e->shstr_len || !memchr(e->shstr + n, 0, e->shstr_len - n))
        return "";
    return (const char *)e->shstr + n;
}

/* The ELF header's sizes, checked against len (SIZE_MAX: the image's size is not known, trust the header up to
 * IMAGE_MAX_BYTES, as a driver handed a bare pointer must). */
static int elf_open(const unsigned char *p, size_t len, elf_view_t *e)
{
    if (len < 64 || memcmp(p, "\x7f" "ELF", 4) != 0 || p[4] != 2 /* ELFCLASS64 */ || p[5] != 1 /* LSB */ ||
        rd16(p + 18) != EM_CUDA)
        return IMAGE_ERR_INVALID;
    e->p = p;
    e->shoff = rd64(p + 40);
    e->shentsize = rd16(p + 58);
    e->shnum = rd16(p + 60);
    unsigned shstrndx = rd16(p + 62);
    if (e->shentsize < 64 || e->shnum == 0 || e->shoff > IMAGE_MAX_BYTES)
        return IMAGE_ERR_INVALID;
    uint64_t end = e->shoff + (uint64_t)e->shnum * e->shentsize;
    if (len == SIZE_MAX) {
        /* the furthest byte any section claims */
        for (unsigned i = 0; i < e->shnum; i++) {
            const unsigned char *sh = p + e->shoff + (uint64_t)i * e->shentsize;
            uint64_t o = rd64(sh + 24), s = rd32(sh + 4) == 8 ? 0 : rd64(sh + 32);
            if (o > IMAGE_MAX_BYTES || s > IMAGE_MAX_BYTES)
                return IMAGE_ERR_INVALID;
            if (o + s > end)
                end = o + s;
        }
        len = end;
    }
    if (end > len)
        return IMAGE_ERR_INVALID;
    e->len = len;
    uint64_t sz = 0;
    e->shstr = shstrndx < e->shnum ? elf_section(e, shstrndx, &sz) : NULL;
    e->shstr_len = e->shstr ? sz : 0;
    return 0;
}

/* The kernel whose symbol table index is sym, if one. */
typedef struct sym_kernel {
    uint32_t sym;
    size_t idx;          /* in img->kernels (an index: adding a kernel moves the array) */
} sym_kernel_t;

static image_kernel_t *by_sym(image_t *img, const sym_kernel_t *v, size_t n, uint32_t sym)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].sym == sym)
            return &img->kernels[v[i].idx];
    return NULL;
}

/* The attributes of one .nv.info section; kernel: the function of a .nv.info.<name> section (NULL for the
 * global .nv.info, whose per-function attributes name the function by its symbol index). */
static void nvinfo_read(const unsigned char *p, uint64_t size, image_kernel_t *kernel, image_t *img,
                        const sym_kernel_t *syms, size_t nsyms)
{
    uint64_t i = 0;
    while (i + 2 <= size) {
        unsigned fmt = p[i], attr = p[i + 1];
        const unsigned char *v = p + i + 2;
        uint64_t vlen;
        switch (fmt) {
        case EIFMT_NVAL: vlen = 0; break;
        case EIFMT_BVAL: vlen = 1; break;
        case EIFMT_HVAL: vlen = 2; break;
        case EIFMT_SVAL:
            if (i + 4 > size)
                return;
            vlen = rd16(v);
            v += 2;
            i += 2;
            break;
        default: return;   /* a format this reader does not know: stop rather than misread */
        }
        if (i + 2 + vlen > size)
            return;
        if (fmt == EIFMT_SVAL && vlen >= 8 && !kernel && (attr == EIATTR_REGCOUNT || attr == EIATTR_FRAME_SIZE)) {
            image_kernel_t *k = by_sym(img, syms, nsyms, rd32(v));
            if (k && attr == EIATTR_REGCOUNT)
                k->regs = (int)rd32(v + 4);
            else if (k)
                k->local_bytes = (int)rd32(v + 4);
        } else if (kernel && fmt == EIFMT_SVAL && attr == EIATTR_MAX_THREADS && vlen >= 12) {
            uint64_t t = (uint64_t)rd32(v) * rd32(v + 4) * rd32(v + 8);
            if (t > 0 && t <= 1024)
                kernel->max_threads = (int)t;
        } else if (kernel && fmt == EIFMT_HVAL && attr == EIATTR_CBANK_PARAM_SIZE) {
            kernel->param_bytes = rd16(v);
        }
        i += 2 + vlen;
    }
}

/* The kernels of a cubin: STT_FUNC symbols marked as entries, with their .nv.info resources. */
static int cubin_parse(const unsigned char *p, size_t len, int sm, image_t *img, bool *usable)
{
    elf_view_t e;
    int rc = elf_open(p, len, &e);
    if (rc < 0)
        return rc;
    /* e_flags: the SM version in bits 8..15 (0x5a00 for sm_90); a cubin runs on its major at a minor at least
     * its own (sm_80 on sm_86, never sm_75 on sm_90) */
    int arch = (int)((rd32(p + 48) >> 8) & 0xff);
    *usable = arch / 10 == sm / 10 && arch <= sm;
    if (!*usable)
        return 0;
    sym_kernel_t *syms = NULL;
    size_t nsyms = 0;
    rc = 0;
    for (unsigned s = 0; s < e.shnum && rc == 0; s++) {
        const unsigned char *sh = elf_sh(&e, s);
        if (rd32(sh + 4) != SHT_SYMTAB)
            continue;
        uint64_t size = 0, strsize = 0, entsize = rd64(sh + 56);
        const unsigned char *tab = elf_section(&e, s, &size);
        const unsigned char *str = elf_section(&e, rd32(sh + 40), &strsize);
        if (!tab || !str || entsize < 24)
            return IMAGE_ERR_INVALID;
        for (uint64_t off = 0; off + 24 <= size; off += entsize) {
            const unsigned char *sym = tab + off;
            uint32_t name = rd32(sym);
            if ((sym[4] & 0xf) != STT_FUNC || !(sym[5] & STO_CUDA_ENTRY) || name >= strsize)
                continue;
            const char *nm = (const char *)str + name;
            size_t n = strnlen(nm, strsize - name);
            image_kernel_t *k = n < strsize - name ? kernel_add(img, nm, n) : NULL;
            sym_kernel_t *v = k ? realloc(syms, (nsyms + 1) * sizeof(*v)) : NULL;
            if (!v) {
                rc = -ENOMEM;
                break;
            }
            syms = v;
            syms[nsyms++] = (sym_kernel_t){ (uint32_t)(off / entsize), (size_t)(k - img->kernels) };
            k->arch = arch;
        }
    }
    for (unsigned s = 0; s < e.shnum && rc == 0; s++) {
        const char *nm = elf_section_name(&e, s);
        if (strncmp(nm, ".nv.info", 8) != 0)
            continue;
        uint64_t size = 0;
        const unsigned char *sec = elf_section(&e, s, &size);
        if (!sec)
            continue;
        image_kernel_t *k = NULL;
        if (nm[8] == '.' && !(k = (image_kernel_t *)image_kernel_find(img, nm + 9)))
            continue;
        if (nm[8] == '.' || nm[8] == '\0')
            nvinfo_read(sec, size, k, img, syms, nsyms);
    }
    free(syms);
    return rc;
}

/* ---- fatbin --------------------------------------------------------------------------------------------- */
/* LZ4 block decompression (the codec of compressed fatbin entries): dst_len bytes exactly, or -1. */
static long lz4_decompress(const unsigned char *src, size_t src_len, unsigned char *dst, size_t dst_len)
{
    size_t ip = 0, op = 0;
    while (ip < src_len) {
        unsigned token = src[ip++];
        size_t lit = token >> 4;
        if (lit == 15) {
            unsigned b;
            do {
                if (ip >= src_len)
                    return -1;
                lit += b = src[ip++];
            } while (b == 255);
        }
        if (lit > src_len - ip || lit > dst_len - op)
            return -1;
        memcpy(dst + op, src + ip, lit);
        ip += lit;
        op += lit;
        if (ip >= src_len)
            break;   /* the last sequence has literals only */
        if (src_len - ip < 2)
            return -1;
        size_t off = src[ip] | (size_t)src[ip + 1] << 8;
        ip += 2;
        size_t ml = token & 15;
        if (ml == 15) {
            unsigned b;
            do {
                if (ip >= src_len)
                    return -1;
                ml += b = src[ip++];
            } while (b == 255);
        }
        ml += 4;
        if (off == 0 || off > op || ml > dst_len - op)
            return -1;
        for (size_t i = 0; i < ml; i++, op++)
            dst[op] = dst[op - off];
    }
    return (long)op;
}

/* zstd through the system's libzstd.so.1, loaded on first use (every Debian and Red Hat system has it: dpkg and
 * rpm use it); without it, zstd entries cannot be read. */
typedef size_t (*zstd_decompress_fn)(void *dst, size_t dst_len, const void *src, size_t src_len);
typedef unsigned (*zstd_is_error_fn)(size_t code);
static zstd_decompress_fn zstd_decompress;
static zstd_is_error_fn zstd_is_error;
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;

static void zstd_load(void)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    zstd_is_error = (zstd_is_error_fn)dlsym(h, "ZSTD_isError");
    zstd_decompress = zstd_is_error ? (zstd_decompress_fn)dlsym(h, "ZSTD_decompress") : NULL;
}

static long zstd_decompress_all(const unsigned char *src, size_t src_len, unsigned char *dst, size_t dst_len)
{
    pthread_once(&zstd_once, zstd_load);
    if (!zstd_decompress)
        return -1;
    size_t n = zstd_decompress(dst, dst_len, src, src_len);
    return zstd_is_error(n) ? -1 : (long)n;
}

/* One entry's payload, decompressed where it is compressed: *buf (to free) or NULL when it cannot be read. */
static int fatbin_payload(const unsigned char *ent, const unsigned char *payload, uint64_t size,
                          unsigned char **buf, size_t *buf_len)
{
    *buf = NULL;
    uint64_t flags = rd64(ent + 40);
    if (!(flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD))) {
        *buf = malloc(size + 1);
        if (!*buf)
            return -ENOMEM;
        memcpy(*buf, payload, size);
        (*buf)[size] = 0;
        *buf_len = size;
        return 0;
    }
    uint64_t csize = rd32(ent + 16), usize = rd64(ent + 56);
    if (csize > size || usize == 0 || usize > IMAGE_MAX_BYTES)
        return 0;
    unsigned char *out = malloc(usize + 1);
    if (!out)
        return -ENOMEM;
    long n = flags & FATBIN_FLAG_ZSTD ? zstd_decompress_all(payload, csize, out, usize)
                                      : lz4_decompress(payload, csize, out, usize);
    if (n != (long)usize) {
        free(out);
        return 0;
    }
    out[usize] = 0;
    *buf = out;
    *buf_len = usize;
    return 0;
}

static int fatbin_parse(const unsigned char *p, size_t len, int sm, image_t *img)
{
    if (len < 16 || rd32(p) != FATBIN_MAGIC)
        return IMAGE_ERR_INVALID;
    uint64_t hdr = rd16(p + 6), total = rd64(p + 8);
    if (hdr < 16 || total > IMAGE_MAX_BYTES || (len != SIZE_MAX && hdr + total > len))
        return IMAGE_ERR_INVALID;
    uint64_t end = hdr + total;
    bool any_entry = false, any_usable = false, unreadable = false;
    for (uint64_t off = hdr; off + 64 <= end;) {
        const unsigned char *ent = p + off;
        unsigned kind = rd16(ent);
        uint64_t eh = rd32(ent + 4), size = rd64(ent + 8);
        if (eh < 64 || eh > end - off || size > end - off - eh)
            return IMAGE_ERR_INVALID;
        off += eh + size;
        if (kind != FATBIN_KIND_PTX && kind != FATBIN_KIND_ELF)
            continue;
        any_entry = true;
        unsigned char *buf;
        size_t blen;
        int rc = fatbin_payload(ent, ent + eh, size, &buf, &blen);
        if (rc < 0)
            return rc;
        if (!buf) {
            unreadable = true;
            continue;
        }
        int arch = (int)rd32(ent + 28);
        bool usable = false;
        if (kind == FATBIN_KIND_ELF) {
            rc = cubin_parse(buf, blen, sm, img, &usable);
        } else if (arch <= sm) {
            /* PTX for compute_<arch> is JITted for any newer device */
            usable = true;
            rc = ptx_parse((const char *)buf, img);
        }
        free(buf);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            return IMAGE_ERR_INVALID;
        any_usable |= usable;
    }
    if (!any_entry)
        return IMAGE_ERR_INVALID;
    if (!any_usable && unreadable) {
        img->names_known = false;   /* only compressed entries of another codec: trust the caller's names */
        return 0;
    }
    return any_usable ? 0 : IMAGE_ERR_NO_BINARY;
}

/* ---- the entry points ----------------------------------------------------------------------------------- */
/* Whether p starts with the n bytes of magic, read one at a time up to the first that differs: a short text
 * image (its NUL comes first) is never read past its end. */
static bool starts_with(const unsigned char *p, const unsigned char *magic, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != magic[i])
            return false;
    return true;
}

int image_parse(const void *data, size_t len, int sm, image_t *out)
{
    static const unsigned char wrapper[4] = {0xB1, 0x43, 0x62, 0x46}, fatbin[4] = {0x50, 0xED, 0x55, 0xBA},
                               elf[4] = {0x7f, 'E', 'L', 'F'};
    memset(out, 0, sizeof(*out));
    out->names_known = true;
    const unsigned char *p = data;
    int rc;
    if (len >= 16 && starts_with(p, wrapper, 4)) {
        const unsigned char *fat;
        memcpy(&fat, p + 8, sizeof(fat));
        out->kind = IMAGE_FATBIN;
        rc = fat ? fatbin_parse(fat, SIZE_MAX, sm, out) : IMAGE_ERR_INVALID;
    } else if (len >= 16 && starts_with(p, fatbin, 4)) {
        out->kind = IMAGE_FATBIN;
        rc = fatbin_parse(p, len, sm, out);
    } else if (len >= 4 && starts_with(p, elf, 4)) {
        bool usable;
        out->kind = IMAGE_CUBIN;
        rc = cubin_parse(p, len, sm, out, &usable);
        if (rc == 0 && !usable)
            rc = IMAGE_ERR_NO_BINARY;
    } else if (ptxver_of_image(data) > 0) {
        out->kind = IMAGE_PTX;
        rc = ptx_parse(data, out);
    } else {
        rc = IMAGE_ERR_INVALID;
    }
    if (rc < 0)
        image_free(out);
    return rc;
}

const image_kernel_t *image_kernel_find(const image_t *img, const char *name)
{
    for (size_t i = 0; i < img->n; i++)
        if (strcmp(img->kernels[i].name, name) == 0)
            return &img->kernels[i];
    return NULL;
}

void image_free(image_t *img)
{
    for (size_t i = 0; i < img->n; i++)
        free(img->kernels[i].name);
    free(img->kernels);
    img->kernels = NULL;
    img->n = 0;
}
