/* test_cli_store.c -- `chunkgen show` and `chunkgen cache` on the CLI argument table
 * (tools/cli_args.h): --help generated from the table, --json output that parses and
 * carries what the store holds, -v listing the candidates, and usage errors (exit 2)
 * naming the option. The store holds one entry written in-process (tune_testlib.c). */
#include "cg_test.h"
#include "cli_testlib.h"
#include "tune_testlib.h"

#include <jansson.h>

#include <sys/stat.h>

/* dir/stdout.txt of the last run_cli as JSON (NULL with a failed check). */
static json_t *cli_json(const char *dir, const char *what) {
    char p[4096];
    join(p, sizeof p, dir, "stdout.txt");
    json_error_t je;
    json_t *doc = json_load_file(p, 0, &je);
    CG_CHECK(doc != NULL, "%s: stdout is not JSON: %s", what, je.text);
    return doc;
}

/* Run args; check the exit code and that stdout (err 0) or stderr (err 1) has each needle. */
static void expect_cli(const char *dir, const char *const *args, int want, int err, const char *const *needles,
                       const char *what) {
    int rc = run_cli(dir, args);
    char p[4096];
    join(p, sizeof p, dir, err ? "stderr.txt" : "stdout.txt");
    char *text = slurp(p);
    CG_CHECK(rc == want, "%s: exit %d, expected %d: %s", what, rc, want, text);
    for (int i = 0; needles[i]; i++)
        CG_CHECK(strstr(text, needles[i]) != NULL, "%s: %s lacks '%s': %s", what, err ? "stderr" : "stdout",
                 needles[i], text);
    free(text);
}

/* One tuned entry (ssd, dk 64, dv 16) into the store of cache directory cache. */
static void put_one_entry(const char *cache) {
    cg_context *ctx = tune_test_ctx(cache);
    cg_tune_entry e;
    tune_test_entry(ctx, &e, 64, 16, 0, "chunk=16,block_dv=16,threads=1", 1, 0.5, 0.01);
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
    cg__tune_entry_free(&e);
    cg_context_free(ctx);
}

CG_TEST(cli_store_show_and_cache) {
    char dir[512], cache[1024];
    if (mk_tmpdir_with(dir, sizeof dir, cache, sizeof cache, "cache")) return;
    put_one_entry(cache);

    /* --help: the usage text and every option of the table */
    const char *h1[] = {"show", "--help", NULL};
    const char *n1[] = {"usage: chunkgen show", "--backend", "--partial", "--cache-dir DIR", "--json", "--verbose, -v",
                        NULL};
    expect_cli(dir, h1, 0, 0, n1, "show --help");
    const char *h2[] = {"cache", "--help", NULL};
    const char *n2[] = {"usage: chunkgen cache", "--all", "--older-than DAYS", "--cache-dir DIR", "--json", NULL};
    expect_cli(dir, h2, 0, 0, n2, "cache --help");

    /* show --json: the stored entry; -v: its candidates */
    const char *s1[] = {"show", "--cache-dir", cache, "--json", NULL};
    const char *none[] = {NULL};
    expect_cli(dir, s1, 0, 0, none, "show --json");
    json_t *doc = cli_json(dir, "show --json");
    json_t *ents = json_object_get(doc, "entries");
    CG_CHECK(json_is_true(json_object_get(doc, "exists")) && json_array_size(ents) == 1,
             "show --json: expected 1 entry in an existing store");
    const char *best = json_string_value(json_object_get(json_object_get(json_array_get(ents, 0), "best"), "config"));
    CG_CHECK(best && !strcmp(best, "chunk=16,block_dv=16,threads=1"), "show --json: best %s", best ? best : "(none)");
    json_decref(doc);
    const char *s2[] = {"show", "--cache-dir", cache, "-v", NULL};
    const char *n3[] = {"* chunk=16,block_dv=16,threads=1", "ok", NULL};
    expect_cli(dir, s2, 0, 0, n3, "show -v");
    const char *s3[] = {"show", "--cache-dir", cache, "--op", "sscan", "--json", NULL};
    expect_cli(dir, s3, 0, 0, none, "show --op sscan --json");
    doc = cli_json(dir, "show --op sscan --json");
    CG_CHECK(json_array_size(json_object_get(doc, "entries")) == 0, "the --op filter kept an ssd entry");
    json_decref(doc);

    /* cache stats / verify --json */
    const char *c1[] = {"cache", "stats", "--cache-dir", cache, "--json", NULL};
    expect_cli(dir, c1, 0, 0, none, "cache stats --json");
    doc = cli_json(dir, "cache stats --json");
    json_t *cf = json_object_get(doc, "configs");
    CG_CHECK(json_integer_value(json_object_get(cf, "entries")) == 1 && json_integer_value(json_object_get(cf, "bad")) == 0,
             "cache stats --json: expected 1 good entry");
    json_decref(doc);
    const char *c2[] = {"cache", "verify", "--json", "--cache-dir", cache, NULL};
    expect_cli(dir, c2, 0, 0, none, "cache verify --json");
    doc = cli_json(dir, "cache verify --json");
    CG_CHECK(json_integer_value(json_object_get(doc, "configs_checked")) == 1 &&
                 json_integer_value(json_object_get(doc, "configs_bad")) == 0,
             "cache verify --json: expected 1 entry checked, none bad");
    json_decref(doc);

    /* usage errors name the option; exit 2 */
    const char *u1[] = {"show", "--bogus", NULL};
    const char *m1[] = {"chunkgen show: ", "--bogus", "chunkgen show --help", NULL};
    expect_cli(dir, u1, 2, 1, m1, "show --bogus");
    const char *u2[] = {"cache", "prune", "--json", "--cache-dir", cache, NULL};
    const char *m2[] = {"chunkgen cache: ", "--json", NULL};
    expect_cli(dir, u2, 2, 1, m2, "cache prune --json");
    const char *u3[] = {"cache", "prune", "--older-than", "-1", "--cache-dir", cache, NULL};
    const char *m3[] = {"--older-than", NULL};
    expect_cli(dir, u3, 2, 1, m3, "cache --older-than -1");
    const char *u4[] = {"cache", "stats", "verify", NULL};
    const char *m4[] = {"one action", NULL};
    expect_cli(dir, u4, 2, 1, m4, "two actions");
    rm_tree(dir);
}

/* `chunkgen import DIR` of a directory that holds no store is refused naming it (issue
 * #39 item 11: it reported "0 added" and exit 0); a cache directory whose store is empty,
 * a store's own configs/ and a store with an entry are taken. */
CG_TEST(cli_store_import_not_a_store) {
    char dir[512], cache[1024], empty[1024], into[1024], sub[1200];
    if (mk_tmpdir_with(dir, sizeof dir, cache, sizeof cache, "cache")) return;
    join(empty, sizeof empty, dir, "nothing");
    join(into, sizeof into, dir, "into");
    mkdir(empty, 0755);
    mkdir(into, 0755);
    const char *a1[] = {"import", empty, "--cache-dir", into, NULL};
    const char *n1[] = {empty, "not a store directory", NULL};
    expect_cli(dir, a1, 1, 1, n1, "import of a directory without a store");
    join(sub, sizeof sub, empty, "notes.txt"); /* other files: still no store */
    FILE *f = fopen(sub, "w");
    if (f) fclose(f);
    expect_cli(dir, a1, 1, 1, n1, "import of a directory with other files");
    /* a cache directory with an empty store, and that store's configs/ itself */
    join(sub, sizeof sub, empty, "configs");
    mkdir(sub, 0755);
    const char *n2[] = {"0 added", NULL};
    expect_cli(dir, a1, 0, 1, n2, "import of a cache directory whose store is empty");
    const char *a2[] = {"import", sub, "--cache-dir", into, NULL};
    expect_cli(dir, a2, 0, 1, n2, "import of an empty configs/");
    /* a store with one entry */
    put_one_entry(cache);
    const char *a3[] = {"import", cache, "--cache-dir", into, NULL};
    const char *n3[] = {"1 added", NULL};
    expect_cli(dir, a3, 0, 1, n3, "import of a store");
    rm_tree(dir);
}
