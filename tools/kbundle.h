/* kbundle.h -- compiled kernels in an export document (`chunkgen export --with-kernels`,
 * `chunkgen import`): the bundle that carries tuned configs and their CUBINs to other
 * machines.
 *
 * The document's "kernels" member is a list of {"file": NAME.cgk, "data": base64 of the
 * whole kernel cache entry (runtime/cuda/kcache.h)}. An entry is self-checking (format,
 * sizes, checksum) and keyed by everything its CUBIN depends on: the chunkgen version
 * and entry format (CG_CUBIN_KEY_HEAD), the target arch, the compiler build and
 * options, the source. Import writes only entries whose check passes and whose key
 * starts with this chunkgen's head; it stores each under the name its key hashes to.
 * A kernel for another arch or compiler build is never looked up (its key differs);
 * one the driver refuses to load is rebuilt (runtime/cuda/kexec_cuda.c). */
#ifndef CG_KBUNDLE_H
#define CG_KBUNDLE_H

#include "chunkgen.h"

#include <jansson.h>
#include <stdio.h>

/* Add every valid entry of this chunkgen in kdir (<cache dir>/kernels) to doc's
 * "kernels" (archs: a "80,90" list or NULL for all). Returns the number added, -1 on
 * out of memory. */
int cg_bundle_add_kernels(json_t *doc, const char *kdir, const char *archs);

/* Every entry of the kernel cache dir (NULL: ctx's) into *es (malloc'd: free it), *n of
 * them; CG_OK, else the status (cg_errmsg(ctx); CG_ENOMEM without a message). */
cg_status cg_bundle_list(cg_context *ctx, const char *dir, cg_kcache_entry **es, int *n);

typedef struct cg_bundle_stats {
    int added, kept, rejected;
} cg_bundle_stats;

/* Write the "kernels" of doc (if any) into kdir; each refusal is one line on `msgs`
 * naming the entry and why. dry: check only. */
void cg_bundle_import_kernels(const json_t *doc, const char *what, const char *kdir, int dry, FILE *msgs,
                              cg_bundle_stats *s);

#endif
