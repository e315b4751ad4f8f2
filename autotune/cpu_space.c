/* cpu_space.c -- parameter spaces of the CPU path, described in Lua.
 *
 * generator/cpu/<name>.lua follows the convention of generator/kernels/<name>.lua (see the
 * top of generator/core.lua): name, op, space, order, valid(p, shape, dev) and
 * default(shape, dev); a CPU description has no template and no launch, which core.lua
 * requires, so the tuner evaluates these files itself in a small private Lua state
 * (base, table, string and math only). shape carries the same fields as for generated
 * kernels plus `bwd` (true when tuning the backward); dev.sm_count is the number of CPU
 * threads and dev.name the CPU model. Enumeration order is core.lua's: the first key of
 * `order` outermost. */
#include "autotune.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <string.h>

/* runtime/lua_gen.c: an embedded (or CHUNKGEN_LUA_PATH) file, malloc'd. */
cg_status cg__gen_read_file(cg_context *ctx, const char *rel, char **text, size_t *len);

static const char k_driver[] =
    "local d, shape, dev = ...\n"
    "local where = 'generator/cpu/' .. tostring(d.name) .. '.lua'\n"
    "assert(type(d.space) == 'table' and type(d.order) == 'table', where .. ': space and order must be tables')\n"
    "assert(type(d.valid) == 'function' and type(d.default) == 'function', where .. ': valid and default must be functions')\n"
    "for _, k in ipairs(d.order) do\n"
    "  assert(type(d.space[k]) == 'table' and #d.space[k] > 0, where .. ': order names ' .. tostring(k) .. ' without values')\n"
    "end\n"
    "for k in pairs(d.space) do\n"
    "  local seen = false\n"
    "  for _, o in ipairs(d.order) do if o == k then seen = true end end\n"
    "  assert(seen, where .. ': space key ' .. k .. ' is missing from order')\n"
    "end\n"
    "local out, p = {}, {}\n"
    "local function rec(i)\n"
    "  if i > #d.order then\n"
    "    local c = {}\n"
    "    for k, v in pairs(p) do c[k] = v end\n"
    "    if d.valid(c, shape, dev) then\n"
    "      local t = {}\n"
    "      for _, k in ipairs(d.order) do t[#t + 1] = {k, tostring(p[k])} end\n"
    "      out[#out + 1] = t\n"
    "    end\n"
    "    return\n"
    "  end\n"
    "  local k = d.order[i]\n"
    "  for _, v in ipairs(d.space[k]) do p[k] = v; rec(i + 1) end\n"
    "  p[k] = nil\n"
    "end\n"
    "rec(1)\n"
    "local def = d.default(shape, dev)\n"
    "assert(type(def) == 'table', where .. ': default() must return a table')\n"
    "local dc = {}\n"
    "for _, k in ipairs(d.order) do\n"
    "  local ok = false\n"
    "  for _, v in ipairs(d.space[k]) do if v == def[k] then ok = true end end\n"
    "  assert(ok, where .. ': default() gives ' .. k .. '=' .. tostring(def[k]) .. ', outside the space')\n"
    "  dc[#dc + 1] = {k, tostring(def[k])}\n"
    "end\n"
    "return out, dc\n";

static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    luaL_traceback(L, L, msg ? msg : "(error object is not a string)", 1);
    return 1;
}

static int pcall_tb(lua_State *L, int nargs, int nres) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    return rc;
}

/* {k, v} pairs at the top of the stack into cfg. */
static int read_pairs(lua_State *L, cg_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int n = (int)lua_rawlen(L, -1);
    if (n > CG_CFG_MAX) return -1;
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
        if (bad) return -1;
    }
    cfg->n = n;
    return 0;
}

static void push_shape(lua_State *L, const cg_kshape *s) {
    lua_createtable(L, 0, 18);
#define SET_INT(f) (lua_pushinteger(L, s->f), lua_setfield(L, -2, #f))
    SET_INT(B); SET_INT(T); SET_INT(G); SET_INT(H); SET_INT(dk); SET_INT(dv);
    SET_INT(L); SET_INT(D); SET_INT(N);
#undef SET_INT
    static const struct { int flag; const char *name; } flags[] = {
        {CG_KS_H0, "h0"},         {CG_KS_HT, "hT"},         {CG_KS_DHT, "dhT"},
        {CG_KS_SOFTPLUS, "softplus"}, {CG_KS_HAS_D, "has_D"}, {CG_KS_HAS_Z, "has_z"},
        {CG_KS_HAS_BIAS, "has_bias"}, {CG_KS_GROUPED, "grouped"}, {CG_KS_BWD, "bwd"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        lua_pushboolean(L, (s->flags & flags[i].flag) != 0);
        lua_setfield(L, -2, flags[i].name);
    }
}

static void push_dev(lua_State *L, const cg_devinfo *d) {
    lua_createtable(L, 0, 6);
    lua_pushstring(L, d->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, d->arch);
    lua_setfield(L, -2, "arch");
    lua_pushinteger(L, d->sm_count);
    lua_setfield(L, -2, "sm_count");
    lua_pushinteger(L, d->smem_per_block);
    lua_setfield(L, -2, "smem_per_block");
    lua_pushinteger(L, d->regs_per_block);
    lua_setfield(L, -2, "regs_per_block");
    lua_pushboolean(L, d->emulated);
    lua_setfield(L, -2, "emulated");
}

cg_status cg__tune_cpu_space(cg_context *ctx, const char *kernel, const cg_kshape *shape, const cg_devinfo *dev,
                             cg_cfg **out, int *n, cg_cfg *def) {
    *out = NULL;
    *n = 0;
    char rel[128];
    snprintf(rel, sizeof rel, "generator/cpu/%s.lua", kernel);
    char *text = NULL;
    size_t len = 0;
    cg_status st = cg__gen_read_file(ctx, rel, &text, &len);
    if (st != CG_OK) return st;
    lua_State *L = luaL_newstate();
    if (!L) {
        free(text);
        return cg__err(ctx, CG_ENOMEM, "tune: cannot create a Lua state");
    }
    static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},
                                    {LUA_TABLIBNAME, luaopen_table},
                                    {LUA_STRLIBNAME, luaopen_string},
                                    {LUA_MATHLIBNAME, luaopen_math},
                                    {NULL, NULL}};
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    char chunk[140];
    snprintf(chunk, sizeof chunk, "@%s", rel);
    cg_cfg *cfgs = NULL;
    if (luaL_loadbufferx(L, text, len, chunk, "t") != LUA_OK || pcall_tb(L, 0, 1) != LUA_OK) {
        st = cg__err(ctx, CG_ELUA, "tune: %s: %s", rel, lua_tostring(L, -1));
        goto done;
    }
    if (!lua_istable(L, -1)) {
        st = cg__err(ctx, CG_ELUA, "tune: %s must return a table", rel);
        goto done;
    }
    lua_getfield(L, -1, "name");
    if (!lua_isstring(L, -1) || strcmp(lua_tostring(L, -1), kernel)) {
        st = cg__err(ctx, CG_ELUA, "tune: %s: name must be \"%s\"", rel, kernel);
        goto done;
    }
    lua_pop(L, 1);
    int d = lua_gettop(L);
    if (luaL_loadbufferx(L, k_driver, sizeof k_driver - 1, "=cpu_space", "t") != LUA_OK) {
        st = cg__err(ctx, CG_EINTERNAL, "tune: %s", lua_tostring(L, -1));
        goto done;
    }
    lua_pushvalue(L, d);
    push_shape(L, shape);
    push_dev(L, dev);
    if (pcall_tb(L, 3, 2) != LUA_OK) {
        st = cg__err(ctx, CG_ELUA, "tune: %s: %s", rel, lua_tostring(L, -1));
        goto done;
    }
    if (read_pairs(L, def) != 0) {
        st = cg__err(ctx, CG_ELUA, "tune: %s: default has more than %d short parameters", rel, CG_CFG_MAX);
        goto done;
    }
    lua_pop(L, 1);
    int cnt = (int)lua_rawlen(L, -1);
    cfgs = calloc(cnt ? (size_t)cnt : 1, sizeof *cfgs);
    if (!cfgs) {
        st = cg__err(ctx, CG_ENOMEM, "tune: out of memory");
        goto done;
    }
    for (int i = 0; i < cnt; i++) {
        lua_rawgeti(L, -1, i + 1);
        int bad = read_pairs(L, &cfgs[i]);
        lua_pop(L, 1);
        if (bad) {
            st = cg__err(ctx, CG_ELUA, "tune: %s: config %d has more than %d short parameters", rel, i + 1, CG_CFG_MAX);
            goto done;
        }
    }
    *out = cfgs;
    *n = cnt;
    cfgs = NULL;
    st = CG_OK;
done:
    free(cfgs);
    lua_close(L);
    free(text);
    return st;
}
