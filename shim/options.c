/* options.c - the one table of ROTA_* options: name, type, default, bounds; strict parsing, once. */
#include "shim/options.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "runtime/lib/parse.h"
#include "runtime/lib/prio.h"
#include "shim/log.h"

enum opt_type { OPT_BOOL, OPT_LOG, OPT_PATH, OPT_SIZE, OPT_DOUBLE, OPT_PRIORITY, OPT_U32, OPT_GPU, OPT_RETRY, OPT_TOKEN };

typedef struct opt_row {
    const char *name;
    enum opt_type type;
    size_t off;           /* field in rota_options_t */
    const char *dflt;     /* parsed like a value from the environment; NULL: empty string */
    double min, max;      /* numeric bounds (sizes and integers: exact, doubles: inclusive unless min_open);
                           * paths: max is the longest length in bytes (0: ROTA_OPT_PATH_MAX - 1) */
    bool min_open;        /* the lower bound is excluded (ROTA_WEIGHT > 0) */
    const char *expect;   /* what a good value looks like, for the error message */
} opt_row_t;

#define OFF(f) offsetof(rota_options_t, f)
/* The longest path a socket address holds (sun_path less its NUL); checked against sys/un.h below. */
#define OPT_SUN_PATH_MAX 107
#define OPT_STR2(x) #x
#define OPT_STR(x) OPT_STR2(x)
_Static_assert(OPT_SUN_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path) - 1, "OPT_SUN_PATH_MAX");
static const opt_row_t opt_table[] = {
    {"ROTA_DISABLE", OPT_BOOL, OFF(disable), "0", 0, 0, false, "a boolean (1/0, true/false, yes/no, on/off)"},
    {"ROTA_LOG", OPT_LOG, OFF(log_level), "warn", 0, 0, false, "one of error, warn, info, debug"},
    {"ROTA_REAL_LIBCUDA", OPT_PATH, OFF(real_libcuda), NULL, 0, 0, false, "a path to the real libcuda.so.1"},
    {"ROTA_SOCKET", OPT_PATH, OFF(socket), NULL, 0, OPT_SUN_PATH_MAX, false,
     "a path to rotad's socket, at most " OPT_STR(OPT_SUN_PATH_MAX) " bytes"},
    {"ROTA_REQUIRE", OPT_BOOL, OFF(require), "0", 0, 0, false, "a boolean (1/0, true/false, yes/no, on/off)"},
    {"ROTA_MEM_LIMIT", OPT_SIZE, OFF(mem_limit), "0", 0, 1125899906842624.0 /* 1 PiB */, false,
     "a size in bytes with an optional K/M/G/T suffix (0 = no limit)"},
    {"ROTA_MEM_WAIT", OPT_DOUBLE, OFF(mem_wait_s), "30", 0, 31536000 /* a year */, false,
     "seconds, a number >= 0 (0 = fail at once)"},
    {"ROTA_MEM_RETRY", OPT_RETRY, OFF(mem_retry), "auto", 0, 0, false,
     "one of auto (on when PyTorch's libc10_cuda.so is loaded and its allocator retries), on, off"},
    {"ROTA_PRIORITY", OPT_PRIORITY, OFF(priority), "normal", 0, 0, false, "one of high, normal, low"},
    {"ROTA_WEIGHT", OPT_DOUBLE, OFF(weight), "1", 0, 1e6, true, "a number > 0 and <= 1e6"},
    {"ROTA_MAX_INFLIGHT", OPT_U32, OFF(max_inflight), "8", 1, 1024, false, "an integer from 1 to 1024"},
    {"ROTA_INFLIGHT_US", OPT_U32, OFF(inflight_us), "500", 0, 1000000, false,
     "microseconds, an integer from 0 to 1000000 (0 = no device-time bound)"},
    {"ROTA_REFILL_US", OPT_U32, OFF(refill_us), "300", 0, 100000, false,
     "microseconds, an integer from 0 to 100000 (0 = launch only at a completion)"},
    {"ROTA_IDLE_PROBE", OPT_BOOL, OFF(idle_probe), "1", 0, 0, false, "a boolean (1/0, true/false, yes/no, on/off)"},
    {"ROTA_ADMIT", OPT_BOOL, OFF(admit), "1", 0, 0, false, "a boolean (1/0, true/false, yes/no, on/off)"},
    {"ROTA_ADMIT_WAIT_US", OPT_U32, OFF(admit_wait_us), "20000", 1, 1000000, false,
     "microseconds, an integer from 1 to 1000000"},
    {"ROTA_GPU", OPT_GPU, OFF(gpu), "auto", 0, 1023, false, "auto, all or a device ordinal from 0 to 1023"},
    {"ROTA_TEST_COUNTERS", OPT_PATH, OFF(test_counters), NULL, 0, 0, false, "a file path (test builds only)"},
    {"ROTA_TRACE", OPT_PATH, OFF(trace), NULL, 0, 0, false, "a file path (JSON lines of rota's decisions)"},
    {"ROTA_GRANT", OPT_TOKEN, OFF(grant), NULL, 0, 0, false,
     "32 hexadecimal digits, not all zero (the token the device plugin set)"},
};
#define OPT_ROWS (sizeof(opt_table) / sizeof(opt_table[0]))

static rota_options_t opts;
static unsigned opt_errors;
static char opt_bad[OPT_ROWS]; /* which rows held a bad value */
static pthread_once_t opt_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const retry_names[] = {"auto", "on", "off"};

static int parse_word(const char *s, const char *const *words, int n, int *out)
{
    for (int i = 0; i < n; i++) {
        if (strcasecmp(s, words[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return -EINVAL;
}

/* Parses s for row r into the options; 0 or -errno, leaving the field untouched on error. */
static int opt_parse(const opt_row_t *r, const char *s)
{
    char *field = (char *)&opts + r->off;
    uint64_t u;
    double d;
    bool b;
    enum rota_prio p;
    int i, rc;

    switch (r->type) {
    case OPT_BOOL:
        if ((rc = parse_bool(s, &b)) == 0) *(bool *)field = b;
        return rc;
    case OPT_LOG:
        if ((rc = parse_word(s, level_names, 4, &i)) == 0) *(int *)field = i;
        return rc;
    case OPT_PRIORITY:
        if ((rc = prio_parse(s, &p)) == 0) *(unsigned *)field = p;
        return rc;
    case OPT_RETRY:
        if ((rc = parse_word(s, retry_names, 3, &i)) == 0) *(int *)field = i;
        return rc;
    case OPT_PATH:
        if (strlen(s) > (r->max ? (size_t)r->max : ROTA_OPT_PATH_MAX - 1)) return -ERANGE;
        strcpy(field, s);
        return 0;
    case OPT_SIZE:
        if ((rc = parse_size(s, (uint64_t)r->min, (uint64_t)r->max, &u)) == 0) *(uint64_t *)field = u;
        return rc;
    case OPT_U32:
        if ((rc = parse_u64(s, (uint64_t)r->min, (uint64_t)r->max, &u)) == 0) *(unsigned *)field = (unsigned)u;
        return rc;
    case OPT_DOUBLE:
        if ((rc = parse_double(s, r->min, r->max, &d)) != 0) return rc;
        if (r->min_open && d <= r->min) return -ERANGE;
        *(double *)field = d;
        return 0;
    case OPT_TOKEN: {
        uint8_t t[sizeof opts.grant] = {0}, any = 0;
        if (strlen(s) != 2 * sizeof t) return -EINVAL;
        for (size_t k = 0; k < 2 * sizeof t; k++) {
            int c = s[k], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (v < 0) return -EINVAL;
            t[k / 2] |= (uint8_t)(v << (k % 2 ? 0 : 4));
            any |= (uint8_t)v;
        }
        if (!any) return -EINVAL;
        memcpy(field, t, sizeof t);
        opts.has_grant = true;
        return 0;
    }
    case OPT_GPU:
        if (strcasecmp(s, "auto") == 0) {
            *(int *)field = ROTA_GPU_AUTO;
            return 0;
        }
        if (strcasecmp(s, "all") == 0) {
            *(int *)field = ROTA_GPU_ALL;
            return 0;
        }
        if ((rc = parse_u64(s, (uint64_t)r->min, (uint64_t)r->max, &u)) == 0) *(int *)field = (int)u;
        return rc;
    }
    return -EINVAL;
}

static void opt_parse_rows(void);

static void opt_parse_all(void)
{
    opt_parse_rows();
    rota_log_set_level(opts.log_level);
}

static void opt_parse_rows(void)
{
    for (size_t i = 0; i < OPT_ROWS; i++) {
        const opt_row_t *r = &opt_table[i];
        /* Defaults go through the same parser, so a default is as valid as any accepted value. */
        if (r->dflt) opt_parse(r, r->dflt);
        const char *s = getenv(r->name);
        if (s == NULL) continue;
        /* An empty value is a value, and a bad one: silently treating it as unset would hide a typo. */
        if (s[0] == '\0' || opt_parse(r, s) != 0) {
            opt_bad[i] = 1;
            opt_errors++;
        }
    }
}

const rota_options_t *rota_options(void)
{
    pthread_once(&opt_once, opt_parse_all);
    return &opts;
}

unsigned rota_options_errors(void)
{
    rota_options();
    return opt_errors;
}

static void opt_format(const opt_row_t *r, char *buf, size_t n)
{
    const char *field = (const char *)&opts + r->off;
    switch (r->type) {
    case OPT_BOOL: snprintf(buf, n, "%d", *(const bool *)field ? 1 : 0); break;
    case OPT_LOG: snprintf(buf, n, "%s", level_names[*(const int *)field]); break;
    case OPT_PRIORITY: snprintf(buf, n, "%s", prio_name(*(const unsigned *)field)); break;
    case OPT_RETRY: snprintf(buf, n, "%s", retry_names[*(const int *)field]); break;
    case OPT_PATH: snprintf(buf, n, "\"%s\"", field); break;
    case OPT_SIZE: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case OPT_U32: snprintf(buf, n, "%u", *(const unsigned *)field); break;
    case OPT_DOUBLE: snprintf(buf, n, "%g", *(const double *)field); break;
    case OPT_TOKEN: snprintf(buf, n, "%s", opts.has_grant ? "(set)" : "(unset)"); break; /* a key: never logged */
    case OPT_GPU:
        if (*(const int *)field == ROTA_GPU_AUTO) snprintf(buf, n, "auto");
        else if (*(const int *)field == ROTA_GPU_ALL) snprintf(buf, n, "all");
        else snprintf(buf, n, "%d", *(const int *)field);
        break;
    }
}

void rota_options_report(void)
{
    rota_options();
    for (size_t i = 0; i < OPT_ROWS; i++) {
        if (!opt_bad[i]) continue;
        const char *s = getenv(opt_table[i].name);
        rota_log(ROTA_LOG_ERROR, "bad value %s=\"%.200s\": expected %s", opt_table[i].name, s ? s : "",
                 opt_table[i].expect);
    }
    if (opts.log_level < ROTA_LOG_DEBUG) return;
    for (size_t i = 0; i < OPT_ROWS; i++) {
        char v[ROTA_OPT_PATH_MAX + 8];
        opt_format(&opt_table[i], v, sizeof(v));
        rota_log(ROTA_LOG_DEBUG, "option %s=%s%s", opt_table[i].name, v,
                 getenv(opt_table[i].name) ? "" : " (default)");
    }
}
