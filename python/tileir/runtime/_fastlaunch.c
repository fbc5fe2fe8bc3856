/* The launch fast path in C (runtime/dispatch.py says what it is for).
 *
 * Two types, each a drop-in for its Python counterpart in dispatch.py:
 *
 * - `Dispatcher(kinds, plans, environ)`: `fast(stream, grid, args)` and
 *   `key_of(grid, args)` of one kernel for one kinds string ("TTTFFC"), with the
 *   contract of the generated Python functions: the key settles everything the
 *   specialization depends on (grid; each tensor's dtype, device, shape, strides and
 *   pointer alignment; each scalar's type and, for ints, whether it fits int32; the
 *   constants), `fast` launches through the plan filed under it or returns False.
 *   The key is a bytes object (a tuple of it and the constants when a constant is not
 *   an int), so that hashing and comparing it is one pass over a few hundred bytes.
 * - `Plan(...)`: the C half of a LaunchPlan: the addresses of its parameter slots
 *   (the buffer is the LaunchPlan's own, kept alive here), how to write each value,
 *   the tensor maps' slots and encoders, and cuLaunchKernel's address (or
 *   cuLaunchKernelEx's, for a programmatic launch).  A launch
 *   writes the slots and calls the driver with the GIL released.
 *
 * Anything out of the ordinary goes back to Python: a launch from another thread
 * than the plan's (the buffer is the owner's), a refused launch (the Python plan
 * retries in the device's context or raises the driver's error), a stream other
 * than None, an int handle or a torch.cuda.Stream of the plan's device (converted
 * by the plan's `stream_of`).  A value that
 * does not fit its slot declines the launch (False), so the checked path explains.
 *
 * Nothing here includes CUDA headers: the driver entry point arrives as an address.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cuda_launch.h"   /* the driver's launch entry points, shared */

#define F32_OVERFLOW (340282356779733661637539395458142568448.0)  /* 2^128 - 2^103 */
#define MAPS_PER_PLAN 256
#define TENSOR_MAP_BYTES 128

static PyObject *s_native, *s_launch;
static PyObject *s_interpret, *s_sync_launch, *s_device_index, *s_cuda_stream;   /* b"TILEIR_INTERPRET", b"TILEIR_SYNC_LAUNCH" */

/* ------------------------------------------------------------------------- */
/* Key bytes                                                                  */
/* ------------------------------------------------------------------------- */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
    char inline_data[512];
} KeyBuf;

static void key_init(KeyBuf *k) {
    k->data = k->inline_data;
    k->size = 0;
    k->capacity = sizeof k->inline_data;
}

static void key_free(KeyBuf *k) {
    if (k->data != k->inline_data)
        PyMem_Free(k->data);
}

static int key_put(KeyBuf *k, const void *bytes, Py_ssize_t n) {
    if (k->size + n > k->capacity) {
        Py_ssize_t capacity = 2 * (k->size + n);
        char *data = PyMem_Malloc(capacity);
        if (!data) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(data, k->data, k->size);
        key_free(k);
        k->data = data;
        k->capacity = capacity;
    }
    memcpy(k->data + k->size, bytes, n);
    k->size += n;
    return 0;
}

static PyObject *const_key_fn;      /* specialization.typed_key: set_const_key */
static int key_tag(KeyBuf *k, char tag) { return key_put(k, &tag, 1); }
static int key_i64(KeyBuf *k, long long v) { return key_put(k, &v, sizeof v); }
static int key_ptr(KeyBuf *k, const void *p) { return key_put(k, &p, sizeof p); }

/* The items of a tuple of ints (torch.Size, stride()), count first. */
static int key_ints(KeyBuf *k, PyObject *seq) {
    if (!PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "shape or strides are not a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (key_i64(k, n) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (key_i64(k, v) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Tensor accessors                                                           */
/* ------------------------------------------------------------------------- */
/* A key reads five things of each tensor: data_ptr(), dtype, get_device(), shape,
 * stride().  For torch.Tensor (`use_tensor_type`) and the subclasses whose every one
 * of these names resolves to torch.Tensor's own descriptor, the C functions behind
 * those descriptors are called directly: what the attribute lookup would end up
 * running, without the lookup (on the H100 host, 320 against 420 ns a tensor).
 * Other objects, and an accessor of a calling convention not handled here, go
 * through the ordinary lookup.  A type is classified at its first launch: an
 * accessor patched onto the class later, or set on one tensor object (the three
 * methods are not data descriptors, so an instance attribute would shadow them), is
 * not seen. */
enum { A_DATA_PTR, A_DTYPE, A_GET_DEVICE, A_SHAPE, A_STRIDE, N_ACCESSORS };
static PyObject *acc_name[N_ACCESSORS];
static PyObject *acc_descr[N_ACCESSORS];      /* torch.Tensor's descriptors (owned) */
static PyObject *empty_tuple;
#define TENSOR_TYPES 8
static PyTypeObject *tensor_type[TENSOR_TYPES];   /* classified types (owned) */
static char tensor_type_direct[TENSOR_TYPES];
static int ntensor_types;

/* Whether `descr` can be called directly here (a getset, or a method of a calling
 * convention `direct_call` handles). */
static int callable_directly(PyObject *descr) {
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type))
        return ((PyGetSetDescrObject *)descr)->d_getset->get != NULL;
    if (!Py_IS_TYPE(descr, &PyMethodDescr_Type))
        return 0;
    int flags = ((PyMethodDescrObject *)descr)->d_method->ml_flags &
                ~(METH_COEXIST | METH_CLASS | METH_STATIC);
    return flags == METH_NOARGS || flags == (METH_VARARGS | METH_KEYWORDS) ||
           flags == METH_FASTCALL || flags == (METH_FASTCALL | METH_KEYWORDS) ||
           flags == METH_VARARGS;
}

typedef PyObject *(*fast_fn)(PyObject *, PyObject *const *, Py_ssize_t);
typedef PyObject *(*fast_kw_fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);

static PyObject *direct_call(PyObject *descr, PyObject *self) {
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
        PyGetSetDef *gs = ((PyGetSetDescrObject *)descr)->d_getset;
        return gs->get(self, gs->closure);
    }
    PyMethodDef *m = ((PyMethodDescrObject *)descr)->d_method;
    switch (m->ml_flags & ~(METH_COEXIST | METH_CLASS | METH_STATIC)) {
    case METH_NOARGS:
        return m->ml_meth(self, NULL);
    case METH_VARARGS:
        return m->ml_meth(self, empty_tuple);
    case METH_VARARGS | METH_KEYWORDS:
        return ((PyCFunctionWithKeywords)(void (*)(void))m->ml_meth)(self, empty_tuple, NULL);
    case METH_FASTCALL:
        return ((fast_fn)(void (*)(void))m->ml_meth)(self, NULL, 0);
    default:   /* METH_FASTCALL | METH_KEYWORDS (callable_directly admits no other) */
        return ((fast_kw_fn)(void (*)(void))m->ml_meth)(self, NULL, 0, NULL);
    }
}

/* Whether tensors of type `tp` take the direct calls: classified once per type. */
static int direct_type(PyTypeObject *tp) {
    for (int i = 0; i < ntensor_types; i++)
        if (tensor_type[i] == tp)
            return tensor_type_direct[i];
    if (!acc_descr[0] || ntensor_types == TENSOR_TYPES)
        return 0;
    int direct = tp->tp_getattro == PyObject_GenericGetAttr;
    for (int a = 0; direct && a < N_ACCESSORS; a++) {
        PyObject *d = PyObject_GetAttr((PyObject *)tp, acc_name[a]);
        direct = d == acc_descr[a] && PyType_IsSubtype(tp, PyDescr_TYPE(acc_descr[a]));
        Py_XDECREF(d);
    }
    PyErr_Clear();
    /* (the lookups may have run Python code, and another thread classified types) */
    for (int i = 0; i < ntensor_types; i++)
        if (tensor_type[i] == tp)
            return tensor_type_direct[i];
    if (ntensor_types == TENSOR_TYPES)
        return direct;
    Py_INCREF(tp);
    tensor_type[ntensor_types] = tp;
    tensor_type_direct[ntensor_types++] = (char)direct;
    return direct;
}

/* Accessor `a` of tensor `t` (a new reference), directly where `direct`. */
static PyObject *tensor_get(PyObject *t, int a, int direct) {
    if (direct)
        return direct_call(acc_descr[a], t);
    if (a == A_DTYPE || a == A_SHAPE)
        return PyObject_GetAttr(t, acc_name[a]);
    return PyObject_VectorcallMethod(acc_name[a], &t, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* `use_tensor_type(torch.Tensor)`: records its five descriptors (see above). */
static PyObject *use_tensor_type(PyObject *module, PyObject *tp) {
    (void)module;
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "use_tensor_type takes a type");
        return NULL;
    }
    PyObject *found[N_ACCESSORS] = {NULL};
    int ok = 1;
    for (int a = 0; a < N_ACCESSORS; a++) {
        found[a] = PyObject_GetAttr(tp, acc_name[a]);
        if (!found[a]) {
            PyErr_Clear();
            ok = 0;
        } else if (!callable_directly(found[a]) ||
                   !PyType_IsSubtype((PyTypeObject *)tp, PyDescr_TYPE(found[a])))
            ok = 0;
    }
    if (ok) {
        for (int i = 0; i < ntensor_types; i++)
            Py_DECREF(tensor_type[i]);
        ntensor_types = 0;
        for (int a = 0; a < N_ACCESSORS; a++) {
            Py_XSETREF(acc_descr[a], found[a]);
            found[a] = NULL;
        }
    }
    for (int a = 0; a < N_ACCESSORS; a++)
        Py_XDECREF(found[a]);
    return PyBool_FromLong(ok);
}

/* One runtime value, as the plan writes it into its slot. */
typedef enum { V_POINTER, V_INT, V_FLOAT, V_BOOL } ValueKind;
typedef struct {
    ValueKind kind;
    int fits;            /* V_INT: within int64 */
    long long i;         /* V_POINTER (as bits), V_INT, V_BOOL */
    double d;            /* V_FLOAT */
} Value;

/* ------------------------------------------------------------------------- */
/* DLPack's C exchange API                                                    */
/* ------------------------------------------------------------------------- */
/* A tensor type that publishes DLPack's C exchange API (DLPack 1.3; torch.Tensor's
 * `__dlpack_c_exchange_api__` since torch 2.10: a capsule named "dlpack_exchange_api"
 * over a table of C functions) describes a tensor in one C call that fills a DLTensor
 * whose shape and strides point into the tensor itself: no Python objects are made.
 * `use_dlpack_exchange(type)` records the table; tensors of exactly that type are
 * then keyed from it (about 30 against 320 ns a tensor through the accessors), all
 * others as before.  Only the exact type: a subclass may override an accessor, or
 * dispatch through __torch_function__, which the C call would not see.  A tensor the
 * call refuses (a layout or dtype DLPack has no name for) is read through its
 * accessors, so that the checked path explains.  The structs below are DLPack's ABI,
 * declared here so that nothing needs dlpack.h. */
typedef struct { int32_t device_type, device_id; } DLDevice_;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType_;
typedef struct {
    void *data;
    DLDevice_ device;
    int32_t ndim;
    DLDataType_ dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensor_;
typedef struct { uint32_t major, minor; } DLPackVersion_;
typedef struct DLPackExchangeAPIHeader_ {
    DLPackVersion_ version;
    struct DLPackExchangeAPIHeader_ *prev_api;
} DLPackExchangeAPIHeader_;
typedef int (*dltensor_from_fn)(void *py_object, DLTensor_ *out);
typedef struct {
    DLPackExchangeAPIHeader_ header;
    void *managed_tensor_allocator;
    void *managed_tensor_from_py_object_no_sync;
    void *managed_tensor_to_py_object_no_sync;
    dltensor_from_fn dltensor_from_py_object_no_sync;
    void *current_work_stream;
} DLPackExchangeAPI_;
_Static_assert(sizeof(DLTensor_) == 48, "DLTensor is 48 bytes");
_Static_assert(offsetof(DLPackExchangeAPI_, dltensor_from_py_object_no_sync) == 40,
               "DLPackExchangeAPI's layout");
#define DL_CPU 1

static PyTypeObject *dlpack_type;        /* the type whose table is used (owned) */
static PyObject *dlpack_capsule;         /* keeps the table alive */
static dltensor_from_fn dlpack_describe;
static PyObject *s_dlpack_api;           /* "__dlpack_c_exchange_api__" */

/* `use_dlpack_exchange(tp)`: whether `tp` publishes a usable table (major version 1,
 * minor 3 or later, with dltensor_from_py_object_no_sync); records it when it does. */
static PyObject *use_dlpack_exchange(PyObject *module, PyObject *tp) {
    (void)module;
    if (tp == Py_None) {    /* forget the table (the function first: the clears may
                               run Python code, which may launch) */
        dlpack_describe = NULL;
        PyObject *type = (PyObject *)dlpack_type, *capsule = dlpack_capsule;
        dlpack_type = NULL;
        dlpack_capsule = NULL;
        Py_XDECREF(type);
        Py_XDECREF(capsule);
        Py_RETURN_FALSE;
    }
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "use_dlpack_exchange takes a type or None");
        return NULL;
    }
    PyObject *capsule = PyObject_GetAttr(tp, s_dlpack_api);
    if (!capsule) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    const DLPackExchangeAPI_ *api = PyCapsule_IsValid(capsule, "dlpack_exchange_api")
        ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api") : NULL;
    if (!api || api->header.version.major != 1 || api->header.version.minor < 3 ||
        !api->dltensor_from_py_object_no_sync) {
        PyErr_Clear();
        Py_DECREF(capsule);
        Py_RETURN_FALSE;
    }
    /* the new table in place before the old one's references go (their release may
     * run Python code, which may launch) */
    PyObject *old_type = (PyObject *)dlpack_type, *old_capsule = dlpack_capsule;
    Py_INCREF(tp);
    dlpack_type = (PyTypeObject *)tp;
    dlpack_capsule = capsule;
    dlpack_describe = api->dltensor_from_py_object_no_sync;
    Py_XDECREF(old_type);
    Py_XDECREF(old_capsule);
    Py_RETURN_TRUE;
}

/* The key of a tensor described through the table: 'D', dtype, device, shape,
 * strides, pointer alignment.  0 when keyed, 1 when the table refused the tensor or
 * its DLPack dtype does not name one dtype (no exception left), -1 with an exception.
 * torch describes its sub-byte integers (uint1..uint7, int1..int7) as 8-bit ones, so
 * 8-bit integers are read through the accessors, whose dtype object tells them apart. */
#define DL_INT 0
#define DL_UINT 1
static int key_dlpack(KeyBuf *k, PyObject *a, Value *v) {
    DLTensor_ t;
    if (dlpack_describe(a, &t) != 0) {
        PyErr_Clear();
        return 1;
    }
    if ((t.dtype.code == DL_INT || t.dtype.code == DL_UINT) && t.dtype.bits == 8)
        return 1;
    unsigned long long p = (unsigned long long)(uintptr_t)t.data + t.byte_offset;
    /* the device as get_device() numbers it: -1 for the host; other kinds apart */
    long long device = t.device.device_type == DL_CPU
        ? -1 : ((long long)t.device.device_type << 32) | (uint32_t)t.device.device_id;
    if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
        return 1;
    if (key_tag(k, 'D') < 0 || key_put(k, &t.dtype, sizeof t.dtype) < 0 ||
        key_i64(k, device) < 0 || key_i64(k, t.ndim) < 0 ||
        (t.ndim && key_put(k, t.shape, (Py_ssize_t)t.ndim * 8) < 0))
        return -1;
    if (t.strides) {
        if (t.ndim && key_put(k, t.strides, (Py_ssize_t)t.ndim * 8) < 0)
            return -1;
    } else if (t.ndim) {   /* DLPack's compact row-major layout, written as strides */
        Py_ssize_t at = k->size;
        if (key_put(k, t.shape, (Py_ssize_t)t.ndim * 8) < 0)
            return -1;
        int64_t stride = 1;
        for (int32_t d = t.ndim - 1; d >= 0; d--) {
            memcpy(k->data + at + 8 * d, &stride, 8);
            stride *= t.shape[d];
        }
    }
    if (key_tag(k, (char)(p & 15)) < 0)
        return -1;
    v->kind = V_POINTER;
    v->fits = 1;
    v->i = (long long)p;
    return 0;
}


#define MAX_ARGS 64

/* ------------------------------------------------------------------------- */
/* Plan                                                                       */
/* ------------------------------------------------------------------------- */
typedef struct {
    void *address;
    char code;           /* struct-module format of the slot: Q q I i H h B b f d */
} Slot;

typedef struct {
    Py_ssize_t value;    /* index of the array's pointer among the values */
    void *address;
    PyObject *encode;    /* encode(args) -> 128 bytes */
    PyObject *cache;     /* {pointer: bytes} */
} MapSlot;

typedef int (*ctx_get_fn)(void **ctx);      /* cuCtxGetCurrent */
typedef int (*ctx_set_fn)(void *ctx);       /* cuCtxSetCurrent */

typedef struct {
    PyObject_HEAD
    launch_fn launch;
    launch_ex_fn launch_ex;    /* cuLaunchKernelEx for programmatic launches, else NULL */
    ctx_get_fn ctx_get;
    ctx_set_fn ctx_set;
    void *context;             /* the device's primary context (the function's) */
    void *function;
    unsigned grid[3], block[3], shared;
    void **params;
    Py_ssize_t nslots, nmaps;
    Slot *slots;
    MapSlot *maps;
    unsigned long owner;
    PyObject *device;          /* int, the argument of current_stream */
    PyObject *current_stream;  /* device -> handle */
    PyObject *stream_of;       /* (stream, args) -> handle */
    PyObject *fallback;        /* the Python plan's launch(stream, args, values) */
    PyObject *keepalive;       /* what owns the buffer */
} PlanObject;

static PyTypeObject PlanType;

static void plan_dealloc(PlanObject *self) {
    for (Py_ssize_t m = 0; m < self->nmaps; m++) {
        Py_XDECREF(self->maps[m].encode);
        Py_XDECREF(self->maps[m].cache);
    }
    PyMem_Free(self->slots);
    PyMem_Free(self->maps);
    Py_XDECREF(self->device);
    Py_XDECREF(self->current_stream);
    Py_XDECREF(self->stream_of);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->keepalive);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int unsigned3(PyObject *seq, unsigned out[3], const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != 3) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of 3 ints", what);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(seq, i));
        if (PyErr_Occurred())
            return -1;
        out[i] = (unsigned)v;
    }
    return 0;
}

static int plan_init(PlanObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"launch", "ctx_get", "ctx_set", "context", "function", "grid",
                            "block", "shared", "params", "slots", "maps", "owner", "device",
                            "current_stream", "stream_of", "fallback", "keepalive",
                            "launch_ex", NULL};
    unsigned long long launch, ctx_get, ctx_set, context, function, params, launch_ex = 0;
    unsigned long owner;
    PyObject *grid, *block, *slots, *maps;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKKKOOIKO!O!kOOOOO|K", names, &launch,
                                     &ctx_get, &ctx_set, &context, &function,
                                     &grid, &block, &self->shared, &params, &PyTuple_Type,
                                     &slots, &PyTuple_Type, &maps, &owner, &self->device,
                                     &self->current_stream, &self->stream_of,
                                     &self->fallback, &self->keepalive, &launch_ex))
        return -1;
    self->launch_ex = (launch_ex_fn)(uintptr_t)launch_ex;
    self->ctx_get = (ctx_get_fn)(uintptr_t)ctx_get;
    self->ctx_set = (ctx_set_fn)(uintptr_t)ctx_set;
    self->context = (void *)(uintptr_t)context;
    Py_INCREF(self->device);
    Py_INCREF(self->current_stream);
    Py_INCREF(self->stream_of);
    Py_INCREF(self->fallback);
    Py_INCREF(self->keepalive);
    if (unsigned3(grid, self->grid, "grid") < 0 || unsigned3(block, self->block, "block") < 0)
        return -1;
    self->launch = (launch_fn)(uintptr_t)launch;
    self->function = (void *)(uintptr_t)function;
    self->params = (void **)(uintptr_t)params;
    self->owner = owner;
    self->nslots = PyTuple_GET_SIZE(slots);
    self->slots = PyMem_Calloc(self->nslots ? self->nslots : 1, sizeof(Slot));
    self->nmaps = PyTuple_GET_SIZE(maps);
    self->maps = PyMem_Calloc(self->nmaps ? self->nmaps : 1, sizeof(MapSlot));
    if (!self->slots || !self->maps) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t s = 0; s < self->nslots; s++) {
        unsigned long long address;
        const char *code;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, s), "Ks", &address, &code))
            return -1;
        if (strlen(code) != 1 || !strchr("QqIiHhBbfd", code[0])) {
            PyErr_Format(PyExc_ValueError, "unknown slot format '%s'", code);
            return -1;
        }
        self->slots[s].address = (void *)(uintptr_t)address;
        self->slots[s].code = code[0];
    }
    for (Py_ssize_t m = 0; m < self->nmaps; m++) {
        MapSlot *map = &self->maps[m];
        unsigned long long address;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(maps, m), "nKOO!", &map->value, &address,
                              &map->encode, &PyDict_Type, &map->cache))
            return -1;
        if (map->value < 0 || map->value >= self->nslots) {
            PyErr_SetString(PyExc_ValueError, "tensor map value index out of range");
            return -1;
        }
        map->address = (void *)(uintptr_t)address;
        Py_INCREF(map->encode);
        Py_INCREF(map->cache);
    }
    return 0;
}

/* Writes one value into its slot; 0 when it does not fit (the launch declines). */
static int write_slot(const Slot *slot, const Value *v) {
    if (slot->code == 'f' || slot->code == 'd') {
        if (v->kind != V_FLOAT)
            return 0;
        if (slot->code == 'd') {
            memcpy(slot->address, &v->d, sizeof v->d);
            return 1;
        }
        if (isfinite(v->d) && fabs(v->d) >= F32_OVERFLOW)
            return 0;
        float f = (float)v->d;
        memcpy(slot->address, &f, sizeof f);
        return 1;
    }
    if (v->kind == V_FLOAT || (v->kind == V_INT && !v->fits))
        return 0;
    long long x = v->i;
    switch (slot->code) {
    case 'Q': { uint64_t u = (uint64_t)x; if (v->kind != V_POINTER && x < 0) return 0;
                memcpy(slot->address, &u, 8); return 1; }
    case 'q': { int64_t s = x; memcpy(slot->address, &s, 8); return 1; }
    case 'I': { if (x < 0 || x > UINT32_MAX) return 0; uint32_t u = (uint32_t)x;
                memcpy(slot->address, &u, 4); return 1; }
    case 'i': { if (x < INT32_MIN || x > INT32_MAX) return 0; int32_t s = (int32_t)x;
                memcpy(slot->address, &s, 4); return 1; }
    case 'H': { if (x < 0 || x > UINT16_MAX) return 0; uint16_t u = (uint16_t)x;
                memcpy(slot->address, &u, 2); return 1; }
    case 'h': { if (x < INT16_MIN || x > INT16_MAX) return 0; int16_t s = (int16_t)x;
                memcpy(slot->address, &s, 2); return 1; }
    case 'B': { if (x < 0 || x > UINT8_MAX) return 0; uint8_t u = (uint8_t)x;
                memcpy(slot->address, &u, 1); return 1; }
    case 'b': { if (x < INT8_MIN || x > INT8_MAX) return 0; int8_t s = (int8_t)x;
                memcpy(slot->address, &s, 1); return 1; }
    }
    return 0;
}

/* The 128 bytes of a tensor map for the array whose pointer is `pointer`, cached. */
static int write_map(const MapSlot *map, long long pointer, PyObject *args) {
    PyObject *key = PyLong_FromUnsignedLongLong((unsigned long long)pointer);
    if (!key)
        return -1;
    PyObject *encoded = PyDict_GetItemWithError(map->cache, key);   /* borrowed */
    if (encoded)
        Py_INCREF(encoded);
    else if (!PyErr_Occurred()) {
        encoded = PyObject_CallOneArg(map->encode, args);
        if (encoded && PyDict_GET_SIZE(map->cache) >= MAPS_PER_PLAN)
            PyDict_Clear(map->cache);
        if (encoded && PyDict_SetItem(map->cache, key, encoded) < 0)
            Py_CLEAR(encoded);
    }
    Py_DECREF(key);
    if (!encoded)
        return -1;
    if (!PyBytes_Check(encoded) || PyBytes_GET_SIZE(encoded) != TENSOR_MAP_BYTES) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_TypeError, "a tensor map encoder must return 128 bytes");
        return -1;
    }
    memcpy(map->address, PyBytes_AS_STRING(encoded), TENSOR_MAP_BYTES);
    Py_DECREF(encoded);
    return 0;
}

/* The runtime values as the Python plan takes them (dispatch.dynamic_values). */
static PyObject *values_tuple(const Value *values, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        const Value *v = &values[i];
        PyObject *item;
        switch (v->kind) {
        case V_POINTER: item = PyLong_FromUnsignedLongLong((unsigned long long)v->i); break;
        case V_INT: item = PyLong_FromLongLong(v->i); break;
        case V_FLOAT: item = PyFloat_FromDouble(v->d); break;
        default: item = PyBool_FromLong((long)v->i); break;
        }
        if (!item)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, item);
    }
    return t;
}

/* `launch(stream, args, values)` of the Python plan: its buffer, its checks, its retry. */
static PyObject *python_launch(PyObject *launch, PyObject *stream, PyObject *args,
                               const Value *values, Py_ssize_t n) {
    PyObject *t = values_tuple(values, n);
    if (!t)
        return NULL;
    PyObject *result = PyObject_CallFunctionObjArgs(launch, stream, args, t, NULL);
    Py_DECREF(t);
    return result;
}

/* A torch.cuda.Stream's handle (its `cuda_stream`), a new reference, when its
 * `device_index` is the plan's device; NULL without an exception otherwise (not
 * such a stream, or another device's: the plan's stream_of explains). */
static PyObject *torch_stream_handle(PlanObject *plan, PyObject *stream) {
    PyObject *index = PyObject_GetAttr(stream, s_device_index);
    if (!index) {
        PyErr_Clear();
        return NULL;
    }
    int same = PyLong_CheckExact(index) &&
               PyObject_RichCompareBool(index, plan->device, Py_EQ) == 1;
    Py_DECREF(index);
    PyObject *handle = same ? PyObject_GetAttr(stream, s_cuda_stream) : NULL;
    if (handle && !PyLong_CheckExact(handle))
        Py_CLEAR(handle);
    PyErr_Clear();
    return handle;
}

/* The stream handle for `stream`: torch's current one for None, an int as given, a
 * torch.cuda.Stream of the plan's device by its handle, anything else through the
 * plan's stream_of (which raises for what is not a stream). */
static int stream_handle(PlanObject *plan, PyObject *stream, PyObject *args, void **out) {
    PyObject *handle;
    if (stream == Py_None)
        handle = PyObject_CallOneArg(plan->current_stream, plan->device);
    else if (PyLong_CheckExact(stream)) {
        handle = stream;
        Py_INCREF(handle);
    } else if (!(handle = torch_stream_handle(plan, stream)))
        handle = PyObject_CallFunctionObjArgs(plan->stream_of, stream, args, NULL);
    if (!handle)
        return -1;
    unsigned long long h = PyLong_AsUnsignedLongLong(handle);
    Py_DECREF(handle);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {   /* a negative handle */
            PyErr_Clear();
            return 1;
        }
        return -1;
    }
    *out = (void *)(uintptr_t)h;
    return 0;
}

/* Launches `plan` with `values`: Py_True, Py_False (declined, nothing launched), or
 * NULL with an exception set. */
static PyObject *plan_run(PlanObject *plan, PyObject *stream, PyObject *args,
                          const Value *values, Py_ssize_t nvalues) {
    if (PyThread_get_thread_ident() != plan->owner || nvalues != plan->nslots)
        return python_launch(plan->fallback, stream, args, values, nvalues);
    void *handle = NULL;
    int rc = stream_handle(plan, stream, args, &handle);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        return python_launch(plan->fallback, stream, args, values, nvalues);  /* it explains */
    for (Py_ssize_t s = 0; s < plan->nslots; s++)
        if (!write_slot(&plan->slots[s], &values[s]))
            Py_RETURN_FALSE;
    for (Py_ssize_t m = 0; m < plan->nmaps; m++)
        if (write_map(&plan->maps[m], values[plan->maps[m].value].i, args) < 0)
            return NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS
    /* The function belongs to the device's primary context: with none current, that
     * one is made current and stays (as the CUDA runtime does on a thread's first
     * call); with another one current, it is current for this launch only. */
    void *current = NULL;
    err = plan->ctx_get(&current);
    if (err == 0 && current != plan->context)
        err = plan->ctx_set(plan->context);
    if (err == 0 && plan->launch_ex != NULL) {
        LaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.allowed = 1;
        LaunchConfig config = {{plan->grid[0], plan->grid[1], plan->grid[2]},
                               {plan->block[0], plan->block[1], plan->block[2]},
                               plan->shared, handle, &attr, 1};
        err = plan->launch_ex(&config, plan->function, plan->params, NULL);
        if (current != NULL && current != plan->context)
            plan->ctx_set(current);
    } else if (err == 0) {
        err = plan->launch(plan->function, plan->grid[0], plan->grid[1], plan->grid[2],
                           plan->block[0], plan->block[1], plan->block[2], plan->shared,
                           handle, plan->params, NULL);
        if (current != NULL && current != plan->context)
            plan->ctx_set(current);
    }
    Py_END_ALLOW_THREADS
    if (err != 0)      /* a real error: the Python plan reports it */
        return python_launch(plan->fallback, stream, args, values, nvalues);
    Py_RETURN_TRUE;
}

/* `Plan.launch(stream, args, values)`: as LaunchPlan.launch (tests; a first launch). */
static PyObject *plan_launch(PlanObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyTuple_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "launch(stream, args, values: tuple)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(argv[2]);
    if (n > MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many values");
        return NULL;
    }
    Value values[MAX_ARGS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(argv[2], i);
        Value *v = &values[i];
        v->fits = 1;
        if (PyFloat_Check(x)) {
            v->kind = V_FLOAT;
            v->d = PyFloat_AS_DOUBLE(x);
        } else if (PyBool_Check(x)) {
            v->kind = V_BOOL;
            v->i = x == Py_True;
        } else if (PyLong_Check(x)) {
            int overflow;
            v->kind = V_INT;
            v->i = PyLong_AsLongLongAndOverflow(x, &overflow);
            if (overflow > 0) {      /* above int64: a pointer's bits, or too large */
                unsigned long long u = PyLong_AsUnsignedLongLong(x);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    v->fits = 0;
                } else {
                    v->kind = V_POINTER;
                    v->i = (long long)u;
                }
            } else if (overflow < 0)
                v->fits = 0;
        } else {
            PyErr_Format(PyExc_TypeError, "value %zd is a %s, not a number", i,
                         Py_TYPE(x)->tp_name);
            return NULL;
        }
    }
    return plan_run(self, argv[0], argv[1], values, n);
}

static PyMethodDef plan_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))plan_launch, METH_FASTCALL,
     "launch(stream, args, values): writes the values into their slots and launches; "
     "False (nothing launched) when a value does not fit its slot."},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileir.runtime._fastlaunch.Plan",
    .tp_doc = "The C half of a LaunchPlan: slot addresses and formats, tensor maps, the "
              "driver entry point.",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
};

/* ------------------------------------------------------------------------- */
/* Dispatcher                                                                 */
/* ------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    char kinds[MAX_ARGS + 1];
    Py_ssize_t nkinds;
    PyObject *plans;      /* dict: key -> LaunchPlan (with .native, a Plan or None) */
    PyObject *environ;    /* os.environ._data, or None */
    PyObject *keep;       /* set: the dtypes whose addresses filed keys hold */
    /* The last launch through `fast`: its key, the plan filed under it then and that
     * plan's native half.  A launch with the same key bytes looks the plan up by this
     * key object (its hash kept) and takes the native half when the plan is the same. */
    PyObject *last_key, *last_plan, *last_native;
} DispatcherObject;

static void dispatcher_dealloc(DispatcherObject *self) {
    Py_XDECREF(self->plans);
    Py_XDECREF(self->environ);
    Py_XDECREF(self->keep);
    Py_XDECREF(self->last_key);
    Py_XDECREF(self->last_plan);
    Py_XDECREF(self->last_native);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int dispatcher_init(DispatcherObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"kinds", "plans", "environ", NULL};
    const char *kinds;
    PyObject *plans, *environ;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO!O", names, &kinds, &PyDict_Type, &plans,
                                     &environ))
        return -1;
    size_t n = strlen(kinds);
    if (n > MAX_ARGS || strspn(kinds, "TIFBC") != n) {
        PyErr_Format(PyExc_ValueError, "kinds must be at most %d of T I F B C, got '%s'",
                     MAX_ARGS, kinds);
        return -1;
    }
    if (environ != Py_None && !PyDict_Check(environ)) {
        PyErr_SetString(PyExc_TypeError, "environ must be a dict or None");
        return -1;
    }
    memcpy(self->kinds, kinds, n + 1);
    self->nkinds = (Py_ssize_t)n;
    Py_XDECREF(self->keep);
    self->keep = PySet_New(NULL);
    if (!self->keep)
        return -1;
    Py_INCREF(plans);
    Py_INCREF(environ);
    Py_XDECREF(self->plans);
    Py_XDECREF(self->environ);
    self->plans = plans;
    self->environ = environ;
    return 0;
}

static int key_grid(KeyBuf *k, PyObject *grid) {
    if (PyLong_Check(grid)) {
        long long v = PyLong_AsLongLong(grid);
        if (v == -1 && PyErr_Occurred())
            return -1;
        return key_tag(k, 'g') < 0 ? -1 : key_i64(k, v);
    }
    if (!PyTuple_Check(grid)) {
        PyErr_SetString(PyExc_TypeError, "a fast-path grid is an int or a tuple of ints");
        return -1;
    }
    if (key_tag(k, 'G') < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(grid); i++) {
        PyObject *item = PyTuple_GET_ITEM(grid, i);
        if (!PyLong_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "a fast-path grid is an int or a tuple of ints");
            return -1;
        }
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (key_i64(k, v) < 0)
            return -1;
    }
    return key_tag(k, ')');
}

static int key_tensor(DispatcherObject *self, KeyBuf *k, PyObject *a, Value *v, int filing) {
    if (Py_TYPE(a) == dlpack_type) {
        int rc = key_dlpack(k, a, v);
        if (rc <= 0)
            return rc;
    }
    int direct = direct_type(Py_TYPE(a));
    PyObject *ptr = tensor_get(a, A_DATA_PTR, direct);
    if (!ptr)
        return -1;
    unsigned long long p = PyLong_AsUnsignedLongLong(ptr);
    Py_DECREF(ptr);
    if (p == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    PyObject *dtype = tensor_get(a, A_DTYPE, direct);
    if (!dtype)
        return -1;
    /* The key holds the dtype's address; the dtypes of filed keys are kept alive so
     * that no other object can come to live at it. */
    int bad = filing && PySet_Add(self->keep, dtype) < 0;
    int ok = !bad && key_tag(k, 'T') == 0 && key_ptr(k, dtype) == 0;
    Py_DECREF(dtype);
    if (!ok)
        return -1;
    PyObject *device = tensor_get(a, A_GET_DEVICE, direct);
    if (!device)
        return -1;
    long long d = PyLong_AsLongLong(device);
    Py_DECREF(device);
    if ((d == -1 && PyErr_Occurred()) || key_i64(k, d) < 0)
        return -1;
    PyObject *shape = tensor_get(a, A_SHAPE, direct);
    if (!shape)
        return -1;
    ok = key_ints(k, shape) == 0;
    Py_DECREF(shape);
    if (!ok)
        return -1;
    PyObject *stride = tensor_get(a, A_STRIDE, direct);
    if (!stride)
        return -1;
    ok = key_ints(k, stride) == 0;
    Py_DECREF(stride);
    if (!ok || key_tag(k, (char)(p & 15)) < 0)
        return -1;
    v->kind = V_POINTER;
    v->fits = 1;
    v->i = (long long)p;
    return 0;
}

/* The key bytes of a launch into `k` and its runtime values; the constants that are
 * not ints into `*consts` (a new list, or NULL when there are none).  -1 with an
 * exception when the arguments cannot be keyed (fast declines, key_of raises). */
static int fill_key(DispatcherObject *self, PyObject *grid, PyObject *args, KeyBuf *kb,
                    PyObject **consts_out, Value *values, Py_ssize_t *nvalues, int filing) {
    *consts_out = NULL;
    if (!PyTuple_Check(args) && !PyList_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "launch arguments must be a tuple or a list");
        return -1;
    }
    PyObject *seq = args;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != self->nkinds) {
        PyErr_SetString(PyExc_TypeError, "argument count differs from the dispatcher's");
        return -1;
    }
#define k (*kb)
    PyObject *consts = NULL;          /* constants that are not ints, kept as objects */
    int result = -1;
    *nvalues = 0;
    if (key_grid(&k, grid) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PySequence_Fast_GET_ITEM(seq, i);
        Value *v = &values[*nvalues];
        switch (self->kinds[i]) {
        case 'T':
            if (key_tensor(self, &k, a, v, filing) < 0)
                goto done;
            ++*nvalues;
            break;
        case 'I': {
            if (!PyLong_CheckExact(a)) {
                PyErr_SetString(PyExc_TypeError, "not an int");
                goto done;
            }
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(a, &overflow);
            if (x == -1 && PyErr_Occurred())
                goto done;
            /* the range picks the i32 or i64 slot (specialization._runtime_kind) */
            char range = overflow ? 2 : (x >= INT32_MIN && x <= INT32_MAX) ? 0 : 1;
            if (key_tag(&k, 'I') < 0 || key_tag(&k, range) < 0)
                goto done;
            v->kind = V_INT;
            v->fits = !overflow;
            v->i = x;
            ++*nvalues;
            break;
        }
        case 'F':
            if (!PyFloat_CheckExact(a)) {
                PyErr_SetString(PyExc_TypeError, "not a float");
                goto done;
            }
            if (key_tag(&k, 'F') < 0)
                goto done;
            v->kind = V_FLOAT;
            v->d = PyFloat_AS_DOUBLE(a);
            ++*nvalues;
            break;
        case 'B':
            if (!PyBool_Check(a)) {
                PyErr_SetString(PyExc_TypeError, "not a bool");
                goto done;
            }
            if (key_tag(&k, 'B') < 0)
                goto done;
            v->kind = V_BOOL;
            v->fits = 1;
            v->i = a == Py_True;
            ++*nvalues;
            break;
        default: {    /* 'C': a compile-time constant, compared by type and value */
            int overflow = 1;
            long long x = 0;
            if (PyLong_CheckExact(a)) {
                x = PyLong_AsLongLongAndOverflow(a, &overflow);
                if (x == -1 && PyErr_Occurred())
                    goto done;
            }
            if (!overflow) {
                if (key_tag(&k, 'c') < 0 || key_i64(&k, x) < 0)
                    goto done;
            } else {
                /* any other constant: by its typed key (specialization.typed_key: 1, 1.0
                   and True differ, -0.0 and 0.0 too, in tuples as well), else by its
                   type and value */
                PyObject *key = NULL;
                int failed;
                if (!consts && !(consts = PyList_New(0)))
                    goto done;
                if (const_key_fn && !(key = PyObject_CallOneArg(const_key_fn, a)))
                    goto done;
                failed = key_tag(&k, 'o') < 0 ||
                         (key ? PyList_Append(consts, key) < 0 :
                                PyList_Append(consts, (PyObject *)Py_TYPE(a)) < 0 ||
                                PyList_Append(consts, a) < 0);
                Py_XDECREF(key);
                if (failed)
                    goto done;
            }
        }
        }
    }
    result = 0;
    *consts_out = consts;
    consts = NULL;
done:
#undef k
    Py_XDECREF(consts);
    return result;
}

/* The key object of key bytes `k` and non-int constants `consts` (stolen): the bytes,
 * or a tuple of them and the constants. */
static PyObject *key_object(const KeyBuf *k, PyObject *consts) {
    PyObject *bytes = PyBytes_FromStringAndSize(k->data, k->size);
    if (!bytes || !consts) {
        Py_XDECREF(consts);
        return bytes;
    }
    PyObject *result = NULL;
    if (PyList_Insert(consts, 0, bytes) == 0)
        result = PyList_AsTuple(consts);
    Py_DECREF(bytes);
    Py_DECREF(consts);
    return result;
}

/* The key of a launch (a new reference) and its runtime values; NULL with an
 * exception when the arguments cannot be keyed. */
static PyObject *build_key(DispatcherObject *self, PyObject *grid, PyObject *args,
                           Value *values, Py_ssize_t *nvalues, int filing) {
    KeyBuf k;
    key_init(&k);
    PyObject *consts;
    PyObject *key = fill_key(self, grid, args, &k, &consts, values, nvalues, filing) < 0
        ? NULL : key_object(&k, consts);
    key_free(&k);
    return key;
}

static int knobs_quiet(DispatcherObject *self) {
    if (self->environ == Py_None)
        return 0;     /* no bytes environ to read: the checked path reads os.environ */
    PyObject *names[2] = {s_interpret, s_sync_launch};
    for (int i = 0; i < 2; i++) {
        PyObject *value = PyDict_GetItemWithError(self->environ, names[i]);
        if (!value) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (!PyBytes_Check(value))
            return 0;
        const char *s = PyBytes_AS_STRING(value);
        if (!(s[0] == 0 || !strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") ||
              !strcmp(s, "off")))
            return 0;
    }
    return 1;
}

static PyObject *dispatcher_key_of(DispatcherObject *self, PyObject *const *argv,
                                   Py_ssize_t argc) {
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "key_of(grid, args)");
        return NULL;
    }
    Value values[MAX_ARGS];
    Py_ssize_t nvalues;
    return build_key(self, argv[0], argv[1], values, &nvalues, 1);
}

/* The plan filed for a launch with key bytes `k` (no non-int constants) and its native
 * half, borrowed from the memo (or NULL, no exception, when there is none). */
static PyObject *memo_plan(DispatcherObject *self, const KeyBuf *k, PyObject **native) {
    PyObject *last = self->last_key;
    if (!last || PyBytes_GET_SIZE(last) != k->size ||
        memcmp(PyBytes_AS_STRING(last), k->data, k->size) != 0)
        return NULL;
    PyObject *plan = PyDict_GetItemWithError(self->plans, last);   /* borrowed */
    if (plan != self->last_plan) {
        PyErr_Clear();
        return NULL;
    }
    *native = self->last_native;
    return plan;
}

static PyObject *dispatcher_fast(DispatcherObject *self, PyObject *const *argv,
                                 Py_ssize_t argc) {
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "fast(stream, grid, args)");
        return NULL;
    }
    PyObject *stream = argv[0], *args = argv[2];
    Value values[MAX_ARGS];
    Py_ssize_t nvalues;
    KeyBuf k;
    key_init(&k);
    PyObject *consts, *native = NULL, *result = NULL;
    if (fill_key(self, argv[1], args, &k, &consts, values, &nvalues, 0) < 0) {
        PyErr_Clear();         /* not a launch seen before: the checked path decides */
        key_free(&k);
        Py_RETURN_FALSE;
    }
    PyObject *plan = consts ? NULL : memo_plan(self, &k, &native);     /* borrowed */
    if (plan) {
        Py_INCREF(plan);
        Py_INCREF(native);
    } else {
        PyObject *key = key_object(&k, consts);
        plan = key ? PyDict_GetItemWithError(self->plans, key) : NULL;
        if (!plan) {
            Py_XDECREF(key);
            PyErr_Clear();
            key_free(&k);
            Py_RETURN_FALSE;
        }
        Py_INCREF(plan);
        native = PyObject_GetAttr(plan, s_native);
        if (native && PyBytes_Check(key)) {      /* remember it (keys with constants: no) */
            Py_XSETREF(self->last_key, key);
            key = NULL;
            Py_INCREF(plan);
            Py_XSETREF(self->last_plan, plan);
            Py_INCREF(native);
            Py_XSETREF(self->last_native, native);
        }
        Py_XDECREF(key);
    }
    key_free(&k);
    int quiet = native ? knobs_quiet(self) : -1;
    if (quiet <= 0) {
        PyErr_Clear();
        Py_XDECREF(native);
        Py_DECREF(plan);
        Py_RETURN_FALSE;
    }
    if (Py_IS_TYPE(native, &PlanType))
        result = plan_run((PlanObject *)native, stream, args, values, nvalues);
    else {                /* a plan without its C half: the Python launch */
        PyObject *launch = PyObject_GetAttr(plan, s_launch);
        result = launch ? python_launch(launch, stream, args, values, nvalues) : NULL;
        Py_XDECREF(launch);
    }
    Py_DECREF(native);
    Py_DECREF(plan);
    return result;
}

static PyMethodDef dispatcher_methods[] = {
    {"fast", (PyCFunction)(void (*)(void))dispatcher_fast, METH_FASTCALL,
     "fast(stream, grid, args): launches through a known plan, or returns False."},
    {"key_of", (PyCFunction)(void (*)(void))dispatcher_key_of, METH_FASTCALL,
     "key_of(grid, args): the key a plan for these arguments is filed under."},
    {NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tileir.runtime._fastlaunch.Dispatcher",
    .tp_doc = "The launch fast path of one kernel for one kinds string.",
    .tp_basicsize = sizeof(DispatcherObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)dispatcher_init,
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_methods = dispatcher_methods,
};

/* ------------------------------------------------------------------------- */
/* ------------------------------------------------------------------------- */
/* tileir.launch                                                              */
/* ------------------------------------------------------------------------- */
static PyObject *checked_launch;     /* kernel.py's launch: the checked path */
static PyObject *s_fast_attr;        /* "_fast" */
static PyObject *s_fast_pdl_attr;    /* "_fast_pdl" */
static PyObject *s_pdl_keyword;      /* "programmatic_dependent_launch" */

/* The kernel attribute holding the fast path for a call with these keywords: `_fast`
 * for none, `_fast` or `_fast_pdl` for programmatic_dependent_launch=False or True
 * (exactly the bools); NULL (the checked path) for anything else. */
static PyObject *fast_attr_for(PyObject *kwnames, PyObject *const *kwvalues) {
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)
        return s_fast_attr;
    if (PyTuple_GET_SIZE(kwnames) != 1)
        return NULL;
    PyObject *name = PyTuple_GET_ITEM(kwnames, 0);
    if (name != s_pdl_keyword &&
        !(PyUnicode_Check(name) && PyUnicode_Compare(name, s_pdl_keyword) == 0))
        return NULL;
    if (kwvalues[0] == Py_True)
        return s_fast_pdl_attr;
    return kwvalues[0] == Py_False ? s_fast_attr : NULL;
}

/* `launch(stream, grid, kernel, args, *, programmatic_dependent_launch=False)`: the
 * kernel's fast path for such launches (`kernel._fast` or `kernel._fast_pdl`, its
 * latest dispatcher's `fast`, called here directly when it is the C one), else the
 * checked path, which explains anything the fast path declines; other keywords and
 * arities go to the checked path as given. */
static PyObject *module_launch(PyObject *module, PyObject *const *argv, size_t nargsf,
                               PyObject *kwnames) {
    (void)module;
    Py_ssize_t argc = PyVectorcall_NARGS(nargsf);
    if (!checked_launch) {
        PyErr_SetString(PyExc_RuntimeError, "tileir's launch is not set up");
        return NULL;
    }
    PyObject *attr = argc == 4 ? fast_attr_for(kwnames, argv + argc) : NULL;
    if (PyErr_Occurred())
        return NULL;
    if (attr != NULL) {
        PyObject *fast = PyObject_GetAttr(argv[2], attr);
        if (fast && fast != Py_None) {
            PyObject *call[3] = {argv[0], argv[1], argv[3]}, *r;
            PyObject *self = PyCFunction_Check(fast) ? PyCFunction_GET_SELF(fast) : NULL;
            if (self && Py_IS_TYPE(self, &DispatcherType))
                r = dispatcher_fast((DispatcherObject *)self, call, 3);
            else
                r = PyObject_Vectorcall(fast, call, 3, NULL);
            Py_DECREF(fast);
            if (!r)
                return NULL;
            int done = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (done < 0)
                return NULL;
            if (done)
                Py_RETURN_NONE;
        } else {
            Py_XDECREF(fast);
            PyErr_Clear();
        }
    }
    return PyObject_Vectorcall(checked_launch, argv, nargsf, kwnames);
}

/* Stores the callable `fn` in `*slot` (a module-level reference); `name` is the setter's,
   for the error. */
static PyObject *set_callable(PyObject **slot, PyObject *fn, const char *name) {
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "%s takes a callable", name);
        return NULL;
    }
    Py_INCREF(fn);
    Py_XSETREF(*slot, fn);
    Py_RETURN_NONE;
}

static PyObject *set_checked_launch(PyObject *module, PyObject *fn) {
    (void)module;
    return set_callable(&checked_launch, fn, "set_checked_launch");
}

static PyObject *set_const_key(PyObject *module, PyObject *fn) {
    (void)module;
    return set_callable(&const_key_fn, fn, "set_const_key");
}

static PyMethodDef module_methods[] = {
    {"set_const_key", set_const_key, METH_O,
     "set_const_key(fn): the key of a Constant argument that is not an int (fn(value))."},
    {"launch", (PyCFunction)(void (*)(void))module_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(stream, grid, kernel, kernel_args, /, *, programmatic_dependent_launch=False)"
     "\n--\n\n"
     "Runs `kernel` over `grid` with `kernel_args` (cuTile's `launch`): through the "
     "kernel's fast path when an earlier launch prepared one for these arguments, else "
     "checked in full (tileir.kernel.launch_checked); programmatic_dependent_launch=True "
     "lets the kernel begin before the previous one in the stream ends (its "
     "grid_dependency_control_wait orders it)."},
    {"set_checked_launch", set_checked_launch, METH_O,
     "set_checked_launch(fn): what `launch` calls for everything the fast path declines."},
    {"use_dlpack_exchange", use_dlpack_exchange, METH_O,
     "use_dlpack_exchange(torch.Tensor): keys describe tensors of exactly this type "
     "through its DLPack C exchange API (__dlpack_c_exchange_api__); whether it has one."},
    {"use_tensor_type", use_tensor_type, METH_O,
     "use_tensor_type(torch.Tensor): keys read its tensors' data_ptr, dtype, get_device, "
     "shape and stride through the C functions behind its descriptors; whether they can."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastlaunch",
    "The launch fast path in C (see runtime/dispatch.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&DispatcherType) < 0)
        return NULL;
    empty_tuple = PyTuple_New(0);
    s_fast_attr = PyUnicode_InternFromString("_fast");
    s_fast_pdl_attr = PyUnicode_InternFromString("_fast_pdl");
    s_pdl_keyword = PyUnicode_InternFromString("programmatic_dependent_launch");
    if (!s_fast_attr || !s_fast_pdl_attr || !s_pdl_keyword)
        return NULL;
    acc_name[A_DATA_PTR] = PyUnicode_InternFromString("data_ptr");
    acc_name[A_DTYPE] = PyUnicode_InternFromString("dtype");
    acc_name[A_GET_DEVICE] = PyUnicode_InternFromString("get_device");
    acc_name[A_SHAPE] = PyUnicode_InternFromString("shape");
    acc_name[A_STRIDE] = PyUnicode_InternFromString("stride");
    for (int a = 0; a < N_ACCESSORS; a++)
        if (!acc_name[a])
            return NULL;
    if (!empty_tuple)
        return NULL;
    s_dlpack_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    if (!s_dlpack_api)
        return NULL;
    s_native = PyUnicode_InternFromString("native");
    s_launch = PyUnicode_InternFromString("launch");
    s_device_index = PyUnicode_InternFromString("device_index");
    s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    s_interpret = PyBytes_FromString("TILEIR_INTERPRET");
    s_sync_launch = PyBytes_FromString("TILEIR_SYNC_LAUNCH");
    if (!s_native || !s_launch ||
        !s_interpret || !s_sync_launch || !s_device_index || !s_cuda_stream)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&PlanType);
    Py_INCREF(&DispatcherType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0 ||
        PyModule_AddObject(m, "Dispatcher", (PyObject *)&DispatcherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_ARGS", MAX_ARGS);
    return m;
}
