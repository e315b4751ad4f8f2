/* tune_shapes.c -- the shapes of `chunkgen tune`: one shape syntax with every command
 * (cg_shape_parse), an op or a family in front ("ssd_fwd:", "ssd:" for the ops of --dir),
 * --dtype and --varlen applied to each; the positional numbers of before are still read
 * (deprecated: docs/tuning.md). The op table comes from the library (cg_op_describe). */
#include "tune_shapes.h"
#include "cli_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The deprecated positional form: the extents' order of each family, as it was. */
static const struct {
    const char *family;
    const char *const names[6];
    int min, max;
} k_positional[] = {{"ssd", {"B", "T", "G", "H", "dk", "dv"}, 6, 6}, {"sscan", {"B", "L", "D", "N", "G", NULL}, 4, 5}};

static int is_family(const char *name) {
    for (int i = 0; i < cg_op_count(); i++) {
        cg_op_info in = {.size = sizeof in};
        if (cg_op_describe(NULL, (cg_op)i, &in) == CG_OK && !strcmp(in.family, name)) return 1;
    }
    return 0;
}

static int push(const char *cmd, tune_shapes *out, const cg_shape *s) {
    if (out->n == out->cap) {
        int nc = out->cap ? 2 * out->cap : 16;
        cg_shape *nv = realloc(out->v, (size_t)nc * sizeof *nv);
        if (!nv) return cli_fail(cmd, "out of memory");
        out->v = nv, out->cap = nc;
    }
    out->v[out->n++] = *s;
    return 0;
}

/* "B=1,T=64,..." from positional numbers of family fam; 0, or -1 (why in err). */
static int positional(const char *fam, const char *nums, char *body, size_t cap, char *err, size_t errcap) {
    for (size_t f = 0; f < sizeof k_positional / sizeof k_positional[0]; f++) {
        if (strcmp(k_positional[f].family, fam)) continue;
        long long v[6];
        int n = 0, bad = 0;
        for (const char *p = nums;;) {
            char *end;
            errno = 0;
            const long long x = strtoll(p, &end, 10);
            if (end == p || errno || x < 1 || n == 6 || (*end && *end != ',')) {
                bad = 1;
                break;
            }
            v[n++] = x;
            if (!*end) break;
            p = end + 1;
        }
        if (bad || n < k_positional[f].min || n > k_positional[f].max) {
            char order[64] = "";
            for (int i = 0; i < k_positional[f].max; i++) /* "B,L,D,N[,G]": the optional ones in brackets */
                snprintf(order + strlen(order), sizeof order - strlen(order),
                         i >= k_positional[f].min ? "[,%s]" : "%s%s",
                         i >= k_positional[f].min ? k_positional[f].names[i]
                         : i                      ? ","
                                                  : "",
                         i >= k_positional[f].min ? "" : k_positional[f].names[i]);
            return snprintf(err, errcap, "shape \"%s\": expected %s (positive integers) for %s", nums, order, fam), -1;
        }
        body[0] = '\0';
        for (int i = 0; i < n; i++) {
            if (!strcmp(k_positional[f].names[i], "G") && !strcmp(fam, "sscan") && v[i] == 1) continue; /* ungrouped */
            snprintf(body + strlen(body), cap - strlen(body), "%s%s=%lld", body[0] ? "," : "", k_positional[f].names[i],
                     v[i]);
        }
        return 0;
    }
    return snprintf(err, errcap, "shape \"%s\": no positional form for %s (give SYM=N items)", nums, fam), -1;
}

/* shape as op `name`: NAME:BODY[,dtype=SIG] parsed, --varlen applied, appended. */
static int add_op(const char *cmd, cg_context *ctx, const char *name, const char *body, const tune_shape_opts *o,
                  tune_shapes *out) {
    char text[1400];
    snprintf(text, sizeof text, "%s:%s%s%s", name, body, o->dtype ? ",dtype=" : "", o->dtype ? o->dtype : "");
    cg_shape s = {.size = sizeof s};
    if (cg_shape_parse(ctx, text, &s) != CG_OK) return cli_usage(cmd, "--shape %s: %s", text, cg_errmsg(ctx));
    if (o->varlen) {
        cg_op_info in = {.size = sizeof in};
        cg_op_describe(ctx, s.op, &in);
        const int64_t T = s.dim[in.seq];
        if (s.dim[CG_SYM_B] != 1)
            return cli_usage(cmd, "--varlen: a shape with B = %lld but expected 1 (the sequences are packed along %s)",
                             (long long)s.dim[CG_SYM_B], cg_sym_name(in.seq));
        s.longest = o->varlen < T ? o->varlen : T;
        s.nseq = (T + s.longest - 1) / s.longest;
    }
    return push(cmd, out, &s);
}

int tune_shapes_add(const char *cmd, cg_context *ctx, const char *text, const tune_shape_opts *o, tune_shapes *out) {
    char prefix[64] = "", body[1200];
    const char *colon = strchr(text, ':'), *eq = strchr(text, '=');
    if (colon && (!eq || colon < eq) && (size_t)(colon - text) < sizeof prefix) {
        memcpy(prefix, text, (size_t)(colon - text));
        prefix[colon - text] = '\0';
        text = colon + 1;
    }
    const int numbers = text[0] && strspn(text, "0123456789,") == strlen(text);
    const char *fam = prefix[0] ? prefix : o->family;
    if (numbers && !prefix[0] && !fam) { /* the positional form guessed its family by the count */
        int commas = 0;
        for (const char *c = text; *c; c++) commas += *c == ',';
        fam = commas == 5 ? "ssd" : "sscan";
    }
    cg_op op;
    if (prefix[0] && cg_op_parse(prefix, &op) == CG_OK) { /* one op */
        cg_op_info in = {.size = sizeof in};
        cg_op_describe(ctx, op, &in);
        char err[300];
        if (numbers && positional(in.family, text, body, sizeof body, err, sizeof err))
            return cli_usage(cmd, "%s", err);
        return add_op(cmd, ctx, prefix, numbers ? body : text, o, out);
    }
    if (!fam) return cli_usage(cmd, "--shape %s: give the op in front (ssd_fwd:B=...,  ssd:...) or --op", text);
    if (!is_family(fam)) return cli_usage(cmd, "--shape %s:%s: '%s' is not an op or an op family", fam, text, fam);
    char err[300];
    if (numbers && positional(fam, text, body, sizeof body, err, sizeof err)) return cli_usage(cmd, "%s", err);
    int rc = 0, any = 0;
    for (int i = 0; !rc && i < cg_op_count(); i++) { /* the family's ops of --dir */
        cg_op_info in = {.size = sizeof in};
        if (cg_op_describe(ctx, (cg_op)i, &in) != CG_OK || strcmp(in.family, fam) || !(o->dir_mask >> in.bwd & 1))
            continue;
        rc = add_op(cmd, ctx, in.name, numbers ? body : text, o, out);
        any = 1;
    }
    return rc ? rc : any ? 0 : cli_usage(cmd, "--shape %s: --dir selects no op of %s", text, fam);
}

int tune_shapes_read(const char *cmd, cg_context *ctx, const char *path, const tune_shape_opts *o, tune_shapes *out) {
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *tok[3];
        int nt = 0;
        for (char *t = strtok(line, " \t\r\n"); t && nt < 3; t = strtok(NULL, " \t\r\n")) tok[nt++] = t;
        if (!nt) continue;
        char buf[1100];
        const char *spec = tok[0];
        if (nt > 1 && !strchr(tok[0], ':') && is_family(tok[0])) { /* "FAMILY SHAPE [NAME]" */
            snprintf(buf, sizeof buf, "%s:%s", tok[0], tok[1]);
            spec = buf;
        }
        if ((rc = tune_shapes_add(cmd, ctx, spec, o, out)) != 0) fprintf(stderr, "  (in %s, line %d)\n", path, lineno);
    }
    if (f != stdin) fclose(f);
    return rc;
}

int tune_shapes_builtin(const char *cmd, cg_context *ctx, cg_backend backend, const tune_shape_opts *o,
                        tune_shapes *out) {
    cg_shape set[64];
    int n = 0;
    if (cg_tune_builtin_shapes(ctx, backend, set, 64, &n) != CG_OK) return cli_fail(cmd, "%s", cg_errmsg(ctx));
    int rc = 0;
    for (int i = 0; !rc && i < n && i < 64; i++) {
        cg_op_info in = {.size = sizeof in};
        char text[CG_SHAPE_TEXT_MAX];
        if (cg_op_describe(ctx, set[i].op, &in) != CG_OK || cg_shape_format(ctx, &set[i], text, sizeof text) != CG_OK)
            return cli_fail(cmd, "%s", cg_errmsg(ctx));
        if (o->family && strcmp(o->family, in.family)) continue;
        char spec[CG_SHAPE_TEXT_MAX + 16];
        const char *body = strchr(text, ':');
        snprintf(spec, sizeof spec, "%s:%s", in.family, body ? body + 1 : text);
        rc = tune_shapes_add(cmd, ctx, spec, o, out);
    }
    return rc;
}
