/* cmd_cache.c -- `chunkgen cache stats|verify|prune|clear`: the caches under the cache
 * directory, touching only chunkgen's own files.
 *
 * What is chunkgen's (the only files prune and clear ever remove):
 *   configs/<16 hex>.json     config store entries: a JSON object with a "schema" member
 *   kernels/<label>-<32 hex>.cgk   kernel cache entries: the "CGKCACHE" magic
 *   emu-failed/<name>.cc|.log kept sources of failed emulator compiles: the emulator's
 *                             "cg_emu_key" symbol, or the log's first line
 *   .tmp.*<one of the names above>  temp files of interrupted writes (fsutil.h)
 * A file under one of those names that is not a regular file (a FIFO, a socket, a
 * device, a symlink) is removed by name (unlink never opens it nor follows a link).
 * Everything else -- other names, files whose content is not chunkgen's, directories,
 * anything outside those three subdirectories -- is left where it is and reported. */
#include "chunkgen.h"
#include "cmd_tune.h"
#include "cli_common.h"
#include "fsutil.h"
#include "../autotune/autotune.h"
#include "cuda/kcache.h"

#include <dirent.h>
#include <jansson.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char k_cache_usage[] =
    "usage: chunkgen cache stats|verify|prune|clear [options]\n"
    "\n"
    "  stats    entries and bytes of the config store and of the other caches\n"
    "  verify   check every config entry (JSON, schema, checksum, key) and every binary\n"
    "           kernel entry (kernels/*.cgk); exit 1 if any is bad\n"
    "  prune    remove bad entries (both stores), leftovers of interrupted writes (older\n"
    "           than 10 minutes)\n"
    "           and entries of other chunkgen versions; --older-than DAYS also removes\n"
    "           entries created before then\n"
    "  clear    remove every config entry (--all: also the kernel cache and the kept\n"
    "           sources of failed emulator compiles)\n"
    "\n"
    "Only chunkgen's own files are removed: entry names and content (magic, schema) are\n"
    "checked, and anything else in the cache directory is left there and listed.\n"
    "Exit status 1 when a file could not be removed.\n";

typedef struct cache_opts {
    cli_common c;
    const char *action;
    int all, json;
    double older_days;
} cache_opts;

static int cache_action(void *opts, const char *arg, char *err, size_t errlen) {
    cache_opts *o = opts;
    if (o->action) return snprintf(err, errlen, "one action only (got '%s' and '%s')", o->action, arg), -1;
    o->action = arg;
    return 0;
}

static const cg_cli_opt k_cache_opts[] = {
    {"--all", 0, CG_CLI_FLAG, offsetof(cache_opts, all), NULL,
     "clear: also the kernel cache and the kept sources of failed\nemulator compiles", 0, 0, NULL},
    {"--older-than", 0, CG_CLI_F64, offsetof(cache_opts, older_days), "DAYS",
     "prune: also the entries created more than DAYS ago", 1e-9, 1e9, NULL},
    CG_CLI_OPT_CACHE_DIR(cache_opts, c.cache_dir),
    CG_CLI_OPT_JSON(cache_opts, json, "stats and verify: the counts as JSON"),
    CG_CLI_OPT_END,
};
static const cg_cli_cmd k_cache_cmd = {"cache", k_cache_usage, k_cache_opts, cache_action, NULL};

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

typedef enum { SUB_CONFIGS, SUB_KERNELS, SUB_EMU_FAILED } cache_sub;

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
        ours = n >= strlen(CG_EMU_FAILED_LOG_MARK) && !memcmp(buf, CG_EMU_FAILED_LOG_MARK, strlen(CG_EMU_FAILED_LOG_MARK));
    }
    free(buf);
    return ours;
}

/* ---------------------------------------------------------------- clear */

typedef struct clear_stats {
    int removed, failed, left;
    int64_t bytes;
    char left_list[5][4400]; /* the first few files left */
} clear_stats;

static void note_left(clear_stats *s, const char *path) {
    if (s->left < 5) snprintf(s->left_list[s->left], sizeof s->left_list[0], "%s", path);
    s->left++;
}

/* Remove sub's own entries (and temp files) in dir; list what is not ours. */
static void clear_sub(const char *dir, cache_sub sub, clear_stats *s) {
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
        int name_ok = is_entry_name(sub, n), tmp_ok = is_temp_name(sub, n);
        int ours = 0;
        if (S_ISDIR(st.st_mode)) ours = 0;
        else if (tmp_ok) ours = 1;
        else if (name_ok) ours = !S_ISREG(st.st_mode) || content_is_ours(sub, path, n);
        if (!ours) {
            note_left(s, path);
            continue;
        }
        if (unlink(path) == 0) {
            s->removed++;
            if (S_ISREG(st.st_mode)) s->bytes += st.st_size;
        } else if (errno != ENOENT) {
            fprintf(stderr, "chunkgen cache: cannot remove %s: %s\n", path, strerror(errno));
            s->failed++;
        }
    }
    closedir(d);
    rmdir(dir); /* only when empty; what was left stays */
}

static void report_left(const char *where, const clear_stats *s) {
    if (!s->left) return;
    printf("left %d file(s) in %s that are not chunkgen's cache entries:\n", s->left, where);
    for (int i = 0; i < s->left && i < 5; i++) printf("  %s\n", s->left_list[i]);
    if (s->left > 5) printf("  ... and %d more\n", s->left - 5);
}

static int cache_clear(const char *root, const char *dir, int all) {
    static const struct { const char *sub; cache_sub kind; const char *what; } subs[] = {
        {"configs", SUB_CONFIGS, "config entr(ies)"},
        {"kernels", SUB_KERNELS, "kernel cache entr(ies)"},
        {"emu-failed", SUB_EMU_FAILED, "kept emulator source(s) and log(s)"}};
    int failed = 0;
    for (int i = 0; i < (all ? 3 : 1); i++) {
        clear_stats s;
        memset(&s, 0, sizeof s);
        char sub[4400];
        if (i == 0) snprintf(sub, sizeof sub, "%s", dir);
        else snprintf(sub, sizeof sub, "%s/%s", root, subs[i].sub);
        clear_sub(sub, subs[i].kind, &s);
        printf("removed %d %s (%lld bytes) from %s\n", s.removed, subs[i].what, (long long)s.bytes, sub);
        if (s.failed) printf("could not remove %d file(s) in %s (see above)\n", s.failed, sub);
        report_left(sub, &s);
        failed += s.failed;
    }
    if (all) { /* the rest of the cache directory is not ours: say what stays */
        DIR *d = opendir(root);
        struct dirent *de;
        clear_stats s;
        memset(&s, 0, sizeof s);
        while (d && (de = readdir(d))) {
            const char *n = de->d_name;
            if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "configs") || !strcmp(n, "kernels") ||
                !strcmp(n, "emu-failed"))
                continue;
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", root, n);
            note_left(&s, p);
        }
        if (d) closedir(d);
        report_left(root, &s);
    }
    cg__tune_index_invalidate(dir);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------ stats, verify, prune */

typedef struct cache_stats {
    int entries, complete, partial, bad, removed, foreign_version, old, failed;
    int64_t bytes;
    int verbose;
    int prune;
    double older_than_s; /* prune: 0 = keep by age */
} cache_stats;

static void prune_unlink(cache_stats *s, const char *path) {
    if (unlink(path) == 0) s->removed++;
    else if (errno != ENOENT) {
        fprintf(stderr, "chunkgen cache: cannot remove %s: %s\n", path, strerror(errno));
        s->failed++;
    }
}

static int cache_visit(void *arg, const char *path, const cg_tune_entry *e, const char *why) {
    cache_stats *s = arg;
    struct stat st;
    if (lstat(path, &st) == 0) s->bytes += st.st_size;
    const char *base = strrchr(path, '/');
    int named = is_store_name(base ? base + 1 : path);
    if (!e) {
        s->bad++;
        if (s->verbose) printf("BAD  %s: %s%s\n", path, why, named ? "" : " (not an entry name: left alone)");
        if (s->prune && named) prune_unlink(s, path);
        return 0;
    }
    s->entries++;
    if (e->complete) s->complete++;
    else s->partial++;
    if (s->prune) {
        int drop = 0;
        if (strcmp(e->key.version, cg_version())) drop = 1, s->foreign_version++;
        else if (s->older_than_s > 0) {
            struct tm tm;
            memset(&tm, 0, sizeof tm);
            if (strptime(e->created, "%Y-%m-%dT%H:%M:%SZ", &tm) && difftime(time(NULL), timegm(&tm)) > s->older_than_s)
                drop = 1, s->old++;
        }
        if (drop) prune_unlink(s, path);
    }
    return 0;
}

/* Temp files of writers that died (older than min_age seconds); remove when asked. */
static int temp_files(const char *dir, cache_sub sub, double min_age, int remove_them, int64_t *bytes, int *failed) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_temp_name(sub, de->d_name)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || S_ISDIR(st.st_mode) || difftime(time(NULL), st.st_mtime) < min_age) continue;
        if (bytes) *bytes += st.st_size;
        if (!remove_them) n++;
        else if (unlink(path) == 0) n++;
        else if (errno != ENOENT) {
            fprintf(stderr, "chunkgen cache: cannot remove %s: %s\n", path, strerror(errno));
            (*failed)++;
        }
    }
    closedir(d);
    return n;
}

/* Files and bytes under dir (recursive; lstat only, nothing is opened). */
static void tree_count(const char *dir, int depth, int *files, int64_t *bytes) {
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

/* Entries of the binary kernel cache (<cache>/kernels/<entry>.cgk, runtime/cuda/kcache.h):
 * check each; report (verbose) and remove (prune) the bad ones. Returns the bad count. */
static int kernels_check(const char *root, int verbose, int prune, int *checked, int *failed) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kernels", root);
    DIR *d = opendir(dir);
    int bad = 0;
    *checked = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!is_kcache_name(de->d_name)) continue;
        char path[4600], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        (*checked)++;
        if (cg__kcache_verify_file(path, why, sizeof why) != 0) {
            bad++;
            if (verbose) printf("BAD  %s: %s\n", path, why);
            if (prune && unlink(path) != 0 && errno != ENOENT) {
                fprintf(stderr, "chunkgen cache: cannot remove %s: %s\n", path, strerror(errno));
                (*failed)++;
            }
        }
    }
    if (d) closedir(d);
    return bad;
}

/* fn(arg, name, dir, files, bytes) for each cache directory under root besides configs/. */
static void other_caches(const char *root, void (*fn)(void *, const char *, const char *, int, int64_t), void *arg) {
    DIR *d = opendir(root);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "configs")) continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
        struct stat st;
        if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        int files = 0;
        int64_t bytes = 0;
        tree_count(sub, 0, &files, &bytes);
        fn(arg, de->d_name, sub, files, bytes);
    }
    if (d) closedir(d);
}

static void print_cache(void *arg, const char *name, const char *dir, int files, int64_t bytes) {
    (void)arg;
    printf("%-16s %s: %d file(s), %lld bytes\n", name, dir, files, (long long)bytes);
}

static void json_cache(void *arg, const char *name, const char *dir, int files, int64_t bytes) {
    json_object_set_new(arg, name, json_pack("{s:s, s:i, s:I}", "dir", dir, "files", files, "bytes", (json_int_t)bytes));
}

static void print_stats(const char *root, const char *dir, int visited, const cache_stats *s, int tmps,
                        int64_t tmp_bytes) {
    printf("cache directory  %s\n", root);
    if (visited < 0) printf("config store     %s (absent)\n", dir);
    else
        printf("config store     %s: %d entr%s (%d complete, %d unfinished), %d bad, %d temp file(s), %lld bytes\n",
               dir, s->entries, s->entries == 1 ? "y" : "ies", s->complete, s->partial, s->bad, tmps,
               (long long)(s->bytes + tmp_bytes));
    other_caches(root, print_cache, NULL);
}

/* doc on stdout (and freed); 0, or -1 when doc is NULL or the write fails. */
static int json_out(json_t *doc) {
    int bad = !doc || json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) != 0;
    if (!bad) putchar('\n');
    json_decref(doc);
    return bad ? -1 : 0;
}

/* stats --json: {"cache_dir", "configs": {"dir", "exists", "entries", "complete", "unfinished", "bad",
 * "temp_files", "bytes"}, "caches": {NAME: {"dir", "files", "bytes"}}}. */
static int stats_json(const char *root, const char *dir, int visited, const cache_stats *s, int tmps,
                      int64_t tmp_bytes) {
    json_t *caches = json_object();
    if (caches) other_caches(root, json_cache, caches);
    json_t *doc = json_pack("{s:s, s:{s:s, s:b, s:i, s:i, s:i, s:i, s:i, s:I}, s:o}", "cache_dir", root, "configs", "dir",
                            dir, "exists", visited >= 0, "entries", s->entries, "complete", s->complete, "unfinished",
                            s->partial, "bad", s->bad, "temp_files", tmps, "bytes", (json_int_t)(s->bytes + tmp_bytes),
                            "caches", caches);
    return json_out(doc) ? cli_fail("cache", "out of memory") : 0;
}

int cg_cmd_cache(int argc, char **argv) {
    cache_opts o = {0};
    int prc = cg_cli_parse(&k_cache_cmd, argc, argv, &o);
    if (prc) return prc < 0 ? 0 : prc;
    const char *cmd = k_cache_cmd.name, *action = o.action;
    const int all = o.all;
    const double older = o.older_days * 86400;
    if (!action) return cli_usage(cmd, "missing the action: stats, verify, prune or clear");
    int is_stats = !strcmp(action, "stats"), is_verify = !strcmp(action, "verify"), is_prune = !strcmp(action, "prune"),
        is_clear = !strcmp(action, "clear");
    if (!is_stats && !is_verify && !is_prune && !is_clear)
        return cli_usage(cmd, "unknown action '%s' (expected stats, verify, prune or clear)", action);
    if (older > 0 && !is_prune) return cli_usage(cmd, "--older-than applies to prune only");
    if (all && !is_clear) return cli_usage(cmd, "--all applies to clear only");
    if (o.json && !is_stats && !is_verify) return cli_usage(cmd, "--json applies to stats and verify only");
    cg_context *ctx = cli_make_ctx(cmd, &o.c);
    if (!ctx) return 1;
    char root[4096], dir[4096];
    snprintf(root, sizeof root, "%s", cg__cache_dir(ctx));
    snprintf(dir, sizeof dir, "%s", cg__tune_store_dir(ctx));
    int rc = 0;
    if (is_clear) {
        rc = cache_clear(root, dir, all);
    } else {
        cache_stats s;
        memset(&s, 0, sizeof s);
        s.verbose = (is_verify || is_prune) && !o.json;
        s.prune = is_prune;
        s.older_than_s = older;
        int64_t tmp_bytes = 0;
        int visited = cg__tune_store_scan(dir, cache_visit, &s);
        int tmps = temp_files(dir, SUB_CONFIGS, is_prune ? 600 : 0, is_prune, &tmp_bytes, &s.failed);
        if (is_stats) {
            if (o.json) rc = stats_json(root, dir, visited, &s, tmps, tmp_bytes);
            else print_stats(root, dir, visited, &s, tmps, tmp_bytes);
        } else if (is_verify) {
            int kchecked, kfailed = 0, kbad = kernels_check(root, o.json ? 0 : 1, 0, &kchecked, &kfailed);
            if (s.bad || kbad) rc = 1;
            if (o.json) {
                json_t *doc = json_pack("{s:i, s:i, s:i, s:i}", "configs_checked", s.entries + s.bad, "configs_bad", s.bad,
                                        "kernels_checked", kchecked, "kernels_bad", kbad);
                if (json_out(doc)) rc = cli_fail(cmd, "out of memory");
            } else
            printf("configs: %d entr%s checked, %d bad; kernels: %d checked, %d bad\n", s.entries + s.bad,
                   s.entries + s.bad == 1 ? "y" : "ies", s.bad, kchecked, kbad);
        } else {
            char kdir[4400];
            snprintf(kdir, sizeof kdir, "%s/kernels", root);
            int kchecked, kbad = kernels_check(root, 1, 1, &kchecked, &s.failed);
            int ktmps = temp_files(kdir, SUB_KERNELS, 600, 1, NULL, &s.failed);
            if (kbad) printf("removed %d bad kernel cache entr%s\n", kbad, kbad == 1 ? "y" : "ies");
            printf("removed %d entr%s (%d bad, %d of another chunkgen version, %d older than the limit) and %d stale "
                   "temp file(s)\n",
                   s.removed, s.removed == 1 ? "y" : "ies", s.bad, s.foreign_version, s.old, tmps + ktmps);
            if (s.failed) {
                printf("could not remove %d file(s) (see above)\n", s.failed);
                rc = 1;
            }
            cg__tune_index_invalidate(dir);
        }
    }
    cg_context_free(ctx);
    return rc;
}
