/* roundtrip-t.c - data round trips through fill_u32 and add_f32: sync and async copies, memsets, pitch. */
#include "tests/clients/client.h"

#define N (1u << 20) /* elements per buffer (4 MiB) */

static client_t c;

/* Index of the first element of got[0..n) that differs from want, or -1. */
static long first_bad_u32(const uint32_t *got, uint32_t want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want) return (long)i;
    return -1;
}

static void check_u32(const uint32_t *got, uint32_t want, size_t n, const char *what)
{
    long bad = first_bad_u32(got, want, n);
    if (!ok(bad < 0, "%s: all %zu words are 0x%08x", what, n, want))
        diag("element %ld is 0x%08x", bad, got[bad]);
}

static void test_memset_and_fill(void)
{
    CUdeviceptr d;
    need_cu(cuMemAlloc(&d, N * sizeof(uint32_t)));
    uint32_t *h = malloc(N * sizeof(uint32_t));
    if (!h) bail("malloc");

    ok_cu(cuMemsetD32(d, 0xdeadbeefu, N));
    ok_cu(cuMemcpyDtoH(h, d, N * sizeof(uint32_t)));
    check_u32(h, 0xdeadbeefu, N, "cuMemsetD32 then cuMemcpyDtoH");

    /* fill_u32 over all but the last 7 words: n is honoured, the tail keeps the memset value */
    ok_cu(client_fill(&c, NULL, d, 0x12345678u, N - 7));
    ok_cu(cuCtxSynchronize());
    ok_cu(cuMemcpyDtoH(h, d, N * sizeof(uint32_t)));
    check_u32(h, 0x12345678u, N - 7, "fill_u32 wrote its n words");
    check_u32(h + N - 7, 0xdeadbeefu, 7, "fill_u32 left the words past n alone");

    /* cuMemsetD8 on an odd byte range in the middle */
    ok_cu(cuMemsetD8(d + 3, 0xab, 1001));
    ok_cu(cuMemcpyDtoH(h, d, 4096));
    const uint8_t *b = (const uint8_t *)h;
    const uint8_t fillb[4] = {0x78, 0x56, 0x34, 0x12}; /* 0x12345678 little-endian */
    bool good = true;
    size_t where = 0;
    for (size_t i = 0; i < 4096 && good; i++) {
        uint8_t want = (i >= 3 && i < 1004) ? 0xab : fillb[i % 4];
        if (b[i] != want) {
            good = false;
            where = i;
        }
    }
    if (!ok(good, "cuMemsetD8(d + 3, 0xab, 1001) sets exactly bytes 3..1003"))
        diag("byte %zu is 0x%02x", where, b[where]);

    /* DtoD: copy the first MiB onto the second, read back */
    ok_cu(cuMemsetD32(d, 0x01020304u, N / 4));
    ok_cu(cuMemcpyDtoD(d + N, d, N));
    ok_cu(cuMemcpyDtoH(h, d + N, N));
    check_u32(h, 0x01020304u, N / 4, "cuMemcpyDtoD copied the memset pattern");

    ok_cu(cuMemFree(d));
    free(h);
}

static void test_add_sync(void)
{
    size_t bytes = N * sizeof(float);
    CUdeviceptr a, b, out;
    need_cu(cuMemAlloc(&a, bytes));
    need_cu(cuMemAlloc(&b, bytes));
    need_cu(cuMemAlloc(&out, bytes));
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    if (!ha || !hb || !hc) bail("malloc");
    /* every value and every sum is exactly representable: the check can be exact */
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)i;
        hb[i] = 2.0f * (float)i + 0.5f;
    }
    ok_cu(cuMemcpyHtoD(a, ha, bytes));
    ok_cu(cuMemcpyHtoD(b, hb, bytes));
    ok_cu(cuMemsetD32(out, 0, N));
    ok_cu(client_add(&c, NULL, a, b, out, N));
    ok_cu(cuCtxSynchronize());
    ok_cu(cuMemcpyDtoH(hc, out, bytes));
    long bad = -1;
    for (size_t i = 0; i < N && bad < 0; i++)
        if (hc[i] != 3.0f * (float)i + 0.5f) bad = (long)i;
    if (!ok(bad < 0, "add_f32: c[i] == a[i] + b[i] exactly for all %u elements", N))
        diag("c[%ld] = %.9g, want %.9g", bad, (double)hc[bad], 3.0 * (double)bad + 0.5);

    /* add_f32 with a smaller n leaves the rest of c untouched */
    ok_cu(cuMemsetD32(out, client_f32_bits(-1.0f), N));
    ok_cu(client_add(&c, NULL, a, b, out, 1000));
    ok_cu(cuMemcpyDtoH(hc, out, bytes));
    bool good = true;
    for (size_t i = 0; i < N && good; i++)
        good = hc[i] == (i < 1000 ? 3.0f * (float)i + 0.5f : -1.0f);
    ok(good, "add_f32 with n = 1000 writes exactly the first 1000 elements");

    cuMemFree(a);
    cuMemFree(b);
    cuMemFree(out);
    free(ha);
    free(hb);
    free(hc);
}

static void test_async(void)
{
    size_t bytes = N * sizeof(float);
    CUstream s;
    need_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    float *ha, *hb, *hc;
    need_cu(cuMemAllocHost((void **)&ha, bytes));
    need_cu(cuMemHostAlloc((void **)&hb, bytes, 0));
    need_cu(cuMemAllocHost((void **)&hc, bytes));
    for (size_t i = 0; i < N; i++) {
        ha[i] = (float)(i % 4096) * 0.25f;
        hb[i] = 1024.0f;
        hc[i] = -7.0f;
    }
    CUdeviceptr a, b, out;
    need_cu(cuMemAlloc(&a, bytes));
    need_cu(cuMemAlloc(&b, bytes));
    need_cu(cuMemAlloc(&out, bytes));

    /* everything queued on one stream, one synchronize at the end */
    ok_cu(cuMemsetD32Async(out, 0, N, s));
    ok_cu(cuMemcpyHtoDAsync(a, ha, bytes, s));
    ok_cu(cuMemcpyHtoDAsync(b, hb, bytes, s));
    ok_cu(client_add(&c, s, a, b, out, N));
    ok_cu(cuMemcpyDtoHAsync(hc, out, bytes, s));
    ok_cu(cuStreamSynchronize(s));
    long bad = -1;
    for (size_t i = 0; i < N && bad < 0; i++)
        if (hc[i] != (float)(i % 4096) * 0.25f + 1024.0f) bad = (long)i;
    if (!ok(bad < 0, "async HtoD, add_f32, DtoH on one stream: exact sums for all %u elements", N))
        diag("c[%ld] = %.9g", bad, (double)hc[bad]);

    /* async memsets and an async DtoD */
    uint32_t *hu = (uint32_t *)hc;
    ok_cu(cuMemsetD32Async(a, 0x0badf00du, N, s));
    ok_cu(cuMemsetD8Async(a, 0x5a, 64, s)); /* first 16 words become 0x5a5a5a5a */
    ok_cu(cuMemcpyDtoDAsync(out, a, bytes, s));
    ok_cu(cuMemcpyDtoHAsync(hu, out, bytes, s));
    ok_cu(cuStreamSynchronize(s));
    check_u32(hu, 0x5a5a5a5au, 16, "cuMemsetD8Async bytes");
    check_u32(hu + 16, 0x0badf00du, N - 16, "cuMemsetD32Async words after DtoDAsync");

    cuMemFree(a);
    cuMemFree(b);
    cuMemFree(out);
    ok_cu(cuMemFreeHost(ha));
    ok_cu(cuMemFreeHost(hb));
    ok_cu(cuMemFreeHost(hc));
    ok_cu(cuStreamDestroy(s));
}

static void test_pitch(void)
{
    const size_t width = 1000, height = 64; /* bytes per row, rows */
    CUdeviceptr d;
    size_t pitch = 0;
    ok_cu(cuMemAllocPitch(&d, &pitch, width, height, 4));
    ok(pitch >= width, "cuMemAllocPitch: pitch %zu >= width %zu", pitch, width);
    ok(pitch % 4 == 0, "pitch %zu is a multiple of the element size", pitch);
    ok_cu(cuMemsetD8(d, 0xee, pitch * height));
    bool launched = true;
    for (size_t r = 0; r < height; r++)
        launched &= client_fill(&c, NULL, d + r * pitch, 0x100u + (uint32_t)r, width / 4) == CUDA_SUCCESS;
    ok(launched, "fill_u32 on each of %zu rows", height);
    uint8_t *h = malloc(pitch * height);
    if (!h) bail("malloc");
    ok_cu(cuMemcpyDtoH(h, d, pitch * height));
    bool rows = true, pad = true;
    for (size_t r = 0; r < height; r++) {
        const uint32_t *row = (const uint32_t *)(h + r * pitch);
        if (first_bad_u32(row, 0x100u + (uint32_t)r, width / 4) >= 0) rows = false;
        for (size_t x = width; x < pitch; x++)
            if (h[r * pitch + x] != 0xee) pad = false;
    }
    ok(rows, "every row holds its own value at Row * Pitch");
    ok(pad, "the padding between width and pitch is untouched");
    free(h);
    ok_cu(cuMemFree(d));
}

static void test_errors(void)
{
    CUfunction f;
    is_int(cuModuleGetFunction(&f, c.mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND,
           "cuModuleGetFunction of an unknown name: CUDA_ERROR_NOT_FOUND");
    CUdeviceptr d;
    is_int(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes: CUDA_ERROR_INVALID_VALUE");
    is_int(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc with NULL dptr: CUDA_ERROR_INVALID_VALUE");
}

int main(void)
{
    client_deadline(60);
    client_node("roundtrip", NULL);
    client_init(&c);
    diag("device: %s%s", c.name, c.simcuda ? " (simcuda)" : "");
    test_memset_and_fill();
    test_add_sync();
    test_async();
    test_pitch();
    test_errors();
    client_fini(&c);
    client_node_remove(&c);
    return done_testing();
}
