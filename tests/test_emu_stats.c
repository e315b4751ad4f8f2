/* test_emu_stats.c -- what the emulator measures beyond results: cp.async modelled
 * asynchronously (tests/emu_kernels/async.cu) and the access statistics, bank
 * conflicts and coalescing (tests/emu_kernels/stats.cu), against the counts the model
 * of docs/emulator.md gives for each pattern. */
#include "cg_test.h"
#include "gen.h"
#include "emu/emu.h"
#include "test_emu_lib.h"

#include <jansson.h>
#include <unistd.h>

/* ------------------------------------------------------------------ async.cu */
typedef struct emu_async_params {
    const float *x;
    float *out;
    int n, mode;
} emu_async_params;

static const char *const k_async[] = {"emu_async_pipe", "emu_async_early", "emu_async_nobar"};
/* the cases: kernel, mode */
static const int k_async_case[][2] = {{0, 0}, {1, 0}, {1, 1}, {2, 0}};

/* Run the async cases: the pipeline must be right; the others must fail: with
 * racecheck with a race message, without it with stale (NaN) outputs. */
static void async_run(int racecheck) {
    if (racecheck) setenv("CHUNKGEN_EMU_RACECHECK", "1", 1);
    cg_context *ctx = emu_ctx();
    void *mod = ctx ? emu_module(ctx, "async.cu", k_async, 3) : NULL;
    unsetenv("CHUNKGEN_EMU_RACECHECK");
    if (mod) {
        enum { NT = 64, NC = 5 };
        float *x = NULL, *out = NULL;
        CG_CHECK_OK(ctx, cg__kexec_emu.alloc(ctx, NT * NC * sizeof(float), (void **)&x));
        CG_CHECK_OK(ctx, cg__kexec_emu.alloc(ctx, NT * NC * sizeof(float), (void **)&out));
        for (int i = 0; i < NT * NC; i++) x[i] = (float)(i % 37) - 9.f;
        emu_async_params p = {x, out, NT * NC, 0};
        const unsigned grid[3] = {1, 1, 1}, block[3] = {NT, 1, 1};
        for (int c4 = 0; c4 < 4; c4++) {
            const int k = k_async_case[c4][0];
            p.n = k == 0 ? NT * NC : NT;
            p.mode = k_async_case[c4][1];
            memset(out, 0, NT * NC * sizeof(float));
            cg_status st = emu_launch(ctx, mod, k_async[k], grid, block, 2 * NT * sizeof(float), &p, sizeof p);
            int bad = 0;
            for (int c = 0; c < p.n / NT; c++)
                for (int t = 0; t < NT; t++) {
                    const float *xc = x + c * NT;
                    const int nb = k == 2 ? (t + NT - 1) % NT : (t + 1) % NT;
                    bad += !(out[c * NT + t] == xc[t] + xc[nb]);
                }
            if (k == 0) {
                CG_CHECK(st == CG_OK && bad == 0, "%s (racecheck %d): %s, %d outputs wrong: %s", k_async[k], racecheck,
                         cg_status_str(st), bad, cg_errmsg(ctx));
            } else if (racecheck) {
                const char *want = k == 2 ? "after a write by thread" : "cp.async of thread";
                CG_CHECK(st == CG_ELAUNCH && strstr(cg_errmsg(ctx), "race") && strstr(cg_errmsg(ctx), want),
                         "%s (mode %d) under racecheck: %s: %s", k_async[k], p.mode, cg_status_str(st), cg_errmsg(ctx));
            } else {
                /* the copies had not landed: the poisoned (NaN) destination was read */
                CG_CHECK(st == CG_OK && bad > 0, "%s (mode %d): %s, %d outputs wrong (expected stale reads): %s",
                         k_async[k], p.mode, cg_status_str(st), bad, cg_errmsg(ctx));
            }
        }
        cg__kexec_emu.free(ctx, x);
        cg__kexec_emu.free(ctx, out);
    }
    cg_context_free(ctx);
}

CG_TEST(emu_cp_async_lands_at_wait) { async_run(0); }

CG_TEST(emu_cp_async_racecheck) { async_run(1); }

/* ------------------------------------------------------------------ stats.cu */
typedef struct emu_stats_params {
    const float *x;
    float *out;
    int sstride, gstride;
} emu_stats_params;

static const char *const k_stats[] = {"emu_stats_access", "emu_stats_cp16"};

/* Line of `// @name` in tests/emu_kernels/stats.cu, 0 if absent. */
static int mark_line(const char *name) {
    char *src = emu_slurp("tests/emu_kernels/stats.cu"), want[64];
    if (!src) return 0;
    snprintf(want, sizeof want, "// @%s\n", name);
    char *hit = strstr(src, want);
    int line = 0;
    if (hit) {
        line = 1;
        for (char *q = src; q < hit; q++) line += *q == '\n';
    }
    free(src);
    CG_CHECK(line > 0, "no mark @%s in stats.cu", name);
    return line;
}

/* The counts of the last launch's accesses at mark (space, store); NULL if none. */
static const cg_emu_line_stat *line_of(cg_context *ctx, const char *mark, int space, int store) {
    const int n = cg__emu_stats_count(ctx), line = mark_line(mark);
    const cg_emu_launch_stats *L = n ? cg__emu_stats_get(ctx, n - 1) : NULL;
    for (int i = 0; L && i < L->nlines; i++) {
        const cg_emu_line_stat *s = &L->lines[i];
        if (strcmp(s->file, "emu_test_stats.cu") == 0 && s->line == line && s->space == space && s->store == store)
            return s;
    }
    CG_CHECK(0, "no %s %s counted at @%s (line %d)", space ? "global" : "shared", store ? "store" : "load", mark, line);
    return NULL;
}

/* Per warp-wide request: units and ideal, as measured at mark. */
static void expect(cg_context *ctx, const char *what, const char *mark, int space, int store, unsigned width,
                   uint64_t requests, uint64_t units, uint64_t ideal) {
    const cg_emu_line_stat *s = line_of(ctx, mark, space, store);
    if (!s) return;
    CG_CHECK(s->width == width && s->requests == requests && s->units == units * requests &&
                 s->ideal == ideal * requests,
             "%s (@%s): width %u, %llu requests, %llu %s, ideal %llu; expected width %u, %llu requests, %llu "
             "per request, ideal %llu",
             what, mark, s->width, (unsigned long long)s->requests, (unsigned long long)s->units,
             space ? "sectors" : "wavefronts", (unsigned long long)s->ideal, width, (unsigned long long)requests,
             (unsigned long long)units, (unsigned long long)ideal);
}

enum { ST_NT = 64, ST_WARPS = ST_NT / 32, ST_SMEM = 8192 * 4 };

/* A context that counts, the stats.cu module and 1024 floats of input. */
static void *stats_setup(cg_context **ctx, float **x, float **out) {
    *ctx = emu_ctx();
    *x = *out = NULL;
    if (!*ctx) return NULL;
    CG_CHECK_OK(*ctx, cg__emu_stats_enable(*ctx, 1));
    void *mod = emu_module(*ctx, "stats.cu", k_stats, 2);
    if (!mod) return NULL;
    CG_CHECK_OK(*ctx, cg__kexec_emu.alloc(*ctx, 1024 * sizeof(float), (void **)x));
    CG_CHECK_OK(*ctx, cg__kexec_emu.alloc(*ctx, 1024 * sizeof(float), (void **)out));
    for (int i = 0; *x && i < 1024; i++) (*x)[i] = (float)i;
    return *x && *out ? mod : NULL;
}

static cg_status stats_launch(cg_context *ctx, void *mod, const char *entry, emu_stats_params *p) {
    const unsigned grid[3] = {1, 1, 1}, block[3] = {ST_NT, 1, 1};
    return emu_launch(ctx, mod, entry, grid, block, ST_SMEM, p, sizeof *p);
}

static void stats_teardown(cg_context *ctx, float *x, float *out) {
    if (ctx && x) cg__kexec_emu.free(ctx, x);
    if (ctx && out) cg__kexec_emu.free(ctx, out);
    cg_context_free(ctx);
}

CG_TEST(emu_stats_bank_conflicts) {
    cg_context *ctx;
    float *x, *out;
    void *mod = stats_setup(&ctx, &x, &out);
    if (mod) {
        /* 32 lanes reading floats at stride s: the most distinct words in one bank */
        static const int stride[] = {0, 1, 2, 4, 32, 33};
        static const uint64_t wave[] = {1, 1, 2, 4, 32, 1};
        /* float4 reads at a stride of s float4s: per quarter-warp (8 lanes, 128 bytes)
         * the most distinct words in one bank; a broadcast still takes 4 */
        static const uint64_t wave4[] = {4, 4, 8, 16, 32, 4};
        for (int i = 0; i < 6; i++) {
            emu_stats_params p = {x, out, stride[i], 1};
            CG_CHECK_OK(ctx, stats_launch(ctx, mod, "emu_stats_access", &p));
            char what[64];
            snprintf(what, sizeof what, "float reads at stride %d", stride[i]);
            expect(ctx, what, "sstride", CG_EMU_SPACE_SHARED, 0, 4, ST_WARPS, wave[i], 1);
            snprintf(what, sizeof what, "float4 reads at stride %d", stride[i]);
            expect(ctx, what, "f4s", CG_EMU_SPACE_SHARED, 0, 16, ST_WARPS, wave4[i], 4);
        }
        /* contiguous float4: quarter-warps of 8 lanes x 4 words, 4 wavefronts = ideal;
         * float2: half-warps, 2; float2 at a 16-byte stride: 2 words per bank per half */
        expect(ctx, "contiguous float4 reads", "f4", CG_EMU_SPACE_SHARED, 0, 16, ST_WARPS, 4, 4);
        expect(ctx, "contiguous float2 reads", "f2", CG_EMU_SPACE_SHARED, 0, 8, ST_WARPS, 2, 2);
        expect(ctx, "float2 reads at stride 2", "f2s2", CG_EMU_SPACE_SHARED, 0, 8, ST_WARPS, 4, 2);
        /* the fill loop: 8192 floats by 64 threads, 128 contiguous stores per warp */
        expect(ctx, "contiguous float stores", "fill", CG_EMU_SPACE_SHARED, 1, 4, ST_WARPS * 128, 1, 1);
        const cg_emu_launch_stats *L = cg__emu_stats_get(ctx, cg__emu_stats_count(ctx) - 1);
        CG_CHECK(L && strcmp(L->kernel, "emu_stats_access") == 0 && L->blocks == 1 && L->dropped == 0 &&
                     L->requests[0] == ST_WARPS * (128 + 5) && L->units[0] == ST_WARPS * (128 + 1 + 4 + 4 + 2 + 4) &&
                     L->by_width[0][2] == ST_WARPS * 129 && L->by_width[0][4] == 2 * ST_WARPS,
                 "launch totals: kernel %s, %llu blocks, shared %llu requests %llu wavefronts",
                 L ? L->kernel : "?", L ? (unsigned long long)L->blocks : 0ull,
                 L ? (unsigned long long)L->requests[0] : 0ull, L ? (unsigned long long)L->units[0] : 0ull);
    }
    stats_teardown(ctx, x, out);
}

CG_TEST(emu_stats_coalescing) {
    cg_context *ctx;
    float *x, *out;
    void *mod = stats_setup(&ctx, &x, &out);
    if (mod) {
        /* 32 lanes reading floats at stride s from a 256-byte aligned buffer: sectors */
        static const int stride[] = {0, 1, 2, 8, 16};
        static const uint64_t sect[] = {1, 4, 8, 32, 32}, ideal[] = {1, 4, 4, 4, 4};
        for (int i = 0; i < 5; i++) {
            emu_stats_params p = {x, out, 1, stride[i]};
            CG_CHECK_OK(ctx, stats_launch(ctx, mod, "emu_stats_access", &p));
            char what[64];
            snprintf(what, sizeof what, "global float reads at stride %d", stride[i]);
            expect(ctx, what, "gstride", CG_EMU_SPACE_GLOBAL, 0, 4, ST_WARPS, sect[i], ideal[i]);
        }
        expect(ctx, "contiguous global float4 reads", "g4", CG_EMU_SPACE_GLOBAL, 0, 16, ST_WARPS, 16, 16);
        expect(ctx, "contiguous global float stores", "gout", CG_EMU_SPACE_GLOBAL, 1, 4, ST_WARPS, 4, 4);
        const cg_emu_launch_stats *L = cg__emu_stats_get(ctx, cg__emu_stats_count(ctx) - 1);
        CG_CHECK(L && L->requests[1] == ST_WARPS * 3 && L->by_width[1][2] == ST_WARPS * 2 &&
                     L->by_width[1][4] == ST_WARPS && L->units[1] == ST_WARPS * (32 + 16 + 4),
                 "global totals: %llu requests, %llu sectors", L ? (unsigned long long)L->requests[1] : 0ull,
                 L ? (unsigned long long)L->units[1] : 0ull);
        /* 16-byte cp.async of contiguous rows: an LDGSTS.128 per warp, 16 sectors, and
         * its shared side 4 wavefronts */
        emu_stats_params p = {x, out, 1, 1};
        CG_CHECK_OK(ctx, stats_launch(ctx, mod, "emu_stats_cp16", &p));
        expect(ctx, "16-byte cp.async, global side", "cp16", CG_EMU_SPACE_GLOBAL, 0, 16, ST_WARPS, 16, 16);
        expect(ctx, "16-byte cp.async, shared side", "cp16", CG_EMU_SPACE_SHARED, 1, 16, ST_WARPS, 4, 4);
        int bad = 0;
        for (int t = 0; t < ST_NT; t++) bad += out[t] != x[4 * ((t + 1) % ST_NT)];
        CG_CHECK(bad == 0, "emu_stats_cp16: %d outputs wrong", bad);
    }
    stats_teardown(ctx, x, out);
}

CG_TEST(emu_stats_json) {
    char dir[] = "/tmp/chunkgen-emu-stats-XXXXXX", path[64];
    CG_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/stats.json", dir);
    setenv("CHUNKGEN_EMU_STATS", path, 1);
    cg_context *ctx = emu_ctx();
    void *mod = ctx ? emu_module(ctx, "stats.cu", k_stats, 2) : NULL;
    unsetenv("CHUNKGEN_EMU_STATS");
    float *x = NULL, *out = NULL;
    if (mod) {
        CG_CHECK_OK(ctx, cg__kexec_emu.alloc(ctx, 1024 * sizeof(float), (void **)&x));
        CG_CHECK_OK(ctx, cg__kexec_emu.alloc(ctx, 1024 * sizeof(float), (void **)&out));
        emu_stats_params p = {x, out, 2, 8};
        CG_CHECK_OK(ctx, stats_launch(ctx, mod, "emu_stats_access", &p));
    }
    stats_teardown(ctx, x, out); /* writes the file */
    if (!mod) return;
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    CG_CHECK(root != NULL, "%s: %s", path, err.text);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    json_t *l0 = json_array_get(json_object_get(root, "launches"), 0);
    CG_CHECK(schema && strcmp(schema, "chunkgen-emu-stats/1") == 0 && json_array_size(json_object_get(root, "launches")) == 1,
             "schema %s", schema ? schema : "(none)");
    const char *kern = json_string_value(json_object_get(l0, "kernel"));
    json_t *sh = json_object_get(l0, "shared"), *gl = json_object_get(l0, "global");
    CG_CHECK(kern && strcmp(kern, "emu_stats_access") == 0 && json_integer_value(json_object_get(l0, "blocks")) == 1 &&
                 json_integer_value(json_object_get(sh, "requests")) == ST_WARPS * (128 + 5) &&
                 json_integer_value(json_object_get(json_object_get(gl, "by_width"), "16")) == ST_WARPS,
             "launch 0: kernel %s, shared requests %lld", kern ? kern : "?",
             (long long)json_integer_value(json_object_get(sh, "requests")));
    /* the stride-2 shared read: 2 wavefronts per request; the stride-8 global read: 32 sectors */
    int found = 0;
    const int ls = mark_line("sstride"), lg = mark_line("gstride");
    json_t *lines = json_object_get(l0, "lines");
    for (size_t i = 0; i < json_array_size(lines); i++) {
        json_t *e = json_array_get(lines, i);
        const char *sp = json_string_value(json_object_get(e, "space"));
        const int line = (int)json_integer_value(json_object_get(e, "line"));
        const char *file = json_string_value(json_object_get(e, "file"));
        if (!sp || !file || strcmp(file, "emu_test_stats.cu") != 0) continue;
        if (line == ls && strcmp(sp, "shared") == 0)
            found += json_integer_value(json_object_get(e, "wavefronts")) == 2 * ST_WARPS &&
                     json_integer_value(json_object_get(e, "ideal_wavefronts")) == ST_WARPS;
        if (line == lg && strcmp(sp, "global") == 0)
            found += json_integer_value(json_object_get(e, "sectors")) == 32 * ST_WARPS &&
                     json_integer_value(json_object_get(e, "ideal_sectors")) == 4 * ST_WARPS &&
                     strcmp(json_string_value(json_object_get(e, "op")), "load") == 0;
    }
    CG_CHECK(found == 2, "the lines of @sstride and @gstride in the JSON (%d of 2 as expected)", found);
    json_decref(root);
    unlink(path);
    rmdir(dir);
}

/* Rendered lines back to template lines through generator/core.lua's include marks. */
CG_TEST(emu_stats_linemap) {
    static const char src[] = "// k.cu\n"
                              "// Generated by chunkgen generator/core.lua from templates/top.cu (generator/kernels/x.lua)\n"
                              "// config: chunk=64\n"
                              "#define CG_X 1\n"
                              "\n"
                              "top line 1\n"
                              "// ---- begin a.cuh\n"
                              "a line 1\n"
                              "// ---- begin b.cuh\n"
                              "b line 1\n"
                              "// ---- end b.cuh\n"
                              "a line 3\n"
                              "// ---- end a.cuh\n"
                              "// (a.cuh already included above)\n"
                              "top line 4\n";
    /* rendered line -> file ("" none) and line */
    static const struct { const char *file; int line; } want[] = {
        {"", 0},       {"", 0},      {"", 0},        {"", 0},        {"", 0},       {"top.cu", 1}, {"top.cu", 2},
        {"a.cuh", 1},  {"a.cuh", 2}, {"b.cuh", 1},   {"", 0},        {"a.cuh", 3},  {"", 0},       {"top.cu", 3},
        {"top.cu", 4},
    };
    cg_emu_linemap lm;
    CG_CHECK(cg__emu_linemap_build(&lm, "plan", src) == 0, "linemap_build");
    CG_CHECK(lm.nline >= 15, "%d lines", lm.nline);
    for (int i = 0; i < 15 && lm.nline >= 15; i++) {
        const char *f = lm.fidx[i + 1] >= 0 ? lm.file[lm.fidx[i + 1]] : "";
        const int l = lm.fidx[i + 1] >= 0 ? lm.fline[i + 1] : 0;
        CG_CHECK(strcmp(f, want[i].file) == 0 && l == want[i].line, "rendered line %d: %s:%d, expected %s:%d", i + 1,
                 f, l, want[i].file, want[i].line);
    }
    cg__emu_linemap_free(&lm);
    /* a hand-written source is its own file, <plan name>.cu */
    CG_CHECK(cg__emu_linemap_build(&lm, "plan", "a\nb\n") == 0 && lm.fidx[2] >= 0 &&
                 strcmp(lm.file[lm.fidx[2]], "plan.cu") == 0 && lm.fline[2] == 2,
             "hand-written source: line 2 -> %s:%d", lm.fidx && lm.fidx[2] >= 0 ? lm.file[lm.fidx[2]] : "?",
             lm.fline ? lm.fline[2] : -1);
    cg__emu_linemap_free(&lm);
}
