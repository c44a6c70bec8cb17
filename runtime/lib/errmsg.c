/* errmsg.c - one sentence into a caller's error buffer (runtime/lib/errmsg.h). */
#include "runtime/lib/errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int errmsg(char *err, size_t n, int rc, const char *fmt, ...)
{
    if (!err || !n) return rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return rc;
}
