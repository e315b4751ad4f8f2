/* sscan_cpu_params.c -- the selective scan CPU path's default parameters: those of
 * generator/cpu/sscan_cpu.lua's default(), the same the tuner starts from (asked through
 * cg__cpu_space_default, cached per shape); the path's entry points are in cpu_isa.c. */
#include "sscan_cpu.h"

#include "gen.h"
#include "ops.h"

#include <string.h>

cg_status cg__sscan_cpu_params_default(cg_context *ctx, const cg_sscan_prob *p, int bwd, cg_sscan_cpu_params *out) {
    memset(out, 0, sizeof *out);
    out->segment = 64, out->block_d = 16; /* an empty problem: nothing runs */
    if (CG_DIM(p, B) < 1 || CG_DIM(p, L) < 1 || CG_DIM(p, D) < 1 || CG_DIM(p, N) < 1 || CG_DIM(p, G) < 1) return CG_OK;
    cg_shape shape;
    cg__shape_of_prob(cg__op_desc(bwd ? CG_OP_SSCAN_BWD : CG_OP_SSCAN_FWD), p, &shape);
    cg_cfg def;
    cg_status st = cg__cpu_space_default(ctx, "sscan_cpu", &shape,
                                         (bwd ? CG_KS_BWD : 0) | (cg__sscan_seq_major(p) ? CG_KS_SEQ_MAJOR : 0), &def);
    if (st != CG_OK) return st;
    int64_t seg = 0, bd = 0, th = 0;
    if ((st = cg__cfg_pin_int(ctx, &def, "segment", 1, 1 << 20, "sscan_cpu.lua default", &seg, NULL)) != CG_OK ||
        (st = cg__cfg_pin_int(ctx, &def, "block_d", 1, 1 << 16, "sscan_cpu.lua default", &bd, NULL)) != CG_OK ||
        (st = cg__cfg_pin_int(ctx, &def, "threads", 0, 4096, "sscan_cpu.lua default", &th, NULL)) != CG_OK)
        return st;
    if (!seg || !bd) return cg__err(ctx, CG_EINTERNAL, "generator/cpu/sscan_cpu.lua: default without segment or block_d");
    out->segment = (int)seg, out->block_d = (int)bd, out->threads = (int)th;
    return CG_OK;
}
