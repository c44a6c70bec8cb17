/* image-t.c - images as a driver reads them (tools/simcuda/image.c): names from a cubin's entry symbols, PTX and
 * fatbin entries (plain, LZ4, zstd, nvcc's wrapper), unknown names NOT_FOUND, non-images INVALID_IMAGE, a cubin
 * for another GPU NO_BINARY_FOR_GPU, resources from the cubin, images from files, JIT options, cuLink*. */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/simcuda/api-test.h"
#include "tests/tap/kernels.h"
#include "tests/tap/tap.h"

/* tests/kernels/foreign.cu built by the Makefile: an sm_90 cubin, sm_90 fatbins with LZ4 and zstd entries. */
extern const char rota_foreign_cubin[], rota_foreign_lz4[], rota_foreign_zstd[];
extern const size_t rota_foreign_cubin_size;
#define SCALE "_Z9scale_f32Pffy"
#define BOUNDED "bounded_fill"

typedef struct {
    int magic, version;
    const void *data;
    void *filename_or_fatbins;
} fatbin_wrapper_t;

/* The kernels of module m: both resolve, an unknown name and a built-in kernel's name do not. */
static void names(CUmodule m, const char *what)
{
    CUfunction f;
    unsigned n = 0;
    is_int(cuModuleGetFunction(&f, m, SCALE), CUDA_SUCCESS, "%s: " SCALE " resolves", what);
    is_int(cuModuleGetFunction(&f, m, BOUNDED), CUDA_SUCCESS, "%s: " BOUNDED " resolves", what);
    is_int(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND, "%s: an unknown name is NOT_FOUND",
           what);
    is_int(cuModuleGetFunction(&f, m, "spin_ns"), CUDA_ERROR_NOT_FOUND,
           "%s: so is a built-in kernel's name the image does not define", what);
    ok(cuModuleGetFunctionCount(&n, m) == CUDA_SUCCESS && n == 2, "%s: 2 functions (%u)", what, n);
}

static int attr(CUfunction f, CUfunction_attribute a)
{
    int v = -1;
    if (cuFuncGetAttribute(&v, a, f) != CUDA_SUCCESS)
        return -2;
    return v;
}

int main(void)
{
    node_setup("image", "1G");
    plan(50);
    need_cu(cuInit(0));
    CUcontext ctx;
    need_cu(cuCtxCreate(&ctx, NULL, 0, 0));

    CUmodule m;
    is_int(cuModuleLoadData(&m, rota_foreign_cubin), CUDA_SUCCESS, "an sm_90 cubin loads");
    names(m, "cubin");
    CUfunction bounded, scale;
    need_cu(cuModuleGetFunction(&bounded, m, BOUNDED));
    need_cu(cuModuleGetFunction(&scale, m, SCALE));
    is_int(attr(bounded, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 128, "__launch_bounds__(128) is read from the cubin");
    is_int(attr(scale, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024, "without bounds: 1024");
    int regs = attr(scale, CU_FUNC_ATTRIBUTE_NUM_REGS);
    ok(regs > 0 && regs <= 255 && regs != 16, "registers per thread from the cubin (%d, not simcuda's default 16)", regs);
    is_int(attr(scale, CU_FUNC_ATTRIBUTE_BINARY_VERSION), 90, "the binary version is the cubin's (sm_90)");
    int grid = 0, block = 0;
    ok(cuOccupancyMaxPotentialBlockSize(&grid, &block, bounded, NULL, 0, 0) == CUDA_SUCCESS && block > 0 &&
       block <= 128, "the occupancy calculator keeps to the bounds (block %d)", block);
    int nb = -1;
    ok(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, bounded, 256, 0) == CUDA_SUCCESS && nb == 0,
       "a block past the bounds fits 0 times (%d)", nb);
    unsigned *p;
    CUdeviceptr d;
    need_cu(cuMemAlloc(&d, 128 * 4));
    p = (unsigned *)(uintptr_t)d;
    unsigned v = 7;
    void *args[] = {&p, &v};
    ok_cu(cuLaunchKernel(bounded, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    ok_cu(cuCtxSynchronize());
    cuMemFree(d);
    ok_cu(cuModuleUnload(m));

    /* a copy of the cubin whose ELF flags name sm_75: no binary for an sm_90 */
    char *old = malloc(rota_foreign_cubin_size);
    if (!old)
        bail("malloc");
    memcpy(old, rota_foreign_cubin, rota_foreign_cubin_size);
    old[49] = 75;   /* e_flags bits 8..15 */
    is_int(cuModuleLoadData(&m, old), CUDA_ERROR_NO_BINARY_FOR_GPU, "an sm_75 cubin: NO_BINARY_FOR_GPU");
    old[18] = 62;   /* e_machine EM_X86_64: an ELF, not a GPU image */
    is_int(cuModuleLoadData(&m, old), CUDA_ERROR_INVALID_IMAGE, "an x86-64 ELF: INVALID_IMAGE");
    free(old);
    is_int(cuModuleLoadData(&m, "hello, world\n"), CUDA_ERROR_INVALID_IMAGE, "text that is not PTX: INVALID_IMAGE");
    static const unsigned char trunc[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, [18] = 190};
    is_int(cuModuleLoadData(&m, trunc), CUDA_ERROR_INVALID_IMAGE, "an ELF header without sections: INVALID_IMAGE");
    static const unsigned int fat_empty[4] = {0xBA55ED50u, 0x00100001u, 0, 0};
    is_int(cuModuleLoadData(&m, fat_empty), CUDA_ERROR_INVALID_IMAGE, "a fatbin without entries: INVALID_IMAGE");

    is_int(cuModuleLoadData(&m, rota_foreign_lz4), CUDA_SUCCESS, "a fatbin of LZ4-compressed entries loads");
    names(m, "LZ4 fatbin");
    cuModuleUnload(m);
    void *zstd = dlopen("libzstd.so.1", RTLD_NOW);
    if (zstd) {
        is_int(cuModuleLoadData(&m, rota_foreign_zstd), CUDA_SUCCESS, "a fatbin of zstd-compressed entries loads");
        names(m, "zstd fatbin");
        cuModuleUnload(m);
        dlclose(zstd);
    } else {
        for (int i = 0; i < 6; i++)
            skip("libzstd.so.1 is not installed");
    }

    fatbin_wrapper_t w = {0x466243B1, 1, rota_foreign_lz4, NULL};
    CUlibrary lib;
    CUkernel k;
    is_int(cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS, "nvcc's wrapper: a library");
    is_int(cuLibraryGetKernel(&k, lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND, "  an unknown kernel is NOT_FOUND");
    is_int(cuLibraryGetKernel(&k, lib, BOUNDED), CUDA_SUCCESS, "  " BOUNDED " is found");
    cuLibraryUnload(lib);

    /* from a file: the cubin, and a file that is not an image */
    char dir[] = "/tmp/image-t.XXXXXX", path[64];
    if (!mkdtemp(dir))
        bail("mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/k.cubin", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(rota_foreign_cubin, 1, rota_foreign_cubin_size - 1, f) != rota_foreign_cubin_size - 1 || fclose(f))
        bail("writing %s", path);
    CUfunction fn;
    ok(cuModuleLoad(&m, path) == CUDA_SUCCESS && cuModuleGetFunction(&fn, m, "nope") == CUDA_ERROR_NOT_FOUND,
       "cuModuleLoad reads the file: its unknown names are NOT_FOUND");
    is_int(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS, "cuLibraryLoadFromFile");
    cuLibraryUnload(lib);
    f = fopen(path, "w");
    if (!f || fputs("not an image\n", f) < 0 || fclose(f))
        bail("writing %s", path);
    is_int(cuModuleLoad(&m, path), CUDA_ERROR_INVALID_IMAGE, "a file that is not an image: INVALID_IMAGE");
    unlink(path);
    rmdir(dir);

    /* JIT options: the outputs filled as after a silent JIT; an option CUDA does not define is refused */
    char info[64] = "junk", err[64] = "junk";
    float wall = -1;
    CUjit_option o[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME, CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[] = {info, (void *)(uintptr_t)sizeof info, err, (void *)(uintptr_t)sizeof err, NULL, (void *)4};
    is_int(cuModuleLoadDataEx(&m, rota_kernels_ptx, 6, o, vals), CUDA_SUCCESS, "cuModuleLoadDataEx with JIT options");
    memcpy(&wall, &vals[4], sizeof wall);
    ok(info[0] == 0 && err[0] == 0 && vals[1] == NULL && vals[3] == NULL && wall == 0,
       "  empty logs, their sizes 0, a wall time of 0 ms");
    cuModuleUnload(m);
    CUjit_option bad[] = {CU_JIT_NUM_OPTIONS};
    void *badv[] = {NULL};
    is_int(cuModuleLoadDataEx(&m, rota_kernels_ptx, 1, bad, badv), CUDA_ERROR_INVALID_VALUE,
           "  an option CUDA does not define: INVALID_VALUE");

    /* cuLink*: PTX and a cubin linked into one image that loads, with both inputs' kernels */
    CUlinkState ls;
    void *out = NULL;
    size_t outn = 0;
    need_cu(cuLinkCreate(0, NULL, NULL, &ls));
    ok_cu(cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)rota_kernels_ptx, strlen(rota_kernels_ptx) + 1, "k.ptx", 0,
                        NULL, NULL));
    ok_cu(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)rota_foreign_cubin, rota_foreign_cubin_size - 1, "f.cubin", 0,
                        NULL, NULL));
    is_int(cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)"hello\n", 7, "x", 0, NULL, NULL), CUDA_ERROR_INVALID_IMAGE,
           "cuLinkAddData: text that is not PTX is INVALID_IMAGE");
    is_int(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)rota_kernels_ptx, strlen(rota_kernels_ptx) + 1, "x", 0, NULL,
                         NULL), CUDA_ERROR_INVALID_IMAGE, "  PTX added as a cubin too");
    is_int(cuLinkAddData(ls, CU_JIT_INPUT_NVVM, (void *)"x", 1, "x", 0, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED,
           "  NVVM IR is NOT_SUPPORTED");
    ok(cuLinkComplete(ls, &out, &outn) == CUDA_SUCCESS && out && outn > rota_foreign_cubin_size, "cuLinkComplete");
    CUfunction lf;
    ok(out && cuModuleLoadData(&m, out) == CUDA_SUCCESS && cuModuleGetFunction(&lf, m, "spin_ns") == CUDA_SUCCESS &&
           cuModuleGetFunction(&lf, m, BOUNDED) == CUDA_SUCCESS &&
           cuModuleGetFunction(&lf, m, "nope") == CUDA_ERROR_NOT_FOUND,
       "the linked image loads: the PTX's and the cubin's kernels resolve, nothing else");
    cuModuleUnload(m);
    ok_cu(cuLinkDestroy(ls));
    is_int(cuLinkDestroy(ls), CUDA_ERROR_INVALID_HANDLE, "a destroyed link state is an invalid handle");

    cuCtxDestroy(ctx);
    node_remove();
    return done_testing();
}
