/* parse-t.c - TAP tests for the strict option parsers in runtime/lib/parse.c. */
#include "runtime/lib/parse.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdint.h>

int main(void)
{
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    bool b = false;

    is_int(parse_u64("42", 0, 100, &u), 0, "u64 accepts 42");
    is_uint(u, 42, "u64 value");
    is_int(parse_u64("", 0, 100, &u), -EINVAL, "u64 refuses empty");
    is_int(parse_u64("-1", 0, UINT64_MAX, &u), -EINVAL, "u64 refuses -1 (strtoull would wrap it)");
    is_int(parse_u64(" 1", 0, 100, &u), -EINVAL, "u64 refuses leading blank");
    is_int(parse_u64("abc", 0, 100, &u), -EINVAL, "u64 refuses abc");
    is_int(parse_u64("12x", 0, 100, &u), -EINVAL, "u64 refuses trailing junk");
    is_int(parse_u64("0", 1, 100, &u), -ERANGE, "u64 enforces the minimum");
    is_int(parse_u64("101", 1, 100, &u), -ERANGE, "u64 enforces the maximum");
    is_int(parse_u64("18446744073709551616", 0, UINT64_MAX, &u), -ERANGE, "u64 refuses 2^64");
    is_int(parse_u64("18446744073709551615", 0, UINT64_MAX, &u), 0, "u64 accepts 2^64-1");

    is_int(parse_i64("-5", -10, 10, &i), 0, "i64 accepts -5");
    is_int((int)i, -5, "i64 value");
    is_int(parse_i64("-11", -10, 10, &i), -ERANGE, "i64 bounds");
    is_int(parse_i64("-", -10, 10, &i), -EINVAL, "i64 refuses a bare sign");

    is_int(parse_size("80G", 1, UINT64_MAX, &u), 0, "size 80G");
    is_uint(u, 80ull << 30, "80G is 80 GiB");
    is_int(parse_size("512k", 1, UINT64_MAX, &u), 0, "size 512k");
    is_uint(u, 512ull << 10, "suffix is case-insensitive");
    is_int(parse_size("3MiB", 1, UINT64_MAX, &u), 0, "size 3MiB");
    is_uint(u, 3ull << 20, "MiB");
    is_int(parse_size("7GB", 1, UINT64_MAX, &u), 0, "size 7GB");
    is_int(parse_size("100", 1, UINT64_MAX, &u), 0, "plain bytes");
    is_uint(u, 100, "plain bytes value");
    is_int(parse_size("10XB", 1, UINT64_MAX, &u), -EINVAL, "size refuses 10XB");
    is_int(parse_size("1.5G", 1, UINT64_MAX, &u), -EINVAL, "size refuses fractions");
    is_int(parse_size("0", 1, UINT64_MAX, &u), -ERANGE, "size 0 below minimum");
    is_int(parse_size("-1G", 1, UINT64_MAX, &u), -EINVAL, "size refuses negatives");
    is_int(parse_size("17179869184T", 1, UINT64_MAX, &u), -ERANGE, "size overflow after the shift");
    is_int(parse_size("18446744073709551616", 1, UINT64_MAX, &u), -ERANGE, "size 2^64");

    is_int(parse_double("0.5", 0, 1, &d), 0, "double 0.5");
    in_range(d, 0.5, 0.5, "double value");
    is_int(parse_double("nan", 0, 1, &d), -EINVAL, "double refuses nan");
    is_int(parse_double("2", 0, 1, &d), -ERANGE, "double bounds");
    is_int(parse_double("1e999", 0, 1e300, &d), -ERANGE, "double overflow");

    is_int(parse_bool("yes", &b), 0, "bool yes");
    ok(b, "yes is true");
    is_int(parse_bool("OFF", &b), 0, "bool OFF");
    ok(!b, "OFF is false");
    is_int(parse_bool("2", &b), -EINVAL, "bool refuses 2");
    is_int(parse_double("0x10", 0, 1e6, &d), -EINVAL, "double refuses hexadecimal (strtod reads 0x10 as 16)");
    is_int(parse_double("+inf", 0, 1e6, &d), -EINVAL, "double refuses +inf");
    is_int(parse_double("1e3", 0, 1e6, &d), 0, "double accepts an exponent");
    return done_testing();
}
