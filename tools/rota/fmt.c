/* fmt.c - numbers as the rota tool's text output shows them (sizes in binary units). */
#include "tools/rota/fmt.h"

#include <inttypes.h>
#include <stdio.h>

void rota_fmt_size(char *out, size_t n, uint64_t v)
{
    static const char *const unit[] = {"B", "K", "M", "G", "T", "P"};
    double d = (double)v;
    unsigned u = 0;
    while (d >= 1024 && u < 5) {
        d /= 1024;
        u++;
    }
    if (u == 0) snprintf(out, n, "%" PRIu64 "B", v);
    else snprintf(out, n, "%.1f%s", d, unit[u]);
}
