/* emu_state.c -- a context's emulator state (emu.h cg_emu_state): made on the context's
 * first use of the emulator (reading CHUNKGEN_EMU_RACECHECK and CHUNKGEN_EMU_STATS then),
 * freed with the context: the statistics JSON written when CHUNKGEN_EMU_STATS asked for
 * it, the launches' statistics and the loaded modules freed.
 *
 * Above the statistics (emu_stats_out.c), which record into a state they are handed; below
 * the modules (emu_module.c) and the executor (emu_kexec.c), which ask for the state. */
#include "emu.h"
#include "env.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

/* dlclose, and remove the copy kept for addr2line (statistics). */
void cg__emu_module_free(cg_emu_module *m) {
    if (m->dl) dlclose(m->dl);
    if (m->so_path[0]) {
        unlink(m->so_path);
        char *slash = strrchr(m->so_path, '/');
        if (slash) *slash = '\0';
        rmdir(m->so_path);
    }
    cg__emu_linemap_free(&m->lines);
    free(m);
}

static void emu_ctx_free(cg_context *ctx) {
    cg_emu_state *st = ctx->part[CG_PART_EMU].p;
    if (!st) return;
    if (st->stats_path[0] && cg__emu_stats_write_json(ctx, st, st->stats_path) != CG_OK)
        cg__log(CG_LOG_WARN, "%s", cg_errmsg(ctx));
    cg__emu_stats_free_launches(st);
    for (int i = 0; i < st->n; i++) cg__emu_module_free(st->mods[i]);
    free(st->mods);
    free(st);
    ctx->part[CG_PART_EMU].p = NULL;
}

cg_emu_state *cg__emu_state(cg_context *ctx) {
    if (!ctx->part[CG_PART_EMU].p) {
        cg_emu_state *st = calloc(1, sizeof *st);
        if (!st) return NULL;
        const char *r = cg__env(CG_ENV_EMU_RACECHECK);
        st->racecheck = r && strcmp(r, "0") != 0;
        const char *sp = cg__env(CG_ENV_EMU_STATS);
        if (sp) {
            st->stats = 1;
            snprintf(st->stats_path, sizeof st->stats_path, "%s", sp);
        }
        ctx->part[CG_PART_EMU].p = st;
        ctx->part[CG_PART_EMU].free = emu_ctx_free;
    }
    return ctx->part[CG_PART_EMU].p;
}

cg_status cg__emu_stats_enable(cg_context *ctx, int on) {
    cg_emu_state *st = cg__emu_state(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    st->stats = on != 0;
    return CG_OK;
}
