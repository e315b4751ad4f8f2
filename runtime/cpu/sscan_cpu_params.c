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
    int64_t seg, bd, th;
    const cg_cpu_pin pins[] = {
        {"segment", 1, 1 << 20, &seg, 1}, {"block_d", 1, 1 << 16, &bd, 1}, {"threads", 0, 4096, &th, 0}};
    const int flags = (bwd ? CG_KS_BWD : 0) | (cg__sscan_seq_major(p) ? CG_KS_SEQ_MAJOR : 0);
    cg_status st =
        cg__cpu_default_pins(ctx, "sscan_cpu", bwd ? CG_OP_SSCAN_BWD : CG_OP_SSCAN_FWD, p, flags, pins, 3, NULL);
    if (st != CG_OK) return st;
    out->segment = (int)seg, out->block_d = (int)bd, out->threads = (int)th;
    return CG_OK;
}
