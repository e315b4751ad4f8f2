/* cmd_cache.c -- `chunkgen cache stats|verify|prune|clear`: the caches under the cache
 * directory, touching only chunkgen's own files. The library knows which files those are
 * (cg_cache_stats, cg_cache_verify, cg_cache_prune, cg_cache_clear in include/chunkgen.h);
 * this file parses the command line and prints the library's reports and messages. */
#include "chunkgen.h"
#include "cmd_tune.h"
#include "cli_common.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------ messages */

#define LEFT_SHOWN 5

/* What the library says per file: bad entries (verify, prune), files left (clear), and
 * removals that failed. */
typedef struct cache_msgs {
    int show_bad; /* print "BAD  PATH: WHY" lines */
    struct {
        const char *task; /* the area ("configs", ...), "" for the cache directory */
        int n;
        char first[LEFT_SHOWN][4400];
    } left[4];
    int nleft;
} cache_msgs;

static void cache_event(const cg_progress *ev, void *user) {
    cache_msgs *m = user;
    if (ev->kind != CG_PROGRESS_MESSAGE) return;
    if (ev->level == CG_LOG_ERROR) {
        fprintf(stderr, "chunkgen cache: %s: %s\n", ev->subject, ev->text);
    } else if (ev->level == CG_LOG_WARN) {
        if (m->show_bad) printf("BAD  %s: %s\n", ev->subject, ev->text);
    } else { /* a file left where it is: grouped by area */
        int i = 0;
        while (i < m->nleft && strcmp(m->left[i].task, ev->task)) i++;
        if (i == m->nleft) {
            if (m->nleft == 4) return;
            m->left[m->nleft].task = !strcmp(ev->task, "configs")      ? "configs"
                                     : !strcmp(ev->task, "kernels")    ? "kernels"
                                     : !strcmp(ev->task, "emu-failed") ? "emu-failed"
                                                                       : "";
            m->left[m->nleft++].n = 0;
        }
        if (m->left[i].n < LEFT_SHOWN)
            snprintf(m->left[i].first[m->left[i].n], sizeof m->left[i].first[0], "%s", ev->subject);
        m->left[i].n++;
    }
}

static void report_left(const cache_msgs *m, const char *task, const char *where) {
    for (int i = 0; i < m->nleft; i++) {
        if (strcmp(m->left[i].task, task)) continue;
        printf("left %d file(s) in %s that are not chunkgen's cache entries:\n", m->left[i].n, where);
        for (int j = 0; j < m->left[i].n && j < LEFT_SHOWN; j++) printf("  %s\n", m->left[i].first[j]);
        if (m->left[i].n > LEFT_SHOWN) printf("  ... and %d more\n", m->left[i].n - LEFT_SHOWN);
    }
}

/* ---------------------------------------------------------------- clear */

static int cache_clear(cg_context *ctx, int all, cache_msgs *m) {
    cg_cache_report r = CG_CACHE_REPORT_INIT;
    cg_status st = cg_cache_clear(ctx, all, &r);
    if (st != CG_OK) return cli_fail("cache", "%s", cg_errmsg(ctx));
    const char *root = cg_context_cache_dir(ctx);
    const cg_cache_area *area[] = {&r.configs, &r.kernels, &r.emu_failed};
    const char *what[] = {"config entr(ies)", "kernel cache entr(ies)", "kept emulator source(s) and log(s)"};
    int64_t failed = 0;
    for (int i = 0; i < (all ? 3 : 1); i++) {
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", root, area[i]->name);
        printf("removed %lld %s (%lld bytes) from %s\n", (long long)area[i]->removed, what[i],
               (long long)area[i]->removed_bytes, sub);
        if (area[i]->failed)
            printf("could not remove %lld file(s) in %s (see above)\n", (long long)area[i]->failed, sub);
        report_left(m, area[i]->name, sub);
        failed += area[i]->failed;
    }
    if (all) report_left(m, "", root);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------ stats */

static int print_dir(const char *name, const char *path, int64_t files, int64_t bytes, void *user) {
    (void)user;
    printf("%-16s %s: %lld file(s), %lld bytes\n", name, path, (long long)files, (long long)bytes);
    return 0;
}

static int json_dir(const char *name, const char *path, int64_t files, int64_t bytes, void *user) {
    json_object_set_new(
        user, name, json_pack("{s:s, s:I, s:I}", "dir", path, "files", (json_int_t)files, "bytes", (json_int_t)bytes));
    return 0;
}

/* doc on stdout (and freed); 0, or -1 when doc is NULL or the write fails. */
static int json_out(json_t *doc) {
    int bad = !doc || json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_ENSURE_ASCII) != 0;
    if (!bad) putchar('\n');
    json_decref(doc);
    return bad ? -1 : 0;
}

/* stats [--json]: {"cache_dir", "configs": {"dir", "exists", "entries", "complete", "unfinished", "bad",
 * "temp_files", "bytes"}, "caches": {NAME: {"dir", "files", "bytes"}}}. */
static int cache_stats(cg_context *ctx, int as_json) {
    cg_cache_report r = CG_CACHE_REPORT_INIT;
    if (cg_cache_stats(ctx, &r) != CG_OK) return cli_fail("cache", "%s", cg_errmsg(ctx));
    char root[4096], dir[4096];
    snprintf(root, sizeof root, "%s", cg_context_cache_dir(ctx));
    snprintf(dir, sizeof dir, "%s", cg_config_store_dir(ctx));
    const cg_cache_area *c = &r.configs;
    if (as_json) {
        json_t *caches = json_object();
        if (caches) cg_cache_dirs(ctx, json_dir, caches);
        json_t *doc =
            json_pack("{s:s, s:{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}", "cache_dir", root, "configs", "dir",
                      dir, "exists", r.store_exists, "entries", (json_int_t)c->entries, "complete",
                      (json_int_t)r.complete, "unfinished", (json_int_t)r.unfinished, "bad", (json_int_t)c->bad,
                      "temp_files", (json_int_t)c->temp_files, "bytes", (json_int_t)c->bytes, "caches", caches);
        return json_out(doc) ? cli_fail("cache", "out of memory") : 0;
    }
    printf("cache directory  %s\n", root);
    if (!r.store_exists) printf("config store     %s (absent)\n", dir);
    else
        printf("config store     %s: %lld entr%s (%lld complete, %lld unfinished), %lld bad, %lld temp file(s), %lld "
               "bytes\n",
               dir, (long long)c->entries, c->entries == 1 ? "y" : "ies", (long long)r.complete,
               (long long)r.unfinished, (long long)c->bad, (long long)c->temp_files, (long long)c->bytes);
    cg_cache_dirs(ctx, print_dir, NULL);
    return 0;
}

/* ------------------------------------------------------- verify, prune */

static int cache_verify(cg_context *ctx, int as_json) {
    cg_cache_report r = CG_CACHE_REPORT_INIT;
    if (cg_cache_verify(ctx, &r) != CG_OK) return cli_fail("cache", "%s", cg_errmsg(ctx));
    const long long cchecked = (long long)(r.configs.entries + r.configs.bad),
                    kchecked = (long long)(r.kernels.entries + r.kernels.bad);
    int rc = r.configs.bad || r.kernels.bad;
    if (as_json) {
        json_t *doc = json_pack("{s:I, s:I, s:I, s:I}", "configs_checked", (json_int_t)cchecked, "configs_bad",
                                (json_int_t)r.configs.bad, "kernels_checked", (json_int_t)kchecked, "kernels_bad",
                                (json_int_t)r.kernels.bad);
        if (json_out(doc)) rc = cli_fail("cache", "out of memory");
    } else {
        printf("configs: %lld entr%s checked, %lld bad; kernels: %lld checked, %lld bad\n", cchecked,
               cchecked == 1 ? "y" : "ies", (long long)r.configs.bad, kchecked, (long long)r.kernels.bad);
    }
    return rc;
}

static int cache_prune(cg_context *ctx, double older_days) {
    cg_cache_report r = CG_CACHE_REPORT_INIT;
    if (cg_cache_prune(ctx, older_days, &r) != CG_OK) return cli_fail("cache", "%s", cg_errmsg(ctx));
    const int64_t kbad = r.kernels.removed;
    if (kbad) printf("removed %lld bad kernel cache entr%s\n", (long long)kbad, kbad == 1 ? "y" : "ies");
    printf("removed %lld entr%s (%lld bad, %lld of another chunkgen version, %lld older than the limit) and %lld stale "
           "temp file(s)\n",
           (long long)r.configs.removed, r.configs.removed == 1 ? "y" : "ies", (long long)r.configs.bad,
           (long long)r.removed_version, (long long)r.removed_old,
           (long long)(r.configs.temp_files + r.kernels.temp_files));
    const int64_t failed = r.configs.failed + r.kernels.failed;
    if (failed) printf("could not remove %lld file(s) (see above)\n", (long long)failed);
    return failed ? 1 : 0;
}

int cg_cmd_cache(int argc, char **argv) {
    cache_opts o = {0};
    int prc = cg_cli_parse(&k_cache_cmd, argc, argv, &o);
    if (prc) return prc < 0 ? 0 : prc;
    const char *cmd = k_cache_cmd.name, *action = o.action;
    const int all = o.all;
    if (!action) return cli_usage(cmd, "missing the action: stats, verify, prune or clear");
    int is_stats = !strcmp(action, "stats"), is_verify = !strcmp(action, "verify"), is_prune = !strcmp(action, "prune"),
        is_clear = !strcmp(action, "clear");
    if (!is_stats && !is_verify && !is_prune && !is_clear)
        return cli_usage(cmd, "unknown action '%s' (expected stats, verify, prune or clear)", action);
    if (o.older_days > 0 && !is_prune) return cli_usage(cmd, "--older-than applies to prune only");
    if (all && !is_clear) return cli_usage(cmd, "--all applies to clear only");
    if (o.json && !is_stats && !is_verify) return cli_usage(cmd, "--json applies to stats and verify only");
    cg_context *ctx = cli_make_ctx(cmd, &o.c);
    if (!ctx) return 1;
    cache_msgs m;
    memset(&m, 0, sizeof m);
    m.show_bad = (is_verify || is_prune) && !o.json;
    cg_context_set_progress(ctx, cache_event, &m);
    int rc = is_clear    ? cache_clear(ctx, all, &m)
             : is_stats  ? cache_stats(ctx, o.json)
             : is_verify ? cache_verify(ctx, o.json)
                         : cache_prune(ctx, o.older_days);
    cg_context_free(ctx);
    return rc;
}
