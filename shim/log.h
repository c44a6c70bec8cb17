/* log.h - librota's messages on stderr, prefixed "rota:", filtered by ROTA_LOG. */
#ifndef ROTA_SHIM_LOG_H
#define ROTA_SHIM_LOG_H

enum rota_log_level { ROTA_LOG_ERROR = 0, ROTA_LOG_WARN, ROTA_LOG_INFO, ROTA_LOG_DEBUG };

/* Writes "rota: <level>: <message>\n" to stderr with one write(2) when level <= ROTA_LOG. Never allocates;
 * messages are cut at 1 KiB. Safe in a forked child. */
void rota_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The level ROTA_LOG set (options.c, once it has parsed the environment; until then: warn). The log depends on
 * nothing else in librota, so that every file may log. */
void rota_log_set_level(int level);

#endif
