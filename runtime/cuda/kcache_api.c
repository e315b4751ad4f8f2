/* kcache_api.c -- the public calls on the kernel cache (include/chunkgen.h, "kernels:
 * the kernel cache"): its directory, its entries, an entry's image, importing one.
 * The entry format and its checks are kcache.c's; this file only names entries and
 * decides which may move between machines (a CUBIN of this chunkgen version). */
#include "cg_cuda.h"
#include "fsutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "<32 hex>.cgk" ends every entry's file name (cg__kcache_path). */
static int is_entry_name(const char *n) {
    size_t len = strlen(n);
    if (n[0] == '.' || strchr(n, '/') || len < 38 || strcmp(n + len - 4, ".cgk") || n[len - 37] != '-') return 0;
    for (size_t i = len - 36; i < len - 4; i++)
        if (!strchr("0123456789abcdef", n[i])) return 0;
    return 1;
}

static const char *dir_of(cg_context *ctx, const char *dir, char *buf, size_t cap) {
    if (dir) return dir;
    snprintf(buf, cap, "%s/kernels", cg__cache_dir(ctx));
    return buf;
}

cg_status cg_kcache_dir(cg_context *ctx, char *buf, size_t cap) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kcache_dir") != CG_OK) return CG_EINVAL;
    cg_status st = CG_OK;
    if (!buf) {
        st = cg__err(ctx, CG_EINVAL, "cg_kcache_dir: buf is NULL (expected a buffer of cap bytes)");
    } else {
        int need = snprintf(buf, cap, "%s/kernels", cg__cache_dir(ctx));
        if ((size_t)need >= cap)
            st = cg__err(ctx, CG_EINVAL, "cg_kcache_dir: cap is %zu bytes, the directory needs %d", cap, need + 1);
    }
    cg__ctx_leave(ctx);
    return st;
}

/* The value of a "NAME value" line of key (before its "source" line), into buf. */
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

static int starts(const char *s, size_t n, const char *prefix) {
    size_t pl = strlen(prefix);
    return n >= pl && !memcmp(s, prefix, pl);
}

#define CUBIN_HEAD CG_CUBIN_KEY_HEAD "\nkind cubin\n"
#define EMU_HEAD "chunkgen emulate module"

/* Describe the entry image d[n] of file into e (already zeroed but for size). */
static void describe(const char *file, const void *d, size_t n, cg_kcache_entry *e) {
    const char *key, *log;
    const void *pl;
    size_t klen, plen, llen;
    if (cg__kcache_parse(d, n, &key, &klen, &pl, &plen, &log, &llen, e->why, sizeof e->why) != 0) return;
    if (starts(key, klen, CUBIN_HEAD)) {
        char target[32] = "";
        snprintf(e->kind, sizeof e->kind, "cubin");
        if (key_line(key, klen, "target", target, sizeof target) && !strncmp(target, "sm_", 3))
            e->arch = atoi(target + 3);
        key_line(key, klen, "name", e->name, sizeof e->name);
        e->bundled = starts(log, llen, CG_BUNDLE_LOG_TAG);
        e->usable = 1;
    } else if (starts(key, klen, EMU_HEAD)) {
        snprintf(e->kind, sizeof e->kind, "emulate");
        /* "emu_<name>-<hash>.cgk" */
        size_t len = strlen(file);
        int skip = !strncmp(file, "emu_", 4) ? 4 : 0;
        snprintf(e->name, sizeof e->name, "%.*s", (int)(len - 37 - (size_t)skip), file + skip);
        e->usable = 1;
    } else {
        const char *nl = memchr(key, '\n', klen);
        snprintf(e->why, sizeof e->why, "built by another chunkgen version or kind (ours: \"%s\", its: \"%.*s\")",
                 CG_CUBIN_KEY_HEAD, (int)(nl ? nl - key : 0), key);
    }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted entry names of dir (*names malloc'd, each too); 0, or -1 out of memory. */
static int entry_names(const char *dir, char ***names, int *n) {
    *names = NULL;
    *n = 0;
    DIR *dh = opendir(dir);
    if (!dh) return 0;
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(dh))) {
        if (!is_entry_name(de->d_name)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(*names, (size_t)cap * sizeof **names);
            if (!grown) break;
            *names = grown;
        }
        if (!((*names)[*n] = strdup(de->d_name))) break;
        (*n)++;
    }
    int oom = de != NULL;
    closedir(dh);
    if (*n) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return oom ? -1 : 0;
}

static void names_free(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

cg_status cg_kcache_list(cg_context *ctx, const char *dir, cg_kcache_entry *entries, int cap, int *n) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kcache_list") != CG_OK) return CG_EINVAL;
    cg_status st = CG_OK;
    size_t stride = sizeof(cg_kcache_entry);
    if (!n) st = cg__err(ctx, CG_EINVAL, "cg_kcache_list: n is NULL (expected where to write the count)");
    else if (cap < 0 || (cap > 0 && !entries))
        st =
            cg__err(ctx, CG_EINVAL, "cg_kcache_list: entries/cap: expected an array of cap >= 0 entries, got %s and %d",
                    entries ? "an array" : "NULL", cap);
    else if (cap > 0) {
        memcpy(&stride, entries, sizeof stride);
        if (stride == 0) stride = sizeof(cg_kcache_entry);
        if (stride < sizeof(size_t))
            st = cg__err(ctx, CG_EINVAL, "cg_kcache_list: entries[0].size: %zu but expected 0 or the struct's sizeof",
                         stride);
    }
    char buf[4200], **names = NULL;
    int count = 0;
    const char *d = dir_of(ctx, dir, buf, sizeof buf);
    if (st == CG_OK && entry_names(d, &names, &count) != 0)
        st = cg__err(ctx, CG_ENOMEM, "cg_kcache_list: out of memory listing %s", d);
    for (int i = 0; st == CG_OK && i < count && i < cap; i++) {
        cg_kcache_entry e;
        memset(&e, 0, sizeof e);
        e.size = sizeof e;
        snprintf(e.file, sizeof e.file, "%s", names[i]);
        char path[4500], why[256];
        snprintf(path, sizeof path, "%s/%s", d, names[i]);
        struct stat sb;
        if (stat(path, &sb) == 0) e.bytes = (int64_t)sb.st_size;
        void *img;
        size_t len;
        if (cg__kcache_read_file(path, &img, &len, why, sizeof why) == 0) {
            describe(names[i], img, len, &e);
            free(img);
        } else {
            snprintf(e.why, sizeof e.why, "%s", why);
        }
        /* the caller's struct: its size's worth of ours (members only ever appended) */
        unsigned char *slot = (unsigned char *)entries + (size_t)i * stride;
        memset(slot, 0, stride);
        memcpy(slot, &e, stride < sizeof e ? stride : sizeof e);
        memcpy(slot, &stride, sizeof stride);
    }
    if (n) *n = st == CG_OK ? count : 0;
    names_free(names, count);
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_kcache_read(cg_context *ctx, const char *dir, const char *file, void **image, size_t *len) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kcache_read") != CG_OK) return CG_EINVAL;
    cg_status st = CG_OK;
    if (image) *image = NULL;
    if (len) *len = 0;
    char buf[4200], path[4500], why[256];
    const char *d = dir_of(ctx, dir, buf, sizeof buf);
    if (!image || !len) {
        st = cg__err(ctx, CG_EINVAL, "cg_kcache_read: %s is NULL (expected where to write the image)",
                     !image ? "image" : "len");
    } else if (!file || !is_entry_name(file)) {
        st =
            cg__err(ctx, CG_EINVAL, "cg_kcache_read: file: expected an entry's file name (NAME-<32 hex>.cgk), got '%s'",
                    file ? file : "(null)");
    } else {
        snprintf(path, sizeof path, "%s/%s", d, file);
        struct stat sb;
        void *img;
        size_t n;
        const char *key, *log;
        const void *pl;
        size_t klen, plen, llen;
        if (stat(path, &sb) != 0) {
            st = cg__err(ctx, CG_ENOTFOUND, "cg_kcache_read: file: no entry %s in %s", file, d);
        } else if (cg__kcache_read_file(path, &img, &n, why, sizeof why) != 0) {
            st = cg__err(ctx, CG_EINVAL, "cg_kcache_read: file: %s: %s", file, why);
        } else if (cg__kcache_parse(img, n, &key, &klen, &pl, &plen, &log, &llen, why, sizeof why) != 0) {
            free(img);
            st = cg__err(ctx, CG_EINVAL, "cg_kcache_read: file: %s is %s", file, why);
        } else {
            *image = img;
            *len = n;
        }
    }
    cg__ctx_leave(ctx);
    return st;
}

/* Import one checked CUBIN entry (key klen, payload, log) into d: *added. */
static cg_status import_entry(cg_context *ctx, const char *d, const char *key, size_t klen, const void *pl, size_t plen,
                              const char *log, size_t llen, const char *origin, int dry, int *added) {
    char label[200] = "";
    if (!key_line(key, klen, "name", label, sizeof label))
        return cg__err(ctx, CG_EINVAL, "cg_kcache_import: image: its key names no kernel");
    /* the log says where the entry came from (the executor counts bundle hits by it) */
    const char *from = origin ? origin : "";
    int tagged = starts(log, llen, CG_BUNDLE_LOG_TAG);
    size_t tl = tagged ? 0 : strlen(CG_BUNDLE_LOG_TAG) + strlen(from) + 1;
    char *kz = malloc(klen + 1), *lz = malloc(llen + tl + 1);
    cg_status st = CG_OK;
    if (!kz || !lz) {
        st = cg__err(ctx, CG_ENOMEM, "cg_kcache_import: out of memory");
    } else {
        memcpy(kz, key, klen);
        kz[klen] = '\0';
        size_t o = tagged ? 0 : (size_t)snprintf(lz, tl + 1, "%s%s\n", CG_BUNDLE_LOG_TAG, from);
        memcpy(lz + o, log, llen);
        lz[o + llen] = '\0';
        void *old = NULL;
        size_t oldlen = 0;
        if (cg__kcache_get(d, label, kz, &old, &oldlen, NULL) == CG_OK) {
            *added = 0; /* the same key holds the same CUBIN: nothing to write */
        } else if (dry || cg__kcache_put(d, label, kz, pl, plen, lz) == CG_OK) {
            *added = 1;
        } else {
            st = cg__err(ctx, CG_EIO, "cg_kcache_import: dir: cannot write %s", d);
        }
        free(old);
    }
    free(kz);
    free(lz);
    return st;
}

cg_status cg_kcache_import(cg_context *ctx, const char *dir, const void *image, size_t len, const char *origin, int dry,
                           int *added) {
    if (!ctx || cg__ctx_enter(ctx, "cg_kcache_import") != CG_OK) return CG_EINVAL;
    int dummy = 0;
    if (!added) added = &dummy;
    *added = 0;
    char buf[4200], why[256];
    const char *d = dir_of(ctx, dir, buf, sizeof buf);
    const char *key, *log;
    const void *pl;
    size_t klen, plen, llen;
    cg_status st;
    if (!image) {
        st = cg__err(ctx, CG_EINVAL, "cg_kcache_import: image is NULL (expected an entry image of len bytes)");
    } else if (cg__kcache_parse(image, len, &key, &klen, &pl, &plen, &log, &llen, why, sizeof why) != 0) {
        st = cg__err(ctx, CG_EINVAL, "cg_kcache_import: image: %s", why);
    } else if (!starts(key, klen, CUBIN_HEAD)) {
        const char *nl = memchr(key, '\n', klen);
        st = cg__err(ctx, CG_EINVAL,
                     "cg_kcache_import: image: built by another chunkgen version or kind (ours: \"%s\", its: \"%.*s\")",
                     CG_CUBIN_KEY_HEAD, (int)(nl ? nl - key : 0), key);
    } else {
        st = import_entry(ctx, d, key, klen, pl, plen, log, llen, origin, dry, added);
    }
    cg__ctx_leave(ctx);
    return st;
}
