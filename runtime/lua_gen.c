/* lua_gen.c -- the C facade of the Lua kernel generator (generator/core.lua).
 *
 * One lua_State per context (ctx->part[CG_PART_GEN].p), created on first use. Scripts and templates
 * come from the copies embedded at build time (cmake/generator.cmake), or from a
 * source checkout on disk when CHUNKGEN_LUA_PATH names one. Every call into Lua goes
 * through gen_pcall, whose traceback ends up in the context's message (CG_ELUA). */
#include "gen.h"
#include "env.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <dirent.h>
#include <errno.h>
#include <string.h>

typedef struct cg_embedded_file {
    const char *name;
    const unsigned char *data;
    size_t len;
} cg_embedded_file;
/* generated/cg_embedded.c */
extern const cg_embedded_file cg__embedded_files[];
extern const int cg__embedded_count;

typedef struct gen_state {
    lua_State *L;
    char *root;   /* CHUNKGEN_LUA_PATH, or NULL for the embedded files */
    int core_ref; /* registry ref of generator/core.lua's module table */
    char **names; /* NULL-terminated kernel names (cg__gen_kernels) */
    int nnames;
    cg_gen_stats stats;
} gen_state;

/* ------------------------------------------------------------------ files */

/* Text of generator/... or templates/... from root (when set) or the embedded copy.
 * *owned is what the caller frees (NULL for embedded data). */
static int gen_file(const char *root, const char *rel, const char **data, size_t *len, char **owned, char *why,
                    size_t whycap) {
    *owned = NULL;
    if (strstr(rel, "..") || rel[0] == '/') {
        snprintf(why, whycap, "bad path '%s'", rel);
        return -1;
    }
    if (!root) {
        for (int i = 0; i < cg__embedded_count; i++) {
            if (strcmp(cg__embedded_files[i].name, rel) == 0) {
                *data = (const char *)cg__embedded_files[i].data;
                *len = cg__embedded_files[i].len;
                return 0;
            }
        }
        snprintf(why, whycap, "no embedded file '%s'", rel);
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whycap, "cannot open %.400s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else buf = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        snprintf(why, whycap, "cannot read %.400s", path);
        return -1;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    *owned = buf;
    return 0;
}

static const char *lua_root(void) { return cg__env(CG_ENV_LUA_PATH); }

/* For other parts (e.g. the emulator): a malloc'd NUL-terminated copy of an embedded
 * (or CHUNKGEN_LUA_PATH) file such as "templates/cg_device.cuh". */
cg_status cg__gen_read_file(cg_context *ctx, const char *rel, char **text, size_t *len) {
    const char *data;
    size_t n;
    char *owned, why[512];
    if (gen_file(lua_root(), rel, &data, &n, &owned, why, sizeof why) != 0)
        return cg__err(ctx, CG_ENOTFOUND, "generator: %s", why);
    if (!owned) {
        owned = malloc(n + 1);
        if (!owned) return cg__err(ctx, CG_ENOMEM, "generator: out of memory reading %s", rel);
        memcpy(owned, data, n);
        owned[n] = '\0';
    }
    *text = owned;
    if (len) *len = n;
    return CG_OK;
}

/* ------------------------------------------------------- functions for Lua */

static gen_state *lua_gs(lua_State *L) { return (gen_state *)lua_touserdata(L, lua_upvalueindex(1)); }

/* cg.read(path) -> text | nil, message */
static int l_read(lua_State *L) {
    gen_state *gs = lua_gs(L);
    const char *rel = luaL_checkstring(L, 1);
    const char *data;
    size_t n;
    char *owned, why[512];
    if (gen_file(gs->root, rel, &data, &n, &owned, why, sizeof why) != 0) {
        lua_pushnil(L);
        lua_pushstring(L, why);
        return 2;
    }
    lua_pushlstring(L, data, n);
    free(owned);
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* cg.list(dir) -> sorted names of the files directly in dir */
static int l_list(lua_State *L) {
    gen_state *gs = lua_gs(L);
    const char *dir = luaL_checkstring(L, 1);
    size_t dl = strlen(dir);
    lua_newtable(L);
    int n = 0;
    if (!gs->root) {
        /* embedded names are sorted by the build step */
        for (int i = 0; i < cg__embedded_count; i++) {
            const char *nm = cg__embedded_files[i].name;
            if (strncmp(nm, dir, dl) == 0 && nm[dl] == '/' && !strchr(nm + dl + 1, '/')) {
                lua_pushstring(L, nm + dl + 1);
                lua_rawseti(L, -2, ++n);
            }
        }
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", gs->root, dir);
    DIR *d = opendir(path);
    if (!d) return 1;
    char *names[1024];
    int cnt = 0;
    struct dirent *e;
    while ((e = readdir(d)) && cnt < 1024) {
        if (e->d_name[0] == '.') continue;
        names[cnt] = strdup(e->d_name);
        if (names[cnt]) cnt++;
    }
    closedir(d);
    qsort(names, (size_t)cnt, sizeof names[0], cmp_str);
    for (int i = 0; i < cnt; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, ++n);
        free(names[i]);
    }
    return 1;
}

/* require(name): generator/<name, dots as slashes>.lua, loaded once per state. Errors
 * propagate to the enclosing gen_pcall. */
static int l_require(lua_State *L) {
    gen_state *gs = lua_gs(L);
    const char *name = luaL_checkstring(L, 1);
    for (const char *c = name; *c; c++)
        if (!(*c == '.' || *c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9')))
            return luaL_error(L, "require: bad module name '%s'", name);
    lua_getfield(L, LUA_REGISTRYINDEX, "cg.loaded");
    lua_getfield(L, -1, name);
    if (!lua_isnil(L, -1)) {
        if (lua_isboolean(L, -1) && !lua_toboolean(L, -1))
            return luaL_error(L, "require: module '%s' requires itself", name);
        return 1;
    }
    lua_pop(L, 1);
    lua_pushboolean(L, 0); /* loading */
    lua_setfield(L, -2, name);
    char rel[512];
    int k = snprintf(rel, sizeof rel, "generator/%s", name);
    for (int i = 10; i < k; i++)
        if (rel[i] == '.') rel[i] = '/';
    snprintf(rel + k, sizeof rel - (size_t)k, ".lua");
    const char *data;
    size_t n;
    char *owned, why[512];
    if (gen_file(gs->root, rel, &data, &n, &owned, why, sizeof why) != 0)
        return luaL_error(L, "require '%s': %s", name, why);
    char chunkname[520];
    snprintf(chunkname, sizeof chunkname, "@%s", rel);
    int rc = luaL_loadbufferx(L, data, n, chunkname, "t");
    free(owned);
    if (rc != LUA_OK) return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

/* -------------------------------------------------------- protected calls */

static int gen_traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* The one way C calls Lua: function and nargs arguments on the stack; leaves nres
 * results. On error records "generator: <what>: <message + traceback>". */
static cg_status gen_pcall(cg_context *ctx, lua_State *L, int nargs, int nres, const char *what) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, gen_traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    if (rc == LUA_OK) return CG_OK;
    const char *msg = lua_tostring(L, -1);
    cg_status st = rc == LUA_ERRMEM ? CG_ENOMEM : CG_ELUA;
    cg__err(ctx, st, "generator: %s: %s", what, msg ? msg : "(no message)");
    lua_pop(L, 1);
    return st;
}

static void gen_free(gen_state *gs) {
    if (!gs) return;
    if (gs->L) lua_close(gs->L);
    if (gs->names)
        for (int i = 0; i < gs->nnames; i++) free(gs->names[i]);
    free(gs->names);
    free(gs->root);
    free(gs);
}

static void gen_ctx_free(cg_context *ctx) {
    if (!ctx) return;
    gen_free((gen_state *)ctx->part[CG_PART_GEN].p);
    ctx->part[CG_PART_GEN].p = NULL;
}

static int l_loadcore(lua_State *L) {
    lua_getglobal(L, "require");
    lua_pushstring(L, "core");
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1)) return luaL_error(L, "generator/core.lua did not return a table");
    return 1;
}

static cg_status gen_state_get(cg_context *ctx, gen_state **out) {
    if (ctx->part[CG_PART_GEN].p) {
        *out = (gen_state *)ctx->part[CG_PART_GEN].p;
        return CG_OK;
    }
    gen_state *gs = calloc(1, sizeof *gs);
    if (!gs) return cg__err(ctx, CG_ENOMEM, "generator: out of memory");
    gs->core_ref = LUA_NOREF;
    const char *root = lua_root();
    if (root && !(gs->root = strdup(root))) {
        gen_free(gs);
        return cg__err(ctx, CG_ENOMEM, "generator: out of memory");
    }
    lua_State *L = gs->L = luaL_newstate();
    if (!L) {
        gen_free(gs);
        return cg__err(ctx, CG_ENOMEM, "generator: cannot create a Lua state");
    }
    /* Only what the generator needs: no io, os or package. */
    static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},        {LUA_TABLIBNAME, luaopen_table},
                                    {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
                                    {LUA_UTF8LIBNAME, luaopen_utf8},  {NULL, NULL}};
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    lua_setglobal(L, "dofile");
    lua_pushnil(L);
    lua_setglobal(L, "loadfile");
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "cg.loaded");
    lua_pushlightuserdata(L, gs);
    lua_pushcclosure(L, l_require, 1);
    lua_setglobal(L, "require");
    lua_newtable(L);
    lua_pushlightuserdata(L, gs);
    lua_pushcclosure(L, l_read, 1);
    lua_setfield(L, -2, "read");
    lua_pushlightuserdata(L, gs);
    lua_pushcclosure(L, l_list, 1);
    lua_setfield(L, -2, "list");
    lua_pushstring(L, CG_VERSION_STRING);
    lua_setfield(L, -2, "version");
    lua_setglobal(L, "cg");

    lua_pushcfunction(L, l_loadcore);
    cg_status st = gen_pcall(ctx, L, 0, 1, "loading generator/core.lua");
    if (st != CG_OK) {
        gen_free(gs);
        return st;
    }
    gs->core_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    ctx->part[CG_PART_GEN].p = gs;
    ctx->part[CG_PART_GEN].free = gen_ctx_free;
    *out = gs;
    return CG_OK;
}

/* Push core[fn]. */
static void push_core_fn(gen_state *gs, const char *fn) {
    lua_rawgeti(gs->L, LUA_REGISTRYINDEX, gs->core_ref);
    lua_getfield(gs->L, -1, fn);
    lua_remove(gs->L, -2);
}

/* After a call with 3 results (value | nil, code, message): map a failure to a status
 * (popping the three) or leave the value on top. */
static cg_status gen_result(cg_context *ctx, lua_State *L, const char *kernel) {
    if (!lua_isnil(L, -3)) {
        lua_pop(L, 2);
        return CG_OK;
    }
    const char *code = lua_tostring(L, -2);
    const char *msg = lua_tostring(L, -1);
    cg_status st = CG_ELUA;
    if (code && strcmp(code, "EINVAL") == 0) st = CG_EINVAL;
    else if (code && strcmp(code, "EUNSUPPORTED") == 0) st = CG_EUNSUPPORTED;
    else if (code && strcmp(code, "ENOTFOUND") == 0) st = CG_ENOTFOUND;
    cg__err(ctx, st, "%s", msg ? msg : kernel);
    lua_pop(L, 3);
    return st;
}

/* Lua's `shape` table of a call's shape (gen.h): each symbol's extent under its name, nseq,
 * each shape flag under its name (flags: the extra ones, cg__shape_kflags) and dtypes. */
static void push_shape(lua_State *L, const cg_shape *s, int flags) {
    lua_createtable(L, 0, CG_SYM_COUNT + cg__nkflags + 2);
    for (int k = 1; k < CG_SYM_COUNT; k++) {
        lua_pushinteger(L, s->dim[k]);
        lua_setfield(L, -2, cg_sym_name((cg_sym)k));
    }
    lua_pushinteger(L, s->nseq);
    lua_setfield(L, -2, "nseq");
    flags = cg__shape_kflags(s, flags);
    for (int i = 0; i < cg__nkflags; i++) {
        lua_pushboolean(L, (flags & cg__kflags[i].flag) != 0);
        lua_setfield(L, -2, cg__kflags[i].name);
    }
    char dtypes[CG_KS_DTYPES_CAP];
    cg__shape_dtypes(s, dtypes);
    lua_pushstring(L, dtypes);
    lua_setfield(L, -2, "dtypes");
}

static void push_dev(lua_State *L, const cg_devinfo *d) {
    lua_createtable(L, 0, 7);
#define SET(push, f) (push(L, d->f), lua_setfield(L, -2, #f))
    SET(lua_pushstring, name);
    SET(lua_pushinteger, arch);
    SET(lua_pushinteger, sm_count);
    SET(lua_pushinteger, smem_per_block);
    SET(lua_pushinteger, regs_per_block);
    SET(lua_pushboolean, emulated);
    SET(lua_pushstring, isa);
#undef SET
}

/* Read a list of {key, value} pairs at the top of the stack into a cg_cfg. */
static cg_status read_cfg(cg_context *ctx, lua_State *L, const char *kernel, cg_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int n = (int)lua_rawlen(L, -1);
    if (n > CG_CFG_MAX)
        return cg__err(ctx, CG_ELUA, "generator: kernel %s has %d parameters, at most %d fit a cg_cfg", kernel, n,
                       CG_CFG_MAX);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
        int bad = !k || !v || strlen(k) >= sizeof cfg->kv[0].key || strlen(v) >= sizeof cfg->kv[0].val;
        if (!bad) {
            snprintf(cfg->kv[i - 1].key, sizeof cfg->kv[0].key, "%s", k);
            snprintf(cfg->kv[i - 1].val, sizeof cfg->kv[0].val, "%s", v);
        }
        lua_pop(L, 3);
        if (bad)
            return cg__err(ctx, CG_ELUA, "generator: kernel %s: parameter %d is not a short key/value pair", kernel, i);
    }
    cfg->n = n;
    return CG_OK;
}

/* Pins as a table key -> value string (empty for NULL). */
static void push_pins(lua_State *L, const cg_cfg *pin) {
    lua_createtable(L, 0, pin ? pin->n : 0);
    for (int i = 0; pin && i < pin->n; i++) {
        lua_pushstring(L, pin->kv[i].val);
        lua_setfield(L, -2, pin->kv[i].key);
    }
}

static int64_t field_int(lua_State *L, int idx, const char *f) {
    lua_getfield(L, idx, f);
    int64_t v = (int64_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The Lua state of one core call and its stack top before the call, which the caller
 * restores; L NULL when there is no state. */
typedef struct gen_frame {
    lua_State *L;
    int top;
} gen_frame;

/* Call core.<fn>(kernel, shape, dev[, pins]), or core.<fn>(kernel) when shape is NULL, and
 * check its (ok, result|code, message) answer; on CG_OK the result is on top of the
 * stack. The caller restores f's stack top (f->L NULL: no state). */
static cg_status core_call(cg_context *ctx, const char *fn, const char *kernel, const cg_shape *shape, int flags,
                           const cg_devinfo *dev, const cg_cfg *pin, int with_pins, gen_frame *f) {
    f->L = NULL;
    gen_state *gs;
    cg_status st = gen_state_get(ctx, &gs);
    if (st != CG_OK) return st;
    lua_State *L = f->L = gs->L;
    f->top = lua_gettop(L);
    if (shape && !strcmp(fn, "space")) gs->stats.spaces++;
    else if (shape) gs->stats.resolves++; /* plan and resolve both complete and check a config */
    push_core_fn(gs, fn);
    lua_pushstring(L, kernel);
    if (shape) {
        push_shape(L, shape, flags);
        push_dev(L, dev);
        if (with_pins) push_pins(L, pin);
    }
    if ((st = gen_pcall(ctx, L, !shape ? 1 : with_pins ? 4 : 3, 3, kernel)) != CG_OK) return st;
    return gen_result(ctx, L, kernel);
}

/* ------------------------------------------------------------ gen.h API */

cg_status cg__gen_plan(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                       const cg_cfg *pin, cg_plan *out) {
    CG_ASSERT(ctx && kernel && shape && dev && out);
    memset(out, 0, sizeof *out);
    gen_frame f;
    int64_t t0 = cg__jit_now_ns();
    cg_status st = core_call(ctx, "plan", kernel, shape, flags, dev, pin, 1, &f);
    if (st == CG_OK) cg__jit_count(CG_JIT_RENDER, cg__jit_now_ns() - t0); /* resolve + launch() + render */
    lua_State *L = f.L;
    if (!L) return st;
    if (st != CG_OK) goto done;

    int t = lua_gettop(L);
    const char *kn = (lua_getfield(L, t, "kernel"), lua_tostring(L, -1));
    const char *nm = (lua_getfield(L, t, "name"), lua_tostring(L, -1));
    size_t srclen = 0;
    const char *src = (lua_getfield(L, t, "source"), lua_tolstring(L, -1, &srclen));
    const char *op = (lua_getfield(L, t, "op"), lua_tostring(L, -1));
    if (!kn || !nm || !src || !op || strlen(kn) >= sizeof out->kernel || strlen(nm) >= sizeof out->name ||
        strlen(op) >= sizeof out->op) {
        st = cg__err(ctx, CG_ELUA, "generator: plan of %s lacks kernel/op/name/source or a name is too long", kernel);
        goto done;
    }
    snprintf(out->kernel, sizeof out->kernel, "%s", kn);
    snprintf(out->name, sizeof out->name, "%s", nm);
    snprintf(out->op, sizeof out->op, "%s", op);
    if (!(out->source = malloc(srclen + 1))) {
        st = cg__err(ctx, CG_ENOMEM, "generator: out of memory");
        goto done;
    }
    memcpy(out->source, src, srclen + 1);
    lua_pop(L, 4);

    lua_getfield(L, t, "params");
    st = read_cfg(ctx, L, kernel, &out->params);
    lua_pop(L, 1);
    if (st != CG_OK) goto done;

    /* The workspace regions, laid out in order at 16-byte boundaries (checked by core.lua). */
    lua_getfield(L, t, "workspace");
    out->nregion = (int)lua_rawlen(L, -1);
    CG_ASSERT(out->nregion <= CG_PLAN_MAX_REGIONS);
    for (int i = 0; i < out->nregion; i++) {
        cg_region *r = &out->region[i];
        lua_rawgeti(L, -1, i + 1);
        lua_getfield(L, -1, "name");
        snprintf(r->name, sizeof r->name, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        r->bytes = field_int(L, -1, "bytes");
        lua_pop(L, 1);
        r->offset = i ? (out->region[i - 1].offset + out->region[i - 1].bytes + 15) / 16 * 16 : 0;
        out->workspace_bytes = r->offset + r->bytes;
    }
    lua_pop(L, 1);

    /* The kernels' ordered arguments (checked by core.lua; names resolved by the launcher). */
    lua_getfield(L, t, "args");
    out->narg = (int)lua_rawlen(L, -1);
    CG_ASSERT(out->narg >= 1 && out->narg <= CG_PLAN_MAX_ARGS);
    for (int i = 0; i < out->narg; i++) {
        static const char *const kinds[] = {"tensor", "ws", "sym", "int", "cu", "real"};
        cg_karg *a = &out->arg[i];
        lua_rawgeti(L, -1, i + 1);
        lua_getfield(L, -1, "kind");
        const char *k = lua_tostring(L, -1);
        for (int j = 0; j < 6; j++)
            if (k && !strcmp(k, kinds[j])) a->kind = (cg_karg_kind)j;
        lua_pop(L, 1);
        lua_getfield(L, -1, "name");
        snprintf(a->name, sizeof a->name, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
        lua_pop(L, 1);
        a->value = field_int(L, -1, "value");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    lua_getfield(L, t, "launches");
    int nl = (int)lua_rawlen(L, -1);
    CG_ASSERT(nl >= 1 && nl <= CG_PLAN_MAX_LAUNCH); /* checked by core.lua */
    for (int i = 0; i < nl; i++) {
        cg_launch *l = &out->launch[i];
        lua_rawgeti(L, -1, i + 1);
        int li = lua_gettop(L);
        lua_getfield(L, li, "entry");
        snprintf(l->entry, sizeof l->entry, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        l->smem = field_int(L, li, "smem");
        for (int a = 0; a < 3; a++) {
            lua_getfield(L, li, "grid");
            lua_rawgeti(L, -1, a + 1);
            l->grid[a] = (unsigned)lua_tointeger(L, -1);
            lua_pop(L, 2);
            lua_getfield(L, li, "block");
            lua_rawgeti(L, -1, a + 1);
            l->block[a] = (unsigned)lua_tointeger(L, -1);
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    out->nlaunch = nl;
    st = CG_OK;
done:
    lua_settop(L, f.top);
    if (st != CG_OK) cg__plan_free(out);
    return st;
}

void cg__plan_free(cg_plan *plan) {
    if (!plan) return;
    free(plan->source);
    plan->source = NULL;
}

cg_status cg__gen_space(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                        cg_cfg **out, int *n) {
    CG_ASSERT(ctx && kernel && shape && dev && out && n);
    *out = NULL;
    *n = 0;
    gen_frame f;
    cg_status st = core_call(ctx, "space", kernel, shape, flags, dev, NULL, 0, &f);
    lua_State *L = f.L;
    if (!L) return st;
    if (st != CG_OK) goto done;
    int cnt = (int)lua_rawlen(L, -1);
    cg_cfg *cfgs = calloc(cnt ? (size_t)cnt : 1, sizeof *cfgs);
    if (!cfgs) {
        st = cg__err(ctx, CG_ENOMEM, "generator: out of memory");
        goto done;
    }
    for (int i = 0; i < cnt; i++) {
        lua_rawgeti(L, -1, i + 1);
        st = read_cfg(ctx, L, kernel, &cfgs[i]);
        lua_pop(L, 1);
        if (st != CG_OK) {
            free(cfgs);
            goto done;
        }
    }
    *out = cfgs;
    *n = cnt;
done:
    lua_settop(L, f.top);
    return st;
}

cg_status cg__gen_resolve(cg_context *ctx, const char *kernel, const cg_shape *shape, int flags, const cg_devinfo *dev,
                          const cg_cfg *pin, cg_cfg *out) {
    CG_ASSERT(ctx && kernel && shape && dev && out);
    memset(out, 0, sizeof *out);
    gen_frame f;
    cg_status st = core_call(ctx, "resolve", kernel, shape, flags, dev, pin, 1, &f);
    if (st == CG_OK) st = read_cfg(ctx, f.L, kernel, out);
    if (f.L) lua_settop(f.L, f.top);
    return st;
}

void cg__gen_stats(cg_context *ctx, cg_gen_stats *out) {
    const gen_state *gs = ctx ? ctx->part[CG_PART_GEN].p : NULL;
    if (gs) *out = gs->stats;
    else memset(out, 0, sizeof *out);
}

cg_status cg__gen_kernels(cg_context *ctx, const char ***names, int *n) {
    CG_ASSERT(ctx && names);
    gen_state *gs;
    cg_status st = gen_state_get(ctx, &gs);
    if (st != CG_OK) return st;
    if (!gs->names) {
        lua_State *L = gs->L;
        int top = lua_gettop(L);
        push_core_fn(gs, "kernels");
        if ((st = gen_pcall(ctx, L, 0, 1, "kernels")) != CG_OK) return st;
        int cnt = (int)lua_rawlen(L, -1);
        char **list = calloc((size_t)cnt + 1, sizeof *list);
        if (!list) {
            lua_settop(L, top);
            return cg__err(ctx, CG_ENOMEM, "generator: out of memory");
        }
        for (int i = 0; i < cnt; i++) {
            lua_rawgeti(L, -1, i + 1);
            const char *s = lua_tostring(L, -1);
            list[i] = strdup(s ? s : "");
            lua_pop(L, 1);
        }
        lua_settop(L, top);
        gs->names = list;
        gs->nnames = cnt;
    }
    *names = (const char **)gs->names;
    if (n) *n = gs->nnames;
    return CG_OK;
}

/* gen.h: the op a kernel serves and whether it is a CPU space, from the catalog. */
cg_status cg__gen_kernel_info(cg_context *ctx, const char *kernel, char *op, size_t cap, int *cpu) {
    gen_frame f;
    cg_status st = core_call(ctx, "info", kernel, NULL, 0, NULL, NULL, 0, &f);
    if (st == CG_OK) {
        lua_State *L = f.L;
        lua_getfield(L, -1, "op");
        lua_getfield(L, -2, "backend");
        const char *o = lua_tostring(L, -2), *b = lua_tostring(L, -1);
        snprintf(op, cap, "%s", o ? o : "");
        *cpu = b && !strcmp(b, "cpu");
    }
    if (f.L) lua_settop(f.L, f.top);
    return st;
}

/* Text describing a kernel's space (for `chunkgen gen --list`); malloc'd. */
cg_status cg__gen_describe(cg_context *ctx, const char *kernel, char **text) {
    gen_frame f;
    cg_status st = core_call(ctx, "describe", kernel, NULL, 0, NULL, NULL, 0, &f);
    if (st == CG_OK) {
        const char *s = lua_tostring(f.L, -1);
        *text = strdup(s ? s : "");
        if (!*text) st = cg__err(ctx, CG_ENOMEM, "generator: out of memory");
    }
    if (f.L) lua_settop(f.L, f.top);
    return st;
}

void cg__devinfo_emulated(cg_devinfo *dev) {
    memset(dev, 0, sizeof *dev);
    snprintf(dev->name, sizeof dev->name, "SIMT emulator (sm_80)");
    dev->arch = 80;
    dev->sm_count = 108;              /* as an A100, so defaults match a real GPU's */
    dev->smem_per_block = 227 * 1024; /* the largest opt-in of sm_80..sm_90 */
    dev->regs_per_block = 65536;
    dev->emulated = 1;
}
