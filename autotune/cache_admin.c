/* cache_admin.c -- cg_cache_stats, cg_cache_verify, cg_cache_prune, cg_cache_clear and
 * cg_cache_dirs: the cache directory's own files, and only those. The library is the one
 * place that knows their names and formats:
 *   configs/<16 hex>.json          config store entries: a JSON object with a "schema" member
 *   kernels/<label>-<32 hex>.cgk   kernel cache entries: the "CGKCACHE" magic
 *   emu-failed/<name>.cc|.log      kept sources of failed emulator compiles: the emulator's
 *                                  "cg_emu_key" symbol, or the log's first line
 *   .tmp.*<one of the names above> temp files of interrupted writes (fsutil.h)
 * A file under one of those names that is not a regular file (a FIFO, a socket, a device,
 * a symlink) is removed by name (unlink never opens it nor follows a link). Everything
 * else -- other names, files whose content is not chunkgen's, directories, anything outside
 * those three subdirectories -- is left where it is and reported (CG_PROGRESS_MESSAGE). */
#include "autotune.h"
#include "abi.h"
#include "fsutil.h"
#include "cuda/kcache.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef enum { SUB_CONFIGS, SUB_KERNELS, SUB_EMU_FAILED, SUB_COUNT } cache_sub;
static const char *const k_sub_name[SUB_COUNT] = {"configs", "kernels", "emu-failed"};

/* ------------------------------------------------------------ ownership */

static int all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* "<16 hex>.json" (cg__tune_entry_file). */
static int is_store_name(const char *n) { return strlen(n) == 21 && all_hex(n, 16) && !strcmp(n + 16, ".json"); }

/* "...<32 hex>.cgk" (cg__kcache_path). */
static int is_kcache_name(const char *n) {
    size_t len = strlen(n);
    return len >= 36 && n[0] != '.' && ends_with(n, ".cgk") && all_hex(n + len - 36, 32);
}

static int is_entry_name(cache_sub sub, const char *n) {
    if (sub == SUB_CONFIGS) return is_store_name(n);
    if (sub == SUB_KERNELS) return is_kcache_name(n);
    return n[0] != '.' && (ends_with(n, ".cc") || ends_with(n, ".log"));
}

/* A temp file of an interrupted write of one of sub's entries. */
static int is_temp_name(cache_sub sub, const char *n) {
    if (cg__is_tmp_name(n)) {
        if (sub == SUB_CONFIGS) return strlen(n) > 26 && n[strlen(n) - 22] == '.' && is_store_name(n + strlen(n) - 21);
        if (sub == SUB_KERNELS) return ends_with(n, ".cgk") && strlen(n) > 41 && all_hex(n + strlen(n) - 36, 32);
        return 0;
    }
    /* the kernel cache's former temp names: ".<entry>.tmp.<pid>.<16 hex>" */
    if (sub == SUB_KERNELS && n[0] == '.') {
        const char *t = strstr(n, ".cgk.tmp.");
        return t && t > n + 1;
    }
    return 0;
}

/* Whether the regular file at path holds one of sub's entries (by its content). */
static int content_is_ours(cache_sub sub, const char *path, const char *name) {
    char why[256];
    size_t n = 0;
    char *buf = cg__read_regular(path, (int64_t)64 << 20, &n, why, sizeof why);
    if (!buf) return 0;
    int ours = 0;
    if (sub == SUB_CONFIGS) {
        size_t i = 0;
        while (i < n && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r')) i++;
        ours = i < n && buf[i] == '{' && memmem(buf, n, "\"schema\"", 8) && memmem(buf, n, "\"key\"", 5);
    } else if (sub == SUB_KERNELS) {
        ours = n >= 8 && !memcmp(buf, "CGKCACHE", 8);
    } else if (ends_with(name, ".cc")) {
        ours = memmem(buf, n, "cg_emu_key", 10) != NULL;
    } else {
        ours =
            n >= strlen(CG_EMU_FAILED_LOG_MARK) && !memcmp(buf, CG_EMU_FAILED_LOG_MARK, strlen(CG_EMU_FAILED_LOG_MARK));
    }
    free(buf);
    return ours;
}

/* ------------------------------------------------------------ messages */

static void tell(cg_context *ctx, cg_log_level level, const char *task, const char *path, const char *text) {
    cg__progress(
        ctx, (cg_progress){.kind = CG_PROGRESS_MESSAGE, .level = level, .task = task, .subject = path, .text = text});
}

/* unlink path; 1 when removed (or already gone: 0), a failure is counted and said. */
static int remove_file(cg_context *ctx, const char *path, int64_t *failed) {
    if (unlink(path) == 0) return 1;
    if (errno != ENOENT) {
        char why[300];
        snprintf(why, sizeof why, "cannot remove: %s", strerror(errno));
        tell(ctx, CG_LOG_ERROR, "", path, why);
        (*failed)++;
    }
    return 0;
}

static void area_names(cg_cache_report *r) {
    r->configs.name = k_sub_name[SUB_CONFIGS];
    r->kernels.name = k_sub_name[SUB_KERNELS];
    r->emu_failed.name = k_sub_name[SUB_EMU_FAILED];
}

/* ---------------------------------------------------------------- clear */

/* Remove sub's own entries (and temp files) in dir; report what is not ours. */
static void clear_sub(cg_context *ctx, const char *dir, cache_sub sub, cg_cache_area *a) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        char path[4400];
        if (snprintf(path, sizeof path, "%s/%s", dir, n) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0) continue; /* removed meanwhile */
        int ours = 0;
        if (S_ISDIR(st.st_mode)) ours = 0;
        else if (is_temp_name(sub, n)) ours = 1;
        else if (is_entry_name(sub, n)) ours = !S_ISREG(st.st_mode) || content_is_ours(sub, path, n);
        if (!ours) {
            a->left++;
            tell(ctx, CG_LOG_INFO, k_sub_name[sub], path, "not one of chunkgen's cache entries: left there");
            continue;
        }
        if (remove_file(ctx, path, &a->failed)) {
            a->removed++;
            if (S_ISREG(st.st_mode)) a->removed_bytes += st.st_size;
        }
    }
    closedir(d);
    rmdir(dir); /* only when empty; what was left stays */
}

static cg_status cache_enter(cg_context *ctx, const char *fn, cg_cache_report *r, char *root, char *dir) {
    if (!ctx || cg__ctx_enter(ctx, fn) != CG_OK) return CG_EINVAL;
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    area_names(r);
    snprintf(root, 4096, "%s", cg__cache_dir(ctx));
    snprintf(dir, 4096, "%s", cg__tune_store_dir(ctx));
    return CG_OK;
}

static cg_status cache_leave(cg_context *ctx, const cg_cache_report *r, cg_cache_report *out) {
    cg_status st = out ? cg__abi_out(ctx, "report", out, r, sizeof *r) : CG_OK;
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_cache_clear(cg_context *ctx, int all, cg_cache_report *report) {
    cg_cache_report r;
    char root[4096], dir[4096];
    if (cache_enter(ctx, "cg_cache_clear", &r, root, dir) != CG_OK) return CG_EINVAL;
    cg_cache_area *area[SUB_COUNT] = {&r.configs, &r.kernels, &r.emu_failed};
    for (int i = 0; i < (all ? SUB_COUNT : 1); i++) {
        char sub[4400];
        if (i == SUB_CONFIGS) snprintf(sub, sizeof sub, "%s", dir);
        else snprintf(sub, sizeof sub, "%s/%s", root, k_sub_name[i]);
        clear_sub(ctx, sub, (cache_sub)i, area[i]);
    }
    if (all) { /* the rest of the cache directory is not ours: say what stays */
        DIR *d = opendir(root);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            const char *n = de->d_name;
            int known = !strcmp(n, ".") || !strcmp(n, "..");
            for (int i = 0; i < SUB_COUNT; i++) known |= !strcmp(n, k_sub_name[i]);
            if (known) continue;
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", root, n);
            r.left_root++;
            tell(ctx, CG_LOG_INFO, "", p, "not one of chunkgen's caches: left there");
        }
        if (d) closedir(d);
    }
    cg__tune_store_changed();
    return cache_leave(ctx, &r, report);
}

/* ------------------------------------------------------ stats, verify, prune */

typedef struct visit_state {
    cg_context *ctx;
    cg_cache_report *r;
    int tell_bad; /* send a message per bad entry */
    int prune;
    double older_than_s; /* prune: 0 = keep by age */
} visit_state;

static int store_visit(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    visit_state *s = arg;
    cg_cache_area *a = &s->r->configs;
    struct stat st;
    if (lstat(path, &st) == 0) a->bytes += st.st_size;
    const char *base = strrchr(path, '/');
    int named = is_store_name(base ? base + 1 : path);
    if (!e) {
        a->bad++;
        if (s->tell_bad) {
            char text[400];
            snprintf(text, sizeof text, "%s%s", why, named ? "" : " (not an entry name: left alone)");
            tell(s->ctx, CG_LOG_WARN, "configs", path, text);
        }
        if (s->prune && named && remove_file(s->ctx, path, &a->failed)) a->removed++;
        return 0;
    }
    a->entries++;
    if (e->complete) s->r->complete++;
    else s->r->unfinished++;
    if (s->prune) {
        int64_t *count = NULL; /* why it goes */
        if (strcmp(e->key.version, cg_version())) count = &s->r->removed_version;
        else if (s->older_than_s > 0) {
            struct tm tm;
            memset(&tm, 0, sizeof tm);
            if (strptime(e->created, "%Y-%m-%dT%H:%M:%SZ", &tm) && difftime(time(NULL), timegm(&tm)) > s->older_than_s)
                count = &s->r->removed_old;
        }
        if (count && remove_file(s->ctx, path, &a->failed)) {
            (*count)++;
            a->removed++;
        }
    }
    return 0;
}

/* Temp files of writers that died (older than min_age seconds) in dir; removed when asked. */
static int64_t temp_files(cg_context *ctx, const char *dir, cache_sub sub, double min_age, int remove_them,
                          int64_t *bytes, int64_t *failed) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_temp_name(sub, de->d_name)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || S_ISDIR(st.st_mode) || difftime(time(NULL), st.st_mtime) < min_age) continue;
        if (bytes) *bytes += st.st_size;
        if (!remove_them || remove_file(ctx, path, failed)) n++;
    }
    closedir(d);
    return n;
}

/* The kernel cache's entries: check each; report and (prune) remove the bad ones. */
static void kernels_check(cg_context *ctx, const char *root, int prune, cg_cache_area *a) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", root, k_sub_name[SUB_KERNELS]);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!is_kcache_name(de->d_name)) continue;
        char path[4600], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) == 0) a->bytes += st.st_size;
        if (cg__kcache_verify_file(path, why, sizeof why) == 0) {
            a->entries++;
            continue;
        }
        a->bad++;
        tell(ctx, CG_LOG_WARN, k_sub_name[SUB_KERNELS], path, why);
        if (prune && remove_file(ctx, path, &a->failed)) a->removed++;
    }
    if (d) closedir(d);
    if (prune) a->temp_files = temp_files(ctx, dir, SUB_KERNELS, 600, 1, NULL, &a->failed);
}

/* The config store's pass of stats (tell 0, prune 0), verify (tell 1) and prune. */
static void store_pass(cg_context *ctx, const char *dir, int tell_bad, int prune, double older_s, cg_cache_report *r) {
    visit_state s = {ctx, r, tell_bad, prune, older_s};
    r->store_exists = cg__tune_store_scan(dir, store_visit, &s) >= 0;
    r->configs.temp_files =
        temp_files(ctx, dir, SUB_CONFIGS, prune ? 600 : 0, prune, &r->configs.bytes, &r->configs.failed);
}

cg_status cg_cache_stats(cg_context *ctx, cg_cache_report *report) {
    cg_cache_report r;
    char root[4096], dir[4096];
    if (cache_enter(ctx, "cg_cache_stats", &r, root, dir) != CG_OK) return CG_EINVAL;
    store_pass(ctx, dir, 0, 0, 0, &r);
    return cache_leave(ctx, &r, report);
}

cg_status cg_cache_verify(cg_context *ctx, cg_cache_report *report) {
    cg_cache_report r;
    char root[4096], dir[4096];
    if (cache_enter(ctx, "cg_cache_verify", &r, root, dir) != CG_OK) return CG_EINVAL;
    store_pass(ctx, dir, 1, 0, 0, &r);
    kernels_check(ctx, root, 0, &r.kernels);
    return cache_leave(ctx, &r, report);
}

cg_status cg_cache_prune(cg_context *ctx, double older_than_days, cg_cache_report *report) {
    cg_cache_report r;
    char root[4096], dir[4096];
    if (cache_enter(ctx, "cg_cache_prune", &r, root, dir) != CG_OK) return CG_EINVAL;
    if (!(older_than_days >= 0)) { /* NaN too */
        cg__err(ctx, CG_EINVAL, "older_than_days: %g but expected >= 0 (0: keep entries by age)", older_than_days);
        cg__ctx_leave(ctx);
        return CG_EINVAL;
    }
    store_pass(ctx, dir, 1, 1, older_than_days * 86400, &r);
    kernels_check(ctx, root, 1, &r.kernels);
    cg__tune_store_changed();
    return cache_leave(ctx, &r, report);
}

/* ------------------------------------------------------------ cache dirs */

/* Files and bytes under dir (recursive; lstat only, nothing is opened). */
static void tree_count(const char *dir, int depth, int64_t *files, int64_t *bytes) {
    if (depth > 4) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) tree_count(path, depth + 1, files, bytes);
        else {
            (*files)++;
            if (S_ISREG(st.st_mode)) *bytes += st.st_size;
        }
    }
    closedir(d);
}

cg_status cg_cache_dirs(cg_context *ctx, cg_cache_dir_fn fn, void *user) {
    if (!ctx || cg__ctx_enter(ctx, "cg_cache_dirs") != CG_OK) return CG_EINVAL;
    if (!fn) {
        cg__ctx_leave(ctx);
        return cg__err(ctx, CG_EINVAL, "fn: expected a function");
    }
    char root[4096];
    snprintf(root, sizeof root, "%s", cg__cache_dir(ctx));
    DIR *d = opendir(root);
    struct dirent *de;
    int stop = 0;
    while (!stop && d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !strcmp(de->d_name, k_sub_name[SUB_CONFIGS])) continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
        struct stat st;
        if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        int64_t files = 0, bytes = 0;
        tree_count(sub, 0, &files, &bytes);
        stop = fn(de->d_name, sub, files, bytes, user);
    }
    if (d) closedir(d);
    cg__ctx_leave(ctx);
    return CG_OK;
}
