/* cli_args.c -- the CLI's argument table and shape syntax (tools/cli_args.h). */
#include "cli_args.h"
#include "ops.h"

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
            return cg_cli_usage_err(cmd->name, "%s: expected a number in [%g, %g], got '%s'", o->name, o->lo, o->hi, val);
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
    const cg_op_desc *d = cg__op_find(op);
    if (!d) return snprintf(err, errlen, "unknown op \"%s\"", op), -1;
    const int r = cg__cfg_scope(cfg, d->op, buf, cap, err, errlen); /* the one scoped-config parser */
    if (r < 0) return -1;
    *out = r ? buf : NULL;
    return 0;
}

/* ----------------------------------------------------------------------- shapes */

typedef struct shape_key {
    const char *name, *alt;
    unsigned bit;
    size_t off;
} shape_key;

static const shape_key k_keys[] = {
    {"B", NULL, CG_SHAPE_B, offsetof(cg_cli_shape, B)},     {"T", "L", CG_SHAPE_T, offsetof(cg_cli_shape, T)},
    {"G", NULL, CG_SHAPE_G, offsetof(cg_cli_shape, G)},     {"H", NULL, CG_SHAPE_H, offsetof(cg_cli_shape, H)},
    {"dk", "DK", CG_SHAPE_DK, offsetof(cg_cli_shape, dk)},  {"dv", "DV", CG_SHAPE_DV, offsetof(cg_cli_shape, dv)},
    {"D", NULL, CG_SHAPE_D, offsetof(cg_cli_shape, D)},     {"N", NULL, CG_SHAPE_N, offsetof(cg_cli_shape, N)},
};
#define NKEYS (sizeof k_keys / sizeof k_keys[0])

static const shape_key *key_of(const char *s, size_t len) {
    for (size_t k = 0; k < NKEYS; k++)
        if ((strlen(k_keys[k].name) == len && !strncmp(k_keys[k].name, s, len)) ||
            (k_keys[k].alt && strlen(k_keys[k].alt) == len && !strncmp(k_keys[k].alt, s, len)))
            return &k_keys[k];
    return NULL;
}

static void keys_text(unsigned keys, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t k = 0; k < NKEYS && n < cap; k++)
        if (keys & k_keys[k].bit) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? " " : "", k_keys[k].name);
}

static int shape_value(const char *s, size_t len, int64_t *out) {
    char buf[32];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || v < 1 || v > ((long long)1 << 40)) return -1;
    *out = v;
    return 0;
}

int cg_cli_shape_parse(const char *text, const char *positional, unsigned keys, unsigned need, int name,
                       cg_cli_shape *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char allowed[64];
    keys_text(keys, allowed, sizeof allowed);
    const char *body = text, *colon = strchr(text, ':');
    int named_legacy = 0;
    if (colon) {
        if (name < 0) return snprintf(err, errlen, "'%s': no NAME: prefix here (expected KEY=N,... with keys %s)", text, allowed), -1;
        if (colon == text || (size_t)(colon - text) >= sizeof s->name)
            return snprintf(err, errlen, "'%s': the name before ':' must be 1 to %zu characters", text, sizeof s->name - 1), -1;
        memcpy(s->name, text, (size_t)(colon - text));
        body = colon + 1;
    } else if (name > 0) {
        /* the positional form NAME=v,v,... */
        const char *eq = strchr(text, '=');
        if (!positional || !eq || eq == text || (size_t)(eq - text) >= sizeof s->name || strspn(eq + 1, "0123456789,") != strlen(eq + 1))
            return snprintf(err, errlen, "'%s': expected NAME:KEY=N,... with keys %s%s%s", text, allowed,
                            positional ? ", or NAME=" : "", positional ? positional : ""), -1;
        memcpy(s->name, text, (size_t)(eq - text));
        body = eq + 1;
        named_legacy = 1;
    }
    int pos_form = named_legacy || (*body && !strchr(body, '='));
    if (pos_form && !positional)
        return snprintf(err, errlen, "'%s': expected KEY=N,... with keys %s", text, allowed), -1;
    const char *pk = positional;
    int idx = 0;
    for (const char *p = body;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        const shape_key *k;
        const char *v;
        size_t vlen;
        if (pos_form) {
            if (!pk || !*pk)
                return snprintf(err, errlen, "'%s': too many values (expected %s)", text, positional), -1;
            size_t kl = strcspn(pk, ",");
            k = key_of(pk, kl);
            pk += kl + (pk[kl] == ',');
            v = p, vlen = len;
        } else {
            const char *eq = memchr(p, '=', len);
            k = eq ? key_of(p, (size_t)(eq - p)) : NULL;
            if (!k || !(keys & k->bit))
                return snprintf(err, errlen, "'%s': unknown key '%.*s' (expected KEY=N with keys %s)", text,
                                (int)(eq ? (size_t)(eq - p) : len), p, allowed), -1;
            v = eq + 1, vlen = len - (size_t)(eq + 1 - p);
        }
        if (!k) return snprintf(err, errlen, "internal: bad positional order '%s'", positional), -1;
        if (s->given & k->bit) return snprintf(err, errlen, "'%s': %s given twice", text, k->name), -1;
        if (shape_value(v, vlen, (int64_t *)((char *)s + k->off)))
            return snprintf(err, errlen, "'%s': %s = '%.*s', expected an integer in [1, 2^40]", text, k->name, (int)vlen,
                            v), -1;
        s->given |= k->bit;
        idx++;
        if (!c) break;
        p = c + 1;
    }
    unsigned missing = need & ~s->given;
    if (missing) {
        char m[64];
        keys_text(missing, m, sizeof m);
        return snprintf(err, errlen, "'%s': missing %s (expected %s%s%s)", text, m, pos_form ? positional : "KEY=N,... with keys ",
                        pos_form ? "" : allowed, ""), -1;
    }
    if ((s->given & CG_SHAPE_G) && (s->given & CG_SHAPE_H) && s->H % s->G)
        return snprintf(err, errlen, "'%s': heads H = %lld is not a multiple of groups G = %lld", text, (long long)s->H,
                        (long long)s->G), -1;
    if ((s->given & CG_SHAPE_G) && (s->given & CG_SHAPE_D) && s->D % s->G)
        return snprintf(err, errlen, "'%s': groups G = %lld must divide D = %lld", text, (long long)s->G, (long long)s->D), -1;
    (void)idx;
    return 0;
}

void cg_cli_shape_format(const cg_cli_shape *s, int sscan, char *out, size_t cap) {
    static const char *const ssd[] = {"B", "T", "G", "H", "dk", "dv"}, *const ss[] = {"B", "L", "D", "N", "G"};
    const char *const *names = sscan ? ss : ssd;
    int n = sscan ? 5 : 6;
    size_t w = 0;
    out[0] = '\0';
    for (int i = 0; i < n && w < cap; i++) {
        const shape_key *k = key_of(names[i], strlen(names[i]));
        if (!(s->given & k->bit)) continue;
        w += (size_t)snprintf(out + w, cap - w, "%s%s=%lld", w ? "," : "", names[i], (long long)*(const int64_t *)((const char *)s + k->off));
    }
}
