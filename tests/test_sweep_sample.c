/* test_sweep_sample.c -- the covering sample of the sweeps (tests/sweep_sample.h) keeps what
 * it promises, checked here by brute force on the real spaces of every generated kernel:
 * every pair of parameter values of the union (CG_SWEEP_PAIRS) or every value
 * (CG_SWEEP_VALUES), and every point of the constraint boundary; the same sample twice;
 * CHUNKGEN_TEST_SWEEP=full keeps all. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "gen.h"
#include "gen_shapes.h"
#include "sweep_sample.h"

#include <string.h>

static int is_num(const char *s) { return *s && strspn(s, "-0123456789") == strlen(s); }

/* c sits on the constraint boundary of key j in direction dir: the nearest value of key j
 * the union has that way exists, and c with it is not in the union. */
static int on_edge(const cg_cfg *u, int n, const cg_cfg *c, int j, int dir) {
    if (!is_num(c->kv[j].val)) return 0;
    long long v = atoll(c->kv[j].val), best = 0;
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (!is_num(u[i].kv[j].val)) continue;
        long long w = atoll(u[i].kv[j].val);
        if ((dir > 0 ? w > v : w < v) && (!found || (dir > 0 ? w < best : w > best))) best = w, found = 1;
    }
    if (!found) return 0;
    cg_cfg nb = *c;
    snprintf(nb.kv[j].val, sizeof nb.kv[j].val, "%lld", best);
    for (int i = 0; i < n; i++)
        if (cg_sweep_same_cfg(&u[i], &nb)) return 0;
    return 1;
}

/* Brute force: the selection of u[0..n) at strength st keeps every value (st values) or
 * every pair of values (st pairs) that the union has, and every boundary point (key j at
 * value v where some config is on the edge in direction dir); returns how many are not. */
static int uncovered(const cg_cfg *u, int n, const cg_sweep_sel *sel, cg_sweep_strength st, const char *what) {
    int bad = 0;
    const int nk = n ? u[0].n : 0;
    for (int i = 1; i < n; i++) /* one kernel's space: the same keys in the same order */
        for (int j = 0; j < nk; j++) CG_CHECK(!strcmp(u[i].kv[j].key, u[0].kv[j].key), "%s: key order differs", what);
    unsigned char *edge = calloc((size_t)n * (size_t)nk * 2 + 1, 1);
    for (int i = 0; edge && i < n; i++)
        for (int j = 0; j < nk; j++)
            for (int d = 0; d < 2; d++) edge[((size_t)i * nk + j) * 2 + d] = (unsigned char)on_edge(u, n, &u[i], j, d ? 1 : -1);
    for (int i = 0; i < n && bad < 5; i++) {
        const cg_cfg *c = &u[i];
        for (int a = 0; a < nk; a++)
            for (int b = a; b < (st == CG_SWEEP_PAIRS ? nk : a + 1); b++) { /* b == a: the value alone */
                int hit = 0;
                for (int k = 0; k < n && !hit; k++)
                    hit = cg_sweep_keeps(sel, k) && !strcmp(u[k].kv[a].val, c->kv[a].val) &&
                          !strcmp(u[k].kv[b].val, c->kv[b].val);
                if (!hit) {
                    CG_CHECK(0, "%s: %s=%s with %s=%s is in no kept config", what, c->kv[a].key, c->kv[a].val,
                             c->kv[b].key, c->kv[b].val);
                    bad++;
                }
            }
        for (int j = 0; edge && j < nk; j++)
            for (int d = 0; d < 2; d++) {
                if (!edge[((size_t)i * nk + j) * 2 + d]) continue;
                int hit = 0;
                for (int k = 0; k < n && !hit; k++)
                    hit = cg_sweep_keeps(sel, k) && edge[((size_t)k * nk + j) * 2 + d] && !strcmp(u[k].kv[j].val, c->kv[j].val);
                if (!hit) {
                    CG_CHECK(0, "%s: the boundary %s=%s (direction %+d) is in no kept config", what, c->kv[j].key,
                             c->kv[j].val, d ? 1 : -1);
                    bad++;
                }
            }
    }
    free(edge);
    return bad;
}

/* The union of kernel's spaces over the generator tests' odd shapes on arch. */
static int union_of(cg_context *ctx, const char *kernel, const cg_devinfo *dev, cg_cfg **out) {
    int n = 0, cap = 0;
    *out = NULL;
    for (int si = 0; si < NSHAPES; si++) {
        cg_shape s = shape_of(si);
        cg_cfg *sp = NULL;
        int ns = 0;
        if (cg__gen_space(ctx, kernel, &s, FLAGS_OF(si), dev, &sp, &ns) != CG_OK) continue;
        for (int i = 0; i < ns; i++) {
            int dup = 0;
            for (int k = 0; k < n && !dup; k++) dup = cg_sweep_same_cfg(&(*out)[k], &sp[i]);
            if (dup) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                cg_cfg *nu = realloc(*out, (size_t)cap * sizeof *nu);
                if (!nu) break;
                *out = nu;
            }
            (*out)[n++] = sp[i];
        }
        free(sp);
    }
    return n;
}

CG_TEST(sweep_sample_covers) {
    const char *saved[2] = {getenv("CHUNKGEN_TEST_SWEEP"), getenv("CHUNKGEN_TEST_CONFIG_STRIDE")};
    char keep0[64] = "", keep1[64] = "";
    if (saved[0]) snprintf(keep0, sizeof keep0, "%s", saved[0]);
    if (saved[1]) snprintf(keep1, sizeof keep1, "%s", saved[1]);
    unsetenv("CHUNKGEN_TEST_SWEEP");
    unsetenv("CHUNKGEN_TEST_CONFIG_STRIDE");
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    static const char *const kernels[] = {"ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};
    for (int arch = 80; arch <= 90; arch += 10) {
        cg_devinfo dev;
        CG_CHECK(cg__devinfo_arch(arch, &dev), "arch %d", arch);
        for (int k = 0; k < 4; k++) {
            cg_cfg *u = NULL;
            const int n = union_of(ctx, kernels[k], &dev, &u);
            CG_CHECK(n > 20, "%s sm_%d: a union of %d configs", kernels[k], arch, n);
            for (int st = CG_SWEEP_VALUES; st <= CG_SWEEP_PAIRS; st++) {
                cg_sweep_sel a, b;
                cg_sweep_select_array(u, n, (cg_sweep_strength)st, &a);
                cg_sweep_select_array(u, n, (cg_sweep_strength)st, &b);
                char what[96];
                snprintf(what, sizeof what, "%s sm_%d %s", kernels[k], arch, st == CG_SWEEP_PAIRS ? "pairs" : "values");
                CG_CHECK(a.nkept > 0 && a.nkept < n, "%s: %d of %d kept", what, a.nkept, n);
                CG_CHECK(a.n == b.n && !memcmp(a.keep, b.keep, (size_t)n), "%s: two selections differ", what);
                (void)uncovered(u, n, &a, (cg_sweep_strength)st, what);
                fprintf(stderr, "  %s: %d of %d configs\n", what, a.nkept, n);
                cg_sweep_sel_free(&a);
                cg_sweep_sel_free(&b);
            }
            /* full keeps every config; a stride every n-th */
            cg_sweep_sel f;
            setenv("CHUNKGEN_TEST_SWEEP", "full", 1);
            cg_sweep_select_array(u, n, CG_SWEEP_PAIRS, &f);
            CG_CHECK(f.nkept == n && !strcmp(f.mode, "full"), "full: %d of %d", f.nkept, n);
            cg_sweep_sel_free(&f);
            unsetenv("CHUNKGEN_TEST_SWEEP");
            setenv("CHUNKGEN_TEST_CONFIG_STRIDE", "7", 1);
            cg_sweep_select_array(u, n, CG_SWEEP_PAIRS, &f);
            CG_CHECK(f.nkept == (n + 6) / 7 && cg_sweep_keeps(&f, 7) && !cg_sweep_keeps(&f, 8), "stride 7: %d of %d",
                     f.nkept, n);
            cg_sweep_sel_free(&f);
            unsetenv("CHUNKGEN_TEST_CONFIG_STRIDE");
            free(u);
        }
    }
    cg_context_free(ctx);
    if (saved[0]) setenv("CHUNKGEN_TEST_SWEEP", keep0, 1);
    if (saved[1]) setenv("CHUNKGEN_TEST_CONFIG_STRIDE", keep1, 1);
}
