/* test_varlen_cli.c -- `chunkgen run --cu-seqlens FILE.npy` (docs/varlen.md): the CLI's
 * packed call (forward and --grad) writes what the library's packed call gives on the same
 * inputs (int32 and int64 offset files, states per sequence), and its errors name the file
 * or the first bad offset. The packed = per-sequence semantics are test_varlen.c's. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "npy.h"
#include "ops.h"

#include <string.h>

static const int64_t k_lens[] = {1, 37, 0, 5}; /* a length 1, a 0-length gap */
#define NSEQ 4
#define TOTAL 43

/* The packed problem's tensors in bwd's table order (bwd's inputs hold the forward's). */
typedef struct vcase {
    const cg_op_desc *fwd, *bwd;
    int64_t dims[CG_SYM_COUNT];
    cg_tbuf t[CG_OP_MAX_TENSORS];
    char dir[512];
} vcase;

static void tensor_shape(const cg_op_desc *d, int i, const int64_t *dims, int64_t shape[4], int *nd) {
    *nd = cg__op_given_shape(d, i, dims, 1, 0, shape);
    if (d->t[i].flags & CG_TD_PERSEQ) shape[0] = NSEQ;
}

/* The offsets of k_lens as a '<i4' or '<i8' file (or '<f4' with bad_dtype), last entry
 * moved by last_off. */
static void write_cu(const char *path, int wide, int bad_dtype, int64_t last_off) {
    int64_t v[NSEQ + 1] = {0};
    for (int i = 0; i < NSEQ; i++) v[i + 1] = v[i] + k_lens[i];
    v[NSEQ] += last_off;
    unsigned char data[8 * (NSEQ + 1)];
    for (int i = 0; i <= NSEQ; i++) {
        int32_t v32 = (int32_t)v[i];
        float f = (float)v[i];
        if (wide) memcpy(data + 8 * i, &v[i], 8);
        else memcpy(data + 4 * i, bad_dtype ? (const void *)&f : (const void *)&v32, 4);
    }
    char h[128];
    snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }\n",
             bad_dtype ? "<f4" : wide ? "<i8" : "<i4", NSEQ + 1);
    write_raw(path, 1, h, data, (size_t)(wide ? 8 : 4) * (NSEQ + 1));
}

static int vcase_new(vcase *c, const char *family) {
    memset(c, 0, sizeof *c);
    char name[32];
    snprintf(name, sizeof name, "%s_fwd", family);
    c->fwd = cg__op_find(name);
    snprintf(name, sizeof name, "%s_bwd", family);
    c->bwd = cg__op_find(name);
    for (int s = 0; s < CG_SYM_COUNT; s++) c->dims[s] = 1;
    const int ssd = !strcmp(family, "ssd");
    c->dims[c->bwd->seq] = TOTAL;
    c->dims[CG_SYM_G] = 2;
    if (ssd) c->dims[CG_SYM_H] = 4, c->dims[CG_SYM_DK] = 5, c->dims[CG_SYM_DV] = 7;
    else c->dims[CG_SYM_D] = 6, c->dims[CG_SYM_N] = 5;
    if (mk_tmpdir(c->dir, sizeof c->dir)) return -1;
    cg_rng r = {0x5eed};
    for (int i = 0; i < c->bwd->nt; i++) { /* every input, the optional ones too */
        const cg_tdesc *t = &c->bwd->t[i];
        if (t->role != CG_TD_IN) continue;
        int64_t shape[4];
        int nd;
        tensor_shape(c->bwd, i, c->dims, shape, &nd);
        c->t[i] = cg_tbuf_new(CG_F32, nd, shape);
        cg_tbuf_fill(&c->t[i], &r, t->lo, t->hi);
        write_npy(c->dir, t->file ? t->file : t->name, &c->t[i]);
    }
    return 0;
}

static void vcase_free(vcase *c) {
    for (int i = 0; i < CG_OP_MAX_TENSORS; i++)
        if (c->t[i].mem) cg_tbuf_free(&c->t[i]);
    rm_tree(c->dir);
}

/* The library's packed call of d on c's inputs (backend ref), each output against the
 * file the CLI wrote. */
static void check_against_library(vcase *c, const cg_op_desc *d, int wide) {
    cg_context *ctx = NULL;
    CG_CHECK(cg_context_create(&ctx) == CG_OK, "context");
    union {
        cg_ssd_fwd_args a;
        cg_ssd_bwd_args b;
        cg_sscan_fwd_args c;
        cg_sscan_bwd_args e;
    } args;
    memset(&args, 0, sizeof args);
    cg_tbuf out[CG_OP_MAX_TENSORS];
    memset(out, 0, sizeof out);
    for (int i = 0; i < d->nt; i++) {
        int j = cg__op_tensor(c->bwd, d->t[i].name);
        if (d->t[i].role == CG_TD_IN) {
            *cg__args_tensor(d, &args, i) = c->t[j].t;
            continue;
        }
        int64_t shape[4];
        int nd;
        tensor_shape(d, i, c->dims, shape, &nd);
        out[i] = cg_tbuf_new(CG_F32, nd, shape);
        *cg__args_tensor(d, &args, i) = out[i].t;
    }
    int64_t v[NSEQ + 1] = {0};
    int32_t v32[NSEQ + 1] = {0};
    for (int i = 0; i < NSEQ; i++) v[i + 1] = v[i] + k_lens[i], v32[i + 1] = (int32_t)v[i + 1];
    cg_tensor *cu = (cg_tensor *)((char *)&args + d->varlen->arg_off);
    *cu = cg_tensor_contiguous(wide ? (void *)v : (void *)v32, wide ? CG_I64 : CG_I32, 1, (int64_t[]){NSEQ + 1});
    cg_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.backend = CG_BACKEND_REF;
    cg_status st = cg_run(ctx, d->op, &args, &ex);
    CG_CHECK(st == CG_OK, "%s: %s", d->name, cg_errmsg(ctx));
    for (int i = 0; st == CG_OK && i < d->nt; i++) {
        if (d->t[i].role != CG_TD_OUT) continue;
        char p[4096], file[64], err[512];
        snprintf(file, sizeof file, "%s.npy", d->t[i].name);
        join(p, sizeof p, c->dir, file);
        cg_npy f;
        if (cg_npy_read(p, &f, err, sizeof err) != 0) {
            CG_CHECK(0, "%s", err);
            continue;
        }
        CG_CHECK(f.t.ndim == out[i].t.ndim && !memcmp(f.t.shape, out[i].t.shape, sizeof(int64_t) * (size_t)f.t.ndim),
                 "%s: shape", p);
        double worst = 0;
        for (int64_t k = 0; k < out[i].count && k < f.count; k++) {
            double e = f.data[k] - ((const float *)out[i].mem)[k];
            worst = e > worst ? e : -e > worst ? -e : worst;
        }
        CG_CHECK(f.count == out[i].count && worst == 0, "%s: differs from the library's packed call by %g", p, worst);
        cg_npy_free(&f);
    }
    for (int i = 0; i < CG_OP_MAX_TENSORS; i++)
        if (out[i].mem) cg_tbuf_free(&out[i]);
    cg_context_free(ctx);
}

static void cli_case(const char *family, int wide) {
    vcase c;
    if (vcase_new(&c, family)) return;
    char cu[4096];
    join(cu, sizeof cu, c.dir, "cu.npy");
    write_cu(cu, wide, 0, 0);
    const char *args[] = {"run", family, "--backend", "ref", "--grad", "--cu-seqlens", cu, c.dir, NULL};
    int rc = run_cli(c.dir, args);
    char *err = cli_stderr(c.dir);
    CG_CHECK(rc == 0, "%s: exit %d: %s", family, rc, err);
    free(err);
    if (rc == 0) {
        check_against_library(&c, c.fwd, wide);
        check_against_library(&c, c.bwd, wide);
    }
    vcase_free(&c);
}

CG_TEST(varlen_cli_ssd_int32) { cli_case("ssd", 0); }
CG_TEST(varlen_cli_sscan_int64) { cli_case("sscan", 1); }

static void expect_error(vcase *c, const char *cu, const char *needle, const char *label) {
    const char *args[] = {"run", "ssd", "--backend", "cpu", "--cu-seqlens", cu, c->dir, NULL};
    int rc = run_cli(c->dir, args);
    char *err = cli_stderr(c->dir);
    CG_CHECK(rc == 1, "%s: exit %d, expected 1: %s", label, rc, err);
    CG_CHECK(strstr(err, needle) != NULL, "%s: stderr lacks '%s': %s", label, needle, err);
    CG_CHECK(!file_exists(c->dir, "o.npy"), "%s: o.npy written despite the error", label);
    free(err);
}

CG_TEST(varlen_cli_errors) {
    vcase c;
    if (vcase_new(&c, "ssd")) return;
    char cu[4096];
    join(cu, sizeof cu, c.dir, "cu.npy");
    write_cu(cu, 0, 1, 0);
    expect_error(&c, cu, "dtype '<f4' but expected little-endian int32 '<i4' or int64 '<i8' offsets", "float offsets");
    write_cu(cu, 1, 0, -3);
    expect_error(&c, cu, "cu_seqlens[4] = 40 but expected T = 43", "last offset");
    write_cu(cu, 0, 0, 0);
    cg_tbuf h0 = cg_tbuf_new(CG_F32, 4, (int64_t[]){1, 4, 5, 7}); /* one state, not one per sequence */
    write_npy(c.dir, "h0", &h0);
    expect_error(&c, cu, "h0.npy: shape (1, 4, 5, 7) but expected (4, 4, 5, 7)", "h0 per sequence");
    cg_tbuf_free(&h0);
    vcase_free(&c);
}
