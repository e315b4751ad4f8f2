/* test_op_list.c -- the op list (runtime/op_list.h) and what is derived from it: each line
 * agrees with its op table row, each public entry point cg_<op> runs its own op, and the
 * names in messages come from the op table. */
#include "cg_test.h"

#include "backend.h"
#include "ops.h"

#include <ctype.h>

/* Every line of the list names its op table row: the name, the args struct, the sizes. */
CG_TEST(op_list_rows) {
    CG_CHECK(cg_op_count() == CG_OP_COUNT, "cg_op_count %d, CG_OP_COUNT %d", cg_op_count(), (int)CG_OP_COUNT);
    int lines = 0;
#define ROW_CHECK(nm, E, AT, PT)                                                                             \
    do {                                                                                                       \
        const cg_op_desc *d = cg__op_desc(E);                                                                  \
        CG_CHECK(d->op == (E) && (int)(E) == lines, "%s: line %d is cg_op %d", #nm, lines, (int)(E));       \
        CG_CHECK(!strcmp(d->name, #nm), "%s: the op table's row is named %s", #nm, d->name);               \
        CG_CHECK(!strcmp(d->args_type, #AT), "%s: args %s in the list, %s in the table", #nm, #AT,           \
                 d->args_type);                                                                                \
        CG_CHECK(d->args_size == sizeof(AT) && d->prob_size == sizeof(PT), "%s: struct sizes", #nm);         \
        lines++;                                                                                               \
    } while (0);
    CG_OP_LIST(ROW_CHECK)
#undef ROW_CHECK
    CG_CHECK(lines == CG_OP_COUNT, "%d lines", lines);
}

/* "CG_OP_" and the name in capitals. */
static void const_of(const char *name, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "CG_OP_");
    for (const char *p = name; *p && n + 1 < cap; p++) buf[n++] = (char)toupper((unsigned char)*p);
    buf[n] = 0;
}

/* Each call's name in the owner check's message, with the context held by a (pretend)
 * other thread: cg_<op> by its own entry point and by cg_run, and the ahead-of-time calls. */
CG_TEST(op_list_call_names) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    /* an unknown op names the first and the last cg_op constants */
    char first[48], last[48];
    const_of(cg_op_name((cg_op)0), first, sizeof first);
    const_of(cg_op_name((cg_op)(CG_OP_COUNT - 1)), last, sizeof last);
    CG_CHECK(cg_validate(ctx, (cg_op)CG_OP_COUNT, NULL, NULL) == CG_EINVAL && strstr(cg_errmsg(ctx), first) &&
                 strstr(cg_errmsg(ctx), last),
             "unknown op: %s (expected %s ... %s)", cg_errmsg(ctx), first, last);
    CG_CHECK(!strcmp(cg__op_const((cg_op)0), first) && !strcmp(cg__op_const((cg_op)(CG_OP_COUNT - 1)), last) &&
                 !strcmp(cg__op_const((cg_op)CG_OP_COUNT), ""),
             "cg__op_const");

    atomic_store(&ctx->owner, (uintptr_t)1);
    char want[96];
    size_t bytes;
#define NAME_CHECK(nm, E, AT, PT)                                                                            \
    do {                                                                                                       \
        CG_CHECK(cg_##nm(ctx, NULL, NULL) == CG_EINVAL, "cg_" #nm ": the owner check");                    \
        CG_CHECK(!strncmp(cg_errmsg(ctx), "cg_" #nm ": ", strlen(#nm) + 5), "cg_" #nm ": %s",            \
                 cg_errmsg(ctx));                                                                              \
    } while (0);
    CG_OP_LIST(NAME_CHECK)
#undef NAME_CHECK
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const char *nm = cg_op_name((cg_op)op);
        static const char *const fmt[4] = {"cg_%s: ", "cg_prepare(%s): ", "cg_workspace_size(%s): ",
                                           "cg_validate(%s): "};
        for (int m = 0; m < 4; m++) {
            const cg_status st = m == 0   ? cg_run(ctx, (cg_op)op, NULL, NULL)
                                 : m == 1 ? cg_prepare(ctx, (cg_op)op, NULL, NULL, NULL)
                                 : m == 2 ? cg_workspace_size(ctx, (cg_op)op, NULL, NULL, &bytes)
                                          : cg_validate(ctx, (cg_op)op, NULL, NULL);
            snprintf(want, sizeof want, fmt[m], nm);
            CG_CHECK(st == CG_EINVAL && !strncmp(cg_errmsg(ctx), want, strlen(want)), "%s: %s", want,
                     cg_errmsg(ctx));
        }
    }
    atomic_store(&ctx->owner, (uintptr_t)0);

    cg_context_free(ctx);
}

/* The config scope's refusal lists every op and family of the table, each once. */
CG_TEST(op_list_scope_message) {
    char out[64], err[1024];
    CG_CHECK(cg__cfg_scope("nosuchop:chunk=64", (cg_op)0, out, sizeof out, err, sizeof err) == -1, "refused");
    CG_CHECK(strstr(err, "nosuchop") != NULL, "names the scope: %s", err);
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        const char *words[2] = {d->name, d->family};
        for (int w = 0; w < 2; w++) {
            int n = 0;
            const size_t len = strlen(words[w]);
            for (const char *p = err; (p = strstr(p, words[w])) != NULL; p += len)
                n += (p == err || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
                     !(isalnum((unsigned char)p[len]) || p[len] == '_');
            CG_CHECK(n == 1, "%s named %d times: %s", words[w], n, err);
        }
        /* and the scope works for each */
        char text[96];
        snprintf(text, sizeof text, "%s:chunk=7", d->name);
        CG_CHECK(cg__cfg_scope(text, (cg_op)op, out, sizeof out, err, sizeof err) == 1 && !strcmp(out, "chunk=7"),
                 "%s", text);
    }
}

/* Every backend runs ops through its run entry (a host backend's per-op entry points are
 * found at link time); an op past the list is an internal error, never a call. */
CG_TEST(op_list_backend_entries) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_prob_any p;
    memset(&p, 0, sizeof p);
    const cg_backend_vt *vts[] = {&cg__backend_cpu, &cg__backend_ref, &cg__backend_emulate, &cg__backend_cuda};
    for (size_t b = 0; b < sizeof vts / sizeof vts[0]; b++) {
        CG_CHECK(vts[b]->run != NULL, "%s: run", vts[b]->name);
        CG_CHECK(cg__backend_entry(ctx, vts[b], (cg_op)CG_OP_COUNT, &p, NULL, NULL) == CG_EINTERNAL,
                 "%s: op past the list", vts[b]->name);
    }
    cg_context_free(ctx);
}
