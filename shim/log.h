/* log.h - librota's messages on stderr, prefixed "rota:", filtered by ROTA_LOG. */
#ifndef ROTA_SHIM_LOG_H
#define ROTA_SHIM_LOG_H

#include "shim/options.h"

/* Writes "rota: <level>: <message>\n" to stderr with one write(2) when level <= ROTA_LOG. Never allocates;
 * messages are cut at 1 KiB. Safe in a forked child. */
void rota_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
