/* The XLA FFI handler of tileir.jax's cutile_call on JAX's CUDA backend
 * (runtime/xla_ffi.py says what it is for and builds this file).
 *
 * A cutile_call traced under JAX becomes one XLA custom call to the target
 * "tileir_cutile_call" with two attributes: `tileir_call`, the index of a *call*
 * in the registry below, and `tileir_key`, that call's fingerprint.  A call is
 * everything a launch needs that is fixed at trace time, prepared once in Python:
 * the loaded function and hardware grid per device, the block and dynamic shared
 * memory, the kernel's parameter buffer with every dim, stride, scalar and the
 * walked grid of a persistent kernel already written, and where each array's
 * pointer and each TMA descriptor go.  At execution XLA calls `tileir_xla_ffi_call`
 * with its stream and its device buffers; the handler writes the buffers' addresses
 * into a copy of the parameter buffer, encodes the tensor maps of addresses it has
 * not seen, and calls cuLaunchKernel (cuLaunchKernelEx with programmatic stream
 * serialization where the kernel waits for its neighbours).  No Python runs there.
 *
 * Calls are never freed: an executable compiled with a call's index may live as
 * long as the process.  An index names a call of this process only, so the handler
 * also checks the fingerprint (which a trace of the same call in another process
 * gives again): a mismatch (an executable from JAX's persistent compilation cache,
 * compiled by another process) is looked up by fingerprint among all calls, and is
 * an error naming what to do when no call of this process has it.
 *
 * Under vmap each buffer carries leading batch dims (runtime/xla_ffi.py's batching
 * rule gives every buffer the same number: a result's are the batch sizes, an
 * operand's each the batch size or 1, for an operand the batch does not vary); the
 * kernel is launched once per batch element, each pointer moved to its element.
 *
 * Nothing here includes CUDA headers: the driver's entry points arrive as addresses
 * (`tileir_xla_ffi_set_driver`), as in _fastlaunch.c.  The XLA FFI header is the
 * one of the jaxlib that loads this library: it is compiled against it (the API
 * version it reports to XLA is that header's).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_RANK 16                 /* of a buffer, batch dims included */
#define MAX_DEVICES 64
#define TENSOR_MAP_BYTES 128
#define MAP_CACHE 4                 /* encoded tensor maps kept per map, by address */
#define STACK_PARAMS 4096           /* larger parameter buffers are allocated per call */
#define STACK_SLOTS 512
#define CHUNK 256                   /* calls per registry chunk */
#define MAX_CHUNKS 16384

/* ------------------------------------------------------------------------- */
/* The driver's entry points                                                  */
/* ------------------------------------------------------------------------- */
#include "_cuda_launch.h"   /* the driver's launch entry points, shared */
typedef int (*ctx_get_fn)(void **ctx);                      /* cuCtxGetCurrent */
typedef int (*ctx_set_fn)(void *ctx);                       /* cuCtxSetCurrent */
typedef int (*stream_ctx_fn)(void *stream, void **ctx);     /* cuStreamGetCtx */
typedef int (*encode_fn)(void *map, int data_type, uint32_t rank, void *address,
                         const uint64_t *dims, const uint64_t *strides, const uint32_t *box,
                         const uint32_t *element_strides, int interleave, int swizzle,
                         int l2_promotion, int oob_fill);   /* cuTensorMapEncodeTiled */
typedef int (*error_name_fn)(int error, const char **name);  /* cuGetErrorName */

typedef struct {
    launch_fn launch;
    launch_ex_fn launch_ex;
    ctx_get_fn ctx_get;
    ctx_set_fn ctx_set;
    stream_ctx_fn stream_ctx;
    encode_fn encode;
    error_name_fn error_name;
} Driver;

static Driver driver, real_driver;
static int recording;               /* tileir_xla_ffi_record: the fakes below are in use */

/* ------------------------------------------------------------------------- */
/* Calls: what Python prepares (mirrored by ctypes structures in xla_ffi.py)  */
/* ------------------------------------------------------------------------- */
typedef struct {            /* an operand or result as the call expects it, batch dims aside */
    int32_t dtype;          /* XLA_FFI_DataType */
    int32_t rank;
    int64_t dims[MAX_RANK];
    int64_t nbytes;         /* of the whole array: one batch element's */
} TileirBufferSpec;

typedef struct {            /* where an array's address goes */
    int32_t result;         /* 0: operand `index`, 1: result `index` */
    int32_t index;
    uint32_t offset;        /* of its u64 slot in the parameter buffer */
    uint32_t align;         /* the address must be a multiple of this */
} TileirPointerSpec;

typedef struct {            /* a TMA descriptor: cuTensorMapEncodeTiled's arguments */
    uint32_t offset;        /* of its 128-byte slot */
    uint32_t pointer;       /* the TileirPointerSpec whose address it maps */
    int32_t data_type, interleave, swizzle, l2_promotion, oob_fill;
    uint32_t rank;
    uint64_t dims[5], strides[4];
    uint32_t box[5], element_strides[5];
} TileirMapSpec;

typedef struct {            /* the kernel loaded on one device */
    int32_t ordinal;
    uint32_t grid[3];       /* the hardware grid there (a persistent kernel's differs) */
    void *context;          /* the device's primary context */
    void *function;
} TileirDeviceSpec;

typedef struct {
    const char *name;
    uint64_t key;
    uint32_t block[3], shared;
    int32_t programmatic;
    const uint8_t *params; uint32_t params_size;   /* laid out from a 64-byte aligned base */
    const uint32_t *slots; uint32_t nslots;        /* each ABI slot's offset in it */
    const TileirPointerSpec *pointers; uint32_t npointers;
    const TileirMapSpec *maps; uint32_t nmaps;
    const TileirBufferSpec *operands; uint32_t noperands;
    const TileirBufferSpec *results; uint32_t nresults;
    const TileirDeviceSpec *devices; uint32_t ndevices;
} TileirCallSpec;

typedef struct {
    void *address;
    unsigned char bytes[TENSOR_MAP_BYTES];
} EncodedMap;

typedef struct {
    char name[128];
    uint64_t key;
    unsigned block[3], shared;
    int programmatic;
    uint8_t *params; uint32_t params_size;
    uint32_t *slots; uint32_t nslots;
    TileirPointerSpec *pointers; uint32_t npointers;
    TileirMapSpec *maps; uint32_t nmaps;
    TileirBufferSpec *operands; uint32_t noperands;
    TileirBufferSpec *results; uint32_t nresults;
    TileirDeviceSpec *devices; uint32_t ndevices;
    pthread_mutex_t maps_lock;      /* the encoded maps are shared by XLA's threads */
    EncodedMap *encoded;            /* nmaps x MAP_CACHE */
    unsigned *next_encoded;         /* per map: the entry replaced next */
} Call;

static Call **chunks[MAX_CHUNKS];
static _Atomic int64_t ncalls;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;

static void *copy_of(const void *from, size_t n) {
    void *to = malloc(n ? n : 1);
    if (to && n)
        memcpy(to, from, n);
    return to;
}

static void free_call(Call *c) {
    free(c->params); free(c->slots); free(c->pointers); free(c->maps); free(c->operands);
    free(c->results); free(c->devices); free(c->encoded); free(c->next_encoded);
    free(c);
}

/* Checks a spec and files a copy of it: its index, or -1 with `error` filled. */
EXPORT int64_t tileir_xla_ffi_add_call(const TileirCallSpec *spec, char *error,
                                       size_t error_size) {
    if (spec->ndevices < 1 || spec->ndevices > MAX_DEVICES) {
        snprintf(error, error_size, "a call needs 1 to %d devices, got %u", MAX_DEVICES,
                 spec->ndevices);
        return -1;
    }
    for (uint32_t i = 0; i < spec->nslots; i++)
        if (spec->slots[i] >= spec->params_size) {
            snprintf(error, error_size, "slot %u at %u is outside the %u-byte buffer", i,
                     spec->slots[i], spec->params_size);
            return -1;
        }
    for (uint32_t p = 0; p < spec->npointers; p++) {
        const TileirPointerSpec *s = &spec->pointers[p];
        uint32_t n = s->result ? spec->nresults : spec->noperands;
        if (s->index < 0 || (uint32_t)s->index >= n || s->offset + 8 > spec->params_size ||
                s->align == 0) {
            snprintf(error, error_size, "pointer %u is malformed", p);
            return -1;
        }
    }
    for (uint32_t m = 0; m < spec->nmaps; m++) {
        const TileirMapSpec *s = &spec->maps[m];
        if (s->pointer >= spec->npointers || s->offset + TENSOR_MAP_BYTES > spec->params_size ||
                s->offset % 64 || s->rank < 1 || s->rank > 5) {
            snprintf(error, error_size, "tensor map %u is malformed", m);
            return -1;
        }
    }
    const TileirBufferSpec *lists[2] = {spec->operands, spec->results};
    uint32_t counts[2] = {spec->noperands, spec->nresults};
    for (int l = 0; l < 2; l++)
        for (uint32_t b = 0; b < counts[l]; b++)
            if (lists[l][b].rank < 0 || lists[l][b].rank > MAX_RANK) {
                snprintf(error, error_size, "buffer %u has rank %d", b, lists[l][b].rank);
                return -1;
            }
    Call *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    snprintf(c->name, sizeof c->name, "%s", spec->name ? spec->name : "?");
    c->key = spec->key;
    memcpy(c->block, spec->block, sizeof c->block);
    c->shared = spec->shared;
    c->programmatic = spec->programmatic;
    c->params_size = spec->params_size;
    c->nslots = spec->nslots;
    c->npointers = spec->npointers;
    c->nmaps = spec->nmaps;
    c->noperands = spec->noperands;
    c->nresults = spec->nresults;
    c->ndevices = spec->ndevices;
    c->params = copy_of(spec->params, spec->params_size);
    c->slots = copy_of(spec->slots, spec->nslots * sizeof *c->slots);
    c->pointers = copy_of(spec->pointers, spec->npointers * sizeof *c->pointers);
    c->maps = copy_of(spec->maps, spec->nmaps * sizeof *c->maps);
    c->operands = copy_of(spec->operands, spec->noperands * sizeof *c->operands);
    c->results = copy_of(spec->results, spec->nresults * sizeof *c->results);
    c->devices = copy_of(spec->devices, spec->ndevices * sizeof *c->devices);
    c->encoded = calloc((size_t)spec->nmaps * MAP_CACHE + 1, sizeof *c->encoded);
    c->next_encoded = calloc(spec->nmaps + 1, sizeof *c->next_encoded);
    if (!c->params || !c->slots || !c->pointers || !c->maps || !c->operands || !c->results ||
            !c->devices || !c->encoded || !c->next_encoded) {
        free_call(c);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&c->maps_lock, NULL);

    pthread_mutex_lock(&add_lock);
    int64_t index = atomic_load_explicit(&ncalls, memory_order_relaxed);
    int64_t chunk = index / CHUNK;
    if (chunk < MAX_CHUNKS && !chunks[chunk])
        chunks[chunk] = calloc(CHUNK, sizeof(Call *));
    if (chunk >= MAX_CHUNKS || !chunks[chunk]) {
        pthread_mutex_unlock(&add_lock);
        free_call(c);
        snprintf(error, error_size, "the registry of calls is full (%d)", MAX_CHUNKS * CHUNK);
        return -1;
    }
    chunks[chunk][index % CHUNK] = c;
    /* published: a handler that reads the count sees the call and its chunk */
    atomic_store_explicit(&ncalls, index + 1, memory_order_release);
    pthread_mutex_unlock(&add_lock);
    return index;
}

static Call *find_call(int64_t index, uint64_t key) {
    int64_t n = atomic_load_explicit(&ncalls, memory_order_acquire);
    if (index >= 0 && index < n) {
        Call *c = chunks[index / CHUNK][index % CHUNK];
        if (c->key == key)
            return c;
    }
    for (int64_t i = 0; i < n; i++) {          /* compiled by another process */
        Call *c = chunks[i / CHUNK][i % CHUNK];
        if (c->key == key)
            return c;
    }
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* The handler                                                                */
/* ------------------------------------------------------------------------- */
static XLA_FFI_Error *fail(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *format,
                           ...) {
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    XLA_FFI_Error_Create_Args create;
    memset(&create, 0, sizeof create);
    create.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    create.message = message;            /* XLA copies it */
    create.errc = code;
    return api->XLA_FFI_Error_Create(&create);
}

static XLA_FFI_Error *out_of_memory(const XLA_FFI_Api *api) {
    return fail(api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "tileir cutile_call: out of memory");
}

/* The call frame's extension list: XLA_FFI_Extension_Base until API 0.3 (jaxlib
   0.10), renamed XLA_FFI_InternalExtension from API 0.4 (jaxlib 0.11), same fields. */
#if XLA_FFI_API_MAJOR == 0 && XLA_FFI_API_MINOR < 4
typedef XLA_FFI_Extension_Base frame_extension;
#else
typedef XLA_FFI_InternalExtension frame_extension;
#endif

/* Answers XLA's question, at registration, of which FFI API this handler speaks. */
static int metadata(XLA_FFI_CallFrame *frame) {
    frame_extension *ext = frame->extension_start;
    while (ext && ext->type != XLA_FFI_Extension_Metadata)
        ext = ext->next;
    if (!ext)
        return 0;
    XLA_FFI_Metadata *meta = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
    meta->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    meta->api_version.extension_start = NULL;
    meta->api_version.major_version = XLA_FFI_API_MAJOR;
    meta->api_version.minor_version = XLA_FFI_API_MINOR;
    meta->traits = 0;      /* not offered to command buffers: launched as XLA calls it */
    return 1;
}

static int scalar_attr(const XLA_FFI_Attrs *attrs, const char *name, int64_t *out) {
    size_t len = strlen(name);
    for (int64_t i = 0; i < attrs->size; i++) {
        const XLA_FFI_ByteSpan *n = attrs->names[i];
        if (n->len != len || memcmp(n->ptr, name, len))
            continue;
        if (attrs->types[i] != XLA_FFI_AttrType_SCALAR)
            return 0;
        const XLA_FFI_Scalar *s = attrs->attrs[i];
        switch (s->dtype) {
        case XLA_FFI_DataType_S64: case XLA_FFI_DataType_U64:
            memcpy(out, s->value, 8); return 1;
        case XLA_FFI_DataType_S32: { int32_t v; memcpy(&v, s->value, 4); *out = v; return 1; }
        default: return 0;
        }
    }
    return 0;
}

static void dims_text(char *out, size_t size, const int64_t *dims, int64_t rank) {
    size_t used = (size_t)snprintf(out, size, "(");
    for (int64_t i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, i ? ", %lld" : "%lld",
                                 (long long)dims[i]);
    if (used < size)
        snprintf(out + used, size - used, rank == 1 ? ",)" : ")");
}

typedef struct {
    char *base;                    /* the buffer's address */
    int64_t stride[MAX_RANK];      /* bytes between batch elements along each batch dim */
} Located;

/* Checks XLA's buffer against its spec (`what`: "operand 1"), batch dims first
 * (`nbatch` of them, sizes `batch`), and fills `where`. */
static XLA_FFI_Error *locate(const XLA_FFI_Api *api, const Call *c, const char *what,
                             const XLA_FFI_Buffer *b, const TileirBufferSpec *spec,
                             int64_t nbatch, const int64_t *batch, int must_be_full,
                             Located *where) {
    char got[256], want[256];
    if (b->dtype != (XLA_FFI_DataType)spec->dtype)
        return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "tileir cutile_call of kernel '%s': %s has XLA dtype %d, the call was "
                    "prepared for %d", c->name, what, (int)b->dtype, spec->dtype);
    int shaped = b->rank == spec->rank + nbatch;
    for (int64_t i = 0; shaped && i < spec->rank; i++)
        shaped = b->dims[nbatch + i] == spec->dims[i];
    for (int64_t i = 0; shaped && i < nbatch; i++)
        shaped = b->dims[i] == batch[i] || (!must_be_full && b->dims[i] == 1);
    if (!shaped) {
        dims_text(got, sizeof got, b->dims, b->rank);
        dims_text(want, sizeof want, spec->dims, spec->rank);
        return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "tileir cutile_call of kernel '%s': %s has shape %s, the call was prepared "
                    "for %s under %lld batch dims", c->name, what, got, want, (long long)nbatch);
    }
    where->base = b->data;
    int64_t step = spec->nbytes;
    for (int64_t i = nbatch - 1; i >= 0; i--) {
        where->stride[i] = b->dims[i] == 1 ? 0 : step;
        step *= b->dims[i];
    }
    return NULL;
}

static XLA_FFI_Error *encode_maps(const XLA_FFI_Api *api, Call *c, uint8_t *params,
                                  void *const *addresses) {
    XLA_FFI_Error *error = NULL;
    pthread_mutex_lock(&c->maps_lock);
    for (uint32_t m = 0; m < c->nmaps && !error; m++) {
        const TileirMapSpec *s = &c->maps[m];
        void *address = addresses[s->pointer];
        EncodedMap *cache = &c->encoded[m * MAP_CACHE], *found = NULL;
        for (int k = 0; k < MAP_CACHE && !found; k++)
            if (cache[k].address == address && address)
                found = &cache[k];
        if (!found) {
            found = &cache[c->next_encoded[m]++ % MAP_CACHE];
            found->address = NULL;
            _Alignas(64) unsigned char bytes[TENSOR_MAP_BYTES];
            int err = driver.encode(bytes, s->data_type, s->rank, address, s->dims, s->strides,
                                    s->box, s->element_strides, s->interleave, s->swizzle,
                                    s->l2_promotion, s->oob_fill);
            if (err) {
                error = fail(api, XLA_FFI_Error_Code_INTERNAL,
                             "tileir cutile_call of kernel '%s': cuTensorMapEncodeTiled for "
                             "tensor map %u at %p failed with CUDA error %d", c->name, m,
                             address, err);
                break;
            }
            memcpy(found->bytes, bytes, TENSOR_MAP_BYTES);
            found->address = address;
        }
        memcpy(params + s->offset, found->bytes, TENSOR_MAP_BYTES);
    }
    pthread_mutex_unlock(&c->maps_lock);
    return error;
}

/* What the recorder (tests) reads of the launch being made. */
static _Thread_local const uint8_t *launching_params;
static _Thread_local uint32_t launching_size;

static XLA_FFI_Error *launch(const XLA_FFI_Api *api, const Call *c,
                             const TileirDeviceSpec *d, void *stream, void **kernel_params) {
    void *current = NULL;
    int err = driver.ctx_get(&current);
    int switched = !err && current != d->context;
    if (switched)
        err = driver.ctx_set(d->context);
    if (!err) {
        if (c->programmatic) {
            LaunchAttribute attr;
            memset(&attr, 0, sizeof attr);
            attr.id = PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.allowed = 1;
            LaunchConfig config = {{d->grid[0], d->grid[1], d->grid[2]},
                                   {c->block[0], c->block[1], c->block[2]}, c->shared,
                                   stream, &attr, 1};
            err = driver.launch_ex(&config, d->function, kernel_params, NULL);
        } else {
            err = driver.launch(d->function, d->grid[0], d->grid[1], d->grid[2], c->block[0],
                                c->block[1], c->block[2], c->shared, stream, kernel_params,
                                NULL);
        }
    }
    if (switched && current)
        driver.ctx_set(current);
    if (!err)
        return NULL;
    const char *name = "an unknown error";
    if (driver.error_name(err, &name) || !name)
        name = "an unknown error";
    return fail(api, XLA_FFI_Error_Code_INTERNAL,
                "tileir cutile_call: %s('%s', grid=(%u, %u, %u), block=(%u, %u, %u), "
                "shared=%u) on device %d failed: %s (%d)",
                c->programmatic ? "cuLaunchKernelEx" : "cuLaunchKernel", c->name, d->grid[0],
                d->grid[1], d->grid[2], c->block[0], c->block[1], c->block[2], c->shared,
                d->ordinal, name, err);
}

static XLA_FFI_Error *pick_device(const XLA_FFI_Api *api, const Call *c, void *stream,
                                  const TileirDeviceSpec **out) {
    *out = &c->devices[0];
    if (c->ndevices == 1)       /* one GPU: its launch reports a stream of another context */
        return NULL;
    void *ctx = NULL;
    int err = driver.stream_ctx(stream, &ctx);
    if (err)
        return fail(api, XLA_FFI_Error_Code_INTERNAL,
                    "tileir cutile_call of kernel '%s': cuStreamGetCtx of XLA's stream failed "
                    "(CUDA error %d)", c->name, err);
    for (uint32_t i = 0; i < c->ndevices; i++)
        if (c->devices[i].context == ctx) {
            *out = &c->devices[i];
            return NULL;
        }
    return fail(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                "tileir cutile_call of kernel '%s': XLA runs it on a device it was not "
                "prepared for (the GPUs JAX listed when the call was traced)", c->name);
}

static XLA_FFI_Error *run(const XLA_FFI_CallFrame *frame, Call *c, void *stream,
                          uint8_t *params, void **kernel_params) {
    const XLA_FFI_Api *api = frame->api;
    const TileirDeviceSpec *device;
    XLA_FFI_Error *error = pick_device(api, c, stream, &device);
    if (error)
        return error;
    if (frame->args.size != c->noperands || frame->rets.size != c->nresults)
        return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "tileir cutile_call of kernel '%s': XLA passed %lld operands and %lld "
                    "results, the call was prepared for %u and %u", c->name,
                    (long long)frame->args.size, (long long)frame->rets.size, c->noperands,
                    c->nresults);
    /* the batch: every buffer has the same number of leading dims past its spec's rank;
     * a result's are the batch sizes (an operand's may be 1 where the batch does not
     * vary it) */
    int64_t nbatch = 0, batch[MAX_RANK];
    for (int64_t i = 0; i < frame->args.size; i++)
        if ((int)frame->args.types[i] != XLA_FFI_ArgType_BUFFER)
            return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "tileir cutile_call of kernel '%s': operand %lld is not a buffer",
                        c->name, (long long)i);
    for (int64_t i = 0; i < frame->rets.size; i++)
        if ((int)frame->rets.types[i] != XLA_FFI_RetType_BUFFER)
            return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "tileir cutile_call of kernel '%s': result %lld is not a buffer",
                        c->name, (long long)i);
    const XLA_FFI_Buffer *first = c->nresults ? frame->rets.rets[0]
                                : c->noperands ? frame->args.args[0] : NULL;
    if (first) {
        nbatch = first->rank - (c->nresults ? c->results : c->operands)[0].rank;
        if (nbatch < 0 || nbatch >= MAX_RANK)
            nbatch = 0;                      /* (reported by locate) */
        for (int64_t j = 0; j < nbatch; j++)
            batch[j] = first->dims[j];
    }
    for (int64_t i = 0; !c->nresults && i < frame->args.size; i++) {
        const XLA_FFI_Buffer *b = frame->args.args[i];
        for (int64_t j = 0; j < nbatch && j < b->rank; j++)
            if (b->dims[j] > batch[j])
                batch[j] = b->dims[j];
    }
    Located stack_located[16];
    uint32_t nbuffers = c->noperands + c->nresults;
    Located *located = nbuffers <= 16 ? stack_located : malloc(nbuffers * sizeof(Located));
    if (!located)
        return out_of_memory(api);
    for (uint32_t i = 0; i < c->noperands + c->nresults && !error; i++) {
        int is_ret = i >= c->noperands;
        uint32_t k = is_ret ? i - c->noperands : i;
        char what[32];
        snprintf(what, sizeof what, "%s %u", is_ret ? "result" : "operand", k);
        error = locate(api, c, what, is_ret ? frame->rets.rets[k] : frame->args.args[k],
                       is_ret ? &c->results[k] : &c->operands[k], nbatch, batch, is_ret,
                       &located[i]);
    }
    int64_t total = 1;
    for (int64_t j = 0; j < nbatch; j++)
        total *= batch[j];
    void *addresses[STACK_SLOTS];
    void **address = c->npointers <= STACK_SLOTS ? addresses
                                                 : malloc(c->npointers * sizeof(void *));
    if (!address && !error)
        error = out_of_memory(api);
    for (int64_t e = 0; e < total && !error; e++) {
        for (uint32_t p = 0; p < c->npointers && !error; p++) {
            const TileirPointerSpec *s = &c->pointers[p];
            const Located *l = &located[s->result ? c->noperands + s->index : (uint32_t)s->index];
            char *at = l->base;
            for (int64_t j = nbatch - 1, rest = e; j >= 0; j--) {
                at += (rest % batch[j]) * l->stride[j];
                rest /= batch[j];
            }
            if ((uintptr_t)at % s->align)
                error = fail(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                             "tileir cutile_call of kernel '%s': XLA's %s %d is at %p, not "
                             "aligned to the %u bytes the kernel was compiled for", c->name,
                             s->result ? "result" : "operand", s->index, (void *)at, s->align);
            address[p] = at;
            memcpy(params + s->offset, &at, 8);
        }
        if (!error && c->nmaps)
            error = encode_maps(api, c, params, address);
        if (!error) {
            launching_params = params;
            launching_size = c->params_size;
            error = launch(api, c, device, stream, kernel_params);
        }
    }
    if (address != addresses)
        free(address);
    if (located != stack_located)
        free(located);
    return error;
}

EXPORT XLA_FFI_Error *tileir_xla_ffi_call(XLA_FFI_CallFrame *frame) {
    if (metadata(frame))
        return NULL;
    const XLA_FFI_Api *api = frame->api;
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE)
        return NULL;
    int64_t index, key;
    if (!scalar_attr(&frame->attrs, "tileir_call", &index) ||
            !scalar_attr(&frame->attrs, "tileir_key", &key))
        return fail(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "tileir cutile_call: the custom call lacks its i64 attributes tileir_call "
                    "and tileir_key (it is made by tileir.jax.cutile_call only)");
    Call *c = find_call(index, (uint64_t)key);
    if (!c)
        return fail(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                    "tileir cutile_call: this executable launches a kernel (call %lld, key "
                    "%016llx) that was prepared by another process: trace the function again "
                    "in this one (an executable from JAX's persistent compilation cache "
                    "needs the jitted function traced in this process first)",
                    (long long)index, (unsigned long long)key);
    if (!driver.launch)
        return fail(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                    "tileir cutile_call: the CUDA driver's entry points were not set");
    void *stream = NULL;
    XLA_FFI_Stream_Get_Args get;
    memset(&get, 0, sizeof get);
    get.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
    get.ctx = frame->ctx;
    XLA_FFI_Error *error = api->XLA_FFI_Stream_Get(&get);
    if (error) {
        if (!recording)
            return error;
        XLA_FFI_Error_Destroy_Args destroy;     /* the recorder runs on JAX's CPU backend */
        memset(&destroy, 0, sizeof destroy);
        destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
        destroy.error = error;
        api->XLA_FFI_Error_Destroy(&destroy);
    } else {
        stream = get.stream;
    }
    /* a copy of the parameter buffer, 64-byte aligned (tensor maps), and its slots */
    _Alignas(64) uint8_t stack_params[STACK_PARAMS];
    void *stack_slots[STACK_SLOTS];
    uint8_t *heap = NULL, *params = stack_params;
    void **kernel_params = stack_slots, **heap_slots = NULL;
    if (c->params_size > STACK_PARAMS) {
        heap = malloc(c->params_size + 64);
        params = heap ? (uint8_t *)(((uintptr_t)heap + 63) & ~(uintptr_t)63) : NULL;
    }
    if (c->nslots > STACK_SLOTS)
        kernel_params = heap_slots = malloc(c->nslots * sizeof(void *));
    if (!params || !kernel_params) {
        free(heap);
        free(heap_slots);
        return out_of_memory(api);
    }
    memcpy(params, c->params, c->params_size);
    for (uint32_t i = 0; i < c->nslots; i++)
        kernel_params[i] = params + c->slots[i];
    error = run(frame, c, stream, params, kernel_params);
    free(heap);
    free(heap_slots);
    return error;
}

/* ------------------------------------------------------------------------- */
/* Set-up                                                                     */
/* ------------------------------------------------------------------------- */
EXPORT void tileir_xla_ffi_set_driver(uintptr_t launch_, uintptr_t launch_ex, uintptr_t ctx_get,
                                      uintptr_t ctx_set, uintptr_t stream_ctx, uintptr_t encode,
                                      uintptr_t error_name) {
    Driver d = {(launch_fn)launch_, (launch_ex_fn)launch_ex, (ctx_get_fn)ctx_get,
                (ctx_set_fn)ctx_set, (stream_ctx_fn)stream_ctx, (encode_fn)encode,
                (error_name_fn)error_name};
    real_driver = d;
    if (!recording)
        driver = d;
}

/* The FFI API version this library was compiled against: major * 1000 + minor. */
EXPORT int tileir_xla_ffi_api_version(void) {
    return XLA_FFI_API_MAJOR * 1000 + XLA_FFI_API_MINOR;
}

EXPORT int64_t tileir_xla_ffi_calls(void) {
    return atomic_load_explicit(&ncalls, memory_order_acquire);
}

/* ------------------------------------------------------------------------- */
/* The recorder: fakes of the driver's entry points, for tests without a GPU  */
/* ------------------------------------------------------------------------- */
typedef struct {
    void *function, *stream, *context;
    uint32_t grid[3], block[3], shared;
    int32_t programmatic;
    uint32_t params_size;
    uint8_t params[STACK_PARAMS];
} TileirLaunchRecord;

#define RECORDS 64
static TileirLaunchRecord records[RECORDS];
static int nrecords, fail_launches;
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local void *fake_current;

static int record(void *function, const unsigned grid[3], const unsigned block[3],
                  unsigned shared, void *stream, int programmatic) {
    pthread_mutex_lock(&records_lock);
    if (nrecords < RECORDS) {
        TileirLaunchRecord *r = &records[nrecords++];
        r->function = function;
        r->stream = stream;
        r->context = fake_current;
        memcpy(r->grid, grid, sizeof r->grid);
        memcpy(r->block, block, sizeof r->block);
        r->shared = shared;
        r->programmatic = programmatic;
        r->params_size = launching_size <= STACK_PARAMS ? launching_size : STACK_PARAMS;
        memcpy(r->params, launching_params, r->params_size);
    }
    pthread_mutex_unlock(&records_lock);
    return fail_launches ? 700 : 0;              /* CUDA_ERROR_ILLEGAL_ADDRESS */
}

static int fake_launch(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                       void **extra) {
    (void)params; (void)extra;
    unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return record(function, grid, block, shared, stream, 0);
}

static int fake_launch_ex(const LaunchConfig *config, void *function, void **params,
                          void **extra) {
    (void)params; (void)extra;
    int programmatic = config->nattrs == 1 &&
        config->attrs[0].id == PROGRAMMATIC_STREAM_SERIALIZATION && config->attrs[0].value.allowed;
    return record(function, config->grid, config->block, config->shared, config->stream,
                  programmatic);
}

static int fake_ctx_get(void **ctx) { *ctx = fake_current; return 0; }
static int fake_ctx_set(void *ctx) { fake_current = ctx; return 0; }
static int fake_stream_ctx(void *stream, void **ctx) { *ctx = stream; return 0; }

/* Writes its arguments into the map's bytes: address, then data type, rank,
 * interleave, swizzle, L2 promotion, OOB fill (a byte each, two spare), dims,
 * strides, box, element strides. */
static int fake_encode(void *map, int data_type, uint32_t rank, void *address,
                       const uint64_t *dims, const uint64_t *strides, const uint32_t *box,
                       const uint32_t *element_strides, int interleave, int swizzle,
                       int l2_promotion, int oob_fill) {
    unsigned char *out = map;
    memset(out, 0, TENSOR_MAP_BYTES);
    memcpy(out, &address, 8);
    unsigned char small[6] = {(unsigned char)data_type, (unsigned char)rank,
                              (unsigned char)interleave, (unsigned char)swizzle,
                              (unsigned char)l2_promotion, (unsigned char)oob_fill};
    memcpy(out + 8, small, sizeof small);
    memcpy(out + 16, dims, rank * 8);
    memcpy(out + 56, strides, (rank - 1) * 8);
    memcpy(out + 88, box, rank * 4);
    memcpy(out + 108, element_strides, rank * 4);
    return 0;
}

static int fake_error_name(int error, const char **name) {
    *name = error == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS (recorded)" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

/* mode 0: the real driver; 1: record launches; 2: record them and fail each one. */
EXPORT void tileir_xla_ffi_record(int mode) {
    pthread_mutex_lock(&records_lock);
    nrecords = 0;
    fail_launches = mode == 2;
    pthread_mutex_unlock(&records_lock);
    if (mode) {
        Driver d = {fake_launch, fake_launch_ex, fake_ctx_get, fake_ctx_set, fake_stream_ctx,
                    fake_encode, fake_error_name};
        driver = d;
    } else {
        driver = real_driver;
    }
    recording = mode != 0;
}

/* Copies out (up to `most` of) the launches recorded since the last call; their count. */
EXPORT int tileir_xla_ffi_records(TileirLaunchRecord *out, int most) {
    pthread_mutex_lock(&records_lock);
    int n = nrecords < most ? nrecords : most;
    memcpy(out, records, (size_t)n * sizeof *out);
    nrecords = 0;
    pthread_mutex_unlock(&records_lock);
    return n;
}
