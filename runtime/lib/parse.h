/* parse.h - strict parsing of option values (integers, sizes, fractions) shared by every rota component. */
#ifndef ROTA_PARSE_H
#define ROTA_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Each returns 0 and stores the value, -EINVAL for text that is not entirely a number of that form (empty,
 * trailing junk, a sign where none is allowed), or -ERANGE when it is outside [min, max] or overflows. */

/* Decimal unsigned integer, no sign, no suffix. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Decimal signed integer. */
int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* Byte size: an integer with an optional binary suffix K, M, G, T (also KB/KiB etc., case-insensitive):
 * "80G" = 80 * 2^30. Fractions are refused ("1.5G" is -EINVAL): sizes are exact. */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A finite decimal number ("0.5", "25", "1e3"). */
int parse_double(const char *s, double min, double max, double *out);
/* 1/0, true/false, yes/no, on/off (case-insensitive). */
int parse_bool(const char *s, bool *out);

#endif
