/* test_cuda_kcache.c -- the on-disk kernel cache: round trip, corrupt entries,
 * read-only directories, 8 processes at once. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "cuda/kcache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ cache */

/* Warnings the library has sent to the log callback (installed by the kcache tests). */
static int g_kcache_warnings;
static void count_warning(cg_log_level level, const char *msg, void *user) {
    (void)msg;
    (void)user;
    if (level == CG_LOG_WARN) g_kcache_warnings++;
}
static int kcache_warnings(void) {
    cg_set_log_callback(count_warning, NULL);
    return g_kcache_warnings;
}

CG_TEST(cuda_kcache_roundtrip) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/a/b/kernels", dir); /* created on demand */
    unsigned char payload[300];
    for (int i = 0; i < 300; i++) payload[i] = (unsigned char)(i * 7 + 1);
    void *got = NULL;
    size_t len = 0;
    char *log = NULL;
    CG_CHECK(cg__kcache_get(sub, "k1", "key one", &got, &len, &log) == CG_ENOTFOUND, "empty cache misses");
    CG_CHECK_OK(NULL, cg__kcache_put(sub, "k1", "key one", payload, sizeof payload, "compile log"));
    CG_CHECK(cg__kcache_get(sub, "k1", "key one", &got, &len, &log) == CG_OK, "hit");
    CG_CHECK(got && len == sizeof payload && !memcmp(got, payload, len), "payload back");
    CG_CHECK(log && !strcmp(log, "compile log"), "log back");
    free(got);
    free(log);
    CG_CHECK(cg__kcache_get(sub, "k1", "key two", &got, &len, &log) == CG_ENOTFOUND, "other key misses");
    /* empty payload and no log */
    CG_CHECK_OK(NULL, cg__kcache_put(sub, "", "empty", "", 0, NULL));
    CG_CHECK(cg__kcache_get(sub, "", "empty", &got, &len, &log) == CG_OK && len == 0 && log && !log[0], "empty");
    free(got);
    free(log);
    int64_t files, bytes;
    cg__kcache_stat(sub, &files, &bytes);
    CG_CHECK(files == 2 && bytes > (int64_t)sizeof payload, "stat %lld files %lld bytes", (long long)files,
             (long long)bytes);
    uint64_t h1[2], h2[2];
    cg__hash128("key one", 7, h1);
    cg__hash128("key onf", 7, h2);
    CG_CHECK(h1[0] != h2[0] && h1[1] != h2[1], "hash sensitive to one bit in both halves");
    rm_rf(dir);
    free(dir);
}

static void flip_byte(const char *path, long off_from_end_or_start, int from_end) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, from_end ? -off_from_end_or_start : off_from_end_or_start, from_end ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x20, f);
    fclose(f);
}

CG_TEST(cuda_kcache_corrupt_entries_are_misses) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    const char *key = "chunkgen test key\nsource ...";
    char payload[1000];
    for (int i = 0; i < 1000; i++) payload[i] = (char)(i * 13);
    char path[4096];
    cg__kcache_path(dir, "lbl", key, path, sizeof path);
    void *got;
    size_t len;
    char *log;
    /* corruptions: a payload byte, the magic, the version, the key text, truncation */
    for (int kind = 0; kind < 5; kind++) {
        CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", key, payload, sizeof payload, "log"));
        struct stat st;
        stat(path, &st);
        if (kind == 0) flip_byte(path, 500, 0);
        if (kind == 1) flip_byte(path, 0, 0);
        if (kind == 2) flip_byte(path, 8, 0);
        if (kind == 3) flip_byte(path, 45, 0);
        if (kind == 4) CG_CHECK(truncate(path, st.st_size - 100) == 0, "truncate");
        char why[256];
        CG_CHECK(cg__kcache_verify_file(path, why, sizeof why) != 0, "kind %d: verify notices", kind);
        int w0 = kcache_warnings();
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_ENOTFOUND, "kind %d: a miss", kind);
        CG_CHECK(kcache_warnings() == w0 + 1, "kind %d: exactly one warning", kind);
        /* rebuilt: the next put replaces it and reads back good */
        CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", key, payload, sizeof payload, "log"));
        CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_OK && len == sizeof payload &&
                     !memcmp(got, payload, len),
                 "kind %d: rebuilt entry reads back", kind);
        CG_CHECK(kcache_warnings() == w0 + 1, "kind %d: no warning for a good entry", kind);
        free(got);
        free(log);
    }
    /* an entry of another key placed at this key's path (a collision) is a miss */
    char other[4096];
    CG_CHECK_OK(NULL, cg__kcache_put(dir, "lbl", "another key", payload, 10, NULL));
    cg__kcache_path(dir, "lbl", "another key", other, sizeof other);
    CG_CHECK(rename(other, path) == 0, "rename");
    CG_CHECK(cg__kcache_get(dir, "lbl", key, &got, &len, &log) == CG_ENOTFOUND, "key mismatch misses");
    rm_rf(dir);
    free(dir);
}

CG_TEST(cuda_kcache_unwritable_dir_degrades) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    /* a directory below a regular file can never be created (works as root too) */
    char file[512], below[600];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(below, sizeof below, "%s/kernels", file);
    cg_status st = cg__kcache_put(below, "x", "k", "abc", 3, NULL);
    CG_CHECK(st == CG_EIO, "put into an impossible dir -> EIO (%s)", cg_status_str(st));
    void *got;
    size_t len;
    char *log;
    CG_CHECK(cg__kcache_get(below, "x", "k", &got, &len, &log) == CG_ENOTFOUND, "get misses");
    int w = kcache_warnings();
    CG_CHECK(cg__kcache_put(below, "x", "k", "abc", 3, NULL) == CG_EIO, "again EIO");
    CG_CHECK(kcache_warnings() == w, "the unwritable-directory warning is printed once");
    /* a read-only directory (not for root, who may write anyway) */
    if (geteuid() != 0) {
        char ro[600];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        mkdir(ro, 0555);
        CG_CHECK(cg__kcache_put(ro, "x", "k", "abc", 3, NULL) == CG_EIO, "read-only dir -> EIO");
        DIR *d = opendir(ro);
        int entries = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.' || strlen(e->d_name) > 2) entries++;
        if (d) closedir(d);
        CG_CHECK(entries == 0, "nothing left behind in the read-only dir");
    }
    rm_rf(dir);
    free(dir);
}

/* 8 processes compile the same keys into one directory at once. */
static int child_compile(const char *dir, int me, int have_nvrtc) {
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 10;
    int rc = 0;
    for (int r = 0; r < 3 && !rc; r++) {
        int i = (r + me) % 3;
        char src[512], key[1024], name[32];
        snprintf(name, sizeof name, "tiny%d", i);
        snprintf(src, sizeof src, "// %s.cu\nextern \"C\" __global__ void %s(float *p) { p[threadIdx.x] *= %d.0f; }\n",
                 name, name, i + 2);
        snprintf(key, sizeof key, "test key %d\n%s", i, src);
        void *bin = NULL;
        size_t len = 0;
        char *log = NULL;
        if (cg__kcache_get(dir, name, key, &bin, &len, &log) != CG_OK) {
            if (have_nvrtc) {
                if (cg__nvrtc_compile(ctx, name, src, 80, &bin, &len, &log) != CG_OK) rc = 11;
            } else {
                len = 100000 + (size_t)i;
                bin = malloc(len);
                for (size_t b = 0; bin && b < len; b++) ((unsigned char *)bin)[b] = (unsigned char)(b * (size_t)(i + 3));
                log = strdup("synthetic");
            }
            if (!rc && cg__kcache_put(dir, name, key, bin, len, log) != CG_OK) rc = 12;
        }
        free(bin);
        free(log);
        /* whatever is in place now must read back whole */
        if (!rc && cg__kcache_get(dir, name, key, &bin, &len, &log) != CG_OK) rc = 13;
        if (!rc) {
            free(bin);
            free(log);
        }
    }
    cg_context_free(ctx);
    return rc;
}

CG_TEST(cuda_kcache_eight_processes) {
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    int have_nvrtc = cg__nvrtc_api(NULL) != NULL;
    int go[2];
    CG_CHECK(pipe(go) == 0, "pipe");
    fflush(NULL);
    pid_t pids[8];
    for (int c = 0; c < 8; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            char b;
            close(go[1]);
            while (read(go[0], &b, 1) > 0) {} /* start together when the parent closes */
            _exit(child_compile(dir, c, have_nvrtc));
        }
        CG_CHECK(pids[c] > 0, "fork");
    }
    close(go[0]);
    close(go[1]);
    for (int c = 0; c < 8; c++) {
        int status = 0;
        if (pids[c] <= 0) continue;
        waitpid(pids[c], &status, 0);
        CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", c, status);
    }
    /* every file is a complete, valid entry; no temp file is left */
    DIR *d = opendir(dir);
    int entries = 0, temps = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (strstr(e->d_name, ".tmp.")) {
            temps++;
            continue;
        }
        char path[4400], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        CG_CHECK(cg__kcache_verify_file(path, why, sizeof why) == 0, "%s: %s", e->d_name, why);
        entries++;
    }
    if (d) closedir(d);
    CG_CHECK(entries == 3 && temps == 0, "%d entries (want 3), %d temp files", entries, temps);
    rm_rf(dir);
    free(dir);
}

