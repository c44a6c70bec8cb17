/* api-link.c - cuLink*: the images added to a link state, checked as a module load checks them, completed into
 * one fatbin container of them all, which cuModuleLoadData and cuLibraryLoadData read back (image.c). */
#include "tools/simcuda/api-internal.h"
#include "tools/simcuda/image.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * simcuda does not resolve symbols across inputs (a kernel's calls are not run), so linking is concatenation: each
 * PTX input becomes a PTX entry for the device (compute_90), each cubin an ELF entry, each fatbin's entries are
 * copied. An input that is not such an image is refused as cuModuleLoadData refuses it; host objects, libraries
 * and NVVM/LTO IR (CU_JIT_INPUT_OBJECT, _LIBRARY, _NVVM) are CUDA_ERROR_NOT_SUPPORTED. The completed image lives
 * until cuLinkDestroy, as the CUDA documentation says of cubinOut.
 */
#define LINK_SM 90
#define LINK_MAX_BYTES (1u << 30)
#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_ENTRY_BYTES 64

API_INTERNAL(cuLinkCreate_v2);
API_INTERNAL(cuLinkAddData_v2);
API_INTERNAL(cuLinkAddFile_v2);

struct CUlinkState_st {
    unsigned char *out;          /* the container: header, then entries */
    size_t len, cap;
    bool completed;
};

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static int link_grow(CUlinkState l, size_t more)
{
    if (more > LINK_MAX_BYTES - l->len)
        return -ENOMEM;
    if (l->len + more <= l->cap)
        return 0;
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->len + more)
        cap *= 2;
    unsigned char *p = realloc(l->out, cap);
    if (!p)
        return -ENOMEM;
    l->out = p;
    l->cap = cap;
    return 0;
}

/* One entry of kind (1 PTX, 2 ELF) for sm arch, its payload padded to 8 bytes. */
static int link_entry(CUlinkState l, unsigned kind, unsigned arch, const void *payload, size_t n)
{
    size_t padded = (n + 7) & ~(size_t)7;
    if (link_grow(l, FATBIN_ENTRY_BYTES + padded) < 0)
        return -ENOMEM;
    unsigned char *e = l->out + l->len;
    memset(e, 0, FATBIN_ENTRY_BYTES + padded);
    put16(e, (uint16_t)kind);
    put16(e + 2, 0x0101);
    put32(e + 4, FATBIN_ENTRY_BYTES);
    put64(e + 8, padded);
    put32(e + 28, arch);
    memcpy(e + FATBIN_ENTRY_BYTES, payload, n);
    l->len += FATBIN_ENTRY_BYTES + padded;
    return 0;
}

static CUlinkState as_link(CUlinkState l)
{
    return l && api_handle_is(l, API_KIND_LINK) ? l : NULL;
}

CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    CUcontext c;
    if ((rc = api_ctx_current(&c)) != CUDA_SUCCESS)
        return rc;
    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = api_jit_options(numOptions, options, optionValues)) != CUDA_SUCCESS)
        return rc;
    CUlinkState l = api_calloc(1, sizeof(*l));
    if (!l || link_grow(l, 16) < 0 || api_handle_add(l, API_KIND_LINK) < 0) {
        if (l)
            free(l->out);
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(l->out, 0, 16);
    put32(l->out, FATBIN_MAGIC);
    put16(l->out + 4, 1);
    put16(l->out + 6, 16);
    l->len = 16;
    *stateOut = l;
    return CUDA_SUCCESS;
}

CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut)
{
    return api_cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

/* Adds size bytes of data of type (a file's contents, NUL-terminated beyond size, or the caller's buffer). */
static CUresult link_add(CUlinkState l, CUjitInputType type, const void *data, size_t size)
{
    switch (type) {
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_PTX:
    case CU_JIT_INPUT_FATBINARY:
        break;
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
    case CU_JIT_INPUT_NVVM:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    image_t img;
    int e = image_parse(data, size ? size : SIZE_MAX, LINK_SM, &img);
    if (e == -ENOMEM)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (e == IMAGE_ERR_NO_BINARY)
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    if (e < 0 || (type == CU_JIT_INPUT_PTX) != (img.kind == IMAGE_PTX) ||
        (type == CU_JIT_INPUT_CUBIN) != (img.kind == IMAGE_CUBIN)) {
        image_free(&img);
        return CUDA_ERROR_INVALID_IMAGE; /* not an image, or not of the type it was added as */
    }
    image_free(&img);
    if (type == CU_JIT_INPUT_PTX)
        e = link_entry(l, 1, LINK_SM, data, strlen(data) + 1);
    else if (type == CU_JIT_INPUT_CUBIN)
        e = link_entry(l, 2, LINK_SM, data, size);
    else {
        /* a fatbin's entries, after its 16-byte header (its total size is in that header) */
        const unsigned char *f = data;
        uint64_t total;
        memcpy(&total, f + 8, 8);
        e = total > LINK_MAX_BYTES || link_grow(l, total) < 0 ? -ENOMEM : 0;
        if (e == 0) {
            memcpy(l->out + l->len, f + 16, total);
            l->len += total;
        }
    }
    return e < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* What cuLinkAddData and cuLinkAddFile check first, in the driver's order: initialised, a live link state, an
 * input, the link not completed, the JIT options. *l is the link state on CUDA_SUCCESS. */
static CUresult link_input_check(CUlinkState state, const void *input, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues, CUlinkState *l)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    *l = as_link(state);
    if (!*l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!input || (*l)->completed)
        return CUDA_ERROR_INVALID_VALUE;
    return api_jit_options(numOptions, options, optionValues);
}

CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                          unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    CUlinkState l;
    CUresult rc = link_input_check(state, data, numOptions, options, optionValues, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    return link_add(l, type, data, size);
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    return api_cuLinkAddData_v2(state, type, data, size, name, numOptions, options, optionValues);
}

CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                          CUjit_option *options, void **optionValues)
{
    CUlinkState l;
    CUresult rc = link_input_check(state, path, numOptions, options, optionValues, &l);
    if (rc != CUDA_SUCCESS)
        return rc;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    rc = CUDA_ERROR_FILE_NOT_FOUND;
    if (n < 0 || n > (long)LINK_MAX_BYTES || fseek(f, 0, SEEK_SET) != 0)
        goto out_close;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(buf = malloc((size_t)n + 1)))
        goto out_close;
    rc = CUDA_ERROR_FILE_NOT_FOUND;
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        goto out_free;
    buf[n] = '\0';
    rc = link_add(l, type, buf, (size_t)n);
out_free:
    free(buf);
out_close:
    fclose(f);
    return rc;
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                       CUjit_option *options, void **optionValues)
{
    return api_cuLinkAddFile_v2(state, type, path, numOptions, options, optionValues);
}

CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    CUlinkState l = as_link(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->len == 16)
        return CUDA_ERROR_INVALID_IMAGE; /* nothing added */
    put64(l->out + 8, l->len - 16);
    l->completed = true;
    *cubinOut = l->out;
    *sizeOut = l->len;
    return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    CUlinkState l = as_link(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    api_handle_del(l);
    free(l->out);
    free(l);
    return CUDA_SUCCESS;
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuLinkAddData); API_ALIAS(cuLinkAddFile); API_ALIAS(cuLinkComplete); API_ALIAS(cuLinkCreate);
API_ALIAS(cuLinkDestroy); API_ALIAS(cuLinkCreate_v2); API_ALIAS(cuLinkAddData_v2); API_ALIAS(cuLinkAddFile_v2);
