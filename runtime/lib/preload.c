/* preload.c - the LD_PRELOAD that rota gives a job: librota.so once, after any sanitizer runtime. */
#include "runtime/lib/preload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The file name of the n-byte entry e (what follows its last '/'). */
static const char *preload_base(const char *e, size_t n, size_t *bn)
{
    const char *base = e;
    for (size_t i = 0; i < n; i++)
        if (e[i] == '/') base = e + i + 1;
    *bn = n - (size_t)(base - e);
    return base;
}

static bool preload_is_librota(const char *e, size_t n)
{
    size_t bn;
    const char *base = preload_base(e, n, &bn);
    return bn == strlen("librota.so") && !strncmp(base, "librota.so", bn);
}

static bool preload_is_sanitizer(const char *e, size_t n)
{
    static const char *const rt[] = {"libasan.so", "libtsan.so", "libubsan.so", "libclang_rt."};
    size_t bn;
    const char *base = preload_base(e, n, &bn);
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++)
        if (bn >= strlen(rt[i]) && !strncmp(base, rt[i], strlen(rt[i]))) return true;
    return false;
}

int preload_compose(const char *lib, const char *old, char *out, size_t n)
{
    size_t len = 0;
    if (!n) return -ENAMETOOLONG;
    out[0] = 0;
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) {
            if (lib && (len += (size_t)snprintf(out + len, n - len, "%s%s", len ? ":" : "", lib)) >= n)
                return -ENAMETOOLONG;
            continue;
        }
        for (const char *e = old ? old : ""; *e;) {
            size_t k = strcspn(e, ": ");
            if (k && !preload_is_librota(e, k) && preload_is_sanitizer(e, k) == (pass == 0) &&
                (len += (size_t)snprintf(out + len, n - len, "%s%.*s", len ? ":" : "", (int)k, e)) >= n)
                return -ENAMETOOLONG;
            e += k;
            if (*e) e++;
        }
    }
    return 0;
}
