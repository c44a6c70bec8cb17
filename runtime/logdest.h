/* logdest.h - where rotad's log goes: stderr, a file, or syslog (rotad --log). */
#ifndef ROTA_LOGDEST_H
#define ROTA_LOGDEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* rotad writes every log line to stderr ("rotad: LEVEL: text"); logdest points descriptor 2 where --log says.
 * spec: "stderr", "syslog" (facility daemon, ident rotad, the level mapped to a priority), or a file path
 * (appended to; created 0640). NULL: stderr with --foreground, syslog when detached. Checked (the file opened)
 * before rotad detaches, so that an error reaches the terminal; 0 or -errno with one message in err. */
int logdest_open(const char *spec, bool foreground, char *err, size_t errlen);
/* Points descriptor 2 at the destination (after detaching: syslog runs a thread that forwards the lines, with
 * a non-blocking pipe in between, so that no thread of rotad ever waits for the log). 0 or -errno. */
int logdest_start(void);
/* Flushes and stops: the last lines reach the destination before rotad exits. */
void logdest_stop(void);
/* One line of rotad's log at level (0 warning, 1 info, 2 debug): "rotad: LEVEL: " what fmt says, cut at 511
 * characters, after what (a part's prefix such as "MPS: ", or ""). */
void logdest_vline(int level, const char *what, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* "stderr", "syslog" or the file's path: what logdest_open chose. */
const char *logdest_name(void);

#endif
