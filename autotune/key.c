/* key.c -- config keys: seq buckets, device identity, canonical key text. */
#include "autotune.h"
#include "ops.h"
#include "cpu/cpu_isa.h"
#include "cuda/cg_cuda.h"

#include <ctype.h>
#include <stddef.h>
#include <pthread.h>
#include <string.h>
#include <sys/utsname.h>

/* NVRTC "major.minor" and the driver's version ("13.0"), from the libraries the CUDA part
 * loaded. Only versions, not file paths or dates: ranks with the same installation must
 * compute the same key. */
static void cuda_versions(char *nvrtc, size_t ncap, char *driver, size_t dcap) {
    const char *why;
    snprintf(nvrtc, ncap, "none");
    snprintf(driver, dcap, "none");
    const cg_nvrtc_api *nv = cg__nvrtc_api(&why);
    int major = 0, minor = 0, v = 0;
    if (nv && nv->nvrtcVersion && nv->nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
        snprintf(nvrtc, ncap, "%d.%d", major, minor);
    const cg_cu_api *cu = cg__cu_api(&why);
    if (cu && cu->cuDriverGetVersion && cu->cuDriverGetVersion(&v) == CUDA_SUCCESS)
        snprintf(driver, dcap, "%d.%d", v / 1000, (v % 1000) / 10);
}

int64_t cg__tune_bucket(int64_t n) {
    int64_t b = 1;
    while (b < n && b < ((int64_t)1 << 62)) b <<= 1;
    return b;
}

uint64_t cg__tune_hash(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ------------------------------------------------ symbols <-> key fields
 * The key's extents are the op table's key column (cg_op_desc.key): each symbol has its
 * field in cg_tune_key, the names of the store's format (schema 1: dk, dv, H, D, N, G).
 * key_at: where cg_tune_key keeps symbol s, as offsetof + 1 (0: not kept). A tuner's shape
 * keeps its extents in its cg_shape, by symbol. */
#define KEY_AT(f) (offsetof(cg_tune_key, f) + 1)
static const size_t key_at[CG_SYM_COUNT] = {[CG_SYM_DK] = KEY_AT(dk), [CG_SYM_DV] = KEY_AT(dv), [CG_SYM_H] = KEY_AT(H),
                                            [CG_SYM_D] = KEY_AT(D),   [CG_SYM_N] = KEY_AT(N),   [CG_SYM_G] = KEY_AT(G)};

static int64_t *key_field(cg_tune_key *k, cg_sym s) {
    return (unsigned)s < CG_SYM_COUNT && key_at[s] ? (int64_t *)((char *)k + key_at[s] - 1) : NULL;
}

int64_t cg__tune_key_dim(const cg_tune_key *k, cg_sym s) {
    int64_t *f = key_field((cg_tune_key *)k, s);
    return f ? *f : 0;
}

int64_t cg__tune_shape_dim(const cg_tune_shape *sh, cg_sym s) {
    return (unsigned)s < CG_SYM_COUNT ? sh->shape.dim[s] : 0;
}

int64_t cg__tune_shape_seq(const cg_tune_shape *sh) {
    return (unsigned)sh->shape.op < CG_OP_COUNT ? sh->shape.dim[cg__op_desc(sh->shape.op)->seq] : 0;
}

void cg__tune_shape_set_seq(cg_tune_shape *sh, int64_t n) {
    if ((unsigned)sh->shape.op < CG_OP_COUNT) sh->shape.dim[cg__op_desc(sh->shape.op)->seq] = n;
}

int cg__tune_shape_family(const cg_tune_shape *sh) {
    return (unsigned)sh->shape.op < CG_OP_COUNT ? cg__tune_family_index(cg__op_desc(sh->shape.op)) : -1;
}

void cg__tune_shape_init(cg_tune_shape *sh, cg_op op) {
    memset(sh, 0, sizeof *sh);
    sh->shape.size = sizeof sh->shape;
    sh->shape.op = op;
    sh->shape.layout = CG_LAYOUT_TOKEN_MAJOR;
    sh->shape.dtype = CG_F32;
}

void cg__tune_shape_sig(const cg_tune_shape *sh, char *buf, size_t cap) {
    const cg_shape *s = &sh->shape;
    const cg_op_desc *d = cg__op_desc(s->op);
    int dt[CG_OP_MAX_TENSORS];
    for (int i = 0; i < d->nt; i++) /* as a call of the shape has them: absent, 16-bit or float32 */
        dt[i] = d->t[i].optional && !(s->given >> i & 1) ? -1 : (s->half >> i & 1) ? (int)s->dtype : (int)CG_F32;
    cg__op_dtype_sig(d, dt, buf, cap);
}

cg_status cg__tune_shape_set_sig(cg_context *ctx, cg_tune_shape *sh, const char *sig) {
    cg_shape *s = &sh->shape;
    const cg_op_desc *d = cg__op_desc(s->op);
    int dt[CG_OP_MAX_TENSORS];
    cg_status st = cg__op_dtype_unsig(ctx, d, sig, dt);
    if (st != CG_OK) return st;
    s->dtype = CG_F32, s->half = 0, s->given = 0;
    for (int i = 0; i < d->nt; i++) {
        if (d->t[i].optional) s->given |= (uint64_t)1 << i;
        if (dt[i] >= 0 && cg__dtype_half((cg_dtype)dt[i])) s->dtype = (cg_dtype)dt[i], s->half |= (uint64_t)1 << i;
    }
    return CG_OK;
}

const cg_op_desc *cg__tune_family_at(int f) {
    for (int i = 0, n = 0; f >= 0 && i < CG_OP_COUNT; i++) {
        const cg_op_desc *d = cg__op_desc((cg_op)i);
        if (!d->bwd && n++ == f) return d;
    }
    return NULL;
}

int cg__tune_family_index(const cg_op_desc *d) {
    const cg_op_desc *x;
    for (int f = 0; (x = cg__tune_family_at(f)) != NULL; f++)
        if (!strcmp(x->family, d->family)) return f;
    return -1;
}

const cg_op_desc *cg__tune_family(const cg_tune_shape *s) { return cg__tune_family_at(cg__tune_shape_family(s)); }

const cg_op_desc *cg__tune_key_family(const cg_tune_key *k) {
    for (int i = 0; i < CG_OP_COUNT; i++)
        if (!cg__op_desc((cg_op)i)->bwd && !strcmp(cg__op_desc((cg_op)i)->family, k->op)) return cg__op_desc((cg_op)i);
    return NULL;
}

int cg__tune_cpu_threads(cg_context *ctx) { return ctx->threads > 0 ? ctx->threads : cg__online_cores(); }

cg_status cg__tune_device_key(cg_context *ctx, const char *backend, cg_tune_key *k) {
    snprintf(k->backend, sizeof k->backend, "%s", backend);
    snprintf(k->version, sizeof k->version, "%s", cg_version());
    k->cc = k->sm_count = k->threads = 0;
    k->nvrtc[0] = k->driver[0] = '\0';
    if (!strcmp(backend, "cpu")) {
        /* the variant (runtime/cpu/cpu_isa.h) runs other kernels: another device */
        char dev[200];
        snprintf(dev, sizeof dev, "%s [%s]", cg__cpu_model(), cg__cpu_isa_ops()->name);
        cg__clean_text(k->device, sizeof k->device, dev);
        k->threads = cg__tune_cpu_threads(ctx);
        return CG_OK;
    }
    const cg_kexec *kx = NULL;
    if (!strcmp(backend, "cuda")) kx = &cg__kexec_cuda;
    else if (!strcmp(backend, "emulate")) kx = &cg__kexec_emu;
    else return cg__err(ctx, CG_EINVAL, "backend: \"%s\" cannot be tuned (expected cpu, cuda or emulate)", backend);
    if (!kx || !kx->device) return cg__err(ctx, CG_EUNSUPPORTED, "backend %s is not built into this library", backend);
    cg_devinfo dev;
    memset(&dev, 0, sizeof dev);
    cg_status st = kx->device(ctx, &dev);
    if (st != CG_OK) return st;
    cg__clean_text(k->device, sizeof k->device, dev.name);
    k->cc = dev.arch;
    k->sm_count = dev.sm_count;
    if (dev.emulated) {
        /* The emulator's speed is the host's: key it on the CPU too. */
        char both[400];
        snprintf(both, sizeof both, "%s on %s", dev.name, cg__cpu_model());
        cg__clean_text(k->device, sizeof k->device, both);
        k->threads = cg__tune_cpu_threads(ctx);
    } else {
        char nv[64], dr[64];
        cuda_versions(nv, sizeof nv, dr, sizeof dr);
        cg__clean_text(k->nvrtc, sizeof k->nvrtc, nv);
        cg__clean_text(k->driver, sizeof k->driver, dr);
    }
    return CG_OK;
}

cg_status cg__tune_key_make(cg_context *ctx, const char *backend, const cg_tune_shape *s, int bwd, cg_tune_key *k) {
    memset(k, 0, sizeof *k);
    cg_status st = cg__tune_device_key(ctx, backend, k);
    if (st != CG_OK) return st;
    const cg_op_desc *d = cg__tune_family(s);
    if (!d)
        return cg__err(ctx, CG_EINVAL, "shape.op: %d is not an op (expected 0 .. %d)", (int)s->shape.op,
                       CG_OP_COUNT - 1);
    snprintf(k->op, sizeof k->op, "%s", d->family);
    snprintf(k->dir, sizeof k->dir, "%s", bwd ? "bwd" : "fwd");
    for (int i = 0; i < d->nkey; i++) /* the op table's key column */
        if (key_field(k, d->key[i])) *key_field(k, d->key[i]) = cg__tune_shape_dim(s, d->key[i]);
    cg__tune_shape_sig(s, k->dtype, sizeof k->dtype);
    snprintf(k->precision, sizeof k->precision, "fp32");
    k->seq_bucket = cg__tune_bucket(cg__tune_shape_seq(s));
    k->varlen = s->shape.longest > 0 ? cg__tune_bucket(s->shape.longest) : 0;
    if (!strcmp(backend, "cpu")) {
        const int64_t tasks =
            cg__tune_bucket(s->shape.dim[CG_SYM_B] * cg__tune_shape_dim(s, d->par)); /* the op table's par column */
        k->par = (int)(tasks < k->threads ? tasks : k->threads);
    }
    return CG_OK;
}

/* The longest sequence of a varlen problem (its offsets were validated); 0 when not varlen. */
static int64_t varlen_max(const cg_op_desc *d, const void *prob) {
    const cg_view *cu = cg__prob_cu(d, prob);
    const int64_t n = *cg__prob_nseq(d, prob);
    int64_t m = 0;
    for (int64_t i = 0; cu->p && i < n; i++) {
        const int64_t len = cg__cu_at(cu, i + 1) - cg__cu_at(cu, i);
        if (len > m) m = len;
    }
    return cu->p && m == 0 ? 1 : m; /* all empty: still the varlen class */
}

void cg__tune_shape_of(cg_op op, const void *prob, cg_tune_shape *s) {
    const cg_op_desc *d = cg__op_desc(op);
    memset(s, 0, sizeof *s);
    cg__shape_of_prob(d, prob, &s->shape); /* the call's shape: extents, dtype, given tensors */
    s->shape.longest = varlen_max(d, prob);
}

void cg__tune_key_text(const cg_tune_key *k, int with_seq, char *buf, size_t cap) {
    char seq[80] = "";
    if (with_seq) snprintf(seq, sizeof seq, "seq=%lld;", (long long)k->seq_bucket);
    if (k->varlen) /* varlen keys only: every other key's text is as before */
        snprintf(seq + strlen(seq), sizeof seq - strlen(seq), "varlen=%lld;", (long long)k->varlen);
    snprintf(buf, cap,
             "backend=%s;op=%s;dir=%s;dk=%lld;dv=%lld;H=%lld;D=%lld;N=%lld;G=%lld;dtype=%s;precision=%s;%s"
             "device=%s;cc=%d;sm=%d;threads=%d;par=%d;nvrtc=%s;driver=%s;version=%s",
             k->backend, k->op, k->dir, (long long)k->dk, (long long)k->dv, (long long)k->H, (long long)k->D,
             (long long)k->N, (long long)k->G, k->dtype, k->precision, seq, k->device, k->cc, k->sm_count, k->threads,
             k->par, k->nvrtc, k->driver, k->version);
}

void cg__tune_key_brief(const cg_tune_key *k, char *buf, size_t cap) {
    char dt[80] = ""; /* float32 keys read as before #15 */
    if (k->dtype[0] && strcmp(k->dtype, "f32")) snprintf(dt, sizeof dt, " %s", k->dtype);
    if (k->varlen) snprintf(dt + strlen(dt), sizeof dt - strlen(dt), " varlen max<=%lld", (long long)k->varlen);
    /* "cpu ssd fwd dk128 dv128 G2 H8 T<=2048": the key column's extents, then the sequence's bucket */
    const cg_op_desc *d = cg__tune_key_family(k);
    char ext[160] = "";
    for (int i = 0; d && i < d->nkey; i++)
        snprintf(ext + strlen(ext), sizeof ext - strlen(ext), " %s%lld", cg_sym_name(d->key[i]),
                 (long long)cg__tune_key_dim(k, d->key[i]));
    snprintf(buf, cap, "%s %s %s%s %s<=%lld%s", k->backend, k->op, k->dir, ext, d ? cg_sym_name(d->seq) : "T",
             (long long)k->seq_bucket, dt);
}
