/* fuzz_import.c -- libFuzzer target: the JSON import of tuned configs (autotune/
 * exchange.c, the entry validation of autotune/store.c) on arbitrary bytes: parsed as
 * JSON, validated as a store entry (checksum required, as on read) and imported as a
 * document (dry run: nothing is written). Any crash, leak or undefined behaviour is a
 * finding; a rejected document must leave a message. scripts/fuzz.sh builds and runs
 * it. */
#include "../../autotune/autotune.h"

#include <jansson.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cg_context *ctx;
    if (!ctx) { /* no progress callback: the per-entry messages are dropped */
        char dir[] = "/tmp/cg_fuzz_import_XXXXXX";
        if (!mkdtemp(dir) || cg_context_create(&ctx) != CG_OK || cg_context_set_cache_dir(ctx, dir) != CG_OK) abort();
    }
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) return 0;
    cg_tune_entry e;
    char why[320];
    if (cg__tune_entry_from_json(doc, 1, &e, why, sizeof why) == CG_OK) cg__tune_entry_free(&e);
    cg_tune_import_stats s;
    ctx->errmsg[0] = '\0';
    cg_status st = cg__tune_import_json(ctx, doc, "fuzz", 0, 1, &s);
    if (st != CG_OK && !cg_errmsg(ctx)[0]) abort();
    if (s.added + s.replaced > 1 + (int)json_array_size(json_object_get(doc, "entries")) + (int)json_array_size(doc))
        abort();
    json_decref(doc);
    return 0;
}
