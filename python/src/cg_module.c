/* cg_module.c -- chunkgen._C, the CPython binding of the public C API (include/chunkgen.h).
 *
 * The front ends' entry, call(op, inputs, want, flag, ...), takes the op's inputs (numpy
 * arrays or torch tensors, read in C: pointer, dtype, shape, strides), makes the outputs
 * with a given allocator in the shapes the op table gives, and makes the C call with the
 * GIL released: one crossing per op call (cg_args.c builds the args struct). run() takes
 * a tuple of every tensor of the op, each None, a buffer (numpy), a torch tensor or a raw
 * (ptr, dtype, shape, strides) descriptor (strides in elements), for callers with their
 * own memory (JAX, the overhead bench). The order of an op's tensors, their names and
 * roles come from the library's op table (ops(): cg_op_describe); nothing here lists them.
 * Every failing status raises ValueError (CG_EINVAL) or RuntimeError carrying cg_errmsg.
 * The library's log goes to a Python handler (set_log_handler; chunkgen's is the
 * "chunkgen" logger).
 *
 * Each Python thread gets its own cg_context (a context is not thread-safe), freed when
 * the thread exits; the settings below (threads, cache dir, tune on miss) are process-wide
 * and applied to a thread's context before its next call.
 */
#include "cg_args.h"
#include "cg_store_py.h"

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "chunkgen.h"

/* ------------------------------------------------- per-thread contexts */

static pthread_key_t ctx_key;
static unsigned settings_gen = 1; /* read and written with the GIL held */
static int set_threads_v = -1;    /* -1: never set */
static char *set_cache_dir_v = NULL;
static int set_cache_dir_given = 0;
static int set_tune_v = -2; /* -2: never set */

typedef struct tls_ctx {
    cg_context *ctx;
    unsigned gen;
} tls_ctx;

static void tls_free(void *p) {
    tls_ctx *t = p;
    if (t) cg_context_free(t->ctx);
    free(t);
}

static PyObject *raise_status(cg_status s, cg_context *ctx) {
    const char *msg = ctx ? cg_errmsg(ctx) : "";
    PyErr_Format(s == CG_EINVAL ? PyExc_ValueError : PyExc_RuntimeError, "%s (%s)", msg[0] ? msg : cg_status_str(s),
                 cg_status_str(s));
    return NULL;
}

/* This thread's context with the current settings applied; NULL with an exception set. */
static cg_context *thread_ctx(void) {
    tls_ctx *t = pthread_getspecific(ctx_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) return (cg_context *)PyErr_NoMemory();
        cg_status s = cg_context_create(&t->ctx);
        if (s != CG_OK) {
            free(t);
            return (cg_context *)raise_status(s, NULL);
        }
        pthread_setspecific(ctx_key, t);
    }
    if (t->gen != settings_gen) {
        cg_status s = CG_OK;
        if (set_threads_v >= 0) s = cg_context_set_threads(t->ctx, set_threads_v);
        if (s == CG_OK && set_cache_dir_given) s = cg_context_set_cache_dir(t->ctx, set_cache_dir_v);
        if (s == CG_OK && set_tune_v != -2) s = cg_context_set_tune_on_miss(t->ctx, set_tune_v);
        if (s != CG_OK) return (cg_context *)raise_status(s, t->ctx);
        t->gen = settings_gen;
    }
    return t->ctx;
}

cg_context *cgpy_thread_ctx(void) { return thread_ctx(); }

/* -------------------------------------------------------------- dtypes */

/* Each output's storage dtype from the inputs': dt[i] in table order, the inputs' given
 * (-1: absent), the outputs' written, by the library's own rules (cg_op_dtypes, which its
 * validation applies: o follows v, y follows x, a gradient its input, states float32;
 * docs/dtypes.md). A mix the library rejects raises its message: -1. */
static cg_context *thread_ctx(void);
static PyObject *raise_status(cg_status s, cg_context *ctx);

static int resolve_dtypes(const cgpy_opdesc *d, int dt[CGPY_MAXT]) {
    cg_context *ctx = thread_ctx();
    if (!ctx) return -1;
    cg_dtype want[CGPY_MAXT];
    for (int i = cgpy_ninputs(d); i < d->nt; i++) dt[i] = -1;
    cg_status s = cg_op_dtypes(ctx, d->op, dt, want);
    if (s != CG_OK) {
        raise_status(s, ctx);
        return -1;
    }
    for (int i = cgpy_ninputs(d); i < d->nt; i++) dt[i] = (int)want[i];
    return 0;
}

/* ---------------------------------------------------------- the calls */

/* The exec arguments of every entry: backend, config (str or None), verbose. */
static int parse_exec(PyObject *backend, PyObject *config, PyObject *verbose, cg_exec *e) {
    long b = PyLong_AsLong(backend);
    if (b == -1 && PyErr_Occurred()) return -1;
    e->backend = (cg_backend)b;
    if (config != Py_None && !(e->config = PyUnicode_AsUTF8(config))) return -1;
    return (e->verbose = PyObject_IsTrue(verbose)) < 0 ? -1 : 0;
}

/* A pointer argument: None or an int. */
static int parse_ptr(PyObject *o, void **out) {
    *out = o == Py_None ? NULL : PyLong_AsVoidPtr(o);
    return PyErr_Occurred() ? -1 : 0;
}

/* An op's int flag (cgov_set_flag: the layout bit, then a bit per scalar option) into *flag. */
static int parse_flag(PyObject *o, int *flag) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > 0xffff) {
        PyErr_Format(PyExc_ValueError, "flag: %ld but expected bits: the layout, then each scalar option", v);
        return -1;
    }
    *flag = (int)v;
    return 0;
}

/* run(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose[, cu_seqlens[, reals]]):
 * tensors is a tuple of every tensor of the op in the op table's order (fields(op));
 * cu_seqlens (None when left out) as cgpy_read_cu; reals (None: the defaults) as cgpy_set_reals. */
static int parse_call(PyObject *const *a, Py_ssize_t na, cgpy_call *c) {
    cgpy_call_init(c, NULL);
    if (na < 9 || na > 11) {
        PyErr_SetString(PyExc_TypeError, "run(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, "
                                         "verbose[, cu_seqlens[, reals]])");
        return -1;
    }
    const cgpy_opdesc *d = cgpy_op(a[0]);
    if (!d) return -1;
    c->d = d;
    if (!PyTuple_Check(a[1]) || PyTuple_GET_SIZE(a[1]) != d->nt) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of %d tensors", d->name, d->nt);
        return -1;
    }
    int flag = 0;
    if (parse_flag(a[2], &flag) || parse_exec(a[3], a[4], a[8], &c->exec) || parse_ptr(a[5], &c->exec.stream) ||
        parse_ptr(a[6], &c->exec.workspace))
        return -1;
    c->exec.workspace_bytes = PyLong_AsSize_t(a[7]);
    if (c->exec.workspace_bytes == (size_t)-1 && PyErr_Occurred()) return -1;
    for (int i = 0; i < d->nt; i++)
        if (cgpy_read(c, i, PyTuple_GET_ITEM(a[1], i))) return -1;
    if (na >= 10 && cgpy_read_cu(c, a[9])) return -1;
    cgpy_set_flag(c, flag);
    return na == 11 ? cgpy_set_reals(c, a[10]) : 0;
}

/* backend auto with float64 inputs (tensor 0) runs the float64 reference, `ref`: the
 * front ends' rule for call() and validate(). */
static void auto_f64_ref(cgpy_call *c) {
    const cg_tensor *first = CGPY_T(c, 0);
    if (c->exec.backend == CG_BACKEND_AUTO && first->data && first->dtype == CG_F64) c->exec.backend = CG_BACKEND_REF;
}

/* The library's check of c's arguments (cg_validate: outputs not yet made are not
 * checked), with the GIL held (no tensor data is read but host cu_seqlens offsets). */
static PyObject *check_args(cgpy_call *c) {
    cg_context *ctx = thread_ctx();
    if (!ctx) return NULL;
    cg_status s = cg_validate(ctx, c->d->op, &c->args, &c->exec);
    if (s != CG_OK) return raise_status(s, ctx);
    Py_RETURN_NONE;
}

/* The op's call (or its workspace size when bytes != NULL) with the GIL released. */
static PyObject *invoke(cgpy_call *c, size_t *bytes) {
    cg_context *ctx = thread_ctx();
    if (!ctx) return NULL;
    cg_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bytes ? cg_workspace_size(ctx, c->d->op, &c->args, &c->exec, bytes) : cg_run(ctx, c->d->op, &c->args, &c->exec);
    Py_END_ALLOW_THREADS
    if (s != CG_OK) return raise_status(s, ctx);
    Py_RETURN_NONE;
}

static PyObject *py_run(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    cgpy_call c;
    PyObject *r = parse_call(a, na, &c) ? NULL : invoke(&c, NULL);
    cgpy_call_release(&c);
    return r;
}

/* workspace_size(*run_args) -> bytes: the scratch the call takes from its workspace
 * (cg_workspace_size), so the caller can give it from PyTorch's caching allocator. */
static PyObject *py_workspace_size(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    cgpy_call c;
    size_t bytes = 0;
    PyObject *r = parse_call(a, na, &c) ? NULL : invoke(&c, &bytes);
    cgpy_call_release(&c);
    if (!r) return NULL;
    Py_DECREF(r);
    return PyLong_FromSize_t(bytes);
}

/* validate(*run_args) -> None: cg_validate of the call (outputs given as None are not
 * checked; backend auto with float64 inputs is `ref`, as in call()): the front ends'
 * check of a call's inputs (shapes, dtypes, cu_seqlens) by the library before anything
 * is copied or allocated, on descriptors whose data is never read. */
static PyObject *py_validate(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    cgpy_call c;
    PyObject *r = NULL;
    if (!parse_call(a, na, &c)) {
        auto_f64_ref(&c);
        r = check_args(&c);
    }
    cgpy_call_release(&c);
    return r;
}

/* empty(shape, dtype=dtypes[dt]): one output from the front end's allocator. */
static PyObject *make_output(PyObject *empty, PyObject *dtypes, int dt, PyObject *shape) {
    static PyObject *kw;
    if (!kw && !(kw = Py_BuildValue("(s)", "dtype"))) return NULL;
    if (!PyTuple_Check(dtypes) || PyTuple_GET_SIZE(dtypes) != CGPY_NDTYPES)
        return PyErr_Format(PyExc_TypeError, "dtypes: expected a tuple of %d dtypes (cg_dtype order)", CGPY_NDTYPES);
    PyObject *args[2] = {shape, PyTuple_GET_ITEM(dtypes, dt)};
    return PyObject_Vectorcall(empty, args, 1, kw);
}

/* call(op, inputs, want, flag, backend, config, verbose, empty, dtypes, stream, ws_empty[,
 * cu_seqlens[, reals]]) -> outputs
 *
 * The front ends' one entry. inputs: the op's inputs in table order (None, numpy arrays,
 * torch tensors, descriptors). Torch tensors are checked (dtype, device, rank) and copied
 * only where the C API cannot take their strides; the library checks the rest. Each wanted
 * output (want: a bit per output in table order; -1: forward
 * outputs and the gradient of every given input) is made by empty(shape, dtype=dtypes[dt])
 * -- shapes from the op table, dt (a cg_dtype) by the library's rules (resolve_dtypes: a
 * bad dtype mix raises its message here) -- and read like an
 * input; the others come back as None. The library checks the inputs (cg_validate) before
 * any output is made. backend auto with float64 inputs runs `ref`. With
 * a stream (CUDA), ws_empty(n) gives the call's n bytes of workspace (cg_workspace_size)
 * when n > 0. cu_seqlens (None when left out): the op's offsets (cgpy_read_cu); the states
 * (CG_TENSOR_PER_SEQ outputs) are then made with N = len(cu_seqlens) - 1 in their B dimension,
 * as the library's validation expects them. */
static PyObject *py_call(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na < 11 || na > 13)
        return PyErr_Format(PyExc_TypeError, "call(op, inputs, want, flag, backend, config, verbose, empty, dtypes, "
                                             "stream, ws_empty[, cu_seqlens[, reals]])");
    const cgpy_opdesc *d = cgpy_op(a[0]);
    if (!d) return NULL;
    int nin = cgpy_ninputs(d);
    long want = PyLong_AsLong(a[2]);
    int flag = 0;
    if ((want == -1 && PyErr_Occurred()) || parse_flag(a[3], &flag)) return NULL;
    cgpy_call c;
    cgpy_call_init(&c, d);
    PyObject *result = NULL, *r = NULL;
    if (parse_exec(a[4], a[5], a[6], &c.exec)) goto done;
    int present[CGPY_MAXT] = {0}, ndim[CGPY_MAXT], dt[CGPY_MAXT];
    if (cgpy_read_inputs(&c, a[1]) || (na >= 12 && cgpy_read_cu(&c, a[11])) || (na == 13 && cgpy_set_reals(&c, a[12])))
        goto done;
    const int64_t nseq = cgpy_nseq(&c);
    for (int i = 0; i < d->nt; i++) {
        const cg_tensor *t = CGPY_T(&c, i);
        present[i] = i < nin && t->data;
        ndim[i] = present[i] ? t->ndim : -1;
        dt[i] = present[i] ? (int)t->dtype : -1;
    }
    if (resolve_dtypes(d, dt)) goto done;
    auto_f64_ref(&c);
    cgpy_set_flag(&c, flag);
    /* the library checks the inputs before any output is made from their extents: a bad
     * shape raises its message, never an allocation of a huge output (issue #39 item 8) */
    if (!(r = check_args(&c))) goto done;
    Py_CLEAR(r);
    if (cgpy_copy_pending(&c)) goto done; /* the copies of torch inputs the C API cannot take as they are */
    if (!(result = PyTuple_New(d->nt - nin))) goto done;
    for (int i = nin; i < d->nt; i++) {
        int on = want == -1 ? cgpy_default_want(d, i, present) : (int)((want >> (i - nin)) & 1);
        PyObject *out = Py_None;
        if (on) {
            int src[4], n = cgpy_shape_recipe(d, i, flag & 1, ndim, src);
            int64_t ext[4];
            PyObject *shape = PyTuple_New(n);
            for (int k = 0; shape && k < n; k++) {
                ext[k] = src[k] < 0 ? 1 : CGPY_T(&c, src[k] / 8)->shape[src[k] % 8];
                if (k == 0 && nseq && (d->t[i].flags & CG_TENSOR_PER_SEQ)) ext[k] = nseq; /* a state per sequence */
                PyObject *e = PyLong_FromLongLong(ext[k]);
                if (!e) Py_CLEAR(shape);
                else PyTuple_SET_ITEM(shape, k, e);
            }
            out = shape ? make_output(a[7], a[8], dt[i], shape) : NULL;
            Py_XDECREF(shape);
            if (!out || cgpy_set_output(&c, i, out, (cg_dtype)dt[i], ext, n)) {
                Py_XDECREF(out);
                goto done;
            }
        } else {
            Py_INCREF(out);
        }
        PyTuple_SET_ITEM(result, i - nin, out);
    }
    if (a[9] != Py_None) {
        if (parse_ptr(a[9], &c.exec.stream)) goto done;
        size_t bytes = 0;
        if (!(r = invoke(&c, &bytes))) goto done;
        Py_CLEAR(r);
        if (bytes) {
            static PyObject *s_data_ptr;
            if (!s_data_ptr && !(s_data_ptr = PyUnicode_InternFromString("data_ptr"))) goto done;
            PyObject *n = PyLong_FromSize_t(bytes);
            PyObject *ws = n ? PyObject_CallOneArg(a[10], n) : NULL;
            Py_XDECREF(n);
            if (cgpy_keep(&c, ws)) goto done;
            PyObject *ptr = PyObject_CallMethodNoArgs(ws, s_data_ptr);
            c.exec.workspace = ptr ? PyLong_AsVoidPtr(ptr) : NULL;
            Py_XDECREF(ptr);
            if (PyErr_Occurred()) goto done;
            c.exec.workspace_bytes = bytes;
        }
    }
    r = invoke(&c, NULL);
done:
    cgpy_call_release(&c);
    if (r) {
        Py_DECREF(r);
        return result;
    }
    Py_XDECREF(result);
    return NULL;
}

/* The outputs' part of dt (resolve_dtypes) as a tuple of ints. */
static PyObject *out_dtype_tuple(const cgpy_opdesc *d, const int dt[CGPY_MAXT]) {
    int nin = cgpy_ninputs(d);
    PyObject *r = PyTuple_New(d->nt - nin);
    for (int i = nin; r && i < d->nt; i++) {
        PyObject *e = PyLong_FromLong(dt[i]);
        if (!e) Py_CLEAR(r);
        else PyTuple_SET_ITEM(r, i - nin, e);
    }
    return r;
}

/* check_tensors(op, inputs) -> the outputs' cg_dtypes: the torch front end's checks (also
 * its fake implementations', which make their outputs in those dtypes). */
static PyObject *py_check_tensors(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) return PyErr_Format(PyExc_TypeError, "check_tensors(op, inputs)");
    const cgpy_opdesc *d = cgpy_op(a[0]);
    int dt[CGPY_MAXT];
    if (!d || cgpy_check_tensors(d, a[1], dt) || resolve_dtypes(d, dt)) return NULL;
    return out_dtype_tuple(d, dt);
}

/* output_dtypes(op, dtypes) -> the cg_dtype of each output from the inputs' (ints, None:
 * absent), by the library's rules; ValueError with its message for a mix it rejects. */
static PyObject *py_output_dtypes(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) return PyErr_Format(PyExc_TypeError, "output_dtypes(op, dtypes)");
    const cgpy_opdesc *d = cgpy_op(a[0]);
    if (!d) return NULL;
    int nin = cgpy_ninputs(d), dt[CGPY_MAXT];
    if (!PyTuple_Check(a[1]) || PyTuple_GET_SIZE(a[1]) != nin)
        return PyErr_Format(PyExc_TypeError, "%s: expected the dtypes of its %d inputs", d->name, nin);
    for (int i = 0; i < nin; i++) {
        PyObject *o = PyTuple_GET_ITEM(a[1], i);
        long v = o == Py_None ? -1 : PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred()) return NULL;
        const int index = (d->t[i].flags & CG_TENSOR_INDEX) && (v == CG_I32 || v == CG_I64); /* slot indices */
        if (v < -1 || (v >= CGPY_NDTYPES && !index))
            return PyErr_Format(PyExc_ValueError, "%s: dtype %ld but expected a cg_dtype in [0, %d)", d->t[i].name, v,
                                CGPY_NDTYPES);
        dt[i] = (int)v;
    }
    return resolve_dtypes(d, dt) ? NULL : out_dtype_tuple(d, dt);
}

/* output_shapes(op, flag, shapes, want[, nseq]) -> the shape of each output (None where not
 * wanted, want as in call()), built from the inputs' shapes (tuples of ints or of
 * symbolic sizes: the entries are taken, not read), None for an absent input. An
 * extent an input lacks is 1 (the C call then names the wrong argument). nseq (an int or
 * a symbolic size; None: no cu_seqlens) is the states' (CG_TENSOR_PER_SEQ) first extent. */
static PyObject *py_output_shapes(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 4 && na != 5) return PyErr_Format(PyExc_TypeError, "output_shapes(op, flag, shapes, want[, nseq])");
    PyObject *nseq = na == 5 && a[4] != Py_None ? a[4] : NULL;
    const cgpy_opdesc *d = cgpy_op(a[0]);
    if (!d) return NULL;
    int flag = 0, nin = cgpy_ninputs(d);
    long want = PyLong_AsLong(a[3]);
    if ((want == -1 && PyErr_Occurred()) || parse_flag(a[1], &flag)) return NULL;
    if (!PyTuple_Check(a[2]) || PyTuple_GET_SIZE(a[2]) != nin)
        return PyErr_Format(PyExc_TypeError, "%s: expected the shapes of its %d inputs", d->name, nin);
    int present[CGPY_MAXT] = {0}, ndim[CGPY_MAXT];
    for (int i = 0; i < d->nt; i++) ndim[i] = -1;
    for (int i = 0; i < nin; i++) {
        PyObject *s = PyTuple_GET_ITEM(a[2], i);
        if (s == Py_None) continue;
        if (!PyTuple_Check(s)) return PyErr_Format(PyExc_TypeError, "%s: shape must be a tuple", d->t[i].name);
        present[i] = 1;
        ndim[i] = (int)PyTuple_GET_SIZE(s);
    }
    PyObject *r = PyTuple_New(d->nt - nin);
    for (int i = nin; r && i < d->nt; i++) {
        int on = want == -1 ? cgpy_default_want(d, i, present) : (int)((want >> (i - nin)) & 1);
        int src[4], n = on ? cgpy_shape_recipe(d, i, flag & 1, ndim, src) : 0;
        PyObject *shape = on ? PyTuple_New(n) : Py_None;
        if (!on) Py_INCREF(shape);
        for (int k = 0; shape && k < n; k++) {
            PyObject *e =
                src[k] < 0 ? PyLong_FromLong(1) : PyTuple_GET_ITEM(PyTuple_GET_ITEM(a[2], src[k] / 8), src[k] % 8);
            if (k == 0 && nseq && (d->t[i].flags & CG_TENSOR_PER_SEQ)) {
                if (src[k] < 0) Py_DECREF(e);
                e = nseq; /* a state per sequence */
                Py_INCREF(e);
            } else if (src[k] >= 0) {
                Py_INCREF(e);
            }
            PyTuple_SET_ITEM(shape, k, e);
        }
        if (!shape) Py_CLEAR(r);
        else PyTuple_SET_ITEM(r, i - nin, shape);
    }
    return r;
}

/* bench(repeats, *run_args) -> (wall, cpu): seconds per C call, timed in C around the
 * bare call, by the monotonic clock and by the process CPU-time clock (the reference for
 * the binding-overhead benchmark, bench/py_overhead.py). */
static double secs(clockid_t clk) {
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static PyObject *py_bench(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na < 1) return PyErr_Format(PyExc_TypeError, "bench(repeats, *run_args)");
    long reps = PyLong_AsLong(a[0]);
    if (reps < 1) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "repeats: expected >= 1");
    cgpy_call c;
    cg_context *ctx = NULL;
    cg_status s = CG_OK;
    double wall = 0, cpu = 0;
    if (parse_call(a + 1, na - 1, &c) == 0 && (ctx = thread_ctx())) {
        const cg_op op = c.d->op;
        Py_BEGIN_ALLOW_THREADS
        wall = secs(CLOCK_MONOTONIC);
        cpu = secs(CLOCK_PROCESS_CPUTIME_ID);
        for (long r = 0; r < reps && s == CG_OK; r++) s = cg_run(ctx, op, &c.args, &c.exec);
        wall = (secs(CLOCK_MONOTONIC) - wall) / (double)reps;
        cpu = (secs(CLOCK_PROCESS_CPUTIME_ID) - cpu) / (double)reps;
        Py_END_ALLOW_THREADS
    }
    cgpy_call_release(&c);
    if (!ctx) return NULL;
    if (s != CG_OK) return raise_status(s, ctx);
    return Py_BuildValue("(dd)", wall, cpu);
}

/* ------------------------------------------------------------- logging */

/* The library's log callback forwards each message to a Python callable handler(level,
 * msg) (chunkgen's: the "chunkgen" logger), from whatever thread logs, holding the GIL. */
static PyObject *log_handler; /* owned; NULL: the library's default (stderr) */

static void forward_log(cg_log_level level, const char *msg, void *user) {
    (void)user;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *h = log_handler;
    if (h) {
        Py_INCREF(h);
        PyObject *r = PyObject_CallFunction(h, "is", (int)level, msg);
        if (!r) PyErr_WriteUnraisable(h);
        Py_XDECREF(r);
        Py_DECREF(h);
    }
    PyGILState_Release(g);
}

static PyObject *py_set_log_handler(PyObject *self, PyObject *arg) {
    if (arg != Py_None && !PyCallable_Check(arg))
        return PyErr_Format(PyExc_TypeError, "handler: expected a callable or None");
    cg_set_log_callback(arg == Py_None ? NULL : forward_log, NULL);
    PyObject *old = log_handler;
    Py_XINCREF(arg == Py_None ? NULL : arg);
    log_handler = arg == Py_None ? NULL : arg;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ the rest */

/* One tensor of the op table: (name, is_output, extents, layout, grad_of, inplace). extents:
 * the symbol names of its logical (token-major) dimensions ("B", "T", "G", "dk", ...; "" for
 * an extent of 1); layout: head-major swaps dimensions 1 and 2; grad_of: the input a
 * backward output is the gradient of, or None; inplace: an input the call also writes (a
 * decode step's state cache). */
static PyObject *tensor_facts(const cg_tensor_info *t) {
    PyObject *ext = PyTuple_New(4);
    for (int k = 0; ext && k < 4; k++) PyTuple_SET_ITEM(ext, k, PyUnicode_FromString(cg_sym_name(t->ext[k])));
    if (!ext) return NULL;
    return Py_BuildValue("(sNNNzN)", t->name, PyBool_FromLong(t->output), ext,
                         PyBool_FromLong((t->flags & CG_TENSOR_LAYOUT) != 0), t->grad_of,
                         PyBool_FromLong((t->flags & CG_TENSOR_INPLACE) != 0));
}

/* ops() -> ((name, (tensor facts, ...)), ...) in cg_op order, from the op table
 * (cg_op_describe, cg_op_tensor_info): the order run()'s tensors tuple follows, inputs
 * (call()'s inputs) first. */
static PyObject *py_ops(PyObject *self, PyObject *unused) {
    const int nops = cgpy_nops();
    PyObject *r = nops < 0 ? NULL : PyTuple_New(nops);
    for (int o = 0; r && o < nops; o++) {
        const cgpy_opdesc *d = cgpy_op_at(o);
        PyObject *ts = d ? PyTuple_New(d->nt) : NULL, *e = NULL;
        for (int i = 0; ts && i < d->nt; i++) {
            PyObject *f = tensor_facts(&d->t[i]);
            if (!f) Py_CLEAR(ts);
            else PyTuple_SET_ITEM(ts, i, f);
        }
        if (ts) e = Py_BuildValue("(sN)", d->name, ts);
        if (!e) {
            Py_DECREF(r);
            return NULL;
        }
        PyTuple_SET_ITEM(r, o, e);
    }
    return r;
}

/* reals(op) -> the names of op's real (double) arguments (cg_op_info.reals: gdr's
 * ("scale",)), the order call()'s reals take. */
static PyObject *py_reals(PyObject *self, PyObject *o) {
    const cgpy_opdesc *d = cgpy_op(o);
    if (!d) return NULL;
    const int n = cgov_nreals(d->op);
    PyObject *r = PyTuple_New(n);
    for (int k = 0; r && k < n; k++) {
        PyObject *e = PyUnicode_FromString(cgov_real_name(d->op, k));
        if (!e) Py_CLEAR(r);
        else PyTuple_SET_ITEM(r, k, e);
    }
    return r;
}

static PyObject *py_set_torch_dtypes(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != CGPY_NDTYPES)
        return PyErr_Format(PyExc_TypeError, "set_torch_dtypes(float32, float64, bfloat16, float16)");
    cgpy_set_torch_dtypes(a);
    Py_RETURN_NONE;
}

static PyObject *py_set_torch_index_dtypes(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 2) return PyErr_Format(PyExc_TypeError, "set_torch_index_dtypes(int32, int64)");
    cgpy_set_torch_index_dtypes(a[0], a[1]);
    Py_RETURN_NONE;
}

static PyObject *py_backends(PyObject *self, PyObject *unused) {
    PyObject *r = PyTuple_New(CG_BACKEND_REF + 1);
    for (int b = 0; r && b <= CG_BACKEND_REF; b++)
        PyTuple_SET_ITEM(r, b, PyUnicode_FromString(cg_backend_name((cg_backend)b)));
    return r;
}

static PyObject *py_cpu_isa(PyObject *self, PyObject *unused) {
    cg_context *ctx = thread_ctx();
    if (!ctx) return NULL;
    cg_device_info d = CG_DEVICE_INFO_INIT; /* the CPU path's variant (CHUNKGEN_CPU_ISA) */
    cg_status s = cg_device_query(ctx, CG_BACKEND_CPU, &d);
    return s == CG_OK ? PyUnicode_FromString(d.cpu_isa) : raise_status(s, ctx);
}

static PyObject *py_last_dispatch(PyObject *self, PyObject *unused) {
    cg_context *ctx = thread_ctx();
    return ctx ? PyUnicode_FromString(cg_last_dispatch(ctx)) : NULL;
}

/* Settings are applied to this thread's context now (so a bad value raises here, with
 * the library's message), then recorded for every other thread's context. */
static PyObject *set_int(const char *name, PyObject *arg, cg_status (*fn)(cg_context *, int), int *store) {
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < INT_MIN || v > INT_MAX) return PyErr_Format(PyExc_ValueError, "%s: %ld but expected a C int", name, v);
    cg_context *ctx = thread_ctx();
    if (!ctx) return NULL;
    cg_status s = fn(ctx, (int)v);
    if (s != CG_OK) return raise_status(s, ctx);
    *store = (int)v;
    settings_gen++;
    Py_RETURN_NONE;
}

static PyObject *py_set_threads(PyObject *self, PyObject *arg) {
    return set_int("threads", arg, cg_context_set_threads, &set_threads_v);
}

static PyObject *py_set_tune_on_miss(PyObject *self, PyObject *arg) {
    return set_int("on", arg, cg_context_set_tune_on_miss, &set_tune_v);
}

static PyObject *py_set_cache_dir(PyObject *self, PyObject *arg) {
    const char *dir = NULL;
    Py_ssize_t len = 0;
    if (arg != Py_None && !(dir = PyUnicode_AsUTF8AndSize(arg, &len))) return NULL;
    if (dir && strlen(dir) != (size_t)len) /* the C string would end at the NUL: another directory */
        return PyErr_Format(PyExc_ValueError, "path: %R contains a NUL character but expected a path without one", arg);
    cg_context *ctx = thread_ctx();
    if (!ctx) return NULL;
    cg_status s = cg_context_set_cache_dir(ctx, dir);
    if (s != CG_OK) return raise_status(s, ctx);
    char *copy = dir ? strdup(dir) : NULL;
    if (dir && !copy) return PyErr_NoMemory();
    free(set_cache_dir_v);
    set_cache_dir_v = copy;
    set_cache_dir_given = 1;
    settings_gen++;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))py_run, METH_FASTCALL,
     "run(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose[, cu_seqlens[, reals]])"},
    CGPY_STORE_METHODS,
    {"workspace_size", (PyCFunction)(void (*)(void))py_workspace_size, METH_FASTCALL,
     "workspace_size(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose) -> bytes"},
    {"validate", (PyCFunction)(void (*)(void))py_validate, METH_FASTCALL,
     "validate(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose[, cu_seqlens[, reals]]): "
     "cg_validate (outputs given as None are not checked)"},
    {"bench", (PyCFunction)(void (*)(void))py_bench, METH_FASTCALL,
     "bench(repeats, *run_args) -> (wall, cpu) seconds per C call"},
    {"call", (PyCFunction)(void (*)(void))py_call, METH_FASTCALL,
     "call(op, inputs, want, flag, backend, config, verbose, empty, dtypes, stream, ws_empty[, cu_seqlens[, reals]]) -> outputs"},
    {"check_tensors", (PyCFunction)(void (*)(void))py_check_tensors, METH_FASTCALL,
     "check_tensors(op, inputs) -> output dtypes"},
    {"output_dtypes", (PyCFunction)(void (*)(void))py_output_dtypes, METH_FASTCALL,
     "output_dtypes(op, input_dtypes) -> output dtypes (cg_dtype ints)"},
    {"output_shapes", (PyCFunction)(void (*)(void))py_output_shapes, METH_FASTCALL,
     "output_shapes(op, flag, input_shapes, want[, nseq]) -> output shapes (None: not wanted)"},
    {"set_torch_dtypes", (PyCFunction)(void (*)(void))py_set_torch_dtypes, METH_FASTCALL,
     "set_torch_dtypes(torch.float32, torch.float64, torch.bfloat16, torch.float16)"},
    {"set_torch_index_dtypes", (PyCFunction)(void (*)(void))py_set_torch_index_dtypes, METH_FASTCALL,
     "set_torch_index_dtypes(torch.int32, torch.int64): cu_seqlens' dtypes"},
    {"set_log_handler", py_set_log_handler, METH_O, "set_log_handler(fn(level, msg) or None): the library's log"},
    {"reals", py_reals, METH_O, "reals(op) -> the names of the op's real arguments (cg_op_info.reals), call()'s order"},
    {"ops", py_ops, METH_NOARGS,
     "((name, ((tensor, is_output, extents, layout, grad_of), ...)), ...) in op index order"},
    {"backends", py_backends, METH_NOARGS, "backend names in cg_backend order"},
    {"cpu_isa", py_cpu_isa, METH_NOARGS, "the CPU path's ISA variant (avx512, avx2, baseline)"},
    {"last_dispatch", py_last_dispatch, METH_NOARGS, "cg_last_dispatch of this thread's context"},
    {"set_threads", py_set_threads, METH_O, "cg_context_set_threads on every context"},
    {"set_cache_dir", py_set_cache_dir, METH_O, "cg_context_set_cache_dir on every context (None: default)"},
    {"set_tune_on_miss", py_set_tune_on_miss, METH_O, "cg_context_set_tune_on_miss on every context"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_C", "chunkgen C API binding", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
    if (pthread_key_create(&ctx_key, tls_free)) return PyErr_Format(PyExc_RuntimeError, "pthread_key_create failed");
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddStringConstant(m, "version", cg_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
