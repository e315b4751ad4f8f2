/* kbundle.c -- compiled kernels in an export document (kbundle.h). */
#include "kbundle.h"
#include "chunkgen.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *d, size_t n) {
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        *o++ = k_b64[v >> 18 & 63];
        *o++ = k_b64[v >> 12 & 63];
        *o++ = i + 1 < n ? k_b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? k_b64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* NULL for text that is not canonical padded base64. */
static unsigned char *b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    if (len % 4) return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *p = s[i + j] ? strchr(k_b64, s[i + j]) : NULL;
            if (s[i + j] == '=' && i + 4 == len && j >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!p || pad) {
                free(out);
                return NULL;
            }
            v = v << 6 | (uint32_t)(p - k_b64);
        }
        out[k++] = (unsigned char)(v >> 16);
        if (pad < 2) out[k++] = (unsigned char)(v >> 8);
        if (pad < 1) out[k++] = (unsigned char)v;
    }
    *n = k;
    return out;
}

static int arch_listed(const char *archs, int arch) {
    if (!archs) return 1;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", archs);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (atoi(t) == arch) return 1;
    return 0;
}

cg_status cg_bundle_list(cg_context *ctx, const char *dir, cg_kcache_entry **es, int *n) {
    *es = NULL;
    *n = 0;
    for (int cap = 0;;) { /* the count, then the entries; again while other processes add some */
        int count = 0;
        cg_status st = cg_kcache_list(ctx, dir, *es, cap, &count);
        if (st != CG_OK || count <= cap) {
            *n = st == CG_OK ? count : 0;
            return st;
        }
        free(*es);
        cap = count + 16;
        if (!(*es = calloc((size_t)cap, sizeof **es))) return CG_ENOMEM;
    }
}

int cg_bundle_add_kernels(json_t *doc, const char *kdir, const char *archs) {
    json_t *arr = json_array();
    if (!arr || json_object_set_new(doc, "kernels", arr)) return -1;
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return -1;
    int n = 0, added = 0;
    cg_kcache_entry *es = NULL;
    if (cg_bundle_list(ctx, kdir, &es, &n) != CG_OK) added = -1;
    for (int i = 0; i < n && added >= 0; i++) {
        const cg_kcache_entry *e = &es[i];
        if (!e->usable || strcmp(e->kind, "cubin") || !arch_listed(archs, e->arch)) continue;
        void *d;
        size_t len;
        if (cg_kcache_read(ctx, kdir, e->file, &d, &len) != CG_OK) continue; /* removed or damaged since */
        char target[32], *text = b64_encode(d, len);
        snprintf(target, sizeof target, "sm_%d", e->arch);
        if (!text ||
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "file", e->file, "target", target, "data", text)))
            added = -1;
        else added++;
        free(text);
        cg_free(d);
    }
    free(es);
    cg_context_free(ctx);
    return added;
}

void cg_bundle_import_kernels(const json_t *doc, const char *what, const char *kdir, int dry, FILE *msgs,
                              cg_bundle_stats *s) {
    const json_t *arr = json_is_object(doc) ? json_object_get(doc, "kernels") : NULL;
    if (!arr) return;
    if (!json_is_array(arr)) {
        fprintf(msgs, "%s: \"kernels\" must be a list of {file, data}\n", what);
        s->rejected++;
        return;
    }
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) {
        fprintf(msgs, "%s: cannot create a context\n", what);
        s->rejected += (int)json_array_size(arr);
        return;
    }
    size_t i;
    const json_t *k;
    json_array_foreach(arr, i, k) {
        const char *file = json_string_value(json_object_get(k, "file"));
        const char *data = json_string_value(json_object_get(k, "data"));
        size_t n = 0;
        unsigned char *d = data ? b64_decode(data, &n) : NULL;
        const char *bad = !file || !data ? "needs \"file\" and \"data\" strings" : !d ? "\"data\" is not base64" : NULL;
        int added = 0;
        cg_status st = bad ? CG_EINVAL : cg_kcache_import(ctx, kdir, d, n, file, dry, &added);
        if (st == CG_OK) {
            if (added) s->added++;
            else s->kept++; /* the same key holds the same CUBIN: nothing to write */
        } else if (st == CG_EIO) {
            fprintf(msgs, "%s: kernel %s: cannot write %s\n", what, file, kdir);
            s->rejected++;
        } else {
            /* the library's reason, without its "cg_kcache_import: image: " prefix */
            const char *why = bad ? bad : cg_errmsg(ctx), *colon = bad ? NULL : strstr(why, "image: ");
            fprintf(msgs, "%s: kernel %zu (%s) rejected: %s\n", what, i + 1, file ? file : "?",
                    colon ? colon + 7 : why);
            s->rejected++;
        }
        free(d);
    }
    cg_context_free(ctx);
}
