/* ptxver-t.c - TAP tests for runtime/lib/ptxver.c: the driver's PTX ISA, an image's, and lowering it. */
#include "runtime/lib/ptxver.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    /* NVIDIA's PTX ISA release history: every step of the table, and between them */
    static const struct {
        int cuda, isa;
    } drv[] = {
        {13010, 91}, {13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12060, 85}, {12050, 85}, {12040, 84},
        {12030, 83}, {12020, 82}, {12010, 81}, {12000, 80}, {11080, 78}, {11070, 77}, {11060, 76}, {11050, 75},
        {11040, 74}, {11030, 73}, {11020, 72}, {11010, 71}, {11000, 70}, {10020, 65}, {10010, 64}, {10000, 63},
        {12041, 84}, {14000, 91}, {9020, 0}, {0, 0}, {-1, 0},
    };
    for (size_t i = 0; i < sizeof drv / sizeof drv[0]; i++)
        is_int(ptxver_for_driver(drv[i].cuda), drv[i].isa, "a CUDA %d driver loads PTX ISA %d.%d", drv[i].cuda,
               drv[i].isa / 10, drv[i].isa % 10);

    /* the directive of an image */
    is_int(ptxver_of_image(rota_kernels_ptx), 90, "the embedded kernels (nvcc of CUDA 13) say ISA 9.0");
    is_int(ptxver_of_image("//\n// comment .version 1.0\n.version 8.4\n.target sm_75\n"), 84,
           "the directive is the line's first word, after comments");
    is_int(ptxver_of_image("  \t.version\t7.8\n"), 78, "leading blanks and tabs");
    is_int(ptxver_of_image("// .version 8.0 in a comment only\n.target sm_75\n"), -ENOENT, "a comment is no directive");
    is_int(ptxver_of_image(".versions 8.0\n"), -ENOENT, "nor a longer word");
    is_int(ptxver_of_image(".version 9\n"), -EINVAL, "X without .Y is malformed");
    is_int(ptxver_of_image(".version 10.0\n"), -EINVAL, "two-digit majors are malformed");
    is_int(ptxver_of_image(".version 8.10\n"), -EINVAL, "two-digit minors are malformed");
    is_int(ptxver_of_image(".version x.y\n"), -EINVAL, "letters are malformed");
    is_int(ptxver_of_image(""), -ENOENT, "empty text");
    is_int(ptxver_of_image(NULL), -ENOENT, "NULL");
    static const unsigned char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, '.', 'v', 'e', 'r', 0};
    is_int(ptxver_of_image(elf), -ENOENT, "a cubin (ELF) is not PTX, and is not read past its first byte");
    static const unsigned char fatbin[] = {0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0};
    is_int(ptxver_of_image(fatbin), -ENOENT, "nor a fatbin");
    static const char later[] = "// header\n\x01\n.version 8.0\n";
    is_int(ptxver_of_image(later), -ENOENT, "the scan stops at the first byte text would not have");

    /* lowering */
    char *low = NULL;
    is_int(ptxver_rewrite(rota_kernels_ptx, 84, &low), 0, "the embedded kernels, lowered to 8.4");
    ok(low && ptxver_of_image(low) == 84, "the copy says 8.4 (%d)", low ? ptxver_of_image(low) : -1);
    size_t n = strlen(rota_kernels_ptx), diff = 0;
    if (low && strlen(low) == n)
        for (size_t i = 0; i < n; i++) diff += low[i] != rota_kernels_ptx[i];
    ok(low && strlen(low) == n && diff == 2, "same length, two bytes changed (%zu)", diff);
    ok(strstr(rota_kernels_ptx, ".version 9.0") != NULL, "the original is left as it was");
    free(low);
    low = (char *)1;
    is_int(ptxver_rewrite("// no directive\n", 84, &low), -ENOENT, "no directive: nothing to rewrite");
    ok(low == NULL, "and no copy");
    is_int(ptxver_rewrite(".version 9\n", 84, &low), -EINVAL, "a malformed directive is not rewritten");
    is_int(ptxver_rewrite(".version 9.0\n", 100, &low), -EINVAL, "ISA 10.0 cannot be written in X.Y");
    is_int(ptxver_rewrite(".version 9.0\n", 9, &low), -EINVAL, "nor ISA 0.9");
    is_int(ptxver_rewrite(".version 9.0\n.target sm_75\n", 63, &low), 0, "down to 6.3");
    is_str(low, ".version 6.3\n.target sm_75\n", "exactly the digits change");
    free(low);
    return done_testing();
}
