/* tap.c - the TAP producer behind tap.h: numbering, plan, diagnostics and bail-out. */
#include "tests/tap/tap.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tests may record results from several threads; one lock keeps numbering and lines whole. */
static pthread_mutex_t tap_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned tap_planned;
static unsigned tap_run;
static unsigned tap_failed;

void plan(unsigned n)
{
    tap_planned = n;
    if (n) printf("1..%u\n", n);
    fflush(stdout);
}

int done_testing(void)
{
    pthread_mutex_lock(&tap_lock);
    if (!tap_planned) printf("1..%u\n", tap_run);
    fflush(stdout);
    int rc = tap_failed ? 1 : 0;
    if (tap_planned && tap_planned != tap_run) rc = 1;
    pthread_mutex_unlock(&tap_lock);
    return rc;
}

void skip_all(const char *fmt, ...)
{
    va_list ap;
    printf("1..0 # SKIP ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    /* exit, not return: the atexit handlers (a test's cleanup of its node and files) still run */
    exit(0);
}

static bool tap_vresult(bool pass, const char *directive, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&tap_lock);
    tap_run++;
    if (!pass) tap_failed++;
    printf("%sok %u - ", pass ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    if (directive) printf(" # %s", directive);
    printf("\n");
    fflush(stdout);
    pthread_mutex_unlock(&tap_lock);
    return pass;
}

bool ok(bool cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool r = tap_vresult(cond, NULL, fmt, ap);
    va_end(ap);
    return r;
}

void skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vresult(true, "SKIP", fmt, ap);
    va_end(ap);
}

bool is_int(long long got, long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool r = tap_vresult(got == want, NULL, fmt, ap);
    va_end(ap);
    if (!r) diag("     got: %lld\n#   expected: %lld", got, want);
    return r;
}

bool is_uint(unsigned long long got, unsigned long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool r = tap_vresult(got == want, NULL, fmt, ap);
    va_end(ap);
    if (!r) diag("     got: %llu\n#   expected: %llu", got, want);
    return r;
}

bool is_str(const char *got, const char *want, const char *fmt, ...)
{
    bool same = (got && want) ? strcmp(got, want) == 0 : got == want;
    va_list ap;
    va_start(ap, fmt);
    bool r = tap_vresult(same, NULL, fmt, ap);
    va_end(ap);
    if (!r) diag("     got: '%s'\n#   expected: '%s'", got ? got : "(null)", want ? want : "(null)");
    return r;
}

bool in_range(double got, double lo, double hi, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool r = tap_vresult(!isnan(got) && got >= lo && got <= hi, NULL, fmt, ap);
    va_end(ap);
    if (!r) diag("     got: %g\n#   expected in [%g, %g]", got, lo, hi);
    return r;
}

void diag(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "# ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
}

void bail(const char *fmt, ...)
{
    va_list ap;
    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(255);
}

uint64_t tap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tap_rand_state = 88172645463325252ull;

double tap_rand_unit(void)
{
    tap_rand_state ^= tap_rand_state << 13;
    tap_rand_state ^= tap_rand_state >> 7;
    tap_rand_state ^= tap_rand_state << 17;
    return (double)(tap_rand_state >> 11) / 9007199254740992.0;
}
