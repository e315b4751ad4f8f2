/* ops.h -- the op descriptor table: the one place that lists each op's tensors.
 *
 * Per op: its tensors (name, input or output, optional or not, symbolic extents such as
 * B,T,G,dk, where each lives in the public args struct and in the validated problem),
 * the symbols of its shape and which tensor defines each, the divisibility rule, the
 * scalar arguments, the tuning-key fields and the accuracy class of each output.
 * Validation (validate.c), the host-copy fallback (fallback.c), the tuner's problem
 * builder, `chunkgen run`, the bench and the launcher iterate over it; nothing else
 * lists an op's tensors by name.
 *
 * Adding an optional tensor to an op: docs/architecture.md ("Adding a tensor"). */
#ifndef CG_OPS_H
#define CG_OPS_H

#include "internal.h"

#include <stddef.h>

/* The symbols of a problem's shape are the public cg_sym (chunkgen.h): cg_sym_name,
 * cg_sym_parse. */

#define CG_TD_IN 1
#define CG_TD_OUT 2

/* Flags of a tensor: the public CG_TENSOR_* (chunkgen.h, cg_tensor_info.flags). */
#define CG_TD_LAYOUT CG_TENSOR_LAYOUT /* per-token SSD tensor: head-major layout gives logical dims 1, 2 swapped */
#define CG_TD_GROUPABLE CG_TENSOR_GROUPABLE /* the G dimension is left out when the call is ungrouped (sscan B, C) */
#define CG_TD_CONTIG CG_TENSOR_CONTIG       /* innermost stride must be 1 */
#define CG_TD_HALF CG_TENSOR_HALF       /* may be stored as the call's 16-bit dtype (CG_BF16 / CG_F16); else float32 */
#define CG_TD_INDEX CG_TENSOR_INDEX     /* integer index tensor (CG_I32 / CG_I64): cu_seqlens, the op's `varlen` row */
#define CG_TD_PERSEQ CG_TENSOR_PER_SEQ  /* a state: its B dimension is N, one per sequence, when cu_seqlens is given */
#define CG_TD_INPLACE CG_TENSOR_INPLACE /* an input the call also writes (a state cache): checked as an output too */

/* Accuracy classes of outputs (one tolerance table: cg__tol). */
typedef enum cg_tol_class { CG_TOL_NONE = 0, CG_TOL_FWD, CG_TOL_BWD } cg_tol_class;

typedef struct cg_tdesc {
    const char *name; /* the argument's name in the public args struct, e.g. "log_alpha" */
    const char *file; /* `chunkgen run` .npy base name when it differs ("do" for dout); NULL: name */
    int role;         /* CG_TD_IN or CG_TD_OUT */
    int optional;
    const char *requires; /* optional output allowed only when this input is given (dD: "D"); NULL */
    const char *grad_of;  /* backward output: the input it is the gradient of; NULL */
    cg_sym ext[4];        /* logical extents, in the problem's view order; CG_SYM_NONE: extent 1 */
    int flags;            /* CG_TD_* */
    double lo, hi;        /* inputs: value range of generated test/tuning data */
    cg_tol_class tol;     /* outputs: accuracy class */
    size_t arg_off;       /* offsetof the cg_tensor in the op's args struct */
    size_t view_off;      /* offsetof the cg_view in the op's problem struct */
    int kflag;            /* shape flag (CG_KS_*) the kernel shape gets when the tensor is given; 0 */
} cg_tdesc;

/* A scalar argument copied from the args struct into the problem (an int). */
typedef struct cg_scalar_desc {
    const char *name; /* e.g. "delta_softplus" */
    size_t arg_off, prob_off;
    int kflag; /* shape flag (CG_KS_*) the kernel shape gets when the scalar is nonzero; 0 */
} cg_scalar_desc;

/* A real scalar argument (a double in the args struct and in the problem: gdr's scale),
 * no part of the kernel shape or the tuning key. Validation takes it when it is finite and
 * in [lo, hi]; 0 stands for dflt(dims) when dflt is given (said in messages as dflt_text). */
typedef struct cg_real_desc {
    const char *name; /* e.g. "scale" */
    size_t arg_off, prob_off;
    double lo, hi;
    double (*dflt)(const int64_t dim[CG_SYM_COUNT]); /* NULL: 0 stays 0 */
    const char *dflt_text;                           /* "dk^-1/2" */
} cg_real_desc;

#define CG_OP_MAX_TENSORS 24

/* One built-in tuning shape of an op family (cg_tune_builtin_shapes, autotune/api_tune.c):
 * the shape syntax's items without the op and the sequence (docs/shapes.md), and a name
 * (the store's shape.name). */
typedef struct cg_tune_seed {
    const char *items; /* "B=4,G=2,H=8,dk=128,dv=128"; NULL ends a list */
    const char *name;  /* "g2h8_d128" */
} cg_tune_seed;

typedef struct cg_op_desc {
    cg_op op;
    const char *name;   /* "ssd_fwd" */
    const char *family; /* "ssd", "sscan" (the tuning key's op) */
    int bwd;
    const char *args_type; /* "cg_ssd_fwd_args", for messages */
    size_t args_size, prob_size;
    int nt;
    const cg_tdesc *t;
    int nscalar;
    const cg_scalar_desc *scalar;
    /* where the problem keeps each symbol's value (int64_t); (size_t)-1: not a symbol of the op */
    size_t dim_off[CG_SYM_COUNT];
    cg_sym seq;                /* the sequence symbol (T or L) */
    cg_sym divisible, divisor; /* divisible % divisor == 0 (H % G, D % G) */
    size_t layout_arg_off;     /* offsetof the cg_layout in args; (size_t)-1: no layout */
    size_t grouped_off;        /* offsetof the int "grouped" in the problem; (size_t)-1: none */
    size_t dtype_off;          /* offsetof the cg_dtype in the problem */
    /* fields of the tuning key besides the seq bucket (symbols) */
    int nkey;
    cg_sym key[4];
    /* the variable-length batch's offsets (docs/varlen.md): cu_seqlens [N + 1], flags
     * CG_TD_INDEX, kept out of t[] (every float tensor's loop stays as it is); the
     * problem's N is at nseq_off. */
    const cg_tdesc *varlen;
    size_t nseq_off;
    /* the CPU tuning key's `par` (autotune/key.c): the tasks the CPU path can run at once
     * are B times this symbol's extent (H: one per batch and head; G: per batch and
     * group), bucketed and capped at the thread count */
    cg_sym par;
    /* the family's built-in tuning shapes (forward rows; NULL on backward ones): each seed at
     * each sequence length of seq_gpu (generated kernels) or seq_cpu (the CPU path), in
     * this order; 0 ends a list */
    const cg_tune_seed *seeds;
    int64_t seq_gpu[4], seq_cpu[4];
    /* the op's model of its work (cg_op_flops): the flops of one call with the symbols'
     * extents dim[] (by cg_sym) and the model's parameter p (the config key flops_param,
     * e.g. the chunk; flops_default when the config has none; ignored when NULL) */
    double (*flops)(const int64_t dim[CG_SYM_COUNT], int64_t p);
    const char *flops_param;
    int64_t flops_default;
    /* the real scalar arguments (cg_real_desc); 0 and NULL for ops without */
    int nreal;
    const cg_real_desc *real;
} cg_op_desc;

/* Decode steps (issue #36): the index tensors that choose a state cache's slots, by
 * tensor index in the op's t[] -- src [B] (the slot each entry reads; -1 padding), dst
 * [B, T] (optional: the slot each token's state goes to; -1 none) -- and the symbol of the
 * number of slots. Validation checks their values (cg__slots_check). */
typedef struct cg_slot_desc {
    int src, dst;
    cg_sym slots;
} cg_slot_desc;
/* d's slot description; NULL for an op without a state cache. */
const cg_slot_desc *cg__op_slots(const cg_op_desc *d);

/* Varlen (docs/varlen.md, runtime/varlen.c). The problem's cu_seqlens view (p NULL when absent). */
extern const cg_view cg__view_absent; /* an absent view (p NULL): the cu_seqlens of an op without them */
static inline cg_view *cg__prob_cu(const cg_op_desc *d, const void *prob) {
    return d->varlen ? (cg_view *)((char *)prob + d->varlen->view_off) : (cg_view *)&cg__view_absent;
}
/* The problem's number of sequences N (0 when cu_seqlens is absent), to read or set. */
static inline int64_t *cg__prob_nseq(const cg_op_desc *d, const void *prob) {
    return (int64_t *)((char *)prob + d->nseq_off);
}
/* Offset i of a cu_seqlens view (CG_I32 or CG_I64). */
static inline int64_t cg__cu_at(const cg_view *cu, int64_t i) {
    return cu->dt == CG_I64 ? ((const int64_t *)cu->p)[i * cu->s[0]] : (int64_t)((const int32_t *)cu->p)[i * cu->s[0]];
}
/* Validation's varlen part (validate.c): cu_seqlens' dtype, rank and the B = 1 rule into
 * *nseq (0 when absent), before the tensors' shapes are checked. */
cg_status cg__varlen_dims(cg_context *ctx, const cg_op_desc *d, const void *args, const int64_t dims[CG_SYM_COUNT],
                          const int src[CG_SYM_COUNT], int64_t *nseq);
/* The offsets' values (host-readable cu only): first 0, non-decreasing, last = T (L);
 * the message names the first bad entry. */
cg_status cg__varlen_check(cg_context *ctx, const cg_op_desc *d, const void *prob);
/* Validation's slot part (decode steps, cg__op_slots(d) set; validate.c): every index of a
 * host slot_src / slot_dst in [-1, S); no slot written twice; no slot written by one entry
 * and read by another. A message names the index tensor and the entry. */
cg_status cg__slots_check(cg_context *ctx, const cg_op_desc *d, const void *prob);
/* Run a varlen problem on host backend vt: one B = 1 sub-problem per sequence over
 * sub-views (states per sequence; shared gradients dA, dD, ddelta_bias summed). */
cg_status cg__varlen_run(cg_context *ctx, const cg_backend_vt *vt, cg_op op, const void *prob, const cg_cfg *cfg,
                         const cg_exec *exec);

/* The descriptor of op (never NULL for a valid op). */
const cg_op_desc *cg__op_desc(cg_op op);
/* Descriptor by name ("ssd_fwd"); NULL when unknown. */
const cg_op_desc *cg__op_find(const char *name);
/* Index of the tensor named name in d, or -1. */
int cg__op_tensor(const cg_op_desc *d, const char *name);

/* The view of tensor i in a validated problem of d (p == NULL when absent). */
static inline cg_view *cg__prob_view(const cg_op_desc *d, const void *prob, int i) {
    return (cg_view *)((char *)prob + d->t[i].view_off);
}
/* The cg_tensor of tensor i in an args struct of d. */
static inline cg_tensor *cg__args_tensor(const cg_op_desc *d, const void *args, int i) {
    return (cg_tensor *)((char *)args + d->t[i].arg_off);
}
/* Value of symbol s in a validated problem of d (1 for CG_SYM_NONE; 0 when not a symbol of d). */
int64_t cg__prob_dim(const cg_op_desc *d, const void *prob, cg_sym s);
/* Logical extents of tensor i in a validated problem (4 values, 1 where absent; a state's
 * first is N, the number of sequences, when the problem has cu_seqlens). */
void cg__prob_extents(const cg_op_desc *d, const void *prob, int i, int64_t n[4]);
/* Whether the problem's B/C are grouped (sscan); 0 for ops without the notion. */
int cg__prob_grouped(const cg_op_desc *d, const void *prob);
/* The caller's order of tensor i: the logical index of each dimension the caller gives
 * (head-major swaps T and heads; ungrouped leaves G out); returns ndim. */
int cg__op_given_order(const cg_op_desc *d, int i, int grouped, int hm, int order[4]);
/* Shape in the order the caller gives it (token-major, or head-major when hm) for tensor i
 * with the problem's symbol values; returns ndim. */
int cg__op_given_shape(const cg_op_desc *d, int i, const int64_t dims[CG_SYM_COUNT], int grouped, int hm,
                       int64_t shape[4]);
/* "[B, T, G, dk]" for tensor i (hm: head-major order; grouped: with G). */
void cg__op_dims_text(const cg_op_desc *d, int i, int grouped, int hm, char *buf, size_t cap);

/* The problem's symbol values from args (only the shapes of the defining tensors are read):
 * each symbol from the first required input that has it (q gives B, T, G, dk; v gives H,
 * dv; x gives B, L, D; A gives N; B gives G and whether the call is grouped); src[s] is
 * the index of the tensor that supplied s. Checks those tensors' presence and rank, the
 * symbols' positivity and the divisibility rule; messages start with the tensor's name. */
cg_status cg__op_derive_dims(cg_context *ctx, const cg_op_desc *d, const void *args, int hm, int64_t dims[CG_SYM_COUNT],
                             int src[CG_SYM_COUNT], int *grouped);
/* The dtype rules (docs/dtypes.md), the one implementation (validation calls it; the Python
 * bindings call it to give outputs their dtypes before a call). dt[i]: storage dtype of
 * tensor i of d in table order, inputs and outputs, -1 when absent. Rules: a call whose
 * first present tensor is CG_F64 is a float64 call, every tensor CG_F64; otherwise each
 * tensor is CG_F32, or -- where the table says CG_TD_HALF -- the call's one 16-bit dtype,
 * and an output has the dtype of the input it follows (cg__op_dtype_like; CG_F32 when that
 * input is absent or there is none). Fills want[i] for every tensor (the dtype it must
 * have; for an absent input, what it would have to be: CG_F32 or CG_F64) and *math (the
 * problem's dtype: CG_F32 or CG_F64). A present tensor that breaks a rule is CG_EINVAL with
 * a message naming it and the dtype expected. */
cg_status cg__op_dtypes(cg_context *ctx, const cg_op_desc *d, const int dt[], cg_dtype want[], cg_dtype *math);
/* The input whose dtype output i follows: the input it is the gradient of (dq: q), else a
 * 16-bit-capable forward output follows the first 16-bit-capable input of the same
 * extents (o: v, y: x); -1 for none (inputs, float32-only outputs without grad_of). */
int cg__op_dtype_like(const cg_op_desc *d, int i);
/* The first present tensor of a validated problem stored in a 16-bit dtype, or -1. */
int cg__prob_half(const cg_op_desc *d, const void *prob);

/* Validate args of op d and build its problem (memset first). The one argument checker. */
cg_status cg__op_validate(cg_context *ctx, const cg_op_desc *d, const void *args, void *prob);
/* As cg__op_validate; with outputs_optional, an output whose data pointer is NULL is not
 * checked (absent, as an optional tensor): cg_validate, before the outputs exist. */
cg_status cg__op_validate_ex(cg_context *ctx, const cg_op_desc *d, const void *args, void *prob, int outputs_optional);

/* Accuracy target (max |out - ref| / max |ref|) of an output class for an fp32 result. */
double cg__tol(cg_tol_class c);
/* The target of an output stored as dt (docs/dtypes.md, issue #15 item 5): bf16 1e-2, f16
 * 2e-3 (against the float64 reference on the same rounded inputs); cg__tol(c) otherwise. */
double cg__tol_dtype(cg_tol_class c, cg_dtype dt);

/* The dtype signature of a call (the tuning key's dtype field): "f32" when no input is
 * 16-bit; "bf16" / "f16" when every present 16-bit-capable input is; else the dtype and
 * the 16-bit inputs, "bf16-q-k" (a word: the store's key fields are words). Outputs follow from the inputs (cg__op_dtypes). dt[i]:
 * storage dtype of tensor i, -1 absent. */
void cg__op_dtype_sig(const cg_op_desc *d, const int dt[], char *buf, size_t cap);
/* The inverse for a problem with every tensor present: dt[i] for each tensor of d from
 * sig (inputs as sig says, outputs as cg__op_dtypes wants). CG_EINVAL naming sig when it
 * is not a signature of d. */
cg_status cg__op_dtype_unsig(cg_context *ctx, const cg_op_desc *d, const char *sig, int dt[]);
/* Relative error max |a - ref| / max |ref| (max |a - ref| when ref is all zero), fed one
 * element at a time; a NaN difference makes it INFINITY. The one relative-error helper of
 * the tests, the tuner's verification and the bench. Start from {0}. */
typedef struct cg_erracc {
    double maxd, maxr;
    int nan;
} cg_erracc;
static inline void cg__erracc_add(cg_erracc *e, double x, double ref) {
    double d = x - ref;
    if (d < 0) d = -d;
    if (d != d) e->nan = 1;
    else if (d > e->maxd) e->maxd = d;
    if (ref < 0) ref = -ref;
    if (ref > e->maxr) e->maxr = ref;
}
static inline double cg__erracc_value(const cg_erracc *e) {
    if (e->nan) return 1.0 / 0.0;
    return e->maxr > 0 ? e->maxd / e->maxr : e->maxd;
}

#endif /* CG_OPS_H */
