/* emu_stats_out.c -- the emulator's access statistics as a report reads them: a
 * launch's counters resolved to template lines (addr2line on the module, then the
 * rendered source's `// ---- begin/end FILE` marks), the context's list of launches,
 * and its JSON (schema "chunkgen-emu-stats/1", docs/emulator.md). emu_stats.c counts. */
#include "emu.h"
#include "fsutil.h"

#include <jansson.h>
#include <string.h>

/* ----------------------------------------------------------------- line map */
void cg__emu_linemap_free(cg_emu_linemap *lm) {
    free(lm->file);
    free(lm->fidx);
    free(lm->fline);
    memset(lm, 0, sizeof *lm);
}

static int lm_file(cg_emu_linemap *lm, const char *name, size_t n) {
    if (n >= sizeof lm->file[0]) n = sizeof lm->file[0] - 1;
    for (int i = 0; i < lm->nfile; i++)
        if (strlen(lm->file[i]) == n && memcmp(lm->file[i], name, n) == 0) return i;
    char(*f)[64] = realloc(lm->file, (size_t)(lm->nfile + 1) * sizeof *f);
    if (!f) return -1;
    lm->file = f;
    memcpy(f[lm->nfile], name, n);
    f[lm->nfile][n] = '\0';
    return lm->nfile++;
}

/* Rendered line -> (file, line). A generated source (a `from templates/X` line in its
 * head) starts template X after its first empty line; any other source is its own
 * file, <plan name>.cu. `// ---- begin F` stands for the #include line of the file
 * around it, then F's lines follow until `// ---- end F`. */
int cg__emu_linemap_build(cg_emu_linemap *lm, const char *plan_name, const char *source) {
    memset(lm, 0, sizeof *lm);
    snprintf(lm->cu, sizeof lm->cu, "%s.cu", plan_name);
    if (!source) return -1;
    int nl = 1;
    for (const char *p = source; *p; p++) nl += *p == '\n';
    lm->nline = nl;
    lm->fidx = malloc((size_t)(nl + 1) * sizeof *lm->fidx);
    lm->fline = malloc((size_t)(nl + 1) * sizeof *lm->fline);
    if (!lm->fidx || !lm->fline) return -1;
    int stack[17][2], depth = 0, started = 1;
    const char *from = NULL;
    for (int k = 0, i = 0; k < 6 && source[i]; k++) { /* the generated head */
        const char *e = strchr(source + i, '\n');
        size_t len = e ? (size_t)(e - source - i) : strlen(source + i);
        const char *q = memmem(source + i, len, "from templates/", 15);
        if (q) {
            from = q + 15;
            break;
        }
        i += (int)len + (e ? 1 : 0);
    }
    if (from) {
        size_t n = strcspn(from, " \n");
        stack[0][0] = lm_file(lm, from, n);
        started = 0;
    } else {
        stack[0][0] = lm_file(lm, lm->cu, strlen(lm->cu));
    }
    if (stack[0][0] < 0) return -1;
    stack[0][1] = 0;
    lm->fidx[0] = -1;
    lm->fline[0] = 0;
    const char *p = source;
    for (int line = 1; line <= nl; line++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int fi = -1, fl = 0;
        if (!started) {
            if (len == 0) started = 1;
        } else if (len > 14 && memcmp(p, "// ---- begin ", 14) == 0 && depth < 16) {
            fi = stack[depth][0];
            fl = ++stack[depth][1];
            int f = lm_file(lm, p + 14, len - 14);
            if (f < 0) return -1;
            depth++;
            stack[depth][0] = f;
            stack[depth][1] = 0;
        } else if (len > 12 && memcmp(p, "// ---- end ", 12) == 0 && depth > 0) {
            depth--;
        } else {
            fi = stack[depth][0];
            fl = ++stack[depth][1];
        }
        lm->fidx[line] = fi;
        lm->fline[line] = fl;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* ------------------------------------------------------------ pc -> line */
typedef struct pc_line {
    int fidx, line;
} pc_line;

/* One addr2line frame "path:line[ (discriminator n)]": the rendered line when path is
 * the module's .cu, else 0. */
static int frame_line(const cg_emu_linemap *lm, const char *s) {
    const char *colon = strrchr(s, ':');
    if (!colon) return 0;
    const char *base = s;
    for (const char *q = s; q < colon; q++)
        if (*q == '/') base = q + 1;
    size_t n = (size_t)(colon - base);
    if (n != strlen(lm->cu) || memcmp(base, lm->cu, n) != 0) return 0;
    return atoi(colon + 1);
}

/* The innermost frame of the module's source outside cg_device.cuh, else the innermost
 * of the module's source. */
static void pick_frame(const cg_emu_linemap *lm, char **frames, int nf, pc_line *out) {
    out->fidx = -1;
    out->line = 0;
    for (int pass = 0; pass < 2 && out->fidx < 0; pass++)
        for (int i = 0; i < nf; i++) {
            int l = frame_line(lm, frames[i]);
            if (l <= 0 || l > lm->nline || lm->fidx[l] < 0) continue;
            if (pass == 0 && strcmp(lm->file[lm->fidx[l]], "cg_device.cuh") == 0) continue;
            out->fidx = lm->fidx[l];
            out->line = lm->fline[l];
            break;
        }
}

/* Lines of pcs[0..n) (addresses in the shared object) by addr2line; unknown stay -1. */
static void resolve(const cg_emu_module *m, const uintptr_t *pcs, int n, pc_line *out) {
    for (int i = 0; i < n; i++) out[i].fidx = -1, out[i].line = 0;
    if (!m->so_path[0] || !m->lines.fidx || strchr(m->so_path, '\'')) return; /* quoted below */
    for (int i0 = 0; i0 < n; i0 += 256) {
        const int i1 = i0 + 256 < n ? i0 + 256 : n;
        size_t cap = strlen(m->so_path) + 64 + (size_t)(i1 - i0) * 20;
        char *cmd = malloc(cap), *outp = NULL;
        if (!cmd) return;
        size_t k = (size_t)snprintf(cmd, cap, "addr2line -a -i -p -e '%s'", m->so_path);
        for (int i = i0; i < i1; i++) k += (size_t)snprintf(cmd + k, cap - k, " 0x%lx", (unsigned long)pcs[i]);
        snprintf(cmd + k, cap - k, " 2>/dev/null");
        int rc = cg__emu_run_cmd(cmd, &outp);
        free(cmd);
        if (rc == 0 && outp) {
            /* "0xADDR: frame\n (inlined by) frame\n" per address, in order */
            char *frames[32];
            int nf = 0, cur = i0 - 1;
            char *save = NULL;
            for (char *line = strtok_r(outp, "\n", &save);; line = strtok_r(NULL, "\n", &save)) {
                if (!line || strncmp(line, "0x", 2) == 0) {
                    if (cur >= i0 && cur < i1) pick_frame(&m->lines, frames, nf, &out[cur]);
                    if (!line) break;
                    cur++;
                    nf = 0;
                    char *c = strstr(line, ": ");
                    if (c && nf < 32) frames[nf++] = c + 2;
                } else {
                    char *c = strstr(line, "(inlined by) ");
                    if (c && nf < 32) frames[nf++] = c + 13;
                }
            }
        }
        free(outp);
    }
}

/* ---------------------------------------------------------------- finish */
static int width_class(unsigned w) {
    switch (w) {
    case 1: return 0;
    case 2: return 1;
    case 4: return 2;
    case 8: return 3;
    case 16: return 4;
    default: return 5;
    }
}

static int line_cmp(const void *a, const void *b) {
    const cg_emu_line_stat *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    if (c) return c;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    if (x->space != y->space) return x->space - y->space;
    if (x->store != y->store) return x->store - y->store;
    return (x->width > y->width) - (x->width < y->width);
}

cg_status cg__emu_stats_finish(cg_context *ctx, cg_emu_state *st, const cg_emu_module *m, const cg_emu_grid *g,
                               cg_emu_gstats *gs) {
    const int n = cg__emu_gstats_n(gs);
    cg_emu_launch_stats L;
    memset(&L, 0, sizeof L);
    snprintf(L.kernel, sizeof L.kernel, "%s", g->name);
    snprintf(L.plan, sizeof L.plan, "%s", m->name);
    for (int k = 0; k < 3; k++) {
        L.grid[k] = g->grid[k];
        L.block[k] = g->block[k];
    }
    L.smem = g->smem;
    cg__emu_gstats_totals(gs, &L.blocks, &L.dropped);
    uintptr_t *pcs = malloc((size_t)(n ? n : 1) * sizeof *pcs);
    pc_line *pl = malloc((size_t)(n ? n : 1) * sizeof *pl);
    L.lines = malloc((size_t)(n ? n : 1) * sizeof *L.lines);
    if (!pcs || !pl || !L.lines) {
        free(pcs);
        free(pl);
        free(L.lines);
        return cg__err(ctx, CG_ENOMEM, "emulate: out of memory for the access statistics");
    }
    for (int i = 0; i < n; i++) {
        int sp, wr;
        unsigned w;
        uint64_t c[3];
        cg__emu_gstats_at(gs, i, &pcs[i], &sp, &wr, &w, c);
        pcs[i] = pcs[i] - m->base - 1; /* the call before the return address */
    }
    resolve(m, pcs, n, pl);
    for (int i = 0; i < n; i++) {
        uintptr_t pc;
        int sp, wr;
        unsigned w;
        uint64_t c[3];
        cg__emu_gstats_at(gs, i, &pc, &sp, &wr, &w, c);
        L.requests[sp] += c[0];
        L.units[sp] += c[1];
        L.ideal[sp] += c[2];
        L.by_width[sp][width_class(w)] += c[0];
        cg_emu_line_stat ls;
        memset(&ls, 0, sizeof ls);
        if (pl[i].fidx >= 0) snprintf(ls.file, sizeof ls.file, "%s", m->lines.file[pl[i].fidx]);
        ls.line = pl[i].line;
        ls.space = sp;
        ls.store = wr;
        ls.width = w;
        int j = 0;
        while (j < L.nlines && line_cmp(&L.lines[j], &ls) != 0) j++;
        if (j == L.nlines) L.lines[L.nlines++] = ls;
        L.lines[j].requests += c[0];
        L.lines[j].units += c[1];
        L.lines[j].ideal += c[2];
    }
    free(pcs);
    free(pl);
    qsort(L.lines, (size_t)L.nlines, sizeof *L.lines, line_cmp);
    if (st->nlaunches == st->launches_cap) {
        int cap = st->launches_cap ? st->launches_cap * 2 : 16;
        cg_emu_launch_stats *nl = realloc(st->launches, (size_t)cap * sizeof *nl);
        if (!nl) {
            free(L.lines);
            return cg__err(ctx, CG_ENOMEM, "emulate: out of memory for the access statistics");
        }
        st->launches = nl;
        st->launches_cap = cap;
    }
    st->launches[st->nlaunches++] = L;
    return CG_OK;
}

/* -------------------------------------------------------------------- API */
void cg__emu_stats_free_launches(cg_emu_state *st) {
    for (int i = 0; i < st->nlaunches; i++) free(st->launches[i].lines);
    free(st->launches);
    st->launches = NULL;
    st->nlaunches = st->launches_cap = 0;
}

int cg__emu_stats_count(cg_context *ctx) {
    cg_emu_state *st = ctx->part[CG_PART_EMU].p;
    return st ? st->nlaunches : 0;
}

const cg_emu_launch_stats *cg__emu_stats_get(cg_context *ctx, int i) {
    cg_emu_state *st = ctx->part[CG_PART_EMU].p;
    return st && i >= 0 && i < st->nlaunches ? &st->launches[i] : NULL;
}

void cg__emu_stats_clear(cg_context *ctx) {
    cg_emu_state *st = ctx->part[CG_PART_EMU].p;
    if (st) cg__emu_stats_free_launches(st);
}

static const char *const k_space[2] = {"shared", "global"};
static const char *const k_width[CG_EMU_NWIDTH] = {"1", "2", "4", "8", "16", "other"};

static json_t *space_json(const cg_emu_launch_stats *L, int sp) {
    json_t *o = json_object(), *bw = json_object();
    json_object_set_new(o, "requests", json_integer((json_int_t)L->requests[sp]));
    json_object_set_new(o, sp ? "sectors" : "wavefronts", json_integer((json_int_t)L->units[sp]));
    json_object_set_new(o, sp ? "ideal_sectors" : "ideal_wavefronts", json_integer((json_int_t)L->ideal[sp]));
    for (int k = 0; k < CG_EMU_NWIDTH; k++)
        if (L->by_width[sp][k]) json_object_set_new(bw, k_width[k], json_integer((json_int_t)L->by_width[sp][k]));
    json_object_set_new(o, "by_width", bw);
    return o;
}

static json_t *uint3_json(const unsigned v[3]) { return json_pack("[iii]", (int)v[0], (int)v[1], (int)v[2]); }

cg_status cg__emu_stats_write_json(cg_context *ctx, const cg_emu_state *st, const char *path) {
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "schema", json_string("chunkgen-emu-stats/1"));
    json_object_set_new(root, "model",
                        json_pack("{s:i,s:i,s:i,s:{s:i,s:i,s:i}}", "banks", 32, "bank_bytes", 4, "sector_bytes", 32,
                                  "phase_lanes", "4", 32, "8", 16, "16", 8));
    for (int i = 0; i < st->nlaunches; i++) {
        const cg_emu_launch_stats *L = &st->launches[i];
        json_t *o = json_object(), *lines = json_array();
        json_object_set_new(o, "kernel", json_string(L->kernel));
        json_object_set_new(o, "plan", json_string(L->plan));
        json_object_set_new(o, "grid", uint3_json(L->grid));
        json_object_set_new(o, "block", uint3_json(L->block));
        json_object_set_new(o, "smem", json_integer((json_int_t)L->smem));
        json_object_set_new(o, "blocks", json_integer((json_int_t)L->blocks));
        json_object_set_new(o, "dropped", json_integer((json_int_t)L->dropped));
        json_object_set_new(o, "shared", space_json(L, 0));
        json_object_set_new(o, "global", space_json(L, 1));
        for (int j = 0; j < L->nlines; j++) {
            const cg_emu_line_stat *s = &L->lines[j];
            json_t *e = json_object();
            json_object_set_new(e, "file", json_string(s->file));
            json_object_set_new(e, "line", json_integer(s->line));
            json_object_set_new(e, "space", json_string(k_space[s->space]));
            json_object_set_new(e, "op", json_string(s->store ? "store" : "load"));
            json_object_set_new(e, "width", json_integer((json_int_t)s->width));
            json_object_set_new(e, "requests", json_integer((json_int_t)s->requests));
            json_object_set_new(e, s->space ? "sectors" : "wavefronts", json_integer((json_int_t)s->units));
            json_object_set_new(e, s->space ? "ideal_sectors" : "ideal_wavefronts", json_integer((json_int_t)s->ideal));
            json_array_append_new(lines, e);
        }
        json_object_set_new(o, "lines", lines);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "launches", arr);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory for the statistics JSON");
    char why[256];
    int rc = cg__write_file_atomic(path, text, strlen(text), 0, why, sizeof why);
    free(text);
    if (rc != 0)
        return cg__err(ctx, CG_EIO, "emulate: cannot write the access statistics to %s (CHUNKGEN_EMU_STATS): %s", path,
                       why);
    return CG_OK;
}
