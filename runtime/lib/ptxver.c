/* ptxver.c - PTX ISA versions: the driver's, an image's, and a copy of the image with its directive lowered. */
#include "runtime/lib/ptxver.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The first CUDA release to load each PTX ISA, newest first (PTX ISA release history). */
static const struct {
    int cuda, isa;
} ptxver_table[] = {
    {13010, 91}, {13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12050, 85}, {12040, 84}, {12030, 83},
    {12020, 82}, {12010, 81}, {12000, 80}, {11080, 78}, {11070, 77}, {11060, 76}, {11050, 75}, {11040, 74},
    {11030, 73}, {11020, 72}, {11010, 71}, {11000, 70}, {10020, 65}, {10010, 64}, {10000, 63},
};

int ptxver_for_driver(int cuda_version)
{
    for (size_t i = 0; i < sizeof ptxver_table / sizeof ptxver_table[0]; i++)
        if (cuda_version >= ptxver_table[i].cuda) return ptxver_table[i].isa;
    return 0;
}

static int ptxver_is_text(unsigned char c)
{
    return c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f);
}

/* Where the directive's "X.Y" starts (after ".version" and blanks) in text, or NULL (none before the end of the
 * text); *isa is its version, or -EINVAL when those bytes are not "X.Y". */
static const char *ptxver_find(const char *text, int *isa)
{
    const unsigned char *p = (const unsigned char *)text;
    bool line_start = true;
    for (; *p; p++) {
        if (!ptxver_is_text(*p)) return NULL;
        if (*p == '\n') {
            line_start = true;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\r') continue;
        if (line_start && !strncmp((const char *)p, ".version", 8) && (p[8] == ' ' || p[8] == '\t')) {
            const char *v = (const char *)p + 8;
            while (*v == ' ' || *v == '\t') v++;
            *isa = -EINVAL;
            if (v[0] >= '1' && v[0] <= '9' && v[1] == '.' && v[2] >= '0' && v[2] <= '9' &&
                !(v[3] >= '0' && v[3] <= '9'))
                *isa = (v[0] - '0') * 10 + (v[2] - '0');
            return v;
        }
        line_start = false;
    }
    return NULL;
}

int ptxver_of_image(const void *image)
{
    if (!image) return -ENOENT;
    int isa = -ENOENT;
    return ptxver_find(image, &isa) ? isa : -ENOENT;
}

int ptxver_rewrite(const char *ptx, int isa, char **out)
{
    *out = NULL;
    if (isa < 10 || isa > 99) return -EINVAL;
    int have = -ENOENT;
    const char *v = ptxver_find(ptx, &have);
    if (!v) return -ENOENT;
    if (have < 0) return -EINVAL; /* the three bytes to replace are not "X.Y" */
    size_t n = strlen(ptx);
    char *copy = malloc(n + 1);
    if (!copy) return -ENOMEM;
    memcpy(copy, ptx, n + 1);
    size_t at = (size_t)(v - ptx);
    copy[at] = (char)('0' + isa / 10);
    copy[at + 2] = (char)('0' + isa % 10);
    *out = copy;
    return 0;
}
