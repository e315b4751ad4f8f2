/* test_bench.c -- `chunkgen bench` writes rows in the seeds' schema, with correct shapes,
 * quartiles in order and rel_err within the accuracy targets, on tiny odd shapes.
 * No timing is asserted: only the structure and the accuracy of what was measured. */
#include "cg_test.h"
#include "cli_testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static double num(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int64_t inum(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* One row of the tiny matrix: impl/op/mode/config as asked, timing and accuracy sane. */
static void check_row(json_t *r, int ssd) {
    const char *impl = json_string_value(json_object_get(r, "impl"));
    const char *mode = json_string_value(json_object_get(r, "mode"));
    const char *cfg = json_string_value(json_object_get(r, "config"));
    CG_CHECK(impl && mode && cfg, "row without impl/mode/config");
    if (!impl || !mode || !cfg) return;
    json_t *err = json_object_get(r, "error"), *skip = json_object_get(r, "skipped");
    CG_CHECK(!err && !skip, "%s %s %s: %s", impl, cfg, mode,
             json_string_value(err ? err : skip) ? json_string_value(err ? err : skip) : "?");
    if (err || skip) return;
    int bwd = !strcmp(mode, "fwd_bwd");
    double med = num(r, "median_ms"), q1 = num(r, "q1_ms"), q3 = num(r, "q3_ms");
    CG_CHECK(med > 0 && q1 <= med && med <= q3, "%s %s: quartiles %g %g %g", impl, cfg, q1, med, q3);
    CG_CHECK(inum(r, "inner") >= 1 && inum(r, "samples") >= 2, "%s %s: inner %lld samples %lld", impl, cfg,
             (long long)inum(r, "inner"), (long long)inum(r, "samples"));
    CG_CHECK(num(r, "compile_s") >= 0, "%s: compile_s missing", impl);
    CG_CHECK(num(r, "peak_mb") > 0 && num(r, "flops") > 0 && num(r, "bytes") > 0, "%s: peak_mb/flops/bytes", impl);
    double re = num(r, "rel_err");
    CG_CHECK(re >= 0 && re <= (bwd ? 1e-4 : 1e-5), "%s %s %s: rel_err %g", impl, cfg, mode, re);
    json_t *g = json_object_get(r, "rel_err_grads");
    if (bwd) {
        static const char *const sg[] = {"q", "k", "v", "log_alpha", "h0", NULL};
        static const char *const xg[] = {"x", "delta", "A", "B", "C", "D", "z", "delta_bias", NULL};
        const char *const *names = ssd ? sg : xg;
        for (int i = 0; names[i]; i++) {
            double e = num(g, names[i]);
            CG_CHECK(e >= 0 && e <= 1e-4, "%s %s: rel_err_grads.%s = %g", impl, cfg, names[i], e);
        }
    } else {
        CG_CHECK(!g, "%s: a fwd row carries rel_err_grads", impl);
    }
}

CG_TEST(bench_cli_tiny_matrix) {
    char dir[512], out[1024];
    if (mk_tmpdir_with(dir, sizeof dir, out, sizeof out, "b.json")) return;
    /* T = 1, and T = 37 beyond the reference cut of 20 tokens; G = 2 < H = 6; dk 7, dv 5;
     * head-major layout; sscan with D = 6 channels and N = 3. */
    const char *args[] = {"bench", "--backend", "cpu,ref", "--ssd-shape", "odd:B=2,G=2,H=6,dk=7,dv=5", "--sscan-shape",
                          "sodd:B=2,D=6,N=3", "--seq", "1,37", "--layout", "head", "--min-time", "0.002",
                          "--repeats", "2", "--ref-seq", "20", "--no-probe", "--quiet", "--out", out, NULL};
    int rc = run_cli(dir, args);
    char *msg = cli_stderr(dir);
    CG_CHECK(rc == 0, "chunkgen bench exited %d (is `bench` wired into tools/main.c?): %s", rc, msg);
    free(msg);
    json_error_t je;
    json_t *doc = json_load_file(out, 0, &je);
    CG_CHECK(doc != NULL, "cannot parse %s: %s", out, je.text);
    if (doc) {
        CG_CHECK(json_is_object(json_object_get(doc, "device")), "no device block");
        json_t *cfg = json_object_get(doc, "config");
        CG_CHECK(json_is_object(cfg) && json_is_array(json_object_get(cfg, "seq_lens")), "no config block / seq_lens");
        json_t *res = json_object_get(doc, "results");
        /* 2 impls x (ssd + sscan) x 2 seqs x 2 modes */
        CG_CHECK(json_array_size(res) == 16, "expected 16 rows, got %zu", json_array_size(res));
        int cut_notes = 0;
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *r = json_array_get(res, i);
            int ssd = !strcmp(json_string_value(json_object_get(r, "op")) ? json_string_value(json_object_get(r, "op")) : "",
                              "ssd");
            int64_t seq;
            if (ssd) {
                CG_CHECK(inum(r, "batch") == 2 && inum(r, "groups") == 2 && inum(r, "heads") == 6 &&
                             inum(r, "dk") == 7 && inum(r, "dv") == 5,
                         "ssd row %zu: wrong shape fields", i);
                seq = inum(r, "seq");
            } else {
                json_t *s = json_object_get(r, "shape");
                CG_CHECK(inum(s, "batch") == 2 && inum(s, "dim") == 6 && inum(s, "state") == 3,
                         "sscan row %zu: wrong shape block", i);
                seq = inum(s, "seq");
            }
            CG_CHECK(seq == 1 || seq == 37, "row %zu: seq %lld", i, (long long)seq);
            const char *note = json_string_value(json_object_get(r, "rel_err_note"));
            if (seq == 37) cut_notes += note && strstr(note, "seq[0:20]") != NULL;
            check_row(r, ssd);
        }
        CG_CHECK(cut_notes == 8, "expected 8 rows noting the reference cut seq[0:20], got %d", cut_notes);
        json_decref(doc);
    }
    rm_tree(dir);
}

CG_TEST(bench_cli_bad_args) {
    char dir[512];
    if (mk_tmpdir(dir, sizeof dir)) return;
    const char *a1[] = {"bench", "--seq", "0", NULL};
    CG_CHECK(run_cli(dir, a1) == 2, "--seq 0 accepted");
    char *m = cli_stderr(dir);
    CG_CHECK(strstr(m, "--seq") != NULL, "message does not name --seq: %s", m);
    free(m);
    const char *a2[] = {"bench", "--ssd-shape", "x:B=2,G=3,H=4,dk=8,dv=8", NULL}; /* heads 4 % groups 3 */
    CG_CHECK(run_cli(dir, a2) == 2, "heads not a multiple of groups accepted");
    m = cli_stderr(dir);
    CG_CHECK(strstr(m, "H = 4 is not a multiple of G = 3") != NULL, "message does not name the groups: %s", m);
    free(m);
    /* the shape syntax of every command: the bad word named, and the sequence left to --seq */
    const char *as[] = {"bench", "--ssd-shape", "x:B=2,G=1,H=4,dk=8,dv=8,T=64", NULL};
    CG_CHECK(run_cli(dir, as) == 2, "a shape with T accepted");
    m = cli_stderr(dir);
    CG_CHECK(strstr(m, "'T=64'") && strstr(m, "--seq"), "message does not send T to --seq: %s", m);
    free(m);
    const char *aw[] = {"bench", "--sscan-shape", "s:B=2,D=6,N=3,dstate=4", NULL};
    CG_CHECK(run_cli(dir, aw) == 2, "an unknown word accepted");
    m = cli_stderr(dir);
    CG_CHECK(strstr(m, "'dstate=4' is unknown") && strstr(m, "N=N"), "message does not name the word: %s", m);
    free(m);
    const char *a3[] = {"bench", "--config", "no_such_config", NULL};
    CG_CHECK(run_cli(dir, a3) == 2, "an unknown config accepted");
    rm_tree(dir);
}

/* The bench's device-memory path (alloc, NaN-filled outputs copied in, timing with syncs,
 * the cut rerun, copies back) on the SIMT emulator standing in for the CUDA driver. */
CG_TEST(bench_cli_device_path_emulated) {
    char dir[512], out[1024];
    if (mk_tmpdir_with(dir, sizeof dir, out, sizeof out, "b.json")) return;
    const char *args[] = {"bench", "--backend", "cuda", "--ssd-shape", "dev:B=2,G=1,H=2,dk=16,dv=24", "--seq", "40", "--mode", "fwd",
                          "--ref-seq", "30", "--min-time", "0.001", "--repeats", "2", "--no-probe", "--quiet", "--out",
                          out, NULL};
    setenv("CHUNKGEN_BENCH_FAKE_CUDA", "emulate", 1);
    int rc = run_cli(dir, args);
    unsetenv("CHUNKGEN_BENCH_FAKE_CUDA");
    json_t *doc = json_load_file(out, 0, NULL);
    json_t *un = json_object_get(json_object_get(doc, "config"), "unavailable");
    if (doc && json_object_get(un, "chunkgen_cuda")) {
        cg_test_skip("the emulate backend is not built into chunkgen");
    } else {
        char *msg = cli_stderr(dir);
        CG_CHECK(rc == 0 && doc, "chunkgen bench (fake cuda) exited %d: %s", rc, msg);
        free(msg);
        json_t *res = json_object_get(doc, "results");
        CG_CHECK(json_array_size(res) == 2, "expected 2 rows (tuned and default), got %zu", json_array_size(res));
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *r = json_array_get(res, i);
            const char *impl = json_string_value(json_object_get(r, "impl"));
            CG_CHECK(impl && !strncmp(impl, "chunkgen_cuda", 13), "row %zu: impl %s", i, impl ? impl : "?");
            const char *note = json_string_value(json_object_get(r, "rel_err_note"));
            CG_CHECK(note && strstr(note, "rerun"), "row %zu: the cut rerun did not happen", i);
            check_row(r, 1);
        }
    }
    json_decref(doc);
    rm_tree(dir);
}

/* --config pins a kernel config for the chunkgen impls (the same meaning as in `chunkgen
 * run`), the named-key shape syntax works, and -v adds each row's dispatch line. */
CG_TEST(bench_cli_config_pin_and_shape_syntax) {
    char dir[512], out[1024];
    if (mk_tmpdir_with(dir, sizeof dir, out, sizeof out, "b.json")) return;
    const char *args[] = {"bench", "--backend", "cpu", "--ssd-shape", "pin:B=1,G=1,H=2,dk=8,dv=8", "--seq", "40",
                          "--mode", "fwd", "--config", "chunk=16,threads=1", "--min-time", "0.001", "--repeats", "2",
                          "--no-probe", "-v", "--out", out, NULL};
    int rc = run_cli(dir, args);
    char *msg = cli_stderr(dir);
    CG_CHECK(rc == 0, "chunkgen bench exited %d: %s", rc, msg);
    CG_CHECK(strstr(msg, "config=chunk=16") != NULL, "-v printed no dispatch line with the pinned config: %s", msg);
    free(msg);
    json_error_t je;
    json_t *doc = json_load_file(out, 0, &je);
    CG_CHECK(doc != NULL, "cannot parse %s: %s", out, je.text);
    if (doc) {
        json_t *res = json_object_get(doc, "results");
        CG_CHECK(json_array_size(res) == 1, "expected 1 row, got %zu", json_array_size(res));
        json_t *r = json_array_get(res, 0);
        const char *d = json_string_value(json_object_get(r, "dispatch"));
        CG_CHECK(d && strstr(d, "chunk=16") && strstr(d, "source=pinned"), "dispatch: %s", d ? d : "(none)");
        CG_CHECK(inum(r, "flops_chunk") == 16, "flops_chunk %lld", (long long)inum(r, "flops_chunk"));
        CG_CHECK(!strcmp(json_string_value(json_object_get(r, "config")), "pin") && inum(r, "heads") == 2 &&
                     inum(r, "dk") == 8,
                 "named-key shape not applied");
        json_decref(doc);
    }
    /* A preset name given to --config: exit 2, pointing at --preset. */
    const char *a2[] = {"bench", "--config", "g1h1_d128", NULL};
    CG_CHECK(run_cli(dir, a2) == 2, "a preset name accepted as --config");
    msg = cli_stderr(dir);
    CG_CHECK(strstr(msg, "--preset") != NULL, "message does not point at --preset: %s", msg);
    free(msg);
    rm_tree(dir);
}
