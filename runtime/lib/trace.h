/* trace.h - ROTA_TRACE's JSON-lines writer: one decision per line, one write() on an O_APPEND descriptor. */
#ifndef ROTA_LIB_TRACE_H
#define ROTA_LIB_TRACE_H

#include <stdint.h>

/* The line format (scripts/bench reads it; do not change it):
 *   {"ts_us":<CLOCK_MONOTONIC us>,"pid":<getpid()>,"ev":"<ev>","gpu":<gpu>,"bytes":<bytes>[,<extra>]}\n
 * ev is one of hold, release, mem_wait, mem_grant, mem_deny, place, idle_probe; extra, when not NULL, is the
 * inside of a JSON object ("reason":"prio", ...) and is copied verbatim. A line longer than TRACE_LINE_MAX loses
 * extra. */
#define TRACE_LINE_MAX 512

/* Opens path for appending (O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC, 0644): the fd or -errno. */
int trace_open(const char *path);
/* Formats one line into a stack buffer and writes it with one write(): async-signal-safe (no locale, no
 * allocation, no lock) and thread-safe (O_APPEND keeps lines whole). 0 or -errno. */
int trace_write(int fd, const char *ev, int gpu, uint64_t bytes, const char *extra);

#endif
