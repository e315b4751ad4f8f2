/* cg_args.h -- building one C call's argument struct from Python objects (cg_args.c).
 *
 * Everything about an op's tensors (their names, order, roles, where each lives in the
 * op's args struct, which input gives each output extent) comes from the library's op
 * table through the public header (cg_op_describe, cg_op_tensor_info, cg_op_tensor_dims,
 * cg_op_args_tensor: include/chunkgen.h); this file and the Python package list no
 * tensor by name. */
#ifndef CG_PY_ARGS_H
#define CG_PY_ARGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cg_op_view.h"

#define CGPY_MAXT 32 /* tensors of an op (cg_op_info.ntensors), cu_seqlens included */

/* One op as the public header describes it, read once (cgpy_op). */
typedef struct cgpy_opdesc {
    cg_op op;
    const char *name;                /* "ssd_fwd" */
    int nt;                          /* the float tensors, inputs first (cg_op_info.ntensors) */
    int nin;                         /* the inputs among them */
    int has_varlen;                  /* t[nt] is cu_seqlens */
    int sym_from[CG_SHAPE_MAX_SYMS]; /* cg_op_info.sym_from: the input that gives each symbol */
    cg_tensor_info t[CGPY_MAXT];
} cgpy_opdesc;

/* The op at Python index o (cg_op order); NULL with an exception set. */
const cgpy_opdesc *cgpy_op(PyObject *o);
/* The op of index op (0 <= op < cg_op_count()); NULL with an exception set. */
const cgpy_opdesc *cgpy_op_at(int op);
/* Number of ops. */
int cgpy_nops(void);
/* Number of input tensors of d; inputs come first in the table. */
int cgpy_ninputs(const cgpy_opdesc *d);
/* Tensor i's slot in c's args struct (cu_seqlens: i = d->nt). */
#define CGPY_T(c, i) cg_op_args_tensor((c)->d->op, &(c)->args, (i))

/* One call being built. Owns the buffers it took, the copies and outputs it made. */
typedef struct cgpy_call {
    const cgpy_opdesc *d;
    cgov_args args;
    cg_exec exec;
    Py_buffer bufs[CGPY_MAXT];
    int got[CGPY_MAXT];
    PyObject *keep[CGPY_MAXT + 1]; /* owned references: copies, outputs, workspace */
    int nkeep;
    PyObject *pending[CGPY_MAXT]; /* borrowed: torch inputs to copy (cgpy_copy_pending) */
    Py_buffer cu_buf;             /* cu_seqlens when given as a buffer (numpy) */
    int cu_got;
} cgpy_call;

void cgpy_call_init(cgpy_call *c, const cgpy_opdesc *d);
void cgpy_call_release(cgpy_call *c);
/* Keep a new reference until cgpy_call_release (steals o; o may be NULL: returns -1). */
int cgpy_keep(cgpy_call *c, PyObject *o);
/* Fill tensor i of c's op from o: None, a (ptr, dtype, shape, strides) descriptor
 * (strides in elements, or None: contiguous, the library computing them from the shape), an
 * object with the buffer protocol (numpy), or a torch.Tensor-like object (data_ptr(),
 * dtype, shape, stride()). 0, or -1 with ValueError set. */
int cgpy_read(cgpy_call *c, int i, PyObject *o);
/* The op's cu_seqlens (its op table `varlen` row, docs/varlen.md) from o: None (absent), a
 * descriptor, an int32/int64 buffer (numpy) or an int32/int64 torch tensor. Its values are
 * the library's to check. 0, or -1 with ValueError set. */
int cgpy_read_cu(cgpy_call *c, PyObject *o);
/* N, the number of sequences of c's cu_seqlens (0 when absent). */
int64_t cgpy_nseq(const cgpy_call *c);
/* Register torch.int32 and torch.int64 (the dtypes cu_seqlens may have). */
void cgpy_set_torch_index_dtypes(PyObject *i32, PyObject *i64);

/* The op's int flag (cgov_set_flag): the layout bit, then a bit per scalar option. */
void cgpy_set_flag(cgpy_call *c, int flag);
/* The op's real arguments (cg_op_info.reals, e.g. gdr's scale) from o: None (every one 0,
 * the library's default) or a sequence of exactly cgov_nreals floats; the values are the
 * library's to check (cg_validate). 0, or -1 with an exception set. */
int cgpy_set_reals(cgpy_call *c, PyObject *o);

/* The cg_dtype values a binding maps (CG_F32, CG_F64, CG_BF16, CG_F16: 0 .. 3). */
#define CGPY_NDTYPES (CG_F16 + 1)

/* Register the torch dtypes float32, float64, bfloat16, float16 (cg_dtype order; chunkgen.torch
 * does on import). */
void cgpy_set_torch_dtypes(PyObject *const dts[CGPY_NDTYPES]);
/* The torch front end's checks of the inputs ins (a tuple in the op's input order, torch
 * tensors or fake tensors or None): each dtype float32, float64, bfloat16 or float16, the
 * first's device, at most CG_MAX_DIMS dimensions, no empty dimension. -1: ValueError.
 * dt (may be NULL): each tensor's cg_dtype in table order (-1: absent or an output). */
int cgpy_check_tensors(const cgpy_opdesc *d, PyObject *ins, int *dt);
/* Fill c's inputs from ins (the op's inputs in table order). Numpy arrays and descriptors
 * as cgpy_read; torch tensors (when the first input is one) checked as cgpy_check_tensors, read in one pass;
 * one the C API cannot take as it is (the innermost stride is not 1, or every stride is
 * zero) is described as contiguous and copied (o.contiguous()) by cgpy_copy_pending, so
 * that the library checks the call before any copy is made. */
int cgpy_read_inputs(cgpy_call *c, PyObject *ins);
/* Make the copies cgpy_read_inputs left pending and point their tensors at them. 0 or -1. */
int cgpy_copy_pending(cgpy_call *c);
/* Output i from out, made by the caller's allocator in shape and dtype: a descriptor is
 * read as cgpy_read; a buffer (numpy) or a torch tensor is taken as contiguous of dtype
 * (only its data pointer read; a buffer's byte length checked). */
int cgpy_set_output(cgpy_call *c, int i, PyObject *out, cg_dtype dtype, const int64_t *shape, int ndim);

/* Which input gives each dimension of tensor i: src[k] = input table index * 8 + the
 * dimension's position, -1 for an extent of 1; ndims of the inputs (-1: absent) decide
 * whether grouped tensors have their G dimension. Returns tensor i's rank. */
int cgpy_shape_recipe(const cgpy_opdesc *d, int i, int hm, const int in_ndim[CGPY_MAXT], int src[4]);
/* Whether output i is computed by default: forward outputs always; a gradient when its
 * input is given (present[] by input table index). */
int cgpy_default_want(const cgpy_opdesc *d, int i, const int present[CGPY_MAXT]);

#endif
