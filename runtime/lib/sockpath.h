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

/* The node-wide rotad's socket (a root rotad's default). */
#define SOCKPATH_NODE "/run/rota/rotad.sock"
#define SOCKPATH_MAX 108 /* sizeof sockaddr_un.sun_path */
/* Where a client looks for rotad when ROTA_SOCKET / --socket do not say, in order: the node-wide socket first (a
 * root rotad serves every user), then, for a user other than root, that user's own default. Fills up to max
 * paths; returns how many (1 or 2), or -ENAMETOOLONG. */
int sockpath_candidates(char (*out)[SOCKPATH_MAX], int max);

#endif
