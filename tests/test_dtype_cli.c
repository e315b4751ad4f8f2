/* test_dtype_cli.c -- 16-bit .npy files and `chunkgen run --dtype` (issue #15): float16
 * '<f2' and bfloat16 '<V2' (the header numpy writes for ml_dtypes.bfloat16) are read and
 * written bit-exactly, and `chunkgen run` on them gives the library's results, in the
 * dtypes the rules give the outputs. */
#include "test_dtype_lib.h"
#include "cli_testlib.h"
#include "npy.h"

#include <jansson.h>
#include <unistd.h>

/* p's tensor i as dir/<file>.npy: float32 through cg_npy_write, 16-bit as raw bytes under
 * the header numpy writes ('<f2'; '<V2' for ml_dtypes.bfloat16). */
static void write_tensor(const char *dir, const dtt_prob *p, int i) {
    const cg_tdesc *t = &p->d->t[i];
    char path[4200], file[64], err[512], sb[96];
    snprintf(file, sizeof file, "%s.npy", t->file ? t->file : t->name);
    join(path, sizeof path, dir, file);
    const cg_tbuf *b = &p->t[i];
    if (b->t.dtype == CG_F32) {
        if (cg_npy_write(path, b->mem, b->t.ndim, b->t.shape, err, sizeof err)) cg_test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    char h[256];
    snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }\n",
             b->t.dtype == CG_BF16 ? "<V2" : "<f2", cg_npy_shape_str(b->t.ndim, b->t.shape, sb, sizeof sb));
    write_raw(path, 1, h, b->mem, (size_t)b->count * 2);
}

/* dir/<name>.npy must hold exactly tensor i of want (dtype and bits). */
static void expect_tensor(const char *dir, const dtt_prob *want, int i) {
    char path[4200], file[64], err[512];
    snprintf(file, sizeof file, "%s.npy", want->d->t[i].name);
    join(path, sizeof path, dir, file);
    cg_npy a;
    if (cg_npy_read(path, &a, err, sizeof err)) {
        CG_CHECK(0, "%s", err);
        return;
    }
    const cg_tbuf *b = &want->t[i];
    CG_CHECK(a.dtype == (int)b->t.dtype, "%s: file dtype %s, expected %s", path, cg__dtype_name((cg_dtype)a.dtype),
             cg__dtype_name(b->t.dtype));
    int same = a.count == b->count;
    cg_view v = {b->mem, b->t.dtype, {1, 0, 0, 0}};
    for (int64_t j = 0; same && j < a.count; j++) {
        double x = cg__vload(&v, j, 0, 0, 0);
        same = (double)a.data[j] == x || (x != x && a.data[j] != a.data[j]);
    }
    CG_CHECK(same, "%s: values differ from the library's", path);
    cg_npy_free(&a);
}

/* bf16 and f16 files round-trip bit for bit; numpy's bf16 header is read as bf16. */
CG_TEST(dtype_npy_16bit_roundtrip) {
    char dir[512], p[1024], tmp[1300], err[512];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    const int64_t shape[2] = {3, 5};
    float v[15];
    for (int dt = CG_BF16; dt <= CG_F16; dt++) {
        cg_rng r = {(uint64_t)dt};
        for (int i = 0; i < 15; i++) { /* values of the dtype: exact through the file */
            float x = (float)cg_rng_uniform(&r, -3, 3);
            v[i] = dt == CG_BF16 ? cg__bf16_to_f32(cg__f32_to_bf16(x)) : cg__f16_to_f32(cg__f32_to_f16(x));
        }
        v[3] = -0.0f, v[4] = 1.0f / 0.0f;
        CG_CHECK(cg_npy_write_tmp_as(p, tmp, sizeof tmp, v, dt, 2, shape, err, sizeof err) == 0, "%s", err);
        CG_CHECK(rename(tmp, p) == 0, "rename");
        char *raw = slurp(p);
        CG_CHECK(strstr(raw + 10, dt == CG_BF16 ? "'descr': '<V2'" : "'descr': '<f2'"), "header: %.60s", raw + 10);
        free(raw);
        cg_npy a;
        CG_CHECK(cg_npy_read(p, &a, err, sizeof err) == 0, "%s", err);
        CG_CHECK(a.dtype == dt && a.count == 15 && !memcmp(a.data, v, sizeof v), "%s round trip", cg__dtype_name((cg_dtype)dt));
        cg_npy_free(&a);
    }
    /* numpy's own bytes: np.save(p, np.array([1, -2, 0.5], ml_dtypes.bfloat16)) */
    const uint16_t bf[3] = {0x3f80, 0xc000, 0x3f00};
    write_raw(p, 1, "{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }                                                            \n", bf, 6);
    cg_npy a;
    CG_CHECK(cg_npy_read(p, &a, err, sizeof err) == 0, "%s", err);
    CG_CHECK(a.dtype == CG_BF16 && a.count == 3 && a.data[0] == 1.0f && a.data[1] == -2.0f && a.data[2] == 0.5f,
             "numpy's bfloat16 file");
    cg_npy_free(&a);
    /* other void widths are refused with the reason */
    write_raw(p, 1, "{'descr': '|V4', 'fortran_order': False, 'shape': (1,), }\n", bf, 4);
    CG_CHECK(cg_npy_read(p, &a, err, sizeof err) != 0 && strstr(err, "bfloat16"), "V4: %s", err);
    rm_tree(dir);
}

/* One `chunkgen run ssd|sscan --grad --backend be` (fam 1: sscan) on 16-bit files (mode
 * 0: dtypes from the files) or float32 files with --dtype (mode 1): the outputs must be
 * the library's on the same backend bit for bit, in their dtypes. */
static void cli_run_case(int fam, int mode, cg_backend be) {
    const cg_dtype H = fam ? CG_F16 : CG_BF16;
    int64_t dims[CG_SYM_COUNT] = {0};
    dims[CG_SYM_B] = 2, dims[CG_SYM_G] = 2;
    if (!fam) dims[CG_SYM_T] = 37, dims[CG_SYM_H] = 4, dims[CG_SYM_DK] = 7, dims[CG_SYM_DV] = 40;
    else dims[CG_SYM_L] = 37, dims[CG_SYM_D] = 6, dims[CG_SYM_N] = 5;
    const cg_op op = fam ? CG_OP_SSCAN_BWD : CG_OP_SSD_BWD, fop = fam ? CG_OP_SSCAN_FWD : CG_OP_SSD_FWD;
    dtt_prob files, want, wantf;
    dtt_new(&files, op, dims, 1, 0, mode ? CG_F32 : H, CG_F32, 0);
    dtt_new(&want, op, dims, 1, 0, H, CG_F32, 0);
    dtt_new(&wantf, fop, dims, 1, 0, H, CG_F32, 0);
    dtt_fill(&files, 40 + (uint64_t)(2 * fam + mode));
    dtt_copy_inputs(&want, &files); /* rounds once when the files are float32 */
    dtt_copy_inputs(&wantf, &want);
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    CG_CHECK_OK(ctx, dtt_run(ctx, &want, be));
    CG_CHECK_OK(ctx, dtt_run(ctx, &wantf, be));
    cg_context_free(ctx);
    char dir[512], out[600];
    if (mk_tmpdir(dir, sizeof dir)) return;
    snprintf(out, sizeof out, "%s/out", dir);
    for (int i = 0; i < files.d->nt; i++)
        if (files.d->t[i].role == CG_TD_IN) write_tensor(dir, &files, i);
    const char *args[16] = {"run", fam ? "sscan" : "ssd", "--grad", "--backend", cg_backend_name(be), dir, out};
    int n = 7;
    if (fam) args[n++] = "--delta-softplus";
    if (mode) args[n++] = "--dtype", args[n++] = cg__dtype_word(H);
    args[n] = NULL;
    int rc = run_cli(dir, args);
    char *se = cli_stderr(dir);
    CG_CHECK(rc == 0, "chunkgen run %s --backend %s (mode %d): exit %d: %s", args[1], args[4], mode, rc, se);
    free(se);
    for (int i = 0; rc == 0 && i < want.d->nt; i++)
        if (want.d->t[i].role == CG_TD_OUT) expect_tensor(out, &want, i);
    for (int i = 0; rc == 0 && i < wantf.d->nt; i++)
        if (wantf.d->t[i].role == CG_TD_OUT) expect_tensor(out, &wantf, i);
    rm_tree(dir);
    dtt_free(&files);
    dtt_free(&want);
    dtt_free(&wantf);
}

/* `chunkgen run` on 16-bit files (dtypes from the files) and on float32 files with
 * --dtype: the outputs are the library's (ref backend) bit for bit, in their dtypes. */
CG_TEST(dtype_cli_run_16bit) {
    for (int fam = 0; fam < 2; fam++)
        for (int mode = 0; mode < 2; mode++) cli_run_case(fam, mode, CG_BACKEND_REF);
}

/* `chunkgen run ssd --grad --dtype bf16 --backend emulate` (the generated 16-bit SSD
 * kernels, forward and backward, under the emulator; bf16 from float32 files) and on
 * bf16 files: the library's emulated results bit for bit. */
CG_TEST(dtype_cli_run_ssd16_emulate) {
    for (int mode = 0; mode < 2; mode++) cli_run_case(0, mode, CG_BACKEND_EMULATE);
}

/* `chunkgen bench --dtype bf16`: the rows say their dtype, count each tensor's bytes in
 * its own dtype (the 16-bit-capable ones at 2 bytes), and the ref row's rel_err is the
 * rounding's (within the bf16 target). */
CG_TEST(dtype_bench_rows) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    double bytes[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char out[600];
        snprintf(out, sizeof out, "%s/b%d.json", dir, k);
        const char *args[] = {"bench", "--backend", "ref", "--op", "ssd", "--ssd-shape", "t:B=1,G=1,H=2,dk=16,dv=8",
                              "--seq", "33", "--mode", "fwd", "--repeats", "1", "--min-time", "0", "--no-probe",
                              "--dtype", k ? "bf16" : "f32", "--out", out, NULL};
        int rc = run_cli(dir, args);
        char *se = cli_stderr(dir);
        CG_CHECK(rc == 0, "bench --dtype %s: exit %d: %s", args[17], rc, se);
        free(se);
        json_error_t je;
        json_t *doc = json_load_file(out, 0, &je);
        CG_CHECK(doc != NULL, "%s: %s", out, je.text);
        if (!doc) continue;
        json_t *row = json_array_get(json_object_get(doc, "results"), 0);
        const char *dt = json_string_value(json_object_get(row, "dtype"));
        CG_CHECK(dt && !strcmp(dt, k ? "bf16" : "f32"), "row dtype %s", dt ? dt : "(none)");
        bytes[k] = json_number_value(json_object_get(row, "bytes"));
        double re = json_number_value(json_object_get(row, "rel_err"));
        CG_CHECK(k ? (re > 0 && re <= cg__tol_dtype(CG_TOL_FWD, CG_BF16)) : re <= cg__tol(CG_TOL_FWD), "rel_err %g", re);
        json_decref(doc);
    }
    /* q, k [1, 33, 1, 16], v, o [1, 33, 2, 8] go from 4 to 2 bytes; log_alpha, h0, hT stay */
    const double half = 2.0 * (2 * 33 * 16 + 2 * 33 * 2 * 8);
    CG_CHECK(bytes[0] - bytes[1] == half, "bytes f32 %.0f, bf16 %.0f: expected %.0f less", bytes[0], bytes[1], half);
    rm_tree(dir);
}
