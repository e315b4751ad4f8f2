/* emu_source.c -- what an emulator module is built from: the host C++ compiler (found
 * once), the text of emulator/cg_emu.h, the rendered source with `extern __shared__`
 * arrays rewritten, one extern "C" wrapper per entry, and the module's cache key
 * (compiler version line, flags, ABI and that text). cg_emu_module.c compiles and loads
 * modules, emu_kexec.c is the executor. */
#include "emu.h"
#include "env.h"
#include "fsutil.h"
#include "cuda/kcache.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

/* emulator/cg_emu.h and runtime/half.h embedded at build time (cmake/emulator.cmake). */
extern const char cg__emu_header[] __attribute__((weak));
extern const size_t cg__emu_header_len __attribute__((weak));

/* Plain modules are built with -Og: a module's compile is most of an emulated first call
 * (and of the emulator sweeps in CI), and -Og compiles the generated SSD sources about 30%
 * faster than -O1 for about 25% more run time on the tests' shapes (docs/emulator.md,
 * "Module builds"). Instrumented modules (race checking, statistics) keep -O1, which their
 * access counts were calibrated with (one access per float4, as CUDA makes it). */
#define EMU_FLAGS "-std=c++17 -fPIC -shared -fvisibility=hidden -fno-strict-aliasing -fno-math-errno -w -DCG_EMULATE"
#define EMU_OPT_PLAIN " -Og"
#define EMU_OPT_INSTRUMENTED " -O1"
#define EMU_RACE_FLAGS                                                                                                 \
    " -DCG_EMU_RACECHECK -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0"                 \
    " --param asan-stack=0 --param asan-globals=0"

/* ---------------------------------------------------------------- utilities */
char *cg__emu_read_file(const char *path, size_t *len) {
    char why[256];
    return cg__read_regular(path, 0, len, why, sizeof why);
}

/* Run cmd through the shell; *out gets its stdout+stderr (malloc'd). Exit status or -1. */
int cg__emu_run_cmd(const char *cmd, char **out) {
    *out = NULL;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf) {
        pclose(p);
        return -1;
    }
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
static char g_cxx[512];     /* the command, "" until detected */
static char g_cxx_env[512]; /* $CXX when detected */
static char g_cxx_ver[512]; /* first line of --version */

/* The host C++ compiler: $CXX, else g++, else c++. */
cg_status cg__emu_find_cxx(cg_context *ctx, char *cmd, size_t cmdcap, char *ver, size_t vercap) {
    const char *env = cg__env(CG_ENV_CXX);
    if (!env) env = "";
    pthread_mutex_lock(&g_cxx_mu);
    if (!g_cxx[0] || strcmp(env, g_cxx_env) != 0) {
        g_cxx[0] = '\0';
        const char *cands[3] = {env[0] ? env : NULL, "g++", "c++"};
        for (int i = 0; i < 3 && !g_cxx[0]; i++) {
            if (!cands[i]) continue;
            char c[1024], *out = NULL;
            snprintf(c, sizeof c, "%s --version 2>&1", cands[i]);
            int st = cg__emu_run_cmd(c, &out);
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
                       env[0]
                           ? "emulate: the C++ compiler $CXX=\"%s\" does not run; the emulator compiles kernels with it"
                           : "emulate: no host C++ compiler (tried g++ and c++%s); set CXX to one",
                       env);
    return CG_OK;
}

/* --------------------------------------------------------- header and source */
/* <root>/emulator/cg_emu.h followed by <root>/runtime/half.h (the bf16/fp16 conversions
 * the emulated device code calls: one definition for the host and the emulator). */
static char *emu_header_from(const char *root, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/emulator/cg_emu.h", root);
    size_t l1 = 0, l2 = 0;
    char *a = cg__emu_read_file(path, &l1);
    if (!a) return NULL;
    snprintf(path, sizeof path, "%s/runtime/half.h", root);
    char *b = cg__emu_read_file(path, &l2);
    char *t = b ? realloc(a, l1 + l2 + 1) : NULL;
    if (!t) {
        free(a);
        free(b);
        return NULL;
    }
    memcpy(t + l1, b, l2);
    t[l1 + l2] = '\0';
    free(b);
    *len = l1 + l2;
    return t;
}

static cg_status emu_header(cg_context *ctx, char **text, size_t *len) {
    const char *root = cg__env(CG_ENV_LUA_PATH);
    if (root) {
        *text = emu_header_from(root, len);
        if (!*text)
            return cg__err(ctx, CG_ENOTFOUND,
                           "emulate: cannot read %s/emulator/cg_emu.h or %s/runtime/half.h "
                           "(CHUNKGEN_LUA_PATH)",
                           root, root);
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
    *text = emu_header_from(CG_SOURCE_DIR, len);
    if (*text) return CG_OK;
#endif
    return cg__err(ctx, CG_ENOTFOUND, "emulate: emulator/cg_emu.h is neither embedded nor found");
}

static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void sb_add(cg_emu_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096);
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(cg_emu_sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt(cg_emu_sbuf *b, const char *fmt, ...) CG_PRINTF(2, 3);
static void sb_fmt(cg_emu_sbuf *b, const char *fmt, ...) {
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
        if (*s == '\n') {
            (*line)++;
            s++;
        } else if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\f' || *s == '\v') s++;
        else if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
        } else if (s[0] == '/' && s[1] == '*') {
            s += 2;
            while (*s && !(s[0] == '*' && s[1] == '/')) {
                if (*s == '\n') (*line)++;
                s++;
            }
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
    cg_emu_sbuf out = {0};
    const char *s = src, *copied = src;
    int depth = 0, line = 1, bol = 1;
    while (*s) {
        char c = *s;
        if (c == '\n') {
            line++;
            s++;
            bol = 1;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            s++;
            continue;
        }
        if (bol && c == '#') { /* preprocessor line, with continuations */
            while (*s && *s != '\n') {
                if (s[0] == '\\' && s[1] == '\n') {
                    line++;
                    s++;
                }
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
            while (*s && *s != c && *s != '\n') {
                if (*s == '\\' && s[1]) s++;
                s++;
            }
            if (*s == c) s++;
            continue;
        }
        if (c == '{') {
            depth++;
            s++;
            continue;
        }
        if (c == '}') {
            depth--;
            s++;
            continue;
        }
        if (!is_ident(c)) {
            s++;
            continue;
        }
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

int cg__emu_entry_seen(const cg_plan *plan, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(plan->launch[j].entry, plan->launch[i].entry) == 0) return 1;
    return 0;
}

/* The module text without its key line. */
static cg_status build_source(cg_context *ctx, const cg_plan *plan, cg_emu_sbuf *out) {
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
    sb_str(out, "\n/* ---- entry wrappers (runtime/emu/emu_source.c) ---- */\n");
    for (int i = 0; i < plan->nlaunch; i++) {
        const char *e = plan->launch[i].entry;
        if (cg__emu_entry_seen(plan, i)) continue;
        sb_fmt(out, "CG_EMU_EXPORT void cg_emu_k_%s(const void *p) { ::cg_emu::invoke(%s, p); }\n", e, e);
        sb_fmt(out, "CG_EMU_EXPORT CG_EMU_NOSAN size_t cg_emu_s_%s(void) { return ::cg_emu::param_size(%s); }\n", e, e);
    }
    free(hdr);
    free(body);
    if (out->oom) return cg__err(ctx, CG_ENOMEM, "emulate: out of memory");
    return CG_OK;
}

void cg__emu_key_free(cg_emu_modkey *k) {
    free(k->text.p);
    free(k->key.p);
}

cg_status cg__emu_module_key(cg_context *ctx, const cg_plan *plan, int mode, cg_emu_modkey *k) {
    char ver[512];
    memset(k, 0, sizeof *k);
    cg_status s = cg__emu_find_cxx(ctx, k->cxx, sizeof k->cxx, ver, sizeof ver);
    if (s != CG_OK) return s;
    const char *extra = cg__env(CG_ENV_EMU_CXXFLAGS);
    /* race checking and statistics both need every access instrumented; statistics
     * also the line tables (-g1), and a float4 or float2 access kept as one access, as
     * CUDA makes it (scalar replacement of aggregates would split it per field) */
    snprintf(k->flags, sizeof k->flags, "%s%s%s%s%s%s", EMU_FLAGS, mode ? EMU_OPT_INSTRUMENTED : EMU_OPT_PLAIN,
             mode ? EMU_RACE_FLAGS : "", mode & CG_EMU_MOD_STATS ? " -g1 -fno-tree-sra" : "", extra ? " " : "",
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
