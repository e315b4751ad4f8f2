/* test_store_compat.c -- stores written before the key and the store became op-generic
 * (#34 item 4: the family from the op table, no op named in autotune/) stay valid. For
 * every entry of the fuzz corpus's import files (written by an earlier chunkgen, both op
 * families): it reads back (checksummed when it has one), its members (the shape's family
 * member included) write back as they were, its shape's family is its key's, and a key made now for
 * its shape (with the file's device identity) has the file's key text -- the text whose
 * hash names the store's file. */
#include "cg_test.h"

#include "../autotune/autotune.h"
#include "ops.h"

#include <jansson.h>
#include <string.h>

static void check_entry(cg_context *ctx, json_t *obj, const char *file, int i, unsigned *fams) {
    cg_tune_entry e;
    char why[256] = "";
    CG_CHECK(cg__tune_entry_from_json(obj, 0, &e, why, sizeof why) == CG_OK, "%s[%d]: %s", file, i, why);
    /* every member writes back as it was read (the key: compared by its text below, the
     * files predate its par member; the checksum: over all of it) */
    json_t *back = cg__tune_entry_to_json(&e);
    const char *name;
    json_t *val;
    json_object_foreach(obj, name, val) {
        if (!strcmp(name, "key") || !strcmp(name, "checksum")) continue;
        CG_CHECK(back && json_equal(val, json_object_get(back, name)),
                 "%s[%d]: member \"%s\" does not write back as it was read", file, i, name);
    }
    json_decref(back);
    CG_CHECK(cg__tune_family(&e.shape) && cg__tune_family(&e.shape) == cg__tune_key_family(&e.key),
             "%s[%d]: shape family %d, key op %s", file, i, cg__tune_shape_family(&e.shape), e.key.op);
    *fams |= 1u << cg__tune_shape_family(&e.shape);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, e.key.threads));
    cg_tune_key k;
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, e.key.backend, &e.shape, !strcmp(e.key.dir, "bwd"), &k));
    snprintf(k.device, sizeof k.device, "%s", e.key.device); /* the file's machine and version */
    snprintf(k.version, sizeof k.version, "%s", e.key.version);
    k.par = e.key.par; /* (these files predate par: test_cpu_key checks its values) */
    char want[1024], got[1024];
    cg__tune_key_text(&e.key, 1, want, sizeof want);
    cg__tune_key_text(&k, 1, got, sizeof got);
    CG_CHECK(!strcmp(want, got), "%s[%d]: key made now\n  %s\nbut the file's is\n  %s", file, i, got, want);
    cg__tune_entry_free(&e);
}

CG_TEST(tune_store_compat_corpus) {
    CG_TEST_CONTEXT(ctx);
    static const char *const files[] = {"one_entry.json", "array.json", "export.json"};
    unsigned fams = 0;
    int n = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/import/%s", CG_SOURCE_DIR, files[f]);
        json_error_t err;
        json_t *doc = json_load_file(path, 0, &err);
        CG_CHECK(doc != NULL, "%s: %s", path, err.text);
        json_t *list = json_is_object(doc) && json_object_get(doc, "entries") ? json_object_get(doc, "entries") : doc;
        if (json_is_array(list))
            for (size_t i = 0; i < json_array_size(list); i++, n++)
                check_entry(ctx, json_array_get(list, i), files[f], (int)i, &fams);
        else check_entry(ctx, list, files[f], 0, &fams), n++;
        json_decref(doc);
    }
    /* the families the corpus was written with (ssd, sscan; the gated delta rule came later) */
    const int nfam = 2;
    CG_CHECK(n >= nfam && fams == (1u << nfam) - 1, "%d entries, families seen 0x%x of %d", n, fams, nfam);
    cg_context_free(ctx);
}
