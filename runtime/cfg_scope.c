/* cfg_scope.c -- the scoped config syntax, one parser for CHUNKGEN_CONFIG and the CLI's
 * --config: "k=v,k=v" applies to every op; "OP:k=v;FAMILY:k=v" scopes a part to an op or
 * a family (the op table's names and families, runtime/ops.c). */
#include "ops.h"

#include <string.h>

/* The scopes, for the message: "ssd, sscan, ssd_fwd, ssd_bwd, sscan_fwd or sscan_bwd"
 * (every family once, then every op, as the op table lists them). */
static void scope_names(char *buf, size_t cap) {
    const char *name[2 * CG_OP_COUNT];
    int n = 0;
    for (int k = 0; k < CG_OP_COUNT; k++) {
        const char *f = cg__op_desc((cg_op)k)->family;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= !strcmp(name[j], f);
        if (!seen) name[n++] = f;
    }
    for (int k = 0; k < CG_OP_COUNT; k++) name[n++] = cg__op_desc((cg_op)k)->name;
    size_t m = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && m < cap; i++)
        m += (size_t)snprintf(buf + m, cap - m, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", name[i]);
}

int cg__cfg_scope(const char *text, cg_op op, char *out, size_t cap, char *err, size_t errcap) {
    const cg_op_desc *d = cg__op_desc(op);
    int found = 0;
    out[0] = '\0';
    for (const char *s = text ? text : ""; *s;) {
        const char *end = strchr(s, ';');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len), *eq = memchr(s, '=', len);
        const char *body = s;
        int applies = 1;
        if (colon && (!eq || colon < eq)) {
            char scope[32];
            const size_t sl = (size_t)(colon - s);
            snprintf(scope, sizeof scope, "%.*s", (int)(sl < sizeof scope ? sl : sizeof scope - 1), s);
            const cg_op_desc *named = cg__op_find(scope);
            int family = 0;
            for (int k = 0; k < CG_OP_COUNT; k++) family |= !strcmp(scope, cg__op_desc((cg_op)k)->family);
            if (sl >= sizeof scope || (!named && !family)) {
                char scopes[512];
                scope_names(scopes, sizeof scopes);
                snprintf(err, errcap, "unknown scope \"%.*s\" (expected %s before ':')", (int)sl, s, scopes);
                return -1;
            }
            applies = named ? named == d : !strcmp(scope, d->family);
            body = colon + 1;
        }
        while (body < s + len && *body == ' ') body++;
        const size_t bl = (size_t)(s + len - body);
        if (applies && !found && bl) {
            if (bl >= cap) {
                snprintf(err, errcap, "part too long in \"%s\"", text);
                return -1;
            }
            memcpy(out, body, bl);
            out[bl] = '\0';
            found = 1;
        }
        s += len + (end ? 1 : 0);
    }
    return found;
}

cg_status cg_config_scope(const char *text, cg_op op, char *out, size_t cap, char *err, size_t errcap) {
    char why[512];
    int r = -1;
    if ((unsigned)op >= (unsigned)CG_OP_COUNT)
        snprintf(why, sizeof why, "op: %d is not an op (expected 0 .. %d)", (int)op, CG_OP_COUNT - 1);
    else if (!out || cap == 0) snprintf(why, sizeof why, "out: NULL or cap 0 (expected a buffer)");
    else r = cg__cfg_scope(text, op, out, cap, why, sizeof why);
    if (r < 0 && err && errcap) snprintf(err, errcap, "%s", why);
    return r < 0 ? CG_EINVAL : r ? CG_OK : CG_ENOTFOUND;
}
