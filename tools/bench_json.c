/* bench_json.c -- the rows and the document of `chunkgen bench` in the seeds' schema:
 * row fields, rel_err, the roofline model (flops and bytes per call, fractions of the
 * device's bounds), the device and config blocks, and the atomic write. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

const char *const k_impl_names[IMPL_COUNT] = {"chunkgen_cpu", "chunkgen_cuda", "chunkgen_cuda_default",
                                              "chunkgen_emulate", "ref"};

/* Bytes every call must move at least: each input read once, each output written once
 * (fwd_bwd: the forward's and the backward's, each reading the inputs). */
double bench_cell_bytes(const cell *c) {
    double bytes = 0;
    for (int bwd = 0; bwd <= c->bwd; bwd++) {
        const bop *d = bench_cell_op(c, bwd);
        for (int i = 0; i < d->o.in.ntensors; i++) bytes += bench_tbytes(&c->t[c->map[bwd][i]]);
    }
    return bytes;
}

/* The value of KEY=N in a dispatch line or a config text ("... config=chunk=64,..."), or 0. */
static int64_t line_value(const char *line, const char *key) {
    const size_t n = strlen(key);
    for (const char *p = line; p && (p = strstr(p, key)); p += n)
        if ((p == line || p[-1] == '=' || p[-1] == ',' || p[-1] == ' ') && p[n] == '=')
            return strtoll(p + n + 1, NULL, 10);
    return 0;
}

/* The seeds' schema (bench/results, ../shared/seeds) of a family's shape: the row's fields
 * by symbol (in this order; a symbol of another op: its own name), flat in the row or
 * nested in "shape"; the config block's key and field list (configs_fields). */
static const struct {
    cg_sym sym;
    const char *field;
} k_shape_fields[] = {{CG_SYM_B, "batch"}, {CG_SYM_G, "groups"}, {CG_SYM_H, "heads"},
                      {CG_SYM_T, "seq"},   {CG_SYM_L, "seq"},    {CG_SYM_DK, "dk"},
                      {CG_SYM_DV, "dv"},   {CG_SYM_D, "dim"},    {CG_SYM_N, "state"}};
static const struct {
    const char *family, *configs, *fields;
    int nested;
} k_schema[] = {{"ssd", "configs", "[batch, groups, heads, dk, dv]", 0},
                {"sscan", "sscan_configs", "[batch, dim, state]", 1}};

/* A family's schema entry; a new op: its own family's name, flat. */
static int schema_of(const char *family) {
    for (size_t i = 0; i < sizeof k_schema / sizeof *k_schema; i++)
        if (!strcmp(k_schema[i].family, family)) return (int)i;
    return -1;
}

/* The shape's extents (the sequence's: seq; 0 leaves it out) as the schema's fields into
 * obj, or their values into the array arr, in the schema's order. */
static void shape_fields(const bconfig *f, const cg_op_info *in, int64_t seq, json_t *obj, json_t *arr) {
    int done[CG_SHAPE_MAX_SYMS] = {0};
    for (size_t k = 0; k <= sizeof k_shape_fields / sizeof *k_shape_fields; k++)
        for (int j = 0; j < in->nsyms; j++) {
            const cg_sym s = in->syms[j];
            const int last = k == sizeof k_shape_fields / sizeof *k_shape_fields; /* the rest: by name */
            if (done[s] || (last ? 0 : s != k_shape_fields[k].sym)) continue;
            const int64_t v = s == in->seq ? seq : f->dims[s];
            if (v <= 0) continue;
            if (arr) json_array_append_new(arr, json_integer(v));
            else json_object_set_new(obj, last ? cg_sym_name(s) : k_shape_fields[k].field, json_integer(v));
            done[s] = 1;
        }
}

json_t *bench_row_base(const bench *bn, const cell *c, impl_kind impl) {
    const bconfig *f = c->cfg;
    const cg_op_info *in = &bench_cell_op(c, 0)->o.in;
    json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "impl", k_impl_names[impl], "op", f->family, "mode",
                          c->bwd ? "fwd_bwd" : "fwd", "config", f->name);
    const int sc = schema_of(f->family);
    json_t *shape = sc >= 0 && k_schema[sc].nested ? json_object() : r;
    shape_fields(f, in, c->seq, shape, NULL);
    if (shape != r) json_object_set_new(r, "shape", shape);
    if (in->has_layout)
        json_object_set_new(r, "layout", json_string(c->layout == CG_LAYOUT_HEAD_MAJOR ? "head" : "token"));
    json_object_set_new(r, "dtype", json_string(cg_dtype_name(c->dtype))); /* the 16-bit-capable tensors' storage */
    int th = impl == IMPL_REF ? 1 : (impl == IMPL_CPU || impl == IMPL_EMU) ? bn->threads : 0;
    if (th) json_object_set_new(r, "threads", json_integer(th));
    return r;
}

void bench_row_fail(bench *bn, json_t *row, int skipped, const char *msg) {
    json_object_set_new(row, skipped ? "skipped" : "error", json_string(msg));
    if (!skipped) bn->errors++;
    bench_progress("  %-22s %s: %s", json_string_value(json_object_get(row, "impl")), skipped ? "skipped" : "ERROR",
                   msg);
}

/* Whether an impl's rel_err needs its own run on the cut (not the timed run's outputs). */
int bench_needs_cut_run(const cell *c) {
    if (c->cut_t < c->seq) return 1;
    if (!c->bwd || c->dims[CG_SYM_B] <= 1) return 0;
    for (int i = 0; i < c->nt; i++) /* an output summed over the batch (the scan's dA, dD, ddelta_bias) */
        if (c->t[i].used && c->t[i].out && !c->t[i].has_b) return 1;
    return 0;
}

void bench_add_rel_err(const cell *c, json_t *row) {
    double all = 0;
    int nan = 0;
    json_t *outs = json_object(), *grads = json_object();
    for (int i = 0; i < c->nt; i++) {
        const btensor *t = &c->t[i];
        if (!t->used || !t->out || !t->ref) continue;
        double e = bench_rel_err_cut(t);
        if (e != e) nan = 1;
        else if (e > all) all = e;
        json_object_set_new(t->grad ? grads : outs, t->name, bench_jnum(e));
    }
    json_object_set_new(row, "rel_err", nan ? json_null() : json_real(all));
    if (c->bwd) json_object_set_new(row, "rel_err_grads", grads);
    else json_decref(grads);
    json_object_set_new(row, "rel_err_outputs", outs);
    char note[256] = "";
    const int64_t B = c->dims[CG_SYM_B];
    if (c->cut_t < c->seq)
        snprintf(note, sizeof note, "reference on batch[0:1], seq[0:%lld] of %lld; the impl rerun on that cut",
                 (long long)c->cut_t, (long long)c->seq);
    else if (bench_needs_cut_run(c))
        snprintf(note, sizeof note, "reference on batch[0:1] of %lld; the impl rerun on that cut", (long long)B);
    else if (B > 1)
        snprintf(note, sizeof note, "reference on batch[0:1] of %lld, compared with the timed run's outputs",
                 (long long)B);
    if (nan) snprintf(note + strlen(note), sizeof note - strlen(note), "%sNaN in the outputs", note[0] ? "; " : "");
    if (note[0]) json_object_set_new(row, "rel_err_note", json_string(note));
}

/* The CPU path's default config for the cell's call (its family's CPU space, cg_kernel_config)
 * into buf; "" when there is none. */
static void cpu_default_config(cg_context *ctx, const cell *c, char *buf, size_t cap) {
    char space[64], *cfg = NULL;
    cg_shape s;
    buf[0] = '\0';
    snprintf(space, sizeof space, "%s_cpu", bench_cell_op(c, c->bwd)->o.in.family);
    if (bench_cell_shape(c, c->bwd, ctx, &s) == CG_OK && cg_kernel_config(ctx, space, &s, 0, NULL, &cfg) == CG_OK &&
        cfg)
        snprintf(buf, cap, "%s", cfg);
    cg_free(cfg);
}

/* The flops of the cell's calls by each op's model (cg_op_flops). The model's parameter
 * (its name: what cg_op_flops reports using, e.g. the chunk) is taken from the dispatch
 * line, else (CPU) from the CPU path's default config, else the model's default; it goes
 * to the row as flops_KEY. NaN (and a progress line) when the library refuses. */
double bench_model_flops(cg_context *ctx, const cell *c, const char *cfg, char *used, size_t cap) {
    double flops = 0, f;
    cg_shape s;
    for (int bwd = 0; bwd <= c->bwd; bwd++) {
        if (bench_cell_shape(c, bwd, ctx, &s) != CG_OK || cg_op_flops(ctx, &s, cfg, &f, used, cap) != CG_OK) return NAN;
        flops += f;
    }
    return flops;
}

static double cell_flops(const bench *bn, const cell *c, impl_kind impl, const char *dispatch, json_t *row) {
    cg_context *ctx = bn->ctx_cpu;
    char cfg[128] = "", used[64] = "", key[64] = "";
    if (isnan(bench_model_flops(ctx, c, NULL, used, sizeof used))) goto fail;
    if (strchr(used, '=')) snprintf(key, sizeof key, "%.*s", (int)(strchr(used, '=') - used), used);
    if (key[0]) {
        int64_t v = line_value(dispatch, key);
        if (v <= 0 && impl == IMPL_CPU) {
            char def[512];
            cpu_default_config(ctx, c, def, sizeof def);
            v = line_value(def, key);
        }
        if (v > 0) snprintf(cfg, sizeof cfg, "%s=%lld", key, (long long)v);
    }
    double flops = bench_model_flops(ctx, c, cfg, used, sizeof used);
    if (isnan(flops)) goto fail;
    if (key[0]) {
        char field[80];
        snprintf(field, sizeof field, "flops_%s", key);
        json_object_set_new(row, field, json_integer(line_value(used, key)));
    }
    return flops;
fail:
    bench_progress("flops of the %s cell: %s", bench_cell_op(c, c->bwd)->o.in.name, cg_errmsg(ctx));
    return NAN;
}

void bench_add_roofline(const bench *bn, const cell *c, impl_kind impl, const char *dispatch, const meas *m,
                        json_t *row) {
    double flops = cell_flops(bn, c, impl, dispatch, row);
    double bytes = bench_cell_bytes(c), sec = m->median_ms * 1e-3;
    json_object_update_new(row,
                           json_pack("{s:o, s:o, s:o, s:o}", "flops", bench_jnum(flops), "bytes", bench_jnum(bytes),
                                     "gflops", bench_jnum(flops / sec * 1e-9), "gbs", bench_jnum(bytes / sec * 1e-9)));
    double P = NAN, W = NAN;
    if (impl == IMPL_CPU) {
        /* The larger of the measured and the nominal peak: a busy machine measures low,
         * and a fraction must never look better than it is. */
        double meas = bn->ci.peak_meas, nom = bn->ci.peak_nominal;
        P = isfinite(meas) && meas > nom ? meas : nom;
        W = bn->ci.bw_meas;
        json_object_set_new(row, "frac_flops_nominal", bench_jnum(flops / sec * 1e-9 / nom));
        if (isfinite(meas)) json_object_set_new(row, "frac_flops_measured", bench_jnum(flops / sec * 1e-9 / meas));
    } else if (impl == IMPL_CUDA || impl == IMPL_CUDA_DEF) {
        P = bn->gi.fp32_peak_gflops, W = bn->gi.bw_peak_gbs;
    }
    if (isfinite(P) && isfinite(W) && P > 0 && W > 0) {
        double gf = flops / sec * 1e-9, gb = bytes / sec * 1e-9, ai = flops / bytes;
        double roof = ai * W < P ? ai * W : P;
        json_object_update_new(row, json_pack("{s:o, s:o, s:o, s:s}", "frac_flops", bench_jnum(gf / P), "frac_bw",
                                              bench_jnum(gb / W), "frac_roofline", bench_jnum(gf / roof), "bound",
                                              ai * W < P ? "bandwidth" : "flops"));
    }
}

json_t *bench_device_block(const bench *bn) {
    const cpu_info *ci = &bn->ci;
    const gpu_info *gi = &bn->gi;
    int gpu_run = gi->ok && (bn->want[IMPL_CUDA] || bn->want[IMPL_CUDA_DEF]);
    json_t *d = json_pack(
        "{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:o, s:o, s:o}", "backend", gpu_run ? "cuda" : "cpu", "device_kind",
        gpu_run ? gi->name : "cpu", "cpu", ci->model, "cores", ci->cores, "threads", bn->threads, "simd", ci->simd,
        "cpu_isa", ci->isa, /* the CPU path's variant */
        "cpu_mhz", bench_jnum(ci->mhz), "fma_peak_gflops_nominal", bench_jnum(ci->peak_nominal),
        "fma_peak_gflops_measured", bench_jnum(ci->peak_meas), "mem_bw_gbs_measured", bench_jnum(ci->bw_meas));
    json_object_set_new(d, "cpu_peak_note",
                        json_string("nominal = threads x cpu MHz x 2 FMA units x fp32 lanes x 2 flops (assumes two "
                                    "FMA ports at the nominal clock); measured = best of 3 runs of 12 independent FMA "
                                    "chains per thread; bandwidth = best triad a = b + s*c over 3 x 64 MiB. CPU rows' "
                                    "frac_flops use the larger of the two peaks (a busy machine measures low), "
                                    "frac_bw the measured bandwidth"));
    if (bench_fake_cuda)
        json_object_set_new(d, "fake_cuda",
                            json_string("CHUNKGEN_BENCH_FAKE_CUDA=emulate: the chunkgen_cuda rows ran on "
                                        "the SIMT emulator (a test of the bench's device-memory path)"));
    if (gi->ok) {
        json_object_update_new(
            d, json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:i, s:o, s:o}", "gpu", gi->name, "gpu_arch", gi->arch,
                         "sm_count", gi->sm_count, "gpu_clock_mhz", bench_jnum(gi->clock_mhz), "gpu_mem_clock_mhz",
                         bench_jnum(gi->mem_clock_mhz), "gpu_bus_bits", bench_jnum(gi->bus_bits), "gpu_memory_gb",
                         bench_jnum(gi->mem_gb), "driver", gi->driver, "gpu_fp32_peak_gflops",
                         bench_jnum(gi->fp32_peak_gflops), "gpu_bw_gbs", bench_jnum(gi->bw_peak_gbs)));
        json_object_set_new(d, "gpu_peak_note",
                            json_string("fp32 peak = SMs x FP32 lanes per SM (64 on sm_80, else 128) x 2 x max clock; "
                                        "bandwidth = 2 x memory clock x bus width / 8 (driver attributes)"));
    } else {
        json_object_set_new(d, "gpu", json_null());
        json_object_set_new(d, "gpu_note", json_string(gi->why));
    }
    struct utsname u;
    if (uname(&u) == 0) {
        char os[400];
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
        json_object_set_new(d, "os", json_string(os));
    }
#ifdef __VERSION__
    json_object_set_new(d, "compiler", json_string("gcc " __VERSION__));
#endif
    json_object_set_new(d, "chunkgen", json_string(cg_version()));
    return d;
}

/* Inputs' value ranges; docs/bench.md and the config block repeat them. */
static const char k_inputs_ssd[] =
    "q, k, v, do, h0 ~ U(-1, 1); log_alpha ~ U(-0.5, -0.001); h0 given, hT returned, dhT absent";
static const char k_inputs_sscan[] =
    "x, z, dy ~ U(-1, 1); delta ~ U(-4, -1) with delta_softplus and delta_bias ~ U(-0.5, 0.5); "
    "A[d, n] = -(n + 1); B, C [B, L, N] (ungrouped) ~ U(-1, 1); D ~ U(-1, 1); h0 absent, hT returned";

json_t *bench_config_block(const bench *bn, const bconfig *cfgs, int ncfg, const int64_t *seqs, int nseqs, int argc,
                           char **argv) {
    const bench_opts *o = bn->o;
    json_t *c = json_object();
    int gpu_run = bn->gi.ok && (bn->want[IMPL_CUDA] || bn->want[IMPL_CUDA_DEF]);
    json_object_set_new(c, "device", json_string(gpu_run ? "gpu" : "cpu"));
    /* each family's shapes as arrays in its schema's field order (the seeds': every family
     * of the schema, empty when none ran) */
    for (size_t s = 0; s < sizeof k_schema / sizeof *k_schema; s++) {
        json_t *sc = json_object();
        for (int i = 0; i < ncfg; i++) {
            if (strcmp(cfgs[i].family, k_schema[s].family)) continue;
            json_t *a = json_array();
            cell probe = {.cfg = &cfgs[i]};
            shape_fields(&cfgs[i], &bench_cell_op(&probe, 0)->o.in, 0, NULL, a);
            json_object_set_new(sc, cfgs[i].name, a);
        }
        char name[64];
        json_object_set_new(c, k_schema[s].configs, sc);
        snprintf(name, sizeof name, "%s_fields", k_schema[s].configs);
        json_object_set_new(c, name, json_string(k_schema[s].fields));
    }
    json_t *sl = json_array();
    for (int i = 0; i < nseqs; i++) json_array_append_new(sl, json_integer(seqs[i]));
    json_object_set_new(c, "seq_lens", sl);
    json_t *im = json_array();
    for (int i = 0; i < IMPL_COUNT; i++)
        if (bn->want[i]) json_array_append_new(im, json_string(k_impl_names[i]));
    json_object_set_new(c, "impls", im);
    json_t *md = json_array();
    if (o->mode != 2) json_array_append_new(md, json_string("fwd"));
    if (o->mode != 1) json_array_append_new(md, json_string("fwd_bwd"));
    json_object_set_new(c, "modes", md);
    json_object_update_new(c, json_pack("{s:s, s:i, s:i, s:f, s:i, s:I, s:f, s:I, s:{s:s, s:s}}", "layout",
                                        o->layout == CG_LAYOUT_HEAD_MAJOR ? "head" : "token", "threads", bn->threads,
                                        "repeats", o->repeats, "min_time_s", o->min_time, "warmup", o->warmup,
                                        "ref_seq", (json_int_t)o->ref_seq, "ref_max_s", o->ref_max_s, "emu_max_seq",
                                        (json_int_t)o->emu_max_seq, "inputs", "ssd", k_inputs_ssd, "sscan",
                                        k_inputs_sscan));
    json_object_set_new(
        c, "timing",
        json_string("per row: warm-up calls (the first one's wall time is compile_s), then samples of "
                    "`inner` back-to-back calls until `repeats` samples and min_time_s seconds; median_ms, "
                    "q1_ms, q3_ms per call over the samples. cuda: inner = 1, each sample timed by CUDA "
                    "events after an L2 flush (a memset of 2x the L2 size, outside the timed region); "
                    "a call slower than 2 x min_time_s keeps its wall-clock calibration run as a sample. "
                    "fwd_bwd = one forward call plus one backward call"));
    json_object_set_new(c, "rel_err",
                        json_string("max|out - ref| / max|ref| against the float64 sequential scan on the same inputs, "
                                    "computed once per cell on batch element 0 and at most ref_seq tokens; rel_err is "
                                    "the max over the outputs (fwd) or over outputs and gradients (fwd_bwd)"));
    json_object_set_new(
        c, "peak_mb",
        json_string("host impls: the call's tensors (inputs and outputs, exact bytes) + workspace_mb, the "
                    "growth of the process's peak RSS during the row's calls (VmHWM reset through "
                    "/proc/self/clear_refs); cuda: the device tensors only"));
    json_object_set_new(
        c, "roofline",
        json_string("flops: SSD chunked algorithm with chunk C per (b, h) and chunk of c tokens: forward "
                    "c(c+1)(dk+dv) + 4c dk dv, backward c(c+1)(3dk+2dv) + 10c dk dv + 4c dk; selective "
                    "scan per (b,l,d,n) 7 forward, 24 backward, per (b,l,d) 11 and 20. bytes: every "
                    "input read once and every output written once per call. frac_roofline = achieved "
                    "GFLOP/s / min(peak, flops/bytes x bandwidth)"));
    if (bn->cpu_subset)
        json_object_set_new(c, "omitted", json_string("fwd_bwd at seq > 2048 (CPU default subset; --all runs it)"));
    char date[64];
    time_t tnow = time(NULL);
    struct tm tmv;
    gmtime_r(&tnow, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_object_set_new(c, "date", json_string(date));
    json_object_set_new(c, "commit", o->commit ? json_string(o->commit) : json_null());
    json_t *av = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(av, json_string(argv[i]));
    json_object_set_new(c, "argv", av);
    json_t *un = json_object();
    for (int i = 0; i < IMPL_COUNT; i++)
        if (bn->unavailable[i][0]) json_object_set_new(un, k_impl_names[i], json_string(bn->unavailable[i]));
    json_object_set_new(c, "unavailable", un);
    return c;
}

/* Write the document (atomically for a file: a fresh temp file that a planted symlink
 * cannot redirect, then rename; cg_write_file). */
int bench_write_doc(const bench *bn) {
    const char *out = bn->o->out;
    size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(10);
    if (!out || !strcmp(out, "-")) return 0; /* stdout: once, at the end */
    char *text = json_dumps(bn->doc, flags);
    cg_context *ctx = NULL;
    int bad = !text || cg_context_create(&ctx) != CG_OK || cg_write_file(ctx, out, text, strlen(text)) != CG_OK;
    if (bad && text && ctx) fprintf(stderr, "chunkgen bench: %s\n", cg_errmsg(ctx)); /* "cannot write OUT: why" */
    else if (bad) fprintf(stderr, "chunkgen bench: cannot write %s: %s\n", out, text ? "no context" : "out of memory");
    cg_context_free(ctx);
    free(text);
    return bad ? -1 : 0;
}
