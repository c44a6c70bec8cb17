/* tap.h - a small Test Anything Protocol producer for rota's C test programs. */
#ifndef ROTA_TAP_H
#define ROTA_TAP_H

#include <stdbool.h>
#include <stdint.h>

/* Declare the number of tests up front ("1..n"); 0 means done_testing() prints the plan at the end. */
void plan(unsigned n);
/* Print the plan after the last test when plan() was not given a count; returns the exit status to use. */
int done_testing(void);
/* Skip the whole program: prints "1..0 # SKIP why" and ends it with status 0 (atexit handlers run), as every
 * TAP library's skip_all does: code after it never runs with the resources whose absence it reports. */
void skip_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Each records one test; they return whether it passed so callers can print context on failure. */
bool ok(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool is_int(long long got, long long want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool is_uint(unsigned long long got, unsigned long long want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool is_str(const char *got, const char *want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Passes when lo <= got <= hi: the form every timing check takes, so tolerances are stated, not implied. */
bool in_range(double got, double lo, double hi, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A diagnostic line ("# ...") on stderr. */
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Abort the test program: "Bail out! ..." and exit 255. For setup failures that make later tests meaningless. */
void bail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Checks a CUresult (or any int where 0 is success) and records one test named after the call. */
#define ok_cu(call) is_int((long long)(call), 0, "%s", #call)
/* Bails when a setup call fails. */
#define need_cu(call)                                                                       \
    do {                                                                                    \
        long long need_rc_ = (long long)(call);                                             \
        if (need_rc_ != 0) bail("%s:%d: %s returned %lld", __FILE__, __LINE__, #call, need_rc_); \
    } while (0)

/* Monotonic clock in nanoseconds, for tests that measure. */
uint64_t tap_now_ns(void);
/* A uniform number in [0, 1) from a fixed-seed xorshift64: the same sequence in every run of a test program. */
double tap_rand_unit(void);

#endif
