/* test_rel.c -- reliability (issue 17): the cache never removes what is not its own and
 * reports what it could not remove; FIFOs never hang a reader; writes go through temp
 * files that a planted symlink cannot redirect; `run` commits its outputs together; no
 * undefined behaviour on huge shapes or misaligned pointers; one context used from two
 * threads is refused, not corrupted. Each test fails on the code before the fix. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "npy.h"
#include "fsutil.h"
#include "../autotune/autotune.h"
#include "tune_testlib.h"
#include "cuda/kcache.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

static void put_file(const char *dir, const char *name, const char *text) {
    char p[9000];
    snprintf(p, sizeof p, "%.4400s/%.255s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        cg_test_fail(__FILE__, __LINE__, "cannot create %s: %s", p, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
}

static int exists(const char *dir, const char *name) {
    char p[9000];
    snprintf(p, sizeof p, "%.4400s/%.255s", dir, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

static char *cli_stdout(const char *dir) {
    char p[9000];
    snprintf(p, sizeof p, "%s/stdout.txt", dir);
    return slurp(p);
}

#define ctx_in tune_test_ctx

/* A complete store entry of this machine (one passing candidate). */
static void entry_for(cg_context *ctx, cg_tune_entry *e, int64_t dv, double ms) {
    tune_test_entry(ctx, e, 256, dv, 0, "", 0, ms, ms * 0.01);
}

/* A store entry, a kernel cache entry and kept emulator files: all chunkgen's. */
static void put_own_entries(cg_context *ctx, const char *root, char *store_name, size_t cap) {
    cg_tune_entry e;
    entry_for(ctx, &e, 16, 1.0);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
    cg__tune_entry_file(&e.key, store_name, cap);
    cg__tune_entry_free(&e);
    char kdir[4200], edir[4200];
    snprintf(kdir, sizeof kdir, "%s/kernels", root);
    snprintf(edir, sizeof edir, "%s/emu-failed", root);
    CG_CHECK(cg__kcache_put(kdir, "emu_test", "key text", "payload", 7, "log") == CG_OK, "kcache put");
    CG_CHECK(cg__mkdirs(edir) == 0, "mkdir emu-failed");
    put_file(edir, "ssd_fwd.cc", "// generated\nCG_EMU_EXPORT const char cg_emu_key[] = \"00\";\n");
    put_file(edir, "ssd_fwd.log", CG_EMU_FAILED_LOG_MARK "\nerror: something\n");
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d) closedir(d);
    return n;
}

/* ------------------------------------------------------------ item 1 */

/* `cache clear --all` removes chunkgen's entries and nothing else, and says what it left. */
CG_TEST(rel_cache_clear_keeps_foreign_files) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    cg_context *ctx = ctx_in(S);
    char store_name[64];
    put_own_entries(ctx, S, store_name, sizeof store_name);
    /* what a wrong CHUNKGEN_CACHE_DIR points at: a user's files, some named like ours */
    char p[9000];
    snprintf(p, sizeof p, "%s/project/src", S);
    CG_CHECK(cg__mkdirs(p) == 0, "mkdir");
    put_file(p, "main.c", "int main(void) { return 0; }\n");
    char cfg[4400], ker[4400], emu[4400];
    snprintf(cfg, sizeof cfg, "%s/configs", S);
    snprintf(ker, sizeof ker, "%s/kernels", S);
    snprintf(emu, sizeof emu, "%s/emu-failed", S);
    put_file(cfg, "notes.json", "{\"mine\": true}\n");
    put_file(cfg, "0123456789abcdef.json", "{\"not\": \"an entry\"}\n");
    put_file(ker, "readme.txt", "mine\n");
    put_file(ker, "x-0123456789abcdef0123456789abcdef.cgk", "not a kernel\n");
    put_file(emu, "main.cc", "int main() {}\n");
    put_file(emu, "build.log", "make: ok\n");
    put_file(S, "top.txt", "mine\n");
    /* a temp file of an interrupted store write is ours */
    char tmpn[128];
    snprintf(tmpn, sizeof tmpn, ".tmp.host.123.0000000000000001.%s", store_name);
    put_file(cfg, tmpn, "{");

    const char *args[] = {"cache", "clear", "--all", "--cache-dir", S, NULL};
    int rc = run_cli(S, args);
    char *out = cli_stdout(S), *err = cli_stderr(S);
    CG_CHECK(rc == 0, "cache clear --all exited %d: %s %s", rc, out, err);
    const char *foreign[][2] = {{"project/src", "main.c"}, {"configs", "notes.json"},
                                {"configs", "0123456789abcdef.json"}, {"kernels", "readme.txt"},
                                {"kernels", "x-0123456789abcdef0123456789abcdef.cgk"}, {"emu-failed", "main.cc"},
                                {"emu-failed", "build.log"}, {".", "top.txt"}};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", S, foreign[i][0]);
        CG_CHECK(exists(p, foreign[i][1]), "foreign file %s/%s was removed", foreign[i][0], foreign[i][1]);
    }
    CG_CHECK(!exists(cfg, store_name) && !exists(cfg, tmpn), "the store entry and its temp file are removed");
    CG_CHECK(!exists(emu, "ssd_fwd.cc") && !exists(emu, "ssd_fwd.log"), "kept emulator files removed");
    char kpath[4400];
    cg__kcache_path(ker, "emu_test", "key text", kpath, sizeof kpath);
    CG_CHECK(access(kpath, F_OK) != 0, "the kernel cache entry is removed");
    CG_CHECK(strstr(out, "left") && strstr(out, "notes.json") && strstr(out, "project") && strstr(out, "main.cc"),
             "says what it left: %s", out);
    free(out);
    free(err);
    /* plain `cache clear` touches the config store only */
    put_own_entries(ctx, S, store_name, sizeof store_name);
    const char *args2[] = {"cache", "clear", "--cache-dir", S, NULL};
    rc = run_cli(S, args2);
    CG_CHECK(rc == 0 && !exists(cfg, store_name) && access(kpath, F_OK) == 0 && exists(emu, "ssd_fwd.cc"),
             "clear without --all: configs only (rc %d)", rc);
    cg_context_free(ctx);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 2 */

/* Make path impossible to remove: the immutable flag (root), else a read-only
 * directory. 1 when it worked. */
static int make_unremovable(const char *dir, const char *path, int on) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    int ok = 0;
    if (fd >= 0) {
        int fl = 0;
        if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
            fl = on ? (fl | FS_IMMUTABLE_FL) : (fl & ~FS_IMMUTABLE_FL);
            ok = ioctl(fd, FS_IOC_SETFLAGS, &fl) == 0;
        }
        close(fd);
    }
    if (ok) return 1;
    chmod(dir, on ? 0555 : 0755);
    return on ? access(dir, W_OK) != 0 : 1;
}

CG_TEST(rel_cache_clear_reports_failures) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    cg_context *ctx = ctx_in(S);
    char store_name[64], cfg[4400], path[4500];
    put_own_entries(ctx, S, store_name, sizeof store_name);
    snprintf(cfg, sizeof cfg, "%s/configs", S);
    snprintf(path, sizeof path, "%s/%s", cfg, store_name);
    if (!make_unremovable(cfg, path, 1)) {
        cg_test_skip("cannot make a file unremovable here (no immutable flag, directory stays writable)");
    } else {
        const char *args[] = {"cache", "clear", "--cache-dir", S, NULL};
        int rc = run_cli(S, args);
        char *out = cli_stdout(S), *err = cli_stderr(S);
        CG_CHECK(rc == 1, "a failed removal exits 1 (got %d): %s", rc, out);
        CG_CHECK(strstr(out, "removed 0") && strstr(out, "could not remove 1"), "reports the failure: %s", out);
        CG_CHECK(strstr(err, store_name), "names the file: %s", err);
        free(out);
        free(err);
        make_unremovable(cfg, path, 0);
    }
    /* import: an entry whose write fails is counted once, as rejected */
    char S2[4096];
    if (mk_tmpdir(S2, sizeof S2)) return;
    cg_context *c2 = ctx_in(S2);
    put_file(S2, "configs", "a file where the store directory should be\n");
    cg_tune_entry e;
    entry_for(c2, &e, 32, 1.0);
    json_t *j = cg__tune_entry_to_json(&e);
    cg_tune_import_stats s;
    CG_CHECK_OK(c2, cg__tune_import_json(c2, j, "one", 0, 0, &s));
    CG_CHECK(s.added == 0 && s.replaced == 0 && s.rejected == 1, "counted once: %d added, %d rejected", s.added,
             s.rejected);
    json_decref(j);
    cg__tune_entry_free(&e);
    cg_context_free(c2);
    cg_context_free(ctx);
    rm_tree(S2);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 3 */

static void write_ssd_inputs(const char *dir, int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
    const int64_t sq[] = {B, T, 1, dk}, sv[] = {B, T, H, dv}, sl[] = {B, T, H};
    const char *names[] = {"q", "k", "v", "log_alpha"};
    const int64_t *shapes[] = {sq, sq, sv, sl};
    int nd[] = {4, 4, 4, 3};
    cg_rng r = {7};
    for (int i = 0; i < 4; i++) {
        int64_t n = 1;
        for (int d = 0; d < nd[i]; d++) n *= shapes[i][d];
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t j = 0; j < n; j++) v[j] = (float)cg_rng_uniform(&r, i == 3 ? -0.3 : -1, i == 3 ? -0.01 : 1);
        char p[4400], err[512];
        snprintf(p, sizeof p, "%s/%s.npy", dir, names[i]);
        if (cg_npy_write(p, v, nd[i], shapes[i], err, sizeof err)) cg_test_fail(__FILE__, __LINE__, "%s", err);
        free(v);
    }
}

/* mk_tmpdir with the inputs of write_ssd_inputs in it; 0, or -1 as mk_tmpdir. */
static int mk_ssd_input_dir(char *S, size_t len, int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
    if (mk_tmpdir(S, len)) return -1;
    write_ssd_inputs(S, B, T, H, dk, dv);
    return 0;
}

/* FIFOs named like an input, a store entry and a kernel cache entry: nothing hangs, each
 * is reported, and `cache clear --all` removes the entries. */
CG_TEST(rel_fifo_never_hangs) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    char in[4400], cfg[4400], ker[4400], p[4600];
    snprintf(in, sizeof in, "%s/in", S);
    snprintf(cfg, sizeof cfg, "%s/configs", S);
    snprintf(ker, sizeof ker, "%s/kernels", S);
    CG_CHECK(cg__mkdirs(in) == 0 && cg__mkdirs(cfg) == 0 && cg__mkdirs(ker) == 0, "mkdirs");
    write_ssd_inputs(in, 1, 8, 2, 8, 8);
    snprintf(p, sizeof p, "%s/q.npy", in);
    unlink(p);
    CG_CHECK(mkfifo(p, 0644) == 0, "mkfifo q.npy");
    const char *fifo_entries[] = {"configs/0123456789abcdef.json", "kernels/x-0123456789abcdef0123456789abcdef.cgk"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", S, fifo_entries[i]);
        CG_CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    }
    setenv("CHUNKGEN_CACHE_DIR", S, 1);
    const char *run[] = {"run", "ssd", "--backend", "cpu", in, NULL};
    int rc = run_cli_t(S, run, 30);
    char *err = cli_stderr(S);
    CG_CHECK(rc == 1 && strstr(err, "q.npy") && strstr(err, "not a regular file"), "run: rc %d: %s", rc, err);
    free(err);
    const char *cmds[][4] = {{"show", NULL}, {"cache", "stats", NULL}, {"cache", "verify", NULL}};
    const int want[] = {0, 0, 1};
    for (int i = 0; i < 3; i++) {
        rc = run_cli_t(S, cmds[i], 30);
        char *o = cli_stdout(S);
        CG_CHECK(rc == want[i], "%s %s: rc %d (128+14 = hung): %s", cmds[i][0], cmds[i][1] ? cmds[i][1] : "", rc, o);
        if (i == 2) CG_CHECK(strstr(o, "FIFO"), "verify names the FIFOs: %s", o);
        free(o);
    }
    const char *prune[] = {"cache", "prune", NULL};
    rc = run_cli_t(S, prune, 30);
    CG_CHECK(rc == 0, "prune: rc %d", rc);
    for (int i = 0; i < 2; i++) CG_CHECK(!exists(S, fifo_entries[i]), "prune removed the FIFO %s", fifo_entries[i]);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", S, fifo_entries[i]);
        CG_CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    }
    const char *clear[] = {"cache", "clear", "--all", NULL};
    rc = run_cli_t(S, clear, 30);
    CG_CHECK(rc == 0, "clear: rc %d", rc);
    for (int i = 0; i < 2; i++) CG_CHECK(!exists(S, fifo_entries[i]), "clear removed the FIFO %s", fifo_entries[i]);
    unsetenv("CHUNKGEN_CACHE_DIR");
    rm_tree(S);
}

/* ------------------------------------------------------------ item 4 */

typedef struct plant {
    const char *dir, *base, *victim;
} plant;

/* In the child (before exec): symlinks at the temp names the old code used. */
static void plant_links(void *arg) {
    const plant *pl = arg;
    char p[9000];
    snprintf(p, sizeof p, "%s/%s.tmp.%ld", pl->dir, pl->base, (long)getpid());
    if (symlink(pl->victim, p) != 0) _exit(125);
}

/* export: a symlink planted at a temp name never redirects the write. */
CG_TEST(rel_export_ignores_planted_symlink) {
    char S[4096];
    if (mk_tmpdir(S, sizeof S)) return;
    cg_context *ctx = ctx_in(S);
    cg_tune_entry e;
    entry_for(ctx, &e, 16, 1.0);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
    cg__tune_entry_free(&e);
    char victim[4400], out[4400];
    snprintf(victim, sizeof victim, "%s/victim.txt", S);
    snprintf(out, sizeof out, "%s/out.json", S);
    put_file(S, "victim.txt", "precious\n");
    plant pl = {S, "out.json", victim};
    const char *args[] = {"export", "--json", out, "--cache-dir", S, NULL};
    int rc = run_cli_hook(S, args, 30, plant_links, &pl);
    CG_CHECK(rc == 0, "export exited %d", rc);
    char *v = slurp(victim);
    CG_CHECK(!strcmp(v, "precious\n"), "the symlink's target was overwritten: %.60s", v);
    free(v);
    struct stat st;
    CG_CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode), "out.json is a regular file");
    char *o = slurp(out);
    CG_CHECK(strstr(o, "chunkgen-configs") != NULL, "out.json is the export");
    free(o);
    cg_context_free(ctx);
    rm_tree(S);
}

/* run: an output name that is a symlink is replaced, its target untouched. */
CG_TEST(rel_run_output_symlink_not_followed) {
    char S[4096];
    if (mk_ssd_input_dir(S, sizeof S, 1, 8, 2, 8, 8)) return;
    char victim[4400], link[4400];
    snprintf(victim, sizeof victim, "%s/victim.txt", S);
    snprintf(link, sizeof link, "%s/o.npy", S);
    put_file(S, "victim.txt", "precious\n");
    CG_CHECK(symlink(victim, link) == 0, "symlink");
    const char *args[] = {"run", "ssd", "--backend", "cpu", S, NULL};
    int rc = run_cli(S, args);
    CG_CHECK(rc == 0, "run exited %d", rc);
    char *v = slurp(victim);
    CG_CHECK(!strcmp(v, "precious\n"), "the symlink's target was overwritten");
    free(v);
    struct stat st;
    CG_CHECK(lstat(link, &st) == 0 && S_ISREG(st.st_mode), "o.npy is now a regular file");
    rm_tree(S);
}

/* ------------------------------------------------------------ item 10 */

static void small_fsize(void *arg) {
    struct rlimit rl = {(rlim_t)(intptr_t)arg, (rlim_t)(intptr_t)arg};
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    setrlimit(RLIMIT_FSIZE, &rl);
}

/* A write that fails part-way (here: the file size limit, like a full disk) leaves the
 * previous run's outputs as they were, and no temp files. The output directory is
 * created with its parents. */
CG_TEST(rel_run_outputs_all_or_nothing) {
    char S[4096];
    /* o is 1 x 4 x 2 x 32 floats (1 KiB), hT is 1 x 2 x 32 x 32 floats (8 KiB) */
    if (mk_ssd_input_dir(S, sizeof S, 1, 4, 2, 32, 32)) return;
    char out[4400];
    snprintf(out, sizeof out, "%s/a/b/c", S);
    const char *args[] = {"run", "ssd", "--backend", "cpu", "--in", S, "--out", out, NULL};
    int rc = run_cli(S, args);
    CG_CHECK(rc == 0 && file_exists(out, "o.npy") && file_exists(out, "hT.npy"),
             "run --out a/b/c creates the parents (rc %d)", rc);
    /* previous run's outputs, then a run that can write o but not hT */
    put_file(out, "o.npy", "previous o\n");
    put_file(out, "hT.npy", "previous hT\n");
    rc = run_cli_hook(S, args, 60, small_fsize, (void *)(intptr_t)4096);
    char *err = cli_stderr(S);
    CG_CHECK(rc == 1, "the failed write exits 1 (got %d): %s", rc, err);
    free(err);
    char p[9000];
    snprintf(p, sizeof p, "%s/o.npy", out);
    char *o = slurp(p);
    snprintf(p, sizeof p, "%s/hT.npy", out);
    char *h = slurp(p);
    CG_CHECK(!strcmp(o, "previous o\n") && !strcmp(h, "previous hT\n"), "no mix of two runs' files (o.npy: %.12s)", o);
    free(o);
    free(h);
    CG_CHECK(count_files(out) == 2, "no temp files left (%d files)", count_files(out));
    rm_tree(S);
}

/* A huge import gets a bounded number of per-element messages. */
CG_TEST(rel_import_caps_messages) {
    char S[4096], p[9000];
    if (mk_tmpdir_with(S, sizeof S, p, sizeof p, "big.json")) return;
    FILE *f = fopen(p, "w");
    fputs("[", f);
    for (int i = 0; i < 5000; i++) fprintf(f, "%s{\"schema\": 1}", i ? "," : "");
    fputs("]\n", f);
    fclose(f);
    const char *args[] = {"import", p, "--cache-dir", S, NULL};
    int rc = run_cli(S, args);
    char *err = cli_stderr(S);
    int lines = 0;
    for (const char *c = err; *c; c++) lines += *c == '\n';
    CG_CHECK(rc == 1, "rejections exit 1 (%d)", rc);
    CG_CHECK(lines <= 30, "%d lines of messages for 5000 bad entries", lines);
    CG_CHECK(strstr(err, "5000 rejected") != NULL, "the summary counts them all: %.300s", err + (strlen(err) > 300 ? strlen(err) - 300 : 0));
    free(err);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 7 */

CG_TEST(rel_no_ub_huge_shapes_misaligned) {
    /* strides of a shape whose product overflows saturate (old code: signed overflow) */
    const int64_t huge[] = {3, (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    cg_tensor t = cg_tensor_contiguous(NULL, CG_F32, 4, huge);
    CG_CHECK(t.stride[3] == 1 && t.stride[2] == (int64_t)1 << 31 && t.stride[1] == (int64_t)1 << 62, "inner strides");
    CG_CHECK(t.stride[0] == INT64_MAX, "overflowing stride saturates: %lld", (long long)t.stride[0]);
    /* a zero-size dim counts as 1 in the strides */
    const int64_t zero[] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
    t = cg_tensor_contiguous(NULL, CG_F32, 3, zero);
    CG_CHECK(t.stride[0] == INT64_MAX && t.stride[1] == (int64_t)1 << 40, "zero-size outer dim: %lld",
             (long long)t.stride[0]);

    /* a misaligned data pointer is refused naming the tensor */
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    const int64_t B = 1, T = 5, H = 2, dk = 4, dv = 4;
    const int64_t sq[] = {B, T, 1, dk}, sv[] = {B, T, H, dv}, sl[] = {B, T, H};
    char *mem = calloc(1, 4096);
    float *q = (float *)(void *)(mem + 1); /* misaligned on purpose */
    float *k = (float *)(void *)(mem + 512), *v = (float *)(void *)(mem + 1024), *la = (float *)(void *)(mem + 1536),
          *o = (float *)(void *)(mem + 2048);
    cg_ssd_fwd_args a;
    memset(&a, 0, sizeof a);
    a.layout = CG_LAYOUT_TOKEN_MAJOR;
    a.q = cg_tensor_contiguous(q, CG_F32, 4, sq);
    a.k = cg_tensor_contiguous(k, CG_F32, 4, sq);
    a.v = cg_tensor_contiguous(v, CG_F32, 4, sv);
    a.log_alpha = cg_tensor_contiguous(la, CG_F32, 3, sl);
    a.o = cg_tensor_contiguous(o, CG_F32, 4, sv);
    cg_exec ex = {.backend = CG_BACKEND_CPU};
    cg_status st = cg_ssd_fwd(ctx, &a, &ex);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "q") && strstr(cg_errmsg(ctx), "aligned"),
             "misaligned q: %s: %s", cg_status_str(st), cg_errmsg(ctx));
    a.q = cg_tensor_contiguous(mem + 2560, CG_F32, 4, sq);
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &a, &ex));
    free(mem);
    /* the thread cap */
    st = cg_context_set_threads(ctx, 1 << 30);
    CG_CHECK(st == CG_EINVAL && strstr(cg_errmsg(ctx), "threads") && strstr(cg_errmsg(ctx), "1024"),
             "set_threads(2^30): %s", cg_errmsg(ctx));
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 2));
    cg_context_free(ctx);
}

/* run: a zero-size array with huge other dims is refused with a message (the old
 * tensor builder overflowed its strides). */
CG_TEST(rel_run_zero_size_huge_dims) {
    char S[4096];
    if (mk_ssd_input_dir(S, sizeof S, 1, 8, 2, 8, 8)) return;
    char p[9000];
    snprintf(p, sizeof p, "%s/q.npy", S);
    write_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296, 8), }\n", NULL, 0);
    const char *args[] = {"run", "ssd", "--backend", "cpu", S, NULL};
    int rc = run_cli(S, args);
    char *err = cli_stderr(S);
    CG_CHECK(rc == 1 && strstr(err, "q.npy") && strstr(err, "too large"), "rc %d: %s", rc, err);
    free(err);
    rm_tree(S);
}

/* .npy: a NUL inside a header key is malformed, not a prefix match. */
CG_TEST(rel_npy_nul_in_key) {
    char S[4096], p[9000];
    if (mk_tmpdir_with(S, sizeof S, p, sizeof p, "x.npy")) return;
    static const char h[] = "{'descr\0x': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
    float one = 1;
    FILE *f = fopen(p, "wb");
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(sizeof h - 1), 0};
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, sizeof h - 1, f);
    fwrite(&one, 4, 1, f);
    fclose(f);
    cg_npy a;
    char err[512] = "";
    CG_CHECK(cg_npy_read(p, &a, err, sizeof err) != 0 && strstr(err, "malformed"), "refused: %s", err);
    rm_tree(S);
}

/* ------------------------------------------------------------ item 8 */

typedef struct racer {
    cg_context *ctx;
    pthread_barrier_t *bar;
    float *mem[5];
    cg_ssd_fwd_args a;
    int ok, refused, wrong, other;
    const float *ref;
    int64_t n_out;
} racer;

static void *race_main(void *arg) {
    racer *r = arg;
    cg_exec ex = {.backend = CG_BACKEND_CPU};
    pthread_barrier_wait(r->bar);
    for (int it = 0; it < 40; it++) {
        memset(r->mem[4], 0, (size_t)r->n_out * sizeof(float));
        cg_status st = cg_ssd_fwd(r->ctx, &r->a, &ex);
        if (st == CG_OK) {
            r->ok++;
            if (memcmp(r->mem[4], r->ref, (size_t)r->n_out * sizeof(float))) r->wrong++;
        } else if (st == CG_EINVAL && strstr(cg_errmsg(r->ctx), "in use by another thread")) {
            r->refused++;
        } else {
            r->other++;
        }
    }
    return NULL;
}

/* One context used from two threads at once: refused with a message, never a crash, a
 * deadlock or a wrong output. */
CG_TEST(rel_context_two_threads) {
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 1));
    const int64_t B = 2, T = 512, H = 4, dk = 32, dv = 32;
    const int64_t sq[] = {B, T, 1, dk}, sv[] = {B, T, H, dv}, sl[] = {B, T, H};
    const int64_t n[5] = {B * T * dk, B * T * dk, B * T * H * dv, B * T * H, B * T * H * dv};
    racer r[2];
    memset(r, 0, sizeof r);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    cg_rng rng = {11};
    float *ref = malloc((size_t)n[4] * sizeof *ref);
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 5; i++) r[t].mem[i] = calloc((size_t)n[i], sizeof(float));
        r[t].ctx = ctx;
        r[t].bar = &bar;
        r[t].ref = ref;
        r[t].n_out = n[4];
        r[t].a.layout = CG_LAYOUT_TOKEN_MAJOR;
        r[t].a.q = cg_tensor_contiguous(r[t].mem[0], CG_F32, 4, sq);
        r[t].a.k = cg_tensor_contiguous(r[t].mem[1], CG_F32, 4, sq);
        r[t].a.v = cg_tensor_contiguous(r[t].mem[2], CG_F32, 4, sv);
        r[t].a.log_alpha = cg_tensor_contiguous(r[t].mem[3], CG_F32, 3, sl);
        r[t].a.o = cg_tensor_contiguous(r[t].mem[4], CG_F32, 4, sv);
    }
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < n[i]; j++)
            r[0].mem[i][j] = r[1].mem[i][j] = (float)cg_rng_uniform(&rng, i == 3 ? -0.3 : -1, i == 3 ? -0.01 : 1);
    cg_exec ex = {.backend = CG_BACKEND_CPU};
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &r[0].a, &ex));
    memcpy(ref, r[0].mem[4], (size_t)n[4] * sizeof *ref);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, race_main, &r[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    int refused = r[0].refused + r[1].refused;
    CG_CHECK(refused > 0, "overlapping calls are refused (%d ok, %d refused)", r[0].ok + r[1].ok, refused);
    CG_CHECK(r[0].wrong + r[1].wrong == 0, "%d wrong outputs", r[0].wrong + r[1].wrong);
    CG_CHECK(r[0].other + r[1].other == 0, "%d other failures", r[0].other + r[1].other);
    CG_CHECK(r[0].ok + r[1].ok > 0, "calls that did not overlap ran");
    /* after the threads: the context is free again, and this thread's message is its own */
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &r[0].a, &ex));
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 5; i++) free(r[t].mem[i]);
    free(ref);
    pthread_barrier_destroy(&bar);
    cg_context_free(ctx);
}
