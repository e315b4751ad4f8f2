/* cmd_bench.c -- `chunkgen bench`: the seeds' benchmark matrix, measured side by side.
 *
 * For every cell of the matrix (op, config, seq, mode) it allocates one set of inputs,
 * runs each implementation on them (chunkgen cpu, cuda with the tuned and with the
 * default config, emulate on small shapes, and the float64 scan reference), and writes
 * one JSON row per (impl, cell) in the seeds' schema: impl, mode, config, batch, groups,
 * heads, seq, dk, dv (the selective scan: shape {batch, seq, dim, state}), compile_s,
 * inner, median_ms, q1_ms, q3_ms, rel_err, rel_err_grads, peak_mb, and error or skipped,
 * plus roofline fields (flops, bytes, achieved fractions of the device's bounds).
 *
 * Accuracy: rel_err = max|out - ref| / max|ref| against the float64 reference run on the
 * SAME inputs. The reference is computed once per cell, on batch element 0 and at most
 * --ref-seq tokens (rel_err_note says when a row was cut); one call per slice of the op's
 * divisible symbol (heads, channels) on all threads. Timing: warm-up, then samples of `inner` back-to-back calls until both
 * --repeats samples and --min-time seconds are reached; median and quartiles per call.
 * docs/bench.md describes every field and the assumptions behind the roofline. */
#include "bench.h"
#include "cli_args.h"
#include "cmd_bench.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static double cell_tensor_mb(const cell *c) {
    double b = 0;
    for (int i = 0; i < c->nt; i++) b += bench_tbytes(&c->t[i]);
    return b / (1024.0 * 1024.0);
}

/* The host's online cores, as the library counts them (cg_device_query); at least 1. */
static int online_cores(void) {
    cg_device_info di = CG_DEVICE_INFO_INIT;
    cg_context *ctx = NULL;
    int n = cg_context_create(&ctx) == CG_OK && cg_device_query(ctx, CG_BACKEND_CPU, &di) == CG_OK ? di.cpu_cores : 1;
    cg_context_free(ctx);
    return n > 0 ? n : 1;
}

static cg_context *impl_ctx(bench *bn, impl_kind impl) {
    switch (impl) {
    case IMPL_CPU: return bn->ctx_cpu;
    case IMPL_CUDA: return bn->ctx_cuda;
    case IMPL_CUDA_DEF: return bn->ctx_cuda_def;
    case IMPL_EMU: return bn->ctx_emu;
    default: return bn->ctx_ref;
    }
}

static const cg_backend k_impl_backend[IMPL_COUNT] = {CG_BACKEND_CPU, CG_BACKEND_CUDA, CG_BACKEND_CUDA,
                                                      CG_BACKEND_EMULATE, CG_BACKEND_REF};

static void run_impl(bench *bn, cell *c, impl_kind impl, int *cuda_ready) {
    const bench_opts *o = bn->o;
    json_t *row = bench_row_base(bn, c, impl);
    json_array_append_new(bn->results, row);
    if (bn->unavailable[impl][0]) {
        bench_row_fail(bn, row, 1, bn->unavailable[impl]);
        return;
    }
    if (impl == IMPL_REF) {
        /* from the reference's time on the cut, else (--no-check) the op's flops at 5e8/s */
        const double bt = (double)c->dims[CG_SYM_B] * (double)c->seq;
        double pred =
            c->ref_s_per_bt > 0 ? c->ref_s_per_bt * bt : bench_model_flops(bn->ctx_cpu, c, NULL, NULL, 0) / 5e8;
        if (pred > o->ref_max_s) {
            char why[256];
            snprintf(why, sizeof why,
                     "too slow: about %.0f s per call predicted from the reference cut (--ref-max-s %g)", pred,
                     o->ref_max_s);
            bench_row_fail(bn, row, 1, why);
            return;
        }
    }
    runner r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.impl = impl;
    r.ctx = impl_ctx(bn, impl);
    r.ex.backend = k_impl_backend[impl];
    if (impl == IMPL_CUDA || impl == IMPL_CUDA_DEF) r.ex.backend = bench_cuda_backend;
    r.cuda = impl == IMPL_CUDA || impl == IMPL_CUDA_DEF;
    /* --config pins every chunkgen impl but the one that measures the default config. */
    if (impl != IMPL_CUDA_DEF && impl != IMPL_REF) {
        char err[256];
        for (int k = 0; k < 2; k++) /* the scopes were checked with the options */
            if (cg_cli_config_for(o->config, bench_cell_op(c, k)->o.in.name, r.config_buf[k], sizeof r.config_buf[k],
                                  &r.config[k], err, sizeof err))
                r.config[k] = NULL;
    }
    char err[512];
    bench_poison_outputs(c);
    bptrs m;
    if (r.cuda) {
        if (!*cuda_ready) {
            if (bench_cuda_cell_alloc(c, bn->ctx_cuda, err, sizeof err)) {
                bench_row_fail(bn, row, 0, err);
                return;
            }
            *cuda_ready = 1;
        }
        if (bench_cuda_copy(c, bn->ctx_cuda, 0, err, sizeof err)) {
            bench_row_fail(bn, row, 0, err);
            return;
        }
        bench_device_ptrs(c, &m, 0, 0);
    } else {
        bench_host_ptrs(c, &m, 0, 0);
    }
    meas ms;
    if (bench_measure(&r, &m, o, &ms)) {
        bench_row_fail(bn, row, r.skipped, r.msg);
        return;
    }
    char dispatch[512];
    snprintf(dispatch, sizeof dispatch, "%s", cg_last_dispatch(r.ctx));
    json_object_set_new(row, "compile_s", bench_jnum(ms.compile_s));
    json_object_set_new(row, "inner", json_integer(ms.inner));
    json_object_set_new(row, "samples", json_integer(ms.samples));
    json_object_set_new(row, "median_ms", bench_jnum(ms.median_ms));
    json_object_set_new(row, "q1_ms", bench_jnum(ms.q1_ms));
    json_object_set_new(row, "q3_ms", bench_jnum(ms.q3_ms));
    json_object_set_new(row, "cpu_ms", bench_jnum(ms.cpu_ms));
    if (c->have_ref) {
        int ok = 1;
        if (bench_needs_cut_run(c)) {
            bptrs mc = m;
            mc.b = 1;
            mc.tt = c->cut_t;
            ok = !bench_run_call(&r, &mc) && !bench_run_sync(&r);
            if (!ok) bench_row_fail(bn, row, 0, r.msg);
        }
        if (ok && r.cuda && bench_cuda_copy(c, bn->ctx_cuda, 1, err, sizeof err)) {
            bench_row_fail(bn, row, 0, err);
            ok = 0;
        }
        if (ok) bench_add_rel_err(c, row);
    } else if (!o->no_check) {
        json_object_set_new(row, "rel_err", json_null());
        json_object_set_new(row, "rel_err_note", json_string(c->ref_err[0] ? c->ref_err : "no reference"));
    }
    double tensors = cell_tensor_mb(c);
    if (r.cuda) {
        json_object_set_new(row, "peak_mb", bench_jnum(tensors));
        json_object_set_new(row, "peak_mb_note",
                            json_string("device tensors of the call only (the library's workspace is not counted)"));
    } else {
        json_object_set_new(row, "peak_mb", bench_jnum(tensors + (isfinite(ms.workspace_mb) ? ms.workspace_mb : 0)));
        json_object_set_new(row, "workspace_mb", bench_jnum(ms.workspace_mb));
    }
    bench_add_roofline(bn, c, impl, dispatch, &ms, row);
    if (dispatch[0]) json_object_set_new(row, "dispatch", json_string(dispatch));
    if (o->verbose && dispatch[0]) bench_progress("  %-22s %s", k_impl_names[impl], dispatch);
    json_t *re = json_object_get(row, "rel_err");
    bench_progress("  %-22s median %10.3f ms  [%.3f, %.3f]  inner %d x %d  rel_err %s", k_impl_names[impl],
                   ms.median_ms, ms.q1_ms, ms.q3_ms, ms.inner, ms.samples,
                   json_is_real(re) ? (snprintf(err, sizeof err, "%.2e", json_real_value(re)), err) : "-");
}

static void run_cell(bench *bn, const bconfig *f, int64_t seq, int bwd) {
    const bench_opts *o = bn->o;
    cell *c = calloc(1, sizeof *c);
    if (!c) return;
    c->cfg = f;
    c->seq = seq;
    c->bwd = bwd;
    c->layout = o->layout;
    c->dtype = o->dtype;
    bench_cell_define(c);
    bench_progress("%s %s seq %lld %s", f->family, f->name, (long long)seq, bwd ? "fwd_bwd" : "fwd");
    char err[512];
    int impls[IMPL_COUNT], n = 0;
    for (int i = 0; i < IMPL_COUNT; i++) {
        if (!bn->want[i]) continue;
        if (i == IMPL_EMU && seq > o->emu_max_seq) continue;
        impls[n++] = i;
    }
    if (bench_cell_alloc(c, err, sizeof err)) {
        for (int i = 0; i < n; i++) {
            json_t *row = bench_row_base(bn, c, (impl_kind)impls[i]);
            json_array_append_new(bn->results, row);
            bench_row_fail(bn, row, 0, err);
        }
        bench_cell_free(c);
        free(c);
        return;
    }
    if (!o->no_check) {
        c->cut_t = seq < o->ref_seq ? seq : o->ref_seq;
        double t0 = bench_now_s();
        bench_reference(c, bn->threads);
        bench_progress("  reference on batch 0, %lld tokens: %.2f s%s%s", (long long)c->cut_t, bench_now_s() - t0,
                       c->ref_err[0] ? ": " : "", c->ref_err);
    }
    int cuda_ready = 0;
    for (int i = 0; i < n; i++) run_impl(bn, c, (impl_kind)impls[i], &cuda_ready);
    if (cuda_ready) bench_cuda_cell_free(c, bn->ctx_cuda);
    bench_cell_free(c);
    free(c);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

/* Remove the default-config cache directory this run made (and only that). */
static void rm_tree(const char *dir) {
    if (!dir[0] || strncmp(dir, "/tmp/chunkgen-bench-", 20)) return;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int cg_cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = bench_parse_opts(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    bench_quiet = o.quiet;
    bench_kexec_select();

    /* The shapes of the run. */
    bconfig cfgs[64];
    const int ncfg = bench_matrix(&o, cfgs, 64);
    if (ncfg < 0) return 2;

    bench bn;
    memset(&bn, 0, sizeof bn);
    bn.o = &o;
    bn.threads = o.threads > 0 ? o.threads : online_cores();
    bn.want[IMPL_CPU] = o.want_cpu;
    bn.want[IMPL_CUDA] = o.want_cuda;
    bn.want[IMPL_CUDA_DEF] = o.want_cuda_def;
    bn.want[IMPL_EMU] = o.want_emu;
    bn.want[IMPL_REF] = o.want_ref;
    int explicit_impls = o.backend_given || o.impls_given;

    cg_context **ctxs[] = {&bn.ctx_cpu, &bn.ctx_cuda, &bn.ctx_cuda_def, &bn.ctx_emu, &bn.ctx_ref};
    for (int i = 0; i < 5; i++)
        if (cg_context_create(ctxs[i]) != CG_OK) {
            fprintf(stderr, "chunkgen bench: cannot create a context\n");
            return 1;
        }
    cg_context_set_threads(bn.ctx_cpu, bn.threads);
    cg_context_set_threads(bn.ctx_emu, bn.threads);
    cg_context_set_threads(bn.ctx_ref, 1);

    /* What can run here. */
    bench_gpu_probe(bn.ctx_cuda, bench_cuda_backend, &bn.gi);
    if (!bn.gi.ok) {
        for (int i = IMPL_CUDA; i <= IMPL_CUDA_DEF; i++) {
            if (!explicit_impls) bn.want[i] = 0;
            snprintf(bn.unavailable[i], sizeof bn.unavailable[i], "%s", bn.gi.why);
        }
    } else if (bn.want[IMPL_CUDA_DEF]) {
        /* The default config: a context whose cache directory is empty, so no tuned entry exists. */
        snprintf(bn.def_cache, sizeof bn.def_cache, "/tmp/chunkgen-bench-default.XXXXXX");
        if (!mkdtemp(bn.def_cache)) {
            snprintf(bn.unavailable[IMPL_CUDA_DEF], sizeof bn.unavailable[IMPL_CUDA_DEF],
                     "cannot make an empty cache directory for the default config: %s", strerror(errno));
            bn.def_cache[0] = 0;
        } else {
            cg_context_set_cache_dir(bn.ctx_cuda_def, bn.def_cache);
        }
    }
    int any = 0;
    for (int i = 0; i < IMPL_COUNT; i++) any |= bn.want[i];
    if (!any) return bench_usage_err("no impl left to run");

    /* Sequence lengths. */
    int64_t seqs[MAXLIST + 1];
    int nseqs = 0;
    if (o.nseqs) {
        for (int i = 0; i < o.nseqs; i++) seqs[nseqs++] = o.seqs[i];
    } else {
        if (bn.want[IMPL_EMU] && !bn.unavailable[IMPL_EMU][0] && o.emu_max_seq > 0 && o.emu_max_seq < k_seed_seqs[0])
            seqs[nseqs++] = o.emu_max_seq; /* the emulator's small cells */
        for (size_t i = 0; i < sizeof k_seed_seqs / sizeof *k_seed_seqs; i++) seqs[nseqs++] = k_seed_seqs[i];
        int gpu_run = bn.gi.ok && (bn.want[IMPL_CUDA] || bn.want[IMPL_CUDA_DEF]);
        bn.cpu_subset = !gpu_run && !o.all;
    }

    bench_cpu_probe(&bn.ci, bn.threads, !o.no_probe);
    if (!o.no_probe)
        bench_progress("cpu: %s, %d threads, FMA peak %.1f GFLOP/s measured (%.1f nominal), triad %.1f GB/s",
                       bn.ci.model, bn.threads, bn.ci.peak_meas, bn.ci.peak_nominal, bn.ci.bw_meas);
    if (bn.gi.ok)
        bench_progress("gpu: %s sm_%d, %d SMs, fp32 peak %.0f GFLOP/s, %.0f GB/s", bn.gi.name, bn.gi.arch,
                       bn.gi.sm_count, bn.gi.fp32_peak_gflops, bn.gi.bw_peak_gbs);

    bn.doc = json_object();
    bn.results = json_array();
    json_object_set_new(bn.doc, "device", bench_device_block(&bn));
    json_object_set_new(bn.doc, "config", bench_config_block(&bn, cfgs, ncfg, seqs, nseqs, argc, argv));
    json_object_set_new(bn.doc, "results", bn.results);

    int write_failed = 0;
    for (int k = 0; k < ncfg; k++)
        for (int s = 0; s < nseqs; s++)
            for (int md = 0; md < 2; md++) {
                if ((md == 0 && o.mode == 2) || (md == 1 && o.mode == 1)) continue;
                if (md == 1 && bn.cpu_subset && seqs[s] > 2048) continue;
                run_cell(&bn, &cfgs[k], seqs[s], md);
                if (bench_write_doc(&bn)) write_failed = 1;
            }

    if (!o.out || !strcmp(o.out, "-")) {
        json_dumpf(bn.doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
    } else if (!write_failed) {
        bench_progress("wrote %s (%zu rows)", o.out, json_array_size(bn.results));
    }
    json_decref(bn.doc);
    for (int i = 0; i < 5; i++) cg_context_free(*ctxs[i]);
    rm_tree(bn.def_cache);
    if (bn.errors) fprintf(stderr, "chunkgen bench: %d row(s) with an error\n", bn.errors);
    return (write_failed || bn.errors) ? 1 : 0;
}
