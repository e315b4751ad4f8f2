/* cg_module.c -- chunkgen._C, the CPython binding of the public C API (include/chunkgen.h).
 *
 * One generic entry, run(op, tensors, flag, backend, config, stream, workspace,
 * workspace_bytes, verbose), fills the op's cg_*_args from a tuple of tensor descriptors
 * given in the order of the op's field table below (fields(op) hands that order to
 * Python, so the table here is the one source of truth), and makes the C call with the
 * GIL released. A tensor descriptor is
 *   None                                  an absent optional tensor,
 *   an object with the buffer protocol    (numpy arrays) float32/float64, any strides,
 *   (ptr, dtype, shape, strides)          raw memory (torch tensors, device pointers),
 *                                         strides in elements.
 * Every failing status raises ValueError (CG_EINVAL) or RuntimeError carrying cg_errmsg.
 *
 * Each Python thread gets its own cg_context (a context is not thread-safe), freed when
 * the thread exits; the settings below (threads, cache dir, tune on miss) are process-wide
 * and applied to a thread's context before its next call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "cg_op_table.h"

/* ------------------------------------------------- per-thread contexts */

static pthread_key_t ctx_key;
static unsigned settings_gen = 1; /* read and written with the GIL held */
static int set_threads_v = -1;    /* -1: never set */
static char *set_cache_dir_v = NULL;
static int set_cache_dir_given = 0;
static int set_tune_v = -2;       /* -2: never set */

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

/* -------------------------------------------------- tensor descriptors */

static int bad_tensor(const char *name, const char *what) {
    PyErr_Format(PyExc_ValueError, "%s: %s", name, what);
    return -1;
}

static int int64_tuple(PyObject *o, int64_t *out, int n, const char *name) {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != n) return bad_tensor(name, "descriptor shape/strides must be tuples of ndim ints");
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, i));
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* Fill *t from descriptor o. *bufp is set when a buffer was taken (to release). */
static int parse_tensor(PyObject *o, const field *f, cg_tensor *t, Py_buffer *buf, int *got_buf) {
    memset(t, 0, sizeof *t);
    *got_buf = 0;
    if (o == Py_None) return 0;
    if (PyTuple_Check(o)) {
        if (PyTuple_GET_SIZE(o) != 4) return bad_tensor(f->name, "expected a (ptr, dtype, shape, strides) descriptor");
        PyObject *shp = PyTuple_GET_ITEM(o, 2);
        if (!PyTuple_Check(shp)) return bad_tensor(f->name, "descriptor shape must be a tuple");
        Py_ssize_t nd = PyTuple_GET_SIZE(shp);
        if (nd > CG_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "%s: %zd dimensions but expected at most %d", f->name, nd, CG_MAX_DIMS);
            return -1;
        }
        t->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(o, 0));
        if (PyErr_Occurred()) return -1;
        long dt = PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
        if (dt == -1 && PyErr_Occurred()) return -1;
        t->dtype = (cg_dtype)dt;
        t->ndim = (int)nd;
        if (int64_tuple(shp, t->shape, t->ndim, f->name) || int64_tuple(PyTuple_GET_ITEM(o, 3), t->stride, t->ndim, f->name))
            return -1;
    } else {
        if (PyObject_GetBuffer(o, buf, f->output ? PyBUF_RECORDS : PyBUF_RECORDS_RO) < 0) return -1;
        *got_buf = 1;
        const char *fmt = buf->format ? buf->format : "B";
        if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
        if (!strcmp(fmt, "f") && buf->itemsize == 4) t->dtype = CG_F32;
        else if (!strcmp(fmt, "d") && buf->itemsize == 8) t->dtype = CG_F64;
        else return bad_tensor(f->name, "dtype must be float32 or float64");
        if (buf->ndim > CG_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "%s: %d dimensions but expected at most %d", f->name, buf->ndim, CG_MAX_DIMS);
            return -1;
        }
        t->data = buf->buf;
        t->ndim = buf->ndim;
        for (int i = 0; i < buf->ndim; i++) {
            t->shape[i] = buf->shape[i];
            if (buf->strides[i] % buf->itemsize) return bad_tensor(f->name, "strides must be multiples of the element size");
            t->stride[i] = buf->strides[i] / buf->itemsize;
        }
    }
    /* The C API reads all-zero strides as "contiguous": a broadcast tensor must be copied
     * by the caller (the Python layer does). */
    int all_zero = t->ndim > 0, big = 0;
    for (int i = 0; i < t->ndim; i++) {
        all_zero &= t->stride[i] == 0;
        big |= t->shape[i] > 1;
    }
    if (all_zero && big) return bad_tensor(f->name, "all strides are zero (a broadcast view); pass a copy");
    return 0;
}

/* Parse every argument of run()/bench() into args and exec; buffers are released by the
 * caller (release_all) whatever the outcome. */
typedef struct call_state {
    const op_desc *op;
    any_args args;
    cg_exec exec;
    int flag;
    Py_buffer bufs[MAXF];
    int got[MAXF];
    int n;
} call_state;

static void release_all(call_state *cs) {
    for (int i = 0; i < cs->n; i++)
        if (cs->got[i]) PyBuffer_Release(&cs->bufs[i]);
}

static int parse_call(PyObject *const *a, Py_ssize_t na, call_state *cs) {
    memset(cs, 0, sizeof *cs);
    if (na != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "run(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose)");
        return -1;
    }
    long op = PyLong_AsLong(a[0]);
    if (op == -1 && PyErr_Occurred()) return -1;
    if (op < 0 || op >= NOPS) return bad_tensor("op", "unknown op index");
    cs->op = &ops[op];
    if (!PyTuple_Check(a[1]) || PyTuple_GET_SIZE(a[1]) != cs->op->nfields) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of %d tensors", cs->op->name, cs->op->nfields);
        return -1;
    }
    cs->flag = PyObject_IsTrue(a[2]);
    long backend = PyLong_AsLong(a[3]);
    if (cs->flag < 0 || (backend == -1 && PyErr_Occurred())) return -1;
    cs->exec.backend = (cg_backend)backend;
    if (a[4] != Py_None) {
        cs->exec.config = PyUnicode_AsUTF8(a[4]);
        if (!cs->exec.config) return -1;
    }
    if (a[5] != Py_None && !(cs->exec.stream = PyLong_AsVoidPtr(a[5])) && PyErr_Occurred()) return -1;
    if (a[6] != Py_None && !(cs->exec.workspace = PyLong_AsVoidPtr(a[6])) && PyErr_Occurred()) return -1;
    cs->exec.workspace_bytes = PyLong_AsSize_t(a[7]);
    if (cs->exec.workspace_bytes == (size_t)-1 && PyErr_Occurred()) return -1;
    cs->exec.verbose = PyObject_IsTrue(a[8]);
    if (cs->exec.verbose < 0) return -1;
    for (int i = 0; i < cs->op->nfields; i++) {
        const field *f = &cs->op->fields[i];
        cs->n = i + 1;
        if (parse_tensor(PyTuple_GET_ITEM(a[1], i), f, (cg_tensor *)((char *)&cs->args + f->off), &cs->bufs[i],
                         &cs->got[i]))
            return -1;
    }
    cs->op->flag(&cs->args, cs->flag);
    return 0;
}

static PyObject *py_run(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    call_state cs;
    cg_context *ctx = NULL;
    cg_status s = CG_OK;
    if (parse_call(a, na, &cs) == 0 && (ctx = thread_ctx())) {
        Py_BEGIN_ALLOW_THREADS
        s = cs.op->call(ctx, &cs.args, &cs.exec);
        Py_END_ALLOW_THREADS
    }
    release_all(&cs);
    if (!ctx) return NULL;
    if (s != CG_OK) return raise_status(s, ctx);
    Py_RETURN_NONE;
}

/* workspace_size(*run_args) -> bytes: the scratch the call takes from its workspace
 * (cg_workspace_size; the ops are in cg_op's order), so the caller can give it from
 * PyTorch's caching allocator. */
static PyObject *py_workspace_size(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    call_state cs;
    cg_context *ctx = NULL;
    cg_status s = CG_OK;
    size_t bytes = 0;
    if (parse_call(a, na, &cs) == 0 && (ctx = thread_ctx())) {
        Py_BEGIN_ALLOW_THREADS
        s = cg_workspace_size(ctx, cs.op->id, &cs.args, &cs.exec, &bytes);
        Py_END_ALLOW_THREADS
    }
    release_all(&cs);
    if (!ctx) return NULL;
    if (s != CG_OK) return raise_status(s, ctx);
    return PyLong_FromSize_t(bytes);
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
    call_state cs;
    cg_context *ctx = NULL;
    cg_status s = CG_OK;
    double wall = 0, cpu = 0;
    if (parse_call(a + 1, na - 1, &cs) == 0 && (ctx = thread_ctx())) {
        Py_BEGIN_ALLOW_THREADS
        wall = secs(CLOCK_MONOTONIC);
        cpu = secs(CLOCK_PROCESS_CPUTIME_ID);
        for (long r = 0; r < reps && s == CG_OK; r++) s = cs.op->call(ctx, &cs.args, &cs.exec);
        wall = (secs(CLOCK_MONOTONIC) - wall) / (double)reps;
        cpu = (secs(CLOCK_PROCESS_CPUTIME_ID) - cpu) / (double)reps;
        Py_END_ALLOW_THREADS
    }
    release_all(&cs);
    if (!ctx) return NULL;
    if (s != CG_OK) return raise_status(s, ctx);
    return Py_BuildValue("(dd)", wall, cpu);
}

/* ------------------------------------------------------------ the rest */

static PyObject *py_ops(PyObject *self, PyObject *unused) {
    PyObject *r = PyTuple_New(NOPS);
    for (int o = 0; r && o < NOPS; o++) {
        PyObject *names = PyTuple_New(ops[o].nfields), *outs = PyTuple_New(ops[o].nfields);
        for (int i = 0; names && outs && i < ops[o].nfields; i++) {
            PyTuple_SET_ITEM(names, i, PyUnicode_FromString(ops[o].fields[i].name));
            PyTuple_SET_ITEM(outs, i, PyBool_FromLong(ops[o].fields[i].output));
        }
        PyObject *e = names && outs ? Py_BuildValue("(sNN)", ops[o].name, names, outs) : NULL;
        if (!e) {
            Py_XDECREF(names);
            Py_XDECREF(outs);
            Py_DECREF(r);
            return NULL;
        }
        PyTuple_SET_ITEM(r, o, e);
    }
    return r;
}

static PyObject *py_backends(PyObject *self, PyObject *unused) {
    PyObject *r = PyTuple_New(CG_BACKEND_REF + 1);
    for (int b = 0; r && b <= CG_BACKEND_REF; b++) PyTuple_SET_ITEM(r, b, PyUnicode_FromString(cg_backend_name((cg_backend)b)));
    return r;
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
    if (arg != Py_None && !(dir = PyUnicode_AsUTF8(arg))) return NULL;
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
     "run(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose)"},
    {"workspace_size", (PyCFunction)(void (*)(void))py_workspace_size, METH_FASTCALL,
     "workspace_size(op, tensors, flag, backend, config, stream, workspace, workspace_bytes, verbose) -> bytes"},
    {"bench", (PyCFunction)(void (*)(void))py_bench, METH_FASTCALL, "bench(repeats, *run_args) -> (wall, cpu) seconds per C call"},
    {"ops", py_ops, METH_NOARGS, "((name, field_names, is_output), ...) in op index order"},
    {"backends", py_backends, METH_NOARGS, "backend names in cg_backend order"},
    {"last_dispatch", py_last_dispatch, METH_NOARGS, "cg_last_dispatch of this thread's context"},
    {"set_threads", py_set_threads, METH_O, "cg_context_set_threads on every context"},
    {"set_cache_dir", py_set_cache_dir, METH_O, "cg_context_set_cache_dir on every context (None: default)"},
    {"set_tune_on_miss", py_set_tune_on_miss, METH_O, "cg_context_set_tune_on_miss on every context"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "chunkgen C API binding", -1, methods,
                                    NULL, NULL, NULL, NULL};

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
