/* cfg_scope.c -- the scoped config syntax, one parser for CHUNKGEN_CONFIG and the CLI's
 * --config: "k=v,k=v" applies to every op; "ssd_fwd:k=v;sscan:k=v" scopes a part to an op
 * (ssd_fwd, ssd_bwd, sscan_fwd, sscan_bwd) or a family (ssd, sscan). */
#include "ops.h"

#include <string.h>

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
                snprintf(err, errcap,
                         "unknown scope \"%.*s\" (expected ssd, sscan, ssd_fwd, ssd_bwd, sscan_fwd or sscan_bwd "
                         "before ':')",
                         (int)sl, s);
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
