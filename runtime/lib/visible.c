/* visible.c - entries of a CUDA_VISIBLE_DEVICES list (see visible.h). */
#include "runtime/lib/visible.h"

#include <string.h>

int visible_entry(const char *list, int idx, char *out, size_t n)
{
    for (int i = 0; list; i++) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (i == idx) {
            if (!len || len >= n) return -1;
            memcpy(out, list, len);
            out[len] = 0;
            return 0;
        }
        list = end ? end + 1 : NULL;
    }
    return -1;
}
