/* source.c -- cg_context_create: the runtime's context with the autotuner installed as
 * its config source. The layers point one way (tools -> autotune -> runtime ->
 * backends): the runtime asks ctx->cfgsrc for configs and never names the autotuner. */
#include "autotune.h"

cg_status cg_context_create(cg_context **out) {
    cg_status s = cg__context_new(out);
    if (s == CG_OK) (*out)->cfgsrc = &cg__tune_config_source;
    return s;
}
