--[[ core.lua -- the kernel generator: Lua decides and renders, C compiles and runs.

runtime/lua_gen.c calls M.kernels, M.plan, M.space, M.resolve, M.info and M.describe (and
nothing else). Errors the caller can cause come back as `nil, code, message` (code
"EINVAL", "EUNSUPPORTED", "ENOTFOUND"); a Lua error (error()) means a bug in a script
and reaches the C side with a traceback as CG_ELUA.

The C facade provides the global table `cg`:
  cg.read(path)   text of an embedded (or CHUNKGEN_LUA_PATH) file, e.g.
                  "templates/ssd_fwd.cu"; nil, message when absent
  cg.list(dir)    sorted names of the files directly in dir, e.g. "generator/kernels"
  cg.version      chunkgen version string
and `require(name)` that loads generator/<name with dots as slashes>.lua.

Descriptions
------------
Two kinds, one convention, one name space (a name may exist in one directory only):
  generator/kernels/<name>.lua  a generated CUDA kernel: rendered from a template,
                                compiled by NVRTC (or run by the SIMT emulator);
  generator/cpu/<name>.lua      the run-time parameters of a C path (runtime/cpu/):
                                `backend = "cpu"`, no template and no launch. The
                                autotuner enumerates its space; M.plan refuses it
                                (EUNSUPPORTED: nothing to render) while M.space,
                                M.resolve and M.describe work as for a kernel.
Each file returns a table:

  {
    name     = "<name>",                 -- same as the file name
    op       = "ssd_fwd" | "ssd_bwd" | "sscan_fwd" | "sscan_bwd"  -- an op of runtime/ops.c
                                         -- (CPU spaces: "ssd" | "sscan", both directions)
    backend  = "cpu",                    -- generator/cpu/ only, and required there
    template = "<file in templates/>",   -- kernels only: CUDA C++, rendered as described below
    consts   = {"dk", "dv"},             -- shape fields baked in as compile-time
                                         -- constants (default {"dk", "dv"}; {} for cpu)
    space    = { chunk = {16, 32, 64}, warps = {2, 4}, precision = {"ieee", "tf32"}, ... },
                                         -- every parameter and its values: Lua
                                         -- integers or strings (words)
    order    = {"chunk", "warps", ...},  -- every key of space once: the order of the
                                         -- kernel name, of enumeration (first key
                                         -- outermost) and of ties
    abbrev   = { chunk = "c", ... },     -- optional name prefixes (defaults below;
                                         -- strings appear as their value alone)
    valid    = function(p, shape, dev) return true end  -- or false, "reason":
                                         -- every constraint incl. shared memory and
                                         -- registers; the one source of truth for
                                         -- "can this shape run here"
    default  = function(shape, dev) return {chunk = 64, ...} end,
                                         -- a full config for an untuned shape; it
                                         -- should pass valid() for every shape that
                                         -- any config does (else an unpinned resolve
                                         -- fails with EUNSUPPORTED)
    launch   = function(p, shape, dev)   -- kernels only: every launch fact
                 return { {entry = "fn", grid = {x, y, z}, block = {x, y, z}, smem = n}, ... },
                        { {"region", bytes}, ... },
                        { {tensor = "q"}, {ws = "region"}, {sym = "B"}, {int = n}, ... }
               end,                      -- at most 4 launches, run in order on one stream;
                                         -- then the named workspace regions, laid out in
                                         -- order (each at a 16-byte boundary; 0 bytes: a
                                         -- NULL pointer); then the kernels' ORDERED
                                         -- arguments, the members of the params struct
                                         -- that every entry takes: a tensor of the op by
                                         -- its name in the op table (runtime/ops.c; a
                                         -- pointer and four 64-bit strides, NULL when
                                         -- absent), a workspace region (a pointer), a
                                         -- shape symbol of the op (B, T, G, H, dk, dv, L,
                                         -- D, N; int64), an integer (int64) or a real
                                         -- scalar of the op by name ({real = "scale"}: its
                                         -- validated value, a double). The C side
                                         -- copies them without knowing what they mean.
    half     = {"x", "delta", ...},      -- optional (kernels): the op's tensors this
                                         -- kernel takes as bf16 or f16 (#15); a shape
                                         -- whose dtypes name another tensor is refused
    defines  = function(p, shape, dev) return {NAME = value, ...} end,  -- optional (kernels)
    fast_math = function(p) return false end,  -- optional (kernels): --use_fast_math
  }

p holds the resolved config with typed values (p.chunk == 64, p.precision == "ieee").
shape: B, T, G, H, dk, dv, L, D, N (integers; 0 when not meaningful for the op) and
booleans h0, hT, dhT, softplus, has_D, has_z, has_bias, grouped, bwd (bwd: the backward
is meant; set by the autotuner for the CPU spaces, which cover both directions), and
dtypes: the tensors stored as bf16 or f16, "name=dtype" words ("" when all are float32;
M.dtypes parses it). A kernel with 16-bit tensors renders `#define CG_T_<NAME> cg_bf16`
(or cg_f16) for each, its name ends in _bf16 / _f16 when every tensor of its `half`
list has that dtype, else in _dt<one letter per `half` tensor: f, b (bf16), h (f16)>.
dev: name, arch (80, 86, 89, 90...), sm_count, smem_per_block (opt-in maximum),
regs_per_block, emulated (boolean). For a CPU space the autotuner passes dev.name = the
CPU model and dev.sm_count = the context's thread count (arch, smem, regs: 0).

Rendering (M.render, kernels only): the result is one self-contained CUDA C++ source
(NVRTC gets no include paths to our files):
  - a header comment: which script made it, from which template; do not edit;
  - `// nvrtc-options: --use_fast_math` when fast_math(p) says so (the compiler side
    reads this line; it is part of the text and so of every cache key);
  - `#define CG_<FIELD> v` for each of consts (upper case; booleans 0/1);
  - `#define CG_P_<PARAM> v` for every parameter; a string parameter gets
    `#define CG_P_<PARAM>_<VALUE> 1` and `#define CG_P_<PARAM> <index of the value
    in space[param], from 0>`;
  - `#define <NAME> v` for each entry of defines(p, shape, dev), sorted by name;
  - the template, where every `#include "file"` of a file in templates/ is replaced
    by that file's text, recursively, each file at most once (`#pragma once` lines
    are dropped). `#include <...>` lines are left alone.
The kernel name is CUTLASS-style, built from the consts and the params in `order`:
ssd_fwd_dk48_dv40_c64_bv64_w4_s2_3xtf32_seq.
Config pins (cg_cfg, strings) may give any subset of the parameters: unknown keys and
values outside the space fail with EINVAL; missing keys come from default() (or, when
that completion is invalid, from the valid config that agrees most with default());
an invalid config fails with EUNSUPPORTED and valid()'s reason. M.resolve does exactly
this and stops there (no launch, no rendering): C gets the resolved config.
]]

local M = {}

local DEFAULT_ABBREV = {
    chunk = "c", block_dk = "bk", block_dv = "bv", block_d = "bd", block_n = "bn",
    block_t = "bt", warps = "w", stages = "s", segment = "seg",
}

local GRID_MAX = { 2147483647, 65535, 65535 }
local MAX_LAUNCH = 4
local MAX_REGIONS = 12  -- CG_PLAN_MAX_REGIONS of runtime/gen.h
local MAX_ARGS = 64     -- CG_PLAN_MAX_ARGS
local ARG_KINDS = { tensor = "word", ws = "word", sym = "word", int = "integer", cu = "word", real = "word" }

local function fail(code, fmt, ...)
    return nil, code, string.format(fmt, ...)
end

local function is_int(v) return math.type(v) == "integer" end

local function vstr(v)
    if type(v) == "boolean" then return v and "1" or "0" end
    return tostring(v)
end

local function split_lines(text)
    local lines = {}
    local pos = 1
    while pos <= #text do
        local e = text:find("\n", pos, true)
        if not e then lines[#lines + 1] = text:sub(pos); break end
        lines[#lines + 1] = text:sub(pos, e - 1)
        pos = e + 1
    end
    return lines
end

-- ------------------------------------------------------------------ kernels

-- Directories of descriptions and the module prefix `require` loads them by.
local DIRS = {
    { dir = "generator/kernels", module = "kernels" },
    { dir = "generator/cpu", module = "cpu" },
}

-- name -> DIRS entry of every description that exists; sorted names.
local function catalog()
    local where, names = {}, {}
    for _, d in ipairs(DIRS) do
        for _, f in ipairs(cg.list(d.dir)) do
            local n = f:match("^([%w_]+)%.lua$")
            if n then
                if where[n] then
                    error(string.format("%s/%s and %s/%s: one name, two descriptions", where[n].dir, f, d.dir, f), 0)
                end
                where[n] = d
                names[#names + 1] = n
            end
        end
    end
    table.sort(names)
    return names, where
end

function M.kernels()
    return (catalog())
end

local function check_desc(name, d, dir)
    local where = dir .. "/" .. name .. ".lua"
    local cpu = dir == "generator/cpu"
    if type(d) ~= "table" then error(where .. ": must return a table", 0) end
    if d.name ~= name then error(string.format("%s: name is %s, expected %s", where, tostring(d.name), name), 0) end
    if cpu and d.backend ~= "cpu" then
        error(where .. ": a description in generator/cpu/ says backend = \"cpu\"", 0)
    elseif not cpu and d.backend ~= nil then
        error(where .. ": backend '" .. tostring(d.backend) .. "' belongs in generator/cpu/, not generator/kernels/", 0)
    end
    if type(d.op) ~= "string" then error(where .. ": field 'op' must be a string", 0) end
    for _, f in ipairs({ "valid", "default" }) do
        if type(d[f]) ~= "function" then error(where .. ": field '" .. f .. "' must be a function", 0) end
    end
    if cpu then
        for _, f in ipairs({ "template", "launch", "defines", "fast_math" }) do
            if d[f] ~= nil then error(where .. ": a CPU space has no '" .. f .. "' (nothing is rendered)", 0) end
        end
    else
        if type(d.template) ~= "string" then error(where .. ": field 'template' must be a string", 0) end
        if type(d.launch) ~= "function" then error(where .. ": field 'launch' must be a function", 0) end
    end
    if type(d.space) ~= "table" or type(d.order) ~= "table" then
        error(where .. ": 'space' and 'order' must be tables", 0)
    end
    local seen = {}
    for _, k in ipairs(d.order) do
        if type(d.space[k]) ~= "table" or #d.space[k] == 0 then
            error(string.format("%s: order names '%s', which has no values in space", where, tostring(k)), 0)
        end
        if seen[k] then error(where .. ": order names '" .. k .. "' twice", 0) end
        seen[k] = true
        for _, v in ipairs(d.space[k]) do
            if not (is_int(v) or (type(v) == "string" and v:match("^[%w_]+$"))) then
                error(string.format("%s: space.%s holds %s: values are integers or words", where, k, tostring(v)), 0)
            end
        end
    end
    for k in pairs(d.space) do
        if not seen[k] then error(where .. ": space key '" .. k .. "' is missing from order", 0) end
    end
    if d.half ~= nil then
        if cpu or type(d.half) ~= "table" then error(where .. ": 'half' is a list of tensor names (kernels only)", 0) end
        for _, t in ipairs(d.half) do
            if type(t) ~= "string" then error(where .. ": 'half' is a list of tensor names", 0) end
        end
    end
    d.consts = d.consts or (cpu and {} or { "dk", "dv" })
    return d
end

local cache = {}

local function kernel(name)
    if type(name) ~= "string" or not name:match("^[%w_]+$") then
        return fail("EINVAL", "kernel name '%s' is not a word", tostring(name))
    end
    if cache[name] then return cache[name] end
    local names, where = catalog()
    local d = where[name]
    if not d then
        return fail("ENOTFOUND", "no kernel '%s' (kernels: %s)", name, table.concat(names, ", "))
    end
    cache[name] = check_desc(name, require(d.module .. "." .. name), d.dir)
    return cache[name]
end

-- ------------------------------------------------------------------ configs

local function space_values_text(d, k)
    local t = {}
    for _, v in ipairs(d.space[k]) do t[#t + 1] = tostring(v) end
    return table.concat(t, ", ")
end

local function in_space(d, k, v)
    for i, x in ipairs(d.space[k]) do if x == v then return i end end
    return nil
end

local function cfg_text(d, p)
    local t = {}
    for _, k in ipairs(d.order) do t[#t + 1] = k .. "=" .. tostring(p[k]) end
    return table.concat(t, ",")
end

local function shape_text(d, shape)
    local t = {}
    for _, f in ipairs({ "B", "T", "G", "H", "dk", "dv", "L", "D", "N" }) do
        if shape[f] and shape[f] ~= 0 then t[#t + 1] = f .. "=" .. tostring(shape[f]) end
    end
    return table.concat(t, " ")
end

-- Parse pins (key -> string) into typed values.
local function parse_pins(d, pins)
    local out = {}
    local keys = {}
    for k in pairs(pins or {}) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
        local s = pins[k]
        if not d.space[k] then
            return fail("EINVAL", "unknown parameter '%s' for kernel %s (parameters: %s)",
                k, d.name, table.concat(d.order, ", "))
        end
        local val
        for _, v in ipairs(d.space[k]) do if tostring(v) == s then val = v end end
        if val == nil then
            return fail("EINVAL", "%s=%s is outside the space of kernel %s (%s: %s)",
                k, s, d.name, k, space_values_text(d, k))
        end
        out[k] = val
    end
    return out
end

local function call_valid(d, p, shape, dev)
    local ok, why = d.valid(p, shape, dev)
    if ok then return true end
    return false, why or "rejected by valid()"
end

-- Every config of the space, first key of order outermost.
local function enumerate(d, fn)
    local p = {}
    local function rec(i)
        if i > #d.order then
            local c = {}
            for k, v in pairs(p) do c[k] = v end
            fn(c)
            return
        end
        local k = d.order[i]
        for _, v in ipairs(d.space[k]) do
            p[k] = v
            rec(i + 1)
        end
        p[k] = nil
    end
    rec(1)
end

-- shape.dtypes ("x=bf16 delta=f16") -> { x = "bf16", delta = "f16" }
function M.dtypes(shape)
    local t = {}
    for name, dt in string.gmatch(shape.dtypes or "", "([%w_]+)=([%w_]+)") do t[name] = dt end
    return t
end

local DT_LETTER = { f32 = "f", bf16 = "b", f16 = "h" }

-- A kernel takes the 16-bit tensors of shape only when its `half` list names them.
local function check_dtypes(d, shape)
    if d.backend == "cpu" or not shape.dtypes or shape.dtypes == "" then return true end
    local ok = {}
    for _, t in ipairs(d.half or {}) do ok[t] = true end
    for name, dt in string.gmatch(shape.dtypes, "([%w_]+)=([%w_]+)") do -- in order: the first is named
        if dt ~= "bf16" and dt ~= "f16" then
            return fail("EINVAL", "kernel %s: tensor %s has dtype '%s' (expected bf16 or f16)", d.name, name, dt)
        end
        if not ok[name] then
            return fail("EUNSUPPORTED", "kernel %s takes %s as float32 only (got %s)%s", d.name, name, dt,
                d.half and "" or ": it has no 16-bit variant")
        end
    end
    return true
end

local function resolve(d, pins, shape, dev)
    local okd, dcode, dmsg = check_dtypes(d, shape)
    if not okd then return nil, dcode, dmsg end
    local pinned, code, msg = parse_pins(d, pins)
    if not pinned then return nil, code, msg end
    local def = d.default(shape, dev)
    if type(def) ~= "table" then error(d.name .. ": default() must return a table", 0) end
    local p = {}
    for _, k in ipairs(d.order) do
        local v = pinned[k]
        if v == nil then v = def[k] end
        if v == nil or not in_space(d, k, v) then
            error(string.format("%s: default() gives %s=%s, outside the space", d.name, k, tostring(v)), 0)
        end
        p[k] = v
    end
    local ok, why = call_valid(d, p, shape, dev)
    if ok then return p end
    -- The default completion of a partial pin may clash with the pins: take the valid
    -- config that agrees with the pins and most with the default (first in order).
    if next(pinned) ~= nil then
        local best, best_score
        enumerate(d, function(c)
            for k, v in pairs(pinned) do if c[k] ~= v then return end end
            local score = 0
            for _, k in ipairs(d.order) do if c[k] == def[k] then score = score + 1 end end
            if (not best_score or score > best_score) and call_valid(d, c, shape, dev) then
                best, best_score = c, score
            end
        end)
        if best then
            local missing = false
            for _, k in ipairs(d.order) do if pinned[k] == nil then missing = true end end
            if missing then return best end
        end
    end
    return fail("EUNSUPPORTED", "kernel %s: config %s is not valid for %s on %s: %s",
        d.name, cfg_text(d, p), shape_text(d, shape), dev.name or "?", why)
end

-- ---------------------------------------------------------------- rendering

function M.kernel_name(d, p, shape)
    local parts = { d.name }
    for _, f in ipairs(d.consts) do
        local v = shape[f]
        if type(v) == "boolean" then
            if v then parts[#parts + 1] = f:lower() end
        else
            parts[#parts + 1] = f:lower() .. tostring(v)
        end
    end
    for _, k in ipairs(d.order) do
        local v = p[k]
        if type(v) == "string" then
            parts[#parts + 1] = v
        else
            parts[#parts + 1] = ((d.abbrev and d.abbrev[k]) or DEFAULT_ABBREV[k] or k) .. tostring(v)
        end
    end
    if shape.dtypes and shape.dtypes ~= "" then
        local dts, sig, one = M.dtypes(shape), {}, nil
        for i, t in ipairs(d.half or {}) do
            local dt = dts[t] or "f32"
            sig[i] = DT_LETTER[dt] or "?"
            if i == 1 then one = dt elseif one ~= dt then one = false end
        end
        parts[#parts + 1] = (one and one ~= "f32") and one or ("dt" .. table.concat(sig))
    end
    return table.concat(parts, "_")
end

local function inline_includes(text, seen, from, depth, out)
    if depth > 16 then error("templates: #include nesting deeper than 16 at " .. from, 0) end
    for _, line in ipairs(split_lines(text)) do
        local f = line:match('^%s*#%s*include%s*"([^"]+)"')
        if f then
            if not seen[f] then
                seen[f] = true
                local t, err = cg.read("templates/" .. f)
                if not t then error(string.format("%s includes \"%s\": %s", from, f, tostring(err)), 0) end
                out[#out + 1] = "// ---- begin " .. f
                inline_includes(t, seen, f, depth + 1, out)
                out[#out + 1] = "// ---- end " .. f
            else
                out[#out + 1] = "// (" .. f .. " already included above)"
            end
        elseif not line:match("^%s*#%s*pragma%s+once") then
            out[#out + 1] = line
        end
    end
end

function M.render(d, p, shape, dev)
    local name = M.kernel_name(d, p, shape)
    local tpl, err = cg.read("templates/" .. d.template)
    if not tpl then error(d.name .. ": template: " .. tostring(err), 0) end
    local out = {
        "// " .. name .. ".cu",
        "// Generated by chunkgen generator/core.lua from templates/" .. d.template
            .. " (generator/kernels/" .. d.name .. ".lua); do not edit.",
        "// config: " .. cfg_text(d, p),
    }
    if d.fast_math and d.fast_math(p) then out[#out + 1] = "// nvrtc-options: --use_fast_math" end
    for _, f in ipairs(d.consts) do
        out[#out + 1] = string.format("#define CG_%s %s", f:upper(), vstr(shape[f]))
    end
    for _, k in ipairs(d.order) do
        local v = p[k]
        if type(v) == "string" then
            out[#out + 1] = string.format("#define CG_P_%s %d", k:upper(), in_space(d, k, v) - 1)
            out[#out + 1] = string.format("#define CG_P_%s_%s 1", k:upper(), v:upper())
        else
            out[#out + 1] = string.format("#define CG_P_%s %d", k:upper(), v)
        end
    end
    local dts, dnames = M.dtypes(shape), {}
    for t in pairs(dts) do dnames[#dnames + 1] = t end
    table.sort(dnames)
    for _, t in ipairs(dnames) do
        out[#out + 1] = string.format("#define CG_T_%s %s", t:upper(), dts[t] == "bf16" and "cg_bf16" or "cg_f16")
    end
    if d.defines then
        local defs = d.defines(p, shape, dev) or {}
        local names = {}
        for k in pairs(defs) do names[#names + 1] = k end
        table.sort(names)
        for _, k in ipairs(names) do out[#out + 1] = string.format("#define %s %s", k, vstr(defs[k])) end
    end
    out[#out + 1] = ""
    inline_includes(tpl, {}, d.template, 0, out)
    return table.concat(out, "\n") .. "\n", name
end

-- Check launch() output against the hardware's hard limits.
local function check_launch(d, p, shape, dev, launches)
    if type(launches) ~= "table" or #launches < 1 or #launches > MAX_LAUNCH then
        error(string.format("%s: launch() must return 1 to %d launches", d.name, MAX_LAUNCH), 0)
    end
    for i, l in ipairs(launches) do
        if type(l.entry) ~= "string" or not l.entry:match("^[%a_][%w_]*$") or #l.entry >= 64 then
            error(string.format("%s: launch %d: entry must be a C identifier", d.name, i), 0)
        end
        local threads = 1
        for a = 1, 3 do
            local g, b = l.grid[a] or 1, l.block[a] or 1
            if not is_int(g) or not is_int(b) or g < 1 or b < 1 then
                error(string.format("%s: launch %d: grid/block must be positive integers", d.name, i), 0)
            end
            if g > GRID_MAX[a] then
                return fail("EUNSUPPORTED", "kernel %s: launch %s grid[%d]=%d exceeds %d for %s",
                    d.name, l.entry, a, g, GRID_MAX[a], shape_text(d, shape))
            end
            threads = threads * b
        end
        if threads > 1024 then error(string.format("%s: launch %d: %d threads per block", d.name, i, threads), 0) end
        local smem = l.smem or 0
        if not is_int(smem) or smem < 0 then error(d.name .. ": smem must be a non-negative integer", 0) end
        if smem > dev.smem_per_block then
            return fail("EUNSUPPORTED", "kernel %s: launch %s needs %d bytes of shared memory, %s allows %d",
                d.name, l.entry, smem, dev.name or "the device", dev.smem_per_block)
        end
    end
    return true
end

local function is_word(v) return type(v) == "string" and v:match("^[%a_][%w_]*$") and #v < 32 end

-- Check launch()'s workspace regions and arguments; return them as plan() hands them to C:
-- regions {{name, bytes}...}, args {{kind, name | value}...}.
local function check_args(d, regions, args)
    local where = d.name .. ": launch()"
    regions = regions or {}
    if type(regions) ~= "table" or #regions > MAX_REGIONS then
        error(string.format("%s: workspace must be a list of at most %d {name, bytes}", where, MAX_REGIONS), 0)
    end
    local ws, named = {}, {}
    for i, r in ipairs(regions) do
        if type(r) ~= "table" or not is_word(r[1]) or not is_int(r[2]) or r[2] < 0 then
            error(string.format("%s: workspace region %d must be {name, non-negative integer bytes}", where, i), 0)
        end
        if named[r[1]] then error(string.format("%s: workspace region '%s' twice", where, r[1]), 0) end
        named[r[1]] = true
        ws[i] = { name = r[1], bytes = r[2] }
    end
    if type(args) ~= "table" or #args < 1 or #args > MAX_ARGS then
        error(string.format("%s: args must be a list of 1 to %d arguments", where, MAX_ARGS), 0)
    end
    local out = {}
    for i, a in ipairs(args) do
        local kind, val
        for k, v in pairs(type(a) == "table" and a or {}) do
            if kind or not ARG_KINDS[k] then kind = nil; val = nil; break end
            kind, val = k, v
        end
        if not kind then
            error(string.format("%s: argument %d must be one of {tensor = name}, {ws = region}, {sym = symbol}, "
                .. "{int = integer}, {cu = \"cu_seqlens\"}, {real = name}", where, i), 0)
        end
        if (ARG_KINDS[kind] == "word" and not is_word(val)) or (kind == "int" and not is_int(val)) then
            error(string.format("%s: argument %d: %s = %s", where, i, kind, tostring(val)), 0)
        end
        if kind == "ws" and not named[val] then
            error(string.format("%s: argument %d names workspace region '%s', which launch() does not give", where,
                i, val), 0)
        end
        out[i] = kind == "int" and { kind = kind, value = val } or { kind = kind, name = val }
    end
    return ws, out
end

-- ------------------------------------------------------------- C entry points

-- plan(kernel, shape, dev, pins) -> {kernel, op, name, params = {{k, v}...}, source,
--   launches = {{entry, grid, block, smem}...}, workspace = {{name, bytes}...},
--   args = {{kind, name | value}...}} | nil, code, message
function M.plan(kname, shape, dev, pins)
    local d, code, msg = kernel(kname)
    if not d then return nil, code, msg end
    if d.backend == "cpu" then
        return fail("EUNSUPPORTED", "%s is the parameter space of the CPU path (generator/cpu/%s.lua): "
            .. "there is no kernel to render (its space and default resolve; nothing plans)", d.name, d.name)
    end
    local p
    p, code, msg = resolve(d, pins, shape, dev)
    if not p then return nil, code, msg end
    local launches, regions, args = d.launch(p, shape, dev)
    local ok
    ok, code, msg = check_launch(d, p, shape, dev, launches)
    if not ok then return nil, code, msg end
    local ws
    ws, args = check_args(d, regions, args)
    local source, name = M.render(d, p, shape, dev)
    local params = {}
    for _, k in ipairs(d.order) do params[#params + 1] = { k, tostring(p[k]) } end
    local ls = {}
    for i, l in ipairs(launches) do
        ls[i] = {
            entry = l.entry,
            grid = { l.grid[1] or 1, l.grid[2] or 1, l.grid[3] or 1 },
            block = { l.block[1] or 1, l.block[2] or 1, l.block[3] or 1 },
            smem = l.smem or 0,
        }
    end
    return { kernel = d.name, op = d.op, name = name, params = params, source = source,
             launches = ls, workspace = ws, args = args }
end

-- space(kernel, shape, dev) -> list of configs that valid() accepts, each a list of
-- {key, value-string} in order | nil, code, message
function M.space(kname, shape, dev)
    local d, code, msg = kernel(kname)
    if not d then return nil, code, msg end
    local okd, dcode, dmsg = check_dtypes(d, shape)
    if not okd then return nil, dcode, dmsg end
    local out = {}
    enumerate(d, function(c)
        if call_valid(d, c, shape, dev) then
            local cfg = {}
            for _, k in ipairs(d.order) do cfg[#cfg + 1] = { k, tostring(c[k]) } end
            out[#out + 1] = cfg
        end
    end)
    return out
end

-- resolve(kernel, shape, dev, pins) -> the config plan() would use, a list of
-- {key, value-string} in order (pins completed from default(), checked by valid()),
-- without launch or rendering; works for CPU spaces too | nil, code, message
function M.resolve(kname, shape, dev, pins)
    local d, code, msg = kernel(kname)
    if not d then return nil, code, msg end
    local p
    p, code, msg = resolve(d, pins, shape, dev)
    if not p then return nil, code, msg end
    local cfg = {}
    for _, k in ipairs(d.order) do cfg[#cfg + 1] = { k, tostring(p[k]) } end
    return cfg
end

-- describe(kernel) -> text listing the space (for `chunkgen gen --list`)
-- The op (or family) a kernel serves and its backend ("cpu" for a CPU space, "" for a
-- generated kernel): the catalog's facts, for cg__gen_kernel_info.
function M.info(kname)
    local d, code, msg = kernel(kname)
    if not d then return nil, code, msg end
    return { op = d.op, backend = d.backend or "" }
end

function M.describe(kname)
    local d, code, msg = kernel(kname)
    if not d then return nil, code, msg end
    local head
    if d.backend == "cpu" then
        head = string.format("%s (op %s, backend cpu: run-time config of the C path, nothing rendered)",
            d.name, d.op)
    else
        head = string.format("%s (op %s, template %s, compile-time shape: %s)",
            d.name, d.op, d.template, table.concat(d.consts, ", "))
    end
    local lines = { head }
    local total = 1
    local docs = require("keys")
    for _, k in ipairs(d.order) do
        local kind = is_int(d.space[k][1]) and "integer" or "word"
        local doc = docs[d.name .. "." .. k] or docs[k] or "(undocumented: add it to generator/keys.lua)"
        lines[#lines + 1] = string.format("  %-10s %-7s  %-24s %s", k, kind, space_values_text(d, k), doc)
        total = total * #d.space[k]
    end
    lines[#lines + 1] = string.format("  (%d configs before constraints)", total)
    return table.concat(lines, "\n")
end

return M
