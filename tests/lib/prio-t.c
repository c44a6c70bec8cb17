/* prio-t.c - TAP tests for the priority class's names, parser and PLACE flags (runtime/lib/prio.c). */
#include "runtime/lib/prio.h"
#include "tests/tap/tap.h"

#include <errno.h>

int main(void)
{
    unsigned p = 9;
    is_int(prio_parse("low", &p), 0, "parse low");
    is_uint(p, ROTA_PRIO_LOW, "low value");
    /* ROTA_PRIORITY always took any case; rota run --priority now takes the same (issue 21, item 10). */
    p = 9;
    is_int(prio_parse("HIGH", &p), 0, "names are case-insensitive: HIGH");
    is_uint(p, ROTA_PRIO_HIGH, "HIGH is high");
    is_int(prio_parse("Normal", &p), 0, "Normal");
    is_uint(p, ROTA_PRIO_NORMAL, "Normal is normal");
    p = 9;
    is_int(prio_parse("urgent", &p), -EINVAL, "unknown name refused");
    is_int(prio_parse("", &p), -EINVAL, "empty refused");
    is_int(prio_parse("hi", &p), -EINVAL, "a prefix is refused");
    is_int(prio_parse("high ", &p), -EINVAL, "trailing blank refused");
    is_int(prio_parse(NULL, &p), -EINVAL, "NULL refused");
    is_uint(p, 9, "a refused name leaves the class untouched");

    for (unsigned c = 0; c < ROTA_PRIO_COUNT; c++) {
        unsigned back = 9;
        is_int(prio_parse(prio_name(c), &back), 0, "name %u parses", c);
        is_uint(back, c, "name %u round trip (%s)", c, prio_name(c));
        is_uint(prio_from_place_flags(prio_place_flags(c)), c, "PLACE flags round trip (%s)", prio_name(c));
    }
    is_str(prio_name(ROTA_PRIO_COUNT), "?", "no class past the last");
    is_str(prio_name(7), "?", "unknown class name");
    is_uint(prio_place_flags(ROTA_PRIO_NORMAL), 0, "normal sets no PLACE class bit");
    is_uint(prio_place_flags(ROTA_PRIO_HIGH), ROTA_PLACE_HIGH, "high: ROTA_PLACE_HIGH");
    is_uint(prio_place_flags(ROTA_PRIO_LOW), ROTA_PLACE_LOW, "low: ROTA_PLACE_LOW");
    is_uint(prio_from_place_flags(ROTA_PLACE_KNOWN), ROTA_PRIO_NORMAL, "KNOWN alone is normal");
    is_uint(prio_from_place_flags(ROTA_PLACE_KNOWN | ROTA_PLACE_LOW), ROTA_PRIO_LOW, "KNOWN|LOW is low");
    return done_testing();
}
