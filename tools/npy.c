/* npy.c -- NumPy .npy reader and writer (float32, float16, bfloat16; see npy.h).
 *
 * File layout (numpy.lib.format): the magic "\x93NUMPY", one byte major and one byte
 * minor version, the header length (uint16 LE for 1.0, uint32 LE for 2.0 and 3.0), the
 * header -- a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n' -- then the raw array data. The header is a
 * Python literal, not JSON, so it is parsed here by a small recursive-descent reader
 * that accepts what numpy writes (either quote style, optional trailing commas, any
 * whitespace, keys in any order) and nothing else. */
#include "npy.h"
#include <fcntl.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1 << 20) /* far more than any 4-d header needs */

static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int host_is_little(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

char *cg_npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t buflen) {
    size_t n = 0;
    if (buflen == 0) return buf;
    buf[0] = '\0';
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        int w_ = snprintf(buf + n, buflen - n, __VA_ARGS__);                                                           \
        if (w_ < 0 || (size_t)w_ >= buflen - n) return buf;                                                            \
        n += (size_t)w_;                                                                                               \
    } while (0)
    PUT("(");
    for (int i = 0; i < ndim; i++) PUT(i ? ", %lld" : "%lld", (long long)shape[i]);
    if (ndim == 1) PUT(",");
    PUT(")");
#undef PUT
    return buf;
}

/* ------------------------------------------------------------ header parser */

typedef struct hparse {
    const char *s, *e; /* remaining header text */
    const char *path;
    char *err;
    size_t errlen;
} hparse;

static void skip_ws(hparse *h) {
    while (h->s < h->e && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r')) h->s++;
}

/* Consume c (after whitespace) if present. */
static int accept(hparse *h, char c) {
    skip_ws(h);
    if (h->s < h->e && *h->s == c) {
        h->s++;
        return 1;
    }
    return 0;
}

/* Printable excerpt of the text at the cursor, for messages. */
static const char *near(const hparse *h, char *buf, size_t buflen) {
    size_t n = 0;
    for (const char *p = h->s; p < h->e && n + 1 < buflen && n < 24; p++) buf[n++] = (*p >= 32 && *p < 127) ? *p : '?';
    buf[n] = '\0';
    return n ? buf : "end of header";
}

static int syntax(hparse *h, const char *what) {
    char nb[32];
    seterr(h->err, h->errlen, "%s: malformed .npy header: expected %s near '%s'", h->path, what,
           near(h, nb, sizeof nb));
    return -1;
}

/* A quoted string without escapes ('...' or "..."), copied into out. */
static int parse_str(hparse *h, char *out, size_t outlen) {
    skip_ws(h);
    if (h->s >= h->e || (*h->s != '\'' && *h->s != '"')) return syntax(h, "a quoted string");
    char q = *h->s++;
    size_t n = 0;
    while (h->s < h->e && *h->s != q) {
        if (*h->s == '\\' || (unsigned char)*h->s < 0x20)
            return syntax(h, "a simple string (no escapes, NULs or control characters)");
        if (n + 1 >= outlen) return syntax(h, "a shorter string");
        out[n++] = *h->s++;
    }
    if (h->s >= h->e) return syntax(h, "a closing quote");
    h->s++;
    out[n] = '\0';
    return 0;
}

static int parse_bool(hparse *h, int *out) {
    skip_ws(h);
    size_t left = (size_t)(h->e - h->s);
    if (left >= 4 && memcmp(h->s, "True", 4) == 0) {
        h->s += 4;
        *out = 1;
        return 0;
    }
    if (left >= 5 && memcmp(h->s, "False", 5) == 0) {
        h->s += 5;
        *out = 0;
        return 0;
    }
    return syntax(h, "True or False");
}

/* A tuple of non-negative integers: (), (5,), (2, 3), (2, 3,); Python 2's 5L too. */
static int parse_shape(hparse *h, int *ndim, int64_t *shape) {
    int n = 0;
    if (!accept(h, '(')) return syntax(h, "a tuple '(' for 'shape'");
    for (;;) {
        if (accept(h, ')')) break;
        skip_ws(h);
        if (h->s >= h->e || *h->s < '0' || *h->s > '9') return syntax(h, "a non-negative integer in 'shape'");
        int64_t v = 0;
        while (h->s < h->e && *h->s >= '0' && *h->s <= '9') {
            int d = *h->s++ - '0';
            if (v > (INT64_MAX - d) / 10) {
                seterr(h->err, h->errlen, "%s: .npy header: a dimension in 'shape' overflows 64 bits", h->path);
                return -1;
            }
            v = v * 10 + d;
        }
        if (h->s < h->e && (*h->s == 'L' || *h->s == 'l')) h->s++;
        if (n == CG_NPY_MAX_DIMS) {
            seterr(h->err, h->errlen, "%s: array has more than %d dimensions (at most %d supported)", h->path,
                   CG_NPY_MAX_DIMS, CG_NPY_MAX_DIMS);
            return -1;
        }
        shape[n++] = v;
        if (accept(h, ',')) continue;
        if (accept(h, ')')) break;
        return syntax(h, "',' or ')' in 'shape'");
    }
    *ndim = n;
    return 0;
}

/* The element type of a descr: '<f4' (CG_F32, 4 bytes), '<f8' (CG_F64, 8), '<f2' (CG_F16,
 * 2) or '<V2' / '|V2' (CG_BF16, 2: what numpy writes for ml_dtypes.bfloat16, which has no
 * descr of its own); anything else is refused with the reason. index: an index array
 * instead, '<i4' (CG_I32) or '<i8' (CG_I64) only. */
static int check_descr(const char *path, const char *d, int index, int *elem, int *dtype, char *err, size_t errlen) {
    char order = '<';
    const char *p = d;
    if (*p == '<' || *p == '>' || *p == '=' || *p == '|') order = *p++;
    if (order == '=') order = host_is_little() ? '<' : '>';
    if (index) {
        int is_i4 = strcmp(p, "i4") == 0, is_i8 = strcmp(p, "i8") == 0;
        if ((is_i4 || is_i8) && order == '<') {
            *elem = is_i4 ? 4 : 8;
            *dtype = is_i4 ? CG_I32 : CG_I64;
            return 0;
        }
        seterr(err, errlen, "%s: dtype '%s' but expected little-endian int32 '<i4' or int64 '<i8' offsets", path, d);
        return -1;
    }
    int is_f4 = strcmp(p, "f4") == 0, is_f8 = strcmp(p, "f8") == 0, is_f2 = strcmp(p, "f2") == 0;
    if ((is_f4 || is_f8 || is_f2) && order == '<') {
        *elem = is_f4 ? 4 : is_f8 ? 8 : 2;
        *dtype = is_f4 ? CG_F32 : is_f8 ? CG_F64 : CG_F16;
        return 0;
    }
    if (strcmp(p, "V2") == 0 && (order == '<' || order == '|')) {
        *elem = 2;
        *dtype = CG_BF16;
        return 0;
    }
    const char *why;
    if ((is_f4 || is_f8 || is_f2) && order == '>') why = "big-endian floats";
    else if (*p == 'f') why = "this float width";
    else if (*p == 'i' || *p == 'u') why = "integer arrays (convert with .astype(np.float32))";
    else if (*p == 'b' || *p == '?') why = "boolean arrays";
    else if (*p == 'c') why = "complex arrays";
    else if (*p == 'O') why = "object arrays";
    else if (*p == 'U' || *p == 'S' || *p == 'a') why = "string arrays";
    else if (*p == 'M' || *p == 'm') why = "datetime arrays";
    else if (*p == 'V') why = "void arrays other than 2-byte bfloat16";
    else why = "this dtype";
    seterr(err, errlen,
           "%s: dtype '%s' is not supported (%s); little-endian float32 '<f4', float64 '<f8' (converted), "
           "float16 '<f2' and bfloat16 '<V2' (ml_dtypes) are read",
           path, d, why);
    return -1;
}

typedef struct npy_header {
    char descr[64];
    int elem;  /* bytes per element: 2, 4 or 8 */
    int dtype; /* cg_dtype of the elements */
    int fortran;
    int ndim;
    int64_t shape[CG_NPY_MAX_DIMS];
} npy_header;

static int parse_header(const char *path, const char *text, size_t len, int index, npy_header *out, char *err,
                        size_t errlen) {
    hparse h = {text, text + len, path, err, errlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    if (!accept(&h, '{')) return syntax(&h, "a dict '{'");
    for (;;) {
        if (accept(&h, '}')) break;
        char key[32];
        if (parse_str(&h, key, sizeof key)) return -1;
        if (!accept(&h, ':')) return syntax(&h, "':' after a key");
        if (strcmp(key, "descr") == 0) {
            skip_ws(&h);
            if (h.s < h.e && (*h.s == '[' || *h.s == '{')) {
                seterr(err, errlen, "%s: structured dtypes are not supported; only float32 '<f4' arrays are read",
                       path);
                return -1;
            }
            if (have_descr++) return syntax(&h, "each key once ('descr' repeated)");
            if (parse_str(&h, out->descr, sizeof out->descr)) return -1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++) return syntax(&h, "each key once ('fortran_order' repeated)");
            if (parse_bool(&h, &out->fortran)) return -1;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++) return syntax(&h, "each key once ('shape' repeated)");
            if (parse_shape(&h, &out->ndim, out->shape)) return -1;
        } else {
            seterr(err, errlen, "%s: .npy header has an unknown key '%s' (expected 'descr', 'fortran_order', 'shape')",
                   path, key);
            return -1;
        }
        if (accept(&h, ',')) continue;
        if (accept(&h, '}')) break;
        return syntax(&h, "',' or '}' in the header dict");
    }
    skip_ws(&h);
    while (h.s < h.e && *h.s == '\0') h.s++; /* some writers pad with NULs */
    if (h.s != h.e) return syntax(&h, "nothing after the header dict");
    if (!have_descr || !have_fortran || !have_shape) {
        seterr(err, errlen, "%s: .npy header lacks the key '%s'", path,
               !have_descr     ? "descr"
               : !have_fortran ? "fortran_order"
                               : "shape");
        return -1;
    }
    return check_descr(path, out->descr, index, &out->elem, &out->dtype, err, errlen);
}

/* ------------------------------------------------------------------- read */

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Element i of a little-endian buffer of elem-byte elements of dtype, as float (16-bit
 * ones widened exactly, float64 rounded). */
static float load_le(const unsigned char *raw, int64_t i, int elem, int dtype, int little) {
    unsigned char b[8];
    memcpy(b, raw + i * elem, (size_t)elem);
    if (!little)
        for (int j = 0; j < elem / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[elem - 1 - j];
            b[elem - 1 - j] = t;
        }
    if (elem == 2) {
        uint16_t h;
        memcpy(&h, b, 2);
        return dtype == CG_BF16 ? cg_bf16_to_f32(h) : cg_f16_to_f32(h);
    }
    if (elem == 4) {
        float f;
        memcpy(&f, b, 4);
        return f;
    }
    double d;
    memcpy(&d, b, 8);
    return (float)d;
}

/* Open path read-only without blocking on a FIFO, a tty or a device (O_NONBLOCK, then
 * cleared) and check that it is a regular file: the fd and *size, or -1 with errno set and
 * the reason in why. */
static int open_regular(const char *path, int64_t *size, char *why, size_t whycap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        snprintf(why, whycap, "cannot %s: %s", fd < 0 ? "open" : "stat", strerror(e));
        if (fd >= 0) close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whycap, "not a regular file (%s)",
                 S_ISDIR(st.st_mode)    ? "a directory"
                 : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                 : S_ISCHR(st.st_mode)  ? "a character device"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                                        : "not a regular file");
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (int64_t)st.st_size;
    return fd;
}

static int read_exact(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n ? 0 : -1; }

/* cg_npy_read, or with idx (cg_npy_read_index) a 1-D int32 / int64 array into idx. */
static int read_npy(const char *path, cg_npy *out, cg_npy_index *idx, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char why[256];
    int64_t fsize = 0;
    int fd = open_regular(path, &fsize, why, sizeof why); /* a FIFO must not hang */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) {
            snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
            close(fd);
        }
        seterr(err, errlen, "%s: %s", path, why);
        return -1;
    }
    unsigned char *raw = NULL;
    char *htext = NULL;
    int rc = -1;

    unsigned char pre[12];
    if (fsize < 10 || read_exact(f, pre, 10)) {
        seterr(err, errlen, "%s: not a .npy file (only %lld bytes; truncated?)", path, (long long)fsize);
        goto done;
    }
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        seterr(err, errlen, "%s: not a .npy file (no \\x93NUMPY magic at the start)", path);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        seterr(err, errlen, "%s: unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are read)", path, major,
               minor);
        goto done;
    }
    int64_t hlen, prefix;
    if (major == 1) {
        hlen = (int64_t)pre[8] | (int64_t)pre[9] << 8;
        prefix = 10;
    } else {
        if (fsize < 12 || read_exact(f, pre + 10, 2)) {
            seterr(err, errlen, "%s: truncated .npy file (%lld bytes, ends inside the preamble)", path,
                   (long long)fsize);
            goto done;
        }
        hlen = (int64_t)le32(pre + 8);
        prefix = 12;
    }
    if (hlen > NPY_MAX_HEADER) {
        seterr(err, errlen, "%s: .npy header length %lld is implausibly large", path, (long long)hlen);
        goto done;
    }
    if (prefix + hlen > fsize) {
        seterr(err, errlen, "%s: truncated .npy file: the header needs %lld bytes but the file has %lld", path,
               (long long)(prefix + hlen), (long long)fsize);
        goto done;
    }
    htext = malloc((size_t)hlen + 1);
    if (!htext) {
        seterr(err, errlen, "%s: out of memory", path);
        goto done;
    }
    if (read_exact(f, htext, (size_t)hlen)) {
        seterr(err, errlen, "%s: read error in the header: %s", path, ferror(f) ? strerror(errno) : "short read");
        goto done;
    }
    htext[hlen] = '\0';
    npy_header hd;
    memset(&hd, 0, sizeof hd);
    if (parse_header(path, htext, (size_t)hlen, idx != NULL, &hd, err, errlen)) goto done;
    if (idx && hd.ndim != 1) {
        char sb[96];
        seterr(err, errlen, "%s: shape %s but expected one dimension (N + 1 offsets)", path,
               cg_npy_shape_str(hd.ndim, hd.shape, sb, sizeof sb));
        goto done;
    }

    int64_t count = 1;
    for (int i = 0; i < hd.ndim; i++) {
        if (hd.shape[i] != 0 && count > INT64_MAX / 8 / hd.shape[i]) {
            seterr(err, errlen, "%s: shape's element count overflows", path);
            goto done;
        }
        count *= hd.shape[i];
    }
    int64_t need = count * hd.elem, have = fsize - prefix - hlen;
    if (have < need) {
        char sb[96];
        seterr(err, errlen, "%s: truncated .npy file: shape %s of '%s' needs %lld data bytes but the file has %lld",
               path, cg_npy_shape_str(hd.ndim, hd.shape, sb, sizeof sb), hd.descr, (long long)need, (long long)have);
        goto done;
    }
    if (have > need) {
        char sb[96];
        seterr(
            err, errlen,
            "%s: .npy file has %lld bytes after the data that shape %s of '%s' needs (%lld); corrupt or not one array",
            path, (long long)(have - need), cg_npy_shape_str(hd.ndim, hd.shape, sb, sizeof sb), hd.descr,
            (long long)need);
        goto done;
    }
    if ((uint64_t)need > (uint64_t)SIZE_MAX / 2) {
        seterr(err, errlen, "%s: array too large for this machine", path);
        goto done;
    }
    raw = malloc(need ? (size_t)need : 1);
    out->data = malloc(count ? (size_t)count * (idx ? sizeof(int64_t) : sizeof(float)) : sizeof(int64_t));
    if (!raw || !out->data) {
        seterr(err, errlen, "%s: out of memory (%lld bytes)", path, (long long)need);
        goto done;
    }
    if (need && read_exact(f, raw, (size_t)need)) {
        seterr(err, errlen, "%s: read error in the data: %s", path, ferror(f) ? strerror(errno) : "short read");
        goto done;
    }

    int little = host_is_little();
    if (idx) { /* little-endian int32 / int64, widened to int64 */
        int64_t *v = (int64_t *)(void *)out->data;
        for (int64_t i = 0; i < count; i++) {
            const unsigned char *b = raw + i * hd.elem;
            uint64_t u = 0;
            for (int j = hd.elem - 1; j >= 0; j--) u = u << 8 | b[j];
            v[i] = hd.elem == 4 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
        }
        idx->v = v;
        idx->n = count;
        idx->dtype = hd.dtype;
        out->data = NULL;
        rc = 0;
        goto done;
    }
    if (!hd.fortran || hd.ndim < 2) {
        if (hd.elem == 4 && little) memcpy(out->data, raw, (size_t)need);
        else
            for (int64_t i = 0; i < count; i++) out->data[i] = load_le(raw, i, hd.elem, hd.dtype, little);
    } else if (count > 0) {
        /* Column-major file: element idx lies at sum idx[d] * cstride[d] with cstride[0] = 1.
         * Walk the row-major output order and gather. */
        int64_t cstride[CG_NPY_MAX_DIMS], idx[CG_NPY_MAX_DIMS] = {0};
        cstride[0] = 1;
        for (int d = 1; d < hd.ndim; d++) cstride[d] = cstride[d - 1] * hd.shape[d - 1];
        int64_t src = 0;
        for (int64_t i = 0; i < count; i++) {
            out->data[i] = load_le(raw, src, hd.elem, hd.dtype, little);
            for (int d = hd.ndim - 1; d >= 0; d--) {
                src += cstride[d];
                if (++idx[d] < hd.shape[d]) break;
                src -= cstride[d] * hd.shape[d];
                idx[d] = 0;
            }
        }
    }
    memset(&out->t, 0, sizeof out->t); /* strides all zero: contiguous row-major (chunkgen.h) */
    out->t.data = out->data;
    out->t.dtype = CG_F32;
    out->t.ndim = hd.ndim;
    for (int i = 0; i < hd.ndim; i++) out->t.shape[i] = hd.shape[i];
    out->count = count;
    out->from_f64 = hd.elem == 8;
    out->dtype = hd.dtype;
    out->fortran_order = hd.fortran;
    out->version = major;
    rc = 0;
done:
    if (rc != 0) {
        free(out->data);
        memset(out, 0, sizeof *out);
    }
    free(raw);
    free(htext);
    fclose(f);
    return rc;
}

int cg_npy_read(const char *path, cg_npy *out, char *err, size_t errlen) {
    return read_npy(path, out, NULL, err, errlen);
}

int cg_npy_read_index(const char *path, cg_npy_index *out, char *err, size_t errlen) {
    cg_npy tmp;
    memset(out, 0, sizeof *out);
    return read_npy(path, &tmp, out, err, errlen);
}

void cg_npy_index_free(cg_npy_index *a) {
    if (!a) return;
    free(a->v);
    memset(a, 0, sizeof *a);
}

void cg_npy_free(cg_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------------ write */

int cg_npy_write_tmp(const char *path, char *tmp, size_t tmpcap, const float *data, int ndim, const int64_t *shape,
                     char *err, size_t errlen) {
    return cg_npy_write_tmp_as(path, tmp, tmpcap, data, CG_F32, ndim, shape, err, errlen);
}

/* The descr written for dtype (numpy's own for float32 and float16; '<V2' for bfloat16,
 * as numpy saves ml_dtypes.bfloat16), and its element size. */
static const char *descr_of(int dtype, int *elem) {
    *elem = dtype == CG_F32 ? 4 : 2;
    return dtype == CG_F32 ? "<f4" : dtype == CG_F16 ? "<f2" : "<V2";
}

int cg_npy_write_tmp_as(const char *path, char *tmp, size_t tmpcap, const float *data, int dtype, int ndim,
                        const int64_t *shape, char *err, size_t errlen) {
    if (dtype != CG_F32 && dtype != CG_F16 && dtype != CG_BF16) {
        seterr(err, errlen, "%s: cannot write dtype %d (float32, float16 or bfloat16)", path, dtype);
        return -1;
    }
    if (ndim < 0 || ndim > CG_NPY_MAX_DIMS) {
        seterr(err, errlen, "%s: cannot write %d dimensions (0..%d)", path, ndim, CG_NPY_MAX_DIMS);
        return -1;
    }
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && count > INT64_MAX / 4 / shape[i])) {
            seterr(err, errlen, "%s: cannot write: bad shape", path);
            return -1;
        }
        count *= shape[i];
    }
    if (count > 0 && !data) {
        seterr(err, errlen, "%s: cannot write: no data", path);
        return -1;
    }
    /* Preamble (10 bytes) + dict + spaces + '\n', padded to 64 bytes as numpy does. */
    char hdr[256], sb[128];
    int elem;
    const char *descr = descr_of(dtype, &elem);
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                     cg_npy_shape_str(ndim, shape, sb, sizeof sb));
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    memset(hdr + n, ' ', hlen - 1 - (size_t)n);
    hdr[hlen - 1] = '\n';

    /* A fresh temp file next to path (O_EXCL|O_NOFOLLOW: a planted symlink cannot
     * redirect the write), renamed over path by the caller. */
    int fd = cg_tmp_create(path, tmp, tmpcap);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        seterr(err, errlen, "%s: cannot create a temp file next to it: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -1;
    }
    unsigned char pre[10];
    memcpy(pre, NPY_MAGIC, NPY_MAGIC_LEN);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, hlen, f) == hlen;
    if (ok && count > 0 && elem == 2) { /* narrowed once, to nearest even (half.h), little-endian */
        for (int64_t i = 0; ok && i < count; i++) {
            uint16_t h = dtype == CG_BF16 ? cg_f32_to_bf16(data[i]) : cg_f32_to_f16(data[i]);
            unsigned char b[2] = {(unsigned char)(h & 0xff), (unsigned char)(h >> 8)};
            ok = fwrite(b, 1, 2, f) == 2;
        }
    } else if (ok && count > 0) {
        if (host_is_little()) {
            ok = fwrite(data, sizeof(float), (size_t)count, f) == (size_t)count;
        } else {
            for (int64_t i = 0; ok && i < count; i++) {
                unsigned char b[4], r[4];
                memcpy(b, &data[i], 4);
                r[0] = b[3], r[1] = b[2], r[2] = b[1], r[3] = b[0];
                ok = fwrite(r, 1, 4, f) == 4;
            }
        }
    }
    int werr = errno;
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
        ok = 0;
        werr = errno;
    }
    if (fclose(f) != 0 && ok) {
        ok = 0;
        werr = errno;
    }
    if (!ok) {
        seterr(err, errlen, "%s: write failed: %s", path, strerror(werr));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int cg_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, char *err, size_t errlen) {
    char tmp[4400];
    if (cg_npy_write_tmp(path, tmp, sizeof tmp, data, ndim, shape, err, errlen) != 0) return -1;
    if (rename(tmp, path) != 0) {
        seterr(err, errlen, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* (npy.h) mkdir -p path (mode 0755): 0 (also when it is a directory already), else an errno
 * value (ENOTDIR when path or a parent is not a directory). */
int cg_npy_mkdirs(const char *path) { return cg_mkdirs(path); }
