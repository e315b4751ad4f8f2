/* kbundle.c -- compiled kernels in an export document (kbundle.h). */
#include "kbundle.h"
#include "cuda/cg_cuda.h"
#include "cuda/kcache.h"

#include <dirent.h>
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

/* The value of a "NAME value" line of a key (up to the first "source" line), into buf. */
static int key_line(const char *key, size_t klen, const char *name, char *buf, size_t cap) {
    size_t nl = strlen(name);
    for (const char *p = key, *end = key + klen; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        if ((size_t)(e - p) > nl && !memcmp(p, name, nl) && p[nl] == ' ') {
            snprintf(buf, cap, "%.*s", (int)(e - p - (ptrdiff_t)nl - 1), p + nl + 1);
            return 1;
        }
        if (!strncmp(p, "source ", 7)) break;
        p = e + 1;
    }
    return 0;
}

static int arch_listed(const char *archs, const char *target) {
    if (!archs) return 1;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", archs);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char want[40];
        snprintf(want, sizeof want, "sm_%s", t);
        if (!strcmp(want, target)) return 1;
    }
    return 0;
}

/* Why an entry image cannot be imported (or NULL), with its key and label. */
static const char *check_entry(const unsigned char *d, size_t n, const char **key, size_t *klen, const void **pl,
                               size_t *plen, const char **log, size_t *llen, char *why, size_t cap) {
    if (cg__kcache_parse(d, n, key, klen, pl, plen, log, llen, why, cap) != 0) return why;
    const char *head = CG_CUBIN_KEY_HEAD "\nkind cubin\n";
    if (*klen < strlen(head) || memcmp(*key, head, strlen(head)) != 0) {
        snprintf(why, cap, "built by another chunkgen version or kind (ours: \"%s\", its: \"%.*s\")", CG_CUBIN_KEY_HEAD,
                 (int)(memchr(*key, '\n', *klen) ? (const char *)memchr(*key, '\n', *klen) - *key : 0), *key);
        return why;
    }
    return NULL;
}

int cg_bundle_add_kernels(json_t *doc, const char *kdir, const char *archs) {
    json_t *arr = json_array();
    if (!arr || json_object_set_new(doc, "kernels", arr)) return -1;
    DIR *dh = opendir(kdir);
    if (!dh) return 0;
    int added = 0;
    struct dirent *e;
    char path[4400], why[256];
    while ((e = readdir(dh))) {
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.' || nl < 5 || strcmp(e->d_name + nl - 4, ".cgk")) continue;
        snprintf(path, sizeof path, "%s/%s", kdir, e->d_name);
        void *d;
        size_t n;
        if (cg__kcache_read_file(path, &d, &n, why, sizeof why) != 0) continue;
        const char *key, *log;
        const void *pl;
        size_t klen, plen, llen;
        char target[32] = "";
        if (!check_entry(d, n, &key, &klen, &pl, &plen, &log, &llen, why, sizeof why) &&
            key_line(key, klen, "target", target, sizeof target) && arch_listed(archs, target)) {
            char *text = b64_encode(d, n);
            if (!text || json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "file", e->d_name, "target", target,
                                                              "data", text))) {
                free(text);
                free(d);
                closedir(dh);
                return -1;
            }
            free(text);
            added++;
        }
        free(d);
    }
    closedir(dh);
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
    size_t i;
    const json_t *k;
    json_array_foreach(arr, i, k) {
        const char *file = json_string_value(json_object_get(k, "file"));
        const char *data = json_string_value(json_object_get(k, "data"));
        char why[512];
        size_t n = 0;
        unsigned char *d = data ? b64_decode(data, &n) : NULL;
        const char *key, *log;
        const void *pl;
        size_t klen, plen, llen;
        char label[200] = "";
        const char *bad = !file || !data ? "needs \"file\" and \"data\" strings"
                          : !d           ? "\"data\" is not base64"
                                         : check_entry(d, n, &key, &klen, &pl, &plen, &log, &llen, why, sizeof why);
        if (!bad && !key_line(key, klen, "name", label, sizeof label)) bad = "its key names no kernel";
        if (bad) {
            fprintf(msgs, "%s: kernel %zu (%s) rejected: %s\n", what, i + 1, file ? file : "?", bad);
            s->rejected++;
            free(d);
            continue;
        }
        /* the log says where the entry came from (the executor counts bundle hits by it) */
        size_t tl = strlen(CG_BUNDLE_LOG_TAG) + strlen(file) + 1;
        int tagged = llen >= strlen(CG_BUNDLE_LOG_TAG) && !memcmp(log, CG_BUNDLE_LOG_TAG, strlen(CG_BUNDLE_LOG_TAG));
        char *kz = malloc(klen + 1), *lz = malloc(llen + tl + 1);
        if (kz && lz) {
            memcpy(kz, key, klen);
            kz[klen] = '\0';
            size_t o = tagged ? 0 : (size_t)snprintf(lz, tl + 1, "%s%s\n", CG_BUNDLE_LOG_TAG, file);
            memcpy(lz + o, log, llen);
            lz[o + llen] = '\0';
            void *old = NULL;
            size_t oldlen = 0;
            if (cg__kcache_get(kdir, label, kz, &old, &oldlen, NULL) == CG_OK) {
                s->kept++; /* the same key holds the same CUBIN: nothing to write */
            } else if (dry || cg__kcache_put(kdir, label, kz, pl, plen, lz) == CG_OK) {
                s->added++;
            } else {
                fprintf(msgs, "%s: kernel %s: cannot write %s\n", what, file, kdir);
                s->rejected++;
            }
            free(old);
        } else {
            s->rejected++;
        }
        free(kz);
        free(lz);
        free(d);
    }
}
