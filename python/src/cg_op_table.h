/* cg_op_table.h -- the four ops' argument structs as tables: each op's tensor fields in
 * order (name, offset in its cg_*_args, input or output), its int flag (layout for SSD,
 * delta_softplus for the selective scan) and its C call. The one source of truth for that
 * order in the Python package: the CPython module chunkgen._C (cg_module.c, which hands it to
 * Python through ops()) and the XLA FFI shim chunkgen._jax_ffi (cg_jax_ffi.cc) both include it.
 * C and C++. */
#ifndef CG_OP_TABLE_H
#define CG_OP_TABLE_H

#include <stddef.h>

#include "chunkgen.h"

typedef struct field {
    const char *name;
    size_t off;
    int output;
} field;

#define FI(S, n) {#n, offsetof(S, n), 0}
#define FO(S, n) {#n, offsetof(S, n), 1}

static const field ssd_fwd_fields[] = {
    FI(cg_ssd_fwd_args, q), FI(cg_ssd_fwd_args, k), FI(cg_ssd_fwd_args, v), FI(cg_ssd_fwd_args, log_alpha),
    FI(cg_ssd_fwd_args, h0), FO(cg_ssd_fwd_args, o), FO(cg_ssd_fwd_args, hT)};
static const field ssd_bwd_fields[] = {
    FI(cg_ssd_bwd_args, q), FI(cg_ssd_bwd_args, k), FI(cg_ssd_bwd_args, v), FI(cg_ssd_bwd_args, log_alpha),
    FI(cg_ssd_bwd_args, h0), FI(cg_ssd_bwd_args, dout), FI(cg_ssd_bwd_args, dhT), FO(cg_ssd_bwd_args, dq),
    FO(cg_ssd_bwd_args, dk), FO(cg_ssd_bwd_args, dv), FO(cg_ssd_bwd_args, dlog_alpha), FO(cg_ssd_bwd_args, dh0)};
static const field sscan_fwd_fields[] = {
    FI(cg_sscan_fwd_args, x), FI(cg_sscan_fwd_args, delta), FI(cg_sscan_fwd_args, A), FI(cg_sscan_fwd_args, B),
    FI(cg_sscan_fwd_args, C), FI(cg_sscan_fwd_args, D), FI(cg_sscan_fwd_args, z), FI(cg_sscan_fwd_args, delta_bias),
    FI(cg_sscan_fwd_args, h0), FO(cg_sscan_fwd_args, y), FO(cg_sscan_fwd_args, hT)};
static const field sscan_bwd_fields[] = {
    FI(cg_sscan_bwd_args, x), FI(cg_sscan_bwd_args, delta), FI(cg_sscan_bwd_args, A), FI(cg_sscan_bwd_args, B),
    FI(cg_sscan_bwd_args, C), FI(cg_sscan_bwd_args, D), FI(cg_sscan_bwd_args, z),
    FI(cg_sscan_bwd_args, delta_bias), FI(cg_sscan_bwd_args, h0), FI(cg_sscan_bwd_args, dy),
    FI(cg_sscan_bwd_args, dhT), FO(cg_sscan_bwd_args, dx), FO(cg_sscan_bwd_args, ddelta),
    FO(cg_sscan_bwd_args, dA), FO(cg_sscan_bwd_args, dB), FO(cg_sscan_bwd_args, dC), FO(cg_sscan_bwd_args, dD),
    FO(cg_sscan_bwd_args, dz), FO(cg_sscan_bwd_args, ddelta_bias), FO(cg_sscan_bwd_args, dh0)};

typedef union any_args {
    cg_ssd_fwd_args ssd_fwd;
    cg_ssd_bwd_args ssd_bwd;
    cg_sscan_fwd_args sscan_fwd;
    cg_sscan_bwd_args sscan_bwd;
} any_args;

/* The op's int flag: layout for SSD, delta_softplus for the selective scan. */
static void flag_ssd_fwd(any_args *a, int flag) { a->ssd_fwd.layout = flag ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR; }
static void flag_ssd_bwd(any_args *a, int flag) { a->ssd_bwd.layout = flag ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR; }
static void flag_sscan_fwd(any_args *a, int flag) { a->sscan_fwd.delta_softplus = flag != 0; }
static void flag_sscan_bwd(any_args *a, int flag) { a->sscan_bwd.delta_softplus = flag != 0; }
static cg_status call_ssd_fwd(cg_context *c, any_args *a, const cg_exec *e) { return cg_ssd_fwd(c, &a->ssd_fwd, e); }
static cg_status call_ssd_bwd(cg_context *c, any_args *a, const cg_exec *e) { return cg_ssd_bwd(c, &a->ssd_bwd, e); }
static cg_status call_sscan_fwd(cg_context *c, any_args *a, const cg_exec *e) { return cg_sscan_fwd(c, &a->sscan_fwd, e); }
static cg_status call_sscan_bwd(cg_context *c, any_args *a, const cg_exec *e) { return cg_sscan_bwd(c, &a->sscan_bwd, e); }

typedef struct op_desc {
    const char *name;
    const field *fields;
    int nfields;
    cg_op id;
    void (*flag)(any_args *, int);
    cg_status (*call)(cg_context *, any_args *, const cg_exec *);
} op_desc;

#define NF(a) (int)(sizeof(a) / sizeof((a)[0]))
static const op_desc ops[] = {
    {"ssd_fwd", ssd_fwd_fields, NF(ssd_fwd_fields), CG_OP_SSD_FWD, flag_ssd_fwd, call_ssd_fwd},
    {"ssd_bwd", ssd_bwd_fields, NF(ssd_bwd_fields), CG_OP_SSD_BWD, flag_ssd_bwd, call_ssd_bwd},
    {"sscan_fwd", sscan_fwd_fields, NF(sscan_fwd_fields), CG_OP_SSCAN_FWD, flag_sscan_fwd, call_sscan_fwd},
    {"sscan_bwd", sscan_bwd_fields, NF(sscan_bwd_fields), CG_OP_SSCAN_BWD, flag_sscan_bwd, call_sscan_bwd},
};
#define NOPS NF(ops)
#define MAXF 20

#endif /* CG_OP_TABLE_H */
