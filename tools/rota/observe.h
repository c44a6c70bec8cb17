/* observe.h - rota status, top and metrics: connecting to rotad as an observer. */
#ifndef ROTA_TOOL_OBSERVE_H
#define ROTA_TOOL_OBSERVE_H

#include "runtime/lib/conn.h"

/* Connects to rotad at sock (NULL or "": the default candidates) as an observer. On failure prints prog's
 * fatal message (with every socket path tried and how to start a rotad when none listens) and returns -errno. */
int rota_observe_open(const char *prog, const char *sock, conn_t **out);

#endif
