/* api-module.c - modules and libraries: an image's kernels are the names it defines (image.c reads it), with the
 * resources it records; spin_ns, fill_u32 and add_f32 run as simcuda's built-in kernels. */
#include "tools/simcuda/api-internal.h"
#include "tools/simcuda/image.h"

#include "runtime/lib/ptxver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t nargs;
} kernels[API_KERNEL_COUNT] = {
    [API_KERNEL_SPIN] = { "spin_ns", 1 },
    [API_KERNEL_FILL] = { "fill_u32", 3 },
    [API_KERNEL_ADD] = { "add_f32", 4 },
};

int api_kernel_lookup(const char *name)
{
    for (int i = 0; i < API_KERNEL_COUNT; i++)
        if (strcmp(name, kernels[i].name) == 0)
            return i;
    return -1;
}

size_t api_kernel_arg_count(int id)
{
    return id >= 0 && id < API_KERNEL_COUNT ? kernels[id].nargs : 0;
}

#define DEFAULT_DYN_SMEM 49152

/*
 * A module or library holds the functions looked up in it, one handle per name, created at the first lookup:
 * a name resolves when the image defines it (a PTX .entry, a cubin's entry symbol, in any usable entry of a
 * fatbin), else CUDA_ERROR_NOT_FOUND; a name other than the built-in kernels runs as API_KERNEL_OTHER. Each
 * function is an allocation of its own, so no kernel handle ever equals the handle of its library or module.
 * funcs_lock guards every owner's list (lookups are not on a hot path).
 */
/* A __device__ variable (cuLibraryGetGlobal, cuModuleGetGlobal): API_GLOBAL_BYTES of zeroed device memory per
 * name, since simcuda does not read variable sizes out of images; not charged to the device's memory. */
#define API_GLOBAL_BYTES 4096
typedef struct api_global {
    char *name;
    void *mem;
    struct api_global *next;
} api_global_t;

typedef struct api_funcs {
    api_func_t *head;
    api_global_t *globals;
    char *ptx;                   /* a copy of a PTX text image (its .global variables), NULL for a binary one */
    image_t img;                 /* its kernels (image.c) */
} api_funcs_t;

struct CUmod_st {
    CUcontext ctx;
    api_funcs_t funcs;
    struct CUmod_st *next;       /* in ctx->modules */
};

struct CUlib_st {
    api_funcs_t funcs;
};

static pthread_mutex_t funcs_lock = PTHREAD_MUTEX_INITIALIZER;

static void funcs_fini(api_funcs_t *fs)
{
    pthread_mutex_lock(&funcs_lock);
    api_func_t *f = fs->head;
    fs->head = NULL;
    pthread_mutex_unlock(&funcs_lock);
    while (f) {
        api_func_t *next = f->next;
        api_handle_del(f);
        free(f->name);
        free(f);
        f = next;
    }
    while (fs->globals) {
        api_global_t *g = fs->globals;
        fs->globals = g->next;
        api_range_remove((uintptr_t)g->mem, NULL);
        free(g->mem);
        free(g->name);
        free(g);
    }
    free(fs->ptx);
    fs->ptx = NULL;
    image_free(&fs->img);
}

/* Whether PTX text declares a .global variable called name. */
static bool ptx_has_global(const char *ptx, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(ptx, ".global"); p; p = strstr(p + 7, ".global")) {
        const char *eol = strchr(p, '\n');
        for (const char *q = strstr(p, name); q && (!eol || q < eol); q = strstr(q + 1, name)) {
            char before = q[-1], after = q[n];
            if ((before == ' ' || before == '\t') && (after == '[' || after == ';' || after == ' ' || after == '='))
                return true;
        }
    }
    return false;
}

/* The variable called name in fs on device dev (physical), created on first use. */
static CUresult globals_get(api_funcs_t *fs, const char *name, int dev, CUdeviceptr *dptr, size_t *bytes)
{
    if (fs->ptx && !ptx_has_global(fs->ptx, name))
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&funcs_lock);
    api_global_t *g;
    for (g = fs->globals; g; g = g->next)
        if (strcmp(g->name, name) == 0)
            break;
    if (!g) {
        g = api_calloc(1, sizeof(*g));
        void *mem = g ? aligned_alloc(256, API_GLOBAL_BYTES) : NULL;
        char *copy = mem ? strdup(name) : NULL;
        api_range_t r = { .base = (uintptr_t)mem, .size = API_GLOBAL_BYTES, .kind = API_RANGE_DEVICE, .dev = dev };
        if (!copy || api_range_add(&r) < 0) {
            free(copy);
            free(mem);
            free(g);
            g = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            memset(mem, 0, API_GLOBAL_BYTES);
            g->name = copy;
            g->mem = mem;
            g->next = fs->globals;
            fs->globals = g;
        }
    }
    pthread_mutex_unlock(&funcs_lock);
    if (g) {
        if (dptr)
            *dptr = (CUdeviceptr)(uintptr_t)g->mem;
        if (bytes)
            *bytes = API_GLOBAL_BYTES;
    }
    return rc;
}

/* The image's kernels (img, parsed by image_check, is moved into fs); PTX text is also copied (its globals). */
static int funcs_set_image(api_funcs_t *fs, const void *image, image_t *img)
{
    fs->img = *img;
    memset(img, 0, sizeof(*img));
    if (fs->img.kind != IMAGE_PTX)
        return 0;
    fs->ptx = strdup(image);
    return fs->ptx ? 0 : -ENOMEM;
}

/* The image's record of a function's resources, or simcuda's defaults where it has none. */
static void func_resources(api_func_t *f, const image_kernel_t *k)
{
    f->regs = k && k->regs > 0 ? k->regs : API_FUNC_REGS;
    f->max_threads = k && k->max_threads > 0 ? k->max_threads : 1024;
    f->local_bytes = k && k->local_bytes > 0 ? k->local_bytes : 0;
    f->binary_version = k && k->arch > 0 ? k->arch : 90;
}

/* The function called name in fs (created on first use): CUDA_SUCCESS, NOT_FOUND or OUT_OF_MEMORY. */
static CUresult funcs_get(api_funcs_t *fs, const char *name, CUcontext ctx, bool is_kernel, api_func_t **out)
{
    const image_kernel_t *k = image_kernel_find(&fs->img, name);
    if (!k && fs->img.names_known)
        return CUDA_ERROR_NOT_FOUND;
    int id = api_kernel_lookup(name);
    if (id < 0)
        id = API_KERNEL_OTHER;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&funcs_lock);
    api_func_t *f;
    for (f = fs->head; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            break;
    if (!f) {
        f = api_calloc(1, sizeof(*f));
        char *copy = f ? strdup(name) : NULL;
        if (!copy || api_handle_add(f, API_KIND_FUNC) < 0) {
            free(copy);
            free(f);
            f = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            f->id = id;
            f->name = copy;
            f->ctx = ctx;
            f->is_kernel = is_kernel;
            f->max_dyn_smem = DEFAULT_DYN_SMEM;
            func_resources(f, k);
            f->next = fs->head;
            fs->head = f;
        }
    }
    pthread_mutex_unlock(&funcs_lock);
    *out = f;
    return rc;
}

/* Registers obj (a module or library) as a handle of kind with its parsed image: 0 or -ENOMEM. */
static int funcs_owner_add(void *obj, int kind, api_funcs_t *fs, const void *image, image_t *img)
{
    if (funcs_set_image(fs, image, img) < 0) {
        funcs_fini(fs);
        return -ENOMEM;
    }
    if (api_handle_add(obj, kind) < 0) {
        funcs_fini(fs);
        return -ENOMEM;
    }
    return 0;
}

/* Undoes funcs_owner_add and frees obj. */
static void funcs_owner_free(void *obj, api_funcs_t *fs)
{
    api_handle_del(obj);
    funcs_fini(fs);
    free(obj);
}

/* The checks that cuModuleGetFunction and cuLibraryGetKernel share: owner is a handle of kind. */
static CUresult funcs_check(const void *out, const void *owner, int kind, const char *name)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!owner || !api_handle_is(owner, kind))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

/* cuModuleGetFunctionCount and cuLibraryGetKernelCount: the built-in kernels, or the entries of PTX text. */
static CUresult funcs_count(unsigned int *count, const void *owner, int kind, const api_funcs_t *fs)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!owner || !api_handle_is(owner, kind))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = (unsigned)fs->img.n;
    return CUDA_SUCCESS;
}

static CUresult options_ok(unsigned int n, const void *opts, void *const *vals)
{
    return n > 0 && (!opts || !vals) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* JIT options (cuModuleLoadDataEx, cuLinkCreate): every option must be one CUDA defines; the outputs a driver
 * fills are filled as after a JIT that logged nothing (empty logs, their sizes 0, a wall time of 0 ms). */
CUresult api_jit_options(unsigned int n, CUjit_option *opts, void **vals)
{
    CUresult rc = options_ok(n, opts, vals);
    for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++)
        if ((unsigned)opts[i] >= CU_JIT_NUM_OPTIONS)
            rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        switch (opts[i]) {
        case CU_JIT_WALL_TIME: { float ms = 0; memcpy(&vals[i], &ms, sizeof(ms)); break; }
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER:
            for (unsigned j = 0; j < n; j++)
                if (vals[i] && ((opts[i] == CU_JIT_INFO_LOG_BUFFER && opts[j] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) ||
                                (opts[i] == CU_JIT_ERROR_LOG_BUFFER && opts[j] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)) &&
                    (uintptr_t)vals[j] > 0)
                    ((char *)vals[i])[0] = '\0';
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: vals[i] = (void *)(uintptr_t)0; break;
        default: break;
        }
    }
    return CUDA_SUCCESS;
}

/* The simulated device's SM version (90): which cubins it runs and which PTX it JITs. */
#define DEVICE_SM 90

/* Whether this driver loads image (len bytes, SIZE_MAX if not known): img holds its kernels on success.
 * Not an image: CUDA_ERROR_INVALID_IMAGE; nothing for an sm_90: NO_BINARY_FOR_GPU; PTX whose .version is newer
 * than the ISA of SIMCUDA_DRIVER_VERSION: UNSUPPORTED_PTX_VERSION (as a real driver refuses it); a malformed
 * directive: INVALID_PTX. */
static CUresult image_check(const void *image, size_t len, image_t *img)
{
    memset(img, 0, sizeof(*img));
    int isa = ptxver_of_image(image);
    if (isa == -EINVAL)
        return CUDA_ERROR_INVALID_PTX;
    const simnode_config_t *cfg = simnode_config();
    if (isa > 0 && cfg && isa > ptxver_for_driver((int)cfg->driver_version))
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    switch (image_parse(image, len, DEVICE_SM, img)) {
    case 0: return CUDA_SUCCESS;
    case -ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    case IMAGE_ERR_NO_BINARY: return CUDA_ERROR_NO_BINARY_FOR_GPU;
    default: return CUDA_ERROR_INVALID_IMAGE;
    }
}

static CUresult module_new(CUmodule *module, const void *image, image_t *img)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUmod_st *m = api_calloc(1, sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->ctx = c;
    if (funcs_owner_add(m, API_KIND_MODULE, &m->funcs, image, img) < 0) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&c->lock);
    m->next = c->modules;
    c->modules = m;
    pthread_mutex_unlock(&c->lock);
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
                            void **optionValues)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = api_jit_options(numOptions, options, optionValues)) != CUDA_SUCCESS)
        return rc;
    image_t img;
    if ((rc = image_check(image, SIZE_MAX, &img)) == CUDA_SUCCESS)
        rc = module_new(module, image, &img);
    image_free(&img);
    return rc;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return api_cuModuleLoadDataEx(module, image, 0, NULL, NULL);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return api_cuModuleLoadData(module, fatCubin);
}

/* The contents of an image file (NUL-terminated, as PTX text must be), read for image_check. */
#define IMAGE_FILE_MAX (1L << 30)
static CUresult file_read(const char *fname, char **buf, size_t *len)
{
    FILE *f = fopen(fname, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc = CUDA_ERROR_FILE_NOT_FOUND;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || size > IMAGE_FILE_MAX || fseek(f, 0, SEEK_SET) != 0)
        goto out_close;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(*buf = malloc((size_t)size + 1)))
        goto out_close;
    rc = CUDA_SUCCESS;
    if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
        free(*buf);
        rc = CUDA_ERROR_FILE_NOT_FOUND;
        goto out_close;
    }
    (*buf)[size] = '\0';
    *len = (size_t)size;
out_close:
    fclose(f);
    return rc;
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!module || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    char *buf;
    size_t len;
    if ((rc = file_read(fname, &buf, &len)) != CUDA_SUCCESS)
        return rc;
    image_t img;
    if ((rc = image_check(buf, len, &img)) == CUDA_SUCCESS)
        rc = module_new(module, buf, &img);
    image_free(&img);
    free(buf);
    return rc;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!hmod || !api_handle_is(hmod, API_KIND_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    CUcontext c = hmod->ctx;
    pthread_mutex_lock(&c->lock);
    for (struct CUmod_st **pp = (struct CUmod_st **)&c->modules; *pp; pp = &(*pp)->next) {
        if (*pp == hmod) {
            *pp = hmod->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    funcs_owner_free(hmod, &hmod->funcs);
    return CUDA_SUCCESS;
}

void api_module_drop_ctx(CUcontext ctx)
{
    pthread_mutex_lock(&ctx->lock);
    struct CUmod_st *m = ctx->modules;
    ctx->modules = NULL;
    pthread_mutex_unlock(&ctx->lock);
    while (m) {
        struct CUmod_st *next = m->next;
        funcs_owner_free(m, &m->funcs);
        m = next;
    }
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult rc = funcs_check(hfunc, hmod, API_KIND_MODULE, name);
    api_func_t *f;
    if (rc == CUDA_SUCCESS && (rc = funcs_get(&hmod->funcs, name, hmod->ctx, false, &f)) == CUDA_SUCCESS)
        *hfunc = f;
    return rc;
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    return funcs_count(count, mod, API_KIND_MODULE, mod && api_handle_is(mod, API_KIND_MODULE) ? &mod->funcs : NULL);
}

/* ---- libraries (context-independent) ------------------------------------------------------------------ */
static CUresult library_new(CUlibrary *library, const void *image, size_t len, unsigned int numJitOptions,
                            CUjit_option *jitOptions, void **jitOptionsValues, unsigned int numLibraryOptions,
                            CUlibraryOption *libraryOptions, void **libraryOptionValues)
{
    CUresult rc = api_jit_options(numJitOptions, jitOptions, jitOptionsValues);
    if (rc == CUDA_SUCCESS)
        rc = options_ok(numLibraryOptions, libraryOptions, libraryOptionValues);
    if (rc != CUDA_SUCCESS)
        return rc;
    image_t img;
    if ((rc = image_check(image, len, &img)) != CUDA_SUCCESS)
        return rc;
    struct CUlib_st *l = api_calloc(1, sizeof(*l));
    if (!l || funcs_owner_add(l, API_KIND_LIBRARY, &l->funcs, image, &img) < 0) {
        image_free(&img);
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *library = l;
    return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                           void **libraryOptionValues, unsigned int numLibraryOptions)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!library || !code)
        return CUDA_ERROR_INVALID_VALUE;
    return library_new(library, code, SIZE_MAX, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions, libraryOptions,
                       libraryOptionValues);
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!library || !fileName)
        return CUDA_ERROR_INVALID_VALUE;
    char *buf;
    size_t len;
    if ((rc = file_read(fileName, &buf, &len)) != CUDA_SUCCESS)
        return rc;
    rc = library_new(library, buf, len, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                     libraryOptions, libraryOptionValues);
    free(buf);
    return rc;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!library || !api_handle_is(library, API_KIND_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    funcs_owner_free(library, &library->funcs);
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!name || (!dptr && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (!library || !api_handle_is(library, API_KIND_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    return globals_get(&library->funcs, name, c->dev, dptr, bytes);
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!name || (!dptr && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || !api_handle_is(hmod, API_KIND_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    return globals_get(&hmod->funcs, name, hmod->ctx->dev, dptr, bytes);
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CUresult rc = funcs_check(pKernel, library, API_KIND_LIBRARY, name);
    api_func_t *f;
    if (rc == CUDA_SUCCESS && (rc = funcs_get(&library->funcs, name, NULL, true, &f)) == CUDA_SUCCESS)
        *pKernel = (CUkernel)(void *)f;
    return rc;
}

CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    return funcs_count(count, lib, API_KIND_LIBRARY, lib && api_handle_is(lib, API_KIND_LIBRARY) ? &lib->funcs : NULL);
}

static api_func_t *as_func(const void *h)
{
    return h && api_handle_is(h, API_KIND_FUNC) ? (api_func_t *)h : NULL;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CUcontext c;
    CUresult rc = api_ctx_current(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    api_func_t *f = as_func(kernel);
    if (!f || !f->is_kernel)
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = f;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    api_func_t *f = as_func(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    return api_cuFuncGetName(name, (CUfunction)(void *)hfunc);
}

static CUresult func_attribute(int *pi, CUfunction_attribute attrib, const api_func_t *f)
{
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = f->local_bytes; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = f->regs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 75; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = f->binary_version; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dyn_smem; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = -1; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    api_func_t *f = as_func(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    return func_attribute(pi, attrib, f);
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    CUresult rc = api_check_device(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return api_cuFuncGetAttribute(pi, attrib, (CUfunction)(void *)kernel);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    CUresult rc = api_ready();
    if (rc != CUDA_SUCCESS)
        return rc;
    api_func_t *f = as_func(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || value > 232448)
            return CUDA_ERROR_INVALID_VALUE;
        f->max_dyn_smem = value;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return value < -1 || value > 100 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Hidden aliases of this file's entry points (see API_ALIAS in api-internal.h). */
API_ALIAS(cuFuncGetAttribute); API_ALIAS(cuFuncGetName); API_ALIAS(cuFuncSetAttribute);
API_ALIAS(cuKernelGetAttribute); API_ALIAS(cuKernelGetFunction); API_ALIAS(cuKernelGetName);
API_ALIAS(cuLibraryGetKernel); API_ALIAS(cuLibraryGetKernelCount); API_ALIAS(cuLibraryLoadData);
API_ALIAS(cuLibraryLoadFromFile); API_ALIAS(cuLibraryUnload); API_ALIAS(cuModuleGetFunction);
API_ALIAS(cuModuleGetFunctionCount); API_ALIAS(cuModuleLoad); API_ALIAS(cuModuleLoadData);
API_ALIAS(cuModuleLoadDataEx); API_ALIAS(cuLibraryGetGlobal); API_ALIAS(cuModuleGetGlobal_v2); API_ALIAS(cuModuleLoadFatBinary); API_ALIAS(cuModuleUnload);
