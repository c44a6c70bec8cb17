/* parse.c - strict number parsing: strtoull/strtod with end pointer, errno and bounds checks. */
#include "runtime/lib/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* strtoull accepts leading blanks and a minus sign (negating the value); option values must not. */
static bool parse_starts_with_digit(const char *s)
{
    return s && isdigit((unsigned char)s[0]);
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!parse_starts_with_digit(s)) return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -EINVAL;
    if (errno == ERANGE || v < min || v > max) return -ERANGE;
    *out = v;
    return 0;
}

int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s) return -EINVAL;
    const char *d = (s[0] == '-' || s[0] == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)d[0])) return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end) return -EINVAL;
    if (errno == ERANGE || v < min || v > max) return -ERANGE;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!parse_starts_with_digit(s)) return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE) return -ERANGE;
    unsigned shift = 0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        case 'B': shift = 0; break;
        default: return -EINVAL;
        }
        const char *rest = end + 1;
        if (toupper((unsigned char)*end) == 'B') {
            if (*rest) return -EINVAL;
        } else if (*rest && strcasecmp(rest, "B") && strcasecmp(rest, "iB")) {
            return -EINVAL;
        }
    }
    if (shift && v > (UINT64_MAX >> shift)) return -ERANGE;
    v <<= shift;
    if (v < min || v > max) return -ERANGE;
    *out = v;
    return 0;
}

int parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.' || s[0] == '-' || s[0] == '+')) return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod also reads hexadecimal ("0x10" = 16), infinity and nan: option values are decimal numbers. */
    if (end == s || *end || strpbrk(s, "xXnN")) return -EINVAL;
    if (errno == ERANGE || !isfinite(v) || v < min || v > max) return -ERANGE;
    *out = v;
    return 0;
}

int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    if (!s) return -EINVAL;
    for (unsigned i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcasecmp(s, yes[i])) { *out = true; return 0; }
        if (!strcasecmp(s, no[i])) { *out = false; return 0; }
    }
    return -EINVAL;
}
