/* test_gen_nvrtc.c -- every config of every kernel compiled by NVRTC for sm_80 and
 * sm_90 (ptxas: no spills, shared memory and registers within the arch's limits), in
 * parts that ctest runs as separate tests. */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "ptxas_log.h"
#include "gen.h"
#include "gen_shapes.h"
#include "sweep_sample.h"

#include <pthread.h>

/* ------------------------------------------------- NVRTC, every config */

typedef struct job {
    char *source;
    char name[192];
    char cfg[256];
    int shape;
    int kernel; /* index into cg__gen_kernels' list */
    int threads;
    int64_t dyn_smem;
    /* results */
    cg_status st;
    char msg[1024];
    cg_ptxas_info info;
    double ms;  /* compile time (wall), 0 for a cache hit */
    int cached; /* the ptxas log came from the kernel cache */
    int same_as; /* -1, or an earlier job with the same rendered source (name included):
                  * compiled once, its CUBIN's ptxas facts checked for both */
    uint64_t hash[2];
} job;

typedef struct pool_arg {
    job *jobs;
    const int *order; /* the jobs longest source first: the slow compiles do not trail */
    int n;
    int arch;
    int next;
    pthread_mutex_t mu;
    const char *kdir;     /* the kernel cache ($CHUNKGEN_CACHE_DIR/kernels) */
    char nvrtc_id[1024];
} pool_arg;

static void *worker(void *arg) {
    pool_arg *pa = arg;
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return NULL;
    for (;;) {
        pthread_mutex_lock(&pa->mu);
        int i = pa->next++;
        pthread_mutex_unlock(&pa->mu);
        if (i >= pa->n) break;
        job *j = &pa->jobs[pa->order[i]];
        if (j->same_as >= 0) continue;
        void *bin = NULL;
        size_t len = 0;
        char *log = NULL, *key = NULL;
        /* With CHUNKGEN_TEST_KCACHE=dir, a kernel cache keyed as the executor keys CUBINs
         * (source, options, compiler build, arch): an entry is the result of this very
         * compile, ptxas log included, so the same checks hold. scripts/test.sh gives
         * the release and sanitizer runs one such dir: the second compiles nothing the
         * first did. Unset: everything is compiled. */
        if (pa->kdir && cg__cubin_key(ctx, pa->nvrtc_id, pa->arch, j->name, j->source, &key) == CG_OK &&
            cg__kcache_get(pa->kdir, j->name, key, &bin, &len, &log) == CG_OK) {
            j->st = CG_OK;
            j->cached = 1;
        } else {
            double t0 = (double)cg__jit_now_ns();
            /* every module splits in 2 threads (the same SASS as any split count the
             * executor uses: one cache key); the pool keeps the cores busy */
            j->st = cg__nvrtc_compile_threads(ctx, j->name, j->source, pa->arch, 2, &bin, &len, &log);
            j->ms = ((double)cg__jit_now_ns() - t0) / 1e6;
            if (j->st == CG_OK && key) (void)cg__kcache_put(pa->kdir, j->name, key, bin, len, log);
        }
        if (j->st != CG_OK) snprintf(j->msg, sizeof j->msg, "%s", cg_errmsg(ctx));
        else cg__ptxas_parse(log, &j->info);
        if (j->st == CG_OK && len < 16) j->st = CG_EINTERNAL;
        free(key);
        free(bin);
        free(log);
    }
    cg_context_free(ctx);
    return NULL;
}

/* qsort order of job indices: longer source first (a proxy for compile time), then index */
static const job *g_sort_jobs;
static int longer_first(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    size_t li = strlen(g_sort_jobs[i].source), lj = strlen(g_sort_jobs[j].source);
    return li != lj ? (li < lj ? 1 : -1) : (i > j) - (i < j);
}

/* The jobs of one sweep: the configs of every kernel that cg_sweep_select keeps (the
 * covering sample in CI, every config under CHUNKGEN_TEST_SWEEP=full; each config once,
 * with the shapes taking turns, plus each shape's default), and of those the shard-th of
 * every nshards (counted per kernel, defaults included: every shard holds its part of
 * every kernel's space, and the shards of one arch together hold every job exactly once).
 * The release and sanitizer runs select the same jobs, so the second compiles nothing
 * (CHUNKGEN_TEST_KCACHE). *nfam gets the number of generated-kernel families; *nunion
 * (when not NULL) the configs before the selection, over every kernel. */
static int sweep_jobs(cg_context *ctx, int arch, int shard, int nshards, cg_devinfo *dev, job **out, int *nfam,
                      int *nunion) {
    const char **names;
    int nk = 0;
    if (nunion) *nunion = 0;
    *out = NULL;
    *nfam = 0;
    CG_CHECK(cg__devinfo_arch(arch, dev), "arch %d", arch);
    CG_CHECK_OK(ctx, cg__gen_kernels(ctx, &names, &nk));
    int cap = 4096, nj = 0;
    job *jobs = calloc((size_t)cap, sizeof *jobs);
    if (!jobs) return 0;
    /* CHUNKGEN_TEST_KERNELS=a,b restricts the run to those kernels (local iteration) */
    const char *only = getenv("CHUNKGEN_TEST_KERNELS");
    *nfam = nk;
    for (int k = 0; k < nk; k++) {
        if (is_cpu_space(ctx, names[k])) { /* nothing to compile */
            --*nfam;
            continue;
        }
        if (only && *only) {
            char list[512];
            snprintf(list, sizeof list, ",%s,", only);
            char want[80];
            snprintf(want, sizeof want, ",%s,", names[k]);
            if (!strstr(list, want)) continue;
        }
        cg_cfg *sp[NSHAPES];
        int sn[NSHAPES];
        for (int si = 0; si < NSHAPES; si++) {
            cg_shape s = shape_of(si);
            sp[si] = NULL;
            sn[si] = 0;
            CG_CHECK_OK(ctx, cg__gen_space(ctx, names[k], &s, FLAGS_OF(si), dev, &sp[si], &sn[si]));
        }
        /* union of the configs, in order of first appearance */
        int seen_cap = 0;
        for (int si = 0; si < NSHAPES; si++) seen_cap += sn[si];
        char (*seen)[256] = calloc((size_t)seen_cap + 1, 256);
        const cg_cfg **seenc = calloc((size_t)seen_cap + 1, sizeof *seenc);
        int nseen = 0;
        for (int si = 0; seen && seenc && si < NSHAPES; si++) {
            for (int i = 0; i < sn[si]; i++) {
                char t[256];
                cg__cfg_text(&sp[si][i], t, sizeof t);
                int dup = 0;
                for (int q = 0; q < nseen && !dup; q++) dup = !strcmp(seen[q], t);
                if (!dup) {
                    seenc[nseen] = &sp[si][i];
                    snprintf(seen[nseen++], 256, "%s", t);
                }
            }
        }
        cg_sweep_sel sel;
        cg_sweep_select(seenc, nseen, CG_SWEEP_PAIRS, &sel);
        if (nunion) *nunion += nseen;
        /* each config once, on the (idx mod count)-th shape that accepts it; then defaults */
        int kept = 0; /* this kernel's jobs before the shard split */
        for (int q = 0; q <= nseen + NSHAPES - 1 && nj < cap; q++) {
            int is_default = q >= nseen;
            if (!is_default && !cg_sweep_keeps(&sel, q)) continue;
            if (kept++ % nshards != shard) continue;
            int shape = -1;
            const cg_cfg *pin = NULL;
            if (is_default) {
                shape = q - nseen;
            } else {
                int cands[NSHAPES], nc = 0;
                const cg_cfg *cc[NSHAPES];
                for (int si = 0; si < NSHAPES; si++)
                    for (int i = 0; i < sn[si]; i++) {
                        char t[256];
                        cg__cfg_text(&sp[si][i], t, sizeof t);
                        if (!strcmp(t, seen[q])) {
                            cc[nc] = &sp[si][i];
                            cands[nc++] = si;
                        }
                    }
                shape = cands[q % nc];
                pin = cc[q % nc];
            }
            cg_shape s = shape_of(shape);
            cg_plan p;
            cg_status st = cg__gen_plan(ctx, names[k], &s, FLAGS_OF(shape), dev, pin, &p);
            if (is_default && st == CG_EUNSUPPORTED) continue; /* no default for this shape on this arch */
            CG_CHECK(st == CG_OK, "%s: %s", names[k], cg_errmsg(ctx));
            if (st != CG_OK) continue;
            job *j = &jobs[nj++];
            j->source = p.source;
            p.source = NULL;
            snprintf(j->name, sizeof j->name, "%s", p.name);
            cg__cfg_text(&p.params, j->cfg, sizeof j->cfg);
            j->shape = shape;
            j->kernel = k;
            j->threads = (int)(p.launch[0].block[0] * p.launch[0].block[1] * p.launch[0].block[2]);
            for (int l = 0; l < p.nlaunch; l++) {
                int t = (int)(p.launch[l].block[0] * p.launch[l].block[1] * p.launch[l].block[2]);
                if (t > j->threads) j->threads = t;
                if (p.launch[l].smem > j->dyn_smem) j->dyn_smem = p.launch[l].smem;
            }
            cg__plan_free(&p);
        }
        cg_sweep_sel_free(&sel);
        free(seenc);
        free(seen);
        for (int si = 0; si < NSHAPES; si++) free(sp[si]);
    }
    *out = jobs;
    return nj;
}

static void free_jobs(job *jobs, int nj) {
    for (int i = 0; i < nj; i++) free(jobs[i].source);
    free(jobs);
}


/* Compile the shard-th of nshards parts of the sweep for arch and check every job's
 * ptxas facts. ctest runs the parts as separate tests (gen_nvrtc_all_configs_smN_KofS),
 * so that ctest -j packs them with the other long tests; gen_nvrtc_shards_cover_all
 * checks that the parts of each arch are the whole sweep. */
static void nvrtc_all_configs(int arch, int shard, int nshards) {
    if (!cg__nvrtc_api(NULL)) {
        cg_test_skip("libnvrtc cannot be loaded");
        return;
    }
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    job *jobs;
    int nfam = 0, nunion = 0, nj = sweep_jobs(ctx, arch, shard, nshards, &dev, &jobs, &nfam, &nunion);
    /* Identical sources (configs whose parameters render the same text for the shape
     * they were given) are compiled once: the CUBIN is a function of source, options and
     * arch, so its ptxas facts are the other job's; the per-job limits are checked below. */
    int nunique = 0;
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i];
        j->same_as = -1;
        cg__hash128(j->source, strlen(j->source), j->hash);
        for (int q = 0; q < i && j->same_as < 0; q++)
            if (jobs[q].same_as < 0 && jobs[q].hash[0] == j->hash[0] && jobs[q].hash[1] == j->hash[1] &&
                !strcmp(jobs[q].name, j->name) && !strcmp(jobs[q].source, j->source))
                j->same_as = q;
        nunique += j->same_as < 0;
    }
    int *order = calloc((size_t)nj + 1, sizeof *order);
    g_sort_jobs = jobs;
    for (int i = 0; i < nj; i++) order[i] = i;
    qsort(order, (size_t)nj, sizeof *order, longer_first);
    int nthreads = cg__online_cores();
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 16) nthreads = 16;
    pool_arg pa = {.jobs = jobs, .order = order, .n = nj, .arch = arch};
    const char *kc = getenv("CHUNKGEN_TEST_KCACHE");
    pa.kdir = kc && *kc ? kc : NULL;
    CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, pa.nvrtc_id, sizeof pa.nvrtc_id));
    pthread_mutex_init(&pa.mu, NULL);
    pthread_t th[16];
    for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, &pa);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&pa.mu);
    free(order);
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i], *o = j->same_as >= 0 ? &jobs[j->same_as] : NULL;
        if (!o) continue;
        j->st = o->st;
        snprintf(j->msg, sizeof j->msg, "%s", o->msg);
        j->info = o->info;
    }
    int maxreg = 0, ncached = 0;
    double total_ms = 0;
    int slow[5] = {-1, -1, -1, -1, -1}; /* the slowest compiles, for the log */
    for (int i = 0; i < nj; i++) {
        job *j = &jobs[i];
        ncached += j->cached;
        total_ms += j->ms;
        for (int r = 0; r < 5; r++)
            if (slow[r] < 0 || j->ms > jobs[slow[r]].ms) {
                memmove(slow + r + 1, slow + r, sizeof slow[0] * (size_t)(4 - r));
                slow[r] = i;
                break;
            }
        CG_CHECK(j->st == CG_OK, "sm_%d %s (%s, shape %d): %s", arch, j->name, j->cfg, j->shape, j->msg);
        if (j->st == CG_OK) {
            CG_CHECK(j->info.found, "sm_%d %s: no ptxas resource line in the log", arch, j->name);
            CG_CHECK(j->info.spill_stores == 0 && j->info.spill_loads == 0,
                     "sm_%d %s (%s): spills %lld/%lld bytes: tighten valid()", arch, j->name, j->cfg,
                     (long long)j->info.spill_stores, (long long)j->info.spill_loads);
            CG_CHECK(j->info.smem + j->dyn_smem <= dev.smem_per_block,
                     "sm_%d %s: %lld static + %lld dynamic bytes of shared memory > %lld", arch, j->name,
                     (long long)j->info.smem, (long long)j->dyn_smem, (long long)dev.smem_per_block);
            CG_CHECK((int64_t)j->info.registers * j->threads <= dev.regs_per_block,
                     "sm_%d %s: %d registers x %d threads", arch, j->name, j->info.registers, j->threads);
            if (j->info.registers > maxreg) maxreg = j->info.registers;
        }
    }
    fprintf(stderr, "  sm_%d part %d of %d: %d kernels compiled by NVRTC (%d kernel families; %s of %d configs + defaults; "
            "%d distinct sources), max %d registers\n", arch, shard + 1, nshards, nj, nfam,
            cg_sweep_full() ? "all" : "a sample", nunion, nunique, maxreg);
    fprintf(stderr, "  sm_%d: %d of them from the kernel cache; %.1f s of compiling in %d threads; slowest:", arch,
            ncached, total_ms / 1000, nthreads);
    for (int r = 0; r < 5 && slow[r] >= 0 && jobs[slow[r]].ms > 0; r++)
        fprintf(stderr, "%s %s %.0f ms", r ? "," : "", jobs[slow[r]].name, jobs[slow[r]].ms);
    fprintf(stderr, "\n");
    /* where the part's compile time went, per kernel family (what the templates cost CI) */
    const char **names;
    int nk = 0;
    if (cg__gen_kernels(ctx, &names, &nk) == CG_OK) {
        fprintf(stderr, "  sm_%d: compile seconds (jobs) per kernel:", arch);
        for (int k = 0; k < nk; k++) {
            double ms = 0;
            int n = 0;
            for (int i = 0; i < nj; i++)
                if (jobs[i].kernel == k) {
                    ms += jobs[i].ms;
                    n++;
                }
            if (n) fprintf(stderr, " %s %.1f (%d)", names[k], ms / 1000, n);
        }
        fprintf(stderr, "\n");
    }
    free_jobs(jobs, nj);
    cg_context_free(ctx);
}

/* CHUNKGEN_TEST_PART=K/N: the K-th of N parts of the sweep (1 <= K <= N; unset: all of
 * it). CMakeLists.txt registers each sweep as N ctest tests, gen_nvrtc_all_configs_smA_KofN,
 * with this set, so that ctest -j packs the parts with the other long tests. */
static int sweep_part(int *shard, int *nshards) {
    const char *e = getenv("CHUNKGEN_TEST_PART");
    int k = 1, n = 1;
    *shard = 0;
    *nshards = 1;
    if (e && *e && (sscanf(e, "%d/%d", &k, &n) != 2 || n < 1 || k < 1 || k > n)) {
        CG_CHECK(0, "CHUNKGEN_TEST_PART=\"%s\": expected K/N with 1 <= K <= N", e);
        return 0;
    }
    *shard = k - 1;
    *nshards = n;
    return 1;
}

static void sweep(int arch) {
    int shard, nshards;
    if (sweep_part(&shard, &nshards)) nvrtc_all_configs(arch, shard, nshards);
}

CG_TEST(gen_nvrtc_all_configs_sm80) { sweep(80); }
CG_TEST(gen_nvrtc_all_configs_sm90) { sweep(90); }

/* The parts are the sweep: for each arch, the jobs of the nparts parts (rendered, not
 * compiled) are the whole sweep's, each exactly once, and every kernel family with at
 * least nparts jobs has jobs in every part. Rendering only: no NVRTC needed. */
static void shards_cover(int arch, int nparts) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    job *all;
    int nfam = 0, nall = sweep_jobs(ctx, arch, 0, 1, &dev, &all, &nfam, NULL);
    CG_CHECK(nall > 0 && nfam > 0, "sm_%d: an empty sweep (%d jobs, %d families)", arch, nall, nfam);
    char *hit = calloc((size_t)nall + 1, 1);
    int per_kernel[64] = {0}; /* the sweep's jobs per kernel family */
    for (int a = 0; a < nall; a++)
        if (all[a].kernel < 64) per_kernel[all[a].kernel]++;
    int total = 0;
    for (int sh = 0; sh < nparts; sh++) {
        job *part;
        int f2 = 0, np = sweep_jobs(ctx, arch, sh, nparts, &dev, &part, &f2, NULL);
        total += np;
        int in_part[64] = {0};
        for (int i = 0; i < np; i++) {
            int found = -1;
            for (int a = 0; a < nall && found < 0; a++)
                if (!hit[a] && all[a].kernel == part[i].kernel && all[a].shape == part[i].shape &&
                    !strcmp(all[a].name, part[i].name) && !strcmp(all[a].cfg, part[i].cfg) &&
                    !strcmp(all[a].source, part[i].source))
                    found = a;
            CG_CHECK(found >= 0, "sm_%d part %d: %s (%s, shape %d) is not a job of the sweep, or twice in the parts",
                     arch, sh + 1, part[i].name, part[i].cfg, part[i].shape);
            if (found >= 0) hit[found] = 1;
            if (part[i].kernel < 64) in_part[part[i].kernel]++;
        }
        /* every family with a job for each part has one in this part */
        for (int k = 0; k < 64; k++)
            CG_CHECK(per_kernel[k] < nparts || in_part[k] > 0,
                     "sm_%d part %d: no job of kernel family %d (%d in the sweep)", arch, sh + 1, k, per_kernel[k]);
        free_jobs(part, np);
    }
    CG_CHECK(total == nall, "sm_%d: the parts hold %d jobs, the sweep %d", arch, total, nall);
    for (int a = 0; a < nall; a++)
        CG_CHECK(hit[a], "sm_%d: %s (%s, shape %d) is in no part", arch, all[a].name, all[a].cfg, all[a].shape);
    fprintf(stderr, "  sm_%d: %d jobs of %d kernel families, in %d parts; jobs per kernel:", arch, nall, nfam,
            nparts);
    const char **names;
    int nk = 0;
    CG_CHECK_OK(ctx, cg__gen_kernels(ctx, &names, &nk));
    for (int k = 0; k < nk && k < 64; k++)
        if (per_kernel[k]) fprintf(stderr, " %s %d", names[k], per_kernel[k]);
    fprintf(stderr, "\n");
    free(hit);
    free_jobs(all, nall);
    cg_context_free(ctx);
}

/* CHUNKGEN_TEST_PARTS=N: the number of parts ctest runs (CMakeLists.txt sets it). */
CG_TEST(gen_nvrtc_shards_cover_all) {
    const char *e = getenv("CHUNKGEN_TEST_PARTS");
    int n = e && *e ? atoi(e) : 2;
    CG_CHECK(n >= 1, "CHUNKGEN_TEST_PARTS=\"%s\": expected a count >= 1", e ? e : "");
    if (n < 1) return;
    shards_cover(80, n);
    shards_cover(90, n);
}
