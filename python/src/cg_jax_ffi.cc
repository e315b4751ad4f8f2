/* cg_jax_ffi.cc -- chunkgen._jax_ffi, the XLA FFI handlers behind chunkgen.jax.
 *
 * One handler per platform serves the four ops (attribute "op", cg_op's order, the op
 * table's tensors through cg_op_view.h). Its buffers are the op's tensor fields in table order, inputs
 * as operands and outputs as results, leaving out the absent optional ones: bit i of the
 * attribute "present" says whether field i is given; bit nt (one past the fields): a
 * cu_seqlens operand (int32 / int64, docs/varlen.md) follows the inputs. The handler maps each buffer to a
 * cg_tensor (XLA's default row-major layout: contiguous), sets the op's flag (layout or
 * delta_softplus), its real arguments (attribute "reals", float64 array, cg_op_info.reals
 * order: gdr's scale) and backend, and makes the public C call; all logic, validation and its
 * messages stay in the library (a failing status becomes an XLA error carrying cg_errmsg).
 *
 *   chunkgen_cpu   host buffers; the CPU path (float32; bfloat16/float16 where the library's
 *                  CPU path takes them, else what auto dispatch picks) or the ref backend
 *                  (float64). Element types F32, F64, BF16, F16 map to CG_F32 .. CG_F16; the
 *                  library checks each tensor's against the op's dtype rules.
 *   chunkgen_cuda  device buffers on the stream XLA passes; the generated kernels'
 *                  workspace is an XLA scratch allocation (ScratchAllocator: XLA's own
 *                  device allocator, never a cudaMalloc per call). It needs no CUDA
 *                  header (the stream is an opaque pointer, as cg_exec takes it), so it is
 *                  always compiled; chunkgen.jax registers it when JAX has a CUDA backend.
 *
 * Each thread XLA runs a handler on gets its own cg_context (not thread-safe), freed at
 * thread exit; set_threads() and set_cache_dir() apply to every one before its next call.
 * targets() hands the handlers to Python as PyCapsules for jax.ffi.register_ffi_target.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "cg_op_view.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

/* ------------------------------------------------------------ settings */

std::mutex settings_mu;
std::atomic<unsigned> settings_gen{1};
int threads_v = -1; /* -1: never set */
std::string cache_dir_v;
bool cache_dir_given = false, cache_dir_null = true;

struct thread_ctx {
    cg_context *ctx = nullptr;
    unsigned gen = 0;
    ~thread_ctx() { cg_context_free(ctx); }
};

ffi::Error status_error(cg_status s, cg_context *ctx) {
    std::string msg = ctx && cg_errmsg(ctx)[0] ? cg_errmsg(ctx) : cg_status_str(s);
    msg += std::string(" (") + cg_status_str(s) + ")";
    return ffi::Error(s == CG_EINVAL ? ffi::ErrorCode::kInvalidArgument : ffi::ErrorCode::kInternal, msg);
}

/* This thread's context with the current settings; nullptr and *err on failure. */
cg_context *context(ffi::Error *err) {
    thread_local thread_ctx t;
    cg_status s = CG_OK;
    if (!t.ctx && (s = cg_context_create(&t.ctx)) != CG_OK) {
        *err = status_error(s, nullptr);
        return nullptr;
    }
    unsigned gen = settings_gen.load();
    if (t.gen != gen) {
        std::lock_guard<std::mutex> lock(settings_mu);
        if (threads_v >= 0) s = cg_context_set_threads(t.ctx, threads_v);
        if (s == CG_OK && cache_dir_given)
            s = cg_context_set_cache_dir(t.ctx, cache_dir_null ? nullptr : cache_dir_v.c_str());
        if (s != CG_OK) {
            *err = status_error(s, t.ctx);
            return nullptr;
        }
        t.gen = gen;
    }
    return t.ctx;
}

/* -------------------------------------------------------------- buffers */

/* The cg_dtype of an XLA element type; -1: none chunkgen takes. */
int dtype_of(ffi::DataType t) {
    switch (t) {
    case ffi::DataType::F32: return CG_F32;
    case ffi::DataType::F64: return CG_F64;
    case ffi::DataType::BF16: return CG_BF16;
    case ffi::DataType::F16: return CG_F16;
    case ffi::DataType::S32: return CG_I32; /* cu_seqlens, slot indices (the library names any other tensor given so) */
    case ffi::DataType::S64: return CG_I64;
    default: return -1;
    }
}

cg_tensor tensor_of(const ffi::AnyBuffer &b) {
    cg_tensor t{};
    t.data = b.untyped_data();
    t.dtype = (cg_dtype)dtype_of(b.element_type()); /* (checked by fill) */
    auto dims = b.dimensions();
    t.ndim = (int)dims.size();
    for (int i = 0; i < t.ndim && i < CG_MAX_DIMS; i++) t.shape[i] = dims[i];
    return t; /* strides all zero: contiguous row-major */
}

/* Fill args from the call's buffers (op's tensors in the op table's order). */
ffi::Error fill(int64_t op, int64_t flag, int64_t present, ffi::Span<const double> reals, const ffi::RemainingArgs &ins,
                const ffi::RemainingRets &outs, cgov_args *args) {
    if (op < 0 || op >= cgov_nops() || !cgov_ok((cg_op)op))
        return ffi::Error::InvalidArgument("op: unknown op index " + std::to_string(op));
    cg_op o = (cg_op)op;
    *args = cgov_args{}; /* every size 0: this header's layout */
    size_t ni = 0, no = 0;
    for (int i = 0; i < cgov_ntensors(o); i++) {
        if (!(present >> i & 1)) continue;
        cg_tensor *t = cgov_tensor(o, args, i);
        if (cgov_is_inplace(o, i)) { /* the operand, and the result aliased to it (input_output_aliases):
                                      * the call writes the result's buffer, which XLA gave the operand's
                                      * contents (its own memory when the operand is donated) */
            auto a = ins.get<ffi::AnyBuffer>(ni++);
            auto r = outs.get<ffi::AnyBuffer>(no++);
            if (a.has_error()) return a.error();
            if (r.has_error()) return r.error();
            *t = tensor_of(**r);
        } else if (cgov_is_output(o, i)) {
            auto r = outs.get<ffi::AnyBuffer>(no++);
            if (r.has_error()) return r.error();
            *t = tensor_of(**r);
        } else {
            auto a = ins.get<ffi::AnyBuffer>(ni++);
            if (a.has_error()) return a.error();
            *t = tensor_of(*a);
        }
        if (t->ndim > CG_MAX_DIMS)
            return ffi::Error::InvalidArgument(std::string(cgov_tensor_name(o, i)) + ": more than 4 dimensions");
        if ((int)t->dtype < 0)
            return ffi::Error::InvalidArgument(std::string(cgov_tensor_name(o, i)) +
                                               ": element type not float32, float64, bfloat16 or float16");
    }
    if (present >> cgov_ntensors(o) & 1) { /* cu_seqlens, after the inputs */
        auto a = ins.get<ffi::AnyBuffer>(ni++);
        if (a.has_error()) return a.error();
        cg_tensor *t = cgov_cu(o, args);
        *t = tensor_of(*a);
        if ((int)t->dtype < 0) return ffi::Error::InvalidArgument("cu_seqlens: element type not int32 or int64");
    }
    if (ni != ins.size() || no != outs.size())
        return ffi::Error::InvalidArgument(std::string(cgov_op_name(o)) +
                                           ": buffer count does not match attribute present");
    cgov_set_flag(o, args, (int)flag);
    if ((int64_t)reals.size() != cgov_nreals(o)) /* the op's real arguments (scale), the library checks their values */
        return ffi::Error::InvalidArgument(std::string(cgov_op_name(o)) + ": attribute reals has " +
                                           std::to_string(reals.size()) + " values but expected " +
                                           std::to_string(cgov_nreals(o)));
    cgov_set_reals(o, args, reals.begin(), (int)reals.size());
    return ffi::Error::Success();
}

cg_exec exec_of(int64_t backend, std::string_view config, std::string *keep) {
    cg_exec e = CG_EXEC_INIT;
    e.backend = (cg_backend)backend;
    if (!config.empty()) {
        *keep = std::string(config);
        e.config = keep->c_str();
    }
    return e;
}

/* One call: on the CPU platform stream and scratch are null (host buffers; the CPU and ref
 * backends keep their own scratch); on CUDA the workspace comes from XLA's scratch. */
ffi::Error run(void *stream, ffi::ScratchAllocator *scratch, const ffi::RemainingArgs &ins,
               const ffi::RemainingRets &outs, int64_t op, int64_t flag, int64_t present, int64_t backend,
               std::string_view config, ffi::Span<const double> reals) {
    cgov_args args;
    ffi::Error err = fill(op, flag, present, reals, ins, outs, &args);
    if (err.failure()) return err;
    cg_context *ctx = context(&err);
    if (!ctx) return err;
    std::string keep;
    cg_exec e = exec_of(backend, config, &keep);
    e.stream = stream;
    cg_status s = CG_OK;
    size_t bytes = 0;
    if (scratch && (s = cg_workspace_size(ctx, (cg_op)op, &args, &e, &bytes)) != CG_OK) return status_error(s, ctx);
    if (bytes) {
        auto ws = scratch->Allocate(bytes, 256);
        if (!ws.has_value())
            return ffi::Error(ffi::ErrorCode::kResourceExhausted, std::string(cgov_op_name((cg_op)op)) +
                                                                      ": no XLA scratch of " + std::to_string(bytes) +
                                                                      " bytes");
        e.workspace = *ws;
        e.workspace_bytes = bytes;
    }
    s = cgov_call(ctx, (cg_op)op, &args, &e);
    return s == CG_OK ? ffi::Error::Success() : status_error(s, ctx);
}

ffi::Error run_cpu(ffi::RemainingArgs ins, ffi::RemainingRets outs, int64_t op, int64_t flag, int64_t present,
                   int64_t backend, std::string_view config, ffi::Span<const double> reals) {
    return run(nullptr, nullptr, ins, outs, op, flag, present, backend, config, reals);
}

ffi::Error run_cuda(void *stream, ffi::ScratchAllocator scratch, ffi::RemainingArgs ins, ffi::RemainingRets outs,
                    int64_t op, int64_t flag, int64_t present, int64_t backend, std::string_view config,
                    ffi::Span<const double> reals) {
    return run(stream, &scratch, ins, outs, op, flag, present, backend, config, reals);
}

} // namespace

#define CG_JAX_ATTRS                                                                                                   \
    .Attr<int64_t>("op")                                                                                               \
        .Attr<int64_t>("flag")                                                                                         \
        .Attr<int64_t>("present")                                                                                      \
        .Attr<int64_t>("backend")                                                                                      \
        .Attr<std::string_view>("config")                                                                              \
        .Attr<ffi::Span<const double>>("reals")

XLA_FFI_DEFINE_HANDLER_SYMBOL(cg_jax_cpu, run_cpu, ffi::Ffi::Bind().RemainingArgs().RemainingRets() CG_JAX_ATTRS);
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    cg_jax_cuda, run_cuda,
    ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void *>>().Ctx<ffi::ScratchAllocator>().RemainingArgs().RemainingRets()
        CG_JAX_ATTRS);

/* ------------------------------------------------------------- module */

static PyObject *py_targets(PyObject *, PyObject *) {
    PyObject *cpu = PyCapsule_New(reinterpret_cast<void *>(&cg_jax_cpu), nullptr, nullptr);
    PyObject *cuda = PyCapsule_New(reinterpret_cast<void *>(&cg_jax_cuda), nullptr, nullptr);
    PyObject *r = cpu && cuda ? Py_BuildValue("{sNsN}", "cpu", cpu, "cuda", cuda) : nullptr;
    if (!r) {
        Py_XDECREF(cpu);
        Py_XDECREF(cuda);
    }
    return r;
}

/* Settings are tried on this thread's context first (a bad value raises here with the
 * library's message), then recorded for every handler thread's context. */
static PyObject *py_set_threads(PyObject *, PyObject *arg) {
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    ffi::Error err;
    cg_context *ctx = context(&err);
    cg_status s = ctx ? cg_context_set_threads(ctx, (int)v) : CG_ENOMEM;
    if (s != CG_OK) return PyErr_Format(PyExc_ValueError, "%s", ctx ? cg_errmsg(ctx) : cg_status_str(s));
    std::lock_guard<std::mutex> lock(settings_mu);
    threads_v = (int)v;
    settings_gen++;
    Py_RETURN_NONE;
}

static PyObject *py_set_cache_dir(PyObject *, PyObject *arg) {
    const char *dir = nullptr;
    Py_ssize_t len = 0;
    if (arg != Py_None && !(dir = PyUnicode_AsUTF8AndSize(arg, &len))) return nullptr;
    if (dir && std::strlen(dir) != (size_t)len) /* the C string would end at the NUL: another directory */
        return PyErr_Format(PyExc_ValueError, "path: %R contains a NUL character but expected a path without one", arg);
    ffi::Error err;
    cg_context *ctx = context(&err);
    cg_status s = ctx ? cg_context_set_cache_dir(ctx, dir) : CG_ENOMEM;
    if (s != CG_OK) return PyErr_Format(PyExc_ValueError, "%s", ctx ? cg_errmsg(ctx) : cg_status_str(s));
    std::lock_guard<std::mutex> lock(settings_mu);
    cache_dir_given = true;
    cache_dir_null = dir == nullptr;
    cache_dir_v = dir ? dir : "";
    settings_gen++;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"targets", py_targets, METH_NOARGS, "{'cpu': capsule, 'cuda': capsule}: the XLA FFI handlers"},
    {"set_threads", py_set_threads, METH_O, "cg_context_set_threads on every handler thread's context"},
    {"set_cache_dir", py_set_cache_dir, METH_O, "cg_context_set_cache_dir on every handler thread's context"},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_jax_ffi", "chunkgen's XLA FFI handlers", -1, methods, nullptr, nullptr, nullptr, nullptr};

PyMODINIT_FUNC PyInit__jax_ffi(void) { return PyModule_Create(&module); }
