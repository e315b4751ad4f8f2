/* autotune.h -- the autotuner and its config store (private to the library and the
 * tests; callers use the public API of include/chunkgen.h: cg_tune, cg_config_*, cg_cache_*).
 *
 * The files depend on each other one way (no circle): api.c, cache_admin.c -> source.c ->
 * lookup.c -> tuner.c -> tune_prob.c, exchange.c -> agree.c -> cpu_space.c, store.c ->
 * key.c (docs/tuning.md, "Layers").
 *
 * A tuned config is stored under a key (cg_tune_key): op family, direction, the shape
 * fields that change the best config (the op table's key column), dtype,
 * precision class, seq bucket (next power of two of T or L), the device identity (GPU
 * name, compute capability, SM count, NVRTC and driver versions; or the CPU model and
 * thread count) and the chunkgen version. Runtime lookup (lookup.c): exact key, then
 * the nearest seq bucket with the rest of the key equal, then the backend's default.
 *
 * Store (store.c): one JSON file per key under <cache dir>/configs, named by a hash of
 * the key text, written to a temp file in the same directory and renamed into place;
 * readers take no lock. Every file carries the key it belongs to and a checksum; a file
 * that fails to parse, has the wrong schema, a bad checksum or a key that does not hash
 * to its name is a miss, with one warning per process. */
#ifndef CG_AUTOTUNE_H
#define CG_AUTOTUNE_H

#include "internal.h"
#include "gen.h"

#define CG_TUNE_SCHEMA 1     /* schema of store entries and exports */
#define CG_TUNE_CFG_TEXT 256 /* "k=v,k=v" of a config */

/* The direction reaches the spaces as the shape flag CG_KS_BWD (gen.h): `shape.bwd` in
 * Lua. */

/* ------------------------------------------------------------------- keys */

typedef struct cg_tune_key {
    char backend[16];  /* "cpu", "cuda", "emulate" */
    char op[8];        /* the op family (cg_op_desc.family) */
    char dir[4];       /* "fwd", "bwd" */
    int64_t dk, dv, H; /* the extents of the op table's key column (cg_op_desc.key), by symbol; */
    int64_t D, N;      /* 0 for the symbols not in it (the store's schema-1 names) */
    int64_t G;
    char dtype[32];     /* the dtype signature (cg__op_dtype_sig): "f32" (every store before #15),
                           * "bf16", "f16", or "bf16-q-k"; configs never cross dtypes */
    char precision[8];  /* accuracy class: "fp32" (outputs within the fp32 targets) */
    int64_t seq_bucket; /* next power of two >= the sequence (cg_op_desc.seq: T or L) */
    char device[128];   /* GPU name, or the CPU model name and the CPU path's ISA variant ("... [avx2]") */
    int cc;             /* compute capability x10 (cuda); 0 otherwise */
    int sm_count;       /* cuda; 0 otherwise */
    int threads;        /* CPU threads; 0 for GPU backends */
    int par;            /* CPU: tasks that can run at once, min(bucket(B x the op table's par
                           * symbol), threads): whether the batch keeps every thread busy
                           * changes the best config; 0 for GPU backends */
    char nvrtc[32];     /* cuda: NVRTC version; "" otherwise */
    char driver[32];    /* cuda: driver version; "" otherwise */
    char version[16];   /* chunkgen version */
    int64_t varlen;     /* varlen calls' own class (docs/varlen.md): bucket of the longest sequence,
                           * seq_bucket then that of the total tokens; 0 (and absent from the key's
                           * text and JSON): not varlen */
} cg_tune_key;

/* A problem shape to tune (or the shape a runtime call has): the call's cg_shape (its op, any
 * of the family's; the extents by symbol, the sequence at dim[the op's seq]; dtype, half and
 * given: the dtype signature, cg__tune_shape_sig; longest > 0: the varlen class, the longest
 * sequence, with dim[seq] the packed total) and what is no part of a call's shape. */
typedef struct cg_tune_shape {
    cg_shape shape;
    int dirs;      /* cg__tune_run: the directions of this shape (1 fwd, 2 bwd, 3 both);
                                       * 0: the options' dir_mask */
    char name[48]; /* e.g. "g2h8_d128" (informational) */
} cg_tune_shape;

/* The extent of symbol s in a key (its fields are the op table's key column; 0 when the
 * key has no such field) and in a tuner's shape (shape.dim[s]; 0 for a bad s). */
int64_t cg__tune_key_dim(const cg_tune_key *k, cg_sym s);
int64_t cg__tune_shape_dim(const cg_tune_shape *sh, cg_sym s);
/* The sequence of a shape (dim[its op's seq]: T or L; and to set it); its family index (cg__tune_family_at;
 * -1 for a bad op). */
int64_t cg__tune_shape_seq(const cg_tune_shape *sh);
void cg__tune_shape_set_seq(cg_tune_shape *sh, int64_t n);
int cg__tune_shape_family(const cg_tune_shape *sh);
/* A shape of op (every member 0 but the op, the token-major layout and the dtype f32). */
void cg__tune_shape_init(cg_tune_shape *sh, cg_op op);
/* The dtype signature of a shape (cg__op_dtype_sig of its tensors: absent, 16-bit or float32)
 * into buf; and a shape's dtype, half and given from a signature (every optional tensor given,
 * as the tuner's problems have them). CG_EINVAL naming sig when it is not one of the op's. */
void cg__tune_shape_sig(const cg_tune_shape *sh, char *buf, size_t cap);
cg_status cg__tune_shape_set_sig(cg_context *ctx, cg_tune_shape *sh, const char *sig);
/* The op families, in the op table's order of first appearance (the store's and the
 * options' numbering: cg__tune_shape_family, cg_tune_opts.op_mask): the forward op of family
 * f (NULL past the last), and the family index of an op. */
const struct cg_op_desc *cg__tune_family_at(int f);
int cg__tune_family_index(const struct cg_op_desc *d);
/* The forward op of a shape's family (NULL for a bad shape.op), and of a key's op
 * (NULL for an unknown op). */
const struct cg_op_desc *cg__tune_family(const cg_tune_shape *s);
const struct cg_op_desc *cg__tune_key_family(const cg_tune_key *k);
/* Smallest power of two >= n (1 for n <= 1). */
int64_t cg__tune_bucket(int64_t n);
/* Canonical text of the key ("backend=cpu;op=ssd;..."); with_seq = 0 leaves the seq
 * bucket out (the "family" that nearest-bucket lookup compares). */
void cg__tune_key_text(const cg_tune_key *k, int with_seq, char *buf, size_t cap);
/* 64-bit FNV-1a. */
uint64_t cg__tune_hash(const void *data, size_t n, uint64_t seed);
/* Identity of this machine for backend (device fields of the key and the versions).
 * CG_ENODEV when the backend has no device here. */
cg_status cg__tune_device_key(cg_context *ctx, const char *backend, cg_tune_key *k);
/* Full key for shape on backend, direction bwd (0/1). */
cg_status cg__tune_key_make(cg_context *ctx, const char *backend, const cg_tune_shape *s, int bwd, cg_tune_key *k);
/* Shape of a validated problem of op. */
void cg__tune_shape_of(cg_op op, const void *prob, cg_tune_shape *s);

/* Threads the CPU backend uses in ctx. */
int cg__tune_cpu_threads(cg_context *ctx);
/* One line describing the key for tables, e.g. "cpu ssd fwd dk128 dv128 G2 H8 T<=2048". */
void cg__tune_key_brief(const cg_tune_key *k, char *buf, size_t cap);

/* ---------------------------------------------------------------- entries */

typedef enum cg_tune_verdict {
    CG_TV_OK = 0,
    CG_TV_COMPILE,   /* failed to compile/load */
    CG_TV_RESOURCES, /* out of memory, constraints refused at run time */
    CG_TV_LAUNCH,    /* launch or execution error */
    CG_TV_WRONG,     /* outputs outside the accuracy targets */
    CG_TV_TIMEOUT,   /* one run took far longer than the best so far */
    CG_TV_COUNT
} cg_tune_verdict;
const char *cg__tune_verdict_name(cg_tune_verdict v);
int cg__tune_verdict_parse(const char *s, cg_tune_verdict *out);

typedef struct cg_tune_cand {
    char cfg[CG_TUNE_CFG_TEXT]; /* full config, "k=v,..." in the space's order */
    int order;                  /* position in the enumerated space (ties) */
    cg_tune_verdict verdict;
    double median_ms, iqr_ms; /* valid when verdict == OK */
    int reps;
    double err;       /* worst relative error of the verification */
    char detail[160]; /* reason of a rejection */
} cg_tune_cand;

typedef struct cg_tune_entry {
    cg_tune_key key;
    int complete;                      /* 0: a tune in progress or interrupted (resumable) */
    int truncated;                     /* complete, but the budget cut the candidates short */
    char kernel[32];                   /* space the candidates came from, e.g. "ssd_cpu" */
    cg_tune_shape shape;               /* shape that was measured */
    int64_t verify_T;                  /* seq length of the verification problem */
    int best;                          /* index into cand; -1 when none passed */
    double default_ms, default_iqr_ms; /* the untuned (default) config; 0 when not measured */
    char default_cfg[CG_TUNE_CFG_TEXT];
    int space_size; /* configs the constraints accepted */
    int ncand;
    cg_tune_cand *cand; /* malloc'd */
    char created[32];   /* UTC, ISO 8601 */
    char host[64];
} cg_tune_entry;

void cg__tune_entry_free(cg_tune_entry *e);
/* Deep copy (dst must be free'd with cg__tune_entry_free). */
cg_status cg__tune_entry_copy(cg_tune_entry *dst, const cg_tune_entry *src);
/* Append a candidate (grows cand). */
cg_status cg__tune_entry_add(cg_tune_entry *e, const cg_tune_cand *c);
/* The candidate of e with config text cfg, or NULL. */
cg_tune_cand *cg__tune_entry_find(cg_tune_entry *e, const char *cfg);

/* Selection: the fastest passing candidate; candidates whose median lies within the
 * fastest's noise (its IQR, clamped to [rel_tol, CG_TUNE_TIE_MAX] times its median) tie
 * with it, and a tie goes to the smallest `order` (the default config is order 0, then
 * the space's order). Returns an index into c, or -1 when none passed. Second-best (by
 * median, excluding the winner) in *runner_up (-1 when none). */
int cg__tune_select(const cg_tune_cand *c, int n, double rel_tol, int *runner_up);
#define CG_TUNE_TIE_REL 0.02
#define CG_TUNE_TIE_MAX 0.10

/* ------------------------------------------------------------------ JSON
 * Entry <-> JSON object (jansson). to_json adds "schema" and the "checksum" over the
 * canonical text (compact, sorted keys) of everything else. from_json validates every
 * field; on failure returns CG_EINVAL with the reason in why. require_checksum = 0
 * accepts an object without a checksum (hand-written imports), but a checksum that is
 * present must match. */
struct json_t;
struct json_t *cg__tune_entry_to_json(const cg_tune_entry *e);
cg_status cg__tune_entry_from_json(struct json_t *obj, int require_checksum, cg_tune_entry *e, char *why,
                                   size_t whycap);

/* ------------------------------------------------------------------ store */

/* <cache dir>/configs (static per thread buffer; valid until the next call). */
const char *cg__tune_store_dir(cg_context *ctx);
/* File name (no directory) of key's entry: "<16 hex of hash(key text)>.json". */
void cg__tune_entry_file(const cg_tune_key *k, char *buf, size_t cap);
/* Write e atomically (temp file + rename) into dir (created when missing). */
cg_status cg__tune_store_put(cg_context *ctx, const char *dir, const cg_tune_entry *e);
/* Read key's entry. CG_ENOTFOUND when absent; CG_EIO (message in ctx) when present but
 * bad. */
cg_status cg__tune_store_get(cg_context *ctx, const char *dir, const cg_tune_key *k, cg_tune_entry *e);
/* Read and validate one entry file (path). On failure: CG_EIO/CG_ENOTFOUND, why set. */
cg_status cg__tune_store_read(const char *path, cg_tune_entry *e, char *why, size_t whycap);
/* Visit every entry file of dir in name order: fn(path, entry or NULL, why) where a NULL
 * entry means the file is bad (why says why). fn returns nonzero to stop. Temp files are
 * not visited. Returns the number of files visited, or -1 when dir cannot be opened. */
typedef int (*cg_tune_visit_fn)(void *arg, const char *path, const cg_tune_entry *e, const char *why);
int cg__tune_store_scan(const char *dir, cg_tune_visit_fn fn, void *arg);
/* Send "ignoring tuned-config entry PATH: WHY" to the log callback once per path per process. */
void cg__tune_warn_once(const char *path, const char *why);
/* The store's write generation in this process: bumped by every write, removal or
 * cg__tune_store_changed; the lookup index (lookup.c) reloads when it moved. */
unsigned cg__tune_store_gen(void);
/* Something changed a store (another process, a removal): bump the generation. */
void cg__tune_store_changed(void);
/* Atomic write of bytes to dir/name (temp in dir, fsync, rename). */
cg_status cg__tune_write_atomic(cg_context *ctx, const char *dir, const char *name, const void *data, size_t n);
/* mkdir -p. 0 on success. */
int cg__tune_mkdirs(const char *path);

/* ------------------------------------------------------------ CPU spaces
 * generator/cpu/<name>.lua, same convention as generator/kernels/<name>.lua with
 * backend = "cpu" (name, op, space, order, valid, default; no template or launch),
 * evaluated by the generator core: *out (malloc'd, *n configs) is cg__gen_space's list,
 * *def (when not NULL) cg__gen_resolve's default (empty when no config is valid).
 * CG_ENOTFOUND when generator/cpu/<kernel>.lua does not exist. */
cg_status cg__tune_cpu_space(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags,
                             const cg_devinfo *dev, cg_cfg **out, int *n, cg_cfg *def);

/* ------------------------------------------------------------ agreement
 * agree.c: the deterministic choice between entries of one key (see there), shards,
 * the Lua validity check of stored configs, and the test-only fake measurements. */

/* Index of the entry of v[0..n) (all of one key) that the merge rule keeps: a finished
 * entry whose best median is fastest, unless others lie within the noise (the larger
 * IQR of the two, clamped to [CG_TUNE_TIE_REL, CG_TUNE_TIE_MAX] of the median): then
 * the first by the best config's order, config text, reps, median, created, host.
 * Depends on the set only, not on its order. -1 when n == 0. */
int cg__tune_entry_pick(const cg_tune_entry *const *v, int n);
/* 1 when the merge rule keeps a over b. */
int cg__tune_entry_beats(const cg_tune_entry *a, const cg_tune_entry *b);
/* Shard (0..n-1) of key: hash of its shape fields only (no device, threads, version). */
int cg__tune_shard_of(const cg_tune_key *k, int n);
/* CHUNKGEN_TUNE_FAKE_TIMING set (and not "0"): the tuner does not time candidates but
 * takes a fixed function of (key, config) as their median (0.5..16.5 ms, IQR 0.5 %, 5
 * reps) -- for tests of the merge and shard logic only; verification still runs. */
int cg__tune_fake_timing(void);
void cg__tune_fake_measure(const cg_tune_key *k, const char *cfg, cg_tune_cand *c);
/* Space kernel name of backend and op: the op's name for generated kernels ("ssd_fwd"),
 * "<family>_cpu" for the CPU path (valid until the next call on this thread). */
const char *cg__tune_space_kernel(const char *backend, const struct cg_op_desc *op);
/* The op of a tuner's shape's family in direction bwd. */
const struct cg_op_desc *cg__tune_op(const cg_tune_shape *s, int bwd);
/* The call's shape (cg_shape) of the tuner's problem of s in direction bwd, which has every
 * tensor and every scalar option set, into *out; returns the shape flags it adds for the
 * generator (gen.h, cg__shape_kflags' extra: CG_KS_BWD for the backward). */
int cg__tune_call_shape(const cg_tune_shape *s, int bwd, cg_shape *out);
/* The configs of kernel's space for shape and flags (cg__tune_call_shape) on key's backend
 * (CPU: the key's device and threads; cuda/emulate: this machine's device, dev filled),
 * and its default in *def. */
cg_status cg__tune_space(cg_context *ctx, const cg_tune_key *key, const char *kernel, const cg_shape *shape, int flags,
                         cg_devinfo *dev, cg_cfg **cfgs, int *n, cg_cfg *def);
/* CG_OK when e's best config is one the Lua constraints accept for e's key (the check
 * every tuned config passed); else CG_EINVAL (or the space's error) with why set. */
cg_status cg__tune_entry_check_space(cg_context *ctx, const cg_tune_entry *e, char *why, size_t cap);

/* ------------------------------------------------------------------ tuner */

typedef struct cg_tune_opts {
    int op_mask;            /* bit f: op family f (cg__tune_family_at); default every family */
    int dir_mask;           /* 1: fwd, 2: bwd */
    double budget_s;        /* whole tune; <= 0: none */
    int jobs;               /* compile workers for generated backends; 0: cores */
    double min_time_s;      /* measure each candidate at least this long (0: backend default) */
    int min_reps, max_reps; /* 0: defaults */
    int force;              /* retune keys that have a complete entry */
    int64_t verify_T;       /* seq length of the verification problem (0: automatic) */
    int max_candidates;     /* 0: all */
    int shard, nshards;     /* tune only the keys with cg__tune_shard_of(key, nshards) == shard */
} cg_tune_opts;

typedef struct cg_tune_sum {
    int keys, tuned, cached, resumed, failed, skipped_budget, unsupported;
    int other_shards; /* keys of other shards (--shard) */
    int kept_other;   /* finished by another process with a result the merge rule keeps */
    int candidates, rejected;
    double seconds;
} cg_tune_sum;

void cg__tune_opts_default(cg_tune_opts *o);
/* Tune every (shape, direction) of shapes on backend ("cpu", "cuda", "emulate"). */
cg_status cg__tune_run(cg_context *ctx, const char *backend, const cg_tune_shape *shapes, int nshapes,
                       const cg_tune_opts *o, cg_tune_sum *sum);

/* ---------------------------------------------------------------- import
 * Merge entries from an export document ({"schema", "kind", "entries": [...]}), an array
 * of entries or one entry object into the store. Every rejected entry gets one
 * CG_PROGRESS_MESSAGE on ctx's progress callback (malformed, unfinished, measured on a
 * foreign device, refused by the constraints);
 * when the store holds the key already, the merge rule (cg__tune_entry_pick) decides. CG_EINVAL (message in ctx) when the file is
 * not JSON or not one of those shapes. */
typedef struct cg_tune_import_stats {
    int added, replaced, kept, rejected;
    int messages; /* per-entry messages sent */
} cg_tune_import_stats;
cg_status cg__tune_import_json(cg_context *ctx, struct json_t *doc, const char *what, int allow_foreign, int dry_run,
                               cg_tune_import_stats *s);
/* Several sources at once (files, "-" for stdin, or store directories: a cache directory
 * or its configs/): all entries of a key and the store's are merged in one choice
 * (cg__tune_entry_pick), so the result does not depend on the order of the sources.
 * Imported configs must pass the Lua constraints of their key (like tuned ones).
 * Nothing is written when a source cannot be read (CG_EINVAL). */
cg_status cg__tune_import_files(cg_context *ctx, const char *const *paths, int npaths, int allow_foreign, int dry_run,
                                cg_tune_import_stats *s);
/* path "-" reads stdin. */
cg_status cg__tune_import_file(cg_context *ctx, const char *path, int allow_foreign, int dry_run,
                               cg_tune_import_stats *s);

/* The store's answer for shape s of op on backend, as a call would get it without tuning
 * on a miss ($CHUNKGEN_CONFIG pins, exact key, nearest bucket, default): cfg text, its
 * source and the key (cg_config_lookup). */
cg_status cg__tune_lookup_shape(cg_context *ctx, const char *backend, cg_op op, const cg_tune_shape *s, char *cfg,
                                size_t cap, cg_cfg_source *src, cg_tune_key *k);
/* Lookup without the dispatcher (tests, `chunkgen show`): cfg text and level. */
cg_status cg__tune_lookup_key(cg_context *ctx, const cg_tune_key *k, char *cfg, size_t cap, cg_cfg_source *src);
/* The config source the autotuner installs in every context (lookup.c). */
extern const cg_config_source cg__tune_config_source;

#endif /* CG_AUTOTUNE_H */
