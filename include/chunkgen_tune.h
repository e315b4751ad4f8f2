/*
 * chunkgen_tune.h -- part of chunkgen's public API: tuning, the config store (lookup, visit, export, import) and the cache directories.
 * chunkgen.h includes this file (include that, not this); the conventions and the growth rule at
 * the top of chunkgen.h hold here too.
 */
#ifndef CHUNKGEN_TUNE_H
#define CHUNKGEN_TUNE_H

#ifndef CHUNKGEN_H
#error "include <chunkgen.h>, which includes chunkgen_tune.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------- the config store
 * Tuned configs live in <cache dir>/configs, one entry per tuning key (op, direction, the
 * shape's key extents, dtype, seq bucket, device, threads, versions; docs/tuning.md). The
 * library alone reads and writes it: these calls list, export and import entries. */

/* Which entries: each NULL member matches all ("all" too); device matches a substring. */
typedef struct cg_config_filter {
    size_t size;         /* sizeof(cg_config_filter) of the caller's header, or 0 (growth rule) */
    const char *backend; /* "cpu", "cuda", "emulate" */
    const char *op;      /* an op family: "ssd", "sscan" */
    const char *dir;     /* "fwd", "bwd" */
    const char *device;  /* entries whose device name contains this text */
    int partial;         /* 1: also unfinished (interrupted) tunes */
} cg_config_filter;
#define CG_CONFIG_FILTER_INIT CG__INIT(cg_config_filter)

/* One stored entry, read-only, as cg_config_visit shows it (strings owned by the library,
 * valid during the visit's callback). */
typedef struct cg_config_entry {
    size_t size;     /* sizeof(cg_config_entry) of the library */
    const char *key; /* one line, e.g. "cpu ssd fwd dk128 dv128 G2 H8 T<=2048" */
    const char *backend, *op, *dir;
    const char *device;                   /* GPU name, or the CPU model and the CPU path's variant */
    int cc, sm_count;                     /* cuda: compute capability x10 and SMs; 0 otherwise */
    int threads;                          /* CPU threads of the key; 0 for GPUs */
    const char *nvrtc, *driver, *version; /* NVRTC, driver ("" on CPU) and chunkgen versions */
    int complete, truncated;              /* a finished tune; one the budget cut short */
    const char *config;                   /* the winner ("" = the default config); NULL when none passed */
    double median_ms;                     /* the winner's median time */
    double default_ms;                    /* the default config's median; 0 when not measured */
    int ncandidates;                      /* configs measured (the entry's JSON lists each) */
    const char *created, *host;           /* UTC ISO 8601 time and host name of the tune */
    const char *path;                     /* the entry's file */
    const char *json;                     /* the entry as cg_config_export writes it (compact JSON) */
} cg_config_entry;
/* Return nonzero to stop the visit. */
typedef int (*cg_config_visit_fn)(const cg_config_entry *entry, void *user);
/* Visit ctx's store entries that match filter (NULL: every finished one), in key order
 * (backend, device, op, extents, fwd before bwd, seq bucket, version). A bad file is
 * skipped with a CG_PROGRESS_MESSAGE (level WARN, subject its path) and counted in *bad
 * (may be NULL). CG_ENOTFOUND (message) when the store directory does not exist. The entry
 * fn gets is the library's, valid during that call only; user is the caller's. */
CG_API cg_status cg_config_visit(cg_context *ctx, const cg_config_filter *filter, cg_config_visit_fn fn, void *user,
                                 int *bad);
/* The store directory of ctx, "<cache dir>/configs" (owned by the library, valid until the
 * next call on this thread). */
CG_API const char *cg_config_store_dir(cg_context *ctx);
/* The matching entries as one JSON document {"schema": 1, "kind": "chunkgen-configs",
 * "chunkgen": VERSION, "exported": TIME, "entries": [...]} (docs/tuning.md), indented,
 * into *json (the caller frees it with cg_free; *len without the final NUL, may be NULL);
 * *count: the entries written (may be NULL). A missing store exports no entries. */
CG_API cg_status cg_config_export(cg_context *ctx, const cg_config_filter *filter, char **json, size_t *len,
                                  int *count);
/* Write n bytes to path as the library writes its own files: a temp file in the same
 * directory, fsync'ed and renamed over path (a reader never sees half a file; a symlink
 * planted at the temp name is not followed). CG_EIO with the reason otherwise. data stays
 * the caller's (not kept). */
CG_API cg_status cg_write_file(cg_context *ctx, const char *path, const void *data, size_t n);

typedef struct cg_import_options {
    size_t size;       /* sizeof(cg_import_options) of the caller's header, or 0 (growth rule) */
    int allow_foreign; /* 1: keep entries measured on another device */
    int dry_run;       /* 1: check and report, write nothing */
} cg_import_options;
#define CG_IMPORT_OPTIONS_INIT CG__INIT(cg_import_options)
typedef struct cg_import_stats {
    size_t size;         /* sizeof(cg_import_stats) of the caller's header, or 0 (growth rule) */
    int added, replaced; /* entries written: new keys, and keys whose entry they replaced */
    int kept;            /* entries the merge rule did not take (the store's, or another, won) */
    int rejected;        /* malformed, unfinished, foreign, refused by the constraints, or not written */
    int messages;        /* CG_PROGRESS_MESSAGE events sent, one per entry not simply added */
} cg_import_stats;
#define CG_IMPORT_STATS_INIT CG__INIT(cg_import_stats)
/* Merge tuned configs into ctx's store. Each source is a file written by cg_config_export
 * (or one entry object, or an array of them), "-" for stdin, or a store directory (a cache
 * directory or its configs/). Every entry is validated; each one rejected or not taken
 * gets a CG_PROGRESS_MESSAGE (subject: "SOURCE: entry I" or the file; level WARN for a
 * rejection). All entries of a key, the store's and every source's, are merged in one
 * deterministic choice (docs/tuning.md), whatever the order of the sources. Nothing is
 * written when a source cannot be read (CG_EINVAL naming it). opts, stats may be NULL;
 * everything passed in stays the caller's (nothing is kept), *stats is filled. */
CG_API cg_status cg_config_import(cg_context *ctx, const char *const *sources, int nsources,
                                  const cg_import_options *opts, cg_import_stats *stats);
/* As cg_config_import, from a document in memory (json, len bytes); what names it in the
 * messages (NULL: "json"). */
CG_API cg_status cg_config_import_json(cg_context *ctx, const char *json, size_t len, const char *what,
                                       const cg_import_options *opts, cg_import_stats *stats);

/* ------------------------------------------------------------------ the caches
 * The cache directory holds chunkgen's own files only in its areas (the config store, the
 * kernel cache, kept sources of failed emulator compiles). Prune and clear remove only
 * files the library recognizes as its own by name and content (a file of another kind is
 * never opened blocking, a symlink never followed) and report the rest. Per-file details
 * are CG_PROGRESS_MESSAGE events: a bad entry (level WARN, task the area, subject the
 * path, text why), a file left because it is not chunkgen's (INFO, task the area or ""
 * for the cache directory itself, subject the path), a removal that failed (ERROR, subject
 * the path, text the reason). */
/* (An area is a member of cg_cache_report; new areas are appended there, and
 * cg_cache_area itself never grows.) */
typedef struct cg_cache_area {
    const char *name;       /* its subdirectory: "configs", "kernels", "emu-failed" */
    int64_t entries, bytes; /* valid entries; bytes of every file the area holds */
    int64_t bad;            /* entries that fail their check (JSON, schema, checksum, key; kernel format) */
    int64_t temp_files;     /* leftovers of interrupted writes */
    int64_t removed, removed_bytes, failed, left; /* prune/clear: removed, could not remove, not ours */
} cg_cache_area;
typedef struct cg_cache_report {
    size_t size;                          /* sizeof(cg_cache_report) of the caller's header, or 0 (growth rule) */
    int store_exists;                     /* the config store's directory exists */
    int64_t complete, unfinished;         /* config entries: finished tunes and interrupted ones */
    int64_t removed_version, removed_old; /* prune: entries of another chunkgen version, older than the limit */
    int64_t left_root;                    /* clear with all: other files in the cache directory itself */
    cg_cache_area configs, kernels, emu_failed;
} cg_cache_report;
#define CG_CACHE_REPORT_INIT CG__INIT(cg_cache_report)
/* Each of these fills the caller's *report (may be NULL; its area names are static strings).
 * Count the config store's entries (complete, unfinished, bad, temp files, bytes). */
CG_API cg_status cg_cache_stats(cg_context *ctx, cg_cache_report *report);
/* Check every config entry and every kernel cache entry; a bad one is a message. */
CG_API cg_status cg_cache_verify(cg_context *ctx, cg_cache_report *report);
/* Remove bad entries (both stores), leftovers of interrupted writes older than 10 minutes,
 * config entries of other chunkgen versions, and (older_than_days > 0) entries older than that. */
CG_API cg_status cg_cache_prune(cg_context *ctx, double older_than_days, cg_cache_report *report);
/* Remove every config entry; all = 1: also the kernel cache and the kept emulator sources. */
CG_API cg_status cg_cache_clear(cg_context *ctx, int all, cg_cache_report *report);
/* fn(name, path, files, bytes, user) for each subdirectory of the cache directory but the
 * config store (files and bytes of its tree; nothing is opened). Nonzero from fn stops. */
typedef int (*cg_cache_dir_fn)(const char *name, const char *path, int64_t files, int64_t bytes, void *user);
CG_API cg_status cg_cache_dirs(cg_context *ctx, cg_cache_dir_fn fn, void *user);
/* ------------------------------------------------------------------- files
 * The library's own way to write a file atomically, for a caller's outputs (the CLI's
 * .npy files) so that they are written as the caches are: a fresh temp file in the final
 * file's directory, "<dir>/.tmp.<host>.<pid>.<16 hex>.<final name>", created
 * O_CREAT|O_EXCL|O_NOFOLLOW (a planted symlink cannot redirect it, an existing file is
 * never reused), then renamed over the final path by the caller. */
/* mkdir -p path (mode 0755): 0 (also when it is a directory already), else an errno value
 * (ENOTDIR when path or a parent is not a directory). */
CG_API int cg_mkdirs(const char *path);
/* Create the temp file for final_path: returns its fd (O_WRONLY, mode 0644) and its path in
 * tmp, or -1 with errno set (ENAMETOOLONG when tmpcap is too small). */
CG_API int cg_tmp_create(const char *final_path, char *tmp, size_t tmpcap);
/* ------------------------------------------------------------------- tuning
 * A tune enumerates a backend's parameter space for each shape (op, extents, dtype),
 * verifies every candidate against the float64 reference on a reduced problem, times it on
 * the full shape and stores the fastest under the shape's tuning key (docs/tuning.md).
 * Progress: the context's progress callback (a task per key: START, a STEP per candidate,
 * DONE with its result). An interrupted tune keeps what it measured; a rerun resumes. */
typedef struct cg_tune_options {
    size_t size;        /* sizeof(cg_tune_options) of the caller's header, or 0 (growth rule) */
    cg_backend backend; /* CG_BACKEND_CPU, _CUDA, _EMULATE; _AUTO: cuda when a device is there, else cpu */
    int directions;     /* 0: each shape's own op; 1 forward, 2 backward, 3 both: the ops of its family */
    const char *family; /* the built-in set (no shapes given): only this op family ("ssd", "sscan"); NULL all */
    double budget_s;    /* stop starting new work after this long (a key cut short is stored as
                              * truncated and resumed by the next tune); <= 0: none */
    int jobs;           /* compile workers for cuda/emulate; 0: every core */
    double min_time_s;  /* time each candidate at least this long; 0: the backend's default */
    int max_candidates; /* only the first N configs of each space; 0: all */
    int force;          /* 1: retune keys that are tuned already */
    int64_t verify_T;   /* sequence length of the verification problem; 0: automatic */
    int shard, nshards; /* nshards > 1: only the keys of shard `shard` (0-based; by a hash of the key's
                              * shape, so any count works); import the shards' stores together after */
} cg_tune_options;
#define CG_TUNE_OPTIONS_INIT CG__INIT(cg_tune_options)
typedef struct cg_tune_summary {
    size_t size;              /* sizeof(cg_tune_summary) of the caller's header, or 0 (growth rule) */
    cg_backend backend;       /* the backend tuned (CG_BACKEND_AUTO resolved) */
    int keys;                 /* keys of the run (shape x direction) */
    int tuned, resumed;       /* keys tuned now, of which resumed from an interrupted tune */
    int cached;               /* tuned already (or finished by another process meanwhile) */
    int unsupported;          /* keys the backend cannot run (no kernel, dtype, varlen) */
    int failed;               /* keys whose tune failed (the first failure is the call's status) */
    int skipped_budget;       /* keys the budget left for a rerun */
    int other_shards;         /* keys of other shards */
    int candidates, rejected; /* configs measured, and rejected (compile, resources, launch, wrong, timeout) */
    double seconds;
} cg_tune_summary;
#define CG_TUNE_SUMMARY_INIT CG__INIT(cg_tune_summary)
/* Tune shapes[0 .. nshapes) on opts->backend into ctx's store (nshapes 0: the backend's
 * built-in set); opts may be NULL. A shape's layout, optional tensors and scalar options
 * do not matter (the tuner's problems have every tensor); a varlen shape (nseq > 0) needs
 * B = 1 and its longest sequence. CG_OK when every key was tuned, skipped or cached;
 * else the first failure's status and message (the others went to the progress callback).
 * shapes and opts stay the caller's (not kept); *summary (may be NULL) is filled. */
CG_API cg_status cg_tune(cg_context *ctx, const cg_shape *shapes, int nshapes, const cg_tune_options *opts,
                         cg_tune_summary *summary);

/* The config a call of this shape on backend would take from the store (no tune on a miss). */
typedef struct cg_tuned_config {
    size_t size;        /* sizeof(cg_tuned_config) of the caller's header, or 0 (growth rule) */
    char config[256];   /* "k=v,..."; "" when the backend's default config runs */
    const char *source; /* "pinned-env" ($CHUNKGEN_CONFIG), "exact", "nearest-bucket" or "default"; static */
    char key[200];      /* the tuning key in one line, e.g. "cpu ssd fwd dk8 dv8 G1 H2 T<=64" */
    char path[4400];    /* the file of the exact key's entry (whether it exists or not) */
    char device[128];   /* the key's device: the GPU's name, or the CPU model and ISA ("... [avx2]") */
    int threads;        /* cpu, emulate: the key's thread count (ctx's threads); 0 for cuda */
    int cc;             /* cuda, emulate: the key's compute capability x10 (80: sm_80); 0 on the CPU */
} cg_tuned_config;
/* Look up shape's config on backend (CG_BACKEND_CPU, _CUDA, _EMULATE) into *out. CG_ENODEV
 * (message) when the backend has no device here: nothing tuned applies then. */
CG_API cg_status cg_config_lookup(cg_context *ctx, cg_backend backend, const cg_shape *shape, cg_tuned_config *out);
/* The part of a scoped config text (the syntax of $CHUNKGEN_CONFIG and the CLI's --config:
 * "k=v,..." for every op, or "ssd_fwd:k=v;sscan:k=v" with parts scoped to an op or a
 * family) that applies to op, into out[0 .. cap): CG_OK when one applies (the first that
 * does), CG_ENOTFOUND when none does (out ""), CG_EINVAL for an unknown op or scope or a
 * part longer than cap (the reason in err[0 .. errcap)). Every part's scope is checked. */
CG_API cg_status cg_config_scope(const char *text, cg_op op, char *out, size_t cap, char *err, size_t errcap);
/* The backend's built-in shape set (the seeds' shapes; a smaller set on the CPU), forward
 * ops (tune them with directions 3 for both): into shapes[0 .. cap) (the stride is
 * shapes[0].size, 0: this header's sizeof), *n the set's size (which may exceed cap). */
CG_API cg_status cg_tune_builtin_shapes(cg_context *ctx, cg_backend backend, cg_shape *shapes, int cap, int *n);
/* The backend a tune with backend runs on, into *out: CG_BACKEND_AUTO resolved (cuda when
 * a device is here, else cpu); CG_EINVAL for one that cannot be tuned (ref). */
CG_API cg_status cg_tune_backend(cg_context *ctx, cg_backend backend, cg_backend *out);

#ifdef __cplusplus
}
#endif
#endif /* CHUNKGEN_TUNE_H */
