/* fuzz-config.c - libFuzzer harness: rotad's config file parser (config_load) and the number parsers it uses. */
#include "runtime/config.h"
#include "runtime/lib/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The number parsers, on the input as one NUL-terminated string. */
    char s[64];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    if (!parse_size(s, 0, UINT64_MAX, &u) && u == 0 && strchr(s, '-')) abort();
    parse_u64(s, 0, UINT64_MAX, &u);
    parse_i64(s, INT64_MIN, INT64_MAX, &i);
    parse_double(s, -1e300, 1e300, &d);
    parse_bool(s, &b);
    /* The whole input as a config file, read through a memfd. */
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-config", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    static config_t cfg;
    char err[512];
    err[0] = 0;
    if (config_load(path, &cfg, err, sizeof err) < 0 && !err[0]) abort(); /* every error says what */
    if (cfg.ngroups > ROTA_MAX_GROUPS || cfg.nusers > CONFIG_MAX_IDS) abort();
    return 0;
}
