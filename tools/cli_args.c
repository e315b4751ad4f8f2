/* cli_args.c -- the CLI's argument table and shape syntax (tools/cli_args.h). */
#include "cli_args.h"
#include "chunkgen.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cg_cli_vmsg(const char *cmd, const char *fmt, va_list ap) {
    fprintf(stderr, "chunkgen %s: ", cmd);
    vfprintf(stderr, fmt, ap);
}

int cg_cli_usage_err(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cg_cli_vmsg(cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run `chunkgen %s --help` for the usage)\n", cmd);
    return 2;
}

void cg_cli_help(const cg_cli_cmd *cmd, FILE *f) {
    fputs(cmd->usage, f);
    if (cmd->usage_more) cmd->usage_more(f);
    fputs("\noptions:\n", f);
    for (const cg_cli_opt *o = cmd->opts; o->name; o++) {
        char head[96];
        int n = snprintf(head, sizeof head, "  %s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
        if (o->short_name && n < (int)sizeof head) snprintf(head + n, sizeof head - (size_t)n, ", -%c", o->short_name);
        const char *h = o->help ? o->help : "";
        const int col = 26;
        if ((int)strlen(head) >= col) fprintf(f, "%s\n%*s", head, col, "");
        else fprintf(f, "%-*s", col, head);
        for (const char *p = h; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fprintf(f, "%*s", col, "");
        }
        fputc('\n', f);
    }
    fputs("  --help, -h              this text\n", f);
}

static const cg_cli_opt *find_opt(const cg_cli_cmd *cmd, const char *name, size_t len, char short_name) {
    for (const cg_cli_opt *o = cmd->opts; o->name; o++) {
        if (short_name ? o->short_name == short_name : (strlen(o->name) == len && !strncmp(o->name, name, len)))
            return o;
    }
    return NULL;
}

static int store(const cg_cli_cmd *cmd, const cg_cli_opt *o, const char *val, void *opts) {
    char *dst = (char *)opts + o->off;
    char *end;
    char err[512] = "";
    errno = 0;
    switch (o->kind) {
    case CG_CLI_FLAG: *(int *)dst = 1; return 0;
    case CG_CLI_STR: *(const char **)dst = val; return 0;
    case CG_CLI_INT:
    case CG_CLI_I64: {
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end || (double)v < o->lo || (double)v > o->hi)
            return cg_cli_usage_err(cmd->name, "%s: expected an integer in %.0f..%.0f, got '%s'", o->name, o->lo, o->hi,
                                    val);
        if (o->kind == CG_CLI_INT) *(int *)dst = (int)v;
        else *(int64_t *)dst = v;
        return 0;
    }
    case CG_CLI_F64: {
        double v = strtod(val, &end);
        if (errno || end == val || *end || !(v >= o->lo && v <= o->hi))
            return cg_cli_usage_err(cmd->name, "%s: expected a number in [%g, %g], got '%s'", o->name, o->lo, o->hi,
                                    val);
        *(double *)dst = v;
        return 0;
    }
    case CG_CLI_CHOICE: {
        size_t n = strlen(val);
        int k = 0;
        for (const char *w = o->meta; *w; k++) {
            size_t m = strcspn(w, "|");
            if (m == n && !strncmp(w, val, n)) {
                *(int *)dst = (int)o->lo + k;
                return 0;
            }
            w += m + (w[m] == '|');
        }
        return cg_cli_usage_err(cmd->name, "%s: expected %s, got '%s'", o->name, o->meta, val);
    }
    case CG_CLI_FN:
        if (o->fn(opts, val, err, sizeof err) != 0) return cg_cli_usage_err(cmd->name, "%s: %s", o->name, err);
        return 0;
    }
    return cg_cli_usage_err(cmd->name, "%s: internal error (kind %d)", o->name, (int)o->kind);
}

int cg_cli_parse(const cg_cli_cmd *cmd, int argc, char **argv, void *opts) {
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char err[512] = "";
        if (!only_positional && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            cg_cli_help(cmd, stdout);
            return -1;
        }
        if (!only_positional && !strcmp(a, "--")) {
            only_positional = 1;
            continue;
        }
        if (only_positional || a[0] != '-' || a[1] == '\0') {
            if (!cmd->positional) return cg_cli_usage_err(cmd->name, "unexpected argument '%s'", a);
            if (cmd->positional(opts, a, err, sizeof err) != 0) return cg_cli_usage_err(cmd->name, "%s", err);
            continue;
        }
        const cg_cli_opt *o;
        const char *val = NULL;
        if (a[1] != '-') { /* -v */
            o = a[2] == '\0' ? find_opt(cmd, NULL, 0, a[1]) : NULL;
        } else {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            o = find_opt(cmd, a, len, 0);
            if (o && eq) val = eq + 1;
        }
        if (!o) return cg_cli_usage_err(cmd->name, "unknown option '%s'", a);
        if (!o->meta) {
            if (val) return cg_cli_usage_err(cmd->name, "option %s takes no value", o->name);
        } else if (!val) {
            if (i + 1 >= argc) return cg_cli_usage_err(cmd->name, "option %s needs a value (%s)", o->name, o->meta);
            val = argv[++i];
        }
        int rc = store(cmd, o, val, opts);
        if (rc) return rc;
    }
    return 0;
}

int cg_cli_config_for(const char *cfg, const char *op, char *buf, size_t cap, const char **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (!cfg) return 0;
    cg_op o;
    if (cg_op_parse(op, &o) != CG_OK) return snprintf(err, errlen, "unknown op \"%s\"", op), -1;
    const cg_status st = cg_config_scope(cfg, o, buf, cap, err, errlen); /* the one scoped-config parser */
    if (st != CG_OK && st != CG_ENOTFOUND) return -1;
    *out = st == CG_OK ? buf : NULL;
    return 0;
}
