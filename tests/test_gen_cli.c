/* test_gen_cli.c -- `chunkgen gen`: config keys typed and documented (--space, from
 * generator/keys.lua and each description's space), the default for a shape, and the
 * shared argument table / shape syntax (tools/cli_args.c). */
#include "cg_test.h"
#include "gen.h"
#include "cli_args.h"

#include <errno.h>
#include <jansson.h>
#include <sys/wait.h>

#ifndef CG_CLI_PATH
#define CG_CLI_PATH "chunkgen"
#endif

/* Run `chunkgen ARGS` (a shell word list, no quoting needed); stdout into *out (malloc'd). */
static int gen_cli(const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", CG_CLI_PATH, args);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2) buf = realloc(buf, cap *= 2);
    }
    if (buf) buf[n] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

CG_TEST(gen_space_keys_documented) {
    CG_TEST_KERNELS(ctx, names, n);
    int cpu = 0;
    for (int i = 0; i < n; i++) {
        char *text = NULL;
        CG_CHECK_OK(ctx, cg__gen_describe(ctx, names[i], &text));
        if (!text) continue;
        cpu += strstr(text, "backend cpu") != NULL;
        int keys = 0;
        for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char key[64], type[16];
            if (line[0] != ' ' || line[2] == '(' || sscanf(line, " %63s %15s", key, type) != 2) continue;
            keys++;
            CG_CHECK(!strcmp(type, "integer") || !strcmp(type, "word"), "%s.%s: type '%s'", names[i], key, type);
            CG_CHECK(!strstr(line, "undocumented"), "%s.%s has no entry in generator/keys.lua", names[i], key);
        }
        CG_CHECK(keys > 0, "%s: no keys described", names[i]);
        free(text);
    }
    CG_CHECK(cpu >= 2, "the CPU spaces are not listed (%d)", cpu);
    cg_context_free(ctx);
}

/* --space --json: each key typed with its values; the default is one of them, and it is
 * the config the plan uses. */
static void check_space_json(const char *kernel, const char *shape, const char *plan_name_has) {
    char args[512], *out = NULL;
    snprintf(args, sizeof args, "gen %s --space --json --shape %s", kernel, shape);
    int rc = gen_cli(args, &out);
    CG_CHECK(rc == 0, "`chunkgen %s` exited %d", args, rc);
    json_error_t je;
    json_t *doc = out ? json_loads(out, 0, &je) : NULL;
    CG_CHECK(doc != NULL, "%s: not JSON: %s", kernel, out ? out : "");
    free(out);
    if (!doc) return;
    json_t *keys = json_object_get(doc, "keys"), *def = json_object_get(doc, "default");
    CG_CHECK(json_is_array(keys) && json_array_size(keys) >= 2, "%s: keys", kernel);
    CG_CHECK(json_is_object(def) && json_object_size(def) == json_array_size(keys), "%s: default has %zu keys, space %zu",
             kernel, json_object_size(def), json_array_size(keys));
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        const char *name = json_string_value(json_object_get(k, "name"));
        const char *type = json_string_value(json_object_get(k, "type"));
        json_t *vals = json_object_get(k, "values"), *dv = json_object_get(k, "default");
        CG_CHECK(name && type && json_is_array(vals) && json_array_size(vals) > 0, "%s: key %zu incomplete", kernel, i);
        if (!name || !type || !json_is_array(vals)) continue;
        const char *doc_text = json_string_value(json_object_get(k, "doc"));
        CG_CHECK(doc_text && strlen(doc_text) > 10, "%s.%s: no meaning", kernel, name);
        int found = 0;
        size_t j;
        json_t *v;
        json_array_foreach(vals, j, v) {
            CG_CHECK(!strcmp(type, "integer") ? json_is_integer(v) : json_is_string(v), "%s.%s: value %zu not %s", kernel,
                     name, j, type);
            found |= json_equal(v, dv);
        }
        CG_CHECK(found, "%s.%s: the default is not one of the values", kernel, name);
    }
    if (plan_name_has) {
        /* the plan without pins runs that default */
        snprintf(args, sizeof args, "gen %s --plan --json --shape %s", kernel, shape);
        rc = gen_cli(args, &out);
        json_t *plan = out ? json_loads(out, 0, &je) : NULL;
        free(out);
        CG_CHECK(rc == 0 && plan, "`chunkgen %s` exited %d", args, rc);
        if (plan) {
            CG_CHECK(json_equal(json_object_get(plan, "config"), def), "%s: the plan's config is not the default", kernel);
            const char *nm = json_string_value(json_object_get(plan, "name"));
            CG_CHECK(nm && strstr(nm, plan_name_has), "%s: plan name %s", kernel, nm ? nm : "(none)");
            json_decref(plan);
        }
    }
    json_decref(doc);
}

CG_TEST(gen_space_cli_json) {
    check_space_json("ssd_fwd", "dk=48,dv=40,T=100", "dk48_dv40");
    check_space_json("sscan_bwd", "B=2,L=100,D=64,N=16", NULL);
    check_space_json("ssd_cpu", "B=2,T=1000,H=4,dk=48,dv=40", NULL);
    check_space_json("sscan_cpu", "B=1,L=64,D=32,N=8", NULL);
    /* bad input: named, exit 2 */
    char *out = NULL;
    int rc = gen_cli("gen ssd_fwd --space --shape dk=48,dx=40", &out);
    free(out);
    CG_CHECK(rc == 2, "an unknown shape key exited %d", rc);
    rc = gen_cli("gen ssd_fwd --no-such-option", &out);
    free(out);
    CG_CHECK(rc == 2, "an unknown option exited %d", rc);
}

/* The scoped --config syntax shared by run and bench. */
CG_TEST(gen_cli_config_scopes) {
    char buf[128], err[256];
    const char *out;
    const char *cfg = "ssd_fwd:chunk=64;ssd:threads=1;sscan_bwd:segment=32";
    CG_CHECK(cg_cli_config_for(cfg, "ssd_fwd", buf, sizeof buf, &out, err, sizeof err) == 0 && out &&
                 !strcmp(out, "chunk=64"), "ssd_fwd: %s", out ? out : "(none)");
    CG_CHECK(cg_cli_config_for(cfg, "ssd_bwd", buf, sizeof buf, &out, err, sizeof err) == 0 && out &&
                 !strcmp(out, "threads=1"), "ssd_bwd: the family part: %s", out ? out : "(none)");
    CG_CHECK(cg_cli_config_for(cfg, "sscan_fwd", buf, sizeof buf, &out, err, sizeof err) == 0 && !out,
             "sscan_fwd: no part applies, got %s", out ? out : "");
    CG_CHECK(cg_cli_config_for("chunk=16", "sscan_bwd", buf, sizeof buf, &out, err, sizeof err) == 0 && out &&
                 !strcmp(out, "chunk=16"), "no scopes: the whole value");
    CG_CHECK(cg_cli_config_for("ssd_fwd:chunk=64;threads=2", "ssd_bwd", buf, sizeof buf, &out, err, sizeof err) == 0 &&
                 out && !strcmp(out, "threads=2"), "an unscoped part applies to every op");
    CG_CHECK(cg_cli_config_for("sdd:chunk=64", "ssd_fwd", buf, sizeof buf, &out, err, sizeof err) != 0 &&
                 strstr(err, "sdd"), "unknown scope: %s", err);
}

/* CG_CLI_CHOICE: one word of the placeholder, stored as lo + its index; anything else
 * (a prefix, a longer word) is a usage error (2). */
CG_TEST(gen_cli_choice_option) {
    typedef struct { int op, pick; } choice_opts;
    static const cg_cli_opt opts[] = {
        {"--op", 0, CG_CLI_CHOICE, offsetof(choice_opts, op), "ssd|sscan", "op", 1, 0, NULL},
        {"--pick", 0, CG_CLI_CHOICE, offsetof(choice_opts, pick), "a|bb|c", "pick", 0, 0, NULL},
        CG_CLI_OPT_END};
    static const cg_cli_cmd cmd = {"choice", "usage: choice\n", opts, NULL, NULL};
    choice_opts o = {0, -1};
    char *a1[] = {"choice", "--op", "sscan", "--pick=c", NULL};
    CG_CHECK(cg_cli_parse(&cmd, 4, a1, &o) == 0 && o.op == 2 && o.pick == 2, "sscan, c: op %d pick %d", o.op, o.pick);
    char *a2[] = {"choice", "--op=ssd", "--pick", "bb", NULL};
    CG_CHECK(cg_cli_parse(&cmd, 4, a2, &o) == 0 && o.op == 1 && o.pick == 1, "ssd, bb: op %d pick %d", o.op, o.pick);
    char *bad[][3] = {{"choice", "--op", "ss"}, {"choice", "--op", "sscans"}, {"choice", "--pick", "b"},
                      {"choice", "--pick", ""}};
    for (int i = 0; i < 4; i++)
        CG_CHECK(cg_cli_parse(&cmd, 3, bad[i], &o) == 2, "'%s %s' accepted", bad[i][1], bad[i][2]);
}

/* `gen --help` and `build-kernels --help` list every shape flag of the table
 * (cg__kflags) under their --flags section, with its note. */
CG_TEST(gen_cli_help_lists_flags) {
    static const char *const cmds[] = {"gen --help", "build-kernels --help"};
    for (int c = 0; c < 2; c++) {
        char *out = NULL;
        int rc = gen_cli(cmds[c], &out);
        CG_CHECK(rc == 0 && out, "`chunkgen %s` exited %d", cmds[c], rc);
        const char *sec = out ? strstr(out, "shape flags (--flags") : NULL, *end = sec ? strstr(sec, "\n\n") : NULL;
        CG_CHECK(sec && end, "%s: no shape-flags section: %s", cmds[c], out ? out : "");
        for (int i = 0; sec && end && i < cg__nkflags; i++) {
            const char *w = strstr(sec, cg__kflags[i].name);
            CG_CHECK(w && w < end, "%s: flag %s not listed", cmds[c], cg__kflags[i].name);
            if (cg__kflags[i].note) {
                const char *n = strstr(sec, cg__kflags[i].note);
                CG_CHECK(n && n < end, "%s: the note of %s missing", cmds[c], cg__kflags[i].name);
            }
        }
        free(out);
    }
}
