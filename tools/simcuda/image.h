/* image.h - what a GPU code image handed to the driver says: its kind, its kernels and their recorded resources. */
#ifndef ROTA_SIMCUDA_IMAGE_H
#define ROTA_SIMCUDA_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

/* The image formats a CUDA driver loads (cuModuleLoadData, cuLibraryLoadData, cuLinkAddData). */
typedef enum image_kind {
    IMAGE_PTX = 1,       /* PTX text, NUL-terminated; the driver JITs it */
    IMAGE_CUBIN,         /* an ELF of machine EM_CUDA (190): nvcc -cubin, NVRTC's CUBIN */
    IMAGE_FATBIN,        /* a fatbin container (magic 0xBA55ED50) of cubins and PTX, or nvcc's wrapper of one */
} image_kind_t;

/* A kernel (an entry function) and the resources its cubin records; -1 where the image does not say. */
typedef struct image_kernel {
    char *name;
    int regs;            /* registers per thread (EIATTR_REGCOUNT) */
    int max_threads;     /* __launch_bounds__ / .maxntid: most threads per block (EIATTR_MAX_THREADS) */
    int local_bytes;     /* stack frame per thread (EIATTR_FRAME_SIZE) */
    int param_bytes;     /* size of its parameters (EIATTR_CBANK_PARAM_SIZE) */
    int arch;            /* SM version of the cubin it came from (90 for sm_90), -1 for PTX */
} image_kernel_t;

typedef struct image {
    image_kind_t kind;
    bool names_known;    /* false: only compressed entries of a codec simcuda does not read: any name resolves */
    int ptx_isa;         /* newest PTX ISA among its PTX (73 for 7.3), 0 without PTX */
    size_t n;
    image_kernel_t *kernels;
} image_t;

/* Error codes of image_parse, beyond -ENOMEM. */
#define IMAGE_ERR_INVALID (-22)     /* not an image at all: CUDA_ERROR_INVALID_IMAGE */
#define IMAGE_ERR_NO_BINARY (-19)   /* an image with nothing for an sm_<sm> device: CUDA_ERROR_NO_BINARY_FOR_GPU */

/* Parses the image at data for a device of SM version sm (90): 0, IMAGE_ERR_INVALID, IMAGE_ERR_NO_BINARY or
 * -ENOMEM. len bounds an image whose size is known (a file, cuLinkAddData's size), SIZE_MAX otherwise. */
int image_parse(const void *data, size_t len, int sm, image_t *out);
/* The kernel called name, or NULL. */
const image_kernel_t *image_kernel_find(const image_t *img, const char *name);
void image_free(image_t *img);

#endif
