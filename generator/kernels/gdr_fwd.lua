-- gdr_fwd.lua -- the gated-delta-rule forward (templates/gdr_fwd.cu): its parameter
-- space, constraints, default and launch geometry. The template's traits derive the same
-- shared memory; keep the two in step (CG_SMEM_* are checked there by static_assert).
--
-- Compile-time shape: dk, dv and l2norm (CG_DK, CG_DV, CG_L2NORM). B, T, G, H, the
-- strides, scale and the optional h0 / hT are run-time values of the params struct.
--
-- The chunked forward (MATH_GDN.md section 2) in three launches, float32 math:
--   prep   per (b, value head, chunk slot): the gate's chunk-local cumsum, the row norms
--          of q and k (1 without the L2 norm), the gated beta-scaled Gram matrix, its
--          unit-lower-triangular inverse A = (I + L)^-1 by forward substitution, and
--          W = A diag(beta gam) K, U = A diag(beta) V into the workspace;
--   state  per (sequence, value head, dv tile): the chunks in order, storing the state
--          entering each chunk, Vn = U - W S (over U, in place), S = gamC S + Kt^T Vn;
--          h0 in, hT out;
--   out    per (b, value head, chunk slot, dv tile): O = scale [diag(gam) Q S0 +
--          ((Q K^T) o Dm) Vn].
-- Varlen (docs/varlen.md): cu_seqlens read on the device; chunks start at each sequence
-- start, numbered by slots as the SSD's (ssd_common.cuh, slot_chunk): ceil(T / chunk) +
-- nseq slots, the unused ones exit at once.

local function ceil_div(a, b) return (a + b - 1) // b end

local GRID_MAX = 2147483647

local function varlen(shape) return (shape.nseq or 0) > 0 end
-- Chunk slots per batch row (varlen: B = 1 and a slot per chunk of each sequence, with
-- room for each sequence's own start).
local function nslot(p, shape)
  return ceil_div(shape.T, p.chunk) + (varlen(shape) and shape.nseq or 0)
end
-- Rows of the state pass: batch rows, or sequences.
local function rows(shape) return varlen(shape) and shape.nseq or shape.B end
local function bv(p, shape) return math.min(p.block_dv, shape.dv) end
local function ndvt(p, shape) return ceil_div(shape.dv, bv(p, shape)) end

-- The matrix unit (gdr_mma.cuh), both kernels' `precision`: ieee (float32 FMA), 3xtf32
-- (float32 inputs), mma16 (16-bit q and k).
local function mma(p) return p.precision ~= "ieee" end
-- Staged q / k tiles of the mma precisions, floats: [chunk][dkp + 4] (dkp: dk rounded up to
-- 16), and (mma16) a raw 16-bit copy [chunk][dkp + 8] halves.
local function kt(p, shape) return mma(p) and p.chunk * ((shape.dk + 15) // 16 * 16 + 4) or 0 end
local function kh(p, shape) return p.precision == "mma16" and p.chunk * ((shape.dk + 15) // 16 * 16 + 8) // 2 or 0 end

-- Shared memory of each launch, bytes (the template's PREP_FLOATS, ST_FLOATS, OUT_FLOATS).
-- bwd: the backward's prep, which also stages Q (its pm).
local function smem_prep(p, shape, bwd)
  local vt = mma(p) and p.chunk * (p.block_dv + 4) or 0
  local q = bwd and kt(p, shape) + kh(p, shape) or 0
  return 4 * (2 * p.chunk * p.chunk + 5 * p.chunk + kt(p, shape) + vt + kh(p, shape) + q)
end
local function smem_state(p, shape) return 4 * ((shape.dk + p.chunk) * p.block_dv + 3 * p.chunk + kt(p, shape)) end
local function smem_out(p, shape) return 4 * (p.chunk * p.chunk + 3 * p.chunk + 2 * kt(p, shape) + 2 * kh(p, shape)) end

-- Whether q and k are 16-bit ("name=dtype" words of shape.dtypes, core.lua).
local function half_qk(shape)
  local d = shape.dtypes or ""
  return d:find("%f[%w_]q=") ~= nil and d:find("%f[%w_]k=") ~= nil
end
local function check_precision(p, shape, dev)
  if not mma(p) then return true end
  if dev.arch < 80 then
    return false, string.format("precision %s needs mma.sync (sm_80+), device is sm_%d", p.precision, dev.arch)
  end
  if p.precision == "3xtf32" and half_qk(shape) then return false, "precision 3xtf32 is for float32 q, k (16-bit: mma16)" end
  if p.precision == "mma16" and not half_qk(shape) then return false, "precision mma16 needs 16-bit q, k (bf16 or f16)" end
  return true
end

-- Whether each launch's shared memory (bytes, a list) fits the device: true, or false and why.
local function fits_smem(sizes, dev)
  for _, s in ipairs(sizes) do
    if s > dev.smem_per_block then
      return false, string.format("needs %d bytes of shared memory, device allows %d", s, dev.smem_per_block)
    end
  end
  return true
end

local function common_valid(p, shape, dev)
  if shape.B < 1 or shape.T < 1 or shape.G < 1 or shape.H < 1 or shape.dk < 1 or shape.dv < 1 then
    return false, "needs B, T, G, H, dk, dv >= 1"
  end
  if shape.H % shape.G ~= 0 then return false, string.format("G = %d does not divide H = %d", shape.G, shape.H) end
  if shape.dk > 256 then return false, string.format("dk = %d: at most 256 (the state pass keeps dk rows of a dv tile in shared memory)", shape.dk) end
  if shape.dv > 4096 then return false, string.format("dv = %d: at most 4096", shape.dv) end
  if varlen(shape) and shape.B ~= 1 then return false, "cu_seqlens: B must be 1" end
  -- A dv tile wider than dv only idles threads: a narrower one of the space covers dv.
  if p.block_dv > 16 and p.block_dv // 2 >= shape.dv then
    return false, string.format("block_dv %d: half of it covers dv = %d", p.block_dv, shape.dv)
  end
  -- Indices the kernels split with 32-bit divisions stay below 2^31.
  if shape.T > GRID_MAX then return false, "T must be below 2^31" end
  local slots = shape.B * shape.H * nslot(p, shape)
  if slots * ndvt(p, shape) > GRID_MAX then return false, "grid of B * H * chunks * dv tiles too large" end
  local ok, why = check_precision(p, shape, dev)
  if not ok then return false, why end
  return fits_smem({ smem_prep(p, shape), smem_state(p, shape), smem_out(p, shape) }, dev)
end

local function valid(p, shape, dev)
  local ok, why = common_valid(p, shape, dev)
  if not ok then return false, why end
  -- The out pass keeps one row's chunk of P per thread group: a chunk of 64 rows on 64
  -- threads leaves nothing to spread; more warps than rows x tile columns only idle.
  if 32 * p.warps > p.chunk * bv(p, shape) and p.warps > 1 then
    return false, string.format("%d warps for a %d x %d output tile: half of them idle", p.warps, p.chunk, bv(p, shape))
  end
  return true
end

-- Heuristic (both kernels): the matrix unit where there is one (3xtf32, or mma16 for 16-bit
-- q, k), else float32 FMA; chunk 64 (fla's), a dv tile of 32 (more CTAs in the sequential
-- state pass), 4 warps; the first candidate valid(p, shape, dev) accepts when that does not
-- fit, else fallback (ieee).
local function first_valid(valid_fn, shape, dev, fallback)
  for _, pr in ipairs({ half_qk(shape) and "mma16" or "3xtf32", "ieee" }) do
    for _, c in ipairs({ { 64, 32, 4 }, { 32, 32, 4 }, { 64, 16, 4 }, { 32, 16, 4 }, { 16, 16, 4 }, { 16, 16, 2 },
                         { 16, 16, 1 } }) do
      local p = { chunk = c[1], block_dv = c[2], warps = c[3], precision = pr }
      if valid_fn(p, shape, dev) then return p end
    end
  end
  fallback.precision = "ieee"
  return fallback
end

local function default(shape, dev)
  return first_valid(valid, shape, dev, { chunk = 64, block_dv = 32, warps = 4 })
end

-- cg_gdr_fwd_params (templates/cg_kernel_params.h), in order.
local TENSORS = { "q", "k", "v", "g", "beta", "h0", "o", "hT" }
local REGIONS = { "gc", "rs", "w", "u", "hs" }

local function workspace(p, shape)
  local n = shape.B * shape.H * nslot(p, shape) -- chunk slots of every (b, head)
  local C = p.chunk
  return {
    { "gc", 4 * n * C },                 -- chunk-local cumsum of g
    { "rs", 4 * n * C * 2 },             -- 1 / |q_r|, 1 / |k_r| (1 without the L2 norm)
    { "w", 4 * n * C * shape.dk },       -- W
    { "u", 4 * n * C * shape.dv },       -- U, then Vn (the state pass)
    { "hs", 4 * n * shape.dk * shape.dv }, -- the state entering each chunk
  }
end

local function args_of(p, shape)
  local a = {}
  for _, t in ipairs(TENSORS) do a[#a + 1] = { tensor = t } end
  for _, r in ipairs(REGIONS) do a[#a + 1] = { ws = r } end
  for _, s in ipairs({ "B", "T", "G", "H" }) do a[#a + 1] = { sym = s } end
  a[#a + 1] = { real = "scale" }
  a[#a + 1] = { int = nslot(p, shape) }
  a[#a + 1] = { int = ndvt(p, shape) }
  if varlen(shape) then
    a[#a + 1] = { cu = "cu_seqlens" }
    a[#a + 1] = { int = shape.nseq }
  end
  return a
end

local function launch(p, shape, dev)
  local nt = 32 * p.warps
  local slots = shape.B * shape.H * nslot(p, shape)
  return {
    { entry = "cg_gdr_fwd_prep", grid = { slots, 1, 1 }, block = { nt, 1, 1 }, smem = smem_prep(p, shape) },
    { entry = "cg_gdr_fwd_state", grid = { rows(shape) * shape.H * ndvt(p, shape), 1, 1 }, block = { nt, 1, 1 },
      smem = smem_state(p, shape) },
    { entry = "cg_gdr_fwd_out", grid = { slots * ndvt(p, shape), 1, 1 }, block = { nt, 1, 1 },
      smem = smem_out(p, shape) },
  }, workspace(p, shape), args_of(p, shape)
end

-- The defines of both kernels: the shared passes' shared memory (gdr_common.cuh checks
-- it), the kernel's own in `own`, CG_VARLEN.
local function common_defines(p, shape, own, bwd)
  own.CG_SMEM_PREP, own.CG_SMEM_STATE = smem_prep(p, shape, bwd), smem_state(p, shape)
  if varlen(shape) then own.CG_VARLEN = 1 end
  return own
end

local function defines(p, shape, dev) return common_defines(p, shape, { CG_SMEM_OUT = smem_out(p, shape) }) end

return {
  name = "gdr_fwd",
  op = "gdr_fwd",
  template = "gdr_fwd.cu",
  consts = { "dk", "dv", "l2norm" },
  half = { "q", "k", "v", "beta", "o" },
  space = {
    chunk = { 16, 32, 64 },
    block_dv = { 16, 32, 64 },
    warps = { 1, 2, 4, 8 },
    precision = { "ieee", "3xtf32", "mma16" },
  },
  order = { "chunk", "block_dv", "warps", "precision" },
  valid = valid,
  default = default,
  launch = launch,
  defines = defines,
  -- for gdr_bwd.lua
  lib = { ceil_div = ceil_div, varlen = varlen, nslot = nslot, rows = rows, bv = bv, ndvt = ndvt,
          common_valid = common_valid, smem_prep = smem_prep, smem_state = smem_state, first_valid = first_valid,
          common_defines = common_defines, mma = mma, kt = kt, fits_smem = fits_smem },
}
