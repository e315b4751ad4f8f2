/* cg_args.c -- one C call's argument struct from Python objects (cg_args.h). */
#include "cg_args.h"

#include <limits.h>
#include <string.h>

static PyObject *s_data_ptr, *s_dtype, *s_shape, *s_stride, *s_device, *s_contiguous;
static PyObject *torch_dt[CGPY_NDTYPES]; /* owned: torch.float32, float64, bfloat16, float16 */
static PyObject *torch_idx[2];           /* owned: torch.int32, torch.int64 (cu_seqlens) */

static int intern(void) {
    if (s_data_ptr) return 0;
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_device = PyUnicode_InternFromString("device");
    s_contiguous = PyUnicode_InternFromString("contiguous");
    return s_data_ptr && s_dtype && s_shape && s_stride && s_device && s_contiguous ? 0 : -1;
}

void cgpy_set_torch_dtypes(PyObject *const dts[CGPY_NDTYPES]) {
    for (int k = 0; k < CGPY_NDTYPES; k++) {
        Py_XINCREF(dts[k]);
        Py_XSETREF(torch_dt[k], dts[k]);
    }
}

void cgpy_set_torch_index_dtypes(PyObject *i32, PyObject *i64) {
    PyObject *dts[2] = {i32, i64};
    for (int k = 0; k < 2; k++) {
        Py_XINCREF(dts[k]);
        Py_XSETREF(torch_idx[k], dts[k]);
    }
}

/* The ops, read from the public header on first use (with the GIL held). */
static cgpy_opdesc ops[16];
static int nops = -1;

static int load_ops(void) {
    if (nops >= 0) return 0;
    const int n = cg_op_count();
    if (n > (int)(sizeof ops / sizeof ops[0])) {
        PyErr_Format(PyExc_RuntimeError, "chunkgen._C: the library has %d ops, this module takes %d", n,
                     (int)(sizeof ops / sizeof ops[0]));
        return -1;
    }
    for (int o = 0; o < n; o++) {
        cgpy_opdesc *d = &ops[o];
        cg_op_info in = CG__INIT(cg_op_info);
        if (cg_op_describe(NULL, (cg_op)o, &in) != CG_OK || !cgov_ok((cg_op)o) ||
            in.ntensors + in.has_varlen > CGPY_MAXT) {
            PyErr_Format(PyExc_RuntimeError, "chunkgen._C: op %d does not fit this module", o);
            return -1;
        }
        d->op = (cg_op)o;
        d->name = in.name;
        d->nt = in.ntensors;
        d->has_varlen = in.has_varlen;
        memcpy(d->sym_from, in.sym_from, sizeof d->sym_from);
        d->nin = 0;
        for (int i = 0; i < in.ntensors + in.has_varlen; i++) {
            d->t[i] = (cg_tensor_info)CG__INIT(cg_tensor_info);
            if (cg_op_tensor_info(NULL, (cg_op)o, i, &d->t[i]) != CG_OK) {
                PyErr_Format(PyExc_RuntimeError, "chunkgen._C: tensor %d of op %s", i, in.name);
                return -1;
            }
            if (i < in.ntensors && !d->t[i].output) d->nin++;
        }
    }
    nops = n;
    return 0;
}

int cgpy_nops(void) { return load_ops() ? -1 : nops; }

const cgpy_opdesc *cgpy_op_at(int op) {
    if (load_ops()) return NULL;
    if (op < 0 || op >= nops) {
        PyErr_Format(PyExc_ValueError, "op: %d but expected an op index in [0, %d)", op, nops);
        return NULL;
    }
    return intern() ? NULL : &ops[op];
}

const cgpy_opdesc *cgpy_op(PyObject *o) {
    long op = PyLong_AsLong(o);
    if (op == -1 && PyErr_Occurred()) return NULL;
    if (op < INT_MIN || op > INT_MAX) op = -1;
    return cgpy_op_at((int)op);
}

int cgpy_ninputs(const cgpy_opdesc *d) { return d->nin; }

/* Index of the tensor named name in d, or -1. */
static int tensor_index(const cgpy_opdesc *d, const char *name) {
    for (int i = 0; name && i < d->nt; i++)
        if (!strcmp(d->t[i].name, name)) return i;
    return -1;
}

void cgpy_call_init(cgpy_call *c, const cgpy_opdesc *d) {
    memset(c, 0, sizeof *c);
    c->d = d;
}

void cgpy_call_release(cgpy_call *c) {
    for (int i = 0; i < CGPY_MAXT; i++)
        if (c->got[i]) PyBuffer_Release(&c->bufs[i]);
    for (int i = 0; i < c->nkeep; i++) Py_DECREF(c->keep[i]);
    if (c->cu_got) PyBuffer_Release(&c->cu_buf);
    c->cu_got = 0;
    memset(c->got, 0, sizeof c->got);
    c->nkeep = 0;
}

int cgpy_keep(cgpy_call *c, PyObject *o) {
    if (!o) return -1;
    if (c->nkeep == (int)(sizeof c->keep / sizeof c->keep[0])) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_RuntimeError, "chunkgen._C: too many temporaries in one call");
        return -1;
    }
    c->keep[c->nkeep++] = o;
    return 0;
}

void cgpy_set_flag(cgpy_call *c, int flag) { cgov_set_flag(c->d->op, &c->args, flag); }

int cgpy_set_reals(cgpy_call *c, PyObject *o) {
    if (o == Py_None) return 0;
    const int n = cgov_nreals(c->d->op);
    PyObject *seq = PySequence_Fast(o, "reals: expected a tuple of floats (the op's real arguments) or None");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "reals: %zd values but %s takes %d real argument(s)%s%s",
                     PySequence_Fast_GET_SIZE(seq), c->d->name, n, n ? ", the first " : "",
                     n ? cgov_real_name(c->d->op, 0) : "");
        Py_DECREF(seq);
        return -1;
    }
    double r[CG_OP_MAX_SCALARS] = {0};
    for (int k = 0; k < n; k++) {
        r[k] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, k));
        if (r[k] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    cgov_set_reals(c->d->op, &c->args, r, n);
    return 0;
}

/* ------------------------------------------------------------ reading */

static int bad(const char *name, const char *what) {
    PyErr_Format(PyExc_ValueError, "%s: %s", name, what);
    return -1;
}

static int too_many_dims(const char *name, Py_ssize_t nd) {
    PyErr_Format(PyExc_ValueError, "%s: %zd dimensions but expected at most %d", name, nd, CG_MAX_DIMS);
    return -1;
}

/* n int64 values from a tuple (or torch.Size) of Python ints; one beyond 64 bits is a
 * ValueError naming the tensor (the library checks the rest). */
static int int64s(PyObject *o, int64_t *out, Py_ssize_t n, const char *name, const char *what) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != n) return bad(name, "shape/strides must be tuples of ndim ints");
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: %s[%zd] = %S out of range (expected a signed 64-bit value)", name, what,
                         i, PyTuple_GET_ITEM(o, i));
            return -1;
        }
    }
    return 0;
}

/* strides None (descriptors only): contiguous, which the library computes (and checks for
 * overflow) from the shape: all-zero strides. */
static int read_shape_strides(PyObject *shape, PyObject *strides, cg_tensor *t, const char *name) {
    if (!PyTuple_Check(shape)) return bad(name, "shape must be a tuple");
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > CG_MAX_DIMS) return too_many_dims(name, nd);
    t->ndim = (int)nd;
    if (int64s(shape, t->shape, nd, name, "shape")) return -1;
    if (strides == Py_None) {
        memset(t->stride, 0, sizeof t->stride);
        return 0;
    }
    return int64s(strides, t->stride, nd, name, "stride");
}

static int read_descriptor(PyObject *o, cg_tensor *t, const char *name) {
    if (PyTuple_GET_SIZE(o) != 4) return bad(name, "expected a (ptr, dtype, shape, strides) descriptor");
    t->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(o, 0));
    if (PyErr_Occurred()) return -1;
    long dt = PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
    if (dt == -1 && PyErr_Occurred()) return -1;
    t->dtype = (cg_dtype)dt;
    return read_shape_strides(PyTuple_GET_ITEM(o, 2), PyTuple_GET_ITEM(o, 3), t, name);
}

/* t's data, shape and strides (in elements) from a buffer of t's dtype. */
static int buffer_view(const Py_buffer *buf, cg_tensor *t, const char *name) {
    if (buf->ndim > CG_MAX_DIMS) return too_many_dims(name, buf->ndim);
    t->data = buf->buf;
    t->ndim = buf->ndim;
    for (int i = 0; i < buf->ndim; i++) {
        t->shape[i] = buf->shape[i];
        if (buf->strides[i] % buf->itemsize) return bad(name, "strides must be multiples of the element size");
        t->stride[i] = buf->strides[i] / buf->itemsize;
    }
    return 0;
}

static int torch_slot_dtype(PyObject *dt, const char *name);

static int read_buffer(PyObject *o, int output, int index, cg_tensor *t, Py_buffer *buf, int *got, const char *name) {
    if (PyObject_GetBuffer(o, buf, output ? PyBUF_RECORDS : PyBUF_RECORDS_RO) < 0) return -1;
    *got = 1;
    const char *fmt = buf->format ? buf->format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
    const int integer = fmt[0] && !fmt[1] && strchr("ilq", fmt[0]);
    if (index) { /* a decode step's slot indices (CG_TENSOR_INDEX) */
        if (integer && (buf->itemsize == 4 || buf->itemsize == 8)) t->dtype = buf->itemsize == 4 ? CG_I32 : CG_I64;
        else return bad(name, "dtype must be int32 or int64 (slot indices)");
        return buffer_view(buf, t, name);
    }
    if (!strcmp(fmt, "f") && buf->itemsize == 4) t->dtype = CG_F32;
    else if (!strcmp(fmt, "d") && buf->itemsize == 8) t->dtype = CG_F64;
    else if (!strcmp(fmt, "e") && buf->itemsize == 2) t->dtype = CG_F16;
    else return bad(name, "dtype must be float32, float64 or float16 (bfloat16: a descriptor)");
    return buffer_view(buf, t, name);
}

/* The cg_dtype of a torch dtype object; -1 with ValueError set. */
static int torch_dtype(PyObject *dt, const char *name) {
    for (int k = 0; dt && k < CGPY_NDTYPES; k++)
        if (dt == torch_dt[k]) return k;
    if (dt)
        PyErr_Format(PyExc_ValueError,
                     "%s: dtype %S but expected torch.float32, torch.float64, torch.bfloat16 or torch.float16", name,
                     dt);
    return -1;
}

/* A torch.Tensor-like object's pointer, dtype (by dtype_of: the cg_dtype, or -1 with
 * ValueError set), shape and strides. */
static int read_tensor_with(PyObject *o, cg_tensor *t, const char *name, int (*dtype_of)(PyObject *, const char *)) {
    PyObject *ptr = PyObject_CallMethodNoArgs(o, s_data_ptr);
    PyObject *dt = ptr ? PyObject_GetAttr(o, s_dtype) : NULL;
    PyObject *shape = dt ? PyObject_GetAttr(o, s_shape) : NULL;
    PyObject *strides = shape ? PyObject_CallMethodNoArgs(o, s_stride) : NULL;
    int r = -1;
    if (strides) {
        int dtype = dtype_of(dt, name);
        t->data = PyLong_AsVoidPtr(ptr);
        if (dtype >= 0 && !PyErr_Occurred()) {
            t->dtype = (cg_dtype)dtype;
            r = read_shape_strides(shape, strides, t, name);
        }
    }
    Py_XDECREF(ptr);
    Py_XDECREF(dt);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return r;
}

static int read_tensor_like(PyObject *o, cg_tensor *t, const char *name) {
    return read_tensor_with(o, t, name, torch_dtype);
}

int cgpy_read(cgpy_call *c, int i, PyObject *o) {
    const cg_tensor_info *td = &c->d->t[i];
    cg_tensor *t = CGPY_T(c, i);
    memset(t, 0, sizeof *t);
    int r;
    if (o == Py_None) return 0;
    if (PyTuple_Check(o)) {
        r = read_descriptor(o, t, td->name);
        if (!r && PyTuple_GET_ITEM(o, 3) == Py_None) return 0; /* contiguous by its owner's word */
    } else if (PyObject_CheckBuffer(o)) /* a tensor written in place (a state cache) is asked for writable */
        r = read_buffer(o, td->output || (td->flags & CG_TENSOR_INPLACE), (td->flags & CG_TENSOR_INDEX) != 0, t,
                        &c->bufs[i], &c->got[i], td->name);
    else
        r = (td->flags & CG_TENSOR_INDEX) ? read_tensor_with(o, t, td->name, torch_slot_dtype)
                                          : read_tensor_like(o, t, td->name);
    if (r) return -1;
    /* The C API reads all-zero strides as "contiguous": a broadcast view must be copied
     * by the caller (the torch path does, read_torch_input; numpy's in Python). */
    int all_zero = t->ndim > 0, big = 0;
    for (int k = 0; k < t->ndim; k++) {
        all_zero &= t->stride[k] == 0;
        big |= t->shape[k] > 1;
    }
    if (all_zero && big) return bad(td->name, "all strides are zero (a broadcast view); pass a copy");
    return 0;
}

/* ------------------------------------------------------- cu_seqlens */

static int index_dtype_error(const char *name, PyObject *dt) {
    PyErr_Format(PyExc_ValueError, "%s: dtype %S but expected int32 or int64 (the sequences' offsets)", name, dt);
    return -1;
}

static int read_cu_buffer(cgpy_call *c, PyObject *o, cg_tensor *t, const char *name) {
    if (PyObject_GetBuffer(o, &c->cu_buf, PyBUF_RECORDS_RO) < 0) return -1;
    c->cu_got = 1;
    const Py_buffer *b = &c->cu_buf;
    const char *fmt = b->format ? b->format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
    int integer = fmt[0] && !fmt[1] && strchr("ilq", fmt[0]);
    if (integer && b->itemsize == 4) t->dtype = CG_I32;
    else if (integer && b->itemsize == 8) t->dtype = CG_I64;
    else {
        PyObject *f = PyUnicode_FromString(fmt);
        if (f) index_dtype_error(name, f);
        Py_XDECREF(f);
        return -1;
    }
    return buffer_view(b, t, name);
}

/* The cg_dtype of torch.int32 / torch.int64 for a decode step's slot indices; -1 with ValueError set. */
static int torch_slot_dtype(PyObject *dt, const char *name) {
    if (dt && (dt == torch_idx[0] || dt == torch_idx[1])) return dt == torch_idx[0] ? CG_I32 : CG_I64;
    if (dt)
        PyErr_Format(PyExc_ValueError, "%s: dtype %S but expected torch.int32 or torch.int64 (slot indices)", name, dt);
    return -1;
}

/* The cg_dtype of torch.int32 / torch.int64; -1 with ValueError set. */
static int torch_index_dtype(PyObject *dt, const char *name) {
    if (dt && (dt == torch_idx[0] || dt == torch_idx[1])) return dt == torch_idx[0] ? CG_I32 : CG_I64;
    return dt ? index_dtype_error(name, dt) : -1;
}

/* A torch cu_seqlens whose data_ptr() is 0 is given, never absent (a NULL pointer is the C
 * API's "absent"): with no elements it gets an aligned placeholder address (never read),
 * so that the library refuses its shape with its own message, as for numpy and JAX; with
 * elements it has no data on the host or a device (the meta device): ValueError. */
static int cu_without_data(PyObject *o, cg_tensor *t, const char *name) {
    static int64_t placeholder;
    for (int k = 0; k < t->ndim; k++)
        if (t->shape[k] == 0) {
            t->data = &placeholder;
            return 0;
        }
    PyObject *dev = PyObject_GetAttr(o, s_device);
    if (dev)
        PyErr_Format(PyExc_ValueError,
                     "%s: on %S, without data, but expected the offsets in memory (on the inputs' device)", name, dev);
    Py_XDECREF(dev);
    return -1;
}

int cgpy_read_cu(cgpy_call *c, PyObject *o) {
    const cg_tensor_info *td = &c->d->t[c->d->nt];
    cg_tensor *t = CGPY_T(c, c->d->nt);
    if (!c->d->has_varlen) return 0;
    memset(t, 0, sizeof *t);
    if (o == Py_None) return 0;
    if (intern()) return -1;
    if (PyTuple_Check(o)) return read_descriptor(o, t, td->name);
    if (PyObject_CheckBuffer(o)) return read_cu_buffer(c, o, t, td->name);
    if (read_tensor_with(o, t, td->name, torch_index_dtype)) return -1;
    return t->data ? 0 : cu_without_data(o, t, td->name);
}

int64_t cgpy_nseq(const cgpy_call *c) {
    const cg_tensor *t = c->d->has_varlen ? cg_op_args_tensor(c->d->op, (void *)&c->args, c->d->nt) : NULL;
    return t && t->data && t->ndim == 1 && t->shape[0] > 1 ? t->shape[0] - 1 : 0;
}

/* ------------------------------------------------------- torch tensors */

static PyObject *s_is_cpu;

/* The torch front end's checks of input i (o, its dtype and shape objects) against the
 * first input f: a dtype chunkgen maps (their mix is the library's to check), device,
 * rank, no empty dimension. Returns the cg_dtype, -1 with ValueError set. */
static int check_one(const cgpy_opdesc *d, int i, PyObject *o, PyObject *dt, PyObject *shape, PyObject *f, int f_cpu) {
    const char *name = d->t[i].name, *fname = d->t[0].name;
    int code = (d->t[i].flags & CG_TENSOR_INDEX) ? torch_slot_dtype(dt, name) : torch_dtype(dt, name);
    if (code < 0) return -1;
    if (o != f) {
        /* both on the CPU (a cheap property), else the devices compared */
        int same = 0;
        if (f_cpu) {
            PyObject *c1 = PyObject_GetAttr(o, s_is_cpu);
            same = c1 == Py_True;
            Py_XDECREF(c1);
        }
        if (!same) {
            PyErr_Clear();
            PyObject *dev = PyObject_GetAttr(o, s_device), *fdev = dev ? PyObject_GetAttr(f, s_device) : NULL;
            same = fdev ? PyObject_RichCompareBool(dev, fdev, Py_EQ) : -1;
            if (same == 0) PyErr_Format(PyExc_ValueError, "%s: on %S but expected %S like %s", name, dev, fdev, fname);
            Py_XDECREF(dev);
            Py_XDECREF(fdev);
            if (same <= 0) return -1;
        }
    }
    if (!PyTuple_Check(shape)) return bad(name, "shape is not a tuple");
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > CG_MAX_DIMS) return too_many_dims(name, nd);
    for (Py_ssize_t k = 0; k < nd; k++) {
        int zero = PyObject_Not(PyTuple_GET_ITEM(shape, k)); /* (a symbolic size may not say) */
        if (zero < 0) PyErr_Clear();
        if (zero > 0) {
            PyObject *tup = PySequence_Tuple(shape);
            if (tup)
                PyErr_Format(PyExc_ValueError, "%s: shape %R has no elements (expected every dimension >= 1)", name,
                             tup);
            Py_XDECREF(tup);
            return -1;
        }
    }
    return code;
}

/* Whether the first input is on the CPU (is_cpu; 0 when it cannot say). */
static int first_on_cpu(PyObject *f) {
    PyObject *c = PyObject_GetAttr(f, s_is_cpu);
    if (!c) PyErr_Clear();
    Py_XDECREF(c);
    return c == Py_True;
}

static int inputs_tuple(const cgpy_opdesc *d, PyObject *ins) {
    int nin = cgpy_ninputs(d);
    if (!PyTuple_Check(ins) || PyTuple_GET_SIZE(ins) != nin) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of its %d inputs", d->name, nin);
        return -1;
    }
    if (PyTuple_GET_ITEM(ins, 0) == Py_None) return bad(d->t[0].name, "None but expected a tensor");
    if (!s_is_cpu && !(s_is_cpu = PyUnicode_InternFromString("is_cpu"))) return -1;
    return intern();
}

int cgpy_check_tensors(const cgpy_opdesc *d, PyObject *ins, int *dt_out) {
    if (inputs_tuple(d, ins)) return -1;
    PyObject *f = PyTuple_GET_ITEM(ins, 0);
    int r = 0, f_cpu = first_on_cpu(f), dts[CGPY_MAXT];
    for (int i = 0; i < d->nt; i++) dts[i] = -1;
    for (int i = 0; r >= 0 && i < PyTuple_GET_SIZE(ins); i++) {
        PyObject *o = PyTuple_GET_ITEM(ins, i);
        if (o == Py_None) continue;
        PyObject *dt = PyObject_GetAttr(o, s_dtype), *shape = dt ? PyObject_GetAttr(o, s_shape) : NULL;
        r = dts[i] = shape ? check_one(d, i, o, dt, shape, f, f_cpu) : -1;
        Py_XDECREF(dt);
        Py_XDECREF(shape);
    }
    if (r < 0) return -1;
    if (dt_out) memcpy(dt_out, dts, sizeof dts);
    return 0;
}

/* Whether the C API cannot take these strides: the innermost is not 1 (on a dimension
 * longer than 1), or all are zero on more than one element. */
static int needs_copy(const cg_tensor *t) {
    if (t->ndim == 0) return 0;
    int64_t numel = 1, any = 0;
    for (int k = 0; k < t->ndim; k++) numel *= t->shape[k], any |= t->stride[k];
    return (t->shape[t->ndim - 1] > 1 && t->stride[t->ndim - 1] != 1) || (!any && numel > 1);
}

/* Torch input i: checked, read (one pass over its attributes). One the C API cannot take
 * as it is is left for cgpy_copy_pending (after the library checked the call): described
 * as contiguous (all-zero strides), as its copy will be. */
static int read_torch_input(cgpy_call *c, int i, PyObject *o, PyObject *f, int f_cpu) {
    const char *name = c->d->t[i].name;
    cg_tensor *t = CGPY_T(c, i);
    PyObject *dt = PyObject_GetAttr(o, s_dtype), *shape = dt ? PyObject_GetAttr(o, s_shape) : NULL;
    PyObject *st = NULL, *ptr = NULL;
    int r = -1, code = -1;
    if (!shape || (code = check_one(c->d, i, o, dt, shape, f, f_cpu)) < 0 ||
        !(st = PyObject_CallMethodNoArgs(o, s_stride)) || read_shape_strides(shape, st, t, name))
        goto out;
    t->dtype = (cg_dtype)code;
    if (needs_copy(t) && (c->d->t[i].flags & CG_TENSOR_INPLACE)) { /* a copy would take the call's writes */
        PyErr_Format(PyExc_ValueError,
                     "%s: written in place, but its strides need a copy (expected the last "
                     "dimension contiguous, not a broadcast view)",
                     name);
        goto out;
    }
    if (needs_copy(t)) {
        c->pending[i] = o; /* (borrowed: the inputs tuple outlives the call) */
        memset(t->stride, 0, sizeof t->stride);
    }
    if ((ptr = PyObject_CallMethodNoArgs(o, s_data_ptr))) {
        t->data = PyLong_AsVoidPtr(ptr);
        r = PyErr_Occurred() ? -1 : 0;
    }
out:
    Py_XDECREF(dt);
    Py_XDECREF(shape);
    Py_XDECREF(st);
    Py_XDECREF(ptr);
    return r;
}

int cgpy_read_inputs(cgpy_call *c, PyObject *ins) {
    const cgpy_opdesc *d = c->d;
    int nin = cgpy_ninputs(d);
    if (!PyTuple_Check(ins) || PyTuple_GET_SIZE(ins) != nin) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of its %d inputs", d->name, nin);
        return -1;
    }
    PyObject *f = PyTuple_GET_ITEM(ins, 0);
    if (f == Py_None || PyTuple_Check(f) || PyObject_CheckBuffer(f)) {
        for (int i = 0; i < nin; i++)
            if (cgpy_read(c, i, PyTuple_GET_ITEM(ins, i))) return -1;
        return 0;
    }
    if (inputs_tuple(d, ins)) return -1;
    int r = 0, f_cpu = first_on_cpu(f);
    for (int i = 0; r == 0 && i < nin; i++) {
        PyObject *o = PyTuple_GET_ITEM(ins, i);
        if (o == Py_None) memset(CGPY_T(c, i), 0, sizeof(cg_tensor));
        else r = read_torch_input(c, i, o, f, f_cpu);
    }
    return r;
}

int cgpy_copy_pending(cgpy_call *c) {
    for (int i = 0; i < CGPY_MAXT; i++) {
        if (!c->pending[i]) continue;
        PyObject *copy = PyObject_CallMethodNoArgs(c->pending[i], s_contiguous);
        c->pending[i] = NULL;
        if (cgpy_keep(c, copy)) return -1;
        PyObject *ptr = PyObject_CallMethodNoArgs(copy, s_data_ptr);
        if (!ptr) return -1;
        CGPY_T(c, i)->data = PyLong_AsVoidPtr(ptr); /* strides: all zero, contiguous */
        Py_DECREF(ptr);
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

int cgpy_set_output(cgpy_call *c, int i, PyObject *out, cg_dtype dtype, const int64_t *shape, int ndim) {
    if (PyTuple_Check(out)) return cgpy_read(c, i, out);
    cg_tensor *t = CGPY_T(c, i);
    memset(t, 0, sizeof *t); /* all-zero strides: contiguous */
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) numel *= t->shape[k] = shape[k];
    if (PyObject_CheckBuffer(out)) {
        /* no format asked: numpy exports none for ml_dtypes' bfloat16 */
        if (PyObject_GetBuffer(out, &c->bufs[i], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
        c->got[i] = 1;
        if (c->bufs[i].len != (Py_ssize_t)(numel * (int64_t)cg_dtype_size(dtype)))
            return bad(c->d->t[i].name, "the allocator's array has the wrong size for its shape and dtype");
        t->data = c->bufs[i].buf;
        return 0;
    }
    PyObject *ptr = PyObject_CallMethodNoArgs(out, s_data_ptr);
    if (ptr) t->data = PyLong_AsVoidPtr(ptr);
    Py_XDECREF(ptr);
    return PyErr_Occurred() ? -1 : 0;
}

/* ------------------------------------------------------- output shapes */

/* Whether the call is grouped (the groupable inputs have their G dimension) given the
 * inputs' ranks; 1 for ops without groupable tensors. */
static int grouped_of(const cgpy_opdesc *d, const int in_ndim[CGPY_MAXT]) {
    for (int i = 0; i < d->nt; i++) {
        const cg_tensor_info *td = &d->t[i];
        if (td->output || td->optional || !(td->flags & CG_TENSOR_GROUPABLE)) continue;
        return in_ndim[i] != td->ndim - 1; /* as the library: grouped unless G is left out */
    }
    return 1;
}

int cgpy_shape_recipe(const cgpy_opdesc *d, int i, int hm, const int in_ndim[CGPY_MAXT], int src[4]) {
    const cg_layout layout = hm ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    const int grouped = grouped_of(d, in_ndim);
    cg_sym syms[CG_MAX_DIMS];
    int n = cg_op_tensor_dims(d->op, i, layout, grouped, syms);
    for (int k = 0; k < n; k++) {
        /* the symbol's value comes from the input the op table says (cg_op_info.sym_from);
         * an extent of 1 when that input lacks the dimension */
        const int j = d->sym_from[syms[k]];
        cg_sym sj[CG_MAX_DIMS];
        const int nj = j >= 0 ? cg_op_tensor_dims(d->op, j, layout, grouped, sj) : 0;
        src[k] = -1;
        for (int p = 0; p < nj && src[k] < 0; p++)
            if (sj[p] == syms[k] && p < in_ndim[j]) src[k] = j * 8 + p;
    }
    return n;
}

int cgpy_default_want(const cgpy_opdesc *d, int i, const int present[CGPY_MAXT]) {
    const char *of = d->t[i].grad_of;
    if (!of) return 1;
    int j = tensor_index(d, of);
    return j >= 0 && present[j];
}
