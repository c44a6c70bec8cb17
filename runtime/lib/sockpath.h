/* sockpath.h - where rotad's socket lives when ROTA_SOCKET / --socket do not say. */
#ifndef ROTA_SOCKPATH_H
#define ROTA_SOCKPATH_H

#include <stddef.h>

/*
 * The default socket path:
 *   root (euid 0)            /run/rota/rotad.sock
 *   XDG_RUNTIME_DIR set      $XDG_RUNTIME_DIR/rota/rotad.sock   (absolute paths only)
 *   otherwise                /tmp/rota-<uid>/rotad.sock
 * Returns 0, or -ENAMETOOLONG when it does not fit cap (or a sockaddr_un).
 */
int sockpath_default(char *out, size_t cap);
/* explicit (if non-NULL and non-empty) or the default; same returns, plus -EINVAL for a relative-or-empty
 * path that does not fit. */
int sockpath_resolve(const char *explicit_path, char *out, size_t cap);

#endif
