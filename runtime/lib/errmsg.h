/* errmsg.h - one sentence into a caller's error buffer, returned with the code that goes with it: the shape of every
 * "0 or -errno, with a message in err" function of rotad, its tools and the plugins. */
#ifndef ROTA_ERRMSG_H
#define ROTA_ERRMSG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Formats fmt into err (n bytes, cut to fit; nothing when err is NULL or n is 0) and returns rc. */
int errmsg(char *err, size_t n, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif
