/* op_flops.c -- cg_op_flops: the op table's model of an op's work (its flops column,
 * runtime/ops.c) for a shape, with the model's parameter read from a config text. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of item key in config (items KEY=N separated by commas or spaces): 1 found
 * (*v set, or -1 when not a positive integer), 0 absent. */
static int config_item(const char *config, const char *key, int64_t *v) {
    const size_t n = strlen(key);
    for (const char *p = config; p && *p; p += strcspn(p, ", ")) {
        p += strspn(p, ", ");
        if (strncmp(p, key, n) || p[n] != '=') continue;
        char *end;
        long long x = strtoll(p + n + 1, &end, 10);
        *v = end == p + n + 1 || (*end && *end != ',' && *end != ' ') || x <= 0 ? -1 : (int64_t)x;
        return 1;
    }
    return 0;
}

cg_status cg_op_flops(cg_context *ctx, const cg_shape *shape, const char *config, double *flops, char *used,
                      size_t cap) {
    char text[CG_SHAPE_TEXT_MAX];
    if (!shape) return cg__err(ctx, CG_EINVAL, "cg_op_flops: shape: null pointer (expected a cg_shape)");
    if (!flops) return cg__err(ctx, CG_EINVAL, "cg_op_flops: flops: null pointer (expected a double to fill)");
    cg_status st = cg_shape_format(ctx, shape, text, sizeof text);
    if (st != CG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ctx && cg_errmsg(ctx)[0] ? cg_errmsg(ctx) : "not a valid shape");
        return cg__err(ctx, CG_EINVAL, "cg_op_flops: shape: %s", why);
    }
    const cg_op_desc *d = cg__op_desc(shape->op);
    int64_t p = d->flops_default;
    if (d->flops_param && config_item(config, d->flops_param, &p) && p < 0)
        return cg__err(ctx, CG_EINVAL, "cg_op_flops: config: '%s' but expected %s=N with N a positive integer", config,
                       d->flops_param);
    if (used) {
        int need = d->flops_param ? snprintf(used, cap, "%s=%lld", d->flops_param, (long long)p)
                                  : snprintf(used, cap, "%s", "");
        if ((size_t)need >= cap)
            return cg__err(ctx, CG_EINVAL, "cg_op_flops: used: %zu bytes but %d are needed", cap, need + 1);
    }
    int64_t dim[CG_SYM_COUNT];
    memcpy(dim, shape->dim, sizeof dim);
    *flops = d->flops(dim, p);
    return CG_OK;
}
