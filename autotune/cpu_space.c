/* cpu_space.c -- parameter spaces of the CPU path, described in Lua.
 *
 * generator/cpu/<name>.lua follows the convention of generator/kernels/<name>.lua with
 * backend = "cpu" (see the top of generator/core.lua); the generator core evaluates it
 * like a kernel's space: cg__gen_space enumerates the configs valid() accepts (the first
 * key of `order` outermost), cg__gen_resolve gives default()'s config. shape carries the
 * same fields as for generated kernels plus `bwd` (CG_KS_BWD); dev.sm_count is the
 * number of CPU threads, dev.name the CPU model and dev.isa the CPU path's ISA variant
 * (runtime/cpu/cpu_isa.h; empty: unknown, the space then assumes the narrowest tile). */
#include "autotune.h"

#include <string.h>

cg_status cg__tune_cpu_space(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags,
                             const cg_devinfo *dev, cg_cfg **out, int *n, cg_cfg *def) {
    *out = NULL;
    *n = 0;
    if (def) memset(def, 0, sizeof *def);
    /* Only the descriptions of generator/cpu/ (core.lua checks they say backend = "cpu"). */
    char rel[128], *text = NULL;
    snprintf(rel, sizeof rel, "generator/cpu/%s.lua", kernel);
    cg_status st = cg__gen_read_file(ctx, rel, &text, NULL);
    free(text);
    if (st != CG_OK) return cg__err(ctx, st, "tune: no CPU space '%s' (%s)", kernel, rel);
    cg_cfg *cfgs = NULL;
    int cnt = 0;
    if ((st = cg__gen_space(ctx, kernel, shape, flags, dev, &cfgs, &cnt)) != CG_OK) return st;
    if (def) {
        st = cg__gen_resolve(ctx, kernel, shape, flags, dev, NULL, def);
        if (st == CG_EUNSUPPORTED && cnt == 0) {
            /* nothing runs this shape: no default either */
            memset(def, 0, sizeof *def);
            ctx->errmsg[0] = '\0';
            st = CG_OK;
        }
        if (st != CG_OK) {
            free(cfgs);
            return st;
        }
    }
    *out = cfgs;
    *n = cnt;
    return CG_OK;
}
