/* symbols-t.c - the wrapped set: prototypes against cuda.h, librota.map and nm -D against wrappers.def. */
#include "tests/shim/shim-test.h"

#include <cudaTypedefs.h>

/*
 * Compile time (this file does not build if any of these fails):
 *   - each row's params are exactly cuda.h's prototype of that name;
 *   - each row's (base, ver, pt) names a PFN_ typedef of cudaTypedefs.h of that same type, so the "since"
 *     column cuGetProcAddress's fallback relies on is right.
 * (librota's wrappers are definitions of those very names compiled against cuda.h, so a wrapper whose
 * prototype differed would not compile either.)
 * Run time: pt is 1 exactly for _ptsz/_ptds names and base prefixes name (a type cannot tell); the names
 * librota.so exports (nm -D --defined-only) are exactly the table's exported rows, the NVML names of shim/nvml.def plus
 * dlsym and dlvsym, all functions; shim/librota.map lists exactly the same names.
 */
#define PFN_OF_0(base, ver) PFN_##base##_v##ver
#define PFN_OF_1(base, ver) PFN_##base##_v##ver##_ptsz
#define PFN_OF(base, ver, pt) PFN_OF_##pt(base, ver)
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream)                                                 \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), CUresult(CUDAAPI *) params),               \
                   #name ": params differ from cuda.h");                                                       \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), PFN_OF(base, ver, pt)),                     \
                   #name ": not the prototype of PFN_" #base "_v" #ver);
#include "shim/wrappers.def"
#undef ROTA_FN

typedef struct row {
    const char *name, *base;
    int pt;
    bool exported;
} row_t;
static const row_t rows[] = {
#define ROTA_FN(fam, name, base, ver, pt, params, args, stream) {#name, #base, pt, strcmp(#fam, "REAL") != 0},
#include "shim/wrappers.def"
#undef ROTA_FN
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

#define MAXN 512
typedef struct nameset {
    char *v[MAXN];
    int n;
} nameset_t;

static void set_add(nameset_t *s, const char *name)
{
    if (s->n < MAXN) s->v[s->n++] = strdup(name);
}

static void set_free(nameset_t *s)
{
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    s->n = 0;
}

static bool set_has(const nameset_t *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0) return true;
    return false;
}

/* Every name of want in got and the other way round; reports each difference. */
static bool same_set(const nameset_t *want, const nameset_t *got, const char *what)
{
    bool good = true;
    for (int i = 0; i < want->n; i++)
        if (!set_has(got, want->v[i])) good = false, diag("%s lacks %s", what, want->v[i]);
    for (int i = 0; i < got->n; i++)
        if (!set_has(want, got->v[i])) good = false, diag("%s has %s, which is not in wrappers.def", what, got->v[i]);
    return good && want->n == got->n;
}

int main(void)
{
    nameset_t want = {0}, nm = {0}, map = {0};
    char line[1024], cmd[4200];
    bool dup = false, all_func = true;

    plan(6);
    bool cols = true;
    for (size_t i = 0; i < NROWS; i++) {
        size_t nl = strlen(rows[i].name), bl = strlen(rows[i].base);
        const char *tail = nl > 5 ? rows[i].name + nl - 5 : "";
        bool per_thread = strcmp(tail, "_ptsz") == 0 || strcmp(tail, "_ptds") == 0;
        if (per_thread != (rows[i].pt != 0) || strncmp(rows[i].name, rows[i].base, bl) != 0 ||
            (rows[i].name[bl] != '\0' && rows[i].name[bl] != '_')) {
            cols = false;
            diag("row %s: base %s, pt %d do not match its name", rows[i].name, rows[i].base, rows[i].pt);
        }
    }
    ok(cols, "every row's base is its name's prefix and pt is set exactly for _ptsz/_ptds names");
    for (size_t i = 0; i < NROWS; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(rows[i].name, rows[j].name) == 0) dup = true, diag("row %s appears twice", rows[i].name);
        if (rows[i].exported) set_add(&want, rows[i].name);
    }
    set_add(&want, "dlsym");
    set_add(&want, "dlvsym");
#define ROTA_NVML(name) set_add(&want, #name);
#include "shim/nvml.def"
#undef ROTA_NVML
    ok(!dup, "every row of wrappers.def names a different symbol (%zu rows)", NROWS);

    snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s'", shim_librota());
    FILE *p = popen(cmd, "r");
    if (p == NULL) bail("popen %s: %s", cmd, strerror(errno));
    while (fgets(line, sizeof(line), p)) {
        char addr[64], type[8], name[512];
        if (sscanf(line, "%63s %7s %511s", addr, type, name) != 3) continue;
        if (strcmp(type, "T") != 0 && strcmp(type, "W") != 0 && strcmp(type, "i") != 0) {
            all_func = false;
            diag("exported %s has type %s", name, type);
        }
        set_add(&nm, name);
    }
    int st = pclose(p);
    ok(st == 0 && nm.n > 0, "nm -D --defined-only librota.so runs (%d names)", nm.n);
    ok(same_set(&want, &nm, "librota.so"), "librota.so exports exactly the %d wrapped names and dlsym, dlvsym",
       want.n);
    ok(all_func, "every exported name is a function");

    const char *src = getenv("ROTA_SRCDIR");
    if (src == NULL) bail("ROTA_SRCDIR is not set");
    snprintf(cmd, sizeof(cmd), "%s/shim/librota.map", src);
    FILE *f = fopen(cmd, "r");
    if (f == NULL) bail("%s: %s", cmd, strerror(errno));
    bool in_global = false;
    while (fgets(line, sizeof(line), f)) {
        char name[512];
        if (strstr(line, "global:")) in_global = true;
        else if (strstr(line, "local:")) in_global = false;
        else if (in_global && sscanf(line, " %511[A-Za-z0-9_] ;", name) == 1) set_add(&map, name);
    }
    fclose(f);
    ok(same_set(&want, &map, "shim/librota.map"), "shim/librota.map lists exactly the same %d names", want.n);
    set_free(&want);
    set_free(&nm);
    set_free(&map);
    return done_testing();
}
