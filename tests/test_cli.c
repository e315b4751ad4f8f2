/* test_cli.c -- the .npy reader/writer and `chunkgen run` end to end.
 *
 * The CLI tests write random inputs with the npy writer into a temporary directory,
 * run the real binary (CG_CLI_PATH) and compare what it wrote against the float64
 * reference backend run in-process on the same values. */
#include "cg_test.h"
#include "npy.h"
#include "cli_testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define FWD_TOL 1e-5
#define GRAD_TOL 1e-4

/* ------------------------------------------------------- tensors and files */

/* A random float32 tensor and its exact float64 copy. */
typedef struct pair {
    cg_tbuf f;  /* F32, contiguous */
    cg_tbuf d;  /* F64 copy */
} pair;

static pair pair_new(cg_rng *r, int ndim, const int64_t *shape, double lo, double hi) {
    pair p;
    p.f = cg_tbuf_new(CG_F32, ndim, shape);
    cg_tbuf_fill(&p.f, r, lo, hi);
    p.d = cg_tbuf_new(CG_F64, ndim, shape);
    cg_tbuf_copy(&p.d, &p.f);
    return p;
}

static void pair_free(pair *p) {
    cg_tbuf_free(&p->f);
    cg_tbuf_free(&p->d);
}

/* The header of a float64 or Fortran-order file for tensor b. */
static void header_for(char *h, size_t len, const char *descr, int fortran, const cg_tbuf *b) {
    char sb[96];
    snprintf(h, len, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }\n", descr, fortran ? "True" : "False",
             cg_npy_shape_str(b->t.ndim, b->t.shape, sb, sizeof sb));
}

/* Write b as '<f8' (values exact: they are float32 values). */
static void write_tb_f64(const char *dir, const char *name, const cg_tbuf *b) {
    char p[4096], file[64], h[256];
    snprintf(file, sizeof file, "%s.npy", name);
    join(p, sizeof p, dir, file);
    double *v = malloc((size_t)(b->count ? b->count : 1) * sizeof *v);
    for (int64_t i = 0; i < b->count; i++) v[i] = ((const float *)b->mem)[i];
    header_for(h, sizeof h, "<f8", 0, b);
    write_raw(p, 1, h, v, (size_t)b->count * sizeof *v);
    free(v);
}

/* Write a 2-d tensor b in Fortran (column-major) order. */
static void write_tb_fortran2(const char *dir, const char *name, const cg_tbuf *b) {
    char p[4096], file[64], h[256];
    snprintf(file, sizeof file, "%s.npy", name);
    join(p, sizeof p, dir, file);
    int64_t R = b->t.shape[0], C = b->t.shape[1];
    int64_t n = R * C;
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) v[j * R + i] = ((const float *)b->mem)[i * C + j];
    header_for(h, sizeof h, "<f4", 1, b);
    write_raw(p, 1, h, v, (size_t)(R * C) * sizeof *v);
    free(v);
}

/* Read dir/name.npy into a F32 tbuf; 0 on success. */
static int read_tb(const char *dir, const char *name, cg_tbuf *out) {
    char p[4096], err[512], file[64];
    snprintf(file, sizeof file, "%s.npy", name);
    join(p, sizeof p, dir, file);
    cg_npy a;
    if (cg_npy_read(p, &a, err, sizeof err) != 0) {
        cg_test_fail(__FILE__, __LINE__, "reading the CLI's output: %s", err);
        return -1;
    }
    *out = cg_tbuf_new(CG_F32, a.t.ndim, a.t.shape);
    memcpy(out->mem, a.data, (size_t)a.count * sizeof(float));
    cg_npy_free(&a);
    return 0;
}

/* Compare the CLI's output file name against the reference ref (F64). */
static void check_out(const char *dir, const char *name, const cg_tbuf *ref, double tol) {
    cg_tbuf got;
    if (read_tb(dir, name, &got)) return;
    int same = got.t.ndim == ref->t.ndim;
    for (int i = 0; same && i < ref->t.ndim; i++) same = got.t.shape[i] == ref->t.shape[i];
    char gs[96], rs[96];
    CG_CHECK(same, "%s.npy: shape %s, expected %s", name, cg_npy_shape_str(got.t.ndim, got.t.shape, gs, sizeof gs),
             cg_npy_shape_str(ref->t.ndim, ref->t.shape, rs, sizeof rs));
    if (same) {
        double e = cg_rel_err(&got, ref);
        CG_CHECK(e <= tol, "%s.npy: rel err %.3g > %.1g", name, e, tol);
    }
    cg_tbuf_free(&got);
}

/* check_out of each (name, ref) pair of the NULL-terminated list, all at tol. */
static void check_outs(const char *dir, double tol, ...) {
    va_list ap;
    va_start(ap, tol);
    for (const char *name; (name = va_arg(ap, const char *));) check_out(dir, name, va_arg(ap, const cg_tbuf *), tol);
    va_end(ap);
}

static cg_tbuf f64_new(int ndim, const int64_t *shape) { return cg_tbuf_new(CG_F64, ndim, shape); }

static const cg_exec k_ref = {.backend = CG_BACKEND_REF};

/* ------------------------------------------------------------ npy: units */

CG_TEST(cli_npy_roundtrip) {
    char dir[512], p[1024], err[512];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    cg_rng r = {11};
    const int64_t shapes[][4] = {{0}, {5}, {3, 7}, {2, 1, 3}, {2, 3, 4, 5}, {3, 0, 2}};
    const int ndims[] = {0, 1, 2, 3, 4, 3};
    for (int s = 0; s < 6; s++) {
        int64_t count = 1;
        for (int i = 0; i < ndims[s]; i++) count *= shapes[s][i];
        float *v = malloc((size_t)(count ? count : 1) * sizeof *v);
        for (int64_t i = 0; i < count; i++) v[i] = (float)cg_rng_uniform(&r, -10, 10);
        if (count > 1) v[1] = NAN; /* values pass through bit for bit, NaN included */
        CG_CHECK(cg_npy_write(p, v, ndims[s], shapes[s], err, sizeof err) == 0, "write: %s", err);
        /* numpy pads the preamble + header to a multiple of 64 bytes and ends it with '\n'. */
        char *raw = slurp(p);
        size_t hl = (size_t)(unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8;
        CG_CHECK(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0, "magic/version");
        size_t rem = (10 + hl) & 63;
        CG_CHECK(rem == 0, "header length %zu not padded to 64", hl);
        CG_CHECK(raw[10 + hl - 1] == '\n', "header does not end with a newline");
        free(raw);
        cg_npy a;
        int rc = cg_npy_read(p, &a, err, sizeof err);
        CG_CHECK(rc == 0, "read: %s", err);
        if (rc == 0) {
            CG_CHECK(a.t.ndim == ndims[s], "ndim %d, expected %d", a.t.ndim, ndims[s]);
            for (int i = 0; i < ndims[s] && i < a.t.ndim; i++)
                CG_CHECK(a.t.shape[i] == shapes[s][i], "dim %d: %lld", i, (long long)a.t.shape[i]);
            CG_CHECK(a.count == count, "count %lld, expected %lld", (long long)a.count, (long long)count);
            CG_CHECK(a.version == 1 && !a.from_f64 && !a.fortran_order, "flags");
            CG_CHECK(count == 0 || memcmp(a.data, v, (size_t)count * sizeof *v) == 0, "data differs (shape %d)", s);
            cg_npy_free(&a);
        }
        free(v);
    }
    rm_tree(dir);
}

/* Version 2.0 and 3.0 headers (4-byte length), double quotes, reordered keys, no
 * trailing comma, odd whitespace, Python 2 long suffixes. */
CG_TEST(cli_npy_v2_v3_headers) {
    char dir[512], p[1024], err[512];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    float v[6] = {1.5f, -2.25f, 3, 4, 5, 6.125f};
    const struct { int major; const char *h; } cases[] = {
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" "          \n"},
        {3, "{\"shape\": (2,3), \"descr\": \"<f4\", \"fortran_order\": False}\n"},
        {1, "{ 'fortran_order' : False ,\n 'shape' : ( 2 , 3 , ) , 'descr' : '<f4' }\n"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n"},
    };
    for (int c = 0; c < 4; c++) {
        write_raw(p, cases[c].major, cases[c].h, v, sizeof v);
        cg_npy a;
        int rc = cg_npy_read(p, &a, err, sizeof err);
        CG_CHECK(rc == 0, "case %d: %s", c, err);
        if (rc) continue;
        CG_CHECK(a.version == cases[c].major, "case %d: version %d", c, a.version);
        CG_CHECK(a.t.ndim == 2 && a.t.shape[0] == 2 && a.t.shape[1] == 3, "case %d: shape", c);
        CG_CHECK(memcmp(a.data, v, sizeof v) == 0, "case %d: data", c);
        cg_npy_free(&a);
    }
    rm_tree(dir);
}

/* fortran_order True: the file is column-major; the reader returns row-major. */
CG_TEST(cli_npy_fortran_order) {
    char dir[512], p[1024], err[512], h[256];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    const int64_t shapes[][4] = {{3, 5}, {2, 3, 4}, {2, 1, 3, 2}, {7}};
    const int ndims[] = {2, 3, 4, 1};
    cg_rng r = {5};
    for (int s = 0; s < 4; s++) {
        int nd = ndims[s];
        const int64_t *sh = shapes[s];
        int64_t count = 1;
        for (int i = 0; i < nd; i++) count *= sh[i];
        float *rowm = malloc((size_t)count * sizeof(float)), *colm = malloc((size_t)count * sizeof(float));
        for (int64_t i = 0; i < count; i++) rowm[i] = (float)cg_rng_uniform(&r, -1, 1);
        /* Scatter to column-major: the element at row-major index i has multi-index idx. */
        for (int64_t i = 0; i < count; i++) {
            int64_t rem = i, idx[4], off = 0, m = 1;
            for (int d = nd - 1; d >= 0; d--) idx[d] = rem % sh[d], rem /= sh[d];
            for (int d = 0; d < nd; d++) off += idx[d] * m, m *= sh[d];
            colm[off] = rowm[i];
        }
        char sb[96];
        snprintf(h, sizeof h, "{'descr': '<f4', 'fortran_order': True, 'shape': %s, }\n",
                 cg_npy_shape_str(nd, sh, sb, sizeof sb));
        write_raw(p, 1, h, colm, (size_t)count * sizeof(float));
        cg_npy a;
        int rc = cg_npy_read(p, &a, err, sizeof err);
        CG_CHECK(rc == 0, "shape %d: %s", s, err);
        if (rc == 0) {
            CG_CHECK(a.fortran_order == 1, "flag");
            CG_CHECK(a.t.ndim == nd && a.count == count, "shape");
            CG_CHECK(memcmp(a.data, rowm, (size_t)count * sizeof(float)) == 0, "shape %d: not transposed right", s);
            cg_npy_free(&a);
        }
        free(rowm);
        free(colm);
    }
    rm_tree(dir);
}

CG_TEST(cli_npy_f64_converted) {
    char dir[512], p[1024], err[512];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    double v[5] = {0.1, -1e30, 3.0, 1e-3, 1e300};
    write_raw(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }\n", v, sizeof v);
    cg_npy a;
    int rc = cg_npy_read(p, &a, err, sizeof err);
    CG_CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CG_CHECK(a.from_f64 == 1, "from_f64 not set");
        for (int i = 0; i < 5; i++) CG_CHECK(a.data[i] == (float)v[i], "element %d: %g", i, (double)a.data[i]);
        cg_npy_free(&a);
    }
    rm_tree(dir);
}

/* Expect reading to fail with a message naming the file and containing `what`. */
static void expect_read_error(const char *p, const char *what, const char *label) {
    cg_npy a;
    char err[512] = "";
    int rc = cg_npy_read(p, &a, err, sizeof err);
    CG_CHECK(rc != 0, "%s: read succeeded", label);
    if (rc == 0) {
        cg_npy_free(&a);
        return;
    }
    CG_CHECK(a.data == NULL, "%s: data left allocated", label);
    CG_CHECK(strstr(err, p) != NULL, "%s: message does not name the file: %s", label, err);
    CG_CHECK(strstr(err, what) != NULL, "%s: message lacks '%s': %s", label, what, err);
}

CG_TEST(cli_npy_truncated) {
    char dir[512], p[1024], err[512];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    float v[12] = {0};
    const int64_t shape[2] = {3, 4};
    CG_CHECK(cg_npy_write(p, v, 2, shape, err, sizeof err) == 0, "%s", err);
    char *raw = slurp(p);
    struct stat st;
    stat(p, &st);
    size_t full = (size_t)st.st_size;
    /* Cut in the data, in the header, in the preamble; then one float too many. */
    const size_t cuts[] = {full - 4, full - 48, 40, 9, 0};
    const char *whats[] = {"truncated", "truncated", "truncated", "not a .npy file", "not a .npy file"};
    for (int c = 0; c < 5; c++) {
        FILE *f = fopen(p, "wb");
        fwrite(raw, 1, cuts[c], f);
        fclose(f);
        char label[32];
        snprintf(label, sizeof label, "cut at %zu", cuts[c]);
        expect_read_error(p, whats[c], label);
    }
    FILE *f = fopen(p, "wb");
    fwrite(raw, 1, full, f);
    fwrite(v, 1, 4, f);
    fclose(f);
    expect_read_error(p, "after the data", "trailing bytes");
    free(raw);
    /* A 2.0 header whose 4-byte length points past the end of the file. */
    write_raw(p, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", v, 4);
    FILE *g = fopen(p, "r+b");
    unsigned char big[4] = {0, 0, 1, 0};
    fseek(g, 8, SEEK_SET);
    fwrite(big, 1, 4, g);
    fclose(g);
    expect_read_error(p, "truncated", "header length past the end");
    rm_tree(dir);
}

CG_TEST(cli_npy_bad_headers) {
    char dir[512], p[1024];
    if (mk_tmpdir_with(dir, sizeof dir, p, sizeof p, "a.npy")) return;
    float v[8] = {0};
    const struct { const char *h; const char *what; } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", "big-endian"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", "integer"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n", "object"},
        {"{'descr': '>f2', 'fortran_order': False, 'shape': (4,), }\n", "big-endian"}, /* '<f2' is read (#15) */
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", "structured"},
        {"{'descr': '<f4', 'shape': (2,), }\n", "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", "unknown key"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }\n", "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }\n", "more than 4 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", "non-negative integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,) }  x\n", "nothing after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)\n", "',' or '}'"},
        {"['descr', '<f4']\n", "a dict"},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n; c++) {
        write_raw(p, 1, cases[c].h, v, 8);
        char label[32];
        snprintf(label, sizeof label, "case %d", c);
        expect_read_error(p, cases[c].what, label);
    }
    /* Unknown version, bad magic, missing file. */
    write_raw(p, 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", v, 8);
    expect_read_error(p, "version 4.0", "version");
    FILE *f = fopen(p, "wb");
    fputs("PK\x03\x04 this is a zip file, not an npy file", f);
    fclose(f);
    expect_read_error(p, "magic", "magic");
    join(p, sizeof p, dir, "missing.npy");
    expect_read_error(p, "cannot open", "missing");
    rm_tree(dir);
}

/* ------------------------------------------------------------ CLI: ssd */

typedef struct ssd_case {
    int64_t B, T, G, H, dk, dv;
    int head;      /* head-major layout */
    int h0, dhT;   /* optional inputs given */
} ssd_case;

static void shape4(int64_t *s, int64_t a, int64_t b, int64_t c, int64_t d) { s[0] = a, s[1] = b, s[2] = c, s[3] = d; }

static void ssd_cli_case(const ssd_case *c, const char *const *extra_args, int f64_q) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    cg_rng r = {0x5eed + (uint64_t)c->T * 131 + (uint64_t)c->head};
    int64_t qs[4], vs[4], las[3], hs[4];
    if (c->head) {
        shape4(qs, c->B, c->G, c->T, c->dk);
        shape4(vs, c->B, c->H, c->T, c->dv);
        las[0] = c->B, las[1] = c->H, las[2] = c->T;
    } else {
        shape4(qs, c->B, c->T, c->G, c->dk);
        shape4(vs, c->B, c->T, c->H, c->dv);
        las[0] = c->B, las[1] = c->T, las[2] = c->H;
    }
    shape4(hs, c->B, c->H, c->dk, c->dv);
    pair q = pair_new(&r, 4, qs, -1, 1), k = pair_new(&r, 4, qs, -1, 1), v = pair_new(&r, 4, vs, -1, 1);
    pair la = pair_new(&r, 3, las, -1.0, -0.02);
    pair h0 = pair_new(&r, 4, hs, -1, 1), dout = pair_new(&r, 4, vs, -1, 1), dhT = pair_new(&r, 4, hs, -1, 1);
    if (f64_q) write_tb_f64(dir, "q", &q.f);
    else write_npy(dir, "q", &q.f);
    write_npy(dir, "k", &k.f);
    write_npy(dir, "v", &v.f);
    write_npy(dir, "log_alpha", &la.f);
    if (c->h0) write_npy(dir, "h0", &h0.f);
    write_npy(dir, "do", &dout.f);
    if (c->dhT) write_npy(dir, "dhT", &dhT.f);

    /* Reference in float64 on the same values. */
    CG_TEST_CONTEXT(ctx);
    cg_tbuf o = f64_new(4, vs), hT = f64_new(4, hs);
    cg_tbuf dq = f64_new(4, qs), dk = f64_new(4, qs), dv = f64_new(4, vs), dla = f64_new(3, las), dh0 = f64_new(4, hs);
    cg_ssd_fwd_args fa;
    memset(&fa, 0, sizeof fa);
    fa.layout = c->head ? CG_LAYOUT_HEAD_MAJOR : CG_LAYOUT_TOKEN_MAJOR;
    fa.q = q.d.t, fa.k = k.d.t, fa.v = v.d.t, fa.log_alpha = la.d.t;
    if (c->h0) fa.h0 = h0.d.t;
    fa.o = o.t, fa.hT = hT.t;
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &fa, &k_ref));
    cg_ssd_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.layout = fa.layout;
    ba.q = fa.q, ba.k = fa.k, ba.v = fa.v, ba.log_alpha = fa.log_alpha, ba.h0 = fa.h0;
    ba.dout = dout.d.t;
    if (c->dhT) ba.dhT = dhT.d.t;
    ba.dq = dq.t, ba.dk = dk.t, ba.dv = dv.t, ba.dlog_alpha = dla.t;
    if (c->h0) ba.dh0 = dh0.t;
    CG_CHECK_OK(ctx, cg_ssd_bwd(ctx, &ba, &k_ref));

    char outdir[600];
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    const char *args[24] = {"run", "ssd", "--grad", "--backend", "cpu", "--in", dir, "--out", outdir};
    int na = 9;
    if (c->head) args[na++] = "--layout", args[na++] = "head";
    for (int i = 0; extra_args && extra_args[i]; i++) args[na++] = extra_args[i];
    args[na] = NULL;
    int rc = run_cli(dir, args);
    char *err = cli_stderr(dir);
    CG_CHECK(rc == 0, "chunkgen run ssd exited %d: %s", rc, err);
    if (f64_q) CG_CHECK(strstr(err, "q.npy") && strstr(err, "float64"), "no note about q.npy being float64: %s", err);
    if (rc == 0) {
        check_outs(outdir, FWD_TOL, "o", &o, "hT", &hT, NULL);
        check_outs(outdir, GRAD_TOL, "dq", &dq, "dk", &dk, "dv", &dv, "dlog_alpha", &dla, NULL);
        if (c->h0) check_out(outdir, "dh0", &dh0, GRAD_TOL);
        else CG_CHECK(!file_exists(outdir, "dh0.npy"), "dh0.npy written although h0.npy was not given");
        char sp[700];
        join(sp, sizeof sp, dir, "stdout.txt");
        char *out = slurp(sp);
        CG_CHECK(strstr(out, "dlog_alpha.npy") != NULL, "no summary line for dlog_alpha: %s", out);
        free(out);
    }
    free(err);
    cg_context_free(ctx);
    cg_tbuf *bufs[] = {&o, &hT, &dq, &dk, &dv, &dla, &dh0};
    for (int i = 0; i < 7; i++) cg_tbuf_free(bufs[i]);
    pair *ps[] = {&q, &k, &v, &la, &h0, &dout, &dhT};
    for (int i = 0; i < 7; i++) pair_free(ps[i]);
    rm_tree(dir);
}

CG_TEST(cli_run_ssd_grad_token) {
    ssd_case c = {2, 5, 2, 4, 7, 5, 0, 1, 1};
    const char *extra[] = {"--threads", "2", NULL};
    ssd_cli_case(&c, extra, 0);
}

/* Head-major layout, no h0 (so no dh0.npy), q given as float64, a pinned config. */
CG_TEST(cli_run_ssd_grad_head) {
    ssd_case c = {1, 9, 2, 6, 5, 3, 1, 0, 1};
    const char *extra[] = {"--verbose", "--config", "chunk=4", NULL};
    ssd_cli_case(&c, extra, 1);
}

/* --config with per-pass scopes: the forward and the backward each get their part (the
 * whole text, colons and all, would not parse as a config). */
CG_TEST(cli_run_ssd_grad_scoped_config) {
    ssd_case c = {1, 11, 1, 2, 5, 6, 0, 1, 1};
    const char *extra[] = {"--verbose", "--config", "ssd_fwd:chunk=4;ssd_bwd:chunk=8,bwd_split=1;threads=1", NULL};
    ssd_cli_case(&c, extra, 0);
}

/* ---------------------------------------------------------- CLI: sscan */

typedef struct sscan_case {
    int64_t B, L, D, N, G; /* G = 0: ungrouped B/C */
    int with_opt;          /* D, z, delta_bias, h0, dhT given */
    int softplus;
} sscan_case;

static void sscan_cli_case(const sscan_case *c) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    cg_rng r = {0xabc + (uint64_t)c->L};
    int64_t xs[3] = {c->B, c->L, c->D}, as[2] = {c->D, c->N}, ds[1] = {c->D}, hs[3] = {c->B, c->D, c->N};
    int64_t bs[4] = {c->B, c->L, c->G ? c->G : c->N, c->N};
    int bnd = c->G ? 4 : 3;
    pair x = pair_new(&r, 3, xs, -1, 1), delta = pair_new(&r, 3, xs, -1, 0.5), A = pair_new(&r, 2, as, -2, -0.1);
    pair Bm = pair_new(&r, bnd, bs, -1, 1), Cm = pair_new(&r, bnd, bs, -1, 1);
    pair Dv = pair_new(&r, 1, ds, -1, 1), z = pair_new(&r, 3, xs, -2, 2), bias = pair_new(&r, 1, ds, -0.5, 0.5);
    pair h0 = pair_new(&r, 3, hs, -1, 1), dy = pair_new(&r, 3, xs, -1, 1), dhT = pair_new(&r, 3, hs, -1, 1);
    if (!c->softplus) /* keep dt positive without softplus */
        for (int64_t i = 0; i < delta.f.count; i++) {
            float *p = (float *)delta.f.mem;
            p[i] = 0.05f + 0.5f * (p[i] + 1.0f);
            ((double *)delta.d.mem)[i] = p[i];
        }
    write_npy(dir, "x", &x.f);
    write_npy(dir, "delta", &delta.f);
    write_tb_fortran2(dir, "A", &A.f); /* Fortran order on purpose */
    write_npy(dir, "B", &Bm.f);
    write_npy(dir, "C", &Cm.f);
    write_npy(dir, "dy", &dy.f);
    if (c->with_opt) {
        write_npy(dir, "D", &Dv.f);
        write_npy(dir, "z", &z.f);
        write_npy(dir, "delta_bias", &bias.f);
        write_npy(dir, "h0", &h0.f);
        write_npy(dir, "dhT", &dhT.f);
    }

    CG_TEST_CONTEXT(ctx);
    cg_tbuf y = f64_new(3, xs), hT = f64_new(3, hs);
    cg_tbuf dx = f64_new(3, xs), ddelta = f64_new(3, xs), dA = f64_new(2, as), dB = f64_new(bnd, bs),
            dC = f64_new(bnd, bs), dD = f64_new(1, ds), dz = f64_new(3, xs), dbias = f64_new(1, ds),
            dh0 = f64_new(3, hs);
    cg_sscan_fwd_args fa;
    memset(&fa, 0, sizeof fa);
    fa.x = x.d.t, fa.delta = delta.d.t, fa.A = A.d.t, fa.B = Bm.d.t, fa.C = Cm.d.t;
    if (c->with_opt) fa.D = Dv.d.t, fa.z = z.d.t, fa.delta_bias = bias.d.t, fa.h0 = h0.d.t;
    fa.delta_softplus = c->softplus;
    fa.y = y.t, fa.hT = hT.t;
    CG_CHECK_OK(ctx, cg_sscan_fwd(ctx, &fa, &k_ref));
    cg_sscan_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    ba.x = fa.x, ba.delta = fa.delta, ba.A = fa.A, ba.B = fa.B, ba.C = fa.C;
    ba.D = fa.D, ba.z = fa.z, ba.delta_bias = fa.delta_bias, ba.h0 = fa.h0;
    ba.delta_softplus = c->softplus;
    ba.dy = dy.d.t;
    ba.dx = dx.t, ba.ddelta = ddelta.t, ba.dA = dA.t, ba.dB = dB.t, ba.dC = dC.t;
    if (c->with_opt) ba.dhT = dhT.d.t, ba.dD = dD.t, ba.dz = dz.t, ba.ddelta_bias = dbias.t, ba.dh0 = dh0.t;
    CG_CHECK_OK(ctx, cg_sscan_bwd(ctx, &ba, &k_ref));

    /* Positional directories this time: IN_DIR OUT_DIR. */
    char outdir[600];
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    const char *args[16] = {"run", "sscan", "--grad", "--backend=cpu", dir, outdir};
    int na = 6;
    if (c->softplus) args[na++] = "--delta-softplus";
    args[na] = NULL;
    int rc = run_cli(dir, args);
    char *err = cli_stderr(dir);
    CG_CHECK(rc == 0, "chunkgen run sscan exited %d: %s", rc, err);
    if (rc == 0) {
        check_outs(outdir, FWD_TOL, "y", &y, "hT", &hT, NULL);
        check_outs(outdir, GRAD_TOL, "dx", &dx, "ddelta", &ddelta, "dA", &dA, "dB", &dB, "dC", &dC, NULL);
        if (c->with_opt) {
            check_outs(outdir, GRAD_TOL, "dD", &dD, "dz", &dz, "ddelta_bias", &dbias, "dh0", &dh0, NULL);
        } else {
            const char *absent[] = {"dD.npy", "dz.npy", "ddelta_bias.npy", "dh0.npy"};
            for (int i = 0; i < 4; i++)
                CG_CHECK(!file_exists(outdir, absent[i]), "%s written although its input was not given", absent[i]);
        }
    }
    free(err);
    cg_context_free(ctx);
    cg_tbuf *bufs[] = {&y, &hT, &dx, &ddelta, &dA, &dB, &dC, &dD, &dz, &dbias, &dh0};
    for (int i = 0; i < 11; i++) cg_tbuf_free(bufs[i]);
    pair *ps[] = {&x, &delta, &A, &Bm, &Cm, &Dv, &z, &bias, &h0, &dy, &dhT};
    for (int i = 0; i < 11; i++) pair_free(ps[i]);
    rm_tree(dir);
}

CG_TEST(cli_run_sscan_grad_grouped_all) {
    sscan_case c = {2, 7, 6, 5, 3, 1, 1};
    sscan_cli_case(&c);
}

CG_TEST(cli_run_sscan_grad_plain) {
    sscan_case c = {1, 9, 5, 3, 0, 0, 0};
    sscan_cli_case(&c);
}

/* --------------------------------------------------------- CLI: errors */

/* A valid small ssd input set in dir (token layout, B=2, T=5, G=2, H=4, dk=7, dv=5). */
static void write_ssd_inputs(const char *dir) {
    cg_rng r = {77};
    int64_t qs[4] = {2, 5, 2, 7}, vs[4] = {2, 5, 4, 5}, las[3] = {2, 5, 4};
    cg_tbuf q = cg_tbuf_new(CG_F32, 4, qs), v = cg_tbuf_new(CG_F32, 4, vs), la = cg_tbuf_new(CG_F32, 3, las);
    cg_tbuf_fill(&q, &r, -1, 1);
    cg_tbuf_fill(&v, &r, -1, 1);
    cg_tbuf_fill(&la, &r, -1, -0.1);
    write_npy(dir, "q", &q);
    write_npy(dir, "k", &q);
    write_npy(dir, "v", &v);
    write_npy(dir, "do", &v);
    write_npy(dir, "log_alpha", &la);
    cg_tbuf_free(&q);
    cg_tbuf_free(&v);
    cg_tbuf_free(&la);
}

/* mk_tmpdir_with (path = dir/name) and the inputs of write_ssd_inputs in dir; 0, or -1
 * as mk_tmpdir. */
static int ssd_inputs_with(char *dir, size_t len, char *path, size_t plen, const char *name) {
    if (mk_tmpdir_with(dir, len, path, plen, name)) return -1;
    write_ssd_inputs(dir);
    return 0;
}

/* Run args in dir, expect exit code `want` and stderr containing all of needles. */
static void expect_cli_error(const char *dir, const char *const *args, int want, const char *const *needles,
                             const char *label) {
    int rc = run_cli(dir, args);
    char *err = cli_stderr(dir);
    CG_CHECK(rc == want, "%s: exit %d, expected %d; stderr: %s", label, rc, want, err);
    CG_CHECK(strncmp(err, "chunkgen run: ", 14) == 0, "%s: stderr does not start with 'chunkgen run: ': %s", label,
             err);
    for (int i = 0; needles[i]; i++)
        CG_CHECK(strstr(err, needles[i]) != NULL, "%s: stderr lacks '%s': %s", label, needles[i], err);
    CG_CHECK(!file_exists(dir, "o.npy"), "%s: o.npy written despite the error", label);
    free(err);
}

CG_TEST(cli_run_shape_mismatch) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    write_ssd_inputs(dir);
    int64_t bad[4] = {2, 5, 3, 7};
    cg_tbuf k = cg_tbuf_new(CG_F32, 4, bad);
    write_npy(dir, "k", &k);
    const char *args[] = {"run", "ssd", "--in", dir, NULL};
    const char *needles[] = {"k.npy", "(2, 5, 3, 7)", "(2, 5, 2, 7)", "[B, T, G, dk]", NULL};
    expect_cli_error(dir, args, 1, needles, "k mismatch");
    cg_tbuf_free(&k);
    /* log_alpha with the wrong rank, in head layout terms. */
    write_ssd_inputs(dir);
    int64_t la2[2] = {2, 5};
    cg_tbuf la = cg_tbuf_new(CG_F32, 2, la2);
    write_npy(dir, "log_alpha", &la);
    const char *needles2[] = {"log_alpha.npy", "(2, 5)", "(2, 5, 4)", NULL};
    expect_cli_error(dir, args, 1, needles2, "log_alpha rank");
    cg_tbuf_free(&la);
    /* H not a multiple of G. */
    write_ssd_inputs(dir);
    int64_t v3[4] = {2, 5, 3, 5};
    cg_tbuf v = cg_tbuf_new(CG_F32, 4, v3);
    write_npy(dir, "v", &v);
    const char *needles3[] = {"v.npy", "not a multiple", NULL};
    expect_cli_error(dir, args, 1, needles3, "H % G");
    cg_tbuf_free(&v);
    rm_tree(dir);
}

CG_TEST(cli_run_sscan_shape_mismatch) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    cg_rng r = {3};
    int64_t xs[3] = {1, 4, 6}, as[2] = {6, 3}, bs[3] = {1, 4, 3}, cs[3] = {1, 4, 2}, ds[1] = {5};
    cg_tbuf x = cg_tbuf_new(CG_F32, 3, xs), A = cg_tbuf_new(CG_F32, 2, as), Bm = cg_tbuf_new(CG_F32, 3, bs),
            Cm = cg_tbuf_new(CG_F32, 3, cs), Dv = cg_tbuf_new(CG_F32, 1, ds);
    cg_tbuf_fill(&x, &r, -1, 1);
    write_npy(dir, "x", &x);
    write_npy(dir, "delta", &x);
    write_npy(dir, "A", &A);
    write_npy(dir, "B", &Bm);
    write_npy(dir, "C", &Cm);
    const char *args[] = {"run", "sscan", dir, NULL};
    const char *needles[] = {"C.npy", "(1, 4, 2)", "(1, 4, 3)", "like B.npy", NULL};
    expect_cli_error(dir, args, 1, needles, "C mismatch");
    write_npy(dir, "C", &Bm);
    write_npy(dir, "D", &Dv);
    const char *needles2[] = {"D.npy", "(5,)", "(6,)", NULL};
    expect_cli_error(dir, args, 1, needles2, "D mismatch");
    cg_tbuf *bufs[] = {&x, &A, &Bm, &Cm, &Dv};
    for (int i = 0; i < 5; i++) cg_tbuf_free(bufs[i]);
    rm_tree(dir);
}

CG_TEST(cli_run_truncated_input) {
    char dir[512], p[1024];
    if (ssd_inputs_with(dir, sizeof dir, p, sizeof p, "v.npy")) return;
    struct stat st;
    CG_CHECK(stat(p, &st) == 0, "stat");
    CG_CHECK(truncate(p, st.st_size - 6) == 0, "truncate: %s", strerror(errno));
    const char *args[] = {"run", "ssd", "--in", dir, NULL};
    const char *needles[] = {"v.npy", "truncated", NULL};
    expect_cli_error(dir, args, 1, needles, "truncated v");
    rm_tree(dir);
}

CG_TEST(cli_run_missing_input) {
    char dir[512], p[1024];
    if (ssd_inputs_with(dir, sizeof dir, p, sizeof p, "do.npy")) return;
    unlink(p);
    /* Forward alone does not need do.npy... */
    const char *fwd[] = {"run", "ssd", "--in", dir, NULL};
    int rc = run_cli(dir, fwd);
    CG_CHECK(rc == 0, "forward without do.npy exited %d", rc);
    CG_CHECK(file_exists(dir, "o.npy") && file_exists(dir, "hT.npy"), "forward outputs missing");
    join(p, sizeof p, dir, "o.npy");
    unlink(p);
    /* ...--grad does. */
    const char *grad[] = {"run", "ssd", "--grad", "--in", dir, NULL};
    const char *needles[] = {"missing required input", "do.npy", "--grad", NULL};
    expect_cli_error(dir, grad, 1, needles, "no do");
    join(p, sizeof p, dir, "log_alpha.npy");
    unlink(p);
    const char *needles2[] = {"log_alpha.npy", NULL};
    expect_cli_error(dir, fwd, 1, needles2, "no log_alpha");
    rm_tree(dir);
}

CG_TEST(cli_run_bad_descr) {
    char dir[512], p[1024];
    if (ssd_inputs_with(dir, sizeof dir, p, sizeof p, "q.npy")) return;
    int32_t iv[70] = {0};
    write_raw(p, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 5, 2, 7), }\n", iv, 70 * sizeof(int32_t));
    const char *args[] = {"run", "ssd", "--in", dir, NULL};
    const char *needles[] = {"q.npy", "'<i4'", "not supported", NULL};
    expect_cli_error(dir, args, 1, needles, "int32 q");
    rm_tree(dir);
}

CG_TEST(cli_run_usage_errors) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    write_ssd_inputs(dir);
    const char *none[] = {NULL};
    const char *a1[] = {"run", "ssd", "--bogus", "--in", dir, NULL};
    const char *n1[] = {"--bogus", NULL};
    expect_cli_error(dir, a1, 2, n1, "unknown option");
    const char *a2[] = {"run", "ssd", NULL};
    const char *n2[] = {"input directory", NULL};
    expect_cli_error(dir, a2, 2, n2, "no input dir");
    const char *a3[] = {"run", "ssd", "--backend", "gpu9", "--in", dir, NULL};
    const char *n3[] = {"gpu9", NULL};
    expect_cli_error(dir, a3, 2, n3, "bad backend");
    const char *a4[] = {"run", "mamba", "--in", dir, NULL};
    const char *n4[] = {"mamba", NULL};
    expect_cli_error(dir, a4, 2, n4, "bad op");
    const char *a5[] = {"run", "ssd", "--layout", "diagonal", dir, NULL};
    expect_cli_error(dir, a5, 2, none, "bad layout");
    const char *a6[] = {"run", "ssd", "--threads", "-3", dir, NULL};
    expect_cli_error(dir, a6, 2, none, "bad threads");
    const char *a7[] = {"run", "ssd", "--delta-softplus", dir, NULL};
    expect_cli_error(dir, a7, 2, none, "softplus on ssd");
    /* A library error (a config the library refuses) is exit 1 with the library's message. */
    const char *a8[] = {"run", "ssd", "--config", "=,=", dir, NULL};
    int rc = run_cli(dir, a8);
    CG_CHECK(rc == 1, "bad config: exit %d, expected 1", rc);
    rm_tree(dir);
}

/* --help lists each op's files from the op table: optional ones in brackets, the
 * backward's after "(and", and the usage and options around them. */
CG_TEST(cli_run_help_lists_files) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    const char *args[] = {"run", "--help", NULL};
    int rc = run_cli(dir, args);
    char p[1024];
    join(p, sizeof p, dir, "stdout.txt");
    char *out = slurp(p);
    CG_CHECK(rc == 0, "run --help exited %d", rc);
    const char *want[] = {"usage: chunkgen run ssd|sscan", "  ssd   reads  q k v log_alpha [h0] (and do [dhT] with --grad)\n",
                          "        writes o hT (and dq dk dv dlog_alpha [dh0] with --grad)\n",
                          "  sscan reads  x delta A B C [D] [z] [delta_bias] [h0] (and dy [dhT] with --grad)\n",
                          "        writes y hT (and dx ddelta dA dB dC [dD] [dz] [ddelta_bias] [dh0] with --grad)\n",
                          "Gradients are written only", "--delta-softplus", NULL};
    for (int i = 0; want[i]; i++) CG_CHECK(strstr(out, want[i]) != NULL, "run --help lacks '%s': %s", want[i], out);
    free(out);
    rm_tree(dir);
}
