/* kernel_shape.c -- --shape and --flags of gen and build-kernels into cg_shapes
 * (kernel_shape.h). Every fact about an op (its symbols, tensors, options) comes from
 * the library (cg_op_describe, cg_op_tensor_info); the shape itself from cg_shape_parse. */
#include "kernel_shape.h"

#include <string.h>

/* The historical --flags words and the shape item each stands for ("" none). */
static const struct {
    const char *word, *item, *note;
} k_flags[] = {
    {"h0", "h0", NULL},
    {"hT", "hT", NULL},
    {"dhT", "dhT", NULL},
    {"softplus", "delta_softplus", NULL},
    {"has_D", "D", NULL},
    {"has_z", "z", NULL},
    {"has_bias", "delta_bias", NULL},
    {"grouped", "", "sscan: B and C carry G"},
    {"bwd", "", "the backward, for the CPU spaces"},
    {"seq_major", "", "sscan: [B, D, L] memory; no longer taken: not part of a shape"},
    {"l2norm", "use_qk_l2norm", "gdr: use_qk_l2norm"},
};
enum { NFLAGS = sizeof k_flags / sizeof k_flags[0] };

int cg_cli_kshape_opt(void *opts, const char *v, char *err, size_t errlen) {
    cg_cli_kshape *k = opts;
    if (strlen(v) >= sizeof k->text) return snprintf(err, errlen, "'%.40s...' is too long", v), -1;
    snprintf(k->text, sizeof k->text, "%s", v);
    return 0;
}

int cg_cli_kflags_opt(void *opts, const char *v, char *err, size_t errlen) {
    cg_cli_kshape *k = opts;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int f = 0;
        while (f < NFLAGS && strcmp(k_flags[f].word, tok)) f++;
        if (f == NFLAGS) {
            size_t m = (size_t)snprintf(err, errlen, "unknown flag '%s' (expected ", tok);
            for (int i = 0; i < NFLAGS && m < errlen; i++)
                m += (size_t)snprintf(err + m, errlen - m, "%s%s", i ? ", " : "", k_flags[i].word);
            if (m < errlen) snprintf(err + m, errlen - m, ")");
            return -1;
        }
        if (!strcmp(tok, "seq_major"))
            return snprintf(err, errlen,
                            "flag 'seq_major' is not part of a shape (cg_shape, docs/shapes.md): the "
                            "CPU path sees a sequence-major selective scan from a call's strides"),
                   -1;
        k->grouped |= !strcmp(tok, "grouped");
        k->bwd |= !strcmp(tok, "bwd");
        size_t n = strlen(k->items);
        if (k_flags[f].item[0]) snprintf(k->items + n, sizeof k->items - n, "%s%s", n ? "," : "", k_flags[f].item);
    }
    return 0;
}

void cg_cli_kflags_help(FILE *f) {
    fputs("\nshape flags (--flags a,b,...; the shape items they stand for, docs/shapes.md):\n ", f);
    int col = 1;
    for (int i = 0; i < NFLAGS; i++) {
        char w[128];
        const char *what = k_flags[i].note ? k_flags[i].note : k_flags[i].item;
        int n = snprintf(w, sizeof w, " %s (%s)%s", k_flags[i].word, what, i + 1 < NFLAGS ? "," : "");
        if (col + n > 88) fputs("\n ", f), col = 1;
        fputs(w, f);
        col += n;
    }
    fputc('\n', f);
}

/* The items of text after its OP: (all of it without one). */
static const char *body_of(const char *text) {
    const char *c = strchr(text, ':');
    return c ? c + 1 : text;
}

int cg_cli_kshape_gives(const cg_cli_kshape *k, const char *sym) {
    size_t n = strlen(sym);
    for (const char *p = body_of(k->text); *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        size_t kl = eq ? (size_t)(eq - p) : len;
        int seq = !strcmp(sym, "T") || !strcmp(sym, "L");
        if (eq && ((kl == n && !memcmp(p, sym, n)) || (seq && kl == 1 && (*p == 'T' || *p == 'L')))) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int cg_cli_kshape_op(const cg_cli_kshape *k, const char *kernel, cg_op *op, char *err, size_t errlen) {
    const char *colon = strchr(k->text, ':');
    if (colon) {
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(colon - k->text), k->text);
        if (cg_op_parse(name, op) == CG_OK) return 0;
        return snprintf(err, errlen, "--shape: op '%s' is unknown", name), -1;
    }
    if (cg_op_parse(kernel, op) == CG_OK) return 0;
    for (int i = 0; i < cg_op_count(); i++) {
        cg_op_info info = {.size = sizeof info};
        if (cg_op_describe(NULL, (cg_op)i, &info) != CG_OK) continue;
        size_t fl = strlen(info.family);
        if (!strncmp(kernel, info.family, fl) && kernel[fl] == '_' && info.bwd == !!k->bwd) {
            *op = (cg_op)i;
            return 0;
        }
    }
    return snprintf(err, errlen, "no op for kernel '%s' (give the op in --shape, e.g. ssd_fwd:B=1,...)", kernel), -1;
}

/* Whether word names a tensor or a scalar option of the op described by info. */
static int item_of(cg_op op, const cg_op_info *info, const char *word, size_t len) {
    for (int i = 0; i < info->ntensors; i++) {
        cg_tensor_info t = {.size = sizeof t};
        if (cg_op_tensor_info(NULL, op, i, &t) == CG_OK && strlen(t.name) == len && !memcmp(t.name, word, len))
            return 1;
    }
    for (int s = 0; s < info->nscalars; s++)
        if (strlen(info->scalars[s]) == len && !memcmp(info->scalars[s], word, len)) return 1;
    return 0;
}

/* Whether word is a symbol, tensor or option of any op (so that it may be left out for
 * this one). */
static int item_of_any(const char *word, size_t len, int is_sym) {
    for (int i = 0; i < cg_op_count(); i++) {
        cg_op_info info = {.size = sizeof info};
        if (cg_op_describe(NULL, (cg_op)i, &info) != CG_OK) continue;
        if (!is_sym && item_of((cg_op)i, &info, word, len)) return 1;
        for (int s = 0; is_sym && s < info.nsyms; s++) {
            const char *n = cg_sym_name(info.syms[s]);
            if (strlen(n) == len && !memcmp(n, word, len)) return 1;
        }
    }
    return 0;
}

/* Append one item (len bytes of p) to buf. */
static void add(char *buf, size_t cap, const char *p, size_t len) {
    size_t n = strlen(buf);
    snprintf(buf + n, cap > n ? cap - n : 0, "%s%.*s", n && buf[n - 1] != ':' ? "," : "", (int)len, p);
}

cg_status cg_cli_kshape_make(cg_context *ctx, const cg_cli_kshape *k, cg_op op, cg_shape *out) {
    char text[CG_SHAPE_TEXT_MAX * 2];
    out->size = sizeof *out;
    if (strchr(k->text, ':')) { /* the one syntax: as given, and the --flags items */
        snprintf(text, sizeof text, "%s%s%s", k->text, k->items[0] ? "," : "", k->items);
        return cg_shape_parse(ctx, text, out);
    }
    cg_op_info info = {.size = sizeof info};
    cg_status st = cg_op_describe(ctx, op, &info);
    if (st != CG_OK) return st;
    snprintf(text, sizeof text, "%s:", info.name);
    unsigned given = 0; /* bit s: info.syms[s] given */
    char all[CG_SHAPE_TEXT_MAX + 256];
    snprintf(all, sizeof all, "%s%s%s", k->text, k->text[0] && k->items[0] ? "," : "", k->items);
    for (const char *p = all; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        size_t kl = eq ? (size_t)(eq - p) : len;
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(kl < sizeof key ? kl : sizeof key - 1), p);
        if (eq && (!strcmp(key, "T") || !strcmp(key, "L"))) snprintf(key, sizeof key, "%s", cg_sym_name(info.seq));
        int s = -1;
        for (int i = 0; eq && i < info.nsyms; i++)
            if (!strcmp(cg_sym_name(info.syms[i]), key)) s = i;
        int drop =
            eq ? s < 0 && item_of_any(key, strlen(key), 1) : !item_of(op, &info, p, len) && item_of_any(p, len, 0);
        /* the selective scan's G means grouped B and C: kept with --flags grouped only */
        if (s >= 0 && info.groupable && info.syms[s] == CG_SYM_G && !k->grouped) drop = 1;
        if (s >= 0) given |= 1u << s;
        if (!drop) {
            if (eq) {
                char item[96];
                snprintf(item, sizeof item, "%s=%.*s", key, (int)(len - kl - 1), eq + 1);
                add(text, sizeof text, item, strlen(item));
            } else {
                add(text, sizeof text, p, len);
            }
        }
        p += len + (p[len] == ',');
    }
    /* the historical defaults of the symbols not given */
    for (int i = 0; i < info.nsyms; i++) {
        cg_sym y = info.syms[i];
        int def = y == CG_SYM_B || y == CG_SYM_H || (y == CG_SYM_G && !info.groupable) ? 1 : y == info.seq ? 256 : 0;
        if (given >> i & 1 || !def) continue;
        char item[32];
        snprintf(item, sizeof item, "%s=%d", cg_sym_name(y), def);
        add(text, sizeof text, item, strlen(item));
    }
    return cg_shape_parse(ctx, text, out);
}
