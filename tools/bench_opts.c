/* bench_opts.c -- `chunkgen bench`'s options: one table (tools/cli_args.h), its --help,
 * and the checks across options. */
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
            return snprintf(err, errlen, "unknown impl '%s' (expected chunkgen_cpu, chunkgen_cuda, chunkgen_cuda_default, "
                                         "chunkgen_emulate or ref)", w[i]), -1;
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
        if (*end || x < 1 || x > (1ll << 30)) return snprintf(err, errlen, "expected integers in [1, 2^30], got '%s'", w[i]), -1;
        o->seqs[o->nseqs++] = x;
    }
    return 0;
}

/* A custom shape (--ssd-shape / --sscan-shape) appended to its list: NAME:ITEMS, ITEMS the
 * shape syntax of every command (docs/shapes.md, cg_shape_parse) for the family's forward
 * op, without its sequence symbol (the bench's lengths come from --seq) and without
 * layout, dtype or optional tensors (--layout, --dtype). */
static int add_custom(bench_opts *o, const char *v, int sscan, char *err, size_t errlen) {
    int *n = sscan ? &o->nsscan_custom : &o->nssd_custom;
    custom_shape *cs = (sscan ? o->sscan_custom : o->ssd_custom) + *n;
    if (*n >= MAXLIST) return snprintf(err, errlen, "at most %d shapes", MAXLIST), -1;
    cli_op fwd;
    const char *colon = strchr(v, ':');
    if (cli_op_find(sscan ? "sscan" : "ssd", 0, &fwd)) return snprintf(err, errlen, "no such op in this library"), -1;
    const char *seq = cg_sym_name(fwd.in.seq);
    if (!colon || colon == v || (size_t)(colon - v) >= sizeof cs->name)
        return snprintf(err, errlen, "expected NAME:ITEM,... (e.g. %s), got '%s'",
                        sscan ? "s1:B=4,D=512,N=16" : "g2:B=4,G=2,H=8,dk=128,dv=128", v), -1;
    for (const char *p = colon + 1; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) /* each item */
        if (!strncmp(p, seq, strlen(seq)) && p[strlen(seq)] == '=')
            return snprintf(err, errlen, "'%.*s': the sequence lengths come from --seq", (int)strcspn(p, ","), p), -1;
    static cg_context *ctx; /* the parse's messages */
    if (!ctx && cg_context_create(&ctx) != CG_OK) return snprintf(err, errlen, "cannot create a context"), -1;
    char text[CG_SHAPE_TEXT_MAX * 2];
    snprintf(text, sizeof text, "%s:%s,%s=1", fwd.in.name, colon + 1, seq);
    cg_shape s;
    memset(&s, 0, sizeof s);
    if (cg_shape_parse(ctx, text, &s) != CG_OK) return snprintf(err, errlen, "%s", cg_errmsg(ctx)), -1;
    if (s.dtype != CG_F32 || s.layout != CG_LAYOUT_TOKEN_MAJOR || s.given || s.scalars || s.nseq || s.grouped)
        return snprintf(err, errlen, "'%s': only the extents %s (layout and dtype: --layout, --dtype)", v,
                        sscan ? "B, D, N" : "B, G, H, dk, dv"), -1;
    snprintf(cs->name, sizeof cs->name, "%.*s", (int)(colon - v), v);
    const int64_t d[2][5] = {{s.dim[CG_SYM_B], s.dim[CG_SYM_G], s.dim[CG_SYM_H], s.dim[CG_SYM_DK], s.dim[CG_SYM_DV]},
                             {s.dim[CG_SYM_B], s.dim[CG_SYM_D], s.dim[CG_SYM_N], 0, 0}};
    memcpy(cs->d, d[sscan], sizeof cs->d);
    (*n)++;
    return 0;
}

static int opt_ssd_shape(void *opts, const char *v, char *err, size_t errlen) { return add_custom(opts, v, 0, err, errlen); }
static int opt_sscan_shape(void *opts, const char *v, char *err, size_t errlen) { return add_custom(opts, v, 1, err, errlen); }

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
    {"--backend", 0, CG_CLI_FN, 0, "LIST", "cpu, cuda, emulate, ref (default: all that are available)", 0, 0, opt_backend},
    {"--impls", 0, CG_CLI_FN, 0, "LIST", "exact impl names (overrides --backend)", 0, 0, opt_impls},
    {"--op", 0, CG_CLI_CHOICE, offsetof(bench_opts, op), "ssd|sscan", "one op only", 1, 0, NULL},
    {"--preset", 0, CG_CLI_FN, 0, "LIST", "the seeds' shapes by name (e.g. g1h1_d128, sscan_d512)", 0, 0, opt_preset},
    {"--seq", 0, CG_CLI_FN, 0, "LIST", "sequence lengths (replace 512,2048,8192)", 0, 0, opt_seq},
    {"--mode", 0, CG_CLI_CHOICE, offsetof(bench_opts, mode), "fwd|fwd_bwd", "one mode only", 1, 0, NULL},
    {"--ssd-shape", 0, CG_CLI_FN, 0, "NAME:B=N,G=N,H=N,dk=N,dv=N", "a custom SSD shape (repeatable; replaces the\n"
     "presets; given alone, it also means --op ssd)", 0, 0, opt_ssd_shape},
    {"--sscan-shape", 0, CG_CLI_FN, 0, "NAME:B=N,D=N,N=N", "a custom selective-scan shape (likewise)", 0, 0, opt_sscan_shape},
    {"--layout", 0, CG_CLI_FN, 0, "token|head", "SSD tensor layout (default token: [B,T,heads,dim])", 0, 0, opt_layout},
    {"--dtype", 0, CG_CLI_FN, 0, "f32|bf16|f16", "storage of the 16-bit-capable tensors (q k v o do ... / x delta B C z\n"
     "y dy ...; default f32); rows carry dtype and bytes moved", 0, 0, opt_dtype},
    CG_CLI_OPT_CONFIG(bench_opts, config), /* not for chunkgen_cuda_default, which measures the default */
    {"--all", 0, CG_CLI_FLAG, offsetof(bench_opts, all), NULL, "also run the slow cells left out by default", 0, 0, NULL},
    CG_CLI_OPT_THREADS(bench_opts, threads),
    {"--repeats", 0, CG_CLI_INT, offsetof(bench_opts, repeats), "N", "samples at least (default 5)", 1, 1000, NULL},
    {"--min-time", 0, CG_CLI_F64, offsetof(bench_opts, min_time), "S", "seconds of samples at least, per row (default 1.0)", 0, 3600, NULL},
    {"--warmup", 0, CG_CLI_INT, offsetof(bench_opts, warmup), "N", "warm-up calls (default 1; the first one is compile_s)", 1, 100, NULL},
    {"--ref-seq", 0, CG_CLI_I64, I64(ref_seq), "N", "tokens of the reference cut for rel_err (default 2048)", 1, 1 << 30, NULL},
    {"--ref-max-s", 0, CG_CLI_F64, offsetof(bench_opts, ref_max_s), "S", "skip the ref row when a call would take longer\n"
     "(default 2)", 0, 1e6, NULL},
    {"--emu-max-seq", 0, CG_CLI_I64, I64(emu_max_seq), "N", "largest seq for chunkgen_emulate (default 64; with no --seq\n"
     "the matrix gains cells at that seq, for the emulator)", 0, 1 << 30, NULL},
    {"--no-check", 0, CG_CLI_FLAG, offsetof(bench_opts, no_check), NULL, "skip rel_err (no reference run)", 0, 0, NULL},
    {"--no-probe", 0, CG_CLI_FLAG, offsetof(bench_opts, no_probe), NULL, "skip the peak FMA / bandwidth measurements", 0, 0, NULL},
    {"--commit", 0, CG_CLI_STR, offsetof(bench_opts, commit), "STR", "commit id recorded in the config block", 0, 0, NULL},
    {"--out", 0, CG_CLI_STR, offsetof(bench_opts, out), "FILE", "JSON output (default: stdout)", 0, 0, NULL},
    {"--quiet", 0, CG_CLI_FLAG, offsetof(bench_opts, quiet), NULL, "no progress lines on stderr", 0, 0, NULL},
    CG_CLI_OPT_VERBOSE(bench_opts, verbose, "also print each row's dispatch line (backend, config, source)"),
    CG_CLI_OPT_END};

static const cg_cli_cmd k_bench_cmd = {"bench", bench_usage, k_bench_opts, NULL, NULL};

int bench_parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->layout = CG_LAYOUT_TOKEN_MAJOR;
    o->repeats = 5;
    o->warmup = 1;
    o->min_time = 1.0;
    o->ref_seq = 2048;
    o->ref_max_s = 2.0;
    o->emu_max_seq = 64;
    int rc = cg_cli_parse(&k_bench_cmd, argc, argv, o);
    if (rc) return rc;
    /* --config pins a kernel config (k=v,...), as in `chunkgen run`; the seeds' shapes
     * are --preset (what an older `bench --config NAME` meant). */
    char buf[512], err[256];
    const char *part;
    if (o->config && cg_cli_config_for(o->config, "ssd_fwd", buf, sizeof buf, &part, err, sizeof err))
        return bench_usage_err("--config: %s", err);
    if (o->config && !strchr(o->config, '='))
        return bench_usage_err("--config: expected k=v,... (a kernel config, as in `chunkgen run`), got '%s'; the "
                               "seeds' shapes by name are --preset %s", o->config, o->config);
    /* Custom shapes of one op only: run that op only. */
    if (!o->op && o->nssd_custom && !o->nsscan_custom) o->op = 1;
    if (!o->op && o->nsscan_custom && !o->nssd_custom) o->op = 2;
    if (!o->backend_given && !o->impls_given) o->want_cpu = o->want_cuda = o->want_cuda_def = o->want_emu = o->want_ref = 1;
    return 0;
}
