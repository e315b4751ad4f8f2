/* cli_op.c -- an op as the public header describes it (cli_op.h). */
#include "cli_op.h"

#include <stdio.h>
#include <string.h>

int cli_op_load(cg_op op, cli_op *o) {
    memset(o, 0, sizeof *o);
    o->op = op;
    o->in.size = sizeof o->in;
    if (cg_op_describe(NULL, op, &o->in) != CG_OK || o->in.args_size > CLI_ARGS_BYTES ||
        o->in.ntensors + o->in.has_varlen > CLI_OP_MAXT)
        return -1;
    for (int i = 0; i < o->in.ntensors + o->in.has_varlen; i++) {
        o->t[i].size = sizeof o->t[i];
        if (cg_op_tensor_info(NULL, op, i, &o->t[i]) != CG_OK) return -1;
    }
    return 0;
}

int cli_op_find(const char *family, int bwd, cli_op *o) {
    for (int op = 0; op < cg_op_count(); op++)
        if (cli_op_load((cg_op)op, o) == 0 && !strcmp(o->in.family, family) && o->in.bwd == bwd) return 0;
    return -1;
}

int cli_op_tensor(const cli_op *o, const char *name) {
    for (int i = 0; name && i < o->in.ntensors; i++)
        if (!strcmp(o->t[i].name, name)) return i;
    return -1;
}

const char *cli_op_dims_text(const cli_op *o, int i, cg_layout layout, int grouped, char *buf, size_t cap) {
    cg_sym syms[CG_MAX_DIMS];
    const int n = cg_op_tensor_dims(o->op, i, layout, grouped, syms);
    size_t m = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < n && m < cap; k++)
        m += (size_t)snprintf(buf + m, cap - m, "%s%s", k ? ", " : "", cg_sym_name(syms[k]));
    if (m < cap) snprintf(buf + m, cap - m, "]");
    return buf;
}
