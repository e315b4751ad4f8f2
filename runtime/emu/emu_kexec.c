/* emu_kexec.c -- the `emulate` kernel executor: rendered CUDA sources compiled by the
 * host C++ compiler into shared objects, cached on disk, run by the SIMT runtime.
 *
 * A module is the text of emulator/cg_emu.h, the rendered source (with
 * `extern __shared__` arrays rewritten) and one extern "C" wrapper per entry,
 * compiled with -DCG_EMULATE. Compiled modules live in the binary cache of
 * runtime/cuda/kcache.h (<cache dir>/kernels, label "emu_<plan name>"), keyed by the
 * compiler's version line, the flags and that text; a hit is written to a temp file
 * and dlopen'ed from there. An entry that does not load is a miss, rebuilt with one
 * warning. The module also carries its key hash (cg_emu_key), checked after dlopen. */
#include "emu.h"
#include "cuda/kcache.h"
#include "fsutil.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* emulator/cg_emu.h embedded at build time (cmake/emulator.cmake). */
extern const char cg__emu_header[] __attribute__((weak));
extern const size_t cg__emu_header_len __attribute__((weak));

#define EMU_FLAGS "-std=c++17 -O1 -fPIC -shared -fvisibility=hidden -fno-strict-aliasing -fno-math-errno -w -DCG_EMULATE"
#define EMU_RACE_FLAGS                                                                          \
    " -DCG_EMU_RACECHECK -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0" \
    " --param asan-stack=0 --param asan-globals=0"

typedef struct emu_entry {
    char name[64];
    void (*fn)(const void *);
    size_t psize;
} emu_entry;

typedef struct emu_module {
    char key[33];
    char name[192];
    void *dl;
    int nentry;
    emu_entry entry[CG_PLAN_MAX_LAUNCH];
    int racecheck;
    size_t tls_size;
    void *(*tls_touch)(void);
} emu_module;

typedef struct emu_timer {
    double t0; /* monotonic seconds at timer_start */
    int busy;
} emu_timer;

typedef struct emu_state {
    emu_module **mods;
    int n, cap;
    int racecheck;
    emu_timer timers[CG_KEXEC_TIMERS];
} emu_state;

/* ---------------------------------------------------------------- utilities */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            char *nb = realloc(buf, cap + 65536 + 1);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
            cap += 65536;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static int write_file(const char *path, const char *text, size_t n) {
    return cg__write_file_atomic(path, text, n, 0, NULL, 0); /* never through a planted symlink */
}

static int mkdirs(const char *path) { return cg__mkdirs(path) ? -1 : 0; }

/* Append s to a shell command in single quotes. */
static void shell_quote(char *dst, size_t cap, const char *s) {
    size_t k = strlen(dst);
    if (k + 1 < cap) dst[k++] = '\'';
    for (; *s && k + 5 < cap; s++) {
        if (*s == '\'') { memcpy(dst + k, "'\\''", 4); k += 4; }
        else dst[k++] = *s;
    }
    if (k + 1 < cap) dst[k++] = '\'';
    dst[k] = '\0';
}

/* Run cmd through the shell; *out gets its stdout+stderr (malloc'd). Exit status or -1. */
static int run_cmd(const char *cmd, char **out) {
    *out = NULL;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf) { pclose(p); return -1; }
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    buf[n] = '\0';
    *out = buf;
    int st = pclose(p);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ----------------------------------------------------------------- compiler */
static pthread_mutex_t g_cxx_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_cxx[512];      /* the command, "" until detected */
static char g_cxx_env[512];  /* $CXX when detected */
static char g_cxx_ver[512];  /* first line of --version */

/* The host C++ compiler: $CXX, else g++, else c++. */
static cg_status find_cxx(cg_context *ctx, char *cmd, size_t cmdcap, char *ver, size_t vercap) {
    const char *env = getenv("CXX");
    if (!env) env = "";
    pthread_mutex_lock(&g_cxx_mu);
    if (!g_cxx[0] || strcmp(env, g_cxx_env) != 0) {
        g_cxx[0] = '\0';
        const char *cands[3] = {env[0] ? env : NULL, "g++", "c++"};
        for (int i = 0; i < 3 && !g_cxx[0]; i++) {
            if (!cands[i]) continue;
            char c[1024], *out = NULL;
            snprintf(c, sizeof c, "%s --version 2>&1", cands[i]);
            int st = run_cmd(c, &out);
            if (st == 0 && out) {
                snprintf(g_cxx, sizeof g_cxx, "%s", cands[i]);
                size_t l = strcspn(out, "\n");
                snprintf(g_cxx_ver, sizeof g_cxx_ver, "%.*s", (int)l, out);
            }
            free(out);
            if (env[0] && !g_cxx[0]) break; /* an explicit $CXX that does not run: no fallback */
        }
        snprintf(g_cxx_env, sizeof g_cxx_env, "%s", env);
    }
    int found = g_cxx[0] != '\0';
    if (found) {
        snprintf(cmd, cmdcap, "%s", g_cxx);
        snprintf(ver, vercap, "%s", g_cxx_ver);
    }
    pthread_mutex_unlock(&g_cxx_mu);
    if (!found)
        return cg__err(ctx, CG_EUNSUPPORTED,
                       env[0] ? "emulate: the C++ compiler $CXX=\"%s\" does not run; the emulator compiles kernels with it"
                              : "emulate: no host C++ compiler (tried g++ and c++%s); set CXX to one",
                       env);
    return CG_OK;
}

/* --------------------------------------------------------- header and source */
static cg_status emu_header(cg_context *ctx, char **text, size_t *len) {
    const char *root = getenv("CHUNKGEN_LUA_PATH");
    char path[4096];
    if (root && root[0]) {
        snprintf(path, sizeof path, "%s/emulator/cg_emu.h", root);
        *text = read_file(path, len);
        if (!*text) return cg__err(ctx, CG_ENOTFOUND, "emulate: cannot read %s (CHUNKGEN_LUA_PATH)", path);
        return CG_OK;
    }
    if (&cg__emu_header_len && cg__emu_header) {
        *text = malloc(cg__emu_header_len + 1);
        if (!*text) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
        memcpy(*text, cg__emu_header, cg__emu_header_len);
        (*text)[cg__emu_header_len] = '\0';
        *len = cg__emu_header_len;
        return CG_OK;
    }
#ifdef CG_SOURCE_DIR
    snprintf(path, sizeof path, "%s/emulator/cg_emu.h", CG_SOURCE_DIR);
    *text = read_file(path, len);
    if (*text) return CG_OK;
#endif
    return cg__err(ctx, CG_ENOTFOUND, "emulate: emulator/cg_emu.h is neither embedded nor found");
}

static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

typedef struct sbuf { char *p; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096);
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...) CG_PRINTF(2, 3);
static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* Skip whitespace and comments from s; returns the new position. */
static const char *skip_ws(const char *s, int *line) {
    for (;;) {
        if (*s == '\n') { (*line)++; s++; }
        else if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\f' || *s == '\v') s++;
        else if (s[0] == '/' && s[1] == '/') { while (*s && *s != '\n') s++; }
        else if (s[0] == '/' && s[1] == '*') {
            s += 2;
            while (*s && !(s[0] == '*' && s[1] == '/')) { if (*s == '\n') (*line)++; s++; }
            if (*s) s += 2;
        } else return s;
    }
}

/* Remove __align__(...), alignas(...), __attribute__((...)) from d (in place). */
static void strip_attrs(char *d) {
    static const char *const words[] = {"__align__", "alignas", "__attribute__"};
    for (int w = 0; w < 3; w++) {
        char *p;
        while ((p = strstr(d, words[w])) != NULL) {
            char *q = p + strlen(words[w]);
            while (*q == ' ' || *q == '\t') q++;
            if (*q != '(') break;
            int depth = 0;
            do {
                if (*q == '(') depth++;
                else if (*q == ')') depth--;
                q++;
            } while (*q && depth > 0);
            memmove(p, q, strlen(q) + 1);
        }
    }
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
    size_t k = 0;
    while (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r') k++;
    if (k) memmove(s, s + k, n - k + 1);
}

char *cg__emu_rewrite_source(const char *src, char *why, size_t cap) {
    sbuf out = {0};
    const char *s = src, *copied = src;
    int depth = 0, line = 1, bol = 1;
    while (*s) {
        char c = *s;
        if (c == '\n') { line++; s++; bol = 1; continue; }
        if (c == ' ' || c == '\t' || c == '\r') { s++; continue; }
        if (bol && c == '#') { /* preprocessor line, with continuations */
            while (*s && *s != '\n') {
                if (s[0] == '\\' && s[1] == '\n') { line++; s++; }
                s++;
            }
            continue;
        }
        bol = 0;
        if (c == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
            continue;
        }
        if (c == '/' && s[1] == '*') {
            for (s += 2; *s && !(s[0] == '*' && s[1] == '/'); s++)
                if (*s == '\n') line++;
            if (*s) s += 2;
            continue;
        }
        if (c == '"' || c == '\'') {
            s++;
            while (*s && *s != c && *s != '\n') { if (*s == '\\' && s[1]) s++; s++; }
            if (*s == c) s++;
            continue;
        }
        if (c == '{') { depth++; s++; continue; }
        if (c == '}') { depth--; s++; continue; }
        if (!is_ident(c)) { s++; continue; }
        const char *w0 = s;
        while (is_ident(*s)) s++;
        if ((size_t)(s - w0) != 6 || memcmp(w0, "extern", 6) != 0 || (w0 > src && is_ident(w0[-1]))) continue;
        int l2 = line;
        const char *t = skip_ws(s, &l2);
        if (strncmp(t, "__shared__", 10) != 0 || is_ident(t[10])) continue;
        const char *d0 = t + 10, *semi = strchr(d0, ';');
        if (!semi) continue;
        char decl[512];
        if ((size_t)(semi - d0) >= sizeof decl) continue;
        memcpy(decl, d0, (size_t)(semi - d0));
        decl[semi - d0] = '\0';
        strip_attrs(decl);
        trim(decl);
        size_t n = strlen(decl);
        char *lb = strrchr(decl, '[');
        if (!n || decl[n - 1] != ']' || !lb) {
            snprintf(why, cap, "line %d: cannot rewrite `extern __shared__%s;` (expected `T name[]`)", line, decl);
            free(out.p);
            return NULL;
        }
        for (char *q = lb + 1; q < decl + n - 1; q++)
            if (*q != ' ' && *q != '\t') {
                snprintf(why, cap, "line %d: extern __shared__ array with a size: `%s`", line, decl);
                free(out.p);
                return NULL;
            }
        *lb = '\0';
        trim(decl);
        char *ne = decl + strlen(decl), *nb = ne;
        while (nb > decl && is_ident(nb[-1])) nb--;
        if (nb == ne || nb == decl) {
            snprintf(why, cap, "line %d: cannot find the type and name in `extern __shared__ %s[]`", line, decl);
            free(out.p);
            return NULL;
        }
        char name[128], type[512];
        snprintf(name, sizeof name, "%.*s", (int)(ne - nb), nb);
        *nb = '\0';
        trim(decl);
        snprintf(type, sizeof type, "%s", decl);
        for (const char *q = d0; q < semi; q++)
            if (*q == '\n') l2++;
        sb_add(&out, copied, (size_t)(w0 - copied));
        if (depth > 0) {
            sb_fmt(&out, "%s *%s = reinterpret_cast<%s *>(::cg_emu::dyn_smem());", type, name, type);
        } else {
            sb_fmt(&out, "\n#define %s (reinterpret_cast<%s *>(::cg_emu::dyn_smem()))\n#line %d\n", name, type, l2);
        }
        if (depth > 0) /* keep the line count of the declaration */
            for (const char *q = w0; q < semi; q++)
                if (*q == '\n') sb_str(&out, "\n");
        line = l2;
        s = semi + 1;
        copied = s;
    }
    sb_str(&out, copied);
    if (out.oom) {
        free(out.p);
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    return out.p;
}

static int valid_entry(const char *e) {
    if (!e[0] || (e[0] >= '0' && e[0] <= '9')) return 0;
    for (const char *p = e; *p; p++)
        if (!is_ident(*p)) return 0;
    return 1;
}

static int entry_seen(const cg_plan *plan, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(plan->launch[j].entry, plan->launch[i].entry) == 0) return 1;
    return 0;
}

/* The module text without its key line. */
static cg_status build_source(cg_context *ctx, const cg_plan *plan, sbuf *out) {
    if (!plan || !plan->source) return cg__err(ctx, CG_EINVAL, "emulate: plan has no source");
    if (plan->nlaunch < 1 || plan->nlaunch > CG_PLAN_MAX_LAUNCH)
        return cg__err(ctx, CG_EINVAL, "emulate: plan %s: nlaunch %d out of [1, %d]", plan->name, plan->nlaunch,
                       CG_PLAN_MAX_LAUNCH);
    for (int i = 0; i < plan->nlaunch; i++)
        if (!valid_entry(plan->launch[i].entry))
            return cg__err(ctx, CG_EINVAL, "emulate: plan %s: launch %d entry \"%s\" is not a C identifier", plan->name,
                           i, plan->launch[i].entry);
    char *hdr;
    size_t hlen;
    cg_status st = emu_header(ctx, &hdr, &hlen);
    if (st != CG_OK) return st;
    char why[256];
    char *body = cg__emu_rewrite_source(plan->source, why, sizeof why);
    if (!body) {
        free(hdr);
        return cg__err(ctx, CG_ECOMPILE, "emulate: %s: %s", plan->name, why);
    }
    sb_add(out, hdr, hlen);
    sb_fmt(out, "\n#line 1 \"%s.cu\"\n", plan->name[0] ? plan->name : "kernel");
    sb_str(out, body);
    sb_str(out, "\n/* ---- entry wrappers (runtime/emu/emu_kexec.c) ---- */\n");
    for (int i = 0; i < plan->nlaunch; i++) {
        const char *e = plan->launch[i].entry;
        if (entry_seen(plan, i)) continue;
        sb_fmt(out, "CG_EMU_EXPORT void cg_emu_k_%s(const void *p) { ::cg_emu::invoke(%s, p); }\n", e, e);
        sb_fmt(out, "CG_EMU_EXPORT CG_EMU_NOSAN size_t cg_emu_s_%s(void) { return ::cg_emu::param_size(%s); }\n", e, e);
    }
    free(hdr);
    free(body);
    if (out->oom) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    return CG_OK;
}

/* -------------------------------------------------------------------- state */
static void emu_ctx_free(cg_context *ctx);

static emu_state *emu_get(cg_context *ctx) {
    if (!ctx->part[CG_PART_EMU].p) {
        emu_state *st = calloc(1, sizeof *st);
        if (!st) return NULL;
        const char *r = getenv("CHUNKGEN_EMU_RACECHECK");
        st->racecheck = r && r[0] && strcmp(r, "0") != 0;
        ctx->part[CG_PART_EMU].p = st;
        ctx->part[CG_PART_EMU].free = emu_ctx_free;
    }
    return ctx->part[CG_PART_EMU].p;
}

static void emu_ctx_free(cg_context *ctx) {
    emu_state *st = ctx->part[CG_PART_EMU].p;
    if (!st) return;
    for (int i = 0; i < st->n; i++) {
        if (st->mods[i]->dl) dlclose(st->mods[i]->dl);
        free(st->mods[i]);
    }
    free(st->mods);
    free(st);
    ctx->part[CG_PART_EMU].p = NULL;
}

/* --------------------------------------------------------------- modules */
typedef struct tls_find { uintptr_t addr; size_t memsz; int found; } tls_find;

static int tls_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    tls_find *tf = arg;
    (void)size;
    if ((uintptr_t)info->dlpi_addr != tf->addr) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS) tf->memsz = info->dlpi_phdr[i].p_memsz;
    tf->found = 1;
    return 1;
}

/* dlopen path and check it is the module for key: 0, or -1 with a reason. */
static int module_open(emu_module *m, const char *path, const cg_plan *plan, char *why, size_t cap) {
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
        if (entry_seen(plan, i)) continue;
        char sym[96];
        emu_entry *e = &m->entry[m->nentry];
        snprintf(e->name, sizeof e->name, "%s", plan->launch[i].entry);
        snprintf(sym, sizeof sym, "cg_emu_k_%s", e->name);
        e->fn = (void (*)(const void *))dlsym(dl, sym);
        snprintf(sym, sizeof sym, "cg_emu_s_%s", e->name);
        size_t (*ps)(void) = (size_t (*)(void))dlsym(dl, sym);
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
    if (m->racecheck) {
        m->tls_touch = (void *(*)(void))dlsym(dl, "cg_emu_tls_touch");
        struct link_map *lm = NULL;
        if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
            tls_find tf = {(uintptr_t)lm->l_addr, 0, 0};
            dl_iterate_phdr(tls_cb, &tf);
            m->tls_size = tf.memsz;
        }
    }
    m->dl = dl;
    return 0;
}

static atomic_uint g_tmp_counter;

/* A private temporary directory for one compile or load; "" on failure. */
static void tmp_dir(char *dir, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/chunkgen-emu-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) dir[0] = '\0';
}

/* Compile text into a shared object: *so (malloc'd bytes) and *log, or an error. The
 * shared object is left at so_path (in the caller's temp dir) for dlopen. */
static cg_status module_compile(cg_context *ctx, const char *text, size_t tlen, const char *dir, const char *cxx,
                                const char *flags, const cg_plan *plan, char *so_path, size_t so_cap,
                                void **so, size_t *so_len, char **log_out) {
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
    int rc = run_cmd(cmd, &log);
    if (rc != 0) {
        /* keep the source and the log for a look */
        char keep[4300], klog[4300];
        const char *cd = ctx ? cg__cache_dir(ctx) : NULL;
        keep[0] = '\0';
        if (cd) {
            snprintf(keep, sizeof keep, "%s/emu-failed", cd);
            if (mkdirs(keep) == 0) {
                snprintf(klog, sizeof klog, "%s/%s.log", keep, plan->name[0] ? plan->name : "kernel");
                snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "/%s.cc", plan->name[0] ? plan->name : "kernel");
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
        cg_status st = cg__err(ctx, CG_ECOMPILE, "emulate: compiling %s failed (%s, exit %d; source kept in %s):\n%.1500s",
                               plan->name, cxx, rc, keep[0] ? keep : "(not kept)", log ? log : "");
        free(log);
        return st;
    }
    unlink(src);
    size_t n = 0;
    *so = read_file(so_path, &n);
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
static int open_payload(emu_module *m, const void *so, size_t len, const cg_plan *plan, char *why, size_t cap) {
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
    char msg[CG_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cg__log(CG_LOG_WARN, "%s", msg);
}

static int g_warn_load;

/* Everything a module depends on: the cache key text. */
typedef struct emu_key {
    sbuf text;      /* the module source, with its key line */
    sbuf key;       /* the cache key: compiler, flags, ABI, then the source */
    char hex[33];   /* hash of key */
    char cxx[512], flags[2048], label[256];
} emu_key;

static void key_free(emu_key *k) {
    free(k->text.p);
    free(k->key.p);
}

static cg_status module_key(cg_context *ctx, const cg_plan *plan, int racecheck, emu_key *k) {
    char ver[512];
    memset(k, 0, sizeof *k);
    cg_status s = find_cxx(ctx, k->cxx, sizeof k->cxx, ver, sizeof ver);
    if (s != CG_OK) return s;
    const char *extra = getenv("CHUNKGEN_EMU_CXXFLAGS");
    snprintf(k->flags, sizeof k->flags, "%s%s%s%s", EMU_FLAGS, racecheck ? EMU_RACE_FLAGS : "", extra ? " " : "",
             extra ? extra : "");
    s = build_source(ctx, plan, &k->text);
    if (s != CG_OK) return s;
    sb_fmt(&k->key, "chunkgen emulate module, ABI %d\ncompiler: %s\n", CG_EMU_ABI_VERSION, k->cxx);
    sb_fmt(&k->key, "version: %s\n", ver);
    sb_str(&k->key, "flags: ");
    sb_str(&k->key, k->flags);
    sb_str(&k->key, "\nsource:\n");
    sb_add(&k->key, k->text.p ? k->text.p : "", k->text.n);
    if (k->key.oom) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    uint64_t h[2];
    cg__hash128(k->key.p, k->key.n, h);
    snprintf(k->hex, sizeof k->hex, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
    sb_fmt(&k->text, "CG_EMU_EXPORT const char cg_emu_key[] = \"%s\";\n", k->hex);
    snprintf(k->label, sizeof k->label, "emu_%s", plan->name[0] ? plan->name : "kernel");
    if (k->text.oom) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    return CG_OK;
}

static void cache_dir_of(cg_context *ctx, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/kernels", cg__cache_dir(ctx));
}

static cg_status emu_load(cg_context *ctx, const cg_plan *plan, void **module) {
    emu_state *st = emu_get(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    emu_key k;
    cg_status s = module_key(ctx, plan, st->racecheck, &k);
    if (s != CG_OK) {
        key_free(&k);
        return s;
    }
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->mods[i]->key, k.hex) == 0) {
            key_free(&k);
            *module = st->mods[i];
            return CG_OK;
        }
    emu_module *m = calloc(1, sizeof *m);
    if (!m) {
        key_free(&k);
        return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    }
    snprintf(m->key, sizeof m->key, "%s", k.hex);
    snprintf(m->name, sizeof m->name, "%s", plan->name);
    m->racecheck = st->racecheck;

    char cdir[4096], why[512];
    cache_dir_of(ctx, cdir, sizeof cdir);
    void *so = NULL;
    size_t len = 0;
    char *log = NULL;
    if (cg__kcache_get(cdir, k.label, k.key.p, &so, &len, &log) == CG_OK) {
        int ok = open_payload(m, so, len, plan, why, sizeof why) == 0;
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
        key_free(&k);
        free(m);
        return cg__err(ctx, CG_EIO, "emulate: cannot create a temporary directory: %s", strerror(errno));
    }
    s = module_compile(ctx, k.text.p, k.text.n, tdir, k.cxx, k.flags, plan, so_path, sizeof so_path, &so, &len, &log);
    if (s == CG_OK) {
        (void)cg__kcache_put(cdir, k.label, k.key.p, so, len, log); /* EIO: memory only, warned there */
        if (module_open(m, so_path, plan, why, sizeof why) != 0)
            s = cg__err(ctx, CG_ECOMPILE, "emulate: %s: the compiled module does not load: %s", plan->name, why);
        unlink(so_path);
    }
    rmdir(tdir);
    free(so);
    free(log);
    if (s != CG_OK) {
        key_free(&k);
        free(m);
        return s;
    }
loaded:
    key_free(&k);
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 16;
        emu_module **nm = realloc(st->mods, (size_t)cap * sizeof *nm);
        if (!nm) {
            dlclose(m->dl);
            free(m);
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
    int racecheck;
    char dir[4096];
} emu_prebuild_job;

static void emu_prebuild_task(void *arg, int64_t i, int tid) {
    emu_prebuild_job *job = arg;
    (void)tid;
    const cg_plan *plan = &job->plans[i];
    emu_key k;
    /* no ctx for messages: several threads; the later load reports errors */
    if (module_key(NULL, plan, job->racecheck, &k) == CG_OK) {
        void *so = NULL;
        size_t len = 0;
        char *log = NULL;
        if (cg__kcache_get(job->dir, k.label, k.key.p, &so, &len, &log) != CG_OK) {
            char tdir[4096], so_path[4200];
            tmp_dir(tdir, sizeof tdir);
            if (tdir[0] && module_compile(NULL, k.text.p, k.text.n, tdir, k.cxx, k.flags, plan, so_path,
                                          sizeof so_path, &so, &len, &log) == CG_OK) {
                (void)cg__kcache_put(job->dir, k.label, k.key.p, so, len, log);
                unlink(so_path);
            }
            if (tdir[0]) rmdir(tdir);
        }
        free(so);
        free(log);
    }
    key_free(&k);
}

cg_status cg__emu_prebuild(cg_context *ctx, const cg_plan *plans, int n) {
    emu_state *st = emu_get(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    char cxx[512], ver[512];
    cg_status s = find_cxx(ctx, cxx, sizeof cxx, ver, sizeof ver);
    if (s != CG_OK) return s;
    emu_prebuild_job job;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.plans = plans;
    job.racecheck = st->racecheck;
    cache_dir_of(ctx, job.dir, sizeof job.dir);
    cg__pool_run(cg__ctx_pool(ctx), 0, n, emu_prebuild_task, &job);
    return CG_OK;
}

/* ------------------------------------------------------------------ launch */
typedef struct emu_job {
    const cg_emu_grid *g;
    atomic_int failed;
    pthread_mutex_t mu;
    int64_t fail_block;
    char msg[1024];
} emu_job;

static void emu_block_task(void *arg, int64_t i, int tid) {
    emu_job *job = arg;
    (void)tid;
    if (atomic_load(&job->failed)) return;
    char msg[1024];
    if (cg__emu_run_blocks(job->g, i, i + 1, msg, sizeof msg) != 0) {
        pthread_mutex_lock(&job->mu);
        if (!atomic_load(&job->failed) || i < job->fail_block) {
            job->fail_block = i;
            snprintf(job->msg, sizeof job->msg, "%s", msg);
        }
        atomic_store(&job->failed, 1);
        pthread_mutex_unlock(&job->mu);
    }
}

static cg_status emu_launch(cg_context *ctx, void *module, const cg_launch *l, const void *params, size_t params_size,
                            void *stream) {
    (void)stream;
    emu_module *m = module;
    if (!m || !l) return cg__err(ctx, CG_EINVAL, "emulate: launch: no module or launch");
    const emu_entry *e = NULL;
    for (int i = 0; i < m->nentry; i++)
        if (strcmp(m->entry[i].name, l->entry) == 0) e = &m->entry[i];
    if (!e) return cg__err(ctx, CG_EINVAL, "emulate: launch: module %s has no entry \"%s\"", m->name, l->entry);
    if (params_size != e->psize)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: params_size %zu, the kernel takes %zu bytes", l->entry,
                       params_size, e->psize);
    const uint64_t nt = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    if (!l->block[0] || !l->block[1] || !l->block[2] || nt > 1024 || l->block[2] > 64)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: block (%u,%u,%u): expected 1..1024 threads, z <= 64",
                       l->entry, l->block[0], l->block[1], l->block[2]);
    if (!l->grid[0] || !l->grid[1] || !l->grid[2] || l->grid[0] > 0x7FFFFFFFu || l->grid[1] > 65535 ||
        l->grid[2] > 65535)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: grid (%u,%u,%u) out of range", l->entry, l->grid[0],
                       l->grid[1], l->grid[2]);
    cg_devinfo dev;
    cg__devinfo_emulated(&dev);
    if (l->smem < 0 || l->smem > dev.smem_per_block)
        return cg__err(ctx, CG_EINVAL, "emulate: launch %s: %lld bytes of dynamic shared memory, at most %lld",
                       l->entry, (long long)l->smem, (long long)dev.smem_per_block);
    cg_emu_grid g;
    memset(&g, 0, sizeof g);
    g.entry = e->fn;
    g.params = params;
    g.name = e->name;
    for (int k = 0; k < 3; k++) {
        g.grid[k] = l->grid[k];
        g.block[k] = l->block[k];
    }
    g.smem = (size_t)l->smem;
    g.racecheck = m->racecheck;
    g.dl = m->dl;
    g.tls_size = m->tls_size;
    g.tls_touch = m->tls_touch;
    const int64_t nblocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
    emu_job job;
    memset(&job, 0, sizeof job);
    job.g = &g;
    atomic_init(&job.failed, 0);
    pthread_mutex_init(&job.mu, NULL);
    cg_pool *pool = nblocks > 1 ? cg__ctx_pool(ctx) : NULL;
    if (pool) cg__pool_run(pool, 0, nblocks, emu_block_task, &job);
    else
        for (int64_t i = 0; i < nblocks && !atomic_load(&job.failed); i++) emu_block_task(&job, i, 0);
    pthread_mutex_destroy(&job.mu);
    if (atomic_load(&job.failed)) return cg__err(ctx, CG_ELAUNCH, "emulate: %s: %s", l->entry, job.msg);
    return CG_OK;
}

/* ------------------------------------------------------------------ memory */
static cg_status emu_device(cg_context *ctx, cg_devinfo *out) {
    char cxx[512], ver[512];
    cg_status st = find_cxx(ctx, cxx, sizeof cxx, ver, sizeof ver);
    if (st != CG_OK) return st;
    cg__devinfo_emulated(out);
    return CG_OK;
}

static cg_status emu_alloc(cg_context *ctx, size_t bytes, void **out) {
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1)) return cg__err(ctx, CG_ENOMEM, "emulate: cannot allocate %zu bytes", bytes);
    memset(p, 0xFF, bytes); /* device memory starts as garbage: NaN bytes show reads of it */
    *out = p;
    return CG_OK;
}

static void emu_free(cg_context *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

static cg_status emu_copy(cg_context *ctx, void *dst, const void *src, size_t bytes, int dir, void *stream) {
    (void)ctx;
    (void)dir;
    (void)stream;
    if (bytes) memmove(dst, src, bytes);
    return CG_OK;
}

static cg_status emu_sync(cg_context *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    return CG_OK;
}

static int emu_owns_ptr(cg_context *ctx, const void *ptr) {
    (void)ctx;
    (void)ptr;
    return 1;
}

/* ------------------------------------------------------------------ timing
 * Launches run synchronously on the calling thread, so the host's monotonic clock
 * between timer_start and timer_stop is the kernels' time. There is no cache to flush. */
static double emu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static cg_status emu_timer_start(cg_context *ctx, void *stream, void **token) {
    (void)stream;
    if (!token) return cg__err(ctx, CG_EINVAL, "emulate: timer_start: token is NULL (expected a void ** to fill)");
    *token = NULL;
    emu_state *st = emu_get(ctx);
    if (!st) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    for (int i = 0; i < CG_KEXEC_TIMERS; i++) {
        if (st->timers[i].busy) continue;
        st->timers[i].busy = 1;
        st->timers[i].t0 = emu_now_ms();
        *token = &st->timers[i];
        return CG_OK;
    }
    return cg__err(ctx, CG_EINVAL, "emulate: timer_start: all %d timers of this context are running (timer_stop "
                   "releases one)", CG_KEXEC_TIMERS);
}

static cg_status emu_timer_stop(cg_context *ctx, void *stream, void *token, double *ms) {
    (void)stream;
    double now = emu_now_ms();
    emu_state *st = ctx->part[CG_PART_EMU].p;
    emu_timer *t = NULL;
    for (int i = 0; st && i < CG_KEXEC_TIMERS; i++)
        if (token == (void *)&st->timers[i]) t = &st->timers[i];
    if (!t || !t->busy)
        return cg__err(ctx, CG_EINVAL, "emulate: timer_stop: token %p is not a running timer of this context "
                       "(expected one from timer_start)", token);
    t->busy = 0;
    if (!ms) return cg__err(ctx, CG_EINVAL, "emulate: timer_stop: ms is NULL (expected a double * to fill)");
    *ms = now > t->t0 ? now - t->t0 : 0.0;
    return CG_OK;
}

static cg_status emu_flush_l2(cg_context *ctx, void *stream) {
    (void)ctx;
    (void)stream;
    return CG_OK;
}

const cg_kexec cg__kexec_emu = {
    .name = "emulate",
    .device = emu_device,
    .load = emu_load,
    .launch = emu_launch,
    .alloc = emu_alloc,
    .free = emu_free,
    .copy = emu_copy,
    .sync = emu_sync,
    .owns_ptr = emu_owns_ptr,
    .timer_start = emu_timer_start,
    .timer_stop = emu_timer_stop,
    .flush_l2 = emu_flush_l2,
};
