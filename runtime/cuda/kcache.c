/* kcache.c -- on-disk binary cache: one self-describing file per entry (kcache.h). */
#include "kcache.h"
#include "fsutil.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#define MAGIC "CGKCACHE"
#define HEADER_BYTES 40
#define SUM_BYTES 16
#define MAX_ENTRY_BYTES ((uint64_t)1 << 32)

static atomic_int g_warned_write;

static void warn(const char *fmt, ...) CG_PRINTF(1, 2);
static void warn(const char *fmt, ...) {
    char msg[CG_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cg__log(CG_LOG_WARN, "%s", msg);
}

/* ------------------------------------------------------------------- hash */

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t avalanche(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Two 64-bit lanes absorb each little-endian word; the second also takes the first's
 * state, so the 128 output bits do not split into two independent 64-bit hashes. */
void cg__hash128(const void *data, size_t n, uint64_t out[2]) {
    const unsigned char *p = data;
    uint64_t a = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    uint64_t b = 0xC2B2AE3D27D4EB4Full + (uint64_t)n * 0x165667B19E3779F9ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = load64(p + i);
        a = rotl64(a ^ w, 23) * 0x9FB21C651E98DF25ull;
        b = (rotl64(b + w, 41) ^ a) * 0xD6E8FEB86659FD93ull;
    }
    unsigned char tail[8] = {0};
    memcpy(tail, p + i, n - i);
    uint64_t w = load64(tail) ^ ((uint64_t)(n - i) << 56);
    a = rotl64(a ^ w, 23) * 0x9FB21C651E98DF25ull;
    b = (rotl64(b + w, 41) ^ a) * 0xD6E8FEB86659FD93ull;
    out[0] = avalanche(a ^ rotl64(b, 17));
    out[1] = avalanche(b + out[0] * 0x9E3779B97F4A7C15ull);
}

/* ------------------------------------------------------------------ files */

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void cg__kcache_path(const char *dir, const char *label, const char *key, char *buf, size_t cap) {
    uint64_t h[2];
    cg__hash128(key, strlen(key), h);
    char lab[97];
    size_t n = 0;
    for (const char *c = label ? label : ""; *c && n < sizeof lab - 1; c++)
        lab[n++] =
            ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_') ? *c : '_';
    lab[n] = '\0';
    snprintf(buf, cap, "%s/%s%s%016llx%016llx.cgk", dir, lab, n ? "-" : "", (unsigned long long)h[0],
             (unsigned long long)h[1]);
}

static int read_all(const char *path, unsigned char **data, size_t *len, int *err, char *why, size_t whycap) {
    *data = NULL;
    *err = 0;
    int64_t size = 0;
    int fd = cg__open_regular(path, (int64_t)MAX_ENTRY_BYTES, &size, why, whycap); /* a FIFO must not hang */
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    size_t n = (size_t)size, got = 0;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        *err = ENOMEM;
        if (why) snprintf(why, whycap, "out of memory");
        close(fd);
        return -1;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = got; /* shorter than st_size: truncated under us; the checks below catch it */
    return 0;
}

/* Parse and check an entry image. 0 when good: offsets of key, payload, log. */
static int parse(const unsigned char *d, size_t n, uint64_t *klen, uint64_t *plen, uint64_t *llen, char *why,
                 size_t whycap) {
    if (n < HEADER_BYTES + SUM_BYTES) {
        snprintf(why, whycap, "truncated (%zu bytes)", n);
        return -1;
    }
    if (memcmp(d, MAGIC, 8) != 0) {
        snprintf(why, whycap, "not a chunkgen cache entry (bad magic)");
        return -1;
    }
    uint32_t ver = get32(d + 8);
    if (ver != CG_KCACHE_FORMAT) {
        snprintf(why, whycap, "format version %u, expected %d", ver, CG_KCACHE_FORMAT);
        return -1;
    }
    uint64_t k = 0, p = 0, l = 0;
    for (int i = 7; i >= 0; i--) {
        k = (k << 8) | d[16 + i];
        p = (p << 8) | d[24 + i];
        l = (l << 8) | d[32 + i];
    }
    if (k > MAX_ENTRY_BYTES || p > MAX_ENTRY_BYTES || l > MAX_ENTRY_BYTES ||
        HEADER_BYTES + k + p + l + SUM_BYTES != (uint64_t)n) {
        snprintf(why, whycap, "truncated or padded (%zu bytes, header says %llu)", n,
                 (unsigned long long)(HEADER_BYTES + k + p + l + SUM_BYTES));
        return -1;
    }
    uint64_t h[2];
    cg__hash128(d, n - SUM_BYTES, h);
    unsigned char sum[SUM_BYTES];
    put64(sum, h[0]);
    put64(sum + 8, h[1]);
    if (memcmp(sum, d + n - SUM_BYTES, SUM_BYTES) != 0) {
        snprintf(why, whycap, "corrupt (checksum mismatch)");
        return -1;
    }
    *klen = k;
    *plen = p;
    *llen = l;
    return 0;
}

int cg__kcache_parse(const void *data, size_t n, const char **key, size_t *klen, const void **payload, size_t *plen,
                     const char **log, size_t *llen, char *why, size_t whycap) {
    uint64_t k, p, l;
    char w[256];
    if (parse(data, n, &k, &p, &l, w, sizeof w) != 0) {
        if (why) snprintf(why, whycap, "%s", w);
        return -1;
    }
    const unsigned char *d = data;
    *key = (const char *)d + HEADER_BYTES;
    *klen = (size_t)k;
    *payload = d + HEADER_BYTES + k;
    *plen = (size_t)p;
    *log = (const char *)d + HEADER_BYTES + k + p;
    *llen = (size_t)l;
    return 0;
}

int cg__kcache_read_file(const char *path, void **data, size_t *len, char *why, size_t whycap) {
    unsigned char *d;
    int err;
    if (read_all(path, &d, len, &err, why, whycap) != 0) return -1;
    *data = d;
    return 0;
}

int cg__kcache_verify_file(const char *path, char *why, size_t whycap) {
    unsigned char *d;
    size_t n;
    int err;
    if (read_all(path, &d, &n, &err, why, whycap) != 0) return -1; /* why: cannot open, not a regular file */
    uint64_t k, p, l;
    int rc = parse(d, n, &k, &p, &l, why, whycap);
    free(d);
    return rc;
}

cg_status cg__kcache_get(const char *dir, const char *label, const char *key, void **payload, size_t *len, char **log) {
    *payload = NULL;
    *len = 0;
    if (log) *log = NULL;
    char path[4096];
    cg__kcache_path(dir, label, key, path, sizeof path);
    unsigned char *d;
    size_t n;
    int err;
    if (read_all(path, &d, &n, &err, NULL, 0) != 0) return CG_ENOTFOUND; /* absent (or unreadable): a plain miss */
    uint64_t k, p, l;
    char why[256];
    if (parse(d, n, &k, &p, &l, why, sizeof why) != 0) {
        warn("kernel cache entry %s is %s; rebuilding it", path, why);
        free(d);
        return CG_ENOTFOUND;
    }
    const unsigned char *kp = d + HEADER_BYTES;
    if (k != strlen(key) || memcmp(kp, key, k) != 0) {
        warn("kernel cache entry %s holds another key (hash collision or stale entry); rebuilding it", path);
        free(d);
        return CG_ENOTFOUND;
    }
    void *pl = malloc(p ? p : 1);
    char *lg = log ? malloc(l + 1) : NULL;
    if (!pl || (log && !lg)) {
        free(pl);
        free(lg);
        free(d);
        return CG_ENOTFOUND;
    }
    memcpy(pl, kp + k, p);
    if (lg) {
        memcpy(lg, kp + k + p, l);
        lg[l] = '\0';
        *log = lg;
    }
    free(d);
    *payload = pl;
    *len = (size_t)p;
    return CG_OK;
}

static void warn_write_once(const char *dir, const char *what, int err) {
    if (atomic_exchange(&g_warned_write, 1)) return;
    warn("kernel cache directory %s: %s: %s; compiled kernels are kept in memory only", dir, what, strerror(err));
}

cg_status cg__kcache_put(const char *dir, const char *label, const char *key, const void *payload, size_t len,
                         const char *log) {
    int err = cg__mkdirs(dir);
    if (err) {
        warn_write_once(dir, "cannot create it", err);
        return CG_EIO;
    }
    size_t k = strlen(key), l = log ? strlen(log) : 0;
    size_t n = HEADER_BYTES + k + len + l + SUM_BYTES;
    unsigned char *d = malloc(n);
    if (!d) return CG_ENOMEM;
    memcpy(d, MAGIC, 8);
    put32(d + 8, CG_KCACHE_FORMAT);
    put32(d + 12, 0);
    put64(d + 16, k);
    put64(d + 24, len);
    put64(d + 32, l);
    memcpy(d + HEADER_BYTES, key, k);
    if (len) memcpy(d + HEADER_BYTES + k, payload, len);
    if (l) memcpy(d + HEADER_BYTES + k + len, log, l);
    uint64_t h[2];
    cg__hash128(d, n - SUM_BYTES, h);
    put64(d + n - SUM_BYTES, h[0]);
    put64(d + n - 8, h[1]);

    char path[4096];
    cg__kcache_path(dir, label, key, path, sizeof path);
    int bad = cg__write_file_atomic(path, d, n, 1, NULL, 0) != 0;
    err = errno;
    free(d);
    if (bad) {
        warn_write_once(dir, "cannot write an entry", err);
        return CG_EIO;
    }
    return CG_OK;
}

void cg__kcache_stat(const char *dir, int64_t *files, int64_t *bytes) {
    *files = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 4 || strcmp(e->d_name + n - 4, ".cgk") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0) {
            (*files)++;
            *bytes += (int64_t)st.st_size;
        }
    }
    closedir(d);
}
