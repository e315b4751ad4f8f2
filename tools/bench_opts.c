/* bench_opts.c -- `chunkgen bench`'s options: one table (tools/cli_args.h), its --help,
 * and the checks across options; the seeds' presets and the matrix of shapes they give. */
#include "bench.h"
#include "cli_args.h"
#include "cli_op.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char bench_usage[] =
    "usage: chunkgen bench [options]\n"
    "\n"
    "Runs the seeds' benchmark matrix and writes JSON rows in the seeds' schema.\n"
    "  SSD presets [batch, groups, heads, dk, dv]: g2h8_d128 [4,2,8,128,128],\n"
    "    g1h24_dk128_dv64 [2,1,24,128,64], g1h1_d128 [4,1,1,128,128], g2h4_dk48_dv40 [4,2,4,48,40]\n"
    "  selective scan: batch 4, dim 256/512/1024 (sscan_d256 ...), state 16\n"
    "  seq 512, 2048, 8192; modes fwd and fwd_bwd\n"
    "  impls: chunkgen_cpu, chunkgen_cuda (tuned), chunkgen_cuda_default, chunkgen_emulate\n"
    "         (seq <= --emu-max-seq), ref (float64 scan; skipped where too slow)\n"
    "Filters narrow the matrix; with none it runs all of it, except that a run without\n"
    "the cuda backend leaves out fwd_bwd at seq > 2048 unless --all is given.\n"
    "LIST = comma-separated values. Shapes: NAME:SYM=N,... (the shape syntax of every\n"
    "command, docs/shapes.md, without the op; the seq comes from --seq).\n";

int bench_usage_err(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cg_cli_usage_err("bench", "%s", msg);
}

/* Split a comma list into words of at most 47 chars; returns the count or -1. */
static int split_list(const char *s, char out[][48], int max) {
    int n = 0;
    while (*s) {
        const char *c = strchr(s, ',');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        if (len == 0 || len >= 48 || n >= max) return -1;
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        s += len + (c ? 1 : 0);
    }
    return n;
}

static int words_of(const char *v, char w[][48], char *err, size_t errlen) {
    int n = split_list(v, w, MAXLIST);
    if (n <= 0) snprintf(err, errlen, "expected a comma list (at most %d words), got '%s'", MAXLIST, v);
    return n;
}

static int opt_backend(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    char w[MAXLIST][48];
    int n = words_of(v, w, err, errlen);
    if (n <= 0) return -1;
    if (o->impls_given) return 0; /* --impls wins */
    o->backend_given = 1;
    for (int i = 0; i < n; i++) {
        if (!strcmp(w[i], "cpu")) o->want_cpu = 1;
        else if (!strcmp(w[i], "cuda")) o->want_cuda = o->want_cuda_def = 1;
        else if (!strcmp(w[i], "emulate")) o->want_emu = 1;
        else if (!strcmp(w[i], "ref")) o->want_ref = 1;
        else return snprintf(err, errlen, "unknown backend '%s' (expected cpu, cuda, emulate or ref)", w[i]), -1;
    }
    return 0;
}

static int opt_impls(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    char w[MAXLIST][48];
    int n = words_of(v, w, err, errlen);
    if (n <= 0) return -1;
    o->impls_given = 1;
    o->want_cpu = o->want_cuda = o->want_cuda_def = o->want_emu = o->want_ref = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < IMPL_COUNT && strcmp(w[i], k_impl_names[k])) k++;
        if (k == IMPL_COUNT)
            return snprintf(err, errlen,
                            "unknown impl '%s' (expected chunkgen_cpu, chunkgen_cuda, chunkgen_cuda_default, "
                            "chunkgen_emulate or ref)",
                            w[i]),
                   -1;
        int *want[IMPL_COUNT] = {&o->want_cpu, &o->want_cuda, &o->want_cuda_def, &o->want_emu, &o->want_ref};
        *want[k] = 1;
    }
    return 0;
}

static int opt_preset(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    int n = split_list(v, o->presets + o->npresets, MAXLIST - o->npresets);
    if (n <= 0) return snprintf(err, errlen, "expected a comma list of preset names, got '%s'", v), -1;
    o->npresets += n;
    return 0;
}

static int opt_seq(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    char w[MAXLIST][48];
    int n = split_list(v, w, MAXLIST - o->nseqs);
    if (n <= 0) return snprintf(err, errlen, "expected a comma list of lengths, got '%s'", v), -1;
    for (int i = 0; i < n; i++) {
        char *end;
        long long x = strtoll(w[i], &end, 10);
        if (*end || x < 1 || x > (1ll << 30))
            return snprintf(err, errlen, "expected integers in [1, 2^30], got '%s'", w[i]), -1;
        o->seqs[o->nseqs++] = x;
    }
    return 0;
}

/* The seeds' shapes (--preset; the matrix without filters): a family, a name and the
 * extents in the shape syntax without the sequence's (--seq gives those); states: the
 * family's optional state inputs are given (custom shapes of the family do the same). */
static const struct {
    const char *family, *name, *items;
    int states;
} k_presets[] = {
    /* clang-format off */
    {"ssd", "g2h8_d128", "B=4,G=2,H=8,dk=128,dv=128", 1},
    {"ssd", "g1h24_dk128_dv64", "B=2,G=1,H=24,dk=128,dv=64", 1},
    {"ssd", "g1h1_d128", "B=4,G=1,H=1,dk=128,dv=128", 1},
    {"ssd", "g2h4_dk48_dv40", "B=4,G=2,H=4,dk=48,dv=40", 1},
    {"sscan", "sscan_d256", "B=4,D=256,N=16", 0},
    {"sscan", "sscan_d512", "B=4,D=512,N=16", 0},
    {"sscan", "sscan_d1024", "B=4,D=1024,N=16", 0},
    /* clang-format on */
};
#define NPRESETS ((int)(sizeof k_presets / sizeof *k_presets))

/* The family's first preset (its example and its states), or -1. */
static int preset_of(const char *family) {
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(k_presets[i].family, family)) return i;
    return -1;
}

/* Shape NAME of family's forward op from items (the shape syntax of every command,
 * docs/shapes.md, cg_shape_parse, without the sequence symbol and without layout, dtype
 * or optional tensors: --layout, --dtype) into *f. */
static int config_parse(const char *family, const char *name, const char *items, bconfig *f, char *err, size_t errlen) {
    cli_op fwd;
    if (cli_op_find(family, 0, &fwd)) return snprintf(err, errlen, "no such op in this library"), -1;
    const char *seq = cg_sym_name(fwd.in.seq);
    for (const char *p = items; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) /* each item */
        if (!strncmp(p, seq, strlen(seq)) && p[strlen(seq)] == '=')
            return snprintf(err, errlen, "'%.*s': the sequence lengths come from --seq", (int)strcspn(p, ","), p), -1;
    static cg_context *ctx; /* the parse's messages */
    if (!ctx && cg_context_create(&ctx) != CG_OK) return snprintf(err, errlen, "cannot create a context"), -1;
    char text[CG_SHAPE_TEXT_MAX * 2], syms[128] = "";
    snprintf(text, sizeof text, "%s:%s,%s=1", fwd.in.name, items, seq);
    cg_shape s;
    memset(&s, 0, sizeof s);
    if (cg_shape_parse(ctx, text, &s) != CG_OK) return snprintf(err, errlen, "%s", cg_errmsg(ctx)), -1;
    for (int k = 0; k < fwd.in.nsyms; k++) /* the extents a shape gives: the op's but the sequence's, ungrouped */
        if (fwd.in.syms[k] != fwd.in.seq && !(fwd.in.groupable && fwd.in.syms[k] == fwd.in.divisor))
            snprintf(syms + strlen(syms), sizeof syms - strlen(syms), "%s%s", syms[0] ? ", " : "",
                     cg_sym_name(fwd.in.syms[k]));
    if (s.dtype != CG_F32 || s.layout != CG_LAYOUT_TOKEN_MAJOR || s.given || s.scalars || s.nseq || s.grouped)
        return snprintf(err, errlen, "'%s:%s': only the extents %s (layout and dtype: --layout, --dtype)", name, items,
                        syms),
               -1;
    memset(f, 0, sizeof *f);
    snprintf(f->family, sizeof f->family, "%s", family);
    snprintf(f->name, sizeof f->name, "%s", name);
    for (int k = 0; k < fwd.in.nsyms; k++) f->dims[fwd.in.syms[k]] = s.dim[fwd.in.syms[k]];
    f->dims[fwd.in.seq] = 0;
    if (fwd.in.groupable) f->dims[fwd.in.divisor] = 0; /* ungrouped: B, C without G */
    const int p = preset_of(family);
    f->states = p >= 0 && k_presets[p].states;
    return 0;
}

/* A custom shape (--ssd-shape / --sscan-shape) of family appended to the list: NAME:ITEMS. */
static int add_custom(bench_opts *o, const char *v, const char *family, char *err, size_t errlen) {
    if (o->ncustom >= 2 * MAXLIST) return snprintf(err, errlen, "at most %d shapes", 2 * MAXLIST), -1;
    const char *colon = strchr(v, ':');
    const int p = preset_of(family);
    if (!colon || colon == v || (size_t)(colon - v) >= sizeof o->custom[0].name)
        return snprintf(err, errlen, "expected NAME:ITEM,... (e.g. %s:%s), got '%s'", p >= 0 ? k_presets[p].name : "x",
                        p >= 0 ? k_presets[p].items : "B=1", v),
               -1;
    char name[48];
    snprintf(name, sizeof name, "%.*s", (int)(colon - v), v);
    if (config_parse(family, name, colon + 1, &o->custom[o->ncustom], err, errlen)) return -1;
    o->ncustom++;
    return 0;
}

static int opt_ssd_shape(void *opts, const char *v, char *err, size_t errlen) {
    return add_custom(opts, v, "ssd", err, errlen);
}
static int opt_sscan_shape(void *opts, const char *v, char *err, size_t errlen) {
    return add_custom(opts, v, "sscan", err, errlen);
}

static int opt_layout(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    if (!strcmp(v, "token") || !strcmp(v, "bthd")) o->layout = CG_LAYOUT_TOKEN_MAJOR;
    else if (!strcmp(v, "head") || !strcmp(v, "bhtd")) o->layout = CG_LAYOUT_HEAD_MAJOR;
    else return snprintf(err, errlen, "expected token or head, got '%s'", v), -1;
    return 0;
}

static int opt_dtype(void *opts, const char *v, char *err, size_t errlen) {
    bench_opts *o = opts;
    for (int dt = CG_F32; dt <= CG_F16; dt++)
        if (dt != CG_F64 && !strcmp(v, cg_dtype_name((cg_dtype)dt))) return o->dtype = (cg_dtype)dt, 0;
    return snprintf(err, errlen, "expected f32, bf16 or f16, got '%s'", v), -1;
}

#define I64(f) offsetof(bench_opts, f)
static const cg_cli_opt k_bench_opts[] = {
    {"--backend", 0, CG_CLI_FN, 0, "LIST", "cpu, cuda, emulate, ref (default: all that are available)", 0, 0,
     opt_backend},
    {"--impls", 0, CG_CLI_FN, 0, "LIST", "exact impl names (overrides --backend)", 0, 0, opt_impls},
    {"--op", 0, CG_CLI_CHOICE, offsetof(bench_opts, op), "ssd|sscan", "one op only", 1, 0, NULL},
    {"--preset", 0, CG_CLI_FN, 0, "LIST", "the seeds' shapes by name (e.g. g1h1_d128, sscan_d512)", 0, 0, opt_preset},
    {"--seq", 0, CG_CLI_FN, 0, "LIST", "sequence lengths (replace 512,2048,8192)", 0, 0, opt_seq},
    {"--mode", 0, CG_CLI_CHOICE, offsetof(bench_opts, mode), "fwd|fwd_bwd", "one mode only", 1, 0, NULL},
    {"--ssd-shape", 0, CG_CLI_FN, 0, "NAME:B=N,G=N,H=N,dk=N,dv=N",
     "a custom SSD shape (repeatable; replaces the\n"
     "presets; given alone, it also means --op ssd)",
     0, 0, opt_ssd_shape},
    {"--sscan-shape", 0, CG_CLI_FN, 0, "NAME:B=N,D=N,N=N", "a custom selective-scan shape (likewise)", 0, 0,
     opt_sscan_shape},
    {"--layout", 0, CG_CLI_FN, 0, "token|head", "SSD tensor layout (default token: [B,T,heads,dim])", 0, 0, opt_layout},
    {"--dtype", 0, CG_CLI_FN, 0, "f32|bf16|f16",
     "storage of the 16-bit-capable tensors (q k v o do ... / x delta B C z\n"
     "y dy ...; default f32); rows carry dtype and bytes moved",
     0, 0, opt_dtype},
    CG_CLI_OPT_CONFIG(bench_opts, config), /* not for chunkgen_cuda_default, which measures the default */
    {"--all", 0, CG_CLI_FLAG, offsetof(bench_opts, all), NULL, "also run the slow cells left out by default", 0, 0,
     NULL},
    CG_CLI_OPT_THREADS(bench_opts, threads),
    {"--repeats", 0, CG_CLI_INT, offsetof(bench_opts, repeats), "N", "samples at least (default 5)", 1, 1000, NULL},
    {"--min-time", 0, CG_CLI_F64, offsetof(bench_opts, min_time), "S",
     "seconds of samples at least, per row (default 1.0)", 0, 3600, NULL},
    {"--warmup", 0, CG_CLI_INT, offsetof(bench_opts, warmup), "N",
     "warm-up calls (default 1; the first one is compile_s)", 1, 100, NULL},
    {"--ref-seq", 0, CG_CLI_I64, I64(ref_seq), "N", "tokens of the reference cut for rel_err (default 2048)", 1,
     1 << 30, NULL},
    {"--ref-max-s", 0, CG_CLI_F64, offsetof(bench_opts, ref_max_s), "S",
     "skip the ref row when a call would take longer\n"
     "(default 2)",
     0, 1e6, NULL},
    {"--emu-max-seq", 0, CG_CLI_I64, I64(emu_max_seq), "N",
     "largest seq for chunkgen_emulate (default 64; with no --seq\n"
     "the matrix gains cells at that seq, for the emulator)",
     0, 1 << 30, NULL},
    {"--no-check", 0, CG_CLI_FLAG, offsetof(bench_opts, no_check), NULL, "skip rel_err (no reference run)", 0, 0, NULL},
    {"--no-probe", 0, CG_CLI_FLAG, offsetof(bench_opts, no_probe), NULL, "skip the peak FMA / bandwidth measurements",
     0, 0, NULL},
    {"--commit", 0, CG_CLI_STR, offsetof(bench_opts, commit), "STR", "commit id recorded in the config block", 0, 0,
     NULL},
    {"--out", 0, CG_CLI_STR, offsetof(bench_opts, out), "FILE", "JSON output (default: stdout)", 0, 0, NULL},
    {"--quiet", 0, CG_CLI_FLAG, offsetof(bench_opts, quiet), NULL, "no progress lines on stderr", 0, 0, NULL},
    CG_CLI_OPT_VERBOSE(bench_opts, verbose, "also print each row's dispatch line (backend, config, source)"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_bench_cmd = {"bench", bench_usage, k_bench_opts, NULL, NULL};

int bench_parse_opts(int argc, char **argv, bench_opts *o) {
    /* the defaults (every other option off) */
    *o = (bench_opts){.layout = CG_LAYOUT_TOKEN_MAJOR,
                      .repeats = 5,
                      .warmup = 1,
                      .min_time = 1.0,
                      .ref_seq = 2048,
                      .ref_max_s = 2.0,
                      .emu_max_seq = 64};
    int rc = cg_cli_parse(&k_bench_cmd, argc, argv, o);
    if (rc) return rc;
    /* --config pins a kernel config (k=v,...), as in `chunkgen run`; the seeds' shapes
     * are --preset (what an older `bench --config NAME` meant). */
    char buf[512], err[256];
    const char *part;
    if (o->config && cg_cli_config_for(o->config, cg_op_name((cg_op)0), buf, sizeof buf, &part, err, sizeof err))
        return bench_usage_err("--config: %s", err); /* an unknown scope (any op checks them all) */
    if (o->config && !strchr(o->config, '='))
        return bench_usage_err("--config: expected k=v,... (a kernel config, as in `chunkgen run`), got '%s'; the "
                               "seeds' shapes by name are --preset %s",
                               o->config, o->config);
    if (o->op) { /* --op's family: the op'th word of its choices */
        const cg_cli_opt *op = k_bench_opts;
        while (strcmp(op->name, "--op")) op++;
        const char *w = op->meta;
        for (int k = 1; k < o->op; k++) w += strcspn(w, "|") + 1;
        snprintf(o->family_buf, sizeof o->family_buf, "%.*s", (int)strcspn(w, "|"), w);
        o->family = o->family_buf;
    }
    if (!o->backend_given && !o->impls_given)
        o->want_cpu = o->want_cuda = o->want_cuda_def = o->want_emu = o->want_ref = 1;
    return 0;
}

static int name_selected(const bench_opts *o, const char *name) {
    if (!o->npresets) return 1;
    for (int i = 0; i < o->npresets; i++)
        if (!strcmp(o->presets[i], name)) return 1;
    return 0;
}

int bench_matrix(const bench_opts *o, bconfig *cfgs, int max) {
    int n = 0;
    char err[512];
    for (int op = 0; op < cg_op_count(); op++) { /* the families, in the op table's order */
        cli_op fo;
        if (cli_op_load((cg_op)op, &fo) || fo.in.bwd || (o->family && strcmp(o->family, fo.in.family))) continue;
        int ncust = 0;
        for (int i = 0; i < o->ncustom; i++) ncust += !strcmp(o->custom[i].family, fo.in.family);
        if (!o->family && o->ncustom && !ncust) continue; /* custom shapes of some families only: those */
        for (int i = 0; i < o->ncustom && n < max; i++)
            if (!strcmp(o->custom[i].family, fo.in.family)) cfgs[n++] = o->custom[i];
        for (int i = 0; !ncust && i < NPRESETS && n < max; i++) {
            if (strcmp(k_presets[i].family, fo.in.family) || !name_selected(o, k_presets[i].name)) continue;
            if (config_parse(k_presets[i].family, k_presets[i].name, k_presets[i].items, &cfgs[n], err, sizeof err))
                return bench_usage_err("preset %s: %s", k_presets[i].name, err), -1;
            n++;
        }
    }
    for (int i = 0; i < o->npresets && !o->ncustom; i++) {
        int found = 0;
        for (int k = 0; k < n; k++) found |= !strcmp(cfgs[k].name, o->presets[i]);
        if (found) continue;
        char names[512] = "";
        for (int k = 0; k < NPRESETS; k++) {
            const int first = k == 0 || strcmp(k_presets[k - 1].family, k_presets[k].family);
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s%s%s",
                     k && first ? "; "
                     : k        ? ", "
                                : "",
                     first ? k_presets[k].family : "", first ? ": " : "", k_presets[k].name);
        }
        return bench_usage_err("--preset: no preset named '%s' for the chosen op (%s)", o->presets[i], names), -1;
    }
    if (!n) return bench_usage_err("no config left after the filters"), -1;
    return n;
}
