/* cg_emu_module.c -- emulator modules: compiled by the host C++ compiler into shared
 * objects, cached on disk, dlopen'ed and checked, kept per context.
 *
 * Compiled modules live in the binary cache of runtime/cuda/kcache.h (<cache
 * dir>/kernels, label "emu_<plan name>"), keyed by the compiler's version line, the
 * flags and the module text (emu_source.c); a hit is written to a temp file and
 * dlopen'ed from there. An entry that does not load is a miss, rebuilt with one
 * warning. The module also carries its key hash (cg_emu_key), checked after dlopen. */
#include "emu.h"
#include "env.h"
#include "cuda/kcache.h"
#include "fsutil.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_file(const char *path, const char *text, size_t n) {
    return cg__write_file_atomic(path, text, n, 0, NULL, 0); /* never through a planted symlink */
}

static int mkdirs(const char *path) { return cg__mkdirs(path) ? -1 : 0; }

/* Append s to a shell command in single quotes. */
static void shell_quote(char *dst, size_t cap, const char *s) {
    size_t k = strlen(dst);
    if (k + 1 < cap) dst[k++] = '\'';
    for (; *s && k + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(dst + k, "'\\''", 4);
            k += 4;
        } else dst[k++] = *s;
    }
    if (k + 1 < cap) dst[k++] = '\'';
    dst[k] = '\0';
}

/* --------------------------------------------------------------- modules */
typedef struct tls_find {
    uintptr_t addr;
    size_t memsz;
    int found;
    uintptr_t lo, hi;
} tls_find;

static int tls_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    tls_find *tf = arg;
    (void)size;
    if ((uintptr_t)info->dlpi_addr != tf->addr) return 0;
    tf->lo = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_TLS) tf->memsz = ph->p_memsz;
        if (ph->p_type == PT_LOAD) {
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < tf->lo) tf->lo = a;
            if (a + ph->p_memsz > tf->hi) tf->hi = a + ph->p_memsz;
        }
    }
    tf->found = 1;
    return 1;
}

/* dlopen path and check it is the module for key: 0, or -1 with a reason. */
static int module_open(cg_emu_module *m, const char *path, const cg_plan *plan, char *why, size_t cap) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(why, cap, "dlopen: %s", e ? e : "failed");
        return -1;
    }
    const char *key = dlsym(dl, "cg_emu_key");
    int (*bind)(const cg_emu_api *) = (int (*)(const cg_emu_api *))dlsym(dl, "cg_emu_bind");
    if (!key || strcmp(key, m->key) != 0 || !bind) {
        snprintf(why, cap, "not the module of key %s", m->key);
        dlclose(dl);
        return -1;
    }
    int abi = bind(&cg__emu_api);
    if (abi != CG_EMU_ABI_VERSION) {
        snprintf(why, cap, "module ABI %d, runtime ABI %d", abi, CG_EMU_ABI_VERSION);
        dlclose(dl);
        return -1;
    }
    m->nentry = 0;
    for (int i = 0; i < plan->nlaunch; i++) {
        if (cg__emu_entry_seen(plan, i)) continue;
        char sym[96];
        cg_emu_entry *e = &m->entry[m->nentry];
        snprintf(e->name, sizeof e->name, "%s", plan->launch[i].entry);
        snprintf(sym, sizeof sym, "cg_emu_k_%s", e->name);
        e->fn = (void (*)(const void *))dlsym(dl, sym);
        snprintf(sym, sizeof sym, "cg_emu_s_%s", e->name);
        size_t (*ps)(void) = (size_t(*)(void))dlsym(dl, sym);
        if (!e->fn || !ps) {
            snprintf(why, cap, "entry %s missing", e->name);
            dlclose(dl);
            return -1;
        }
        e->psize = ps();
        m->nentry++;
    }
    m->tls_size = 0;
    m->tls_touch = NULL;
    if (m->racecheck || m->stats) {
        m->tls_touch = (void *(*)(void))dlsym(dl, "cg_emu_tls_touch");
        struct link_map *lm = NULL;
        if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
            tls_find tf = {(uintptr_t)lm->l_addr, 0, 0, 0, 0};
            dl_iterate_phdr(tls_cb, &tf);
            m->tls_size = tf.memsz;
            m->base = (uintptr_t)lm->l_addr;
            if (tf.found && tf.lo < tf.hi) {
                m->img_lo = (const void *)tf.lo;
                m->img_hi = (const void *)tf.hi;
            }
        }
    }
    m->dl = dl;
    return 0;
}

static atomic_uint g_tmp_counter;

/* A private temporary directory for one compile or load; "" on failure. */
static void tmp_dir(char *dir, size_t cap) {
    const char *tmp = cg__env(CG_ENV_TMPDIR);
    snprintf(dir, cap, "%s/chunkgen-emu-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) dir[0] = '\0';
}

/* Compile text into a shared object: *so (malloc'd bytes) and *log, or an error. The
 * shared object is left at so_path (in the caller's temp dir) for dlopen. */
static cg_status module_compile(cg_context *ctx, const char *text, size_t tlen, const char *dir, const char *cxx,
                                const char *flags, const cg_plan *plan, char *so_path, size_t so_cap, void **so,
                                size_t *so_len, char **log_out) {
    char src[4200], cmd[16384];
    snprintf(src, sizeof src, "%s/%s.cc", dir, plan->name[0] ? plan->name : "kernel");
    snprintf(so_path, so_cap, "%s/module-%u.so", dir, atomic_fetch_add(&g_tmp_counter, 1));
    *so = NULL;
    *log_out = NULL;
    if (write_file(src, text, tlen) != 0)
        return cg__err(ctx, CG_EIO, "emulate: cannot write %s: %s", src, strerror(errno));
    snprintf(cmd, sizeof cmd, "%s %s -o ", cxx, flags);
    shell_quote(cmd, sizeof cmd, so_path);
    strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
    shell_quote(cmd, sizeof cmd, src);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    char *log = NULL;
    int rc = cg__emu_run_cmd(cmd, &log);
    if (rc != 0) {
        /* keep the source and the log for a look */
        char keep[4300], klog[4300];
        const char *cd = ctx ? cg__cache_dir(ctx) : NULL;
        keep[0] = '\0';
        if (cd) {
            snprintf(keep, sizeof keep, "%s/emu-failed", cd);
            if (mkdirs(keep) == 0) {
                snprintf(klog, sizeof klog, "%s/%s.log", keep, plan->name[0] ? plan->name : "kernel");
                snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "/%s.cc",
                         plan->name[0] ? plan->name : "kernel");
                if (write_file(keep, text, tlen) != 0) keep[0] = '\0';
                else if (log) {
                    /* the first line marks the log as chunkgen's (`chunkgen cache clear --all`) */
                    size_t ll = strlen(log), hl = strlen(CG_EMU_FAILED_LOG_MARK "\n");
                    char *marked = malloc(hl + ll + 1);
                    if (marked) {
                        memcpy(marked, CG_EMU_FAILED_LOG_MARK "\n", hl);
                        memcpy(marked + hl, log, ll + 1);
                        write_file(klog, marked, hl + ll);
                        free(marked);
                    }
                }
            } else {
                keep[0] = '\0';
            }
        }
        unlink(src);
        unlink(so_path);
        cg_status st =
            cg__err(ctx, CG_ECOMPILE, "emulate: compiling %s failed (%s, exit %d; source kept in %s):\n%.1500s",
                    plan->name, cxx, rc, keep[0] ? keep : "(not kept)", log ? log : "");
        free(log);
        return st;
    }
    unlink(src);
    size_t n = 0;
    *so = cg__emu_read_file(so_path, &n);
    if (!*so) {
        free(log);
        unlink(so_path);
        return cg__err(ctx, CG_EIO, "emulate: cannot read the compiled %s", so_path);
    }
    *so_len = n;
    *log_out = log;
    return CG_OK;
}

/* dlopen a cached payload: written to a private temp file, opened, unlinked. */
static int open_payload(cg_emu_module *m, const void *so, size_t len, const cg_plan *plan, char *why, size_t cap) {
    char dir[4096], path[4200];
    tmp_dir(dir, sizeof dir);
    if (!dir[0]) {
        snprintf(why, cap, "no temporary directory: %s", strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/module.so", dir);
    int rc = -1;
    if (write_file(path, so, len) != 0) snprintf(why, cap, "cannot write %.300s: %s", path, strerror(errno));
    else rc = module_open(m, path, plan, why, cap);
    unlink(path);
    rmdir(dir);
    return rc;
}

static void warn_once(int *flag, const char *fmt, ...) CG_PRINTF(2, 3);
static void warn_once(int *flag, const char *fmt, ...) {
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED)) return;
    va_list ap;
    va_start(ap, fmt);
    cg__logv(CG_LOG_WARN, fmt, ap);
    va_end(ap);
}

static int g_warn_load;

/* Statistics: keep a copy of the shared object (addr2line reads its line tables) and
 * the line map of the rendered source. Without them lines are reported as unknown. */
static void keep_for_lines(cg_emu_module *m, const cg_plan *plan, const void *so, size_t len) {
    char dir[4096];
    if (cg__emu_linemap_build(&m->lines, plan->name[0] ? plan->name : "kernel", plan->source) != 0)
        cg__emu_linemap_free(&m->lines);
    tmp_dir(dir, sizeof dir);
    if (!dir[0]) return;
    snprintf(m->so_path, sizeof m->so_path, "%s/module.so", dir);
    if (write_file(m->so_path, so, len) != 0) {
        rmdir(dir);
        m->so_path[0] = '\0';
    }
}

static void cache_dir_of(cg_context *ctx, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/kernels", cg__cache_dir(ctx));
}

cg_status cg__emu_load(cg_context *ctx, const cg_plan *plan, void **module) {
    cg_emu_state *st = cg__emu_state(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    cg_emu_modkey k;
    const int mode = (st->racecheck ? CG_EMU_MOD_RACECHECK : 0) | (st->stats ? CG_EMU_MOD_STATS : 0);
    cg_status s = cg__emu_module_key(ctx, plan, mode, &k);
    if (s != CG_OK) {
        cg__emu_key_free(&k);
        return s;
    }
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->mods[i]->key, k.hex) == 0) {
            cg__emu_key_free(&k);
            *module = st->mods[i];
            return CG_OK;
        }
    cg_emu_module *m = calloc(1, sizeof *m);
    if (!m) {
        cg__emu_key_free(&k);
        return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    }
    snprintf(m->key, sizeof m->key, "%s", k.hex);
    snprintf(m->name, sizeof m->name, "%s", plan->name);
    m->racecheck = st->racecheck;
    m->stats = st->stats;

    char cdir[4096], why[512];
    cache_dir_of(ctx, cdir, sizeof cdir);
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    if (cg__kcache_get(cdir, k.label, k.key.p, &so, &len, &log) == CG_OK) {
        int ok = open_payload(m, so, len, plan, why, sizeof why) == 0;
        if (ok && m->stats) keep_for_lines(m, plan, so, len);
        free(so);
        free(log);
        so = NULL;
        log = NULL;
        if (ok) goto loaded;
        warn_once(&g_warn_load, "emulate: cached module of %s does not load (%s); rebuilding", plan->name, why);
    }
    char tdir[4096], so_path[4200];
    tmp_dir(tdir, sizeof tdir);
    if (!tdir[0]) {
        cg__emu_key_free(&k);
        free(m);
        return cg__err(ctx, CG_EIO, "emulate: cannot create a temporary directory: %s", strerror(errno));
    }
    s = module_compile(ctx, k.text.p, k.text.n, tdir, k.cxx, k.flags, plan, so_path, sizeof so_path, &so, &len, &log);
    if (s == CG_OK) {
        (void)cg__kcache_put(cdir, k.label, k.key.p, so, len, log); /* EIO: memory only, warned there */
        if (module_open(m, so_path, plan, why, sizeof why) != 0)
            s = cg__err(ctx, CG_ECOMPILE, "emulate: %s: the compiled module does not load: %s", plan->name, why);
        else if (m->stats) keep_for_lines(m, plan, so, len);
        unlink(so_path);
    }
    rmdir(tdir);
    free(so);
    free(log);
    if (s != CG_OK) {
        cg__emu_key_free(&k);
        free(m);
        return s;
    }
loaded:
    cg__emu_key_free(&k);
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 16;
        cg_emu_module **nm = realloc(st->mods, (size_t)cap * sizeof *nm);
        if (!nm) {
            cg__emu_module_free(m);
            return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
        }
        st->mods = nm;
        st->cap = cap;
    }
    st->mods[st->n++] = m;
    *module = m;
    return CG_OK;
}

/* Compile the plans missing from the disk cache, several compilers at once. */
typedef struct emu_prebuild_job {
    cg_context *ctx;
    const cg_plan *plans;
    int mode;
    char dir[4096];
} emu_prebuild_job;

static void emu_prebuild_task(void *arg, int64_t i, int tid) {
    emu_prebuild_job *job = arg;
    (void)tid;
    const cg_plan *plan = &job->plans[i];
    cg_emu_modkey k;
    /* no ctx for messages: several threads; the later load reports errors */
    if (cg__emu_module_key(NULL, plan, job->mode, &k) == CG_OK) {
        void *so = NULL;
        size_t len = 0;
        char *log = NULL;
        if (cg__kcache_get(job->dir, k.label, k.key.p, &so, &len, &log) != CG_OK) {
            char tdir[4096], so_path[4200];
            tmp_dir(tdir, sizeof tdir);
            if (tdir[0] && module_compile(NULL, k.text.p, k.text.n, tdir, k.cxx, k.flags, plan, so_path, sizeof so_path,
                                          &so, &len, &log) == CG_OK) {
                (void)cg__kcache_put(job->dir, k.label, k.key.p, so, len, log);
                unlink(so_path);
            }
            if (tdir[0]) rmdir(tdir);
        }
        free(so);
        free(log);
    }
    cg__emu_key_free(&k);
}

cg_status cg__emu_prebuild(cg_context *ctx, const cg_plan *plans, int n) {
    cg_emu_state *st = cg__emu_state(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    char cxx[512], ver[512];
    cg_status s = cg__emu_find_cxx(ctx, cxx, sizeof cxx, ver, sizeof ver);
    if (s != CG_OK) return s;
    emu_prebuild_job job;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.plans = plans;
    job.mode = (st->racecheck ? CG_EMU_MOD_RACECHECK : 0) | (st->stats ? CG_EMU_MOD_STATS : 0);
    cache_dir_of(ctx, job.dir, sizeof job.dir);
    cg__pool_run(cg__ctx_pool(ctx), 0, n, emu_prebuild_task, &job);
    return CG_OK;
}
